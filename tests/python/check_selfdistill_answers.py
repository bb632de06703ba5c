#!/usr/bin/env python3
"""Checks selfdistill.py's data against the model itself:
  1. the batched greedy generation (rows dropped from the batch as they
     stop) gives each prompt the tokens, taps and top-k it gets alone;
  2. teacher-forcing those answers (teacher_forced_batch, what
     `--answers dataset` records for fixed replies) gives the same taps
     and top-k as generating them;
  3. the stored answers are EntMTP's greedy AR tokens (`entmtp generate
     --ar --raw` on the stored prompt, which EntMTP tokenizes to the same
     ids).

  check_selfdistill_answers.py CLI MODEL SHARD_DIR [N] [--engine-only]
(--engine-only: part 3 alone, for a large model on a busy machine)
"""
import glob
import json
import os
import subprocess
import sys

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools/train_heads"))
from backbone import Backbone, ChatTokenizer  # noqa: E402


def main():
    engine_only = "--engine-only" in sys.argv
    args = [x for x in sys.argv[1:] if x != "--engine-only"]
    cli, model_path, shard_dir = args[:3]
    n = int(args[3]) if len(args) > 3 else 3
    meta = json.load(open(os.path.join(shard_dir, "meta.json")))
    samples = []
    for f in sorted(glob.glob(os.path.join(shard_dir, "*.pt"))):
        samples += torch.load(f, weights_only=False)
    samples = samples[:n]

    prompts = [s["prompt"] for s in samples]
    model = Backbone(model_path)
    tok = ChatTokenizer(model)
    outs, recs = [], []
    if not engine_only:
        outs, recs = model.greedy_batch(prompts, meta["max_new"], tok.stop_ids, meta["topk"], meta["layers"])
        for i, p in enumerate(prompts):
            alone, rec = model.greedy_batch([p], meta["max_new"], tok.stop_ids, meta["topk"], meta["layers"])
            assert alone[0] == outs[i], f"prompt {i}: batched greedy {outs[i][:8]}.. != alone {alone[0][:8]}.."
            for name, x, y in zip(("taps", "top_ids", "top_p"), recs[i], rec[0]):
                assert x.shape == y.shape, f"prompt {i}: {name} {tuple(x.shape)} batched, {tuple(y.shape)} alone"
                if name == "taps":
                    err = float((x.float() - y.float()).abs().max())
                    assert err < 1e-2 * (1 + float(y.float().abs().max())), f"prompt {i}: taps differ by {err}"
        print(f"batched greedy == one prompt at a time ({len(prompts)} prompts)")
        forced = model.teacher_forced_batch(prompts, outs, meta["topk"], meta["layers"])
        for i, (x, y) in enumerate(zip(forced, recs)):
            for name, u, v in zip(("taps", "top_ids", "top_p"), x, y):
                assert u.shape == v.shape, f"prompt {i}: {name} {tuple(u.shape)} forced, {tuple(v.shape)} generated"
            err = float((x[0].float() - y[0].float()).abs().max())
            assert err < 1e-2 * (1 + float(y[0].float().abs().max())), f"prompt {i}: forced taps differ by {err}"
            assert torch.equal(x[1][:, 0], y[1][:, 0]), f"prompt {i}: forced top-1 ids differ from generated"
            assert torch.equal(x[1][:, 0], torch.tensor(outs[i], dtype=x[1].dtype)), f"prompt {i}: top-1 != answer"
            err = float((x[2].float() - y[2].float()).abs().max())
            assert err < 1e-2, f"prompt {i}: forced top-k probabilities differ by {err}"
        print(f"teacher-forced answers == generated ones: taps and top-k ({len(prompts)} prompts)")

    for s in samples:
        # the stored prompt as raw text: the CLI's own chat template may differ
        # from the one selfdistill applies (SmolLM2's default system prompt)
        raw = tok.decode(s["prompt"])
        r = json.loads(subprocess.run([cli, "generate", "--model", model_path, "--ar", "--raw", "--prompt", raw,
                                       "--max-tokens", str(meta["max_new"]), "--threads", "2", "--json", "--quiet"],
                                      check=True, capture_output=True, text=True).stdout)
        assert r["prompt_ids"] == s["prompt"], f"{s['id']}: EntMTP tokenizes the prompt otherwise"
        engine = r["tokens"][:len(s["answer"])]
        if engine != s["answer"]:
            k = next(j for j, (x, y) in enumerate(zip(engine, s["answer"])) if x != y) \
                if any(x != y for x, y in zip(engine, s["answer"])) else min(len(engine), len(s["answer"]))
            sys.exit(f"{s['id']}: the stored answer leaves EntMTP's greedy AR at token {k} of {len(s['answer'])}")
        print(f"{s['id']}: {len(s['answer'])} answer tokens == entmtp generate --ar")


if __name__ == "__main__":
    main()
