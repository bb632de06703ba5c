#!/usr/bin/env bash
# Tests the Python bindings against an installed EntMTP:
#   bindings/python/run_tests.sh PREFIX
# PREFIX is where `cmake --install BUILD --prefix PREFIX` put the library.
# Creates a virtual environment in build/python-venv, pip-installs
# bindings/python into it (compiled against `pkg-config entmtp`), checks that
# the generated cdef matches include/entmtp.h, runs pytest, then the example
# on a tiny model written by tests/tinymodel.py.
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

PY=${PYTHON:-python3}
venv=${ENTMTP_PY_VENV:-$root/build/python-venv}
log() { printf '\n---- python: %s\n' "$*"; }

log "virtual environment $venv"
[ -x "$venv/bin/python" ] || "$PY" -m venv --system-site-packages "$venv"
vpy="$venv/bin/python"
pipq() { "$vpy" -m pip install -q --disable-pip-version-check "$@" 2>&1 | grep -v '^\[notice\]' || true; }

log "pip install bindings/python (pkg-config: $(pkg-config --modversion entmtp))"
rm -rf "$here/build" "$here"/*.egg-info
if ! "$vpy" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$here"; then
  echo "run_tests.sh: isolated build failed; retrying with the environment's setuptools/cffi" >&2
  pipq setuptools wheel cffi
  "$vpy" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps --no-build-isolation "$here"
fi
"$vpy" -c "import cffi" 2>/dev/null || pipq cffi
# test requirements (numpy, gguf, pytest are normally there from setup-deps.sh);
# safetensors is optional: tests/tinymodel.py writes the format itself without it
for m in pytest numpy gguf; do "$vpy" -c "import $m" 2>/dev/null || pipq "$m"; done
"$vpy" -c "import safetensors" 2>/dev/null || pipq safetensors

log "generated cdef is up to date"
"$vpy" "$here/gen_cdef.py" --check

log "pytest"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# run outside the source tree so that the installed package is the one imported
(cd "$work" && "$vpy" -c "import entmtp, sys; print('entmtp', entmtp.version(), 'from', entmtp.__file__)" \
   && "$vpy" -m pytest -q -rs -p no:cacheprovider "$here/tests")

log "example on the tiny model"
"$vpy" "$here/tests/tinymodel.py" "$work/tiny" >/dev/null
"$vpy" "$root/examples/python/generate.py" --bank-demo
"$vpy" "$root/examples/python/generate.py" "$work/tiny/tiny.gguf" "$work/tiny/medusa.safetensors" 100 200 31
"$vpy" "$root/examples/python/generate.py" "$work/tiny/tiny.gguf" "$work/tiny/medusa.safetensors" --prompt "Hello the world"
