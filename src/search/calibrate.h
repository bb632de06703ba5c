/* Stage 2 of the offline tree search and the policy calibration (internal:
 * `entmtp search` drives them). Measuring is the caller's: it times the
 * trees and the candidate policies on its prompts and hands the figures in;
 * everything decided from the figures (which trees form the bank, the
 * candidate grid, the winning policy of each shape, the bank's default
 * policy) is decided here. */
#ifndef EMT_SEARCH_CALIBRATE_H
#define EMT_SEARCH_CALIBRATE_H

#include "search/search.h"

/* One tree of the frontier as stage 2 sees it: row 0 is the root-only tree,
 * row i the frontier's tree i - 1. The caller fills self and tps (measured
 * with each tree's own proposals, mask and KV). */
typedef struct emt_frontier_row {
    char name[32];          /* "n<nodes>d<depth>" */
    int32_t nodes, depth;
    double biased;          /* the builder's estimate of the accept length */
    double self, tps;       /* measured: accept length, tokens per second */
    uint8_t keep;           /* on the (nodes, tokens/s) Pareto set */
} emt_frontier_row;

/* The rows of a frontier (fr->n + 1, root-only first) and a bank of all
 * their trees in that order, to time them. *rows is malloc'ed. */
entmtp_status emt_frontier_rows(const emt_frontier *fr, const entmtp_bank_params *bp,
                                emt_frontier_row **rows, entmtp_bank **bank);

/* Stage 2: marks the Pareto set over (nodes, tokens/s), then builds the bank
 * of those trees (smallest first, with their figures). *best is the
 * fastest kept row; *static_tree its index in the bank. */
entmtp_status emt_stage2_bank(const emt_frontier *fr, emt_frontier_row *rows, int32_t n_rows,
                              const entmtp_bank_params *bp, entmtp_bank **bank, int32_t *best,
                              int32_t *static_tree);

enum { EMT_CAL_QUANTILES = 5, EMT_CAL_ALPHAS = 4, EMT_CAL_MAX_CONSERVATIVE = 3, EMT_CAL_MAX_LADDER = 4,
       EMT_CAL_MAX_CANDIDATES = 1 + EMT_CAL_MAX_CONSERVATIVE * EMT_CAL_QUANTILES + EMT_CAL_ALPHAS };

/* The calibration grid. cand[0] is the static policy on the fastest tree
 * (the in-run reference). Hysteresis: the static tree as aggressive, each
 * smaller bank tree (up to 3) as conservative, tau at the 0.1 .. 0.9
 * quantiles of s. Ladder over the (up to) four bank trees ending at the
 * static one, thresholds at the alpha*b/K quantiles of s (alpha 0.25 .. 1),
 * skipped when s is too concentrated for distinct thresholds. One dimension
 * is swept per shape; knob[k] is that value. The ladder candidates point
 * into this struct: do not copy it while they are in use. */
typedef struct emt_calibration {
    int32_t n;
    entmtp_policy_config cand[EMT_CAL_MAX_CANDIDATES];
    double knob[EMT_CAL_MAX_CANDIDATES];
    double tps[EMT_CAL_MAX_CANDIDATES];     /* filled by the caller */
    float ladder_thresholds[EMT_CAL_ALPHAS][EMT_CAL_MAX_LADDER - 1];
    int32_t ladder_trees[EMT_CAL_ALPHAS][EMT_CAL_MAX_LADDER];
} emt_calibration;

/* The policies a search stores: static on the fastest tree, the best
 * hysteresis and ladder candidates (when calibrated) and their figures. */
typedef struct emt_policy_choice {
    entmtp_policy_config stat, hyst, ladder;
    float ladder_thresholds[EMT_CAL_MAX_LADDER - 1];
    int32_t ladder_trees[EMT_CAL_MAX_LADDER];
    double static_tps, hyst_tps, ladder_tps;
    int have_hyst, have_ladder;
} emt_policy_choice;

/* Defaults of every shape; static on `static_tree` at `static_tps`. */
void emt_policy_choice_init(emt_policy_choice *c, int32_t static_tree, double static_tps);

/* The grid from the path values s the static policy saw (sorted in place). */
void emt_calibration_grid(emt_calibration *cal, float *s, int64_t n_s, const emt_policy_choice *c);

/* With cal->tps measured: static's figure becomes the reference, and the
 * fastest candidate of each shape is kept in c (ties: the first). */
void emt_calibration_pick(const emt_calibration *cal, emt_policy_choice *c);

/* Stores the policies in the bank, the default (first) being the shape that
 * beat static by the most (hysteresis wins a tie with the ladder), else
 * static; then the others and UCB. */
entmtp_status emt_policy_choice_store(const emt_policy_choice *c, entmtp_bank *bank);

#endif
