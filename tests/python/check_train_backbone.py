#!/usr/bin/env python3
"""The head trainer's PyTorch backbone (tools/train_heads/backbone.py) against
EntMTP: for each model (GGUF file or Hugging Face directory), the trainer's
tokenization of a fixed prompt, raw and as a chat prompt, equals EntMTP's
prompt ids and its
last-position logits are EntMTP's within 1e-4. Quantized files run in
EntMTP's f32 compute mode (weights dequantized at load), so this also checks
EntMTP's dequantization of every type against the gguf package's.

  check_train_backbone.py ENTMTP_CLI MODEL...
"""
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "tools", "train_heads"))
from backbone import Backbone, ChatTokenizer  # noqa: E402

PROMPT = "Hello world, this is a test of the model: 12345 apples."


def check(cli, path, tmp):
    m = Backbone(path)
    tok = ChatTokenizer(m, cli)
    ids = tok.tk.encode(PROMPT, add_special_tokens=False).ids if tok.tk else None
    out = subprocess.run([cli, "generate", "--model", path, "--raw", "--prompt", PROMPT, "--max-tokens", "1",
                          "--ar", "--threads", "2", "--json", "--dump-logits", tmp + "/l.f32", "--compute", "f32"],
                         check=True, capture_output=True, text=True).stdout
    ref = json.loads(out)["prompt_ids"]
    ids = ids if ids is not None else ref
    T = len(ref)
    _, lg, _ = m.forward(torch.tensor([ref]), torch.arange(T)[None], torch.ones(1, T, dtype=torch.bool),
                         logits=True)
    a = np.fromfile(tmp + "/l.f32", np.float32)[:m.vocab]
    b = lg[0, -1].numpy()
    diff = float(np.abs(a - b).max())
    # the chat prompt the trainer distils from is the one EntMTP builds
    chat = json.loads(subprocess.run([cli, "generate", "--model", path, "--prompt", PROMPT, "--max-tokens", "1",
                                      "--ar", "--threads", "2", "--json"],
                                     check=True, capture_output=True, text=True).stdout)["prompt_ids"]
    chat_ok = tok.chat_ids(PROMPT) == chat
    bound = 1e-4
    ok = ids == ref and chat_ok and diff <= bound and int(a.argmax()) == int(b.argmax())
    print(json.dumps({"model": os.path.basename(path), "arch": m.cfg.arch, "ids_equal": ids == ref,
                      "chat_ids_equal": chat_ok,
                      "max_abs_diff": diff, "bound": bound, "top1_equal": int(a.argmax()) == int(b.argmax())}))
    return ok


def main():
    cli, models = sys.argv[1], sys.argv[2:]
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        for p in models:
            ok = check(cli, p, tmp) and ok
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
