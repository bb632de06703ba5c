/* Per-tree step-time model for one session on one device: what a step with
 * bank tree k costs, in seconds. Starts from the bank's stage-2 timings
 * (mean accept length / tokens per second of each tree, measured by
 * `entmtp search`), or from a node-count guess where the bank has none, and
 * learns online from the observed step times: a per-tree relative cost that
 * follows its own tree's steps, times one device scale that follows every
 * step (so a machine that slows down, a longer context or faster kernels move
 * all trees at once, and a tree not chosen for a while is not left stale). */
#ifndef EMT_COST_MODEL_H
#define EMT_COST_MODEL_H

#include "bank/tree.h"

typedef struct emt_cost_model {
    int32_t n_trees;
    double *relative; /* [n_trees] cost of tree k in device-scale units */
    int64_t *n_obs;   /* [n_trees] steps observed with tree k */
    double scale;     /* seconds per relative unit; 0 until the first step */
    int64_t steps;
} emt_cost_model;

/* Priors from the bank; a tree without figures gets the others' mean cost
 * per node times its size, or (none have figures) 1 + n_nodes / 16. */
entmtp_status emt_cost_model_init(emt_cost_model *cm, const entmtp_bank *bank);
void emt_cost_model_free(emt_cost_model *cm);
/* Forget what was learnt (keep the priors' shape: back to init). */
void emt_cost_model_reset(emt_cost_model *cm, const entmtp_bank *bank);
/* A step with tree k took `seconds` (ignored unless finite and > 0). */
void emt_cost_model_observe(emt_cost_model *cm, int32_t k, double seconds);
/* Expected seconds of every tree (relative units before the first step). */
void emt_cost_model_estimate(const emt_cost_model *cm, double *seconds);

/* What a step with each bank tree costs in AR steps, from the bank's
 * figures (seconds per step = mean accept length / tokens per second; an AR
 * step is the root-only tree's, or the per-node line's value at one node).
 * 1 with cost[0..n_trees) filled; 0 when some tree has no figures. */
int emt_cost_model_ar_steps(const entmtp_bank *bank, double *cost);

#endif
