/* MTP heads (Medusa, Hydra grounded MLP) loaded onto the model's backend. */
#ifndef EMT_HEADS_H
#define EMT_HEADS_H

#include "model/model.h"

typedef struct emt_head_layer {
    int32_t n_in;           /* input width: hidden, or hidden*(i+2) for Hydra's first block */
    float *w, *b;           /* linear [hidden][n_in], [hidden] */
    float *res_w, *res_b;   /* Hydra first block: res_connection; NULL = identity residual */
} emt_head_layer;

typedef struct emt_head {
    int32_t n_layers;
    emt_head_layer *layers;
    float *lm_w, *lm_b;     /* own lm_head [vocab][hidden] (+bias), or NULL = the model's */
} emt_head;

struct entmtp_heads {
    entmtp_model *model;
    entmtp_heads_kind kind;
    int32_t n_heads, n_layers;
    int shares_lm_head;
    emt_head *heads;
    char *path;
};

#endif
