#!/usr/bin/env bash
# Tests the Rust bindings against an installed EntMTP:
#   bindings/rust/run_tests.sh PREFIX
# PREFIX is where `cmake --install BUILD --prefix PREFIX` put the library.
# Checks that entmtp-sys/src/bindings.rs matches include/entmtp.h (gen.sh
# --check), runs `cargo test --offline` over the workspace (entmtp-sys layout
# tests, the entmtp tests on tiny model files they write themselves, the
# doc-test, the example's build), the external-model test when
# ENTMTP_TINY_MODEL and ENTMTP_TINY_HEADS are set, then the example program.
set -euo pipefail
if [ $# -ne 1 ]; then echo "usage: $0 PREFIX" >&2; exit 2; fi
prefix=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
for d in "$prefix/lib/pkgconfig" "$prefix/lib64/pkgconfig" "$prefix/lib/x86_64-linux-gnu/pkgconfig"; do
  [ -d "$d" ] && PKG_CONFIG_PATH="$d${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
done
export PKG_CONFIG_PATH
pkg-config --exists entmtp || { echo "run_tests.sh: pkg-config cannot find entmtp under $prefix" >&2; exit 1; }
libdir=$(pkg-config --variable=libdir entmtp)
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
command -v cargo >/dev/null || { echo "run_tests.sh: cargo not found (install Rust)" >&2; exit 1; }
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-$here/target}
log() { printf '\n---- rust: %s\n' "$*"; }

log "generated bindings are up to date"
bash "$here/gen.sh" --check

cd "$here"
log "cargo test --offline (workspace)"
cargo test --offline --workspace --jobs "${JOBS:-2}"

if [ -n "${ENTMTP_TINY_MODEL:-}" ] && [ -n "${ENTMTP_TINY_HEADS:-}" ]; then
  log "external model $ENTMTP_TINY_MODEL"
  cargo test --offline -p entmtp --test engine -- --ignored external_model_is_lossless
else
  log "ENTMTP_TINY_MODEL / ENTMTP_TINY_HEADS not set: external_model_is_lossless stays ignored"
fi

log "example on the tiny model"
cargo build --offline -p entmtp-example-generate --jobs "${JOBS:-2}"
gen="$CARGO_TARGET_DIR/debug/generate"
tiny="$CARGO_TARGET_DIR/tmp/entmtp-tests-engine"
"$gen" --bank-demo
"$gen" "$tiny/tiny.gguf" "$tiny/medusa.safetensors" 100 200 31
"$gen" "$tiny/tiny.gguf" "$tiny/hydra.safetensors" --prompt "Hello the world"
if "$gen" "$tiny/missing.gguf" "$tiny/medusa.safetensors" 2>"$CARGO_TARGET_DIR/example.err"; then
  echo "run_tests.sh: the example accepted a missing model" >&2; exit 1
fi
grep -q "ENTMTP_ERR_IO" "$CARGO_TARGET_DIR/example.err"
echo "missing model -> $(cat "$CARGO_TARGET_DIR/example.err")"
