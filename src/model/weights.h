/* Where weights come from: a GGUF file or a safetensors set, behind one
 * lookup, and the conversion of a tensor to F32 on the backend. */
#ifndef EMT_WEIGHTS_H
#define EMT_WEIGHTS_H

#include "backend/backend.h"
#include "io/gguf.h"
#include "io/safetensors.h"

typedef struct emt_weights {
    emt_gguf *gguf; /* exactly one of these is set */
    emt_st *st;
    const char *path;
    emt_backend *be;
    /* progress over the bytes converted so far */
    entmtp_progress_fn progress;
    void *progress_user;
    size_t total_bytes, done_bytes;
    int64_t n_params;
    /* keep matrices in their stored dtype where the backend takes it (the
     * 'native' compute type); 0 converts every weight to F32 */
    int native;
    /* kept matrices are copied to backend memory even on a host backend
     * (the file is closed after loading, so its mapping cannot be used) */
    int copy_weights;
} emt_weights;

const emt_tensor *emt_weights_find(const emt_weights *w, const char *name);

/* Loads tensor `name` as F32 onto the backend. The shape must be exactly
 * {d0} (d1 == 0) or {d0, d1} (outermost first). `unpermute_heads` > 0 undoes
 * llama.cpp's rotary row permutation for that many heads (GGUF Q/K). A
 * missing tensor is ENTMTP_ERR_FORMAT unless `optional`, then *out = NULL. */
entmtp_status emt_weights_load(emt_weights *w, const char *name, int64_t d0, int64_t d1,
                               int32_t unpermute_heads, int optional, float **out);

/* An RMSNorm weight [d0] as F32 with `offset` added to every element
 * (1 for Hugging Face Gemma, whose norms scale by 1 + w; GGUF holds 1 + w). */
entmtp_status emt_weights_load_norm(emt_weights *w, const char *name, int64_t d0, float offset, float **out);

/* Loads weight matrix `name` [d0][d1] for matmul: with w->native and a
 * dtype the backend takes, in place in the file's mapping (which must
 * outlive the model), or as a copy when rows must be un-permuted or
 * w->copy_weights is set; else
 * converted to F32 as emt_weights_load does. Every block scale is checked
 * finite either way. */
entmtp_status emt_weights_load_mat(emt_weights *w, const char *name, int64_t d0, int64_t d1,
                                   int32_t unpermute_heads, emt_wmat *out);

/* Loads weight matrix `name` [d0][d1] re-quantized to block type `want`
 * (e.g. Q8_0) in backend memory, when w->native, the backend takes `want`,
 * the file stores plain floats (F32/F16/BF16) and d1 is whole blocks; else
 * exactly as emt_weights_load_mat. For small matrices read once per draft
 * step (the heads), where bytes read are the cost. */
entmtp_status emt_weights_load_mat_as(emt_weights *w, const char *name, int64_t d0, int64_t d1, emt_dtype want,
                                      emt_wmat *out);

#endif
