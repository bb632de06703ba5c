#!/usr/bin/env python3
"""Plot the two frontiers `entmtp search` recorded in a bank file.

  left   acceptance frontier: mean accept length against node count, the
         Algorithm 1 (probe) estimate and the canonical self-rollout
  right  throughput frontier: tokens/s against node count, Pareto trees
         marked, AR as a line

  python3 scripts/plot_search.py bank.json bank.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(bank_path, png_path):
    with open(bank_path) as f:
        bank = json.load(f)
    s = bank["search"]
    fr = s["frontier"]
    cfg = s["settings"]
    nodes = [t["nodes"] for t in fr]
    depth = [t["depth"] for t in fr]
    fig, (a, b) = plt.subplots(1, 2, figsize=(11, 4.2))
    sc = a.scatter(nodes, [t["biased_accept_length"] for t in fr], c=depth, cmap="viridis", marker="o",
                   label=f"{cfg['builder']} estimate")
    a.plot(nodes, [t["self_accept_length"] for t in fr], "k.-", lw=1, label="self-rollout")
    a.set_xlabel("nodes (root included)")
    a.set_ylabel("mean accept length (tokens/step)")
    a.set_title("acceptance frontier")
    a.legend(loc="lower right")
    fig.colorbar(sc, ax=a, label="depth")
    tps = [t["tokens_per_second"] for t in fr]
    b.plot(nodes, tps, ".", color="0.6", label="frontier trees")
    px = [t["nodes"] for t in fr if t["pareto"]]
    py = [t["tokens_per_second"] for t in fr if t["pareto"]]
    b.plot(px, py, "r*-", ms=10, label="Pareto (the bank)")
    b.axhline(s["ar_tokens_per_second"], color="k", ls="--", lw=1, label="AR")
    b.set_xlabel("nodes (root included)")
    b.set_ylabel("tokens/s (prefill included)")
    b.set_title(f"throughput frontier ({cfg['backend']})")
    b.legend(loc="lower right")
    fig.suptitle(f"{cfg['heads_kind']} heads, {cfg['prompts']} prompts of {cfg['prompt_file'].split('/')[-1]}, "
                 f"T={cfg['temperature']:.3g}, {cfg['max_tokens']} tokens each", fontsize=10)
    fig.tight_layout()
    fig.savefig(png_path, dpi=110)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
