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
#define ROUNDS 20

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
    /* rounds of STEPS/ROUNDS steps: the machine may be shared, so the fastest
     * round is the cost and the median says how much others took */
    for (int dynamic = 0; dynamic < 2; dynamic++) {
        double us[ROUNDS];
        for (int round = 0; round < ROUNDS; round++) {
            double t0 = emt_now();
            for (int s = 0; s < STEPS / ROUNDS; s++) {
                const float *qq = qs[s & 15];
                emt_outlook_compute(&o, bank, qq, TOPK, HEADS, TOPK, dynamic);
                int32_t k = s % TREES;
                const emt_tree *t = emt_outlook_tree(&o, bank, k, dynamic);
                emt_outlook_observe(&o, t, k, qq, TOPK, HEADS, TOPK, row, 1, 0.01, 0.0);
                sink += o.expected_accept[k];
            }
            us[round] = (emt_now() - t0) / (STEPS / ROUNDS) * 1e6;
            for (int j = round; j > 0 && us[j] < us[j - 1]; j--) { double x = us[j]; us[j] = us[j - 1]; us[j - 1] = x; }
        }
        printf("%-10s %d trees of 8..64 nodes, %d heads, top-%d: %.2f us per step (fastest of %d rounds; median %.2f): %s\n",
               dynamic ? "dynamic" : "throughput", TREES, HEADS, TOPK, us[0], ROUNDS, us[ROUNDS / 2],
               dynamic ? "calibrated table, best-first selection to 64 nodes, tree build, calibration and cost update"
                       : "per-tree expected accept, cost estimates, calibration and cost update");
    }
    emt_outlook_free(&o);
    entmtp_bank_free(bank);
    return sink > 0 ? emt_test_finish("bench_features") : 1;
}
