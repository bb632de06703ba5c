#!/usr/bin/env bash
# The installed CLI works without the source tree: install the build into a
# temporary prefix, move the prefix elsewhere (so neither the source tree nor
# the configured install directories can serve it), and run it from an empty
# directory. Checks: the shipped heads and bank are found beside the
# executable, the plot script is the installed one, and (where strace works)
# no file under the source or build tree is touched.
#   run_installed_cli.sh BUILD_DIR SOURCE_DIR MODEL.gguf
# Exit 77 (CTest skip) when the model is absent.
set -euo pipefail
build=${1:?usage: run_installed_cli.sh BUILD_DIR SOURCE_DIR MODEL}
src=${2:?}
model=${3:?}
[ -f "$model" ] || { echo "run_installed_cli: $model not present: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
mv "$tmp/prefix" "$tmp/moved"
bin="$tmp/moved/bin/entmtp"
mkdir "$tmp/run"
cp "$model" "$tmp/run/$(basename "$model")"
cd "$tmp/run"
fail() { echo "run_installed_cli: $*" >&2; exit 1; }

"$bin" version | grep -q "^entmtp [0-9]" || fail "version did not print"
[ -f "$tmp/moved/share/entmtp/scripts/plot_bench.py" ] || fail "plot_bench.py was not installed"

# shipped heads (and their bank) from <prefix>/share/entmtp/heads
out=$("$bin" generate --model "$(basename "$model")" --prompt "Name three colours." --max-tokens 12 2>&1) ||
  fail "generate failed: $out"
if grep -q "no heads given" <<<"$out"; then fail "the installed heads were not found: $out"; fi
# ... matched by the model's identity, not its file name
ln -s "$(basename "$model")" renamed-model.gguf
out=$("$bin" generate --model renamed-model.gguf --prompt "Hi" --max-tokens 4 --quiet 2>&1) || fail "generate failed: $out"
grep -q "matched by identity" <<<"$out" || fail "the renamed model did not get the installed heads: $out"
grep -q "^-- speedup: " <<<"$out" || fail "no speedup line: $out"

# the plot comes from the installed script (it may fail without matplotlib,
# but it must be that script, run without the source tree)
out=$("$bin" bench --synthetic tiny --tokens 2 --reps 1 --nodes 1,2 --context 16 --plot "$tmp/run/b.png" 2>&1) ||
  fail "bench failed: $out"
grep -qE "plot $tmp/run/b.png|plotting with $tmp/moved/share/entmtp/scripts/plot_bench.py failed" <<<"$out" ||
  fail "the plot did not use the installed script: $out"

# nothing under the source or build tree is opened
if strace -f -qq -o "$tmp/trace" -e trace=%file true 2>/dev/null; then
  strace -f -qq -o "$tmp/trace" -e trace=%file "$bin" generate --model "$(basename "$model")" \
    --prompt "Hi" --max-tokens 4 >/dev/null 2>&1 || fail "generate under strace failed"
  if grep -F -e "$src/" -e "$build/" "$tmp/trace" >"$tmp/hits"; then
    cat "$tmp/hits" >&2
    fail "the installed CLI touched the source or build tree"
  fi
  echo "run_installed_cli: no access to $src or $build (strace)"
else
  echo "run_installed_cli: strace unavailable here: file-access check not run"
fi
echo "run_installed_cli: OK"
