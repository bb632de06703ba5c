/* What one draft level of a level-by-level drafter (Hydra heads, an EAGLE-3
 * drafter) costs next to an AR step, in one process on a real model: AR
 * steps and the drafter's chain levels (drafter.h, chain(d, d+1)) alternate,
 * so both see the same context and the same machine; medians of 200 steps.
 * Prints each level in microseconds and in AR steps (the unit of
 * docs/policies.md's cost model), and for Hydra the level's parts (the
 * draft-vocabulary product and the top-k softmax). EAGLE-3's level 0 also
 * runs the row the AR step committed. Not a test (no timing assertions):
 *   build/.../tests/bench_heads MODEL.gguf HEADS.hydra.safetensors|EAGLE3_DIR */
#include "check.h"
#include "engine/session_internal.h"

#include <stdio.h>
#include <stdlib.h>

#define STEPS 200
#define PROMPT 200

static int by_value(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, by_value);
    return v[n / 2];
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: bench_heads MODEL HYDRA_HEADS\n");
        return 2;
    }
    entmtp_model *m = NULL;
    entmtp_heads *h = NULL;
    entmtp_session *S = NULL;
    CHECK_OK(entmtp_model_load(argv[1], NULL, &m));
    if (m) CHECK_OK(entmtp_heads_load(m, argv[2], &h));
    if (h && h->kind == ENTMTP_HEADS_MEDUSA) {
        fprintf(stderr, "bench_heads: %s: Medusa heads draft every level in one call\n", argv[2]);
        emt_test_failures++;
    }
    if (h && !emt_test_failures) CHECK_OK(entmtp_session_create(m, h, NULL, NULL, &S));
    if (!S) {
        entmtp_heads_free(h);
        entmtp_model_free(m);
        return emt_test_finish("bench_heads");
    }
    int32_t prompt[PROMPT];
    for (int i = 0; i < PROMPT; i++) prompt[i] = 100 + (i * 37) % 5000;
    CHECK_OK(entmtp_session_prefill(S, prompt, PROMPT));
    enum { MAX_LEVELS = 8 };
    const int32_t levels = h->n_heads < MAX_LEVELS ? h->n_heads : MAX_LEVELS;
    static double ar[STEPS], level[MAX_LEVELS][STEPS], product[STEPS], topk[STEPS];
    int32_t ids[64];
    float p[64];
    for (int s = 0; s < STEPS && !emt_test_failures; s++) {
        entmtp_step_result r = { .struct_size = sizeof r };
        double t0 = emt_now();
        CHECK_OK(entmtp_step_ar(S, &r));
        ar[s] = emt_now() - t0;
        int32_t root = r.n_tokens > 0 ? r.tokens[0] : 0;
        for (int32_t d = 0; d < levels; d++) { /* level d on the chain's rank-0 path */
            t0 = emt_now();
            S->drafter->chain(S, root, d, d + 1);
            CHECK_OK(emt_backend_sync(m->be, S->ex));
            level[d][s] = emt_now() - t0;
        }
        if (h->draft_shared.data) { /* the shared draft-vocabulary product and its top-k alone */
            const emt_backend_ops *op = m->be->ops;
            t0 = emt_now();
            emt_matmul(op, S->ex, &h->draft_shared, NULL, S->s.head_in, 1, m->cfg.hidden, h->n_draft, S->s.head_logits, 1);
            product[s] = emt_now() - t0;
            t0 = emt_now();
            op->topk(S->ex, S->s.head_logits, 1, h->n_draft, S->topk, ids, p, NULL);
            topk[s] = emt_now() - t0;
        }
    }
    if (!emt_test_failures) {
        double ar_us = median(ar, STEPS) * 1e6, sum = 0;
        printf("AR step: %.0f us (median of %d)\n", ar_us, STEPS);
        for (int32_t d = 0; d < levels; d++) {
            double us = median(level[d], STEPS) * 1e6;
            sum += us;
            printf("head level %d: %.0f us = %.4f AR steps\n", d, us, us / ar_us);
        }
        printf("mean level: %.4f AR steps\n", sum / levels / ar_us);
        if (h->draft_shared.data)
            printf("parts: draft-vocabulary product (%d ids) %.0f us, top-%d softmax %.0f us\n", h->n_draft,
                   median(product, STEPS) * 1e6, S->topk, median(topk, STEPS) * 1e6);
    }
    entmtp_session_free(S);
    entmtp_heads_free(h);
    entmtp_model_free(m);
    return emt_test_finish("bench_heads");
}
