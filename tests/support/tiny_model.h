/* Writers of tiny random models and heads for the tests and the fuzz seed
 * corpora: the same logical Llama as GGUF (with llama.cpp's Q/K row
 * permutation and optional quantization) and as a Hugging Face directory. */
#ifndef EMT_TINY_MODEL_H
#define EMT_TINY_MODEL_H

#include "entmtp.h"
#include "io/tensor.h"

typedef struct emt_tiny_config {
    int32_t vocab, hidden, ffn, n_layers, n_heads, n_kv_heads, ctx;
    float rope_theta, rms_eps;
    int tied;
    int with_tokenizer; /* GGUF only: a byte-level gpt2 tokenizer (vocab >= 261) */
    uint64_t seed;
} emt_tiny_config;

/* vocab 64, hidden 32, ffn 48, 2 layers, 4 heads, 2 kv heads, ctx 256,
 * theta 10000, eps 1e-5, untied, no tokenizer, seed 1 */
emt_tiny_config emt_tiny_default_config(void);

/* weight_type: F32, F16, Q8_0, Q4_0 or Q4_1 for 2-D weights (norms stay F32) */
/* n floats -> the bytes of dtype `type` as a GGUF/safetensors writer
 * stores them (quantized types: llama.cpp's reference quantizers). */
void emt_tiny_encode(emt_dtype type, const float *x, int64_t n, uint8_t *out);
entmtp_status emt_tiny_write_gguf(const char *path, const emt_tiny_config *c, emt_dtype weight_type);
/* weight_type: F32, F16 or BF16; n_shards >= 1 (> 1 writes an index) */
entmtp_status emt_tiny_write_hf(const char *dir, const emt_tiny_config *c, emt_dtype weight_type,
                                int n_shards);
entmtp_status emt_tiny_write_medusa_heads(const char *path, int32_t hidden, int32_t vocab,
                                          int32_t n_heads, int32_t n_layers, int with_lm_head,
                                          uint64_t seed);
entmtp_status emt_tiny_write_hydra_heads(const char *path, int32_t hidden, int32_t vocab,
                                         int32_t n_heads, int32_t n_layers, int with_lm_head,
                                         uint64_t seed);
/* Either kind of heads, plus a "draft_vocab" tensor (I32) when n_draft > 0. */
entmtp_status emt_tiny_write_heads_draft(const char *path, entmtp_heads_kind kind, int32_t hidden, int32_t vocab,
                                         int32_t n_heads, int32_t n_layers, int with_lm_head, uint64_t seed,
                                         const int32_t *draft_ids, int32_t n_draft);
/* A random EAGLE-3 drafter directory (config.json + model.safetensors) in
 * the SafeAILab/EAGLE and SpecForge layout, for a target of hidden size
 * target_hidden (0: hidden) and vocabulary vocab, reading target layers
 * taps[] (eagle_config), with n_draft draft ids (d2t/t2d) and, with
 * own_embed, its own embed_tokens. */
typedef struct emt_tiny_eagle3 {
    int32_t hidden, target_hidden, ffn, n_heads, n_kv_heads, head_dim, vocab, n_draft, taps[3];
    float rope_theta;
    int own_embed;
    uint64_t seed;
} emt_tiny_eagle3;
entmtp_status emt_tiny_write_eagle3(const char *dir, const emt_tiny_eagle3 *e);

/* The deterministic value in [-1, 1) behind element `index` of tensor `name`
 * (HF name, row-major [out, in]); writers scale it per tensor kind. */
float emt_tiny_uniform(uint64_t seed, const char *name, int64_t index);

#endif
