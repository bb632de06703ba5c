#!/usr/bin/env bash
# The GPU check, sized for one device call (600 s): four time-boxed stages,
# each writing $OUT/stageN.log and $OUT/stageN.json as it goes, so a cut
# keeps every stage that finished (8 files: the device tool brings 8 back).
# The stages run in the order of what a call is for, so the slow sanitizers
# come after the numbers only a GPU gives:
#
#   stage 0 (< 30 s)   the machine: nvidia-smi, compilers, cuBLAS, the carried
#                      packages. No device, nvcc or cuBLAS is a failure.
#   stage 1 (< 300 s)  build only what the GPU needs (the plugin for sm_90,
#                      the five test_cuda_* programs, the CLI; Ninja, all
#                      cores, harness off), ldd of the plugin, then the five
#                      tests in parallel.
#   stage 2 (< 240 s)  speed: `entmtp bench --backend cuda` on the synthetic 7B
#                      shape in BF16, Q4_0 and Q4_K weights and on the bundled
#                      model's shape (smollm2-135m, BF16), with the CUDA
#                      default BF16 KV cache (built in seconds: rows repeat
#                      every 256), contexts 256 and 2048, once with CUDA
#                      graphs off; each run measures the device's own
#                      device-to-device copy bandwidth and reports AR's share
#                      of it, verify cost at 1..128 nodes in AR steps, and
#                      launches, syncs and host microseconds per step. The
#                      peer, transformers on PyTorch (scripts/gpu-peer.py),
#                      greedy at the same shapes, is timed in the same stage.
#   stage 3 (< 200 s)  compute-sanitizer: memcheck on all five tests,
#                      racecheck and synccheck on parity, kernels and step ops
#                      with ENTMTP_TEST_SHRINK=1 (smaller cases), all at once;
#                      the roofline estimate; ncu on one AR step when ncu
#                      exists.
#
# BUDGET_S (default 570 on a device, none in a dry run) is the whole call's
# time: a step gets at most what is left of it less 10 s, and a step with
# under 10 s left is not started (recorded "timeout", note "no time left"),
# so the JSON summaries are written before the device tool's cut.
#
# On the lent machine (docs/gpu-check.md):
#   here:   bash scripts/gpu-carry.sh          # .carry/: the .debs and wheels the build needs
#   device: run, carry [".carry"], command "bash scripts/gpu-check.sh", timeout_s 600
# Dry run here or in CI (tests/gpu_check_dryrun.sh): ENTMTP_GPU_CHECK_DRYRUN=1
# runs the same stages, steps, logs and JSON with the CUDA harness plugin in
# place of the GPU: the real plugin is still built with nvcc and ldd'ed, the
# tests run on the harness, compute-sanitizer is replaced by running the
# program as is, the bench uses the tiny shape and the peer runs on the CPU
# (skipped where transformers is not installed). So a typo here costs no
# device minutes.
#
# Knobs: OUT (default /tmp/gpu-check), BUILD (build dir, default build/gpu),
# STAGES (default "0 1 2 3"; 4 is the kernel-by-kernel profile, run alone:
# STAGES="1 4" TESTS=0 builds without running the tests, then profiles),
# JOBS (default nproc), LIMIT_SCALE (each step's time limit multiplied;
# default 1 on the device, 8 in a dry run), BUDGET_S.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=${OUT:-/tmp/gpu-check}
build=${BUILD:-build/gpu}
case $build in /*) ;; *) build="$root/$build" ;; esac
stages=${STAGES:-0 1 2 3}
jobs=${JOBS:-$(nproc)}
dry=${ENTMTP_GPU_CHECK_DRYRUN:-0}
# the limits are the device's; a dry run on a 2-core CI machine gets 8x (LIMIT_SCALE)
scale=${LIMIT_SCALE:-$([ "$dry" = 1 ] && echo 8 || echo 1)}
budget=${BUDGET_S:-$([ "$dry" = 1 ] && echo 0 || echo 570)}
mkdir -p "$out"
tests=(test_cuda_parity test_cuda_kernels test_cuda_step_ops test_cuda_lossless test_cuda_typical)
export root build jobs dry tests_list="${tests[*]}"
race_tests=(test_cuda_parity test_cuda_kernels test_cuda_step_ops)
t_start=$(date +%s)
# a step's limit: its own, cut to what is left of the call's budget less 10 s
# (0: no time left, the step is not started)
limit_for() {  # LIMIT_S
  local limit=$(( $1 * scale ))
  if [ "$budget" -gt 0 ]; then
    local left=$(( t_start + budget - $(date +%s) - 10 ))
    [ "$left" -lt 10 ] && { echo 0; return; }
    [ "$left" -lt "$limit" ] && limit=$left
  fi
  echo "$limit"
}

# ---- one stage's log and JSON summary -------------------------------------
stage=""; stage_status=pass; steps_json=""
stage_begin() {  # N TITLE
  stage=$1; stage_status=pass; steps_json=""
  exec 3>&1 4>&2
  exec > >(tee "$out/stage$stage.log") 2>&1
  echo "== stage $stage: $2 ($(date -u +%H:%M:%S) UTC, $([ "$dry" = 1 ] && echo "dry run" || echo device))"
  write_json running
}
write_json() {  # STATUS
  printf '{"stage": %s, "status": "%s", "dry_run": %s, "elapsed_s": %s, "steps": [%s]}\n' \
    "$stage" "$1" "$([ "$dry" = 1 ] && echo true || echo false)" "$(( $(date +%s) - t_start ))" \
    "$steps_json" > "$out/stage$stage.json"
}
record() {  # NAME RC SECONDS [NOTE]: a step's result into the stage's JSON
  local name=$1 rc=$2 secs=$3 note=${4:-} status=pass
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then status=timeout
  elif [ "$rc" = 77 ] && [ "$dry" = 1 ]; then status=skip   # on a device, exit 77 (no device) is a failure
  elif [ "$rc" != 0 ]; then status=fail; fi
  [ "$status" = pass ] || [ "$status" = skip ] || stage_status=fail
  steps_json+="${steps_json:+, }{\"name\": \"$name\", \"status\": \"$status\", \"rc\": $rc, \"seconds\": $secs, \"note\": \"$note\"}"
  echo "-- $name: $status (rc $rc, ${secs} s)${note:+ [$note]}"
  write_json running
}
step() {  # NAME LIMIT_S CMD...: one step under timeout, its output in the stage log
  local name=$1 limit; limit=$(limit_for "$2"); shift 2
  local t0=$(date +%s)
  [ "$limit" = 0 ] && { record "$name" 124 0 "no time left"; return 124; }
  echo "-- $name (limit ${limit} s): $*"
  timeout --kill-after=5 "$limit" bash -c '"$@"' _ "$@"
  record "$name" $? $(( $(date +%s) - t0 ))
}
parallel_steps() {  # LIMIT_S PREFIX CMDFN NAME...: CMDFN NAME run in parallel, logs kept apart then printed
  local limit prefix=$2 fn=$3; limit=$(limit_for "$1"); shift 3
  local pids=() names=() t0=$(date +%s) n
  if [ "$limit" = 0 ]; then
    for n in "$@"; do record "$prefix $n" 124 0 "no time left"; done
    return
  fi
  for n in "$@"; do
    ( timeout --kill-after=5 "$limit" bash -c '"$@"' _ "$fn" "$n" > "$out/.$prefix.$n.txt" 2>&1; echo $? > "$out/.$prefix.$n.rc" ) &
    pids+=($!); names+=("$n")
  done
  for p in "${pids[@]}"; do wait "$p"; done
  for n in "${names[@]}"; do
    echo "---- $prefix $n"
    cat "$out/.$prefix.$n.txt"
    record "$prefix $n" "$(cat "$out/.$prefix.$n.rc")" $(( $(date +%s) - t0 ))
    rm -f "$out/.$prefix.$n.txt" "$out/.$prefix.$n.rc"
  done
}
stage_end() {
  write_json "$stage_status"
  echo "== stage $stage: $stage_status"
  exec 1>&3 2>&4 3>&- 4>&-
  [ "$stage_status" = pass ] || overall=1
}
overall=0

# ---- the carried packages (no registry on the device) ---------------------
deps=/tmp/entmtp-deps
unpack_carry() {
  mkdir -p "$deps"
  local f
  for f in .carry/debs/*.deb; do [ -e "$f" ] && dpkg -x "$f" "$deps"; done
  # the carried .pc files point at /usr: point them at $deps instead (a sysroot
  # would also move the machine's own .pc files' paths, e.g. OpenBLAS's)
  local pc
  for pc in "$deps"/usr/lib/x86_64-linux-gnu/pkgconfig/*.pc "$deps"/usr/share/pkgconfig/*.pc; do
    [ -e "$pc" ] && sed -i "s#=/usr#=$deps/usr#" "$pc"
  done
  export PKG_CONFIG_PATH="$deps/usr/lib/x86_64-linux-gnu/pkgconfig:$deps/usr/share/pkgconfig:${PKG_CONFIG_PATH:-}"
  export LD_LIBRARY_PATH="$deps/usr/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}"
  export PATH="$deps/usr/bin:$PATH"
  # Ninja and CMake from their PyPI wheels when the machine has none (a wheel is a zip)
  local w tool
  for tool in ninja cmake; do
    command -v "$tool" >/dev/null && continue
    for w in .carry/wheels/"$tool"-*.whl; do
      [ -e "$w" ] || continue
      python3 -m zipfile -e "$w" "$deps/$tool-wheel" >/dev/null 2>&1 || continue
      chmod +x "$deps/$tool-wheel"/*.data/scripts/* "$deps/$tool-wheel"/*/data/bin/* 2>/dev/null
      for d in "$deps/$tool-wheel"/*.data/scripts "$deps/$tool-wheel"/*/data/bin; do
        [ -x "$d/$tool" ] && export PATH="$d:$PATH"
      done
    done
  done
  # the carried .debs are bookworm's: when the machine has the libraries itself, prefer them
  if [ "$dry" = 1 ]; then export PKG_CONFIG_PATH=""; fi
}

# ---- stage 0: the machine --------------------------------------------------
machine() {
  if [ "$dry" = 1 ]; then
    echo "dry run: no device; nvidia-smi not required"
  else
    nvidia-smi || return 1
    nvidia-smi --query-gpu=name,memory.total,clocks.max.memory,driver_version --format=csv || return 1
  fi
  gcc --version | head -1 || return 1
  nvcc --version | tail -2 || return 1
  cmake --version | head -1 || return 1
  command -v ninja && ninja --version || echo "no ninja: Unix Makefiles"
  local cuda_lib
  cuda_lib=$(dirname "$(dirname "$(command -v nvcc)")")
  ls "$cuda_lib"/lib64/libcublas.so* "$cuda_lib"/targets/*/lib/libcublas.so* 2>/dev/null | head -2 | grep -q . ||
    { echo "cuBLAS not found under $cuda_lib"; return 1; }
  echo "cuBLAS: $(ls "$cuda_lib"/lib64/libcublas.so* "$cuda_lib"/targets/*/lib/libcublas.so* 2>/dev/null | head -1)"
  if [ "$dry" = 1 ]; then echo "dry run: compute-sanitizer not required"
  else command -v compute-sanitizer || return 1; fi
  command -v ncu || echo "ncu: not found (stage 3 prints the roofline only)"
  python3 -c "import torch, transformers; print('peer: torch', torch.__version__, 'transformers', transformers.__version__, 'cuda', torch.cuda.is_available())" ||
    echo "peer: no torch or transformers (stage 2's peer steps fail)"
  pkg-config --modversion libcjson libpcre2-8 || return 1
}

# ---- stage 1: build, tests, sanitizers -------------------------------------
configure() {
  local gen=() extra=()
  command -v ninja >/dev/null && gen=(-G Ninja)
  # the dry run also builds the harness plugin, which runs the tests on the CPU
  [ "$dry" = 1 ] && extra=(-DENTMTP_CUDA_HARNESS=ON) || extra=(-DENTMTP_CUDA_HARNESS=OFF)
  cmake -S . -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DENTMTP_CUDA=ON \
    -DENTMTP_WERROR=OFF -DENTMTP_NATIVE=OFF -DENTMTP_BUILD_STATIC=ON -DENTMTP_BUILD_TOOLS=ON -DENTMTP_BUILD_TESTS=ON -DCMAKE_CUDA_ARCHITECTURES=90 "${extra[@]}"
}
build_targets() {
  local t=(entmtp-cuda entmtp_cli $tests_list)
  [ "$dry" = 1 ] && t+=(entmtp-cuda-harness)
  cmake --build "$build" -j "$jobs" --target "${t[@]}"
}
plugin() {
  if [ "$dry" = 1 ]; then echo "$build/tests/cuda_harness/libentmtp-cuda-harness.so"
  else echo "$build/cuda/libentmtp-cuda.so"; fi
}
check_plugin() {
  local real="$build/cuda/libentmtp-cuda.so"
  [ -f "$real" ] || { echo "plugin missing: $real"; return 1; }
  ldd "$real" || return 1
  ! ldd "$real" | grep -q "not found" || { echo "plugin has unresolved libraries"; return 1; }
  [ -f "$(plugin)" ] || { echo "plugin for the tests missing: $(plugin)"; return 1; }
}
# The dry run runs every case shrunk, and leaves out the two end-to-end tests:
# on the harness they take minutes, and CI runs them anyway as *_harness.
dry_skip=" test_cuda_lossless test_cuda_typical "
run_test() {
  if [ "$dry" = 1 ]; then
    [[ "$dry_skip" == *" $1 "* ]] && { echo "dry run: skipped (CI runs ${1}_harness)"; return 77; }
    ENTMTP_TEST_SHRINK=1 ENTMTP_CUDA_PLUGIN=$(plugin) "$build/tests/$1"
  else ENTMTP_CUDA_PLUGIN=$(plugin) "$build/tests/$1"; fi
}
sanitize() {  # TOOL TEST
  if [ "$dry" = 1 ]; then echo "dry run: $1 replaced by a plain run"; run_test "$2"
  else ENTMTP_CUDA_PLUGIN=$(plugin) compute-sanitizer --tool "$1" --error-exitcode 9 "$build/tests/$2"; fi
}
sanitize_item() {  # TOOL:TEST; racecheck and synccheck on the shrunk cases
  local tool=${1%%:*} t=${1#*:}
  if [ "$tool" = memcheck ]; then sanitize "$tool" "$t"; else ENTMTP_TEST_SHRINK=1 sanitize "$tool" "$t"; fi
}

# ---- stage 2: speed ---------------------------------------------------------
bench() {  # SHAPE WEIGHTS TOKENS CONTEXT [GRAPHS]
  local reps=3; [ "$dry" = 1 ] && reps=1
  ENTMTP_CUDA_GRAPHS=${5:-1} ENTMTP_CUDA_PLUGIN=$(plugin) "$build/entmtp" bench --synthetic "$1" --weights "$2" \
    --backend cuda --tokens "$3" --context "$4" --reps "$reps" --json
}

# EntMTP on the bundled model's shape without its GGUF (98 MB, more than a
# call carries): a whole step (draft, verify, accept, commit) per tree of the
# shipped Hydra bank on random weights, the AR step timed alike; with the
# bank's accept lengths (measured on the real model: greedy tokens do not
# depend on the backend) the bench prints EntMTP's speed on this device.
# The dry run takes the CPU backend: the harness needs minutes for this shape.
treebench() {  # SHAPE WEIGHTS TOKENS CONTEXT
  local backend=cuda tokens=$3; [ "$dry" = 1 ] && backend=cpu tokens=1
  ENTMTP_CUDA_PLUGIN=$(plugin) "$build/entmtp" bench --synthetic "$1" --weights "$2" --backend "$backend" \
    --heads heads/SmolLM2-135M-Instruct.hydra.safetensors --bank heads/SmolLM2-135M-Instruct.hydra.bank.json \
    --tokens "$tokens" --context "$4" --nodes 1 --reps 1 --json
}

peer() {  # SHAPE CONTEXT [ARGS...]: transformers on PyTorch, greedy, the same shape
  local shape=$1 ctx=$2; shift 2
  if [ "$dry" = 1 ]; then python3 scripts/gpu-peer.py --shape "$shape" --context "$ctx" --tokens 16 --device cpu --reps 1 "$@"
  else python3 scripts/gpu-peer.py --shape "$shape" --context "$ctx" --tokens 64 "$@"; fi
}

# the steps run under timeout in a child bash: it needs the functions
export -f machine configure build_targets plugin check_plugin run_test sanitize sanitize_item bench treebench peer
export dry_skip
unpack_carry
for s in $stages; do
  case $s in
    0) stage_begin 0 "the machine"
       step machine 30 machine
       stage_end ;;
    1) stage_begin 1 "build and tests"
       step configure 60 configure && step build 240 build_targets && step ldd-plugin 10 check_plugin
       [ "$stage_status" = pass ] && [ "${TESTS:-1}" = 1 ] && parallel_steps 90 test run_test "${tests[@]}"
       stage_end ;;
    2) stage_begin 2 "speed, and the transformers peer"
       if [ "$dry" = 1 ]; then
         step "bench tiny bf16 ctx 64" 60 bench tiny bf16 4 64
         step "peer tiny bf16 ctx 64" 60 peer tiny 64
         step "bench tiny q4_0 ctx 64, graphs off" 60 bench tiny q4_0 4 64 0
         step "EntMTP step per Hydra bank tree, smollm2-135m q4_0 ctx 8" 60 treebench smollm2-135m q4_0 1 8
       else  # the most wanted first: a cut keeps what finished
         step "bench llama-7b bf16 ctx 256" 30 bench llama-7b bf16 32 256
         step "peer llama-7b bf16 ctx 256" 60 peer llama-7b 256
         step "bench smollm2-135m bf16 ctx 256" 30 bench smollm2-135m bf16 32 256
         step "peer smollm2-135m bf16 ctx 256" 60 peer smollm2-135m 256
         step "EntMTP step per Hydra bank tree, smollm2-135m bf16 ctx 256" 40 treebench smollm2-135m bf16 32 256
         step "bench llama-7b q4_0 ctx 256" 30 bench llama-7b q4_0 32 256
         step "bench llama-7b q4_k ctx 256" 30 bench llama-7b q4_k 32 256
         step "bench llama-7b bf16 ctx 2048" 35 bench llama-7b bf16 32 2048
         step "bench llama-7b bf16 ctx 256, graphs off" 30 bench llama-7b bf16 32 256 0
       fi
       stage_end ;;
    3) stage_begin 3 "compute-sanitizer and profile"
       if [ -x "$build/tests/test_cuda_parity" ]; then
         # memcheck on all five, racecheck and synccheck on three, all at once
         checks=()
         for t in "${tests[@]}"; do checks+=("memcheck:$t"); done
         for t in "${race_tests[@]}"; do checks+=("racecheck:$t" "synccheck:$t"); done
         parallel_steps 150 sanitizer sanitize_item "${checks[@]}"
       else record "sanitizer: the tests are not built (stage 1)" 1 0; fi
       step roofline 20 python3 scripts/roofline.py
       if [ "$dry" != 1 ] && command -v ncu >/dev/null; then
         step "ncu AR step" 40 env ENTMTP_CUDA_PLUGIN="$(plugin)" ncu --target-processes all --launch-skip 200 \
           --launch-count 30 --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy \
           "$build/entmtp" bench --synthetic llama-7b --backend cuda --tokens 4 --reps 1
       fi
       stage_end ;;
    4) stage_begin 4 "kernel by kernel: one 7B BF16 AR step and a 64-node verify"
       # one pass per kernel (duration and DRAM bytes), direct launches so each
       # kernel is its own row; the table is made here by scripts/ncu_table.py
       if [ "$dry" = 1 ]; then
         step "kernels tiny bf16" 60 env ENTMTP_CUDA_GRAPHS=0 ENTMTP_CUDA_PLUGIN="$(plugin)" "$build/entmtp" bench \
           --synthetic tiny --weights bf16 --backend cuda --context 16 --tokens 1 --reps 1 --nodes 64
       else
         step "kernels llama-7b bf16" 120 bash -c 'env ENTMTP_CUDA_GRAPHS=0 ENTMTP_CUDA_PLUGIN="$1" ncu --clock-control none \
           --cache-control none --target-processes all --launch-count 2500 --csv --metrics gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum \
           --log-file "$2/stage4-ncu.csv" "$3/entmtp" bench --synthetic llama-7b --weights bf16 --backend cuda \
           --context 16 --tokens 1 --reps 1 --nodes 64; rc=$?; gzip -f "$2/stage4-ncu.csv"; exit $rc' _ "$(plugin)" "$out" "$build"
         step "peer llama-7b bf16 ctx 256" 90 peer llama-7b 256
       fi
       stage_end ;;
    *) echo "gpu-check: unknown stage '$s' (stages are 0 1 2 3 4)" >&2; overall=2 ;;
  esac
done
echo "gpu-check: $( [ $overall = 0 ] && echo pass || echo FAIL ) in $(( $(date +%s) - t_start )) s; logs in $out"
exit $overall
