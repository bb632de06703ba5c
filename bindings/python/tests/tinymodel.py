"""Writers of a tiny random Llama (GGUF, through the `gguf` package) and of
Medusa / Hydra heads (safetensors) for the binding tests and examples.

    python3 tinymodel.py OUTDIR     # writes tiny.gguf, tiny_notok.gguf,
                                    # tiny_echo.gguf, medusa.safetensors,
                                    # hydra.safetensors

The model: hidden 32, 2 layers, 4 heads, 2 KV heads, FFN 48, random F32
weights under llama.cpp tensor names. With a tokenizer (the default) the
vocabulary is byte-level BPE: 3 special tokens, the 256 byte tokens, a few
merges, padded to `vocab`; without one the vocabulary can be as small as 32.
The heads draft from the model's hidden state and share its lm_head.
"""
import json
import os
import struct
import sys

import numpy as np

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
MERGES = [("Ġ", "t"), ("h", "e"), ("Ġt", "he"), ("l", "l"), ("ll", "o"), ("Ġ", "w")]
CHATML = ("{% for m in messages %}{{ '<|im_start|>' + m['role'] + '\\n' + m['content'] + "
          "'<|im_end|>\\n' }}{% endfor %}{% if add_generation_prompt %}"
          "{{ '<|im_start|>assistant\\n' }}{% endif %}")

HIDDEN, FFN, LAYERS, HEADS, KV_HEADS, CTX = 32, 48, 2, 4, 2, 256


def _byte_symbols():
    """GPT-2 byte-level alphabet: printable bytes stand for themselves, the
    others are shifted to code points from 256 up, in byte order."""
    keep = set(range(ord("!"), ord("~") + 1)) | set(range(0xA1, 0xAD)) | set(range(0xAE, 0x100))
    out, shift = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + shift)
            shift += 1
    return out


def tokenizer_vocab(vocab):
    sym = _byte_symbols()
    tokens = list(SPECIALS) + [sym[b] for b in range(256)] + [a + b for a, b in MERGES]
    if vocab < len(tokens):
        raise ValueError("a tokenizer needs vocab >= %d" % len(tokens))
    tokens += ["<pad_%d>" % i for i in range(len(tokens), vocab)]
    types = [3 if t in SPECIALS or t.startswith("<pad_") else 1 for t in tokens]
    return tokens, types


def write_gguf(path, vocab=272, tokenizer=True, seed=1, echo=False):
    """A tiny random Llama in GGUF (F32).

    With `echo`, the token embeddings all have the same norm, lm_head equals
    them, the final norm is 1 and the blocks barely touch the residual stream:
    the greedy next token is the current one, so greedy output repeats the
    last prompt token and Medusa drafts (which keep the hidden state's guess)
    are accepted whole. That exercises multi-token acceptance for sure."""
    import gguf

    rng = np.random.default_rng(seed)
    H, F, hd = HIDDEN, FFN, HIDDEN // HEADS
    s_h, s_f = 1.5 / np.sqrt(H), 1.5 / np.sqrt(F)

    def u(shape, scale, offset=0.0):
        return (offset + scale * rng.uniform(-1.0, 1.0, size=shape)).astype(np.float32)

    w = gguf.GGUFWriter(os.fspath(path), "llama")
    w.add_name("tiny-python-llama")
    w.add_context_length(CTX)
    w.add_embedding_length(H)
    w.add_feed_forward_length(F)
    w.add_block_count(LAYERS)
    w.add_head_count(HEADS)
    w.add_head_count_kv(KV_HEADS)
    w.add_rope_freq_base(10000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_rope_dimension_count(hd)
    w.add_vocab_size(vocab)
    if tokenizer:
        tokens, types = tokenizer_vocab(vocab)
        w.add_tokenizer_model("gpt2")
        w.add_tokenizer_pre("default")
        w.add_token_list(tokens)
        w.add_token_types(types)
        w.add_token_merges(["%s %s" % m for m in MERGES])
        w.add_bos_token_id(0)
        w.add_eos_token_id(2)
        w.add_chat_template(CHATML)
    quiet = 0.01 if echo else 1.0  # scale of what the blocks write back
    emb = u((vocab, H), 1.0)
    if echo:
        emb = (emb * (np.sqrt(H) / np.linalg.norm(emb, axis=1, keepdims=True))).astype(np.float32)
    w.add_tensor("token_embd.weight", emb)
    for i in range(LAYERS):
        p = "blk.%d." % i
        w.add_tensor(p + "attn_norm.weight", u((H,), 0.1, 1.0))
        w.add_tensor(p + "attn_q.weight", u((HEADS * hd, H), s_h))
        w.add_tensor(p + "attn_k.weight", u((KV_HEADS * hd, H), s_h))
        w.add_tensor(p + "attn_v.weight", u((KV_HEADS * hd, H), s_h))
        w.add_tensor(p + "attn_output.weight", u((H, HEADS * hd), s_h * quiet))
        w.add_tensor(p + "ffn_norm.weight", u((H,), 0.1, 1.0))
        w.add_tensor(p + "ffn_gate.weight", u((F, H), s_h))
        w.add_tensor(p + "ffn_up.weight", u((F, H), s_h))
        w.add_tensor(p + "ffn_down.weight", u((H, F), s_f * quiet))
    w.add_tensor("output_norm.weight", u((H,), 0.0 if echo else 0.1, 1.0))
    out = u((vocab, H), 4.0 * s_h)
    w.add_tensor("output.weight", emb.copy() if echo else out)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


def save_safetensors(path, tensors, metadata=None):
    """Write F32 tensors; uses the `safetensors` package when installed, else
    the (simple) format directly: u64 header size, JSON header, raw data."""
    tensors = {k: np.ascontiguousarray(v, dtype=np.float32) for k, v in tensors.items()}
    try:
        from safetensors.numpy import save_file
    except ImportError:
        save_file = None
    if save_file is not None:
        save_file(tensors, os.fspath(path), metadata=metadata)
        return
    header, offset = {}, 0
    if metadata:
        header["__metadata__"] = dict(metadata)
    for name, a in tensors.items():
        header[name] = {"dtype": "F32", "shape": list(a.shape),
                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    blob = json.dumps(header, separators=(",", ":")).encode()
    blob += b" " * (-len(blob) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(blob)))
        f.write(blob)
        for a in tensors.values():
            f.write(a.tobytes())


def write_medusa(path, n_heads=4, hidden=HIDDEN, seed=2):
    """Medusa heads: one ResBlock per head, no lm_head (the model's is shared)."""
    rng = np.random.default_rng(seed)
    s = 1.0 / np.sqrt(hidden)
    t = {}
    for h in range(n_heads):
        t["%d.0.linear.weight" % h] = rng.uniform(-s, s, size=(hidden, hidden))
        t["%d.0.linear.bias" % h] = rng.uniform(-0.1, 0.1, size=(hidden,))
    save_safetensors(path, t, {"format": "pt"})


def write_hydra(path, n_heads=4, hidden=HIDDEN, seed=3):
    """Grounded Hydra heads ('mlp' architecture), sharing the model's lm_head."""
    rng = np.random.default_rng(seed)
    t = {}
    for i in range(n_heads):
        n_in = hidden * (i + 2)
        s0 = 1.0 / np.sqrt(n_in)
        p = "hydra_mlp.%d.0." % i
        t[p + "linear.weight"] = rng.uniform(-s0, s0, size=(hidden, n_in))
        t[p + "linear.bias"] = rng.uniform(-0.1, 0.1, size=(hidden,))
        t[p + "res_connection.weight"] = rng.uniform(-s0, s0, size=(hidden, n_in))
        t[p + "res_connection.bias"] = rng.uniform(-0.1, 0.1, size=(hidden,))
    save_safetensors(path, t, {"format": "pt"})


def write_all(outdir):
    os.makedirs(outdir, exist_ok=True)
    paths = {
        "model": os.path.join(outdir, "tiny.gguf"),
        "model_notok": os.path.join(outdir, "tiny_notok.gguf"),
        "echo": os.path.join(outdir, "tiny_echo.gguf"),
        "medusa": os.path.join(outdir, "medusa.safetensors"),
        "hydra": os.path.join(outdir, "hydra.safetensors"),
    }
    write_gguf(paths["model"])
    write_gguf(paths["model_notok"], vocab=32, tokenizer=False)
    write_gguf(paths["echo"], vocab=64, tokenizer=False, seed=6, echo=True)
    write_medusa(paths["medusa"])
    write_hydra(paths["hydra"])
    return paths


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: tinymodel.py OUTDIR")
    for k, v in write_all(sys.argv[1]).items():
        print("%s=%s" % (k, v))
