#!/usr/bin/env bash
# Regenerates bindings/rust/entmtp-sys/src/bindings.rs from include/entmtp.h
# with the bindgen CLI (Debian's `bindgen` package), formatted by rustfmt.
# The EXPERIMENTAL section is included (-DENTMTP_EXPERIMENTAL_API): the entmtp
# crate exposes it, marked experimental. Header-inline functions are skipped.
#   gen.sh           rewrite the file
#   gen.sh --check   exit 1 (with a diff) when the committed file is stale
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out="$here/entmtp-sys/src/bindings.rs"
BINDGEN=${BINDGEN:-bindgen}
RUSTFMT=${RUSTFMT:-rustfmt}
for t in "$BINDGEN" "$RUSTFMT"; do
  command -v "$t" >/dev/null || { echo "gen.sh: $t not found (apt-get install bindgen; rustfmt comes with Rust)" >&2; exit 1; }
done
generate() {
  "$BINDGEN" "$root/include/entmtp.h" \
    --allowlist-function 'entmtp_.*' \
    --allowlist-type 'entmtp_.*' \
    --allowlist-var 'ENTMTP_.*' \
    --default-enum-style consts --no-prepend-enum-name \
    --size_t-is-usize --no-doc-comments --no-rustfmt-bindings \
    -- -DENTMTP_EXPERIMENTAL_API \
    | "$RUSTFMT" --edition 2021 --config-path "$here/rustfmt.toml" --emit stdout
}
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
generate >"$tmp"
if [ "${1:-}" = "--check" ]; then
  if ! diff -u "$out" "$tmp" >&2; then
    echo "gen.sh --check: $out is stale; run bindings/rust/gen.sh" >&2
    exit 1
  fi
  echo "gen.sh --check: entmtp-sys/src/bindings.rs is up to date"
else
  cp "$tmp" "$out"
  echo "gen.sh: wrote $out"
fi
