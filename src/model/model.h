/* A loaded Llama-family model: config, weights on the backend (matrices in
 * their stored dtype where the backend takes it, else F32; norms and biases
 * F32), the tokenizer, and the RoPE frequencies. Immutable after loading. */
#ifndef EMT_MODEL_H
#define EMT_MODEL_H

#include "backend/backend.h"
#include "common/common.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "tokenizer/tokenizer.h"

typedef struct emt_model_config {
    char arch[32];
    char name[128];
    int32_t vocab, hidden, ffn, n_layers, n_heads, n_kv_heads, head_dim, n_rot, ctx;
    float rope_theta, rms_eps;
    int tied;
    int attn_bias, mlp_bias;
    /* rope scaling: 0 none, 1 linear, 2 llama3 */
    int rope_scaling;
    float rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int32_t rope_original_ctx;
    int32_t bos, eos;
} emt_model_config;

typedef struct emt_layer {
    float *attn_norm;
    emt_wmat wq, wk, wv, wo;
    float *bq, *bk, *bv, *bo; /* NULL without attention_bias */
    float *ffn_norm;
    emt_wmat w_gate, w_up, w_down;
    float *b_gate, *b_up, *b_down; /* NULL without mlp_bias */
} emt_layer;

struct entmtp_model {
    emt_model_config cfg;
    entmtp_backend backend_kind;
    emt_backend *be;
    int32_t n_threads;
    emt_wmat tok_embd; /* [vocab][hidden], device */
    float *out_norm;   /* [hidden] */
    emt_wmat lm_head;  /* [vocab][hidden]; the same data as tok_embd when tied */
    /* the model file, kept mapped while weights point into it */
    emt_gguf *gguf;
    emt_st *st;
    entmtp_compute_type compute;
    char kernels[160]; /* emt_model_kernels' text */
    emt_layer *layers;
    float *inv_freq;   /* host, n_rot/2 */
    emt_tokenizer *tokenizer; /* NULL when the file has none */
    int64_t n_params;
    char *path;
    int32_t n_eog;
    int32_t eog[EMT_MAX_STOP_TOKENS];
};

/* Bytes of weights one AR step reads (matrices as loaded, norms). */
size_t emt_model_streamed_bytes(const entmtp_model *m);
/* "cpu avx2, native weights (Q4_1 210, Q8_0 1)"-style description of what
 * runs: backend, kernel variant, and the matrices' dtypes. Static buffer
 * per model. */
const char *emt_model_kernels(entmtp_model *m);

/* Compute inv_freq for the config (with scaling). */
void emt_rope_inv_freq(const emt_model_config *c, float *inv_freq);

/* Load one 2-D or 1-D tensor as F32 onto the backend, checking its shape
 * (outermost first). Used for model and head weights. */
typedef struct emt_weight_source emt_weight_source;

#endif
