#!/usr/bin/env bash
# Sets up and runs every test of EntMTP on a fresh Debian machine:
#  1. dependencies (apt-get + pip), the SmolLM2 model from PyPI
#  2. release build with -Wall -Wextra -Werror (CUDA plugin too when nvcc exists), CTest;
#     every CUDA kernel runs on the CPU through the CUDA harness (*_harness tests,
#     docs/cuda-harness.md)
#  3. the same tests, CUDA harness included, under AddressSanitizer + UndefinedBehaviorSanitizer
#  4. install to a temporary prefix; build and run examples/ with pkg-config
#  5. the ABI check against abi/libentmtp.abi
#  6. Python and Rust binding tests, when present
# ENTMTP_TEST_QUICK=1 skips the sanitizer pass.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
jobs=${JOBS:-$(nproc)}
log() { printf '\n==== %s\n' "$*"; }

log "dependencies"
bash scripts/setup-deps.sh test  # run's and the tests' (scripts/run.sh installs only run's)
ENTMTP_MODEL=$(bash scripts/fetch-model.sh)
export ENTMTP_MODEL
# llama.cpp's source (not built): its real test vocabularies, for test_tokenizer_vocab_llamacpp
ENTMTP_LLAMACPP_VOCABS=$(bash scripts/fetch-llamacpp-src.sh)/models
export ENTMTP_LLAMACPP_VOCABS

log "release build (-Werror) and tests"
cmake -S . -B build/ci -DCMAKE_BUILD_TYPE=RelWithDebInfo -DENTMTP_WERROR=ON -DENTMTP_CUDA_HARNESS=ON >/dev/null
cmake --build build/ci -j "$jobs"
(cd build/ci && ctest --output-on-failure -j "$jobs")

log "Release build (-O3 -Werror), as scripts/run.sh builds it"
cmake -S . -B build/release-check -DCMAKE_BUILD_TYPE=Release -DENTMTP_WERROR=ON -DENTMTP_BUILD_TESTS=OFF >/dev/null
cmake --build build/release-check -j "$jobs" >/dev/null

if [ "${ENTMTP_TEST_QUICK:-0}" != 1 ]; then
  log "AddressSanitizer + UndefinedBehaviorSanitizer"
  cmake -S . -B build/asan -DCMAKE_BUILD_TYPE=Debug -DENTMTP_CUDA=OFF -DENTMTP_CUDA_HARNESS=ON \
        -DENTMTP_SANITIZE=address,undefined >/dev/null
  cmake --build build/asan -j "$jobs"
  # -LE e2e_harness: whole sessions on the CUDA harness (test_cuda_lossless/typical_harness)
  # took 15 and 11 minutes here under ASan after this session's kernels (2026-11-27),
  # still about 11 and 8 after the harness's scheduling changes (docs/cuda-harness.md,
  # "Where the end-to-end time goes"), which would take CI past 45 minutes; they run in the release pass above, and every
  # kernel runs under ASan in the kernel-level harness tests (parity, kernels, step ops,
  # eagle3, memeff).
  (cd build/asan && ASAN_OPTIONS=detect_leaks=1 ctest --output-on-failure -j "$jobs" -LE "slow|e2e_harness")
fi

if [ "${ENTMTP_TEST_QUICK:-0}" != 1 ]; then
  log "ThreadSanitizer: sessions on several threads over one model"
  cmake -S . -B build/tsan -DCMAKE_BUILD_TYPE=Debug -DENTMTP_CUDA=OFF -DENTMTP_SANITIZE=thread \
        -DCMAKE_C_FLAGS=-DENTMTP_TSAN=1 >/dev/null
  cmake --build build/tsan -j "$jobs" --target test_threads
  (cd build/tsan && TSAN_OPTIONS=halt_on_error=1 ctest --output-on-failure -R test_threads)

  log "fuzzing every parser (libFuzzer, ASan + UBSan, ${FUZZ_SECONDS:-20}s per target)"
  FUZZ_SECONDS=${FUZZ_SECONDS:-20} bash scripts/fuzz.sh
fi

log "install and build examples/ with pkg-config"
prefix=$(mktemp -d)
cmake --install build/ci --prefix "$prefix" >/dev/null
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig:$prefix/lib/x86_64-linux-gnu/pkgconfig:${PKG_CONFIG_PATH:-}"
libdir=$(pkg-config --variable=libdir entmtp)
# the examples find libentmtp.so through the rpath the .pc file offers (no LD_LIBRARY_PATH)
for ex in generate quickstart; do
  cc -std=c11 -Wall -Wextra -Werror examples/c/$ex.c $(pkg-config --cflags --libs entmtp) \
     $(pkg-config --variable=rpath entmtp) -o build/ci/example_$ex
done
build/ci/example_generate --bank-demo
build/ci/example_generate "$ENTMTP_MODEL" "What is the capital of France? Answer in one word." \
   heads/SmolLM2-135M-Instruct.hydra.safetensors 16 | tee build/ci/example_generate.txt
grep -q Paris build/ci/example_generate.txt
build/ci/example_quickstart "$ENTMTP_MODEL" heads/SmolLM2-135M-Instruct.hydra.safetensors
cc -std=c11 -Wall -Wextra -Werror examples/c/trace_steps.c $(pkg-config --cflags --libs entmtp) \
   -o build/ci/example_trace_steps
# a missing model is an error message and status 1, not a crash
echo "Hello" > build/ci/trace_prompt.txt
if LD_LIBRARY_PATH="$libdir" build/ci/example_trace_steps /nonexistent.gguf h b t build/ci/trace_prompt.txt 4 2>build/ci/trace_err.txt; then
  echo "example_trace_steps accepted a missing model" >&2; exit 1
fi
grep -q "nonexistent.gguf" build/ci/trace_err.txt

log "install and build examples/ with CMake's find_package(entmtp)"
cmake -S examples/cmake -B build/ci/consumer -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
cmake --build build/ci/consumer >/dev/null
LD_LIBRARY_PATH="$libdir" build/ci/consumer/entmtp_example_generate --bank-demo >/dev/null

log "ABI check"
bash scripts/check-abi.sh build/ci

if [ -x bindings/python/run_tests.sh ]; then
  log "Python bindings"
  ENTMTP_TINY_MODEL="$root/build/ci/tests/tmp/lossless_tiny.gguf" \
  ENTMTP_TINY_HEADS="$root/build/ci/tests/tmp/lossless_medusa.safetensors" \
  PKG_CONFIG_PATH="$PKG_CONFIG_PATH" LD_LIBRARY_PATH="$libdir" bash bindings/python/run_tests.sh "$prefix"
fi
if [ -x bindings/rust/run_tests.sh ]; then
  log "Rust bindings"
  ENTMTP_TINY_MODEL="$root/build/ci/tests/tmp/lossless_tiny.gguf" \
  ENTMTP_TINY_HEADS="$root/build/ci/tests/tmp/lossless_medusa.safetensors" \
  PKG_CONFIG_PATH="$PKG_CONFIG_PATH" LD_LIBRARY_PATH="$libdir" bash bindings/rust/run_tests.sh "$prefix"
fi
log "all tests passed"
