#!/usr/bin/env bash
# Installs what building and testing EntMTP needs, from Debian and PyPI only.
# Safe to run repeatedly; skips apt-get when everything is already present.
set -euo pipefail
export PIP_ROOT_USER_ACTION=ignore
pkgs=(build-essential cmake pkg-config libcjson-dev libpcre2-dev libopenblas-dev
      abigail-tools bindgen clang libclang-rt-14-dev valgrind
      libmicrohttpd-dev chromium)  # entmtp serve; its chat-page test
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup-deps: installing ${missing[*]}" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
PY=${PYTHON:-python3}
$PY -m pip install -q --disable-pip-version-check numpy gguf cffi pycparser pytest tokenizers openai pillow scikit-build-core matplotlib 2>&1 \
  | grep -v "^\[notice\]" || true
