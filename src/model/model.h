/* A loaded decoder-only transformer: one description (config + per-layer
 * flags) that covers the Llama, Qwen2/3, Mistral, Phi-3 and Gemma 2/3
 * families, weights on the backend (matrices in their stored dtype where the
 * backend takes it, else F32; norms and biases F32), the tokenizer, and the
 * RoPE frequencies. Immutable after loading. */
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
    int attn_out_bias;  /* o_proj bias (Llama with attention_bias); Qwen2 has Q/K/V bias only */
    int qk_norm;        /* per-head RMSNorm on Q and K before RoPE (Qwen3) */
    int fused_qkv;      /* one [q+2kv][hidden] tensor (Phi-3); split into views at load */
    int fused_gate_up;  /* one [2*ffn][hidden] tensor, gate rows first (Phi-3) */
    int gguf_qk_permuted; /* GGUF Q/K rows in llama.cpp's interleaved-RoPE order (llama) */
    int32_t sliding_window; /* 0: none; else keys this many positions back are hidden (local layers) */
    /* Gemma 2/3 */
    float embed_scale;    /* 0: none; else the embeddings are multiplied by it (sqrt(hidden)) */
    float q_scale;        /* 0: none; else Q is multiplied by it on top of 1/sqrt(head_dim) */
    int post_norms;       /* RMSNorm on the attention and FFN outputs before each residual add */
    float norm_offset;    /* added to every RMSNorm weight at load: 1 for HF Gemma (x * (1 + w)) */
    int geglu;            /* FFN activation gelu_tanh(gate) * up instead of silu(gate) * up */
    float attn_softcap, final_softcap; /* 0: none; else scores / logits -> cap * tanh(x / cap) */
    int32_t local_period; /* > 0: layer l is local (sliding window) unless l % period == period - 1 */
    float rope_theta_local; /* local layers' RoPE base (no scaling); 0: same as global */
    /* rope scaling: 0 none, 1 linear, 2 llama3 (from parameters), 3 per-frequency
     * divisors read from the GGUF tensor rope_freqs.weight (llama.cpp's Llama 3) */
    int rope_scaling;
    float rope_factor, rope_low_freq_factor, rope_high_freq_factor;
    int32_t rope_original_ctx;
    int32_t bos, eos;
} emt_model_config;

typedef struct emt_layer {
    float *attn_norm;
    emt_wmat wq, wk, wv, wo;  /* views into w_qkv when fused (their owned is NULL) */
    emt_wmat w_qkv, w_gate_up; /* the fused tensors (Phi-3), else empty */
    float *q_norm, *k_norm;  /* [head_dim] with qk_norm, else NULL */
    float *post_attn_norm, *post_ffn_norm; /* [hidden] with post_norms, else NULL */
    const float *inv_freq;   /* host: the model's global or local RoPE frequencies */
    int32_t window;          /* sliding window of this layer (attention_window), 0: full attention */
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
    float *inv_freq_local; /* host, n_rot/2, for local layers with their own base; else NULL */
    emt_tokenizer *tokenizer; /* NULL when the file has none */
    uint64_t vocab_hash;      /* emt_tokenizer_vocab_hash; 0 without a tokenizer */
    double load_seconds;
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
/* Copy bandwidth of the memory the model's weights live in, read + write
 * counted, GB/s, best of several copies: on a device backend a
 * device-to-device copy on its own stream (what an AR step's bytes should be
 * divided by), on the CPU a memcpy. 0 when the buffers cannot be had. */
double emt_model_copy_bandwidth(entmtp_model *m);


/* ENTMTP_ERR_UNSUPPORTED naming the first optional backend op the model's
 * description needs and the backend lacks. */
entmtp_status emt_model_check_ops(const entmtp_model *m);

/* Compute inv_freq for the config (with scaling). `freq_divisors` (n_rot/2,
 * rope_scaling == 3) or NULL. */
void emt_rope_inv_freq(const emt_model_config *c, const float *freq_divisors, float *inv_freq);

/* Architectures this build loads, as named by GGUF general.architecture, and
 * the Hugging Face model_type values (", "-separated, for messages). */
extern const char emt_supported_gguf_archs[];
extern const char emt_supported_hf_types[];

/* One line naming the description's features ("qkv-bias qk-norm ..."), for
 * `entmtp info`; returns buf. */
const char *emt_model_describe(const entmtp_model *m, char *buf, size_t cap);

/* Load one 2-D or 1-D tensor as F32 onto the backend, checking its shape
 * (outermost first). Used for model and head weights. */
typedef struct emt_weight_source emt_weight_source;

#endif
