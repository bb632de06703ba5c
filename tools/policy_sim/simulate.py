#!/usr/bin/env python3
"""Replay depth rules over recorded steps, free of timing noise.

Input: traces written by examples/c/trace_steps.c with a chain tree as deep
as the heads (e.g. the shipped bank's n05d4), one JSON object per step:
{"p0", "entropy", "q": [[head d's top-k probabilities]...], "accept"}. With
greedy decoding and a chain, accept - 1 = m, the number of leading head
drafts that were right, so the outcome of any shallower chain at that step
is known: depth d emits 1 + min(d, m) tokens.

Each step's cost is in AR steps: verify[n] for an n-node tree (measured by
`entmtp bench --nodes 1,2,3,4,5`) plus `head` per Hydra level run. Rules:
  static d     every step a chain of depth d (runs d levels)
  oracle       depth m, knowing m (an upper bound no policy reaches)
  marginal     run level j, then keep its node while P(levels 0..j right)
               > rate * (verify[j+2] - verify[j+1]); P from head j's
               top-1 probability, calibrated by bins fitted on --train
  lookahead    the same, but run level j only if P(levels < j right) times
               level j's mean pass rate (from --train) clears the same bar
               (the rule of emt_outlook_deeper_may_pay, src/engine/features.c)
Steps are treated as independent samples: the rules' choices do not move
the positions that were traced, so this ranks rules; it does not replace
`entmtp bench --suite`.

  python3 tools/policy_sim/simulate.py --train 'cal/*.jsonl' \\
      --eval code='eval/code*.jsonl' --eval chat='eval/chat*.jsonl' \\
      --verify 1,1.23,1.45,1.68,1.94 --head 0.05
"""
import argparse
import glob
import json
import sys

BINS = [0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.01]


def load(pattern):
    files = sorted(glob.glob(pattern))
    if not files:
        sys.exit(f"simulate: no trace matches '{pattern}'")
    steps = []
    for f in files:
        with open(f) as fh:
            for n, line in enumerate(fh, 1):
                try:
                    s = json.loads(line)
                    steps.append((s["q"], s["accept"] - 1))
                except (ValueError, KeyError) as e:
                    sys.exit(f"simulate: {f}:{n}: not a trace_steps line ({e})")
    return steps


def bin_of(p):
    return next(i for i, b in enumerate(BINS) if p < b)


def fit(train, depth):
    """P(level j right | levels < j right, head j's top-1 in bin) and the
    mean pass rate of level j, with one pseudo-count each way."""
    hit = [[1.0] * len(BINS) for _ in range(depth)]
    seen = [[2.0] * len(BINS) for _ in range(depth)]
    for q, m in train:
        for j in range(min(depth, len(q))):
            if m < j:
                break
            b = bin_of(q[j][0])
            seen[j][b] += 1
            hit[j][b] += m > j
    prob = lambda j, p: hit[j][bin_of(p)] / seen[j][bin_of(p)]
    rate = [(sum(h) - len(BINS)) / max(1.0, sum(s) - 2 * len(BINS)) for h, s in zip(hit, seen)]
    return prob, rate


def run(steps, decide, verify, head):
    tokens = cost = 0.0
    for q, m in steps:
        d, looked = decide(q, m)
        tokens += 1 + min(d, m)
        cost += verify[d] + head * looked
    return tokens / cost


def rules(depth, verify, prob, rate_of, bar):
    def static(d):
        return lambda q, m: (d, d)

    def marginal(lookahead):
        def decide(q, m):
            P, d, looked = 1.0, 0, 0
            for j in range(depth):
                need = bar * (verify[j + 1] - verify[j])
                if lookahead and P * rate_of[j] <= need:
                    break
                looked = j + 1
                P *= prob(j, q[j][0])
                if P <= need:
                    break
                d = j + 1
            return d, looked
        return decide

    out = {f"static d={d}": static(d) for d in range(depth + 1)}
    out["oracle"] = lambda q, m: (m, m)
    out["marginal"] = marginal(False)
    out["lookahead"] = marginal(True)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", required=True, help="glob of traces to calibrate on")
    ap.add_argument("--eval", action="append", required=True, metavar="TASK=GLOB")
    ap.add_argument("--verify", default="1,1.23,1.45,1.68,1.94", help="AR steps per verify of 1,2,.. nodes")
    ap.add_argument("--head", type=float, default=0.05, help="AR steps per Hydra head level")
    ap.add_argument("--bar", type=float, default=1.1, help="tokens per AR step a node must beat")
    a = ap.parse_args()
    verify = [float(x) for x in a.verify.split(",")]
    train = load(a.train)
    depth = min(len(verify) - 1, min(len(q) for q, _ in train))
    prob, rate = fit(train, depth)
    print(f"calibration: {len(train)} steps; level pass rates " + ", ".join(f"{r:.3f}" for r in rate))
    for spec in a.eval:
        task, _, pattern = spec.partition("=")
        steps = load(pattern)
        res = {name: run(steps, dec, verify, a.head) for name, dec in rules(depth, verify, prob, rate, a.bar).items()}
        best_name = max((n for n in res if n.startswith("static")), key=res.get)
        best = res[best_name]
        print(f"{task}: {len(steps)} steps; best static {best_name} at {best:.3f} tokens per AR step")
        for name, v in res.items():
            print(f"  {name:12s} {v:.3f}  {100 * (v / best - 1):+6.1f}% vs best static")


if __name__ == "__main__":
    main()
