/* Per-tree expected accept lengths from the heads' top-k probabilities,
 * calibrated per depth and rank from the accepts the session observes.
 *
 * A node at depth d+1 with child rank r is accepted only if its parent is;
 * given that, the chance is q[d][r] (head d's rank-r probability on the
 * greedy chain, the best estimate the step has without drafting the tree)
 * times a per-(d, r) factor learnt from outcomes. Siblings exclude each other
 * under greedy acceptance (one argmax), so a tree's expected accept length is
 * 1 + the sum over its non-root nodes of the product of those chances along
 * the node's path. */
#ifndef EMT_FEATURES_H
#define EMT_FEATURES_H

#include "bank/cost_model.h"
#include "bank/tree.h"
#include "engine/dynamic_tree.h"

#define EMT_CALIB_RANKS 8 /* ranks beyond share the last factor */

typedef struct emt_accept_calib {
    /* decayed sums over reached nodes: accepted (hit) and predicted (pred) */
    double hit[EMT_MAX_HEADS][EMT_CALIB_RANKS];
    double pred[EMT_MAX_HEADS][EMT_CALIB_RANKS];
} emt_accept_calib;

void emt_accept_calib_reset(emt_accept_calib *c);

/* The calibrated conditional acceptance of a node at head level d (0-based),
 * rank r, whose head probability is p. */
float emt_accept_calib_prob(const emt_accept_calib *c, int32_t d, int32_t r, float p);

/* The calibrated table cq[d][r] = emt_accept_calib_prob(c, d, r, q[d][r])
 * for d < n_heads, r < topk; cq has stride cq_stride. */
void emt_accept_calib_table(const emt_accept_calib *c, const float *q, int32_t q_stride, int32_t n_heads,
                            int32_t topk, float *cq, int32_t cq_stride);

/* Expected accept length of every tree in the bank. q: [n_heads][q_stride]
 * head probabilities (top-k, k = topk <= q_stride); node_prob: scratch of the
 * bank's largest node count; out: [n_trees]. */
void emt_features_expected_accept(const emt_accept_calib *c, const float *q, int32_t q_stride, int32_t n_heads,
                                  int32_t topk, const entmtp_bank *bank, float *node_prob, float *out);

/* Learn from a step with tree t: row = the accepted path's node ids (depth+1
 * wide), acc = tokens accepted beyond the root. */
void emt_accept_calib_observe(emt_accept_calib *c, const emt_tree *t, const float *q, int32_t q_stride,
                              int32_t n_heads, int32_t topk, const int32_t *row, int32_t acc);

/* What a session keeps to tell a policy each tree's expected accept length
 * and step time: the calibration, the cost model and their per-step output.
 * Both learn across entmtp_session_reset (they describe the heads and the
 * device, not the conversation). */
typedef struct emt_outlook_state {
    emt_accept_calib calib;
    emt_cost_model cost;
    emt_dynamic_tree dynamic; /* budgets up to the bank's largest tree */
    float *expected_accept;   /* [n_trees] */
    double *expected_seconds; /* [n_trees] */
    float *node_prob;         /* [largest tree] scratch */
    /* steps in a row without a head call (after EMT_OUTLOOK_BLIND_STEPS the
     * heads run anyway, so a change of text is seen) */
    int32_t blind_steps;
    /* Decayed counts, per head level d, of the steps whose accepted path
     * reached the rank-0 chain's node at depth d, and of those that also
     * accepted its rank-0 child: the chance that a level not yet run
     * passes, which decides whether it is worth running (see
     * emt_outlook_deeper_may_pay). Before any level runs, level 0's rate
     * is the step's only guide. */
    double chain_reached[EMT_MAX_HEADS], chain_passed[EMT_MAX_HEADS];
    /* Seconds of one Hydra level run on the host (a decayed mean; 0 until
     * one is timed). A step that has run L levels has spent them whatever
     * it chooses: emt_outlook_compute adds the levels beyond a tree's depth
     * to that tree's expected seconds. */
    double level_seconds;
    /* A drafter level's cost in plain steps where no level has been timed
     * (a session that keeps the bank's costs never times one): the
     * drafter's measured figure (emt_drafter.level_ar_steps), so a step
     * that ran levels it then did not use is priced in that mode too. */
    double level_prior;
    /* The bank's root-only tree (-1: none) and the expected seconds of a
     * plain step with it, no drafter levels added (set by
     * emt_outlook_compute): the payoff gate's unit (policy_internal.h). */
    int32_t ar_tree;
    double ar_seconds;
} emt_outlook_state;

#define EMT_OUTLOOK_BLIND_STEPS 4

entmtp_status emt_outlook_init(emt_outlook_state *o, const entmtp_bank *bank, int32_t n_heads, int32_t topk);
void emt_outlook_free(emt_outlook_state *o);
/* Fill expected_accept and expected_seconds for this step, n_heads levels
 * run; with `dynamic`, expected_accept[k] is that of the best dynamic tree
 * of tree k's size. expected_seconds[k] is the cost model's time for a step
 * with tree k plus the levels already run beyond its depth. */
void emt_outlook_compute(emt_outlook_state *o, const entmtp_bank *bank, const float *q, int32_t q_stride,
                         int32_t n_heads, int32_t topk, int dynamic);
/* Whether running head level `levels` (0-based; `levels` levels are in q)
 * is expected to lead to a faster step than the best choice available now:
 * some deeper choice's expected accept length, its length over the known
 * levels plus, per unknown level, the chance of getting there (the chance
 * that any path passes the known levels, times the recent pass rate of each
 * unknown level before it on the rank-0 chain, emt_outlook_level_rate),
 * divided by its expected seconds, beats the best expected accept length
 * per second of this outlook. With no level run, the heads run anyway
 * after EMT_OUTLOOK_BLIND_STEPS steps in a row without them, so a change of
 * text is seen. A deeper choice's seconds are those its steps took, heads
 * included, so the estimate counts the head calls it needs. Computes the
 * outlook (as emt_outlook_compute) for `levels` levels; max_levels caps a
 * dynamic tree's depth. (An upper bound here instead of an estimate, each
 * unknown level passing for sure, ran levels that were seldom used: on the
 * CPU a level costs about 5% of an AR step; docs/policies.md.) */
int emt_outlook_deeper_may_pay(emt_outlook_state *o, const entmtp_bank *bank, const float *q, int32_t q_stride,
                               int32_t levels, int32_t max_levels, int32_t topk, int dynamic);
/* The recent rate at which head level d's rank-0 draft was accepted when
 * the step's accepted path reached it (a fresh session: 1/2). */
float emt_outlook_level_rate(const emt_outlook_state *o, int32_t d);
/* The tree to draft for choice k: bank tree k, or the dynamic tree of its
 * size (built from the last emt_outlook_compute). */
const emt_tree *emt_outlook_tree(emt_outlook_state *o, const entmtp_bank *bank, int32_t k, int dynamic);
/* After a step with tree t for choice k: what was accepted and how long it
 * took (seconds; 0: learn nothing of time), of which head_seconds went to
 * the n_heads Hydra levels the host ran (0 when the device ran them: they
 * are then part of every step alike). The cost model learns each tree's
 * time as if the step had run exactly the tree's own levels, so levels run
 * and then not used do not count against the tree that was chosen. */
void emt_outlook_observe(emt_outlook_state *o, const emt_tree *t, int32_t k, const float *q, int32_t q_stride,
                         int32_t n_heads, int32_t topk, const int32_t *row, int32_t acc, double seconds,
                         double head_seconds);

#endif
