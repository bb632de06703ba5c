#include "model/weights.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

const emt_tensor *emt_weights_find(const emt_weights *w, const char *name) {
    return w->gguf ? emt_gguf_find_tensor(w->gguf, name) : emt_st_find(w->st, name);
}

static void shape_str(const emt_tensor *t, char *buf, size_t cap) {
    size_t n = 0;
    n += (size_t)snprintf(buf + n, cap - n, "[");
    for (int32_t i = 0; i < t->n_dims && n < cap; i++)
        n += (size_t)snprintf(buf + n, cap - n, i ? ", %lld" : "%lld", (long long)t->shape[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

/* GGUF row h*hd + 2i + t holds HF row h*hd + t*hd/2 + i (rows of
 * row_bytes bytes). */
static void unpermute_bytes(const void *src, void *dst, int64_t rows, size_t row_bytes, int32_t heads) {
    int64_t hd = rows / heads;
    for (int64_t h = 0; h < heads; h++)
        for (int64_t i = 0; i < hd / 2; i++)
            for (int64_t t = 0; t < 2; t++)
                memcpy((uint8_t *)dst + (size_t)(h * hd + t * (hd / 2) + i) * row_bytes,
                       (const uint8_t *)src + (size_t)(h * hd + 2 * i + t) * row_bytes, row_bytes);
}

static entmtp_status check_shape(const emt_weights *w, const emt_tensor *t, const char *name,
                                 int64_t d0, int64_t d1) {
    int want_dims = d1 ? 2 : 1;
    int ok = t->n_dims == want_dims && t->shape[0] == d0 && (d1 == 0 || t->shape[1] == d1);
    if (!ok) {
        char got[96];
        shape_str(t, got, sizeof got);
        if (d1)
            return emt_fail(ENTMTP_ERR_FORMAT,
                            "%s: tensor '%s' has shape %s, the config implies [%lld, %lld]",
                            t->file ? t->file : w->path, name, got, (long long)d0, (long long)d1);
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor '%s' has shape %s, the config implies [%lld]",
                        t->file ? t->file : w->path, name, got, (long long)d0);
    }
    return ENTMTP_OK;
}

static entmtp_status find_checked(emt_weights *w, const char *name, int64_t d0, int64_t d1,
                                  int32_t unpermute_heads, const emt_tensor **out) {
    const emt_tensor *t = emt_weights_find(w, name);
    *out = t;
    if (!t) return emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor '%s' is missing", w->path, name);
    entmtp_status st = check_shape(w, t, name, d0, d1);
    if (st) return st;
    if (unpermute_heads > 0 && (d0 % unpermute_heads != 0 || (d0 / unpermute_heads) % 2 != 0))
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor '%s': %lld rows do not split into %d heads of even size",
                        w->path, name, (long long)d0, unpermute_heads);
    return ENTMTP_OK;
}

static entmtp_status report_progress(emt_weights *w, const emt_tensor *t) {
    w->done_bytes += t->nbytes;
    if (w->progress && w->total_bytes &&
        w->progress((float)((double)w->done_bytes / (double)w->total_bytes), "loading weights",
                    w->progress_user))
        return emt_fail(ENTMTP_ERR_CALLBACK, "%s: loading cancelled by the progress callback", w->path);
    return ENTMTP_OK;
}

/* Tensor t as F32 in a new host buffer (*out), every element checked finite. */
static entmtp_status read_f32_host(const emt_weights *w, const emt_tensor *t, const char *name, int64_t numel,
                                   float **out) {
    float *host = emt_malloc((size_t)numel, sizeof(float));
    if (!host) return ENTMTP_ERR_OUT_OF_MEMORY;
    entmtp_status st = emt_tensor_to_f32(t, 0, numel, host);
    if (st != ENTMTP_OK) { free(host); return st; }
    for (int64_t i = 0; i < numel; i++) {
        if (!isfinite(host[i])) {
            free(host);
            return emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor '%s' element %lld is not finite",
                            t->file ? t->file : w->path, name, (long long)i);
        }
    }
    *out = host;
    return ENTMTP_OK;
}

static entmtp_status load_f32(emt_weights *w, const char *name, int64_t d0, int64_t d1,
                              int32_t unpermute_heads, int optional, float offset, float **out) {
    *out = NULL;
    if (optional && !emt_weights_find(w, name)) return ENTMTP_OK;
    const emt_tensor *t;
    entmtp_status st = find_checked(w, name, d0, d1, unpermute_heads, &t);
    if (st) return st;
    int64_t numel = d0 * (d1 ? d1 : 1);
    float *host;
    if ((st = read_f32_host(w, t, name, numel, &host))) return st;
    for (int64_t i = 0; i < numel; i++) host[i] += offset;
    if (unpermute_heads > 0) {
        float *tmp = emt_malloc((size_t)numel, sizeof(float));
        if (!tmp) { free(host); return ENTMTP_ERR_OUT_OF_MEMORY; }
        unpermute_bytes(host, tmp, d0, (size_t)(d1 ? d1 : 1) * sizeof(float), unpermute_heads);
        free(host);
        host = tmp;
    }
    float *dev = w->be->ops->alloc(w->be, (size_t)numel * sizeof(float));
    if (!dev) { free(host); return ENTMTP_ERR_OUT_OF_MEMORY; }
    st = w->be->ops->upload(w->be, dev, host, (size_t)numel * sizeof(float));
    free(host);
    if (st != ENTMTP_OK) { w->be->ops->release(w->be, dev); return st; }
    w->n_params += numel;
    if ((st = report_progress(w, t))) {
        w->be->ops->release(w->be, dev);
        return st;
    }
    *out = dev;
    return ENTMTP_OK;
}

entmtp_status emt_weights_load(emt_weights *w, const char *name, int64_t d0, int64_t d1,
                               int32_t unpermute_heads, int optional, float **out) {
    return load_f32(w, name, d0, d1, unpermute_heads, optional, 0.0f, out);
}

entmtp_status emt_weights_load_norm(emt_weights *w, const char *name, int64_t d0, float offset, float **out) {
    return load_f32(w, name, d0, 0, 0, 0, offset, out);
}

/* Checks every block scale (and F16/BF16 value) of a tensor kept in its
 * stored form, from its bits: no conversion of the weights at load. */
static entmtp_status check_finite(const emt_weights *w, const emt_tensor *t, const char *name) {
    int64_t bad;
    entmtp_status st = emt_tensor_check_finite(t, &bad);
    if (st || bad < 0) return st;
    return emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor '%s' element %lld is not finite", t->file ? t->file : w->path, name,
                    (long long)bad);
}

/* The weight's bytes into dev, rows unpermuted when unpermute_heads > 0;
 * staged through host memory for a device backend. */
static entmtp_status place_bytes(emt_backend *be, const uint8_t *src, uint8_t *dev, int64_t d0, size_t rb,
                                 int32_t unpermute_heads) {
    size_t bytes = (size_t)d0 * rb;
    if (be->ops->host_memory) {
        if (unpermute_heads > 0) unpermute_bytes(src, dev, d0, rb, unpermute_heads);
        else memcpy(dev, src, bytes);
        return ENTMTP_OK;
    }
    uint8_t *host = NULL;
    if (unpermute_heads > 0) {
        if (!(host = emt_malloc(bytes, 1))) return ENTMTP_ERR_OUT_OF_MEMORY;
        unpermute_bytes(src, host, d0, rb, unpermute_heads);
    }
    entmtp_status st = be->ops->upload(be, dev, host ? host : src, bytes);
    free(host);
    return st;
}

entmtp_status emt_weights_load_mat(emt_weights *w, const char *name, int64_t d0, int64_t d1,
                                   int32_t unpermute_heads, emt_wmat *out) {
    memset(out, 0, sizeof *out);
    const emt_tensor *t;
    entmtp_status st = find_checked(w, name, d0, d1, unpermute_heads, &t);
    if (st) return st;
    /* rows must be whole blocks for the kernels (a file may block only the total) */
    int keep = w->native && t->dtype != EMT_F32 && (w->be->ops->weight_types & (1u << t->dtype)) &&
               emt_dtype_nbytes(t->dtype, d1) > 0;
    if (!keep) {
        float *dev;
        if ((st = emt_weights_load(w, name, d0, d1, unpermute_heads, 0, &dev))) return st;
        out->dtype = EMT_F32;
        out->data = out->owned = dev;
        return ENTMTP_OK;
    }
    if ((st = check_finite(w, t, name))) return st;
    out->dtype = t->dtype;
    out->data = t->data;
    if (unpermute_heads > 0 || w->copy_weights || !w->be->ops->host_memory) {
        /* GGUF's rotary row order undone by moving whole rows of blocks (the
         * one copy of a quantized weight on the CPU: Q and K only); a device
         * backend gets its own copy of every weight, in the stored bytes */
        size_t rb = t->nbytes / (size_t)d0;
        uint8_t *dev = w->be->ops->alloc(w->be, t->nbytes);
        if (!dev) return ENTMTP_ERR_OUT_OF_MEMORY;
        if ((st = place_bytes(w->be, t->data, dev, d0, rb, unpermute_heads))) {
            w->be->ops->release(w->be, dev);
            return emt_fail(st, "%s: tensor '%s': its %zu bytes could not be placed on the %s backend",
                            t->file ? t->file : w->path, name, t->nbytes, w->be->ops->name);
        }
        out->data = out->owned = dev;
    }
    if (w->be->ops->host_memory && w->be->ops->pack && (st = w->be->ops->pack(w->be, out, d0, d1))) {
        if (out->owned) w->be->ops->release(w->be, out->owned);
        memset(out, 0, sizeof *out);
        return emt_fail(st, "%s: tensor '%s': no memory to repack its %zu bytes for the %s kernels",
                        t->file ? t->file : w->path, name, t->nbytes, w->be->ops->name);
    }
    /* copied (unpermuted Q/K, a device or closing file) or packed: the file's
     * pages go, so one copy stays resident (a 7B Q4_K_M kept 600 MB of Q/K
     * file pages beside their copies) */
    if (out->data != t->data) emt_mapping_drop(t->data, t->nbytes);
    w->n_params += d0 * d1;
    if ((st = report_progress(w, t))) {
        if (out->owned) w->be->ops->release(w->be, out->owned);
        memset(out, 0, sizeof *out);
    }
    return st;
}

entmtp_status emt_weights_load_mat_as(emt_weights *w, const char *name, int64_t d0, int64_t d1, emt_dtype want,
                                      emt_wmat *out) {
    memset(out, 0, sizeof *out);
    const emt_tensor *t = emt_weights_find(w, name);
    int plain = t && (t->dtype == EMT_F32 || t->dtype == EMT_F16 || t->dtype == EMT_BF16);
    int64_t per_block = (int64_t)emt_dtype_block_elems(want);
    if (!w->native || !plain || !(w->be->ops->weight_types & (1u << want)) || d1 % per_block != 0)
        return emt_weights_load_mat(w, name, d0, d1, 0, out);
    entmtp_status st = find_checked(w, name, d0, d1, 0, &t);
    if (st) return st;
    float *host;
    if ((st = read_f32_host(w, t, name, d0 * d1, &host))) return st;
    size_t bytes = emt_dtype_nbytes(want, d0 * d1);
    uint8_t *q = emt_malloc(bytes, 1);
    uint8_t *dev = q ? w->be->ops->alloc(w->be, bytes) : NULL;
    if (!dev) st = ENTMTP_ERR_OUT_OF_MEMORY;
    if (!st) st = emt_quantize_blocks(want, host, d0 * d1, q);
    if (!st) st = w->be->ops->upload(w->be, dev, q, bytes);
    free(host);
    free(q);
    if (!st) {
        *out = (emt_wmat){ want, dev, dev };
        w->n_params += d0 * d1;
        st = report_progress(w, t);
    }
    if (st && dev) {
        w->be->ops->release(w->be, dev);
        memset(out, 0, sizeof *out);
    }
    return st;
}
