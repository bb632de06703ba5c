#!/usr/bin/env bash
# Records llama.cpp's side of the per-architecture checks into
# tests/data/llamacpp/: for every test architecture (tests/python/
# arch_models.py) and weight type, the token ids of the fixed prompt and the
# last position's logits. CI compares EntMTP with these files
# (tests/python/run_arch_check.sh) instead of building llama.cpp; rerun this
# after changing the models, the prompt or the pinned llama.cpp.
#   needs: python3 with numpy + gguf, the bundled model (scripts/fetch-model.sh)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
bin=$(bash "$root/scripts/build-llamacpp.sh")
lc=$(dirname "$(dirname "$bin")")            # .../llama.cpp-pyX/{src,build}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tool="$tmp/llamacpp_logits"
cc -O1 -I"$lc/src/include" -I"$lc/src/ggml/include" "$root/scripts/llamacpp_logits.c" -o "$tool" \
  "$lc/build/src/libllama.a" "$lc/build/ggml/src/libggml.a" "$lc/build/ggml/src/libggml-cpu.a" \
  "$lc/build/ggml/src/libggml-base.a" -lstdc++ -fopenmp -lpthread -lm
vocab=$(bash "$root/scripts/fetch-model.sh")
py="$root/tests/python/arch_models.py"
out="$root/tests/data/llamacpp"
mkdir -p "$out"
prompt=$(python3 "$py" prompt)
version=$(basename "$lc")
# every (model, weight type) of arch_models.py's CASES: F32 and Q8_0 per
# architecture, the 5-bit and K-quant types and the Q4_K_M mix (ONLY=ARCH.TYPE
# records one)
python3 "$py" cases | while read -r arch type; do
  [ -z "${ONLY:-}" ] || [ "$ONLY" = "$arch.$type" ] || continue
  python3 "$py" write "$arch" "$type" "$tmp/m.gguf" "$vocab"
  ids=$("$tool" "$tmp/m.gguf" "$prompt" "$out/$arch.$type.f32" 2>/dev/null)
  printf '{"arch": "%s", "type": "%s", "llamacpp": "%s", "ids": %s}\n' "$arch" "$type" "$version" "$ids" \
    > "$out/$arch.$type.json"
  echo "recorded $arch $type" >&2
done
