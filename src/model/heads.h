/* MTP heads (Medusa, Hydra grounded MLP) loaded onto the model's backend. */
#ifndef EMT_HEADS_H
#define EMT_HEADS_H

#include "model/model.h"

typedef struct emt_head_layer {
    int32_t n_in;           /* input width: hidden, or hidden*(i+2) for Hydra's first block */
    /* linear [hidden][n_in] and Hydra's res_connection (data NULL = identity
     * residual): re-quantized to Q8_0 at load when the model computes
     * natively and the backend takes Q8_0 (a quarter of F32's bytes, about
     * half of F16's, and a draft level's time is the bytes it reads), else
     * F32 */
    emt_wmat w, res_w;
    float *b, *res_b;       /* [hidden] */
} emt_head_layer;

typedef struct emt_head {
    int32_t n_layers;
    emt_head_layer *layers;
    float *lm_w, *lm_b;     /* own lm_head [vocab][hidden] (+bias), or NULL = the model's */
    /* with a draft vocabulary: this head's lm_head rows for those ids only
     * (NULL for heads sharing the base lm_head: they use entmtp_heads.draft_shared) */
    float *draft_w, *draft_b; /* [n_draft][hidden], [n_draft] or NULL */
} emt_head;

struct entmtp_heads {
    entmtp_model *model;
    entmtp_heads_kind kind;
    int32_t n_heads, n_layers;
    int shares_lm_head;
    emt_head *heads;
    char *path;
    /* Optional draft vocabulary (tensor "draft_vocab" in the heads file): the
     * heads rank only these token ids, so each head call reads n_draft rows
     * of the lm_head instead of all of them (FR-Spec style). Drafting only
     * proposes; verification still uses the full vocabulary, so output is
     * unchanged. NULL = the whole vocabulary. */
    int32_t n_draft;
    int32_t *draft_ids;     /* host [n_draft] */
    /* the base lm_head's rows for them, when shared, in the lm_head's type
     * (rows of blocks gathered on a host-memory backend, else F32) */
    emt_wmat draft_shared;
};

#endif
