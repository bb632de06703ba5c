#!/usr/bin/env bash
# ABI discipline, checked: compares the built libentmtp.so with the committed
# baseline (abi/libentmtp.abi, from abigail-tools' abidw) using abidiff.
#   scripts/check-abi.sh BUILD_DIR            check (CI)
#   scripts/check-abi.sh BUILD_DIR --update   rewrite the baseline
# An incompatible change fails unless the baseline, the SONAME
# (ENTMTP_ABI_VERSION in include/entmtp.h) and CHANGELOG.md were updated together.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:?usage: check-abi.sh BUILD_DIR [--update]}
lib=$(ls "$build"/libentmtp.so.*.*.* 2>/dev/null | head -1)
[ -n "$lib" ] || { echo "check-abi: no libentmtp.so.X.Y.Z in $build" >&2; exit 1; }
baseline="$root/abi/libentmtp.abi"
current=$(mktemp)
trap 'rm -f "$current"' EXIT
abidw --headers-dir "$root/include" --no-corpus-path --no-comp-dir-path "$lib" > "$current"
soname=$(objdump -p "$lib" | awk '/SONAME/{print $2}')
abi_major=$(sed -n 's/^#define ENTMTP_ABI_VERSION \([0-9]*\).*/\1/p' "$root/include/entmtp.h")
[ "$soname" = "libentmtp.so.$abi_major" ] || { echo "check-abi: SONAME $soname does not match ENTMTP_ABI_VERSION $abi_major" >&2; exit 1; }
if [ "${2:-}" = "--update" ]; then
  cp "$current" "$baseline"
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
abidiff --no-added-syms "$baseline" "$current" > /tmp/abidiff.out 2>&1
rc=$?
set -e
if (( rc & 1 )); then cat /tmp/abidiff.out >&2; echo "check-abi: abidiff failed to run" >&2; exit 1; fi
if (( rc & 8 )); then
  cat /tmp/abidiff.out >&2
  cat >&2 <<MSG
check-abi: INCOMPATIBLE ABI change against $baseline ($base_soname).
Either restore compatibility, or make it a new ABI: bump ENTMTP_ABI_VERSION in
include/entmtp.h, run scripts/check-abi.sh BUILD --update, and describe the break
under "ABI" in CHANGELOG.md (naming libentmtp.so.N).
MSG
  exit 1
fi
if (( rc & 4 )); then
  echo "check-abi: compatible ABI change (e.g. additions); consider refreshing the baseline:"
  sed -n '1,20p' /tmp/abidiff.out
fi
echo "check-abi: OK ($soname matches the baseline)"
