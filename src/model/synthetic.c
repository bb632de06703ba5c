#include "model/synthetic.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

entmtp_status emt_synthetic_config(const char *name, emt_model_config *c) {
    memset(c, 0, sizeof *c);
    snprintf(c->arch, sizeof c->arch, "llama");
    snprintf(c->name, sizeof c->name, "synthetic-%s", name);
    c->rope_theta = 10000.0f;
    c->rms_eps = 1e-5f;
    c->bos = 1;
    c->eos = 2;
    if (!strcmp(name, "llama-7b")) {
        c->hidden = 4096; c->n_layers = 32; c->n_heads = 32; c->n_kv_heads = 32;
        c->ffn = 11008; c->vocab = 32000; c->ctx = 4096;
    } else if (!strcmp(name, "smollm2-135m")) {
        c->hidden = 576; c->n_layers = 30; c->n_heads = 9; c->n_kv_heads = 3;
        c->ffn = 1536; c->vocab = 49152; c->ctx = 8192; c->tied = 1; c->rope_theta = 100000.0f;
    } else if (!strcmp(name, "tiny")) {
        c->hidden = 64; c->n_layers = 2; c->n_heads = 4; c->n_kv_heads = 2;
        c->ffn = 128; c->vocab = 512; c->ctx = 1024;
    } else {
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT,
                        "synthetic model '%s' is unknown (llama-7b, smollm2-135m, tiny)", name);
    }
    c->head_dim = c->hidden / c->n_heads;
    c->n_rot = c->head_dim;
    return ENTMTP_OK;
}

typedef struct rng { uint64_t s; } rng;

static float next_uniform(rng *r) { /* splitmix64 -> [-1, 1) */
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return (float)((double)(z >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

static float *random_tensor(emt_backend *be, int64_t n, float scale, float offset, rng *r) {
    float *host = emt_malloc((size_t)n, sizeof(float));
    if (!host) return NULL;
    for (int64_t i = 0; i < n; i++) host[i] = offset + scale * next_uniform(r);
    float *dev = be->ops->alloc(be, (size_t)n * sizeof(float));
    if (dev && be->ops->upload(be, dev, host, (size_t)n * sizeof(float)) != ENTMTP_OK) {
        be->ops->release(be, dev);
        dev = NULL;
    }
    free(host);
    return dev;
}

/* Rows repeat with this period: a 7B model builds in seconds instead of
 * holding the device for the minute that 6.7e9 host random values take.
 * No kernel's speed depends on the values, and each row is still its own
 * memory, so the bandwidth and cache behaviour are those of a real model. */
#define SYNTH_ROW_PERIOD 256

/* One random weight row of `cols` values in dtype t (scale * U[-1, 1)). */
static int random_row(emt_dtype t, int64_t cols, float scale, rng *r, float *tmp, uint8_t *out) {
    for (int64_t k = 0; k < cols; k++) tmp[k] = scale * next_uniform(r);
    switch (t) {
    case EMT_F32: memcpy(out, tmp, (size_t)cols * sizeof(float)); return 1;
    case EMT_F16:
    case EMT_BF16:
        for (int64_t k = 0; k < cols; k++) {
            uint16_t h;
            if (t == EMT_F16) h = emt_f32_to_f16(tmp[k]);
            else { uint32_t u; memcpy(&u, &tmp[k], 4); h = (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16); }
            memcpy(out + 2 * k, &h, 2);
        }
        return 1;
    default: return emt_quantize_blocks(t, tmp, cols, out) == ENTMTP_OK;
    }
}

/* A random [rows][cols] weight matrix in dtype t, its rows repeating every
 * SYNTH_ROW_PERIOD rows; the host holds one period at a time. */
static int random_mat(emt_backend *be, int64_t rows, int64_t cols, float scale, emt_dtype t, rng *r,
                      emt_wmat *out) {
    if (emt_dtype_nbytes(t, cols) == 0) t = EMT_F32; /* rows not whole blocks: F32, as the loader keeps them */
    size_t rb = emt_dtype_nbytes(t, cols);
    int64_t period = rows < SYNTH_ROW_PERIOD ? rows : SYNTH_ROW_PERIOD;
    float *tmp = emt_malloc((size_t)cols, sizeof(float));
    uint8_t *host = emt_malloc((size_t)period, rb);
    uint8_t *dev = be->ops->alloc(be, (size_t)rows * rb);
    int ok = tmp && host && dev;
    for (int64_t i = 0; ok && i < period; i++) ok = random_row(t, cols, scale, r, tmp, host + (size_t)i * rb);
    for (int64_t i = 0; ok && i < rows; i += period) {
        int64_t n = rows - i < period ? rows - i : period;
        ok = be->ops->upload(be, dev + (size_t)i * rb, host, (size_t)n * rb) == ENTMTP_OK;
    }
    free(tmp);
    free(host);
    if (!ok) {
        if (dev) be->ops->release(be, dev);
        return 0;
    }
    out->dtype = t;
    out->data = out->owned = dev;
    /* the layout the backend's kernels take, as the file loader does */
    if (t != EMT_F32 && be->ops->host_memory && be->ops->pack && be->ops->pack(be, out, rows, cols) != ENTMTP_OK) {
        be->ops->release(be, out->owned);
        memset(out, 0, sizeof *out);
        return 0;
    }
    return 1;
}

entmtp_status emt_model_create_synthetic(const emt_model_config *c, uint64_t seed, emt_dtype wt,
                                         const entmtp_model_params *params, entmtp_model **out) {
    *out = NULL;
    entmtp_model_params p = entmtp_model_default_params();
    entmtp_status st = emt_copy_versioned(&p, sizeof p, params, "entmtp_model_params");
    if (st) return st;
    entmtp_model *m = emt_calloc(1, sizeof *m);
    if (!m) return ENTMTP_ERR_OUT_OF_MEMORY;
    m->cfg = *c;
    m->n_threads = p.n_threads;
    m->path = emt_strdup(c->name);
    if (p.backend == ENTMTP_BACKEND_CPU || p.backend == ENTMTP_BACKEND_AUTO) {
        st = ENTMTP_ERR_BACKEND;
        if (p.backend == ENTMTP_BACKEND_AUTO) st = emt_backend_cuda_create(p.device, &m->be);
        if (st) {
            entmtp_clear_error();
            st = emt_backend_cpu_create(&m->be);
            m->backend_kind = ENTMTP_BACKEND_CPU;
        } else {
            m->backend_kind = ENTMTP_BACKEND_CUDA;
        }
    } else {
        st = emt_backend_cuda_create(p.device, &m->be);
        m->backend_kind = ENTMTP_BACKEND_CUDA;
    }
    if (st) { entmtp_model_free(m); return st; }
    rng r = { seed };
    emt_backend *be = m->be;
    const int64_t H = c->hidden, F = c->ffn, q = (int64_t)c->n_heads * c->head_dim,
                  kv = (int64_t)c->n_kv_heads * c->head_dim;
    float sH = 1.0f / sqrtf((float)H), sF = 1.0f / sqrtf((float)F);
    m->layers = emt_calloc((size_t)c->n_layers, sizeof *m->layers);
    m->inv_freq = emt_calloc((size_t)c->n_rot / 2, sizeof(float));
    if (!m->layers || !m->inv_freq) { entmtp_model_free(m); return ENTMTP_ERR_OUT_OF_MEMORY; }
    emt_rope_inv_freq(c, NULL, m->inv_freq);
    /* the weight type only where the backend takes it (else F32, as a file would load) */
    emt_dtype t = wt != EMT_F32 && p.compute_type == ENTMTP_COMPUTE_NATIVE &&
                          (be->ops->weight_types & (1u << wt)) ? wt : EMT_F32;
    m->compute = p.compute_type;
    int ok = random_mat(be, c->vocab, H, 1.0f, t, &r, &m->tok_embd) &&
             (m->out_norm = random_tensor(be, H, 0.05f, 1.0f, &r)) != NULL;
    for (int32_t l = 0; ok && l < c->n_layers; l++) {
        emt_layer *L = &m->layers[l];
        ok = (L->attn_norm = random_tensor(be, H, 0.05f, 1.0f, &r)) && random_mat(be, q, H, sH, t, &r, &L->wq) &&
             random_mat(be, kv, H, sH, t, &r, &L->wk) && random_mat(be, kv, H, sH, t, &r, &L->wv) &&
             random_mat(be, H, q, sH, t, &r, &L->wo) && (L->ffn_norm = random_tensor(be, H, 0.05f, 1.0f, &r)) &&
             random_mat(be, F, H, sH, t, &r, &L->w_gate) && random_mat(be, F, H, sH, t, &r, &L->w_up) &&
             random_mat(be, H, F, sF, t, &r, &L->w_down);
        if (p.progress && ok) p.progress((float)(l + 1) / (float)c->n_layers, "building synthetic model", p.progress_user_data);
    }
    if (ok && c->tied) {
        m->lm_head = m->tok_embd;
        m->lm_head.owned = NULL;
    } else if (ok) {
        ok = random_mat(be, c->vocab, H, sH, t, &r, &m->lm_head);
    }
    if (!ok) { entmtp_model_free(m); return ENTMTP_ERR_OUT_OF_MEMORY; }
    m->n_params = (int64_t)c->vocab * H * (c->tied ? 1 : 2) + H +
                  (int64_t)c->n_layers * (2 * H + q * H * 2 + kv * H * 2 + 3 * F * H);
    if (c->eos >= 0 && c->eos < c->vocab) m->eog[m->n_eog++] = c->eos;
    *out = m;
    return ENTMTP_OK;
}
