/* Dynamic trees in isolation: best-first selection under a node budget from
 * hand-made calibrated probabilities (known top-N sets and expected accept
 * lengths), and the built buffers equal emt_tree_compile's for the same
 * paths, node for node, so the verifier cannot tell them from a bank tree. */
#include "check.h"
#include "engine/dynamic_tree.h"

#include <math.h>

#define K 3

static void same_tree(const emt_tree *a, const emt_tree *b) {
    CHECK_EQ_INT(a->n_nodes, b->n_nodes);
    CHECK_EQ_INT(a->depth, b->depth);
    CHECK_EQ_INT(a->n_leaves, b->n_leaves);
    CHECK_EQ_INT(a->topk, b->topk);
    if (a->n_nodes != b->n_nodes || a->depth != b->depth || a->n_leaves != b->n_leaves) return;
    int32_t n = a->n_nodes;
    CHECK(!memcmp(a->attn_mask, b->attn_mask, (size_t)n * n));
    CHECK(!memcmp(a->position_ids, b->position_ids, (size_t)n * sizeof(int32_t)));
    CHECK(!memcmp(a->parents, b->parents, (size_t)n * sizeof(int32_t)));
    CHECK(!memcmp(a->node_ranks, b->node_ranks, (size_t)n * sizeof(int32_t)));
    CHECK(!memcmp(a->tree_indices, b->tree_indices, (size_t)n * sizeof(int32_t)));
    CHECK(!memcmp(a->retrieve_indices, b->retrieve_indices, (size_t)a->n_leaves * (a->depth + 1) * sizeof(int32_t)));
    CHECK(!memcmp(a->path_offsets, b->path_offsets, (size_t)n * sizeof(int32_t)));
    CHECK(!memcmp(a->ranks, b->ranks, (size_t)a->path_offsets[n - 1] * sizeof(int32_t)));
}

static void check_against_compile(emt_dynamic_tree *dt, int32_t n, const char *choices) {
    const emt_tree *t = emt_dynamic_tree_build(dt, n);
    int32_t *ranks = NULL, *lens = NULL, n_paths = 0;
    CHECK_OK(emt_parse_choices_json(choices, &ranks, &lens, &n_paths));
    emt_tree ref;
    CHECK_OK(emt_tree_compile("ref", ranks, lens, n_paths, K, EMT_MAX_HEADS, 64, &ref));
    same_tree(t, &ref);
    emt_tree_destroy(&ref);
    free(ranks);
    free(lens);
}

int main(void) {
    emt_dynamic_tree dt;
    CHECK_OK(emt_dynamic_tree_init(&dt, 8, 3, K));
    /* before any selection: the root alone */
    CHECK_EQ_INT(emt_dynamic_tree_build(&dt, 5)->n_nodes, 1);

    /* level 0: .6 .3 .1   level 1: .5 .4 .05   level 2: .9 .05 .05
     * path probabilities: [0] .6, [0,0] .3, [0,0,0] .27, [0,1] .24, [1] .3,
     * [1,0] .15, [1,1] .12, [0,1,0] .216, [0,0,1] .015 ...
     * best-first: [0] .6, then .3 [1] or [0,0] (tie: whichever first, both
     * within the top 3), [0,0,0] .27, [0,1] .24, [0,1,0] .216, [1,0] .15 */
    const float cq[3 * K] = { 0.6f, 0.3f, 0.1f, 0.5f, 0.4f, 0.05f, 0.9f, 0.05f, 0.05f };
    emt_dynamic_tree_select(&dt, cq, K, 3);
    CHECK_EQ_INT(dt.n_selected, 8);
    CHECK_NEAR(dt.expected[1], 1.0, 1e-6);
    CHECK_NEAR(dt.expected[2], 1.6, 1e-6);
    CHECK_NEAR(dt.expected[4], 1.0 + 0.6 + 0.3 + 0.3, 1e-6);
    CHECK_NEAR(dt.expected[5], 2.2 + 0.27, 1e-6);
    CHECK_NEAR(dt.expected[7], 2.47 + 0.24 + 0.216, 1e-5);
    for (int32_t n = 2; n <= 8; n++) CHECK(dt.expected[n] >= dt.expected[n - 1]); /* non-increasing gains */
    check_against_compile(&dt, 1, "[]");
    check_against_compile(&dt, 2, "[[0]]");
    check_against_compile(&dt, 4, "[[0],[1],[0,0]]");
    check_against_compile(&dt, 5, "[[0],[1],[0,0],[0,0,0]]");
    check_against_compile(&dt, 7, "[[0],[1],[0,0],[0,1],[0,0,0],[0,1,0]]");
    check_against_compile(&dt, 8, "[[0],[1],[0,0],[0,1],[1,0],[0,0,0],[0,1,0]]");
    /* asking for more than selected: clamped */
    CHECK_EQ_INT(emt_dynamic_tree_build(&dt, 100)->n_nodes, 8);

    /* a confident chain: the tree grows deep, not wide */
    const float chain[3 * K] = { 0.95f, 0.02f, 0.01f, 0.95f, 0.02f, 0.01f, 0.95f, 0.02f, 0.01f };
    emt_dynamic_tree_select(&dt, chain, K, 3);
    check_against_compile(&dt, 4, "[[0],[0,0],[0,0,0]]");
    /* uncertain heads: wide, not deep */
    const float flat[3 * K] = { 0.3f, 0.3f, 0.3f, 0.1f, 0.05f, 0.05f, 0.1f, 0.05f, 0.05f };
    emt_dynamic_tree_select(&dt, flat, K, 3);
    check_against_compile(&dt, 4, "[[0],[1],[2]]");
    /* one level only: at most 1 + K nodes */
    emt_dynamic_tree_select(&dt, cq, K, 1);
    CHECK_EQ_INT(dt.n_selected, 1 + K);
    CHECK_NEAR(dt.expected[8], 2.0, 1e-6);
    check_against_compile(&dt, 8, "[[0],[1],[2]]");
    /* a calibrated rank order that is not the heads' order: rank 1 first */
    const float swapped[1 * K] = { 0.2f, 0.7f, 0.1f };
    emt_dynamic_tree_select(&dt, swapped, K, 1);
    check_against_compile(&dt, 2, "[[1]]");
    emt_dynamic_tree_free(&dt);

    CHECK_ERR(emt_dynamic_tree_init(&dt, 0, 3, K), ENTMTP_ERR_INVALID_CONFIG, "dynamic tree");
    CHECK_ERR(emt_dynamic_tree_init(&dt, 8, 3, 65), ENTMTP_ERR_INVALID_CONFIG, "dynamic tree");
    return emt_test_finish("test_dynamic_tree");
}
