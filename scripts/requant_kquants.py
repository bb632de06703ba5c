#!/usr/bin/env python3
"""A K-quant copy of a real GGUF model: every matrix of a block whose rows
are whole 256-value super-blocks, dequantized by the `gguf` package and
requantized by tests/python/kquants.py into llama.cpp's Q4_K_M choice (Q6_K
for attn_v and ffn_down on the layers its use_more_bits rule picks, Q4_K
for the rest); every other tensor and all metadata copied as they are. On
the bundled SmolLM2-135M (hidden 576, FFN 1536) that is each layer's
ffn_down: real activations (the SwiGLU outputs) through the K-quant
kernels, for accuracy checks such as scripts/prompt_bits_agreement.py.
With --type Q4_0 or Q8_0, every matrix of a block is requantized to that
type instead (the `gguf` package's own quantizer; rows of whole 32-value
blocks): a Q4_0 or Q8_0 copy of the same model for the same checks.

  python3 scripts/requant_kquants.py IN.gguf OUT.gguf [--type Q4_0|Q8_0]
"""
import os
import sys

import gguf
import numpy as np
from gguf.quants import dequantize

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "tests", "python"))
import kquants  # noqa: E402

Q = gguf.GGMLQuantizationType


def use_more_bits(i, n):  # llama.cpp's rule for Q4_K_M's attn_v and ffn_down
    return i < n // 8 or i >= 7 * n // 8 or (i - n // 8) % 3 == 2


def main(src, out, flat=None):
    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(out + ".part", arch)
    for k, f in r.fields.items():
        if k.startswith("GGUF.") or k == "general.architecture":
            continue
        vt = f.types[0]
        w.add_key_value(k, f.contents(), vt, sub_type=f.types[-1] if vt == gguf.GGUFValueType.ARRAY else None)
    n_layers = r.fields[f"{arch}.block_count"].contents()
    n = 0
    for t in r.tensors:
        n_in, *rest = [int(x) for x in t.shape]  # ggml order: [n_in, n_out]
        if flat and len(rest) == 1 and n_in % 32 == 0 and t.name.startswith("blk."):
            x = dequantize(t.data, t.tensor_type).reshape(rest[0], n_in).astype(np.float32)
            w.add_tensor(t.name, gguf.quants.quantize(x, getattr(Q, flat)), raw_dtype=getattr(Q, flat))
            n += 1
        elif not flat and len(rest) == 1 and n_in % kquants.QK_K == 0 and t.name.startswith("blk."):
            layer = int(t.name.split(".")[1])
            more = ("ffn_down" in t.name or "attn_v" in t.name) and use_more_bits(layer, n_layers)
            name = "Q6_K" if more else "Q4_K"
            x = dequantize(t.data, t.tensor_type).reshape(rest[0], n_in).astype(np.float32)
            w.add_tensor(t.name, kquants.quantize_k(x, name), raw_dtype=getattr(Q, name))
            n += 1
        else:
            w.add_tensor(t.name, t.data, raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    os.replace(out + ".part", out)
    print(f"requant_kquants: {n} matrices in {flat or 'K-quants'}, {out}")


if __name__ == "__main__":
    args = sys.argv[1:]
    flat = None
    if len(args) == 4 and args[2] == "--type" and args[3] in ("Q4_0", "Q8_0"):
        flat = args[3]
        args = args[:2]
    if len(args) != 2:
        sys.exit(__doc__)
    main(args[0], args[1], flat)
