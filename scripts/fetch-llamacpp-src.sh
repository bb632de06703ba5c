#!/usr/bin/env bash
# Unpacks llama.cpp's source, as vendored in the source distribution of the
# PyPI package llama-cpp-python (pinned below), into the cache directory and
# prints its folder (about a minute; nothing is built). Its models/ folder
# holds llama.cpp's real test vocabularies, which test_tokenizer_vocab_llamacpp
# reads; scripts/build-llamacpp.sh builds the tools from it.
#   LLAMACPP_PY_VERSION  pinned llama-cpp-python version (default below)
#   ENTMTP_CACHE_ROOT    cache root (default: <repo>/.cache)
set -euo pipefail
export PIP_ROOT_USER_ACTION=ignore
root=$(cd "$(dirname "$0")/.." && pwd)
version=${LLAMACPP_PY_VERSION:-0.3.16}
cache=${ENTMTP_CACHE_ROOT:-$root/.cache}
dir="$cache/llama.cpp-py$version"
if [ -f "$dir/src/CMakeLists.txt" ]; then echo "$dir/src"; exit 0; fi
mkdir -p "$dir"
exec 8>"$dir/.fetch-lock"; flock 8   # one download at a time when several runs share the cache
if [ ! -f "$dir/src/CMakeLists.txt" ]; then
  echo "fetch-llamacpp-src: downloading llama-cpp-python==$version (sdist) from PyPI" >&2
  rm -rf "$dir/dl" "$dir/src"; mkdir -p "$dir/dl"
  # pip prepares the sdist's metadata with its build backend (scikit-build-core,
  # fetched into an isolated environment); nothing is built or installed here
  ${PYTHON:-python3} -m pip download -q --no-deps --no-binary :all: \
    --disable-pip-version-check "llama-cpp-python==$version" -d "$dir/dl" >&2
  tar -xzf "$dir"/dl/llama_cpp_python-*.tar.gz -C "$dir/dl"
  mv "$dir"/dl/llama_cpp_python-*/vendor/llama.cpp "$dir/src"
  rm -rf "$dir/dl"
fi
echo "$dir/src"
