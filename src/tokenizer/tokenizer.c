/* Byte-level BPE with PCRE2 pre-tokenization (GPT-2 family: SmolLM, Llama 3,
 * StarCoder...) and single-turn chat formatting. See docs/tokenizer.md. */
#define PCRE2_CODE_UNIT_WIDTH 8
#include "tokenizer/tokenizer.h"

#include <pcre2.h>
#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------ hash maps */

typedef struct str_map { /* bytes -> id */
    uint32_t cap;
    int32_t *slot; /* token id or -1 */
} str_map;

static uint64_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (uint8_t)s[i]) * 1099511628211ull;
    return h;
}

typedef struct pair_map { /* (left, right) -> rank, merged */
    uint32_t cap;
    uint64_t *key;
    int32_t *rank, *merged;
} pair_map;

struct emt_tokenizer {
    int32_t n;
    char **text;       /* token text as stored (byte-level unicode for gpt2) */
    size_t *len;
    char **bytes;      /* decoded bytes of each token */
    size_t *nbytes;
    int32_t *type;
    str_map vocab;
    pair_map merges;
    int32_t byte_token[256]; /* id of each single byte's symbol, -1 if none */
    char byte_char[256][4];  /* the byte-level unicode char of each byte (UTF-8) */
    uint8_t byte_char_len[256];
    pcre2_code *pre[2];      /* applied in sequence */
    int n_pre;
    int32_t bos, eos, unk, eot;
    int add_bos;
    char *chat_template;
    int32_t *specials;       /* control/user-defined ids, longest text first */
    int32_t n_specials;
};

static void map_free(str_map *m) { free(m->slot); }

static int32_t map_get(const emt_tokenizer *t, const char *s, size_t n) {
    if (!t->vocab.cap) return -1;
    uint32_t mask = t->vocab.cap - 1;
    for (uint32_t i = (uint32_t)hash_bytes(s, n) & mask;; i = (i + 1) & mask) {
        int32_t id = t->vocab.slot[i];
        if (id < 0) return -1;
        if (t->len[id] == n && !memcmp(t->text[id], s, n)) return id;
    }
}

static entmtp_status build_vocab_map(emt_tokenizer *t) {
    uint32_t cap = 16;
    while (cap < (uint32_t)t->n * 2u + 2u) cap <<= 1;
    t->vocab.cap = cap;
    t->vocab.slot = emt_malloc(cap, sizeof(int32_t));
    if (!t->vocab.slot) return ENTMTP_ERR_OUT_OF_MEMORY;
    for (uint32_t i = 0; i < cap; i++) t->vocab.slot[i] = -1;
    for (int32_t id = 0; id < t->n; id++) {
        if (map_get(t, t->text[id], t->len[id]) >= 0) continue; /* first id wins */
        uint32_t mask = cap - 1;
        uint32_t i = (uint32_t)hash_bytes(t->text[id], t->len[id]) & mask;
        while (t->vocab.slot[i] >= 0) i = (i + 1) & mask;
        t->vocab.slot[i] = id;
    }
    return ENTMTP_OK;
}

static int32_t pair_get(const pair_map *m, int32_t a, int32_t b, int32_t *merged) {
    if (!m->cap) return -1;
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    uint32_t mask = m->cap - 1;
    for (uint32_t i = (uint32_t)(key * 0x9E3779B97F4A7C15ull >> 32) & mask;; i = (i + 1) & mask) {
        if (m->rank[i] < 0) return -1;
        if (m->key[i] == key) { *merged = m->merged[i]; return m->rank[i]; }
    }
}

static void pair_put(pair_map *m, int32_t a, int32_t b, int32_t rank, int32_t merged) {
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    uint32_t mask = m->cap - 1;
    uint32_t i = (uint32_t)(key * 0x9E3779B97F4A7C15ull >> 32) & mask;
    while (m->rank[i] >= 0) {
        if (m->key[i] == key) return; /* first (lowest) rank wins */
        i = (i + 1) & mask;
    }
    m->key[i] = key;
    m->rank[i] = rank;
    m->merged[i] = merged;
}

/* ------------------------------------------------------- byte <-> unicode */

static int gpt2_printable(int b) { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255); }

static void init_byte_chars(emt_tokenizer *t) {
    int extra = 0;
    for (int b = 0; b < 256; b++) {
        int cp = gpt2_printable(b) ? b : 256 + extra++;
        if (cp < 0x80) { t->byte_char[b][0] = (char)cp; t->byte_char_len[b] = 1; }
        else { t->byte_char[b][0] = (char)(0xC0 | (cp >> 6)); t->byte_char[b][1] = (char)(0x80 | (cp & 0x3F)); t->byte_char_len[b] = 2; }
    }
}

/* decode one UTF-8 code point; returns its length (1 on invalid input) */
static int utf8_next(const unsigned char *s, size_t n, uint32_t *cp) {
    if (s[0] < 0x80) { *cp = s[0]; return 1; }
    int len = s[0] >= 0xF0 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC0 ? 2 : 1;
    if (len == 1 || (size_t)len > n) { *cp = 0xFFFFFFFF; return 1; }
    uint32_t v = s[0] & (0x3F >> (len - 1));
    for (int i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80) { *cp = 0xFFFFFFFF; return 1; }
        v = (v << 6) | (s[i] & 0x3F);
    }
    *cp = v;
    return len;
}

/* token text in byte-level unicode -> raw bytes */
static entmtp_status decode_token(emt_tokenizer *t, int32_t id) {
    const unsigned char *s = (const unsigned char *)t->text[id];
    size_t n = t->len[id];
    char *out = emt_malloc(n + 1, 1);
    if (!out) return ENTMTP_ERR_OUT_OF_MEMORY;
    size_t k = 0;
    int special = t->type[id] == EMT_TOKEN_CONTROL || t->type[id] == EMT_TOKEN_USER_DEFINED;
    for (size_t i = 0; i < n;) {
        uint32_t cp;
        int l = utf8_next(s + i, n - i, &cp);
        int byte = -1;
        if (!special) {
            if (cp < 256 && gpt2_printable((int)cp)) byte = (int)cp;
            else if (cp >= 256 && cp < 256 + 68) {
                int extra = (int)cp - 256, seen = 0;
                for (int b = 0; b < 256; b++)
                    if (!gpt2_printable(b) && seen++ == extra) { byte = b; break; }
            }
        }
        if (byte >= 0) out[k++] = (char)byte;
        else { memcpy(out + k, s + i, (size_t)l); k += (size_t)l; }
        i += (size_t)l;
    }
    t->bytes[id] = out;
    t->nbytes[id] = k;
    return ENTMTP_OK;
}

/* ---------------------------------------------------------------- create */

static const char *PAT_GPT2 =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
static const char *PAT_LLAMA3 =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
static const char *PAT_DIGIT = "\\p{N}";

static entmtp_status compile(emt_tokenizer *t, const char *pat) {
    int err;
    PCRE2_SIZE off;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)pat, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP | PCRE2_NO_UTF_CHECK,
                                   &err, &off, NULL);
    if (!re) return emt_fail(ENTMTP_ERR_UNSUPPORTED, "tokenizer: pre-tokenizer pattern does not compile (PCRE2 error %d at %zu)", err, (size_t)off);
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* optional speed-up; falls back to the interpreter */
    t->pre[t->n_pre++] = re;
    return ENTMTP_OK;
}

void emt_tokenizer_free(emt_tokenizer *t) {
    if (!t) return;
    for (int32_t i = 0; i < t->n; i++) {
        if (t->text) free(t->text[i]);
        if (t->bytes) free(t->bytes[i]);
    }
    free(t->text);
    free(t->len);
    free(t->bytes);
    free(t->nbytes);
    free(t->type);
    map_free(&t->vocab);
    free(t->merges.key);
    free(t->merges.rank);
    free(t->merges.merged);
    for (int i = 0; i < t->n_pre; i++) pcre2_code_free(t->pre[i]);
    free(t->chat_template);
    free(t->specials);
    free(t);
}

entmtp_status emt_tokenizer_create(const emt_tokenizer_spec *spec, emt_tokenizer **out) {
    *out = NULL;
    if (!spec || spec->n_tokens < 1 || !spec->tokens)
        return emt_fail(ENTMTP_ERR_FORMAT, "tokenizer: no tokens");
    const char *model = spec->model ? spec->model : "gpt2";
    if (!strcmp(model, "llama"))
        return emt_fail(ENTMTP_ERR_UNSUPPORTED, "tokenizer model 'llama' (SentencePiece) is not supported yet; models run on token ids");
    if (strcmp(model, "gpt2") != 0)
        return emt_fail(ENTMTP_ERR_UNSUPPORTED, "tokenizer model '%s' is not supported (gpt2 byte-level BPE)", model);
    const char *pre = spec->pre ? spec->pre : "default";
    int32_t ids[5] = { spec->bos, spec->eos, spec->unk, spec->pad, spec->eot };
    static const char *id_names[5] = { "bos", "eos", "unk", "pad", "eot" };
    for (int i = 0; i < 5; i++)
        if (ids[i] < -1 || ids[i] >= spec->n_tokens)
            return emt_fail(ENTMTP_ERR_FORMAT, "tokenizer: %s token id %d is outside the vocabulary of %d", id_names[i], ids[i], spec->n_tokens);
    emt_tokenizer *t = emt_calloc(1, sizeof *t);
    if (!t) return ENTMTP_ERR_OUT_OF_MEMORY;
    entmtp_status st = ENTMTP_OK;
    t->n = spec->n_tokens;
    t->bos = spec->bos;
    t->eos = spec->eos;
    t->unk = spec->unk;
    t->eot = spec->eot;
    t->add_bos = spec->add_bos;
    t->text = emt_calloc((size_t)t->n, sizeof *t->text);
    t->len = emt_calloc((size_t)t->n, sizeof *t->len);
    t->bytes = emt_calloc((size_t)t->n, sizeof *t->bytes);
    t->nbytes = emt_calloc((size_t)t->n, sizeof *t->nbytes);
    t->type = emt_calloc((size_t)t->n, sizeof *t->type);
    if (!t->text || !t->len || !t->bytes || !t->nbytes || !t->type) { st = ENTMTP_ERR_OUT_OF_MEMORY; goto fail; }
    init_byte_chars(t);
    for (int32_t i = 0; i < t->n; i++) {
        size_t n = spec->token_lens ? spec->token_lens[i] : strlen(spec->tokens[i]);
        t->text[i] = emt_malloc(n + 1, 1);
        if (!t->text[i]) { st = ENTMTP_ERR_OUT_OF_MEMORY; goto fail; }
        memcpy(t->text[i], spec->tokens[i], n);
        t->text[i][n] = '\0';
        t->len[i] = n;
        t->type[i] = spec->token_types ? spec->token_types[i] : EMT_TOKEN_NORMAL;
        if ((st = decode_token(t, i))) goto fail;
        if (t->type[i] == EMT_TOKEN_CONTROL || t->type[i] == EMT_TOKEN_USER_DEFINED) t->n_specials++;
    }
    if ((st = build_vocab_map(t))) goto fail;
    for (int b = 0; b < 256; b++) t->byte_token[b] = map_get(t, t->byte_char[b], t->byte_char_len[b]);
    /* specials, longest first so that the longest match wins */
    t->specials = emt_malloc((size_t)t->n_specials + 1, sizeof *t->specials);
    if (!t->specials) { st = ENTMTP_ERR_OUT_OF_MEMORY; goto fail; }
    {
        int32_t k = 0;
        for (int32_t i = 0; i < t->n; i++)
            if ((t->type[i] == EMT_TOKEN_CONTROL || t->type[i] == EMT_TOKEN_USER_DEFINED) && t->len[i] > 0) t->specials[k++] = i;
        t->n_specials = k;
        for (int32_t i = 1; i < k; i++) { /* insertion sort by length, descending */
            int32_t v = t->specials[i], j = i;
            while (j > 0 && t->len[t->specials[j - 1]] < t->len[v]) { t->specials[j] = t->specials[j - 1]; j--; }
            t->specials[j] = v;
        }
    }
    /* merges */
    if (spec->n_merges > 0) {
        uint32_t cap = 16;
        while (cap < (uint32_t)spec->n_merges * 2u + 2u) cap <<= 1;
        t->merges.cap = cap;
        t->merges.key = emt_malloc(cap, sizeof *t->merges.key);
        t->merges.rank = emt_malloc(cap, sizeof *t->merges.rank);
        t->merges.merged = emt_malloc(cap, sizeof *t->merges.merged);
        if (!t->merges.key || !t->merges.rank || !t->merges.merged) { st = ENTMTP_ERR_OUT_OF_MEMORY; goto fail; }
        for (uint32_t i = 0; i < cap; i++) t->merges.rank[i] = -1;
        char buf[1024];
        for (int32_t r = 0; r < spec->n_merges; r++) {
            const char *m = spec->merges[r];
            const char *sp = m ? strchr(m, ' ') : NULL;
            if (!sp || sp == m || !sp[1]) {
                st = emt_fail(ENTMTP_ERR_FORMAT, "tokenizer: merge %d ('%s') is not \"left right\"", r, m ? m : "");
                goto fail;
            }
            size_t la = (size_t)(sp - m), lb = strlen(sp + 1);
            int32_t a = map_get(t, m, la), b = map_get(t, sp + 1, lb);
            if (la + lb >= sizeof buf) { st = emt_fail(ENTMTP_ERR_FORMAT, "tokenizer: merge %d is too long", r); goto fail; }
            memcpy(buf, m, la);
            memcpy(buf + la, sp + 1, lb);
            int32_t c = map_get(t, buf, la + lb);
            if (a < 0 || b < 0 || c < 0) {
                st = emt_fail(ENTMTP_ERR_FORMAT, "tokenizer: merge %d ('%s'): %s is not in the vocabulary", r, m,
                              a < 0 ? "the left part" : b < 0 ? "the right part" : "the merged token");
                goto fail;
            }
            pair_put(&t->merges, a, b, r, c);
        }
    }
    if (!strcmp(pre, "smollm") || !strcmp(pre, "starcoder") || !strcmp(pre, "refact")) {
        if ((st = compile(t, PAT_DIGIT)) || (st = compile(t, PAT_GPT2))) goto fail;
    } else if (!strcmp(pre, "llama-bpe") || !strcmp(pre, "llama3")) {
        if ((st = compile(t, PAT_LLAMA3))) goto fail;
    } else if (!strcmp(pre, "gpt2") || !strcmp(pre, "default")) {
        if ((st = compile(t, PAT_GPT2))) goto fail;
    } else {
        st = emt_fail(ENTMTP_ERR_UNSUPPORTED, "tokenizer: pre-tokenizer '%s' is not supported (smollm, llama-bpe, gpt2, default)", pre);
        goto fail;
    }
    if (spec->chat_template && !(t->chat_template = emt_strdup(spec->chat_template))) { st = ENTMTP_ERR_OUT_OF_MEMORY; goto fail; }
    *out = t;
    return ENTMTP_OK;
fail:
    emt_tokenizer_free(t);
    return st;
}

/* --------------------------------------------------------------- encode */

typedef struct out_buf {
    int32_t *tok;
    int32_t cap, n;
} out_buf;

static void emit(out_buf *o, int32_t id) {
    if (o->n < o->cap) o->tok[o->n] = id;
    o->n++;
}

/* BPE over one pre-token (raw bytes). Symbols start as single bytes. */
static entmtp_status bpe(const emt_tokenizer *t, const unsigned char *s, size_t n, out_buf *o) {
    int32_t stack[64];
    int32_t *sym = n <= 64 ? stack : emt_malloc(n, sizeof *sym);
    if (!sym) return ENTMTP_ERR_OUT_OF_MEMORY;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_token[s[i]];
        sym[m++] = id >= 0 ? id : (t->unk >= 0 ? t->unk : 0);
    }
    for (;;) {
        int32_t best_rank = INT32_MAX, best_i = -1, best_merged = -1;
        for (size_t i = 0; i + 1 < m; i++) {
            int32_t merged;
            int32_t r = pair_get(&t->merges, sym[i], sym[i + 1], &merged);
            if (r >= 0 && r < best_rank) { best_rank = r; best_i = (int32_t)i; best_merged = merged; }
        }
        if (best_i < 0) break;
        sym[best_i] = best_merged;
        memmove(sym + best_i + 1, sym + best_i + 2, (m - (size_t)best_i - 2) * sizeof *sym);
        m--;
    }
    for (size_t i = 0; i < m; i++) emit(o, sym[i]);
    if (sym != stack) free(sym);
    return ENTMTP_OK;
}

/* Apply pre-tokenizer stage `stage` to [s, s+n): pieces matched by the
 * pattern and the gaps between them both continue to the next stage. */
static entmtp_status pretokenize(const emt_tokenizer *t, int stage, const char *s, size_t n, out_buf *o,
                                 pcre2_match_data *md) {
    if (n == 0) return ENTMTP_OK;
    if (stage == t->n_pre) return bpe(t, (const unsigned char *)s, n, o);
    size_t pos = 0;
    entmtp_status st;
    while (pos < n) {
        int rc = pcre2_match(t->pre[stage], (PCRE2_SPTR)s, n, pos, PCRE2_NO_UTF_CHECK, md, NULL);
        if (rc < 0) break;
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t a = ov[0], b = ov[1];
        if (b == a) { /* empty match: skip one character */
            if ((st = pretokenize(t, stage + 1, s + pos, a + 1 - pos, o, md))) return st;
            pos = a + 1;
            continue;
        }
        if (a > pos && (st = pretokenize(t, stage + 1, s + pos, a - pos, o, md))) return st;
        if ((st = pretokenize(t, stage + 1, s + a, b - a, o, md))) return st;
        pos = b;
    }
    if (pos < n) return pretokenize(t, stage + 1, s + pos, n - pos, o, md);
    return ENTMTP_OK;
}

/* Invalid UTF-8 cannot go through PCRE2's UTF mode: such bytes are BPE'd
 * one span at a time around the valid parts. */
static entmtp_status encode_text(const emt_tokenizer *t, const char *s, size_t n, out_buf *o, pcre2_match_data *md) {
    size_t start = 0, i = 0;
    entmtp_status st;
    while (i < n) {
        uint32_t cp;
        int l = utf8_next((const unsigned char *)s + i, n - i, &cp);
        if (cp == 0xFFFFFFFF || (cp >= 0xD800 && cp <= 0xDFFF) || cp > 0x10FFFF) {
            if (i > start && (st = pretokenize(t, 0, s + start, i - start, o, md))) return st;
            if ((st = bpe(t, (const unsigned char *)s + i, 1, o))) return st;
            i += 1;
            start = i;
            continue;
        }
        i += (size_t)l;
    }
    return pretokenize(t, 0, s + start, n - start, o, md);
}

entmtp_status emt_tokenize(const emt_tokenizer *t, const char *text, size_t len, int add_bos, int parse_special,
                           int32_t *tokens, int32_t capacity, int32_t *n_out) {
    out_buf o = { tokens, capacity, 0 };
    pcre2_match_data *md = pcre2_match_data_create(4, NULL);
    if (!md) return emt_fail(ENTMTP_ERR_OUT_OF_MEMORY, "tokenize: out of memory");
    entmtp_status st = ENTMTP_OK;
    if (add_bos && t->bos >= 0) emit(&o, t->bos);
    size_t seg = 0, i = 0;
    while (parse_special && i < len && !st) {
        int32_t hit = -1;
        for (int32_t k = 0; k < t->n_specials; k++) {
            int32_t id = t->specials[k];
            if (t->len[id] <= len - i && !memcmp(text + i, t->text[id], t->len[id])) { hit = id; break; }
        }
        if (hit < 0) { i++; continue; }
        if (i > seg) st = encode_text(t, text + seg, i - seg, &o, md);
        emit(&o, hit);
        i += t->len[hit];
        seg = i;
    }
    if (!st && seg < len) st = encode_text(t, text + seg, len - seg, &o, md);
    pcre2_match_data_free(md);
    if (st) return st;
    *n_out = o.n;
    if (o.n > capacity)
        return emt_fail(ENTMTP_ERR_BUFFER_TOO_SMALL, "tokenize: %d tokens do not fit in a buffer of %d", o.n, capacity);
    return ENTMTP_OK;
}

entmtp_status emt_detokenize(const emt_tokenizer *t, const int32_t *tokens, int32_t n, char *text, size_t capacity,
                             size_t *len_out) {
    size_t need = 0;
    for (int32_t i = 0; i < n; i++) {
        if (tokens[i] < 0 || tokens[i] >= t->n)
            return emt_fail(ENTMTP_ERR_OUT_OF_RANGE, "detokenize: token %d at position %d is outside the vocabulary [0, %d)",
                            tokens[i], i, t->n);
        need += t->nbytes[tokens[i]];
    }
    *len_out = need;
    if (need + 1 > capacity) {
        if (capacity > 0) text[0] = '\0';
        return emt_fail(ENTMTP_ERR_BUFFER_TOO_SMALL, "detokenize: %zu bytes (+1 for the terminator) do not fit in %zu", need, capacity);
    }
    size_t k = 0;
    for (int32_t i = 0; i < n; i++) {
        memcpy(text + k, t->bytes[tokens[i]], t->nbytes[tokens[i]]);
        k += t->nbytes[tokens[i]];
    }
    text[k] = '\0';
    return ENTMTP_OK;
}

/* ------------------------------------------------------------------ chat */

static const char *SMOLLM_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face";

entmtp_status emt_chat_prompt(const emt_tokenizer *t, const char *system, const char *user, char *text,
                              size_t capacity, size_t *len_out) {
    const char *tpl = t->chat_template ? t->chat_template : "";
    char *buf = NULL;
    size_t n = strlen(user) + (system ? strlen(system) : 0) + 256;
    buf = emt_malloc(n, 1);
    if (!buf) return ENTMTP_ERR_OUT_OF_MEMORY;
    int k;
    if (strstr(tpl, "<|im_start|>")) {
        const char *sys = system ? system : (strstr(tpl, SMOLLM_SYSTEM) ? SMOLLM_SYSTEM : NULL);
        if (sys)
            k = snprintf(buf, n, "<|im_start|>system\n%s<|im_end|>\n<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n", sys, user);
        else
            k = snprintf(buf, n, "<|im_start|>user\n%s<|im_end|>\n<|im_start|>assistant\n", user);
    } else if (strstr(tpl, "<|start_header_id|>")) {
        if (system)
            k = snprintf(buf, n, "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n%s<|eot_id|>"
                                 "<|start_header_id|>user<|end_header_id|>\n\n%s<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", system, user);
        else
            k = snprintf(buf, n, "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\n%s<|eot_id|>"
                                 "<|start_header_id|>assistant<|end_header_id|>\n\n", user);
    } else if (strstr(tpl, "[INST]")) {
        if (system) k = snprintf(buf, n, "<s>[INST] <<SYS>>\n%s\n<</SYS>>\n\n%s [/INST]", system, user);
        else k = snprintf(buf, n, "<s>[INST] %s [/INST]", user);
    } else {
        free(buf);
        return emt_fail(ENTMTP_ERR_UNSUPPORTED, "chat prompt: the model has %s chat template",
                        t->chat_template ? "an unrecognised (not ChatML, Llama 2 or Llama 3)" : "no");
    }
    size_t len = (size_t)k;
    *len_out = len;
    if (len + 1 > capacity) {
        free(buf);
        if (capacity > 0) text[0] = '\0';
        return emt_fail(ENTMTP_ERR_BUFFER_TOO_SMALL, "chat prompt: %zu bytes (+1) do not fit in %zu", len, capacity);
    }
    memcpy(text, buf, len + 1);
    free(buf);
    return ENTMTP_OK;
}

int emt_tokenizer_is_eog(const emt_tokenizer *t, int32_t tok) {
    if (tok < 0 || tok >= t->n) return 0;
    if (tok == t->eos || tok == t->eot) return 1;
    static const char *eog[] = { "<|im_end|>", "<|eot_id|>", "<|endoftext|>", "</s>", "<|end_of_text|>" };
    for (size_t i = 0; i < sizeof eog / sizeof eog[0]; i++)
        if (t->len[tok] == strlen(eog[i]) && !memcmp(t->text[tok], eog[i], t->len[tok])) return 1;
    return 0;
}

int32_t emt_tokenizer_n_vocab(const emt_tokenizer *t) { return t->n; }
int32_t emt_tokenizer_bos(const emt_tokenizer *t) { return t->bos; }
int32_t emt_tokenizer_eos(const emt_tokenizer *t) { return t->eos; }
