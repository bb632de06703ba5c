#include "tiny_model.h"

#include "common/common.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

emt_tiny_config emt_tiny_default_config(void) {
    emt_tiny_config c = { 64, 32, 48, 2, 4, 2, 256, 10000.0f, 1e-5f, 0, 0, 1 };
    return c;
}

static uint64_t mix(uint64_t z) {
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

float emt_tiny_uniform(uint64_t seed, const char *name, int64_t index) {
    uint64_t h = 1469598103934665603ull ^ seed;
    for (const char *p = name; *p; p++) h = (h ^ (uint8_t)*p) * 1099511628211ull;
    uint64_t z = mix(h + 0x9E3779B97F4A7C15ull * (uint64_t)(index + 1));
    return (float)((double)(z >> 11) * (2.0 / 9007199254740992.0) - 1.0);
}

/* ------------------------------------------------------------ tensors */

typedef struct wtensor {
    char name[128];
    int32_t n_dims;
    int64_t shape[2]; /* outermost first */
    float *data;
    emt_dtype type;
} wtensor;

typedef struct wlist {
    wtensor *t;
    int32_t n, cap;
} wlist;

static wtensor *add(wlist *l, const char *name, int64_t d0, int64_t d1, emt_dtype type) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 32;
        l->t = realloc(l->t, (size_t)l->cap * sizeof *l->t);
        if (!l->t) abort();
    }
    wtensor *t = &l->t[l->n++];
    memset(t, 0, sizeof *t);
    snprintf(t->name, sizeof t->name, "%s", name);
    t->n_dims = d1 ? 2 : 1;
    t->shape[0] = d0;
    t->shape[1] = d1;
    t->type = type;
    int64_t n = d0 * (d1 ? d1 : 1);
    t->data = malloc((size_t)n * sizeof(float));
    if (!t->data) abort();
    return t;
}

static void fill(wtensor *t, uint64_t seed, const char *logical, float scale, float offset) {
    int64_t n = t->shape[0] * (t->n_dims == 2 ? t->shape[1] : 1);
    for (int64_t i = 0; i < n; i++) t->data[i] = offset + scale * emt_tiny_uniform(seed, logical, i);
}

static void free_list(wlist *l) {
    for (int32_t i = 0; i < l->n; i++) free(l->t[i].data);
    free(l->t);
}

static uint16_t f32_to_bf16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t rounding = 0x7FFF + ((x >> 16) & 1);
    return (uint16_t)((x + rounding) >> 16);
}

static size_t encoded_size(const wtensor *t) {
    int64_t n = t->shape[0] * (t->n_dims == 2 ? t->shape[1] : 1);
    return emt_dtype_nbytes(t->type, n);
}

static void put16(uint8_t *p, uint16_t v) { p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); }

void emt_tiny_encode(emt_dtype type, const float *x, int64_t n, uint8_t *out) {
    switch (type) {
    case EMT_F32: memcpy(out, x, (size_t)n * 4); break;
    case EMT_I32:
        for (int64_t i = 0; i < n; i++) {
            int32_t v = (int32_t)x[i];
            memcpy(out + 4 * i, &v, 4);
        }
        break;
    case EMT_I64:
        for (int64_t i = 0; i < n; i++) {
            int64_t v = (int64_t)x[i];
            memcpy(out + 8 * i, &v, 8);
        }
        break;
    case EMT_BOOL: for (int64_t i = 0; i < n; i++) out[i] = x[i] != 0; break;
    case EMT_F16: for (int64_t i = 0; i < n; i++) put16(out + 2 * i, emt_f32_to_f16(x[i])); break;
    case EMT_BF16: for (int64_t i = 0; i < n; i++) put16(out + 2 * i, f32_to_bf16(x[i])); break;
    case EMT_Q8_0:
        for (int64_t b = 0; b < n / 32; b++, out += 34) {
            float amax = 0;
            for (int j = 0; j < 32; j++) amax = fmaxf(amax, fabsf(x[b * 32 + j]));
            float d = amax / 127.0f, id = d ? 1.0f / d : 0;
            put16(out, emt_f32_to_f16(d));
            for (int j = 0; j < 32; j++) out[2 + j] = (uint8_t)(int8_t)lroundf(x[b * 32 + j] * id);
        }
        break;
    case EMT_Q4_0: emt_quantize_q4_0(x, n, out); break;
    case EMT_Q4_1:
        for (int64_t b = 0; b < n / 32; b++, out += 20) {
            float mn = x[b * 32], mx = x[b * 32];
            for (int j = 1; j < 32; j++) { mn = fminf(mn, x[b * 32 + j]); mx = fmaxf(mx, x[b * 32 + j]); }
            float d = (mx - mn) / 15.0f, id = d ? 1.0f / d : 0;
            put16(out, emt_f32_to_f16(d));
            put16(out + 2, emt_f32_to_f16(mn));
            for (int j = 0; j < 16; j++) {
                int q0 = (int)((x[b * 32 + j] - mn) * id + 0.5f), q1 = (int)((x[b * 32 + j + 16] - mn) * id + 0.5f);
                q0 = q0 > 15 ? 15 : q0;
                q1 = q1 > 15 ? 15 : q1;
                out[4 + j] = (uint8_t)(q0 | (q1 << 4));
            }
        }
        break;
    default: /* Q5_0, Q5_1 and the K-quants: the library's quantizers */
        if (emt_quantize_blocks(type, x, n, out)) abort();
    }
}

static void encode(const wtensor *t, uint8_t *out) {
    emt_tiny_encode(t->type, t->data, t->shape[0] * (t->n_dims == 2 ? t->shape[1] : 1), out);
}

/* ----------------------------------------------------- logical model */

/* Fills `l` with the model's tensors under HF names, in F32. */
static void build_model(const emt_tiny_config *c, wlist *l) {
    const int64_t H = c->hidden, F = c->ffn, hd = c->hidden / c->n_heads;
    const int64_t q = (int64_t)c->n_heads * hd, kv = (int64_t)c->n_kv_heads * hd;
    float sH = 1.5f / sqrtf((float)H), sF = 1.5f / sqrtf((float)F);
    fill(add(l, "model.embed_tokens.weight", c->vocab, H, EMT_F32), c->seed, "model.embed_tokens.weight", 1.0f, 0);
    char n[128];
    for (int32_t i = 0; i < c->n_layers; i++) {
#define W(suffix, d0, d1, sc, off)                                                    \
    snprintf(n, sizeof n, "model.layers.%d." suffix, i);                              \
    fill(add(l, n, d0, d1, EMT_F32), c->seed, n, sc, off)
        W("input_layernorm.weight", H, 0, 0.1f, 1.0f);
        W("self_attn.q_proj.weight", q, H, sH, 0);
        W("self_attn.k_proj.weight", kv, H, sH, 0);
        W("self_attn.v_proj.weight", kv, H, sH, 0);
        W("self_attn.o_proj.weight", H, q, sH, 0);
        W("post_attention_layernorm.weight", H, 0, 0.1f, 1.0f);
        W("mlp.gate_proj.weight", F, H, sH, 0);
        W("mlp.up_proj.weight", F, H, sH, 0);
        W("mlp.down_proj.weight", H, F, sF, 0);
#undef W
    }
    fill(add(l, "model.norm.weight", H, 0, EMT_F32), c->seed, "model.norm.weight", 0.1f, 1.0f);
    if (!c->tied) fill(add(l, "lm_head.weight", c->vocab, H, EMT_F32), c->seed, "lm_head.weight", 4.0f * sH, 0);
}

static entmtp_status check_config(const emt_tiny_config *c) {
    if (c->hidden % c->n_heads || c->n_heads % c->n_kv_heads || (c->hidden / c->n_heads) % 2)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "tiny model: heads do not divide the hidden size");
    if (c->with_tokenizer && c->vocab < 261)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "tiny model: a tokenizer needs vocab >= 261 (got %d)", c->vocab);
    return ENTMTP_OK;
}

/* ------------------------------------------------------------------ GGUF */

typedef struct buf {
    uint8_t *p;
    size_t n, cap;
} buf;

static void bput(buf *b, const void *d, size_t n) {
    if (b->n + n > b->cap) {
        while (b->n + n > b->cap) b->cap = b->cap ? 2 * b->cap : 4096;
        b->p = realloc(b->p, b->cap);
        if (!b->p) abort();
    }
    memcpy(b->p + b->n, d, n);
    b->n += n;
}
static void bu32(buf *b, uint32_t v) { bput(b, &v, 4); }
static void bu64(buf *b, uint64_t v) { bput(b, &v, 8); }
static void bstr(buf *b, const char *s) { bu64(b, strlen(s)); bput(b, s, strlen(s)); }
static void kv_u32(buf *b, const char *k, uint32_t v) { bstr(b, k); bu32(b, 4); bu32(b, v); }
static void kv_f32(buf *b, const char *k, float v) { bstr(b, k); bu32(b, 6); bput(b, &v, 4); }
static void kv_str(buf *b, const char *k, const char *v) { bstr(b, k); bu32(b, 8); bstr(b, v); }

/* GPT-2's byte-to-unicode map, as UTF-8 */
static void byte_token(int byte, char *out) {
    int cp;
    if ((byte >= 33 && byte <= 126) || (byte >= 161 && byte <= 172) || (byte >= 174 && byte <= 255)) {
        cp = byte;
    } else {
        int k = 0;
        for (int b = 0; b < byte; b++)
            if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))) k++;
        cp = 256 + k;
    }
    if (cp < 0x80) { out[0] = (char)cp; out[1] = 0; }
    else { out[0] = (char)(0xC0 | (cp >> 6)); out[1] = (char)(0x80 | (cp & 0x3F)); out[2] = 0; }
}

static const char *g_chatml =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

static void write_tokenizer(buf *b, const emt_tiny_config *c, uint64_t *n_kv) {
    static const char *specials[] = { "<|endoftext|>", "<|im_start|>", "<|im_end|>" };
    static const char *merges[] = { "Ġ t", "h e", "Ġt he" };
    static const char *merged[] = { "Ġt", "he", "Ġthe" };
    int32_t n = 3 + 256 + 3;
    kv_str(b, "tokenizer.ggml.model", "gpt2");
    kv_str(b, "tokenizer.ggml.pre", "smollm");
    bstr(b, "tokenizer.ggml.tokens");
    bu32(b, 9);
    bu32(b, 8);
    bu64(b, (uint64_t)c->vocab);
    char tok[8];
    for (int32_t i = 0; i < c->vocab; i++) {
        if (i < 3) bstr(b, specials[i]);
        else if (i < 259) { byte_token(i - 3, tok); bstr(b, tok); }
        else if (i < n) bstr(b, merged[i - 259]);
        else { char pad[32]; snprintf(pad, sizeof pad, "<pad_%d>", i); bstr(b, pad); }
    }
    bstr(b, "tokenizer.ggml.token_type");
    bu32(b, 9);
    bu32(b, 5);
    bu64(b, (uint64_t)c->vocab);
    for (int32_t i = 0; i < c->vocab; i++) bu32(b, i < 3 || i >= n ? 3 : 1);
    bstr(b, "tokenizer.ggml.merges");
    bu32(b, 9);
    bu32(b, 8);
    bu64(b, 3);
    for (int i = 0; i < 3; i++) bstr(b, merges[i]);
    kv_u32(b, "tokenizer.ggml.bos_token_id", 1);
    kv_u32(b, "tokenizer.ggml.eos_token_id", 2);
    kv_u32(b, "tokenizer.ggml.unknown_token_id", 0);
    kv_str(b, "tokenizer.chat_template", g_chatml);
    *n_kv += 9;
}

static const char *gguf_name(const char *hf, char *out, size_t cap) {
    int layer;
    char rest[96];
    static const char *map[][2] = {
        { "input_layernorm.weight", "attn_norm.weight" }, { "self_attn.q_proj.weight", "attn_q.weight" },
        { "self_attn.k_proj.weight", "attn_k.weight" },   { "self_attn.v_proj.weight", "attn_v.weight" },
        { "self_attn.o_proj.weight", "attn_output.weight" }, { "post_attention_layernorm.weight", "ffn_norm.weight" },
        { "mlp.gate_proj.weight", "ffn_gate.weight" },    { "mlp.up_proj.weight", "ffn_up.weight" },
        { "mlp.down_proj.weight", "ffn_down.weight" },
    };
    if (!strcmp(hf, "model.embed_tokens.weight")) return "token_embd.weight";
    if (!strcmp(hf, "model.norm.weight")) return "output_norm.weight";
    if (!strcmp(hf, "lm_head.weight")) return "output.weight";
    if (sscanf(hf, "model.layers.%d.%95s", &layer, rest) == 2)
        for (size_t i = 0; i < sizeof map / sizeof map[0]; i++)
            if (!strcmp(rest, map[i][0])) { snprintf(out, cap, "blk.%d.%s", layer, map[i][1]); return out; }
    return hf;
}

/* llama.cpp's converter: GGUF row h*hd + 2i + t = HF row h*hd + t*hd/2 + i */
static void permute_rows(wtensor *t, int32_t heads) {
    int64_t rows = t->shape[0], cols = t->shape[1], hd = rows / heads;
    float *out = malloc((size_t)(rows * cols) * sizeof(float));
    if (!out) abort();
    for (int64_t h = 0; h < heads; h++)
        for (int64_t i = 0; i < hd / 2; i++)
            for (int64_t k = 0; k < 2; k++)
                memcpy(out + (h * hd + 2 * i + k) * cols, t->data + (h * hd + k * (hd / 2) + i) * cols, (size_t)cols * sizeof(float));
    free(t->data);
    t->data = out;
}

static entmtp_status write_bytes(const char *path, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f) return emt_fail(ENTMTP_ERR_IO, "%s: cannot create: %s", path, strerror(errno));
    size_t w = fwrite(p, 1, n, f);
    int bad = fclose(f) != 0 || w != n;
    return bad ? emt_fail(ENTMTP_ERR_IO, "%s: write failed", path) : ENTMTP_OK;
}

entmtp_status emt_tiny_write_gguf(const char *path, const emt_tiny_config *c, emt_dtype weight_type) {
    entmtp_status st = check_config(c);
    if (st) return st;
    wlist l = { 0 };
    build_model(c, &l);
    int32_t hd = c->hidden / c->n_heads;
    char names[256][96];
    for (int32_t i = 0; i < l.n; i++) {
        wtensor *t = &l.t[i];
        if (strstr(t->name, "q_proj.weight")) permute_rows(t, c->n_heads);
        if (strstr(t->name, "k_proj.weight")) permute_rows(t, c->n_kv_heads);
        if (t->n_dims == 2 && t->shape[1] % (int64_t)emt_dtype_block_elems(weight_type) == 0) t->type = weight_type;
        char tmp[96];
        const char *gn = gguf_name(t->name, tmp, sizeof tmp);
        snprintf(names[i], sizeof names[i], "%.95s", gn);
    }
    buf b = { 0 };
    bput(&b, "GGUF", 4);
    bu32(&b, 3);
    bu64(&b, (uint64_t)l.n);
    size_t nkv_at = b.n;
    bu64(&b, 0);
    uint64_t n_kv = 13;
    kv_str(&b, "general.architecture", "llama");
    kv_str(&b, "general.name", "tiny \"llama\""); /* a quote: JSON writers must escape the name */
    kv_u32(&b, "general.alignment", 32);
    kv_u32(&b, "llama.context_length", (uint32_t)c->ctx);
    kv_u32(&b, "llama.embedding_length", (uint32_t)c->hidden);
    kv_u32(&b, "llama.feed_forward_length", (uint32_t)c->ffn);
    kv_u32(&b, "llama.block_count", (uint32_t)c->n_layers);
    kv_u32(&b, "llama.attention.head_count", (uint32_t)c->n_heads);
    kv_u32(&b, "llama.attention.head_count_kv", (uint32_t)c->n_kv_heads);
    kv_f32(&b, "llama.rope.freq_base", c->rope_theta);
    kv_f32(&b, "llama.attention.layer_norm_rms_epsilon", c->rms_eps);
    kv_u32(&b, "llama.rope.dimension_count", (uint32_t)hd);
    kv_u32(&b, "llama.vocab_size", (uint32_t)c->vocab);
    if (c->with_tokenizer) write_tokenizer(&b, c, &n_kv);
    memcpy(b.p + nkv_at, &n_kv, 8);
    uint64_t off = 0;
    for (int32_t i = 0; i < l.n; i++) {
        wtensor *t = &l.t[i];
        static const uint32_t ggml[] = { [EMT_F32] = 0, [EMT_F16] = 1, [EMT_BF16] = 30, [EMT_Q8_0] = 8, [EMT_Q4_0] = 2, [EMT_Q4_1] = 3,
                                         [EMT_Q5_0] = 6, [EMT_Q5_1] = 7, [EMT_Q4_K] = 12, [EMT_Q5_K] = 13, [EMT_Q6_K] = 14 };
        bstr(&b, names[i]);
        bu32(&b, (uint32_t)t->n_dims);
        for (int32_t d = t->n_dims - 1; d >= 0; d--) bu64(&b, (uint64_t)t->shape[d]);
        bu32(&b, ggml[t->type]);
        bu64(&b, off);
        off += (encoded_size(t) + 31) / 32 * 32;
    }
    static const uint8_t zeros[32];
    bput(&b, zeros, (32 - b.n % 32) % 32);
    for (int32_t i = 0; i < l.n; i++) {
        size_t sz = encoded_size(&l.t[i]);
        uint8_t *tmp = malloc(sz);
        if (!tmp) abort();
        encode(&l.t[i], tmp);
        bput(&b, tmp, sz);
        free(tmp);
        bput(&b, zeros, (32 - sz % 32) % 32);
    }
    st = write_bytes(path, b.p, b.n);
    free(b.p);
    free_list(&l);
    return st;
}

/* ----------------------------------------------------------- safetensors */

static entmtp_status write_safetensors(const char *path, wtensor *ts, int32_t n, const char *meta_json) {
    buf h = { 0 };
    const char *open = "{";
    bput(&h, open, 1);
    char tmp[512];
    int first = 1;
    if (meta_json) {
        bput(&h, "\"__metadata__\":", 15);
        bput(&h, meta_json, strlen(meta_json));
        first = 0;
    }
    uint64_t off = 0;
    for (int32_t i = 0; i < n; i++) {
        size_t sz = encoded_size(&ts[i]);
        int k = snprintf(tmp, sizeof tmp, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld%s%lld],\"data_offsets\":[%llu,%llu]}",
                         first ? "" : ",", ts[i].name, emt_dtype_name(ts[i].type), (long long)ts[i].shape[0],
                         ts[i].n_dims == 2 ? "," : "", ts[i].n_dims == 2 ? (long long)ts[i].shape[1] : 0LL,
                         (unsigned long long)off, (unsigned long long)(off + sz));
        if (ts[i].n_dims == 1) { /* drop the placeholder second dimension */
            k = snprintf(tmp, sizeof tmp, "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld],\"data_offsets\":[%llu,%llu]}",
                         first ? "" : ",", ts[i].name, emt_dtype_name(ts[i].type), (long long)ts[i].shape[0],
                         (unsigned long long)off, (unsigned long long)(off + sz));
        }
        bput(&h, tmp, (size_t)k);
        off += sz;
        first = 0;
    }
    bput(&h, "}", 1);
    while (h.n % 8) bput(&h, " ", 1);
    buf out = { 0 };
    uint64_t hl = h.n;
    bput(&out, &hl, 8);
    bput(&out, h.p, h.n);
    for (int32_t i = 0; i < n; i++) {
        size_t sz = encoded_size(&ts[i]);
        uint8_t *tmpb = malloc(sz ? sz : 1);
        if (!tmpb) abort();
        encode(&ts[i], tmpb);
        bput(&out, tmpb, sz);
        free(tmpb);
    }
    entmtp_status st = write_bytes(path, out.p, out.n);
    free(h.p);
    free(out.p);
    return st;
}

entmtp_status emt_tiny_write_hf(const char *dir, const emt_tiny_config *c, emt_dtype weight_type, int n_shards) {
    entmtp_status st = check_config(c);
    if (st) return st;
    if (n_shards < 1) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "tiny model: n_shards = %d", n_shards);
    mkdir(dir, 0755);
    wlist l = { 0 };
    build_model(c, &l);
    for (int32_t i = 0; i < l.n; i++) l.t[i].type = weight_type;
    char path[1024];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) { free_list(&l); return emt_fail(ENTMTP_ERR_IO, "%s: cannot create", path); }
    fprintf(f, "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\",\"hidden_size\":%d,"
               "\"intermediate_size\":%d,\"num_hidden_layers\":%d,\"num_attention_heads\":%d,"
               "\"num_key_value_heads\":%d,\"vocab_size\":%d,\"max_position_embeddings\":%d,"
               "\"rope_theta\":%.9g,\"rms_norm_eps\":%.9g,\"tie_word_embeddings\":%s,\"rope_scaling\":null,"
               "\"bos_token_id\":1,\"eos_token_id\":2,\"hidden_act\":\"silu\",\"torch_dtype\":\"float32\"}\n",
            c->hidden, c->ffn, c->n_layers, c->n_heads, c->n_kv_heads, c->vocab, c->ctx, (double)c->rope_theta,
            (double)c->rms_eps, c->tied ? "true" : "false");
    fclose(f);
    if (n_shards == 1) {
        snprintf(path, sizeof path, "%s/model.safetensors", dir);
        st = write_safetensors(path, l.t, l.n, "{\"format\":\"pt\"}");
    } else {
        snprintf(path, sizeof path, "%s/model.safetensors.index.json", dir);
        FILE *ix = fopen(path, "w");
        if (!ix) { free_list(&l); return emt_fail(ENTMTP_ERR_IO, "%s: cannot create", path); }
        fprintf(ix, "{\"metadata\":{},\"weight_map\":{");
        int32_t per = (l.n + n_shards - 1) / n_shards;
        for (int s = 0; s < n_shards && !st; s++) {
            int32_t a = s * per, e = a + per < l.n ? a + per : l.n;
            char shard[64];
            snprintf(shard, sizeof shard, "model-%05d-of-%05d.safetensors", s + 1, n_shards);
            for (int32_t i = a; i < e; i++) fprintf(ix, "%s\"%s\":\"%s\"", i ? "," : "", l.t[i].name, shard);
            snprintf(path, sizeof path, "%s/%s", dir, shard);
            if (e > a) st = write_safetensors(path, l.t + a, e - a, "{\"format\":\"pt\"}");
        }
        fprintf(ix, "}}\n");
        fclose(ix);
    }
    free_list(&l);
    return st;
}

/* The optional draft vocabulary tensor of a heads file (I32 ids). */
static void add_draft_vocab(wlist *l, const int32_t *ids, int32_t n) {
    if (!ids || n <= 0) return;
    wtensor *t = add(l, "draft_vocab", n, 0, EMT_I32);
    for (int32_t i = 0; i < n; i++) t->data[i] = (float)ids[i];
}

static entmtp_status write_medusa(const char *path, int32_t hidden, int32_t vocab, int32_t n_heads, int32_t n_layers,
                                  int with_lm_head, uint64_t seed, const int32_t *draft, int32_t n_draft) {
    wlist l = { 0 };
    char n[128];
    float s = 1.0f / sqrtf((float)hidden);
    for (int32_t h = 0; h < n_heads; h++) {
        for (int32_t k = 0; k < n_layers; k++) {
            snprintf(n, sizeof n, "%d.%d.linear.weight", h, k);
            fill(add(&l, n, hidden, hidden, EMT_F32), seed, n, s, 0);
            snprintf(n, sizeof n, "%d.%d.linear.bias", h, k);
            fill(add(&l, n, hidden, 0, EMT_F32), seed, n, 0.1f, 0);
        }
        if (with_lm_head) {
            snprintf(n, sizeof n, "%d.%d.weight", h, n_layers);
            fill(add(&l, n, vocab, hidden, EMT_F32), seed, n, 4.0f * s, 0);
        }
    }
    add_draft_vocab(&l, draft, n_draft);
    char meta[128];
    snprintf(meta, sizeof meta, "{\"format\":\"pt\",\"entmtp.heads\":\"medusa\",\"entmtp.n_heads\":\"%d\"}", n_heads);
    entmtp_status st = write_safetensors(path, l.t, l.n, meta);
    free_list(&l);
    return st;
}

static entmtp_status write_hydra(const char *path, int32_t hidden, int32_t vocab, int32_t n_heads, int32_t n_layers,
                                 int with_lm_head, uint64_t seed, const int32_t *draft, int32_t n_draft) {
    wlist l = { 0 };
    char n[128];
    for (int32_t i = 0; i < n_heads; i++) {
        int64_t in0 = (int64_t)hidden * (i + 2);
        float s0 = 1.0f / sqrtf((float)in0), s = 1.0f / sqrtf((float)hidden);
        snprintf(n, sizeof n, "hydra_mlp.%d.0.linear.weight", i);
        fill(add(&l, n, hidden, in0, EMT_F32), seed, n, s0, 0);
        snprintf(n, sizeof n, "hydra_mlp.%d.0.linear.bias", i);
        fill(add(&l, n, hidden, 0, EMT_F32), seed, n, 0.1f, 0);
        snprintf(n, sizeof n, "hydra_mlp.%d.0.res_connection.weight", i);
        fill(add(&l, n, hidden, in0, EMT_F32), seed, n, s0, 0);
        snprintf(n, sizeof n, "hydra_mlp.%d.0.res_connection.bias", i);
        fill(add(&l, n, hidden, 0, EMT_F32), seed, n, 0.1f, 0);
        for (int32_t k = 1; k < n_layers; k++) {
            snprintf(n, sizeof n, "hydra_mlp.%d.%d.linear.weight", i, k);
            fill(add(&l, n, hidden, hidden, EMT_F32), seed, n, s, 0);
            snprintf(n, sizeof n, "hydra_mlp.%d.%d.linear.bias", i, k);
            fill(add(&l, n, hidden, 0, EMT_F32), seed, n, 0.1f, 0);
        }
        if (with_lm_head) {
            snprintf(n, sizeof n, "hydra_lm_head.%d.weight", i);
            fill(add(&l, n, vocab, hidden, EMT_F32), seed, n, 4.0f * s, 0);
            snprintf(n, sizeof n, "hydra_lm_head.%d.bias", i);
            fill(add(&l, n, vocab, 0, EMT_F32), seed, n, 0.1f, 0);
        }
    }
    add_draft_vocab(&l, draft, n_draft);
    char meta[128];
    snprintf(meta, sizeof meta, "{\"format\":\"pt\",\"entmtp.heads\":\"hydra\",\"entmtp.n_heads\":\"%d\"}", n_heads);
    entmtp_status st = write_safetensors(path, l.t, l.n, meta);
    free_list(&l);
    return st;
}

entmtp_status emt_tiny_write_heads_draft(const char *path, entmtp_heads_kind kind, int32_t hidden, int32_t vocab,
                                         int32_t n_heads, int32_t n_layers, int with_lm_head, uint64_t seed,
                                         const int32_t *draft_ids, int32_t n_draft) {
    return kind == ENTMTP_HEADS_HYDRA
               ? write_hydra(path, hidden, vocab, n_heads, n_layers, with_lm_head, seed, draft_ids, n_draft)
               : write_medusa(path, hidden, vocab, n_heads, n_layers, with_lm_head, seed, draft_ids, n_draft);
}

entmtp_status emt_tiny_write_medusa_heads(const char *path, int32_t hidden, int32_t vocab, int32_t n_heads,
                                          int32_t n_layers, int with_lm_head, uint64_t seed) {
    return write_medusa(path, hidden, vocab, n_heads, n_layers, with_lm_head, seed, NULL, 0);
}

entmtp_status emt_tiny_write_hydra_heads(const char *path, int32_t hidden, int32_t vocab, int32_t n_heads,
                                         int32_t n_layers, int with_lm_head, uint64_t seed) {
    return write_hydra(path, hidden, vocab, n_heads, n_layers, with_lm_head, seed, NULL, 0);
}

/* ------------------------------------------------------------- EAGLE-3 */

entmtp_status emt_tiny_write_eagle3(const char *dir, const emt_tiny_eagle3 *e) {
    mkdir(dir, 0755);
    const int32_t H = e->hidden, q = e->n_heads * e->head_dim, kv = e->n_kv_heads * e->head_dim;
    const int32_t T = e->target_hidden ? e->target_hidden : H;
    wlist l = { 0 };
    float s = 1.0f / sqrtf((float)H);
    fill(add(&l, "fc.weight", H, 3 * T, EMT_F32), e->seed, "fc.weight", 1.0f / sqrtf(3.0f * T), 0);
    fill(add(&l, "midlayer.self_attn.q_proj.weight", q, 2 * H, EMT_F32), e->seed, "q", s, 0);
    fill(add(&l, "midlayer.self_attn.k_proj.weight", kv, 2 * H, EMT_F32), e->seed, "k", s, 0);
    fill(add(&l, "midlayer.self_attn.v_proj.weight", kv, 2 * H, EMT_F32), e->seed, "v", s, 0);
    fill(add(&l, "midlayer.self_attn.o_proj.weight", H, q, EMT_F32), e->seed, "o", 1.0f / sqrtf((float)q), 0);
    fill(add(&l, "midlayer.hidden_norm.weight", H, 0, EMT_F32), e->seed, "hn", 0.1f, 1.0f);
    fill(add(&l, "midlayer.input_layernorm.weight", H, 0, EMT_F32), e->seed, "in", 0.1f, 1.0f);
    fill(add(&l, "midlayer.post_attention_layernorm.weight", H, 0, EMT_F32), e->seed, "pn", 0.1f, 1.0f);
    fill(add(&l, "midlayer.mlp.gate_proj.weight", e->ffn, H, EMT_F32), e->seed, "gate", s, 0);
    fill(add(&l, "midlayer.mlp.up_proj.weight", e->ffn, H, EMT_F32), e->seed, "up", s, 0);
    fill(add(&l, "midlayer.mlp.down_proj.weight", H, e->ffn, EMT_F32), e->seed, "down", 1.0f / sqrtf((float)e->ffn), 0);
    fill(add(&l, "norm.weight", H, 0, EMT_F32), e->seed, "norm", 0.1f, 1.0f);
    fill(add(&l, "lm_head.weight", e->n_draft, H, EMT_F32), e->seed, "lm_head", 4.0f * s, 0);
    if (e->own_embed) fill(add(&l, "embed_tokens.weight", e->vocab, H, EMT_F32), e->seed, "embed", 1.0f, 0);
    /* draft id i -> target (7 i + 3) mod vocab (7 is prime to the test vocabularies) */
    wtensor *d2t = add(&l, "d2t", e->n_draft, 0, EMT_I64);
    wtensor *t2d = add(&l, "t2d", e->vocab, 0, EMT_BOOL);
    memset(t2d->data, 0, (size_t)e->vocab * sizeof(float));
    for (int32_t i = 0; i < e->n_draft; i++) {
        int32_t target = e->n_draft == e->vocab ? i : (int32_t)((7 * (int64_t)i + 3) % e->vocab);
        d2t->data[i] = (float)(target - i);
        t2d->data[target] = 1;
    }
    char path[1024];
    snprintf(path, sizeof path, "%s/config.json", dir);
    FILE *f = fopen(path, "w");
    if (!f) { free_list(&l); return emt_fail(ENTMTP_ERR_IO, "%s: cannot create", path); }
    fprintf(f, "{\"architectures\":[\"LlamaForCausalLMEagle3\"],\"model_type\":\"llama\",\"hidden_size\":%d,"
               "\"intermediate_size\":%d,\"num_hidden_layers\":1,\"num_attention_heads\":%d,"
               "\"num_key_value_heads\":%d,\"head_dim\":%d,\"vocab_size\":%d,\"draft_vocab_size\":%d,"
               "\"rope_theta\":%.9g,\"rms_norm_eps\":1e-05,\"rope_scaling\":null,\"tie_word_embeddings\":false,"
               "\"eagle_config\":{\"eagle_aux_hidden_state_layer_ids\":[%d,%d,%d]}}\n",
            H, e->ffn, e->n_heads, e->n_kv_heads, e->head_dim, e->vocab, e->n_draft, (double)e->rope_theta,
            e->taps[0], e->taps[1], e->taps[2]);
    fclose(f);
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    entmtp_status st = write_safetensors(path, l.t, l.n, "{\"format\":\"pt\"}");
    free_list(&l);
    return st;
}
