/* Stage 4 of a step, commit: the accepted path's KV rows move to the end of
 * the committed cache, its last node's hidden state and logits become the
 * next step's inputs, and the tokens and statistics are recorded. */
#include "engine/session_internal.h"
#include "policy/policy_internal.h"

#include <stddef.h>

void emt_keep_last_row(entmtp_session *S, int32_t hidden_row, int32_t logits_row) {
    const emt_backend_ops *op = S->model->be->ops;
    int32_t zero = 0;
    op->copy_rows(S->ex, S->s.last_hidden, S->s.hidden, (size_t)S->model->cfg.hidden, &zero,
                  &hidden_row, 1);
    op->copy_rows(S->ex, S->s.next_logits, S->s.logits, (size_t)S->model->cfg.vocab, &zero,
                  &logits_row, 1);
}

/* The accepted nodes' KV in path order (toward lower rows: safe in place). */
static void commit_kv(entmtp_session *S, const emt_step *st) {
    const emt_backend_ops *op = S->model->be->ops;
    for (int32_t j = 0; j < st->n_emit; j++) {
        S->dst_rows[j] = st->L + j;
        S->src_rows[j] = st->L + st->path[j];
    }
    const emt_model_config *c = &S->model->cfg;
    const size_t words = S->kv.row_words; /* a row as 4-byte words, whatever its element type */
    for (int32_t l = 0; l < c->n_layers; l++) {
        op->copy_rows(S->ex, S->kv.k[l], S->kv.k[l], words, S->dst_rows, S->src_rows, st->n_emit);
        op->copy_rows(S->ex, S->kv.v[l], S->kv.v[l], words, S->dst_rows, S->src_rows, st->n_emit);
    }
}

/* The warm rate and the speedup over AR (entmtp_session_stats). A step is
 * warm-up when it is among the first uses of its tree (or of the AR step):
 * those pay what later steps do not (pages of the heads faulted in, scratch
 * grown, a step graph recorded). Called before the step's usage is counted. */
static void record_rates(entmtp_session *S, const emt_step *st) {
    entmtp_session_stats *x = &S->stats;
    if (x->n_steps == 1) S->decode_start = st->L;
    int64_t uses = st->tree_index < 0 ? S->ar_uses++ : S->usage[st->tree_index];
    if (uses < S->warmup_uses) {
        x->n_warmup_steps++;
        x->warmup_seconds += st->seconds;
    } else {
        x->n_warm_generated += st->n_emit;
    }
    double warm_seconds = x->decode_seconds - x->warmup_seconds;
    x->warm_tokens_per_second = x->n_warm_generated > 0 && warm_seconds > 0 ? (double)x->n_warm_generated / warm_seconds : 0;
    S->ar_cost_sum += st->tree_index < 0 ? 1.0 : S->tree_ar_cost ? S->tree_ar_cost[st->tree_index] : 0.0;
    emt_session_update_speedup(S);
}

void emt_session_update_speedup(entmtp_session *S) {
    entmtp_session_stats *x = &S->stats;
    x->speedup_source = ENTMTP_SPEEDUP_NONE;
    x->speedup = x->ar_tokens_per_second = 0;
    if (S->measured_ar_tps > 0) {
        x->speedup_source = ENTMTP_SPEEDUP_MEASURED;
        x->ar_tokens_per_second = S->measured_ar_tps;
        x->speedup = x->warm_tokens_per_second / S->measured_ar_tps;
    } else if (S->tree_ar_cost && S->ar_cost_sum > 0) {
        x->speedup_source = ENTMTP_SPEEDUP_ESTIMATED;
        x->speedup = (double)x->n_generated / S->ar_cost_sum;
        x->ar_tokens_per_second = x->warm_tokens_per_second / x->speedup;
    }
}

/* Session statistics, the trees' outlook and the policy's observation. */
static entmtp_status record_step(entmtp_session *S, const emt_step *st) {
    const double dt = st->seconds;
    S->last_accept = st->n_emit;
    S->ema = S->stats.n_steps == 0 ? (float)st->n_emit
                                   : S->p.ema_decay * S->ema + (1.0f - S->p.ema_decay) * (float)st->n_emit;
    S->stats.n_steps++;
    S->stats.n_generated += st->n_emit;
    S->stats.decode_seconds += dt;
    S->stats.mean_accept_length = (double)S->stats.n_generated / (double)S->stats.n_steps;
    S->stats.tokens_per_second = S->stats.decode_seconds > 0 ? (double)S->stats.n_generated / S->stats.decode_seconds : 0;
    record_rates(S, st);
    if (st->tree_index < 0) return ENTMTP_OK;
    const emt_tree *t = st->tree;
    S->usage[st->tree_index]++;
    /* a reproducible session keeps the bank's step costs: the clock would make
     * the tree sequence, and so sampled text, depend on machine timing */
    emt_outlook_observe(&S->outlook, t, st->tree_index, S->chain_p, S->topk, st->n_heads, S->topk, st->path,
                        st->acc, S->p.reproducible ? 0.0 : dt, S->p.reproducible ? 0.0 : st->head_seconds);
    if (!S->policy) return ENTMTP_OK;
    entmtp_outcome o = { sizeof o, st->tree_index, t->n_nodes, t->depth, st->accept_length, dt };
    return entmtp_policy_observe(S->policy, &o);
}

/* Whether the record carries the next position's heads: a device queues
 * every head level into it, so the step needs no other wait; on the host
 * the draft stage runs the heads itself and stops at the levels the step
 * can use (draft.c, draft_chain). */
static int record_has_heads(const entmtp_session *S, int root_next, int want_heads) {
    return root_next && want_heads && !S->model->be->ops->host_memory && S->heads && S->drafter->chain_device &&
           S->bank && S->n_trees > 0;
}

void emt_step_queue_next(entmtp_session *S, int root_next, int want_heads) {
    const emt_backend_ops *op = S->model->be->ops;
    const emt_step_record_layout *lay = &S->rec_lay;
    if (!root_next) return;
    char *rec = (char *)S->rec_dev;
    int32_t *root = (int32_t *)(rec + offsetof(emt_step_record, next_root));
    op->topk_device(S->ex, S->s.next_logits, 1, S->model->cfg.vocab, 1, NULL, root,
                    (float *)(rec + offsetof(emt_step_record, next_p0)),
                    (float *)(rec + offsetof(emt_step_record, next_entropy)));
    /* at temperature > 0 the root is the sample (p0 and entropy stay the
     * top-1's features), drawn with the uniform written ahead of the span */
    if (S->p.temperature > 0)
        op->sample_root(S->ex, S->s.next_logits, S->model->cfg.vocab, S->p.temperature, S->p.epsilon, S->p.delta,
                        S->rec_dev + S->w_len + 2, root);
    if (record_has_heads(S, root_next, want_heads))
        S->drafter->chain_device(S, root, S->rec_dev + lay->head_ids, (float *)(S->rec_dev + lay->head_p));
}

entmtp_status emt_step_download(entmtp_session *S, int root_next, int want_heads) {
    const emt_backend *be = S->model->be;
    const emt_backend_ops *op = be->ops;
    S->next_ready = S->next_heads = 0;
    entmtp_status status = op->download(S->ex, S->rec_host, S->rec_dev, S->rec_lay.words * sizeof(int32_t));
    if (status || op->host_memory) { /* the CPU reports its ops' failures at sync */
        entmtp_status synced = emt_backend_sync(be, S->ex);
        if (synced) return synced;
        if (status) return emt_fail(status, "%s backend: the step record's download failed", op->name);
    }
    S->next_ready = root_next;
    S->next_heads = record_has_heads(S, root_next, want_heads);
    return ENTMTP_OK;
}

entmtp_status emt_step_finish_device(entmtp_session *S, int root_next, int want_heads) {
    emt_step_queue_next(S, root_next, want_heads);
    return emt_step_download(S, root_next, want_heads);
}

/* The device path, queued: one gather for the KV rows and the last rows,
 * then the next position's root and heads into the record. */
void emt_step_commit_queue(entmtp_session *S, const emt_step *st) {
    const emt_model_config *c = &S->model->cfg;
    const int dyn = emt_step_dyn(S, st);
    emt_commit_desc d = { S->kv.block, S->kv.slab, S->kv.row_words, 2 * c->n_layers, st->L,
                          S->s.hidden, S->s.last_hidden, c->hidden, S->s.logits, S->s.next_logits, c->vocab,
                          S->rec_lay.max_path, dyn ? S->rec_dev + S->w_len : NULL, S->kv.capacity };
    S->model->be->ops->commit(S->ex, &d, S->rec_dev);
    emt_step_queue_next(S, emt_root_on_device(S), !st->force_ar);
}

/* The record's download (the step's one copy to the host and one wait)
 * gives the host the outcome. */
static entmtp_status commit_on_device(entmtp_session *S, emt_step *st) {
    entmtp_status status = emt_step_download(S, emt_root_on_device(S), !st->force_ar);
    if (status) return status;
    const emt_step_record *r = (const emt_step_record *)S->rec_host;
    st->acc = r->accepted;
    st->accept_length = r->accepted + 1;
    st->n_emit = r->n_emit;
    st->stopped = r->stopped;
    st->kv_full = r->kv_full;
    st->path = S->rec_host + S->rec_lay.path;
    memcpy(S->emit, S->rec_host + S->rec_lay.tokens, (size_t)st->n_emit * sizeof(int32_t));
    return ENTMTP_OK;
}

entmtp_status emt_step_commit(entmtp_session *S, emt_step *st) {
    entmtp_status status;
    if (emt_step_on_device(S, st)) {
        if ((status = commit_on_device(S, st))) return status;
    } else {
        commit_kv(S, st);
        int32_t last = st->path[st->n_emit - 1];
        emt_keep_last_row(S, last, last);
        if ((status = emt_backend_sync(S->model->be, S->ex))) return status;
    }
    memcpy(S->tokens + st->L, S->emit, (size_t)st->n_emit * sizeof(int32_t));
    S->n_tokens += st->n_emit;
    st->committed = 1;
    /* the drafter's own state follows the accepted path (its target hidden states) */
    if (S->drafter && S->drafter->commit && (status = S->drafter->commit(S, st))) return status;
    st->seconds = emt_now() - st->t0;
    return record_step(S, st);
}
