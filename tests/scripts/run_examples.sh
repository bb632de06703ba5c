#!/usr/bin/env bash
# The C examples as a reader meets them: README's "Using the library" snippet
# is examples/c/quickstart.c verbatim; quickstart and generate (built by CMake
# against libentmtp.so) run on the bundled SmolLM2 with its shipped heads:
# generate answers a question in text, streams it, and a missing model is an
# error naming the file. Skips (77) the runs without the model.
#   run_examples.sh SOURCE_DIR QUICKSTART_BIN GENERATE_BIN
set -uo pipefail
src=$1 quickstart=$2 generate=$3
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }

# the README's C block under "## Using the library" == quickstart.c
snippet=$(awk '/^## Using the library/{s=1} s&&/^```c$/{c=1;next} c&&/^```$/{exit} c' "$src/README.md")
if [ "$snippet" == "$(cat "$src/examples/c/quickstart.c")" ]; then echo "ok: README snippet is examples/c/quickstart.c"
else fail "README's snippet differs from examples/c/quickstart.c:"; diff <(echo "$snippet") "$src/examples/c/quickstart.c" | head -20; fi

model=${ENTMTP_MODEL:-$src/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf}
heads=$src/heads/SmolLM2-135M-Instruct.hydra.safetensors
if [ ! -s "$model" ] || [ ! -s "$heads" ]; then echo "SKIP: runs need $model and $heads"; [ $fails = 0 ] && exit 77; exit 1; fi
out=$("$quickstart" "$model" "$heads" 2>&1) && grep -q "^one step: [1-9]" <<<"$out" && echo "ok: quickstart: $out" || fail "quickstart: $out"
out=$("$generate" "$model" "What is the capital of France? Answer in one word." "$heads" 16 2>/dev/null)
rc=$?
[ $rc = 0 ] && grep -q "Paris" <<<"$out" && echo "ok: generate answers in text: ${out//$'\n'/ }" || fail "generate (rc $rc): $out"
err=$("$generate" "$model" "What is the capital of France? Answer in one word." "$heads" 16 2>&1 >/dev/null)
grep -q "tokens in .* steps (EntMTP)" <<<"$err" && echo "ok: generate decoded with the heads: $err" || fail "generate's figures: $err"
ar=$("$generate" "$model" "What is the capital of France? Answer in one word." 2>/dev/null)
[ "$ar" == "$out" ] && echo "ok: greedy without heads (AR) prints the same text" || fail "AR '$ar' != EntMTP '$out'"
err=$("$generate" /nonexistent/model.gguf hi 2>&1); rc=$?
[ $rc = 1 ] && grep -q "/nonexistent/model.gguf" <<<"$err" && echo "ok: a missing model: $err" || fail "missing model (rc $rc): $err"
"$generate" >/dev/null 2>&1; [ $? = 2 ] && echo "ok: no arguments is a usage error" || fail "no arguments"
exit $((fails > 0))
