#!/usr/bin/env bash
# scripts/setup-deps.sh with stand-ins for dpkg-query, apt-get, apt-cache and
# Python (nothing is installed): a pip that fails makes it exit non-zero
# naming the package, PEP 668's refusal is explained, a missing Debian package
# is named, and `run` asks pip for nothing.
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
fake=$(mktemp -d)
trap 'rm -rf "$fake"' EXIT
fails=0
expect() { # expect DESCRIPTION WANT_RC GOT_RC OUTPUT NEEDLE...
  local what=$1 want=$2 got=$3 out=$4; shift 4
  local ok=1
  if [ "$want" = nonzero ]; then [ "$got" != 0 ] || ok=0; else [ "$got" = "$want" ] || ok=0; fi
  for n in "$@"; do grep -qF -- "$n" <<<"$out" || ok=0; done
  if [ $ok = 1 ]; then echo "ok: $what"; else echo "FAIL: $what (rc $got)"; echo "$out" | sed 's/^/    /'; fails=$((fails + 1)); fi
}

# dpkg-query: every package installed except those in $FAKE_MISSING
cat > "$fake/dpkg-query" <<'SH'
#!/bin/sh
for p; do :; done
case " $FAKE_MISSING " in *" $p "*) exit 1 ;; esac
printf 'install ok installed'
SH
# apt-get: update works, install fails; apt-cache: only libcjson-dev exists
printf '#!/bin/sh\n[ "$1" = update ] && exit 0\necho "E: Unable to locate package" >&2; exit 100\n' > "$fake/apt-get"
printf '#!/bin/sh\ncase "$2" in libcjson-dev) echo "  Candidate: 1.7.15-1";; *) echo "  Candidate: (none)";; esac\n' > "$fake/apt-cache"
printf '#!/bin/sh\nexec "$@"\n' > "$fake/sudo"
# python: -m pip --version works; -m pip install logs its arguments and
# fails as $FAKE_PIP says: "pep668", "pkg:NAME" (only NAME fails) or "ok"
cat > "$fake/python" <<'SH'
#!/bin/sh
[ "$1 $2" = "-m pip" ] || exit 3
[ "$3" = "--version" ] && { echo "pip 23.0 (fake)"; exit 0; }
echo "$*" >> "$FAKE_LOG"
case "$FAKE_PIP" in
  pep668) echo "error: externally-managed-environment" >&2; exit 1 ;;
  pkg:*) for a; do [ "$a" = "${FAKE_PIP#pkg:}" ] && { echo "ERROR: No matching distribution found for $a" >&2; exit 1; }; done ;;
esac
echo "Successfully installed everything"
SH
chmod +x "$fake"/*
export PATH="$fake:$PATH" PYTHON="$fake/python" FAKE_LOG="$fake/pip.log" FAKE_MISSING=""
run() { out=$(bash "$root/scripts/setup-deps.sh" "$@" 2>&1); rc=$?; }

FAKE_PIP=pep668 run test
expect "PEP 668 refusal: non-zero, explained, packages named" nonzero $rc "$out" "externally-managed" "tokenizers" "venv"
FAKE_PIP=pkg:tokenizers run test
expect "one package failing: non-zero naming it" nonzero $rc "$out" "could not install tokenizers with"
grep -q "could not install.*numpy" <<<"$out" && { echo "FAIL: a package that installed was named as failed"; fails=$((fails + 1)); }
FAKE_PIP=ok run test
expect "everything installs: exit 0, progress shown" 0 $rc "$out" "setup-deps: pip: Successfully installed"
: > "$FAKE_LOG"
FAKE_PIP=pep668 run run
expect "run: no pip install at all (the test packages are test.sh's)" 0 $rc "$out" "Debian packages: all"
[ ! -s "$FAKE_LOG" ] || { echo "FAIL: run asked pip to install: $(cat "$FAKE_LOG")"; fails=$((fails + 1)); }
FAKE_MISSING="chromium" FAKE_PIP=ok run run
expect "run does not ask for chromium" 0 $rc "$out"
FAKE_MISSING="chromium libcjson-dev" FAKE_PIP=ok run test
expect "a Debian package that does not exist is named" nonzero $rc "$out" "cannot install chromium" "installing 2 Debian packages"
grep -q "cannot install.*libcjson-dev" <<<"$out" && { echo "FAIL: an existing package was named unavailable"; fails=$((fails + 1)); }
run bogus
expect "a bad mode is a usage error" 2 $rc "$out" "usage:"
[ $fails = 0 ] && echo "all setup-deps checks passed"
exit $((fails > 0))
