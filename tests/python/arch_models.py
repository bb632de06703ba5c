#!/usr/bin/env python3
"""Small random-weight GGUF models, one per supported architecture, for the
comparison with llama.cpp (scripts/record-model-fixtures.sh records
llama.cpp's tokens and logits; tests/python/run_arch_check.sh compares
EntMTP's with them).

  arch_models.py write ARCH TYPE OUT.gguf TOKENIZER.gguf [CHAT_TEMPLATE]
      ARCH: llama3 | qwen2 | qwen3 | phi3 | gemma2 | gemma3; TYPE: f32 | q8_0
      K-quant models (hidden 256, rows of whole 256-value blocks):
      ARCH qwen2k (FFN 512), llama3k (FFN 640: ffn_down's rows are not
      whole blocks and fall back as llama.cpp's quantizer does);
      TYPE q5_0 | q5_1 | q4_k | q5_k | q6_k | q4_k_m (llama.cpp's Q4_K_M mix)
      Sliding windows shorter than the prompt: ARCH gemma2w | gemma3w (window 8)
  arch_models.py write-vocab ARCH OUT.gguf VOCAB.gguf [TEMPLATE.jinja|-] [KEY=0|1|none ...]
      an F32 model whose tokenizer is VOCAB.gguf's as it is (llama.cpp's
      models/ggml-vocab-*.gguf: SentencePiece or byte-level BPE, its special
      ids and add_* flags), TEMPLATE as its chat template (in place of
      VOCAB.gguf's own; "-": VOCAB.gguf's, if any) and tokenizer.ggml.KEY
      set (1/0) or removed (none), e.g. add_eos_token=1
  arch_models.py cases                   the recorded ARCH TYPE pairs, one a line
  arch_models.py write-hf ARCH MODEL.gguf OUTDIR
      the same F32 model as a Hugging Face directory (config.json,
      model.safetensors, tokenizer.json); ARCH "mistral" converts the phi3
      GGUF (same rotate-half layout) into Mistral's separate projections;
      gemma2/gemma3 (and the windowed gemma2w/gemma3w) write HF Gemma's
      norms (w - 1) and names (pre/post_feedforward_layernorm)
  arch_models.py heads OUT.safetensors [HIDDEN]   random Medusa heads (FasterDecoding layout)
  arch_models.py heads-medusa2 OUT.safetensors MODEL.gguf   Medusa-2 layout, own lm_heads
  arch_models.py prompt                  the fixed prompt, on stdout
  arch_models.py compare OURS.json OURS.f32 FIXTURE.json FIXTURE.f32 MAX_ABS
      (MAX_ABS as "P%": P percent of the range of llama.cpp's logits)

The weights come from numpy's PCG64 with a fixed seed, so the file is the
same on every machine (the recorded llama.cpp logits stay valid). The
vocabulary (49152 byte-level BPE tokens, merges, special tokens) is copied
from the bundled SmolLM2 GGUF, re-labelled with the family's pre-tokenizer
type, so tokenization is checked on a real vocabulary.
"""
import json
import sys
import zlib

import numpy as np
import gguf
from gguf import GGUFReader, GGUFWriter
from gguf.quants import quantize

from kquants import quantize_k

HIDDEN, LAYERS, HEADS, KV_HEADS, FFN, CTX = 64, 2, 4, 2, 128, 4096
# letters, an upper-case contraction, digits, accents, spaces, a tab, newlines
# and a special token: where the families' pre-tokenizers differ
PROMPT = "Hello world! IT'S 2024: 12345 apples, caf\u00e9.\n  Indented\tline <|im_start|>user"

# What each test architecture is: the GGUF architecture name, its
# pre-tokenizer, head_dim, and the features it switches on.
ARCHS = {
    "llama3": dict(arch="llama", pre="llama-bpe", head_dim=16, untied=True, rope_freqs=True,
                   theta=500000.0),
    "qwen2": dict(arch="qwen2", pre="qwen2", head_dim=16, qkv_bias=True, theta=1000000.0),
    "qwen3": dict(arch="qwen3", pre="qwen2", head_dim=32, qk_norm=True, untied=True,
                  theta=1000000.0),
    "phi3": dict(arch="phi3", pre="smollm", head_dim=16, fused=True, untied=True, theta=10000.0,
                 sliding_window=2047),
    # 4 layers: Gemma 2 alternates local/global; Gemma 3 has one global in 6
    # (layers 0-3 local here, with RoPE base 10000 against the global 1e6)
    "gemma2": dict(arch="gemma2", pre="smollm", head_dim=16, gemma=True, theta=10000.0, layers=4,
                   sliding_window=4096, softcap=(50.0, 30.0)),
    "gemma3": dict(arch="gemma3", pre="smollm", head_dim=32, gemma=True, qk_norm=True, theta=1000000.0,
                   layers=6, sliding_window=512),
    # sliding windows shorter than the prompt (31 tokens): the local layers'
    # attention_window op against llama.cpp's
    "gemma2w": dict(arch="gemma2", pre="smollm", head_dim=16, gemma=True, theta=10000.0, layers=4,
                    sliding_window=8, softcap=(50.0, 30.0)),
    "gemma3w": dict(arch="gemma3", pre="smollm", head_dim=32, gemma=True, qk_norm=True, theta=1000000.0,
                    layers=6, sliding_window=8),
    # 8 layers: deep enough for an EAGLE-3 drafter's three layers (1, 3, 4)
    "qwen2d": dict(arch="qwen2", pre="qwen2", head_dim=16, qkv_bias=True, theta=1000000.0, layers=8),
    # K-quants: rows must be whole 256-value blocks
    "qwen2k": dict(arch="qwen2", pre="qwen2", head_dim=64, qkv_bias=True, theta=1000000.0,
                   hidden=256, ffn=512),
    "llama3k": dict(arch="llama", pre="llama-bpe", head_dim=64, untied=True, rope_freqs=True,
                    theta=500000.0, hidden=256, ffn=640),
}

# (test model, weight type) pairs with recorded llama.cpp fixtures
CASES = [(a, t) for a in ("llama3", "qwen2", "qwen3", "phi3", "gemma2", "gemma3") for t in ("f32", "q8_0")]
CASES += [("qwen2k", t) for t in ("q5_0", "q5_1", "q4_k", "q5_k", "q6_k", "q4_k_m")]
CASES += [("llama3k", "q4_k_m")]
CASES += [("gemma2w", "f32"), ("gemma3w", "f32")]

GT = gguf.GGMLQuantizationType
FILE_TYPES = {"f32": gguf.LlamaFileType.ALL_F32, "q8_0": gguf.LlamaFileType.MOSTLY_Q8_0,
              "q5_0": gguf.LlamaFileType.MOSTLY_Q5_0, "q5_1": gguf.LlamaFileType.MOSTLY_Q5_1,
              "q4_k": gguf.LlamaFileType.MOSTLY_Q4_K_S, "q5_k": gguf.LlamaFileType.MOSTLY_Q5_K_S,
              "q6_k": gguf.LlamaFileType.MOSTLY_Q6_K, "q4_k_m": gguf.LlamaFileType.MOSTLY_Q4_K_M}
# a K-quant tensor whose rows are not whole blocks gets llama.cpp's fallback type
K_FALLBACK = {GT.Q4_K: GT.Q5_0, GT.Q5_K: GT.Q5_1, GT.Q6_K: GT.Q8_0}


def tensor_type(qtype, tname, layer, n_layers, tied):
    """The weight type of a 2-D tensor in a file of type qtype; for Q4_K_M,
    llama.cpp's rules (llama-quant.cpp): output (or the tied embedding) Q6_K,
    attn_v and ffn_down Q6_K in the 'more bits' layers, the rest Q4_K."""
    if qtype != "q4_k_m":
        return {"f32": GT.F32, "q8_0": GT.Q8_0, "q5_0": GT.Q5_0, "q5_1": GT.Q5_1, "q4_k": GT.Q4_K,
                "q5_k": GT.Q5_K, "q6_k": GT.Q6_K}[qtype]
    if tname == "output.weight" or (tied and tname == "token_embd.weight"):
        return GT.Q6_K
    if layer is not None and any(k in tname for k in ("attn_v.", "ffn_down.")):
        more = layer < n_layers // 8 or layer >= 7 * n_layers // 8 or (layer - n_layers // 8) % 3 == 2
        return GT.Q6_K if more else GT.Q4_K
    return GT.Q4_K


def llama3_rope_divisors(n_rot, theta, factor=8.0, low=1.0, high=4.0, orig=8192):
    """Per-frequency divisors as llama.cpp's converter writes rope_freqs.weight."""
    out = []
    for i in range(0, n_rot, 2):
        freq = 1.0 / theta ** (i / n_rot)
        wavelen = 2 * np.pi / freq
        if wavelen < orig / high:
            out.append(1.0)
        elif wavelen > orig / low:
            out.append(factor)
        else:
            smooth = (orig / wavelen - low) / (high - low)
            out.append(1.0 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def copy_tokenizer(w, tok_path, pre):
    r = GGUFReader(tok_path)

    def field(name):
        f = r.fields[name]
        return f

    def strings(name):
        f = field(name)
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    def scalar(name):
        f = field(name)
        return f.parts[f.data[0]][0]

    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(pre)
    w.add_token_list(strings("tokenizer.ggml.tokens"))
    tt = field("tokenizer.ggml.token_type")
    w.add_token_types([int(tt.parts[i][0]) for i in tt.data])
    w.add_token_merges(strings("tokenizer.ggml.merges"))
    w.add_bos_token_id(int(scalar("tokenizer.ggml.bos_token_id")))
    w.add_eos_token_id(int(scalar("tokenizer.ggml.eos_token_id")))
    w.add_add_bos_token(False)
    return len(strings("tokenizer.ggml.tokens"))


def copy_vocab(w, vocab_path, flags, own_template):
    """Every tokenizer.* key of a vocabulary GGUF (llama.cpp's
    models/ggml-vocab-*.gguf) as it is: model, pre, tokens, scores, types,
    merges, special ids, add_* flags, chat template; then `flags`
    ({"add_bos_token": True, ...}: tokenizer.ggml.<key> set, None: removed)."""
    r = GGUFReader(vocab_path)
    n_vocab = 0
    for name, f in r.fields.items():
        if not name.startswith("tokenizer.") or name.removeprefix("tokenizer.ggml.") in flags:
            continue
        if name == "tokenizer.chat_template" and own_template:
            continue
        vtype = f.types[0]
        sub = f.types[1] if vtype == gguf.GGUFValueType.ARRAY else None
        w.add_key_value(name, f.contents(), vtype, sub)
        if name == "tokenizer.ggml.tokens":
            n_vocab = len(f.data)
    for key, value in flags.items():
        if value is not None:
            w.add_bool(f"tokenizer.ggml.{key}", value)
    return n_vocab


def write(name, qtype, out, tok_path, chat_template=None, vocab_flags=None):
    """vocab_flags None: SmolLM2's vocabulary relabelled (copy_tokenizer);
    a dict: tok_path's tokenizer copied as it is (copy_vocab)."""
    spec = ARCHS[name]
    rng = np.random.Generator(np.random.PCG64(zlib.crc32(name.encode())))  # stable per name
    hd = spec["head_dim"]
    w = GGUFWriter(out, spec["arch"])
    a = spec["arch"]
    # (a name holding "phi3" makes llama.cpp apply Phi-3's special-token
    # attributes, which look up tokens this vocabulary does not have)
    w.add_name(f"entmtp-random-{name.replace('phi3', 'ph3')}")
    if vocab_flags is None:
        vocab = copy_tokenizer(w, tok_path, spec["pre"])
    else:
        vocab = copy_vocab(w, tok_path, vocab_flags, chat_template is not None)
    if chat_template is not None:
        w.add_chat_template(chat_template)
    w.add_context_length(CTX)
    HIDDEN, FFN = spec.get("hidden", globals()["HIDDEN"]), spec.get("ffn", globals()["FFN"])
    w.add_embedding_length(HIDDEN)
    n_layers = spec.get("layers", LAYERS)
    w.add_block_count(n_layers)
    w.add_feed_forward_length(FFN)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_rope_dimension_count(hd)
    w.add_rope_freq_base(spec["theta"])
    w.add_layer_norm_rms_eps(1e-6)
    if "sliding_window" in spec:
        w.add_sliding_window(spec["sliding_window"])
    if "softcap" in spec:
        w.add_float32(f"{a}.attn_logit_softcapping", spec["softcap"][0])
        w.add_float32(f"{a}.final_logit_softcapping", spec["softcap"][1])
    w.add_file_type(FILE_TYPES[qtype])
    tied = not spec.get("untied")

    def mat(rows, cols, scale=None):
        s = scale if scale is not None else 1.0 / np.sqrt(cols)
        return (rng.standard_normal((rows, cols)) * s).astype(np.float32)

    def vec(n, base=1.0, spread=0.1):
        return (base + spread * rng.standard_normal(n)).astype(np.float32)

    def add(tname, arr):
        t = GT.F32 if arr.ndim != 2 else tensor_type(qtype, tname, layer_of(tname), n_layers, tied)
        if t in K_FALLBACK and arr.shape[1] % 256:
            t = K_FALLBACK[t]
        if t != GT.F32 and arr.shape[1] % 32:
            t = GT.F32
        if t == GT.F32:
            w.add_tensor(tname, arr)
            return
        q = quantize_k(arr, t.name) if t in K_FALLBACK else quantize(arr, t)
        w.add_tensor(tname, q, raw_shape=q.shape, raw_dtype=t)

    def layer_of(tname):
        return int(tname.split(".")[1]) if tname.startswith("blk.") else None

    q_rows, kv_rows = HEADS * hd, KV_HEADS * hd
    add("token_embd.weight", mat(vocab, HIDDEN, 1.0))
    for l in range(n_layers):
        p = f"blk.{l}."
        add(p + "attn_norm.weight", vec(HIDDEN))
        if spec.get("fused"):
            add(p + "attn_qkv.weight", mat(q_rows + 2 * kv_rows, HIDDEN))
        else:
            add(p + "attn_q.weight", mat(q_rows, HIDDEN))
            add(p + "attn_k.weight", mat(kv_rows, HIDDEN))
            add(p + "attn_v.weight", mat(kv_rows, HIDDEN))
        if spec.get("qkv_bias"):
            add(p + "attn_q.bias", vec(q_rows, 0.0, 0.5))
            add(p + "attn_k.bias", vec(kv_rows, 0.0, 0.5))
            add(p + "attn_v.bias", vec(kv_rows, 0.0, 0.5))
        if spec.get("qk_norm"):
            add(p + "attn_q_norm.weight", vec(hd))
            add(p + "attn_k_norm.weight", vec(hd))
        add(p + "attn_output.weight", mat(HIDDEN, q_rows))
        add(p + "ffn_norm.weight", vec(HIDDEN))
        if spec.get("gemma"):
            add(p + "post_attention_norm.weight", vec(HIDDEN))
            add(p + "post_ffw_norm.weight", vec(HIDDEN))
        if spec.get("fused"):
            add(p + "ffn_up.weight", mat(2 * FFN, HIDDEN))
        else:
            add(p + "ffn_gate.weight", mat(FFN, HIDDEN))
            add(p + "ffn_up.weight", mat(FFN, HIDDEN))
        add(p + "ffn_down.weight", mat(HIDDEN, FFN))
    add("output_norm.weight", vec(HIDDEN))
    if spec.get("untied"):
        add("output.weight", mat(vocab, HIDDEN, 0.5))
    if spec.get("rope_freqs"):
        add("rope_freqs.weight", llama3_rope_divisors(hd, spec["theta"]))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def write_safetensors(path, tensors):
    header, offset = {"__metadata__": {"format": "pt"}}, 0
    for name, a in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little"))
        f.write(text)
        for a in tensors.values():
            f.write(np.ascontiguousarray(a).tobytes())


def gguf_to_hf_permute(w, heads):
    """Inverse of llama.cpp's Q/K row permutation (interleaved -> rotate-half)."""
    rows = w.shape[0]
    hd = rows // heads
    return w.reshape(heads, hd // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


def write_hf(name, gguf_path, out):
    import os
    os.makedirs(out, exist_ok=True)
    src = "phi3" if name == "mistral" else name
    spec = ARCHS[src]
    r = GGUFReader(gguf_path)
    W = {t.name: np.array(t.data, dtype=np.float32).reshape([int(x) for x in reversed(t.shape.tolist())])
         for t in r.tensors}
    hd = spec["head_dim"]
    q_rows, kv_rows = HEADS * hd, KV_HEADS * hd
    T = {"model.embed_tokens.weight": W["token_embd.weight"], "model.norm.weight": W["output_norm.weight"]}
    if "output.weight" in W:
        T["lm_head.weight"] = W["output.weight"]
    gemma = spec.get("gemma", False)
    # HF Gemma's RMSNorm scales by 1 + w; GGUF holds 1 + w (exact in float32
    # for weights in [0.5, 2]: loading adds the 1 back bit for bit)
    norm = (lambda a: (a - np.float32(1)).astype(np.float32)) if gemma else (lambda a: a)
    T["model.norm.weight"] = norm(W["output_norm.weight"])
    n_layers = spec.get("layers", LAYERS)
    for l in range(n_layers):
        g, h = f"blk.{l}.", f"model.layers.{l}."
        T[h + "input_layernorm.weight"] = norm(W[g + "attn_norm.weight"])
        if gemma:
            T[h + "post_attention_layernorm.weight"] = norm(W[g + "post_attention_norm.weight"])
            T[h + "pre_feedforward_layernorm.weight"] = norm(W[g + "ffn_norm.weight"])
            T[h + "post_feedforward_layernorm.weight"] = norm(W[g + "post_ffw_norm.weight"])
        else:
            T[h + "post_attention_layernorm.weight"] = W[g + "ffn_norm.weight"]
        T[h + "self_attn.o_proj.weight"] = W[g + "attn_output.weight"]
        T[h + "mlp.down_proj.weight"] = W[g + "ffn_down.weight"]
        if name == "phi3":
            T[h + "self_attn.qkv_proj.weight"] = W[g + "attn_qkv.weight"]
            T[h + "mlp.gate_up_proj.weight"] = W[g + "ffn_up.weight"]
            continue
        if src == "phi3":  # mistral: the fused tensors split
            qkv, gu = W[g + "attn_qkv.weight"], W[g + "ffn_up.weight"]
            q, k, v = qkv[:q_rows], qkv[q_rows:q_rows + kv_rows], qkv[q_rows + kv_rows:]
            gate, up = gu[:FFN], gu[FFN:]
        else:
            q, k, v = W[g + "attn_q.weight"], W[g + "attn_k.weight"], W[g + "attn_v.weight"]
            gate, up = W[g + "ffn_gate.weight"], W[g + "ffn_up.weight"]
            if spec["arch"] == "llama":
                q, k = gguf_to_hf_permute(q, HEADS), gguf_to_hf_permute(k, KV_HEADS)
        T[h + "self_attn.q_proj.weight"], T[h + "self_attn.k_proj.weight"] = q, k
        T[h + "self_attn.v_proj.weight"] = v
        T[h + "mlp.gate_proj.weight"], T[h + "mlp.up_proj.weight"] = gate, up
        for p in ("q", "k", "v"):
            if g + f"attn_{p}.bias" in W:
                T[h + f"self_attn.{p}_proj.bias"] = W[g + f"attn_{p}.bias"]
        if spec.get("qk_norm"):
            T[h + "self_attn.q_norm.weight"] = norm(W[g + "attn_q_norm.weight"])
            T[h + "self_attn.k_norm.weight"] = norm(W[g + "attn_k_norm.weight"])
    write_safetensors(os.path.join(out, "model.safetensors"), T)
    model_type = {"gemma3": "gemma3_text"}.get(spec["arch"], spec["arch"]) if gemma else {"llama3": "llama"}.get(name, name)
    cfg = {"model_type": model_type, "hidden_size": HIDDEN, "intermediate_size": FFN,
           "num_hidden_layers": n_layers, "num_attention_heads": HEADS, "num_key_value_heads": KV_HEADS,
           "head_dim": hd, "vocab_size": int(W["token_embd.weight"].shape[0]), "max_position_embeddings": CTX,
           "rope_theta": spec["theta"], "rms_norm_eps": 1e-6, "tie_word_embeddings": "output.weight" not in W}
    if name == "llama3":
        cfg["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                               "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    if name == "qwen2":
        cfg.update(sliding_window=CTX, use_sliding_window=False)
    if src == "phi3":
        cfg["sliding_window"] = spec["sliding_window"]
    if gemma:
        cfg.update(hidden_activation="gelu_pytorch_tanh", query_pre_attn_scalar=hd,
                   sliding_window=spec["sliding_window"], tie_word_embeddings=True)
        if spec["arch"] == "gemma2":
            cfg.update(attn_logit_softcapping=spec["softcap"][0], final_logit_softcapping=spec["softcap"][1])
        else:
            cfg.update(sliding_window_pattern=6, rope_local_base_freq=10000.0, attn_logit_softcapping=None,
                       final_logit_softcapping=None)
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=1)
    # tokenizer.json: the GGUF's byte-level BPE vocabulary with GPT-2's
    # pre-tokenizer (the comparison prompt splits the same under every family's)
    toks = [bytes(r.fields["tokenizer.ggml.tokens"].parts[i]).decode() for i in r.fields["tokenizer.ggml.tokens"].data]
    merges = [bytes(r.fields["tokenizer.ggml.merges"].parts[i]).decode() for i in r.fields["tokenizer.ggml.merges"].data]
    tt = r.fields["tokenizer.ggml.token_type"]
    types = [int(tt.parts[i][0]) for i in tt.data]
    added = [{"id": i, "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, (t, ty) in enumerate(zip(toks, types)) if ty == 3]
    tok = {"version": "1.0", "added_tokens": added, "normalizer": None,
           "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
           "post_processor": None,
           "decoder": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
           "model": {"type": "BPE", "vocab": {t: i for i, t in enumerate(toks)}, "merges": merges}}
    json.dump(tok, open(os.path.join(out, "tokenizer.json"), "w"))


def write_medusa2_heads(out, model_gguf, n_heads=2):
    """Medusa-2 heads as a Medusa-2 checkpoint holds them: 'medusa_head.'
    prefix, each head with its own lm_head ('{head}.1.weight'), here a copy
    of the model's (so drafts behave as Medusa-1's)."""
    r = GGUFReader(model_gguf)
    W = {t.name: t for t in r.tensors}
    out_w = W.get("output.weight", W["token_embd.weight"])
    lm = np.array(out_w.data, dtype=np.float32).reshape([int(x) for x in reversed(out_w.shape.tolist())])
    rng = np.random.Generator(np.random.PCG64(98))
    tensors = {}
    for h in range(n_heads):
        tensors[f"medusa_head.{h}.0.linear.weight"] = (0.02 * rng.standard_normal((HIDDEN, HIDDEN))).astype(np.float32)
        tensors[f"medusa_head.{h}.0.linear.bias"] = (0.02 * rng.standard_normal(HIDDEN)).astype(np.float32)
        tensors[f"medusa_head.{h}.1.weight"] = lm
    write_safetensors(out, tensors)


def write_medusa_heads(out, n_heads=4, hidden=HIDDEN):
    """Medusa-1 heads sharing the model's lm_head, in the FasterDecoding
    safetensors layout ('{head}.0.linear.weight/bias'). Small weights: each
    head's ResBlock is close to the identity, so it guesses "the base model's
    token again": where a random model repeats a token (the qwen2 one does),
    drafts get accepted and the check covers the commit of accepted tree
    nodes, not only the root."""
    rng = np.random.Generator(np.random.PCG64(99))
    tensors = {}
    for h in range(n_heads):
        tensors[f"{h}.0.linear.weight"] = (0.02 * rng.standard_normal((hidden, hidden))).astype(np.float32)
        tensors[f"{h}.0.linear.bias"] = (0.02 * rng.standard_normal(hidden)).astype(np.float32)
    write_safetensors(out, tensors)


def compare(ours_json, ours_f32, fix_json, fix_f32, bound):
    ours, fix = json.load(open(ours_json, encoding="utf-8")), json.load(open(fix_json))
    ids_ours, ids_ref = ours["prompt_ids"], fix["ids"]
    a = np.fromfile(ours_f32, dtype=np.float32)
    b = np.fromfile(fix_f32, dtype=np.float32)
    ok = True
    if ids_ours != ids_ref:
        print(f"token ids differ:\n  entmtp    {ids_ours}\n  llama.cpp {ids_ref}")
        ok = False
    a = a[: b.size]  # the logits before the first generated token
    if a.size != b.size:
        print(f"logit count differs: entmtp {a.size}, llama.cpp {b.size}")
        return False
    diff = float(np.max(np.abs(a - b)))
    if isinstance(bound, str) and bound.endswith("%"):  # a share of llama.cpp's logit range
        bound = float(bound[:-1]) / 100 * float(b.max() - b.min())
    top_a, top_b = int(np.argmax(a)), int(np.argmax(b))
    print(json.dumps({"n_ids": len(ids_ref), "top1_entmtp": top_a, "top1_llamacpp": top_b,
                      "max_abs_diff": diff, "bound": round(bound, 6),
                      "logit_range": [float(b.min()), float(b.max())]}))
    if top_a != top_b:
        print("top-1 differs")
        ok = False
    if not diff <= bound:
        print(f"max abs logit difference {diff:g} exceeds {bound:g}")
        ok = False
    return ok


def main():
    if len(sys.argv) == 2 and sys.argv[1] == "prompt":
        sys.stdout.write(PROMPT)
    elif len(sys.argv) == 2 and sys.argv[1] == "cases":
        print("\n".join(f"{a} {t}" for a, t in CASES))
    elif len(sys.argv) == 5 and sys.argv[1] == "write-hf":
        write_hf(sys.argv[2], sys.argv[3], sys.argv[4])
    elif len(sys.argv) == 4 and sys.argv[1] == "heads-medusa2":
        write_medusa2_heads(sys.argv[2], sys.argv[3])
    elif len(sys.argv) in (3, 4) and sys.argv[1] == "heads":
        write_medusa_heads(sys.argv[2], hidden=int(sys.argv[3]) if len(sys.argv) == 4 else HIDDEN)
    elif len(sys.argv) in (6, 7) and sys.argv[1] == "write":
        write(*sys.argv[2:])
    elif len(sys.argv) >= 5 and sys.argv[1] == "write-vocab":
        # write-vocab ARCH OUT.gguf VOCAB.gguf [TEMPLATE.jinja|-] [KEY=0|1|none ...]
        tmpl = None
        if len(sys.argv) > 5 and sys.argv[5] != "-":
            tmpl = open(sys.argv[5], encoding="utf-8").read()
        flags = {}
        for kv in sys.argv[6:]:
            k, v = kv.split("=")
            flags[k] = None if v == "none" else v == "1"
        write(sys.argv[2], "f32", sys.argv[3], sys.argv[4], tmpl, flags)
    elif len(sys.argv) == 7 and sys.argv[1] == "compare":
        bound = sys.argv[6] if sys.argv[6].endswith("%") else float(sys.argv[6])
        sys.exit(0 if compare(*sys.argv[2:6], bound) else 1)
    else:
        print(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
