/* The payoff gate of the throughput and dynamic policies in isolation
 * ("never slower than AR", docs/policies.md): an outlook that promises
 * drafts pay, outcomes that say they do not. Zero-accept steps must lead to
 * plain steps (the root-only tree, no drafting) within a few steps; while
 * plain, a probe now and then; high accepts at a probe must bring drafting
 * back; the same outcomes give the same choices. */
#include "check.h"
#include "policy/policy_internal.h"
#include "policy_support.h"

/* A bank of root-only (tree 0, a plain step of 1.0 s), a 2-node chain
 * (1.3 s) and a 4-node chain (1.8 s). The outlook expects the chains to emit
 * 1.9 and 2.9 tokens: the best tree is the deep chain. */
static const float g_acc[3] = { 1.0f, 1.9f, 2.9f };
static const double g_sec[3] = { 1.0, 1.3, 1.8 };
static const int32_t g_depth[3] = { 0, 1, 3 };

/* One step as a session runs it: ask whether to draft, select, then report
 * the tokens the step emitted (`accept` for a drafting tree; 1 for the root
 * alone). Returns the tree, or -100 on an error; *drafted says whether the
 * session would have run the drafter. */
static int32_t step(entmtp_policy *p, int32_t accept, int *drafted) {
    entmtp_features f = feat_s(0.5f);
    emt_tree_outlook o = { g_acc, g_sec, 0, 1.0 };
    *drafted = emt_policy_drafts(p);
    int32_t k = -1;
    if (emt_policy_select_outlook(p, &f, &o, 3, &k) != ENTMTP_OK) return -100;
    entmtp_outcome out = { sizeof out, k, k == 0 ? 1 : k == 1 ? 2 : 4, g_depth[k], k == 0 ? 1 : accept, 0.01 };
    if (entmtp_policy_observe(p, &out) != ENTMTP_OK) return -100;
    return k;
}

/* Runs `n` steps with the given accept length for drafting trees and
 * writes the trees chosen into trees[] (n entries). Returns the number of
 * steps on which the session would have drafted. */
static int run(entmtp_policy *p, int n, int32_t accept, int32_t *trees) {
    int drafted_steps = 0;
    for (int i = 0; i < n; i++) {
        int drafted = 0;
        trees[i] = step(p, accept, &drafted);
        drafted_steps += drafted;
    }
    return drafted_steps;
}

static void check_kind(entmtp_policy_kind kind) {
    entmtp_policy_config c = entmtp_policy_default_config(kind);
    entmtp_policy *p = NULL;
    CHECK_OK(entmtp_policy_create(&c, &p));

    /* drafts that pay (3 of 4 tokens at 1.8 plain steps): the gate never
     * interferes, every step drafts the deep chain */
    int32_t trees[400];
    CHECK_EQ_INT(run(p, 200, 3, trees), 200);
    int deep = 0;
    for (int i = 0; i < 200; i++) deep += trees[i] == 2;
    CHECK_EQ_INT(deep, 200);

    /* then nothing is accepted: plain steps within 20 steps. The decayed
     * sums carry 200 good steps (1.67 tokens per plain step), so it takes
     * longer than from a fresh start: 18 steps at a decay of 0.95 */
    run(p, 40, 1, trees);
    int first_plain = -1;
    for (int i = 0; i < 40 && first_plain < 0; i++)
        if (trees[i] == 0) first_plain = i;
    CHECK(first_plain >= 0 && first_plain <= 20);
    /* once plain, the session stops drafting: most steps are plain, the
     * only drafting steps are probes, spaced further and further apart */
    int32_t later[300];
    int drafted = run(p, 300, 1, later);
    CHECK(drafted >= 2 && drafted <= 6);
    int probes = 0, last_probe = -1, last_gap = 0, gaps_grow = 1;
    for (int i = 0; i < 300; i++)
        if (later[i] != 0) {
            CHECK_EQ_INT(later[i], 2); /* a probe drafts the best drafting tree */
            if (last_probe >= 0) {
                int gap = i - last_probe;
                if (gap < last_gap) gaps_grow = 0;
                last_gap = gap;
            }
            last_probe = i;
            probes++;
        }
    CHECK_EQ_INT(probes, drafted);
    CHECK(gaps_grow);
    CHECK(last_gap <= 129);

    /* the text becomes predictable: the next probe's high accept brings
     * drafting back, within the longest wait between probes */
    int32_t back[140];
    run(p, 140, 4, back);
    int first_draft = -1;
    for (int i = 0; i < 140 && first_draft < 0; i++)
        if (back[i] != 0) first_draft = i;
    CHECK(first_draft >= 0 && first_draft <= 128);
    for (int i = first_draft; i < 140; i++) CHECK_EQ_INT(back[i], 2);

    /* a fresh policy that sees zero accepts from the start: plain after
     * EMT_GATE_MIN_STEPS (6) counted steps */
    entmtp_policy_reset(p);
    int32_t fresh[12];
    run(p, 12, 1, fresh);
    int fresh_plain = -1;
    for (int i = 0; i < 12 && fresh_plain < 0; i++)
        if (fresh[i] == 0) fresh_plain = i;
    CHECK(fresh_plain >= 3 && fresh_plain <= 7);

    /* deterministic: the same outcomes give the same choices */
    entmtp_policy *q = NULL;
    CHECK_OK(entmtp_policy_create(&c, &q));
    entmtp_policy_reset(p);
    uint32_t rng = 12345;
    for (int i = 0; i < 1000; i++) {
        rng = rng * 1664525u + 1013904223u;
        int32_t acc = 1 + (int32_t)((rng >> 24) % 3); /* 1..3: near break-even, so it switches */
        int d1 = 0, d2 = 0;
        int32_t k1 = step(p, acc, &d1), k2 = step(q, acc, &d2);
        CHECK_EQ_INT(k1, k2);
        CHECK_EQ_INT(d1, d2);
    }
    entmtp_policy_free(q);
    entmtp_policy_free(p);
}

int main(void) {
    check_kind(EMT_POLICY_THROUGHPUT);
    check_kind(EMT_POLICY_DYNAMIC);

    /* a bank without a root-only tree: nothing to fall back to, the
     * throughput choice stands however little is accepted */
    entmtp_policy_config c = entmtp_policy_default_config(EMT_POLICY_THROUGHPUT);
    entmtp_policy *p = NULL;
    CHECK_OK(entmtp_policy_create(&c, &p));
    const float acc[2] = { 1.9f, 2.9f };
    const double sec[2] = { 1.3, 1.8 };
    for (int i = 0; i < 50; i++) {
        entmtp_features f = feat_s(0.5f);
        emt_tree_outlook o = { acc, sec, -1, 0.0 };
        int32_t k = -1;
        CHECK(emt_policy_drafts(p));
        CHECK_OK(emt_policy_select_outlook(p, &f, &o, 2, &k));
        CHECK_EQ_INT(k, 1);
        entmtp_outcome out = { sizeof out, k, 4, 3, 1, 0.01 };
        CHECK_OK(entmtp_policy_observe(p, &out));
    }
    entmtp_policy_free(p);

    /* through the public API: the outlook in the features, the root-only
     * tree found as the cheapest tree expected to emit one token */
    CHECK_OK(entmtp_policy_create(&c, &p));
    int plain = 0;
    for (int i = 0; i < 30; i++) {
        entmtp_features f = feat_s(0.5f);
        f.n_trees = 3;
        f.expected_accept = g_acc;
        f.expected_seconds = g_sec;
        int32_t k = -1;
        CHECK_OK(entmtp_policy_select(p, &f, 3, &k));
        plain += k == 0;
        entmtp_outcome out = { sizeof out, k, k == 0 ? 1 : 4, g_depth[k], 1, 0.01 };
        CHECK_OK(entmtp_policy_observe(p, &out));
    }
    CHECK(plain >= 20);
    entmtp_policy_free(p);

    /* other kinds never stop drafting */
    entmtp_policy_config s = entmtp_policy_default_config(ENTMTP_POLICY_STATIC);
    CHECK_OK(entmtp_policy_create(&s, &p));
    CHECK(emt_policy_drafts(p));
    entmtp_policy_free(p);
    return emt_test_finish("test_policy_gate");
}
