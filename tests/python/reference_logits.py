#!/usr/bin/env python3
"""Independent check of EntMTP's forward pass on a real GGUF model.

Reads the GGUF with the `gguf` package (its own dequantizer), runs a Llama
forward pass in numpy in llama.cpp's own layout (interleaved RoPE on the
permuted Q/K rows, i.e. *without* the row un-permutation EntMTP applies), and
compares with logits that `entmtp generate --ar --dump-logits` wrote:
top-1 agreement over a greedy run and the largest absolute logit difference.

usage: reference_logits.py MODEL.gguf PROMPT_IDS.json DUMP.f32 [--max-abs BOUND]
PROMPT_IDS.json is the JSON the CLI printed (--json), which holds the prompt
token ids ("prompt_ids") and the generated ids ("tokens").
"""
import json
import sys

import numpy as np
from gguf import GGUFReader
from gguf.quants import dequantize


def load(path):
    r = GGUFReader(path)
    kv = {}
    for f in r.fields.values():
        if f.types and f.types[0].name in ("STRING",):
            kv[f.name] = bytes(f.parts[f.data[0]]).decode("utf-8", "replace")
        elif len(f.data) == 1:
            kv[f.name] = f.parts[f.data[0]][0]
    tensors = {}
    for t in r.tensors:
        a = dequantize(t.data, t.tensor_type).astype(np.float32)
        shape = [int(x) for x in reversed(t.shape.tolist())]  # outermost first
        tensors[t.name] = a.reshape(shape)
    return kv, tensors


def main():
    model_path, meta_path, dump_path = sys.argv[1:4]
    bound = float(sys.argv[sys.argv.index("--max-abs") + 1]) if "--max-abs" in sys.argv else None
    kv, W = load(model_path)
    H = int(kv["llama.embedding_length"])
    L = int(kv["llama.block_count"])
    nh = int(kv["llama.attention.head_count"])
    nkv = int(kv.get("llama.attention.head_count_kv", nh))
    hd = H // nh
    eps = float(kv["llama.attention.layer_norm_rms_epsilon"])
    theta = float(kv.get("llama.rope.freq_base", 10000.0))
    emb = W["token_embd.weight"]
    out_w = W.get("output.weight", emb)

    meta = json.load(open(meta_path))
    prompt, gen = meta["prompt_ids"], meta["tokens"]
    ours = np.fromfile(dump_path, dtype=np.float32).reshape(-1, emb.shape[0])

    inv = 1.0 / theta ** (np.arange(0, hd, 2, dtype=np.float64) / hd)

    def rope_interleaved(x, pos):  # x [heads, hd]; GGUF layout: adjacent pairs
        ang = pos * inv
        c, s = np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)
        a, b = x[:, 0::2].copy(), x[:, 1::2].copy()
        out = np.empty_like(x)
        out[:, 0::2] = a * c - b * s
        out[:, 1::2] = a * s + b * c
        return out

    def rms(x, w):
        return (x / np.sqrt(np.mean(x.astype(np.float64) ** 2) + eps)).astype(np.float32) * w

    K = [[] for _ in range(L)]
    V = [[] for _ in range(L)]

    def step(tok, pos):
        x = emb[tok].copy()
        for l in range(L):
            p = f"blk.{l}."
            xn = rms(x, W[p + "attn_norm.weight"])
            q = (W[p + "attn_q.weight"] @ xn).reshape(nh, hd)
            k = (W[p + "attn_k.weight"] @ xn).reshape(nkv, hd)
            v = (W[p + "attn_v.weight"] @ xn).reshape(nkv, hd)
            q, k = rope_interleaved(q, pos), rope_interleaved(k, pos)
            K[l].append(k)
            V[l].append(v)
            Ks, Vs = np.stack(K[l]), np.stack(V[l])  # [T, nkv, hd]
            att = np.empty((nh, hd), dtype=np.float32)
            for h in range(nh):
                g = h // (nh // nkv)
                sc = Ks[:, g, :] @ q[h] / np.sqrt(hd)
                pr = np.exp(sc - sc.max())
                pr /= pr.sum()
                att[h] = pr @ Vs[:, g, :]
            x = x + W[p + "attn_output.weight"] @ att.reshape(-1)
            xn = rms(x, W[p + "ffn_norm.weight"])
            gt = W[p + "ffn_gate.weight"] @ xn
            up = W[p + "ffn_up.weight"] @ xn
            x = x + W[p + "ffn_down.weight"] @ ((gt / (1 + np.exp(-gt))) * up)
        return out_w @ rms(x, W["output_norm.weight"])

    pos = 0
    for t in prompt[:-1]:
        step(t, pos)
        pos += 1
    seq = [prompt[-1]] + gen
    n = min(len(gen), ours.shape[0])
    worst, agree = 0.0, 0
    for i in range(n):
        ref = step(seq[i], pos)
        pos += 1
        worst = max(worst, float(np.max(np.abs(ref - ours[i]))))
        agree += int(np.argmax(ref) == np.argmax(ours[i]))
        if int(np.argmax(ref)) != gen[i]:
            print(f"step {i}: reference greedy token {int(np.argmax(ref))} != EntMTP token {gen[i]}")
    print(json.dumps({"steps": n, "top1_agreement": agree, "max_abs_logit_diff": worst}))
    ok = agree == n and (bound is None or worst <= bound)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
