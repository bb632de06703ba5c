#!/usr/bin/env bash
# Run HERE (a machine with apt): downloads the Debian packages the build needs
# into .carry/debs, for a lent GPU machine that has no package registry.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$root/.carry/debs"
grep -qx '/.carry/' "$root/.git/info/exclude" 2>/dev/null || echo '/.carry/' >> "$root/.git/info/exclude"
cd "$root/.carry/debs"
apt-get download libcjson-dev libcjson1 libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 \
  libpcre2-posix3 libopenblas-dev libopenblas0 libopenblas0-pthread libopenblas-pthread-dev \
  libgfortran5 pkg-config libpkgconf3 pkgconf pkgconf-bin 2>&1 | tail -2
ls -la "$root/.carry/debs"
