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

/* An EAGLE-3 drafter (SafeAILab/EAGLE, SpecForge layout): one decoder layer
 * over [input_layernorm(embed(token)); hidden_norm(h)], where h is fc of the
 * target's hidden states at three layers (concatenated low, mid, high) for
 * the row after the context, or the layer's own output for the rows it
 * drafts after that; norm and lm_head over a draft vocabulary, whose ids map
 * to the target's by d2t (target = draft + d2t[draft]). Weights [out][in]. */
typedef struct emt_eagle3 {
    int32_t hidden, n_heads, n_kv_heads, head_dim, ffn, n_draft, target_hidden;
    float rms_eps, rope_theta;
    float *inv_freq;          /* host [head_dim / 2] */
    int32_t taps[3];          /* target layers whose outputs it reads (0-based, ascending) */
    emt_wmat fc;              /* [hidden][3 * target_hidden] */
    emt_wmat wq, wk, wv, wo;  /* q/k/v [heads * head_dim][2 * hidden], o [hidden][heads * head_dim] */
    float *hidden_norm, *input_norm, *post_norm, *norm; /* [hidden] */
    emt_wmat w_gate, w_up, w_down;
    emt_wmat lm_head;         /* [n_draft][hidden] */
    emt_wmat embed;           /* own embed_tokens [vocab][hidden], or data NULL: the target's */
    int32_t *d2t_ids;         /* host [n_draft]: the target token of each draft id */
} emt_eagle3;

/* Loads an EAGLE-3 drafter from `path` (a directory with config.json and
 * model.safetensors, or a safetensors file, with config.json beside it or
 * the attention shape taken from the target) into h->eagle3, every shape
 * checked against h->model. */
entmtp_status emt_eagle3_load(entmtp_heads *h, const char *path);
void emt_eagle3_free(entmtp_heads *h);
/* 1 when the safetensors file holds EAGLE-3 tensors (fc.weight, midlayer.*) */
int emt_eagle3_detect(const emt_st *st);

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
    emt_eagle3 *eagle3;     /* kind ENTMTP_HEADS_EAGLE3: the drafter (heads is NULL) */
};

/* The drafting depth an EAGLE-3 drafter offers (it drafts autoregressively:
 * any depth; this bounds trees and the chain the policies see) */
#define EMT_EAGLE3_MAX_DEPTH 8

#endif
