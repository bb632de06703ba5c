#!/usr/bin/env bash
# CTest wrapper, per supported architecture (tests/python/arch_models.py) and
# weight type (F32, Q8_0):
#  1. EntMTP against llama.cpp's recorded output (tests/data/llamacpp,
#     scripts/record-model-fixtures.sh): identical prompt token ids, identical
#     top-1 of the last position's logits, max abs logit difference within
#     the bound (F32: 1e-4; Q8_0: 0.5 on logits within +-35: llama.cpp quantizes activations to
#     Q8_0 in its dot products, EntMTP computes on dequantized F32 weights);
#  2. lossless: greedy generation with random Medusa heads emits the tokens of
#     greedy AR (48 tokens, the heads' default tree and one wide tree).
set -euo pipefail
cli=$1
here=$(cd "$(dirname "$0")" && pwd)
fix="$here/../data/llamacpp"
vocab=${ENTMTP_MODEL:-$here/../../.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}
[ -r "$vocab" ] || { echo "SKIP: bundled model (the vocabulary source) not fetched"; exit 77; }
python3 -c "import gguf, numpy" 2>/dev/null || { echo "SKIP: python gguf/numpy missing"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
py="$here/arch_models.py"
prompt=$(python3 "$py" prompt)
python3 "$py" heads "$tmp/heads.safetensors"
fail=0
# (errors="replace": the CLI writes generated text bytes as they are, and a
# random model can emit a token that ends inside a UTF-8 sequence)
field() { python3 -c "import json,sys; print(json.load(open(sys.argv[1], errors=\"replace\"))[sys.argv[2]])" "$1" "$2"; }
for arch in llama3 qwen2 qwen3 phi3; do
  for type in f32 q8_0; do
    bound=1e-4; [ "$type" = f32 ] || bound=0.5
    m="$tmp/$arch.$type.gguf"
    python3 "$py" write "$arch" "$type" "$m" "$vocab"
    "$cli" generate --model "$m" --raw --prompt "$prompt" --max-tokens 1 --ar --threads 2 --json \
      --dump-logits "$tmp/ours.f32" > "$tmp/ours.json"
    echo "== $arch $type"
    python3 "$py" compare "$tmp/ours.json" "$tmp/ours.f32" "$fix/$arch.$type.json" "$fix/$arch.$type.f32" "$bound" \
      || fail=1
    "$cli" generate --model "$m" --raw --prompt "$prompt" --max-tokens 48 --ar --threads 2 --json > "$tmp/ar.json"
    a=$(field "$tmp/ar.json" tokens)
    for tree in "" "--tree mc_sim_7b_63"; do
      # shellcheck disable=SC2086
      "$cli" generate --model "$m" --heads "$tmp/heads.safetensors" $tree --raw --prompt "$prompt" \
        --max-tokens 48 --threads 2 --json > "$tmp/spec.json"
      s=$(field "$tmp/spec.json" tokens)
      acc=$(field "$tmp/spec.json" mean_accept_length)
      if [ "$a" = "$s" ]; then echo "lossless ${tree:-default tree}: identical to AR (mean accept $acc)"
      else echo "NOT LOSSLESS ${tree:-default tree}:"; echo " AR   $a"; echo " spec $s"; fail=1; fi
    done
  done
done
exit $fail
