/* entmtp_heads_*: load Medusa or Hydra heads from safetensors. */
#include "model/heads.h"
#include "backend/cpu/quant.h"
#include "model/weights.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

ENTMTP_API void entmtp_heads_free(entmtp_heads *h) {
    if (!h) return;
    emt_backend *be = h->model->be;
    if (h->heads) {
        for (int32_t i = 0; i < h->n_heads; i++) {
            emt_head *hd = &h->heads[i];
            if (hd->layers) {
                for (int32_t l = 0; l < hd->n_layers; l++) {
                    emt_head_layer *L = &hd->layers[l];
                    void *ps[] = { L->w.owned, L->b, L->res_w.owned, L->res_b };
                    for (int k = 0; k < 4; k++)
                        if (ps[k]) be->ops->release(be, ps[k]);
                }
                free(hd->layers);
            }
            float *ps[] = { hd->lm_w, hd->lm_b, hd->draft_w, hd->draft_b };
            for (int k = 0; k < 4; k++)
                if (ps[k]) be->ops->release(be, ps[k]);
        }
        free(h->heads);
    }
    if (h->draft_shared.owned) be->ops->release(be, h->draft_shared.owned);
    emt_eagle3_free(h);
    free(h->path);
    free(h->draft_ids);
    free(h);
}

static int has(const emt_st *st, const char *fmt, const char *prefix, int32_t a, int32_t b) {
    char name[256];
    snprintf(name, sizeof name, fmt, prefix, a, b);
    return emt_st_find(st, name) != NULL;
}

/* The hidden size a head file implies must match the model's: a clear
 * MISMATCH error before any loading. */
static entmtp_status check_dims(const emt_st *st, const char *path, const char *name,
                                int64_t want_rows, int64_t want_cols, const char *what) {
    const emt_tensor *t = emt_st_find(st, name);
    if (!t) return emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor '%s' is missing", path, name);
    if (t->n_dims != 2 || t->shape[0] != want_rows || t->shape[1] != want_cols)
        return emt_fail(ENTMTP_ERR_MISMATCH,
                        "%s: tensor '%s' has shape [%lld, %lld]; the model's %s requires [%lld, %lld]",
                        path, name, (long long)t->shape[0],
                        (long long)(t->n_dims > 1 ? t->shape[1] : 0), what, (long long)want_rows,
                        (long long)want_cols);
    return ENTMTP_OK;
}

/* A head's weight matrix [rows][cols]: Q8_0 where the model computes
 * natively (a draft level is a one-row product, so its time is the bytes it
 * reads: Q8_0 is 1.06 bytes a weight against F16's 2, and the heads' drafts
 * barely move, docs/performance.md "Draft heads in Q8_0"), else F32
 * (emt_weights_load_mat_as; the result is a copy in backend memory, as the
 * heads' file closes after loading). */
static entmtp_status load_head_matrix(emt_weights *w, const char *name, int64_t rows, int64_t cols, emt_wmat *out) {
    return emt_weights_load_mat_as(w, name, rows, cols, EMT_Q8_0, out);
}

static entmtp_status load_medusa(entmtp_heads *h, emt_weights *w, const char *prefix) {
    const emt_model_config *c = &h->model->cfg;
    char name[256];
    entmtp_status st;
    int32_t L = h->n_layers;
    h->shares_lm_head = !has(w->st, "%s%d.%d.weight", prefix, 0, L);
    for (int32_t i = 0; i < h->n_heads; i++) {
        emt_head *hd = &h->heads[i];
        hd->n_layers = L;
        hd->layers = emt_calloc((size_t)L, sizeof *hd->layers);
        if (!hd->layers) return ENTMTP_ERR_OUT_OF_MEMORY;
        for (int32_t l = 0; l < L; l++) {
            hd->layers[l].n_in = c->hidden;
            snprintf(name, sizeof name, "%s%d.%d.linear.weight", prefix, i, l);
            if ((st = check_dims(w->st, h->path, name, c->hidden, c->hidden, "hidden size"))) return st;
            if ((st = load_head_matrix(w, name, c->hidden, c->hidden, &hd->layers[l].w))) return st;
            snprintf(name, sizeof name, "%s%d.%d.linear.bias", prefix, i, l);
            if ((st = emt_weights_load(w, name, c->hidden, 0, 0, 0, &hd->layers[l].b))) return st;
        }
        snprintf(name, sizeof name, "%s%d.%d.weight", prefix, i, L);
        int own = emt_st_find(w->st, name) != NULL;
        if (own == h->shares_lm_head)
            return emt_fail(ENTMTP_ERR_FORMAT, "%s: head %d %s an lm_head ('%s') while head 0 %s",
                            h->path, i, own ? "has" : "lacks", name, own ? "does not" : "does");
        if (own) {
            if ((st = check_dims(w->st, h->path, name, c->vocab, c->hidden, "vocabulary x hidden"))) return st;
            if ((st = emt_weights_load(w, name, c->vocab, c->hidden, 0, 0, &hd->lm_w))) return st;
        }
    }
    return ENTMTP_OK;
}

static entmtp_status load_hydra(entmtp_heads *h, emt_weights *w) {
    const emt_model_config *c = &h->model->cfg;
    char name[256];
    entmtp_status st;
    int32_t L = h->n_layers;
    h->shares_lm_head = emt_st_find(w->st, "hydra_lm_head.0.weight") == NULL;
    for (int32_t i = 0; i < h->n_heads; i++) {
        emt_head *hd = &h->heads[i];
        hd->n_layers = L;
        hd->layers = emt_calloc((size_t)L, sizeof *hd->layers);
        if (!hd->layers) return ENTMTP_ERR_OUT_OF_MEMORY;
        for (int32_t l = 0; l < L; l++) {
            emt_head_layer *hl = &hd->layers[l];
            hl->n_in = l == 0 ? c->hidden * (i + 2) : c->hidden;
            snprintf(name, sizeof name, "hydra_mlp.%d.%d.linear.weight", i, l);
            if ((st = check_dims(w->st, h->path, name, c->hidden, hl->n_in, "hidden size"))) return st;
            if ((st = load_head_matrix(w, name, c->hidden, hl->n_in, &hl->w))) return st;
            snprintf(name, sizeof name, "hydra_mlp.%d.%d.linear.bias", i, l);
            if ((st = emt_weights_load(w, name, c->hidden, 0, 0, 0, &hl->b))) return st;
            if (l == 0) {
                snprintf(name, sizeof name, "hydra_mlp.%d.0.res_connection.weight", i);
                if ((st = load_head_matrix(w, name, c->hidden, hl->n_in, &hl->res_w))) return st;
                snprintf(name, sizeof name, "hydra_mlp.%d.0.res_connection.bias", i);
                if ((st = emt_weights_load(w, name, c->hidden, 0, 0, 0, &hl->res_b))) return st;
            }
        }
        snprintf(name, sizeof name, "hydra_lm_head.%d.weight", i);
        int own = emt_st_find(w->st, name) != NULL;
        if (own == h->shares_lm_head)
            return emt_fail(ENTMTP_ERR_FORMAT, "%s: head %d %s an lm_head ('%s') while head 0 %s",
                            h->path, i, own ? "has" : "lacks", name, own ? "does not" : "does");
        if (own) {
            if ((st = check_dims(w->st, h->path, name, c->vocab, c->hidden, "vocabulary x hidden"))) return st;
            if ((st = emt_weights_load(w, name, c->vocab, c->hidden, 0, 0, &hd->lm_w))) return st;
            snprintf(name, sizeof name, "hydra_lm_head.%d.bias", i);
            if ((st = emt_weights_load(w, name, c->vocab, 0, 0, 1, &hd->lm_b))) return st;
        }
    }
    return ENTMTP_OK;
}

/* The optional draft vocabulary: 1-D I32/I64 token ids, unique, inside the
 * vocabulary. Every head gets the rows of its lm_head (own or the model's)
 * for those ids, gathered on the backend. */
static entmtp_status load_draft_vocab(entmtp_heads *h, const emt_st *st) {
    const emt_tensor *t = emt_st_find(st, "draft_vocab");
    if (!t) return ENTMTP_OK;
    const emt_model_config *c = &h->model->cfg;
    if ((t->dtype != EMT_I32 && t->dtype != EMT_I64) || t->n_dims != 1 || t->shape[0] < 1 || t->shape[0] > c->vocab)
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor 'draft_vocab' must be a list of 1..%d I32/I64 token ids (got %s, %d dims)",
                        h->path, c->vocab, emt_dtype_name(t->dtype), t->n_dims);
    int32_t n = (int32_t)t->shape[0];
    h->draft_ids = emt_malloc((size_t)n, sizeof(int32_t));
    uint8_t *seen = emt_calloc((size_t)c->vocab, 1);
    int32_t *all = emt_malloc((size_t)n, sizeof(int32_t));
    entmtp_status st_ = ENTMTP_OK;
    if (!h->draft_ids || !seen || !all) { st_ = ENTMTP_ERR_OUT_OF_MEMORY; goto out; }
    for (int32_t i = 0; i < n; i++) {
        int64_t v;
        if (t->dtype == EMT_I32) { int32_t x; memcpy(&x, (const char *)t->data + (size_t)i * 4, 4); v = x; }
        else memcpy(&v, (const char *)t->data + (size_t)i * 8, 8);
        if (v < 0 || v >= c->vocab || seen[v]) {
            st_ = emt_fail(ENTMTP_ERR_FORMAT, "%s: draft_vocab[%d] = %lld is %s", h->path, i, (long long)v,
                           v < 0 || v >= c->vocab ? "outside the vocabulary" : "a duplicate");
            goto out;
        }
        seen[v] = 1;
        h->draft_ids[i] = (int32_t)v;
        all[i] = i;
    }
    h->n_draft = n;
    emt_backend *be = h->model->be;
    emt_exec *ex = be->ops->exec_create(be, 1);
    if (!ex) { st_ = ENTMTP_ERR_OUT_OF_MEMORY; goto out; }
    size_t bytes = (size_t)n * (size_t)c->hidden * sizeof(float);
    const emt_wmat *lm = &h->model->lm_head;
    if (h->shares_lm_head && lm->dtype != EMT_F32 && be->ops->host_memory) {
        /* the rows in the lm_head's own type: a quarter of the F32 bytes for Q8_0 */
        size_t rb = emt_dtype_nbytes(lm->dtype, c->hidden);
        uint8_t *rows = be->ops->alloc(be, rb * (size_t)n);
        if (!rows) st_ = ENTMTP_ERR_OUT_OF_MEMORY;
        for (int32_t i = 0; rows && i < n; i++) /* in the file's layout whatever the lm_head's */
            emt_packed_row_into(lm->dtype, lm->data, lm->packed, c->hidden, h->draft_ids[i], rows + (size_t)i * rb);
        h->draft_shared = (emt_wmat){ lm->dtype, rows, rows };
    } else if (h->shares_lm_head) {
        float *rows = be->ops->alloc(be, bytes);
        if (!rows) st_ = ENTMTP_ERR_OUT_OF_MEMORY;
        else emt_embed(be->ops, ex, lm, c->hidden, h->draft_ids, n, rows);
        h->draft_shared = (emt_wmat){ EMT_F32, rows, rows };
    }
    for (int32_t i = 0; i < h->n_heads && !st_; i++) {
        emt_head *hd = &h->heads[i];
        if (!hd->lm_w) continue; /* uses draft_shared */
        hd->draft_w = be->ops->alloc(be, bytes);
        if (!hd->draft_w) { st_ = ENTMTP_ERR_OUT_OF_MEMORY; break; }
        be->ops->copy_rows(ex, hd->draft_w, hd->lm_w, (size_t)c->hidden, all, h->draft_ids, n);
        if (hd->lm_b) {
            hd->draft_b = be->ops->alloc(be, (size_t)n * sizeof(float));
            if (!hd->draft_b) { st_ = ENTMTP_ERR_OUT_OF_MEMORY; break; }
            be->ops->copy_rows(ex, hd->draft_b, hd->lm_b, 1, all, h->draft_ids, n);
        }
    }
    if (!st_) st_ = emt_backend_sync(be, ex);
    be->ops->exec_destroy(ex);
out:
    free(seen);
    free(all);
    return st_;
}

ENTMTP_API entmtp_status entmtp_heads_load(entmtp_model *model, const char *path,
                                           entmtp_heads **out_heads) {
    if (!model || !path || !out_heads)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_heads_load: model, path and out_heads must not be NULL");
    *out_heads = NULL;
    emt_weights w;
    memset(&w, 0, sizeof w);
    w.path = path;
    w.be = model->be;
    w.native = model->compute == ENTMTP_COMPUTE_NATIVE;
    w.copy_weights = 1; /* the file closes after loading */
    struct stat sb;
    int dir = stat(path, &sb) == 0 && S_ISDIR(sb.st_mode); /* a drafter directory (EAGLE-3) */
    entmtp_status st = dir ? ENTMTP_OK : emt_st_open(path, &w.st);
    if (st) return st;
    entmtp_heads *h = emt_calloc(1, sizeof *h);
    if (!h || !(h->path = emt_strdup(path))) { st = ENTMTP_ERR_OUT_OF_MEMORY; goto fail; }
    h->model = model;
    if (dir || emt_eagle3_detect(w.st)) {
        emt_st_close(w.st);
        w.st = NULL;
        if ((st = emt_eagle3_load(h, path))) goto fail;
        *out_heads = h;
        return ENTMTP_OK;
    }
    const char *prefix = "";
    if (emt_st_find(w.st, "prefix_embeding_layer.norm.weight") ||
        (emt_st_find(w.st, "hydra_mlp.0.1.linear.weight") && !emt_st_find(w.st, "hydra_mlp.0.0.linear.weight"))) {
        st = emt_fail(ENTMTP_ERR_UNSUPPORTED,
                      "%s: Hydra++ 'prefix-mlp' heads are not supported (only the grounded 'mlp' architecture)", path);
        goto fail;
    }
    if (emt_st_find(w.st, "hydra_mlp.0.0.linear.weight")) {
        h->kind = ENTMTP_HEADS_HYDRA;
        prefix = "hydra_mlp.";
        if (!emt_st_find(w.st, "hydra_mlp.0.0.res_connection.weight")) {
            st = emt_fail(ENTMTP_ERR_UNSUPPORTED,
                          "%s: ungrounded Hydra heads (no 'hydra_mlp.0.0.res_connection.weight') are not supported; use the Medusa layout", path);
            goto fail;
        }
    } else if (emt_st_find(w.st, "0.0.linear.weight")) {
        h->kind = ENTMTP_HEADS_MEDUSA;
    } else if (emt_st_find(w.st, "medusa_head.0.0.linear.weight")) {
        h->kind = ENTMTP_HEADS_MEDUSA;
        prefix = "medusa_head.";
    } else {
        st = emt_fail(ENTMTP_ERR_FORMAT,
                      "%s: no Medusa ('0.0.linear.weight') or Hydra ('hydra_mlp.0.0.linear.weight') head tensors", path);
        goto fail;
    }
    while (h->n_heads < EMT_MAX_HEADS && has(w.st, "%s%d.%d.linear.weight", prefix, h->n_heads, 0))
        h->n_heads++;
    while (h->n_layers < 64 && has(w.st, "%s%d.%d.linear.weight", prefix, 0, h->n_layers)) h->n_layers++;
    for (int32_t i = 1; i < h->n_heads; i++)
        for (int32_t l = 0; l < h->n_layers; l++)
            if (!has(w.st, "%s%d.%d.linear.weight", prefix, i, l)) {
                st = emt_fail(ENTMTP_ERR_FORMAT, "%s: head %d lacks layer %d ('%s%d.%d.linear.weight') that head 0 has",
                              path, i, l, prefix, i, l);
                goto fail;
            }
    h->heads = emt_calloc((size_t)h->n_heads, sizeof *h->heads);
    if (!h->heads) { st = ENTMTP_ERR_OUT_OF_MEMORY; goto fail; }
    st = h->kind == ENTMTP_HEADS_HYDRA ? load_hydra(h, &w) : load_medusa(h, &w, prefix);
    if (!st) st = load_draft_vocab(h, w.st);
    if (st) goto fail;
    emt_st_close(w.st);
    *out_heads = h;
    return ENTMTP_OK;
fail:
    emt_st_close(w.st);
    entmtp_heads_free(h);
    return st;
}

ENTMTP_API entmtp_status entmtp_heads_get_info(const entmtp_heads *h, entmtp_heads_info *out) {
    if (!h || !out)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_heads_get_info: heads and out must not be NULL");
    entmtp_heads_info info = { sizeof info, h->kind, h->n_heads, h->n_layers, h->shares_lm_head };
    size_t n = out->struct_size < sizeof info ? out->struct_size : sizeof info;
    if (n < sizeof(size_t))
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_heads_info.struct_size = %zu is too small", out->struct_size);
    memcpy((char *)out + sizeof(size_t), (char *)&info + sizeof(size_t), n - sizeof(size_t));
    return ENTMTP_OK;
}
