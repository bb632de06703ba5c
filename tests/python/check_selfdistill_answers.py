#!/usr/bin/env python3
"""Checks selfdistill.py's data against the model itself:
  1. the batched greedy generation (rows dropped from the batch as they
     stop) gives each prompt the tokens, taps and top-k it gets alone;
  2. the stored answers are EntMTP's greedy AR tokens (`entmtp generate
     --ar`) for the same prompts, and the stored prompt ids are EntMTP's.

  check_selfdistill_answers.py CLI MODEL SHARD_DIR [N]
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
    cli, model_path, shard_dir = sys.argv[1:4]
    n = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    meta = json.load(open(os.path.join(shard_dir, "meta.json")))
    samples = []
    for f in sorted(glob.glob(os.path.join(shard_dir, "*.pt"))):
        samples += torch.load(f, weights_only=False)
    samples = samples[:n]
    by_id = {}  # shards without the prompt text: the prompt sets' own order (code and chat keep it for any --n)
    for task in sorted({s["task"] for s in samples if "text" not in s}):
        out = subprocess.run([sys.executable, os.path.join(ROOT, "tools/prompts/make_prompts.py"), "--task", task,
                              "--split", os.path.basename(os.path.normpath(shard_dir)), "--n", "0", "--seed",
                              str(meta["seed"])], check=True, capture_output=True, text=True).stdout
        by_id.update({p["id"]: p["prompt"] for p in map(json.loads, out.splitlines())})

    model = Backbone(model_path)
    tok = ChatTokenizer(model)
    prompts = [s["prompt"] for s in samples]
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

    for s in samples:
        r = json.loads(subprocess.run([cli, "generate", "--model", model_path, "--ar", "--prompt", s.get("text") or by_id[s["id"]],
                                       "--max-tokens", str(meta["max_new"]), "--threads", "2", "--json", "--quiet"],
                                      check=True, capture_output=True, text=True).stdout)
        assert r["prompt_ids"] == s["prompt"], f"{s['id']}: prompt ids differ from EntMTP's"
        engine = r["tokens"][:len(s["answer"])]
        if engine != s["answer"]:
            k = next(j for j, (x, y) in enumerate(zip(engine, s["answer"])) if x != y) \
                if any(x != y for x, y in zip(engine, s["answer"])) else min(len(engine), len(s["answer"]))
            sys.exit(f"{s['id']}: the stored answer leaves EntMTP's greedy AR at token {k} of {len(s['answer'])}")
        print(f"{s['id']}: {len(s['answer'])} answer tokens == entmtp generate --ar")


if __name__ == "__main__":
    main()
