#!/usr/bin/env python3
"""Kernel-by-kernel table from the GPU check's stage 4 (ncu CSV: one row per
kernel and metric, gpu__time_duration and DRAM bytes). The run is split into
forward passes at each embedding kernel (prefill, the AR step, the verify),
and each pass's kernels are grouped by name and grid.

  python3 scripts/ncu_table.py docs/data/gpu/2026-11-27-h200/call3/stage4-ncu.csv.gz [--copy-gbs 4058]
"""
import argparse
import collections
import csv
import gzip
import io
import re


def kernels(path):
    text = (gzip.open(path, "rt") if path.endswith(".gz") else open(path)).read().splitlines()
    start = next(i for i, line in enumerate(text) if line.startswith('"ID"'))
    ks = collections.OrderedDict()
    for r in csv.DictReader(io.StringIO("\n".join(text[start:]))):
        k = ks.setdefault(int(r["ID"]), {"name": r["Kernel Name"], "grid": r["Grid Size"], "block": r["Block Size"]})
        k[r["Metric Name"]] = float(r["Metric Value"].replace(",", ""))
    return list(ks.values())


def passes(ks):
    out, cur = [], []
    for k in ks:
        if k["name"].startswith("embed") and cur:
            out.append(cur)
            cur = []
        cur.append(k)
    return out + [cur] if cur else out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--copy-gbs", type=float, default=0.0, help="the device's measured copy bandwidth (GB/s)")
    ap.add_argument("--top", type=int, default=8)
    a = ap.parse_args()
    for p, ks in enumerate(passes(kernels(a.csv))):
        us = sum(k.get("gpu__time_duration.sum", 0) for k in ks) / 1e3
        gb = sum(k.get("dram__bytes_read.sum", 0) + k.get("dram__bytes_write.sum", 0) for k in ks) / 1e9
        frac = f", {gb / (us / 1e6) / a.copy_gbs:.0%} of copy bandwidth" if a.copy_gbs and us else ""
        print(f"\npass {p}: {len(ks)} kernels, {us:.0f} us, {gb:.2f} GB of DRAM traffic{frac}\n")
        print("| kernel | grid x block | launches | us each | share | MB each | TB/s (DRAM) |")
        print("|---|---|---|---|---|---|---|")
        agg = collections.defaultdict(lambda: [0, 0.0, 0.0])
        for k in ks:
            key = (re.sub(r"\(.*", "", k["name"]).replace("void ", ""), f'{k["grid"]}x{k["block"]}')
            g = agg[key]
            g[0] += 1
            g[1] += k.get("gpu__time_duration.sum", 0) / 1e3
            g[2] += (k.get("dram__bytes_read.sum", 0) + k.get("dram__bytes_write.sum", 0)) / 1e6
        for (name, shape), (n, t, mb) in sorted(agg.items(), key=lambda x: -x[1][1])[: a.top]:
            print(f"| `{name}` | {shape} | {n} | {t / n:.1f} | {t / us:.1%} | {mb / n:.1f} | {mb / t:.2f} |"
                  if t else f"| `{name}` | {shape} | {n} | 0 | 0 | {mb / n:.1f} | - |")


if __name__ == "__main__":
    main()
