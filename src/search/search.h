/* Stage 1 of the offline tree search: the acceptance frontier (Algorithm 1
 * of the EntMTP paper), scored with what-if probes over self-rollouts. */
#ifndef EMT_SEARCH_H
#define EMT_SEARCH_H

#include "search/frontier.h"

/* Tokenized prompts (chat template already applied). */
typedef struct emt_prompts {
    int32_t n;
    int32_t **tokens;
    int32_t *lens;
} emt_prompts;

typedef struct emt_search_config {
    int32_t budget;       /* B: nodes of the largest tree, root included */
    int32_t max_depth;    /* D: deepest path (<= number of heads) */
    int32_t topk;         /* child ranks stay below this (10 in the references) */
    int32_t max_tokens;   /* rollout length per prompt */
    entmtp_session_params session; /* temperature, epsilon, delta, seed, KV capacity */
    entmtp_progress_fn progress;   /* may be NULL; non-zero return cancels */
    void *progress_user_data;
} emt_search_config;

/* One tree of the frontier: |T| = n_nodes after the node was added. */
typedef struct emt_frontier_tree {
    int32_t n_nodes, depth, n_paths;
    int32_t *ranks, *lens;     /* Medusa choices, flat (node order) */
    double accept;             /* biased mean accept length a(nu*), tokens per step */
    int32_t added_rank_sum, added_depth; /* the node chosen at this step */
} emt_frontier_tree;

typedef struct emt_frontier {
    int32_t n;                 /* trees of 2, 3, ... nodes */
    emt_frontier_tree *trees;
    double root_accept;        /* mean accept length of the root-only tree (1 by definition) */
    int64_t probe_steps;       /* probe steps over all iterations */
    int64_t probe_tokens;
    /* accuracy builder: acc[level][rank], accuracy_levels x accuracy_topk */
    double *accuracy;
    int32_t accuracy_levels, accuracy_topk;
} emt_frontier;

/* Algorithm 1: from the root, add one node at a time up to cfg->budget
 * nodes. Each iteration runs one self-rollout per prompt over the joint tree
 * T + NextChildren(T), advancing the trajectory with T, and adds the
 * candidate with the highest mean accept length (ties: smaller rank sum,
 * then shallower). Every intermediate tree is recorded. */
entmtp_status emt_search_acceptance(entmtp_model *model, entmtp_heads *heads,
                                    const emt_prompts *prompts, const emt_search_config *cfg,
                                    emt_frontier *out);
void emt_frontier_free(emt_frontier *f);

/* The Medusa paper's cheaper builder: per-level top-k accuracies of the
 * heads along the model's own continuations of the prompts (teacher-forced
 * tokens for Hydra), then greedy addition of the node with the highest
 * estimated path accuracy (product over its ranks), up to cfg->budget
 * nodes. A tree's `accept` is the estimate 1 + sum of its path accuracies. */
entmtp_status emt_search_accuracy(entmtp_model *model, entmtp_heads *heads,
                                  const emt_prompts *prompts, const emt_search_config *cfg,
                                  emt_frontier *out);

/* Appends the current tree T to the frontier (out->trees has room). */
entmtp_status emt_frontier_record(emt_frontier *out, const emt_grow_tree *T, double accept,
                                  int32_t added_rank_sum);

#endif
