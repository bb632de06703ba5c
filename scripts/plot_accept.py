#!/usr/bin/env python3
"""Mean accept length per drafter, tree and task, from the JSON files that
tools/train_heads/measure_eagle3.py writes (one per tree): one panel per
tree, a bar per drafter and task, the value on each bar.

  python3 scripts/plot_accept.py OUT.png chain_1.json chain_3.json ...
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(png, sources):
    runs = []
    for src in sources:
        with open(src) as f:
            runs.append(json.load(f))
    drafters = list(runs[0]["accept_length"])
    tasks = list(runs[0]["accept_length"][drafters[0]])
    fig, axes = plt.subplots(1, len(runs), figsize=(4.2 * len(runs), 4.2), sharey=True, squeeze=False)
    width = 0.8 / len(drafters)
    colors = plt.cm.tab10.colors
    top = max(v for r in runs for per in r["accept_length"].values() for v in per.values())
    for ax, run in zip(axes[0], runs):
        for k, d in enumerate(drafters):
            ys = [run["accept_length"][d][t] for t in tasks]
            xs = [i + (k - (len(drafters) - 1) / 2) * width for i in range(len(tasks))]
            bars = ax.bar(xs, ys, width, label=d.replace("SmolLM2-135M-Instruct.", ""), color=colors[k % 10])
            for b, y in zip(bars, ys):
                ax.text(b.get_x() + b.get_width() / 2, y + 0.02, f"{y:.2f}", ha="center", va="bottom", fontsize=7)
        ax.set_xticks(range(len(tasks)))
        ax.set_xticklabels(tasks)
        ax.set_ylim(1.0, top * 1.12)
        ax.set_title(f"tree {run['tree']}")
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].set_ylabel("mean accept length (tokens per step)")
    axes[0][0].legend(fontsize=8, loc="upper left")
    r0 = runs[0]
    fig.suptitle(f"Greedy accept length on held-out prompts ({r0['prompts_per_task']} per task, "
                 f"{r0['max_tokens']} tokens), SmolLM2-135M, every run equal to AR")
    fig.tight_layout()
    fig.savefig(png, dpi=110)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2:])
