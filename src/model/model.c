/* entmtp_model_*: load a Llama-family model from GGUF or a Hugging Face
 * safetensors directory into F32 weights on the chosen backend. */
#include "model/model.h"
#include "backend/cpu/cpu_variants.h"
#include "model/weights.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

static const entmtp_model_params g_model_defaults = {
    .struct_size = sizeof g_model_defaults, .backend = ENTMTP_BACKEND_AUTO, .n_threads = 0, .device = 0,
    .compute_type = ENTMTP_COMPUTE_NATIVE,
};

ENTMTP_API entmtp_status entmtp_model_params_init(entmtp_model_params *params, size_t size) {
    return emt_init_versioned(params, size, &g_model_defaults, sizeof g_model_defaults, "entmtp_model_params");
}

const char emt_supported_gguf_archs[] = "llama, qwen2, qwen3, phi3, gemma2, gemma3";
const char emt_supported_hf_types[] = "llama, mistral, qwen2, qwen3, phi3, gemma2, gemma3_text";

void emt_rope_inv_freq(const emt_model_config *c, const float *freq_divisors, float *inv_freq) {
    int32_t half = c->n_rot / 2;
    for (int32_t i = 0; i < half; i++) {
        double f = 1.0 / pow((double)c->rope_theta, (double)(2 * i) / (double)c->n_rot);
        if (c->rope_scaling == 3 && freq_divisors) {
            f /= freq_divisors[i];
        } else if (c->rope_scaling == 1) {
            f /= c->rope_factor;
        } else if (c->rope_scaling == 2) { /* Llama 3.1 frequency-dependent scaling */
            double low_wavelen = c->rope_original_ctx / c->rope_low_freq_factor;
            double high_wavelen = c->rope_original_ctx / c->rope_high_freq_factor;
            double wavelen = 2.0 * M_PI / f;
            if (wavelen > low_wavelen) {
                f /= c->rope_factor;
            } else if (wavelen >= high_wavelen) {
                double smooth = (c->rope_original_ctx / wavelen - c->rope_low_freq_factor) /
                                (c->rope_high_freq_factor - c->rope_low_freq_factor);
                f = (1.0 - smooth) * f / c->rope_factor + smooth * f;
            }
        }
        inv_freq[i] = (float)f;
    }
}

/* ------------------------------------------------------------ config: GGUF */

static entmtp_status gguf_i32(const emt_gguf *g, const char *key, int required, int32_t dflt,
                              int32_t *out) {
    int64_t v;
    entmtp_status st = emt_gguf_get_i64(g, key, &v);
    if (st == ENTMTP_ERR_NOT_FOUND && !required) { *out = dflt; return ENTMTP_OK; }
    if (st == ENTMTP_ERR_NOT_FOUND)
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: required key '%s' is missing", emt_gguf_path(g), key);
    if (st != ENTMTP_OK) return st;
    if (v < 0 || v > INT32_MAX)
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: key '%s' = %lld is out of range", emt_gguf_path(g),
                        key, (long long)v);
    *out = (int32_t)v;
    return ENTMTP_OK;
}

static entmtp_status gguf_f32(const emt_gguf *g, const char *key, int required, float dflt,
                              float *out) {
    entmtp_status st = emt_gguf_get_f32(g, key, out);
    if (st == ENTMTP_ERR_NOT_FOUND && !required) { *out = dflt; return ENTMTP_OK; }
    if (st == ENTMTP_ERR_NOT_FOUND)
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: required key '%s' is missing", emt_gguf_path(g), key);
    if (st != ENTMTP_OK) return st;
    if (!isfinite(*out))
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: key '%s' is not a finite number", emt_gguf_path(g), key);
    return ENTMTP_OK;
}

/* What each GGUF architecture adds to the Llama layout. */
typedef struct gguf_arch {
    const char *name;
    int gguf_qk_permuted, qk_norm, fused, gemma;
    int32_t local_period;       /* Gemma: every period-th layer is global */
    int32_t layers_27b;         /* Gemma: the 27B model's layer count (its own query scale) */
} gguf_arch;

static const gguf_arch gguf_archs[] = {
    { "llama", 1, 0, 0, 0, 0, 0 }, /* also Mistral: llama.cpp converts it to 'llama' */
    { "qwen2", 0, 0, 0, 0, 0, 0 },
    { "qwen3", 0, 1, 0, 0, 0, 0 },
    { "phi3", 0, 0, 1, 0, 0, 0 },
    { "gemma2", 0, 0, 0, 2, 2, 46 },
    { "gemma3", 0, 1, 0, 3, 6, 62 },
};

/* Gemma's additions, in llama.cpp's reading of its GGUF keys: embeddings
 * times sqrt(hidden), GeGLU, post-norms, soft-capping (Gemma 2), local
 * layers with RoPE base 10000 (Gemma 3), the 27B models' query scale
 * 1/sqrt(hidden/heads) (GGUF norms already hold 1 + w). */
static entmtp_status gemma_config(const emt_gguf *g, const gguf_arch *a, emt_model_config *c) {
    char k[96];
    entmtp_status st;
    c->embed_scale = sqrtf((float)c->hidden);
    c->post_norms = c->geglu = 1;
    c->local_period = a->local_period;
    if (a->gemma == 2) {
        snprintf(k, sizeof k, "%s.attn_logit_softcapping", c->arch);
        if ((st = gguf_f32(g, k, 0, 0.0f, &c->attn_softcap))) return st;
        snprintf(k, sizeof k, "%s.final_logit_softcapping", c->arch);
        if ((st = gguf_f32(g, k, 0, 0.0f, &c->final_softcap))) return st;
    } else {
        c->rope_theta_local = 10000.0f;
    }
    if (c->n_layers == a->layers_27b)
        c->q_scale = sqrtf((float)c->head_dim) / sqrtf((float)c->hidden / (float)c->n_heads);
    if (c->attn_softcap < 0 || c->final_softcap < 0)
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: negative logit soft-capping", emt_gguf_path(g));
    return ENTMTP_OK;
}

/* "<arch>.<suffix>", the per-architecture GGUF key. */
static const char *akey(const emt_model_config *c, const char *suffix, char *buf, size_t cap) {
    snprintf(buf, cap, "%s.%s", c->arch, suffix);
    return buf;
}

/* Tensor names this loader does not read but that would change the model. */
static entmtp_status reject_unknown_gguf_tensors(const emt_gguf *g, int post_norms) {
    static const char *unsupported[] = { "rope_factors_long.weight", "rope_factors_short.weight",
                                         "blk.0.attn_sinks.weight", "blk.0.ffn_gate_inp.weight",
                                         "blk.0.post_attention_norm.weight" };
    size_t n = sizeof unsupported / sizeof unsupported[0] - (post_norms ? 1 : 0);
    for (size_t i = 0; i < n; i++)
        if (emt_gguf_find_tensor(g, unsupported[i]))
            return emt_fail(ENTMTP_ERR_UNSUPPORTED, "%s: tensor '%s' is not supported by this loader",
                            emt_gguf_path(g), unsupported[i]);
    return ENTMTP_OK;
}

static entmtp_status config_from_gguf(const emt_gguf *g, emt_model_config *c) {
    const char *s;
    size_t len;
    char k[96];
    entmtp_status st = emt_gguf_get_str(g, "general.architecture", &s, &len);
    if (st != ENTMTP_OK)
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: key 'general.architecture' missing or not a string",
                        emt_gguf_path(g));
    if (len >= sizeof c->arch) len = sizeof c->arch - 1;
    memcpy(c->arch, s, len);
    c->arch[len] = '\0';
    const gguf_arch *a = NULL;
    for (size_t i = 0; i < sizeof gguf_archs / sizeof gguf_archs[0]; i++)
        if (!strcmp(c->arch, gguf_archs[i].name)) a = &gguf_archs[i];
    if (!a)
        return emt_fail(ENTMTP_ERR_UNSUPPORTED, "%s: architecture '%s' is not supported (supported: %s)",
                        emt_gguf_path(g), c->arch, emt_supported_gguf_archs);
    c->gguf_qk_permuted = a->gguf_qk_permuted;
    c->qk_norm = a->qk_norm;
    c->fused_qkv = c->fused_gate_up = a->fused;
    if ((st = reject_unknown_gguf_tensors(g, a->gemma != 0))) return st;
    if (emt_gguf_get_str(g, "general.name", &s, &len) == ENTMTP_OK) {
        if (len >= sizeof c->name) len = sizeof c->name - 1;
        memcpy(c->name, s, len);
        c->name[len] = '\0';
    }
    if ((st = gguf_i32(g, akey(c, "embedding_length", k, sizeof k), 1, 0, &c->hidden)) ||
        (st = gguf_i32(g, akey(c, "block_count", k, sizeof k), 1, 0, &c->n_layers)) ||
        (st = gguf_i32(g, akey(c, "feed_forward_length", k, sizeof k), 1, 0, &c->ffn)) ||
        (st = gguf_i32(g, akey(c, "attention.head_count", k, sizeof k), 1, 0, &c->n_heads)) ||
        (st = gguf_i32(g, akey(c, "context_length", k, sizeof k), 1, 0, &c->ctx)))
        return st;
    if ((st = gguf_i32(g, akey(c, "attention.head_count_kv", k, sizeof k), 0, c->n_heads, &c->n_kv_heads)))
        return st;
    if (c->n_heads <= 0)
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: %s is 0", emt_gguf_path(g),
                        akey(c, "attention.head_count", k, sizeof k));
    if ((st = gguf_i32(g, akey(c, "attention.key_length", k, sizeof k), 0, c->hidden / c->n_heads,
                       &c->head_dim)))
        return st;
    int32_t v_len = 0; /* set by gguf_i32 on success; -O3 cannot see it */
    if ((st = gguf_i32(g, akey(c, "attention.value_length", k, sizeof k), 0, c->head_dim, &v_len)))
        return st;
    if (v_len != c->head_dim)
        return emt_fail(ENTMTP_ERR_UNSUPPORTED, "%s: %s = %d differs from the key length %d",
                        emt_gguf_path(g), k, v_len, c->head_dim);
    if ((st = gguf_i32(g, akey(c, "rope.dimension_count", k, sizeof k), 0, c->head_dim, &c->n_rot))) return st;
    if ((st = gguf_f32(g, akey(c, "rope.freq_base", k, sizeof k), 0, 10000.0f, &c->rope_theta))) return st;
    if ((st = gguf_f32(g, akey(c, "attention.layer_norm_rms_epsilon", k, sizeof k), 1, 0, &c->rms_eps)))
        return st;
    if ((st = gguf_i32(g, akey(c, "attention.sliding_window", k, sizeof k), 0, 0, &c->sliding_window)))
        return st;
    int32_t vocab = 0;
    if ((st = gguf_i32(g, akey(c, "vocab_size", k, sizeof k), 0, 0, &vocab))) return st;
    if (vocab == 0) {
        emt_gguf_type et;
        int64_t n;
        if (emt_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n) == ENTMTP_OK && n <= INT32_MAX)
            vocab = (int32_t)n;
        const emt_tensor *te = emt_gguf_find_tensor(g, "token_embd.weight");
        if (te && te->n_dims == 2 && te->shape[0] <= INT32_MAX) vocab = (int32_t)te->shape[0];
    }
    c->vocab = vocab;
    if (emt_gguf_get_str(g, akey(c, "rope.scaling.type", k, sizeof k), &s, &len) == ENTMTP_OK) {
        if (len == 6 && !memcmp(s, "linear", 6)) {
            c->rope_scaling = 1;
            if ((st = gguf_f32(g, akey(c, "rope.scaling.factor", k, sizeof k), 1, 1.0f, &c->rope_factor)))
                return st;
        } else if (!(len == 4 && !memcmp(s, "none", 4))) {
            return emt_fail(ENTMTP_ERR_UNSUPPORTED, "%s: %s = '%.*s' is not supported (supported: none, linear)",
                            emt_gguf_path(g), k, (int)len, s);
        }
    }
    if (emt_gguf_find_tensor(g, "rope_freqs.weight")) {
        if (c->rope_scaling)
            return emt_fail(ENTMTP_ERR_UNSUPPORTED, "%s: tensor 'rope_freqs.weight' together with %s",
                            emt_gguf_path(g), akey(c, "rope.scaling.type", k, sizeof k));
        c->rope_scaling = 3;
    }
    c->tied = emt_gguf_find_tensor(g, "output.weight") == NULL;
    c->attn_bias = emt_gguf_find_tensor(g, "blk.0.attn_q.bias") != NULL ||
                   emt_gguf_find_tensor(g, "blk.0.attn_qkv.bias") != NULL;
    c->attn_out_bias = emt_gguf_find_tensor(g, "blk.0.attn_output.bias") != NULL;
    c->mlp_bias = emt_gguf_find_tensor(g, "blk.0.ffn_up.bias") != NULL;
    int32_t v;
    c->bos = gguf_i32(g, "tokenizer.ggml.bos_token_id", 0, -1, &v) == ENTMTP_OK ? v : -1;
    c->eos = gguf_i32(g, "tokenizer.ggml.eos_token_id", 0, -1, &v) == ENTMTP_OK ? v : -1;
    entmtp_clear_error();
    return a->gemma ? gemma_config(g, a, c) : ENTMTP_OK;
}

/* -------------------------------------------------------- config: HF json */

static entmtp_status json_int(const cJSON *root, const char *file, const char *key, int required,
                              int32_t dflt, int32_t *out) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!it || cJSON_IsNull(it)) {
        if (required) return emt_fail(ENTMTP_ERR_FORMAT, "%s: required field '%s' is missing", file, key);
        *out = dflt;
        return ENTMTP_OK;
    }
    double d = it->valuedouble;
    if (!cJSON_IsNumber(it) || d != floor(d) || d < 0 || d > INT32_MAX)
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: field '%s' must be a non-negative integer", file, key);
    *out = (int32_t)d;
    return ENTMTP_OK;
}

static entmtp_status json_float(const cJSON *root, const char *file, const char *key, float dflt,
                                float *out) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!it || cJSON_IsNull(it)) { *out = dflt; return ENTMTP_OK; }
    if (!cJSON_IsNumber(it) || !isfinite((float)it->valuedouble))
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: field '%s' must be a finite number within float range", file, key);
    *out = (float)it->valuedouble;
    return ENTMTP_OK;
}

/* Gemma 2 / Gemma 3 text from config.json, the same description as their
 * GGUF (gemma_config): norms scale by 1 + w (loaded with 1 added), the
 * query scale from query_pre_attn_scalar, local layers from
 * sliding_window_pattern or layer_types. */
static entmtp_status gemma_config_hf(const cJSON *root, const char *path, int gemma, emt_model_config *c) {
    entmtp_status st;
    const cJSON *act = cJSON_GetObjectItemCaseSensitive(root, "hidden_activation");
    if (!cJSON_IsString(act)) act = cJSON_GetObjectItemCaseSensitive(root, "hidden_act");
    if (cJSON_IsString(act) && strcmp(act->valuestring, "gelu_pytorch_tanh") != 0)
        return emt_fail(ENTMTP_ERR_UNSUPPORTED, "%s: hidden_activation '%s' is not supported (gelu_pytorch_tanh)",
                        path, act->valuestring);
    c->embed_scale = sqrtf((float)c->hidden);
    c->post_norms = c->geglu = 1;
    c->norm_offset = 1.0f;
    if (!cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings")) c->tied = 1; /* Gemma's default */
    if ((st = json_float(root, path, "attn_logit_softcapping", 0.0f, &c->attn_softcap)) ||
        (st = json_float(root, path, "final_logit_softcapping", 0.0f, &c->final_softcap)))
        return st;
    if (c->attn_softcap < 0 || c->final_softcap < 0)
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: negative logit soft-capping", path);
    int32_t qpas = 0;
    if ((st = json_int(root, path, "query_pre_attn_scalar", 0, c->head_dim, &qpas))) return st;
    if (qpas <= 0) return emt_fail(ENTMTP_ERR_FORMAT, "%s: query_pre_attn_scalar is 0", path);
    if (qpas != c->head_dim) c->q_scale = sqrtf((float)c->head_dim) / sqrtf((float)qpas);
    c->local_period = 2;
    if (gemma == 3) {
        if ((st = json_int(root, path, "sliding_window_pattern", 0, 6, &c->local_period)) ||
            (st = json_float(root, path, "rope_local_base_freq", 10000.0f, &c->rope_theta_local)))
            return st;
        if (c->local_period < 1)
            return emt_fail(ENTMTP_ERR_FORMAT, "%s: sliding_window_pattern is 0", path);
    }
    /* layer_types (newer configs) must be the pattern: every period-th layer global */
    const cJSON *lt = cJSON_GetObjectItemCaseSensitive(root, "layer_types");
    if (lt && !cJSON_IsNull(lt)) {
        if (!cJSON_IsArray(lt) || cJSON_GetArraySize(lt) != c->n_layers)
            return emt_fail(ENTMTP_ERR_FORMAT, "%s: layer_types is not a list of %d layer types", path, c->n_layers);
        for (int32_t l = 0; l < c->n_layers; l++) {
            const cJSON *t = cJSON_GetArrayItem(lt, l);
            int local = l % c->local_period != c->local_period - 1;
            if (!cJSON_IsString(t) || strcmp(t->valuestring, local ? "sliding_attention" : "full_attention") != 0)
                return emt_fail(ENTMTP_ERR_UNSUPPORTED, "%s: layer_types[%d] is not '%s': only one global layer "
                                "in every %d is supported", path, l, local ? "sliding_attention" : "full_attention",
                                c->local_period);
        }
    }
    return ENTMTP_OK;
}

static entmtp_status config_from_hf(const char *dir, emt_model_config *c) {
    char path[4096];
    snprintf(path, sizeof path, "%s/config.json", dir);
    char *text;
    entmtp_status st = emt_read_file(path, &text, NULL);
    if (st != ENTMTP_OK) return st;
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: not a JSON object", path);
    }
    const cJSON *mt = cJSON_GetObjectItemCaseSensitive(root, "model_type");
    const char *model_type = cJSON_IsString(mt) ? mt->valuestring : "";
    int llama_like = !strcmp(model_type, "llama") || !strcmp(model_type, "mistral");
    int qwen = !strcmp(model_type, "qwen2") || !strcmp(model_type, "qwen3");
    int phi3 = !strcmp(model_type, "phi3");
    int gemma = !strcmp(model_type, "gemma2") ? 2 : !strcmp(model_type, "gemma3_text") ? 3 : 0;
    if (!strcmp(model_type, "gemma3")) {
        st = emt_fail(ENTMTP_ERR_UNSUPPORTED, "%s: model_type 'gemma3' is the multimodal checkpoint (text_config, "
                      "language_model.* tensors), not supported; its text model alone is 'gemma3_text'", path);
        goto done;
    }
    if (!llama_like && !qwen && !phi3 && !gemma) {
        st = emt_fail(ENTMTP_ERR_UNSUPPORTED, "%s: model_type '%s' is not supported (supported: %s)", path,
                      model_type, emt_supported_hf_types);
        goto done;
    }
    snprintf(c->arch, sizeof c->arch, "%s", gemma == 3 ? "gemma3" : model_type);
    c->qk_norm = !strcmp(model_type, "qwen3") || gemma == 3;
    c->fused_qkv = c->fused_gate_up = phi3;
    if (phi3) {
        float partial = 1.0f;
        if ((st = json_float(root, path, "partial_rotary_factor", 1.0f, &partial))) goto done;
        if (partial != 1.0f) {
            st = emt_fail(ENTMTP_ERR_UNSUPPORTED, "%s: partial_rotary_factor = %g is not supported", path,
                          (double)partial);
            goto done;
        }
    }
    const char *base = strrchr(dir, '/');
    snprintf(c->name, sizeof c->name, "%s", base && base[1] ? base + 1 : dir);
    if ((st = json_int(root, path, "hidden_size", 1, 0, &c->hidden)) ||
        (st = json_int(root, path, "intermediate_size", 1, 0, &c->ffn)) ||
        (st = json_int(root, path, "num_hidden_layers", 1, 0, &c->n_layers)) ||
        (st = json_int(root, path, "num_attention_heads", 1, 0, &c->n_heads)) ||
        (st = json_int(root, path, "vocab_size", 1, 0, &c->vocab)) ||
        (st = json_int(root, path, "max_position_embeddings", 0, 2048, &c->ctx)))
        goto done;
    if ((st = json_int(root, path, "num_key_value_heads", 0, c->n_heads, &c->n_kv_heads))) goto done;
    if (c->n_heads == 0) { st = emt_fail(ENTMTP_ERR_FORMAT, "%s: num_attention_heads is 0", path); goto done; }
    if ((st = json_int(root, path, "head_dim", 0, c->hidden / c->n_heads, &c->head_dim))) goto done;
    c->n_rot = c->head_dim;
    if ((st = json_float(root, path, "rope_theta", 10000.0f, &c->rope_theta)) ||
        (st = json_float(root, path, "rms_norm_eps", 1e-6f, &c->rms_eps)))
        goto done;
    const cJSON *tie = cJSON_GetObjectItemCaseSensitive(root, "tie_word_embeddings");
    c->tied = cJSON_IsTrue(tie);
    /* Qwen2 always has Q/K/V biases (no o_proj bias); Llama's attention_bias
     * covers all four projections */
    c->attn_bias = !strcmp(model_type, "qwen2") ||
                   cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "attention_bias"));
    c->attn_out_bias = llama_like && c->attn_bias;
    c->mlp_bias = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "mlp_bias"));
    const cJSON *sw = cJSON_GetObjectItemCaseSensitive(root, "sliding_window");
    int sw_used = !qwen || cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(root, "use_sliding_window"));
    if (sw_used && cJSON_IsNumber(sw) && sw->valuedouble >= 1 && sw->valuedouble <= INT32_MAX)
        c->sliding_window = (int32_t)sw->valuedouble;
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    if (rs && !cJSON_IsNull(rs)) {
        const cJSON *ty = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
        if (!cJSON_IsString(ty)) ty = cJSON_GetObjectItemCaseSensitive(rs, "type");
        const char *type = cJSON_IsString(ty) ? ty->valuestring : "";
        if ((st = json_float(rs, path, "factor", 1.0f, &c->rope_factor))) goto done;
        if (!strcmp(type, "linear")) {
            c->rope_scaling = 1;
        } else if (!strcmp(type, "llama3")) {
            c->rope_scaling = 2;
            if ((st = json_float(rs, path, "low_freq_factor", 1.0f, &c->rope_low_freq_factor)) ||
                (st = json_float(rs, path, "high_freq_factor", 4.0f, &c->rope_high_freq_factor)) ||
                (st = json_int(rs, path, "original_max_position_embeddings", 0, 8192,
                               &c->rope_original_ctx)))
                goto done;
            if (!(c->rope_high_freq_factor > c->rope_low_freq_factor)) {
                st = emt_fail(ENTMTP_ERR_FORMAT, "%s: rope_scaling.high_freq_factor must exceed low_freq_factor", path);
                goto done;
            }
        } else if (strcmp(type, "default") != 0) {
            st = emt_fail(ENTMTP_ERR_UNSUPPORTED, "%s: rope_scaling type '%s' is not supported", path, type);
            goto done;
        }
        if (c->rope_scaling && !(c->rope_factor > 0)) {
            st = emt_fail(ENTMTP_ERR_FORMAT, "%s: rope_scaling.factor must be positive", path);
            goto done;
        }
    }
    if (gemma && (st = gemma_config_hf(root, path, gemma, c))) goto done;
    int32_t v;
    c->bos = json_int(root, path, "bos_token_id", 0, -1, &v) == ENTMTP_OK ? v : -1;
    const cJSON *eos = cJSON_GetObjectItemCaseSensitive(root, "eos_token_id");
    if (cJSON_IsArray(eos)) eos = cJSON_GetArrayItem(eos, 0);
    c->eos = cJSON_IsNumber(eos) ? (int32_t)eos->valuedouble : -1;
    st = ENTMTP_OK;
done:
    cJSON_Delete(root);
    return st;
}

static entmtp_status validate_config(const char *path, const emt_model_config *c) {
#define REQ(cond, ...) if (!(cond)) return emt_fail(ENTMTP_ERR_FORMAT, __VA_ARGS__)
    REQ(c->hidden > 0 && c->hidden <= 65536, "%s: hidden size %d out of range", path, c->hidden);
    REQ(c->ffn > 0 && c->ffn <= 1 << 20, "%s: feed-forward size %d out of range", path, c->ffn);
    REQ(c->n_layers > 0 && c->n_layers <= 1024, "%s: layer count %d out of range", path, c->n_layers);
    REQ(c->vocab > 0 && c->vocab <= 1 << 24, "%s: vocabulary size %d out of range", path, c->vocab);
    REQ(c->n_heads > 0 && c->n_kv_heads > 0 && c->n_heads % c->n_kv_heads == 0,
        "%s: %d attention heads do not group over %d KV heads", path, c->n_heads, c->n_kv_heads);
    REQ(c->head_dim > 0 && c->head_dim <= 512 && c->head_dim % 2 == 0,
        "%s: head dimension %d unsupported (even, <= 512)", path, c->head_dim);
    REQ(c->n_rot > 0 && c->n_rot <= c->head_dim && c->n_rot % 2 == 0,
        "%s: rope dimension %d out of range", path, c->n_rot);
    REQ(c->ctx > 0, "%s: context length %d out of range", path, c->ctx);
    REQ(c->sliding_window >= 0, "%s: sliding window %d out of range", path, c->sliding_window);
    REQ(c->rope_theta > 0 && isfinite(c->rope_theta), "%s: rope theta %g invalid", path, (double)c->rope_theta);
    REQ(c->rms_eps > 0 && isfinite(c->rms_eps), "%s: rms eps %g invalid", path, (double)c->rms_eps);
#undef REQ
    return ENTMTP_OK;
}

/* ---------------------------------------------------------------- weights */

/* Points wq/wk/wv (w_gate/w_up) at the row blocks of the fused tensors:
 * views in the same dtype and layout that own nothing. A packed tensor's
 * views start at whole row groups (EMT_PACK_ROWS), or the load fails. */
static entmtp_status split_fused(const emt_model_config *c, emt_layer *L, const char *path) {
    size_t row, q_rows = (size_t)c->n_heads * c->head_dim, kv_rows = (size_t)c->n_kv_heads * c->head_dim;
    const uint8_t *qkv = L->w_qkv.data, *gate_up = L->w_gate_up.data;
    if ((L->w_qkv.packed && (q_rows % (size_t)L->w_qkv.packed || kv_rows % (size_t)L->w_qkv.packed)) ||
        (L->w_gate_up.packed && c->ffn % L->w_gate_up.packed))
        return emt_fail(ENTMTP_ERR_UNSUPPORTED, "%s: a fused projection's parts do not start at whole packed row groups",
                        path);
    if (qkv) {
        row = emt_dtype_nbytes(L->w_qkv.dtype, c->hidden);
        L->wq = (emt_wmat){ L->w_qkv.dtype, qkv, NULL, L->w_qkv.packed };
        L->wk = (emt_wmat){ L->w_qkv.dtype, qkv + q_rows * row, NULL, L->w_qkv.packed };
        L->wv = (emt_wmat){ L->w_qkv.dtype, qkv + (q_rows + kv_rows) * row, NULL, L->w_qkv.packed };
    }
    if (gate_up) {
        row = emt_dtype_nbytes(L->w_gate_up.dtype, c->hidden);
        L->w_gate = (emt_wmat){ L->w_gate_up.dtype, gate_up, NULL, L->w_gate_up.packed };
        L->w_up = (emt_wmat){ L->w_gate_up.dtype, gate_up + (size_t)c->ffn * row, NULL, L->w_gate_up.packed };
    }
    return ENTMTP_OK;
}

static entmtp_status load_layers(entmtp_model *m, emt_weights *w) {
    const emt_model_config *c = &m->cfg;
    int gguf = w->gguf != NULL;
    int64_t q_rows = (int64_t)c->n_heads * c->head_dim, kv_rows = (int64_t)c->n_kv_heads * c->head_dim;
    int32_t q_perm = gguf && c->gguf_qk_permuted ? c->n_heads : 0;
    int32_t k_perm = gguf && c->gguf_qk_permuted ? c->n_kv_heads : 0;
    entmtp_status st;
    char name[256];
#define NAME(gname, hname)                                                                      \
    (gguf ? snprintf(name, sizeof name, "blk.%d." gname, l)                                    \
          : snprintf(name, sizeof name, "model.layers.%d." hname, l))
#define LOAD(field, gname, hname, d0, d1, perm, opt)                                            \
    do {                                                                                        \
        NAME(gname, hname);                                                                     \
        if ((st = emt_weights_load(w, name, d0, d1, perm, opt, &L->field))) return st;          \
    } while (0)
#define LOAD_NORM(field, gname, hname, d0)                                                      \
    do {                                                                                        \
        NAME(gname, hname);                                                                     \
        if ((st = emt_weights_load_norm(w, name, d0, c->norm_offset, &L->field))) return st;    \
    } while (0)
#define LOAD_MAT(field, gname, hname, d0, d1, perm)                                             \
    do {                                                                                        \
        NAME(gname, hname);                                                                     \
        if ((st = emt_weights_load_mat(w, name, d0, d1, perm, &L->field))) return st;           \
    } while (0)
    for (int32_t l = 0; l < c->n_layers; l++) {
        emt_layer *L = &m->layers[l];
        LOAD_NORM(attn_norm, "attn_norm.weight", "input_layernorm.weight", c->hidden);
        if (c->fused_qkv) {
            LOAD_MAT(w_qkv, "attn_qkv.weight", "self_attn.qkv_proj.weight", q_rows + 2 * kv_rows, c->hidden, 0);
        } else {
            LOAD_MAT(wq, "attn_q.weight", "self_attn.q_proj.weight", q_rows, c->hidden, q_perm);
            LOAD_MAT(wk, "attn_k.weight", "self_attn.k_proj.weight", kv_rows, c->hidden, k_perm);
            LOAD_MAT(wv, "attn_v.weight", "self_attn.v_proj.weight", kv_rows, c->hidden, 0);
        }
        LOAD_MAT(wo, "attn_output.weight", "self_attn.o_proj.weight", c->hidden, q_rows, 0);
        if (c->qk_norm) {
            LOAD_NORM(q_norm, "attn_q_norm.weight", "self_attn.q_norm.weight", c->head_dim);
            LOAD_NORM(k_norm, "attn_k_norm.weight", "self_attn.k_norm.weight", c->head_dim);
        }
        if (c->post_norms) { /* Gemma; in HF names post_attention_layernorm is this post-norm */
            LOAD_NORM(post_attn_norm, "post_attention_norm.weight", "post_attention_layernorm.weight", c->hidden);
            LOAD_NORM(post_ffn_norm, "post_ffw_norm.weight", "post_feedforward_layernorm.weight", c->hidden);
        }
        int local = c->local_period && l % c->local_period != c->local_period - 1;
        L->inv_freq = local && m->inv_freq_local ? m->inv_freq_local : m->inv_freq;
        /* a window as long as the context hides nothing: full attention */
        L->window = c->sliding_window > 0 && c->sliding_window < c->ctx && (local || !c->local_period)
                        ? c->sliding_window
                        : 0;
        if (c->post_norms && !gguf) /* HF Gemma: the pre-FFN norm */
            LOAD_NORM(ffn_norm, "ffn_norm.weight", "pre_feedforward_layernorm.weight", c->hidden);
        else
            LOAD_NORM(ffn_norm, "ffn_norm.weight", "post_attention_layernorm.weight", c->hidden);
        if (c->fused_gate_up) {
            LOAD_MAT(w_gate_up, "ffn_up.weight", "mlp.gate_up_proj.weight", 2 * (int64_t)c->ffn, c->hidden, 0);
        } else {
            LOAD_MAT(w_gate, "ffn_gate.weight", "mlp.gate_proj.weight", c->ffn, c->hidden, 0);
            LOAD_MAT(w_up, "ffn_up.weight", "mlp.up_proj.weight", c->ffn, c->hidden, 0);
        }
        LOAD_MAT(w_down, "ffn_down.weight", "mlp.down_proj.weight", c->hidden, c->ffn, 0);
        if ((st = split_fused(c, L, w->path))) return st;
        if (c->attn_bias && c->fused_qkv) {
            return emt_fail(ENTMTP_ERR_UNSUPPORTED, "%s: biases on a fused QKV projection are not supported",
                            w->path);
        } else if (c->attn_bias) {
            LOAD(bq, "attn_q.bias", "self_attn.q_proj.bias", q_rows, 0, q_perm, 0);
            LOAD(bk, "attn_k.bias", "self_attn.k_proj.bias", kv_rows, 0, k_perm, 0);
            LOAD(bv, "attn_v.bias", "self_attn.v_proj.bias", kv_rows, 0, 0, 0);
        }
        if (c->attn_out_bias) LOAD(bo, "attn_output.bias", "self_attn.o_proj.bias", c->hidden, 0, 0, 0);
        if (c->mlp_bias && c->fused_gate_up) {
            return emt_fail(ENTMTP_ERR_UNSUPPORTED, "%s: biases on a fused gate/up projection are not supported",
                            w->path);
        } else if (c->mlp_bias) {
            LOAD(b_gate, "ffn_gate.bias", "mlp.gate_proj.bias", c->ffn, 0, 0, 0);
            LOAD(b_up, "ffn_up.bias", "mlp.up_proj.bias", c->ffn, 0, 0, 0);
            LOAD(b_down, "ffn_down.bias", "mlp.down_proj.bias", c->hidden, 0, 0, 0);
        }
    }
#undef LOAD
#undef LOAD_NORM
#undef LOAD_MAT
#undef NAME
    return ENTMTP_OK;
}

static void release(entmtp_model *m, float *p) {
    if (p) m->be->ops->release(m->be, p);
}

static void release_mat(entmtp_model *m, emt_wmat *w) {
    if (w->owned) m->be->ops->release(m->be, w->owned);
    memset(w, 0, sizeof *w);
}

ENTMTP_API void entmtp_model_free(entmtp_model *m) {
    if (!m) return;
    if (m->be) {
        if (m->layers) {
            for (int32_t l = 0; l < m->cfg.n_layers; l++) {
                emt_layer *L = &m->layers[l];
                float *ps[] = { L->attn_norm, L->bq, L->bk, L->bv, L->bo, L->q_norm, L->k_norm,
                                L->post_attn_norm, L->post_ffn_norm, L->ffn_norm, L->b_gate, L->b_up,
                                L->b_down };
                for (size_t i = 0; i < sizeof ps / sizeof ps[0]; i++) release(m, ps[i]);
                /* fused views own nothing: released through w_qkv / w_gate_up */
                emt_wmat *ws[] = { &L->wq, &L->wk, &L->wv, &L->w_qkv, &L->wo, &L->w_gate, &L->w_up,
                                   &L->w_gate_up, &L->w_down };
                for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) release_mat(m, ws[i]);
            }
        }
        if (m->lm_head.data != m->tok_embd.data) release_mat(m, &m->lm_head);
        release_mat(m, &m->tok_embd);
        release(m, m->out_norm);
        m->be->ops->destroy(m->be);
    }
    free(m->layers);
    free(m->inv_freq);
    free(m->inv_freq_local);
    emt_gguf_close(m->gguf); /* after the weights that point into it */
    emt_st_close(m->st);
    emt_tokenizer_free(m->tokenizer);
    free(m->path);
    free(m);
}

/* inv_freq for the config; with rope_scaling == 3, divided by the GGUF
 * tensor rope_freqs.weight (one divisor per frequency). */
static entmtp_status rope_frequencies(const emt_weights *w, const emt_model_config *c, float *inv_freq) {
    if (c->rope_scaling != 3) {
        emt_rope_inv_freq(c, NULL, inv_freq);
        return ENTMTP_OK;
    }
    const emt_tensor *t = emt_weights_find(w, "rope_freqs.weight");
    int32_t half = c->n_rot / 2;
    if (!t || t->n_dims != 1 || t->shape[0] != half)
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor 'rope_freqs.weight' must have shape [%d] (rope dimension / 2)",
                        w->path, half);
    float *div = emt_malloc((size_t)half, sizeof(float));
    if (!div) return ENTMTP_ERR_OUT_OF_MEMORY;
    entmtp_status st = emt_tensor_to_f32(t, 0, half, div);
    for (int32_t i = 0; st == ENTMTP_OK && i < half; i++)
        if (!(div[i] > 0) || !isfinite(div[i]))
            st = emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor 'rope_freqs.weight' element %d = %g is not a positive number",
                          w->path, i, (double)div[i]);
    if (st == ENTMTP_OK) emt_rope_inv_freq(c, div, inv_freq);
    free(div);
    return st;
}

entmtp_status emt_model_check_ops(const entmtp_model *m) {
    const emt_model_config *c = &m->cfg;
    const emt_backend_ops *op = m->be->ops;
    const char *missing = (c->embed_scale || c->q_scale) && !op->scale ? "scale"
                          : c->geglu && !op->geglu                     ? "geglu"
                          : c->final_softcap && !op->softcap           ? "softcap"
                          : c->attn_softcap && !op->attention_softcap  ? "attention_softcap"
                          : c->sliding_window > 0 && c->sliding_window < c->ctx && !op->attention_window
                              ? "attention_window"
                              : NULL;
    if (missing)
        return emt_fail(ENTMTP_ERR_UNSUPPORTED, "%s: architecture '%s' needs the backend op '%s', which the %s backend does not have",
                        m->path, c->arch, missing, op->name);
    return ENTMTP_OK;
}

static size_t mat_bytes(const emt_wmat *w, int32_t rows, int32_t cols) {
    return emt_dtype_nbytes(w->dtype, (int64_t)rows * cols);
}

size_t emt_model_streamed_bytes(const entmtp_model *m) {
    const emt_model_config *c = &m->cfg;
    int32_t q = c->n_heads * c->head_dim, kv = c->n_kv_heads * c->head_dim;
    size_t n = mat_bytes(&m->lm_head, c->vocab, c->hidden) + (size_t)c->hidden * 4;
    for (int32_t l = 0; l < c->n_layers; l++) {
        const emt_layer *L = &m->layers[l];
        n += mat_bytes(&L->wq, q, c->hidden) + mat_bytes(&L->wk, kv, c->hidden) +
             mat_bytes(&L->wv, kv, c->hidden) + mat_bytes(&L->wo, c->hidden, q) +
             mat_bytes(&L->w_gate, c->ffn, c->hidden) + mat_bytes(&L->w_up, c->ffn, c->hidden) +
             mat_bytes(&L->w_down, c->hidden, c->ffn) + (size_t)c->hidden * 8;
    }
    return n;
}

double emt_model_copy_bandwidth(entmtp_model *m) {
    emt_backend *be = m->be;
    /* a device copy of 512 MB takes ~0.3 ms on an H100: long against the clock */
    size_t bytes = be->ops->host_memory ? (size_t)256 << 20 : (size_t)512 << 20;
    size_t row_floats = bytes / sizeof(float);
    float *a = be->ops->alloc(be, bytes), *b = be->ops->alloc(be, bytes);
    emt_exec *ex = a && b ? be->ops->exec_create(be, 1) : NULL;
    double best = 0;
    const int32_t zero = 0;
    if (ex) {
        be->ops->copy_rows(ex, b, a, row_floats, &zero, &zero, 1); /* first touch, not timed */
        if (be->ops->sync(ex) == ENTMTP_OK) {
            for (int r = 0; r < 8; r++) {
                double t0 = emt_now();
                be->ops->copy_rows(ex, r & 1 ? a : b, r & 1 ? b : a, row_floats, &zero, &zero, 1);
                if (be->ops->sync(ex) != ENTMTP_OK) { best = 0; break; }
                double gbs = 2.0 * (double)bytes / (emt_now() - t0) / 1e9;
                if (gbs > best) best = gbs;
            }
        }
        be->ops->exec_destroy(ex);
    }
    if (a) be->ops->release(be, a);
    if (b) be->ops->release(be, b);
    return best;
}

const char *emt_model_kernels(entmtp_model *m) {
    int count[EMT_DTYPE_COUNT] = { 0 };
    count[m->tok_embd.dtype]++;
    if (m->lm_head.data != m->tok_embd.data) count[m->lm_head.dtype]++;
    for (int32_t l = 0; l < m->cfg.n_layers; l++) {
        const emt_layer *L = &m->layers[l];
        const emt_wmat *ws[] = { &L->wq, &L->wk, &L->wv, &L->wo, &L->w_gate, &L->w_up, &L->w_down };
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) count[ws[i]->dtype]++;
    }
    size_t n = (size_t)snprintf(m->kernels, sizeof m->kernels, "%s", m->be->ops->name);
    if (m->backend_kind == ENTMTP_BACKEND_CPU) {
        emt_cpu_variant v = EMT_CPU_BASELINE;
        for (int k = 0; k < EMT_CPU_VARIANT_COUNT; k++)
            if (emt_cpu_variant_ops((emt_cpu_variant)k) == m->be->ops) v = (emt_cpu_variant)k;
        n += (size_t)snprintf(m->kernels + n, sizeof m->kernels - n, " %s", emt_cpu_variant_name(v));
    }
    n += (size_t)snprintf(m->kernels + n, sizeof m->kernels - n, ", %s weights (",
                          m->compute == ENTMTP_COMPUTE_F32 ? "f32" : "native");
    const char *sep = "";
    for (int d = 0; d < EMT_DTYPE_COUNT && n < sizeof m->kernels; d++)
        if (count[d]) {
            n += (size_t)snprintf(m->kernels + n, sizeof m->kernels - n, "%s%s %d", sep,
                                  emt_dtype_name((emt_dtype)d), count[d]);
            sep = ", ";
        }
    if (n < sizeof m->kernels) snprintf(m->kernels + n, sizeof m->kernels - n, ")");
    return m->kernels;
}

static int is_dir(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static entmtp_status create_backend(const entmtp_model_params *p, entmtp_model *m) {
    if (p->backend == ENTMTP_BACKEND_CPU) {
        m->backend_kind = ENTMTP_BACKEND_CPU;
        return emt_backend_cpu_create(&m->be);
    }
    if (p->backend != ENTMTP_BACKEND_AUTO && p->backend != ENTMTP_BACKEND_CUDA)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "model params: backend = %d is not a valid entmtp_backend",
                        (int)p->backend);
    entmtp_status st = emt_backend_cuda_create(p->device, &m->be);
    if (st == ENTMTP_OK) {
        m->backend_kind = ENTMTP_BACKEND_CUDA;
        return ENTMTP_OK;
    }
    if (p->backend == ENTMTP_BACKEND_CUDA) return st;
    entmtp_clear_error();
    m->backend_kind = ENTMTP_BACKEND_CPU;
    return emt_backend_cpu_create(&m->be);
}

static void collect_eog(entmtp_model *m) {
    m->n_eog = 0;
    if (m->tokenizer) {
        int32_t n = emt_tokenizer_n_vocab(m->tokenizer);
        for (int32_t t = 0; t < n && m->n_eog < EMT_MAX_STOP_TOKENS; t++)
            if (emt_tokenizer_is_eog(m->tokenizer, t)) m->eog[m->n_eog++] = t;
    } else if (m->cfg.eos >= 0 && m->cfg.eos < m->cfg.vocab) {
        m->eog[m->n_eog++] = m->cfg.eos;
    }
}

ENTMTP_API entmtp_status entmtp_model_load(const char *path, const entmtp_model_params *params,
                                           entmtp_model **out_model) {
    if (!path || !out_model)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_model_load: path and out_model must not be NULL");
    *out_model = NULL;
    entmtp_model_params p = g_model_defaults;
    entmtp_status st = emt_copy_versioned(&p, sizeof p, params, "entmtp_model_params");
    if (st) return st;
    if (p.n_threads < 0)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "model params: n_threads = %d is negative", p.n_threads);
    if (p.compute_type != ENTMTP_COMPUTE_NATIVE && p.compute_type != ENTMTP_COMPUTE_F32)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT,
                        "model params: compute_type = %d is not a valid entmtp_compute_type", (int)p.compute_type);

    const double t_load = emt_now();
    entmtp_model *m = emt_calloc(1, sizeof *m);
    if (!m) return ENTMTP_ERR_OUT_OF_MEMORY;
    m->n_threads = p.n_threads;
    m->compute = p.compute_type;
    m->path = emt_strdup(path);
    emt_weights w;
    memset(&w, 0, sizeof w);
    w.path = path;
    w.progress = p.progress;
    w.progress_user = p.progress_user_data;
    if (!m->path) { st = ENTMTP_ERR_OUT_OF_MEMORY; goto fail; }

    if (is_dir(path)) {
        if ((st = config_from_hf(path, &m->cfg))) goto fail;
        if ((st = emt_st_open(path, &w.st))) goto fail;
        m->st = w.st;
    } else {
        if ((st = emt_gguf_open(path, &w.gguf))) goto fail;
        m->gguf = w.gguf;
        if ((st = config_from_gguf(w.gguf, &m->cfg))) goto fail;
    }
    if ((st = validate_config(path, &m->cfg))) goto fail;
    if ((st = create_backend(&p, m))) goto fail;
    if ((st = emt_model_check_ops(m))) goto fail;
    w.be = m->be;
    w.native = p.compute_type == ENTMTP_COMPUTE_NATIVE;
    {
        int64_t n = w.gguf ? emt_gguf_n_tensors(w.gguf) : emt_st_n_tensors(w.st);
        for (int64_t i = 0; i < n; i++) {
            const emt_tensor *t = w.gguf ? emt_gguf_tensor(w.gguf, i) : emt_st_tensor(w.st, i);
            w.total_bytes += t->nbytes;
        }
    }
    const emt_model_config *c = &m->cfg;
    m->layers = emt_calloc((size_t)c->n_layers, sizeof *m->layers);
    m->inv_freq = emt_calloc((size_t)c->n_rot / 2, sizeof(float));
    if (!m->layers || !m->inv_freq) { st = ENTMTP_ERR_OUT_OF_MEMORY; goto fail; }
    if ((st = rope_frequencies(&w, c, m->inv_freq))) goto fail;
    if (c->rope_theta_local > 0) { /* local layers: their own base, no scaling */
        emt_model_config local = *c;
        local.rope_theta = c->rope_theta_local;
        local.rope_scaling = 0;
        if (!(m->inv_freq_local = emt_calloc((size_t)c->n_rot / 2, sizeof(float)))) {
            st = ENTMTP_ERR_OUT_OF_MEMORY;
            goto fail;
        }
        emt_rope_inv_freq(&local, NULL, m->inv_freq_local);
    }
    int gguf = w.gguf != NULL;
    if ((st = emt_weights_load_mat(&w, gguf ? "token_embd.weight" : "model.embed_tokens.weight",
                                   c->vocab, c->hidden, 0, &m->tok_embd)))
        goto fail;
    if ((st = load_layers(m, &w))) goto fail;
    if ((st = emt_weights_load_norm(&w, gguf ? "output_norm.weight" : "model.norm.weight", c->hidden,
                                    c->norm_offset, &m->out_norm)))
        goto fail;
    if (c->tied) {
        m->lm_head = m->tok_embd;
        m->lm_head.owned = NULL; /* released once, through tok_embd */
    } else if ((st = emt_weights_load_mat(&w, gguf ? "output.weight" : "lm_head.weight", c->vocab,
                                          c->hidden, 0, &m->lm_head))) {
        goto fail;
    }
    m->n_params = w.n_params;

    st = gguf ? emt_tokenizer_from_gguf(w.gguf, &m->tokenizer)
              : emt_tokenizer_from_hf_dir(path, &m->tokenizer);
    if (st == ENTMTP_ERR_NOT_FOUND) {
        m->tokenizer = NULL; /* a model without a tokenizer still runs on token ids */
        entmtp_clear_error();
    } else if (st != ENTMTP_OK) {
        goto fail;
    } else if (emt_tokenizer_n_vocab(m->tokenizer) > c->vocab) {
        st = emt_fail(ENTMTP_ERR_FORMAT, "%s: tokenizer has %d tokens but the model's vocabulary is %d",
                      path, emt_tokenizer_n_vocab(m->tokenizer), c->vocab);
        goto fail;
    }
    collect_eog(m);
    m->vocab_hash = m->tokenizer ? emt_tokenizer_vocab_hash(m->tokenizer) : 0;
    m->load_seconds = emt_now() - t_load;
    if (w.progress) w.progress(1.0f, "loading weights", w.progress_user);
    *out_model = m;
    return ENTMTP_OK;
fail:
    entmtp_model_free(m);
    return st;
}

const char *emt_model_describe(const entmtp_model *m, char *buf, size_t cap) {
    const emt_model_config *c = &m->cfg;
    static const char *rope[] = { "rope", "rope(linear scaling)", "rope(llama3 scaling)",
                                  "rope(llama3 scaling, rope_freqs)" };
    char window[48] = "";
    if (c->sliding_window)
        snprintf(window, sizeof window, " sliding-window=%d%s", c->sliding_window,
                 c->sliding_window < c->ctx ? "" : "(>= context: full attention)");
    size_t n = 0;
    if (c->embed_scale) n += (size_t)snprintf(buf + n, cap - n, "embed-scale ");
    if (n < cap && c->local_period)
        n += (size_t)snprintf(buf + n, cap - n, "local/global-layers(1 global in %d) ", c->local_period);
    if (n < cap && c->rope_theta_local)
        n += (size_t)snprintf(buf + n, cap - n, "local-rope-base=%g ", (double)c->rope_theta_local);
    if (n < cap && c->q_scale) n += (size_t)snprintf(buf + n, cap - n, "query-scale*%g ", (double)c->q_scale);
    if (n < cap && c->post_norms) n += (size_t)snprintf(buf + n, cap - n, "post-norms ");
    if (n < cap && c->attn_softcap) n += (size_t)snprintf(buf + n, cap - n, "attn-softcap=%g ", (double)c->attn_softcap);
    if (n < cap && c->final_softcap) n += (size_t)snprintf(buf + n, cap - n, "final-softcap=%g ", (double)c->final_softcap);
    if (n >= cap) return buf;
    buf += n;
    cap -= n;
    snprintf(buf, cap, "rmsnorm %s%s%s%s%s%s%s %s%s%s %s%s", rope[c->rope_scaling & 3],
             c->attn_bias ? " qkv-bias" : "", c->attn_out_bias ? " o-bias" : "",
             c->qk_norm ? " qk-norm" : "", c->fused_qkv ? " fused-qkv" : "",
             c->n_kv_heads < c->n_heads ? " gqa" : "", window, c->geglu ? "geglu" : "swiglu",
             c->fused_gate_up ? "(fused gate/up)" : "",
             c->mlp_bias ? " mlp-bias" : "", c->tied ? "tied-lm_head" : "untied-lm_head",
             c->gguf_qk_permuted ? " (GGUF Q/K un-permuted at load)" : "");
    return buf - n;
}

ENTMTP_API entmtp_status entmtp_model_get_info(const entmtp_model *m, entmtp_model_info *out) {
    if (!m || !out)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_model_get_info: model and out must not be NULL");
    entmtp_model_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    const emt_model_config *c = &m->cfg;
    snprintf(info.architecture, sizeof info.architecture, "%s", c->arch);
    snprintf(info.name, sizeof info.name, "%s", c->name);
    info.vocab_size = c->vocab;
    info.hidden_size = c->hidden;
    info.intermediate_size = c->ffn;
    info.n_layers = c->n_layers;
    info.n_heads = c->n_heads;
    info.n_kv_heads = c->n_kv_heads;
    info.head_dim = c->head_dim;
    info.context_length = c->ctx;
    info.rope_theta = c->rope_theta;
    info.rms_norm_eps = c->rms_eps;
    info.tied_embeddings = c->tied;
    info.bos_token = m->tokenizer ? emt_tokenizer_bos(m->tokenizer) : c->bos;
    info.eos_token = m->tokenizer ? emt_tokenizer_eos(m->tokenizer) : c->eos;
    info.n_params = m->n_params;
    info.backend = m->backend_kind;
    info.load_seconds = m->load_seconds;
    info.vocab_hash = m->vocab_hash;
    size_t n = out->struct_size < sizeof info ? out->struct_size : sizeof info;
    if (n < sizeof(size_t))
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_model_info.struct_size = %zu; set it to sizeof(entmtp_model_info)",
                        out->struct_size);
    memcpy((char *)out + sizeof(size_t), (char *)&info + sizeof(size_t), n - sizeof(size_t));
    return ENTMTP_OK;
}

/* ------------------------------------------------------------- tokenizer */

static entmtp_status need_tokenizer(const entmtp_model *m, const char *fn) {
    if (!m) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "%s: model is NULL", fn);
    if (!m->tokenizer)
        return emt_fail(ENTMTP_ERR_UNSUPPORTED, "%s: model '%s' has no tokenizer; pass token ids", fn, m->path);
    return ENTMTP_OK;
}

ENTMTP_API entmtp_status entmtp_tokenize(const entmtp_model *m, const char *text, int64_t text_len,
                                         int add_bos, int parse_special, int32_t *tokens,
                                         int32_t capacity, int32_t *n_tokens) {
    entmtp_status st = need_tokenizer(m, "entmtp_tokenize");
    if (st) return st;
    if (!text || !n_tokens || capacity < 0 || (capacity > 0 && !tokens))
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_tokenize: text, n_tokens (and tokens when capacity > 0) are required");
    size_t len = text_len < 0 ? strlen(text) : (size_t)text_len;
    return emt_tokenize(m->tokenizer, text, len, add_bos, parse_special, tokens, capacity, n_tokens);
}

ENTMTP_API entmtp_status entmtp_detokenize(const entmtp_model *m, const int32_t *tokens,
                                           int32_t n_tokens, char *text, size_t capacity,
                                           size_t *text_len) {
    entmtp_status st = need_tokenizer(m, "entmtp_detokenize");
    if (st) return st;
    if ((!tokens && n_tokens > 0) || n_tokens < 0 || !text_len || (capacity > 0 && !text))
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_detokenize: invalid arguments (n_tokens = %d)", n_tokens);
    return emt_detokenize(m->tokenizer, tokens, n_tokens, text, capacity, text_len);
}

ENTMTP_API entmtp_status entmtp_chat_prompt(const entmtp_model *m, const char *system_prompt,
                                            const char *user_message, char *text, size_t capacity,
                                            size_t *text_len) {
    entmtp_status st = need_tokenizer(m, "entmtp_chat_prompt");
    if (st) return st;
    if (!user_message || !text_len || (capacity > 0 && !text))
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_chat_prompt: user_message and text_len are required");
    return emt_chat_prompt(m->tokenizer, system_prompt, user_message, text, capacity, text_len);
}

ENTMTP_API entmtp_status entmtp_chat_prompt_messages(const entmtp_model *m, const char *const *roles,
                                                     const char *const *contents, int32_t n_messages,
                                                     char *text, size_t capacity, size_t *text_len) {
    entmtp_status st = need_tokenizer(m, "entmtp_chat_prompt_messages");
    if (st) return st;
    return emt_chat_render(m->tokenizer, roles, contents, n_messages, text, capacity, text_len);
}

ENTMTP_API entmtp_status entmtp_chat_prompt_template(const entmtp_model *m, const char *chat_template,
                                                     const char *const *roles, const char *const *contents,
                                                     int32_t n_messages, char *text, size_t capacity,
                                                     size_t *text_len) {
    entmtp_status st = need_tokenizer(m, "entmtp_chat_prompt_template");
    if (st) return st;
    return emt_chat_render_template(m->tokenizer, chat_template, roles, contents, n_messages, text, capacity,
                                    text_len);
}

ENTMTP_API int entmtp_token_is_eog(const entmtp_model *m, int32_t token) {
    if (!m) return 0;
    for (int32_t i = 0; i < m->n_eog; i++)
        if (m->eog[i] == token) return 1;
    return 0;
}
