#!/usr/bin/env python3
"""Random-weight GGUF files at real model shapes, for speed comparisons
(scripts/compare-llamacpp.sh): the tensors' bytes are random quantized
blocks (valid scales, random codes), the tokenizer is the bundled SmolLM2
file's, so llama.cpp and entmtp load the same file and run the same
arithmetic as on a real model of that shape. Written with the `gguf` PyPI
package; nothing of a real model's weights is in them.

  make_random_gguf.py SHAPE MIX OUT.gguf --vocab-from BUNDLED.gguf

SHAPE: 1b (Llama-3.2-1B: hidden 2048, 16 layers, 32 heads, 8 KV heads,
FFN 8192, tied embeddings), 3b (Llama-3.2-3B: 3072, 28, 24, 8, 8192) or
7b (Llama-2-7B: 4096, 32, 32, 32, 11008; the memory check's shape).
MIX: q4_0 and q8_0 (every matrix and the tied embedding in that type, as
llama-quantize --pure writes them) or q4_k_m (llama.cpp's Q4_K_M choice:
Q4_K, with attn_v and ffn_down in Q6_K on the layers its use_more_bits rule
picks, and the tied embedding/output in Q6_K)."""
import argparse
import os

import numpy as np
import gguf

Q = gguf.GGMLQuantizationType
SHAPES = {
    "1b": dict(hidden=2048, layers=16, heads=32, kv_heads=8, ffn=8192),
    "3b": dict(hidden=3072, layers=28, heads=24, kv_heads=8, ffn=8192),
    "7b": dict(hidden=4096, layers=32, heads=32, kv_heads=32, ffn=11008),
}


def f16_bytes(n, value, rng):
    """n half-precision scales near value (random within +-25%)."""
    v = (value * (0.75 + 0.5 * rng.random(n))).astype(np.float16)
    return v.view(np.uint8).reshape(n, 2)


def random_blocks(qtype, n_blocks, rng):
    """n_blocks random blocks of qtype as bytes [n_blocks, block_bytes]. The
    scales keep each weight's spread near 0.02 (a trained model's order)."""
    rb = lambda n: rng.integers(0, 256, size=(n_blocks, n), dtype=np.uint8)
    if qtype == Q.Q4_0:  # d, 16 bytes of nibbles: v = d * (q - 8)
        return np.concatenate([f16_bytes(n_blocks, 0.0045, rng), rb(16)], axis=1)
    if qtype == Q.Q8_0:  # d, 32 int8: v = d * q
        return np.concatenate([f16_bytes(n_blocks, 0.00027, rng), rb(32)], axis=1)
    if qtype == Q.Q4_K:  # d, dmin, 12 bytes of 6-bit scales and mins, 128 bytes of nibbles
        return np.concatenate([f16_bytes(n_blocks, 0.00015, rng), f16_bytes(n_blocks, 0.00015, rng),
                               rb(12), rb(128)], axis=1)
    if qtype == Q.Q6_K:  # ql 128, qh 64, 16 int8 scales, d: v = d * sc * (q - 32)
        sc = rng.integers(-64, 64, size=(n_blocks, 16), dtype=np.int8).view(np.uint8)
        return np.concatenate([rb(128), rb(64), sc, f16_bytes(n_blocks, 0.00003, rng)], axis=1)
    raise ValueError(f"no random blocks for {qtype.name}")


def add_matrix(w, name, n_out, n_in, qtype, rng):
    per, size = gguf.GGML_QUANT_SIZES[qtype]
    assert n_in % per == 0, (name, n_in, per)
    data = random_blocks(qtype, n_out * n_in // per, rng).reshape(n_out, n_in // per * size)
    w.add_tensor(name, data, raw_dtype=qtype)  # the byte shape; gguf derives [n_out, n_in]


def use_more_bits(i, n):  # llama.cpp's rule for Q4_K_M's attn_v and ffn_down
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def copy_tokenizer(w, src):
    r = gguf.GGUFReader(src)
    f = r.fields
    val = lambda k: f[k].contents()
    w.add_tokenizer_model(val("tokenizer.ggml.model"))
    w.add_tokenizer_pre(val("tokenizer.ggml.pre"))
    w.add_token_list(val("tokenizer.ggml.tokens"))
    w.add_token_types(val("tokenizer.ggml.token_type"))
    w.add_token_merges(val("tokenizer.ggml.merges"))
    w.add_bos_token_id(val("tokenizer.ggml.bos_token_id"))
    w.add_eos_token_id(val("tokenizer.ggml.eos_token_id"))
    w.add_unk_token_id(val("tokenizer.ggml.unknown_token_id"))
    w.add_pad_token_id(val("tokenizer.ggml.padding_token_id"))
    w.add_add_bos_token(bool(val("tokenizer.ggml.add_bos_token")))
    w.add_add_space_prefix(bool(val("tokenizer.ggml.add_space_prefix")))
    return len(val("tokenizer.ggml.tokens"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("shape", choices=sorted(SHAPES))
    ap.add_argument("mix", choices=["q4_0", "q8_0", "q4_k_m"])
    ap.add_argument("out")
    ap.add_argument("--vocab-from", required=True, help="GGUF whose tokenizer the file takes")
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()
    s = SHAPES[a.shape]
    rng = np.random.default_rng(a.seed)
    tmp = a.out + ".part"
    w = gguf.GGUFWriter(tmp, "llama")
    w.add_name(f"random {a.shape} {a.mix}")
    hd = s["hidden"] // s["heads"]
    w.add_block_count(s["layers"])
    w.add_context_length(8192)
    w.add_embedding_length(s["hidden"])
    w.add_feed_forward_length(s["ffn"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv_heads"])
    w.add_rope_dimension_count(hd)
    w.add_rope_freq_base(500000.0)
    w.add_layer_norm_rms_eps(1e-5)
    ftype = {"q4_0": gguf.LlamaFileType.MOSTLY_Q4_0, "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
             "q4_k_m": gguf.LlamaFileType.MOSTLY_Q4_K_M}[a.mix]
    w.add_file_type(ftype)
    vocab = copy_tokenizer(w, a.vocab_from)
    w.add_vocab_size(vocab)
    base = {"q4_0": Q.Q4_0, "q8_0": Q.Q8_0, "q4_k_m": Q.Q4_K}[a.mix]
    more = Q.Q6_K if a.mix == "q4_k_m" else base
    add_matrix(w, "token_embd.weight", vocab, s["hidden"], more, rng)
    H, F, L = s["hidden"], s["ffn"], s["layers"]
    kv = s["kv_heads"] * hd
    for i in range(L):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", np.ones(H, dtype=np.float32))
        w.add_tensor(p + "ffn_norm.weight", np.ones(H, dtype=np.float32))
        add_matrix(w, p + "attn_q.weight", H, H, base, rng)
        add_matrix(w, p + "attn_k.weight", kv, H, base, rng)
        add_matrix(w, p + "attn_v.weight", kv, H, more if use_more_bits(i, L) else base, rng)
        add_matrix(w, p + "attn_output.weight", H, H, base, rng)
        add_matrix(w, p + "ffn_gate.weight", F, H, base, rng)
        add_matrix(w, p + "ffn_up.weight", F, H, base, rng)
        add_matrix(w, p + "ffn_down.weight", H, F, more if use_more_bits(i, L) else base, rng)
    w.add_tensor("output_norm.weight", np.ones(H, dtype=np.float32))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(tmp, a.out)  # whole files only: an interrupted run leaves no half file behind


if __name__ == "__main__":
    main()
