/* The Medusa and Hydra drafters (drafter.h): the heads' ResBlocks, Hydra's
 * sequential chain, their top-k lists and the tree's node tokens, level by
 * level, on the host or queued on the device. */
#include "engine/session_internal.h"

#include <stddef.h>

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
        if (L->res_w.data) { /* Hydra: both projections of the same rows, one job where the backend fuses */
            const emt_wmat *W[2] = { &L->w, &L->res_w };
            const float *b[2] = { L->b, L->res_b };
            const int32_t n_out[2] = { H, H };
            float *yy[2] = { s->head_tmp, s->head_res };
            emt_matmul_multi(op, S->ex, 2, W, b, n_out, x, rows, L->n_in, yy, 1);
            op->silu_residual(S->ex, s->head_res, s->head_tmp, (int64_t)rows * H, y);
        } else {
            emt_matmul(op, S->ex, &L->w, L->b, x, rows, L->n_in, H, s->head_tmp, 1);
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

/* Head `h` on `rows` input rows up to its logits in s->head_logits; returns
 * their width (the draft vocabulary's size when the head ranks only it). */
static int32_t head_logits(entmtp_session *S, int32_t h, int32_t rows, const float *in, int *draft) {
    const emt_backend_ops *op = S->model->be->ops;
    const emt_head *hd = &S->heads->heads[h];
    const int32_t H = S->model->cfg.hidden, V = S->model->cfg.vocab;
    const float *x = head_body(S, h, rows, in, NULL);
    *draft = hd->draft_w || (!hd->lm_w && S->heads->draft_shared.data);
    if (*draft) {
        /* rank the draft vocabulary only, then map back to token ids */
        int32_t K = S->heads->n_draft;
        emt_wmat own_draft = { EMT_F32, hd->draft_w, NULL };
        emt_matmul(op, S->ex, hd->draft_w ? &own_draft : &S->heads->draft_shared, hd->draft_b, x, rows, H, K,
                   S->s.head_logits, 1);
        return K;
    }
    emt_wmat own = { EMT_F32, hd->lm_w, NULL };
    emt_matmul(op, S->ex, hd->lm_w ? &own : &S->model->lm_head, hd->lm_b, x, rows, H, V, S->s.head_logits, 1);
    return V;
}

/* Run head `h` on `rows` input rows, leaving top-k ids/probs per row in
 * top_ids/top_p. */
static void head_run(entmtp_session *S, int32_t h, int32_t rows, const float *in, int32_t *top_ids,
                     float *top_p) {
    int draft = 0;
    int32_t width = head_logits(S, h, rows, in, &draft);
    S->model->be->ops->topk(S->ex, S->s.head_logits, rows, width, S->topk, top_ids, top_p, NULL);
    if (draft) map_draft_ids(S, top_ids, rows);
}

/* head_run with the top-k lists left in device memory (token ids). */
static void head_run_device(entmtp_session *S, int32_t h, int32_t rows, const float *in, int32_t *top_ids,
                            float *top_p) {
    int draft = 0;
    int32_t width = head_logits(S, h, rows, in, &draft);
    S->model->be->ops->topk_device(S->ex, S->s.head_logits, rows, width, S->topk, draft ? S->draft_ids_dev : NULL,
                                   top_ids, top_p, NULL);
}

/* Medusa: every head on the last hidden state; results in chain_ids/chain_p.
 * Heads that share the base lm_head run their blocks first, then one
 * lm_head product over all heads' rows reads the vocabulary weights once
 * instead of once per head (TGI's MedusaHeadV2). The exact matmul gives
 * each row the bits it would get alone, so the top-k lists are those of the
 * per-head path. */
/* ids/probs: host chain_ids/chain_p, or (device) the step record's head
 * lists, which the backend fills in device memory. */
static void medusa_heads_to(entmtp_session *S, int device, int32_t *ids, float *probs) {
    const emt_backend_ops *op = S->model->be->ops;
    const int32_t n = S->heads->n_heads, H = S->model->cfg.hidden, V = S->model->cfg.vocab;
    if (!S->heads->shares_lm_head || !S->batch_heads || n < 2) {
        for (int32_t h = 0; h < n; h++) {
            int32_t *hi = ids + (size_t)h * S->topk;
            float *hp = probs + (size_t)h * S->topk;
            if (device) head_run_device(S, h, 1, S->s.last_hidden, hi, hp);
            else head_run(S, h, 1, S->s.last_hidden, hi, hp);
        }
        return;
    }
    float *rows = S->s.head_in; /* [n][H]: Medusa uses no Hydra input rows */
    for (int32_t h = 0; h < n; h++) head_body(S, h, 1, S->s.last_hidden, rows + (size_t)h * H);
    int draft = S->heads->draft_shared.data != NULL;
    int32_t width = draft ? S->heads->n_draft : V;
    emt_matmul(op, S->ex, draft ? &S->heads->draft_shared : &S->model->lm_head, NULL, rows, n, H, width,
               S->s.head_logits, 1);
    if (device) {
        op->topk_device(S->ex, S->s.head_logits, n, width, S->topk, draft ? S->draft_ids_dev : NULL, ids, probs, NULL);
        return;
    }
    op->topk(S->ex, S->s.head_logits, n, width, S->topk, ids, probs, NULL);
    if (draft) map_draft_ids(S, ids, n);
}

static void medusa_heads(entmtp_session *S) { medusa_heads_to(S, 0, S->chain_ids, S->chain_p); }

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

/* Hydra greedy chain from the root, levels [from, to): head d sees the root
 * and the chain's first d tokens (the rank-0 entries of the levels before
 * it). Gives the features and the rank-0 path of every tree. */
static void hydra_chain(entmtp_session *S, int32_t root, int32_t from, int32_t to) {
    int32_t *path = S->path;
    path[0] = root;
    for (int32_t d = 0; d < from; d++) path[d + 1] = S->chain_ids[(size_t)d * S->topk];
    for (int32_t d = from; d < to; d++) {
        hydra_input_row(S, 0, path, d + 1);
        head_run(S, d, 1, S->s.head_in, S->chain_ids + (size_t)d * S->topk, S->chain_p + (size_t)d * S->topk);
        path[d + 1] = S->chain_ids[(size_t)d * S->topk];
    }
}

/* Hydra's greedy chain on the device from the root token at *d_root
 * (device): head d's input row grows by one embedding per level, its top-k
 * goes to the record, and the chain's next token is that list's first id. */
static void hydra_chain_device(entmtp_session *S, const int32_t *d_root, int32_t *ids, float *probs) {
    const emt_backend_ops *op = S->model->be->ops;
    const int32_t H = S->model->cfg.hidden;
    float *row = S->s.head_in; /* one row: [h, e(root), e(c_0), ..., e(c_{d-1})] */
    int32_t zero = 0;
    op->copy_rows(S->ex, row, S->s.last_hidden, (size_t)H, &zero, &zero, 1);
    op->embed_device(S->ex, &S->model->tok_embd, H, d_root, 1, row + H);
    for (int32_t d = 0; d < S->heads->n_heads; d++) {
        if (d > 0) op->embed_device(S->ex, &S->model->tok_embd, H, ids + (size_t)(d - 1) * S->topk, 1,
                                    row + (size_t)(d + 1) * H);
        head_run_device(S, d, 1, row, ids + (size_t)d * S->topk, probs + (size_t)d * S->topk);
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
    S->drafter->path_topk(S, path, n_heads);
    entmtp_status st = emt_backend_sync(S->model->be, S->ex);
    if (st) return st;
    memcpy(top_ids, S->chain_ids, (size_t)n_heads * (size_t)S->topk * sizeof *top_ids);
    return ENTMTP_OK;
}

int32_t emt_session_topk(const entmtp_session *S) { return S ? S->topk : 0; }

/* --------------------------------------------------------------- Medusa */

static int32_t medusa_chain(entmtp_session *S, int32_t root, int32_t from, int32_t to) {
    (void)root;
    (void)to;
    if (from == 0) medusa_heads(S); /* one product serves every head */
    return S->heads->n_heads;
}

/* A node's token is its rank in its depth's list; on the device one
 * gather from the record (the index array depends on the tree alone). */
static void medusa_fill_tree(entmtp_session *S, const emt_tree *t, int32_t root, int device) {
    if (!device) {
        S->node_tokens[0] = root;
        for (int32_t i = 1; i < t->n_nodes; i++)
            S->node_tokens[i] = S->chain_ids[(size_t)(t->position_ids[i] - 1) * S->topk + t->node_ranks[i]];
        return;
    }
    int32_t *idx = S->gather_idx;
    idx[0] = (int32_t)(offsetof(emt_step_record, next_root) / sizeof(int32_t));
    for (int32_t i = 1; i < t->n_nodes; i++)
        idx[i] = (int32_t)S->rec_lay.head_ids + (t->position_ids[i] - 1) * S->topk + t->node_ranks[i];
    S->model->be->ops->gather_i32(S->ex, S->rec_dev + S->w_node_tok, S->rec_dev, idx, t->n_nodes);
}

static void medusa_chain_device(entmtp_session *S, const int32_t *d_root, int32_t *ids, float *probs) {
    (void)d_root;
    medusa_heads_to(S, 1, ids, probs);
}

static void medusa_path_topk(entmtp_session *S, const int32_t *path, int32_t levels) {
    (void)path;
    (void)levels;
    medusa_heads(S);
}

const emt_drafter emt_drafter_medusa = {
    .name = "medusa", .chain = medusa_chain, .by_level = 0, .fill_tree = medusa_fill_tree,
    .chain_device = medusa_chain_device, .path_topk = medusa_path_topk,
};

/* ---------------------------------------------------------------- Hydra */

static int32_t hydra_chain_levels(entmtp_session *S, int32_t root, int32_t from, int32_t to) {
    hydra_chain(S, root, from, to);
    return to;
}

static int on_rank0_chain(const emt_tree *t, int32_t node) {
    for (int32_t a = node; a > 0; a = t->parents[a])
        if (t->node_ranks[a] != 0) return 0;
    return 1;
}

/* Hydra's node tokens, one walk for both places the lists live. Nodes are
 * sorted by depth, so parents are drafted first; a parent on the rank-0
 * chain reuses the chain's head call, and each depth's other parents get
 * one batched head call. On the host the calls' input rows are built from
 * host tokens and the picks read the top-k lists; on the device (the root
 * and the chain in the step record) the rows are embedded from the device
 * tokens of their paths and each depth's picks are one gather into
 * rec_dev + w_node_tok. The same tokens either way. */
static void hydra_fill_tree(entmtp_session *S, const emt_tree *t, int32_t root, int device) {
    const emt_backend_ops *op = S->model->be->ops;
    const int32_t H = S->model->cfg.hidden, K = S->topk;
    int32_t *rec = S->rec_dev, *idx = S->gather_idx;
    const int32_t w_root = (int32_t)(offsetof(emt_step_record, next_root) / sizeof(int32_t));
    if (device) {
        idx[0] = w_root;
        op->gather_i32(S->ex, rec + S->w_node_tok, rec, idx, 1);
    } else {
        S->node_tokens[0] = root;
    }
    for (int32_t i = 0; i < t->n_nodes; i++) S->parent_row[i] = -1;
    int32_t i = 1;
    while (i < t->n_nodes) {
        int32_t depth = t->position_ids[i];
        int32_t end = i;
        while (end < t->n_nodes && t->position_ids[end] == depth) end++;
        /* rows [h, e(path[0]), ..., e(path[depth-1])] for the off-chain parents */
        int32_t rows = 0, n_idx = 0;
        for (int32_t k = i; k < end; k++) {
            int32_t par = t->parents[k];
            if (on_rank0_chain(t, par) || S->parent_row[par] >= 0) continue;
            for (int32_t a = par; a >= 0; a = t->parents[a])
                S->path[t->position_ids[a]] = device ? a : S->node_tokens[a];
            if (device) { /* the h slot's token is a placeholder, overwritten by the hidden state */
                idx[n_idx++] = w_root;
                for (int32_t j = 0; j < depth; j++) idx[n_idx++] = (int32_t)S->w_node_tok + S->path[j];
            } else {
                hydra_input_row(S, rows, S->path, depth);
            }
            S->parent_row[par] = rows++;
        }
        if (rows > 0 && device) {
            op->gather_i32(S->ex, rec + S->w_row_tok, rec, idx, n_idx);
            op->embed_device(S->ex, &S->model->tok_embd, H, rec + S->w_row_tok, n_idx, S->s.head_in);
            for (int32_t r = 0; r < rows; r++) {
                S->dst_rows[r] = r * (depth + 1);
                S->src_rows[r] = 0;
            }
            op->copy_rows(S->ex, S->s.head_in, S->s.last_hidden, (size_t)H, S->dst_rows, S->src_rows, rows);
            head_run_device(S, depth - 1, rows, S->s.head_in, rec + S->w_draft_ids, (float *)(rec + S->w_draft_p));
        } else if (rows > 0) {
            head_run(S, depth - 1, rows, S->s.head_in, S->top_ids, S->top_p);
        }
        for (int32_t k = i; k < end; k++) {
            int32_t par = t->parents[k], r = S->parent_row[par], rank = t->node_ranks[k];
            if (device)
                idx[k - i] = r >= 0 ? (int32_t)S->w_draft_ids + r * K + rank
                                    : (int32_t)S->rec_lay.head_ids + (depth - 1) * K + rank;
            else
                S->node_tokens[k] = (r >= 0 ? S->top_ids + (size_t)r * K : S->chain_ids + (size_t)(depth - 1) * K)[rank];
        }
        if (device) op->gather_i32(S->ex, rec + S->w_node_tok + i, rec, idx, end - i);
        i = end;
    }
}

static void hydra_path_topk(entmtp_session *S, const int32_t *path, int32_t levels) {
    for (int32_t d = 0; d < levels; d++) {
        hydra_input_row(S, 0, path, d + 1);
        head_run(S, d, 1, S->s.head_in, S->chain_ids + (size_t)d * S->topk, S->chain_p + (size_t)d * S->topk);
    }
}

const emt_drafter emt_drafter_hydra = {
    .name = "hydra", .chain = hydra_chain_levels, .by_level = 1, .fill_tree = hydra_fill_tree,
    .chain_device = hydra_chain_device, .path_topk = hydra_path_topk,
};

const emt_drafter *emt_drafter_for(const entmtp_heads *heads) {
    if (!heads) return NULL;
    if (heads->kind == ENTMTP_HEADS_EAGLE3) return &emt_drafter_eagle3;
    return heads->kind == ENTMTP_HEADS_HYDRA ? &emt_drafter_hydra : &emt_drafter_medusa;
}

void emt_session_forget_graphs(entmtp_session *S) {
    const emt_backend_ops *op = S->model->be->ops;
    if (op->graph_reset && S->ex) op->graph_reset(S->ex);
}

void emt_session_set_batch_heads(entmtp_session *S, int batch_heads) {
    S->batch_heads = batch_heads;
    emt_session_forget_graphs(S); /* the recorded heads' launches change */
}

int emt_backend_has_step_ops(const emt_backend_ops *op) {
    return op->topk_device && op->embed_device && op->accept && op->commit && op->gather_i32;
}

void emt_session_set_device_step(entmtp_session *S, int device_step) {
    const emt_backend_ops *op = S->model->be->ops;
    S->device_step = device_step && S->rec_dev && emt_backend_has_step_ops(op);
    S->dyn_step = S->device_step && op->write_i32 && emt_forward_dyn_supported(S->model);
    S->device_sample = S->device_step && op->sample_root && op->write_i32;
    S->next_ready = S->next_heads = 0;
    emt_session_forget_graphs(S);
}

void emt_session_last_head_topk(const entmtp_session *S, const int32_t **ids, const float **probs,
                           int32_t *k) {
    *ids = S->chain_ids;
    *probs = S->chain_p;
    *k = S->topk;
}
