/* Stage 3 of a step, accept: the longest accepted candidate path (greedy or
 * typical acceptance, src/accept/accept.c), then the host-only cuts: a stop
 * token, max_tokens and the KV capacity. */
#include "accept/accept.h"
#include "accept/node_flags.h"
#include "engine/session_internal.h"

int emt_is_stop(const entmtp_session *S, int32_t tok) {
    if (S->p.n_stop_tokens < 0) return entmtp_token_is_eog(S->model, tok);
    for (int32_t i = 0; i < S->p.n_stop_tokens; i++)
        if (S->p.stop_tokens[i] == tok) return 1;
    return 0;
}

/* Best path among the candidate rows and its accepted draft count; a probe
 * also scores every node (node_ok). */
static entmtp_status accept_paths(entmtp_session *S, emt_step *st, const int32_t *rows, int32_t *best) {
    const emt_backend_ops *op = S->model->be->ops;
    const emt_tree *t = st->tree;
    const emt_step_probe *probe = st->probe;
    const int32_t V = S->model->cfg.vocab;
    const float *node_logits = S->s.logits;
    entmtp_status status;
    if (!op->host_memory) {
        status = op->download(S->ex, S->host_logits, S->s.logits, (size_t)t->n_nodes * V * sizeof(float));
        if (status) return status;
        node_logits = S->host_logits;
    }
    emt_posterior_nodes in = { t->n_nodes, V, node_logits, S->node_tokens,
                               probe ? probe->commit_rows : t->n_leaves, t->depth + 1, rows,
                               S->p.temperature, S->p.epsilon, S->p.delta };
    status = emt_evaluate_posterior_nodes(&in, best, &st->acc);
    if (!status && probe)
        status = emt_accept_node_flags(t->n_nodes, V, node_logits, S->node_tokens, t->parents,
                                       S->p.temperature, S->p.epsilon, S->p.delta, S->probe_probs,
                                       probe->node_ok);
    return status;
}

/* The device path: acceptance and the cuts are queued into the step
 * record; the commit stage reads the outcome after its one download. */
static void accept_on_device(entmtp_session *S, const emt_step *st) {
    const emt_tree *t = st->tree;
    emt_accept_desc d = { S->s.logits, S->node_tokens, t->retrieve_indices, t->n_nodes, S->model->cfg.vocab,
                          t->n_leaves, t->depth + 1, S->p.temperature, S->p.epsilon, S->p.delta, st->max_tokens,
                          S->kv.capacity - st->L, S->p.n_stop_tokens != 0 ? S->stop_dev : NULL,
                          S->rec_lay.max_path, st->nodes_on_device ? S->rec_dev + S->w_node_tok : NULL,
                          emt_step_dyn(S, st) ? S->rec_dev + S->w_len : NULL, S->kv.capacity };
    S->model->be->ops->accept(S->ex, &d, S->rec_dev);
}

entmtp_status emt_step_accept(entmtp_session *S, emt_step *st) {
    const emt_tree *t = st->tree;
    if (emt_step_on_device(S, st)) {
        accept_on_device(S, st);
        return ENTMTP_OK;
    }
    const int32_t *rows = st->probe ? st->probe->commit : t->retrieve_indices;
    int32_t best = 0;
    st->acc = 0;
    if (t->n_nodes > 1) {
        entmtp_status status = accept_paths(S, st, rows, &best);
        if (status) return status;
    }
    st->path = rows + (size_t)best * (t->depth + 1);
    st->accept_length = st->acc + 1;
    int32_t n_emit = st->accept_length;
    if (st->max_tokens > 0 && n_emit > st->max_tokens) n_emit = st->max_tokens;
    st->kv_full = 0;
    if (n_emit > S->kv.capacity - st->L) {
        n_emit = S->kv.capacity - st->L;
        st->kv_full = 1;
    }
    st->stopped = 0;
    for (int32_t j = 0; j < n_emit; j++) {
        S->emit[j] = S->node_tokens[st->path[j]];
        if (emt_is_stop(S, S->emit[j])) {
            n_emit = j + 1;
            st->stopped = 1;
            st->kv_full = 0;
            break;
        }
    }
    st->n_emit = n_emit;
    return ENTMTP_OK;
}
