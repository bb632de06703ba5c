/* Drafter levels priced in a session that keeps the bank's costs (no clock,
 * so no level is ever timed): the outlook charges each level run beyond a
 * tree's depth at the drafter's measured figure (emt_drafter.level_ar_steps,
 * EAGLE-3's 0.052 plain steps), and the payoff gate of the throughput and
 * dynamic policies, fed that outlook, sees a drafter whose levels run every
 * step while only the root is accepted and falls back to plain steps. With
 * the levels unpriced (Hydra's 0) a root-only step looks free and the gate
 * never closes: the gap this closes (docs/policies.md). */
#include "bank/cost_model.h"
#include "check.h"
#include "engine/drafter.h"
#include "engine/features.h"
#include "policy/policy_internal.h"
#include "policy_support.h"

#define TOPK 3

static entmtp_bank *make_bank(void) {
    entmtp_bank *b = NULL;
    CHECK_OK(entmtp_bank_create(NULL, &b));
    CHECK_OK(entmtp_bank_add_tree_json(b, "root", "[]", NULL));
    CHECK_OK(entmtp_bank_add_tree_json(b, "chain2", "[[0],[0,0]]", NULL));
    CHECK_OK(entmtp_bank_set_figures(b, 0, 1.0f, 20.0f)); /* root: 0.05 s a step */
    CHECK_OK(entmtp_bank_set_figures(b, 1, 1.7f, 25.0f)); /* chain2: 0.068 s */
    return b;
}

/* a drafter level that predicts nothing, as an untrained or mismatched one */
static const float g_blind[2 * TOPK] = { 0 };

static void outlook_prices_levels(void) {
    entmtp_bank *b = make_bank();
    CHECK_NEAR(emt_drafter_eagle3.level_ar_steps, 0.052, 1e-12);
    CHECK_NEAR(emt_drafter_hydra.level_ar_steps, 0.0, 0);
    emt_outlook_state o;
    CHECK_OK(emt_outlook_init(&o, b, 2, TOPK));
    o.level_prior = emt_drafter_eagle3.level_ar_steps;
    /* no level run: nothing to add */
    emt_outlook_compute(&o, b, g_blind, TOPK, 0, TOPK, 0);
    CHECK_NEAR(o.expected_seconds[0], 0.05, 1e-9);
    CHECK_NEAR(o.ar_seconds, 0.05, 1e-9);
    /* two levels run: the root carries both at 0.052 plain steps each,
     * chain2 (depth 2) uses them; a plain step's unit stays the root's own */
    emt_outlook_compute(&o, b, g_blind, TOPK, 2, TOPK, 0);
    CHECK_NEAR(o.expected_seconds[0], 0.05 * (1.0 + 2 * 0.052), 1e-9);
    CHECK_NEAR(o.expected_seconds[1], 0.068, 1e-6);
    CHECK_NEAR(o.ar_seconds, 0.05, 1e-9);
    /* one level: the root carries one */
    emt_outlook_compute(&o, b, g_blind, TOPK, 1, TOPK, 0);
    CHECK_NEAR(o.expected_seconds[0], 0.05 * 1.052, 1e-9);
    /* once a level is timed (a session that learns from the clock), the
     * measurement replaces the figure */
    emt_outlook_observe(&o, emt_bank_tree(b, 0), 0, g_blind, TOPK, 2, TOPK, (const int32_t[]){ 0 }, 0, 0.058, 0.008);
    CHECK_NEAR(o.level_seconds, 0.004, 1e-12);
    emt_outlook_compute(&o, b, g_blind, TOPK, 2, TOPK, 0);
    CHECK_NEAR(o.expected_seconds[0] - 0.008, o.ar_seconds, 1e-9);
    emt_outlook_free(&o);
    /* a drafter without a figure (Hydra): unpriced, as before */
    CHECK_OK(emt_outlook_init(&o, b, 2, TOPK));
    o.level_prior = emt_drafter_hydra.level_ar_steps;
    emt_outlook_compute(&o, b, g_blind, TOPK, 2, TOPK, 0);
    CHECK_NEAR(o.expected_seconds[0], 0.05, 1e-9);
    emt_outlook_free(&o);
    entmtp_bank_free(b);
}

/* `steps` steps of a session with the bank's costs: while the policy lets
 * it draft, the drafter runs one level (the draft stage's first), the
 * outlook is computed from it and the policy chooses; every step emits the
 * root alone. Returns the number of steps that ran the drafter. */
static int run_blind(entmtp_policy_kind kind, double level_prior, int steps, int *first_plain) {
    entmtp_bank *b = make_bank();
    emt_outlook_state o;
    CHECK_OK(emt_outlook_init(&o, b, 2, TOPK));
    o.level_prior = level_prior;
    entmtp_policy_config c = entmtp_policy_default_config(kind);
    entmtp_policy *p = NULL;
    CHECK_OK(entmtp_policy_create(&c, &p));
    int dynamic = emt_policy_wants_dynamic_tree(p), drafted = 0;
    *first_plain = -1;
    for (int i = 0; i < steps; i++) {
        int drafts = emt_policy_drafts(p);
        int32_t levels = drafts ? 1 : 0;
        emt_outlook_compute(&o, b, g_blind, TOPK, levels, TOPK, dynamic);
        emt_tree_outlook view = { o.expected_accept, o.expected_seconds, o.ar_tree, o.ar_seconds };
        entmtp_features f = feat_s(0.0f);
        int32_t k = -1;
        CHECK_OK(emt_policy_select_outlook(p, &f, &view, 2, &k));
        CHECK(k == 0 || k == 1);
        const emt_tree *t = emt_bank_tree(b, k);
        entmtp_outcome out = { sizeof out, k, t->n_nodes, t->depth, 1, 0.0 };
        CHECK_OK(entmtp_policy_observe(p, &out));
        emt_outlook_observe(&o, t, k, g_blind, TOPK, levels, TOPK, (const int32_t[]){ 0, 0, 0 }, 0, 0.0, 0.0);
        drafted += drafts;
        if (!drafts && *first_plain < 0) *first_plain = i;
    }
    entmtp_policy_free(p);
    emt_outlook_free(&o);
    entmtp_bank_free(b);
    return drafted;
}

static void gate_sees_levels(entmtp_policy_kind kind) {
    /* EAGLE-3's levels priced: the root-only steps that ran a level cost
     * 1.052 plain steps and emit 1 token, so the gate closes after its 6
     * counted steps and the session then drafts only for probes (8, 16,
     * 32, 64 plain steps apart) */
    int first_plain = -1;
    int drafted = run_blind(kind, emt_drafter_eagle3.level_ar_steps, 200, &first_plain);
    CHECK(first_plain >= 6 && first_plain <= 8);
    CHECK(drafted >= 6 && drafted <= 14);
    /* unpriced: a root-only step looks like a plain step, is not counted,
     * and the drafter runs its level on every one of the 200 steps */
    drafted = run_blind(kind, 0.0, 200, &first_plain);
    CHECK_EQ_INT(drafted, 200);
    CHECK_EQ_INT(first_plain, -1);
}

int main(void) {
    outlook_prices_levels();
    gate_sees_levels(EMT_POLICY_THROUGHPUT);
    gate_sees_levels(EMT_POLICY_DYNAMIC);
    return emt_test_finish("test_policy_level_cost");
}
