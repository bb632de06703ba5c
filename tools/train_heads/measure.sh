#!/usr/bin/env bash
# Measures the shipped heads with the library itself: mean accept length (and
# tokens/s) of the Medusa heads on the Medusa default tree and of the Hydra
# heads on the Hydra default tree, on held-out code and chat prompts (the eval
# split of tools/prompts), greedy and at temperature 0.7 with typical
# acceptance. Writes $OUT/heads_T<t>.{json,md}.
#
#   tools/train_heads/measure.sh            # PROMPTS=20 TOKENS=128 by default
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
PROMPTS=${PROMPTS:-20}
TOKENS=${TOKENS:-128}
OUT=${OUT:-$root/.cache/heads_eval}
HEADS_DIR=${HEADS_DIR:-$root/heads}
bash scripts/setup-deps.sh
model=$(bash scripts/fetch-model.sh)
stem=$(basename "$model"); stem=${stem%%.*}
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j "$(nproc)" --target entmtp_cli >/dev/null
mkdir -p "$OUT"
for task in code chat; do
  python3 tools/prompts/make_prompts.py --task "$task" --split eval --n "$PROMPTS" --seed 123 --out "$OUT/${task}_eval.jsonl"
done
for t in 0 0.7; do
  build/release/entmtp bench --suite --model "$model" \
      --medusa-heads "$HEADS_DIR/$stem.medusa.safetensors" --hydra-heads "$HEADS_DIR/$stem.hydra.safetensors" \
      --task "code=$OUT/code_eval.jsonl" --task "chat=$OUT/chat_eval.jsonl" \
      --prompts "$PROMPTS" --max-tokens "$TOKENS" --temperature "$t" \
      --json "$OUT/heads_T$t.json" --markdown "$OUT/heads_T$t.md"
done
