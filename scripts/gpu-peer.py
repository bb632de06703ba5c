#!/usr/bin/env python3
"""The GPU peer: Hugging Face transformers on PyTorch, greedy decoding at the
same shapes as `entmtp bench --synthetic` (random weights: no kernel's speed
depends on the values), so stage 2 of scripts/gpu-check.sh sets our AR
tokens/s beside a peer's measured on the same device in the same call.

  python3 scripts/gpu-peer.py --shape llama-7b --context 256 --tokens 64 [--compile]

Prints one JSON line: decode tokens/s (prefill excluded: a generate() of one
token is timed separately and subtracted), the cache kind, whether the
forward was compiled, the versions and the device. Exit 77 when torch or
transformers is missing (the dry run on a machine without them).
"""
import argparse
import json
import os
import sys
import time

SHAPES = {  # as src/model/synthetic.c
    "llama-7b": dict(hidden_size=4096, num_hidden_layers=32, num_attention_heads=32,
                     num_key_value_heads=32, intermediate_size=11008, vocab_size=32000,
                     max_position_embeddings=4096, rope_theta=10000.0, tie_word_embeddings=False),
    "smollm2-135m": dict(hidden_size=576, num_hidden_layers=30, num_attention_heads=9,
                         num_key_value_heads=3, intermediate_size=1536, vocab_size=49152,
                         max_position_embeddings=8192, rope_theta=100000.0, tie_word_embeddings=True),
    "tiny": dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                 intermediate_size=128, vocab_size=512, max_position_embeddings=1024,
                 rope_theta=10000.0, tie_word_embeddings=False),
}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", choices=sorted(SHAPES), default="llama-7b")
    ap.add_argument("--context", type=int, default=256, help="prompt tokens before decoding")
    ap.add_argument("--tokens", type=int, default=64, help="tokens decoded (timed)")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--dtype", choices=["bf16", "f32"], default="bf16")
    ap.add_argument("--cache", choices=["static", "dynamic"], default="static")
    ap.add_argument("--compile", action="store_true", help="torch.compile the forward (reduce-overhead)")
    ap.add_argument("--reps", type=int, default=3)
    a = ap.parse_args()
    try:
        import torch
        import transformers
        from transformers import LlamaConfig, LlamaForCausalLM
    except ImportError as e:
        print(f"gpu-peer: {e}: the peer needs torch and transformers", file=sys.stderr)
        return 77
    if a.device.startswith("cuda") and not torch.cuda.is_available():
        print("gpu-peer: torch sees no CUDA device", file=sys.stderr)
        return 1
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    cfg = LlamaConfig(**SHAPES[a.shape], rms_norm_eps=1e-5, bos_token_id=1, eos_token_id=2,
                      pad_token_id=0)
    if a.context + a.tokens + 8 > cfg.max_position_embeddings:
        print(f"gpu-peer: context {a.context} + tokens {a.tokens} exceed the shape's "
              f"{cfg.max_position_embeddings} positions", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    torch.manual_seed(0)
    torch.set_default_dtype(dtype)  # built in its dtype: a 7B model in FP32 first would be 27 GB
    with torch.device(a.device):
        model = LlamaForCausalLM(cfg).eval()
    torch.set_default_dtype(torch.float32)
    assert next(model.parameters()).dtype == dtype
    sync = (lambda: torch.cuda.synchronize()) if a.device.startswith("cuda") else (lambda: None)
    sync()
    build_s = time.perf_counter() - t0
    if a.compile:
        model.forward = torch.compile(model.forward, mode="reduce-overhead", fullgraph=True)
    ids = torch.randint(3, cfg.vocab_size, (1, a.context), device=a.device)
    mask = torch.ones_like(ids)

    def generate(n):
        kw = dict(max_new_tokens=n, min_new_tokens=n, do_sample=False, attention_mask=mask,
                  pad_token_id=0)
        if a.cache == "static":
            kw["cache_implementation"] = "static"
        with torch.inference_mode():
            sync()
            t = time.perf_counter()
            out = model.generate(ids, **kw)
            sync()
        assert out.shape[1] == a.context + n, out.shape
        return time.perf_counter() - t

    t0 = time.perf_counter()
    generate(a.tokens)  # warm-up (and compilation when --compile)
    warm_s = time.perf_counter() - t0
    prefill = min(generate(1) for _ in range(a.reps))
    total = min(generate(a.tokens) for _ in range(a.reps))
    decode_s = max(total - prefill, 1e-9)
    res = dict(peer="transformers", transformers=transformers.__version__, torch=torch.__version__,
               device=(torch.cuda.get_device_name() if a.device.startswith("cuda") else a.device),
               shape=a.shape, dtype=a.dtype, cache=a.cache, compiled=a.compile, context=a.context,
               tokens=a.tokens, reps=a.reps, build_s=round(build_s, 2), warmup_s=round(warm_s, 2),
               prefill_ms=round(prefill * 1e3, 3), decode_tok_s=round((a.tokens - 1) / decode_s, 2),
               ms_per_token=round(decode_s * 1e3 / (a.tokens - 1), 4))
    try:  # transformers compiles the decoding forward itself when the cache is static on a GPU
        from torch._dynamo.utils import counters
        res["dynamo_graphs"] = int(counters["stats"]["unique_graphs"])
    except Exception:  # noqa: BLE001 (an internal counter: absent is fine)
        res["dynamo_graphs"] = None
    print(json.dumps(res), flush=True)
    sys.stderr.flush()
    os._exit(0)  # not sys.exit: inductor's compile workers were seen holding the exit past 10 s


if __name__ == "__main__":
    sys.exit(main())
