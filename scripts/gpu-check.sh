#!/usr/bin/env bash
# The whole GPU check in one call on a lent GPU machine (repo root, no
# registry): unpack the carried Debian packages into a private prefix, build
# with CUDA, run every test (test_cuda_parity compares the CUDA backend with
# the CPU backend op by op, test_cuda_kernels checks batch invariance, typed
# weights and tree == AR attention, test_cuda_step_ops the device step's
# top-k, acceptance and commit, test_cuda_lossless token for token and one
# download per step; the CPU
# harness variants run too), run compute-sanitizer memcheck, racecheck and
# synccheck on both, and benchmark. Log: $OUT/gpu-check.log.
#   here:  bash scripts/gpu-carry.sh
#   then:  device run, carry [".carry"], command "bash scripts/gpu-check.sh"
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${OUT:-/tmp}
log="$out/gpu-check.log"
exec > >(tee "$log") 2>&1
deps=/tmp/entmtp-deps
mkdir -p "$deps"
for f in .carry/debs/*.deb; do dpkg -x "$f" "$deps"; done
export PKG_CONFIG_PATH="$deps/usr/lib/x86_64-linux-gnu/pkgconfig:$deps/usr/share/pkgconfig"
export PKG_CONFIG_SYSROOT_DIR="$deps"
export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu:$deps/usr/lib/x86_64-linux-gnu/openblas-pthread:${LD_LIBRARY_PATH:-}"
export PATH="$deps/usr/bin:$PATH"
nvidia-smi || true
cmake -S . -B build/gpu -DCMAKE_BUILD_TYPE=RelWithDebInfo -DENTMTP_CUDA=ON -DENTMTP_NATIVE=OFF \
      -DCMAKE_CUDA_ARCHITECTURES="80;90" || exit 1
cmake --build build/gpu -j "$(nproc)" || exit 1
(cd build/gpu && ctest --output-on-failure -LE slow)
status=$?
export ENTMTP_CUDA_PLUGIN=$PWD/build/gpu/cuda/libentmtp-cuda.so
# the same tests the CPU CUDA harness runs in CI (docs/cuda-harness.md), here
# on the real device and cuBLAS, under compute-sanitizer
for tool in memcheck racecheck synccheck; do
  for t in test_cuda_parity test_cuda_kernels test_cuda_step_ops test_cuda_lossless test_cuda_typical; do
    echo "== compute-sanitizer --tool $tool $t"
    compute-sanitizer --tool "$tool" --error-exitcode 9 "build/gpu/tests/$t" || status=1
  done
done
echo "== bench (CUDA, synthetic shapes)"
build/gpu/entmtp bench --synthetic smollm2-135m --backend cuda --tokens 64 --json || true
build/gpu/entmtp bench --synthetic llama-7b --backend cuda --tokens 32 --reps 3 --json || true
build/gpu/entmtp bench --synthetic llama-7b --weights q4_0 --backend cuda --tokens 32 --reps 3 --json || true
echo "== roofline (compare the bench's per-step times with it)"
python3 scripts/roofline.py || true
echo "gpu-check: exit status $status"
exit $status
