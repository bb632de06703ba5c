#!/usr/bin/env python3
"""Times the two costs of training heads for a model shape, on this machine:
self-distillation (the frozen backbone's batched greedy decoding, tokens/s,
the code selfdistill.py runs) and one training step of train.py (Medusa and
Hydra heads, both phases, --batch positions, the draft vocabulary softmax).

The backbone is a random-weight GGUF of the given shape (written once, no
tokenizer: the prompts are random ids), so any size can be timed without
downloading a model. Default: the Qwen2.5-0.5B shape (hidden 896, 24 layers,
14 heads / 2 KV heads, FFN 4864, vocabulary 151936, tied embeddings).

  python3 tools/train_heads/time_steps.py --gguf /tmp/qwen2-0.5b-random.gguf
  python3 tools/train_heads/time_steps.py --gguf M.gguf --skip-distill --steps 5
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import train as T  # noqa: E402
from backbone import Backbone, set_threads  # noqa: E402


def write_random_qwen2(path, hidden, layers, heads, kv, ffn, vocab, seed=0):
    import gguf
    rng = np.random.Generator(np.random.PCG64(seed))
    hd = hidden // heads
    w = gguf.GGUFWriter(path, "qwen2")
    w.add_name("entmtp-random-qwen2-shape")
    w.add_context_length(32768)
    w.add_embedding_length(hidden)
    w.add_block_count(layers)
    w.add_feed_forward_length(ffn)
    w.add_head_count(heads)
    w.add_head_count_kv(kv)
    w.add_rope_freq_base(1000000.0)
    w.add_layer_norm_rms_eps(1e-6)
    w.add_file_type(gguf.LlamaFileType.ALL_F32)

    def mat(r, c, s=None):
        return (rng.standard_normal((r, c), dtype=np.float32) * (s or 1.0 / np.sqrt(c))).astype(np.float32)

    def vec(n, base=1.0, spread=0.1):
        return (base + spread * rng.standard_normal(n, dtype=np.float32)).astype(np.float32)

    w.add_tensor("token_embd.weight", mat(vocab, hidden, 1.0))
    for l in range(layers):
        p = f"blk.{l}."
        w.add_tensor(p + "attn_norm.weight", vec(hidden))
        w.add_tensor(p + "attn_q.weight", mat(heads * hd, hidden))
        w.add_tensor(p + "attn_k.weight", mat(kv * hd, hidden))
        w.add_tensor(p + "attn_v.weight", mat(kv * hd, hidden))
        for n, r in (("q", heads * hd), ("k", kv * hd), ("v", kv * hd)):
            w.add_tensor(p + f"attn_{n}.bias", vec(r, 0.0, 0.5))
        w.add_tensor(p + "attn_output.weight", mat(hidden, heads * hd))
        w.add_tensor(p + "ffn_norm.weight", vec(hidden))
        w.add_tensor(p + "ffn_gate.weight", mat(ffn, hidden))
        w.add_tensor(p + "ffn_up.weight", mat(ffn, hidden))
        w.add_tensor(p + "ffn_down.weight", mat(hidden, ffn))
    w.add_tensor("output_norm.weight", vec(hidden))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def synthetic_data(n, hidden, vocab, answer_len=192, topk=20, seed=0):
    """A Distilled-shaped set of n positions (answers of answer_len tokens)."""
    g = torch.Generator().manual_seed(seed)
    ds = T.Distilled.__new__(T.Distilled)
    ds.hidden = torch.randn(n, hidden, generator=g).to(torch.float16)
    ds.tokens = torch.randint(0, vocab, (n,), generator=g)
    ds.top_ids = torch.randint(0, vocab, (n, topk), generator=g)
    ds.top_p = torch.softmax(torch.randn(n, topk, generator=g), -1).to(torch.float16)
    ds.end = (torch.arange(n) // answer_len + 1) * answer_len
    ds.end.clamp_(max=n)
    ds.tasks, ds.n_answers = {"synthetic": n}, n // answer_len
    return ds


def time_steps(kind, ds, embed, lm_head, draft_size, batch, steps, n_heads=4):
    H = ds.hidden.shape[1]
    heads = T.Heads(kind, n_heads, 1, H)
    weights = [0.8 ** (i + 1) for i in range(n_heads)]
    draft = T.draft_vocabulary(ds, draft_size, lm_head.shape[0])
    remap = torch.full((lm_head.shape[0],), -1, dtype=torch.long)
    remap[draft] = torch.arange(draft.numel())
    lm_ce = lm_head[draft].contiguous()
    opt = torch.optim.AdamW(heads.parameters(), lr=1e-3)
    pos = ds.positions()
    g = torch.Generator().manual_seed(1)
    out = {}
    for phase in ("regression", "cross_entropy"):
        times = []
        for s in range(steps + 1):  # the first step warms up, not counted
            p = pos[torch.randint(0, pos.numel(), (batch,), generator=g)]
            t0 = time.perf_counter()
            if phase == "regression":
                loss = T.regression_loss(heads, ds, p, embed, weights)
            else:
                loss, _ = T.ce_loss(heads, ds, p, embed, lm_ce, weights, 0.5, 0.5, remap)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            opt.step()
            if s:
                times.append(time.perf_counter() - t0)
        out[phase] = {"median_s_per_step": round(float(np.median(times)), 4), "steps": steps}
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--gguf", required=True, help="model to time; written (random, qwen2) if it does not exist")
    ap.add_argument("--hidden", type=int, default=896)
    ap.add_argument("--layers", type=int, default=24)
    ap.add_argument("--heads", type=int, default=14)
    ap.add_argument("--kv-heads", type=int, default=2)
    ap.add_argument("--ffn", type=int, default=4864)
    ap.add_argument("--vocab", type=int, default=151936)
    ap.add_argument("--batch", type=int, default=512, help="train.py positions per step")
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--draft-vocab", type=int, default=8192)
    ap.add_argument("--distill-batch", type=int, default=16)
    ap.add_argument("--prompt-len", type=int, default=128)
    ap.add_argument("--max-new", type=int, default=32)
    ap.add_argument("--skip-distill", action="store_true")
    a = ap.parse_args()
    threads = set_threads()
    if not os.path.exists(a.gguf):
        t0 = time.time()
        write_random_qwen2(a.gguf, a.hidden, a.layers, a.heads, a.kv_heads, a.ffn, a.vocab)
        print(f"time_steps: wrote {a.gguf} in {time.time() - t0:.0f}s", file=sys.stderr)
    m = Backbone(a.gguf)
    n_params = sum(t.numel() for L in m.layers for t in L.values() if torch.is_tensor(t)) + m.embed.numel()
    report = {"model": m.describe(), "params": n_params, "threads": threads, "device": "cpu",
              "torch": torch.__version__}
    if not a.skip_distill:
        g = torch.Generator().manual_seed(0)
        prompts = [torch.randint(0, m.vocab, (a.prompt_len,), generator=g).tolist() for _ in range(a.distill_batch)]
        m.greedy_batch(prompts[:2], 2, set(), record_topk=20)  # warm-up
        t0 = time.perf_counter()
        outs, _ = m.greedy_batch(prompts, a.max_new, set(), record_topk=20)
        el = time.perf_counter() - t0
        n = sum(len(o) for o in outs)
        report["selfdistill"] = {"batch": a.distill_batch, "prompt_len": a.prompt_len, "new_tokens": n,
                                 "seconds": round(el, 1), "answer_tokens_per_s": round(n / el, 1)}
        print(f"time_steps: self-distillation {n / el:.1f} answer tokens/s", file=sys.stderr)
    ds = synthetic_data(max(20 * a.batch, 16384), m.hidden, m.vocab)
    embed, lm_head = m.embed.float(), m.lm_head.float()
    for kind in ("medusa", "hydra"):
        report[kind] = time_steps(kind, ds, embed, lm_head, a.draft_vocab, a.batch, a.steps)
        print(f"time_steps: {kind}: {report[kind]}", file=sys.stderr)
    print(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
