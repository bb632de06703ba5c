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

/* GGUF row h*hd + 2i + t holds HF row h*hd + t*hd/2 + i. */
static void unpermute_rows(const float *src, float *dst, int64_t rows, int64_t cols, int32_t heads) {
    int64_t hd = rows / heads;
    for (int64_t h = 0; h < heads; h++)
        for (int64_t i = 0; i < hd / 2; i++)
            for (int64_t t = 0; t < 2; t++)
                memcpy(dst + (h * hd + t * (hd / 2) + i) * cols, src + (h * hd + 2 * i + t) * cols,
                       (size_t)cols * sizeof(float));
}

entmtp_status emt_weights_load(emt_weights *w, const char *name, int64_t d0, int64_t d1,
                               int32_t unpermute_heads, int optional, float **out) {
    *out = NULL;
    const emt_tensor *t = emt_weights_find(w, name);
    if (!t) {
        if (optional) return ENTMTP_OK;
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor '%s' is missing", w->path, name);
    }
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
    int64_t numel = d0 * (d1 ? d1 : 1);
    if (unpermute_heads > 0 && (d0 % unpermute_heads != 0 || (d0 / unpermute_heads) % 2 != 0))
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor '%s': %lld rows do not split into %d heads of even size",
                        w->path, name, (long long)d0, unpermute_heads);
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
    if (unpermute_heads > 0) {
        float *tmp = emt_malloc((size_t)numel, sizeof(float));
        if (!tmp) { free(host); return ENTMTP_ERR_OUT_OF_MEMORY; }
        unpermute_rows(host, tmp, d0, d1 ? d1 : 1, unpermute_heads);
        free(host);
        host = tmp;
    }
    float *dev = w->be->ops->alloc(w->be, (size_t)numel * sizeof(float));
    if (!dev) { free(host); return ENTMTP_ERR_OUT_OF_MEMORY; }
    st = w->be->ops->upload(w->be, dev, host, (size_t)numel * sizeof(float));
    free(host);
    if (st != ENTMTP_OK) { w->be->ops->release(w->be, dev); return st; }
    w->n_params += numel;
    w->done_bytes += t->nbytes;
    if (w->progress && w->total_bytes) {
        if (w->progress((float)((double)w->done_bytes / (double)w->total_bytes), "loading weights",
                        w->progress_user)) {
            w->be->ops->release(w->be, dev);
            return emt_fail(ENTMTP_ERR_CALLBACK, "%s: loading cancelled by the progress callback",
                            w->path);
        }
    }
    *out = dev;
    return ENTMTP_OK;
}
