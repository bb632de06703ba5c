/* Stage 2 and the policy calibration of the offline search on hand-worked
 * figures: which frontier trees form the bank, the candidate grid drawn from
 * the path values s, the winner of each shape, and the default policy the
 * bank file then names. */
#include "check.h"

#include "search/calibrate.h"

/* A three-tree frontier: [[0]], [[0],[1]], [[0],[1],[0,0]]. */
static int32_t ranks1[] = { 0 }, lens1[] = { 1 };
static int32_t ranks2[] = { 0, 1 }, lens2[] = { 1, 1 };
static int32_t ranks3[] = { 0, 1, 0, 0 }, lens3[] = { 1, 1, 2 };

static void test_stage2(void) {
    emt_frontier_tree trees[3] = {
        { .n_nodes = 2, .depth = 1, .n_paths = 1, .ranks = ranks1, .lens = lens1, .accept = 1.5 },
        { .n_nodes = 3, .depth = 1, .n_paths = 2, .ranks = ranks2, .lens = lens2, .accept = 1.7 },
        { .n_nodes = 4, .depth = 2, .n_paths = 3, .ranks = ranks3, .lens = lens3, .accept = 2.0 },
    };
    emt_frontier fr = { .n = 3, .trees = trees };
    entmtp_bank_params bp = entmtp_bank_default_params();
    emt_frontier_row *rows = NULL;
    entmtp_bank *all = NULL;
    CHECK_OK(emt_frontier_rows(&fr, &bp, &rows, &all));
    if (!rows) return;
    CHECK_EQ_INT(entmtp_bank_size(all), 4);
    CHECK(!strcmp(rows[0].name, "n01d0") && rows[0].nodes == 1 && rows[0].biased == 1.0);
    CHECK(!strcmp(rows[3].name, "n04d2") && rows[3].nodes == 4 && rows[3].depth == 2 && rows[3].biased == 2.0);
    /* measured: n03d1 is slower than the smaller n02d1, so it leaves the Pareto set */
    const double tps[4] = { 10, 14, 13, 15 }, self[4] = { 1, 1.4, 1.6, 1.9 };
    for (int i = 0; i < 4; i++) { rows[i].tps = tps[i]; rows[i].self = self[i]; }
    entmtp_bank *bank = NULL;
    int32_t best = -1, static_tree = -1;
    CHECK_OK(emt_stage2_bank(&fr, rows, 4, &bp, &bank, &best, &static_tree));
    CHECK(rows[0].keep && rows[1].keep && !rows[2].keep && rows[3].keep);
    CHECK_EQ_INT(entmtp_bank_size(bank), 3);
    CHECK_EQ_INT(best, 3);
    CHECK_EQ_INT(static_tree, 2);
    entmtp_tree_info ti = { sizeof ti };
    CHECK_OK(entmtp_bank_tree_info(bank, static_tree, &ti));
    CHECK(!strcmp(ti.name, "n04d2"));
    CHECK_NEAR(ti.tokens_per_second, 15, 1e-6);
    CHECK_NEAR(ti.mean_accept_length, 1.9, 1e-6);
    entmtp_bank *none = NULL;
    CHECK_ERR(emt_stage2_bank(&fr, rows, 3, &bp, &none, &best, &static_tree), ENTMTP_ERR_INVALID_ARGUMENT, "3 rows");
    CHECK(!none);
    entmtp_bank_free(bank);
    entmtp_bank_free(all);
    free(rows);
}

/* s = 0.00, 0.01, ..., 0.99 shuffled: the q-quantile is (round(99 q)) / 100. */
static void spread_s(float *s) {
    for (int i = 0; i < 100; i++) s[i] = (float)((i * 37) % 100) / 100.0f;
}

static void test_grid(void) {
    float s[100];
    emt_policy_choice c;
    emt_calibration cal;

    spread_s(s);
    emt_policy_choice_init(&c, 0, 10);
    emt_calibration_grid(&cal, s, 100, &c);
    CHECK_EQ_INT(cal.n, 1); /* the smallest tree is the fastest: static only */

    emt_policy_choice_init(&c, 1, 10);
    emt_calibration_grid(&cal, s, 100, &c);
    CHECK_EQ_INT(cal.n, 1 + 5); /* one conservative tree, no ladder (K = 2) */
    CHECK(cal.cand[0].kind == ENTMTP_POLICY_STATIC && cal.cand[0].static_tree == 1);
    const float taus[5] = { 0.10f, 0.25f, 0.50f, 0.74f, 0.89f };
    for (int q = 0; q < 5; q++) {
        const entmtp_policy_config *pc = &cal.cand[1 + q];
        CHECK(pc->kind == ENTMTP_POLICY_HYSTERESIS && pc->conservative_tree == 0 && pc->aggressive_tree == 1);
        CHECK_NEAR(pc->tau_on, taus[q], 1e-6);
        CHECK(pc->tau_off == pc->tau_on);
    }
    CHECK(s[0] == 0.0f && s[99] == 0.99f); /* sorted in place */

    spread_s(s);
    emt_policy_choice_init(&c, 5, 10);
    emt_calibration_grid(&cal, s, 100, &c);
    CHECK_EQ_INT(cal.n, 1 + 3 * 5 + 4);
    CHECK(cal.cand[15].conservative_tree == 2 && cal.cand[15].aggressive_tree == 5);
    const entmtp_policy_config *ladder = &cal.cand[16]; /* alpha 0.25: quantiles 1/16, 2/16, 3/16 */
    CHECK(ladder->kind == ENTMTP_POLICY_LADDER && ladder->n_thresholds == 3 && cal.knob[16] == 0.25);
    CHECK_NEAR(ladder->thresholds[0], 0.06, 1e-6);
    CHECK_NEAR(ladder->thresholds[1], 0.12, 1e-6);
    CHECK_NEAR(ladder->thresholds[2], 0.19, 1e-6);
    for (int b = 0; b < 4; b++) CHECK_EQ_INT(ladder->ladder_trees[b], 2 + b);
    CHECK_NEAR(cal.cand[19].thresholds[2], 0.74, 1e-6); /* alpha 1: 3/4 */

    for (int i = 0; i < 100; i++) s[i] = 0.5f; /* no distinct thresholds: no ladder */
    emt_calibration_grid(&cal, s, 100, &c);
    CHECK_EQ_INT(cal.n, 1 + 3 * 5);
}

static entmtp_bank *six_tree_bank(void) {
    entmtp_bank_params bp = entmtp_bank_default_params();
    entmtp_bank *bank = NULL;
    CHECK_OK(entmtp_bank_create(&bp, &bank));
    const char *trees[6] = { "[]", "[[0]]", "[[0],[1]]", "[[0],[0,0]]", "[[0],[1],[0,0]]", "[[0],[1],[2],[0,0]]" };
    char name[8];
    for (int t = 0; bank && t < 6; t++) {
        snprintf(name, sizeof name, "t%d", t);
        CHECK_OK(entmtp_bank_add_tree_json(bank, name, trees[t], NULL));
    }
    return bank;
}

static entmtp_policy_kind stored_default(const emt_policy_choice *c) {
    entmtp_bank *bank = six_tree_bank();
    entmtp_policy_kind kind = ENTMTP_POLICY_CUSTOM;
    if (!bank) return kind;
    CHECK_OK(emt_policy_choice_store(c, bank));
    CHECK_OK(entmtp_bank_default_policy(bank, &kind));
    entmtp_policy_config ucb = { sizeof ucb };
    CHECK_OK(entmtp_bank_policy_config(bank, ENTMTP_POLICY_UCB, &ucb));
    entmtp_bank_free(bank);
    return kind;
}

/* Fills the measured figures: 20 for static, hysteresis candidate k at hyst[k
 * - 1], ladder candidates at ladder[]. */
static void measure(emt_calibration *cal, double stat, const double *hyst, const double *ladder) {
    cal->tps[0] = stat;
    for (int32_t k = 1, h = 0, l = 0; k < cal->n; k++)
        cal->tps[k] = cal->cand[k].kind == ENTMTP_POLICY_HYSTERESIS ? hyst[h++] : ladder[l++];
}

static void test_pick_and_store(void) {
    float s[100];
    double hyst[15], ladder[4] = { 18, 19, 19, 17 };
    for (int k = 0; k < 15; k++) hyst[k] = 15 + (k == 7) * 6 + (k == 9) * 6; /* 21 at k 7 and 9 */
    emt_calibration *cal = malloc(sizeof *cal);
    emt_policy_choice c;
    if (!cal) return;

    spread_s(s);
    emt_policy_choice_init(&c, 5, 30); /* stage 2's figure is replaced by the in-run one */
    emt_calibration_grid(cal, s, 100, &c);
    measure(cal, 20, hyst, ladder);
    emt_calibration_pick(cal, &c);
    CHECK_NEAR(c.static_tps, 20, 0);
    CHECK(c.have_hyst && c.hyst_tps == 21 && c.hyst.conservative_tree == 1 && c.hyst.tau_on == cal->cand[8].tau_on);
    CHECK(c.have_ladder && c.ladder_tps == 19); /* the first of the tie: alpha 0.5 */
    const float alpha_half[3] = { cal->cand[17].thresholds[0], cal->cand[17].thresholds[1], cal->cand[17].thresholds[2] };
    memset(cal, 0xff, sizeof *cal); /* the choice keeps its own ladder arrays */
    CHECK(c.ladder.thresholds == c.ladder_thresholds && c.ladder.ladder_trees == c.ladder_trees);
    CHECK(!memcmp(c.ladder_thresholds, alpha_half, sizeof alpha_half) && c.ladder_trees[3] == 5);
    CHECK(stored_default(&c) == ENTMTP_POLICY_HYSTERESIS);

    c.ladder_tps = 21; /* a tie with hysteresis goes to hysteresis */
    CHECK(stored_default(&c) == ENTMTP_POLICY_HYSTERESIS);
    c.ladder_tps = 22;
    CHECK(stored_default(&c) == ENTMTP_POLICY_LADDER);
    c.static_tps = 22; /* nothing beats static */
    CHECK(stored_default(&c) == ENTMTP_POLICY_STATIC);

    emt_policy_choice_init(&c, 0, 10); /* uncalibrated: static, then UCB */
    CHECK(stored_default(&c) == ENTMTP_POLICY_STATIC);
    free(cal);
}

int main(void) {
    test_stage2();
    test_grid();
    test_pick_and_store();
    return emt_test_finish("test_search_calibrate");
}
