/* Calibrated per-tree expected accept lengths; see features.h. */
#include "engine/features.h"

#include <stdlib.h>

/* Pseudo-counts at factor 1 (a fresh session trusts the heads' probabilities)
 * and the per-step decay of the sums (a window of about 500 reached nodes per
 * bucket: the factors follow a change of text). */
#define EMT_CALIB_PRIOR 2.0
#define EMT_CALIB_DECAY 0.998

void emt_accept_calib_reset(emt_accept_calib *c) { memset(c, 0, sizeof *c); }

static int32_t rank_bucket(int32_t r) { return r < EMT_CALIB_RANKS ? r : EMT_CALIB_RANKS - 1; }

float emt_accept_calib_prob(const emt_accept_calib *c, int32_t d, int32_t r, float p) {
    int32_t b = rank_bucket(r);
    double f = (c->hit[d][b] + EMT_CALIB_PRIOR) / (c->pred[d][b] + EMT_CALIB_PRIOR);
    double v = f * (double)p;
    return v < 0 ? 0.0f : v > 1 ? 1.0f : (float)v;
}

/* q of the node at head level d, rank r; 0 where the step has no estimate */
static float head_prob(const float *q, int32_t q_stride, int32_t n_heads, int32_t topk, int32_t d, int32_t r) {
    return d < n_heads && r < topk ? q[(size_t)d * q_stride + r] : 0.0f;
}

void emt_accept_calib_table(const emt_accept_calib *c, const float *q, int32_t q_stride, int32_t n_heads,
                            int32_t topk, float *cq, int32_t cq_stride) {
    for (int32_t d = 0; d < n_heads && d < EMT_MAX_HEADS; d++)
        for (int32_t r = 0; r < topk; r++)
            cq[(size_t)d * cq_stride + r] = emt_accept_calib_prob(c, d, r, q[(size_t)d * q_stride + r]);
}

void emt_features_expected_accept(const emt_accept_calib *c, const float *q, int32_t q_stride, int32_t n_heads,
                                  int32_t topk, const entmtp_bank *bank, float *node_prob, float *out) {
    /* the calibrated table once per step; the trees then only multiply and add */
    float cq[EMT_MAX_HEADS][64];
    int32_t kmax = topk < 64 ? topk : 64;
    emt_accept_calib_table(c, q, q_stride, n_heads, kmax, &cq[0][0], 64);
    int32_t n_trees = entmtp_bank_size(bank);
    for (int32_t k = 0; k < n_trees; k++) {
        const emt_tree *t = emt_bank_tree(bank, k);
        double e = 1.0;
        node_prob[0] = 1.0f;
        for (int32_t i = 1; i < t->n_nodes; i++) {
            int32_t d = t->position_ids[i] - 1, r = t->node_ranks[i];
            float p = d < n_heads && r < kmax ? cq[d][r] : 0.0f;
            node_prob[i] = node_prob[t->parents[i]] * p;
            e += node_prob[i];
        }
        out[k] = (float)e;
    }
}

void emt_accept_calib_observe(emt_accept_calib *c, const emt_tree *t, const float *q, int32_t q_stride,
                              int32_t n_heads, int32_t topk, const int32_t *row, int32_t acc) {
    for (int32_t d = 0; d < EMT_MAX_HEADS; d++)
        for (int32_t b = 0; b < EMT_CALIB_RANKS; b++) {
            c->hit[d][b] *= EMT_CALIB_DECAY;
            c->pred[d][b] *= EMT_CALIB_DECAY;
        }
    for (int32_t i = 1; i < t->n_nodes; i++) {
        int32_t depth = t->position_ids[i];
        if (depth > acc + 1 || t->parents[i] != row[depth - 1]) continue; /* parent not accepted: not reached */
        int32_t d = depth - 1, r = t->node_ranks[i];
        if (d >= n_heads || d >= EMT_MAX_HEADS) continue;
        int32_t b = rank_bucket(r);
        c->pred[d][b] += head_prob(q, q_stride, n_heads, topk, d, r);
        c->hit[d][b] += depth <= acc && row[depth] == i;
    }
}

/* ---------------------------------------------------------------- outlook */

entmtp_status emt_outlook_init(emt_outlook_state *o, const entmtp_bank *bank, int32_t n_heads, int32_t topk) {
    memset(o, 0, sizeof *o);
    entmtp_status st = emt_cost_model_init(&o->cost, bank);
    if (st) return st;
    int32_t n = entmtp_bank_size(bank), nodes = emt_bank_max_nodes_used(bank);
    if (nodes < 1) nodes = 1;
    if ((st = emt_dynamic_tree_init(&o->dynamic, nodes, n_heads < EMT_MAX_HEADS ? n_heads : EMT_MAX_HEADS, topk))) {
        emt_outlook_free(o);
        return st;
    }
    o->expected_accept = emt_calloc((size_t)n, sizeof *o->expected_accept);
    o->expected_seconds = emt_calloc((size_t)n, sizeof *o->expected_seconds);
    o->node_prob = emt_calloc((size_t)nodes, sizeof *o->node_prob);
    o->ar_tree = -1;
    for (int32_t k = 0; k < n && o->ar_tree < 0; k++)
        if (emt_bank_tree(bank, k)->n_nodes == 1) o->ar_tree = k;
    if (!o->expected_accept || !o->expected_seconds || !o->node_prob) {
        emt_outlook_free(o);
        return ENTMTP_ERR_OUT_OF_MEMORY;
    }
    return ENTMTP_OK;
}

void emt_outlook_free(emt_outlook_state *o) {
    emt_cost_model_free(&o->cost);
    emt_dynamic_tree_free(&o->dynamic);
    free(o->expected_accept);
    free(o->expected_seconds);
    free(o->node_prob);
    memset(o, 0, sizeof *o);
}

void emt_outlook_compute(emt_outlook_state *o, const entmtp_bank *bank, const float *q, int32_t q_stride,
                         int32_t n_heads, int32_t topk, int dynamic) {
    if (dynamic) {
        /* tree k stands for a dynamic tree of its node count */
        float cq[EMT_MAX_HEADS * 64];
        int32_t levels = n_heads < o->dynamic.cap_depth ? n_heads : o->dynamic.cap_depth;
        emt_accept_calib_table(&o->calib, q, q_stride, levels, topk < 64 ? topk : 64, cq, 64);
        emt_dynamic_tree_select(&o->dynamic, cq, 64, levels);
        for (int32_t k = 0; k < entmtp_bank_size(bank); k++)
            o->expected_accept[k] = o->dynamic.expected[emt_bank_tree(bank, k)->n_nodes];
    } else {
        emt_features_expected_accept(&o->calib, q, q_stride, n_heads, topk, bank, o->node_prob, o->expected_accept);
    }
    emt_cost_model_estimate(&o->cost, o->expected_seconds);
    o->ar_seconds = o->ar_tree >= 0 ? o->expected_seconds[o->ar_tree] : 0.0;
    double level = o->level_seconds > 0 ? o->level_seconds : o->level_prior * o->ar_seconds;
    for (int32_t k = 0; k < entmtp_bank_size(bank) && level > 0; k++) {
        const emt_tree *t = emt_bank_tree(bank, k);
        int32_t depth = dynamic ? t->n_nodes - 1 : t->depth; /* a dynamic tree is at most that deep */
        if (n_heads > depth) o->expected_seconds[k] += level * (n_heads - depth);
    }
}

/* pseudo-counts of the chain pass rates (a fresh session: 1/2) and their
 * per-step decay (a window of about 50 steps: the rate follows the text) */
#define EMT_CHAIN_PRIOR 1.0
#define EMT_CHAIN_DECAY 0.98

float emt_outlook_level_rate(const emt_outlook_state *o, int32_t d) {
    if (d < 0 || d >= EMT_MAX_HEADS) return 0.0f;
    return (float)((o->chain_passed[d] + EMT_CHAIN_PRIOR) / (o->chain_reached[d] + 2 * EMT_CHAIN_PRIOR));
}

/* The chance that a step with tree t reaches a node at depth `levels`
 * whose children wait on the next level: the sum of those nodes' path
 * probabilities (siblings exclude each other), from the calibrated table cq
 * [d][r] (stride 64) of the levels run. A Hydra level drafts the children of
 * the nodes the tree has at its depth, so only they can gain from it. */
static double frontier_reach(const emt_tree *t, const float *cq, int32_t levels, float *node_prob) {
    if (levels == 0) return t->n_nodes > 1;
    double reach = 0;
    node_prob[0] = 1.0f;
    for (int32_t i = 1; i < t->n_nodes; i++) {
        int32_t d = t->position_ids[i] - 1, r = t->node_ranks[i];
        node_prob[i] = d < levels && r < 64 ? node_prob[t->parents[i]] * cq[(size_t)d * 64 + r] : 0.0f;
        if (d == levels) { /* a child of a node at depth `levels`: count that node once */
            reach += node_prob[t->parents[i]];
            node_prob[t->parents[i]] = 0.0f;
        }
    }
    return reach;
}

int emt_outlook_deeper_may_pay(emt_outlook_state *o, const entmtp_bank *bank, const float *q, int32_t q_stride,
                               int32_t levels, int32_t max_levels, int32_t topk, int dynamic) {
    emt_outlook_compute(o, bank, q, q_stride, levels, topk, dynamic);
    if (levels == 0 && o->blind_steps >= EMT_OUTLOOK_BLIND_STEPS) return 1;
    float cq[EMT_MAX_HEADS * 64];
    int32_t known = levels < EMT_MAX_HEADS ? levels : EMT_MAX_HEADS;
    emt_accept_calib_table(&o->calib, q, q_stride, known, topk < 64 ? topk : 64, cq, 64);
    /* a dynamic tree grows deeper along the rank-0 chain, its likeliest path */
    double chain = 1.0;
    for (int32_t d = 0; d < known; d++) chain *= cq[(size_t)d * 64];
    /* gain[j]: the tokens expected from the unknown levels levels..j-1, given
     * that the step reaches a node at depth `levels` */
    double gain[EMT_MAX_HEADS + 1] = { 0 }, p = 1.0;
    for (int32_t j = levels; j < EMT_MAX_HEADS; j++) {
        p *= emt_outlook_level_rate(o, j);
        gain[j + 1] = gain[j] + p;
    }
    int32_t n_trees = entmtp_bank_size(bank);
    double best = 0;
    for (int32_t k = 0; k < n_trees; k++) {
        double rate = o->expected_accept[k] / o->expected_seconds[k];
        if (rate > best) best = rate;
    }
    for (int32_t k = 0; k < n_trees; k++) {
        const emt_tree *t = emt_bank_tree(bank, k);
        int32_t depth = dynamic ? (t->n_nodes - 1 < max_levels ? t->n_nodes - 1 : max_levels) : t->depth;
        if (depth <= levels) continue;
        if (depth > EMT_MAX_HEADS) depth = EMT_MAX_HEADS;
        double reach = dynamic ? chain : frontier_reach(t, cq, levels, o->node_prob);
        if ((o->expected_accept[k] + reach * gain[depth]) / o->expected_seconds[k] > best) return 1;
    }
    return 0;
}

const emt_tree *emt_outlook_tree(emt_outlook_state *o, const entmtp_bank *bank, int32_t k, int dynamic) {
    const emt_tree *t = emt_bank_tree(bank, k);
    return dynamic ? emt_dynamic_tree_build(&o->dynamic, t->n_nodes) : t;
}

/* How fast the level time follows its measurements */
#define EMT_LEVEL_RATE 0.1

void emt_outlook_observe(emt_outlook_state *o, const emt_tree *t, int32_t k, const float *q, int32_t q_stride,
                         int32_t n_heads, int32_t topk, const int32_t *row, int32_t acc, double seconds,
                         double head_seconds) {
    emt_accept_calib_observe(&o->calib, t, q, q_stride, n_heads, topk, row, acc);
    if (seconds > 0 && head_seconds > 0 && n_heads > 0 && head_seconds < seconds) {
        double per_level = head_seconds / n_heads;
        o->level_seconds = o->level_seconds > 0 ? o->level_seconds + EMT_LEVEL_RATE * (per_level - o->level_seconds)
                                                : per_level;
        /* the step as if it had run exactly the tree's own levels */
        int32_t own = t->depth < n_heads ? t->depth : n_heads;
        seconds += o->level_seconds * own - head_seconds;
    }
    emt_cost_model_observe(&o->cost, k, seconds);
    o->blind_steps = n_heads > 0 ? 0 : o->blind_steps + 1;
    /* the rank-0 chain's levels this tree tested: reached when the accepted
     * path holds the chain's node at depth d, passed when also its rank-0 child */
    for (int32_t d = 0; d < EMT_MAX_HEADS; d++) {
        o->chain_reached[d] *= EMT_CHAIN_DECAY;
        o->chain_passed[d] *= EMT_CHAIN_DECAY;
    }
    int32_t node = 0;
    for (int32_t d = 0; d < t->depth && d < n_heads && d < EMT_MAX_HEADS; d++) {
        int32_t child = -1;
        for (int32_t i = node + 1; i < t->n_nodes && child < 0; i++)
            if (t->parents[i] == node && t->node_ranks[i] == 0) child = i;
        if (child < 0 || acc < d || row[d] != node) break;
        o->chain_reached[d] += 1.0;
        if (acc >= d + 1 && row[d + 1] == child) o->chain_passed[d] += 1.0;
        node = child;
    }
}
