#!/usr/bin/env bash
# Shows that the CUDA harness tests catch broken kernels: applies each
# mutation below to its file under cuda/ in turn, rebuilds the harness
# plugin, runs the CUDA tests on it (one must FAIL: test_cuda_parity_harness,
# then test_cuda_kernels_harness (the typed products, tree attention), then
# test_cuda_memeff_harness (memory efficiency), then
# test_cuda_step_ops_harness, then test_cuda_lossless_harness, each only if
# the ones before passed), and restores the file. The bad-coalescing and
# bank-conflict mutations (dense product, staged quantized product,
# tensor-core product, in-block and split over blocks, tree attention on CUDA cores and on tensor cores) keep every result right and only waste bandwidth: only the
# memory efficiency floors can catch them.
#   bash scripts/cuda-mutations.sh [build-dir]     (default build/mutations)
#   ONLY='dense product' bash scripts/cuda-mutations.sh   (the mutations whose name holds ONLY)
# Exit status 0 when every mutation was caught; the log of each is printed.
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
build=${1:-build/mutations}
backup=$(mktemp -d)
cp cuda/*.cu cuda/*.h "$backup"/
restore() { cp "$backup"/* cuda/; rm -rf "$backup"; }
trap restore EXIT
tests=(test_cuda_parity_harness test_cuda_kernels_harness test_cuda_memeff_harness test_cuda_step_ops_harness
  test_cuda_lossless_harness)

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DENTMTP_CUDA=OFF -DENTMTP_CUDA_HARNESS=ON >/dev/null
cmake --build "$build" -j "${JOBS:-2}" --target entmtp-cuda-harness test_cuda_parity test_cuda_kernels \
  test_cuda_step_ops test_cuda_lossless test_cuda_memeff >/dev/null || exit 1

# name | file | python expression applied to the file's text (must change it)
mutations=(
  "off-by-one in the causal mask (a row misses its own key)|cuda/attention.cu|s.replace('(tree_count ? tree_count[row] : row + 1)', '(tree_count ? tree_count[row] : row)')"
  "rope_round_kv: K's first half rotated the wrong way (+ b sin instead of - b sin) before the BF16 rounding|cuda/elementwise.cu|s.replace('k_out + at + t, (uint16_t)bf16_bits_rn(__fadd_rn(__fmul_rn(a, c), -__fmul_rn(b, s)))', 'k_out + at + t, (uint16_t)bf16_bits_rn(__fadd_rn(__fmul_rn(a, c), __fmul_rn(b, s)))')"
  "matmul_q_add: the residual add dropped from the tensor-core product's epilogue|cuda/matmul.cu|s.replace('mats.add ? __fadd_rn(emt_ld(out), product) : product', 'product')"
  "RoPE (rope, rope_q_round_kv): consecutive lanes take consecutive heads (4-byte accesses a head apart)|cuda/elementwise.cu|s.replace('int32_t h = idx / half, i = idx % half;', 'int32_t h = idx % n_heads, i = idx / n_heads;')"
  "missing __syncthreads in rmsnorm|cuda/elementwise.cu|s.replace('emt_st(partial + threadIdx.x, ss);\n    __syncthreads();', 'emt_st(partial + threadIdx.x, ss);')"
  "partial-warp shuffle in the warp sum|cuda/cuda_exec.h|s.replace('for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync', 'for (int off = 16; off > 0; off >>= 1) if ((threadIdx.x & 31) < 16) v += __shfl_xor_sync')"
  "acceptance ties to the last path instead of the first|cuda/step_ops.cu|s.replace('if (len > best_len ||', 'if (len >= best_len ||')"
  "stop token dropped from the emitted tokens|cuda/step_ops.cu|s.replace('keep = j + 1;\n            rec->stopped = 1;', 'keep = j;\n            rec->stopped = 1;')"
  "attention_dyn keeps the launch's prefix length (a replayed graph's stale L)|cuda/attention.cu|s.replace('    if (d_len) n_prefix = *d_len;\n    const int32_t group', '    const int32_t group')"
  "a graph's index arrays staged in the reused ring instead of its constants|cuda/backend_cuda.cu|s.replace('else if (ex->recording) return cu_graph_stage(ex, src, bytes);', 'else if (ex->recording) cu_graph_stage(ex, src, bytes);')"
  "dense product: each lane reads its own contiguous span of the chunk (uncoalesced weight loads)|cuda/matmul.cu|s.replace('k * 32 * V + lane * V', 'lane * LOADS * V + k * V')"
  "dense product: activations staged column-major across the tile's rows (8 lanes storing 4 KiB apart: shared-memory bank conflicts)|cuda/matmul.cu|s.replace('const int32_t r = i / quads, c = i % quads;', 'const int32_t r = i % nr, c = i / nr;')"
  "dense product: the shared-memory swizzle dropped (2-way bank conflicts)|cuda/matmul.cu|s.replace('const int h = (lane >> 2) & 1;', 'const int h = 0;')"
  "staged quantized product: activations read one float at a time (4-byte loads 16 bytes apart)|cuda/matmul.cu|s.replace('const float4 a = emt_ld((const float4 *)xp);\n                    xv[0] = a.x, xv[1 % PER_LANE] = a.y, xv[2 % PER_LANE] = a.z, xv[3 % PER_LANE] = a.w;', 'for (int j = 0; j < PER_LANE; j++) xv[j] = emt_ld(xp + j);')"
  "tensor-core product: the A fragment's registers 1 and 2 swapped (rows g+8 taken for columns 8-15: not PTX's layout)|cuda/matmul.cu|s.replace('a0[4] = { ua.x, ub.x, ua.y, ub.y }', 'a0[4] = { ua.x, ua.y, ub.x, ub.y }')"
  "tensor-core product: staged rows without their 64-byte pad (two rows' fragment reads on the same banks: 2-way bank conflicts)|cuda/matmul.cu|s.replace('#define TC_ROW_BYTES (3 * TC_PLANE + 64)', '#define TC_ROW_BYTES (3 * TC_PLANE)')"
  "tensor-core product split over blocks: partial sums stored lane-major (4-byte accesses 256 bytes apart)|cuda/matmul.cu|s.replace('part + p * share_stride + (((size_t)mt * NT + j) * 4 + i) * 32 + lane', 'part + p * share_stride + (size_t)lane * MT * NT * 4 + ((size_t)mt * NT + j) * 4 + i')"
  "tensor-core product split over blocks: the last block adds its own share first (the sum's order depends on which block arrives last)|cuda/matmul.cu|s.replace('float v = SPLIT && kw != 0 ? emt_ld_cg(slot(0, mt, j, i)) : acc[mt][j][i];', 'float v = acc[mt][j][i];').replace('p == kw ? acc[mt][j][i] :', 'p == kw ? emt_ld_cg(slot(0, mt, j, i)) :')"
  "tensor-core product split over blocks: the shares' lines discarded from L2 before the last block reads them|cuda/matmul.cu|s.replace('float v = SPLIT && kw != 0 ? emt_ld_cg(slot(0, mt, j, i)) : acc[mt][j][i];', 'if (SPLIT && lane < TC_KWARPS) emt_discard_l2(slot(lane, mt, j, i) - lane);\n                __syncwarp();\n                float v = SPLIT && kw != 0 ? emt_ld_cg(slot(0, mt, j, i)) : acc[mt][j][i];')"
  "tensor-core product: activations staged row-minor (consecutive lanes load 16 bytes of consecutive rows, a row apart)|cuda/matmul.cu|s.replace('const int32_t r = i / quads, c = q0 + i - r * quads;', 'const int32_t r = i % nr8, c = q0 + i / nr8;')"
  "tree attention: K/V staged key-major (consecutive lanes load 16 bytes of consecutive keys, a KV row apart)|cuda/attention.cu|s.replace('const int32_t r = i / units, u = i % units;', 'const int32_t r = i % (hi - lo), u = i / (hi - lo);')"
  "tree attention: the K tile unpadded (8 lanes scoring 8 keys read one bank quad: 8-way bank conflicts)|cuda/attention.cu|s.replace('return 4 * (units % 2 ? units : units + 1);', 'return 4 * units;')"
  "tree attention on tensor cores: staged K and query rows unpadded (6 x head_dim bytes: two rows' 16-byte fragment reads on the same banks)|cuda/attention.cu|s.replace('return 6 * hd + ((64 - 6 * hd % 128) % 128 + 128) % 128;', 'return 6 * hd;')"
  "tree attention on tensor cores, BF16 KV: each lane stores its own two units of V's key pairs (every other unit of the warp's span: 2-way bank conflicts)|cuda/attention.cu|s.replace('store_units_spread(pairs, i0, v_total, lane, [&](int32_t item, int half) {\n            return (uint4 *)(vp + (size_t)(item / (HD / 8)) * VST) + 2 * (item % (HD / 8)) + half;\n        });', 'if (i0 + lane < v_total) {\n            emt_st((uint4 *)(vp + (size_t)((i0 + lane) / (HD / 8)) * VST) + 2 * ((i0 + lane) % (HD / 8)), pairs[0]);\n            emt_st((uint4 *)(vp + (size_t)((i0 + lane) / (HD / 8)) * VST) + 2 * ((i0 + lane) % (HD / 8)) + 1, pairs[1]);\n        }')"
  "tree attention on tensor cores, BF16 KV: the K tile's one-plane rows unpadded (2 x head_dim bytes: two rows' 16-byte fragment reads on the same banks)|cuda/attention.cu|s.replace('return 2 * hd + ((64 - 2 * hd % 128) % 128 + 128) % 128;', 'return 2 * hd;')"
  "tree attention on tensor cores: the query A fragment's registers 1 and 2 swapped (rows g+8 given as columns 8-15: not PTX's layout)|cuda/attention.cu|s.replace('{ { qa[0].x, qb[0].x, qa[0].y, qb[0].y }, { qa[1].x, qb[1].x, qa[1].y, qb[1].y },\n                                                { qa[2].x, qb[2].x, qa[2].y, qb[2].y } }', '{ { qa[0].x, qa[0].y, qb[0].x, qb[0].y }, { qa[1].x, qa[1].y, qb[1].x, qb[1].y },\n                                                { qa[2].x, qa[2].y, qb[2].x, qb[2].y } }')"
  "the sampled root's running sum compared before the token's probability is added (off by one token)|cuda/step_ops.cu|s.replace('run += p;\n                if (target < before + run) {\n                    *token = i;\n                    return;\n                }', 'if (target < before + run) {\n                    *token = i;\n                    return;\n                }\n                run += p;')"
)
# unbroken, the op-level test passes (or the demonstration means nothing)
(cd "$build" && ctest -R '^test_cuda_parity_harness$' >/dev/null) || { echo "baseline: test_cuda_parity_harness fails"; exit 1; }
echo "baseline: test_cuda_parity_harness passes on the unmodified kernels"
caught=0
tried=0
for m in "${mutations[@]}"; do
  name=${m%%|*}
  if [ -n "${ONLY:-}" ] && [[ $name != *"$ONLY"* ]]; then continue; fi
  tried=$((tried + 1))
  rest=${m#*|}
  src=${rest%%|*}
  expr=${rest#*|}
  cp "$backup"/* cuda/
  python3 - "$src" "$expr" <<'PY' || exit 1
import sys
path, expr = sys.argv[1], sys.argv[2]
s = open(path).read()
t = eval(expr, {"s": s})
if t == s:
    sys.exit("mutation did not apply to " + path + ": " + expr)
open(path, "w").write(t)
PY
  printf '\n==== mutation: %s\n' "$name"
  git --no-pager diff --no-color -U0 -- "$src" | tail -n +5
  cmake --build "$build" -j "${JOBS:-2}" --target entmtp-cuda-harness >/dev/null || exit 1
  # the op-level tests first (seconds); the end-to-end one only if they passed
  caught_by=
  for t in "${tests[@]}"; do
    out=$(cd "$build" && ctest --output-on-failure -R "^$t\$" 2>&1)
    rc=$?
    printf '%s\n' "$out" | grep -E 'cuda-harness:|tolerance|CUDA token|differ|DIFFER|CHECK\(|FAIL:|Test +#|tests passed' | head -n 8
    if [ $rc != 0 ]; then caught_by=$t; break; fi
  done
  if [ -n "$caught_by" ]; then
    echo "caught by $caught_by: $name"
    caught=$((caught + 1))
  else
    echo "NOT CAUGHT: $name"
  fi
done
restore
trap - EXIT
cmake --build "$build" -j "${JOBS:-2}" --target entmtp-cuda-harness >/dev/null
printf '\n%d of %d mutations caught\n' "$caught" "$tried"
[ "$caught" = "$tried" ]
