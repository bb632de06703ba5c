#!/usr/bin/env python3
"""Prints the search record of a bank file (`entmtp search --out`) as Markdown:
every frontier tree with its stage-1 (biased) and self-rollout accept length,
the bias, tokens/s and Pareto membership (Appendix B of the EntMTP paper), then
the policy calibration sweep.

    python3 scripts/bank_table.py heads/SmolLM2-135M-Instruct.hydra.bank.json
"""
import json
import sys


def main(path):
    with open(path) as f:
        bank = json.load(f)
    search = bank.get("search")
    if not search:
        sys.exit(f"{path}: no 'search' record (not written by entmtp search)")
    st = search.get("settings", {})
    print(f"Bank `{path}`: {st}")
    print(f"\nAR: {search.get('ar_tokens_per_second', 0):.2f} tokens/s\n")
    print("| tree | nodes | depth | accept (stage 1, biased) | accept (self-rollout) | bias | tokens/s | in bank |")
    print("|---|---|---|---|---|---|---|---|")
    for t in search.get("frontier", []):
        print(f"| {t['name']} | {t['nodes']} | {t['depth']} | {t['biased_accept_length']:.3f} | "
              f"{t['self_accept_length']:.3f} | {t['bias']:+.3f} | {t.get('tokens_per_second', 0):.2f} | "
              f"{'yes' if t.get('pareto') else ''} |")
    cal = search.get("calibration", {})
    sweeps = cal.get("sweeps", []) if isinstance(cal, dict) else []
    if sweeps:
        print("\n| policy | setting | tokens/s | accept |")
        print("|---|---|---|---|")
        for s in sweeps:
            if s["policy"] == "hysteresis":
                setting = f"conservative tree {s['conservative_tree']}, tau {s['tau']:.3f} (q {s['quantile']})"
            else:
                setting = f"alpha {s['alpha']}, thresholds " + ", ".join(f"{x:.3f}" for x in s["thresholds"])
            print(f"| {s['policy']} | {setting} | {s['tokens_per_second']:.2f} | {s['mean_accept_length']:.3f} |")
    pol = bank.get("policy", {})
    print(f"\nDefault policy: {pol.get('default')}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
