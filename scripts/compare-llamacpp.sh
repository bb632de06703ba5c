#!/usr/bin/env bash
# EntMTP against llama.cpp on the same GGUF, threads and machine, in one run:
# rounds alternate llama-bench and entmtp so that drift in the machine's
# speed hits both, and the ratios are taken round by round (medians printed).
#
#   pp512        llama-bench -p 512         vs  entmtp bench --context 512 (prefill)
#   tg128        llama-bench -n 128         vs  entmtp bench --context 1 --tokens 128
#                (AR from an empty context, as llama-bench's tg test runs)
#   tg128 @ d512 llama-bench -n 128 -d 512  vs  entmtp bench --context 512 --tokens 128
#                (AR after a 512-token context)
#   EntMTP       the shipped Hydra heads and bank on held-out code prompts
#                (entmtp generate, greedy, decode tokens/s) vs llama-bench tg128,
#                and vs entmtp's own AR (--ar) on the same prompts
#
# A benchmark, not a test. llama.cpp's tools are built once from the pinned
# llama-cpp-python sdist (scripts/build-llamacpp.sh).
#   THREADS (2)  ROUNDS (3)  PROMPTS (4 code prompts per round)  TOKENS (128)
#   MODEL (the bundled SmolLM2-135M Q4_1)  HEADS  BANK  OUT (.cache/compare)
#   ENTMTP_CPU_KERNELS  passed through (baseline | avx2 | avx512)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
PROMPTS=${PROMPTS:-4}
TOKENS=${TOKENS:-128}
OUT=${OUT:-$root/.cache/compare}
model=${MODEL:-$(bash scripts/fetch-model.sh)}
stem=$(basename "$model"); stem=${stem%%.*}
heads=${HEADS:-$root/heads/$stem.hydra.safetensors}
bank=${BANK:-$root/heads/$stem.hydra.bank.json}
llama=$(bash scripts/build-llamacpp.sh)
cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build/release -j "${JOBS:-2}" --target entmtp_cli >/dev/null
entmtp=build/release/entmtp
mkdir -p "$OUT"
python3 tools/prompts/make_prompts.py --task code --split eval --n "$PROMPTS" --seed 123 --out "$OUT/code_eval.jsonl"
rm -f "$OUT"/round*.json

for r in $(seq 1 "$ROUNDS"); do
  echo "round $r/$ROUNDS: llama-bench (pp512, tg128, tg128 at depth 512)" >&2
  "$llama/llama-bench" -m "$model" -t "$THREADS" -p 512 -n "$TOKENS" -r 1 -o json > "$OUT/round$r.llama.json" 2>/dev/null
  "$llama/llama-bench" -m "$model" -t "$THREADS" -p 0 -n "$TOKENS" -d 512 -r 1 -o json > "$OUT/round$r.llama_d512.json" 2>/dev/null
  echo "round $r/$ROUNDS: entmtp bench (pp512 and AR at depth 512; AR from an empty context)" >&2
  "$entmtp" bench --model "$model" --threads "$THREADS" --context 512 --tokens "$TOKENS" --nodes 1 \
    --reps 1 --json > "$OUT/round$r.entmtp.json"
  "$entmtp" bench --model "$model" --threads "$THREADS" --context 1 --tokens "$TOKENS" --nodes 1 \
    --reps 1 --json > "$OUT/round$r.entmtp_d0.json"
  echo "round $r/$ROUNDS: entmtp generate (Hydra, then --ar, $PROMPTS code prompts)" >&2
  : > "$OUT/round$r.spec.jsonl"
  : > "$OUT/round$r.ar.jsonl"
  python3 -c 'import json,sys
for i,l in enumerate(open(sys.argv[1])): open(f"{sys.argv[2]}/prompt{i}.txt","w").write(json.loads(l)["prompt"])' \
    "$OUT/code_eval.jsonl" "$OUT"
  for i in $(seq 0 $((PROMPTS - 1))); do
    "$entmtp" generate --model "$model" --heads "$heads" --bank "$bank" --prompt-file "$OUT/prompt$i.txt" \
      --max-tokens "$TOKENS" --threads "$THREADS" --json --quiet >> "$OUT/round$r.spec.jsonl"
    "$entmtp" generate --model "$model" --ar --prompt-file "$OUT/prompt$i.txt" \
      --max-tokens "$TOKENS" --threads "$THREADS" --json --quiet >> "$OUT/round$r.ar.jsonl"
  done
done

python3 - "$OUT" "$ROUNDS" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
rows = []
for r in range(1, rounds + 1):
    ll = json.load(open(f"{out}/round{r}.llama.json"))
    pp = next(x["avg_ts"] for x in ll if x["n_prompt"] > 0)
    tg = next(x["avg_ts"] for x in ll if x["n_gen"] > 0)
    tgd = next(x["avg_ts"] for x in json.load(open(f"{out}/round{r}.llama_d512.json")) if x["n_gen"] > 0)
    e = json.load(open(f"{out}/round{r}.entmtp.json"))
    e0 = json.load(open(f"{out}/round{r}.entmtp_d0.json"))
    def decode_rate(name):
        runs = [json.loads(l) for l in open(f"{out}/round{r}.{name}.jsonl")]
        return (sum(len(s["tokens"]) for s in runs) / sum(s["decode_seconds"] for s in runs),
                statistics.mean(s["mean_accept_length"] for s in runs))
    spec, acc = decode_rate("spec")
    own_ar, _ = decode_rate("ar")
    rows.append(dict(pp=pp, tg=tg, tgd=tgd, epp=e["prefill_tokens_per_second"], etgd=e["ar_tokens_per_second"],
                     etg=e0["ar_tokens_per_second"], spec=spec, own_ar=own_ar, accept=acc, kernels=e["kernels"]))
med = lambda k: statistics.median(x[k] for x in rows)
ratio = lambda a, b: statistics.median(x[a] / x[b] for x in rows)
print(f"kernels: {rows[0]['kernels']}")
print(f"| measure | llama.cpp | entmtp | ratio (median of {rounds} rounds) |")
print("|---|---|---|---|")
print(f"| pp512 tokens/s | {med('pp'):.1f} | {med('epp'):.1f} | {ratio('epp', 'pp'):.2f}x |")
print(f"| tg128 tokens/s (AR) | {med('tg'):.1f} | {med('etg'):.1f} | {ratio('etg', 'tg'):.2f}x |")
print(f"| tg128 @ d512 tokens/s (AR) | {med('tgd'):.1f} | {med('etgd'):.1f} | {ratio('etgd', 'tgd'):.2f}x |")
print(f"| EntMTP Hydra, code prompts, tokens/s | {med('tg'):.1f} (AR) | {med('spec'):.1f} "
      f"(accept {med('accept'):.2f}) | {ratio('spec', 'tg'):.2f}x |")
print(f"| entmtp's own AR on the same prompts | | {med('own_ar'):.1f} | EntMTP / own AR {ratio('spec', 'own_ar'):.2f}x |")
json.dump(rows, open(f"{out}/summary.json", "w"), indent=1)
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit(0)
labels = ["pp512", "tg128 (AR)", "tg128 @ d512", "EntMTP Hydra\n(code prompts)"]
llama = [med("pp"), med("tg"), med("tgd"), med("tg")]
ours = [med("epp"), med("etg"), med("etgd"), med("spec")]
fig, ax = plt.subplots(figsize=(6.4, 3.6))
xs = range(len(labels))
ax.bar([x - 0.2 for x in xs], llama, 0.4, label="llama.cpp (llama-bench; AR for the last pair)")
ax.bar([x + 0.2 for x in xs], ours, 0.4, label="entmtp")
for x, a, b in zip(xs, llama, ours):
    ax.text(x + 0.2, b, f"{b / a:.2f}x", ha="center", va="bottom", fontsize=9)
ax.set_xticks(list(xs))
ax.set_xticklabels(labels)
ax.set_ylabel("tokens/s (median of rounds)")
ax.set_title(f"SmolLM2-135M Q4_1, same GGUF and threads, {rounds} alternated rounds", fontsize=9)
ax.legend(fontsize=8)
fig.tight_layout()
fig.savefig(f"{out}/compare.png", dpi=120)
print(f"plot: {out}/compare.png")
PY
