// The device step: the heads' top-k in one pass over the vocabulary,
// acceptance over every candidate path with the step's cuts, and the commit
// gather, all writing to or reading from the step record
// (emt_step_record, src/backend/backend.h) that the engine downloads once per
// step. CPU twins: src/backend/cpu/cpu_step_ops.c (emt_cpu_topk_device,
// emt_cpu_accept: the host oracle emt_evaluate_posterior_nodes of
// src/accept/accept.c, emt_cpu_commit).
#include "cuda_exec.h"

extern "C" {
#include "accept/accept.h" // EMT_SAMPLE_CHUNKS: the sampled root's summation order
}

#include <math.h>
#include <string.h>

#define STEP_THREADS 256
#define TOPK_LOCAL 32 // the one-pass kernel's per-thread list; larger k takes topk_kernel

// ------------------------------------------------------------------ top-k

// (v, i) ranks before (w, j): larger value, ties to the lower id
__device__ __forceinline__ bool ranks_before(float v, int32_t i, float w, int32_t j) {
    return v > w || (v == w && i < j);
}

// Running softmax statistics relative to the running maximum m:
// z = sum exp(x - m), sxz = sum exp(x - m) (x - m), in double.
__device__ __forceinline__ void stats_merge(double &m, double &z, double &sxz, double m2, double z2, double sxz2) {
    if (z2 == 0.0) return;
    if (z == 0.0) { m = m2; z = z2; sxz = sxz2; return; }
    if (m2 > m) {
        double s = exp(m - m2);
        sxz = s * (sxz + z * (m - m2)) + sxz2;
        z = s * z + z2;
        m = m2;
    } else {
        double s = exp(m2 - m);
        sxz += s * (sxz2 + z2 * (m2 - m));
        z += s * z2;
    }
}

// One block per row, one read of the row: every thread keeps its own sorted
// top-k of the ids it visits (in increasing order, so ties already favour the
// lower id) and its running softmax sums; then k rounds of a block argmax
// over the threads' list heads (not over the vocabulary) and one fixed-order
// tree of the sums. CPU twin: emt_cpu_topk_device.
__global__ void topk_onepass_kernel(const float *logits, int32_t vocab, int32_t k, const int32_t *id_map, int32_t *ids,
                                    float *probs, float *entropy) {
    __shared__ float head_v[STEP_THREADS];
    __shared__ int32_t head_i[STEP_THREADS];
    __shared__ double red_m[STEP_THREADS], red_z[STEP_THREADS], red_s[STEP_THREADS];
    __shared__ float top_v[TOPK_LOCAL];
    __shared__ int32_t top_i[TOPK_LOCAL];
    const float *x = logits + (size_t)blockIdx.x * vocab;
    const int tid = threadIdx.x;
    float lv[TOPK_LOCAL];
    int32_t li[TOPK_LOCAL];
    int32_t n = 0;
    double m = -INFINITY, z = 0.0, sxz = 0.0;
    for (int32_t i = tid; i < vocab; i += blockDim.x) {
        float v = x[i];
        if (n < k || v > lv[k - 1]) {
            int32_t pos = n < k ? n++ : k - 1;
            while (pos > 0 && v > lv[pos - 1]) {
                lv[pos] = lv[pos - 1];
                li[pos] = li[pos - 1];
                pos--;
            }
            lv[pos] = v;
            li[pos] = i;
        }
        double xd = (double)v;
        if (xd > m) {
            if (z > 0.0) {
                double s = exp(m - xd);
                sxz = s * (sxz + z * (m - xd));
                z *= s;
            }
            m = xd;
        }
        double e = exp(xd - m);
        z += e;
        sxz += e * (xd - m);
    }
    // k rounds over the list heads; the winner's owner advances
    int32_t next = 0;
    for (int32_t t = 0; t < k; t++) {
        head_v[tid] = next < n ? lv[next] : -INFINITY;
        head_i[tid] = next < n ? li[next] : INT32_MAX;
        __syncthreads();
        for (int s = blockDim.x / 2; s > 0; s >>= 1) {
            if (tid < s && ranks_before(head_v[tid + s], head_i[tid + s], head_v[tid], head_i[tid])) {
                head_v[tid] = head_v[tid + s];
                head_i[tid] = head_i[tid + s];
            }
            __syncthreads();
        }
        if (tid == 0) {
            top_v[t] = head_v[0];
            top_i[t] = head_i[0];
        }
        if (next < n && li[next] == head_i[0]) next++;
        __syncthreads();
    }
    red_m[tid] = m;
    red_z[tid] = z;
    red_s[tid] = sxz;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) {
            double mm = red_m[tid], zz = red_z[tid], ss = red_s[tid];
            stats_merge(mm, zz, ss, red_m[tid + s], red_z[tid + s], red_s[tid + s]);
            red_m[tid] = mm;
            red_z[tid] = zz;
            red_s[tid] = ss;
        }
        __syncthreads();
    }
    if (tid == 0) {
        double mx = red_m[0], zz = red_z[0];
        for (int32_t t = 0; t < k; t++) {
            int32_t id = top_i[t];
            ids[(size_t)blockIdx.x * k + t] = id_map ? id_map[id] : id;
            probs[(size_t)blockIdx.x * k + t] = (float)(exp((double)top_v[t] - mx) / zz);
        }
        if (entropy) entropy[blockIdx.x] = (float)(log(zz) - red_s[0] / zz);
    }
}

// ids[i] = map[ids[i]] (the k-rescan path's draft-vocabulary ids)
__global__ void map_ids_kernel(int32_t *ids, size_t n, const int32_t *map) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        ids[i] = map[ids[i]];
}

void cu_topk_device(emt_exec *ex, const float *logits, int32_t n_rows, int32_t vocab, int32_t k, const int32_t *id_map,
                    int32_t *ids, float *probs, float *entropy) {
    if (k > vocab) k = vocab;
    if (n_rows <= 0 || k <= 0) return;
    if (k <= TOPK_LOCAL) {
        EMT_LAUNCH(topk_onepass_kernel, n_rows, STEP_THREADS, 0, ex->stream, logits, vocab, k, id_map, ids, probs,
                   entropy);
        return;
    }
    // wide lists (tree search's top-k beyond 32): k rounds over the row
    EMT_LAUNCH(topk_kernel, n_rows, 256, 0, ex->stream, logits, vocab, k, ids, probs, entropy);
    if (id_map) {
        size_t nk = (size_t)n_rows * k;
        EMT_LAUNCH(map_ids_kernel, (unsigned)((nk + 255) / 256), 256, 0, ex->stream, ids, nk, id_map);
    }
}

// ------------------------------------------------------------- acceptance

// The block's argmax (ties to the lower id) into bv[0], bi[0]: each thread
// scans its ids start, start + step, .. < end (increasing, so the first
// visited wins ties), then a tree over the block's threads (bv and bi hold
// one entry per thread; blockDim.x a power of two).
__device__ void block_argmax(const float *x, int32_t start, int32_t end, int32_t step, float *bv, int32_t *bi) {
    const int tid = threadIdx.x;
    float v = -INFINITY;
    int32_t vi = INT32_MAX;
    for (int32_t i = start; i < end; i += step)
        if (vi == INT32_MAX || x[i] > v) {
            v = x[i];
            vi = i;
        }
    bv[tid] = v;
    bi[tid] = vi;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s && ranks_before(bv[tid + s], bi[tid + s], bv[tid], bi[tid])) {
            bv[tid] = bv[tid + s];
            bi[tid] = bi[tid + s];
        }
        __syncthreads();
    }
}

// Per parent node (one block each): the greedy argmax (ties to the lower id)
// or, at temperature > 0, the typical threshold min(eps, delta*exp(-H)) of
// softmax(x / T) with the reference's +1e-5 inside the log, plus the max and
// the normaliser that the pick needs for a child's probability. Probabilities
// are rounded as the host oracle rounds them (float of the double exp, float
// of its quotient); the sums are a fixed tree of per-thread partial sums.
__global__ void accept_parents_kernel(const float *logits, int32_t vocab, const int32_t *parents, float T, float eps,
                                      float delta, int32_t *par_arg, float *par_thr, float *par_mx, double *par_z) {
    __shared__ float bv[STEP_THREADS];
    __shared__ int32_t bi[STEP_THREADS];
    __shared__ double red[STEP_THREADS];
    const int tid = threadIdx.x;
    const int32_t p = parents[blockIdx.x];
    const float *x = logits + (size_t)p * vocab;
    block_argmax(x, tid, vocab, blockDim.x, bv, bi);
    const float mx = bv[0];
    if (!(T > 0.0f)) {
        if (tid == 0) par_arg[p] = bi[0];
        return;
    }
    double z = 0.0;
    for (int32_t i = tid; i < vocab; i += blockDim.x) z += (double)(float)exp(((double)x[i] - (double)mx) / (double)T);
    red[tid] = z;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) red[tid] += red[tid + s];
        __syncthreads();
    }
    z = red[0];
    __syncthreads();
    double h = 0.0;
    for (int32_t i = tid; i < vocab; i += blockDim.x) {
        float pi = (float)((double)(float)exp(((double)x[i] - (double)mx) / (double)T) / z);
        h -= (double)pi * log((double)pi + 1e-5);
    }
    red[tid] = h;
    __syncthreads();
    for (int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) red[tid] += red[tid + s];
        __syncthreads();
    }
    if (tid == 0) {
        float t = delta * expf(-(float)red[0]);
        par_arg[p] = bi[0];
        par_thr[p] = t < eps ? t : eps;
        par_mx[p] = mx;
        par_z[p] = z;
    }
}

// One thread: every candidate row's accepted prefix, the best row (longest;
// at temperature > 0 ties go to the larger sum of the accepted tokens'
// log-probabilities, else the first row), then the cuts, into the record.
// The rule of pick() and emt_evaluate_posterior_nodes in src/accept/accept.c.
__global__ void accept_pick_kernel(const float *logits, int32_t vocab, const int32_t *tokens, const int32_t *retrieve,
                                   int32_t n_nodes, int32_t n_rows, int32_t width, float T, const int32_t *par_arg,
                                   const float *par_thr, const float *par_mx, const double *par_z, int32_t max_tokens,
                                   int32_t kv_room, const int32_t *lengths, int32_t kv_capacity, const uint8_t *stop,
                                   int32_t max_path, int32_t *rec_words) {
    emt_step_record *rec = (emt_step_record *)rec_words;
    int32_t *path = rec_words + sizeof(emt_step_record) / 4;
    int32_t *out_tokens = path + max_path;
    int32_t best = 0, best_len = -1;
    double best_score = -INFINITY;
    for (int32_t r = 0; r < n_rows && width > 1; r++) {
        const int32_t *row = retrieve + (size_t)r * width;
        int32_t len = 0;
        double score = 0.0;
        while (len < width - 1) {
            int32_t parent = row[len], node = row[len + 1];
            if (node < 0 || parent < 0 || node >= n_nodes || parent >= n_nodes) break;
            int32_t tok = tokens[node];
            if (tok < 0 || tok >= vocab) break;
            bool ok;
            float lp = 0.0f;
            if (!(T > 0.0f)) {
                ok = tok == par_arg[parent];
            } else {
                const float *x = logits + (size_t)parent * vocab;
                float pt = (float)((double)(float)exp(((double)x[tok] - (double)par_mx[parent]) / (double)T) /
                                   par_z[parent]);
                ok = pt > par_thr[parent];
                lp = logf(pt);
            }
            if (!ok) break;
            score += lp;
            len++;
        }
        if (len > best_len || (T > 0.0f && len == best_len && len > 0 && score > best_score)) {
            best = r;
            best_len = len;
            best_score = score;
        }
    }
    if (best_len <= 0) best = 0;
    int32_t acc = best_len < 0 ? 0 : best_len;
    rec->best_row = best;
    rec->accepted = acc;
    rec->stopped = 0;
    rec->kv_full = 0;
    for (int32_t j = 0; j <= acc; j++) path[j] = width > 1 ? retrieve[(size_t)best * width + j] : 0;
    if (lengths) { // device-resident: { L, max_tokens }
        max_tokens = lengths[1];
        kv_room = kv_capacity - lengths[0];
    }
    int32_t keep = acc + 1;
    if (max_tokens > 0 && keep > max_tokens) keep = max_tokens;
    if (keep > kv_room) {
        keep = kv_room;
        rec->kv_full = 1;
    }
    for (int32_t j = 0; j < keep; j++) {
        out_tokens[j] = tokens[path[j]];
        if (stop && stop[out_tokens[j]]) {
            keep = j + 1;
            rec->stopped = 1;
            rec->kv_full = 0;
            break;
        }
    }
    rec->n_emit = keep;
    rec->last_node = path[keep - 1];
}

void cu_accept(emt_exec *ex, const emt_accept_desc *d, void *rec) {
    if (d->width > d->max_path || d->n_nodes < 1 || d->n_nodes > 128 * 128) {
        cu_fail(ex, "cuda accept: a path of %d nodes does not fit the record (%d) or %d nodes", d->width, d->max_path,
                d->n_nodes);
        return;
    }
    const int32_t *d_tokens = d->node_tokens_device;
    if (!d_tokens) d_tokens = (const int32_t *)cu_stage(ex, d->node_tokens, (size_t)d->n_nodes * sizeof(int32_t));
    if (!d_tokens) return;
    const int32_t *d_retrieve = NULL, *d_parents = NULL;
    int32_t n_parents = 0;
    if (d->width > 1 && d->n_nodes > 1) {
        d_retrieve = (const int32_t *)cu_stage(ex, d->retrieve, (size_t)d->n_rows * d->width * sizeof(int32_t));
        // the nodes whose distribution some candidate is judged under
        int32_t *h = cu_host_index(ex, (size_t)2 * d->n_nodes);
        if (!d_retrieve || !h) return;
        int32_t *seen = h + d->n_nodes;
        memset(seen, 0, (size_t)d->n_nodes * sizeof(int32_t));
        for (int32_t r = 0; r < d->n_rows; r++)
            for (int32_t j = 0; j + 1 < d->width; j++) {
                int32_t parent = d->retrieve[(size_t)r * d->width + j], node = d->retrieve[(size_t)r * d->width + j + 1];
                if (node < 0 || parent < 0) break;
                if (parent < d->n_nodes && !seen[parent]) {
                    seen[parent] = 1;
                    h[n_parents++] = parent;
                }
            }
        if (n_parents) d_parents = (const int32_t *)cu_stage(ex, h, (size_t)n_parents * sizeof(int32_t));
        if (n_parents && !d_parents) return;
    }
    // per-node results: z (double) first, then arg, thr, mx
    const size_t n = (size_t)d->n_nodes;
    float *s = cu_scratch(ex, 2 * n + 3 * n + 8);
    if (!s) return;
    double *par_z = (double *)s;
    int32_t *par_arg = (int32_t *)(s + 2 * n);
    float *par_thr = s + 3 * n, *par_mx = s + 4 * n;
    if (n_parents)
        EMT_LAUNCH(accept_parents_kernel, n_parents, STEP_THREADS, 0, ex->stream, d->node_logits, d->vocab, d_parents,
                   d->temperature, d->epsilon, d->delta, par_arg, par_thr, par_mx, par_z);
    EMT_LAUNCH(accept_pick_kernel, 1, 1, 0, ex->stream, d->node_logits, d->vocab, d_tokens, d_retrieve, d->n_nodes,
               d->n_rows, d->width, d->temperature, (const int32_t *)par_arg, (const float *)par_thr,
               (const float *)par_mx, (const double *)par_z, d->max_tokens, d->kv_room, d->lengths, d->kv_capacity,
               d->stop, d->max_path, (int32_t *)rec);
}

// ----------------------------------------------------------------- commit

// Blocks 0..n_slabs-1: one K or V slab each, the kept path's rows moved
// from src0 + path[j] to L + j in order j = 0, 1, ... (with src0 = L a
// row's source is at or after its destination and after every earlier
// destination, so the order makes the in-place move safe; with lengths, L
// is lengths[0] and src0 the tree area past the capacity); block n_slabs:
// the last node's hidden row; block n_slabs + 1: its logits row. CPU twin:
// emt_cpu_commit.
__global__ void commit_kernel(float *kv, size_t slab_floats, size_t row_floats, int32_t n_slabs, int32_t L,
                              const int32_t *lengths, int32_t src0,
                              const float *hidden, float *last_hidden, int32_t hidden_dim, const float *logits,
                              float *next_logits, int32_t vocab, const int32_t *rec_words) {
    const emt_step_record *rec = (const emt_step_record *)rec_words;
    const int32_t *path = rec_words + sizeof(emt_step_record) / 4;
    const int32_t b = blockIdx.x;
    if (lengths) L = lengths[0];
    else src0 = L;
    if (b < n_slabs) {
        float *slab = kv + (size_t)b * slab_floats;
        const int32_t n_emit = rec->n_emit;
        for (int32_t j = 0; j < n_emit; j++) {
            const int32_t src = src0 + path[j];
            if (src != L + j) {
                float *dst = slab + (size_t)(L + j) * row_floats;
                const float *from = slab + (size_t)src * row_floats;
                for (size_t i = threadIdx.x; i < row_floats; i += blockDim.x) dst[i] = from[i];
            }
            __syncthreads();
        }
        return;
    }
    const int32_t last = rec->last_node;
    if (b == n_slabs) {
        for (int32_t i = threadIdx.x; i < hidden_dim; i += blockDim.x)
            last_hidden[i] = hidden[(size_t)last * hidden_dim + i];
    } else {
        for (int32_t i = threadIdx.x; i < vocab; i += blockDim.x) next_logits[i] = logits[(size_t)last * vocab + i];
    }
}

void cu_commit(emt_exec *ex, const emt_commit_desc *d, const void *rec) {
    EMT_LAUNCH(commit_kernel, d->n_slabs + 2, STEP_THREADS, 0, ex->stream, d->kv, d->slab_floats, d->row_floats,
               d->n_slabs, d->L, d->lengths, d->src_row0, d->hidden, d->last_hidden, d->hidden_dim, d->logits,
               d->next_logits, d->vocab, (const int32_t *)rec);
}

// ------------------------------------------------------------ sampled root

// The root at temperature > 0 (CPU twin: emt_sample_typical_u, whose sums
// this follows operation for operation): one block, thread c owns chunk c
// of the vocabulary (EMT_SAMPLE_CHUNKS contiguous chunks of ceil(vocab /
// chunks) ids) and sums it in id order; thread 0 adds the chunk sums in
// chunk order. The uniform is u53 * 2^-53, u53's two halves read from
// uniform[0..1] (host-drawn, written with the step's inputs: a replayed
// graph reads the new one).
__device__ __forceinline__ double sample_p(const float *x, int32_t i, double mx, double T, double z) {
    return exp(((double)x[i] - mx) / T) / z;
}

__global__ void sample_root_kernel(const float *x, int32_t vocab, float temperature, float epsilon, float delta,
                                   const int32_t *uniform, int32_t *token) {
    __shared__ float bv[EMT_SAMPLE_CHUNKS];
    __shared__ int32_t bi[EMT_SAMPLE_CHUNKS];
    __shared__ double part[EMT_SAMPLE_CHUNKS];
    __shared__ double total;
    const int tid = threadIdx.x;
    const int32_t width = (vocab + EMT_SAMPLE_CHUNKS - 1) / EMT_SAMPLE_CHUNKS;
    const int32_t lo = tid * width < vocab ? tid * width : vocab, hi = lo + width < vocab ? lo + width : vocab;
    block_argmax(x, lo, hi, 1, bv, bi);
    const int32_t top = bi[0];
    const double mx = (double)bv[0], T = (double)temperature;
    double s = 0.0;
    for (int32_t i = lo; i < hi; i++) s += exp(((double)x[i] - mx) / T);
    part[tid] = s;
    __syncthreads();
    if (tid == 0) {
        double z = 0.0;
        for (int c = 0; c < EMT_SAMPLE_CHUNKS; c++) z += part[c];
        total = z;
    }
    __syncthreads();
    const double z = total;
    s = 0.0;
    for (int32_t i = lo; i < hi; i++) {
        double p = sample_p(x, i, mx, T, z);
        s -= p * log(p + 1e-5);
    }
    part[tid] = s;
    __syncthreads();
    if (tid == 0) {
        double h = 0.0;
        for (int c = 0; c < EMT_SAMPLE_CHUNKS; c++) h += part[c];
        double thr = delta * exp(-h);
        total = thr > epsilon ? (double)epsilon : thr;
    }
    __syncthreads();
    const double thr = total;
    s = 0.0;
    for (int32_t i = lo; i < hi; i++) {
        double p = sample_p(x, i, mx, T, z);
        if (p > thr || i == top) s += p;
    }
    part[tid] = s;
    __syncthreads();
    if (tid != 0) return;
    double mass = 0.0;
    for (int c = 0; c < EMT_SAMPLE_CHUNKS; c++) mass += part[c];
    const uint64_t u53 = (uint64_t)(uint32_t)uniform[0] | (uint64_t)(uint32_t)uniform[1] << 32;
    const double target = (double)u53 * (1.0 / 9007199254740992.0) * mass;
    double before = 0.0;
    for (int c = 0; c < EMT_SAMPLE_CHUNKS; c++) {
        const double after = before + part[c];
        if (target < after) {
            const int32_t end = c * width + width < vocab ? c * width + width : vocab;
            double run = 0.0;
            for (int32_t i = c * width; i < end; i++) {
                double p = sample_p(x, i, mx, T, z);
                if (!(p > thr || i == top)) continue;
                run += p;
                if (target < before + run) {
                    *token = i;
                    return;
                }
            }
        }
        before = after;
    }
    // u * mass rounded up to the whole mass: the last allowed id
    for (int32_t i = vocab - 1; i >= 0; i--)
        if (i == top || sample_p(x, i, mx, T, z) > thr) {
            *token = i;
            return;
        }
}

void cu_sample_root(emt_exec *ex, const float *logits, int32_t vocab, float temperature, float epsilon, float delta,
                    const int32_t *uniform, int32_t *token) {
    if (vocab < 1 || !(temperature > 0.0f)) {
        cu_fail(ex, "cuda sample_root: vocabulary %d and temperature %g (needs >= 1 and > 0)", vocab,
                (double)temperature);
        return;
    }
    EMT_LAUNCH(sample_root_kernel, 1, EMT_SAMPLE_CHUNKS, 0, ex->stream, logits, vocab, temperature, epsilon, delta,
               uniform, token);
}

// ----------------------------------------------------------------- gather

// dst[i] = src[idx[i]]. CPU twin: emt_cpu_gather_i32.
__global__ void gather_i32_kernel(int32_t *dst, const int32_t *src, const int32_t *idx, int32_t n) {
    for (int32_t i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) dst[i] = src[idx[i]];
}

void cu_gather_i32(emt_exec *ex, int32_t *dst, const int32_t *src, const int32_t *idx, int32_t n) {
    if (n <= 0) return;
    const int32_t *d_idx = (const int32_t *)cu_stage(ex, idx, (size_t)n * sizeof(int32_t));
    if (!d_idx) return;
    EMT_LAUNCH(gather_i32_kernel, (n + 255) / 256, 256, 0, ex->stream, dst, src, d_idx, n);
}

// Host values into device memory through the staging ring (no kernel).
void cu_write_i32(emt_exec *ex, int32_t *dst, const int32_t *src, int32_t n) {
    if (n > 0) cu_stage_to(ex, dst, src, (size_t)n * sizeof(int32_t));
}
