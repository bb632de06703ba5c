#!/usr/bin/env bash
# Shows that the CUDA harness tests catch broken kernels: applies each
# mutation below to cuda/backend_cuda.cu in turn, rebuilds the harness plugin,
# runs the CUDA tests on it (one must FAIL: test_cuda_parity_harness, then
# test_cuda_lossless_harness if the first passed), and restores the file.
#   bash scripts/cuda-mutations.sh [build-dir]     (default build/mutations)
# Exit status 0 when every mutation was caught; the log of each is printed.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${1:-build/mutations}
src=cuda/backend_cuda.cu
backup=$(mktemp)
cp "$src" "$backup"
restore() { cp "$backup" "$src"; rm -f "$backup"; }
trap restore EXIT

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DENTMTP_CUDA=OFF -DENTMTP_CUDA_HARNESS=ON >/dev/null
cmake --build "$build" -j "${JOBS:-2}" --target entmtp-cuda-harness test_cuda_parity test_cuda_lossless >/dev/null || exit 1

# name | python expression applied to the source text (must change it)
mutations=(
  "off-by-one in the causal mask|s.replace('int visible = mask ? mask[(size_t)row * n_rows + col] : col <= row;', 'int visible = mask ? mask[(size_t)row * n_rows + col] : col < row;')"
  "missing __syncthreads in rmsnorm|s.replace('partial[threadIdx.x] = ss;\n    __syncthreads();', 'partial[threadIdx.x] = ss;')"
  "partial-warp shuffle in the exact matmul|s.replace('for (int off = 16; off > 0; off >>= 1) acc += __shfl_down_sync', 'for (int off = 16; off > 0; off >>= 1) if (lane < 16) acc += __shfl_down_sync')"
)
# unbroken, the op-level test passes (or the demonstration means nothing)
(cd "$build" && ctest -R '^test_cuda_parity_harness$' >/dev/null) || { echo "baseline: test_cuda_parity_harness fails"; exit 1; }
echo "baseline: test_cuda_parity_harness passes on the unmodified kernels"
caught=0
for m in "${mutations[@]}"; do
  name=${m%%|*}
  expr=${m#*|}
  cp "$backup" "$src"
  python3 - "$src" "$expr" <<'PY' || exit 1
import sys
path, expr = sys.argv[1], sys.argv[2]
s = open(path).read()
t = eval(expr, {"s": s})
if t == s:
    sys.exit("mutation did not apply: " + expr)
open(path, "w").write(t)
PY
  printf '\n==== mutation: %s\n' "$name"
  git --no-pager diff --no-color -U0 -- "$src" | tail -n +5
  cmake --build "$build" -j "${JOBS:-2}" --target entmtp-cuda-harness >/dev/null || exit 1
  # the op-level test first (seconds); the end-to-end one only if it passed
  caught_by=
  for t in test_cuda_parity_harness test_cuda_lossless_harness; do
    out=$(cd "$build" && ctest --output-on-failure -R "^$t\$" 2>&1)
    rc=$?
    printf '%s\n' "$out" | grep -E 'cuda-harness:|tolerance|CUDA token|Test +#|tests passed' | head -n 8
    if [ $rc != 0 ]; then caught_by=$t; break; fi
  done
  if [ -n "$caught_by" ]; then
    echo "caught by $caught_by: $name"
    caught=$((caught + 1))
  else
    echo "NOT CAUGHT: $name"
  fi
done
restore
trap - EXIT
cmake --build "$build" -j "${JOBS:-2}" --target entmtp-cuda-harness >/dev/null
printf '\n%d of %d mutations caught\n' "$caught" "${#mutations[@]}"
[ "$caught" = "${#mutations[@]}" ]
