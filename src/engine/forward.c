/* One transformer forward pass over a batch of rows (prompt chunk, tree
 * nodes or a single AR token), through the backend's ops. Every supported
 * architecture is this one pass; the model description (emt_model_config and
 * the per-layer weights present) switches its optional steps. */
#include "engine/engine.h"

/* dyn: the lengths in device memory (emt_forward_dyn); kv_start is then dyn->row0 */
static entmtp_status forward(emt_exec *ex, const entmtp_model *m, emt_kv *kv, emt_scratch *s,
                             const int32_t *tokens, const int32_t *d_tokens, const int32_t *positions, int32_t n,
                             int32_t kv_start, const emt_dyn_rows *dyn, const uint8_t *mask, int exact,
                             int32_t logits_rows);

entmtp_status emt_forward(emt_exec *ex, const entmtp_model *m, emt_kv *kv, emt_scratch *s,
                          const int32_t *tokens, const int32_t *positions, int32_t n,
                          int32_t kv_start, const uint8_t *mask, int exact, int32_t logits_rows) {
    return forward(ex, m, kv, s, tokens, NULL, positions, n, kv_start, NULL, mask, exact, logits_rows);
}

entmtp_status emt_forward_device_tokens(emt_exec *ex, const entmtp_model *m, emt_kv *kv, emt_scratch *s,
                                        const int32_t *d_tokens, const int32_t *positions, int32_t n,
                                        int32_t kv_start, const uint8_t *mask, int exact, int32_t logits_rows) {
    return forward(ex, m, kv, s, NULL, d_tokens, positions, n, kv_start, NULL, mask, exact, logits_rows);
}

int emt_forward_dyn_supported(const entmtp_model *m) {
    const emt_backend_ops *op = m->be->ops;
    return op->rope_dyn && op->attention_dyn && op->embed_device;
}

entmtp_status emt_forward_dyn(emt_exec *ex, const entmtp_model *m, emt_kv *kv, emt_scratch *s,
                              const int32_t *d_tokens, const emt_dyn_rows *rows, int32_t n, const uint8_t *mask,
                              int exact, int32_t logits_rows) {
    if (!emt_forward_dyn_supported(m))
        return emt_fail(ENTMTP_ERR_STATE, "forward: the %s backend cannot read the step's lengths from device memory",
                        m->be->ops->name);
    return forward(ex, m, kv, s, NULL, d_tokens, NULL, n, rows->row0, rows, mask, exact, logits_rows);
}

static entmtp_status forward(emt_exec *ex, const entmtp_model *m, emt_kv *kv, emt_scratch *s,
                             const int32_t *tokens, const int32_t *d_tokens, const int32_t *positions, int32_t n,
                             int32_t kv_start, const emt_dyn_rows *dyn, const uint8_t *mask, int exact,
                             int32_t logits_rows) {
    const emt_backend_ops *op = m->be->ops;
    const emt_model_config *c = &m->cfg;
    const int32_t H = c->hidden, F = c->ffn, hd = c->head_dim;
    const int32_t q_dim = c->n_heads * hd, kv_dim = c->n_kv_heads * hd;
    if (n <= 0 || n > s->max_rows || kv_start < 0 || kv_start + n > kv->rows)
        return emt_fail(ENTMTP_ERR_STATE, "forward: %d rows at cache row %d do not fit (max %d rows, %d cache rows)",
                        n, kv_start, s->max_rows, kv->rows);

    if (d_tokens) op->embed_device(ex, &m->tok_embd, H, d_tokens, n, s->x);
    else emt_embed(op, ex, &m->tok_embd, H, tokens, n, s->x);
    if (c->embed_scale) op->scale(ex, s->x, (int64_t)n * H, c->embed_scale);
    /* a BF16 cache: the new rows are made in F32 (s->k_new, v_new), then
     * Q and K roped and K and V rounded into the cache in one launch
     * (rope_q_round_kv, or Q's rope and rope_round_kv); attention reads the
     * cache as BF16 */
    const int bf16 = kv->dtype == EMT_BF16;
    if (bf16) op->set_kv_dtype(ex, EMT_BF16);
    for (int32_t l = 0; l < c->n_layers; l++) {
        const emt_layer *L = &m->layers[l];
        float *k_rows = bf16 ? s->k_new : kv->k[l] + (size_t)kv_start * kv_dim;
        float *v_rows = bf16 ? s->v_new : kv->v[l] + (size_t)kv_start * kv_dim;
        op->rmsnorm(ex, s->x, L->attn_norm, n, H, c->rms_eps, s->xn);
        const emt_wmat *qkv_w[3] = { &L->wq, &L->wk, &L->wv };
        const float *qkv_b[3] = { L->bq, L->bk, L->bv };
        const int32_t qkv_out[3] = { q_dim, kv_dim, kv_dim };
        float *qkv_y[3] = { s->q, k_rows, v_rows };
        emt_matmul_multi(op, ex, 3, qkv_w, qkv_b, qkv_out, s->xn, n, H, qkv_y, exact);
        if (c->qk_norm) { /* per-head RMSNorm: every head is one row of head_dim */
            op->rmsnorm(ex, s->q, L->q_norm, n * c->n_heads, hd, c->rms_eps, s->q);
            op->rmsnorm(ex, k_rows, L->k_norm, n * c->n_kv_heads, hd, c->rms_eps, k_rows);
        }
        const float *inv_freq = L->inv_freq ? L->inv_freq : m->inv_freq; /* local or global */
        if (bf16) /* Q's RoPE too where the backend fuses it (one launch) */
            emt_rope_q_round_kv(op, ex, s->q, c->n_heads, k_rows, v_rows, n, c->n_kv_heads, hd, c->n_rot, positions,
                                dyn, inv_freq, (uint16_t *)(kv->k[l] + (size_t)kv_start * kv->row_words),
                                (uint16_t *)(kv->v[l] + (size_t)kv_start * kv->row_words));
        else if (dyn) {
            op->rope_dyn(ex, s->q, n, c->n_heads, hd, c->n_rot, dyn, inv_freq);
            op->rope_dyn(ex, k_rows, n, c->n_kv_heads, hd, c->n_rot, dyn, inv_freq);
        } else {
            op->rope(ex, s->q, n, c->n_heads, hd, c->n_rot, positions, inv_freq);
            op->rope(ex, k_rows, n, c->n_kv_heads, hd, c->n_rot, positions, inv_freq);
        }
        if (c->q_scale) op->scale(ex, s->q, (int64_t)n * q_dim, c->q_scale);
        if (dyn)
            op->attention_dyn(ex, s->q, kv->k[l], kv->v[l], dyn, n, mask, c->n_heads, c->n_kv_heads, hd, L->window,
                              c->attn_softcap, s->att);
        else if (L->window) /* sliding window (local layers) */
            op->attention_window(ex, s->q, kv->k[l], kv->v[l], kv_start, n, mask, positions, c->n_heads,
                                 c->n_kv_heads, hd, L->window, c->attn_softcap, s->att);
        else if (c->attn_softcap)
            op->attention_softcap(ex, s->q, kv->k[l], kv->v[l], kv_start, n, mask, c->n_heads,
                                  c->n_kv_heads, hd, c->attn_softcap, s->att);
        else
            op->attention(ex, s->q, kv->k[l], kv->v[l], kv_start, n, mask, c->n_heads, c->n_kv_heads,
                          hd, s->att);
        /* the residual adds: in the product's epilogue where the backend
         * fuses them (Gemma 2's post-norm comes between: kept apart) */
        if (c->post_norms) {
            emt_matmul(op, ex, &L->wo, L->bo, s->att, n, q_dim, H, s->tmp, exact);
            op->rmsnorm(ex, s->tmp, L->post_attn_norm, n, H, c->rms_eps, s->tmp);
            op->add(ex, s->x, s->tmp, (int64_t)n * H);
        } else emt_matmul_add(op, ex, &L->wo, L->bo, s->att, n, q_dim, H, s->x, s->tmp, exact);
        op->rmsnorm(ex, s->x, L->ffn_norm, n, H, c->rms_eps, s->xn);
        emt_matmul_gated(op, ex, &L->w_gate, L->b_gate, &L->w_up, L->b_up, s->xn, n, H, F, c->geglu, s->gate,
                         s->up, exact);
        if (c->post_norms) {
            emt_matmul(op, ex, &L->w_down, L->b_down, s->gate, n, F, H, s->tmp, exact);
            op->rmsnorm(ex, s->tmp, L->post_ffn_norm, n, H, c->rms_eps, s->tmp);
            op->add(ex, s->x, s->tmp, (int64_t)n * H);
        } else emt_matmul_add(op, ex, &L->w_down, L->b_down, s->gate, n, F, H, s->x, s->tmp, exact);
        for (int32_t j = 0; j < s->n_taps; j++) /* a drafter reads this layer's output (the residual stream) */
            if (s->tap_layers[j] == l) {
                for (int32_t r = 0; r < n; r++) {
                    s->tap_dst[r] = r * s->n_taps + j;
                    s->tap_src[r] = r;
                }
                op->copy_rows(ex, s->taps, s->x, (size_t)H, s->tap_dst, s->tap_src, n);
            }
    }
    if (bf16) op->set_kv_dtype(ex, EMT_F32); /* a drafter's own attention reads F32 caches */
    op->rmsnorm(ex, s->x, m->out_norm, n, H, c->rms_eps, s->hidden);
    if (logits_rows > 0) {
        if (logits_rows > n) logits_rows = n;
        emt_matmul(op, ex, &m->lm_head, NULL, s->hidden + (size_t)(n - logits_rows) * H, logits_rows, H,
                   c->vocab, s->logits, exact);
        if (c->final_softcap) op->softcap(ex, s->logits, (int64_t)logits_rows * c->vocab, c->final_softcap);
    }
    return ENTMTP_OK;
}
