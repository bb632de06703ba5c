#!/usr/bin/env python3
"""scripts/roofline.py's latency model against the first GPU run's ncu
profile (docs/data/gpu/2026-11-27-h200/call3/stage4-ncu.csv.gz, issue 34):
the stored constants are this CSV's least-squares fit, every tensor-core
launch shape is within 15% of its measured mean (the multi-wave ones were
not fitted), the AR step's kernel time within 5%, and --device moves the
bandwidth. Exit 77 (skip) without numpy."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CSV = os.path.join(ROOT, "docs/data/gpu/2026-11-27-h200/call3/stage4-ncu.csv.gz")
sys.path.insert(0, os.path.join(ROOT, "scripts"))
try:
    import numpy  # noqa: F401  (the fit's least squares)
except ImportError:
    print("skip: numpy not installed")
    sys.exit(77)
import roofline  # noqa: E402


def main():
    failures = []
    roofline.use_device("h200")
    if abs(roofline.BW - 4.058e12) > 1e9 or roofline.L2_BYTES != 60e6:
        failures.append("--device h200 did not set the copy bandwidth / L2: %g %g" % (roofline.BW, roofline.L2_BYTES))
    passes = roofline.gpu_launches(CSV)
    if len(passes) != 3:
        failures.append("expected 3 forward passes (prefill, AR, verify), got %d" % len(passes))
    fitted = roofline.fit_tc(passes)
    for k in roofline.TC_FIT_TERMS:
        if abs(fitted[k] / roofline.TC_FIT[k] - 1) > 0.01:
            failures.append("TC_FIT[%s] = %g, the CSV's fit %g" % (k, roofline.TC_FIT[k], fitted[k]))
    checked = 0
    for (v, n_in, blocks, p), recs in roofline.tc_shapes(passes).items():
        meas = sum(r["seconds"] for r in recs) / len(recs)
        dram = sum(r["dram"] for r in recs) / len(recs)
        pred = roofline.tc_fitted_time(v, n_in, blocks, dram)
        _, waves = roofline.tc_features(v, n_in, blocks)
        checked += waves > 1
        if abs(pred / meas - 1) > 0.15:
            failures.append("pass %d <%s> n_in %d, %d blocks: model %.1f us, measured %.1f" %
                            (p, v, n_in, blocks, pred * 1e6, meas * 1e6))
    if checked < 9:
        failures.append("only %d multi-wave shapes to check the fit with" % checked)
    ar = passes[1]
    meas = sum(r["seconds"] for r in ar)
    pred = sum(roofline.tc_fitted_time(r["variant"], r["n_in"], r["blocks"], r["dram"]) if "variant" in r
               else r["seconds"] for r in ar)
    if abs(pred / meas - 1) > 0.05 or abs(meas - 14.19e-3) > 0.01e-3:
        failures.append("AR step: model %.0f us, measured %.0f" % (pred * 1e6, meas * 1e6))
    # the command line prints the table and the model of every pass
    out = subprocess.run([sys.executable, os.path.join(ROOT, "scripts/roofline.py"), "--device", "h200", "--against",
                          CSV], capture_output=True, text=True)
    if out.returncode or out.stdout.count("| check |") != 9 or "AR step (1 row): 294 launches" not in out.stdout:
        failures.append("roofline.py --against: rc %d\n%s%s" % (out.returncode, out.stdout[-2000:], out.stderr[-2000:]))
    for f in failures:
        print("FAIL:", f)
    print("%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
