#!/usr/bin/env bash
# Runs every fast unit test (not the "slow" real-model ones) under valgrind
# memcheck: no leaks (definite/indirect) and no invalid accesses allowed.
#   scripts/valgrind.sh [BUILD_DIR]   (a Debug or RelWithDebInfo build)
set -uo pipefail
build=${1:-build}
# valgrind does not decode AVX-512: run the AVX2 kernels (or the baseline
# ones where the processor has no AVX2) unless the caller chose
if [ -z "${ENTMTP_CPU_KERNELS:-}" ]; then
  if grep -qw avx2 /proc/cpuinfo 2>/dev/null; then export ENTMTP_CPU_KERNELS=avx2; else export ENTMTP_CPU_KERNELS=baseline; fi
fi
fail=0
for t in "$build"/tests/test_*; do
  name=$(basename "$t")
  case "$name" in *smollm2*|*_real) continue ;; esac
  ENTMTP_CLI="$build/entmtp" valgrind --leak-check=full --errors-for-leak-kinds=definite,indirect \
    --error-exitcode=9 -q "$t" > "/tmp/valgrind_$name.log" 2>&1
  rc=$?
  if [ $rc -eq 0 ] || [ $rc -eq 77 ]; then echo "ok    $name"; else echo "FAIL  $name (rc $rc, /tmp/valgrind_$name.log)"; fail=1; fi
done
exit $fail
