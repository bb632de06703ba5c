/* Memory efficiency of the CUDA kernels at real model row widths, as the
 * CPU harness measures it (docs/cuda-harness.md, "Memory efficiency"): the
 * products (cuda/matmul.cu) in every weight dtype, at the 7B widths (4096
 * inputs for Q/K/V/O and gate/up, 11008 for down) with few outputs, for one
 * row (the AR step) and 64 rows (a tree verify; BF16 also 128: the
 * tensor-core kernel's other block shape). Per launch the harness
 * reports sectors touched against the fewest that hold the bytes asked for,
 * shared-memory wavefronts against conflict-free ones, and the bytes moved
 * against the op's ideal; this test asserts each product's floor (below),
 * and the same floors for tree attention (check_attention) and the per-row
 * kernels (check_rowwise).
 *
 * Runs only on the harness plugin: on a GPU (no counters) it is SKIPPED.
 * EMT_CUDA_MEMEFF_REPORT=path keeps the per-launch report (JSON lines) for
 * scripts/roofline.py; EMT_CUDA_MEMEFF_OUTPUTS=64,128 runs each product at
 * those output counts (default 8), from which roofline.py extrapolates the
 * full matrices; EMT_CUDA_MEMEFF_DTYPES=BF16,Q4_0 only those dtypes (ATTN:
 * the attention cases, F32 and BF16 KV caches; RMSNORM, ROPE, SWIGLU, ADD,
 * ROUND_BF16, ROPE_ROUND_KV, ROPE_Q_ROUND_KV: the other kernels). BF16
 * products also run with the residual add in their epilogue (op BF16+ADD). */
#include "backend/backend.h"
#include "check.h"
#include "cuda_test.h"
#include "tiny_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <unistd.h>

#define CHECK_MSG(cond, ...)                              \
    do {                                                  \
        if (!(cond)) {                                    \
            fprintf(stderr, "FAIL: " __VA_ARGS__);        \
            fputc('\n', stderr);                          \
            emt_test_failures++;                          \
        }                                                 \
    } while (0)

static uint64_t rng = 34;
static emt_backend *gpu;
static emt_exec *eg;
static FILE *report;
static int counted; /* launches the harness reported */

/* The floors: global-load sector efficiency (ideal sectors / sectors
 * touched) and DRAM bytes over the op's ideal bytes, the same for every
 * product: 16-byte weight loads, activations in contiguous runs. (The
 * products before issue 34 measured 75% for F16/BF16, 7.7% for Q8_0 and
 * 10-12% for the Q4 types; docs/cuda-harness.md.) */
typedef struct floor_spec {
    emt_dtype dtype;
    double min_load_efficiency, max_dram_over_ideal;
} floor_spec;
static const floor_spec floors[] = {
    { EMT_F32, 0.90, 1.05 },  { EMT_F16, 0.90, 1.05 },  { EMT_BF16, 0.90, 1.05 }, { EMT_Q8_0, 0.90, 1.05 },
    { EMT_Q4_0, 0.90, 1.05 }, { EMT_Q4_1, 0.90, 1.05 }, { EMT_Q4_K, 0.90, 1.05 },
};

/* one launch's totals, from its report line */
typedef struct launch_totals {
    char kernel[128], op[32];
    double ideal, dram_load, dram_store, l2_load, l1_load;
    double sectors, ideal_sectors, wavefronts, ideal_wavefronts, widest, narrowest;
    double worst_site; /* the lowest sector efficiency of one global-load site (1 without any) */
} launch_totals;

static double field(const char *s, const char *key) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": ", key);
    const char *p = strstr(s, pat);
    return p ? strtod(p + strlen(pat), NULL) : -1;
}
static void field_str(const char *s, const char *key, char *out, size_t cap) {
    char pat[64];
    snprintf(pat, sizeof pat, "\"%s\": \"", key);
    const char *p = strstr(s, pat);
    out[0] = 0;
    if (!p) return;
    p += strlen(pat);
    size_t n = strcspn(p, "\"");
    if (n >= cap) n = cap - 1;
    memcpy(out, p, n);
    out[n] = 0;
}

/* The launches reported since the last call, summed into *t (global loads:
 * sectors; shared: wavefronts); the number of launches. */
static int read_launches(launch_totals *t) {
    static char line[1 << 16];
    memset(t, 0, sizeof *t);
    t->narrowest = 1e9;
    t->worst_site = 1;
    int n = 0;
    while (fgets(line, sizeof line, report)) {
        n++;
        field_str(line, "kernel", t->kernel, sizeof t->kernel);
        field_str(line, "op", t->op, sizeof t->op);
        t->ideal += field(line, "ideal_bytes");
        t->dram_load += field(line, "dram_load_bytes");
        t->dram_store += field(line, "dram_store_bytes");
        t->l2_load += field(line, "l2_load_bytes");
        t->l1_load += field(line, "l1_load_bytes");
        for (const char *a = strstr(line, "{\"site\""); a; a = strstr(a + 1, "{\"site\"")) {
            const char *end = strchr(a, '}');
            char obj[512];
            size_t len = (size_t)(end - a) < sizeof obj - 1 ? (size_t)(end - a) : sizeof obj - 1;
            memcpy(obj, a, len);
            obj[len] = 0;
            if (strstr(obj, "\"space\": \"shared\"")) {
                t->wavefronts += field(obj, "wavefronts");
                t->ideal_wavefronts += field(obj, "ideal_wavefronts");
            } else if (strstr(obj, "\"dir\": \"load\"")) {
                const double sectors = field(obj, "sectors"), ideal_sectors = field(obj, "ideal_sectors");
                t->sectors += sectors;
                t->ideal_sectors += ideal_sectors;
                if (sectors > 0 && ideal_sectors / sectors < t->worst_site) t->worst_site = ideal_sectors / sectors;
                double w = field(obj, "width");
                if (w > t->widest) t->widest = w;
                if (w < t->narrowest) t->narrowest = w;
            }
        }
    }
    clearerr(report);
    counted += n;
    return n;
}

static const char *dtype_name(emt_dtype t) {
    switch (t) {
    case EMT_F32: return "F32";
    case EMT_F16: return "F16";
    case EMT_BF16: return "BF16";
    case EMT_Q8_0: return "Q8_0";
    case EMT_Q4_0: return "Q4_0";
    case EMT_Q4_1: return "Q4_1";
    case EMT_Q4_K: return "Q4_K";
    default: return "?";
    }
}

/* `name` is one of the comma-separated names of `list` */
static int name_listed(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; (p = strstr(p, name)); p += n)
        if ((p == list || p[-1] == ',') && (p[n] == ',' || p[n] == 0)) return 1;
    return 0;
}

static void encode(emt_dtype t, const float *w, int64_t n, uint8_t *out) {
    if (t != EMT_Q4_K) {
        emt_tiny_encode(t, w, n, out);
        return;
    }
    for (int64_t b = 0; b < n / 256; b++, out += 144) {
        uint16_t d = emt_f32_to_f16(0.001f), dmin = emt_f32_to_f16(0.0005f);
        memcpy(out, &d, 2);
        memcpy(out + 2, &dmin, 2);
        for (int j = 4; j < 144; j++) out[j] = (uint8_t)emt_test_irand(&rng, 256);
    }
}

/* one product (n_rows x n_in) x (n_in -> n_out) and its floors; with
 * `add`, the residual add in its epilogue (matmul_q_add: the attention
 * output and down projections; the report's op "BF16+ADD") */
static void check_product(emt_dtype t, int32_t n_in, int32_t n_out, int32_t n_rows, const floor_spec *f, int add) {
    float *w = emt_test_host_random(&rng, (size_t)n_out * n_in, 0.05f);
    float *x = emt_test_host_random(&rng, (size_t)n_rows * n_in, 1.0f);
    size_t wbytes = emt_dtype_nbytes(t, (int64_t)n_out * n_in);
    uint8_t *wq = malloc(wbytes);
    encode(t, w, (int64_t)n_out * n_in, wq);
    emt_wmat W = { t, emt_test_device_copy(gpu, t == EMT_F32 ? (const void *)w : wq, wbytes), NULL };
    float *dx = emt_test_device_copy(gpu, x, sizeof(float) * n_rows * n_in);
    float *dy = gpu->ops->alloc(gpu, sizeof(float) * n_rows * n_out);
    CHECK(W.data && dx && dy);
    char name[16];
    snprintf(name, sizeof name, "%s%s", dtype_name(t), add ? "+ADD" : "");
    launch_totals before;
    read_launches(&before); /* the uploads' bookkeeping, if any */
    if (add) gpu->ops->matmul_q_add(eg, &W, NULL, dx, n_rows, n_in, n_out, dy, NULL); /* tmp unused: one launch */
    else emt_matmul(gpu->ops, eg, &W, NULL, dx, n_rows, n_in, n_out, dy, 1);
    CHECK_OK(gpu->ops->sync(eg));
    launch_totals r;
    if (read_launches(&r)) {
        double eff = r.sectors ? r.ideal_sectors / r.sectors : 0, dram = (r.dram_load + r.dram_store) / r.ideal;
        printf("%-5s %5d -> %3d, %2d rows: %-28s load sectors %8.0f / ideal %8.0f = %5.1f%% (worst site %5.1f%%), "
               "widths %2.0f-%2.0f B, shared wavefronts %.0f / %.0f, bytes / ideal: DRAM %.3f, L2 %.2f, L1 %.2f\n",
               name, n_in, n_out, n_rows, r.kernel, r.sectors, r.ideal_sectors, 100 * eff,
               100 * r.worst_site, r.narrowest, r.widest, r.wavefronts, r.ideal_wavefronts, dram, r.l2_load / r.ideal,
               r.l1_load / r.ideal);
        CHECK_MSG(eff >= f->min_load_efficiency, "%s product %d -> %d, %d rows: global-load sector efficiency %.3f < %.2f",
                  name, n_in, n_out, n_rows, eff, f->min_load_efficiency);
        /* per site too: a small access badly coalesced (the split tensor-core
         * product's partial sums) hides in the total */
        CHECK_MSG(r.worst_site >= f->min_load_efficiency,
                  "%s product %d -> %d, %d rows: a global-load site's sector efficiency %.3f < %.2f", name,
                  n_in, n_out, n_rows, r.worst_site, f->min_load_efficiency);
        CHECK_MSG(r.wavefronts == r.ideal_wavefronts, "%s product %d -> %d, %d rows: %.0f shared wavefronts, %.0f without bank conflicts",
                  name, n_in, n_out, n_rows, r.wavefronts, r.ideal_wavefronts);
        CHECK_MSG(dram <= f->max_dram_over_ideal, "%s product %d -> %d, %d rows: DRAM bytes %.3f x the ideal > %.2f",
                  name, n_in, n_out, n_rows, dram, f->max_dram_over_ideal);
    }
    gpu->ops->release(gpu, (void *)W.data);
    gpu->ops->release(gpu, dx);
    gpu->ops->release(gpu, dy);
    free(w);
    free(x);
    free(wq);
}

/* Tree attention (cuda/attention.cu) at the 7B head width (head_dim 128)
 * over a 2048-token context, KV heads scaled down to one: Llama 2's one
 * query head per KV head and Llama 3's group of four; one row (the AR
 * step) and a 64-node tree (16 nodes for the group of four: the same 64
 * queries per KV head), each node's parent drawn among the earlier nodes
 * (about 5 deep, as a drafter's tree): the tensor-core kernel
 * (attn_tc_span_kernel); and one AR row at head_dim 96, which it does not
 * take (the CUDA-core attn_span_kernel); each also with a BF16 KV cache
 * (set_kv_dtype: 16-byte loads of 8 keys' values, op ATTN_BF16). Floors: global-load sector
 * efficiency and zero bank conflicts over its launches (the tensor-core
 * kernel merges the spans in its own launch; the CUDA-core one launches the
 * combine after it); DRAM bytes are printed, not bounded: the span partials
 * (written once, read once by the merge) come on top of the op's ideal. */
static void check_attention(int32_t n_heads, int32_t n_kv_heads, int32_t n_rows, int32_t hd, int bf16) {
    const int32_t P = 2048;
    const size_t qn = (size_t)n_rows * n_heads * hd, kn = (size_t)(P + n_rows) * n_kv_heads * hd;
    float *q = emt_test_host_random(&rng, qn, 1.0f), *k = emt_test_host_random(&rng, kn, 1.0f);
    float *v = emt_test_host_random(&rng, kn, 1.0f);
    uint8_t *mask = NULL;
    if (n_rows > 1) {
        mask = calloc((size_t)n_rows * n_rows, 1);
        for (int32_t i = 0; i < n_rows; i++) {
            if (i > 0) memcpy(mask + (size_t)i * n_rows, mask + (size_t)emt_test_irand(&rng, i) * n_rows, (size_t)n_rows);
            mask[(size_t)i * n_rows + i] = 1;
        }
    }
    if (bf16) { /* the caches as BF16, in place: kn values into kn halves */
        uint16_t *k16 = (uint16_t *)(void *)k, *v16 = (uint16_t *)(void *)v;
        for (size_t i = 0; i < kn; i++) k16[i] = emt_f32_to_bf16(k[i]), v16[i] = emt_f32_to_bf16(v[i]);
    }
    const size_t kv_bytes = kn * (bf16 ? 2 : 4);
    float *dq = emt_test_device_copy(gpu, q, qn * 4), *dk = emt_test_device_copy(gpu, k, kv_bytes);
    float *dv = emt_test_device_copy(gpu, v, kv_bytes), *dout = gpu->ops->alloc(gpu, qn * 4);
    CHECK(dq && dk && dv && dout);
    launch_totals before, r;
    read_launches(&before);
    if (bf16) gpu->ops->set_kv_dtype(eg, EMT_BF16);
    gpu->ops->attention(eg, dq, dk, dv, P, n_rows, mask, n_heads, n_kv_heads, hd, dout);
    if (bf16) gpu->ops->set_kv_dtype(eg, EMT_F32);
    CHECK_OK(gpu->ops->sync(eg));
    if (read_launches(&r)) {
        double eff = r.sectors ? r.ideal_sectors / r.sectors : 0, dram = (r.dram_load + r.dram_store) / r.ideal;
        printf("ATTN %s %4d+%-3d %2d/%d heads hd %d: load sectors %8.0f / ideal %8.0f = %5.1f%%, widths %2.0f-%2.0f B, "
               "shared wavefronts %.0f / %.0f, bytes / ideal: DRAM %.3f, L2 %.2f, L1 %.2f\n",
               bf16 ? "BF16" : "F32 ", P, n_rows, n_heads, n_kv_heads, hd, r.sectors, r.ideal_sectors, 100 * eff, r.narrowest, r.widest,
               r.wavefronts, r.ideal_wavefronts, dram, r.l2_load / r.ideal, r.l1_load / r.ideal);
        CHECK_MSG(eff >= 0.90, "attention %d+%d, %d/%d heads, hd %d, %s KV: global-load sector efficiency %.3f < 0.90", P,
                  n_rows, n_heads, n_kv_heads, hd, bf16 ? "BF16" : "F32", eff);
        CHECK_MSG(r.wavefronts == r.ideal_wavefronts,
                  "attention %d+%d, %d/%d heads, hd %d, %s KV: %.0f shared wavefronts, %.0f without bank conflicts", P, n_rows,
                  n_heads, n_kv_heads, hd, bf16 ? "BF16" : "F32", r.wavefronts, r.ideal_wavefronts);
    }
    float *p[] = { dq, dk, dv, dout };
    for (int i = 0; i < 4; i++) gpu->ops->release(gpu, p[i]);
    free(q);
    free(k);
    free(v);
    free(mask);
}

/* The per-row and per-element kernels (cuda/elementwise.cu) at the 7B
 * widths: RMSNorm over 4096, RoPE over 32 heads of 128 (also fused with the
 * BF16 rounding of K and V into the cache, ROPE_ROUND_KV, and with Q's RoPE
 * too, ROPE_Q_ROUND_KV: 32 query and 32 KV heads), the SwiGLU over
 * 11008 and the residual add over 4096 values per row, for 1 and 64 rows.
 * Floors as the products': sector efficiency, no bank conflicts, DRAM
 * within 5% of the ideal. */
static void check_rowwise(const char *op, int32_t n_rows) {
    const int32_t dim = 4096, ffn = 11008, heads = 32, hd = 128;
    const int64_t n = !strcmp(op, "SWIGLU") ? (int64_t)n_rows * ffn : (int64_t)n_rows * dim;
    float *a = emt_test_host_random(&rng, (size_t)n, 1.0f), *b = emt_test_host_random(&rng, (size_t)n, 1.0f);
    float *da = emt_test_device_copy(gpu, a, (size_t)n * 4), *db = emt_test_device_copy(gpu, b, (size_t)n * 4);
    float *dout = gpu->ops->alloc(gpu, (size_t)n * 4);
    uint16_t *kv_out = !strcmp(op, "ROPE_Q_ROUND_KV") ? gpu->ops->alloc(gpu, (size_t)n * 4) : NULL;
    CHECK(da && db && dout);
    if (kv_out) CHECK_OK(gpu->ops->upload(gpu, dout, a, (size_t)n * 4)); /* Q's rows */
    int32_t pos[64];
    float inv_freq[64];
    for (int32_t i = 0; i < 64; i++) {
        pos[i] = 2000 + i;
        inv_freq[i] = powf(10000.0f, -(float)i / 64);
    }
    launch_totals before, r;
    read_launches(&before);
    if (!strcmp(op, "RMSNORM")) gpu->ops->rmsnorm(eg, da, db, n_rows, dim, 1e-5f, dout);
    else if (!strcmp(op, "ROUND_BF16")) gpu->ops->round_bf16(eg, da, n, (uint16_t *)(void *)dout); /* K/V rows into a BF16 cache */
    else if (!strcmp(op, "ROPE")) gpu->ops->rope(eg, da, n_rows, heads, hd, hd, pos, inv_freq);
    else if (!strcmp(op, "ROPE_ROUND_KV")) /* K roped, K and V rounded into BF16 cache rows (half of dout each) */
        gpu->ops->rope_round_kv(eg, da, db, n_rows, heads, hd, hd, pos, NULL, inv_freq, (uint16_t *)(void *)dout,
                                (uint16_t *)(void *)dout + n);
    else if (!strcmp(op, "ROPE_Q_ROUND_KV")) { /* Q (dout) roped in place, K (da) and V (db) into BF16 rows */
        gpu->ops->rope_q_round_kv(eg, dout, heads, da, db, n_rows, heads, hd, hd, pos, NULL, inv_freq, kv_out,
                                  kv_out + n);
    }
    else if (!strcmp(op, "SWIGLU")) gpu->ops->swiglu(eg, da, db, n, dout);
    else gpu->ops->add(eg, da, db, n);
    CHECK_OK(gpu->ops->sync(eg));
    if (read_launches(&r)) {
        double eff = r.sectors ? r.ideal_sectors / r.sectors : 0, dram = (r.dram_load + r.dram_store) / r.ideal;
        printf("%-7s %6lld values, %2d rows: %-22s load sectors %7.0f / ideal %7.0f = %5.1f%%, widths %2.0f-%2.0f B, "
               "shared wavefronts %.0f / %.0f, bytes / ideal: DRAM %.3f, L2 %.2f, L1 %.2f\n",
               op, (long long)n, n_rows, r.kernel, r.sectors, r.ideal_sectors, 100 * eff, r.narrowest, r.widest,
               r.wavefronts, r.ideal_wavefronts, dram, r.l2_load / r.ideal, r.l1_load / r.ideal);
        CHECK_MSG(eff >= 0.90, "%s, %d rows: global-load sector efficiency %.3f < 0.90", op, n_rows, eff);
        CHECK_MSG(r.worst_site >= 0.90, "%s, %d rows: a global-load site's sector efficiency %.3f < 0.90", op, n_rows,
                  r.worst_site);
        CHECK_MSG(r.wavefronts == r.ideal_wavefronts, "%s, %d rows: %.0f shared wavefronts, %.0f without bank conflicts",
                  op, n_rows, r.wavefronts, r.ideal_wavefronts);
        CHECK_MSG(dram <= 1.05, "%s, %d rows: DRAM bytes %.3f x the ideal > 1.05", op, n_rows, dram);
    }
    gpu->ops->release(gpu, da);
    gpu->ops->release(gpu, db);
    gpu->ops->release(gpu, dout);
    if (kv_out) gpu->ops->release(gpu, kv_out);
    free(a);
    free(b);
}

int main(void) {
    if (!emt_cuda_test_have_device()) return 77;
    char path[512];
    const char *keep = getenv("EMT_CUDA_MEMEFF_REPORT");
    if (keep && *keep)
        snprintf(path, sizeof path, "%s", keep);
    else
        snprintf(path, sizeof path, "%s/memeff_%d.jsonl", ENTMTP_TEST_TMP_DIR, (int)getpid());
    FILE *clear = fopen(path, "w");
    CHECK(clear != NULL);
    if (clear) fclose(clear);
    setenv("EMT_CUDA_HARNESS_MEMSTATS", path, 1); /* read by the harness at every launch */
    report = fopen(path, "r");
    CHECK(report != NULL);
    CHECK_OK(emt_backend_cuda_create(0, &gpu));
    eg = gpu->ops->exec_create(gpu, 0);
    /* 7B (Llama 2) widths: 4096 into Q/K/V/O and gate/up, 11008 into down;
     * 8 outputs (one block of the product) stand for the 4096 or 11008 */
    const int32_t widths[] = { 4096, 11008 }, rows[] = { 1, 64, 128 };
    int32_t outputs[8] = { 8 }, n_outputs = 1;
    const char *list = getenv("EMT_CUDA_MEMEFF_OUTPUTS");
    if (list && *list) {
        n_outputs = 0;
        for (char *end; *list && n_outputs < 8; list = *end ? end + 1 : end) {
            long v = strtol(list, &end, 10);
            if (end == list || v < 1 || v > 65536) {
                fprintf(stderr, "EMT_CUDA_MEMEFF_OUTPUTS: \"%s\" is not a list of output counts 1..65536\n", list);
                return 1;
            }
            outputs[n_outputs++] = (int32_t)v;
        }
    }
    const char *only = getenv("EMT_CUDA_MEMEFF_DTYPES");
    if (!only || !*only || name_listed(only, "ATTN")) {
        for (int bf16 = 0; bf16 < 2; bf16++) { /* F32, then BF16 KV caches */
            check_attention(1, 1, 1, 128, bf16);  /* Llama 2 7B: 32 heads over 32 KV heads */
            check_attention(1, 1, 64, 128, bf16);
            check_attention(4, 1, 1, 128, bf16);  /* Llama 3 8B: 32 over 8 */
            check_attention(4, 1, 16, 128, bf16); /* 64 queries per KV head, as the 64-row tree of Llama 2 */
            check_attention(1, 1, 1, 96, bf16);   /* a head width the tensor-core kernel does not take (CUDA-core kernel) */
        }
    }
    static const char *const rowwise[] = { "RMSNORM", "ROPE", "SWIGLU", "ADD", "ROUND_BF16", "ROPE_ROUND_KV",
                                           "ROPE_Q_ROUND_KV" };
    for (int i = 0; i < 7; i++)
        if (!only || !*only || name_listed(only, rowwise[i])) {
            check_rowwise(rowwise[i], 1);
            check_rowwise(rowwise[i], 64);
        }
    for (size_t i = 0; i < sizeof floors / sizeof floors[0]; i++) {
        if (only && *only && !name_listed(only, dtype_name(floors[i].dtype))) continue;
        /* BF16 also at 128 rows: the tensor-core kernel's 64-row blocks */
        const int n_rows_cases = floors[i].dtype == EMT_BF16 ? 3 : 2;
        for (int wi = 0; wi < 2; wi++)
            for (int ri = 0; ri < n_rows_cases; ri++)
                for (int oi = 0; oi < n_outputs; oi++) {
                    check_product(floors[i].dtype, widths[wi], outputs[oi], rows[ri], &floors[i], 0);
                    /* BF16: the residual add in the epilogue, at the AR step's and the verify's rows */
                    if (floors[i].dtype == EMT_BF16 && rows[ri] <= 64)
                        check_product(floors[i].dtype, widths[wi], outputs[oi], rows[ri], &floors[i], 1);
                }
    }
    if (!counted) {
        printf("SKIP: no launch was counted (not the harness plugin: a GPU has no such counters)\n");
        gpu->ops->exec_destroy(eg);
        gpu->ops->destroy(gpu);
        return 77;
    }
    gpu->ops->exec_destroy(eg);
    gpu->ops->destroy(gpu);
    fclose(report);
    if (!keep || !*keep) remove(path);
    return emt_test_finish("test_cuda_memeff");
}
