/* Per-tree step-time model: bank priors, learnt online. See cost_model.h. */
#include "bank/cost_model.h"

#include <math.h>
#include <stdlib.h>

/* How fast the estimates follow. On a shared machine one step's time is
 * noise of tens of percent, and a tree's cost differs from its neighbour's
 * by less (a verify row is about a fifth of an AR step on a 2-core CPU), so
 * a tree's own relative cost moves slowly: its prior counts as
 * EMT_COST_TREE_PRIOR observations and the rate settles at 1/50 (a window of
 * about 50 of its steps). The device scale, which every step informs, moves
 * 1/20 of the way (in log space) on every step. */
#define EMT_COST_TREE_PRIOR 20
#define EMT_COST_TREE_RATE_MIN 0.02
#define EMT_COST_SCALE_RATE 0.05
/* One step on a busy machine may take several times its usual time: an
 * observation counts at most this factor away from the current estimate. */
#define EMT_COST_CLAMP 1.5

static void set_priors(emt_cost_model *cm, const entmtp_bank *bank) {
    double per_node = 0;
    int32_t n_known = 0;
    for (int32_t k = 0; k < cm->n_trees; k++) {
        const emt_tree *t = emt_bank_tree(bank, k);
        cm->relative[k] = 0;
        cm->n_obs[k] = 0;
        if (t->tokens_per_second > 0 && t->mean_accept_length >= 1) {
            cm->relative[k] = (double)t->mean_accept_length / (double)t->tokens_per_second;
            per_node += cm->relative[k] / t->n_nodes;
            n_known++;
        }
    }
    for (int32_t k = 0; k < cm->n_trees; k++) {
        if (cm->relative[k] > 0) continue;
        int32_t n = emt_bank_tree(bank, k)->n_nodes;
        cm->relative[k] = n_known ? per_node / n_known * n : 1.0 + n / 16.0;
    }
    cm->scale = 0;
    cm->steps = 0;
}

entmtp_status emt_cost_model_init(emt_cost_model *cm, const entmtp_bank *bank) {
    memset(cm, 0, sizeof *cm);
    cm->n_trees = entmtp_bank_size(bank);
    if (cm->n_trees < 1) return emt_fail(ENTMTP_ERR_INVALID_CONFIG, "cost model: the bank is empty");
    cm->relative = emt_calloc((size_t)cm->n_trees, sizeof *cm->relative);
    cm->n_obs = emt_calloc((size_t)cm->n_trees, sizeof *cm->n_obs);
    if (!cm->relative || !cm->n_obs) {
        emt_cost_model_free(cm);
        return ENTMTP_ERR_OUT_OF_MEMORY;
    }
    set_priors(cm, bank);
    return ENTMTP_OK;
}

void emt_cost_model_free(emt_cost_model *cm) {
    free(cm->relative);
    free(cm->n_obs);
    memset(cm, 0, sizeof *cm);
}

void emt_cost_model_reset(emt_cost_model *cm, const entmtp_bank *bank) {
    if (cm->relative) set_priors(cm, bank);
}

void emt_cost_model_observe(emt_cost_model *cm, int32_t k, double seconds) {
    if (k < 0 || k >= cm->n_trees || !isfinite(seconds) || !(seconds > 0)) return;
    if (cm->scale <= 0) cm->scale = seconds / cm->relative[k];
    double target = seconds / cm->scale;
    double lo = cm->relative[k] / EMT_COST_CLAMP, hi = cm->relative[k] * EMT_COST_CLAMP;
    target = target < lo ? lo : target > hi ? hi : target;
    /* the device scale takes a share of the surprise, the tree's own cost the rest */
    double shift = pow(target / cm->relative[k], EMT_COST_SCALE_RATE);
    cm->scale *= shift;
    target /= shift;
    double rate = 1.0 / (double)(cm->n_obs[k] + EMT_COST_TREE_PRIOR);
    if (rate < EMT_COST_TREE_RATE_MIN) rate = EMT_COST_TREE_RATE_MIN;
    cm->relative[k] += rate * (target - cm->relative[k]);
    cm->n_obs[k]++;
    cm->steps++;
}

void emt_cost_model_estimate(const emt_cost_model *cm, double *seconds) {
    double s = cm->scale > 0 ? cm->scale : 1.0;
    for (int32_t k = 0; k < cm->n_trees; k++) seconds[k] = cm->relative[k] * s;
}

int emt_cost_model_ar_steps(const entmtp_bank *bank, double *cost) {
    int32_t n = entmtp_bank_size(bank);
    if (n < 1) return 0;
    double ar = 0, sn = 0, ss = 0, snn = 0, sns = 0;
    int32_t min_nodes = INT32_MAX, max_nodes = 0;
    for (int32_t k = 0; k < n; k++) {
        const emt_tree *t = emt_bank_tree(bank, k);
        if (!(t->tokens_per_second > 0 && t->mean_accept_length >= 1)) return 0; /* no figures: no estimate */
        double sec = (double)t->mean_accept_length / (double)t->tokens_per_second;
        cost[k] = sec;
        if (t->n_nodes == 1 && (ar == 0 || sec < ar)) ar = sec; /* a root-only tree is an AR step */
        sn += t->n_nodes;
        ss += sec;
        snn += (double)t->n_nodes * t->n_nodes;
        sns += t->n_nodes * sec;
        if (t->n_nodes < min_nodes) min_nodes = t->n_nodes;
        if (t->n_nodes > max_nodes) max_nodes = t->n_nodes;
    }
    if (ar == 0) {
        /* no root-only tree: a step's cost is about linear in its nodes (a
         * fixed pass over the weights plus a share per verified row), so
         * extrapolate the least-squares line to one node */
        if (min_nodes == max_nodes) return 0;
        double slope = (n * sns - sn * ss) / (n * snn - sn * sn);
        ar = (ss - slope * sn) / n + slope;
        if (!(ar > 0)) return 0;
    }
    for (int32_t k = 0; k < n; k++) cost[k] /= ar;
    return 1;
}
