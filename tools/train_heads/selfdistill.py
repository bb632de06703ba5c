#!/usr/bin/env python3
"""Self-distilled training data for Medusa/Hydra heads (Medusa paper, 2.3.2).

The model answers prompts from the registry prompt sets (tools/prompts) with
greedy decoding. Each answer is stored with what training needs, so training
never runs the backbone again:
  tokens   the prompt ids and the answer ids
  hidden   the final-norm hidden state before each answer token  [n, H] fp16
  top_ids, top_p   the model's own top-k next-token distribution there  [n, k]

Shards are written as the batches finish (--work DIR/shards), so an
interrupted run resumes where it stopped.

With --eagle3 the shards (DIR/shards_eagle3) hold what an EAGLE-3 drafter
learns from instead (eagle3.py): the greedy pass also records the
residual stream after the three
target layers the drafter reads (backbone.eagle3_tap_layers: low, middle,
high) at every position of the conversation, prompt included (the
drafter's context), as fp16 [L-1, 3H], and the top-k distributions of the
answer tokens.

  python3 tools/train_heads/selfdistill.py --model M.gguf --split train \
      --n code=400 --n chat=350 --n math=100 --max-new 192 --work .cache/train_heads
"""
import argparse
import glob
import json
import os
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from backbone import ROOT, Backbone, ChatTokenizer, eagle3_tap_layers, human_time, set_threads  # noqa: E402


def load_prompts(task, split, n, seed):
    out = subprocess.run([sys.executable, os.path.join(ROOT, "tools/prompts/make_prompts.py"),
                          "--task", task, "--split", split, "--n", str(n), "--seed", str(seed)],
                         check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="GGUF file or Hugging Face directory of any supported model")
    ap.add_argument("--entmtp", default=None,
                    help="the entmtp CLI, to tokenize SentencePiece GGUF vocabularies as the library does")
    ap.add_argument("--split", default="train", choices=("train", "calib", "eval"))
    ap.add_argument("--n", action="append", default=[], metavar="TASK=COUNT",
                    help="prompts per task (repeatable; default code=400 chat=350 math=100)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--max-new", type=int, default=192, help="answer tokens per prompt")
    ap.add_argument("--max-prompt", type=int, default=384, help="skip prompts longer than this (tokens)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--topk", type=int, default=20)
    ap.add_argument("--work", default=os.path.join(ROOT, ".cache/train_heads"))
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--eagle3", action="store_true",
                    help="store EAGLE-3 training data (three target layers over the whole conversation)")
    ap.add_argument("--layers", default="", help="with --eagle3: the target layers read (default: SafeAILab's choice)")
    a = ap.parse_args(argv)
    counts = dict(kv.split("=") for kv in (a.n or ["code=400", "chat=350", "math=100"]))
    torch.manual_seed(a.seed)
    threads = set_threads()
    t0 = time.time()
    model = Backbone(a.model).to_device(a.device)
    tok = ChatTokenizer(model, a.entmtp)
    print(f"selfdistill: {os.path.basename(os.path.normpath(a.model))} ({model.describe()}) on {a.device} "
          f"({threads} threads), loaded in {time.time() - t0:.1f}s", file=sys.stderr)

    items = []
    for task, n in counts.items():
        for p in load_prompts(task, a.split, int(n), a.seed):
            ids = tok.chat_ids(p["prompt"])
            if len(ids) <= a.max_prompt:
                items.append((p["id"], task, ids))
    items.sort(key=lambda it: len(it[2]))  # similar lengths share a batch: less padding
    shard_dir = os.path.join(a.work, "shards_eagle3" if a.eagle3 else "shards", a.split)
    os.makedirs(shard_dir, exist_ok=True)
    layers = None
    if a.eagle3:
        layers = [int(x) for x in a.layers.split(",")] if a.layers else eagle3_tap_layers(model.n_layers)
        meta_path = os.path.join(shard_dir, "meta.json")
        meta = {"layers": layers, "topk": a.topk, "max_new": a.max_new, "seed": a.seed,
                "model": os.path.basename(os.path.normpath(a.model))}
        if os.path.exists(meta_path) and json.load(open(meta_path)) != meta:
            sys.exit(f"selfdistill: {shard_dir} holds data made with {json.load(open(meta_path))}, not {meta}; "
                     "use another --work")
        with open(meta_path, "w") as f:
            json.dump(meta, f)
        print(f"selfdistill: EAGLE-3 data, target layers {layers}", file=sys.stderr)
    batches = [items[i:i + a.batch] for i in range(0, len(items), a.batch)]
    done_tokens, t_start = 0, time.time()
    for bi, batch in enumerate(batches):
        path = os.path.join(shard_dir, f"{bi:05d}.pt")
        if os.path.exists(path):
            continue
        samples = []
        if a.eagle3:
            outs, recs = model.greedy_batch([b[2] for b in batch], a.max_new, tok.stop_ids, a.topk, layers)
            for (pid, task, ids), ans, (taps, ti, tp) in zip(batch, outs, recs):
                samples.append({"id": pid, "task": task, "prompt": ids, "answer": ans,
                                "taps": taps, "top_ids": ti, "top_p": tp})
                done_tokens += len(ans)
        else:
            outs, recs = model.greedy_batch([b[2] for b in batch], a.max_new, tok.stop_ids, a.topk)
            for (pid, task, ids), ans, (hid, ti, tp) in zip(batch, outs, recs):
                samples.append({"id": pid, "task": task, "prompt": ids, "answer": ans,
                                "hidden": hid, "top_ids": ti, "top_p": tp})
                done_tokens += len(ans)
        torch.save(samples, path + ".part")
        os.replace(path + ".part", path)
        el = time.time() - t_start
        rate = done_tokens / el if el > 0 else 0
        left = (len(batches) - bi - 1) * el / (bi + 1)
        print(f"selfdistill: batch {bi + 1}/{len(batches)}  {done_tokens} answer tokens  "
              f"{rate:.0f} tok/s  eta {human_time(left)}", file=sys.stderr, flush=True)
    n = sum(len(torch.load(f)) for f in glob.glob(os.path.join(shard_dir, "*.pt")))
    print(f"selfdistill: {human_time(time.time() - t0)} in all", file=sys.stderr)
    print(f"selfdistill: {n} answers in {shard_dir}", file=sys.stderr)


if __name__ == "__main__":
    main()
