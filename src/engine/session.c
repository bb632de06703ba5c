/* entmtp_session_*: lifecycle, prefill, accessors, scoring and the verify
 * benchmark. The step itself is in step.c (session_internal.h). */
#include "engine/session_internal.h"
#include "policy/policy_internal.h"

#include <math.h>
#include <stdlib.h>

static const entmtp_session_params g_session_defaults = {
    .struct_size = sizeof g_session_defaults, .kv_capacity = 0, .temperature = 0.0f, .epsilon = 0.09f,
    .delta = 0.3f, .seed = 0x5eed, .ema_decay = 0.8f, .n_stop_tokens = -1, .stop_tokens = NULL,
    .reproducible = 0, .prompt_activation_bits = 8, .step_activation_bits = 16, .kv_type = ENTMTP_KV_DEFAULT,
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
    if (S->drafter && S->drafter->destroy) S->drafter->destroy(S);
    dev_free(S, S->kv.block);
    dev_free(S, S->rec_dev);
    dev_free(S, S->stop_dev);
    dev_free(S, S->draft_ids_dev);
    free(S->rec_host);
    free(S->gather_idx);
    free(S->kv.k);
    free(S->kv.v);
    emt_scratch *s = &S->s;
    void *bufs[] = { s->x, s->xn, s->q, s->att, s->tmp, s->gate, s->up, s->k_new, s->v_new, s->hidden, s->logits,
                     s->head_in, s->head_x, s->head_tmp, s->head_res, s->head_logits,
                     s->next_logits, s->last_hidden, s->taps };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) dev_free(S, bufs[i]);
    if (S->ex) S->model->be->ops->exec_destroy(S->ex);
    free(s->tap_dst);
    free(s->tap_src);
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
    free(S->tree_ar_cost);
    emt_outlook_free(&S->outlook);
    free(S);
}

/* An activation precision field: 8 or 16 bits (0: the field's default,
 * which entmtp_session_create writes in). */
static entmtp_status check_activation_bits(const char *field, int32_t bits, int32_t zero_means) {
    if (bits != 0 && bits != 8 && bits != 16)
        return emt_fail(ENTMTP_ERR_INVALID_CONFIG, "session params: %s = %d must be 8 or 16 (0: %d)", field, bits,
                        zero_means);
    return ENTMTP_OK;
}

static int keeps_bf16_kv(const emt_backend_ops *op) {
    return op->set_kv_dtype && op->round_bf16 && op->rope_round_kv;
}

/* A BF16 row is kv_dim / 2 four-byte words, so the width must be even. */
static int kv_rows_even(const entmtp_model *m) { return ((int64_t)m->cfg.n_kv_heads * m->cfg.head_dim) % 2 == 0; }

/* The KV element type a session gets: ENTMTP_KV_DEFAULT is BF16 on a
 * device-memory backend that keeps BF16 caches (attention streams the whole
 * cache every step, so half the bytes; the new rows cost no extra launch,
 * rope_round_kv), when the model's KV row width is even; F32 otherwise
 * (the CPU: its default stays the bit-exact F32 reference). */
static emt_dtype session_kv_dtype(int32_t kv_type, const entmtp_model *m) {
    if (kv_type == ENTMTP_KV_BF16) return EMT_BF16;
    if (kv_type == ENTMTP_KV_F32) return EMT_F32;
    const emt_backend_ops *op = m->be->ops;
    return !op->host_memory && keeps_bf16_kv(op) && kv_rows_even(m) ? EMT_BF16 : EMT_F32;
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
    entmtp_status st;
    if ((st = check_activation_bits("prompt_activation_bits", p->prompt_activation_bits, 8)) ||
        (st = check_activation_bits("step_activation_bits", p->step_activation_bits, 16)))
        return st;
    if (p->kv_type != ENTMTP_KV_DEFAULT && p->kv_type != ENTMTP_KV_F32 && p->kv_type != ENTMTP_KV_BF16)
        return emt_fail(ENTMTP_ERR_INVALID_CONFIG,
                        "session params: kv_type = %d must be 0 (default), 1 (ENTMTP_KV_F32) or 2 (ENTMTP_KV_BF16)",
                        p->kv_type);
    if (p->kv_type == ENTMTP_KV_BF16) {
        const emt_backend_ops *op = m->be->ops;
        if (!keeps_bf16_kv(op))
            return emt_fail(ENTMTP_ERR_INVALID_CONFIG,
                            "session params: kv_type = 2 (BF16): the %s backend keeps F32 KV caches only", op->name);
        if (!kv_rows_even(m))
            return emt_fail(ENTMTP_ERR_INVALID_CONFIG,
                            "session params: kv_type = 2 (BF16) needs an even KV row width; the model's is %d x %d",
                            m->cfg.n_kv_heads, m->cfg.head_dim);
    }
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

/* The device step's buffers (backends with the step ops): the step record
 * on the device and its host copy, the stop tokens as a device mask, the
 * draft vocabulary's ids on the device. */
static entmtp_status device_step_init(entmtp_session *S) {
    emt_backend *be = S->model->be;
    const emt_backend_ops *op = be->ops;
    if (!emt_backend_has_step_ops(op)) return ENTMTP_OK;
    const int32_t V = S->model->cfg.vocab, n_heads = S->heads ? S->heads->n_heads : 0;
    int32_t max_path = (S->max_depth > n_heads ? S->max_depth : n_heads) + 1;
    int32_t head_rows = S->max_nodes > n_heads ? S->max_nodes : n_heads;
    S->rec_lay = emt_step_record_layout_make(max_path, n_heads, S->topk);
    S->w_node_tok = S->rec_lay.words;
    S->w_draft_ids = S->w_node_tok + (size_t)S->max_nodes;
    S->w_draft_p = S->w_draft_ids + (size_t)head_rows * S->topk;
    S->w_row_tok = S->w_draft_p + (size_t)head_rows * S->topk;
    size_t idx_count = (size_t)head_rows * (n_heads + 1) > (size_t)S->max_nodes ? (size_t)head_rows * (n_heads + 1)
                                                                                : (size_t)S->max_nodes;
    S->w_len = S->w_row_tok + (size_t)head_rows * (n_heads + 1);
    size_t rec_bytes = (S->w_len + 4) * sizeof(int32_t);
    S->rec_dev = op->alloc(be, rec_bytes);
    S->rec_host = emt_calloc(S->rec_lay.words, sizeof(int32_t));
    S->gather_idx = emt_calloc(idx_count, sizeof(int32_t));
    if (!S->gather_idx) return emt_fail(ENTMTP_ERR_OUT_OF_MEMORY, "entmtp_session_create: out of memory for the step record");
    S->stop_dev = op->alloc(be, (size_t)V);
    uint8_t *stop = emt_calloc((size_t)V, 1);
    entmtp_status st = ENTMTP_ERR_OUT_OF_MEMORY;
    if (S->rec_dev && S->rec_host && S->stop_dev && stop) {
        for (int32_t t = 0; t < V; t++) stop[t] = (uint8_t)emt_is_stop(S, t);
        st = op->upload(be, S->stop_dev, stop, (size_t)V);
    }
    free(stop);
    if (!st && S->heads && S->heads->n_draft) {
        size_t bytes = (size_t)S->heads->n_draft * sizeof(int32_t);
        S->draft_ids_dev = op->alloc(be, bytes);
        st = S->draft_ids_dev ? op->upload(be, S->draft_ids_dev, S->heads->draft_ids, bytes) : ENTMTP_ERR_OUT_OF_MEMORY;
    }
    if (st == ENTMTP_ERR_OUT_OF_MEMORY)
        return emt_fail(st, "entmtp_session_create: out of memory for the step record");
    if (st) return emt_fail(st, "entmtp_session_create: %s backend: the step buffers' upload failed", op->name);
    emt_session_set_device_step(S, 1); /* device_step, dyn_step and device_sample from the backend's ops */
    return ENTMTP_OK;
}

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
    if (p.prompt_activation_bits == 0) p.prompt_activation_bits = 8; /* the fields' defaults */
    if (p.step_activation_bits == 0) p.step_activation_bits = 16;

    entmtp_session *S = emt_calloc(1, sizeof *S);
    if (!S) return ENTMTP_ERR_OUT_OF_MEMORY;
    S->model = model;
    S->heads = heads;
    S->drafter = emt_drafter_for(heads);
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
    if (p.step_activation_bits == 8 && be->ops->set_activation_bits) be->ops->set_activation_bits(S->ex, 8);

    S->kv.capacity = p.kv_capacity;
    S->kv.rows = p.kv_capacity + S->max_nodes;
    HOST_ALLOC(S->kv.k, c->n_layers);
    HOST_ALLOC(S->kv.v, c->n_layers);
    /* one block for every layer's K and V, each slab 64-byte aligned; a BF16
     * row is kv_dim / 2 words (checked even) */
    S->kv.dtype = session_kv_dtype(p.kv_type, model);
    S->kv.row_words = (size_t)(S->kv.dtype == EMT_BF16 ? kv_dim / 2 : kv_dim);
    const int64_t kv_slab = ((int64_t)S->kv.rows * (int64_t)S->kv.row_words + 15) / 16 * 16;
    DEV_ALLOC(S->kv.block, 2 * c->n_layers * kv_slab);
    S->kv.slab = (size_t)kv_slab;
    for (int32_t l = 0; l < c->n_layers; l++) {
        S->kv.k[l] = S->kv.block + (2 * l) * kv_slab;
        S->kv.v[l] = S->kv.block + (2 * l + 1) * kv_slab;
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
    if (S->kv.dtype == EMT_BF16) {
        DEV_ALLOC(s->k_new, max_rows * kv_dim);
        DEV_ALLOC(s->v_new, max_rows * kv_dim);
    }
    DEV_ALLOC(s->hidden, max_rows * H);
    DEV_ALLOC(s->logits, S->max_nodes * V);
    DEV_ALLOC(s->next_logits, V);
    DEV_ALLOC(s->last_hidden, H);
    if (n_heads) {
        int32_t head_rows = S->max_nodes > n_heads ? S->max_nodes : n_heads;
        if (!heads->eagle3) { /* the heads' rows (EAGLE-3 keeps its own scratch) */
            DEV_ALLOC(s->head_in, head_rows * H * (n_heads + 1));
            DEV_ALLOC(s->head_x, head_rows * H);
            DEV_ALLOC(s->head_tmp, head_rows * H);
            DEV_ALLOC(s->head_res, head_rows * H);
            DEV_ALLOC(s->head_logits, head_rows * V);
        }
        HOST_ALLOC(S->top_ids, (int64_t)head_rows * S->topk);
        HOST_ALLOC(S->top_p, (int64_t)head_rows * S->topk);
        HOST_ALLOC(S->chain_ids, (int64_t)n_heads * S->topk);
        HOST_ALLOC(S->chain_p, (int64_t)n_heads * S->topk);
    }
    if (heads && heads->eagle3) { /* the verify pass leaves the drafter's target layers */
        s->n_taps = 3;
        memcpy(s->tap_layers, heads->eagle3->taps, sizeof s->tap_layers);
        DEV_ALLOC(s->taps, max_rows * 3 * H);
        HOST_ALLOC(s->tap_dst, max_rows);
        HOST_ALLOC(s->tap_src, max_rows);
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
    if (S->n_trees > 0) {
        HOST_ALLOC(S->tree_ar_cost, S->n_trees);
        if (!emt_cost_model_ar_steps(bank, S->tree_ar_cost)) {
            free(S->tree_ar_cost);
            S->tree_ar_cost = NULL;
        }
    }
    S->warmup_uses = be->ops->graph_begin ? 2 : 1;
    if (min_nodes > 0) HOST_ALLOC(S->probe_probs, model->cfg.vocab);
    if (!be->ops->host_memory) {
        HOST_ALLOC(S->host_logits, (int64_t)S->max_nodes * V);
        HOST_ALLOC(S->host_next, V);
    }
    if ((st = device_step_init(S))) {
        entmtp_session_free(S);
        return st;
    }
    if (n_heads && S->n_trees && (st = emt_outlook_init(&S->outlook, bank, n_heads, S->topk))) {
        entmtp_session_free(S);
        return st;
    }
    if (S->drafter) S->outlook.level_prior = S->drafter->level_ar_steps;
    if (S->drafter && S->drafter->init && (st = S->drafter->init(S))) {
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
    S->next_ready = S->next_heads = 0;
    emt_session_forget_graphs(S);
    S->rng = S->p.seed;
    S->root_u_drawn = 0;
    S->last_accept = 0;
    S->ema = 0;
    emt_features_clear(&S->features);
    memset(&S->stats, 0, sizeof S->stats);
    S->stats.struct_size = sizeof S->stats;
    memset(&S->counters, 0, sizeof S->counters);
    for (int32_t i = 0; i < S->n_trees; i++) S->usage[i] = 0;
    S->decode_start = S->ar_uses = 0;
    S->ar_cost_sum = S->measured_ar_tps = 0;
    if (S->drafter && S->drafter->reset) S->drafter->reset(S);
    if (S->policy) entmtp_policy_reset(S->policy);
}

/* ---------------------------------------------------------------- prefill */

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
    /* the prompt mode covers the prefill's products only: it follows the
     * phase, never the row count, so steps and verified trees keep the step
     * precision (16 bits unless step_activation_bits says 8) */
    void (*set_bits)(emt_exec *, int32_t) = S->model->be->ops->set_activation_bits;
    int32_t prompt_bits = S->p.prompt_activation_bits, step_bits = S->p.step_activation_bits; /* 0s resolved at create */
    int switch_bits = prompt_bits != step_bits && set_bits;
    if (switch_bits) set_bits(S->ex, prompt_bits);
    for (int32_t done = 0; done < n_tokens;) {
        int32_t n = n_tokens - done < EMT_PREFILL_CHUNK ? n_tokens - done : EMT_PREFILL_CHUNK;
        for (int32_t i = 0; i < n; i++) S->positions[i] = S->n_tokens + done + i;
        int last = done + n == n_tokens;
        entmtp_status st = emt_forward(S->ex, S->model, &S->kv, &S->s, tokens + done, S->positions, n,
                                       S->n_tokens + done, NULL, 0, last ? 1 : 0);
        if (!st && S->drafter && S->drafter->prefill) { /* its rows read the chunk's tokens, written ahead */
            memcpy(S->tokens + S->n_tokens + done, tokens + done, (size_t)n * sizeof *tokens);
            st = S->drafter->prefill(S, S->n_tokens + done, n);
        }
        if (st) {
            if (switch_bits) set_bits(S->ex, step_bits);
            return st;
        }
        if (last) emt_keep_last_row(S, n - 1, 0);
        done += n;
    }
    if (switch_bits) set_bits(S->ex, step_bits);
    /* on the device: the first step's root (greedy, or sampled with the
     * uniform written here) and heads come with the record, in the
     * prefill's one wait */
    S->next_ready = S->next_heads = 0;
    entmtp_status st;
    if (emt_root_on_device(S)) {
        emt_root_uniform_write(S);
        st = emt_step_finish_device(S, 1, 1);
    } else {
        st = emt_backend_sync(S->model->be, S->ex);
    }
    if (st) return st;
    memcpy(S->tokens + S->n_tokens, tokens, (size_t)n_tokens * sizeof *tokens);
    S->n_tokens += n_tokens;
    S->n_prompt += n_tokens;
    S->have_logits = 1;
    S->stats.n_prompt_tokens += n_tokens;
    S->stats.prefill_seconds += emt_now() - t0;
    S->stats.prefill_tokens_per_second =
        S->stats.prefill_seconds > 0 ? (double)S->stats.n_prompt_tokens / S->stats.prefill_seconds : 0;
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

ENTMTP_API entmtp_status entmtp_session_measure_ar(entmtp_session *S, int32_t n_tokens) {
    if (!S) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_session_measure_ar: session is NULL");
    if (S->stats.n_steps == 0 || S->decode_start < 1)
        return emt_fail(ENTMTP_ERR_STATE, "entmtp_session_measure_ar: the session has not stepped yet: "
                        "there is no prompt and decode rate to compare with");
    if (n_tokens <= 0) n_tokens = S->stats.n_generated < 8 ? 8 : (int32_t)S->stats.n_generated;
    /* the same model and settings, a cache just large enough, and no stop
     * tokens, so AR runs its n_tokens steps whatever it writes */
    entmtp_session_params p = S->p;
    p.struct_size = sizeof p;
    p.kv_capacity = S->decode_start + n_tokens;
    if (p.kv_capacity > S->model->cfg.ctx && S->model->cfg.ctx > 0) p.kv_capacity = S->model->cfg.ctx;
    if (p.kv_capacity <= S->decode_start)
        return emt_fail(ENTMTP_ERR_KV_FULL, "entmtp_session_measure_ar: the prompt (%d tokens) leaves no room for AR "
                        "steps in the model's context (%d)", S->decode_start, S->model->cfg.ctx);
    p.n_stop_tokens = 0;
    p.stop_tokens = NULL;
    entmtp_session *ar = NULL;
    entmtp_status st = entmtp_session_create(S->model, NULL, NULL, &p, &ar);
    if (!st) st = entmtp_session_prefill(ar, S->tokens, S->decode_start);
    if (!st) st = entmtp_generate(ar, p.kv_capacity - S->decode_start, 1, NULL, NULL);
    if (st == ENTMTP_ERR_KV_FULL) {
        entmtp_clear_error();
        st = ENTMTP_OK;
    }
    if (!st) {
        const entmtp_session_stats *x = &ar->stats;
        S->measured_ar_tps = x->warm_tokens_per_second > 0 ? x->warm_tokens_per_second : x->tokens_per_second;
        emt_session_update_speedup(S);
    }
    entmtp_session_free(ar);
    return st;
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

emt_dtype emt_session_kv_dtype(const entmtp_session *S) { return S->kv.dtype; }
