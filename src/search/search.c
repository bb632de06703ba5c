/* Algorithm 1 of the EntMTP paper: grow a tree greedily, scoring every
 * one-node augmentation in a single self-rollout over the joint tree. */
#include "search/search.h"

#include "bank/tree.h"
#include "engine/engine.h"

#include <stdio.h>
#include <stdlib.h>

void emt_frontier_free(emt_frontier *f) {
    if (!f) return;
    for (int32_t i = 0; i < f->n; i++) {
        free(f->trees[i].ranks);
        free(f->trees[i].lens);
    }
    free(f->trees);
    free(f->accuracy);
    memset(f, 0, sizeof *f);
}

/* Node id of the path ranks[0..len) in a compiled tree, -1 if absent. */
static int32_t node_of(const emt_tree *t, const int32_t *ranks, int32_t len) {
    if (len == 0) return 0;
    for (int32_t p = 0; p < t->n_paths; p++) {
        int32_t a = t->path_offsets[p], b = t->path_offsets[p + 1];
        if (b - a == len && !memcmp(t->ranks + a, ranks, (size_t)len * sizeof *ranks)) return p + 1;
    }
    return -1;
}

/* Everything one iteration needs about the joint tree J = T + candidates. */
typedef struct joint_tree {
    emt_tree tree;
    int32_t *base_ids;   /* [T.n] J node of each T node */
    int32_t *cand_ids;   /* [n_cand] J node of each candidate */
    int32_t *commit;     /* T's leaves as J retrieve rows */
    int32_t n_commit;
} joint_tree;

static void joint_free(joint_tree *j) {
    emt_tree_destroy(&j->tree);
    free(j->base_ids);
    free(j->cand_ids);
    free(j->commit);
    memset(j, 0, sizeof *j);
}

static entmtp_status joint_build(const emt_grow_tree *T, const int32_t *cand, int32_t n_cand,
                                 const emt_search_config *cfg, joint_tree *j) {
    memset(j, 0, sizeof *j);
    int32_t n_nodes = T->n + n_cand, width = cfg->max_depth + 1;
    int32_t *ranks = emt_malloc((size_t)n_nodes * (size_t)width, sizeof(int32_t));
    int32_t *lens = emt_malloc((size_t)n_nodes, sizeof(int32_t));
    j->base_ids = emt_malloc((size_t)T->n, sizeof(int32_t));
    j->cand_ids = emt_malloc((size_t)(n_cand > 0 ? n_cand : 1), sizeof(int32_t));
    j->commit = emt_malloc((size_t)T->n * (size_t)width, sizeof(int32_t));
    entmtp_status st = ENTMTP_OK;
    if (!ranks || !lens || !j->base_ids || !j->cand_ids || !j->commit) { st = ENTMTP_ERR_OUT_OF_MEMORY; goto out; }
    int32_t n_paths = emt_grow_choices(T, cand, n_cand, ranks, lens);
    if ((st = emt_tree_compile("joint", ranks, lens, n_paths, cfg->topk, cfg->max_depth, n_nodes, &j->tree)))
        goto out;
    /* the choices list T's nodes then the candidates, in that order */
    int32_t off = 0;
    j->base_ids[0] = 0;
    for (int32_t p = 0; p < n_paths; p++) {
        int32_t id = node_of(&j->tree, ranks + off, lens[p]);
        if (p + 1 < T->n) j->base_ids[p + 1] = id;
        else j->cand_ids[p + 1 - T->n] = id;
        off += lens[p];
    }
    /* T's leaves, each as the row of J ids root -> leaf, -1 padded to J's width */
    int32_t jw = j->tree.depth + 1;
    for (int32_t i = 0; i < T->n; i++) {
        if (T->n_children[i] > 0 && i > 0) continue;
        if (i == 0 && T->n > 1) continue;
        int32_t *row = j->commit + (size_t)j->n_commit++ * jw;
        for (int32_t k = 0; k < jw; k++) row[k] = -1;
        for (int32_t n = i; n >= 0; n = T->parent[n]) row[T->depth[n]] = j->base_ids[n];
    }
out:
    free(ranks);
    free(lens);
    if (st) joint_free(j);
    return st;
}

/* Tokens per step the base tree accepted: 1 + deepest accepted T node. */
static int32_t base_accept(const emt_grow_tree *T, const joint_tree *j, const uint8_t *ok) {
    int32_t best = 0;
    for (int32_t i = 1; i < T->n; i++)
        if (ok[j->base_ids[i]] && T->depth[i] > best) best = T->depth[i];
    return best + 1;
}

static int report(const emt_search_config *cfg, float fraction, const char *what) {
    return cfg->progress && cfg->progress(fraction, what, cfg->progress_user_data);
}

/* One self-rollout of every prompt over the joint tree; accumulates each
 * candidate's accept sum. */
static entmtp_status rollout(entmtp_session *S, const emt_prompts *ps, const emt_grow_tree *T,
                             const joint_tree *j, const int32_t *cand, int32_t n_cand,
                             const emt_search_config *cfg, int32_t iteration, int32_t iterations,
                             int64_t *sums, int64_t *steps, int64_t *tokens) {
    uint8_t *ok = emt_malloc((size_t)j->tree.n_nodes, 1);
    if (!ok) return ENTMTP_ERR_OUT_OF_MEMORY;
    entmtp_status st = ENTMTP_OK;
    char what[64];
    snprintf(what, sizeof what, "search %d/%d nodes", T->n + 1, cfg->budget);
    for (int32_t p = 0; p < ps->n && !st; p++) {
        entmtp_session_reset(S);
        if ((st = entmtp_session_prefill(S, ps->tokens[p], ps->lens[p]))) {
            emt_error_prefix("prompt %d: ", p);
            break;
        }
        int32_t generated = 0;
        while (generated < cfg->max_tokens) {
            entmtp_step_result r = { .struct_size = sizeof r };
            st = emt_session_probe_step(S, &j->tree, j->commit, j->n_commit, ok, &r);
            if (st == ENTMTP_ERR_KV_FULL) { st = ENTMTP_OK; break; } /* the prompt's rollout ends early */
            if (st) break;
            int32_t a = base_accept(T, j, ok);
            if (a != r.accept_length) {
                st = emt_fail(ENTMTP_ERR_STATE, "search: probe accepted %d tokens but the base tree's flags say %d",
                              r.accept_length, a);
                break;
            }
            for (int32_t c = 0; c < n_cand; c++) {
                int32_t d = T->depth[cand[c]] + 1;
                sums[c] += ok[j->cand_ids[c]] && d + 1 > a ? d + 1 : a;
            }
            (*steps)++;
            *tokens += r.n_tokens;
            generated += r.n_tokens;
            if (r.stopped) break;
        }
        float f = ((float)iteration + (float)(p + 1) / (float)ps->n) / (float)iterations;
        if (!st && report(cfg, f, what)) st = emt_fail(ENTMTP_ERR_CALLBACK, "search: cancelled by the progress callback");
    }
    free(ok);
    return st;
}

entmtp_status emt_frontier_record(emt_frontier *out, const emt_grow_tree *T, double accept, int32_t rank_sum) {
    emt_frontier_tree *ft = &out->trees[out->n];
    memset(ft, 0, sizeof *ft);
    int32_t n_paths = T->n - 1, total = 0;
    for (int32_t i = 1; i < T->n; i++) total += T->depth[i];
    ft->ranks = emt_malloc((size_t)(total > 0 ? total : 1), sizeof(int32_t));
    ft->lens = emt_malloc((size_t)(n_paths > 0 ? n_paths : 1), sizeof(int32_t));
    if (!ft->ranks || !ft->lens) {
        free(ft->ranks);
        free(ft->lens);
        return ENTMTP_ERR_OUT_OF_MEMORY;
    }
    ft->n_paths = emt_grow_choices(T, NULL, 0, ft->ranks, ft->lens);
    ft->n_nodes = T->n;
    for (int32_t i = 0; i < T->n; i++) if (T->depth[i] > ft->depth) ft->depth = T->depth[i];
    ft->accept = accept;
    ft->added_rank_sum = rank_sum;
    ft->added_depth = T->depth[T->n - 1];
    out->n++;
    return ENTMTP_OK;
}

entmtp_status emt_search_acceptance(entmtp_model *model, entmtp_heads *heads,
                                    const emt_prompts *ps, const emt_search_config *cfg,
                                    emt_frontier *out) {
    memset(out, 0, sizeof *out);
    if (!model || !heads || !ps || ps->n < 1 || !cfg)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "search: needs a model, heads and at least one prompt");
    entmtp_heads_info hi = { .struct_size = sizeof hi };
    entmtp_heads_get_info(heads, &hi);
    if (cfg->budget < 2 || cfg->budget > EMT_GROW_MAX_NODES / 2)
        return emt_fail(ENTMTP_ERR_INVALID_CONFIG, "search: budget %d must be in [2, %d] nodes", cfg->budget, EMT_GROW_MAX_NODES / 2);
    if (cfg->max_depth < 1 || cfg->max_depth > hi.n_heads)
        return emt_fail(ENTMTP_ERR_INVALID_CONFIG, "search: depth %d must be in [1, %d] (the heads draft %d tokens)",
                        cfg->max_depth, hi.n_heads, hi.n_heads);
    if (cfg->topk < 1 || cfg->max_tokens < 1)
        return emt_fail(ENTMTP_ERR_INVALID_CONFIG, "search: top-k %d and max_tokens %d must be positive", cfg->topk, cfg->max_tokens);

    out->trees = emt_calloc((size_t)cfg->budget, sizeof *out->trees);
    int32_t *cand = emt_malloc(EMT_GROW_MAX_NODES, sizeof(int32_t));
    int32_t *rank_sum = emt_malloc(EMT_GROW_MAX_NODES, sizeof(int32_t));
    int32_t *depth = emt_malloc(EMT_GROW_MAX_NODES, sizeof(int32_t));
    int64_t *sums = emt_malloc(EMT_GROW_MAX_NODES, sizeof(int64_t));
    entmtp_session *S = NULL;
    entmtp_status st = ENTMTP_OK;
    if (!out->trees || !cand || !rank_sum || !depth || !sums) { st = ENTMTP_ERR_OUT_OF_MEMORY; goto done; }
    if ((st = emt_session_create_sized(model, heads, NULL, &cfg->session, 2 * cfg->budget, cfg->max_depth,
                                       cfg->topk, &S)))
        goto done;
    emt_grow_tree T;
    emt_grow_init(&T);
    out->root_accept = 1.0;
    int32_t iterations = cfg->budget - 1;
    while (T.n < cfg->budget) {
        int32_t n_cand = emt_grow_candidates(&T, cfg->max_depth, cfg->topk, cand);
        if (n_cand == 0) break;
        joint_tree j;
        if ((st = joint_build(&T, cand, n_cand, cfg, &j))) goto done;
        int64_t steps = 0;
        for (int32_t c = 0; c < n_cand; c++) {
            sums[c] = 0;
            rank_sum[c] = emt_grow_rank_sum(&T, cand[c]) + T.n_children[cand[c]];
            depth[c] = T.depth[cand[c]] + 1;
        }
        st = rollout(S, ps, &T, &j, cand, n_cand, cfg, T.n - 1, iterations, sums, &steps, &out->probe_tokens);
        joint_free(&j);
        if (st) goto done;
        if (steps == 0) { st = emt_fail(ENTMTP_ERR_STATE, "search: the rollout produced no steps"); goto done; }
        out->probe_steps += steps;
        int32_t best = emt_grow_pick(n_cand, sums, rank_sum, depth);
        emt_grow_add(&T, cand[best]);
        if ((st = emt_frontier_record(out, &T, (double)sums[best] / (double)steps, rank_sum[best]))) goto done;
    }
done:
    entmtp_session_free(S);
    free(cand);
    free(rank_sum);
    free(depth);
    free(sums);
    if (st) emt_frontier_free(out);
    return st;
}
