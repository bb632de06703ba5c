#!/usr/bin/env bash
# CTest wrapper: greedy 64-token run with logits dumped, then the numpy
# reference check (bound on the largest absolute logit difference: 1e-3).
set -euo pipefail
cli=$1
here=$(cd "$(dirname "$0")" && pwd)
model=${ENTMTP_MODEL:-$here/../../.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}
[ -r "$model" ] || { echo "SKIP: model not fetched"; exit 77; }
python3 -c "import gguf, numpy" 2>/dev/null || { echo "SKIP: python gguf/numpy missing"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$cli" generate --model "$model" --prompt "Write a short poem about the sea." --max-tokens 64 \
  --threads 2 --compute f32 --json --dump-logits "$tmp/logits.f32" > "$tmp/run.json"
python3 "$here/reference_logits.py" "$model" "$tmp/run.json" "$tmp/logits.f32" --max-abs 1e-3
