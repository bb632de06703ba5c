#!/usr/bin/env bash
# scripts/gpu-check.sh dry-run here, so a typo costs no device minutes: the
# same stages, steps, logs and JSON summaries, with the CUDA harness plugin
# in place of the GPU (the real plugin is still built for sm_90 and ldd'ed).
# Then: the 8 files a device call can bring back are there, parse, and say
# pass; every step the device runs is in them; and without the dry run, on
# this machine with no device, stage 0 fails (a missing device is a failure,
# never a skip). usage: run_gpu_check_dryrun.sh BUILD_DIR
set -uo pipefail
src=$(cd "$(dirname "$0")/../.." && pwd)
work=$1
out="$work/out"
rm -rf "$out"; mkdir -p "$out"
ENTMTP_GPU_CHECK_DRYRUN=1 OUT="$out" BUILD="$work/build" JOBS=${JOBS:-2} bash "$src/scripts/gpu-check.sh" \
  > "$work/dryrun.txt" 2>&1
rc=$?
tail -5 "$work/dryrun.txt"
python3 - "$out" "$rc" <<'PY' || exit 1
import json, os, sys
out, rc = sys.argv[1], int(sys.argv[2])
files = sorted(os.listdir(out))
want = [f"stage{s}.{e}" for s in range(4) for e in ("json", "log")]
assert files == want, f"files under OUT: {files}, expected {want}"
names = {}
for s in range(4):
    j = json.load(open(os.path.join(out, f"stage{s}.json")))
    assert j["stage"] == s and j["dry_run"] is True, j
    bad = [st for st in j["steps"] if st["status"] not in ("pass", "skip")]
    assert j["status"] == "pass" and not bad, f"stage {s}: {j['status']}, {bad}"
    names[s] = [st["name"] for st in j["steps"]]
    print(f"stage {s}: {j['status']}, steps: {', '.join(st['name'] + '=' + st['status'] for st in j['steps'])}")
tests = ["test_cuda_parity", "test_cuda_kernels", "test_cuda_step_ops", "test_cuda_lossless", "test_cuda_typical"]
expect = {0: ["machine"], 1: ["configure", "build", "ldd-plugin"] + [f"test {t}" for t in tests],
          2: ["bench tiny bf16 ctx 64", "peer tiny bf16 ctx 64", "bench tiny q4_0 ctx 64, graphs off",
              "EntMTP step per Hydra bank tree, smollm2-135m q4_0 ctx 8"],
          3: [f"sanitizer memcheck:{t}" for t in tests]
          + [f"sanitizer {tool}:{t}" for t in tests[:3] for tool in ("racecheck", "synccheck")]
          + ["roofline"]}
for s, want_names in expect.items():
    missing = sorted(set(want_names) - set(names[s]))
    assert not missing, f"stage {s} lacks steps {missing}"
assert rc == 0, f"gpu-check exited {rc}"
print("dry run: 8 files, every stage passed, every device step present")
PY
# without the dry run there is no device here: stage 0 must fail, not skip
neg="$work/out-nodevice"
rm -rf "$neg"; mkdir -p "$neg"
if STAGES=0 OUT="$neg" BUILD="$work/build" bash "$src/scripts/gpu-check.sh" > "$work/nodevice.txt" 2>&1; then
  echo "gpu-check passed stage 0 with no device"; exit 1
fi
grep -q '"status": "fail"' "$neg/stage0.json" || { echo "stage0.json does not say fail"; cat "$neg/stage0.json"; exit 1; }
echo "no device: stage 0 failed as it must"
