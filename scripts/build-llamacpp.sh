#!/usr/bin/env bash
# Builds llama.cpp's command-line tools (llama-bench, llama-cli, llama-tokenize,
# ...) once, from the llama.cpp vendored in the source distribution of the PyPI
# package llama-cpp-python (pinned below), into the cache directory, and prints
# the folder holding the binaries. A peer to compare with, never linked into
# EntMTP; nothing of its source is committed here.
#   LLAMACPP_PY_VERSION  pinned llama-cpp-python version (default below)
#   ENTMTP_CACHE_ROOT    cache root (default: <repo>/.cache)
#   LLAMACPP_ISA         native (default: -DGGML_NATIVE=ON, this CPU's best)
#                        or avx2 (AVX2 + FMA + F16C, no AVX-512: the peer of
#                        entmtp's avx2 kernels, ENTMTP_CPU_KERNELS=avx2), built
#                        in its own folder (build-avx2)
set -euo pipefail
export PIP_ROOT_USER_ACTION=ignore
root=$(cd "$(dirname "$0")/.." && pwd)
version=${LLAMACPP_PY_VERSION:-0.3.16}
cache=${ENTMTP_CACHE_ROOT:-$root/.cache}
dir="$cache/llama.cpp-py$version"
isa=${LLAMACPP_ISA:-native}
case "$isa" in
  native) build="$dir/build"; isa_flags=(-DGGML_NATIVE=ON) ;;
  avx2) build="$dir/build-avx2"
        isa_flags=(-DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON
                   -DGGML_AVX512=OFF -DGGML_AVX_VNNI=OFF) ;;
  *) echo "build-llamacpp: LLAMACPP_ISA must be native or avx2, not '$isa'" >&2; exit 2 ;;
esac
bin="$build/bin"
if [ -x "$bin/llama-bench" ] && [ -x "$bin/llama-tokenize" ]; then echo "$bin"; exit 0; fi
mkdir -p "$dir"
exec 9>"$dir/.lock"; flock 9   # one build at a time when several runs share the cache
if [ -x "$bin/llama-bench" ] && [ -x "$bin/llama-tokenize" ]; then echo "$bin"; exit 0; fi
bash "$root/scripts/fetch-llamacpp-src.sh" >/dev/null
echo "build-llamacpp: building llama.cpp (CPU, about 10 minutes on 2 cores)" >&2
cmake -S "$dir/src" -B "$build" -DCMAKE_BUILD_TYPE=Release "${isa_flags[@]}" \
  -DLLAMA_CURL=OFF -DGGML_CUDA=OFF -DBUILD_SHARED_LIBS=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_EXAMPLES=OFF >&2
cmake --build "$build" -j "${JOBS:-$(nproc)}" \
  --target llama-bench llama-cli llama-tokenize llama-server >&2 || \
cmake --build "$build" -j "${JOBS:-$(nproc)}" --target llama-bench llama-tokenize >&2
echo "$bin"
