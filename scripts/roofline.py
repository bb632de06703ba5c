#!/usr/bin/env python3
"""Roofline estimate of one decoding step of the CUDA backend on an H100 SXM,
from the bytes and FLOPs that its kernels (cuda/*.cu) move and compute, so a
GPU run (`entmtp bench --backend cuda`, scripts/gpu-check.sh) can be compared
with it. Prints the markdown table of docs/performance.md.

What each kernel moves from DRAM (F32 activations; the KV cache in F32 or,
with --kv-type bf16 (the default here, as on the CUDA backend: kv_type
ENTMTP_KV_DEFAULT is BF16 there), in BF16, half the bytes):
- products (cuda/matmul.cu): the weights once per call (row tiles of one
  output group run next to each other, so tiles after the first read L2),
  the input rows once, the output rows once;
- attention (cuda/attention.cu): the K and V prefix once per layer (one
  block stages each 32-key step for every row and head of a KV head's
  group), the queries, the output, and the per-span partials written and
  read back;
- RMSNorm, RoPE, residual adds, SwiGLU: their F32 rows in and out; with a
  BF16 cache, K's RoPE also rounds K and V into the cache (one launch,
  rope_round_kv: F32 in, BF16 out), and Q's RoPE runs in that launch too
  (rope_q_round_kv); the residual adds run in the epilogue of the product
  before them (matmul_q_add: the attention output and down projections read
  the residual row and write the sum, no launch of their own).
FLOPs: 2 per weight per row for the products, 4 * head_dim per (row, head,
key) for attention; elementwise work is left out.

Usage: scripts/roofline.py [--ctx N] [--nodes N] [--kv-type f32|bf16] [--device h100|h200]

--device: h100 (default: the HBM3 peak, what docs/performance.md's tables
before issue 34's fit use) or h200 (the first GPU run's device, at its
measured copy bandwidth, 60 MB L2).

Against a GPU run (issue 34): the tensor-core product's latency model
(TC_FIT below), fitted to the first GPU run, next to every launch of an ncu
CSV (scripts/ncu_table.py's input), the passes' totals with the other
kernels at their measured latency, and what each term is worth:
    scripts/roofline.py --device h200 --against docs/data/gpu/2026-11-27-h200/call3/stage4-ncu.csv.gz [--refit]
The bandwidth model below (--measured) got the bytes of that run right and
their time 4-10x short: docs/performance.md, "CUDA: the harness's model
fitted to the first GPU run (issue 34)".

Measured mode (issue 34): the products' bytes from the CPU CUDA harness's
memory counters (docs/cuda-harness.md, "Memory efficiency") instead of the
ideal ones:
    scripts/roofline.py --measured --run build/dev/tests/test_cuda_memeff \
        --plugin build/dev/tests/cuda_harness/libentmtp-cuda-harness.so [--dtype BF16]
    scripts/roofline.py --measured --report memeff.jsonl   (made with EMT_CUDA_MEMEFF_OUTPUTS=64,128)
--run runs test_cuda_memeff on the harness with EMT_CUDA_MEMEFF_OUTPUTS=64,128
and EMT_CUDA_MEMEFF_DTYPES=<dtype>: the products at the 7B row widths (4096
and 11008 inputs), 1 and 64 rows, 64 and 128 outputs. Each counted quantity
(DRAM, L2 and L1 bytes) is a + b * n_out for output counts that are whole
blocks' worth (64 outputs: a verify's tensor-core block; 32 a dense one), so
the two counts give it for the full matrices, which the harness cannot run in
CI time. Per product:
    time = max(DRAM bytes / HBM, L2->SM bytes / L2 bandwidth,
               L1 cycles / (busy SMs x clock), DRAM bytes / (bytes in flight / latency),
               FLOPs / (FP32 cores or tensor cores x busy SMs / SMs)) + overhead
DRAM: the distinct sectors of the launch (an L2 that keeps the launch's
reuse); L2->SM: the distinct sectors of each block, summed (an L1 that keeps
one block's reuse); L1 cycles: each global load request takes one cycle per
4 sectors, at least one, and each shared-memory wavefront one; bytes in flight: the distinct bytes of an average
global load request x the requests in flight (Little's law: narrow loads
cannot keep enough bytes in flight to cover DRAM latency). The BF16 tensor-core
kernel (tc_product_kernel) has its own occupancy, from its launch shape
(cuda/matmul.cu, tc_shape below: 16 x MT x MW outputs and 8 x NT x RW rows
per block, 4 x MW warps, or MW x RW warps and 4 blocks per tile where the
inputs' shares are split over blocks (33-64 rows), tc_depth x 2 x MT weight
requests in flight per warp, its shared memory and registers per block;
Q/K/V and gate/up one launch each) and FLOPs of 3 BF16 mmas per product (the activations' three
parts), rows padded to 8 and outputs to 16, at the mma.sync rate (assumed
60% of the dense BF16 peak: the peak needs Hopper's wgmma). % of bandwidth: the op's
ideal bytes at the HBM peak over the predicted time. The kernels the harness
does not count yet (attention, norms, RoPE, elementwise, embedding, the
device step) are listed and added at their ideal bytes only: an optimistic
bound, printed apart."""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

BW = 3.35e12          # H100 SXM HBM3, bytes/s (--device h200: its measured copy bandwidth)
BF16_TC = 989e12      # dense BF16 tensor-core FLOP/s
FP32_CORES = 67e12    # FP32 FMA on CUDA cores (the F32/F16/quantized kernels of cuda/matmul.cu)
MMA_SYNC = 0.6 * BF16_TC  # mma.sync.m16n8k16 on H100 (assumed: the dense peak needs wgmma)
TC_SPLITS, TC_ROW_BYTES, TC_KWARPS = 3, 832, 4  # cuda/matmul.cu's tensor-core product
TC_REGISTERS = {(1, 1, 1, 1, False): 110, (2, 1, 1, 1, False): 96, (2, 4, 1, 1, False): 166, (4, 4, 2, 2, True): 216,
                (4, 4, 1, 1, False): 222}  # its registers per thread by variant (ptxas -v, sm_90, CUDA 13; no spills)
L2_BW = 10e12         # L2 -> SM read bandwidth (assumed; published measurements 7-12 TB/s)
KERNEL_OVERHEAD = 2e-6       # ramp-up and tail per kernel inside a replayed graph (assumed)
SMS, CLOCK = 132, 1.755e9
L2_BYTES = 50e6
# --device: the GPU the bandwidth terms and the SM count refer to. h100 (the
# default, what the tables of docs/performance.md before issue 34's fit
# assume): the HBM3 peak, no derating. h200: the device of the first GPU run
# (docs/data/gpu/2026-11-27-h200), at its measured device-to-device copy
# bandwidth (bench's copy_bandwidth_gbs, read+write: 4019-4100 GB/s over the
# run; 4058 in the profiled call), its 60 MB L2 and its 1.98 GHz boost clock.
DEVICES = {
    "h100": dict(name="H100 SXM", bw=3.35e12, bw_what="HBM3 peak", sms=132, clock=1.755e9, l2=50e6),
    "h200": dict(name="H200", bw=4.058e12, bw_what="measured copy bandwidth (peak 4.8)", sms=132, clock=1.98e9, l2=60e6),
}


def use_device(name):
    """Points the module's bandwidth, SM and clock constants at `name`."""
    global BW, SMS, CLOCK, L2_BYTES, MMA_CYCLES
    d = DEVICES[name]
    BW, SMS, CLOCK, L2_BYTES = d["bw"], d["sms"], d["clock"], d["l2"]
    MMA_CYCLES = 16 * 8 * 16 * 2 / (MMA_SYNC / SMS / CLOCK)
    return d
# Little's law for DRAM: what is in flight per SM must cover the latency
# (assumed: 48 resident warps per SM, 4 independent load requests in flight
# per warp, 700 ns DRAM latency under load)
WARPS_PER_SM, REQUESTS_IN_FLIGHT, DRAM_LATENCY = 48, 4, 700e-9


def cuda_define(name, source="cuda/attention.cu"):
    """The integer a `#define NAME value` line of the CUDA source gives: the
    model reads the kernels' constants instead of keeping copies that drift
    (it held ATTN_SPAN 512 and 16 span blocks after the kernel moved to 256
    and 32)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", source)
    with open(path) as f:
        m = re.search(r"^#define\s+%s\s+(\d+)\b" % re.escape(name), f.read(), re.M)
    if not m:
        raise SystemExit(f"roofline.py: no '#define {name} <integer>' in {source}")
    return int(m.group(1))


SPAN = cuda_define("ATTN_SPAN")            # attention: keys per partial
ATTN_KEYS = cuda_define("ATTN_KEYS")       # attention: keys per step, staged in shared memory
ATTN_MAX_SPAN_BLOCKS = cuda_define("ATTN_MAX_SPAN_BLOCKS")  # blocks per (KV head, query group) looping over spans
SHARED_PER_SM = 228 * 1024
# tree attention on tensor cores (cuda/attention.cu attn_tc_span_kernel)
TCA_WARPS, TCA_MAX_QUERIES = 4, 64   # warps per block, queries per block (one m-tile of 16 per warp)
TCA_REGISTERS = 255   # its registers per thread at head_dim 128 (ptxas -v, sm_90, CUDA 13: no spills)
MMA_CYCLES = 16 * 8 * 16 * 2 / (MMA_SYNC / SMS / CLOCK)  # SM cycles per m16n8k16 at the assumed mma.sync rate
SPLIT_INSTR = 9       # instructions per FP32 value split into three BF16 parts (sm_90 PTX: 3 cvt.rn.bf16.f32, 2 widenings, 2 subtractions, packing)
PRODUCTS = ("q", "k", "v", "o", "gate", "up", "down", "lm_head")
FUSED_WITH_PREVIOUS = ("k", "v", "up")  # BF16: Q/K/V and gate/up are one tensor-core launch each
ATTENTION_OPS = ("ATTN", "ATTN_BF16", "ATTN_COMBINE")  # ATTN_BF16: the span kernels over a BF16 KV cache
ROWWISE_OPS = ("RMSNORM", "ROPE", "SWIGLU", "ADD", "EMBED", "SILU_RESIDUAL", "SCALE", "SOFTCAP", "GEGLU", "ROUND_BF16",
               "ROPE_ROUND_KV", "ROPE_Q_ROUND_KV")
# the products whose epilogue adds the residual (matmul_q_add; the harness's op "<dtype>+ADD")
ADDS_RESIDUAL = ("o", "down")
KV_BYTES = {"f32": 4, "bf16": 2}
# a BF16 cache's K/V rows are staged without a split: per value about one
# instruction (16-byte loads of 8 values, K's two 8-byte shared stores, V's
# key-pair interleave: and/shift/or per word; assumed)
BF16_STAGE_INSTR = 1

MODELS = {
    # hidden, layers, heads, kv_heads, head_dim, ffn, vocab
    "SmolLM2-135M": (576, 30, 9, 3, 64, 1536, 49152),
    "Llama-2-7B": (4096, 32, 32, 32, 128, 11008, 32000),
}
BYTES_PER_WEIGHT = {"BF16": 2.0, "Q4_0": 18 / 32}


def step(model, dtype, rows, ctx, kv_bytes=4):
    H, L, nh, nkv, hd, F, V = MODELS[model]
    wb = BYTES_PER_WEIGHT[dtype]
    qd, kvd = nh * hd, nkv * hd
    mats = [(H, qd), (H, kvd), (H, kvd), (qd, H), (H, F), (H, F), (F, H)]  # (n_in, n_out)
    weights = acts = kv = flops = 0.0
    for n_in, n_out in mats:
        weights += L * n_in * n_out * wb
        acts += L * rows * (n_in + n_out) * 4
        flops += L * 2 * rows * n_in * n_out
    chunks = -(-(ctx + rows) // SPAN)
    kv += L * (ctx + rows) * kvd * kv_bytes * 2
    acts += L * (rows * qd * 4 * 2 + rows * nh * chunks * (hd + 2) * 4 * 2)
    flops += L * 4 * rows * nh * (ctx + rows) * hd
    # norms (2 per layer), RoPE on q and k, 2 residual adds, SwiGLU
    acts += L * (2 * 8 * rows * H + 8 * rows * (qd + kvd) + 2 * 12 * rows * H + 12 * rows * F)
    # embedding rows, lm_head over every verified row (logits out)
    weights += V * H * wb
    acts += rows * H * 4 + rows * V * 4
    flops += 2 * rows * H * V
    total = weights + acts + kv
    t_mem = total / BW
    return dict(weights=weights, kv=kv, acts=acts, total=total, flops=flops, t_mem=t_mem,
                t_fp32=max(t_mem, flops / FP32_CORES), t_tc=max(t_mem, flops / BF16_TC))


def run_harness(test, plugin, dtype):
    fd, path = tempfile.mkstemp(suffix=".jsonl")
    os.close(fd)
    env = dict(os.environ, ENTMTP_CUDA_PLUGIN=os.path.abspath(plugin), EMT_CUDA_MEMEFF_REPORT=path,
               EMT_CUDA_MEMEFF_OUTPUTS="64,128", EMT_CUDA_MEMEFF_DTYPES=dtype + ",ATTN,RMSNORM,ROPE,SWIGLU,ADD,ROUND_BF16,ROPE_ROUND_KV,ROPE_Q_ROUND_KV")
    r = subprocess.run([test], env=env, capture_output=True, text=True)
    if r.returncode not in (0, 1):  # 1: a floor failed, the counts are still there
        sys.exit(f"{test} exited {r.returncode}:\n{r.stdout}{r.stderr}")
    return path


def load(path):
    fits = {}
    by_shape = {}
    with open(path) as f:
        for line in f:
            rec = json.loads(line)
            if not rec.get("op") or "n_out" not in rec:
                continue
            if rec["op"] in ATTENTION_OPS or rec["op"] in ROWWISE_OPS:
                fits.setdefault("launches", []).append(rec)
                continue
            key = (rec["op"], rec["n_in"], rec["rows"])
            l1 = rec["l1_load_bytes"] + rec["l1_store_bytes"]
            dram = rec["dram_load_bytes"] + rec["dram_store_bytes"]
            eff_num = sum(a["ideal_sectors"] for a in rec["accesses"] if a["space"] == "global" and a["dir"] == "load")
            eff_den = sum(a["sectors"] for a in rec["accesses"] if a["space"] == "global" and a["dir"] == "load")
            conflicts = sum(a["wavefronts"] - a["ideal_wavefronts"] for a in rec["accesses"] if a["space"] == "shared")
            gl = [a for a in rec["accesses"] if a["space"] == "global" and a["dir"] == "load"]
            requests = sum(a["requests"] for a in gl)
            # L1 cycles: a request takes one cycle per 4 sectors (one 128-byte wavefront), at least one
            l1_cycles = sum(max(a["requests"], a["sectors"] / 4) for a in gl)
            # shared memory goes through the same pipeline: a cycle per wavefront
            l1_cycles += sum(a["wavefronts"] for a in rec["accesses"] if a["space"] == "shared")
            req_bytes = sum(a["distinct_bytes"] for a in gl) / requests if requests else 512
            by_shape.setdefault(key, {})[rec["n_out"]] = dict(dram=dram, l2=rec["l2_load_bytes"], l1=l1_cycles,
                                                             kernel=rec["kernel"], eff=eff_num / eff_den if eff_den else 1,
                                                             conflicts=conflicts, req_bytes=req_bytes)
    for key, pts in by_shape.items():
        if key[0] in ATTENTION_OPS or len(pts) < 2:
            continue
        (n0, p0), (n1, p1) = sorted(pts.items())[:2]
        fit = {}
        for m in ("dram", "l2", "l1"):
            b = (p1[m] - p0[m]) / (n1 - n0)
            fit[m] = (p0[m] - b * n0, b)
        fit["kernel"], fit["eff"], fit["conflicts"], fit["req_bytes"] = p1["kernel"], p1["eff"], p1["conflicts"], p1["req_bytes"]
        fits[key] = fit
    return fits


def l1_cycles(rec):
    """L1 cycles of a launch: a global load request per cycle per 4 sectors
    (at least one), a shared-memory wavefront per cycle."""
    gl = [a for a in rec["accesses"] if a["space"] == "global" and a["dir"] == "load"]
    return (sum(max(a["requests"], a["sectors"] / 4) for a in gl) +
            sum(a["wavefronts"] for a in rec["accesses"] if a["space"] == "shared"))


def load_efficiency(recs):
    gl = [a for r in recs for a in r["accesses"] if a["space"] == "global" and a["dir"] == "load"]
    den = sum(a["sectors"] for a in gl)
    return sum(a["ideal_sectors"] for a in gl) / den if den else 1.0


def predict_attention(launches, model, rows, ctx, kv_type="f32"):
    """Tree attention for one layer of `model`, from the harness's counts of
    one KV head at head_dim 128 over 2048 tokens (test_cuda_memeff), scaled
    to the model's KV heads and linearly to `ctx`. Per launch:
        time = max(DRAM / HBM, L2->SM / L2 bandwidth,
                   waves x (steps x DRAM latency + block cycles / issue rate)) + overhead
    for the span kernel, where a block's 32-key steps do not overlap their
    staging with their arithmetic (one __syncthreads pair per step), a
    block's cycles are its L1 cycles plus its FMA instructions (QK and PV:
    2 x head_dim per query and key, 32 lanes an instruction), and the issue
    rate is one instruction per cycle per busy warp, at most 4 per SM (the
    AR step keeps one warp busy per block); the CUDA-core kernel's combine (the
    tensor-core kernel merges the spans in its own launch) as a
    bandwidth-bound launch. The tensor-core kernel (attn_tc_span_kernel)
    instead: its mma count from the harness (scaled like the bytes), each
    at MMA_CYCLES of an SM; its instructions, the BF16 splits of the staged
    K/V rows, the queries and the probabilities (SPLIT_INSTR each) and one
    per mma for the fragments, at 4 per SM per cycle; a block's time the
    largest of its L1 cycles, its instructions and its mmas (the units run
    side by side), plus one DRAM latency per step. With kv_type "bf16" the
    counts of the BF16-cache case (op ATTN_BF16: half the K/V bytes, 3 mmas
    per product instead of 6, counted) and no split of the staged K/V rows
    (BF16_STAGE_INSTR per value instead). Returns None without a counted
    case."""
    _, _, nh, nkv, hd, _, _ = MODELS[model]
    group = nh // nkv
    queries = rows * group
    # the counted case with the same queries per KV head (Llama 3's group of 4 is counted at 16 rows)
    def cases(op):
        same = [r for r in launches if r["op"] == op and r["rows"] == rows and r["n_out"] == group * hd]
        return same or [r for r in launches if r["op"] == op and r["rows"] * (r["n_out"] // hd) == queries]
    span, comb = cases("ATTN_BF16" if kv_type == "bf16" else "ATTN"), cases("ATTN_COMBINE")
    if not span:
        return None
    span = span[-1]
    # the tensor-core kernel merges the spans in its own launch (the combine
    # fused: its partials' loads are L2 hits, its output stores in the span's
    # counts); the CUDA-core one launches attn_combine_kernel after it
    fused = span["kernel"].startswith("attn_tc")
    if not fused and not comb:
        return None
    comb = None if fused else comb[-1]
    counted_ctx = span["n_in"]
    scale = nkv * (ctx + rows) / (counted_ctx + rows)  # the model's KV heads, the context asked for
    blocks_counted = span["grid"][0] * span["grid"][1] * span["grid"][2]
    n_spans = -(-(ctx + rows) // SPAN)
    span_blocks = min(n_spans, ATTN_MAX_SPAN_BLOCKS)
    blocks = nkv * span_blocks * span["grid"][2]
    steps = -(-n_spans // span_blocks) * (SPAN // ATTN_KEYS)
    keys = ctx + rows
    per_sm_blocks = -(-blocks // SMS)
    if span["kernel"].startswith("attn_tc"):
        mma = span["mma"] * scale  # whole layer
        kst = 6 * hd + (64 - 6 * hd % 128) % 128  # a staged query's three BF16 planes (and an F32 key's)
        bf16 = kv_type == "bf16"
        k_tile = 2 * hd + (64 - 2 * hd % 128) % 128 if bf16 else kst  # a BF16 key: its one plane
        tile = ATTN_KEYS * k_tile + (1 if bf16 else 3) * (ATTN_KEYS // 2) * (4 * hd + 32)
        # two tile buffers (cuda/attention.cu tca_buffers): a call of at most 16 queries (the
        # AR step), where warps 1-3 stage the next step while warp 0 computes this one; and a
        # BF16 cache's larger calls up to head_dim 128 (tca_prefetches), where every warp loads
        # the next step into registers before it computes this one and stores it after
        prefetch = queries > 16 and bf16 and hd <= 128
        double_buffered = queries <= 16 or prefetch
        shared = ((2 if double_buffered else 1) * tile + TCA_WARPS * 16 * 33 * 4 +
                  (min(TCA_MAX_QUERIES, queries) + 1) * kst)  # the staged queries and a zero row
        resident = max(1, min(SHARED_PER_SM // shared, 64 // TCA_WARPS, 65536 // (TCA_REGISTERS * 32 * TCA_WARPS)))
        m_tiles = -(-min(TCA_MAX_QUERIES, queries) // 16) * span["grid"][2]
        staged = 2 * keys * hd * nkv * span["grid"][2]                # K and V, once per query group
        p_values = m_tiles * nkv * -(-keys // ATTN_KEYS) * 16 * ATTN_KEYS  # the probabilities, per m-tile and step
        q_values = queries * hd * nkv * span_blocks
        cycles_total = l1_cycles(span) * scale  # kept for the report
        # an SM issues one instruction per cycle per warp that has work, at most 4: a block's
        # m-tiles (one warp each) compute; all its warps split and stage the K/V tiles
        busy = min(TCA_WARPS, m_tiles // span["grid"][2])
        issue = min(4, busy * min(resident, per_sm_blocks))
        staging_warps = TCA_WARPS - 1 if queries <= 16 else TCA_WARPS
        staging_issue = min(4, staging_warps * min(resident, per_sm_blocks))
        stage_instr = staged * (BF16_STAGE_INSTR if kv_type == "bf16" else SPLIT_INSTR) + q_values * SPLIT_INSTR
        t_issue = (stage_instr / 32 / staging_issue +
                   (p_values * SPLIT_INSTR / 32 + mma) / issue)
        per_block = max(l1_cycles(span) * scale, t_issue, mma * MMA_CYCLES) / blocks
        waves = -(-blocks // (SMS * resident))
        if double_buffered:  # a step's loads overlap the previous step's arithmetic
            t_blocks = max(waves * steps * DRAM_LATENCY, per_sm_blocks * per_block / CLOCK)
        else:
            t_blocks = waves * steps * DRAM_LATENCY + per_sm_blocks * per_block / CLOCK
    else:
        fma_instr = 2.0 * queries * keys * hd / 32 * nkv  # whole layer
        cycles_total = l1_cycles(span) * scale + fma_instr
        per_block_queries = min(64, queries)
        busy = min(8, per_block_queries)
        shared = 4 * (ATTN_KEYS * (hd + 4 + hd) + per_block_queries * (2 * hd + 2))
        resident = max(1, min(SHARED_PER_SM // shared, 8))
        waves = -(-blocks // (SMS * resident))
        issue = min(4, busy * min(resident, per_sm_blocks))
        t_blocks = waves * steps * DRAM_LATENCY + per_sm_blocks * (cycles_total / blocks) / issue / CLOCK
    dram = (span["dram_load_bytes"] + span["dram_store_bytes"]) * scale
    l2 = span["l2_load_bytes"] * scale
    terms = {"DRAM": dram / BW, "L2": l2 / L2_BW, "steps": t_blocks}
    bound = max(terms, key=terms.get)
    t_span = terms[bound] + KERNEL_OVERHEAD
    c_dram = 0 if fused else (comb["dram_load_bytes"] + comb["dram_store_bytes"]) * nh / group * (n_spans / comb["n_in"])
    t_comb = 0 if fused else c_dram / BW + KERNEL_OVERHEAD
    ideal = 2 * KV_BYTES[kv_type] * keys * nkv * hd + 2 * 4 * rows * nh * hd
    return dict(ideal=ideal, time=t_span + t_comb, bound=bound,
                kernel=span["kernel"].split("<")[0] + (" (combine fused)" if fused else "+combine"),
                eff=load_efficiency([span] if fused else [span, comb]), conflicts=sum(a["wavefronts"] - a["ideal_wavefronts"]
                                                                 for a in span["accesses"] if a["space"] == "shared"),
                dram=dram + c_dram, l2=l2, l1=cycles_total, terms=terms)


def predict_rowwise(launches, op, rows, width, ideal):
    """A per-row kernel (RMSNorm, RoPE, SwiGLU, add) over `rows` rows of
    `width` values whose ideal bytes are `ideal`: the DRAM bytes over the
    ideal that the harness counted for it at the 7B widths and the same rows,
    at the HBM peak. None without a counted case."""
    recs = [r for r in launches if r["op"] == op and (r["rows"] == rows if op in ("RMSNORM", "ROPE", "ROPE_ROUND_KV",
                                                                                 "ROPE_Q_ROUND_KV")
                                                      else r["n_in"] % rows == 0 and r["n_in"] // rows in (4096, 11008))]
    if not recs:
        return None
    r = recs[-1]
    ratio = (r["dram_load_bytes"] + r["dram_store_bytes"]) / r["ideal_bytes"]
    return dict(time=ratio * ideal / BW + KERNEL_OVERHEAD, dram=ratio * ideal, ideal=ideal, eff=load_efficiency([r]),
                kernel=r["kernel"], bound="DRAM")


def weight_bytes(dtype, n_in, n_out):
    per32 = {"F32": 128, "F16": 64, "BF16": 64, "Q8_0": 34, "Q4_0": 18, "Q4_1": 20, "Q4_K": 18}[dtype]
    return n_in // 32 * per32 * n_out


def tc_shape(rows):
    """cuda/matmul.cu tc_product's variant for `rows`: (NT n-tiles of 8 rows
    and MT m-tiles of 16 outputs per warp, MW warps of outputs and RW of rows
    per block, split: the inputs' four shares in four blocks)."""
    if rows <= 8:
        return (1, 1, 1, 1, False)
    if rows <= 16:
        return (2, 1, 1, 1, False)
    if rows <= 32:
        return (2, 4, 1, 1, False)
    return (4, 4, 2, 2, True) if rows <= 64 else (4, 4, 1, 1, False)


def tc_launch(rows, n_out):
    """The tensor-core product's launch (cuda/matmul.cu tc_product): blocks,
    busy SMs and resident warps per busy SM."""
    nt, mt, mw, rw, split = tc_shape(rows)
    depth = 2 if mt > 1 else 4
    blocks = -(-rows // (8 * nt * rw)) * -(-n_out // (16 * mt * mw)) * (TC_KWARPS if split else 1)
    warps = mw * rw if split else TC_KWARPS * mw
    staged = 8 * nt * rw * TC_ROW_BYTES
    shared = staged if split else max(staged, mw * (TC_KWARPS - 1) * mt * nt * 4 * 32 * 4)
    # 64 warps (2048 threads) and 64 K registers per SM; registers per thread from ptxas -v
    regs = TC_REGISTERS[(nt, mt, mw, rw, split)]
    resident = max(1, min(SHARED_PER_SM // shared, 64 // warps, 65536 // (regs * 32 * warps)))
    busy = min(SMS, blocks)
    per_sm = min(resident, -(-blocks // SMS))
    return dict(blocks=blocks, busy_sms=busy, warps_per_sm=per_sm * warps, requests=2 * mt * depth)


def predict(fits, dtype, n_in, n_out, rows, add=False):
    """add: the residual add in the epilogue (the harness's op "<dtype>+ADD":
    the residual rows read, the sums written)"""
    fit = fits.get((dtype + "+ADD" if add else dtype, n_in, rows))
    if fit is None:
        return None
    at = lambda m: fit[m][0] + fit[m][1] * n_out
    ideal = weight_bytes(dtype, n_in, n_out) + 4 * rows * (n_in + n_out) + (4 * rows * n_out if add else 0)
    if fit["kernel"].startswith("tc_product"):
        tc = tc_launch(rows, n_out)
        busy, in_flight = tc["busy_sms"], tc["busy_sms"] * tc["warps_per_sm"] * tc["requests"] * fit["req_bytes"]
        padded = -(-rows // 8) * 8 * n_in * (-(-n_out // 16) * 16)
        compute = ("TC", TC_SPLITS * 2.0 * padded / (MMA_SYNC * busy / SMS))
    else:
        busy, in_flight = SMS, SMS * WARPS_PER_SM * REQUESTS_IN_FLIGHT * fit["req_bytes"]  # bytes in flight, whole GPU
        compute = ("FP32", 2.0 * rows * n_in * n_out / FP32_CORES)
    terms = {"DRAM": at("dram") / BW, "L2": at("l2") / L2_BW, "L1": at("l1") / (busy * CLOCK),
             "latency": at("dram") / (in_flight / DRAM_LATENCY), compute[0]: compute[1]}
    bound = max(terms, key=terms.get)
    t = terms[bound] + KERNEL_OVERHEAD
    return dict(ideal=ideal, time=t, bound=bound, kernel=fit["kernel"], eff=fit["eff"], conflicts=fit["conflicts"],
                dram=at("dram"), l2=at("l2"), l1=at("l1"))


def measured_step(fits, dtype, rows, context, kv_type="f32"):
    ops = []
    H, LAYERS, nh, nkv, hd, FFN, VOCAB = MODELS["Llama-2-7B"]
    KV_DIM, HIDDEN = nkv * hd, H
    layer = [("q", H, nh * hd), ("k", H, KV_DIM), ("v", H, KV_DIM), ("o", nh * hd, H), ("gate", H, FFN),
             ("up", H, FFN), ("down", FFN, H)]
    # the residual adds in the o and down products' epilogue when the report
    # has them counted (op "<dtype>+ADD": the residual rows read too), else
    # two add launches a layer
    fused_adds = all((dtype + "+ADD", n_in, rows) in fits for name, n_in, _ in layer if name in ADDS_RESIDUAL)
    for name, n_in, n_out in layer:
        if fused_adds and name in ADDS_RESIDUAL:
            p = predict(fits, dtype, n_in, n_out, rows, add=True)
            if p is not None:
                p = dict(p, kernel=p["kernel"] + " (+add)")
        else:
            p = predict(fits, dtype, n_in, n_out, rows)
        if p is None:
            return None
        if name in FUSED_WITH_PREVIOUS and p["kernel"].startswith("tc_product"):
            # one launch with the product before it (matmul_q_multi / matmul_q_gated): no launch of its own
            p = dict(p, time=p["time"] - KERNEL_OVERHEAD, kernel=p["kernel"] + " (fused)")
        ops.append((name, LAYERS, p))
    p = predict(fits, dtype, H, VOCAB, rows)
    if p is None:
        return None
    ops.append(("lm_head", 1, p))
    launches = fits.get("launches", [])
    act = lambda width: 4 * rows * width
    unmodelled = {}
    p = predict_attention(launches, "Llama-2-7B", rows, context, kv_type)
    if p is None:
        unmodelled["attention (%s KV cache read once, every row and head)" % kv_type.upper()] = (
            2 * context * KV_DIM * KV_BYTES[kv_type] * LAYERS + LAYERS * act(3 * HIDDEN + HIDDEN))
    else:
        ops.append(("attn", LAYERS, p))
    # Q's RoPE, then K's: F32, RoPE in place in the cache rows (2 launches
    # a layer); BF16, one launch ropes Q in place, ropes K and rounds K and
    # V into the cache (rope_q_round_kv: Q 4 bytes in and out, K and V 4 in
    # and 2 out per value; before it, Q's RoPE and rope_round_kv: 2 launches)
    fused_rope = kv_type == "bf16" and any(r["op"] == "ROPE_Q_ROUND_KV" for r in launches)
    rowwise = [("rmsnorm", "RMSNORM", 2, HIDDEN, 2 * act(HIDDEN) + 4 * HIDDEN)]
    if fused_rope:
        rowwise.append(("rope qkv", "ROPE_Q_ROUND_KV", 1, nh * hd + 2 * KV_DIM,
                        2 * act(nh * hd) + 2 * act(KV_DIM) * 6 // 4))
    else:
        rowwise += [("rope q", "ROPE", 1, nh * hd, 2 * act(nh * hd)),
                    ("rope k", "ROPE", 1, KV_DIM, 2 * act(KV_DIM)) if kv_type == "f32" else
                    ("rope kv", "ROPE_ROUND_KV", 1, 2 * KV_DIM, 2 * act(KV_DIM) * 6 // 4)]
    rowwise.append(("swiglu", "SWIGLU", 1, FFN, 3 * act(FFN)))
    if not fused_adds:
        rowwise.append(("add", "ADD", 2, HIDDEN, 3 * act(HIDDEN)))
    for name, op, count, width, ideal in rowwise:
        p = predict_rowwise(launches, op, rows, width, ideal)
        if p is None:
            unmodelled[name] = LAYERS * count * ideal
        else:
            ops.append((name, LAYERS * count, p))
    unmodelled["embed, final norm, top-k / accept / commit"] = act(HIDDEN) * 3 + 4 * rows * VOCAB
    return ops, unmodelled


def measured_main(a):
    if a.run:
        if not a.plugin:
            sys.exit("--run needs --plugin")
        path = run_harness(a.run, a.plugin, a.dtype)
    elif a.report:
        path = a.report
    else:
        sys.exit("give --report or --run")
    fits = load(path)
    dev = DEVICES[a.device]
    print("Assumptions: %s, HBM %.2f TB/s (%s), "
          "the %.0f MB L2 keeps a launch's reuse, L2->SM %.0f TB/s, L1: a global load request per cycle per 4 "
          "sectors and a shared-memory wavefront per cycle on %d SMs at %.3f GHz, %d resident warps per SM with %d load requests in flight each and "
          "%.0f ns DRAM latency, FP32 cores %.0f TF/s (the CUDA-core products' FMAs), BF16 mma.sync %.0f TF/s "
          "(3 mmas per product: the activations' three BF16 parts), %.0f us per kernel (ramp/tail in a "
          "graph); Llama 2 7B, %s weights, %s KV cache, context %d; products measured on the harness at 64 and 128 outputs and "
          "extrapolated linearly in the outputs; F32 activations; the verify's products measured at "
          "64 rows." % (dev["name"], BW / 1e12, dev["bw_what"], L2_BYTES / 1e6, L2_BW / 1e12, SMS, CLOCK / 1e9, WARPS_PER_SM, REQUESTS_IN_FLIGHT,
                        DRAM_LATENCY * 1e9, FP32_CORES / 1e12, MMA_SYNC / 1e12, KERNEL_OVERHEAD * 1e6, a.dtype,
                        a.kv_type.upper(), a.ctx))
    out = {"assumptions": dict(hbm=BW, l2_bw=L2_BW, sms=SMS, clock=CLOCK, warps_per_sm=WARPS_PER_SM,
                               requests_in_flight=REQUESTS_IN_FLIGHT, dram_latency=DRAM_LATENCY, fp32=FP32_CORES, mma_sync=MMA_SYNC,
                               kernel_overhead=KERNEL_OVERHEAD, dtype=a.dtype, kv_type=a.kv_type, context=a.ctx),
           "steps": {}}
    totals = {}
    if a.nodes != 64:
        sys.exit("--measured: the harness measures the verify's products at 64 rows (--nodes 64)")
    for label, rows in (("AR step (1 row)", 1), ("verify (%d rows)" % a.nodes, a.nodes)):
        res = measured_step(fits, a.dtype, rows, a.ctx, a.kv_type)
        if res is None:
            sys.exit("the report lacks %s products at 1 and 64 rows and two output counts" % a.dtype)
        ops, unmodelled = res
        print("\n%s" % label)
        print("  %-8s %-30s %6s %9s %10s %9s %8s %5s" % ("op", "kernel", "x", "ideal MB", "time us", "% of BW",
                                                         "bound", "eff"))
        t_sum = ideal_sum = t_prod = ideal_prod = 0.0
        rec = []
        for name, count, p in ops:
            if name in PRODUCTS:
                t_prod += count * p["time"]
                ideal_prod += count * p["ideal"]
            print("  %-8s %-30s %6d %9.2f %10.2f %8.1f%% %8s %4.0f%%" % (
                name, p["kernel"], count, p["ideal"] / 1e6, p["time"] * 1e6, 100 * p["ideal"] / BW / p["time"],
                p["bound"], 100 * p["eff"]))
            t_sum += count * p["time"]
            ideal_sum += count * p["ideal"]
            rec.append(dict(op=name, count=count, **{k: v for k, v in p.items() if k != "terms"}))
        un_bytes = sum(unmodelled.values())
        t_all = t_sum + un_bytes / BW
        print("  products: %.1f us, %.1f%% of bandwidth; every counted kernel: %.1f us, %.1f%%" %
              (t_prod * 1e6, 100 * ideal_prod / BW / t_prod, t_sum * 1e6, 100 * ideal_sum / BW / t_sum))
        print("  not modelled (their ideal bytes at the HBM peak, an optimistic bound):")
        for k, v in unmodelled.items():
            print("    %-58s %8.1f MB %8.1f us" % (k, v / 1e6, v / BW * 1e6))
        print("  step: %.1f us, %.1f%% of bandwidth (the unmodelled kernels at their ideal)" %
              (t_all * 1e6, 100 * (ideal_sum + un_bytes) / BW / t_all))
        totals[rows] = t_all
        out["steps"][label] = dict(ops=rec, products_time=t_sum, step_time=t_all, unmodelled=unmodelled,
                                   products_time_only=t_prod, products_bw_fraction=ideal_prod / BW / t_prod,
                                   counted_bw_fraction=ideal_sum / BW / t_sum)
    ratio = totals[a.nodes] / totals[1]
    print("\n%d-node verify / AR step at context %d: %.2fx" % (a.nodes, a.ctx, ratio))
    out["verify_over_ar"] = ratio
    if a.json:
        with open(a.json, "w") as f:
            json.dump(out, f, indent=1)
    if a.run:
        if a.keep_report:
            os.replace(path, a.keep_report)
        else:
            os.remove(path)


# ------------------------------------------------------------------ issue 34
# The latency model of the tensor-core product, fitted to the first GPU run
# (H200, docs/data/gpu/2026-11-27-h200/call3/stage4-ncu.csv.gz; docs/
# performance.md, "CUDA: the harness's model fitted to the first GPU run").
# The bandwidth model above (Little's law over DEPTH x 2 x MT weight loads in
# flight per warp) assumed the loads of the DEPTH chunks ahead overlap; the
# kernel's SASS (sm_90, CUDA 13: cuobjdump -sass) puts every global load of
# the chunk loop on one dependency scoreboard (SB5), and the first use of a
# load (the staging's F2F, at the top of each chunk) waits for that
# scoreboard to drain: for every load in flight, the weights of the chunks
# ahead included. So each chunk of a block pays one memory round trip, then
# its barriers, its staging (the activations' BF16 split) and its mmas one
# after another, and the blocks on an SM overlap only each other:
#     time = launch + [split form] tail + waves x chunks x
#            (wait + mmas per warp x mma + staged values per thread x stage)
#     waves = ceil(blocks / (SMs x resident blocks per SM))
# with chunks = n_in / 128 (TC_CHUNK), resident blocks from the registers
# (ptxas -v: TC_REGISTERS, allocated per warp in units of 256), the shared
# memory (+1 KB reserved a block) and the warps, and never less than the
# DRAM bytes at the device's bandwidth. The constants (fitted to the launches
# that run in one wave; the launches of several waves check them):
TC_FIT = dict(
    launch=4.34e-6,       # s: a launch's ramp and tail (ncu's gpu__time_duration)
    split_tail=42.8e-6,   # s: the split form's end (two fence.sc, the arrival atomic, the last block's serial L2 reads)
    wait=0.579e-6,        # s a chunk: the memory round trip the scoreboard drains, and the two barriers
    mma=15.4e-9,          # s per mma of a warp's chunk: about 30 cycles at 1.98 GHz, mma.sync's latency (a chain)
    stage=64.6e-9,        # s per staged activation of a thread's chunk: its L2 load (every block reads the
                          # same lines) and its BF16 split (3 cvt, integer division for the row)
)  # fitted (--refit) to the 6 one-wave launch shapes of the H200 run; the 9 multi-wave ones check it
TC_FIT_TERMS = ("launch", "split_tail", "wait", "mma", "stage")
TC_VARIANT_ROWS = {(1, 1, 1, 1, 0): 8, (2, 1, 1, 1, 0): 16, (2, 4, 1, 1, 0): 16, (4, 4, 2, 2, 1): 64,
                   (4, 4, 1, 1, 0): 32}  # rows of a full tile (the AR step's one row is staged as 8)


def tc_resident(v):
    """Resident blocks per SM of tc_product_kernel<v>: registers (per warp,
    in units of 256), shared memory (+1 KB reserved per block), 64 warps, 32
    blocks."""
    nt, mt, mw, rw, split = v
    warps = mw * rw if split else TC_KWARPS * mw
    staged = 8 * nt * rw * TC_ROW_BYTES
    shared = staged if split else max(staged, mw * (TC_KWARPS - 1) * mt * nt * 4 * 32 * 4)
    regs_per_warp = -(-TC_REGISTERS[tuple(v[:4]) + (bool(split),)] * 32 // 256) * 256
    return max(1, min(SHARED_PER_SM // (shared + 1024), 64 // warps, 65536 // (regs_per_warp * warps), 32))


def tc_features(v, n_in, blocks):
    """The fitted model's terms for one launch: (launch, split_tail, wait,
    mma, stage) multipliers, and its waves."""
    nt, mt, mw, rw, split = v
    threads = 32 * (mw * rw if split else TC_KWARPS * mw)
    rows = TC_VARIANT_ROWS[tuple(v[:4]) + (int(split),)]
    waves = -(-blocks // (SMS * tc_resident(v)))
    chunk_runs = waves * -(-n_in // (TC_KWARPS * 32))
    mmas = 6 * mt * nt  # per warp and chunk: 3 planes x 2 k-tiles x its m- and n-tiles
    staged = rows * (32 if split else TC_KWARPS * 32) / threads
    return (1.0, float(bool(split)), chunk_runs, chunk_runs * mmas, chunk_runs * staged), waves


def tc_fitted_time(v, n_in, blocks, dram, fit=None):
    fit = fit or TC_FIT
    f, _ = tc_features(v, n_in, blocks)
    t = sum(x * fit[k] for x, k in zip(f, TC_FIT_TERMS))
    return max(t, fit["launch"] + dram / BW)


def bandwidth_model_time(v, n_in, blocks, dram):
    """What predict() (the --measured model) gives a tensor-core launch with
    `dram` bytes, without its L2 and L1 terms: DRAM at the device's
    bandwidth, the latency term (bytes in flight: busy SMs x resident warps
    x 2 x MT x DEPTH requests of 512 distinct bytes), the mma.sync FLOPs."""
    nt, mt, mw, rw, split = v
    warps = mw * rw if split else TC_KWARPS * mw
    busy = min(SMS, blocks)
    in_flight = busy * min(tc_resident(v), -(-blocks // SMS)) * warps * 2 * mt * tc_depth_of(mt) * 512
    rows = TC_VARIANT_ROWS[tuple(v[:4]) + (int(split),)]
    n_out = blocks // (TC_KWARPS if split else 1) // -(-rows // (8 * nt * rw)) * 16 * mt * mw
    flops = TC_SPLITS * 2.0 * rows * n_in * n_out
    return max(dram / BW, dram / (in_flight / DRAM_LATENCY), flops / (MMA_SYNC * busy / SMS)) + KERNEL_OVERHEAD


def tc_depth_of(mt):
    return 2 if mt > 1 else 4  # cuda/matmul.cu tc_depth


def gpu_launches(path):
    """The launches of an ncu CSV (scripts/ncu_table.py), by forward pass: a
    list per pass of dicts with name, grid, blocks, dram bytes, seconds, and
    for the tensor-core product its variant, outputs and inputs (the
    inputs: the 7B width nearest DRAM bytes / (2 x outputs))."""
    import re
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import ncu_table
    H, _, _, _, _, F, _ = MODELS["Llama-2-7B"]
    out = []
    for ks in ncu_table.passes(ncu_table.kernels(path)):
        launches = []
        for k in ks:
            grid = tuple(int(g) for g in re.findall(r"\d+", k["grid"]))
            rec = dict(name=re.sub(r"\(.*", "", k["name"]).replace("void ", "").strip(), grid=grid,
                       blocks=grid[0] * grid[1] * grid[2], seconds=k.get("gpu__time_duration.sum", 0) / 1e9,
                       dram=k.get("dram__bytes_read.sum", 0) + k.get("dram__bytes_write.sum", 0))
            m = re.match(r"tc_product_kernel<(\d+), (\d+), (\d+), (\d+), (\d+)>", rec["name"])
            if m:
                v = tuple(int(x) for x in m.groups())
                rec["variant"] = v
                rec["n_out"] = grid[1] * 16 * v[1] * v[2]
                rec["n_in"] = min((H, F), key=lambda w: abs(rec["dram"] / (2 * rec["n_out"]) - w))
            launches.append(rec)
        out.append(launches)
    return out


def fit_tc(passes):
    """Least squares of the five constants over the launches that run in
    one wave (their mean per shape, each shape weighted alike)."""
    import numpy as np
    rows, ys = [], []
    for shape, recs in tc_shapes(passes).items():
        f, waves = tc_features(shape[0], shape[1], shape[2])
        if waves == 1:
            rows.append(f)
            ys.append(sum(r["seconds"] for r in recs) / len(recs))
    if not any(r[1] for r in rows):  # no split-form launch: no tail to fit
        rows = [r[:1] + r[2:] for r in rows]
        sol = np.linalg.lstsq(np.array(rows), np.array(ys), rcond=None)[0]
        return dict(zip(TC_FIT_TERMS[:1] + TC_FIT_TERMS[2:], sol), split_tail=0.0)
    sol = np.linalg.lstsq(np.array(rows), np.array(ys), rcond=None)[0]
    return dict(zip(TC_FIT_TERMS, sol))


def tc_shapes(passes):
    shapes = {}
    for p, launches in enumerate(passes):
        for r in launches:
            if "variant" in r:
                shapes.setdefault((r["variant"], r["n_in"], r["blocks"], p), []).append(r)
    return shapes


PASS_NAMES = {(1, 1, 1, 1, 0): "AR step (1 row)", (2, 1, 1, 1, 0): "prefill (16 rows)",
              (4, 4, 2, 2, 1): "verify (64 rows)"}


def against_main(a):
    passes = gpu_launches(a.against)
    fitted = fit_tc(passes)
    fit = fitted if a.refit else TC_FIT
    dev = DEVICES[a.device]
    print("Latency model of tc_product_kernel vs %s (%s), %s; constants %s:" %
          (dev["name"], os.path.basename(a.against), "DRAM floor at %.2f TB/s" % (BW / 1e12),
           "fitted to this CSV (--refit)" if a.refit else "stored (TC_FIT)"))
    units = dict(launch=1e6, split_tail=1e6, wait=1e6, mma=1e9, stage=1e9)
    names = dict(launch="launch us", split_tail="split tail us", wait="wait us/chunk", mma="ns/mma",
                 stage="ns/staged value")
    print("  " + ", ".join("%s %.3g" % (names[k], fit[k] * units[k]) for k in TC_FIT_TERMS))
    if not a.refit:
        print("  (this CSV's own fit: " + ", ".join("%s %.3g" % (names[k], fitted[k] * units[k])
                                                    for k in TC_FIT_TERMS) + ")")
    print("\n| pass | kernel | n_in | blocks | resident/SM | waves | launches | measured us | model us | error | role "
          "| bandwidth model us |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    worst = {"fit": 0.0, "check": 0.0}
    for (v, n_in, blocks, p), recs in sorted(tc_shapes(passes).items(), key=lambda x: (x[0][3], x[0][0], x[0][2], x[0][1])):
        meas = sum(r["seconds"] for r in recs) / len(recs)
        dram = sum(r["dram"] for r in recs) / len(recs)
        pred = tc_fitted_time(v, n_in, blocks, dram, fit)
        _, waves = tc_features(v, n_in, blocks)
        role = "fit" if waves == 1 else "check"
        err = pred / meas - 1
        worst[role] = max(worst[role], abs(err))
        print("| %d | `<%s>` | %d | %d | %d | %d | %d | %.1f | %.1f | %+.1f%% | %s | %.1f |" % (
            p, ",".join(str(x) for x in v), n_in, blocks, tc_resident(v), waves, len(recs), meas * 1e6, pred * 1e6,
            100 * err, role, bandwidth_model_time(v, n_in, blocks, dram) * 1e6))
    print("\nlargest error: %.1f%% on the launches fitted, %.1f%% on those checked; bandwidth model: the "
          "--measured model's DRAM, latency (Little's law over DEPTH chunks of loads in flight) and mma terms at "
          "ncu's DRAM bytes, + %.0f us (its L2 and L1 terms need the harness's counts)" %
          (100 * worst["fit"], 100 * worst["check"], KERNEL_OVERHEAD * 1e6))
    # the whole pass: the products from the model, every other kernel at its
    # measured mean per launch (a latency table: they are not modelled)
    for p, launches in enumerate(passes):
        variants = [r["variant"] for r in launches if "variant" in r]
        label = PASS_NAMES.get(max(set(variants), key=variants.count), "pass") if variants else "pass"
        meas_total = sum(r["seconds"] for r in launches)
        prod_meas = sum(r["seconds"] for r in launches if "variant" in r)
        prod_pred = sum(tc_fitted_time(r["variant"], r["n_in"], r["blocks"], r["dram"], fit)
                        for r in launches if "variant" in r)
        others = {}
        for r in launches:
            if "variant" not in r:
                others.setdefault(r["name"], []).append(r["seconds"])
        print("\npass %d, %s: %d launches, measured %.0f us of kernels; the model: %.0f us (%+.1f%%) = products "
              "%.0f us (measured %.0f, %+.1f%%) + the other kernels at their measured latency %.0f us:" % (
                  p, label, len(launches), meas_total * 1e6, (prod_pred + meas_total - prod_meas) * 1e6,
                  100 * (prod_pred - prod_meas) / meas_total, prod_pred * 1e6, prod_meas * 1e6,
                  100 * (prod_pred / prod_meas - 1), (meas_total - prod_meas) * 1e6))
        for name, ts in sorted(others.items(), key=lambda x: -sum(x[1])):
            print("    %-42s %4d x %7.1f us = %8.1f us" % (name, len(ts), sum(ts) / len(ts) * 1e6, sum(ts) * 1e6))
    # what a kernel must keep in flight: Little's law at the fitted wait (the
    # memory round trip a chunk sees, its barriers included: an upper bound
    # on the latency a load sees)
    print("\nWhat the next product kernels must achieve (%s, %.2f TB/s):" % (dev["name"], BW / 1e12))
    for frac in (0.85, 0.9):
        print("  %.0f%% of it at the fitted wait of %.2f us: %.1f MB in flight on the GPU, %.1f KB per SM, "
              "and each of them still in flight when the next is issued (not drained chunk by chunk)" % (
                  100 * frac, fit["wait"] * 1e6, frac * BW * fit["wait"] / 1e6, frac * BW * fit["wait"] / SMS / 1024))
    # the same launches with one term of the chunk at a time taken away: what
    # each change to the kernel's loop is worth (the DRAM floor stays)
    scenarios = (("as measured (the fit)", {}), ("the wait hidden (loads stay in flight across chunks)", dict(wait=0)),
                 ("and the staging hidden too", dict(wait=0, stage=0)),
                 ("and the split form's tail", dict(wait=0, stage=0, split_tail=0)))
    for p, launches in enumerate(passes):
        prods = [r for r in launches if "variant" in r]
        if not prods:
            continue
        variants = [r["variant"] for r in prods]
        label = PASS_NAMES.get(max(set(variants), key=variants.count), "pass")
        other = sum(r["seconds"] for r in launches if "variant" not in r)
        floor = sum(fit["launch"] + r["dram"] / BW for r in prods)
        print("  %s: products (whole pass, other kernels at their measured %.0f us) at the DRAM floor %.0f us (%.0f)" %
              (label, other * 1e6, floor * 1e6, (floor + other) * 1e6))
        for what, change in scenarios:
            t = sum(tc_fitted_time(r["variant"], r["n_in"], r["blocks"], r["dram"], dict(fit, **change)) for r in prods)
            print("    %-55s %8.0f us (%.0f)" % (what, t * 1e6, (t + other) * 1e6))
    for v, label in sorted(PASS_NAMES.items()):
        nt, mt, mw, rw, split = v
        per_chunk = 16 * mt * mw * (32 if split else TC_KWARPS * 32) * 2  # weight bytes a block reads per chunk
        f, _ = tc_features(v, 4096, 1)
        chunk = sum(x * fit[k] for x, k in zip(f[2:], TC_FIT_TERMS[2:])) / f[2]
        work = chunk - fit["wait"]
        print("  %s, <%s>: %d weight bytes a block per chunk, %d resident: %.1f KB per SM in flight, one chunk "
              "every %.2f us (%.2f of it the wait): %.2f TB/s at full residency; without the wait %.2f TB/s" % (
                  label, ",".join(str(x) for x in v), per_chunk, tc_resident(v), tc_resident(v) * per_chunk / 1024,
                  chunk * 1e6, fit["wait"] * 1e6, SMS * tc_resident(v) * per_chunk / chunk / 1e12,
                  SMS * tc_resident(v) * per_chunk / work / 1e12))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--ctx", type=int, default=2048, help="tokens already in the KV cache")
    ap.add_argument("--nodes", type=int, default=64, help="rows of the tree verify")
    ap.add_argument("--measured", action="store_true", help="the products' bytes counted by the CUDA harness")
    ap.add_argument("--report", help="--measured: a test_cuda_memeff report made with EMT_CUDA_MEMEFF_OUTPUTS=64,128")
    ap.add_argument("--run", help="--measured: test_cuda_memeff, run on the harness plugin")
    ap.add_argument("--plugin", help="--measured --run: libentmtp-cuda-harness.so")
    ap.add_argument("--dtype", default="BF16", help="--measured: the weights' dtype")
    ap.add_argument("--kv-type", choices=sorted(KV_BYTES), default="bf16",
                    help="the KV cache's element type (entmtp_session_params.kv_type); --measured: which of the "
                         "harness's attention cases (ATTN or ATTN_BF16) models attention")
    ap.add_argument("--json", help="--measured: write the predictions here too")
    ap.add_argument("--keep-report", help="--measured --run: keep the harness's report here")
    ap.add_argument("--device", choices=sorted(DEVICES), default="h100",
                    help="the GPU: h100 (HBM3 peak, the default) or h200 (the first GPU run's device, at its "
                         "measured copy bandwidth)")
    ap.add_argument("--against", help="an ncu CSV of the GPU check's stage 4 (scripts/ncu_table.py): print the "
                                      "latency model fitted to it next to every measured launch (issue 34)")
    ap.add_argument("--refit", action="store_true", help="--against: fit the latency constants to this CSV "
                                                         "instead of using the stored ones")
    a = ap.parse_args()
    use_device(a.device)
    if a.against:
        against_main(a)
        return
    if a.measured:
        measured_main(a)
        return
    print(f"{DEVICES[a.device]['name']}: {BW / 1e12:.2f} TB/s ({DEVICES[a.device]['bw_what']}), {BF16_TC / 1e12:.0f} TF/s BF16 tensor cores, "
          f"{FP32_CORES / 1e12:.0f} TF/s FP32 CUDA cores; context {a.ctx} tokens, {a.kv_type.upper()} KV cache\n")
    print("| model | weights | step | weight MB | KV MB | other MB | GFLOP | memory-bound us "
          "| with FP32-core products us | with tensor-core products us | verify / AR (FP32 cores, tensor cores) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for model in MODELS:
        for dtype in BYTES_PER_WEIGHT:
            kvb = KV_BYTES[a.kv_type]
            ar = step(model, dtype, 1, a.ctx, kvb)
            for name, rows in (("AR", 1), (f"verify {a.nodes}", a.nodes)):
                s = step(model, dtype, rows, a.ctx, kvb)
                ratio = "" if rows == 1 else f"{s['t_fp32'] / ar['t_fp32']:.2f}x, {s['t_tc'] / ar['t_tc']:.2f}x"
                print(f"| {model} | {dtype} | {name} | {s['weights'] / 1e6:.1f} | {s['kv'] / 1e6:.1f} | "
                      f"{s['acts'] / 1e6:.1f} | {s['flops'] / 1e9:.2f} | {s['t_mem'] * 1e6:.0f} | "
                      f"{s['t_fp32'] * 1e6:.0f} | {s['t_tc'] * 1e6:.0f} | {ratio} |")


if __name__ == "__main__":
    main()
