/* entmtp_session_*, entmtp_step: the draft-verify-accept loop. */
#include "accept/accept.h"
#include "accept/node_flags.h"
#include "engine/engine.h"
#include "engine/features.h"
#include "policy/policy_internal.h"

#include <math.h>
#include <stdlib.h>

#define EMT_PREFILL_CHUNK 128

struct entmtp_session {
    const entmtp_model *model;
    const entmtp_heads *heads; /* NULL: AR only */
    const entmtp_bank *bank;   /* NULL: AR only */
    entmtp_policy *policy;     /* borrowed; NULL: static tree 0 */
    entmtp_session_params p;   /* p.stop_tokens points at stop_tokens */
    int32_t stop_tokens[EMT_MAX_STOP_TOKENS];
    emt_exec *ex;
    emt_kv kv;
    emt_scratch s;
    int32_t n_trees, max_nodes, max_depth, topk;
    /* tokens: prompt then generated; committed KV rows == n_tokens */
    int32_t *tokens;
    int32_t n_tokens, n_prompt;
    int have_logits;
    uint64_t rng;
    /* host-side per-step buffers */
    int32_t *node_tokens, *positions, *dst_rows, *src_rows, *emit;
    int32_t *top_ids;      /* [max_rows][topk] */
    float *top_p;          /* [max_rows][topk] */
    int32_t *chain_ids;    /* Hydra greedy chain: [n_heads][topk] */
    float *chain_p;
    int32_t *parent_row;   /* Hydra: node -> row of its head call (-1 none) */
    int32_t *path;         /* scratch for one node's path */
    float *host_logits;    /* device backends: node logits copied for acceptance */
    float *host_next;      /* device backends: next-token logits on the host */
    float *probe_probs;    /* search probes at temperature > 0: one distribution */
    emt_features_store features;
    int32_t last_accept;
    float ema;
    int batch_heads;       /* Medusa: one lm_head product for all heads (default) */
    int64_t *usage;
    entmtp_session_stats stats;
    emt_outlook_state outlook; /* per-tree expected accept and step time (bank + heads only) */
};

static const emt_tree g_ar_tree = {
    .name = "ar", .n_paths = 0, .n_nodes = 1, .depth = 0, .topk = 1,
    .attn_mask = (uint8_t[]){ 1 }, .tree_indices = (int32_t[]){ 0 }, .position_ids = (int32_t[]){ 0 },
    .parents = (int32_t[]){ -1 }, .node_ranks = (int32_t[]){ -1 }, .n_leaves = 1,
    .retrieve_indices = (int32_t[]){ 0 },
};

static const entmtp_session_params g_session_defaults = {
    .struct_size = sizeof g_session_defaults, .kv_capacity = 0, .temperature = 0.0f, .epsilon = 0.09f,
    .delta = 0.3f, .seed = 0x5eed, .ema_decay = 0.8f, .n_stop_tokens = -1, .stop_tokens = NULL,
    .reproducible = 0,
};

ENTMTP_API entmtp_status entmtp_session_params_init(entmtp_session_params *params, size_t size) {
    return emt_init_versioned(params, size, &g_session_defaults, sizeof g_session_defaults, "entmtp_session_params");
}

/* ------------------------------------------------------------ lifecycle */

static void dev_free(entmtp_session *S, void *p) {
    if (p) S->model->be->ops->release(S->model->be, p);
}

ENTMTP_API void entmtp_session_free(entmtp_session *S) {
    if (!S) return;
    if (S->kv.k) {
        for (int32_t l = 0; l < S->model->cfg.n_layers; l++) {
            dev_free(S, S->kv.k[l]);
            dev_free(S, S->kv.v[l]);
        }
    }
    free(S->kv.k);
    free(S->kv.v);
    emt_scratch *s = &S->s;
    void *bufs[] = { s->x, s->xn, s->q, s->att, s->tmp, s->gate, s->up, s->hidden, s->logits,
                     s->head_in, s->head_x, s->head_tmp, s->head_res, s->head_logits,
                     s->next_logits, s->last_hidden };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) dev_free(S, bufs[i]);
    if (S->ex) S->model->be->ops->exec_destroy(S->ex);
    free(S->tokens);
    free(S->node_tokens);
    free(S->positions);
    free(S->dst_rows);
    free(S->src_rows);
    free(S->emit);
    free(S->top_ids);
    free(S->top_p);
    free(S->chain_ids);
    free(S->chain_p);
    free(S->parent_row);
    free(S->path);
    free(S->host_logits);
    free(S->host_next);
    free(S->probe_probs);
    free(S->usage);
    emt_outlook_free(&S->outlook);
    free(S);
}

static entmtp_status check_params(const entmtp_session_params *p, const entmtp_model *m) {
    if (p->kv_capacity < 0 || p->kv_capacity > m->cfg.ctx)
        return emt_fail(ENTMTP_ERR_INVALID_CONFIG,
                        "session params: kv_capacity = %d is outside [0, %d] (the model's context length)",
                        p->kv_capacity, m->cfg.ctx);
    if (!isfinite(p->temperature) || p->temperature < 0)
        return emt_fail(ENTMTP_ERR_INVALID_CONFIG, "session params: temperature = %g must be finite and >= 0",
                        (double)p->temperature);
    if (!isfinite(p->epsilon) || p->epsilon < 0 || p->epsilon > 1)
        return emt_fail(ENTMTP_ERR_INVALID_CONFIG, "session params: epsilon = %g must be in [0, 1]",
                        (double)p->epsilon);
    if (!isfinite(p->delta) || p->delta < 0)
        return emt_fail(ENTMTP_ERR_INVALID_CONFIG, "session params: delta = %g must be finite and >= 0",
                        (double)p->delta);
    if (!isfinite(p->ema_decay) || p->ema_decay < 0 || p->ema_decay > 1)
        return emt_fail(ENTMTP_ERR_INVALID_CONFIG, "session params: ema_decay = %g must be in [0, 1]",
                        (double)p->ema_decay);
    if (p->reproducible != 0 && p->reproducible != 1)
        return emt_fail(ENTMTP_ERR_INVALID_CONFIG, "session params: reproducible = %d must be 0 or 1",
                        p->reproducible);
    if (p->n_stop_tokens < -1 || p->n_stop_tokens > EMT_MAX_STOP_TOKENS)
        return emt_fail(ENTMTP_ERR_INVALID_CONFIG, "session params: n_stop_tokens = %d is outside [-1, %d]",
                        p->n_stop_tokens, EMT_MAX_STOP_TOKENS);
    if (p->n_stop_tokens > 0 && !p->stop_tokens)
        return emt_fail(ENTMTP_ERR_INVALID_CONFIG, "session params: stop_tokens is NULL but n_stop_tokens = %d",
                        p->n_stop_tokens);
    for (int32_t i = 0; i < p->n_stop_tokens; i++)
        if (p->stop_tokens[i] < 0 || p->stop_tokens[i] >= m->cfg.vocab)
            return emt_fail(ENTMTP_ERR_OUT_OF_RANGE, "session params: stop_tokens[%d] = %d is outside the vocabulary [0, %d)",
                            i, p->stop_tokens[i], m->cfg.vocab);
    return ENTMTP_OK;
}

static entmtp_status check_bank(const entmtp_session *S) {
    if (!S->bank) return ENTMTP_OK;
    int32_t n = entmtp_bank_size(S->bank);
    for (int32_t i = 0; i < n; i++) {
        const emt_tree *t = emt_bank_tree(S->bank, i);
        int32_t heads = S->heads ? S->heads->n_heads : 0;
        if (S->heads && t->depth > heads)
            return emt_fail(ENTMTP_ERR_MISMATCH, "bank tree %d ('%s') has depth %d but the heads draft only %d tokens",
                            i, t->name, t->depth, heads);
        if (S->heads && S->heads->n_draft && t->topk > S->heads->n_draft)
            return emt_fail(ENTMTP_ERR_MISMATCH, "bank tree %d ('%s'): top-k %d exceeds the heads' draft vocabulary (%d ids)",
                            i, t->name, t->topk, S->heads->n_draft);
        if (t->topk > S->model->cfg.vocab)
            return emt_fail(ENTMTP_ERR_MISMATCH, "bank tree %d ('%s'): top-k %d exceeds the vocabulary (%d)",
                            i, t->name, t->topk, S->model->cfg.vocab);
    }
    return ENTMTP_OK;
}

#define DEV_ALLOC(ptr, count)                                                                   \
    do {                                                                                        \
        (ptr) = be->ops->alloc(be, (size_t)(count) * sizeof(float));                           \
        if (!(ptr)) goto oom;                                                                   \
    } while (0)
#define HOST_ALLOC(ptr, count)                                                                  \
    do {                                                                                        \
        (ptr) = emt_calloc((size_t)(count), sizeof *(ptr));                                     \
        if (!(ptr)) goto oom;                                                                   \
    } while (0)

ENTMTP_API entmtp_status entmtp_session_create(const entmtp_model *model, const entmtp_heads *heads,
                                               const entmtp_bank *bank,
                                               const entmtp_session_params *params,
                                               entmtp_session **out_session) {
    return emt_session_create_sized(model, heads, bank, params, 0, 0, 0, out_session);
}

entmtp_status emt_session_create_sized(const entmtp_model *model, const entmtp_heads *heads,
                                       const entmtp_bank *bank,
                                       const entmtp_session_params *params, int32_t min_nodes,
                                       int32_t min_depth, int32_t min_topk,
                                       entmtp_session **out_session) {
    if (!model || !out_session)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_session_create: model and out_session must not be NULL");
    *out_session = NULL;
    if (heads && heads->model != model)
        return emt_fail(ENTMTP_ERR_MISMATCH, "entmtp_session_create: the heads were loaded for a different model");
    entmtp_session_params p = g_session_defaults;
    entmtp_status st = emt_copy_versioned(&p, sizeof p, params, "entmtp_session_params");
    if (st) return st;
    if (p.kv_capacity == 0) p.kv_capacity = model->cfg.ctx < 4096 ? model->cfg.ctx : 4096;
    if ((st = check_params(&p, model))) return st;

    entmtp_session *S = emt_calloc(1, sizeof *S);
    if (!S) return ENTMTP_ERR_OUT_OF_MEMORY;
    S->model = model;
    S->heads = heads;
    S->bank = bank;
    S->p = p;
    if (p.n_stop_tokens > 0) memcpy(S->stop_tokens, p.stop_tokens, (size_t)p.n_stop_tokens * sizeof *p.stop_tokens);
    S->p.stop_tokens = S->stop_tokens;
    S->rng = p.seed;
    S->batch_heads = 1;
    if ((st = check_bank(S))) { entmtp_session_free(S); return st; }
    S->n_trees = bank ? entmtp_bank_size(bank) : 0;
    S->max_nodes = bank && S->n_trees ? emt_bank_max_nodes_used(bank) : 1;
    if (S->max_nodes < min_nodes) S->max_nodes = min_nodes;
    if (S->max_nodes < 1) S->max_nodes = 1;
    S->max_depth = bank && S->n_trees ? emt_bank_max_depth_used(bank) : 0;
    if (S->max_depth < min_depth) S->max_depth = min_depth;
    S->topk = min_topk > 1 ? min_topk : 1;
    for (int32_t i = 0; i < S->n_trees; i++)
        if (emt_bank_tree(bank, i)->topk > S->topk) S->topk = emt_bank_tree(bank, i)->topk;
    if (heads && heads->n_draft && S->topk > heads->n_draft) {
        entmtp_session_free(S);
        return emt_fail(ENTMTP_ERR_MISMATCH, "entmtp_session_create: top-k %d exceeds the heads' draft vocabulary (%d ids)",
                        min_topk, heads->n_draft);
    }

    emt_backend *be = model->be;
    const emt_model_config *c = &model->cfg;
    const int64_t H = c->hidden, V = c->vocab, F = c->ffn;
    const int64_t q_dim = (int64_t)c->n_heads * c->head_dim, kv_dim = (int64_t)c->n_kv_heads * c->head_dim;
    int32_t max_rows = S->max_nodes > EMT_PREFILL_CHUNK ? S->max_nodes : EMT_PREFILL_CHUNK;
    int32_t n_heads = heads ? heads->n_heads : 0;
    S->ex = be->ops->exec_create(be, model->n_threads);
    if (!S->ex) goto oom;

    S->kv.capacity = p.kv_capacity;
    S->kv.rows = p.kv_capacity + S->max_nodes;
    HOST_ALLOC(S->kv.k, c->n_layers);
    HOST_ALLOC(S->kv.v, c->n_layers);
    for (int32_t l = 0; l < c->n_layers; l++) {
        DEV_ALLOC(S->kv.k[l], (int64_t)S->kv.rows * kv_dim);
        DEV_ALLOC(S->kv.v[l], (int64_t)S->kv.rows * kv_dim);
    }
    emt_scratch *s = &S->s;
    s->max_rows = max_rows;
    DEV_ALLOC(s->x, max_rows * H);
    DEV_ALLOC(s->xn, max_rows * H);
    DEV_ALLOC(s->q, max_rows * q_dim);
    DEV_ALLOC(s->att, max_rows * q_dim);
    DEV_ALLOC(s->tmp, max_rows * H);
    DEV_ALLOC(s->gate, max_rows * F);
    DEV_ALLOC(s->up, max_rows * F);
    DEV_ALLOC(s->hidden, max_rows * H);
    DEV_ALLOC(s->logits, S->max_nodes * V);
    DEV_ALLOC(s->next_logits, V);
    DEV_ALLOC(s->last_hidden, H);
    if (n_heads) {
        int32_t head_rows = S->max_nodes > n_heads ? S->max_nodes : n_heads;
        DEV_ALLOC(s->head_in, head_rows * H * (n_heads + 1));
        DEV_ALLOC(s->head_x, head_rows * H);
        DEV_ALLOC(s->head_tmp, head_rows * H);
        DEV_ALLOC(s->head_res, head_rows * H);
        DEV_ALLOC(s->head_logits, head_rows * V);
        HOST_ALLOC(S->top_ids, (int64_t)head_rows * S->topk);
        HOST_ALLOC(S->top_p, (int64_t)head_rows * S->topk);
        HOST_ALLOC(S->chain_ids, (int64_t)n_heads * S->topk);
        HOST_ALLOC(S->chain_p, (int64_t)n_heads * S->topk);
    }
    HOST_ALLOC(S->tokens, p.kv_capacity);
    HOST_ALLOC(S->node_tokens, S->max_nodes);
    HOST_ALLOC(S->positions, max_rows);
    HOST_ALLOC(S->dst_rows, S->max_nodes);
    HOST_ALLOC(S->src_rows, S->max_nodes);
    HOST_ALLOC(S->emit, S->max_nodes);
    HOST_ALLOC(S->parent_row, S->max_nodes);
    HOST_ALLOC(S->path, (S->max_depth > n_heads ? S->max_depth : n_heads) + 1);
    HOST_ALLOC(S->usage, S->n_trees);
    if (min_nodes > 0) HOST_ALLOC(S->probe_probs, model->cfg.vocab);
    if (!be->ops->host_memory) {
        HOST_ALLOC(S->host_logits, (int64_t)S->max_nodes * V);
        HOST_ALLOC(S->host_next, V);
    }
    if (n_heads && S->n_trees && (st = emt_outlook_init(&S->outlook, bank, n_heads, S->topk))) {
        entmtp_session_free(S);
        return st;
    }
    emt_features_clear(&S->features);
    S->stats.struct_size = sizeof S->stats;
    *out_session = S;
    return ENTMTP_OK;
oom:;
    int32_t nodes = S->max_nodes;
    entmtp_session_free(S);
    return emt_fail(ENTMTP_ERR_OUT_OF_MEMORY,
                    "entmtp_session_create: out of memory for a KV cache of %d tokens and trees of up to %d nodes",
                    p.kv_capacity, nodes);
}

ENTMTP_API entmtp_status entmtp_policy_set(entmtp_session *S, entmtp_policy *policy) {
    if (!S) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_policy_set: session is NULL");
    if (policy) {
        if (!S->bank || S->n_trees == 0)
            return emt_fail(ENTMTP_ERR_STATE, "entmtp_policy_set: the session has no bank to choose trees from");
        entmtp_status st = entmtp_policy_validate(policy, S->n_trees);
        if (st) return st;
        entmtp_policy_reset(policy);
    }
    S->policy = policy;
    return ENTMTP_OK;
}

ENTMTP_API void entmtp_session_reset(entmtp_session *S) {
    if (!S) return;
    S->n_tokens = S->n_prompt = 0;
    S->have_logits = 0;
    S->rng = S->p.seed;
    S->last_accept = 0;
    S->ema = 0;
    emt_features_clear(&S->features);
    memset(&S->stats, 0, sizeof S->stats);
    S->stats.struct_size = sizeof S->stats;
    for (int32_t i = 0; i < S->n_trees; i++) S->usage[i] = 0;
    if (S->policy) entmtp_policy_reset(S->policy);
}

/* ---------------------------------------------------------------- prefill */

static void keep_last_row(entmtp_session *S, int32_t hidden_row, int32_t logits_row) {
    const emt_backend_ops *op = S->model->be->ops;
    int32_t zero = 0;
    op->copy_rows(S->ex, S->s.last_hidden, S->s.hidden, (size_t)S->model->cfg.hidden, &zero,
                  &hidden_row, 1);
    op->copy_rows(S->ex, S->s.next_logits, S->s.logits, (size_t)S->model->cfg.vocab, &zero,
                  &logits_row, 1);
}

ENTMTP_API entmtp_status entmtp_session_prefill(entmtp_session *S, const int32_t *tokens,
                                               int32_t n_tokens) {
    if (!S) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_session_prefill: session is NULL");
    if (n_tokens <= 0 || !tokens)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_session_prefill: the prompt is empty (n_tokens = %d)", n_tokens);
    for (int32_t i = 0; i < n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= S->model->cfg.vocab)
            return emt_fail(ENTMTP_ERR_OUT_OF_RANGE, "entmtp_session_prefill: token %d at position %d is outside the vocabulary [0, %d)",
                            tokens[i], i, S->model->cfg.vocab);
    if (n_tokens > S->kv.capacity - S->n_tokens)
        return emt_fail(ENTMTP_ERR_KV_FULL, "entmtp_session_prefill: %d prompt tokens do not fit: %d of %d KV slots are used",
                        n_tokens, S->n_tokens, S->kv.capacity);
    double t0 = emt_now();
    for (int32_t done = 0; done < n_tokens;) {
        int32_t n = n_tokens - done < EMT_PREFILL_CHUNK ? n_tokens - done : EMT_PREFILL_CHUNK;
        for (int32_t i = 0; i < n; i++) S->positions[i] = S->n_tokens + done + i;
        int last = done + n == n_tokens;
        entmtp_status st = emt_forward(S->ex, S->model, &S->kv, &S->s, tokens + done, S->positions, n,
                                       S->n_tokens + done, NULL, 0, last ? 1 : 0);
        if (st) return st;
        if (last) keep_last_row(S, n - 1, 0);
        done += n;
    }
    entmtp_status st = emt_backend_sync(S->model->be, S->ex);
    if (st) return st;
    memcpy(S->tokens + S->n_tokens, tokens, (size_t)n_tokens * sizeof *tokens);
    S->n_tokens += n_tokens;
    S->n_prompt += n_tokens;
    S->have_logits = 1;
    S->stats.n_prompt_tokens += n_tokens;
    S->stats.prefill_seconds += emt_now() - t0;
    return ENTMTP_OK;
}

/* ------------------------------------------------------------------ heads */

/* The layers of head `h` on `rows` input rows (width n_in of its first
 * layer); the result, [rows][H], goes to `out` (s->head_x when NULL). */
static const float *head_body(entmtp_session *S, int32_t h, int32_t rows, const float *in, float *out) {
    const emt_backend_ops *op = S->model->be->ops;
    const emt_head *hd = &S->heads->heads[h];
    const int32_t H = S->model->cfg.hidden;
    emt_scratch *s = &S->s;
    const float *x = in;
    for (int32_t l = 0; l < hd->n_layers; l++) {
        const emt_head_layer *L = &hd->layers[l];
        float *y = l == hd->n_layers - 1 && out ? out : s->head_x;
        op->matmul(S->ex, L->w, L->b, x, rows, L->n_in, H, s->head_tmp, 1);
        if (L->res_w) {
            op->matmul(S->ex, L->res_w, L->res_b, x, rows, L->n_in, H, s->head_res, 1);
            op->silu_residual(S->ex, s->head_res, s->head_tmp, (int64_t)rows * H, y);
        } else {
            op->silu_residual(S->ex, x, s->head_tmp, (int64_t)rows * H, y);
        }
        x = y;
    }
    return x;
}

/* Draft-vocabulary positions -> token ids, for `rows` top-k lists. */
static void map_draft_ids(entmtp_session *S, int32_t *top_ids, int32_t rows) {
    for (int64_t i = 0; i < (int64_t)rows * S->topk; i++) top_ids[i] = S->heads->draft_ids[top_ids[i]];
}

/* Run head `h` on `rows` input rows, leaving top-k ids/probs per row in
 * top_ids/top_p. */
static void run_head(entmtp_session *S, int32_t h, int32_t rows, const float *in, int32_t *top_ids,
                     float *top_p) {
    const emt_backend_ops *op = S->model->be->ops;
    const emt_head *hd = &S->heads->heads[h];
    const int32_t H = S->model->cfg.hidden, V = S->model->cfg.vocab;
    const float *x = head_body(S, h, rows, in, NULL);
    if (hd->draft_w || (!hd->lm_w && S->heads->draft_shared.data)) {
        /* rank the draft vocabulary only, then map back to token ids */
        int32_t K = S->heads->n_draft;
        emt_wmat own_draft = { EMT_F32, hd->draft_w, NULL };
        emt_matmul(op, S->ex, hd->draft_w ? &own_draft : &S->heads->draft_shared, hd->draft_b, x, rows, H, K,
                   S->s.head_logits, 1);
        op->topk(S->ex, S->s.head_logits, rows, K, S->topk, top_ids, top_p, NULL);
        map_draft_ids(S, top_ids, rows);
        return;
    }
    emt_wmat own = { EMT_F32, hd->lm_w, NULL };
    emt_matmul(op, S->ex, hd->lm_w ? &own : &S->model->lm_head, hd->lm_b, x, rows, H, V, S->s.head_logits, 1);
    op->topk(S->ex, S->s.head_logits, rows, V, S->topk, top_ids, top_p, NULL);
}

/* Medusa: every head on the last hidden state; results in chain_ids/chain_p.
 * Heads that share the base lm_head run their blocks first, then one
 * lm_head product over all heads' rows reads the vocabulary weights once
 * instead of once per head (TGI's MedusaHeadV2). The exact matmul gives
 * each row the bits it would get alone, so the top-k lists are those of the
 * per-head path. */
static void medusa_heads(entmtp_session *S) {
    const emt_backend_ops *op = S->model->be->ops;
    const int32_t n = S->heads->n_heads, H = S->model->cfg.hidden, V = S->model->cfg.vocab;
    if (!S->heads->shares_lm_head || !S->batch_heads || n < 2) {
        for (int32_t h = 0; h < n; h++)
            run_head(S, h, 1, S->s.last_hidden, S->chain_ids + (size_t)h * S->topk,
                     S->chain_p + (size_t)h * S->topk);
        return;
    }
    float *rows = S->s.head_in; /* [n][H]: Medusa uses no Hydra input rows */
    for (int32_t h = 0; h < n; h++) head_body(S, h, 1, S->s.last_hidden, rows + (size_t)h * H);
    if (S->heads->draft_shared.data) {
        int32_t K = S->heads->n_draft;
        emt_matmul(op, S->ex, &S->heads->draft_shared, NULL, rows, n, H, K, S->s.head_logits, 1);
        op->topk(S->ex, S->s.head_logits, n, K, S->topk, S->chain_ids, S->chain_p, NULL);
        map_draft_ids(S, S->chain_ids, n);
        return;
    }
    emt_matmul(op, S->ex, &S->model->lm_head, NULL, rows, n, H, V, S->s.head_logits, 1);
    op->topk(S->ex, S->s.head_logits, n, V, S->topk, S->chain_ids, S->chain_p, NULL);
}

/* Build Hydra input row r for head `depth-1`: [h, e(path[0]), ..., e(path[depth-1])]. */
static void hydra_input_row(entmtp_session *S, int32_t r, const int32_t *path, int32_t depth) {
    const emt_backend_ops *op = S->model->be->ops;
    const int32_t H = S->model->cfg.hidden;
    size_t width = (size_t)H * (size_t)(depth + 1);
    float *row = S->s.head_in + (size_t)r * width;
    int32_t zero = 0;
    op->copy_rows(S->ex, row, S->s.last_hidden, (size_t)H, &zero, &zero, 1);
    for (int32_t j = 0; j < depth; j++) emt_embed(op, S->ex, &S->model->tok_embd, H, &path[j], 1, row + (size_t)(j + 1) * H);
}

/* Hydra greedy chain from the root: head d sees root and the chain's first
 * d tokens. Gives the features and the rank-0 path of every tree. */
static void hydra_chain(entmtp_session *S, int32_t root) {
    int32_t *path = S->path;
    path[0] = root;
    for (int32_t d = 0; d < S->heads->n_heads; d++) {
        hydra_input_row(S, 0, path, d + 1);
        run_head(S, d, 1, S->s.head_in, S->chain_ids + (size_t)d * S->topk, S->chain_p + (size_t)d * S->topk);
        path[d + 1] = S->chain_ids[(size_t)d * S->topk];
    }
}

entmtp_status emt_session_head_topk(entmtp_session *S, const int32_t *path, int32_t n_heads,
                                    int32_t *top_ids) {
    if (!S || !S->heads || !path || !top_ids || n_heads < 1 || n_heads > S->heads->n_heads)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "head_topk: needs heads and 1..%d head levels",
                        S && S->heads ? S->heads->n_heads : 0);
    if (!S->have_logits) return emt_fail(ENTMTP_ERR_STATE, "head_topk: no context yet");
    for (int32_t d = 0; d < n_heads; d++)
        if (path[d] < 0 || path[d] >= S->model->cfg.vocab)
            return emt_fail(ENTMTP_ERR_OUT_OF_RANGE, "head_topk: path token %d outside the vocabulary", path[d]);
    if (S->heads->kind == ENTMTP_HEADS_MEDUSA) {
        medusa_heads(S);
    } else {
        for (int32_t d = 0; d < n_heads; d++) {
            hydra_input_row(S, 0, path, d + 1);
            run_head(S, d, 1, S->s.head_in, S->chain_ids + (size_t)d * S->topk, S->chain_p + (size_t)d * S->topk);
        }
    }
    entmtp_status st = emt_backend_sync(S->model->be, S->ex);
    if (st) return st;
    memcpy(top_ids, S->chain_ids, (size_t)n_heads * (size_t)S->topk * sizeof *top_ids);
    return ENTMTP_OK;
}

int32_t emt_session_topk(const entmtp_session *S) { return S ? S->topk : 0; }

/* Node tokens for the chosen tree. */
static void draft(entmtp_session *S, const emt_tree *t, int32_t root) {
    S->node_tokens[0] = root;
    if (t->n_nodes == 1) return;
    if (S->heads->kind == ENTMTP_HEADS_MEDUSA) {
        for (int32_t i = 1; i < t->n_nodes; i++)
            S->node_tokens[i] = S->chain_ids[(size_t)(t->position_ids[i] - 1) * S->topk + t->node_ranks[i]];
        return;
    }
    /* Hydra: nodes are sorted by depth, so parents are drafted first. A
     * parent on the rank-0 chain reuses the chain's head call. */
    for (int32_t i = 0; i < t->n_nodes; i++) S->parent_row[i] = -1;
    int32_t i = 1;
    while (i < t->n_nodes) {
        int32_t depth = t->position_ids[i];
        int32_t end = i;
        while (end < t->n_nodes && t->position_ids[end] == depth) end++;
        /* one head call for the off-chain parents of this depth */
        int32_t rows = 0;
        for (int32_t k = i; k < end; k++) {
            int32_t par = t->parents[k];
            int on_chain = 1;
            for (int32_t a = par; a > 0; a = t->parents[a])
                if (t->node_ranks[a] != 0) on_chain = 0;
            if (on_chain || S->parent_row[par] >= 0) continue;
            int32_t d = t->position_ids[par];
            for (int32_t a = par; a >= 0; a = t->parents[a]) S->path[t->position_ids[a]] = S->node_tokens[a];
            hydra_input_row(S, rows, S->path, d + 1);
            S->parent_row[par] = rows++;
        }
        if (rows > 0) run_head(S, depth - 1, rows, S->s.head_in, S->top_ids, S->top_p);
        for (int32_t k = i; k < end; k++) {
            int32_t par = t->parents[k];
            const int32_t *ids = S->parent_row[par] >= 0
                                     ? S->top_ids + (size_t)S->parent_row[par] * S->topk
                                     : S->chain_ids + (size_t)(depth - 1) * S->topk;
            S->node_tokens[k] = ids[t->node_ranks[k]];
        }
        i = end;
    }
}

/* ------------------------------------------------------------------- step */

static int is_stop(const entmtp_session *S, int32_t tok) {
    if (S->p.n_stop_tokens < 0) return entmtp_token_is_eog(S->model, tok);
    for (int32_t i = 0; i < S->p.n_stop_tokens; i++)
        if (S->p.stop_tokens[i] == tok) return 1;
    return 0;
}

/* What a search probe changes in a step: the tree verified is `tree` (not
 * chosen by the policy), every node's acceptance goes to node_ok, and the
 * committed path is the best one among the rows of `commit` (retrieve rows
 * in the tree's node ids, width tree->depth + 1). */
typedef struct step_probe {
    const emt_tree *tree;
    const int32_t *commit;
    int32_t commit_rows;
    uint8_t *node_ok;
} step_probe;

static entmtp_status run_step(entmtp_session *S, int force_ar, int32_t max_tokens,
                              const step_probe *probe, entmtp_step_result *out) {
    if (!S) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_step: session is NULL");
    if (!out) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_step: result is NULL");
    /* checked before anything runs: a step that commits tokens must be able to report them */
    if (out->struct_size < sizeof(size_t))
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_step_result.struct_size = %zu; set it to sizeof(entmtp_step_result)",
                        out->struct_size);
    entmtp_step_result res;
    memset(&res, 0, sizeof res);
    res.struct_size = sizeof res;
    res.tokens = S->emit;
    res.tree_index = -1;
    entmtp_status st = ENTMTP_OK;
    if (!S->have_logits) {
        st = emt_fail(ENTMTP_ERR_STATE, "entmtp_step: no context yet; call entmtp_session_prefill first");
        goto out;
    }
    if (S->n_tokens >= S->kv.capacity) {
        st = emt_fail(ENTMTP_ERR_KV_FULL, "entmtp_step: the KV cache is full (%d tokens)", S->kv.capacity);
        goto out;
    }
    if (S->bank && entmtp_bank_size(S->bank) != S->n_trees) {
        st = emt_fail(ENTMTP_ERR_STATE, "entmtp_step: the bank changed size (%d -> %d trees) after the session was created",
                      S->n_trees, entmtp_bank_size(S->bank));
        goto out;
    }
    double t0 = emt_now();
    const emt_backend_ops *op = S->model->be->ops;
    const int32_t V = S->model->cfg.vocab;
    const int32_t L = S->n_tokens;

    /* root token and base statistics */
    int32_t top1;
    float p0, entropy;
    op->topk(S->ex, S->s.next_logits, 1, V, 1, &top1, &p0, &entropy);
    int32_t root = top1;
    const float *next_host = S->s.next_logits;
    if (!op->host_memory) {
        if ((st = op->download(S->ex, S->host_next, S->s.next_logits, (size_t)V * sizeof(float)))) goto out;
        next_host = S->host_next;
    }
    if (S->p.temperature > 0) {
        st = emt_sample_typical(next_host, V, S->p.temperature, S->p.epsilon, S->p.delta,
                                &S->rng, &root);
        if (st) goto out;
    }

    /* heads, features, policy */
    int speculate = !force_ar && S->heads && (probe || (S->bank && S->n_trees > 0));
    float head_p[EMT_MAX_HEADS];
    int32_t n_heads = 0;
    int dynamic = 0; /* the policy asked for a dynamic tree of the chosen tree's size */
    if (speculate) {
        n_heads = S->heads->n_heads;
        if (S->heads->kind == ENTMTP_HEADS_MEDUSA) medusa_heads(S);
        else hydra_chain(S, root);
        for (int32_t d = 0; d < n_heads; d++) head_p[d] = S->chain_p[(size_t)d * S->topk];
    }
    emt_features_fill(&S->features, p0, entropy, head_p, n_heads, S->last_accept, S->ema,
                      S->stats.n_steps);
    const emt_tree *t = &g_ar_tree;
    if (probe) {
        t = probe->tree;
        draft(S, t, root);
    } else if (speculate) {
        int32_t k = 0;
        if (S->policy) {
            const emt_tree_outlook *ol = NULL;
            emt_tree_outlook view = { S->outlook.expected_accept, S->outlook.expected_seconds };
            dynamic = emt_policy_wants_dynamic_tree(S->policy);
            if (emt_policy_needs_outlook(S->policy)) {
                emt_outlook_compute(&S->outlook, S->bank, S->chain_p, S->topk, n_heads, S->topk, dynamic);
                ol = &view;
            }
            st = emt_policy_select_outlook(S->policy, &S->features.f, ol, S->n_trees, &k);
            if (st) goto out;
        }
        if (k < 0 || k >= S->n_trees) {
            st = emt_fail(ENTMTP_ERR_OUT_OF_RANGE, "entmtp_step: the policy chose tree %d, outside the bank [0, %d)", k, S->n_trees);
            goto out;
        }
        t = emt_outlook_tree(&S->outlook, S->bank, k, dynamic);
        res.tree_index = k;
        draft(S, t, root);
    } else {
        S->node_tokens[0] = root;
    }

    /* verify: one forward over the tree nodes at positions L + depth */
    for (int32_t i = 0; i < t->n_nodes; i++) S->positions[i] = L + t->position_ids[i];
    st = emt_forward(S->ex, S->model, &S->kv, &S->s, S->node_tokens, S->positions, t->n_nodes, L,
                     t->attn_mask, 1, t->n_nodes);
    if (st) goto out;

    /* accept */
    int32_t best = 0, acc = 0;
    const int32_t *rows = probe ? probe->commit : t->retrieve_indices;
    if (t->n_nodes > 1) {
        const float *node_logits = S->s.logits;
        if (!op->host_memory) {
            st = op->download(S->ex, S->host_logits, S->s.logits, (size_t)t->n_nodes * V * sizeof(float));
            if (st) goto out;
            node_logits = S->host_logits;
        }
        emt_posterior_nodes in = { t->n_nodes, V, node_logits, S->node_tokens,
                                   probe ? probe->commit_rows : t->n_leaves, t->depth + 1, rows,
                                   S->p.temperature, S->p.epsilon, S->p.delta };
        st = emt_evaluate_posterior_nodes(&in, &best, &acc);
        if (!st && probe)
            st = emt_accept_node_flags(t->n_nodes, V, node_logits, S->node_tokens, t->parents,
                                       S->p.temperature, S->p.epsilon, S->p.delta, S->probe_probs,
                                       probe->node_ok);
        if (st) goto out;
    }
    const int32_t *row = rows + (size_t)best * (t->depth + 1);
    int32_t n_emit = acc + 1;
    res.accept_length = n_emit;
    if (max_tokens > 0 && n_emit > max_tokens) n_emit = max_tokens;
    int kv_full = 0;
    if (n_emit > S->kv.capacity - L) {
        n_emit = S->kv.capacity - L;
        kv_full = 1;
    }
    for (int32_t j = 0; j < n_emit; j++) {
        S->emit[j] = S->node_tokens[row[j]];
        if (is_stop(S, S->emit[j])) {
            n_emit = j + 1;
            res.stopped = 1;
            kv_full = 0;
            break;
        }
    }

    /* commit the accepted nodes' KV in path order (toward lower rows: safe in place) */
    for (int32_t j = 0; j < n_emit; j++) {
        S->dst_rows[j] = L + j;
        S->src_rows[j] = L + row[j];
    }
    const emt_model_config *c = &S->model->cfg;
    size_t kv_dim = (size_t)c->n_kv_heads * c->head_dim;
    for (int32_t l = 0; l < c->n_layers; l++) {
        op->copy_rows(S->ex, S->kv.k[l], S->kv.k[l], kv_dim, S->dst_rows, S->src_rows, n_emit);
        op->copy_rows(S->ex, S->kv.v[l], S->kv.v[l], kv_dim, S->dst_rows, S->src_rows, n_emit);
    }
    keep_last_row(S, row[n_emit - 1], row[n_emit - 1]);
    if ((st = emt_backend_sync(S->model->be, S->ex))) goto out;

    memcpy(S->tokens + L, S->emit, (size_t)n_emit * sizeof(int32_t));
    S->n_tokens += n_emit;
    double dt = emt_now() - t0;
    res.n_tokens = n_emit;
    res.n_nodes = t->n_nodes;
    res.s = S->features.f.s;
    res.p0 = p0;
    res.entropy = entropy;
    res.seconds = dt;
    S->last_accept = n_emit;
    S->ema = S->stats.n_steps == 0 ? (float)n_emit
                                   : S->p.ema_decay * S->ema + (1.0f - S->p.ema_decay) * (float)n_emit;
    S->stats.n_steps++;
    S->stats.n_generated += n_emit;
    S->stats.decode_seconds += dt;
    S->stats.mean_accept_length = (double)S->stats.n_generated / (double)S->stats.n_steps;
    S->stats.tokens_per_second = S->stats.decode_seconds > 0 ? (double)S->stats.n_generated / S->stats.decode_seconds : 0;
    if (res.tree_index >= 0) {
        S->usage[res.tree_index]++;
        /* a reproducible session keeps the bank's step costs: the clock would make
         * the tree sequence, and so sampled text, depend on machine timing */
        emt_outlook_observe(&S->outlook, t, res.tree_index, S->chain_p, S->topk, n_heads, S->topk, row, acc,
                            S->p.reproducible ? 0.0 : dt);
        if (S->policy) {
            entmtp_outcome o = { sizeof o, res.tree_index, t->n_nodes, t->depth, res.accept_length, dt };
            if ((st = entmtp_policy_observe(S->policy, &o))) goto out;
        }
    }
    if (kv_full)
        st = emt_fail(ENTMTP_ERR_KV_FULL, "entmtp_step: the KV cache is full (%d tokens); %d of %d accepted tokens were kept",
                      S->kv.capacity, n_emit, res.accept_length);
out:
    emt_copy_out(out, &res, sizeof res, "entmtp_step_result"); /* struct_size was checked above */
    return st;
}

ENTMTP_API entmtp_status entmtp_step(entmtp_session *S, int32_t max_tokens, entmtp_step_result *r) {
    return run_step(S, 0, max_tokens, NULL, r);
}

entmtp_status emt_session_probe_step(entmtp_session *S, const emt_tree *tree, const int32_t *commit,
                                     int32_t commit_rows, uint8_t *node_ok, entmtp_step_result *r) {
    if (!S || !tree || !commit || commit_rows < 1 || !node_ok || !r)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "probe_step: NULL argument or no commit rows");
    if (!S->heads || !S->probe_probs)
        return emt_fail(ENTMTP_ERR_STATE, "probe_step: the session has no heads or was not sized for search");
    if (tree->n_nodes > S->max_nodes || tree->depth > S->heads->n_heads || tree->topk > S->topk)
        return emt_fail(ENTMTP_ERR_MISMATCH, "probe_step: tree '%s' (%d nodes, depth %d, top-k %d) exceeds the session's "
                        "sizing (%d nodes, %d heads, top-k %d)", tree->name ? tree->name : "?", tree->n_nodes,
                        tree->depth, tree->topk, S->max_nodes, S->heads->n_heads, S->topk);
    step_probe probe = { tree, commit, commit_rows, node_ok };
    return run_step(S, 0, 0, &probe, r);
}

ENTMTP_API entmtp_status entmtp_step_ar(entmtp_session *S, entmtp_step_result *r) {
    return run_step(S, 1, 1, NULL, r);
}

ENTMTP_API entmtp_status entmtp_generate(entmtp_session *S, int32_t max_tokens, int autoregressive,
                                         entmtp_token_fn on_tokens, void *user_data) {
    if (!S) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_generate: session is NULL");
    if (max_tokens <= 0)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_generate: max_tokens = %d must be positive", max_tokens);
    int32_t produced = 0;
    while (produced < max_tokens) {
        entmtp_step_result r;
        r.struct_size = sizeof r;
        entmtp_status st = run_step(S, autoregressive, max_tokens - produced, NULL, &r);
        if (r.n_tokens > 0 && on_tokens && on_tokens(r.tokens, r.n_tokens, user_data))
            return st ? st : ENTMTP_STOPPED; /* a step error outranks the stop request */
        produced += r.n_tokens;
        if (st) return st;
        if (r.stopped) break;
    }
    return ENTMTP_OK;
}

/* ------------------------------------------------------------ accessors */

ENTMTP_API entmtp_status entmtp_session_tokens(const entmtp_session *S, const int32_t **tokens,
                                               int32_t *n_tokens) {
    if (!S || !tokens || !n_tokens)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_session_tokens: arguments must not be NULL");
    *tokens = S->tokens;
    *n_tokens = S->n_tokens;
    return ENTMTP_OK;
}

ENTMTP_API entmtp_status entmtp_session_get_stats(const entmtp_session *S, entmtp_session_stats *out) {
    if (!S || !out)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_session_get_stats: arguments must not be NULL");
    return emt_copy_out(out, &S->stats, sizeof S->stats, "entmtp_session_stats");
}

ENTMTP_API int64_t entmtp_session_tree_usage(const entmtp_session *S, int32_t index) {
    if (!S || index < 0 || index >= S->n_trees) return -1;
    return S->usage[index];
}

ENTMTP_API entmtp_status entmtp_session_logits(const entmtp_session *S, const float **logits,
                                               int32_t *n_vocab) {
    if (!S || !logits || !n_vocab)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_session_logits: arguments must not be NULL");
    if (!S->have_logits)
        return emt_fail(ENTMTP_ERR_STATE, "entmtp_session_logits: no logits before the first prefill");
    const emt_backend_ops *op = S->model->be->ops;
    if (!op->host_memory) {
        entmtp_status st = op->download(S->ex, S->host_next, S->s.next_logits,
                                        (size_t)S->model->cfg.vocab * sizeof(float));
        if (st) return st;
        *logits = S->host_next;
        *n_vocab = S->model->cfg.vocab;
        return ENTMTP_OK;
    }
    *logits = S->s.next_logits;
    *n_vocab = S->model->cfg.vocab;
    return ENTMTP_OK;
}

ENTMTP_API entmtp_status entmtp_session_features(const entmtp_session *S, entmtp_features *out) {
    if (!S || !out)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_session_features: arguments must not be NULL");
    return emt_copy_out(out, &S->features.f, sizeof S->features.f, "entmtp_features");
}

/* --------------------------------------------------------------- scoring */

entmtp_status emt_session_score(entmtp_session *S, const int32_t *tokens, int32_t n_tokens,
                                int32_t first_scored, double *nll_sum, int32_t *n_scored) {
    if (!S || !tokens || !nll_sum || !n_scored || n_tokens < 1 || first_scored < 1)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "score: bad arguments (%d tokens, first scored %d)", n_tokens, first_scored);
    if (n_tokens > S->kv.capacity)
        return emt_fail(ENTMTP_ERR_KV_FULL, "score: %d tokens do not fit a KV cache of %d", n_tokens, S->kv.capacity);
    const int32_t V = S->model->cfg.vocab;
    for (int32_t i = 0; i < n_tokens; i++)
        if (tokens[i] < 0 || tokens[i] >= V)
            return emt_fail(ENTMTP_ERR_OUT_OF_RANGE, "score: token %d at position %d is outside the vocabulary", tokens[i], i);
    entmtp_session_reset(S);
    const emt_backend_ops *op = S->model->be->ops;
    int32_t chunk = S->max_nodes < EMT_PREFILL_CHUNK ? S->max_nodes : EMT_PREFILL_CHUNK;
    double total = 0;
    int32_t count = 0;
    for (int32_t done = 0; done < n_tokens - 1;) {
        int32_t n = n_tokens - 1 - done < chunk ? n_tokens - 1 - done : chunk;
        for (int32_t i = 0; i < n; i++) S->positions[i] = done + i;
        entmtp_status st = emt_forward(S->ex, S->model, &S->kv, &S->s, tokens + done, S->positions, n, done,
                                       NULL, 0, n);
        if (!st) st = emt_backend_sync(S->model->be, S->ex);
        const float *lg = S->s.logits;
        if (!st && !op->host_memory) {
            st = op->download(S->ex, S->host_logits, S->s.logits, (size_t)n * V * sizeof(float));
            lg = S->host_logits;
        }
        if (st) return st;
        for (int32_t i = 0; i < n; i++) {
            int32_t next = done + i + 1;
            if (next < first_scored) continue;
            const float *x = lg + (size_t)i * V;
            float mx = x[0];
            for (int32_t v = 1; v < V; v++) if (x[v] > mx) mx = x[v];
            double z = 0;
            for (int32_t v = 0; v < V; v++) z += exp((double)x[v] - mx);
            total += log(z) - ((double)x[tokens[next]] - mx);
            count++;
        }
        done += n;
    }
    *nll_sum = total;
    *n_scored = count;
    return ENTMTP_OK;
}

/* -------------------------------------------------------------- benchmark */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

entmtp_status emt_session_time_verify(entmtp_session *S, int32_t tree_index, int32_t reps,
                                      double *median_seconds) {
    if (!S || !S->bank || tree_index < 0 || tree_index >= S->n_trees || reps < 1)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "time_verify: bad session, tree %d or reps %d", tree_index, reps);
    const emt_tree *t = emt_bank_tree(S->bank, tree_index);
    if (S->n_tokens + t->n_nodes > S->kv.rows)
        return emt_fail(ENTMTP_ERR_KV_FULL, "time_verify: no room for %d nodes", t->n_nodes);
    for (int32_t i = 0; i < t->n_nodes; i++) {
        S->node_tokens[i] = (int32_t)((7 * i + 3) % S->model->cfg.vocab);
        S->positions[i] = S->n_tokens + t->position_ids[i];
    }
    double *times = emt_malloc((size_t)reps, sizeof(double));
    if (!times) return ENTMTP_ERR_OUT_OF_MEMORY;
    entmtp_status st = ENTMTP_OK;
    for (int32_t r = 0; r < reps && !st; r++) {
        double t0 = emt_now();
        st = emt_forward(S->ex, S->model, &S->kv, &S->s, S->node_tokens, S->positions, t->n_nodes,
                         S->n_tokens, t->attn_mask, 1, t->n_nodes);
        if (!st) st = emt_backend_sync(S->model->be, S->ex);
        times[r] = emt_now() - t0;
    }
    if (!st) {
        qsort(times, (size_t)reps, sizeof *times, cmp_double);
        *median_seconds = times[reps / 2];
    }
    free(times);
    return st;
}

void emt_session_set_batch_heads(entmtp_session *S, int batch_heads) { S->batch_heads = batch_heads; }

void emt_session_last_head_topk(const entmtp_session *S, const int32_t **ids, const float **probs,
                           int32_t *k) {
    *ids = S->chain_ids;
    *probs = S->chain_p;
    *k = S->topk;
}
