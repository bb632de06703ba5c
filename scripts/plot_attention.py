#!/usr/bin/env python3
"""Plot alternated runs of tests/bench_attention for two builds.

usage: plot_attention.py OUT.png OLD.txt NEW.txt [TITLE]

OLD.txt and NEW.txt hold the data lines of several bench_attention runs
each (variant, kv, depth, rows, us/step, ...), as scripts that alternate
the two builds collect them; the plot shows the median time per step of
each (cache type, depth, rows) for both builds, one panel per row count,
with the new/old ratio over each pair of bars.
"""
import statistics
import sys


def load(path):
    runs = {}
    with open(path) as f:
        for line in f:
            p = line.split()
            if len(p) < 5 or p[0] in ("variant",) or not p[2].isdigit():
                continue
            runs.setdefault((p[1], int(p[2]), int(p[3])), []).append(float(p[4]))
    return {k: statistics.median(v) for k, v in runs.items()}


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    out, old_path, new_path = sys.argv[1:4]
    title = sys.argv[4] if len(sys.argv) > 4 else "CPU attention per decode step"
    old, new = load(old_path), load(new_path)
    keys = sorted(set(old) & set(new), key=lambda k: (k[2], k[0] != "f32", k[1]))
    if not keys:
        sys.exit(f"plot_attention: no (kv, depth, rows) line in both {old_path} and {new_path}")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted({k[2] for k in keys})
    fig, axes = plt.subplots(1, len(rows), figsize=(6 * len(rows), 4.2), squeeze=False)
    for ax, r in zip(axes[0], rows):
        ks = [k for k in keys if k[2] == r]
        xs = range(len(ks))
        ax.bar([x - 0.2 for x in xs], [old[k] / 1e3 for k in ks], 0.4, label="before", color="#999999")
        ax.bar([x + 0.2 for x in xs], [new[k] / 1e3 for k in ks], 0.4, label="after", color="#1f77b4")
        for x, k in zip(xs, ks):
            ax.text(x, max(old[k], new[k]) / 1e3, f"{new[k] / old[k]:.2f}x", ha="center", va="bottom", fontsize=9)
        ax.set_xticks(list(xs))
        ax.set_xticklabels([f"{k[0]}\n{k[1]}" for k in ks])
        ax.set_xlabel("KV cache type, context (tokens)")
        ax.set_ylabel("ms per step (16 layers)")
        ax.set_title(f"{r} row{'s' if r > 1 else ''}" + (" (a tree of 8 nodes)" if r > 1 else " (AR)"))
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print(f"plot: {out}")


if __name__ == "__main__":
    main()
