/* The drafter interface: what a decoding step asks of whatever proposes
 * its tree's tokens. Medusa and Hydra heads (heads.c) and the EAGLE-3 layer
 * (eagle3.c) implement it; draft.c, commit.c and session.c only call
 * through it, so every bank tree, every policy (the dynamic tree
 * included) and typical acceptance work the same with every drafter.
 *
 * A drafter gives, at the current position (after the step's root token):
 *  - the greedy chain's top-k lists, level by level (the policy's features
 *    and the rank-0 path of every tree);
 *  - the tokens of any tree, filled level by level (a node's children are
 *    the top-k of the drafter run on the node's path);
 *  - optionally the same on the device, queued into the step record;
 *  - optionally a state of its own over the context (EAGLE-3: its layer's
 *    KV cache), advanced by the target's hidden states of the rows the
 *    session commits (prefill rows, the accepted path of a step) and rolled
 *    back with them: rows drafted for a tree are never committed. */
#ifndef EMT_DRAFTER_H
#define EMT_DRAFTER_H

#include "bank/tree.h"
#include "common/common.h"

typedef struct emt_step emt_step;

typedef struct emt_drafter {
    const char *name;
    /* The greedy chain's top-k lists, levels [from, to), into
     * S->chain_ids/chain_p (level d at d * topk); `root` is the step's
     * first token. Returns the levels now there (a drafter whose levels
     * come out of one call returns all of them). */
    int32_t (*chain)(entmtp_session *S, int32_t root, int32_t from, int32_t to);
    /* 1: each chain level is a call of its own, so a step may stop after
     * any level (draft.c runs only the levels a tree can use); 0: one call
     * gives every level */
    int by_level;
    /* One level's cost in plain AR steps, as measured (tests/bench/
     * bench_heads), for a session that does not time its levels (one that
     * keeps the bank's costs): the outlook's level_prior. 0: levels are
     * not priced without a clock (the bank's step costs, measured with the
     * Hydra heads, already hold Hydra's own levels). */
    double level_ar_steps;
    /* The node tokens of tree t (depth-sorted, more than one node), level
     * by level: on the host into S->node_tokens with the root given, or
     * (device = 1, only for a drafter with chain_device, whose lists the
     * record then holds) into rec_dev + w_node_tok from the record's root
     * and lists. The chain's lists must cover t's depth. */
    void (*fill_tree)(entmtp_session *S, const emt_tree *t, int32_t root, int device);
    /* The next position's chain, every level, into device ids/probs
     * ([levels][topk]), the root at device address d_root: queued with the
     * commit so the record carries it. NULL: the drafter runs on the host
     * only, and its sessions take the host path. */
    void (*chain_device)(entmtp_session *S, const int32_t *d_root, int32_t *ids, float *probs);
    /* Top-k lists conditioned on a given continuation (path[0] is the
     * root; accuracy tables), levels [0, levels) into chain_ids. */
    void (*path_topk)(entmtp_session *S, const int32_t *path, int32_t levels);
    /* The drafter's own state (NULL for stateless heads). prefill: the
     * session committed n prompt rows starting at row `first`, whose target
     * hidden states are in the forward scratch (rows 0..n-1); commit: a
     * step committed st->n_emit tokens along st->path; reset: the context
     * is gone. */
    entmtp_status (*prefill)(entmtp_session *S, int32_t first, int32_t n);
    entmtp_status (*commit)(entmtp_session *S, const emt_step *st);
    void (*reset)(entmtp_session *S);
    /* the state's buffers, at session creation (after the session's own)
     * and free; NULL for stateless heads */
    entmtp_status (*init)(entmtp_session *S);
    void (*destroy)(entmtp_session *S);
} emt_drafter;

extern const emt_drafter emt_drafter_medusa, emt_drafter_hydra, emt_drafter_eagle3;

/* The drafter of `heads` (by their kind); NULL for NULL heads (heads.c). */
const emt_drafter *emt_drafter_for(const entmtp_heads *heads);

#endif
