/* entmtp_step and its variants: one step is draft -> verify -> accept ->
 * commit (session_internal.h), each stage a function over backend ops. */
#include "engine/session_internal.h"

/* The step's preconditions, checked before anything runs. */
static entmtp_status check_step(const entmtp_session *S) {
    if (!S->have_logits)
        return emt_fail(ENTMTP_ERR_STATE, "entmtp_step: no context yet; call entmtp_session_prefill first");
    if (S->n_tokens >= S->kv.capacity)
        return emt_fail(ENTMTP_ERR_KV_FULL, "entmtp_step: the KV cache is full (%d tokens)", S->kv.capacity);
    if (S->bank && entmtp_bank_size(S->bank) != S->n_trees)
        return emt_fail(ENTMTP_ERR_STATE, "entmtp_step: the bank changed size (%d -> %d trees) after the session was created",
                        S->n_trees, entmtp_bank_size(S->bank));
    return ENTMTP_OK;
}

/* The device's part of the step, queued without a wait. */
static entmtp_status queue_device_span(entmtp_session *S, emt_step *st) {
    if (st->nodes_on_device) emt_step_draft_device(S, st);
    entmtp_status status = emt_step_verify(S, st);
    if (!status) status = emt_step_accept(S, st);
    if (!status) emt_step_commit_queue(S, st);
    return status;
}

/* With the lengths in device memory, the span's launches depend on the
 * tree alone: the step's inputs (L, max_tokens and, at temperature > 0,
 * the next root's uniform) go ahead in one small copy, and a backend with
 * graphs records the span once per bank tree and replays it (backend.h). A
 * tree built for this step (dynamic) is never recorded. */
static entmtp_status run_device_span(entmtp_session *S, emt_step *st) {
    const emt_backend_ops *op = S->model->be->ops;
    if (!emt_step_dyn(S, st)) {
        emt_root_uniform_write(S);
        return queue_device_span(S, st);
    }
    int32_t inputs[4] = { st->L, st->max_tokens, 0, 0 };
    int32_t n_inputs = 2;
    if (emt_root_sampled_on_device(S)) {
        emt_uniform_words(emt_root_uniform(S), inputs + 2);
        n_inputs = 4;
    }
    op->write_i32(S->ex, S->rec_dev + S->w_len, inputs, n_inputs);
    if (!op->graph_begin || st->dynamic_tree) return queue_device_span(S, st);
    if (op->graph_begin(S->ex, st->tree, !st->force_ar) == EMT_GRAPH_REPLAYED) return ENTMTP_OK;
    entmtp_status status = queue_device_span(S, st);
    int not_run = op->graph_end(S->ex, status != ENTMTP_OK);
    if (!status && not_run) status = queue_device_span(S, st); /* the capture failed: direct launches */
    return status;
}

static entmtp_status run_stages(entmtp_session *S, emt_step *st) {
    entmtp_status status;
    if ((status = emt_step_draft(S, st))) return status;
    if (emt_step_on_device(S, st)) {
        if ((status = run_device_span(S, st))) return status;
    } else {
        if ((status = emt_step_verify(S, st))) return status;
        if ((status = emt_step_accept(S, st))) return status;
    }
    if ((status = emt_step_commit(S, st))) return status;
    if (st->kv_full)
        return emt_fail(ENTMTP_ERR_KV_FULL, "entmtp_step: the KV cache is full (%d tokens); %d of %d accepted tokens were kept",
                        S->kv.capacity, st->n_emit, st->accept_length);
    return ENTMTP_OK;
}

static void read_counters(const entmtp_session *S, emt_exec_counters *c) {
    const emt_backend_ops *op = S->model->be->ops;
    memset(c, 0, sizeof *c);
    if (op->counters) op->counters(S->ex, c);
}

/* Adds the backend's work between `before` and now to the session's sums. */
static void count_step(entmtp_session *S, const emt_exec_counters *before, double seconds) {
    emt_exec_counters now;
    read_counters(S, &now);
    emt_step_counters *c = &S->counters;
    c->n_steps++;
    c->counted = S->model->be->ops->counters != NULL;
    c->device.launches += now.launches - before->launches;
    c->device.syncs += now.syncs - before->syncs;
    c->device.d2h_copies += now.d2h_copies - before->d2h_copies;
    c->device.d2h_bytes += now.d2h_bytes - before->d2h_bytes;
    c->device.h2d_copies += now.h2d_copies - before->h2d_copies;
    c->device.h2d_bytes += now.h2d_bytes - before->h2d_bytes;
    c->device.graph_launches += now.graph_launches - before->graph_launches;
    c->device.graph_captures += now.graph_captures - before->graph_captures;
    c->device.graph_fallbacks += now.graph_fallbacks - before->graph_fallbacks;
    double wait = now.wait_seconds - before->wait_seconds;
    c->device.wait_seconds += wait;
    c->step_seconds += seconds;
    c->host_seconds += seconds - wait;
    if (now.graph_launches - before->graph_launches == 1 && now.launches == before->launches) {
        c->replayed_steps++;
        c->replayed_host_seconds += seconds - wait;
    }
}

void emt_session_step_counters(const entmtp_session *S, emt_step_counters *out) { *out = S->counters; }

void emt_session_reset_step_counters(entmtp_session *S) { memset(&S->counters, 0, sizeof S->counters); }

static entmtp_status run_step(entmtp_session *S, int force_ar, int32_t max_tokens,
                              const emt_step_probe *probe, entmtp_step_result *out) {
    if (!S) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_step: session is NULL");
    if (!out) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_step: result is NULL");
    /* checked before anything runs: a step that commits tokens must be able to report them */
    if (out->struct_size < sizeof(size_t))
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_step_result.struct_size = %zu; set it to sizeof(entmtp_step_result)",
                        out->struct_size);
    emt_step st = { .force_ar = force_ar, .max_tokens = max_tokens, .probe = probe, .L = S->n_tokens,
                    .t0 = emt_now(), .tree_index = -1 };
    emt_exec_counters before;
    read_counters(S, &before);
    entmtp_status status = check_step(S);
    if (!status) status = run_stages(S, &st);
    if (st.committed) count_step(S, &before, st.seconds);
    entmtp_step_result res;
    memset(&res, 0, sizeof res);
    res.struct_size = sizeof res;
    res.tokens = S->emit;
    res.tree_index = st.tree_index;
    res.accept_length = st.accept_length;
    res.stopped = st.stopped;
    if (st.committed) {
        res.n_tokens = st.n_emit;
        res.n_nodes = st.tree->n_nodes;
        res.s = S->features.f.s;
        res.p0 = st.p0;
        res.entropy = st.entropy;
        res.seconds = st.seconds;
    }
    emt_copy_out(out, &res, sizeof res, "entmtp_step_result"); /* struct_size was checked above */
    return status;
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
    emt_step_probe probe = { tree, commit, commit_rows, node_ok };
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
