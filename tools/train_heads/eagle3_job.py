#!/usr/bin/env python3
"""The EAGLE-3 recipe as one long, pausable job: self-distillation of the
train split for a time budget (code first), training on what it made for
a time budget, then the rest of the split answered for the next session.

One process (the phases run in it one after the other), so stopping its
PID with SIGSTOP pauses all of it and SIGCONT resumes it; time stopped is
not charged to either budget. Every phase is resumable: the shards are
written per batch and the training checkpoints every 5 minutes, so a
killed job loses at most one batch or five minutes; rerunning the same
command carries on.

  nohup setsid nice -n 19 python3 tools/train_heads/eagle3_job.py --model M.gguf \\
      --gen-budget 1300 --train-budget 1300 --out .cache/train_heads/eagle3_run2/SmolLM2-135M-Instruct.eagle3 &

The training epochs are chosen so the cosine schedule ends near the
training budget (--row-ms: the measured cost of one conversation row per
epoch); the job prints the eagle3.py command it runs, which is the command
that resumes that training (its checkpoint is --work/eagle3_ckpt/<name of
--out>.pt, and a checkpoint of other settings is refused).
"""
import argparse
import glob
import os
import sys

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import eagle3  # noqa: E402
import selfdistill  # noqa: E402


def train_rows(shard_dir):
    rows = 0
    for f in glob.glob(os.path.join(shard_dir, "*.pt")):
        rows += sum(len(s["prompt"]) + len(s["answer"]) - 1 for s in torch.load(f, weights_only=False)
                    if len(s["answer"]) >= 2)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--work", default=os.path.join(os.path.dirname(os.path.dirname(HERE)), ".cache/train_heads"))
    ap.add_argument("--out", required=True, help="the drafter directory written by training")
    ap.add_argument("--train-n", default="code=0 chat=1000 math=300", help="prompts per task, answered in this order")
    ap.add_argument("--max-new", type=int, default=128)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--gen-budget", type=float, default=1300, help="seconds of self-distillation before training")
    ap.add_argument("--train-budget", type=float, default=1300, help="seconds of training")
    ap.add_argument("--row-ms", type=float, default=11.0, help="training milliseconds per conversation row")
    ap.add_argument("--train-args", default="--ttt 3 --lr 1e-3 --batch-rows 1024 --draft-vocab 4096",
                    help="further eagle3.py arguments")
    ap.add_argument("--epochs", type=float, default=0, help="training epochs (0: fit the training budget)")
    ap.add_argument("--no-rest", action="store_true", help="stop after training (do not answer the rest)")
    a = ap.parse_args()
    gen = ["--eagle3", "--model", a.model, "--split", "train", "--max-new", str(a.max_new), "--batch", str(a.batch),
           "--seed", "0", "--work", a.work]
    for kv in a.train_n.split():
        gen += ["--n", kv]
    print(f"eagle3_job: pid {os.getpid()}: self-distillation for {a.gen_budget:.0f}s", file=sys.stderr, flush=True)
    selfdistill.main(gen + ["--time-budget", str(a.gen_budget)])
    epochs = a.epochs
    if not epochs:
        rows = train_rows(os.path.join(a.work, "shards_eagle3", "train"))
        epochs = max(1.0, round(a.train_budget / (rows * a.row_ms / 1000), 1))
        print(f"eagle3_job: {rows} training rows: {epochs} epochs for a {a.train_budget:.0f}s budget",
              file=sys.stderr, flush=True)
    train = ["--model", a.model, "--work", a.work, "--seed", "0", "--epochs", str(epochs),
             "--time-budget", str(a.train_budget), "--eval-every", "200", "--out", a.out] + a.train_args.split()
    print("eagle3_job: training: python3 tools/train_heads/eagle3.py " + " ".join(train), file=sys.stderr, flush=True)
    try:
        eagle3.main(train)
    except SystemExit as e:  # e.g. a checkpoint of other settings: the data phase still runs
        if e.code not in (None, 0):
            print(f"eagle3_job: training stopped: {e.code}", file=sys.stderr, flush=True)
    if not a.no_rest:
        print("eagle3_job: answering the rest of the train split", file=sys.stderr, flush=True)
        selfdistill.main(gen)
    print("eagle3_job: done", file=sys.stderr, flush=True)


if __name__ == "__main__":
    main()
