#!/usr/bin/env python3
"""Bar chart of `entmtp bench --suite --json`: tokens/s per method and task,
speedup over AR on each bar, mean accept length below it.

  python3 scripts/plot_suite.py results.json results.png
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src, png):
    with open(src) as f:
        data = json.load(f)
    tasks = data["tasks"]
    keys = []
    for t in tasks:
        for r in t["rows"]:
            if r["key"] not in keys:
                keys.append(r["key"])
    names = {r["key"]: r["method"] for t in tasks for r in t["rows"]}
    width = 0.8 / len(keys)
    fig, ax = plt.subplots(figsize=(max(8, 3.2 * len(tasks) + 1), 5.2))
    colors = plt.cm.tab10.colors
    for k, key in enumerate(keys):
        xs, ys, labels = [], [], []
        for i, t in enumerate(tasks):
            row = next((r for r in t["rows"] if r["key"] == key), None)
            if row is None:
                continue
            xs.append(i + (k - (len(keys) - 1) / 2) * width)
            ys.append(row["tokens_per_second"])
            labels.append(f"{row['speedup']:.2f}x\n{row['mean_accept_length']:.2f}")
        bars = ax.bar(xs, ys, width * 0.95, label=names[key], color=colors[k % len(colors)])
        for b, lab in zip(bars, labels):
            ax.annotate(lab, (b.get_x() + b.get_width() / 2, b.get_height()), ha="center", va="bottom",
                        fontsize=6, xytext=(0, 1), textcoords="offset points")
    ax.set_xticks(range(len(tasks)))
    ax.set_xticklabels([f"{t['task']} ({t['prompts']} prompts)" for t in tasks])
    ax.set_ylabel("tokens/s (prefill included)")
    s = data["settings"]
    ax.set_title(f"EntMTP suite on {s['backend']}: T={s['temperature']:.3g}, {int(s['max_tokens'])} tokens per prompt\n"
                 f"bar labels: speedup over AR, mean accept length", fontsize=9)
    ax.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.08))
    fig.tight_layout()
    fig.savefig(png, dpi=110)


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    main(sys.argv[1], sys.argv[2])
