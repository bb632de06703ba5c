#!/usr/bin/env python3
"""Plot `entmtp bench` output: verify cost (x AR step) against tree size.
usage: plot_bench.py BENCH.json OUT.png   (needs matplotlib: pip install matplotlib)"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

d = json.load(open(sys.argv[1]))
n = [v["nodes"] for v in d["verify"]]
r = [v["ratio_to_ar"] for v in d["verify"]]
fig, ax = plt.subplots(figsize=(6, 4))
ax.plot(n, r, "o-", label="verify step / AR step")
ax.axhline(1.0, color="gray", lw=0.8, ls="--")
ax.set_xscale("log", base=2)
ax.set_xlabel("tree nodes (root included)")
ax.set_ylabel("latency relative to one AR step")
ax.set_title(f"{d['model']} on {d['backend']}, context {d['context']}")
ax.legend()
fig.tight_layout()
fig.savefig(sys.argv[2], dpi=120)
print(f"wrote {sys.argv[2]}")
