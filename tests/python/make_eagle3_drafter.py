#!/usr/bin/env python3
"""Write a random-weight EAGLE-3 drafter for a target model, in the layout
SafeAILab/EAGLE and SpecForge publish: OUT/config.json (a LlamaConfig with
draft_vocab_size and SpecForge's eagle_config.eagle_aux_hidden_state_layer_ids)
and OUT/model.safetensors with exactly their tensor names:

  fc.weight                                   [H, 3 * H_target]
  midlayer.self_attn.{q,k,v}_proj.weight      [heads * head_dim, 2H] (kv: kv_heads)
  midlayer.self_attn.o_proj.weight            [H, heads * head_dim]
  midlayer.{hidden_norm,input_layernorm,post_attention_layernorm}.weight [H]
  midlayer.mlp.{gate,up}_proj.weight          [ffn, H];  down_proj [H, ffn]
  norm.weight [H]   lm_head.weight [draft_vocab, H]
  d2t [draft_vocab] int64 (target id = draft id + d2t)   t2d [vocab] bool

usage: make_eagle3_drafter.py MODEL OUT [--draft-vocab N] [--layers A,B,C]
                               [--seed S] [--own-embed] [--mismatch KIND]
MODEL is a GGUF file or a Hugging Face model directory (config.json). The
attention shape copies the target's. --mismatch writes a deliberately wrong
file (one of MISMATCHES) for the loader's error tests.
"""
import argparse
import json
import os
import struct

import numpy as np

MISMATCHES = {
    # kind: (what the loader's message must name)
    "fc": "fc.weight",
    "q_proj": "midlayer.self_attn.q_proj.weight",
    "lm_head": "lm_head.weight",
    "norm": "midlayer.hidden_norm.weight",
    "layer": "eagle_aux_hidden_state_layer_ids",
    "vocab": "vocab_size",
    "d2t_range": "d2t[",
    "t2d": "t2d",
    "missing": "midlayer.mlp.down_proj.weight",
}


def target_dims(path):
    """hidden, layers, vocab, heads, kv_heads, rope_theta, eps of the target"""
    if os.path.isdir(path):
        c = json.load(open(os.path.join(path, "config.json")))
        heads = c["num_attention_heads"]
        return (c["hidden_size"], c["num_hidden_layers"], c["vocab_size"], heads,
                c.get("num_key_value_heads", heads), c.get("rope_theta", 10000.0), c.get("rms_norm_eps", 1e-6))
    from gguf import GGUFReader
    r = GGUFReader(path)
    kv = {f.name: f.parts[f.data[0]][0] for f in r.fields.values() if len(f.data) == 1 and f.types
          and f.types[0].name not in ("STRING", "ARRAY")}
    arch = bytes(r.fields["general.architecture"].parts[r.fields["general.architecture"].data[0]]).decode()
    emb = next(t for t in r.tensors if t.name == "token_embd.weight")
    heads = int(kv[f"{arch}.attention.head_count"])
    return (int(kv[f"{arch}.embedding_length"]), int(kv[f"{arch}.block_count"]), int(emb.shape[1]), heads,
            int(kv.get(f"{arch}.attention.head_count_kv", heads)), float(kv.get(f"{arch}.rope.freq_base", 10000.0)),
            float(kv[f"{arch}.attention.layer_norm_rms_epsilon"]))


def write_safetensors(path, tensors):
    """tensors: name -> numpy array (float32, int64 or bool), in order"""
    dt = {np.dtype(np.float32): "F32", np.dtype(np.int64): "I64", np.dtype(np.bool_): "BOOL"}
    header, blobs, off = {"__metadata__": {"format": "pt"}}, [], 0
    for name, a in tensors.items():
        b = np.ascontiguousarray(a).tobytes()
        header[name] = {"dtype": dt[a.dtype], "shape": list(a.shape), "data_offsets": [off, off + len(b)]}
        blobs.append(b)
        off += len(b)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("out")
    ap.add_argument("--draft-vocab", type=int, default=0, help="draft vocabulary size (default: the target's)")
    ap.add_argument("--layers", default="", help="target layers read, e.g. 1,14,26 (default: SafeAILab's choice)")
    ap.add_argument("--ffn", type=int, default=0, help="intermediate size (default: 2 x hidden)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--own-embed", action="store_true", help="write the drafter's own embed_tokens")
    ap.add_argument("--mismatch", choices=sorted(MISMATCHES), help="write a file the loader must reject")
    a = ap.parse_args()
    H, n_layers, V, heads, kv_heads, theta, eps = target_dims(a.model)
    hd = H // heads
    ffn = a.ffn or 2 * H
    Vd = a.draft_vocab or V
    rng = np.random.default_rng(a.seed)

    def mat(rows, cols, scale=None):
        return (rng.uniform(-1, 1, (rows, cols)) * (scale or 1.0 / np.sqrt(cols))).astype(np.float32)

    def norm():
        return (1.0 + 0.1 * rng.uniform(-1, 1, H)).astype(np.float32)

    m = a.mismatch
    t = {}
    t["fc.weight"] = mat(H, 3 * H + (H if m == "fc" else 0))
    t["midlayer.self_attn.q_proj.weight"] = mat(heads * hd, 2 * H - (1 if m == "q_proj" else 0))
    t["midlayer.self_attn.k_proj.weight"] = mat(kv_heads * hd, 2 * H)
    t["midlayer.self_attn.v_proj.weight"] = mat(kv_heads * hd, 2 * H)
    t["midlayer.self_attn.o_proj.weight"] = mat(H, heads * hd)
    t["midlayer.hidden_norm.weight"] = norm()[: H - 1] if m == "norm" else norm()
    t["midlayer.input_layernorm.weight"] = norm()
    t["midlayer.post_attention_layernorm.weight"] = norm()
    t["midlayer.mlp.gate_proj.weight"] = mat(ffn, H)
    t["midlayer.mlp.up_proj.weight"] = mat(ffn, H)
    if m != "missing":
        t["midlayer.mlp.down_proj.weight"] = mat(H, ffn)
    t["norm.weight"] = norm()
    t["lm_head.weight"] = mat(Vd + (3 if m == "lm_head" else 0), H, 4.0 / np.sqrt(H))
    if a.own_embed:
        t["embed_tokens.weight"] = mat(V, H, 1.0)
    # the draft vocabulary: a random subset of the target's, in id order as SpecForge's frequency cut keeps it
    targets = np.arange(V) if Vd == V else np.sort(rng.choice(V, Vd, replace=False))
    d2t = (targets - np.arange(Vd)).astype(np.int64)
    if m == "d2t_range":
        d2t[-1] = V  # maps past the vocabulary
    t2d = np.zeros(V, dtype=np.bool_)
    t2d[targets] = True
    if m == "t2d":
        t2d[targets[0]] = False
    t["d2t"] = d2t
    t["t2d"] = t2d

    layers = [1, n_layers // 2 - 1, n_layers - 4]  # SafeAILab's choice (inputs of 2, N/2, N-3)
    if not layers[0] < layers[1] < layers[2]:  # too shallow a target: its last three layers
        layers = list(range(n_layers))[-3:]
    if a.layers:
        layers = [int(x) for x in a.layers.split(",")]
    if m == "layer":
        layers[2] = n_layers  # one past the last layer
    config = {
        "architectures": ["LlamaForCausalLMEagle3"], "model_type": "llama", "hidden_size": H,
        "intermediate_size": ffn, "num_hidden_layers": 1, "num_attention_heads": heads,
        "num_key_value_heads": kv_heads, "head_dim": hd, "vocab_size": V + (7 if m == "vocab" else 0),
        "draft_vocab_size": Vd, "rms_norm_eps": eps, "rope_theta": theta, "rope_scaling": None,
        "max_position_embeddings": 2048, "hidden_act": "silu", "tie_word_embeddings": False,
        "torch_dtype": "float32", "eagle_config": {"eagle_aux_hidden_state_layer_ids": layers},
    }
    os.makedirs(a.out, exist_ok=True)
    with open(os.path.join(a.out, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    write_safetensors(os.path.join(a.out, "model.safetensors"), t)


if __name__ == "__main__":
    main()
