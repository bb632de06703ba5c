/* Dynamic draft trees (the DynaTree / EAGLE-2 idea): each step, the N-node
 * tree whose nodes have the highest path probabilities under the heads'
 * calibrated top-k probabilities, built best-first into buffers allocated
 * once for the largest N, so no step allocates and the verifier sees the
 * usual emt_tree (mask, positions, parents, ranks, retrieve rows).
 *
 * A node's path probability is the product of cq[d][r] along its path
 * (head level d, child rank r); every factor is <= 1, so a child never
 * outranks its parent and the best-first order of selection is
 * non-increasing: the best n-node tree is the first n selected nodes, for
 * every n at once. Its expected accept length is 1 + the sum of their path
 * probabilities (siblings exclude each other under greedy acceptance). */
#ifndef EMT_DYNAMIC_TREE_H
#define EMT_DYNAMIC_TREE_H

#include "bank/tree.h"

typedef struct emt_dynamic_tree {
    int32_t cap_nodes, cap_depth, topk;
    emt_tree tree; /* the last built tree; its arrays are owned here */
    /* best-first selection, in selection order (node 0 = root) */
    int32_t n_selected;
    int32_t *sel_parent, *sel_depth, *sel_rank, *sel_next_sibling; /* [cap_nodes] */
    float *sel_prob;      /* [cap_nodes] path probability */
    float *expected;      /* [cap_nodes + 1]: expected[n] = expected accept length of the best n-node tree */
    int32_t *new_index;   /* [cap_nodes] selection index -> tree node id */
    int32_t *order;       /* [cap_nodes] tree node id -> selection index */
    int32_t *first_child; /* [cap_nodes] children lists among the built nodes, by rank */
    int32_t *fr_parent, *fr_pos; /* [cap_nodes + 1] frontier: parent, position in its level's rank order */
    float *fr_prob;
    int32_t rank_order[EMT_MAX_HEADS][64]; /* ranks of each level by calibrated probability */
    float cq[EMT_MAX_HEADS][64];
    int32_t n_levels;
} emt_dynamic_tree;

/* Buffers for trees of up to cap_nodes nodes, cap_depth levels, top-k topk (<= 64). */
entmtp_status emt_dynamic_tree_init(emt_dynamic_tree *dt, int32_t cap_nodes, int32_t cap_depth, int32_t topk);
void emt_dynamic_tree_free(emt_dynamic_tree *dt);

/* Select best-first up to cap_nodes nodes from the calibrated probabilities
 * cq ([n_levels][cq_stride], n_levels <= cap_depth, ranks < topk) and fill
 * dt->expected[1..n_selected]; expected[n] for n > n_selected repeats the last. */
void emt_dynamic_tree_select(emt_dynamic_tree *dt, const float *cq, int32_t cq_stride, int32_t n_levels);

/* Compile the first n selected nodes (clamped to n_selected) into dt->tree
 * and return it. */
const emt_tree *emt_dynamic_tree_build(emt_dynamic_tree *dt, int32_t n);

#endif
