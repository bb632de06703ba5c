#!/usr/bin/env python3
"""Train an EAGLE-3 drafter on self-distilled data (selfdistill.py --eagle3).

The drafter (EAGLE-3 paper; the layout SafeAILab/EAGLE and SpecForge
publish, which EntMTP loads as is):
  g_t   = fc([low_t; mid_t; high_t])             the target's three layers, fused
  row t = ([input_layernorm(embed(x_t+1)); hidden_norm(h)], position t)
  one Llama decoder layer with the target's attention shape over the rows:
        x = h + o_proj(attn(q, k, v of the row));  x = x + mlp(post_attention_layernorm(x))
  logits = lm_head(norm(x)) over a draft vocabulary (the most frequent
  answer tokens of the training data; d2t maps draft ids to target ids)
The token embedding is the target's (shared, frozen, not saved).

Training-time test: every batch unrolls --ttt drafting steps. Step 1
reads the target's fused hidden state h = g_t; step k > 1 reads the
drafter's own output of step k-1 at the same row, with the next token
(teacher-forced: the greedy answer, which is the token the target accepts)
at position t + k - 1. A step-k row attends to the step-1 rows up to its own
(the context, as the drafter's KV cache holds it at inference) and to its
own row at steps 2..k (its ancestors in the draft chain): the paper's
diagonal mask. Step k's loss is the cross-entropy against the target's
top-k distribution of token t+k+1, renormalised over the draft vocabulary
(positions whose target top-1 is outside it are skipped, as SpecForge does),
weighted 0.8^(k-1).

Held-out evaluation (the eval split) reports per step the top-1 accuracy
against the target's greedy token when the previous steps' tokens were the
target's (the acceptance rate of chain step k), and the mean accept length
of a greedy chain of --ttt drafted tokens (1 + the expected accepted
drafts).

Work is resumable: a checkpoint (weights, optimiser, epoch, batch, RNG)
goes to --work/eagle3_ckpt/<name>.pt every --ckpt-every seconds and when
--time-budget runs out; a rerun with the same arguments continues there.

  python3 tools/train_heads/eagle3.py --model M.gguf --work .cache/train_heads \\
      --out heads/SmolLM2-135M-Instruct.eagle3
writes OUT/config.json, OUT/model.safetensors and OUT.train.json.
"""
import argparse
import glob
import json
import math
import os
import platform
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from backbone import ActiveClock, Backbone, human_time, set_threads  # noqa: E402
from train import cosine_lr, draft_vocabulary  # noqa: E402

STEP_DECAY = 0.8  # SpecForge's per-step loss weight 0.8^k


# ------------------------------------------------------------------ data

class Conversations:
    """The samples of one split of selfdistill.py --eagle3: per conversation
    S (prompt + answer ids), P (prompt length), taps [L-1, 3H] fp16 and the
    answer tokens' teacher top-k [A, k]."""

    def __init__(self, shard_dirs, limit=0):
        shard_dirs = [shard_dirs] if isinstance(shard_dirs, str) else list(shard_dirs)
        self.metas, self.items, self.tasks = [], [], {}
        for shard_dir in shard_dirs:
            files = sorted(glob.glob(os.path.join(shard_dir, "*.pt")))
            if not files:
                sys.exit(f"eagle3: no shards in {shard_dir}; run selfdistill.py --eagle3 first")
            meta = json.load(open(os.path.join(shard_dir, "meta.json")))
            for key in ("layers", "topk", "model"):
                if self.metas and meta.get(key) != self.metas[0].get(key):
                    sys.exit(f"eagle3: {shard_dir} was made with {key} {meta.get(key)}, "
                             f"{shard_dirs[0]} with {self.metas[0].get(key)}; they cannot train one drafter")
            self.metas.append(dict(meta, shards=shard_dir))
            for f in files:
                for s in torch.load(f):
                    if len(s["answer"]) < 2:
                        continue
                    seq = torch.tensor(s["prompt"] + s["answer"], dtype=torch.long)
                    self.items.append({"seq": seq, "P": len(s["prompt"]), "taps": s["taps"],
                                       "top_ids": s["top_ids"].long(), "top_p": s["top_p"]})
                    task = s["task"] + (" (dataset replies)" if meta.get("answers") == "dataset" else "")
                    self.tasks[task] = self.tasks.get(task, 0) + len(s["answer"])
                if limit and len(self.items) >= limit:
                    break
            if limit and len(self.items) >= limit:
                break
        self.meta = self.metas[0]
        self.items.sort(key=lambda it: it["seq"].numel())
        self.answer_tokens = sum(it["seq"].numel() - it["P"] for it in self.items)
        self.rows = sum(it["seq"].numel() - 1 for it in self.items)

    def answer_ids(self):
        return torch.cat([it["seq"][it["P"]:] for it in self.items])

    def teacher_top1(self):
        """The target's own next token at every answer position (the answer
        itself for greedy data; not for fixed replies)."""
        return torch.cat([it["top_ids"][:, 0] for it in self.items])

    def batches(self, max_rows):
        """Index lists of conversations of similar length, up to max_rows
        padded rows each."""
        out, cur, width = [], [], 0
        for i, it in enumerate(self.items):
            w = max(width, it["seq"].numel() - 1)
            if cur and w * (len(cur) + 1) > max_rows:
                out.append(cur)
                cur, w = [], it["seq"].numel() - 1
            cur.append(i)
            width = w
        if cur:
            out.append(cur)
        return out


def collate(ds, idx, ttt):
    """Padded tensors for conversations idx: taps [B,T,3H], tokens
    [B,T+ttt] (row t's step-k input token is tokens[:, t+k]), the real-row
    mask, and per step k the rows with a target, their answer index and
    the target token / teacher top-k."""
    its = [ds.items[i] for i in idx]
    B = len(its)
    T = max(it["seq"].numel() - 1 for it in its)
    H3 = its[0]["taps"].shape[1]
    taps = torch.zeros(B, T, H3)
    tokens = torch.zeros(B, T + ttt, dtype=torch.long)
    real = torch.zeros(B, T, dtype=torch.bool)
    P = torch.tensor([it["P"] for it in its])
    L = torch.tensor([it["seq"].numel() for it in its])
    k = its[0]["top_ids"].shape[1]
    A = int((L - P).max())
    top_ids = torch.zeros(B, A, k, dtype=torch.long)
    top_p = torch.zeros(B, A, k)
    gold = torch.zeros(B, A, dtype=torch.long)
    for b, it in enumerate(its):
        n = it["seq"].numel()
        taps[b, :n - 1] = it["taps"].float()
        tokens[b, :n - 1] = it["seq"][1:]
        real[b, :n - 1] = True
        a = n - it["P"]
        top_ids[b, :a] = it["top_ids"]
        top_p[b, :a] = it["top_p"].float()
        gold[b, :a] = it["seq"][it["P"]:]
    rows = torch.arange(T)
    steps = []
    for s in range(ttt):
        # row t, step s predicts token t+s+2, whose distribution is at position t+s+1
        p = rows[None, :] + s + 1
        valid = (p >= P[:, None] - 1) & (p <= L[:, None] - 2)
        ans = (p - (P[:, None] - 1)).clamp(min=0, max=A - 1)
        steps.append((valid, ans))
    return {"taps": taps, "tokens": tokens, "real": real, "top_ids": top_ids, "top_p": top_p, "gold": gold,
            "steps": steps}


def choose_draft_vocab(ds, k, vocab):
    """The k tokens the target most often predicts at the answer positions
    (its top-1: the greedy answer tokens themselves for self-distilled data;
    train.py's draft_vocabulary, ties to the lower id), then, while those
    have fewer distinct tokens, the most frequent prompt tokens, then the
    lowest unseen ids; sorted."""
    top1 = ds.teacher_top1()
    answers = torch.bincount(top1, minlength=vocab)
    prompts = torch.bincount(torch.cat([it["seq"][:it["P"]] for it in ds.items]), minlength=vocab)
    k = min(k, vocab)
    if int((answers > 0).sum()) >= k:
        return draft_vocabulary(type("D", (), {"tokens": top1})(), k, vocab)
    order = sorted(range(vocab), key=lambda t: (-int(answers[t]), -int(prompts[t]), t))[:k]
    return torch.tensor(sorted(order), dtype=torch.long)


# ----------------------------------------------------------------- model

class RMSNorm(nn.Module):
    def __init__(self, n, eps, weight=None):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(n) if weight is None else weight.clone().float())

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


class Attention(nn.Module):
    def __init__(self, H, n_heads, n_kv, head_dim, theta):
        super().__init__()
        self.n_heads, self.n_kv, self.head_dim = n_heads, n_kv, head_dim
        self.q_proj = nn.Linear(2 * H, n_heads * head_dim, bias=False)
        self.k_proj = nn.Linear(2 * H, n_kv * head_dim, bias=False)
        self.v_proj = nn.Linear(2 * H, n_kv * head_dim, bias=False)
        self.o_proj = nn.Linear(n_heads * head_dim, H, bias=False)
        self.register_buffer("inv_freq", 1.0 / theta ** (torch.arange(0, head_dim, 2, dtype=torch.float64) / head_dim),
                             persistent=False)

    def rope(self, x, pos):  # x [B, heads, T, hd]; rotate-half, as EntMTP's drafter and SpecForge
        ang = pos.to(torch.float64)[:, None, :, None] * self.inv_freq
        c, s = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)
        h = x.shape[-1] // 2
        a, b = x[..., :h], x[..., h:]
        return torch.cat((a * c - b * s, a * s + b * c), dim=-1)

    def forward(self, x, pos, ctx_mask, cache):
        """x [B,T,2H] at positions pos [B,T]. cache: the (K, V) of the earlier
        steps; K/V of step 1 are the context (ctx_mask [B,1,T,T]), those of
        later steps are seen on the diagonal only (the row's own chain)."""
        B, T, _ = x.shape
        q = self.q_proj(x).view(B, T, self.n_heads, self.head_dim).transpose(1, 2)
        k = self.k_proj(x).view(B, T, self.n_kv, self.head_dim).transpose(1, 2)
        v = self.v_proj(x).view(B, T, self.n_kv, self.head_dim).transpose(1, 2)
        q, k = self.rope(q, pos), self.rope(k, pos)
        rep = self.n_heads // self.n_kv
        if rep > 1:
            k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
        cache.append((k, v))
        scale = 1.0 / math.sqrt(self.head_dim)
        k0, v0 = cache[0]
        scores = [(q @ k0.transpose(-1, -2) * scale).masked_fill(~ctx_mask, float("-inf"))]
        for kj, _ in cache[1:]:
            scores.append((q * kj).sum(-1, keepdim=True) * scale)
        p = torch.softmax(torch.cat(scores, dim=-1), dim=-1)
        out = p[..., :T] @ v0
        for j, (_, vj) in enumerate(cache[1:]):
            out = out + p[..., T + j:T + j + 1] * vj
        return self.o_proj(out.transpose(1, 2).reshape(B, T, -1))


class MLP(nn.Module):
    def __init__(self, H, ffn):
        super().__init__()
        self.gate_proj = nn.Linear(H, ffn, bias=False)
        self.up_proj = nn.Linear(H, ffn, bias=False)
        self.down_proj = nn.Linear(ffn, H, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class MidLayer(nn.Module):
    def __init__(self, H, n_heads, n_kv, head_dim, ffn, eps, theta):
        super().__init__()
        self.hidden_norm = RMSNorm(H, eps)
        self.input_layernorm = RMSNorm(H, eps)
        self.post_attention_layernorm = RMSNorm(H, eps)
        self.self_attn = Attention(H, n_heads, n_kv, head_dim, theta)
        self.mlp = MLP(H, ffn)

    def forward(self, emb, h, pos, ctx_mask, cache):
        x = torch.cat([self.input_layernorm(emb), self.hidden_norm(h)], dim=-1)
        x = h + self.self_attn(x, pos, ctx_mask, cache)
        return x + self.mlp(self.post_attention_layernorm(x))


class Eagle3(nn.Module):
    def __init__(self, c, draft_ids, embed, lm_head, final_norm):
        super().__init__()
        H = c["hidden_size"]
        self.cfg = c
        self.fc = nn.Linear(3 * c["target_hidden_size"], H, bias=False)
        self.midlayer = MidLayer(H, c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"],
                                 c["intermediate_size"], c["rms_norm_eps"], c["rope_theta"])
        # start from the target's output head on the draft vocabulary: the
        # drafter's output space begins as the target's
        self.norm = RMSNorm(H, c["rms_norm_eps"], final_norm)
        self.lm_head = nn.Linear(H, draft_ids.numel(), bias=False)
        with torch.no_grad():
            self.lm_head.weight.copy_(lm_head[draft_ids])
        self.register_buffer("embed", embed.float(), persistent=False)  # the target's, frozen
        self.register_buffer("draft_ids", draft_ids.clone(), persistent=False)

    def unroll(self, batch, ttt):
        """The training-time test: the outputs x [B,T,H] of each of ttt steps."""
        taps, tokens, real = batch["taps"], batch["tokens"], batch["real"]
        B, T, _ = taps.shape
        causal = torch.ones(T, T, dtype=torch.bool).tril()
        ctx_mask = (causal[None] & real[:, None, :])[:, None]  # [B,1,T,T]
        ctx_mask = ctx_mask | torch.eye(T, dtype=torch.bool)[None, None]  # padding rows stay finite
        pos0 = torch.arange(T)[None].expand(B, T)
        h = self.fc(taps)
        cache, outs = [], []
        for s in range(ttt):
            h = self.midlayer(self.embed[tokens[:, s:s + T]], h, pos0 + s, ctx_mask, cache)
            outs.append(h)
        return outs

    def logits(self, x):
        return self.lm_head(self.norm(x))


def step_targets(batch, s, remap):
    """Rows of step s with a target: (b, t) indices, the gold token, the
    teacher distribution over draft ids, and whether the teacher's top-1 is
    in the draft vocabulary."""
    valid, ans = batch["steps"][s]
    b, t = valid.nonzero(as_tuple=True)
    a = ans[b, t]
    gold = batch["gold"][b, a]
    ids = remap[batch["top_ids"][b, a]]
    q = torch.where(ids >= 0, batch["top_p"][b, a], torch.zeros(()))
    top_in = ids[:, 0] >= 0
    q = q / q.sum(-1, keepdim=True).clamp(min=1e-6)
    return b, t, gold, ids.clamp(min=0), q, top_in


def loss_fn(model, batch, ttt, remap):
    outs = model.unroll(batch, ttt)
    total, parts = 0.0, []
    for s, x in enumerate(outs):
        b, t, _, ids, q, top_in = step_targets(batch, s, remap)
        b, t, ids, q = b[top_in], t[top_in], ids[top_in], q[top_in]
        if b.numel() == 0:
            parts.append(0.0)
            continue
        logp = torch.log_softmax(model.logits(x[b, t]), dim=-1)
        loss = -(q * logp.gather(1, ids)).sum(-1).mean()
        total = total + STEP_DECAY ** s * loss
        parts.append(loss.item())
    return total, parts


@torch.no_grad()
def evaluate(model, ds, ttt, remap, max_rows, limit_batches=0):
    """Per step: top-1 accuracy against the target's greedy token (teacher-
    forced chain), and the mean accept length of a greedy ttt-token chain
    over rows where every step has a target."""
    hits = [0] * ttt
    counts = [0] * ttt
    chain_sum, chain_n = 0.0, 0
    batches = ds.batches(max_rows)
    if limit_batches:
        batches = batches[:limit_batches]
    for idx in batches:
        batch = collate(ds, idx, ttt)
        outs = model.unroll(batch, ttt)
        B, T = batch["real"].shape
        ok = torch.ones(B, T, dtype=torch.bool)
        every = torch.ones(B, T, dtype=torch.bool)
        run = torch.zeros(B, T)
        for s, x in enumerate(outs):
            b, t, gold, _, _, _ = step_targets(batch, s, remap)
            pred = model.draft_ids[model.logits(x[b, t]).argmax(-1)]
            hit = pred == gold
            hits[s] += int(hit.sum())
            counts[s] += int(b.numel())
            step_hit = torch.zeros(B, T, dtype=torch.bool)
            step_hit[b, t] = hit
            has = torch.zeros(B, T, dtype=torch.bool)
            has[b, t] = True
            every &= has
            ok &= step_hit
            run += ok.float()
        chain_sum += float(run[every].sum())
        chain_n += int(every.sum())
    acc = [{"step": s + 1, "top1": hits[s] / max(counts[s], 1), "positions": counts[s]} for s in range(ttt)]
    return {"steps": acc, "accept_length": 1.0 + chain_sum / max(chain_n, 1), "chain_rows": chain_n}


def print_eval(title, ev):
    print(f"eagle3: held-out {title}: " + "  ".join(f"step{a['step']} top1 {a['top1']:.3f}" for a in ev["steps"]) +
          f"  accept length (depth-{len(ev['steps'])} chain) {ev['accept_length']:.3f}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- target

def target_parts(path):
    """The target's config (as the drafter copies it), token embedding,
    lm_head and final norm weight."""
    m = Backbone(path)
    c = m.cfg
    cfg = {"hidden_size": c.hidden, "target_hidden_size": c.hidden, "num_attention_heads": c.n_heads,
           "num_key_value_heads": c.n_kv, "head_dim": c.head_dim, "intermediate_size": c.ffn,
           "rms_norm_eps": c.eps, "rope_theta": c.theta, "vocab_size": m.embed.shape[0],
           "max_position_embeddings": c.ctx, "n_layers": c.n_layers}
    return cfg, m.embed.float(), m.lm_head.float(), m.norm.float()


def export(model, out_dir, layers, dtype, report):
    from safetensors.torch import save_file
    c = model.cfg
    V = c["vocab_size"]
    draft = model.draft_ids
    tensors = {k: v.detach().to(dtype).contiguous() for k, v in model.state_dict().items()}
    tensors["d2t"] = (draft - torch.arange(draft.numel())).to(torch.int64)
    t2d = torch.zeros(V, dtype=torch.bool)
    t2d[draft] = True
    tensors["t2d"] = t2d
    config = {
        "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": c["hidden_size"],
        "intermediate_size": c["intermediate_size"], "num_hidden_layers": 1,
        "num_attention_heads": c["num_attention_heads"], "num_key_value_heads": c["num_key_value_heads"],
        "head_dim": c["head_dim"], "vocab_size": V, "draft_vocab_size": int(draft.numel()),
        "target_hidden_size": c["target_hidden_size"], "rms_norm_eps": c["rms_norm_eps"],
        "rope_theta": c["rope_theta"], "rope_scaling": None, "max_position_embeddings": c["max_position_embeddings"],
        "hidden_act": "silu", "tie_word_embeddings": False,
        "torch_dtype": {torch.float16: "float16", torch.bfloat16: "bfloat16", torch.float32: "float32"}[dtype],
        "eagle_config": {"eagle_aux_hidden_state_layer_ids": layers},
    }
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    save_file(tensors, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
    with open(os.path.normpath(out_dir) + ".train.json", "w") as f:
        json.dump(report, f, indent=1)


# ------------------------------------------------------------------ main

def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True, help="the target the data was distilled from (GGUF or HF directory)")
    ap.add_argument("--work", default=os.path.join(os.path.dirname(os.path.dirname(HERE)), ".cache/train_heads"))
    ap.add_argument("--train-split", default="train")
    ap.add_argument("--extra-train", action="append", default=[], metavar="DIR",
                    help="more training shards (a selfdistill.py --eagle3 shard directory, e.g. fixed replies "
                         "from --answers dataset: WORK/shards_eagle3/train); repeatable")
    ap.add_argument("--eval-split", default="eval")
    ap.add_argument("--out", required=True, help="output directory (config.json + model.safetensors)")
    ap.add_argument("--ttt", type=int, default=3, help="drafting steps unrolled per batch (training-time test)")
    ap.add_argument("--epochs", type=float, default=2.0)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--batch-rows", type=int, default=4096, help="padded conversation rows per batch")
    ap.add_argument("--draft-vocab", type=int, default=8192)
    ap.add_argument("--ffn", type=int, default=0, help="the drafter's intermediate size (default: the target's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--limit", type=int, default=0, help="use only the first N training conversations")
    ap.add_argument("--eval-batches", type=int, default=0, help="evaluate on the first N held-out batches (0: all)")
    ap.add_argument("--time-budget", type=float, default=0,
                    help="stop training after this many seconds (checkpointed; a rerun continues)")
    ap.add_argument("--ckpt-every", type=float, default=300, help="seconds between checkpoints")
    ap.add_argument("--fresh", action="store_true", help="ignore an existing checkpoint")
    ap.add_argument("--log-every", type=int, default=10)
    ap.add_argument("--eval-every", type=int, default=0,
                    help="held-out per-step accuracy every N steps (0: before and after training only)")
    ap.add_argument("--dtype", choices=("f16", "bf16", "f32"), default="f16")
    ap.add_argument("--compute", choices=("f32", "bf16"), default="f32",
                    help="training arithmetic: bf16 runs the products under torch.autocast (weights, optimiser "
                         "and the held-out evaluation stay f32); 1.3-1.6x faster steps on a Xeon with AMX")
    a = ap.parse_args(argv)

    torch.manual_seed(a.seed)
    threads = set_threads()
    t_start = time.time()
    cfg, embed, lm_head, final_norm = target_parts(a.model)
    if a.ffn:
        cfg["intermediate_size"] = a.ffn
    train = Conversations([os.path.join(a.work, "shards_eagle3", a.train_split)] + a.extra_train, a.limit)
    held = Conversations(os.path.join(a.work, "shards_eagle3", a.eval_split))
    layers = train.meta["layers"]
    if held.meta["layers"] != layers:
        sys.exit(f"eagle3: the train split reads layers {layers}, the eval split {held.meta['layers']}")
    if train.items[0]["taps"].shape[1] != 3 * cfg["hidden_size"]:
        sys.exit(f"eagle3: the data's taps are {train.items[0]['taps'].shape[1]} wide, not 3 x {cfg['hidden_size']}")
    V = cfg["vocab_size"]
    draft = choose_draft_vocab(train, a.draft_vocab, V)
    remap = torch.full((V,), -1, dtype=torch.long)
    remap[draft] = torch.arange(draft.numel())
    coverage = float((remap[held.answer_ids()] >= 0).float().mean())
    print(f"eagle3: {cfg['n_layers']}-layer target, hidden {cfg['hidden_size']}, reads layers {layers}; "
          f"{len(train.items)} training conversations ({train.answer_tokens} answer tokens, {train.rows} rows) "
          f"{train.tasks}; {len(held.items)} held-out ({held.answer_tokens} answer tokens); draft vocabulary "
          f"{draft.numel()} ({100 * coverage:.1f}% of held-out tokens); {threads} threads", file=sys.stderr, flush=True)
    model = Eagle3(cfg, draft, embed, lm_head, final_norm)
    del lm_head
    opt = torch.optim.AdamW(model.parameters(), lr=a.lr, weight_decay=0.0, betas=(0.9, 0.95))
    batches = train.batches(a.batch_rows)
    per_epoch = len(batches)
    total = max(1, int(per_epoch * a.epochs))
    warmup = max(1, total // 20)

    name = os.path.basename(os.path.normpath(a.out))
    ckpt_path = os.path.join(a.work, "eagle3_ckpt", name + ".pt")
    signature = {"model": os.path.basename(os.path.normpath(a.model)), "ttt": a.ttt, "epochs": a.epochs, "lr": a.lr,
                 "batch_rows": a.batch_rows, "draft_vocab": a.draft_vocab, "ffn": cfg["intermediate_size"],
                 "seed": a.seed, "limit": a.limit, "layers": layers, "train_conversations": len(train.items)}
    if a.compute != "f32":  # f32 runs keep the signature their checkpoints were written with
        signature["compute"] = a.compute
    step, spent, history = 0, 0.0, []
    ev0 = None
    if os.path.exists(ckpt_path) and not a.fresh:
        ck = torch.load(ckpt_path, weights_only=False)
        if ck["signature"] != signature:
            sys.exit(f"eagle3: {ckpt_path} was made with {ck['signature']}, not {signature}; "
                     "pass --fresh to start over")
        model.load_state_dict(ck["model"])
        opt.load_state_dict(ck["opt"])
        step, spent, history, ev0 = ck["step"], ck["seconds"], ck["history"], ck["eval_init"]
        print(f"eagle3: resumed {ckpt_path} at step {step}/{total} ({human_time(spent)} trained)",
              file=sys.stderr, flush=True)
    if ev0 is None:
        ev0 = evaluate(model, held, a.ttt, remap, a.batch_rows, a.eval_batches)
        print_eval("untrained", ev0)

    def save_ckpt():
        os.makedirs(os.path.dirname(ckpt_path), exist_ok=True)
        torch.save({"signature": signature, "model": model.state_dict(), "opt": opt.state_dict(), "step": step,
                    "seconds": spent, "history": history, "eval_init": ev0}, ckpt_path + ".part")
        os.replace(ckpt_path + ".part", ckpt_path)

    clock = ActiveClock()  # the budget and the seconds trained leave out time stopped by SIGSTOP
    t_ckpt, ema = time.time(), None
    spent0, step0 = spent, step
    stopped = False
    while step < total and not stopped:
        epoch, first = divmod(step, per_epoch)
        order = torch.randperm(per_epoch, generator=torch.Generator().manual_seed(a.seed * 1000 + epoch))
        for bi in order[first:].tolist():
            if step >= total:
                break
            for g in opt.param_groups:
                g["lr"] = cosine_lr(step, total, a.lr, warmup)
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=a.compute == "bf16"):
                loss, parts = loss_fn(model, collate(train, batches[bi], a.ttt), a.ttt, remap)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
            opt.step()
            step += 1
            value = loss.item()
            ema = value if ema is None else 0.9 * ema + 0.1 * value
            spent = spent0 + clock.elapsed()
            if step % a.log_every == 0 or step == total:
                rate = (spent - spent0) / (step - step0)
                print(f"eagle3: epoch {epoch + 1} step {step}/{total}  loss {ema:.3f} "
                      f"[{' '.join(f'{x:.2f}' for x in parts)}]  {human_time(spent)} trained, "
                      f"eta {human_time(rate * (total - step))}", file=sys.stderr, flush=True)
                history.append({"step": step, "loss": round(ema, 4), "seconds": round(spent, 1)})
            if a.eval_every and step % a.eval_every == 0 and step < total:
                ev = evaluate(model, held, a.ttt, remap, a.batch_rows, a.eval_batches)
                print_eval(f"at step {step}/{total}", ev)
                if history and history[-1]["step"] == step:
                    history[-1]["heldout"] = ev
                else:
                    history.append({"step": step, "seconds": round(spent, 1), "heldout": ev})
            if a.time_budget and clock.elapsed() >= a.time_budget:
                stopped = True
                break
            if time.time() - t_ckpt >= a.ckpt_every:
                save_ckpt()
                t_ckpt = time.time()
    save_ckpt()
    if stopped:
        print(f"eagle3: time budget reached at step {step}/{total}; checkpoint {ckpt_path} (rerun to continue)",
              file=sys.stderr, flush=True)
    t_eval = time.time()
    ev = evaluate(model, held, a.ttt, remap, a.batch_rows, a.eval_batches)
    print_eval(f"after {step}/{total} steps", ev)
    report = {
        "kind": "eagle3", "target": signature["model"], "target_layers": layers, "seed": a.seed,
        "data": {"train_conversations": len(train.items), "train_answer_tokens": train.answer_tokens,
                 "train_rows": train.rows, "train_tasks": train.tasks, "heldout_conversations": len(held.items),
                 "heldout_answer_tokens": held.answer_tokens,
                 "distillation": train.meta if len(train.metas) == 1 else train.metas},
        "hyperparameters": {"ttt_steps": a.ttt, "step_weights": [STEP_DECAY ** s for s in range(a.ttt)],
                            "epochs": a.epochs, "lr": a.lr, "schedule": "cosine, 5% warmup", "optimizer":
                            "AdamW(0.9, 0.95), clip 1.0", "batch_rows": a.batch_rows,
                            "intermediate_size": cfg["intermediate_size"], "dtype": a.dtype,
                            "compute": a.compute},
        "draft_vocab": {"size": int(draft.numel()), "heldout_coverage": coverage},
        "steps_done": step, "steps_total": total, "finished": step >= total,
        "heldout_untrained": ev0, "heldout": ev,
        "seconds": {"training": round(spent, 1), "eval": round(time.time() - t_eval, 1),
                    "this_run": round(time.time() - t_start, 1)},
        "machine": {"cpu": platform.processor() or platform.machine(), "threads": threads,
                    "device": "cpu", "torch": torch.__version__},
        "loss_history": history,
    }
    dt = {"f16": torch.float16, "bf16": torch.bfloat16, "f32": torch.float32}[a.dtype]
    export(model, a.out, layers, dt, report)
    size = os.path.getsize(os.path.join(a.out, "model.safetensors"))
    print(f"eagle3: wrote {a.out} ({size / 1e6:.1f} MB) and {os.path.normpath(a.out)}.train.json",
          file=sys.stderr)


if __name__ == "__main__":
    main()
