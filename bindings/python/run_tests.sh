#!/usr/bin/env bash
# Tests the Python package two ways:
#   bindings/python/run_tests.sh PREFIX
# 1. against an installed EntMTP (PREFIX is where `cmake --install BUILD
#    --prefix PREFIX` put it): pip-installs bindings/python into a virtual
#    environment in build/python-venv, linked to that library through
#    pkg-config, checks that the generated cdef matches include/entmtp.h, runs
#    pytest, then the example on a tiny model written by tests/tinymodel.py;
# 2. as a user gets it: `pip wheel` in a clean virtual environment (no system
#    site-packages, no pkg-config path) builds the C library into the wheel;
#    the wheel is installed there and pytest runs from the package folder,
#    where the src/ layout makes it import the installed package.
# ENTMTP_PY_SKIP_WHEEL=1 leaves out the second part.
set -euo pipefail
if [ $# -ne 1 ]; then echo "usage: $0 PREFIX" >&2; exit 2; fi
prefix=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
pc_path=${PKG_CONFIG_PATH:-}
for d in "$prefix/lib/pkgconfig" "$prefix/lib64/pkgconfig" "$prefix/lib/x86_64-linux-gnu/pkgconfig"; do
  [ -d "$d" ] && pc_path="$d${pc_path:+:$pc_path}"
done
PKG_CONFIG_PATH="$pc_path" pkg-config --exists entmtp || { echo "run_tests.sh: pkg-config cannot find entmtp under $prefix" >&2; exit 1; }

PY=${PYTHON:-python3}
venv=${ENTMTP_PY_VENV:-$root/build/python-venv}
log() { printf '\n---- python: %s\n' "$*"; }
pipq() { local py=$1; shift; "$py" -m pip install -q --disable-pip-version-check "$@" 2>&1 | grep -v '^\[notice\]' || true; }
test_deps() {  # pytest, numpy, gguf (safetensors is optional: tinymodel.py writes the format itself)
  for m in pytest numpy gguf; do "$1" -c "import $m" 2>/dev/null || pipq "$1" "$m"; done
  "$1" -c "import safetensors" 2>/dev/null || pipq "$1" safetensors
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export CMAKE_BUILD_PARALLEL_LEVEL=${CMAKE_BUILD_PARALLEL_LEVEL:-2}

log "virtual environment $venv"
[ -x "$venv/bin/python" ] || "$PY" -m venv --system-site-packages "$venv"
vpy="$venv/bin/python"

log "pip install bindings/python against the installed library (pkg-config: $(PKG_CONFIG_PATH="$pc_path" pkg-config --modversion entmtp))"
rm -rf "$here/build"
if ! PKG_CONFIG_PATH="$pc_path" "$vpy" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps "$here"; then
  echo "run_tests.sh: isolated build failed; retrying with the environment's scikit-build-core/cffi" >&2
  pipq "$vpy" scikit-build-core cffi
  PKG_CONFIG_PATH="$pc_path" "$vpy" -m pip install -q --disable-pip-version-check --force-reinstall --no-deps --no-build-isolation "$here"
fi
"$vpy" -c "import cffi" 2>/dev/null || pipq "$vpy" cffi
test_deps "$vpy"

log "generated cdef is up to date"
"$vpy" "$here/gen_cdef.py" --check

log "pytest (installed library)"
(cd "$work" && "$vpy" -c "import entmtp, sys; print('entmtp', entmtp.version(), 'from', entmtp.__file__)" \
   && "$vpy" -m pytest -q -rs -p no:cacheprovider "$here/tests")

log "example on the tiny model"
"$vpy" "$here/tests/tinymodel.py" "$work/tiny" >/dev/null
"$vpy" "$root/examples/python/generate.py" --bank-demo
"$vpy" "$root/examples/python/generate.py" "$work/tiny/tiny.gguf" "$work/tiny/medusa.safetensors" 100 200 31
"$vpy" "$root/examples/python/generate.py" "$work/tiny/tiny.gguf" "$work/tiny/medusa.safetensors" --prompt "Hello the world"

[ "${ENTMTP_PY_SKIP_WHEEL:-0}" = 1 ] && exit 0
log "wheel with the library built in, in a clean virtual environment"
clean="$work/clean-venv"
"$PY" -m venv "$clean"
rm -rf "$here/build"
env -u PKG_CONFIG_PATH -u LD_LIBRARY_PATH CMAKE_ARGS="-DENTMTP_PY_BUNDLED=ON" \
  "$clean/bin/python" -m pip wheel -q --disable-pip-version-check --no-deps -w "$work/dist" "$here"
wheel=$(ls "$work"/dist/entmtp-*.whl)
pipq "$clean/bin/python" "$wheel"
test_deps "$clean/bin/python"
# from the package folder: with the src/ layout `import entmtp` finds the wheel's copy
(cd "$here" && env -u LD_LIBRARY_PATH "$clean/bin/python" -c \
   "import entmtp; assert entmtp.__file__.startswith('$clean'), entmtp.__file__; print('entmtp', entmtp.version(), 'from', entmtp.__file__)" \
 && env -u LD_LIBRARY_PATH "$clean/bin/python" -m pytest -q -rs -p no:cacheprovider tests)
