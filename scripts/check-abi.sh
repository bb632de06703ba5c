#!/usr/bin/env bash
# ABI discipline, checked: compares the built libentmtp.so with the committed
# baseline (abi/libentmtp.abi, from abigail-tools' abidw) using abidiff.
#   scripts/check-abi.sh BUILD_DIR            check (CI)
#   scripts/check-abi.sh BUILD_DIR --update   rewrite the baseline
# An incompatible change fails unless the baseline, the SONAME
# (ENTMTP_ABI_VERSION in include/entmtp.h) and CHANGELOG.md were updated together.
# The header's EXPERIMENTAL section (between "#if defined(ENTMTP_EXPERIMENTAL_API)"
# and its #endif) is not part of the stable ABI: its functions are suppressed
# (an abigail suppression file built from the header) in the baseline and the diff.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: check-abi.sh BUILD_DIR [--update]}
# the library the development symlink names (a stale libentmtp.so.X.Y.Z from an
# older version may lie beside it)
lib=$(readlink -f "$build/libentmtp.so" 2>/dev/null || true)
case "$lib" in *libentmtp.so.*.*.*) ;; *) lib= ;; esac
[ -n "$lib" ] || { echo "check-abi: no libentmtp.so.X.Y.Z in $build" >&2; exit 1; }
baseline="$root/abi/libentmtp.abi"
current=$(mktemp)
suppr=$(mktemp)
trap 'rm -f "$current" "$suppr"' EXIT
experimental=$(sed -n '/^#if defined(ENTMTP_EXPERIMENTAL_API)/,/^#endif \/\* ENTMTP_EXPERIMENTAL_API/p' "$root/include/entmtp.h" |
  grep -o 'entmtp_[a-z0-9_]*(' | tr -d '(' | sort -u)
[ -n "$experimental" ] || { echo "check-abi: no EXPERIMENTAL section found in include/entmtp.h" >&2; exit 1; }
for fn in $experimental; do printf '[suppress_function]\n  symbol_name = %s\n  drop = yes\n' "$fn"; done > "$suppr"
abidw --headers-dir "$root/include" --drop-private-types --no-corpus-path --no-comp-dir-path \
  --suppressions "$suppr" "$lib" > "$current"
soname=$(objdump -p "$lib" | awk '/SONAME/{print $2}')
abi_major=$(sed -n 's/^#define ENTMTP_ABI_VERSION \([0-9]*\).*/\1/p' "$root/include/entmtp.h")
[ "$soname" = "libentmtp.so.$abi_major" ] || { echo "check-abi: SONAME $soname does not match ENTMTP_ABI_VERSION $abi_major" >&2; exit 1; }
if [ "${2:-}" = "--update" ]; then
  cp "$current" "$baseline"
  chmod 644 "$baseline"
  echo "check-abi: baseline written for $soname"
  exit 0
fi
[ -f "$baseline" ] || { echo "check-abi: no baseline $baseline; run scripts/check-abi.sh $build --update" >&2; exit 1; }
base_soname=$(sed -n 's/.*soname=.\(libentmtp\.so\.[0-9]*\).*/\1/p' "$baseline" | head -1)
[ "$base_soname" = "$soname" ] || {
  echo "check-abi: the baseline is for $base_soname but the library is $soname: update the baseline (--update) together with CHANGELOG.md" >&2; exit 1; }
grep -q "libentmtp.so.$abi_major" "$root/CHANGELOG.md" || {
  echo "check-abi: CHANGELOG.md does not mention the current ABI libentmtp.so.$abi_major" >&2; exit 1; }
set +e
abidiff --no-added-syms --suppressions "$suppr" --headers-dir1 "$root/include" --headers-dir2 "$root/include" "$baseline" "$current" > /tmp/abidiff.out 2>&1
rc=$?
set -e
if (( rc & 1 )); then cat /tmp/abidiff.out >&2; echo "check-abi: abidiff failed to run" >&2; exit 1; fi
# abidiff: bit 2 (4) = the ABI changed, bit 3 (8) = incompatibly. Added
# functions are ignored (--no-added-syms); any other change to what the
# baseline holds (a struct's layout, a signature, a removed symbol) fails.
if (( rc & 12 )); then
  cat /tmp/abidiff.out >&2
  cat >&2 <<MSG
check-abi: the ABI of $soname differs from the baseline $baseline.
- Incompatible (fields moved or removed, signatures changed, symbols removed):
  restore compatibility, or make it a new ABI: bump ENTMTP_ABI_VERSION in
  include/entmtp.h, run scripts/check-abi.sh BUILD --update and describe the
  break under "ABI" in CHANGELOG.md, naming libentmtp.so.N, in the same commit.
- Compatible by design (a field appended to a struct that carries struct_size):
  refresh the baseline (--update) and note the addition in CHANGELOG.md.
MSG
  exit 1
fi
echo "check-abi: OK ($soname matches the baseline)"
