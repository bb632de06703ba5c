#!/usr/bin/env python3
"""Roofline estimate of one decoding step of the CUDA backend on an H100 SXM,
from the bytes and FLOPs that its kernels (cuda/*.cu) move and compute, so a
GPU run (`entmtp bench --backend cuda`, scripts/gpu-check.sh) can be compared
with it. Prints the markdown table of docs/performance.md.

What each kernel moves from DRAM (F32 activations and KV cache, as the engine
keeps them):
- products (cuda/matmul.cu): the weights once per call (row tiles of one
  output group run next to each other, so tiles after the first read L2),
  the input rows once, the output rows once;
- attention (cuda/attention.cu): the K and V prefix once per layer (all rows
  and heads of one chunk run next to each other: L2 serves the rest), the
  queries, the output, and the per-chunk partials written and read back;
- RMSNorm, RoPE, residual adds, SwiGLU: their F32 rows in and out.
FLOPs: 2 per weight per row for the products, 4 * head_dim per (row, head,
key) for attention; elementwise work is left out.

Usage: scripts/roofline.py [--ctx N] [--nodes N]"""
import argparse

BW = 3.35e12          # H100 SXM HBM3, bytes/s
BF16_TC = 989e12      # dense BF16 tensor-core FLOP/s
FP32_CORES = 67e12    # FP32 FMA on CUDA cores (what cuda/matmul.cu uses)
CHUNK = 256           # attention chunk (cuda/attention.cu ATTN_CHUNK)

MODELS = {
    # hidden, layers, heads, kv_heads, head_dim, ffn, vocab
    "SmolLM2-135M": (576, 30, 9, 3, 64, 1536, 49152),
    "Llama-2-7B": (4096, 32, 32, 32, 128, 11008, 32000),
}
BYTES_PER_WEIGHT = {"BF16": 2.0, "Q4_0": 18 / 32}


def step(model, dtype, rows, ctx):
    H, L, nh, nkv, hd, F, V = MODELS[model]
    wb = BYTES_PER_WEIGHT[dtype]
    qd, kvd = nh * hd, nkv * hd
    mats = [(H, qd), (H, kvd), (H, kvd), (qd, H), (H, F), (H, F), (F, H)]  # (n_in, n_out)
    weights = acts = kv = flops = 0.0
    for n_in, n_out in mats:
        weights += L * n_in * n_out * wb
        acts += L * rows * (n_in + n_out) * 4
        flops += L * 2 * rows * n_in * n_out
    chunks = -(-(ctx + rows) // CHUNK)
    kv += L * (ctx + rows) * kvd * 4 * 2
    acts += L * (rows * qd * 4 * 2 + rows * nh * chunks * (hd + 2) * 4 * 2)
    flops += L * 4 * rows * nh * (ctx + rows) * hd
    # norms (2 per layer), RoPE on q and k, 2 residual adds, SwiGLU
    acts += L * (2 * 8 * rows * H + 8 * rows * (qd + kvd) + 2 * 12 * rows * H + 12 * rows * F)
    # embedding rows, lm_head over every verified row (logits out)
    weights += V * H * wb
    acts += rows * H * 4 + rows * V * 4
    flops += 2 * rows * H * V
    total = weights + acts + kv
    t_mem = total / BW
    return dict(weights=weights, kv=kv, acts=acts, total=total, flops=flops, t_mem=t_mem,
                t_fp32=max(t_mem, flops / FP32_CORES), t_tc=max(t_mem, flops / BF16_TC))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ctx", type=int, default=2048, help="tokens already in the KV cache")
    ap.add_argument("--nodes", type=int, default=64, help="rows of the tree verify")
    a = ap.parse_args()
    print(f"H100 SXM: {BW / 1e12:.2f} TB/s, {BF16_TC / 1e12:.0f} TF/s BF16 tensor cores, "
          f"{FP32_CORES / 1e12:.0f} TF/s FP32 CUDA cores; context {a.ctx} tokens, F32 KV cache\n")
    print("| model | weights | step | weight MB | KV MB | other MB | GFLOP | memory-bound us "
          "| with FP32-core products us | with tensor-core products us | verify / AR (FP32 cores, tensor cores) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for model in MODELS:
        for dtype in BYTES_PER_WEIGHT:
            ar = step(model, dtype, 1, a.ctx)
            for name, rows in (("AR", 1), (f"verify {a.nodes}", a.nodes)):
                s = step(model, dtype, rows, a.ctx)
                ratio = "" if rows == 1 else f"{s['t_fp32'] / ar['t_fp32']:.2f}x, {s['t_tc'] / ar['t_tc']:.2f}x"
                print(f"| {model} | {dtype} | {name} | {s['weights'] / 1e6:.1f} | {s['kv'] / 1e6:.1f} | "
                      f"{s['acts'] / 1e6:.1f} | {s['flops'] / 1e9:.2f} | {s['t_mem'] * 1e6:.0f} | "
                      f"{s['t_fp32'] * 1e6:.0f} | {s['t_tc'] * 1e6:.0f} | {ratio} |")


if __name__ == "__main__":
    main()
