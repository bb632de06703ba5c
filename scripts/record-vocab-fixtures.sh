#!/usr/bin/env bash
# Records llama.cpp's tokenization, special tokens parsed, of the strings in
# tests/data/llamacpp/vocab-special.inp for each real vocabulary that
# test_tokenizer_vocab_llamacpp checks (llama.cpp's own models/ggml-vocab-*.gguf),
# one line of ids per string, into tests/data/llamacpp/vocab-special.<family>.out.
# (llama.cpp's shipped .inp/.out pairs cover plain text only.) Rerun after
# changing the strings or the pinned llama.cpp.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(bash "$root/scripts/build-llamacpp.sh")
models=$(dirname "$(dirname "$bin")")/src/models
data="$root/tests/data/llamacpp"
python3 - "$bin/llama-tokenize" "$models" "$data" <<'PY'
import subprocess, sys, ast
tool, models, data = sys.argv[1:]
strings = open(f"{data}/vocab-special.inp", encoding="utf-8").read().split("\n__ggml_vocab_test__\n")
for family in ["qwen2", "llama-bpe", "gpt-2", "llama-spm", "phi-3"]:
    lines = []
    for s in strings:
        out = subprocess.run([tool, "-m", f"{models}/ggml-vocab-{family}.gguf", "--ids", "--log-disable",
                              "--no-bos", "-p", s], check=True, capture_output=True, text=True).stdout
        ids = ast.literal_eval(out.strip().splitlines()[-1])
        lines.append(" " + " ".join(str(i) for i in ids))
    with open(f"{data}/vocab-special.{family}.out", "w") as f:
        f.write("\n".join(lines) + "\n")
    print(f"recorded {family}: {len(lines)} strings", file=sys.stderr)
PY
