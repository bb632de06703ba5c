/* The optional backend ops Gemma needs (scale, geglu, softcap,
 * attention_softcap, attention_window) on the CPU against double-precision references, the
 * batch invariance of soft-capped tree attention, and the load-time error
 * that names an op a backend lacks. */
#include "backend/backend.h"
#include "check.h"
#include "model/model.h"

#include <math.h>

static uint64_t rng = 7;
static float urand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

static double gelu_tanh_ref(double v) {
    return 0.5 * v * (1.0 + tanh(sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
}

static void elementwise(emt_exec *ex, const emt_backend_ops *op) {
    enum { N = 20000 }; /* more than one pool task */
    float *g = malloc(sizeof(float) * N), *u = malloc(sizeof(float) * N), *o = malloc(sizeof(float) * N);
    for (int i = 0; i < N; i++) { g[i] = 6.0f * urand(); u[i] = urand(); }
    op->geglu(ex, g, u, N, o);
    double worst = 0;
    for (int i = 0; i < N; i++) worst = fmax(worst, fabs(o[i] - gelu_tanh_ref(g[i]) * u[i]));
    CHECK(worst < 1e-5);
    memcpy(o, g, sizeof(float) * N);
    op->softcap(ex, o, N, 2.5f);
    worst = 0;
    for (int i = 0; i < N; i++) worst = fmax(worst, fabs(o[i] - 2.5 * tanh(g[i] / 2.5)));
    CHECK(worst < 1e-5);
    memcpy(o, g, sizeof(float) * N);
    op->scale(ex, o, N, 8.0f);
    for (int i = 0; i < N; i++) CHECK(o[i] == g[i] * 8.0f);
    free(g); free(u); free(o);
}

/* 3 prefix keys + a 4-node tree; a cap small enough to change the result */
static void softcapped_attention(emt_exec *ex, const emt_backend_ops *op) {
    const int32_t H = 4, KV = 2, hd = 16, P = 3, N = 4;
    const float cap = 0.75f;
    const uint8_t mask[16] = { 1, 0, 0, 0, 1, 1, 0, 0, 1, 0, 1, 0, 1, 1, 0, 1 };
    float q[4 * 4 * 16], k[7 * 2 * 16], v[7 * 2 * 16], out[4 * 4 * 16], plain[4 * 4 * 16];
    for (int i = 0; i < 4 * 4 * 16; i++) q[i] = 3.0f * urand();
    for (int i = 0; i < 7 * 2 * 16; i++) { k[i] = urand(); v[i] = urand(); }
    op->attention_softcap(ex, q, k, v, P, N, mask, H, KV, hd, cap, out);
    op->attention(ex, q, k, v, P, N, mask, H, KV, hd, plain);
    double worst = 0, changed = 0;
    for (int r = 0; r < N; r++)
        for (int h = 0; h < H; h++) {
            double sc[7], mx = -1e300, z = 0;
            int vis[7];
            for (int key = 0; key < P + N; key++) {
                vis[key] = key < P || mask[r * N + key - P];
                double d = 0;
                for (int e = 0; e < hd; e++) d += (double)q[(r * H + h) * hd + e] * k[(key * KV + h / 2) * hd + e];
                sc[key] = cap * tanh(d / sqrt((double)hd) / cap);
                if (vis[key] && sc[key] > mx) mx = sc[key];
            }
            for (int key = 0; key < P + N; key++) if (vis[key]) z += exp(sc[key] - mx);
            for (int e = 0; e < hd; e++) {
                double acc = 0;
                for (int key = 0; key < P + N; key++)
                    if (vis[key]) acc += exp(sc[key] - mx) / z * v[(key * KV + h / 2) * hd + e];
                int i = (r * H + h) * hd + e;
                worst = fmax(worst, fabs(acc - out[i]));
                changed = fmax(changed, fabs((double)plain[i] - out[i]));
            }
        }
    CHECK(worst < 1e-5);
    CHECK(changed > 1e-2); /* the cap mattered */
    /* node 3 (root -> 1 -> 3) as an AR row after prefix + root + node 1: same bits */
    float k2[6 * 2 * 16], v2[6 * 2 * 16], out1[4 * 16];
    memcpy(k2, k, sizeof(float) * 5 * 2 * 16);
    memcpy(v2, v, sizeof(float) * 5 * 2 * 16);
    memcpy(k2 + 5 * 32, k + 6 * 32, sizeof(float) * 32);
    memcpy(v2 + 5 * 32, v + 6 * 32, sizeof(float) * 32);
    op->attention_softcap(ex, q + 3 * 4 * 16, k2, v2, 5, 1, NULL, H, KV, hd, cap, out1);
    CHECK(!memcmp(out1, out + 3 * 4 * 16, sizeof out1));
}

/* attention_window: 10 prefix keys (positions 0..9) + a 5-node tree at
 * positions 10, 11, 11, 12, 13 (root, two children, a grandchild of node 1,
 * a great-grandchild), window 4: each row sees only the keys fewer than 4
 * positions back. Against a double reference, with and without a cap; a
 * window covering every key gives attention()'s bits; and a node equals the
 * AR row at its position (its ancestors moved into the cache). */
static void windowed_attention(emt_exec *ex, const emt_backend_ops *op) {
    enum { H = 4, KV = 2, HD = 16, P = 10, N = 5, W = 4 };
    const uint8_t mask[N * N] = { 1, 0, 0, 0, 0, /**/ 1, 1, 0, 0, 0, /**/ 1, 0, 1, 0, 0,
                                  1, 1, 0, 1, 0, /**/ 1, 1, 0, 1, 1 };
    const int32_t pos[N] = { 10, 11, 11, 12, 13 };
    float q[N * H * HD], k[(P + N) * KV * HD], v[(P + N) * KV * HD], out[N * H * HD], ref[N * H * HD];
    for (int i = 0; i < N * H * HD; i++) q[i] = 2.0f * urand();
    for (int i = 0; i < (P + N) * KV * HD; i++) { k[i] = urand(); v[i] = urand(); }
    for (int capped = 0; capped < 2; capped++) {
        const float cap = capped ? 0.75f : 0.0f;
        op->attention_window(ex, q, k, v, P, N, mask, pos, H, KV, HD, W, cap, out);
        double worst = 0;
        for (int r = 0; r < N; r++)
            for (int h = 0; h < H; h++) {
                double sc[P + N], mx = -1e300, z = 0;
                int vis[P + N];
                for (int key = 0; key < P + N; key++) {
                    int kpos = key < P ? key : pos[key - P];
                    vis[key] = (key < P || mask[r * N + key - P]) && pos[r] - kpos < W;
                    double d = 0;
                    for (int e = 0; e < HD; e++) d += (double)q[(r * H + h) * HD + e] * k[(key * KV + h / 2) * HD + e];
                    sc[key] = d / sqrt((double)HD);
                    if (capped) sc[key] = cap * tanh(sc[key] / cap);
                    if (vis[key] && sc[key] > mx) mx = sc[key];
                }
                for (int key = 0; key < P + N; key++) if (vis[key]) z += exp(sc[key] - mx);
                for (int e = 0; e < HD; e++) {
                    double acc = 0;
                    for (int key = 0; key < P + N; key++)
                        if (vis[key]) acc += exp(sc[key] - mx) / z * v[(key * KV + h / 2) * HD + e];
                    int i = (r * H + h) * HD + e;
                    worst = fmax(worst, fabs(acc - out[i]));
                    if (!capped) ref[i] = out[i];
                }
            }
        CHECK(worst < 1e-5);
    }
    /* the window mattered: full attention differs */
    float full[N * H * HD];
    op->attention(ex, q, k, v, P, N, mask, H, KV, HD, full);
    CHECK(memcmp(full, ref, sizeof full) != 0);
    /* a window longer than every distance: attention()'s bits */
    op->attention_window(ex, q, k, v, P, N, mask, pos, H, KV, HD, 64, 0.0f, out);
    CHECK(!memcmp(out, full, sizeof out));
    /* node 4 (root -> 1 -> 3 -> 4, position 13) as an AR row: cache = prefix,
     * root, node 1, node 3, then node 4 itself */
    float k2[(P + 4) * KV * HD], v2[(P + 4) * KV * HD], out1[H * HD];
    const int path[4] = { 0, 1, 3, 4 };
    memcpy(k2, k, sizeof(float) * P * KV * HD);
    memcpy(v2, v, sizeof(float) * P * KV * HD);
    for (int t = 0; t < 4; t++) {
        memcpy(k2 + (P + t) * KV * HD, k + (P + path[t]) * KV * HD, sizeof(float) * KV * HD);
        memcpy(v2 + (P + t) * KV * HD, v + (P + path[t]) * KV * HD, sizeof(float) * KV * HD);
    }
    const int32_t p13 = 13;
    op->attention_window(ex, q + 4 * H * HD, k2, v2, P + 3, 1, NULL, &p13, H, KV, HD, W, 0.0f, out1);
    CHECK(!memcmp(out1, ref + 4 * H * HD, sizeof out1));
}

/* A backend without an optional op the model needs: the error names it. */
static void missing_op(const emt_backend_ops *cpu) {
    emt_backend_ops ops = *cpu;
    ops.name = "test";
    ops.attention_softcap = NULL;
    emt_backend be = { &ops, NULL };
    entmtp_model m;
    memset(&m, 0, sizeof m);
    m.be = &be;
    m.path = "gemma2.gguf";
    snprintf(m.cfg.arch, sizeof m.cfg.arch, "gemma2");
    m.cfg.geglu = 1;
    m.cfg.embed_scale = 8.0f;
    CHECK_OK(emt_model_check_ops(&m));
    m.cfg.attn_softcap = 50.0f;
    CHECK_ERR(emt_model_check_ops(&m), ENTMTP_ERR_UNSUPPORTED, "'attention_softcap'");
    ops.geglu = NULL;
    CHECK_ERR(emt_model_check_ops(&m), ENTMTP_ERR_UNSUPPORTED, "'geglu', which the test backend");
    /* a sliding window shorter than the context needs attention_window; one
     * as long as the context does not */
    ops = *cpu;
    ops.name = "test";
    ops.attention_window = NULL;
    m.cfg.ctx = 8192;
    m.cfg.sliding_window = 8192;
    CHECK_OK(emt_model_check_ops(&m));
    m.cfg.sliding_window = 4096;
    CHECK_ERR(emt_model_check_ops(&m), ENTMTP_ERR_UNSUPPORTED, "'attention_window', which the test backend");
}

int main(void) {
    emt_backend *be = NULL;
    CHECK_OK(emt_backend_cpu_create(&be));
    emt_exec *ex = be->ops->exec_create(be, 2);
    elementwise(ex, be->ops);
    softcapped_attention(ex, be->ops);
    windowed_attention(ex, be->ops);
    missing_op(be->ops);
    be->ops->exec_destroy(ex);
    be->ops->destroy(be);
    return emt_test_finish("test_cpu_gemma_ops");
}
