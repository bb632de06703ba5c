#!/usr/bin/env python3
"""Train Medusa-1 or Hydra heads on self-distilled data (selfdistill.py).

The backbone stays frozen and is never run here: selfdistill.py stored, for
every answer token, the final-norm hidden state before it and the model's own
top-k next-token distribution. Heads share the base lm_head (not trained, not
saved), so the exported file holds only the heads' own blocks.

  medusa  head i: x = h_t;  r = x + SiLU(W x + b)          (Medusa-1, one ResBlock)
  hydra   head i: x = [h_t, e(x_t+1), ..., e(x_t+i+1)];  r = R x + c + SiLU(W x + b)
          (grounded Hydra MLP: the first block's residual is a learned projection)
  both    logits_i = lm_head(r);  head i predicts token t+i+2

Two phases, both on the training split:
  1. feature regression (cheap, no vocabulary product): SmoothL1(r_i, h_{t+i+1}),
     the base hidden state whose lm_head output is the teacher's distribution
     for the same token (Hydra's reconstruction loss);
  2. the Medusa-1 objective: sum_i lambda_i * CE_i with lambda_i = decay^(i+1)
     (decay 0.8, the Medusa paper's constant); CE_i mixes the hard label
     (weight --lm-weight) and the teacher's top-k distribution
     (--teacher-weight, Hydra's soft-label loss). The softmax runs over the
     draft vocabulary (--draft-vocab, the most frequent training tokens),
     which is exactly what the heads rank at inference, and is what makes
     the phase affordable on a CPU (8192 of 49152 rows).
Held-out top-1/top-5 accuracy per head (full vocabulary, teacher-forced
tokens for Hydra) is reported after each phase and written next to the heads.

  python3 tools/train_heads/train.py --kind hydra --model M.gguf \
      --work .cache/train_heads --out heads/SmolLM2-135M-Instruct.hydra.safetensors
"""
import argparse
import glob
import json
import math
import os
import shutil
import subprocess
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from backbone import human_time, load_embeddings, set_threads  # noqa: E402


# ------------------------------------------------------------------ data

class Distilled:
    """All answers of one split, flattened: position p holds answer token
    tokens[p], the hidden state that predicts it, and the teacher's top-k
    there; end[p] is the (exclusive) end of p's answer."""

    def __init__(self, shard_dir, limit_tokens=0):
        files = sorted(glob.glob(os.path.join(shard_dir, "*.pt")))
        if not files:
            sys.exit(f"train: no shards in {shard_dir}; run selfdistill.py first")
        hid, tok, ti, tp, end, tasks = [], [], [], [], [], {}
        n = 0
        for f in files:
            for s in torch.load(f):
                k = len(s["answer"])
                if k < 2:
                    continue
                hid.append(s["hidden"])
                tok.append(torch.tensor(s["answer"], dtype=torch.long))
                ti.append(s["top_ids"].long())
                tp.append(s["top_p"])
                end.append(torch.full((k,), n + k, dtype=torch.long))
                tasks[s["task"]] = tasks.get(s["task"], 0) + k
                n += k
            if limit_tokens and n >= limit_tokens:
                break
        self.hidden = torch.cat(hid)          # [N, H] fp16
        self.tokens = torch.cat(tok)          # [N]
        self.top_ids = torch.cat(ti)          # [N, k]
        self.top_p = torch.cat(tp)            # [N, k] fp16
        self.end = torch.cat(end)             # [N]
        self.tasks = tasks
        self.n_answers = len(hid)

    def __len__(self):
        return self.tokens.numel()

    def positions(self):
        """Positions where head 0 has a target (t+1 inside the answer)."""
        p = torch.arange(len(self))
        return p[p + 1 < self.end]


# ----------------------------------------------------------------- heads

class ResBlock(nn.Module):
    """x -> res(x) + SiLU(W x + b); res is the identity unless n_in != H."""

    def __init__(self, n_in, hidden):
        super().__init__()
        self.linear = nn.Linear(n_in, hidden)
        nn.init.zeros_(self.linear.weight)   # starts as the residual path (Medusa)
        self.res_connection = None
        if n_in != hidden:
            # Hydra's learned residual; starts as "take h_t", so a fresh head
            # predicts what the base model does for the next token.
            self.res_connection = nn.Linear(n_in, hidden)
            with torch.no_grad():
                self.res_connection.weight.zero_()
                self.res_connection.weight[:, :hidden] = torch.eye(hidden)
                self.res_connection.bias.zero_()

    def forward(self, x):
        res = x if self.res_connection is None else self.res_connection(x)
        return res + F.silu(self.linear(x))


class Heads(nn.Module):
    def __init__(self, kind, n_heads, n_layers, hidden):
        super().__init__()
        self.kind = kind
        blocks = []
        for i in range(n_heads):
            n_in = hidden * (i + 2) if kind == "hydra" else hidden
            blocks.append(nn.Sequential(ResBlock(n_in, hidden), *[ResBlock(hidden, hidden) for _ in range(n_layers - 1)]))
        self.blocks = nn.ModuleList(blocks)

    def state_for_entmtp(self):
        """Tensor names of EntMTP's head loader (docs/file-formats.md)."""
        out = {}
        for i, seq in enumerate(self.blocks):
            for l, blk in enumerate(seq):
                pre = f"hydra_mlp.{i}.{l}." if self.kind == "hydra" else f"{i}.{l}."
                out[pre + "linear.weight"] = blk.linear.weight
                out[pre + "linear.bias"] = blk.linear.bias
                if blk.res_connection is not None:
                    out[pre + "res_connection.weight"] = blk.res_connection.weight
                    out[pre + "res_connection.bias"] = blk.res_connection.bias
        return out


def head_input(kind, i, ds, pos, embed):
    """Input rows of head i at positions pos: h_t, plus for Hydra the
    embeddings of the i+1 tokens after t (teacher-forced)."""
    h = ds.hidden[pos].float()
    if kind != "hydra":
        return h
    last = ds.end[pos] - 1
    parts = [h] + [embed[ds.tokens[torch.minimum(pos + k, last)]] for k in range(i + 1)]
    return torch.cat(parts, dim=-1)


def targets(ds, pos, i):
    """Index of head i's target token (t+i+2 in sequence terms) and whether
    it lies inside the answer."""
    tgt = pos + 1 + i
    valid = tgt < ds.end[pos]
    return torch.where(valid, tgt, pos), valid


# -------------------------------------------------------------- training

def regression_loss(heads, ds, pos, embed, weights):
    total = 0.0
    for i, blk in enumerate(heads.blocks):
        tgt, valid = targets(ds, pos, i)
        if not valid.any():
            continue
        r = blk(head_input(heads.kind, i, ds, pos[valid], embed))
        total = total + weights[i] * F.smooth_l1_loss(r, ds.hidden[tgt[valid]].float())
    return total


def ce_loss(heads, ds, pos, embed, lm_head, weights, lm_w, teacher_w, remap=None):
    """Medusa's weighted CE. With a draft vocabulary, lm_head holds only its
    rows and remap[token] is the row (-1 outside): the softmax is over the
    ids the heads rank at inference, and targets outside it are skipped."""
    total, stats = 0.0, []
    for i, blk in enumerate(heads.blocks):
        tgt, valid = targets(ds, pos, i)
        if remap is not None:
            valid = valid & (remap[ds.tokens[tgt]] >= 0)
        if not valid.any():
            stats.append(0.0)
            continue
        p, t = pos[valid], tgt[valid]
        logp = torch.log_softmax(F.linear(blk(head_input(heads.kind, i, ds, p, embed)), lm_head), dim=-1)
        y, ids = ds.tokens[t], ds.top_ids[t]
        q = ds.top_p[t].float()
        if remap is not None:
            y, ids = remap[y], remap[ids]
            q = torch.where(ids >= 0, q, torch.zeros_like(q))
            ids = ids.clamp(min=0)
        loss = 0.0
        if lm_w:
            loss = loss + lm_w * -logp.gather(1, y[:, None]).mean()
        if teacher_w:
            q = q / q.sum(-1, keepdim=True).clamp(min=1e-6)
            loss = loss + teacher_w * -(q * logp.gather(1, ids)).sum(-1).mean()
        total = total + weights[i] * loss
        stats.append(loss.item())
    return total, stats


def draft_vocabulary(ds, k, vocab, at_least=64):
    """The k most frequent answer tokens of the training data (ties: lower
    id), sorted by id: the ids the heads will rank at inference. When the
    data has fewer distinct tokens than min(k, at_least), unseen ids (lowest
    first) fill it up, so the trees' top-k (10 in the default trees) fits."""
    counts = torch.bincount(ds.tokens, minlength=vocab)
    k = min(k, max(int((counts > 0).sum()), min(at_least, vocab)))
    order = sorted(range(counts.numel()), key=lambda t: (-int(counts[t]), t))[:k]
    return torch.tensor(sorted(order), dtype=torch.long)


@torch.no_grad()
def evaluate(heads, ds, embed, lm_head, max_positions, batch=1024, vocab_ids=None):
    """Per head: top-1 and top-5 accuracy against the self-distilled token,
    over the full vocabulary or only over vocab_ids (a draft vocabulary)."""
    if vocab_ids is not None:
        lm_head = lm_head[vocab_ids]
    pos_all = ds.positions()
    if max_positions and pos_all.numel() > max_positions:
        g = torch.Generator().manual_seed(1234)
        pos_all = pos_all[torch.randperm(pos_all.numel(), generator=g)[:max_positions]].sort().values
    res = []
    for i, blk in enumerate(heads.blocks):
        hit1 = hit5 = n = 0
        for b in range(0, pos_all.numel(), batch):
            pos = pos_all[b:b + batch]
            tgt, valid = targets(ds, pos, i)
            p, t = pos[valid], tgt[valid]
            if p.numel() == 0:
                continue
            top = F.linear(blk(head_input(heads.kind, i, ds, p, embed)), lm_head).topk(min(5, lm_head.shape[0]), dim=-1).indices
            if vocab_ids is not None:
                top = vocab_ids[top]
            y = ds.tokens[t][:, None]
            hit1 += int((top[:, :1] == y).sum())
            hit5 += int((top == y).any(-1).sum())
            n += p.numel()
        res.append({"head": i, "top1": hit1 / max(n, 1), "top5": hit5 / max(n, 1), "positions": n})
    return res


def cosine_lr(step, total, peak, warmup):
    if step < warmup:
        return peak * (step + 1) / warmup
    return 0.5 * peak * (1 + math.cos(math.pi * min(1.0, (step - warmup) / max(1, total - warmup))))


def run_phase(name, heads, ds, positions, epochs, batch, lr, loss_fn, seed, log_every=50):
    opt = torch.optim.AdamW(heads.parameters(), lr=lr, weight_decay=0.0, betas=(0.9, 0.98))
    steps_per_epoch = math.ceil(positions.numel() / batch)
    total = max(1, int(steps_per_epoch * epochs))
    warmup = max(1, total // 20)
    g = torch.Generator().manual_seed(seed)
    t0, step, ema = time.time(), 0, None
    while step < total:
        perm = positions[torch.randperm(positions.numel(), generator=g)]
        for b in range(0, perm.numel(), batch):
            if step >= total:
                break
            for grp in opt.param_groups:
                grp["lr"] = cosine_lr(step, total, lr, warmup)
            loss, parts = loss_fn(perm[b:b + batch])
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            value = loss.item()
            ema = value if ema is None else 0.95 * ema + 0.05 * value
            step += 1
            if step % log_every == 0 or step == total:
                el = time.time() - t0
                detail = " ".join(f"{x:.3f}" for x in parts) if parts else ""
                print(f"train: {name} step {step}/{total}  loss {ema:.4f} {('[' + detail + ']') if detail else ''}  "
                      f"{human_time(el)} elapsed, eta {human_time(el / step * (total - step))}",
                      file=sys.stderr, flush=True)
    return {"steps": total, "batch": batch, "lr": lr, "epochs": epochs, "seconds": round(time.time() - t0, 1)}


def print_acc(title, acc):
    print(f"train: held-out accuracy {title}: " +
          "  ".join(f"head{a['head']} top1 {a['top1']:.3f} top5 {a['top5']:.3f}" for a in acc),
          file=sys.stderr, flush=True)


def model_identity(cli, model):
    """The model's identity as `entmtp info` prints it ("drafter identity:
    "model": {...}"): what entmtp_drafter_find matches heads to a model by.
    None (with a warning) without the CLI: the heads are then found only when
    given with --heads, or once the line is added to X.train.json by hand."""
    if not cli:
        print("train: no entmtp CLI (--entmtp or $ENTMTP): X.train.json gets no model identity, so "
              "`entmtp generate` will not find these heads by itself (add `entmtp info`'s drafter identity)",
              file=sys.stderr)
        return None
    out = subprocess.run([cli, "info", "--model", model], capture_output=True, text=True, check=True).stdout
    for line in out.splitlines():
        if line.startswith("drafter identity: "):
            return json.loads("{" + line[len("drafter identity: "):] + "}")["model"]
    sys.exit(f"train: `{cli} info --model {model}` printed no drafter identity line")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kind", choices=("medusa", "hydra"), required=True)
    ap.add_argument("--model", required=True,
                    help="the model the data was distilled from (GGUF file or Hugging Face directory)")
    ap.add_argument("--work", default=os.path.join(os.path.dirname(os.path.dirname(HERE)), ".cache/train_heads"))
    ap.add_argument("--train-split", default="train")
    ap.add_argument("--eval-split", default="eval")
    ap.add_argument("--out", required=True, help="output .safetensors (EntMTP head layout)")
    ap.add_argument("--heads", type=int, default=4)
    ap.add_argument("--layers", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reg-epochs", type=float, default=4.0, help="phase 1 (feature regression) epochs")
    ap.add_argument("--reg-lr", type=float, default=1e-3)
    ap.add_argument("--ce-epochs", type=float, default=1.0, help="phase 2 (Medusa CE) epochs")
    ap.add_argument("--ce-lr", type=float, default=1e-3)
    ap.add_argument("--batch", type=int, default=512, help="positions per step")
    ap.add_argument("--decay", type=float, default=0.8, help="lambda_i = decay^(i+1) (Medusa paper)")
    ap.add_argument("--lm-weight", type=float, default=None, help="hard-label CE weight (medusa 1, hydra 0.5)")
    ap.add_argument("--teacher-weight", type=float, default=None, help="teacher top-k CE weight (medusa 0, hydra 0.5)")
    ap.add_argument("--limit-tokens", type=int, default=0, help="use only the first N training tokens")
    ap.add_argument("--eval-positions", type=int, default=20000)
    ap.add_argument("--dtype", choices=("f16", "bf16", "f32"), default="f16")
    ap.add_argument("--draft-vocab", type=int, default=8192,
                    help="store the N most frequent training tokens as the heads' draft vocabulary (0 = none)")
    ap.add_argument("--entmtp", default=os.environ.get("ENTMTP") or shutil.which("entmtp"),
                    help="the entmtp CLI: its `info` gives the model identity recorded in X.train.json, by which "
                         "`entmtp generate` finds the heads (default: $ENTMTP, else entmtp on PATH)")
    a = ap.parse_args(argv)
    identity = model_identity(a.entmtp, a.model)
    lm_w = a.lm_weight if a.lm_weight is not None else (1.0 if a.kind == "medusa" else 0.5)
    teacher_w = a.teacher_weight if a.teacher_weight is not None else (0.0 if a.kind == "medusa" else 0.5)

    torch.manual_seed(a.seed)
    threads = set_threads()
    t_start = time.time()
    embed, lm_head = load_embeddings(a.model)
    train = Distilled(os.path.join(a.work, "shards", a.train_split), a.limit_tokens)
    held = Distilled(os.path.join(a.work, "shards", a.eval_split))
    H = train.hidden.shape[1]
    if H != embed.shape[1]:
        sys.exit(f"train: the data's hidden size {H} is not the model's {embed.shape[1]} ({a.model})")
    print(f"train: {a.kind}, {a.heads} heads x {a.layers} layer(s), hidden {H}; {len(train)} training tokens "
          f"in {train.n_answers} answers {train.tasks}; {len(held)} held-out tokens; {threads} threads",
          file=sys.stderr, flush=True)
    heads = Heads(a.kind, a.heads, a.layers, H)
    weights = [a.decay ** (i + 1) for i in range(a.heads)]
    pos = train.positions()
    report = {"kind": a.kind, "model": identity, "heads": a.heads, "layers": a.layers, "seed": a.seed, "hidden": H,
              "train_tokens": len(train), "train_answers": train.n_answers, "train_tasks": train.tasks,
              "heldout_tokens": len(held), "loss_weights": weights, "lm_weight": lm_w,
              "teacher_weight": teacher_w, "threads": threads, "device": "cpu", "phases": {}}
    acc0 = evaluate(heads, held, embed, lm_head, a.eval_positions)
    print_acc("at initialisation", acc0)
    report["accuracy_init"] = acc0
    if a.reg_epochs > 0:
        report["phases"]["regression"] = run_phase(
            "regression", heads, train, pos, a.reg_epochs, a.batch, a.reg_lr,
            lambda p: (regression_loss(heads, train, p, embed, weights), None), a.seed)
        acc1 = evaluate(heads, held, embed, lm_head, a.eval_positions)
        print_acc("after regression", acc1)
        report["accuracy_regression"] = acc1
    draft, remap = None, None
    if a.draft_vocab:
        draft = draft_vocabulary(train, a.draft_vocab, lm_head.shape[0])
        remap = torch.full((lm_head.shape[0],), -1, dtype=torch.long)
        remap[draft] = torch.arange(draft.numel())
        coverage = float((remap[held.tokens] >= 0).float().mean())
        print(f"train: draft vocabulary: the {draft.numel()} most frequent training tokens, "
              f"{100 * coverage:.2f}% of held-out tokens", file=sys.stderr, flush=True)
        report["draft_vocab"] = {"size": draft.numel(), "heldout_coverage": coverage}
    if a.ce_epochs > 0:
        lm_ce = lm_head if draft is None else lm_head[draft].contiguous()
        report["phases"]["cross_entropy"] = run_phase(
            "cross-entropy", heads, train, pos, a.ce_epochs, a.batch, a.ce_lr,
            lambda p: ce_loss(heads, train, p, embed, lm_ce, weights, lm_w, teacher_w, remap), a.seed + 1,
            log_every=20)
    acc = evaluate(heads, held, embed, lm_head, a.eval_positions)
    print_acc("final, full vocabulary", acc)
    report["accuracy"] = acc
    if draft is not None:
        acc_d = evaluate(heads, held, embed, lm_head, a.eval_positions, vocab_ids=draft)
        print_acc(f"final, ranking the {draft.numel()}-token draft vocabulary (as EntMTP does)", acc_d)
        report["draft_vocab"]["accuracy"] = acc_d
    report["seconds"] = round(time.time() - t_start, 1)

    from safetensors.torch import save_file
    dt = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[a.dtype]
    tensors = {k: v.detach().to(dt).contiguous() for k, v in heads.state_for_entmtp().items()}
    if draft is not None:
        tensors["draft_vocab"] = draft.to(torch.int32)
    meta = {"entmtp_heads": a.kind, "base_model": os.path.basename(a.model),
            "shares_lm_head": "true", "training": json.dumps(report)}
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    save_file(tensors, a.out, metadata=meta)
    if identity is None:
        del report["model"]
    with open(os.path.splitext(a.out)[0] + ".train.json", "w") as f:
        json.dump(report, f, indent=1)
    print(f"train: wrote {a.out} ({os.path.getsize(a.out) / 1e6:.1f} MB) in {human_time(time.time() - t_start)}",
          file=sys.stderr)


if __name__ == "__main__":
    main()
