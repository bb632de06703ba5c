/* Tree compilation against arrays derived independently of our code: worked
 * by hand for small trees, and the published reference vectors for the
 * 63-node Medusa/Hydra default (medusa_hydra.md section 2.3). */
#include "bank/tree.h"
#include "check.h"

static entmtp_bank *bank_with(const char *json, int32_t topk, int32_t *idx, entmtp_status *st) {
    entmtp_bank_params bp = entmtp_bank_default_params();
    bp.topk = topk;
    entmtp_bank *b = NULL;
    entmtp_bank_create(&bp, &b);
    *st = entmtp_bank_add_tree_json(b, "t", json, idx);
    return b;
}

static void check_arr(const int32_t *got, const int32_t *want, int32_t n, const char *what) {
    for (int32_t i = 0; i < n; i++)
        if (got[i] != want[i]) {
            fprintf(stderr, "%s[%d] = %d, expected %d\n", what, i, got[i], want[i]);
            emt_test_failures++;
            return;
        }
}

/* [[0],[0,0],[0,1],[0,2],[1],[1,0],[1,1],[1,2]] sorted by (len, path):
 * nodes 1=[0] 2=[1] 3=[0,0] 4=[0,1] 5=[0,2] 6=[1,0] 7=[1,1] 8=[1,2].
 * tree index = rank + 10*(depth-1) + 1: [0,1,2,11,12,13,11,12,13].
 * leaves in reverse sorted order: [1,2]->[0,2,8], [1,1]->[0,2,7], [1,0]->[0,2,6],
 * [0,2]->[0,1,5], [0,1]->[0,1,4], [0,0]->[0,1,3]. */
static void golden_small(void) {
    const char *orders[] = { "[[0],[0,0],[0,1],[0,2],[1],[1,0],[1,1],[1,2]]",
                             "[[1,2],[1],[0,1],[1,0],[0],[0,2],[1,1],[0,0]]" };
    for (int o = 0; o < 2; o++) {
        int32_t idx;
        entmtp_status st;
        entmtp_bank *b = bank_with(orders[o], 10, &idx, &st);
        CHECK_OK(st);
        entmtp_tree_buffers t = { sizeof t };
        CHECK_OK(entmtp_bank_tree_buffers(b, idx, &t));
        CHECK_EQ_INT(t.n_nodes, 9);
        CHECK_EQ_INT(t.depth, 2);
        CHECK_EQ_INT(t.n_leaves, 6);
        const int32_t ti[] = { 0, 1, 2, 11, 12, 13, 11, 12, 13 };
        const int32_t pos[] = { 0, 1, 1, 2, 2, 2, 2, 2, 2 };
        const int32_t ret[] = { 0, 2, 8, 0, 2, 7, 0, 2, 6, 0, 1, 5, 0, 1, 4, 0, 1, 3 };
        const int32_t par[] = { -1, 0, 0, 1, 1, 1, 2, 2, 2 };
        const int32_t rank[] = { -1, 0, 1, 0, 1, 2, 0, 1, 2 };
        check_arr(t.tree_indices, ti, 9, "tree_indices");
        check_arr(t.position_ids, pos, 9, "position_ids");
        check_arr(t.retrieve_indices, ret, 18, "retrieve_indices");
        check_arr(t.parents, par, 9, "parents");
        check_arr(t.node_ranks, rank, 9, "node_ranks");
        /* mask row 7 ([1,1]) = root, node 2 ([1]), itself */
        const uint8_t row7[] = { 1, 0, 1, 0, 0, 0, 0, 1, 0 };
        for (int j = 0; j < 9; j++) CHECK_EQ_INT(t.attn_mask[7 * 9 + j], row7[j]);
        const uint8_t row0[] = { 1, 0, 0, 0, 0, 0, 0, 0, 0 };
        for (int j = 0; j < 9; j++) CHECK_EQ_INT(t.attn_mask[j], row0[j]);
        entmtp_bank_free(b);
    }
}

/* A chain [0],[0,0],[0,0,0] with top-k 4: indices 1, 1+4, 1+8; one leaf. */
static void golden_chain_topk(void) {
    int32_t idx;
    entmtp_status st;
    entmtp_bank *b = bank_with("[[0,0,0],[0],[0,0]]", 4, &idx, &st);
    CHECK_OK(st);
    entmtp_tree_buffers t = { sizeof t };
    CHECK_OK(entmtp_bank_tree_buffers(b, idx, &t));
    const int32_t ti[] = { 0, 1, 5, 9 }, ret[] = { 0, 1, 2, 3 };
    check_arr(t.tree_indices, ti, 4, "chain tree_indices");
    check_arr(t.retrieve_indices, ret, 4, "chain retrieve");
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 4; j++) CHECK_EQ_INT(t.attn_mask[i * 4 + j], j <= i);
    entmtp_bank_free(b);
}

/* Mixed depths: [[0],[1],[0,0]] -> nodes 1=[0] 2=[1] 3=[0,0]; leaves reversed:
 * [0,0] -> [0,1,3]; [1] -> [0,2,-1]; [0] is covered. */
static void golden_padding(void) {
    int32_t idx;
    entmtp_status st;
    entmtp_bank *b = bank_with("[[0],[1],[0,0]]", 10, &idx, &st);
    CHECK_OK(st);
    entmtp_tree_buffers t = { sizeof t };
    CHECK_OK(entmtp_bank_tree_buffers(b, idx, &t));
    CHECK_EQ_INT(t.n_leaves, 2);
    const int32_t ret[] = { 0, 1, 3, 0, 2, -1 };
    check_arr(t.retrieve_indices, ret, 6, "padded retrieve");
    entmtp_bank_free(b);
}

static void root_only(void) {
    int32_t idx;
    entmtp_status st;
    entmtp_bank *b = bank_with("[]", 10, &idx, &st);
    CHECK_OK(st);
    entmtp_tree_buffers t = { sizeof t };
    CHECK_OK(entmtp_bank_tree_buffers(b, idx, &t));
    CHECK_EQ_INT(t.n_nodes, 1);
    CHECK_EQ_INT(t.depth, 0);
    CHECK_EQ_INT(t.n_leaves, 1);
    CHECK_EQ_INT(t.retrieve_indices[0], 0);
    CHECK_EQ_INT(t.attn_mask[0], 1);
    entmtp_bank_free(b);
}

/* The published arrays for mc_sim_7b_63 (reference section 2.3). */
static void golden_mc_sim(void) {
    static const int32_t parent[64] = { -1, 0,0,0,0,0,0,0,0,0,0, 1,1,1,1,1,1,1,1,1,1, 2,2,2,2,2,2,2, 3,3,3, 4,4, 5,6,7,8,9,10,
        11,11,11,11,11,11,11,11,11,11, 12,12,12, 13,13, 14,15,16,17,18, 21,21, 28, 39,39 };
    static const int32_t tree_indices[64] = { 0, 1,2,3,4,5,6,7,8,9,10, 11,12,13,14,15,16,17,18,19,20, 11,12,13,14,15,16,17, 11,12,13,
        11,12, 11,11,11,11,11,11, 21,22,23,24,25,26,27,28,29,30, 21,22,23, 21,22, 21,21,21,21,21, 21,22, 21, 31,32 };
    static const int32_t retrieve[42 * 5] = {
        0,1,11,39,63, 0,1,11,39,62, 0,3,28,61,-1, 0,2,21,60,-1, 0,2,21,59,-1, 0,1,18,58,-1,
        0,1,17,57,-1, 0,1,16,56,-1, 0,1,15,55,-1, 0,1,14,54,-1, 0,1,13,53,-1, 0,1,13,52,-1,
        0,1,12,51,-1, 0,1,12,50,-1, 0,1,12,49,-1, 0,1,11,48,-1, 0,1,11,47,-1, 0,1,11,46,-1,
        0,1,11,45,-1, 0,1,11,44,-1, 0,1,11,43,-1, 0,1,11,42,-1, 0,1,11,41,-1, 0,1,11,40,-1,
        0,10,38,-1,-1, 0,9,37,-1,-1, 0,8,36,-1,-1, 0,7,35,-1,-1, 0,6,34,-1,-1, 0,5,33,-1,-1,
        0,4,32,-1,-1, 0,4,31,-1,-1, 0,3,30,-1,-1, 0,3,29,-1,-1, 0,2,27,-1,-1, 0,2,26,-1,-1,
        0,2,25,-1,-1, 0,2,24,-1,-1, 0,2,23,-1,-1, 0,2,22,-1,-1, 0,1,20,-1,-1, 0,1,19,-1,-1 };
    const char *names[] = { "mc_sim_7b_63", "hydra_default" };
    for (int k = 0; k < 2; k++) {
        entmtp_bank *b = NULL;
        CHECK_OK(entmtp_bank_create(NULL, &b));
        int32_t idx;
        CHECK_OK(entmtp_bank_add_builtin(b, names[k], &idx));
        entmtp_tree_buffers t = { sizeof t };
        CHECK_OK(entmtp_bank_tree_buffers(b, idx, &t));
        CHECK_EQ_INT(t.n_nodes, 64);
        CHECK_EQ_INT(t.depth, 4);
        CHECK_EQ_INT(t.n_leaves, 42);
        check_arr(t.parents, parent, 64, "mc_sim parents");
        check_arr(t.tree_indices, tree_indices, 64, "mc_sim tree_indices");
        check_arr(t.retrieve_indices, retrieve, 42 * 5, "mc_sim retrieve");
        int counts[5] = { 0 };
        for (int i = 0; i < 64; i++) counts[t.position_ids[i]]++;
        CHECK_EQ_INT(counts[1], 10);
        CHECK_EQ_INT(counts[2], 28);
        CHECK_EQ_INT(counts[3], 23);
        CHECK_EQ_INT(counts[4], 2);
        /* mask row = self + ancestors + root, from parents */
        for (int i = 0; i < 64; i++) {
            uint8_t want[64] = { 0 };
            want[0] = 1;
            for (int a = i; a > 0; a = parent[a]) want[a] = 1;
            for (int j = 0; j < 64; j++)
                if (t.attn_mask[i * 64 + j] != want[j]) { emt_test_failures++; fprintf(stderr, "mc_sim mask[%d][%d]\n", i, j); i = 64; break; }
        }
        entmtp_bank_free(b);
    }
    /* vicuna_7b_stage2: 64 nodes, depth counts 10/23/23/7, 42 leaves, last rows [0,10,...], [0,9,...] */
    entmtp_bank *b = NULL;
    CHECK_OK(entmtp_bank_create(NULL, &b));
    int32_t idx;
    CHECK_OK(entmtp_bank_add_builtin(b, "medusa_vicuna_7b_stage2", &idx));
    entmtp_tree_buffers t = { sizeof t };
    CHECK_OK(entmtp_bank_tree_buffers(b, idx, &t));
    CHECK_EQ_INT(t.n_nodes, 64);
    CHECK_EQ_INT(t.n_leaves, 42);
    int counts[5] = { 0 };
    for (int i = 0; i < 64; i++) counts[t.position_ids[i]]++;
    CHECK_EQ_INT(counts[1], 10);
    CHECK_EQ_INT(counts[2], 23);
    CHECK_EQ_INT(counts[3], 23);
    CHECK_EQ_INT(counts[4], 7);
    const int32_t last2[] = { 0, 10, -1, -1, -1, 0, 9, -1, -1, -1 };
    check_arr(t.retrieve_indices + 40 * 5, last2, 10, "vicuna last rows");
    entmtp_bank_free(b);
}

static void validation(void) {
    entmtp_bank_params bp = entmtp_bank_default_params();
    bp.max_depth = 3;
    bp.max_nodes = 5;
    entmtp_bank *b = NULL;
    CHECK_OK(entmtp_bank_create(&bp, &b));
    CHECK_ERR(entmtp_bank_add_tree_json(b, "a", "[[0],[1,2]]", NULL), ENTMTP_ERR_INVALID_TREE, "path [1,2]: prefix [1] missing");
    CHECK_ERR(entmtp_bank_add_tree_json(b, "a", "[[0],[0]]", NULL), ENTMTP_ERR_INVALID_TREE, "path [0] appears twice");
    CHECK_ERR(entmtp_bank_add_tree_json(b, "a", "[[0],[-1]]", NULL), ENTMTP_ERR_INVALID_TREE, "rank -1");
    CHECK_ERR(entmtp_bank_add_tree_json(b, "a", "[[10]]", NULL), ENTMTP_ERR_INVALID_TREE, "rank 10 outside [0, 10)");
    CHECK_ERR(entmtp_bank_add_tree_json(b, "a", "[[0],[0,0],[0,0,0],[0,0,0,0]]", NULL), ENTMTP_ERR_INVALID_TREE, "depth 4");
    CHECK_ERR(entmtp_bank_add_tree_json(b, "a", "[[0],[1],[2],[3],[4]]", NULL), ENTMTP_ERR_INVALID_TREE, "6 nodes");
    CHECK_ERR(entmtp_bank_add_tree_json(b, "a", "[[0],[]]", NULL), ENTMTP_ERR_INVALID_TREE, "empty");
    CHECK_ERR(entmtp_bank_add_tree_json(b, "a", "[[0.5]]", NULL), ENTMTP_ERR_INVALID_TREE, "not an integer");
    CHECK_ERR(entmtp_bank_add_tree_json(b, "a", "[[0],", NULL), ENTMTP_ERR_INVALID_TREE, "JSON");
    CHECK_ERR(entmtp_bank_add_tree_json(b, "a", "{\"x\":1}", NULL), ENTMTP_ERR_INVALID_TREE, "list of paths");
    CHECK_ERR(entmtp_bank_add_tree_json(b, "", "[]", NULL), ENTMTP_ERR_INVALID_TREE, "name");
    const int32_t ranks[] = { 0, 1, 0 }, lens[] = { 1, 2 }; /* [0], [1,0]: prefix [1] missing */
    CHECK_ERR(entmtp_bank_add_tree(b, "c", ranks, lens, 2, NULL), ENTMTP_ERR_INVALID_TREE, "path [1,0]: prefix [1] missing");
    CHECK_EQ_INT(entmtp_bank_size(b), 0); /* failed adds leave the bank unchanged */
    const int32_t ok_r[] = { 0, 0, 0 }, ok_l[] = { 1, 2 };
    int32_t idx = -1;
    CHECK_OK(entmtp_bank_add_tree(b, "c", ok_r, ok_l, 2, &idx));
    CHECK_EQ_INT(idx, 0);
    CHECK_ERR(entmtp_bank_add_tree(b, "c", ok_r, ok_l, 2, NULL), ENTMTP_ERR_INVALID_TREE, "already has a tree named 'c'");
    CHECK_ERR(entmtp_bank_add_builtin(b, "no_such_tree", NULL), ENTMTP_ERR_NOT_FOUND, "no_such_tree");
    CHECK_EQ_INT(entmtp_bank_size(b), 1);
    entmtp_bank_free(b);
    bp = entmtp_bank_default_params();
    bp.max_depth = 0;
    CHECK_ERR(entmtp_bank_create(&bp, &b), ENTMTP_ERR_INVALID_CONFIG, "max_depth");
}

int main(void) {
    golden_small();
    golden_chain_topk();
    golden_padding();
    root_only();
    golden_mc_sim();
    validation();
    int n = 0;
    while (entmtp_builtin_tree_name(n)) n++;
    CHECK_EQ_INT(n, 9);
    CHECK(entmtp_builtin_tree_name(-1) == NULL);
    return emt_test_finish("test_tree");
}
