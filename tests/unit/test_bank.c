/* Bank save/load round trip (trees, figures, policy settings) and corrupt
 * bank files: every one an error naming the file and the JSON path. */
#include "check.h"

#include <stdio.h>

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    if (!f) { perror(path); exit(1); }
    fputs(text, f);
    fclose(f);
}

int main(void) {
    char path[512], path2[512];
    snprintf(path, sizeof path, "%s/bank_roundtrip.json", ENTMTP_TEST_TMP_DIR);
    snprintf(path2, sizeof path2, "%s/bank_bad.json", ENTMTP_TEST_TMP_DIR);
    entmtp_bank *b = NULL;
    CHECK_OK(entmtp_bank_create(NULL, &b));
    int32_t i0, i1, i2;
    CHECK_OK(entmtp_bank_add_builtin(b, "chain_2", &i0));
    CHECK_OK(entmtp_bank_add_tree_json(b, "wide", "[[0],[1],[2],[0,0]]", &i1));
    CHECK_OK(entmtp_bank_add_builtin(b, "mc_sim_7b_63", &i2));
    CHECK_OK(entmtp_bank_set_figures(b, i1, 1.75f, 42.5f));
    CHECK_ERR(entmtp_bank_set_figures(b, 7, 1, 1), ENTMTP_ERR_OUT_OF_RANGE, "7");
    entmtp_policy_config h = entmtp_policy_default_config(ENTMTP_POLICY_HYSTERESIS);
    h.tau_on = 0.2f; h.tau_off = 0.05f; h.conservative_tree = i0; h.aggressive_tree = i2;
    CHECK_OK(entmtp_bank_set_policy_config(b, &h));
    entmtp_policy_config l = entmtp_policy_default_config(ENTMTP_POLICY_LADDER);
    const float l_thresholds[2] = { 0.1f, 0.4f };
    const int32_t l_trees[3] = { i0, i1, i2 };
    l.n_thresholds = 2; l.thresholds = l_thresholds; l.ladder_trees = l_trees;
    CHECK_OK(entmtp_bank_set_policy_config(b, &l));
    entmtp_policy_config u = entmtp_policy_default_config(ENTMTP_POLICY_UCB);
    u.ucb_exploration = 0.5f; u.ucb_length_penalty = 0.25f;
    CHECK_OK(entmtp_bank_set_policy_config(b, &u));
    entmtp_policy_config bad = entmtp_policy_default_config(ENTMTP_POLICY_HYSTERESIS);
    bad.aggressive_tree = 9;
    CHECK_ERR(entmtp_bank_set_policy_config(b, &bad), ENTMTP_ERR_OUT_OF_RANGE, "aggressive_tree = 9");
    entmtp_policy_config cust = entmtp_policy_default_config(ENTMTP_POLICY_CUSTOM);
    CHECK_ERR(entmtp_bank_set_policy_config(b, &cust), ENTMTP_ERR_INVALID_CONFIG, "custom");
    CHECK_OK(entmtp_bank_save(b, path));

    entmtp_bank *r = NULL;
    CHECK_OK(entmtp_bank_load(path, NULL, &r));
    if (r) {
        CHECK_EQ_INT(entmtp_bank_size(r), 3);
        int32_t k = -1;
        CHECK_OK(entmtp_bank_find(r, "wide", &k));
        CHECK_EQ_INT(k, 1);
        entmtp_tree_info ti = { sizeof ti };
        CHECK_OK(entmtp_bank_tree_info(r, 1, &ti));
        CHECK_EQ_INT(ti.n_nodes, 5);
        CHECK_NEAR(ti.mean_accept_length, 1.75, 1e-6);
        CHECK_NEAR(ti.tokens_per_second, 42.5, 1e-6);
        CHECK_OK(entmtp_bank_tree_info(r, 2, &ti));
        CHECK_EQ_INT(ti.n_nodes, 64);
        entmtp_policy_config got = { sizeof got };
        CHECK_OK(entmtp_bank_policy_config(r, ENTMTP_POLICY_HYSTERESIS, &got));
        CHECK_NEAR(got.tau_on, 0.2, 1e-6);
        CHECK_NEAR(got.tau_off, 0.05, 1e-6);
        CHECK_EQ_INT(got.aggressive_tree, 2);
        CHECK_OK(entmtp_bank_policy_config(r, ENTMTP_POLICY_LADDER, &got));
        CHECK_EQ_INT(got.n_thresholds, 2);
        CHECK_NEAR(got.thresholds[1], 0.4, 1e-6);
        CHECK_EQ_INT(got.ladder_trees[1], 1);
        CHECK_OK(entmtp_bank_policy_config(r, ENTMTP_POLICY_UCB, &got));
        CHECK_NEAR(got.ucb_length_penalty, 0.25, 1e-6);
        CHECK_ERR(entmtp_bank_policy_config(r, ENTMTP_POLICY_STATIC, &got), ENTMTP_ERR_NOT_FOUND, "static");
        /* buffers identical to the original's */
        entmtp_tree_buffers x = { sizeof x }, y = { sizeof y };
        CHECK_OK(entmtp_bank_tree_buffers(b, 2, &x));
        CHECK_OK(entmtp_bank_tree_buffers(r, 2, &y));
        CHECK(!memcmp(x.retrieve_indices, y.retrieve_indices, (size_t)x.n_leaves * 5 * sizeof(int32_t)));
        entmtp_bank_free(r);
    }
    entmtp_bank_free(b);

    struct { const char *text, *needle; } cases[] = {
        { "", "not a JSON object" },
        { "{\"trees\":", "not a JSON object" },
        { "[]", "not a JSON object" },
        { "{}", "\"trees\" must be a list" },
        { "{\"trees\":[{\"name\":\"a\"}]}", "trees[0] needs" },
        { "{\"trees\":[{\"name\":\"a\",\"choices\":[[0],[2,1]]}]}", "trees[0]: tree 'a': path [2,1]: prefix [2] missing" },
        { "{\"trees\":[{\"name\":\"a\",\"choices\":[[0]],\"nodes\":5}]}", "trees[0].nodes disagrees" },
        { "{\"trees\":[{\"name\":\"a\",\"choices\":[[0]],\"depth\":3}]}", "trees[0].depth disagrees" },
        { "{\"trees\":[{\"name\":\"a\",\"choices\":[[0]],\"mean_accept_length\":\"x\"}]}", "trees[0].mean_accept_length" },
        { "{\"trees\":[{\"name\":\"a\",\"choices\":[[0]]},{\"name\":\"a\",\"choices\":[]}]}", "already has a tree named 'a'" },
        /* regression (fuzz_bank_json): finite as a double, inf as a float */
        { "{\"trees\":[{\"name\":\"a\",\"choices\":[[0]],\"tokens_per_second\":1e300}]}", "trees[0].tokens_per_second" },
        { "{\"trees\":[{\"name\":\"a\",\"choices\":[[0]]}],\"policy\":{\"ladder\":{\"thresholds\":[1e60]}}}", "thresholds[0]" },
        { "{\"trees\":[{\"name\":\"a\",\"choices\":[[0]]}],\"policy\":{\"hysteresis\":{\"aggressive_tree\":\"zzz\"}}}", "no tree named 'zzz'" },
        { "{\"trees\":[{\"name\":\"a\",\"choices\":[[0]]}],\"policy\":{\"ladder\":{\"thresholds\":[0.5,0.1]}}}", "policy.ladder" },
        { "{\"trees\":[{\"name\":\"a\",\"choices\":[[0]]}],\"policy\":{\"hysteresis\":{\"tau_on\":0.1,\"tau_off\":0.5}}}", "tau_off" },
        { "{\"trees\":[{\"name\":\"a\",\"choices\":[[0]]}],\"policy\":{\"default\":\"ucb\"}}", "policy.default" },
        { "{\"trees\":[{\"name\":\"a\",\"choices\":[[0]]}],\"policy\":{\"dynamic\":[]}}", "policy.dynamic must be an object" },
        { "{\"trees\":[{\"name\":\"a\",\"choices\":[[0]]}],\"policy\":{\"default\":\"throughput\"}}", "policy.default" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_file(path2, cases[i].text);
        entmtp_bank *x = NULL;
        entmtp_status st = entmtp_bank_load(path2, NULL, &x);
        if (st == ENTMTP_OK || !strstr(entmtp_last_error(), cases[i].needle) || !strstr(entmtp_last_error(), "bank_bad.json")) {
            fprintf(stderr, "case %zu: status %d, message \"%s\" (wanted \"%s\")\n", i, (int)st, entmtp_last_error(), cases[i].needle);
            emt_test_failures++;
        }
        CHECK(x == NULL);
        entmtp_bank_free(x);
    }
    CHECK_ERR(entmtp_bank_load("/nonexistent/bank.json", NULL, &b), ENTMTP_ERR_IO, "/nonexistent/bank.json");
    /* a file with policy default and static by name */
    write_file(path2, "{\"trees\":[{\"name\":\"a\",\"choices\":[]},{\"name\":\"b\",\"choices\":[[0]]}],"
                      "\"policy\":{\"default\":\"static\",\"static\":{\"tree\":\"b\"}}}");
    CHECK_OK(entmtp_bank_load(path2, NULL, &b));
    entmtp_policy_config got = { sizeof got };
    CHECK_OK(entmtp_bank_policy_config(b, ENTMTP_POLICY_STATIC, &got));
    CHECK_EQ_INT(got.static_tree, 1);
    entmtp_bank_free(b);
    return emt_test_finish("test_bank");
}
