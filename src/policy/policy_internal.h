/* Policy kinds and inputs that are not in the public header yet: the
 * expected-throughput policy needs, besides the features, each tree's
 * expected accept length and expected step time, which the session computes
 * (engine/features.c, bank/cost_model.c). Reachable by name through
 * entmtp_policy_kind_from_name("throughput") and the bank's "policy" object. */
#ifndef EMT_POLICY_INTERNAL_H
#define EMT_POLICY_INTERNAL_H

#include "common/common.h"

/* argmax over trees of expected accepted tokens / expected step seconds */
#define EMT_POLICY_THROUGHPUT ENTMTP_POLICY_THROUGHPUT
/* the same choice over node budgets N (one per bank tree, N = its node
 * count), where the tree of budget N is built each step from the heads'
 * probabilities (engine/dynamic_tree.c) instead of the bank's fixed shape */
#define EMT_POLICY_DYNAMIC ENTMTP_POLICY_DYNAMIC
#define EMT_POLICY_KIND_COUNT 7 /* kinds 0..6; CUSTOM (4) is never stored in a bank */

/* What the session knows about each tree at this step (n_trees entries). */
typedef struct emt_tree_outlook {
    const float *expected_accept;   /* tokens a step with tree k is expected to emit (>= 1) */
    const double *expected_seconds; /* seconds a step with tree k is expected to take (> 0) */
    /* The bank's root-only tree (a plain AR step) and what a plain step
     * costs, no drafter work included. A session sets both; an outlook
     * without them (ar_tree < 0, ar_seconds 0, e.g. one made from the
     * features) has the policy take the cheapest tree expected to emit
     * exactly 1 token, at its expected_seconds. */
    int32_t ar_tree;
    double ar_seconds;
} emt_tree_outlook;

/* entmtp_policy_select with the per-tree outlook (NULL when the caller has
 * none: the throughput policy then takes the features' expected_accept and
 * expected_seconds, and fails with ENTMTP_ERR_STATE without them). */
entmtp_status emt_policy_select_outlook(entmtp_policy *p, const entmtp_features *f,
                                        const emt_tree_outlook *outlook, int32_t n_trees,
                                        int32_t *out_index);
/* Whether select needs the outlook (the session then computes it), and
 * whether the chosen index names a node budget for a dynamic tree. */
int emt_policy_needs_outlook(const entmtp_policy *p);
int emt_policy_wants_dynamic_tree(const entmtp_policy *p);
/* Whether the session computes the outlook and shows it in the features:
 * the policies that need it, and custom policies (their own rule may). */
int emt_policy_shows_outlook(const entmtp_policy *p);
/* Whether this step should draft at all. 0 when the throughput or dynamic
 * policy's payoff gate has seen drafting steps emit fewer tokens than plain
 * steps would have in the same time (measured accept length against the
 * cost model's step time) and is waiting before its next probe: select
 * then returns the root-only tree without reading the outlook, so the
 * session skips the drafter (docs/policies.md, "Never slower than AR").
 * 1 for every other policy and state. */
int emt_policy_drafts(const entmtp_policy *p);
/* The static policy's tree index; -1 for every other kind. */
int32_t emt_policy_static_tree(const entmtp_policy *p);

/* Policy settings as the library keeps them: the public config, whose arrays
 * (thresholds, ladder_trees) point into storage held beside it, so a policy
 * or a bank never keeps a pointer into the caller's memory. */
typedef struct emt_policy_settings {
    entmtp_policy_config cfg; /* cfg.thresholds and cfg.ladder_trees point below */
    float thresholds[EMT_MAX_LADDER - 1];
    int32_t ladder_trees[EMT_MAX_LADDER];
} emt_policy_settings;

/* Defaults for `kind` (ladder: bin b -> tree b), arrays pointing into `out`. */
void emt_policy_settings_default(emt_policy_settings *out, entmtp_policy_kind kind);
/* Take a caller's config: versioned copy over the defaults of its kind, the
 * arrays copied in (n_thresholds checked against the limit), then validated
 * (ENTMTP_ERR_INVALID_CONFIG naming the field). */
entmtp_status emt_policy_settings_from(emt_policy_settings *out, const entmtp_policy_config *config);
/* Copy settings, re-pointing the arrays at `dst`'s own storage. */
void emt_policy_settings_copy(emt_policy_settings *dst, const emt_policy_settings *src);

#endif
