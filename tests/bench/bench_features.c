/* What the scheduling features cost per step: the per-tree expected accept
 * lengths and step times (throughput policy) and the dynamic-tree selection
 * and build (dynamic policy), for a bank of 8 trees of 8..64 nodes on 4
 * heads with top-10, averaged over many steps. Prints microseconds per step.
 * Not a test (no timing assertions): run build/.../tests/bench_features. */
#include "check.h"
#include "engine/features.h"

#include <stdio.h>

#define HEADS 4
#define TOPK 10
#define TREES 8
#define STEPS 20000

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static float uniform(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) & 0xffffff) / 16777216.0f;
}

/* head probabilities that look like top-k: descending, summing below 1 */
static void random_topk(float *q) {
    for (int d = 0; d < HEADS; d++) {
        float left = 1.0f;
        for (int r = 0; r < TOPK; r++) {
            float p = left * (0.2f + 0.7f * uniform());
            q[d * TOPK + r] = p;
            left -= p;
        }
    }
}

int main(void) {
    /* the bank: best-first trees of 8, 16, .., 64 nodes from random probabilities */
    entmtp_bank *bank = NULL;
    entmtp_bank_params bp = entmtp_bank_default_params();
    bp.max_depth = HEADS;
    bp.topk = TOPK;
    bp.max_nodes = 64;
    CHECK_OK(entmtp_bank_create(&bp, &bank));
    emt_dynamic_tree dt;
    CHECK_OK(emt_dynamic_tree_init(&dt, 64, HEADS, TOPK));
    float q[HEADS * TOPK];
    for (int k = 0; k < TREES; k++) {
        random_topk(q);
        emt_dynamic_tree_select(&dt, q, TOPK, HEADS);
        const emt_tree *t = emt_dynamic_tree_build(&dt, 8 * (k + 1));
        int32_t lens[64];
        for (int32_t i = 0; i < t->n_paths; i++) lens[i] = t->path_offsets[i + 1] - t->path_offsets[i];
        char name[16];
        snprintf(name, sizeof name, "n%02d", t->n_nodes);
        CHECK_OK(entmtp_bank_add_tree(bank, name, t->ranks, lens, t->n_paths, NULL));
    }
    emt_dynamic_tree_free(&dt);
    emt_outlook_state o;
    CHECK_OK(emt_outlook_init(&o, bank, HEADS, TOPK));
    float qs[16][HEADS * TOPK];
    for (int i = 0; i < 16; i++) random_topk(qs[i]);
    const int32_t row[HEADS + 1] = { 0, 1, -1, -1, -1 };
    double sink = 0;
    for (int dynamic = 0; dynamic < 2; dynamic++) {
        double t0 = emt_now();
        for (int s = 0; s < STEPS; s++) {
            const float *qq = qs[s & 15];
            emt_outlook_compute(&o, bank, qq, TOPK, HEADS, TOPK, dynamic);
            int32_t k = s % TREES;
            const emt_tree *t = emt_outlook_tree(&o, bank, k, dynamic);
            emt_outlook_observe(&o, t, k, qq, TOPK, HEADS, TOPK, row, 1, 0.01);
            sink += o.expected_accept[k];
        }
        double us = (emt_now() - t0) / STEPS * 1e6;
        printf("%-10s %d trees of 8..64 nodes, %d heads, top-%d: %.2f us per step (features, costs, %s, calibration update)\n",
               dynamic ? "dynamic" : "throughput", TREES, HEADS, TOPK, us,
               dynamic ? "best-first selection + tree build" : "per-tree expected accept");
    }
    emt_outlook_free(&o);
    entmtp_bank_free(bank);
    return sink > 0 ? emt_test_finish("bench_features") : 1;
}
