#!/usr/bin/env bash
# Run HERE (a machine with apt and pip): fetches what the GPU check's build
# needs into .carry/ for a lent GPU machine that has no registry:
#   .carry/debs    libcjson and PCRE2 (the library's two dependencies) and
#                  pkg-config, as Debian packages (about 1.5 MB);
#   .carry/wheels  Ninja from PyPI (0.2 MB), used when the machine has none;
#                  CARRY_CMAKE=1 adds CMake's wheel (30 MB: only when stage 0
#                  of a GPU check said the machine has no cmake, since the
#                  working tree and the carry share 64 MiB).
# OpenBLAS is not carried: the GPU build never uses it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
rm -rf "$root/.carry"
mkdir -p "$root/.carry/debs" "$root/.carry/wheels"
exclude=$(git -C "$root" rev-parse --git-path info/exclude)
grep -qx '/.carry/' "$exclude" 2>/dev/null || echo '/.carry/' >> "$exclude"
cd "$root/.carry/debs"
apt-get download libcjson-dev libcjson1 libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 \
  libpcre2-posix3 pkg-config libpkgconf3 pkgconf pkgconf-bin
cd "$root/.carry/wheels"
wheels=(ninja); [ "${CARRY_CMAKE:-0}" = 1 ] && wheels+=(cmake)
python3 -m pip download --no-deps --only-binary=:all: --platform manylinux2014_x86_64 -d . "${wheels[@]}"
du -sh "$root/.carry"/*
