#!/usr/bin/env bash
# Builds the libFuzzer targets (clang, ASan + UBSan), writes the seed corpora
# and runs each target for FUZZ_SECONDS (default 30). A crash leaves its input
# in build/fuzz/crashes/ and fails the script; turn it into a regression test.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
secs=${FUZZ_SECONDS:-30}
CC=clang cmake -S . -B build/fuzz -DENTMTP_FUZZ=ON -DENTMTP_CUDA=OFF -DENTMTP_BUILD_TESTS=ON \
  -DENTMTP_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=Debug -DENTMTP_NATIVE=OFF >/dev/null
cmake --build build/fuzz -j "$(nproc)" --target make_fuzz_seeds fuzz_gguf fuzz_safetensors \
  fuzz_heads fuzz_tree_json fuzz_bank_json
corpus=build/fuzz/corpus
rm -rf "$corpus"
build/fuzz/tests/fuzz/make_fuzz_seeds "$corpus"
mkdir -p build/fuzz/crashes
fail=0
for t in gguf safetensors heads tree_json bank_json; do
  echo "fuzz_$t: ${secs}s"
  mkdir -p "$corpus/$t.work"
  if ! ASAN_OPTIONS=detect_leaks=1 build/fuzz/tests/fuzz/fuzz_$t -max_total_time="$secs" -rss_limit_mb=2048 \
       -max_len=65536 -artifact_prefix=build/fuzz/crashes/fuzz_$t- -print_final_stats=1 \
       "$corpus/$t.work" "$corpus/$t" 2>&1 | tail -n 12; then
    fail=1
  fi
done
ls build/fuzz/crashes
exit $fail
