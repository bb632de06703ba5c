/* The typed-weight product (matmul_q) of each CPU variant at the Llama-3.2-1B
 * shape, the file layout against the packed one (quant.h), for 1..512 rows:
 * CPU time of the calling thread on a one-thread context (the pool runs the
 * tasks on the caller), so a shared, oversubscribed machine inflates it far
 * less than wall time; the minimum of REPS calls. Layouts "file8" and
 * "pack8": the same at 8-bit activations (quant8.h) for the types that have them. Prints microseconds per
 * call, the cost of n rows in one-row calls (what a verify of n nodes costs
 * in AR steps, for this product) and integer multiply-adds per nanosecond.
 * With BENCH_BIG=1 in the environment, one 8192 x 16384 matrix instead,
 * larger than the last-level cache, so its weights stream from memory as
 * in a model's step. With BENCH_VS=VARIANT in the environment, each call
 * of the chosen variant alternates with the same call on VARIANT (its own
 * packed copy), and both are printed: a pair measured in the same moments
 * of a shared, noisy machine. Not a test (no timing assertions):
 *   build/.../tests/bench_qkernels [REPS [VARIANT [TYPE [MAX_ROWS [LAYOUT]]]]] */
#include "backend/backend.h"
#include "backend/cpu/cpu_variants.h"
#include "backend/cpu/quant8.h"
#include "check.h"
#include "tiny_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double thread_seconds(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng = 11;
static float urand(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(rng >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

int main(int argc, char **argv) {
    int reps = argc > 1 ? atoi(argv[1]) : 5;
    if (reps < 1) {
        fprintf(stderr, "usage: bench_qkernels [REPS (>= 1) [VARIANT [TYPE]]]\n");
        return 2;
    }
    const emt_dtype types[] = { EMT_Q4_0, EMT_Q4_1, EMT_Q8_0, EMT_Q5_0, EMT_Q4_K, EMT_Q5_K, EMT_Q6_K };
    const int n_types = (int)(sizeof types / sizeof types[0]);
    const int32_t shapes[][2] = { { 2048, 8192 }, { 8192, 2048 } }; /* n_in, n_out: FFN gate/up, FFN down */
    const int32_t rows[] = { 1, 2, 4, 8, 16, 64, 512 };
    const int n_rows = (int)(sizeof rows / sizeof rows[0]);
    printf("variant  type  n_in x n_out  layout  rows  us/call  x one-row call  MAC/ns\n");
    /* BENCH_VS: a second variant whose calls alternate with the first's */
    const char *vs_name = getenv("BENCH_VS");
    const emt_backend_ops *op2 = NULL;
    emt_backend *be2 = NULL;
    emt_exec *ex2 = NULL;
    if (vs_name) {
        int v2 = -1;
        for (int v = 0; v < EMT_CPU_VARIANT_COUNT; v++)
            if (!strcmp(vs_name, emt_cpu_variant_name((emt_cpu_variant)v))) v2 = v;
        if (v2 < 0 || !emt_cpu_variant_supported((emt_cpu_variant)v2)) {
            fprintf(stderr, "BENCH_VS=%s: not a kernel variant this processor runs\n", vs_name);
            return 2;
        }
        op2 = emt_cpu_variant_ops((emt_cpu_variant)v2);
        CHECK_OK(emt_backend_cpu_create_variant((emt_cpu_variant)v2, &be2));
        ex2 = op2->exec_create(be2, 1);
    }
    for (int v = 1; v < EMT_CPU_VARIANT_COUNT; v++) {
        if (!emt_cpu_variant_supported((emt_cpu_variant)v)) continue;
        if (argc > 2 && strcmp(argv[2], emt_cpu_variant_name((emt_cpu_variant)v)) != 0) continue;
        const emt_backend_ops *op = emt_cpu_variant_ops((emt_cpu_variant)v);
        emt_backend *be = NULL;
        CHECK_OK(emt_backend_cpu_create_variant((emt_cpu_variant)v, &be));
        emt_exec *ex = op->exec_create(be, 1);
        for (int ti = 0; ti < n_types; ti++) {
            if (argc > 3 && strcmp(argv[3], emt_dtype_name(types[ti])) != 0) continue;
            for (int si = 0; si < 2; si++) {
                emt_dtype t = types[ti];
                int32_t n_in = shapes[si][0], n_out = shapes[si][1];
                if (getenv("BENCH_BIG")) { /* one shape, past the cache */
                    if (si) break;
                    n_in = 8192;
                    n_out = 16384;
                }
                size_t bytes = emt_dtype_nbytes(t, n_in) * (size_t)n_out;
                float *wf = malloc(sizeof(float) * (size_t)n_in), *x = malloc(sizeof(float) * 512 * (size_t)n_in);
                float *y = malloc(sizeof(float) * 512 * (size_t)n_out);
                uint8_t *file = op->alloc(be, bytes), *copy = op->alloc(be, bytes);
                for (int32_t o = 0; o < n_out; o++) {
                    for (int32_t i = 0; i < n_in; i++) wf[i] = urand();
                    emt_tiny_encode(t, wf, n_in, file + (size_t)o * emt_dtype_nbytes(t, n_in));
                }
                for (int64_t i = 0; i < 512 * (int64_t)n_in; i++) x[i] = urand();
                memcpy(copy, file, bytes);
                emt_wmat layouts[2] = { { t, file, NULL, 0 }, { t, copy, copy, 0 } };
                int have_packed = op->pack && op->pack(be, &layouts[1], n_out, n_in) == ENTMTP_OK && layouts[1].packed;
                emt_wmat layouts2[2] = { { t, file, NULL, 0 }, { t, NULL, NULL, 0 } };
                if (op2) { /* the second variant's own packed copy (unpacked: it reads the file's layout) */
                    uint8_t *copy2 = op2->alloc(be2, bytes);
                    memcpy(copy2, file, bytes);
                    layouts2[1] = (emt_wmat){ t, copy2, copy2, 0 };
                    if (!op2->pack || op2->pack(be2, &layouts2[1], n_out, n_in) != ENTMTP_OK || !layouts2[1].packed)
                        layouts2[1].data = file;
                }
                /* file and packed at 16 bits, then (types with 8-bit kernels) both at 8 */
                const char *names[4] = { "file", "packed", "file8", "pack8" };
                double one[4] = { 0, 0, 0, 0 };
                for (int ri = 0; ri < n_rows; ri++)
                    for (int l = 0; l < 4; l++) {
                        if ((l % 2 && !have_packed) || (l >= 2 && !emt_act8_type(t))) continue;
                        int32_t n = rows[ri];
                        if ((argc > 4 && n > atoi(argv[4])) || (argc > 5 && strcmp(argv[5], names[l]) != 0)) continue;
                        int r = n >= 64 ? (reps + 2) / 3 : reps;
                        double best = 1e30, best2 = 1e30;
                        for (int k = 0; k < r; k++) {
                            double t0 = thread_seconds();
                            op->set_activation_bits(ex, l >= 2 ? 8 : 16);
                            op->matmul_q(ex, &layouts[l % 2], NULL, x, n, n_in, n_out, y);
                            double dt = thread_seconds() - t0;
                            if (dt < best) best = dt;
                            if (op2) {
                                t0 = thread_seconds();
                                op2->set_activation_bits(ex2, l >= 2 ? 8 : 16);
                                op2->matmul_q(ex2, &layouts2[l % 2], NULL, x, n, n_in, n_out, y);
                                dt = thread_seconds() - t0;
                                if (dt < best2) best2 = dt;
                            }
                        }
                        if (op2)
                            printf("%-7s  %-4s  %5d x %5d  %-6s  %4d  %8.1f  (alternated)  %6.2f\n", vs_name,
                                   emt_dtype_name(t), n_in, n_out, names[l], n, best2 * 1e6,
                                   (double)n * n_in * n_out / best2 * 1e-9);
                        if (n == 1) one[l] = best;
                        printf("%-7s  %-4s  %5d x %5d  %-6s  %4d  %8.1f  %6.2f  %6.2f\n",
                               emt_cpu_variant_name((emt_cpu_variant)v), emt_dtype_name(t), n_in, n_out, names[l], n,
                               best * 1e6, best / one[l], (double)n * n_in * n_out / best * 1e-9);
                    }
                CHECK_OK(op->sync(ex));
                if (layouts[1].owned) op->release(be, layouts[1].owned);
                if (layouts2[1].owned) op2->release(be2, layouts2[1].owned);
                op->release(be, file);
                free(wf); free(x); free(y);
            }
        }
        op->exec_destroy(ex);
        op->destroy(be);
    }
    if (op2) {
        op2->exec_destroy(ex2);
        op2->destroy(be2);
    }
    return emt_test_finish("bench_qkernels");
}
