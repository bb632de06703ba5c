/* CPU backend ops against naive double-precision references on random
 * inputs with odd sizes, and the batch invariance the lossless invariant
 * rests on: a row computed alone equals the same row inside a batch, bit for
 * bit (matmul and tree attention). */
#include "backend/backend.h"
#include "check.h"

#include <math.h>

static uint64_t rng = 42;
static float urand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

int main(void) {
    emt_backend *be = NULL;
    CHECK_OK(emt_backend_cpu_create(&be));
    emt_exec *ex = be->ops->exec_create(be, 2);
    const emt_backend_ops *op = be->ops;

    /* matmul: sizes that exercise the blocked and the tail paths */
    const int32_t shapes[][3] = { { 1, 33, 7 }, { 7, 576, 130 }, { 64, 100, 37 }, { 3, 8, 5 } };
    for (size_t si = 0; si < 4; si++) {
        int32_t R = shapes[si][0], I = shapes[si][1], O = shapes[si][2];
        float *W = malloc(sizeof(float) * (size_t)O * I), *b = malloc(sizeof(float) * (size_t)O);
        float *x = malloc(sizeof(float) * (size_t)R * I), *y = malloc(sizeof(float) * (size_t)R * O);
        float *y1 = malloc(sizeof(float) * (size_t)O);
        for (int64_t i = 0; i < (int64_t)O * I; i++) W[i] = urand();
        for (int32_t i = 0; i < O; i++) b[i] = urand();
        for (int64_t i = 0; i < (int64_t)R * I; i++) x[i] = urand();
        op->matmul(ex, W, b, x, R, I, O, y, 1);
        double worst = 0;
        for (int32_t r = 0; r < R; r++)
            for (int32_t o = 0; o < O; o++) {
                double ref = b[o];
                for (int32_t i = 0; i < I; i++) ref += (double)W[(size_t)o * I + i] * x[(size_t)r * I + i];
                worst = fmax(worst, fabs(ref - y[(size_t)r * O + o]));
            }
        CHECK(worst < 1e-3 * sqrt((double)I));
        for (int32_t r = 0; r < R; r++) { /* each row alone: bit-identical */
            op->matmul(ex, W, b, x + (size_t)r * I, 1, I, O, y1, 1);
            if (memcmp(y1, y + (size_t)r * O, sizeof(float) * (size_t)O)) {
                fprintf(stderr, "matmul %dx%dx%d: row %d alone differs from the batch\n", R, I, O, r);
                emt_test_failures++;
            }
        }
        free(W); free(b); free(x); free(y); free(y1);
    }

    /* attention: 3 prefix keys + a 4-node tree (root, two children, a grandchild) */
    const int32_t H = 4, KV = 2, hd = 16, P = 3, N = 4;
    const uint8_t mask[16] = { 1, 0, 0, 0, 1, 1, 0, 0, 1, 0, 1, 0, 1, 1, 0, 1 };
    float q[4 * 4 * 16], k[7 * 2 * 16], v[7 * 2 * 16], out[4 * 4 * 16];
    for (int i = 0; i < 4 * 4 * 16; i++) q[i] = urand();
    for (int i = 0; i < 7 * 2 * 16; i++) { k[i] = urand(); v[i] = urand(); }
    op->attention(ex, q, k, v, P, N, mask, H, KV, hd, out);
    double worst = 0;
    for (int r = 0; r < N; r++)
        for (int h = 0; h < H; h++) {
            double sc[7], mx = -1e300, z = 0;
            int vis[7];
            for (int key = 0; key < P + N; key++) {
                vis[key] = key < P || mask[r * N + key - P];
                double d = 0;
                for (int e = 0; e < hd; e++) d += (double)q[(r * H + h) * hd + e] * k[(key * KV + h / 2) * hd + e];
                sc[key] = d / sqrt((double)hd);
                if (vis[key] && sc[key] > mx) mx = sc[key];
            }
            for (int key = 0; key < P + N; key++) if (vis[key]) z += exp(sc[key] - mx);
            for (int e = 0; e < hd; e++) {
                double acc = 0;
                for (int key = 0; key < P + N; key++)
                    if (vis[key]) acc += exp(sc[key] - mx) / z * v[(key * KV + h / 2) * hd + e];
                worst = fmax(worst, fabs(acc - out[(r * H + h) * hd + e]));
            }
        }
    CHECK(worst < 1e-5);
    /* node 3 (root -> 1 -> 3) computed as the last of three AR rows on the
     * path must give the same bits: cache = prefix + root + node 1, then node 3 */
    float k2[6 * 2 * 16], v2[6 * 2 * 16], out1[4 * 16];
    memcpy(k2, k, sizeof(float) * 5 * 2 * 16);
    memcpy(v2, v, sizeof(float) * 5 * 2 * 16);
    memcpy(k2 + 5 * 32, k + 6 * 32, sizeof(float) * 32);
    memcpy(v2 + 5 * 32, v + 6 * 32, sizeof(float) * 32);
    op->attention(ex, q + 3 * 4 * 16, k2, v2, 5, 1, NULL, H, KV, hd, out1);
    CHECK(!memcmp(out1, out + 3 * 4 * 16, sizeof out1));

    /* rmsnorm, swiglu, topk */
    float xr[37], w[37], o[37];
    for (int i = 0; i < 37; i++) { xr[i] = urand(); w[i] = urand(); }
    op->rmsnorm(ex, xr, w, 1, 37, 1e-5f, o);
    double ss = 0;
    for (int i = 0; i < 37; i++) ss += (double)xr[i] * xr[i];
    for (int i = 0; i < 37; i++) CHECK_NEAR(o[i], xr[i] / sqrt(ss / 37 + 1e-5) * w[i], 1e-5);
    float lg[2 * 9] = { 1, 5, 3, 5, 0, 0, 0, 0, 0, /* row 2 */ 0, 0, 0, 0, 0, 0, 0, 0, 0 };
    int32_t ids[4];
    float pr[4], ent[2];
    op->topk(ex, lg, 2, 9, 2, ids, pr, ent);
    CHECK_EQ_INT(ids[0], 1);
    CHECK_EQ_INT(ids[1], 3); /* tie with id 1: lower id first, then 3 */
    CHECK_NEAR(ent[1], log(9.0), 1e-6);
    CHECK_NEAR(pr[2], 1.0 / 9.0, 1e-6);
    be->ops->exec_destroy(ex);
    be->ops->destroy(be);
    return emt_test_finish("test_cpu_backend");
}
