/* A compiled draft tree: the Medusa "choices" plus the verifier buffers of
 * the public reference (generate_medusa_buffers). Pure data; no model. */
#ifndef EMT_TREE_H
#define EMT_TREE_H

#include "common/common.h"

typedef struct emt_tree {
    char *name;
    /* choices, sorted by (length, lexicographic) as the reference does */
    int32_t n_paths;
    int32_t *path_offsets;   /* n_paths + 1 */
    int32_t *ranks;          /* path_offsets[n_paths] entries */
    /* compiled buffers; node 0 is the root, node i>0 is sorted path i-1 */
    int32_t n_nodes;         /* n_paths + 1 */
    int32_t depth;           /* longest path */
    int32_t topk;            /* tree_indices stride */
    uint8_t *attn_mask;      /* n_nodes * n_nodes */
    int32_t *tree_indices;   /* n_nodes */
    int32_t *position_ids;   /* n_nodes (= node depth) */
    int32_t *parents;        /* n_nodes, -1 root */
    int32_t *node_ranks;     /* n_nodes, -1 root */
    int32_t n_leaves;
    int32_t *retrieve_indices; /* n_leaves * (depth + 1), -1 padded */
    /* measured figures (0 = unknown) */
    float mean_accept_length;
    float tokens_per_second;
} emt_tree;

/* Validate and compile. Limits as in entmtp_bank_params. On failure returns
 * ENTMTP_ERR_INVALID_TREE naming the offending path and leaves *out zeroed. */
entmtp_status emt_tree_compile(const char *name, const int32_t *ranks, const int32_t *path_lengths,
                               int32_t n_paths, int32_t topk, int32_t max_depth, int32_t max_nodes,
                               emt_tree *out);
void emt_tree_destroy(emt_tree *tree);

/* Parse choices JSON ([[0],[0,1],...]) into flat arrays (free() both). */
entmtp_status emt_parse_choices_json(const char *json, int32_t **ranks, int32_t **path_lengths,
                                     int32_t *n_paths);

/* Built-in tree by name: flat arrays in static storage. */
entmtp_status emt_builtin_tree(const char *name, const int32_t **ranks,
                               const int32_t **path_lengths, int32_t *n_paths);

/* Bank internals the engine uses (read-only). */
const emt_tree *emt_bank_tree(const entmtp_bank *bank, int32_t index);
int32_t emt_bank_max_nodes_used(const entmtp_bank *bank); /* largest n_nodes in the bank */
int32_t emt_bank_max_depth_used(const entmtp_bank *bank);

#endif
