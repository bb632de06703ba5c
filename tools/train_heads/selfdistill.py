#!/usr/bin/env python3
"""Self-distilled training data for Medusa/Hydra heads (Medusa paper, 2.3.2).

The model answers prompts from the registry prompt sets (tools/prompts) with
greedy decoding. Each answer is stored with what training needs, so training
never runs the backbone again:
  tokens   the prompt ids and the answer ids
  hidden   the final-norm hidden state before each answer token  [n, H] fp16
  top_ids, top_p   the model's own top-k next-token distribution there  [n, k]

Shards are written as the batches finish (--work DIR/shards), with an
index of the prompt ids each holds (done.json), so an interrupted run (or
one with a --time-budget, or more prompts) resumes with the prompts not yet
answered. The tasks are answered in the order of --n (code first by
default), each from its shortest prompts up.

With --eagle3 the shards (DIR/shards_eagle3) hold what an EAGLE-3 drafter
learns from instead (eagle3.py): the greedy pass also records the
residual stream after the three
target layers the drafter reads (backbone.eagle3_tap_layers: low, middle,
high) at every position of the conversation, prompt included (the
drafter's context), as fp16 [L-1, 3H], and the top-k distributions of the
answer tokens.

With --eagle3 --answers dataset the answers are not the model's own but
the prompt sources' fixed replies (make_prompts.py --replies: ShareGPT's
first reply, HumanEval's canonical solution), cut at --max-new tokens and
ended with the end-of-turn token when they fit: one forward pass per
conversation instead of --max-new decoding steps (about 1.5-2x the answer
tokens per CPU second on a 2-core machine), and far more of them than the
prompts' greedy answers: the train split holds about 0.5 M code and 1.4 M
chat reply tokens. EAGLE-1/2 trained on fixed ShareGPT replies the same way.
The teacher is still the model: the top-k recorded at each answer token is
the model's own distribution there, whatever the reply's next token is.
Such shards go to their own --work (meta.json records "answers").

  python3 tools/train_heads/selfdistill.py --model M.gguf --split train \
      --n code=400 --n chat=350 --n math=100 --max-new 192 --work .cache/train_heads
"""
import argparse
import fcntl
import glob
import hashlib
import json
import os
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from backbone import ROOT, ActiveClock, Backbone, ChatTokenizer, eagle3_tap_layers, human_time, set_threads  # noqa: E402


def load_prompts(task, split, n, seed, replies=False):
    out = subprocess.run([sys.executable, os.path.join(ROOT, "tools/prompts/make_prompts.py"),
                          "--task", task, "--split", split, "--n", str(n), "--seed", str(seed)]
                         + (["--replies"] if replies else []),
                         check=True, capture_output=True, text=True).stdout
    return [json.loads(line) for line in out.split("\n") if line.strip()]  # not splitlines: U+2028 is text


def prompt_key(ids):
    """A prompt's identity in the index: its token ids (the prompt sets'
    ids are positions, which depend on --n for the generated math set)."""
    return hashlib.sha1(",".join(map(str, ids)).encode()).hexdigest()[:20]


def load_index(shard_dir):
    """{prompt key: shard file} of the answers already in shard_dir (built
    from the shards themselves the first time)."""
    path = os.path.join(shard_dir, "done.json")
    shards = sorted(glob.glob(os.path.join(shard_dir, "*.pt")))
    if os.path.exists(path):
        index = json.load(open(path))
        # a shard written just before a kill, without its index entry: rebuild
        if index.get("keyed_by") == "prompt_ids_sha1" and \
                set(index["done"].values()) >= {os.path.basename(f) for f in shards}:
            return index["done"]
    done = {}
    for f in shards:
        for s in torch.load(f, weights_only=False):
            done[prompt_key(s["prompt"])] = os.path.basename(f)
    save_index(shard_dir, done)
    return done


def save_index(shard_dir, done):
    path = os.path.join(shard_dir, "done.json")
    with open(path + ".part", "w") as f:
        json.dump({"keyed_by": "prompt_ids_sha1", "done": done}, f)
    os.replace(path + ".part", path)


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
    ap.add_argument("--prompts", default="",
                    help="a JSON Lines file of prompts instead of the registry sets: {\"prompt\": ..., \"task\": ..., "
                         "\"reply\": ...} per line (task defaults to chat; reply is read by --answers dataset)")
    ap.add_argument("--answers", choices=("greedy", "dataset"), default="greedy",
                    help="with --eagle3: the model's greedy answers, or the sources' fixed replies (teacher-forced)")
    ap.add_argument("--batch-tokens", type=int, default=8192,
                    help="with --answers dataset: prompt + answer tokens per forward pass")
    ap.add_argument("--time-budget", type=float, default=0,
                    help="start no new batch after this many seconds (time stopped by SIGSTOP not counted); "
                         "a rerun continues")
    a = ap.parse_args(argv)
    counts = dict(kv.split("=") for kv in (a.n or ["code=400", "chat=350", "math=100"]))
    if a.answers == "dataset" and not a.eagle3:
        ap.error("--answers dataset needs --eagle3")
    torch.manual_seed(a.seed)
    threads = set_threads()
    t0 = time.time()
    model = Backbone(a.model).to_device(a.device)
    tok = ChatTokenizer(model, a.entmtp)
    print(f"selfdistill: {os.path.basename(os.path.normpath(a.model))} ({model.describe()}) on {a.device} "
          f"({threads} threads), loaded in {time.time() - t0:.1f}s", file=sys.stderr)

    shard_dir = os.path.join(a.work, "shards_eagle3" if a.eagle3 else "shards", a.split)
    os.makedirs(shard_dir, exist_ok=True)
    # one writer per shard directory: two runs would answer the same prompts
    # into the same shard names and each rewrite the index without the other's
    lock = open(os.path.join(shard_dir, ".lock"), "w")
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        sys.exit(f"selfdistill: another run is writing {shard_dir}; wait for it or stop it first")
    layers = None
    if a.eagle3:
        layers = [int(x) for x in a.layers.split(",")] if a.layers else eagle3_tap_layers(model.n_layers)
        meta_path = os.path.join(shard_dir, "meta.json")
        meta = {"layers": layers, "topk": a.topk, "max_new": a.max_new, "seed": a.seed,
                "model": os.path.basename(os.path.normpath(a.model))}
        if a.answers == "dataset":
            meta["answers"] = "dataset"
        if os.path.exists(meta_path) and json.load(open(meta_path)) != meta:
            sys.exit(f"selfdistill: {shard_dir} holds data made with {json.load(open(meta_path))}, not {meta}; "
                     "use another --work")
        with open(meta_path, "w") as f:
            json.dump(meta, f)
        print(f"selfdistill: EAGLE-3 data, target layers {layers}", file=sys.stderr)
    done = load_index(shard_dir)
    items, skipped = [], 0
    dataset = a.answers == "dataset"
    if dataset and tok.tk is None:
        sys.exit("selfdistill: --answers dataset tokenizes the replies itself and needs a BPE vocabulary "
                 f"(the trainer's tokenizer); {a.model} has a SentencePiece one")
    end_of_turn = min(tok.stop_ids) if tok.stop_ids else None
    if dataset and tok.token_to_id("<|im_end|>") is not None:
        end_of_turn = tok.token_to_id("<|im_end|>")
    if a.prompts:  # the file's own prompts, per task in the order they first appear
        rows = []
        for k, line in enumerate(open(a.prompts, encoding="utf-8")):
            if not line.strip():
                continue
            r = json.loads(line)
            if "prompt" not in r or (dataset and not r.get("reply")):
                sys.exit(f"selfdistill: {a.prompts} line {k + 1} has no \"prompt\""
                         + (" or no \"reply\" (--answers dataset)" if dataset else ""))
            rows.append(dict(r, id=r.get("id", f"{os.path.basename(a.prompts)}:{k + 1}"), task=r.get("task", "chat")))
        counts = {t: 0 for t in dict.fromkeys(r["task"] for r in rows)}
    for task, n in counts.items():  # in --n order: the first task's prompts are answered first
        task_items = []
        source = [r for r in rows if r["task"] == task] if a.prompts else \
            load_prompts(task, a.split, int(n), a.seed, replies=dataset)
        for p in source:
            ids = tok.chat_ids(p["prompt"])
            if prompt_key(ids) in done:
                skipped += 1
            elif len(ids) <= a.max_prompt:
                item = (p["id"], task, ids, p["prompt"])
                if dataset:  # the reply, cut at --max-new, ended when it fits
                    ans = tok.tk.encode(p["reply"], add_special_tokens=False).ids
                    if len(ans) < a.max_new and end_of_turn is not None:
                        ans.append(end_of_turn)
                    item += (ans[:a.max_new],)
                task_items.append(item)
        task_items.sort(key=lambda it: len(it[2]) + (len(it[4]) if dataset else 0))  # less padding
        items += task_items
    if skipped:
        print(f"selfdistill: {skipped} prompts already answered in {shard_dir}", file=sys.stderr)
    if dataset:  # batches of up to --batch-tokens padded tokens
        batches, cur = [], []
        for it in items:
            width = max([len(x[2]) + len(x[4]) for x in cur + [it]])
            if cur and (width * (len(cur) + 1) > a.batch_tokens or len(cur) == a.batch):
                batches.append(cur)
                cur = []
            cur.append(it)
        batches += [cur] if cur else []
    else:
        batches = [items[i:i + a.batch] for i in range(0, len(items), a.batch)]
    clock = ActiveClock()
    done_tokens, done_items, next_shard = 0, 0, max([-1] + [int(k[:5]) for k in done.values()]) + 1
    for bi, batch in enumerate(batches):
        if a.time_budget and clock.elapsed() >= a.time_budget:
            print(f"selfdistill: time budget reached, {len(batches) - bi} batches left (rerun to continue)",
                  file=sys.stderr, flush=True)
            break
        path = os.path.join(shard_dir, f"{next_shard:05d}.pt")
        samples = []
        if dataset:
            recs = model.teacher_forced_batch([b[2] for b in batch], [b[4] for b in batch], a.topk, layers)
            for (pid, task, ids, text, ans), (taps, ti, tp) in zip(batch, recs):
                samples.append({"id": pid, "task": task, "text": text, "prompt": ids, "answer": ans,
                                "taps": taps, "top_ids": ti, "top_p": tp})
                done_tokens += len(ans)
        elif a.eagle3:
            outs, recs = model.greedy_batch([b[2] for b in batch], a.max_new, tok.stop_ids, a.topk, layers)
            for (pid, task, ids, text), ans, (taps, ti, tp) in zip(batch, outs, recs):
                samples.append({"id": pid, "task": task, "text": text, "prompt": ids, "answer": ans,
                                "taps": taps, "top_ids": ti, "top_p": tp})
                done_tokens += len(ans)
        else:
            outs, recs = model.greedy_batch([b[2] for b in batch], a.max_new, tok.stop_ids, a.topk)
            for (pid, task, ids, text), ans, (hid, ti, tp) in zip(batch, outs, recs):
                samples.append({"id": pid, "task": task, "text": text, "prompt": ids, "answer": ans,
                                "hidden": hid, "top_ids": ti, "top_p": tp})
                done_tokens += len(ans)
        torch.save(samples, path + ".part")
        os.replace(path + ".part", path)
        for s in samples:
            done[prompt_key(s["prompt"])] = os.path.basename(path)
        save_index(shard_dir, done)
        next_shard += 1
        done_items += len(batch)
        el = clock.elapsed()
        # ETA from the prompt tokens and answer slots left, at this run's rate
        cost = lambda its: sum(len(it[2]) + (len(it[4]) if dataset else a.max_new) for it in its)  # noqa: E731
        left = el * cost(items[done_items:]) / max(1, cost(items[:done_items]))
        print(f"selfdistill: batch {bi + 1}/{len(batches)} ({batch[0][1]})  {done_items} answers, "
              f"{done_tokens} answer tokens in {human_time(el)}  {done_tokens / max(el, 1e-9):.1f} tok/s  "
              f"eta {human_time(left)}", file=sys.stderr, flush=True)
    n = len(done)
    print(f"selfdistill: {human_time(time.time() - t0)} in all", file=sys.stderr)
    print(f"selfdistill: {n} answers in {shard_dir}", file=sys.stderr)


if __name__ == "__main__":
    main()
