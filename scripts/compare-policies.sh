#!/usr/bin/env bash
# Policies against each other on the same prompts, paired per prompt: for each
# prompt every configuration runs in turn (so drift in the machine's speed
# hits them alike), and each configuration's per-prompt tokens/s is compared
# with the first one's (log ratio; mean and 95% interval over prompts).
#
#   scripts/compare-policies.sh PROMPTS.jsonl [N]
#
# PROMPTS.jsonl: one {"prompt": ...} per line (tools/prompts/make_prompts.py);
# the first N (all) are used. A benchmark, not a test.
#   CONFS ("static:n02d1 static:n03d2 throughput dynamic")  each one of
#         ar | static:TREE (a bank tree) | KIND (a policy kind, over the bank)
#   BIN (build/release/entmtp), MODEL (the bundled SmolLM2-135M Q4_1), HEADS,
#   BANK (the shipped Hydra heads and bank), TOKENS (128), THREADS (2),
#   TEMPERATURE (0), OUT (.cache/compare-policies)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
[ $# -ge 1 ] || { sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
prompts=$1
[ -f "$prompts" ] || { echo "compare-policies: no prompt file '$prompts'" >&2; exit 1; }
n=${2:-$(wc -l < "$prompts")}
BIN=${BIN:-build/release/entmtp}
[ -x "$BIN" ] || { echo "compare-policies: no binary '$BIN' (build first: scripts/run.sh)" >&2; exit 1; }
model=${MODEL:-$(bash scripts/fetch-model.sh)}
stem=$(basename "$model"); stem=${stem%%.*}
heads=${HEADS:-heads/$stem.hydra.safetensors}
bank=${BANK:-heads/$stem.hydra.bank.json}
CONFS=${CONFS:-static:n02d1 static:n03d2 throughput dynamic}
OUT=${OUT:-.cache/compare-policies}
mkdir -p "$OUT"
rm -f "$OUT"/*.jsonl
python3 - "$prompts" "$n" "$OUT" <<'PY'
import json, sys
for i, line in enumerate(open(sys.argv[1])):
    if i >= int(sys.argv[2]): break
    open(f"{sys.argv[3]}/prompt{i}.txt", "w").write(json.loads(line)["prompt"])
PY
for ((i = 0; i < n; i++)); do
  for c in $CONFS; do
    case $c in
      ar) args=(--ar);;
      static:*) k=$(python3 -c 'import json,sys; n=[t["name"] for t in json.load(open(sys.argv[1]))["trees"]]; print(n.index(sys.argv[2]) if sys.argv[2] in n else "")' "$bank" "${c#static:}")
                [ -n "$k" ] || { echo "compare-policies: bank $bank has no tree '${c#static:}'" >&2; exit 1; }
                args=(--heads "$heads" --bank "$bank" --policy static --static-tree "$k");;
      *) args=(--heads "$heads" --bank "$bank" --policy "$c");;
    esac
    "$BIN" generate --model "$model" "${args[@]}" --prompt-file "$OUT/prompt$i.txt" --max-tokens "${TOKENS:-128}" \
      --threads "${THREADS:-2}" --temperature "${TEMPERATURE:-0}" --json --quiet >> "$OUT/${c//:/_}.jsonl"
  done
  echo "compare-policies: prompt $((i + 1)) of $n" >&2
done
python3 - "$OUT" $CONFS <<'PY'
import json, math, statistics, sys
out, confs = sys.argv[1], sys.argv[2:]
rows = {c: [json.loads(l) for l in open(f"{out}/{c.replace(':', '_')}.jsonl")] for c in confs}
rate = lambda r: len(r["tokens"]) / r["decode_seconds"]
ref = confs[0]
print(f"| configuration | tokens/s | mean accept length | vs {ref}, per prompt (95% interval) |")
print("|---|---|---|---|")
for c in confs:
    rs = rows[c]
    tps = sum(len(r["tokens"]) for r in rs) / sum(r["decode_seconds"] for r in rs)
    acc = statistics.mean(r["mean_accept_length"] for r in rs)
    lr = [math.log(rate(a) / rate(b)) for a, b in zip(rs, rows[ref])]
    half = 1.96 * statistics.stdev(lr) / math.sqrt(len(lr)) if len(lr) > 1 else float("nan")
    m = statistics.mean(lr)
    print(f"| {c} | {tps:.1f} | {acc:.3f} | {100 * (math.exp(m) - 1):+.1f}% ({100 * (math.exp(m - half) - 1):+.1f}%, {100 * (math.exp(m + half) - 1):+.1f}%) |")
PY
