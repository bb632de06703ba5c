#!/usr/bin/env bash
# Reliability runs for docs/reliability.md (release build):
#   scripts/soak.sh [TOKENS] [RELOADS]
# 1. one session generating TOKENS (default 100000) greedy tokens in one
#    context with EntMTP on a lean tiny model, the policy switched every 1000
#    steps, compared with AR, RSS sampled;
# 2. SOAK_TOTAL (default 100000) tokens in one session object, 5000-token
#    chunks with a reset between (bounds the CPU's O(context^2) attention);
# 3. load + free the SmolLM2 model (or a tiny one) RELOADS times, RSS sampled.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
tokens=${1:-100000}
reloads=${2:-100}
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j "$(nproc)" --target entmtp_soak >/dev/null
build/release/tests/entmtp_soak generate "$tokens"
build/release/tests/entmtp_soak chunks "${SOAK_TOTAL:-100000}" 5000
model=.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf
if [ -r "$model" ]; then
  build/release/tests/entmtp_soak reload "$reloads" "$model"
else
  build/release/tests/entmtp_soak reload "$reloads"
fi
