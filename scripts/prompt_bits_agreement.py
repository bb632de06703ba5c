#!/usr/bin/env python3
"""Greedy agreement of entmtp's prompt-activation modes with a float64
reference (docs/performance.md, "8-bit prompt activations").

For each of 24 chat prompts: the greedy AR continuation (64 tokens) of
`entmtp generate --ar --prompt-bits B` for B = 16 and 8, and with
`--prompt-bits 8 --step-bits 8` (the whole session at 8 bits), and the greedy
continuation of the same prompt ids by tools/train_heads/backbone.py in
float64 (the file's weights dequantized by the `gguf` package, every
activation in double). Prints per prompt the first position where each
mode's tokens leave the reference's (64 = none) and the totals.

    python3 scripts/prompt_bits_agreement.py ENTMTP MODEL [N_TOKENS [LLAMA_SERVER_URL]]

With a running llama-server URL (llama-server -m MODEL -t 2), llama.cpp's
greedy continuation of the same prompt ids (top_k 1) is compared too.
A final end-of-generation token is left out of every list.
"""
import json
import os
import subprocess
import sys
import urllib.request

import torch

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools", "train_heads"))
from backbone import Backbone  # noqa: E402

PROMPTS = [
    "Explain why the sky is blue.",
    "Write a Python function that returns the n-th Fibonacci number.",
    "What are the main causes of the French Revolution?",
    "Give me three tips for sleeping better.",
    "Summarize the plot of Romeo and Juliet in a few sentences.",
    "How does a hash table work?",
    "Translate 'good morning, how are you?' into French and Spanish.",
    "What is the difference between a virus and a bacterium?",
    "Write a short poem about the ocean.",
    "How do I make a cup of green tea?",
    "List the planets of the solar system in order from the sun.",
    "What is recursion in programming? Give an example.",
    "Describe the water cycle for a ten-year-old.",
    "Write a SQL query that counts the orders per customer.",
    "What should I pack for a three-day hiking trip?",
    "Why do leaves change color in autumn?",
    "Explain the difference between TCP and UDP.",
    "Suggest a name for a small bakery and explain why.",
    "How can I improve my public speaking?",
    "Write a haiku about winter mornings.",
    "What is the Pythagorean theorem? Show one use of it.",
    "Give a short history of the printing press.",
    "Write a bash command that finds the ten largest files in a directory.",
    "What are the benefits of regular exercise?",
]


def entmtp_run(entmtp, model, prompt, bits, n, step_bits=16):
    out = subprocess.run([entmtp, "generate", "--model", model, "--prompt", prompt, "--ar", "--max-tokens", str(n),
                          "--threads", "2", "--json", "--prompt-bits", str(bits), "--step-bits", str(step_bits)],
                         check=True, capture_output=True, text=True).stdout
    d = json.loads(out)
    return d["prompt_ids"], d["tokens"]


def llama_run(url, ids, n):
    body = json.dumps({"prompt": ids, "n_predict": n, "top_k": 1, "temperature": 0, "return_tokens": True,
                       "cache_prompt": False}).encode()
    req = urllib.request.Request(url.rstrip("/") + "/completion", body, {"Content-Type": "application/json"})
    with urllib.request.urlopen(req) as r:
        return json.load(r)["tokens"]


def first_divergence(a, b):
    for i, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return i
    return min(len(a), len(b)) if len(a) != len(b) else len(a)


def main():
    entmtp, model = sys.argv[1], sys.argv[2]
    n = int(sys.argv[3]) if len(sys.argv) > 3 else 64
    llama = sys.argv[4] if len(sys.argv) > 4 else None
    torch.set_num_threads(int(os.environ.get("THREADS", "2")))
    runs = []
    for p in PROMPTS:
        ids16, t16 = entmtp_run(entmtp, model, p, 16, n)
        ids8, t8 = entmtp_run(entmtp, model, p, 8, n)
        _, t88 = entmtp_run(entmtp, model, p, 8, n, step_bits=8)
        assert ids16 == ids8
        runs.append((ids16, t16, t8, t88, llama_run(llama, ids16, n) if llama else None))
    ref_model = Backbone(model, dtype=torch.float64)
    stop = set()  # entmtp stops after an end-of-generation token: the reference too
    eos = ref_model.reader.fields.get("tokenizer.ggml.eos_token_id")
    if eos is not None:
        stop.add(int(eos.parts[eos.data[0]][0]))
    with torch.no_grad():
        refs = ref_model.greedy_batch([r[0] for r in runs], n, stop)
    if isinstance(refs, tuple):
        refs = refs[0]
    def strip(t):
        t = [int(x) for x in t][:n]
        return t[:-1] if t and t[-1] in stop else t

    equal = {"16-bit": 0, "8-bit": 0, "8-bit steps too": 0, "llama.cpp": 0}
    print("prompt  tokens  first divergence from float64: 16-bit  8-bit prompt  8-bit prompt and steps" +
          ("  llama.cpp" if llama else ""))
    for i, ((ids, t16, t8, t88, tl), ref) in enumerate(zip(runs, refs)):
        ref = strip(ref)
        row = f"{i:6d}  {len(ref):6d}"
        for name, t in (("16-bit", t16), ("8-bit", t8), ("8-bit steps too", t88), ("llama.cpp", tl)):
            if t is None:
                continue
            t = strip(t)
            equal[name] += t == ref
            row += f"  {first_divergence(t, ref):6d}"
        print(row)
    print("equal to the float64 reference: " +
          ", ".join(f"{k} {v} of {len(runs)}" for k, v in equal.items() if k != "llama.cpp" or llama))


if __name__ == "__main__":
    main()
