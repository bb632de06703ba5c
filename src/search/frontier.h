/* Growing draft trees one node at a time (Algorithm 1 of the EntMTP paper)
 * and the selection rules of the offline search. Model-free: the rollouts
 * that score candidates live in search.c. */
#ifndef EMT_FRONTIER_H
#define EMT_FRONTIER_H

#include "common/common.h"

#define EMT_GROW_MAX_NODES 256

/* A tree under construction, nodes in insertion order (node 0 = root). A
 * node's children always hold ranks 0..n_children-1: the next child a node
 * can get is rank n_children ("NextChildren" of the paper). */
typedef struct emt_grow_tree {
    int32_t n;
    int32_t parent[EMT_GROW_MAX_NODES];     /* -1 for the root */
    int32_t rank[EMT_GROW_MAX_NODES];       /* child rank, -1 for the root */
    int32_t depth[EMT_GROW_MAX_NODES];      /* root 0 */
    int32_t n_children[EMT_GROW_MAX_NODES];
} emt_grow_tree;

void emt_grow_init(emt_grow_tree *t);

/* NextChildren(T, D): the parents whose next child is a candidate, i.e.
 * nodes shallower than max_depth whose next rank is < topk. Returns the
 * count (<= t->n); the candidate's rank is t->n_children[parent]. */
int32_t emt_grow_candidates(const emt_grow_tree *t, int32_t max_depth, int32_t topk,
                            int32_t *cand_parent);

/* Append the next child of `parent`; returns its node id, or -1 when the
 * tree is full. */
int32_t emt_grow_add(emt_grow_tree *t, int32_t parent);

/* Sum of the child ranks on the path root -> node (the tie-break of
 * Algorithm 1 prefers smaller sums). */
int32_t emt_grow_rank_sum(const emt_grow_tree *t, int32_t node);

/* The tree (plus one next child of each of the n_extra extra_parent nodes)
 * as Medusa choices: flat ranks and per-path lengths, one path per non-root
 * node, node order. ranks needs (t->n + n_extra) * (max depth + 1) slots,
 * lens t->n + n_extra - 1. Returns the number of paths. */
int32_t emt_grow_choices(const emt_grow_tree *t, const int32_t *extra_parent, int32_t n_extra,
                         int32_t *ranks, int32_t *lens);

/* Algorithm 1's choice among candidates: the largest accept sum (all
 * candidates are scored over the same steps), then the smaller rank sum,
 * then the shallower depth, then the first. */
int32_t emt_grow_pick(int32_t n, const int64_t *accept_sum, const int32_t *rank_sum,
                      const int32_t *depth);

/* Pareto set for "fewer nodes, more of value": keep[i] = 1 unless another
 * entry has no more nodes and at least the value, and is better in one of
 * them (exact duplicates: the first is kept). */
void emt_pareto_max(int32_t n, const int32_t *nodes, const double *value, uint8_t *keep);

#endif
