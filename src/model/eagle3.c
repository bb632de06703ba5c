/* EAGLE-3 drafters in the layout SafeAILab/EAGLE and SpecForge publish: a
 * config.json (LlamaConfig fields, draft_vocab_size, and in SpecForge's
 * eagle_config the target layers it reads) and tensors fc, midlayer.*,
 * norm, lm_head, d2t and t2d (and embed_tokens when it keeps its own). Every
 * shape is checked against the target model before anything is loaded. */
#include "model/heads.h"
#include "model/weights.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

int emt_eagle3_detect(const emt_st *st) {
    return emt_st_find(st, "fc.weight") && emt_st_find(st, "midlayer.self_attn.q_proj.weight");
}

void emt_eagle3_free(entmtp_heads *h) {
    emt_eagle3 *e = h->eagle3;
    if (!e) return;
    emt_backend *be = h->model->be;
    void *owned[] = { e->fc.owned, e->wq.owned, e->wk.owned, e->wv.owned, e->wo.owned, e->w_gate.owned,
                      e->w_up.owned, e->w_down.owned, e->lm_head.owned, e->embed.owned,
                      e->hidden_norm, e->input_norm, e->post_norm, e->norm };
    for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++)
        if (owned[i]) be->ops->release(be, owned[i]);
    free(e->inv_freq);
    free(e->d2t_ids);
    free(e);
    h->eagle3 = NULL;
}

/* ------------------------------------------------------------ config.json */

static entmtp_status cfg_int(const cJSON *root, const char *file, const char *key, int32_t dflt, int32_t *out) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!it || cJSON_IsNull(it)) {
        if (dflt < 0) return emt_fail(ENTMTP_ERR_FORMAT, "%s: required field '%s' is missing", file, key);
        *out = dflt;
        return ENTMTP_OK;
    }
    double d = it->valuedouble;
    if (!cJSON_IsNumber(it) || d != floor(d) || d < 1 || d > (1 << 24))
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: field '%s' must be a positive integer (at most 2^24)", file, key);
    *out = (int32_t)d;
    return ENTMTP_OK;
}

static entmtp_status cfg_float(const cJSON *root, const char *file, const char *key, float dflt, float *out) {
    const cJSON *it = cJSON_GetObjectItemCaseSensitive(root, key);
    if (!it || cJSON_IsNull(it)) { *out = dflt; return ENTMTP_OK; }
    if (!cJSON_IsNumber(it) || !isfinite((float)it->valuedouble) || it->valuedouble <= 0)
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: field '%s' must be a positive finite number", file, key);
    *out = (float)it->valuedouble;
    return ENTMTP_OK;
}

/* SpecForge's eagle_config.eagle_aux_hidden_state_layer_ids: the target
 * layers whose outputs are read (SGLang captures them as the input of the
 * layer after each). Without it, SafeAILab/EAGLE's choice: the inputs of
 * layers 2, N/2 and N-3, i.e. the outputs of 1, N/2-1 and N-4. */
static entmtp_status cfg_taps(const cJSON *root, const char *file, const emt_model_config *c, int32_t *taps) {
    const cJSON *ec = cJSON_GetObjectItemCaseSensitive(root, "eagle_config");
    const cJSON *ids = ec ? cJSON_GetObjectItemCaseSensitive(ec, "eagle_aux_hidden_state_layer_ids") : NULL;
    const char *field = "eagle_config.eagle_aux_hidden_state_layer_ids";
    if (!ids || cJSON_IsNull(ids)) {
        taps[0] = 1;
        taps[1] = c->n_layers / 2 - 1;
        taps[2] = c->n_layers - 4;
        if (taps[0] < taps[1] && taps[1] < taps[2]) return ENTMTP_OK;
        return emt_fail(ENTMTP_ERR_MISMATCH,
                        "%s: no %s, and the default layers (outputs of 1, N/2-1, N-4) are not three distinct layers of a %d-layer model",
                        file, field, c->n_layers);
    }
    if (!cJSON_IsArray(ids) || cJSON_GetArraySize(ids) != 3)
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: %s must list 3 layer ids", file, field);
    for (int i = 0; i < 3; i++) {
        const cJSON *it = cJSON_GetArrayItem(ids, i);
        double d = cJSON_IsNumber(it) ? it->valuedouble : -1;
        if (d != floor(d) || d < 0 || d >= c->n_layers)
            return emt_fail(ENTMTP_ERR_MISMATCH, "%s: %s[%d] is not a layer of the %d-layer target model", file, field, i,
                            c->n_layers);
        taps[i] = (int32_t)d;
        if (i > 0 && taps[i] <= taps[i - 1])
            return emt_fail(ENTMTP_ERR_FORMAT, "%s: %s must ascend (%d after %d)", file, field, taps[i], taps[i - 1]);
    }
    return ENTMTP_OK;
}

/* The rope scaling a drafter's config may carry: none, linear (positions
 * divided by the factor), or llama3, which SpecForge's trainer runs as plain
 * RoPE, so it is read as none. */
static entmtp_status cfg_rope(const cJSON *root, const char *file, float *linear_factor) {
    *linear_factor = 1.0f;
    const cJSON *rs = cJSON_GetObjectItemCaseSensitive(root, "rope_scaling");
    if (!rs || cJSON_IsNull(rs)) return ENTMTP_OK;
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(rs, "rope_type");
    if (!type) type = cJSON_GetObjectItemCaseSensitive(rs, "type");
    const char *name = cJSON_IsString(type) ? type->valuestring : "?";
    if (!strcmp(name, "llama3") || !strcmp(name, "default")) return ENTMTP_OK;
    if (!strcmp(name, "linear")) return cfg_float(rs, file, "factor", 1.0f, linear_factor);
    return emt_fail(ENTMTP_ERR_UNSUPPORTED, "%s: rope_scaling type '%s' is not supported for EAGLE-3 drafters "
                    "(none, linear, llama3)", file, name);
}

static int is_dir(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

/* --------------------------------------------------------------- tensors */

/* A tensor's shape must be exactly {d0} (d1 = 0) or {d0, d1}. */
static entmtp_status check_shape(const emt_st *st, const char *path, const char *name, int64_t d0, int64_t d1,
                                 const char *why) {
    const emt_tensor *t = emt_st_find(st, name);
    if (!t) return emt_fail(ENTMTP_ERR_FORMAT, "%s: EAGLE-3 tensor '%s' is missing", path, name);
    int want_dims = d1 ? 2 : 1;
    if (t->n_dims != want_dims || t->shape[0] != d0 || (d1 && t->shape[1] != d1)) {
        char got[64];
        if (t->n_dims == 1) snprintf(got, sizeof got, "[%lld]", (long long)t->shape[0]);
        else if (t->n_dims == 2) snprintf(got, sizeof got, "[%lld, %lld]", (long long)t->shape[0], (long long)t->shape[1]);
        else snprintf(got, sizeof got, "%d dimensions", t->n_dims);
        if (d1)
            return emt_fail(ENTMTP_ERR_MISMATCH, "%s: tensor '%s' has shape %s; %s requires [%lld, %lld]", path, name, got,
                            why, (long long)d0, (long long)d1);
        return emt_fail(ENTMTP_ERR_MISMATCH, "%s: tensor '%s' has shape %s; %s requires [%lld]", path, name, got, why,
                        (long long)d0);
    }
    return ENTMTP_OK;
}

static int64_t read_int(const emt_tensor *t, int64_t i) {
    if (t->dtype == EMT_I32) {
        int32_t v;
        memcpy(&v, (const char *)t->data + i * 4, 4);
        return v;
    }
    int64_t v;
    memcpy(&v, (const char *)t->data + i * 8, 8);
    return v;
}

/* d2t (draft id -> offset to the target id) and, when present, t2d (the
 * target ids that are in the draft vocabulary) must agree: every target id
 * inside the vocabulary, none twice, and t2d marking exactly them. Without
 * d2t the draft vocabulary must be the target's. */
static entmtp_status load_vocab_map(emt_eagle3 *e, const emt_st *st, const char *path, int32_t vocab) {
    e->d2t_ids = emt_malloc((size_t)e->n_draft, sizeof(int32_t));
    if (!e->d2t_ids) return ENTMTP_ERR_OUT_OF_MEMORY;
    const emt_tensor *d2t = emt_st_find(st, "d2t");
    if (!d2t) {
        if (e->n_draft != vocab)
            return emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor 'd2t' is missing, and the draft vocabulary (%d) is not the target's (%d)",
                            path, e->n_draft, vocab);
        for (int32_t i = 0; i < vocab; i++) e->d2t_ids[i] = i;
        return ENTMTP_OK;
    }
    if (d2t->dtype != EMT_I64 && d2t->dtype != EMT_I32)
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor 'd2t' has dtype %s; I64 or I32 offsets required", path,
                        emt_dtype_name(d2t->dtype));
    entmtp_status s = check_shape(st, path, "d2t", e->n_draft, 0, "the draft vocabulary (lm_head rows)");
    if (s) return s;
    uint8_t *seen = emt_calloc((size_t)vocab, 1);
    if (!seen) return ENTMTP_ERR_OUT_OF_MEMORY;
    for (int32_t i = 0; i < e->n_draft && !s; i++) {
        int64_t target = (int64_t)i + read_int(d2t, i);
        if (target < 0 || target >= vocab || seen[target])
            s = emt_fail(ENTMTP_ERR_FORMAT, "%s: d2t[%d] maps draft id %d to %lld, %s", path, i, i, (long long)target,
                         target < 0 || target >= vocab ? "outside the target vocabulary" : "a target id mapped twice");
        else {
            seen[target] = 1;
            e->d2t_ids[i] = (int32_t)target;
        }
    }
    const emt_tensor *t2d = emt_st_find(st, "t2d");
    if (!s && t2d) {
        if (t2d->dtype != EMT_BOOL || t2d->n_dims != 1 || t2d->shape[0] != vocab)
            s = emt_fail(ENTMTP_ERR_MISMATCH, "%s: tensor 't2d' must be BOOL [%d] (the target vocabulary); it is %s with %lld entries",
                         path, vocab, emt_dtype_name(t2d->dtype), (long long)(t2d->n_dims ? t2d->shape[0] : 0));
        for (int32_t v = 0; !s && v < vocab; v++)
            if ((((const uint8_t *)t2d->data)[v] != 0) != (seen[v] != 0))
                s = emt_fail(ENTMTP_ERR_FORMAT, "%s: t2d[%d] = %d disagrees with d2t (target id %d is %sin the draft vocabulary)",
                             path, v, ((const uint8_t *)t2d->data)[v], v, seen[v] ? "" : "not ");
    }
    free(seen);
    return s;
}

typedef struct eagle3_shape {
    int32_t hidden, n_heads, n_kv_heads, head_dim, ffn, n_draft, vocab, target_hidden;
    float rms_eps, rope_theta, rope_linear;
    int32_t taps[3];
} eagle3_shape;

/* The config (or, without one, the target's attention shape), then every
 * tensor's shape against it and the target. */
static entmtp_status read_shape(const entmtp_model *m, const emt_st *st, const char *path, const char *config_path,
                                eagle3_shape *sh) {
    const emt_model_config *c = &m->cfg;
    entmtp_status s;
    const emt_tensor *norm = emt_st_find(st, "norm.weight"), *lm = emt_st_find(st, "lm_head.weight");
    const emt_tensor *gate = emt_st_find(st, "midlayer.mlp.gate_proj.weight");
    if (!norm || !lm || !gate)
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: EAGLE-3 tensor '%s' is missing", path,
                        !norm ? "norm.weight" : !lm ? "lm_head.weight" : "midlayer.mlp.gate_proj.weight");
    sh->hidden = (int32_t)norm->shape[0];
    sh->n_draft = (int32_t)lm->shape[0];
    sh->ffn = (int32_t)gate->shape[0];
    sh->vocab = c->vocab;
    sh->target_hidden = c->hidden;
    sh->n_heads = c->n_heads;
    sh->n_kv_heads = c->n_kv_heads;
    sh->head_dim = c->head_dim;
    sh->rms_eps = c->rms_eps;
    sh->rope_theta = c->rope_theta;
    sh->rope_linear = 1.0f;
    if (!config_path) return cfg_taps(NULL, path, c, sh->taps);
    char *text = NULL;
    if ((s = emt_read_file(config_path, &text, NULL))) return s;
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!root || !cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: not a JSON object", config_path);
    }
    const char *f = config_path;
    int32_t vocab = 0;
    if (!(s = cfg_int(root, f, "hidden_size", -1, &sh->hidden)) &&
        !(s = cfg_int(root, f, "num_attention_heads", -1, &sh->n_heads)) &&
        !(s = cfg_int(root, f, "num_key_value_heads", sh->n_heads, &sh->n_kv_heads)) &&
        !(s = cfg_int(root, f, "head_dim", sh->hidden / sh->n_heads, &sh->head_dim)) &&
        !(s = cfg_int(root, f, "intermediate_size", -1, &sh->ffn)) &&
        !(s = cfg_int(root, f, "vocab_size", -1, &vocab)) &&
        !(s = cfg_int(root, f, "draft_vocab_size", vocab, &sh->n_draft)) &&
        !(s = cfg_int(root, f, "target_hidden_size", c->hidden, &sh->target_hidden)) &&
        !(s = cfg_float(root, f, "rms_norm_eps", 1e-6f, &sh->rms_eps)) &&
        !(s = cfg_float(root, f, "rope_theta", 10000.0f, &sh->rope_theta)) &&
        !(s = cfg_rope(root, f, &sh->rope_linear)))
        s = cfg_taps(root, f, c, sh->taps);
    cJSON_Delete(root);
    if (s) return s;
    if (vocab != c->vocab)
        return emt_fail(ENTMTP_ERR_MISMATCH, "%s: vocab_size = %d, but the target model's vocabulary has %d tokens", f,
                        vocab, c->vocab);
    if (sh->target_hidden != c->hidden)
        return emt_fail(ENTMTP_ERR_MISMATCH, "%s: target_hidden_size = %d, but the target model's hidden size is %d", f,
                        sh->target_hidden, c->hidden);
    if (sh->n_draft > vocab)
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: draft_vocab_size = %d exceeds vocab_size = %d", f, sh->n_draft, vocab);
    if (sh->n_heads % sh->n_kv_heads || sh->head_dim % 2)
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: %d attention heads do not share %d KV heads, or head_dim %d is odd", f,
                        sh->n_heads, sh->n_kv_heads, sh->head_dim);
    return ENTMTP_OK;
}

static entmtp_status check_shapes(const emt_st *st, const char *path, const eagle3_shape *sh) {
    const int64_t H = sh->hidden, q = (int64_t)sh->n_heads * sh->head_dim, kv = (int64_t)sh->n_kv_heads * sh->head_dim;
    char fc_why[96];
    snprintf(fc_why, sizeof fc_why, "3 target layers of hidden size %d into hidden size %d", sh->target_hidden,
             sh->hidden);
    const struct { const char *name; int64_t d0, d1; const char *why; } want[] = {
        { "fc.weight", H, 3 * (int64_t)sh->target_hidden, fc_why },
        { "midlayer.self_attn.q_proj.weight", q, 2 * H, "[embedding; hidden] input with the config's heads" },
        { "midlayer.self_attn.k_proj.weight", kv, 2 * H, "[embedding; hidden] input with the config's KV heads" },
        { "midlayer.self_attn.v_proj.weight", kv, 2 * H, "[embedding; hidden] input with the config's KV heads" },
        { "midlayer.self_attn.o_proj.weight", H, q, "the config's heads" },
        { "midlayer.hidden_norm.weight", H, 0, "the hidden size" },
        { "midlayer.input_layernorm.weight", H, 0, "the hidden size" },
        { "midlayer.post_attention_layernorm.weight", H, 0, "the hidden size" },
        { "midlayer.mlp.gate_proj.weight", sh->ffn, H, "intermediate_size x hidden_size" },
        { "midlayer.mlp.up_proj.weight", sh->ffn, H, "intermediate_size x hidden_size" },
        { "midlayer.mlp.down_proj.weight", H, sh->ffn, "hidden_size x intermediate_size" },
        { "norm.weight", H, 0, "the hidden size" },
        { "lm_head.weight", sh->n_draft, H, "draft_vocab_size x hidden_size" },
    };
    entmtp_status s;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        if ((s = check_shape(st, path, want[i].name, want[i].d0, want[i].d1, want[i].why))) return s;
    if (emt_st_find(st, "embed_tokens.weight"))
        return check_shape(st, path, "embed_tokens.weight", sh->vocab, H, "the target vocabulary x hidden_size");
    if (sh->hidden != sh->target_hidden)
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor 'embed_tokens.weight' is missing, and the drafter's hidden size %d "
                        "differs from the target's %d (whose embeddings it would share)", path, sh->hidden,
                        sh->target_hidden);
    return ENTMTP_OK;
}

entmtp_status emt_eagle3_load(entmtp_heads *h, const char *path) {
    entmtp_model *m = h->model;
    char file[4096], config[4096];
    const char *config_path = NULL;
    if (is_dir(path)) {
        snprintf(file, sizeof file, "%s/model.safetensors", path);
        snprintf(config, sizeof config, "%s/config.json", path);
        config_path = config;
    } else {
        snprintf(file, sizeof file, "%s", path);
        const char *slash = strrchr(path, '/');
        int dir_len = slash ? (int)(slash - path) : 1;
        snprintf(config, sizeof config, "%.*s/config.json", dir_len, slash ? path : ".");
        struct stat sb;
        if (stat(config, &sb) == 0) config_path = config;
    }
    emt_weights w;
    memset(&w, 0, sizeof w);
    w.path = file;
    w.be = m->be;
    w.native = m->compute == ENTMTP_COMPUTE_NATIVE;
    w.copy_weights = 1; /* the file closes after loading */
    entmtp_status s = emt_st_open(file, &w.st);
    if (s) return s;
    eagle3_shape sh;
    if (!emt_eagle3_detect(w.st))
        s = emt_fail(ENTMTP_ERR_FORMAT, "%s: no EAGLE-3 tensors ('fc.weight', 'midlayer.self_attn.q_proj.weight')", file);
    if (!s) s = read_shape(m, w.st, file, config_path, &sh);
    if (!s) s = check_shapes(w.st, file, &sh);
    emt_eagle3 *e = s ? NULL : emt_calloc(1, sizeof *e);
    if (!s && !e) s = ENTMTP_ERR_OUT_OF_MEMORY;
    if (s) {
        emt_st_close(w.st);
        return s;
    }
    h->eagle3 = e;
    e->hidden = sh.hidden;
    e->n_heads = sh.n_heads;
    e->n_kv_heads = sh.n_kv_heads;
    e->head_dim = sh.head_dim;
    e->ffn = sh.ffn;
    e->n_draft = sh.n_draft;
    e->target_hidden = sh.target_hidden;
    e->rms_eps = sh.rms_eps;
    e->rope_theta = sh.rope_theta;
    memcpy(e->taps, sh.taps, sizeof e->taps);
    e->inv_freq = emt_malloc((size_t)e->head_dim / 2, sizeof(float));
    if (!e->inv_freq) s = ENTMTP_ERR_OUT_OF_MEMORY;
    for (int32_t i = 0; !s && i < e->head_dim / 2; i++)
        e->inv_freq[i] = (float)(1.0 / pow((double)e->rope_theta, (double)(2 * i) / (double)e->head_dim) /
                                 sh.rope_linear);
    const int64_t H = e->hidden, q = (int64_t)e->n_heads * e->head_dim, kv = (int64_t)e->n_kv_heads * e->head_dim;
    /* a draft row is a one-row product: Q8_0 where the model computes
     * natively (as the heads, model/heads.c), else F32 */
    const struct { const char *name; int64_t d0, d1; emt_wmat *out; } mats[] = {
        { "fc.weight", H, 3 * (int64_t)e->target_hidden, &e->fc },
        { "midlayer.self_attn.q_proj.weight", q, 2 * H, &e->wq },
        { "midlayer.self_attn.k_proj.weight", kv, 2 * H, &e->wk },
        { "midlayer.self_attn.v_proj.weight", kv, 2 * H, &e->wv },
        { "midlayer.self_attn.o_proj.weight", H, q, &e->wo },
        { "midlayer.mlp.gate_proj.weight", e->ffn, H, &e->w_gate },
        { "midlayer.mlp.up_proj.weight", e->ffn, H, &e->w_up },
        { "midlayer.mlp.down_proj.weight", H, e->ffn, &e->w_down },
        { "lm_head.weight", e->n_draft, H, &e->lm_head },
    };
    for (size_t i = 0; !s && i < sizeof mats / sizeof mats[0]; i++)
        s = emt_weights_load_mat_as(&w, mats[i].name, mats[i].d0, mats[i].d1, EMT_Q8_0, mats[i].out);
    if (!s && emt_st_find(w.st, "embed_tokens.weight"))
        s = emt_weights_load_mat(&w, "embed_tokens.weight", m->cfg.vocab, H, 0, &e->embed);
    const struct { const char *name; float **out; } norms[] = {
        { "midlayer.hidden_norm.weight", &e->hidden_norm },
        { "midlayer.input_layernorm.weight", &e->input_norm },
        { "midlayer.post_attention_layernorm.weight", &e->post_norm },
        { "norm.weight", &e->norm },
    };
    for (size_t i = 0; !s && i < sizeof norms / sizeof norms[0]; i++)
        s = emt_weights_load(&w, norms[i].name, H, 0, 0, 0, norms[i].out);
    if (!s) s = load_vocab_map(e, w.st, file, m->cfg.vocab);
    emt_st_close(w.st);
    h->kind = ENTMTP_HEADS_EAGLE3;
    h->n_heads = EMT_EAGLE3_MAX_DEPTH;
    h->n_layers = 1;
    h->shares_lm_head = 0;
    h->n_draft = e->n_draft;
    h->draft_ids = e->d2t_ids; /* the heads' draft vocabulary: the session maps top-k ids through it */
    e->d2t_ids = NULL;
    return s;
}
