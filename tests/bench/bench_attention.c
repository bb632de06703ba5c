/* The CPU attention of each variant as a decode step runs it: one query row
 * (AR) or a tree of 8 rows against a cache of DEPTH rows, for every layer of
 * a model shape in turn (16 caches for the 1B shape: the step's KV bytes
 * stream from memory as in a model's step), F32 and BF16 caches, on a pool
 * of THREADS threads. Prints the wall time per step (all layers), the KV
 * bytes it reads and the rate it reads them at: the best of REPS steps. Not
 * a test (no timing assertions). With THREADS 1 the time is the calling
 * thread's CPU time (the pool runs the tasks on the caller), which a
 * shared machine inflates far less than wall time:
 *   build/.../tests/bench_attention [REPS [VARIANT [THREADS [DEPTHS]]]]
 * DEPTHS: a comma list (default 512,2048,4096). */
#include "backend/backend.h"
#include "backend/cpu/cpu_variants.h"
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double wall_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static double thread_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng = 7;
static float urand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

/* A tree of n rows: row i sees itself and a random earlier row's visible set. */
static void tree_mask(int32_t n, uint8_t *mask) {
    memset(mask, 0, (size_t)n * n);
    for (int32_t i = 0; i < n; i++) {
        if (i > 0) {
            int32_t parent = (int32_t)((urand() * 0.5f + 0.5f) * (float)i) % i;
            memcpy(mask + (size_t)i * n, mask + (size_t)parent * n, (size_t)n);
        }
        mask[(size_t)i * n + i] = 1;
    }
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    int threads = argc > 3 ? atoi(argv[3]) : 2;
    if (reps < 1 || threads < 1) {
        fprintf(stderr, "usage: bench_attention [REPS (>= 1) [VARIANT [THREADS (>= 1) [DEPTHS]]]]\n");
        return 2;
    }
    int32_t depths[16] = { 512, 2048, 4096 }, n_depths = 3;
    if (argc > 4) {
        n_depths = 0;
        for (char *s = argv[4]; *s && n_depths < 16; s++) {
            char *end;
            long d = strtol(s, &end, 10);
            if (end == s || d < 0 || d > 1 << 20 || (*end && *end != ',')) {
                fprintf(stderr, "bench_attention: DEPTHS '%s': want a comma list of depths in [0, %d]\n", argv[4], 1 << 20);
                return 2;
            }
            depths[n_depths++] = (int32_t)d;
            s = end;
            if (*s != ',') break;
        }
    }
    /* the Llama-3.2-1B shape: 16 layers, 32 query heads, 8 KV heads of 64 */
    const int32_t layers = 16, H = 32, KV = 8, hd = 64, max_rows = 8;
    printf("variant  kv    depth  rows  us/step  KV MB/step  GB/s\n");
    for (int vi = 1; vi < EMT_CPU_VARIANT_COUNT; vi++) {
        emt_cpu_variant var = (emt_cpu_variant)vi;
        if (!emt_cpu_variant_supported(var)) continue;
        if (argc > 2 && strcmp(argv[2], emt_cpu_variant_name(var)) != 0) continue;
        const emt_backend_ops *op = emt_cpu_variant_ops(var);
        emt_backend *be = NULL;
        CHECK_OK(emt_backend_cpu_create_variant(var, &be));
        emt_exec *ex = op->exec_create(be, threads);
        for (int di = 0; di < n_depths; di++) {
            int32_t depth = depths[di];
            size_t kv_row = (size_t)KV * hd, cache = (size_t)(depth + max_rows) * kv_row;
            float *q = malloc(sizeof(float) * (size_t)max_rows * H * hd);
            float *out = malloc(sizeof(float) * (size_t)max_rows * H * hd);
            float *k = malloc(sizeof(float) * cache * layers), *v = malloc(sizeof(float) * cache * layers);
            uint16_t *k16 = malloc(sizeof(uint16_t) * cache * layers), *v16 = malloc(sizeof(uint16_t) * cache * layers);
            uint8_t mask[max_rows * max_rows];
            if (!q || !out || !k || !v || !k16 || !v16) {
                fprintf(stderr, "bench_attention: out of memory at depth %d\n", depth);
                return 1;
            }
            for (size_t i = 0; i < (size_t)max_rows * H * hd; i++) q[i] = urand();
            for (size_t i = 0; i < cache * layers; i++) {
                k[i] = urand();
                v[i] = urand();
            }
            op->round_bf16(ex, k, (int64_t)(cache * layers), k16);
            op->round_bf16(ex, v, (int64_t)(cache * layers), v16);
            tree_mask(max_rows, mask);
            for (int bf16 = 0; bf16 < 2; bf16++) {
                op->set_kv_dtype(ex, bf16 ? EMT_BF16 : EMT_F32);
                for (int32_t rows = 1; rows <= max_rows; rows *= 8) {
                    double best = 1e30;
                    for (int r = 0; r < reps; r++) {
                        double t0 = threads == 1 ? thread_seconds() : wall_seconds();
                        for (int32_t l = 0; l < layers; l++) {
                            const float *kl = bf16 ? (const float *)(void *)(k16 + cache * l) : k + cache * l;
                            const float *vl = bf16 ? (const float *)(void *)(v16 + cache * l) : v + cache * l;
                            op->attention(ex, q, kl, vl, depth, rows, rows > 1 ? mask : NULL, H, KV, hd, out);
                        }
                        CHECK_OK(op->sync(ex));
                        double dt = (threads == 1 ? thread_seconds() : wall_seconds()) - t0;
                        if (dt < best) best = dt;
                    }
                    double mb = (double)(depth + rows) * kv_row * 2 * (bf16 ? 2 : 4) * layers * 1e-6;
                    printf("%-7s  %-4s  %5d  %4d  %7.0f  %10.1f  %5.1f\n", emt_cpu_variant_name(var),
                           bf16 ? "bf16" : "f32", depth, rows, best * 1e6, mb, mb * 1e-3 / best);
                }
            }
            op->set_kv_dtype(ex, EMT_F32);
            free(q); free(out); free(k); free(v); free(k16); free(v16);
        }
        op->exec_destroy(ex);
        op->destroy(be);
    }
    return emt_test_finish("bench_attention");
}
