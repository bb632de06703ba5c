/* The Medusa paper's accuracy-based tree construction: per-head top-k
 * accuracies measured along the model's own continuations, then greedy node
 * addition by estimated path accuracy (the product of the accuracies of the
 * ranks on the path), as the reference's heads_accuracy / gen_results do. */
#include "search/search.h"

#include "engine/engine.h"

#include <stdlib.h>

/* Estimated acceptance probability of the path to `parent`'s next child. */
static double path_value(const emt_grow_tree *T, int32_t parent, const double *acc, int32_t topk) {
    double v = acc[(size_t)T->depth[parent] * topk + T->n_children[parent]];
    for (int32_t n = parent; n > 0; n = T->parent[n]) v *= acc[(size_t)(T->depth[n] - 1) * topk + T->rank[n]];
    return v;
}

/* hits[d][r]: head level d's rank-r token was the continuation's token. */
static entmtp_status measure(entmtp_session *S, const emt_prompts *ps, const emt_search_config *cfg,
                             int64_t *hits, int64_t *seen) {
    int32_t D = cfg->max_depth, topk = emt_session_topk(S);
    int32_t *ids = emt_malloc((size_t)D * (size_t)topk, sizeof(int32_t));
    int32_t *traj = emt_malloc((size_t)cfg->max_tokens + 1, sizeof(int32_t));
    entmtp_status st = ids && traj ? ENTMTP_OK : ENTMTP_ERR_OUT_OF_MEMORY;
    for (int32_t p = 0; p < ps->n && !st; p++) {
        /* the continuation the model itself produces (sampled at the
         * session's temperature, plain AR) ... */
        entmtp_session_reset(S);
        if ((st = entmtp_session_prefill(S, ps->tokens[p], ps->lens[p]))) break;
        st = entmtp_generate(S, cfg->max_tokens, 1, NULL, NULL);
        if (st == ENTMTP_ERR_KV_FULL) st = ENTMTP_OK;
        if (st) break;
        const int32_t *all;
        int32_t n_all;
        entmtp_session_tokens(S, &all, &n_all);
        int32_t len = n_all - ps->lens[p];
        memcpy(traj, all + ps->lens[p], (size_t)len * sizeof *traj);
        /* ... then replayed token by token, asking the heads at every
         * position what they would have drafted */
        entmtp_session_reset(S);
        if ((st = entmtp_session_prefill(S, ps->tokens[p], ps->lens[p]))) break;
        for (int32_t t = 0; t < len && !st; t++) {
            int32_t levels = len - t - 1 < D ? len - t - 1 : D;
            if (levels >= 1 && !(st = emt_session_head_topk(S, traj + t, levels, ids))) {
                for (int32_t d = 0; d < levels; d++) {
                    int32_t target = traj[t + d + 1];
                    seen[d]++;
                    for (int32_t r = 0; r < topk; r++)
                        if (ids[(size_t)d * topk + r] == target) { hits[(size_t)d * topk + r]++; break; }
                }
            }
            if (!st && t + 1 < len) st = entmtp_session_prefill(S, traj + t, 1);
        }
        if (!st && cfg->progress && cfg->progress((float)(p + 1) / (float)ps->n, "head accuracy", cfg->progress_user_data))
            st = emt_fail(ENTMTP_ERR_CALLBACK, "search: cancelled by the progress callback");
    }
    free(ids);
    free(traj);
    return st;
}

entmtp_status emt_search_accuracy(entmtp_model *model, entmtp_heads *heads, const emt_prompts *ps,
                                  const emt_search_config *cfg, emt_frontier *out) {
    memset(out, 0, sizeof *out);
    if (!model || !heads || !ps || ps->n < 1 || !cfg)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "search: needs a model, heads and at least one prompt");
    entmtp_heads_info hi = { .struct_size = sizeof hi };
    entmtp_heads_get_info(heads, &hi);
    if (cfg->budget < 2 || cfg->budget > EMT_GROW_MAX_NODES / 2 || cfg->max_depth < 1 || cfg->max_depth > hi.n_heads ||
        cfg->topk < 1 || cfg->max_tokens < 1)
        return emt_fail(ENTMTP_ERR_INVALID_CONFIG, "search: budget %d, depth %d (heads %d), top-k %d, max_tokens %d out of range",
                        cfg->budget, cfg->max_depth, hi.n_heads, cfg->topk, cfg->max_tokens);
    int32_t D = cfg->max_depth, topk = cfg->topk;
    int64_t *hits = emt_calloc((size_t)D * (size_t)topk, sizeof(int64_t));
    int64_t *seen = emt_calloc((size_t)D, sizeof(int64_t));
    double *acc = emt_calloc((size_t)D * (size_t)topk, sizeof(double));
    int32_t *cand = emt_malloc(EMT_GROW_MAX_NODES, sizeof(int32_t));
    out->trees = emt_calloc((size_t)cfg->budget, sizeof *out->trees);
    entmtp_session *S = NULL;
    entmtp_status st = ENTMTP_OK;
    if (!hits || !seen || !acc || !cand || !out->trees) { st = ENTMTP_ERR_OUT_OF_MEMORY; goto done; }
    if ((st = emt_session_create_sized(model, heads, NULL, &cfg->session, 1, D, topk, &S))) goto done;
    if ((st = measure(S, ps, cfg, hits, seen))) goto done;
    for (int32_t d = 0; d < D; d++)
        for (int32_t r = 0; r < topk; r++)
            acc[(size_t)d * topk + r] = seen[d] ? (double)hits[(size_t)d * topk + r] / (double)seen[d] : 0.0;
    out->accuracy = acc;
    out->accuracy_levels = D;
    out->accuracy_topk = topk;
    acc = NULL;

    emt_grow_tree T;
    emt_grow_init(&T);
    out->root_accept = 1.0;
    double expected = 1.0;
    while (T.n < cfg->budget) {
        int32_t n_cand = emt_grow_candidates(&T, D, topk, cand);
        if (n_cand == 0) break;
        int32_t best = -1;
        double best_v = -1;
        int32_t best_sum = 0;
        for (int32_t c = 0; c < n_cand; c++) {
            double v = path_value(&T, cand[c], out->accuracy, topk);
            int32_t sum = emt_grow_rank_sum(&T, cand[c]) + T.n_children[cand[c]];
            if (best < 0 || v > best_v || (v == best_v && (sum < best_sum || (sum == best_sum && T.depth[cand[c]] < T.depth[cand[best]])))) {
                best = c;
                best_v = v;
                best_sum = sum;
            }
        }
        emt_grow_add(&T, cand[best]);
        expected += best_v;
        if ((st = emt_frontier_record(out, &T, expected, best_sum))) goto done;
    }
done:
    entmtp_session_free(S);
    free(hits);
    free(seen);
    free(acc);
    free(cand);
    if (st) emt_frontier_free(out);
    return st;
}
