/* Acceptance (the reference's evaluate_posterior) on hand-made logits whose
 * answers are worked out in the comments; node form == row form on random
 * trees; features, top-k and the typical sampler. */
#include "accept/accept.h"
#include "check.h"

#include <math.h>

#define V 4

static void set_probs(float *logits, float a, float b, float c, float d) {
    logits[0] = logf(a); logits[1] = logf(b); logits[2] = logf(c); logits[3] = logf(d);
}

static void greedy_rows(void) {
    /* 2 rows x width 3. Row 0: cands [r,1,2]; slot0 argmax 1 (ok), slot1 argmax 3 (2 rejected) -> 1.
     * Row 1: cands [r,1,3]; slot0 argmax 1, slot1 argmax 3 -> 2. Best row 1, length 2. */
    float lg[2 * 3 * V] = { 0 };
    lg[0 * V + 1] = 5; lg[1 * V + 3] = 5; /* row 0 */
    lg[3 * V + 1] = 5; lg[4 * V + 3] = 5; /* row 1 */
    int32_t cand[6] = { 9, 1, 2, 9, 1, 3 };
    emt_posterior_rows in = { 2, 3, V, lg, cand, NULL, 0, 0.09f, 0.3f };
    int32_t best = -1, len = -1;
    CHECK_OK(emt_evaluate_posterior_rows(&in, &best, &len));
    CHECK_EQ_INT(best, 1);
    CHECK_EQ_INT(len, 2);
    /* ties: both rows accept 2 -> first row */
    cand[2] = 3;
    CHECK_OK(emt_evaluate_posterior_rows(&in, &best, &len));
    CHECK_EQ_INT(best, 0);
    CHECK_EQ_INT(len, 2);
    /* nothing accepted -> row 0, length 0 (the root is still emitted by the engine) */
    cand[1] = 0; cand[4] = 2;
    CHECK_OK(emt_evaluate_posterior_rows(&in, &best, &len));
    CHECK_EQ_INT(best, 0);
    CHECK_EQ_INT(len, 0);
    /* a rejection stops the row even if later slots would match: cumprod */
    cand[1] = 0; cand[2] = 3; cand[4] = 0; cand[5] = 3;
    CHECK_OK(emt_evaluate_posterior_rows(&in, &best, &len));
    CHECK_EQ_INT(len, 0);
    /* argmax ties go to the first index: slot with logits [5,5,0,0] -> argmax 0 */
    float t[1 * 2 * V] = { 5, 5, 0, 0, 0, 0, 0, 0 };
    int32_t c1[2] = { 0, 1 };
    emt_posterior_rows in2 = { 1, 2, V, t, c1, NULL, 0, 0.09f, 0.3f };
    CHECK_OK(emt_evaluate_posterior_rows(&in2, &best, &len));
    CHECK_EQ_INT(len, 0);
    c1[1] = 0;
    CHECK_OK(emt_evaluate_posterior_rows(&in2, &best, &len));
    CHECK_EQ_INT(len, 1);
}

static void typical_rows(void) {
    /* p = [0.94, .02, .02, .02]: H = -(0.94 ln 0.94001 + 3 * 0.02 ln 0.02001) = 0.2928,
     * 0.3 * exp(-0.2928) = 0.224 > eps -> threshold 0.09: token 0 accepted, 1 rejected.
     * p = [0.7, .1, .1, .1]: H = 0.9404, 0.3 e^-H = 0.117 -> threshold 0.09: 0.1 accepted.
     * p uniform: H = 1.3862, 0.3 e^-H = 0.0750 -> threshold 0.075: 0.25 accepted. */
    float lg[3 * 2 * V];
    set_probs(lg + 0 * V, 0.94f, 0.02f, 0.02f, 0.02f);
    set_probs(lg + 2 * V, 0.7f, 0.1f, 0.1f, 0.1f);
    set_probs(lg + 4 * V, 0.25f, 0.25f, 0.25f, 0.25f);
    set_probs(lg + 1 * V, 0.25f, 0.25f, 0.25f, 0.25f);
    set_probs(lg + 3 * V, 0.25f, 0.25f, 0.25f, 0.25f);
    set_probs(lg + 5 * V, 0.25f, 0.25f, 0.25f, 0.25f);
    int32_t cand[6] = { 0, 1, 0, 2, 0, 1 }; /* row0 rejects (p=.02); row1 p=.1 ok; row2 p=.25 ok */
    emt_posterior_rows in = { 3, 2, V, lg, cand, NULL, 1.0f, 0.09f, 0.3f };
    int32_t best, len;
    CHECK_OK(emt_evaluate_posterior_rows(&in, &best, &len));
    CHECK_EQ_INT(len, 1);
    /* rows 1 and 2 both accept one token; log p: ln .1 < ln .25 -> row 2 */
    CHECK_EQ_INT(best, 2);
    CHECK_NEAR(emt_typical_threshold(lg + 4 * V, V, 1.0f, 0.09f, 0.3f, NULL), 0.3 * exp(-1.38625), 1e-4);
    CHECK_NEAR(emt_typical_threshold(lg + 0 * V, V, 1.0f, 0.09f, 0.3f, NULL), 0.09, 1e-7);
    /* strictness at the epsilon threshold: p = 0.0899 rejected, 0.0901 accepted */
    float s[2 * V];
    set_probs(s, 0.8199f, 0.0899f, 0.0901f, 0.0001f);
    set_probs(s + V, 0.25f, 0.25f, 0.25f, 0.25f);
    int32_t c2[2] = { 0, 1 };
    emt_posterior_rows in2 = { 1, 2, V, s, c2, NULL, 1.0f, 0.09f, 0.3f };
    CHECK_OK(emt_evaluate_posterior_rows(&in2, &best, &len));
    CHECK_EQ_INT(len, 0);
    c2[1] = 2;
    CHECK_OK(emt_evaluate_posterior_rows(&in2, &best, &len));
    CHECK_EQ_INT(len, 1);
    /* temperature sharpens: at T = 0.5 p(0.7-token) grows, the 0.1 tokens shrink to
     * 0.01/(0.49+0.03) = 0.0192 < threshold -> row 1 now rejected */
    in.n_rows = 2; /* rows 0 and 1 only */
    CHECK_OK(emt_evaluate_posterior_rows(&in, &best, &len));
    CHECK_EQ_INT(best, 1);
    CHECK_EQ_INT(len, 1);
    in.temperature = 0.5f; /* row 1's p drops to 0.01/0.52 = 0.019 < 0.09: rejected */
    CHECK_OK(emt_evaluate_posterior_rows(&in, &best, &len));
    CHECK_EQ_INT(best, 0);
    CHECK_EQ_INT(len, 0);
}

/* node form against row form on random trees and logits */
static void nodes_equal_rows(void) {
    uint64_t rng = 7;
    const char *trees[] = { "mc_sim_7b_63", "medusa_vicuna_7b_stage2", "chain_4" };
    const int32_t vocab = 12;
    for (int ti = 0; ti < 3; ti++) {
        entmtp_bank *b = NULL;
        entmtp_bank_create(NULL, &b);
        int32_t idx;
        CHECK_OK(entmtp_bank_add_builtin(b, trees[ti], &idx));
        entmtp_tree_buffers t = { sizeof t };
        entmtp_bank_tree_buffers(b, idx, &t);
        int32_t N = t.n_nodes, W = t.depth + 1, R = t.n_leaves;
        float *nl = malloc((size_t)N * vocab * sizeof(float));
        int32_t *tok = malloc((size_t)N * sizeof(int32_t));
        float *rl = malloc((size_t)R * W * vocab * sizeof(float));
        int32_t *cand = malloc((size_t)R * W * sizeof(int32_t));
        uint8_t *valid = malloc((size_t)R * W);
        for (int trial = 0; trial < 60; trial++) {
            for (int32_t i = 0; i < N * vocab; i++) nl[i] = (float)(emt_rng_uniform(&rng) * 4.0);
            for (int32_t i = 0; i < N; i++) {
                int32_t p = t.parents[i];
                if (p >= 0 && emt_rng_uniform(&rng) < 0.6) { /* often the parent's argmax */
                    int32_t a = 0;
                    for (int32_t v = 1; v < vocab; v++) if (nl[p * vocab + v] > nl[p * vocab + a]) a = v;
                    tok[i] = a;
                } else {
                    tok[i] = (int32_t)(emt_rng_next_u64(&rng) % vocab);
                }
            }
            for (int32_t r = 0; r < R; r++)
                for (int32_t j = 0; j < W; j++) {
                    int32_t node = t.retrieve_indices[r * W + j];
                    valid[r * W + j] = node >= 0;
                    cand[r * W + j] = node >= 0 ? tok[node] : 0;
                    memcpy(rl + ((size_t)r * W + j) * vocab, nl + (size_t)(node >= 0 ? node : 0) * vocab, vocab * sizeof(float));
                }
            for (int mode = 0; mode < 2; mode++) {
                float T = mode ? 0.7f : 0.0f;
                emt_posterior_rows rows = { R, W, vocab, rl, cand, valid, T, 0.09f, 0.3f };
                emt_posterior_nodes nodes = { N, vocab, nl, tok, R, W, t.retrieve_indices, T, 0.09f, 0.3f };
                int32_t b1, l1, b2, l2;
                CHECK_OK(emt_evaluate_posterior_rows(&rows, &b1, &l1));
                CHECK_OK(emt_evaluate_posterior_nodes(&nodes, &b2, &l2));
                if (b1 != b2 || l1 != l2) {
                    fprintf(stderr, "%s trial %d T=%g: rows (%d,%d) nodes (%d,%d)\n", trees[ti], trial, (double)T, b1, l1, b2, l2);
                    emt_test_failures++;
                }
            }
        }
        free(nl); free(tok); free(rl); free(cand); free(valid);
        entmtp_bank_free(b);
    }
}

static void features_topk_sampling(void) {
    float u[8] = { 0 };
    int32_t top;
    float p, h;
    emt_softmax_stats(u, 8, &top, &p, &h);
    CHECK_EQ_INT(top, 0);
    CHECK_NEAR(p, 0.125, 1e-6);
    CHECK_NEAR(h, log(8.0), 1e-5);
    float lg[4];
    set_probs(lg, 0.1f, 0.6f, 0.2f, 0.1f);
    emt_softmax_stats(lg, 4, &top, &p, &h);
    CHECK_EQ_INT(top, 1);
    CHECK_NEAR(p, 0.6, 1e-5);
    CHECK_NEAR(h, -(0.1 * log(0.1) * 2 + 0.6 * log(0.6) + 0.2 * log(0.2)), 1e-5);

    emt_features_store f;
    const float hp[3] = { 0.5f, 0.9f, 0.1f };
    emt_features_fill(&f, 0.8f, 1.2f, hp, 3, 1, 1, 4, 2, 1.5f, 7);
    CHECK_NEAR(f.f.g[0], 0.4, 1e-6);
    CHECK_NEAR(f.f.g[1], 0.36, 1e-6);
    CHECK_NEAR(f.f.g[2], 0.036, 1e-6);
    CHECK_NEAR(f.f.s, 0.8, 1e-6); /* s = max(p0, g..) = p0 here */
    const float hp2[2] = { 1.0f, 1.0f };
    emt_features_fill(&f, 0.3f, 0.0f, hp2, 2, 1, 1, 0, 0, 0, 0);
    CHECK_NEAR(f.f.s, 0.3, 1e-7);
    CHECK_EQ_INT(f.f.n_heads, 2);
    CHECK_EQ_INT(f.f.struct_size, sizeof f.f);
    CHECK(f.f.head_p == f.head_p && f.f.g == f.g); /* arrays live in the store */
    /* every rank of every head: the first topk of each stride-wide row, rank
     * 0 is head_p; no outlook until one is set */
    const float q[3 * 4] = { 0.5f, 0.2f, 0.1f, 0.05f, 0.9f, 0.04f, 0.03f, 0.01f, 0.1f, 0.09f, 0.08f, 0.07f };
    emt_features_fill(&f, 0.8f, 1.2f, q, 3, 3, 4, 2, 2, 1.5f, 7);
    CHECK_EQ_INT(f.f.topk, 3);
    CHECK_EQ_INT(f.f.n_trees, 2);
    CHECK(f.f.head_topk_p == f.head_topk_p);
    CHECK_NEAR(f.f.head_topk_p[0 * 3 + 1], 0.2f, 0);
    CHECK_NEAR(f.f.head_topk_p[1 * 3 + 2], 0.03f, 0);
    CHECK_NEAR(f.f.head_topk_p[2 * 3 + 0], 0.1f, 0);
    for (int32_t d = 0; d < 3; d++) CHECK_NEAR(f.f.head_p[d], f.f.head_topk_p[d * 3], 0);
    CHECK_NEAR(f.f.g[2], 0.036, 1e-6);
    CHECK(f.f.expected_accept == NULL && f.f.expected_seconds == NULL);
    const float ea[2] = { 1.5f, 2.0f };
    const double es[2] = { 0.01, 0.02 };
    emt_features_set_outlook(&f, ea, es);
    CHECK(f.f.expected_accept == ea && f.f.expected_seconds == es);
    emt_features_set_outlook(&f, ea, NULL); /* both or neither */
    CHECK(f.f.expected_accept == NULL && f.f.expected_seconds == NULL);
    /* no heads: no ranks */
    emt_features_fill(&f, 0.3f, 0.0f, NULL, 0, 10, 10, 2, 0, 0, 0);
    CHECK_EQ_INT(f.f.n_heads, 0);
    CHECK_EQ_INT(f.f.topk, 0);
    CHECK(f.f.head_topk_p != NULL);

    const float v[6] = { 1, 3, 3, 0, 2, 3 };
    int32_t ids[3];
    float tv[3];
    emt_topk(v, 6, 3, ids, tv);
    CHECK_EQ_INT(ids[0], 1);
    CHECK_EQ_INT(ids[1], 2);
    CHECK_EQ_INT(ids[2], 5);

    /* typical sampling: p = [0.94,.02,.02,.02] -> only token 0 is allowed */
    float s[4];
    set_probs(s, 0.94f, 0.02f, 0.02f, 0.02f);
    uint64_t rng = 1;
    for (int i = 0; i < 200; i++) {
        int32_t t = -1;
        CHECK_OK(emt_sample_typical(s, 4, 1.0f, 0.09f, 0.3f, &rng, &t));
        CHECK_EQ_INT(t, 0);
    }
    /* uniform: every token allowed, reproducible for a seed, all four seen */
    set_probs(s, 0.25f, 0.25f, 0.25f, 0.25f);
    uint64_t r1 = 99, r2 = 99;
    int seen[4] = { 0 };
    for (int i = 0; i < 400; i++) {
        int32_t a, b2;
        emt_sample_typical(s, 4, 1.0f, 0.09f, 0.3f, &r1, &a);
        emt_sample_typical(s, 4, 1.0f, 0.09f, 0.3f, &r2, &b2);
        CHECK_EQ_INT(a, b2);
        if (a >= 0 && a < 4) seen[a]++;
    }
    for (int i = 0; i < 4; i++) CHECK(seen[i] > 50);
    int32_t t;
    CHECK_ERR(emt_sample_typical(s, 4, 0.0f, 0.09f, 0.3f, &r1, &t), ENTMTP_ERR_INVALID_ARGUMENT, "temperature");
}

int main(void) {
    greedy_rows();
    typical_rows();
    nodes_equal_rows();
    features_topk_sampling();
    return emt_test_finish("test_accept");
}
