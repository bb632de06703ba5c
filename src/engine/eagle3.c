/* The EAGLE-3 drafter (drafter.h) on the backend's ops: one decoder layer
 * whose input row pairs a hidden state with the embedding of the next
 * token. Row t of its sequence pairs fc(the target's tapped hidden states at
 * position t) with token t+1 and sits at position t; a drafted row at
 * depth d of a tree pairs its parent's output with its own token, at
 * position L-1+d.
 *
 * Its KV cache holds rows [0, committed): rows whose token t+1 is committed
 * in the session. The target's tapped rows of the positions after them
 * wait in `pending` (the verify pass leaves them for the accepted path,
 * the prefill for the prompt). A step's first chain level runs the pending
 * rows in one batch, the last of them with the step's root as its token:
 * that row (cache row L-1) is the tree's node 0, and node i of a tree sits
 * at cache row L-1+i, attending to the committed rows and its ancestors.
 * Only rows with committed tokens are ever committed, so a rejected draft
 * leaves nothing behind: the next step overwrites the tree area. */
#include "engine/session_internal.h"

#include <stdlib.h>

typedef struct emt_eagle3_state {
    int32_t committed;     /* KV rows over committed tokens */
    int32_t n_pending, cap_pending;
    float *pending;        /* [cap_pending][3 * target_hidden]: tapped rows of positions committed.. */
    int32_t max_rows;      /* rows of one layer call */
    int32_t tree_rows;     /* node rows of the tree area (and its chain) */
    float *k, *v;          /* [kv_capacity + tree_rows][n_kv * head_dim] */
    float *in_h;           /* [max_rows][H] the rows' hidden inputs */
    float *emb, *en, *hn;  /* [max_rows][H] */
    float *cat;            /* [max_rows][2H] [input_layernorm(emb); hidden_norm(h)] */
    float *q;              /* [max(max_rows, tree_rows)][q_dim], by attention row */
    float *att;            /* [max(max_rows, tree_rows)][q_dim] */
    float *x, *xn, *tmp;   /* [max_rows][H] */
    float *gate, *up;      /* [max_rows][ffn] */
    float *logits;         /* [max_rows][n_draft] */
    float *node_out;       /* [tree_rows][H] each node's output (node 0: the root row's) */
    int32_t *tokens, *positions; /* host [max_rows] */
    int32_t *dst, *src;    /* host [max_rows]: copy_rows index arrays */
    uint8_t *mask;         /* host [tree_rows]^2 */
} emt_eagle3_state;

static emt_eagle3_state *state(entmtp_session *S) { return (emt_eagle3_state *)S->drafter_state; }

/* One call of the layer on n rows: hidden inputs e->in_h, tokens and
 * positions (host), K/V to cache rows n_prefix + att_first .., attending to
 * the cache rows [0, n_prefix) and the n_att rows after them under `mask`
 * (NULL: causal); the rows' queries are attention rows att_first... Leaves
 * the rows' outputs in e->x and, for the last `logits_rows` rows, their
 * top-k (target ids) in S->top_ids/top_p. */
static void layer(entmtp_session *S, int32_t n, int32_t n_prefix, int32_t att_first, int32_t n_att,
                  const uint8_t *mask, int32_t logits_rows) {
    const emt_backend_ops *op = S->model->be->ops;
    const emt_eagle3 *w = S->heads->eagle3;
    emt_eagle3_state *e = state(S);
    emt_exec *ex = S->ex;
    const int32_t H = w->hidden, hd = w->head_dim, q_dim = w->n_heads * hd, kv_dim = w->n_kv_heads * hd;
    const int64_t nH = (int64_t)n * H;
    /* [input_layernorm(embed(token)); hidden_norm(h)] */
    emt_embed(op, ex, w->embed.data ? &w->embed : &S->model->tok_embd, H, e->tokens, n, e->emb);
    op->rmsnorm(ex, e->emb, w->input_norm, n, H, w->rms_eps, e->en);
    op->rmsnorm(ex, e->in_h, w->hidden_norm, n, H, w->rms_eps, e->hn);
    int32_t *dst = e->dst, *src = e->src;
    for (int32_t r = 0; r < n; r++) {
        dst[r] = 2 * r;
        src[r] = r;
    }
    op->copy_rows(ex, e->cat, e->en, (size_t)H, dst, src, n);
    for (int32_t r = 0; r < n; r++) dst[r] = 2 * r + 1;
    op->copy_rows(ex, e->cat, e->hn, (size_t)H, dst, src, n);
    /* attention */
    float *q = e->q + (size_t)att_first * q_dim;
    float *k_rows = e->k + (size_t)(n_prefix + att_first) * kv_dim, *v_rows = e->v + (size_t)(n_prefix + att_first) * kv_dim;
    emt_matmul(op, ex, &w->wq, NULL, e->cat, n, 2 * H, q_dim, q, 1);
    emt_matmul(op, ex, &w->wk, NULL, e->cat, n, 2 * H, kv_dim, k_rows, 1);
    emt_matmul(op, ex, &w->wv, NULL, e->cat, n, 2 * H, kv_dim, v_rows, 1);
    op->rope(ex, q, n, w->n_heads, hd, hd, e->positions, w->inv_freq);
    op->rope(ex, k_rows, n, w->n_kv_heads, hd, hd, e->positions, w->inv_freq);
    op->attention(ex, e->q, e->k, e->v, n_prefix, n_att, mask, w->n_heads, w->n_kv_heads, hd, e->att);
    op->copy_rows(ex, e->x, e->in_h, nH, (int32_t[]){ 0 }, (int32_t[]){ 0 }, 1); /* the residual: the hidden input */
    emt_matmul_add(op, ex, &w->wo, NULL, e->att + (size_t)att_first * q_dim, n, q_dim, H, e->x, e->tmp, 1);
    /* MLP */
    op->rmsnorm(ex, e->x, w->post_norm, n, H, w->rms_eps, e->xn);
    emt_matmul_gated(op, ex, &w->w_gate, NULL, &w->w_up, NULL, e->xn, n, H, w->ffn, 0, e->gate, e->up, 1);
    emt_matmul_add(op, ex, &w->w_down, NULL, e->gate, n, w->ffn, H, e->x, e->tmp, 1);
    if (logits_rows <= 0) return;
    /* norm, lm_head over the draft vocabulary, top-k mapped to target ids */
    const float *last = e->x + (size_t)(n - logits_rows) * H;
    op->rmsnorm(ex, last, w->norm, logits_rows, H, w->rms_eps, e->xn);
    emt_matmul(op, ex, &w->lm_head, NULL, e->xn, logits_rows, H, w->n_draft, e->logits, 1);
    op->topk(ex, e->logits, logits_rows, w->n_draft, S->topk, S->top_ids, S->top_p, NULL);
    for (int64_t i = 0; i < (int64_t)logits_rows * S->topk; i++) S->top_ids[i] = S->heads->draft_ids[S->top_ids[i]];
}

/* Run the pending rows whose token t+1 is known: tokens [0, known) are in
 * S->tokens, and with root >= 0 the last pending row takes the root (the
 * row of the step's tree node 0: its output goes to node_out[0] and its
 * top-k to chain level 0). Rows with a committed token are committed. */
static void run_pending(entmtp_session *S, int32_t known, int32_t root) {
    emt_eagle3_state *e = state(S);
    const emt_eagle3 *w = S->heads->eagle3;
    const emt_backend_ops *op = S->model->be->ops;
    const int32_t H = w->hidden, T3 = 3 * w->target_hidden;
    int32_t n_known = known - 1 - e->committed; /* pending rows whose next token is committed */
    if (n_known > e->n_pending) n_known = e->n_pending;
    if (n_known < 0) n_known = 0;
    int32_t n = root >= 0 ? e->n_pending : n_known;
    for (int32_t start = 0; start < n;) {
        /* in batches of the layer's rows (a long prompt's pending rows) */
        int32_t m = n - start < e->max_rows ? n - start : e->max_rows;
        int32_t P = e->committed + start;
        for (int32_t r = 0; r < m; r++) {
            int32_t t = P + r;
            e->tokens[r] = t + 1 < known ? S->tokens[t + 1] : root;
            e->positions[r] = t;
        }
        emt_matmul(op, S->ex, &w->fc, NULL, e->pending + (size_t)start * T3, m, T3, H, e->in_h, 1);
        int last_batch = start + m == n;
        layer(S, m, P, 0, m, NULL, last_batch && root >= 0 ? 1 : 0);
        if (last_batch && root >= 0) {
            int32_t zero = 0, last = m - 1;
            op->copy_rows(S->ex, e->node_out, e->x, (size_t)H, &zero, &last, 1);
            memcpy(S->chain_ids, S->top_ids, (size_t)S->topk * sizeof(int32_t));
            memcpy(S->chain_p, S->top_p, (size_t)S->topk * sizeof(float));
        }
        start += m;
    }
    /* commit the rows with committed tokens: drop them from pending */
    for (int32_t i = 0; i + n_known < e->n_pending; i++) {
        e->dst[i] = i;
        e->src[i] = i + n_known;
    }
    if (n_known > 0 && e->n_pending > n_known)
        op->copy_rows(S->ex, e->pending, e->pending, (size_t)T3, e->dst, e->src, e->n_pending - n_known);
    e->committed += n_known;
    e->n_pending -= n_known;
}

/* Append forward rows (their taps in s->taps) to pending. */
static void append_taps(entmtp_session *S, const int32_t *rows, int32_t n) {
    emt_eagle3_state *e = state(S);
    const int32_t T3 = 3 * S->heads->eagle3->target_hidden;
    for (int32_t i = 0; i < n; i++) e->dst[i] = e->n_pending + i;
    S->model->be->ops->copy_rows(S->ex, e->pending, S->s.taps, (size_t)T3, e->dst, rows, n);
    e->n_pending += n;
}

/* ---------------------------------------------------------------- chain */

/* Level 0 runs the pending rows and the root row; level d >= 1 drafts the
 * rank-0 token of level d-1 at cache row L-1+d, attending causally to the
 * chain before it. */
static int32_t eagle3_chain(entmtp_session *S, int32_t root, int32_t from, int32_t to) {
    emt_eagle3_state *e = state(S);
    const emt_eagle3 *w = S->heads->eagle3;
    const emt_backend_ops *op = S->model->be->ops;
    const int32_t H = w->hidden, L = S->n_tokens, K = S->topk;
    if (to > e->tree_rows - 1) to = e->tree_rows - 1;
    if (from == 0 && to > 0) run_pending(S, L, root);
    for (int32_t d = from > 0 ? from : 1; d < to; d++) {
        int32_t parent = d - 1;
        op->copy_rows(S->ex, e->in_h, e->node_out, (size_t)H, (int32_t[]){ 0 }, &parent, 1);
        e->tokens[0] = S->chain_ids[(size_t)(d - 1) * K];
        e->positions[0] = L - 1 + d;
        layer(S, 1, L - 1, d, d + 1, NULL, 1);
        op->copy_rows(S->ex, e->node_out, e->x, (size_t)H, &d, (int32_t[]){ 0 }, 1);
        memcpy(S->chain_ids + (size_t)d * K, S->top_ids, (size_t)K * sizeof(int32_t));
        memcpy(S->chain_p + (size_t)d * K, S->top_p, (size_t)K * sizeof(float));
    }
    return to > from ? to : from;
}

/* ----------------------------------------------------------------- tree */

/* Level by level: depth 1's tokens are the root's list (chain level 0);
 * then the nodes of each depth run in one call (their parents' outputs
 * and their tokens, attending to the committed rows and their ancestors
 * under the tree mask), and their lists give the next depth's tokens. */
static void eagle3_fill_tree(entmtp_session *S, const emt_tree *t, int32_t root, int device) {
    (void)device; /* host only: emt_drafter_eagle3 has no chain_device */
    emt_eagle3_state *e = state(S);
    const emt_eagle3 *w = S->heads->eagle3;
    const emt_backend_ops *op = S->model->be->ops;
    const int32_t H = w->hidden, L = S->n_tokens, K = S->topk;
    S->node_tokens[0] = root;
    int32_t i = 1;
    while (i < t->n_nodes && t->position_ids[i] == 1) {
        S->node_tokens[i] = S->chain_ids[t->node_ranks[i]];
        i++;
    }
    int32_t start = 1;
    for (int32_t depth = 1; i < t->n_nodes; depth++) {
        int32_t end = i, n = end - start; /* nodes [start, end) at `depth` */
        for (int32_t r = 0; r < n; r++) {
            int32_t node = start + r;
            e->dst[r] = r;
            e->src[r] = t->parents[node];
            e->tokens[r] = S->node_tokens[node];
            e->positions[r] = L - 1 + depth;
        }
        op->copy_rows(S->ex, e->in_h, e->node_out, (size_t)H, e->dst, e->src, n);
        for (int32_t a = 0; a < end; a++) memcpy(e->mask + (size_t)a * end, t->attn_mask + (size_t)a * t->n_nodes, (size_t)end);
        layer(S, n, L - 1, start, end, e->mask, n);
        for (int32_t r = 0; r < n; r++) {
            e->dst[r] = start + r;
            e->src[r] = r;
        }
        op->copy_rows(S->ex, e->node_out, e->x, (size_t)H, e->dst, e->src, n);
        /* the next depth's tokens: rank r of the parent's list */
        end = i;
        while (end < t->n_nodes && t->position_ids[end] == depth + 1) end++;
        for (int32_t k = i; k < end; k++)
            S->node_tokens[k] = S->top_ids[(size_t)(t->parents[k] - start) * K + t->node_ranks[k]];
        start = i;
        i = end;
    }
}

/* Lists conditioned on a given continuation: the chain with path[d] in
 * place of level d-1's rank-0 token. */
static void eagle3_path_topk(entmtp_session *S, const int32_t *path, int32_t levels) {
    emt_eagle3_state *e = state(S);
    const int32_t H = S->heads->eagle3->hidden, L = S->n_tokens, K = S->topk;
    const emt_backend_ops *op = S->model->be->ops;
    run_pending(S, L, path[0]);
    for (int32_t d = 1; d < levels && d < e->tree_rows; d++) {
        int32_t parent = d - 1;
        op->copy_rows(S->ex, e->in_h, e->node_out, (size_t)H, (int32_t[]){ 0 }, &parent, 1);
        e->tokens[0] = path[d];
        e->positions[0] = L - 1 + d;
        layer(S, 1, L - 1, d, d + 1, NULL, 1);
        op->copy_rows(S->ex, e->node_out, e->x, (size_t)H, &d, (int32_t[]){ 0 }, 1);
        memcpy(S->chain_ids + (size_t)d * K, S->top_ids, (size_t)K * sizeof(int32_t));
        memcpy(S->chain_p + (size_t)d * K, S->top_p, (size_t)K * sizeof(float));
    }
}

/* ---------------------------------------------------------------- state */

/* The prompt's rows: their taps are in s->taps (rows 0..n-1) and their
 * tokens already in S->tokens (session.c writes them ahead). */
static entmtp_status eagle3_prefill(entmtp_session *S, int32_t first, int32_t n) {
    emt_eagle3_state *e = state(S);
    run_pending(S, first + n, -1); /* the row before the chunk now knows its token */
    for (int32_t i = 0; i < n; i++) e->src[i] = i;
    append_taps(S, e->src, n);
    run_pending(S, first + n, -1);
    return e->n_pending == 1 ? ENTMTP_OK
                             : emt_fail(ENTMTP_ERR_STATE, "EAGLE-3 prefill: %d rows pending, 1 expected", e->n_pending);
}

/* The accepted path's taps wait for the next step's first chain level;
 * when they outgrow room for another step's path they are run now. */
static entmtp_status eagle3_commit(entmtp_session *S, const emt_step *st) {
    emt_eagle3_state *e = state(S);
    int32_t path_max = S->max_depth > S->heads->n_heads ? S->max_depth + 1 : S->heads->n_heads + 1;
    if (e->n_pending + st->n_emit > e->cap_pending) run_pending(S, S->n_tokens, -1);
    append_taps(S, st->path, st->n_emit);
    if (e->n_pending + path_max > e->cap_pending) run_pending(S, S->n_tokens, -1);
    return ENTMTP_OK;
}

static void eagle3_reset(entmtp_session *S) {
    emt_eagle3_state *e = state(S);
    e->committed = e->n_pending = 0;
}

static void eagle3_destroy(entmtp_session *S) {
    emt_eagle3_state *e = state(S);
    if (!e) return;
    emt_backend *be = S->model->be;
    float *dev[] = { e->pending, e->k, e->v, e->in_h, e->emb, e->en, e->hn, e->cat, e->q, e->att,
                     e->x, e->xn, e->tmp, e->gate, e->up, e->logits, e->node_out };
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (dev[i]) be->ops->release(be, dev[i]);
    free(e->tokens);
    free(e->positions);
    free(e->dst);
    free(e->src);
    free(e->mask);
    free(e);
    S->drafter_state = NULL;
}

static entmtp_status eagle3_init(entmtp_session *S) {
    const emt_eagle3 *w = S->heads->eagle3;
    emt_backend *be = S->model->be;
    emt_eagle3_state *e = emt_calloc(1, sizeof *e);
    if (!e) return ENTMTP_ERR_OUT_OF_MEMORY;
    S->drafter_state = e;
    const int32_t H = w->hidden, q_dim = w->n_heads * w->head_dim, kv_dim = w->n_kv_heads * w->head_dim;
    int32_t path_max = (S->max_depth > S->heads->n_heads ? S->max_depth : S->heads->n_heads) + 1;
    e->tree_rows = S->max_nodes > path_max ? S->max_nodes : path_max;
    e->cap_pending = EMT_PREFILL_CHUNK + 2 * path_max + 2;
    e->max_rows = e->cap_pending > e->tree_rows ? e->cap_pending : e->tree_rows;
    const int64_t rows = e->max_rows, kv_rows = (int64_t)S->kv.capacity + e->tree_rows;
    struct { float **p; int64_t n; } dev[] = {
        { &e->pending, (int64_t)e->cap_pending * 3 * w->target_hidden },
        { &e->k, kv_rows * kv_dim }, { &e->v, kv_rows * kv_dim },
        { &e->in_h, rows * H }, { &e->emb, rows * H }, { &e->en, rows * H }, { &e->hn, rows * H },
        { &e->cat, rows * 2 * H }, { &e->q, rows * q_dim }, { &e->att, rows * q_dim },
        { &e->x, rows * H }, { &e->xn, rows * H }, { &e->tmp, rows * H },
        { &e->gate, rows * w->ffn }, { &e->up, rows * w->ffn }, { &e->logits, rows * w->n_draft },
        { &e->node_out, (int64_t)e->tree_rows * H },
    };
    for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
        if (!(*dev[i].p = be->ops->alloc(be, (size_t)dev[i].n * sizeof(float)))) goto oom;
    e->tokens = emt_calloc((size_t)rows, sizeof(int32_t));
    e->positions = emt_calloc((size_t)rows, sizeof(int32_t));
    e->mask = emt_calloc((size_t)e->tree_rows * e->tree_rows, 1);
    e->dst = emt_calloc((size_t)rows, sizeof(int32_t));
    e->src = emt_calloc((size_t)rows, sizeof(int32_t));
    if (!e->tokens || !e->positions || !e->mask || !e->dst || !e->src) goto oom;
    return ENTMTP_OK;
oom:
    return emt_fail(ENTMTP_ERR_OUT_OF_MEMORY, "entmtp_session_create: out of memory for the EAGLE-3 drafter's state "
                    "(%lld KV rows)", (long long)kv_rows);
}

/* One EAGLE-3 level in plain AR steps on SmolLM2-135M (tests/bench/
 * bench_heads, docs/drafters.md "Cost of a level"): what a session that keeps
 * the bank's costs charges for a level, since it never times one. */
#define EMT_EAGLE3_LEVEL_AR_STEPS 0.052

const emt_drafter emt_drafter_eagle3 = {
    .name = "eagle3", .chain = eagle3_chain, .by_level = 1, .level_ar_steps = EMT_EAGLE3_LEVEL_AR_STEPS,
    .fill_tree = eagle3_fill_tree, .chain_device = NULL,
    .path_topk = eagle3_path_topk, .prefill = eagle3_prefill, .commit = eagle3_commit, .reset = eagle3_reset,
    .init = eagle3_init, .destroy = eagle3_destroy,
};
