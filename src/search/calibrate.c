/* Stage 2 of the offline search (the throughput-Pareto bank) and the policy
 * calibration grid and choice; the caller measures. */
#include "search/calibrate.h"

#include "common/common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

entmtp_status emt_frontier_rows(const emt_frontier *fr, const entmtp_bank_params *bp,
                                emt_frontier_row **rows_out, entmtp_bank **bank_out) {
    *rows_out = NULL;
    *bank_out = NULL;
    int32_t n_rows = fr->n + 1;
    emt_frontier_row *rows = calloc((size_t)n_rows, sizeof *rows);
    if (!rows) return emt_fail(ENTMTP_ERR_OUT_OF_MEMORY, "search: %d frontier rows", n_rows);
    entmtp_bank *bank = NULL;
    entmtp_status st = entmtp_bank_create(bp, &bank);
    for (int32_t i = 0; !st && i < n_rows; i++) {
        emt_frontier_row *r = &rows[i];
        if (i == 0) {
            r->nodes = 1;
            r->biased = 1.0;
            snprintf(r->name, sizeof r->name, "n01d0");
            st = entmtp_bank_add_tree_json(bank, r->name, "[]", NULL);
        } else {
            const emt_frontier_tree *t = &fr->trees[i - 1];
            r->nodes = t->n_nodes;
            r->depth = t->depth;
            r->biased = t->accept;
            snprintf(r->name, sizeof r->name, "n%02dd%d", t->n_nodes, t->depth);
            st = entmtp_bank_add_tree(bank, r->name, t->ranks, t->lens, t->n_paths, NULL);
        }
    }
    if (st) {
        free(rows);
        entmtp_bank_free(bank);
        return st;
    }
    *rows_out = rows;
    *bank_out = bank;
    return ENTMTP_OK;
}

static entmtp_status mark_pareto(emt_frontier_row *rows, int32_t n_rows) {
    int32_t *nodes = calloc((size_t)n_rows, sizeof *nodes);
    double *tps = calloc((size_t)n_rows, sizeof *tps);
    uint8_t *keep = malloc((size_t)n_rows);
    int ok = nodes && tps && keep;
    if (ok) {
        for (int32_t i = 0; i < n_rows; i++) { nodes[i] = rows[i].nodes; tps[i] = rows[i].tps; }
        emt_pareto_max(n_rows, nodes, tps, keep);
        for (int32_t i = 0; i < n_rows; i++) rows[i].keep = keep[i];
    }
    free(nodes);
    free(tps);
    free(keep);
    return ok ? ENTMTP_OK : emt_fail(ENTMTP_ERR_OUT_OF_MEMORY, "search: Pareto set of %d trees", n_rows);
}

entmtp_status emt_stage2_bank(const emt_frontier *fr, emt_frontier_row *rows, int32_t n_rows,
                              const entmtp_bank_params *bp, entmtp_bank **bank_out, int32_t *best,
                              int32_t *static_tree) {
    *bank_out = NULL;
    *best = -1;
    *static_tree = 0;
    if (n_rows != fr->n + 1)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "search: %d rows for a frontier of %d trees", n_rows, fr->n);
    entmtp_status st = mark_pareto(rows, n_rows);
    entmtp_bank *bank = NULL;
    if (!st) st = entmtp_bank_create(bp, &bank);
    for (int32_t i = 0; !st && i < n_rows; i++) {
        if (!rows[i].keep) continue;
        int32_t idx;
        const emt_frontier_tree *t = i ? &fr->trees[i - 1] : NULL;
        st = t ? entmtp_bank_add_tree(bank, rows[i].name, t->ranks, t->lens, t->n_paths, &idx)
               : entmtp_bank_add_tree_json(bank, rows[i].name, "[]", &idx);
        if (!st) st = entmtp_bank_set_figures(bank, idx, (float)rows[i].self, (float)rows[i].tps);
        if (!st && (*best < 0 || rows[i].tps > rows[*best].tps)) {
            *best = i;
            *static_tree = idx;
        }
    }
    if (st) {
        entmtp_bank_free(bank);
        *best = -1;
        return st;
    }
    *bank_out = bank;
    return ENTMTP_OK;
}

void emt_policy_choice_init(emt_policy_choice *c, int32_t static_tree, double static_tps) {
    memset(c, 0, sizeof *c);
    entmtp_policy_config_init(&c->stat, sizeof c->stat, ENTMTP_POLICY_STATIC);
    entmtp_policy_config_init(&c->hyst, sizeof c->hyst, ENTMTP_POLICY_HYSTERESIS);
    entmtp_policy_config_init(&c->ladder, sizeof c->ladder, ENTMTP_POLICY_LADDER);
    c->stat.static_tree = static_tree;
    c->static_tps = static_tps;
}

static int cmp_float(const void *a, const void *b) {
    float x = *(const float *)a, y = *(const float *)b;
    return x < y ? -1 : x > y;
}

/* q-quantile of sorted values (nearest rank); 0.5 with no values */
static float quantile(const float *sorted, int64_t n, double q) {
    if (n <= 0) return 0.5f;
    int64_t i = (int64_t)(q * (double)(n - 1) + 0.5);
    if (i < 0) i = 0;
    if (i >= n) i = n - 1;
    return sorted[i];
}

void emt_calibration_grid(emt_calibration *cal, float *s, int64_t n_s, const emt_policy_choice *c) {
    static const double qs[EMT_CAL_QUANTILES] = { 0.1, 0.25, 0.5, 0.75, 0.9 };
    static const double alphas[EMT_CAL_ALPHAS] = { 0.25, 0.5, 0.75, 1.0 };
    memset(cal, 0, sizeof *cal);
    if (n_s > 0) qsort(s, (size_t)n_s, sizeof *s, cmp_float);
    int32_t best_idx = c->stat.static_tree;
    cal->cand[cal->n] = c->stat;
    cal->knob[cal->n++] = 0;
    for (int32_t t = 0; t < best_idx && t < EMT_CAL_MAX_CONSERVATIVE; t++)
        for (int q = 0; q < EMT_CAL_QUANTILES; q++) {
            entmtp_policy_config pc = c->hyst;
            pc.conservative_tree = t;
            pc.aggressive_tree = best_idx;
            pc.tau_on = pc.tau_off = quantile(s, n_s, qs[q]);
            cal->cand[cal->n] = pc;
            cal->knob[cal->n++] = qs[q];
        }
    int32_t K = best_idx + 1 < EMT_CAL_MAX_LADDER ? best_idx + 1 : EMT_CAL_MAX_LADDER;
    for (int a = 0; K >= 3 && a < EMT_CAL_ALPHAS; a++) {
        float *thresholds = cal->ladder_thresholds[a];
        int32_t *trees = cal->ladder_trees[a];
        for (int32_t b = 0; b < K; b++) trees[b] = best_idx - (K - 1) + b;
        int distinct = 1;
        for (int32_t b = 1; b < K; b++) {
            thresholds[b - 1] = quantile(s, n_s, alphas[a] * b / K);
            if (b > 1) distinct &= thresholds[b - 1] > thresholds[b - 2];
        }
        if (!distinct) continue; /* s too concentrated for distinct thresholds */
        entmtp_policy_config pc = c->ladder;
        pc.n_thresholds = K - 1;
        pc.thresholds = thresholds;
        pc.ladder_trees = trees;
        cal->cand[cal->n] = pc;
        cal->knob[cal->n++] = alphas[a];
    }
}

void emt_calibration_pick(const emt_calibration *cal, emt_policy_choice *c) {
    if (cal->n < 1) return;
    c->static_tps = cal->tps[0]; /* static's figure in this run is the reference */
    for (int32_t k = 1; k < cal->n; k++) {
        const entmtp_policy_config *pc = &cal->cand[k];
        double tps = cal->tps[k];
        if (pc->kind == ENTMTP_POLICY_HYSTERESIS) {
            if (c->have_hyst && tps <= c->hyst_tps) continue;
            c->hyst = *pc;
            c->hyst_tps = tps;
            c->have_hyst = 1;
        } else {
            if (c->have_ladder && tps <= c->ladder_tps) continue;
            c->ladder = *pc; /* keep its arrays: the calibration's go away */
            memcpy(c->ladder_thresholds, pc->thresholds, (size_t)pc->n_thresholds * sizeof *pc->thresholds);
            memcpy(c->ladder_trees, pc->ladder_trees, (size_t)(pc->n_thresholds + 1) * sizeof *pc->ladder_trees);
            c->ladder.thresholds = c->ladder_thresholds;
            c->ladder.ladder_trees = c->ladder_trees;
            c->ladder_tps = tps;
            c->have_ladder = 1;
        }
    }
}

entmtp_status emt_policy_choice_store(const emt_policy_choice *c, entmtp_bank *bank) {
    entmtp_policy_config ucb;
    entmtp_policy_config_init(&ucb, sizeof ucb, ENTMTP_POLICY_UCB);
    const entmtp_policy_config *order[4] = { &c->stat, c->have_hyst ? &c->hyst : NULL,
                                             c->have_ladder ? &c->ladder : NULL, &ucb };
    if (c->have_hyst && c->hyst_tps > c->static_tps && (!c->have_ladder || c->hyst_tps >= c->ladder_tps)) {
        order[0] = &c->hyst;
        order[1] = &c->stat;
    } else if (c->have_ladder && c->ladder_tps > c->static_tps && (!c->have_hyst || c->ladder_tps > c->hyst_tps)) {
        order[0] = &c->ladder;
        order[2] = &c->stat;
    }
    for (int k = 0; k < 4; k++) {
        if (!order[k]) continue;
        entmtp_status st = entmtp_bank_set_policy_config(bank, order[k]);
        if (st) return st;
    }
    return ENTMTP_OK;
}
