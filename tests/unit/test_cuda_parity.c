/* Every op of the CUDA backend against its CPU twin (src/backend/cpu) on
 * random inputs: odd sizes, sizes past one block and past the grid-stride
 * cap, a long context, a 128-node tree mask, both matmul paths. The
 * end-to-end token checks are in test_cuda_lossless.c. Runs on a GPU or, in
 * CI, on the CPU CUDA harness (docs/cuda-harness.md); SKIPPED without either. */
#include "backend/backend.h"
#include "check.h"
#include "cuda_test.h"

#include <math.h>
#include <stdio.h>

static uint64_t rng = 7;
static int32_t irand(int32_t n) { return emt_test_irand(&rng, n); }

static emt_backend *cpu, *gpu;
static emt_exec *ec, *eg;

static float *host_random(size_t n, float scale) { return emt_test_host_random(&rng, n, scale); }
static float *dev_copy(const float *h, size_t n) { return emt_test_device_copy(gpu, h, n * sizeof(float)); }

/* The device result against the CPU's: |difference| <= tol * (1 + |cpu|). */
static void expect_close(const char *op, const float *dev, const float *host, size_t n, double tol) {
    float *tmp = malloc(n * sizeof(float));
    CHECK_OK(gpu->ops->download(eg, tmp, dev, n * sizeof(float)));
    double worst = 0;
    size_t at = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)tmp[i] - host[i]) / (1.0 + fabs((double)host[i]));
        if (!(d <= worst)) { worst = d; at = i; } /* NaN counts as the worst */
    }
    printf("%-26s %9zu values, worst relative difference %.3g\n", op, n, worst);
    if (!(worst <= tol)) {
        fprintf(stderr, "%s: element %zu is %.9g on CUDA, %.9g on the CPU (tolerance %g)\n", op, at, tmp[at],
                host[at], tol);
        emt_test_failures++;
    }
    free(tmp);
}

static void check_elementwise(void) {
    /* n past 4096 blocks x 256 threads: the grid-stride loops take a second lap */
    const int64_t n = 4096 * 256 + 1001, small = 3001;
    float *a = host_random(n, 3.0f), *b = host_random(n, 3.0f), *out = malloc(n * sizeof(float));
    float *da = dev_copy(a, n), *db = dev_copy(b, n), *dout = gpu->ops->alloc(gpu, n * sizeof(float));
    cpu->ops->swiglu(ec, a, b, small, out);
    gpu->ops->swiglu(eg, da, db, small, dout);
    expect_close("swiglu", dout, out, small, 1e-5);
    cpu->ops->silu_residual(ec, a, b, small, out);
    gpu->ops->silu_residual(eg, da, db, small, dout);
    expect_close("silu_residual", dout, out, small, 1e-5);
    cpu->ops->add(ec, a, b, n);
    gpu->ops->add(eg, da, db, n);
    expect_close("add (grid-stride)", da, a, n, 0);
    gpu->ops->release(gpu, da);
    gpu->ops->release(gpu, db);
    gpu->ops->release(gpu, dout);
    free(a); free(b); free(out);
}

static void check_embed_rmsnorm_rope(void) {
    const int32_t vocab = 50, dim = 1001, rows = 7, heads = 7, hd = 143, n_rot = 128;
    float *table = host_random((size_t)vocab * dim, 1.0f), *w = host_random(dim, 2.0f);
    float *x = malloc(sizeof(float) * rows * dim), *y = malloc(sizeof(float) * rows * dim);
    int32_t tokens[7], pos[7];
    float inv_freq[64];
    for (int i = 0; i < rows; i++) { tokens[i] = irand(vocab); pos[i] = irand(6000); }
    for (int i = 0; i < n_rot / 2; i++) inv_freq[i] = powf(10000.0f, -2.0f * (float)i / (float)n_rot);
    float *dtable = dev_copy(table, (size_t)vocab * dim), *dw = dev_copy(w, dim);
    float *dx = gpu->ops->alloc(gpu, sizeof(float) * rows * dim), *dy = gpu->ops->alloc(gpu, sizeof(float) * rows * dim);
    cpu->ops->embed(ec, table, dim, tokens, rows, x);
    gpu->ops->embed(eg, dtable, dim, tokens, rows, dx);
    expect_close("embed", dx, x, (size_t)rows * dim, 0);
    cpu->ops->rmsnorm(ec, x, w, rows, dim, 1e-5f, y);
    gpu->ops->rmsnorm(eg, dx, dw, rows, dim, 1e-5f, dy);
    expect_close("rmsnorm (dim 1001)", dy, y, (size_t)rows * dim, 1e-5);
    /* rows of 7 heads x 143 = 1001 floats, RoPE on the first 128 dims of each head */
    cpu->ops->rope(ec, y, rows, heads, hd, n_rot, pos, inv_freq);
    gpu->ops->rope(eg, dy, rows, heads, hd, n_rot, pos, inv_freq);
    expect_close("rope (partial, pos < 6000)", dy, y, (size_t)rows * dim, 1e-5);
    float *p[] = { dtable, dw, dx, dy };
    for (int i = 0; i < 4; i++) gpu->ops->release(gpu, p[i]);
    free(table); free(w); free(x); free(y);
}

/* RMSNorm's other launch shapes (cu_rmsnorm): 16-byte loads on aligned rows
 * whose width is a multiple of 4, held in registers in one pass (4096) or
 * loaded again after the reduction (8192), and many narrow rows in place (a
 * QK-norm's heads); bit-identical to the CPU like the 1001-wide rows */
static void check_rmsnorm_shapes(void) {
    const int32_t dims[] = { 4096, 8192, 128 }, n_rows[] = { 3, 2, 67 };
    for (int c = 0; c < 3; c++) {
        const size_t n = (size_t)dims[c] * n_rows[c];
        float *x = host_random(n, 4.0f), *w = host_random(dims[c], 2.0f), *y = malloc(n * sizeof(float));
        float *dx = dev_copy(x, n), *dw = dev_copy(w, dims[c]), *dy = gpu->ops->alloc(gpu, n * sizeof(float));
        char name[64];
        cpu->ops->rmsnorm(ec, x, w, n_rows[c], dims[c], 1e-6f, y);
        const int in_place = c == 2;
        gpu->ops->rmsnorm(eg, dx, dw, n_rows[c], dims[c], 1e-6f, in_place ? dx : dy);
        snprintf(name, sizeof name, "rmsnorm (dim %d%s)", dims[c], in_place ? ", in place" : "");
        expect_close(name, in_place ? dx : dy, y, n, 0);
        gpu->ops->release(gpu, dx);
        gpu->ops->release(gpu, dw);
        gpu->ops->release(gpu, dy);
        free(x); free(w); free(y);
    }
}

static void check_matmul_topk(void) {
    const int32_t I = 577, O = 301, K = 10;
    const int32_t rows[] = { 5, 37 }; /* the exact kernel alone; then cuBLAS (>= 16 rows) too */
    float *W = host_random((size_t)O * I, 0.05f), *bias = host_random(O, 1.0f), *x = host_random((size_t)37 * I, 1.0f);
    float *y = malloc(sizeof(float) * 37 * O);
    float *dW = dev_copy(W, (size_t)O * I), *db = dev_copy(bias, O), *dx = dev_copy(x, (size_t)37 * I);
    float *dy = gpu->ops->alloc(gpu, sizeof(float) * 37 * O);
    for (int r = 0; r < 2; r++)
        for (int exact = 0; exact < 2; exact++) {
            char name[64];
            snprintf(name, sizeof name, "matmul %d rows, exact %d%s", rows[r], exact, r ? ", bias" : "");
            cpu->ops->matmul(ec, W, r ? bias : NULL, x, rows[r], I, O, y, 1);
            gpu->ops->matmul(eg, dW, r ? db : NULL, dx, rows[r], I, O, dy, exact);
            expect_close(name, dy, y, (size_t)rows[r] * O, 1e-5);
        }
    /* top-k of those logits, sharpened so the probabilities spread out */
    for (int64_t i = 0; i < (int64_t)37 * O; i++) y[i] *= 4.0f;
    CHECK_OK(gpu->ops->upload(gpu, dy, y, sizeof(float) * 37 * O));
    int32_t ci[37 * K], gi[37 * K];
    float cp[37 * K], gp[37 * K], ch[37], gh[37];
    cpu->ops->topk(ec, y, 37, O, K, ci, cp, ch);
    gpu->ops->topk(eg, dy, 37, O, K, gi, gp, gh);
    CHECK_OK(gpu->ops->sync(eg));
    CHECK(!memcmp(ci, gi, sizeof ci));
    double worst = 0;
    for (int i = 0; i < 37 * K; i++) worst = fmax(worst, fabs((double)gp[i] - cp[i]));
    for (int i = 0; i < 37; i++) worst = fmax(worst, fabs((double)gh[i] - ch[i]));
    printf("%-26s ids equal, worst probability/entropy difference %.3g\n", "topk (k 10)", worst);
    CHECK(worst < 1e-5);
    gpu->ops->release(gpu, dW); gpu->ops->release(gpu, db); gpu->ops->release(gpu, dx); gpu->ops->release(gpu, dy);
    free(W); free(bias); free(x); free(y);
}

/* A random 128-node tree (parent before child) as an ancestor-or-self mask. */
static void random_tree_mask(int32_t n, uint8_t *mask) {
    memset(mask, 0, (size_t)n * n);
    for (int32_t i = 0; i < n; i++) {
        if (i > 0) memcpy(mask + (size_t)i * n, mask + (size_t)irand(i) * n, (size_t)n);
        mask[(size_t)i * n + i] = 1;
    }
}

/* hd 40: the CUDA-core kernel; 64: the tensor-core one (cuda/attention.cu) */
static void check_attention(int32_t prefix, int32_t n, int tree, int32_t hd) {
    const int32_t H = 4, KV = 2;
    size_t qn = (size_t)n * H * hd, kn = (size_t)(prefix + n) * KV * hd;
    float *q = host_random(qn, 1.0f), *k = host_random(kn, 1.0f), *v = host_random(kn, 1.0f);
    float *o = malloc(qn * sizeof(float));
    uint8_t *mask = NULL;
    if (tree) {
        mask = malloc((size_t)n * n);
        random_tree_mask(n, mask);
    }
    cpu->ops->attention(ec, q, k, v, prefix, n, mask, H, KV, hd, o);
    float *dq = dev_copy(q, qn), *dk = dev_copy(k, kn), *dv = dev_copy(v, kn);
    float *dout = gpu->ops->alloc(gpu, qn * sizeof(float));
    gpu->ops->attention(eg, dq, dk, dv, prefix, n, mask, H, KV, hd, dout);
    char name[64];
    snprintf(name, sizeof name, "attention %d+%d %s hd %d", prefix, n, tree ? "tree" : "causal", hd);
    expect_close(name, dout, o, qn, 1e-5);
    float *p[] = { dq, dk, dv, dout };
    for (int i = 0; i < 4; i++) gpu->ops->release(gpu, p[i]);
    free(q); free(k); free(v); free(o); free(mask);
}

/* The graph-capturable forms (emt_dyn_rows): the prefix length L read from
 * device memory, the tree's K/V at rows row0.. past the capacity, positions
 * L + depth. Bit-identical to attention_window() (window 0: none) / rope()
 * with the rows at L and the positions given, on each backend, and close
 * across them; L = 5 leaves most of the grid (sized for row0) idle, L = 3000
 * crosses a chunk boundary. */
static void check_dyn(int32_t L, int32_t n, int32_t window, int32_t hd) {
    const int32_t H = 4, KV = 2, row0 = 3100, n_rot = 32;
    const size_t qn = (size_t)n * H * hd, row = (size_t)KV * hd, kn = (size_t)(row0 + n) * row;
    float *q = host_random(qn, 1.0f), *k = host_random(kn, 1.0f), *v = host_random(kn, 1.0f);
    /* the same keys with the tree's rows at L, as attention() takes them */
    float *k2 = malloc(kn * sizeof(float)), *v2 = malloc(kn * sizeof(float));
    memcpy(k2, k, kn * sizeof(float));
    memcpy(v2, v, kn * sizeof(float));
    memcpy(k2 + (size_t)L * row, k + (size_t)row0 * row, (size_t)n * row * sizeof(float));
    memcpy(v2 + (size_t)L * row, v + (size_t)row0 * row, (size_t)n * row * sizeof(float));
    uint8_t *mask = malloc((size_t)n * n);
    random_tree_mask(n, mask);
    int32_t *depth = malloc((size_t)n * sizeof(int32_t)), *pos = malloc((size_t)n * sizeof(int32_t));
    for (int32_t i = 0; i < n; i++) {
        depth[i] = 0;
        for (int32_t j = 0; j < i; j++) depth[i] += mask[(size_t)i * n + j];
        pos[i] = L + depth[i];
    }
    float *o = malloc(qn * sizeof(float)), *o2 = malloc(qn * sizeof(float));
    int32_t *dlen = emt_test_device_copy(gpu, &L, sizeof L);
    emt_dyn_rows hrows = { &L, depth, row0 }, drows = { dlen, depth, row0 };
    cpu->ops->attention_dyn(ec, q, k, v, &hrows, n, mask, H, KV, hd, window, 0.0f, o);
    cpu->ops->attention_window(ec, q, k2, v2, L, n, mask, pos, H, KV, hd, window, 0.0f, o2);
    CHECK(!memcmp(o, o2, qn * sizeof(float)));
    float *dq = dev_copy(q, qn), *dk = dev_copy(k, kn), *dv = dev_copy(v, kn), *dk2 = dev_copy(k2, kn);
    float *dv2 = dev_copy(v2, kn), *dout = gpu->ops->alloc(gpu, qn * sizeof(float));
    float *dout2 = gpu->ops->alloc(gpu, qn * sizeof(float));
    gpu->ops->attention_dyn(eg, dq, dk, dv, &drows, n, mask, H, KV, hd, window, 0.0f, dout);
    gpu->ops->attention_window(eg, dq, dk2, dv2, L, n, mask, pos, H, KV, hd, window, 0.0f, dout2);
    char name[64];
    snprintf(name, sizeof name, "attention_dyn %d+%d w %d hd %d", L, n, window, hd);
    expect_close(name, dout, o, qn, 1e-5);
    CHECK_OK(gpu->ops->download(eg, o, dout2, qn * sizeof(float)));
    snprintf(name, sizeof name, "  = attention_window %d+%d", L, n);
    expect_close(name, dout, o, qn, 0);
    /* rope at L + depth over the queries */
    float inv_freq[16];
    for (int i = 0; i < n_rot / 2; i++) inv_freq[i] = powf(10000.0f, -2.0f * (float)i / (float)n_rot);
    memcpy(o2, q, qn * sizeof(float));
    CHECK_OK(gpu->ops->upload(gpu, dout2, q, qn * sizeof(float)));
    cpu->ops->rope_dyn(ec, q, n, H, hd, n_rot, &hrows, inv_freq);
    cpu->ops->rope(ec, o2, n, H, hd, n_rot, pos, inv_freq);
    CHECK(!memcmp(q, o2, qn * sizeof(float)));
    gpu->ops->rope_dyn(eg, dq, n, H, hd, n_rot, &drows, inv_freq);
    gpu->ops->rope(eg, dout2, n, H, hd, n_rot, pos, inv_freq);
    snprintf(name, sizeof name, "rope_dyn at %d + depth", L);
    expect_close(name, dq, q, qn, 1e-5);
    CHECK_OK(gpu->ops->download(eg, o, dout2, qn * sizeof(float)));
    snprintf(name, sizeof name, "  = rope at %d + depth", L);
    expect_close(name, dq, o, qn, 0);
    float *p[] = { dq, dk, dv, dk2, dv2, dout, dout2, (float *)dlen };
    for (int i = 0; i < 8; i++) gpu->ops->release(gpu, p[i]);
    free(q); free(k); free(v); free(k2); free(v2); free(mask); free(depth); free(pos); free(o); free(o2);
}

/* the engine's KV commit: rows moved toward lower indices inside one buffer */
static void check_copy_rows(void) {
    const int32_t n_rows = 40, width = 333;
    float *a = host_random((size_t)n_rows * width, 1.0f);
    float *da = dev_copy(a, (size_t)n_rows * width);
    const int32_t dst[] = { 10, 11, 12, 13 }, src[] = { 10, 13, 20, 39 };
    cpu->ops->copy_rows(ec, a, a, width, dst, src, 4);
    gpu->ops->copy_rows(eg, da, da, width, dst, src, 4);
    expect_close("copy_rows (in place)", da, a, (size_t)n_rows * width, 0);
    gpu->ops->release(gpu, da);
    free(a);
}

int main(void) {
    if (!emt_cuda_test_open_pair(&cpu, &ec, &gpu, &eg)) return 77;
    if (ec && eg) {
        check_elementwise();
        check_embed_rmsnorm_rope();
        check_rmsnorm_shapes();
        check_matmul_topk();
        for (int32_t hd = 40; hd <= 64; hd += 24) { /* the CUDA-core kernel, then the tensor-core one */
            check_attention(0, 37, 0, hd); /* prompt: causal, no prefix */
            check_attention(emt_test_size(3000, 300), emt_test_size(128, 32), 1, hd); /* long context, a 128-node tree */
            check_attention(1, 1, 0, hd);  /* one decode row */
            check_dyn(5, 64, 0, hd);
            check_dyn(emt_test_size(3000, 300), 64, 0, hd);
            check_dyn(emt_test_size(3000, 300), 64, 300, hd); /* a sliding window: the prefix starts at L + depth - 299 */
            check_dyn(5, 64, 4, hd); /* a window shorter than the tree: nodes hide their far ancestors */
        }
        check_copy_rows();
        CHECK_OK(gpu->ops->sync(eg));
    }
    emt_cuda_test_close_pair(cpu, ec, gpu, eg);
    return emt_test_finish("test_cuda_parity");
}
