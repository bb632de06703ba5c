/* What the expected-throughput policy is shown, in isolation: per-tree
 * expected accept lengths from hand-made head probabilities on hand-made
 * trees (known sums of path products), their calibration from observed
 * accepts, and the per-tree cost model's priors and online learning. */
#include "bank/cost_model.h"
#include "check.h"
#include "engine/features.h"

#include <math.h>

#define TOPK 3

/* head probabilities [head][rank]: head 0 (depth 1), head 1 (depth 2) */
static const float q[2 * TOPK] = { 0.5f, 0.3f, 0.1f, 0.4f, 0.2f, 0.1f };

static entmtp_bank *make_bank(void) {
    entmtp_bank *b = NULL;
    CHECK_OK(entmtp_bank_create(NULL, &b));
    CHECK_OK(entmtp_bank_add_tree_json(b, "root", "[]", NULL));
    CHECK_OK(entmtp_bank_add_tree_json(b, "chain2", "[[0],[0,0]]", NULL));
    CHECK_OK(entmtp_bank_add_tree_json(b, "wide", "[[0],[1],[0,0],[1,0],[0,1]]", NULL));
    return b;
}

static void expected_accept(void) {
    entmtp_bank *b = make_bank();
    emt_accept_calib c;
    emt_accept_calib_reset(&c);
    float node_prob[8], e[3];
    emt_features_expected_accept(&c, q, TOPK, 2, TOPK, b, node_prob, e);
    CHECK_NEAR(e[0], 1.0, 1e-6);
    CHECK_NEAR(e[1], 1.0 + 0.5 + 0.5 * 0.4, 1e-6);
    /* [0]:.5 [1]:.3 [0,0]:.5*.4 [1,0]:.3*.4 [0,1]:.5*.2 */
    CHECK_NEAR(e[2], 1.0 + 0.5 + 0.3 + 0.2 + 0.12 + 0.1, 1e-6);
    /* heads that predict nothing: every tree expects the root only */
    const float zero[2 * TOPK] = { 0 };
    emt_features_expected_accept(&c, zero, TOPK, 2, TOPK, b, node_prob, e);
    for (int k = 0; k < 3; k++) CHECK_NEAR(e[k], 1.0, 1e-6);
    /* only one head: depth-2 nodes have no estimate */
    emt_features_expected_accept(&c, q, TOPK, 1, TOPK, b, node_prob, e);
    CHECK_NEAR(e[1], 1.5, 1e-6);

    /* calibration: the chain's depth-1 token is always accepted and its depth-2
     * token never, while the heads said 0.5 and 0.4 */
    const emt_tree *chain = emt_bank_tree(b, 1);
    const int32_t row[3] = { 0, 1, 2 }; /* chain2's retrieve row */
    for (int step = 0; step < 400; step++) emt_accept_calib_observe(&c, chain, q, TOPK, 2, TOPK, row, 1);
    CHECK(emt_accept_calib_prob(&c, 0, 0, 0.5f) > 0.98f);           /* factor ~2 (prior and decay keep it a bit lower) */
    CHECK_NEAR(emt_accept_calib_prob(&c, 0, 0, 0.9f), 1.0, 1e-6);  /* clamped at 1 */
    CHECK(emt_accept_calib_prob(&c, 1, 0, 0.4f) < 0.02f);          /* factor ~0 */
    CHECK_NEAR(emt_accept_calib_prob(&c, 0, 1, 0.3f), 0.3, 1e-6);   /* rank 1 never reached: untouched */
    emt_features_expected_accept(&c, q, TOPK, 2, TOPK, b, node_prob, e);
    CHECK(e[1] > 1.97f && e[1] < 2.01f);
    /* a step that accepted nothing reaches only depth 1 */
    emt_accept_calib d;
    emt_accept_calib_reset(&d);
    emt_accept_calib_observe(&d, chain, q, TOPK, 2, TOPK, row, 0);
    CHECK_NEAR(d.pred[0][0], 0.5, 1e-6);
    CHECK_NEAR(d.hit[0][0], 0.0, 1e-12);
    CHECK_NEAR(d.pred[1][0], 0.0, 1e-12);
    entmtp_bank_free(b);
}

static void cost_model(void) {
    entmtp_bank *b = make_bank();
    /* stage-2 figures for two trees: 1 / 20 s and 1.7 / 25 s per step */
    CHECK_OK(entmtp_bank_set_figures(b, 0, 1.0f, 20.0f));
    CHECK_OK(entmtp_bank_set_figures(b, 1, 1.7f, 25.0f));
    emt_cost_model cm;
    CHECK_OK(emt_cost_model_init(&cm, b));
    double s[3];
    emt_cost_model_estimate(&cm, s);
    CHECK_NEAR(s[0], 0.05, 1e-6);
    CHECK_NEAR(s[1], 0.068, 1e-6);
    /* no figures for the 6-node tree: the others' mean cost per node times 6 */
    CHECK_NEAR(s[2], (0.05 / 1 + 0.068 / 3) / 2 * 6, 1e-6);
    /* this device is twice as slow and only tree 0 was run: all trees scale */
    for (int i = 0; i < 50; i++) emt_cost_model_observe(&cm, 0, 0.1);
    emt_cost_model_estimate(&cm, s);
    CHECK_NEAR(s[0], 0.1, 1e-6);
    CHECK_NEAR(s[1], 0.136, 1e-6);
    /* tree 2 really costs 0.3 s: it learns, and tree 0 stays right */
    for (int i = 0; i < 200; i++) {
        emt_cost_model_observe(&cm, 2, 0.3);
        emt_cost_model_observe(&cm, 0, 0.1);
    }
    emt_cost_model_estimate(&cm, s);
    CHECK_NEAR(s[2], 0.3, 0.003);
    CHECK_NEAR(s[0], 0.1, 0.001);
    /* one step on a busy machine counts as at most 1.5x the estimate: the
     * device scale takes 1.5^(1/20) = 2.0% and the tree 1/50 of the rest:
     * 3% in all */
    double before = s[0];
    emt_cost_model_observe(&cm, 0, 100.0);
    emt_cost_model_estimate(&cm, s);
    CHECK(s[0] < before * 1.031);
    CHECK(s[0] > before * 1.02);
    /* nonsense times are ignored */
    emt_cost_model_observe(&cm, 0, NAN);
    emt_cost_model_observe(&cm, 0, -1);
    emt_cost_model_observe(&cm, 7, 1.0);
    double again[3];
    emt_cost_model_estimate(&cm, again);
    CHECK_NEAR(again[0], s[0], 1e-12);
    /* reset: back to the priors */
    emt_cost_model_reset(&cm, b);
    emt_cost_model_estimate(&cm, s);
    CHECK_NEAR(s[0], 0.05, 1e-6);
    emt_cost_model_free(&cm);

    /* a bank without figures: 1 + n_nodes / 16 */
    entmtp_bank *bare = make_bank();
    CHECK_OK(emt_cost_model_init(&cm, bare));
    emt_cost_model_estimate(&cm, s);
    CHECK_NEAR(s[0], 1.0 + 1.0 / 16, 1e-9);
    CHECK_NEAR(s[2], 1.0 + 6.0 / 16, 1e-9);
    emt_cost_model_free(&cm);
    entmtp_bank_free(bare);
    entmtp_bank_free(b);
}

/* Whether the draft stage runs another Hydra level: only while a deeper tree
 * is expected to beat the best tree over the levels run so far, each level
 * not yet run passing at its recent rate (figures by hand). */
static void deeper_may_pay(void) {
    entmtp_bank *b = make_bank();
    CHECK_OK(entmtp_bank_set_figures(b, 0, 1.0f, 20.0f)); /* root: 0.05 s */
    CHECK_OK(entmtp_bank_set_figures(b, 1, 1.7f, 25.0f)); /* chain2: 0.068 s; wide: (0.05 + 0.068 / 3) / 2 * 6 s */
    emt_outlook_state o;
    CHECK_OK(emt_outlook_init(&o, b, 2, TOPK));
    /* a fresh session expects each level to pass half the time */
    CHECK_NEAR(emt_outlook_level_rate(&o, 0), 0.5, 1e-6);
    CHECK_NEAR(emt_outlook_level_rate(&o, 1), 0.5, 1e-6);
    /* no level run yet: every tree expects 1 token, the root is the fastest
     * (20 tokens/s), but chain2 is expected to reach (1 + .5 + .25) / 0.068 = 25.7 */
    CHECK(emt_outlook_deeper_may_pay(&o, b, q, TOPK, 0, 2, TOPK, 0));
    /* head 0 confident: chain2 over one level is 1.5 / 0.068 = 22.1 tokens/s,
     * and with 0.9 passing level 0 and half of that level 1, 1.95 / 0.068 = 28.7 */
    CHECK(emt_outlook_deeper_may_pay(&o, b, q, TOPK, 1, 2, TOPK, 0));
    CHECK_NEAR(o.expected_accept[1], 1.5, 1e-6);
    CHECK_NEAR(o.expected_accept[2], 1.8, 1e-6);
    /* head 0 unsure (0.08 in all pass level 0): chain2 is expected at
     * (1.05 + 0.04) / 0.068 = 16.0 < the root's 20: stop */
    const float unsure[2 * TOPK] = { 0.05f, 0.02f, 0.01f, 0.9f, 0.05f, 0.01f };
    CHECK(!emt_outlook_deeper_may_pay(&o, b, unsure, TOPK, 1, 2, TOPK, 0));
    /* the same for dynamic trees of each tree's size (3 nodes: at most depth 2) */
    CHECK(!emt_outlook_deeper_may_pay(&o, b, unsure, TOPK, 1, 2, TOPK, 1));
    CHECK(emt_outlook_deeper_may_pay(&o, b, q, TOPK, 1, 2, TOPK, 1));
    /* the estimate, not a bound: head 0 at 0.4 in all, chain2 over one level
     * 1.3 / 0.068 = 19.1 < 20. Level 1 passing half the time: 1.5 / 0.068 =
     * 22.1, worth a look; level 1 seen to fail 100 times: 19.2, not (a bound
     * that let level 1 pass for sure, 25.0, would look) */
    const float fair[2 * TOPK] = { 0.3f, 0.05f, 0.05f, 0.9f, 0.05f, 0.01f };
    CHECK(emt_outlook_deeper_may_pay(&o, b, fair, TOPK, 1, 2, TOPK, 0));
    o.chain_reached[1] = 100.0;
    o.chain_passed[1] = 0.0;
    CHECK(!emt_outlook_deeper_may_pay(&o, b, fair, TOPK, 1, 2, TOPK, 0));
    o.chain_reached[1] = o.chain_passed[1] = 0.0;
    /* the rates are learnt from the accepted paths: chain2 accepting its
     * depth-1 node but not the depth-2 one passes level 0 and fails level 1 */
    emt_outlook_state seen;
    CHECK_OK(emt_outlook_init(&seen, b, 2, TOPK));
    for (int i = 0; i < 200; i++)
        emt_outlook_observe(&seen, emt_bank_tree(b, 1), 1, q, TOPK, 2, TOPK, (const int32_t[]){ 0, 1 }, 1, 0.068, 0.0);
    CHECK(emt_outlook_level_rate(&seen, 0) > 0.95f);
    CHECK(emt_outlook_level_rate(&seen, 1) < 0.05f);
    /* a root-only step tests no level: the rates only decay */
    emt_outlook_observe(&seen, emt_bank_tree(b, 0), 0, q, TOPK, 0, TOPK, (const int32_t[]){ 0 }, 0, 0.05, 0.0);
    CHECK(emt_outlook_level_rate(&seen, 0) > 0.95f);
    emt_outlook_free(&seen);
    /* before any level: recent depth-1 drafts all rejected -> no look,
     * until EMT_OUTLOOK_BLIND_STEPS steps in a row ran no head */
    emt_outlook_state fresh;
    CHECK_OK(emt_outlook_init(&fresh, b, 2, TOPK));
    for (int i = 0; i < 60; i++)
        emt_outlook_observe(&fresh, emt_bank_tree(b, 1), 1, q, TOPK, 2, TOPK, (const int32_t[]){ 0 }, 0, 0.068, 0.0);
    CHECK(emt_outlook_level_rate(&fresh, 0) < 0.05f);
    CHECK(!emt_outlook_deeper_may_pay(&fresh, b, q, TOPK, 0, 2, TOPK, 0));
    for (int i = 0; i < EMT_OUTLOOK_BLIND_STEPS; i++) {
        CHECK(!emt_outlook_deeper_may_pay(&fresh, b, q, TOPK, 0, 2, TOPK, 0));
        emt_outlook_observe(&fresh, emt_bank_tree(b, 0), 0, q, TOPK, 0, TOPK, (const int32_t[]){ 0 }, 0, 0.05, 0.0);
    }
    CHECK(emt_outlook_deeper_may_pay(&fresh, b, q, TOPK, 0, 2, TOPK, 0));
    emt_outlook_free(&fresh);
    /* only the nodes whose children wait on the next level can gain from
     * it: head 0 spreads 0.6 over three ranks but gives the chain's node
     * 0.2. chain2 over one level: 1.2 / 0.068 = 17.6; with the chain node
     * passing level 1 half the time, (1.2 + 0.2 * 0.5) / 0.068 = 19.1 < 20:
     * stop (counting every rank of level 0 as a way on, 0.6 * 0.5, gave 22.1
     * and looked: a level run that no chain could use) */
    const float spread[2 * TOPK] = { 0.2f, 0.2f, 0.2f, 0.9f, 0.05f, 0.01f };
    CHECK(!emt_outlook_deeper_may_pay(&o, b, spread, TOPK, 1, 2, TOPK, 0));
    /* every level run: nothing deeper exists */
    CHECK(!emt_outlook_deeper_may_pay(&o, b, q, TOPK, 2, 2, TOPK, 0));
    /* a device where chain2 is dear (1 s a step): not worth a level */
    for (int i = 0; i < 100; i++) {
        emt_outlook_observe(&o, emt_bank_tree(b, 1), 1, q, TOPK, 1, TOPK, (const int32_t[]){ 0, 1, 2 }, 1, 1.0, 0.0);
        emt_outlook_observe(&o, emt_bank_tree(b, 0), 0, q, TOPK, 1, TOPK, (const int32_t[]){ 0 }, 0, 0.05, 0.0);
    }
    CHECK(!emt_outlook_deeper_may_pay(&o, b, q, TOPK, 1, 2, TOPK, 0));
    emt_outlook_free(&o);
    entmtp_bank_free(b);
}

/* Levels run and then not used are spent whatever the step chooses: the
 * cost model learns each tree's time as if its step had run only the
 * tree's own levels, and a step that has run more adds them to the
 * shallower trees' expected seconds. */
static void sunk_levels(void) {
    entmtp_bank *b = make_bank();
    CHECK_OK(entmtp_bank_set_figures(b, 0, 1.0f, 20.0f)); /* root: 0.05 s */
    CHECK_OK(entmtp_bank_set_figures(b, 1, 1.7f, 25.0f)); /* chain2: 0.068 s */
    emt_outlook_state o;
    CHECK_OK(emt_outlook_init(&o, b, 2, TOPK));
    /* the root chosen after two levels of 0.004 s each: 0.058 s, of which
     * the root's own step is 0.05 s */
    for (int i = 0; i < 400; i++)
        emt_outlook_observe(&o, emt_bank_tree(b, 0), 0, q, TOPK, 2, TOPK, (const int32_t[]){ 0 }, 0, 0.058, 0.008);
    CHECK_NEAR(o.level_seconds, 0.004, 1e-9);
    emt_outlook_compute(&o, b, q, TOPK, 0, TOPK, 0);
    CHECK_NEAR(o.expected_seconds[0], 0.05, 1e-6);
    CHECK_NEAR(o.expected_seconds[1], 0.068, 1e-6);
    /* after two levels: the root carries both, chain2 (depth 2) none */
    emt_outlook_compute(&o, b, q, TOPK, 2, TOPK, 0);
    CHECK_NEAR(o.expected_seconds[0], 0.058, 1e-6);
    CHECK_NEAR(o.expected_seconds[1], 0.068, 1e-6);
    /* chain2 after its two levels took 0.070 s: its own time, as measured */
    for (int i = 0; i < 400; i++)
        emt_outlook_observe(&o, emt_bank_tree(b, 1), 1, q, TOPK, 2, TOPK, (const int32_t[]){ 0, 1, 2 }, 2, 0.070, 0.008);
    emt_outlook_compute(&o, b, q, TOPK, 0, TOPK, 0);
    CHECK_NEAR(o.expected_seconds[1], 0.070, 2e-4);
    /* a device that ran the levels itself reports none: times count whole */
    emt_outlook_state dev;
    CHECK_OK(emt_outlook_init(&dev, b, 2, TOPK));
    for (int i = 0; i < 400; i++)
        emt_outlook_observe(&dev, emt_bank_tree(b, 0), 0, q, TOPK, 2, TOPK, (const int32_t[]){ 0 }, 0, 0.058, 0.0);
    CHECK_NEAR(dev.level_seconds, 0.0, 0);
    emt_outlook_compute(&dev, b, q, TOPK, 2, TOPK, 0);
    CHECK_NEAR(dev.expected_seconds[0], 0.058, 1e-4);
    emt_outlook_free(&dev);
    emt_outlook_free(&o);
    entmtp_bank_free(b);
}

int main(void) {
    expected_accept();
    cost_model();
    deeper_may_pay();
    sunk_levels();
    return emt_test_finish("test_tree_outlook");
}
