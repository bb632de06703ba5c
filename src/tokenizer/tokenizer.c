/* Tokenizer core: construction and validation, byte-level BPE (GPT-2
 * family: SmolLM, Llama 3), SentencePiece BPE (Llama 2), detokenisation. */
#include "tokenizer/tokenizer_internal.h"

#include <stdio.h>
#include <stdlib.h>

/* Pre-tokenizer patterns. GPT-2's (also HF ByteLevel(use_regex=true)); Llama
 * 3's (tiktoken cl100k, as in Llama 3's tokenizer.json Split pre-tokenizer);
 * one numeric code point (HF Digits(individual_digits=true)). */
const char emt_pat_gpt2[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";
const char emt_pat_llama3[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const char emt_pat_digit[] = "\\p{N}";
/* Qwen2's (Qwen2/2.5/3 tokenizer.json): Llama 3's with single digits. */
const char emt_pat_qwen2[] =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}|"
    " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";

/* ------------------------------------------------------------ utilities */

typedef struct emt_ivec {
    int32_t *v;
    size_t n, cap;
} emt_ivec;

static entmtp_status ivec_push(emt_ivec *a, int32_t x) {
    if (a->n == a->cap) {
        size_t ncap = a->cap ? a->cap * 2 : 64;
        int32_t *nv = emt_realloc(a->v, ncap, sizeof *nv);
        if (!nv) return ENTMTP_ERR_OUT_OF_MEMORY;
        a->v = nv;
        a->cap = ncap;
    }
    a->v[a->n++] = x;
    return ENTMTP_OK;
}

static uint32_t hash_bytes(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (uint8_t)s[i];
        h *= 1099511628211ull;
    }
    h ^= h >> 29;
    return (uint32_t)(h ^ (h >> 32));
}

static uint64_t mix64(uint64_t x) {
    x ^= x >> 30;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 27;
    x *= 0x94d049bb133111ebull;
    x ^= x >> 31;
    return x;
}

static size_t pow2_at_least(size_t n) {
    size_t c = 16;
    while (c < n) c <<= 1;
    return c;
}

/* UTF-8 encoding of a code point < 0x800 (all the byte-level map needs) or
 * any other; returns the length. */
static int utf8_put(uint32_t cp, char *out) {
    if (cp < 0x80) { out[0] = (char)cp; return 1; }
    if (cp < 0x800) {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        out[0] = (char)(0xE0 | (cp >> 12));
        out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | (cp >> 18));
    out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Length of the UTF-8 sequence starting at s[0] (1 for an invalid lead or a
 * truncated / malformed sequence: such bytes stand alone). */
static size_t utf8_seq_len(const uint8_t *s, size_t avail) {
    uint8_t c = s[0];
    size_t n;
    if (c < 0x80) return 1;
    else if (c >= 0xC2 && c <= 0xDF) n = 2;
    else if (c >= 0xE0 && c <= 0xEF) n = 3;
    else if (c >= 0xF0 && c <= 0xF4) n = 4;
    else return 1;
    if (n > avail) return 1;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xC0) != 0x80) return 1;
    return n;
}

/* GPT-2's reversible byte <-> code point map: printable Latin-1 bytes map to
 * themselves, the other 68 bytes to U+0100.. in byte order. */
static int printable_byte(int b) {
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}

static void byte_map(uint32_t byte_cp[256], int16_t cp_byte[0x144]) {
    uint32_t next = 0x100;
    for (int b = 0; b < 256; b++) byte_cp[b] = printable_byte(b) ? (uint32_t)b : next++;
    for (int i = 0; i < 0x144; i++) cp_byte[i] = -1;
    for (int b = 0; b < 256; b++) cp_byte[byte_cp[b]] = (int16_t)b;
}

/* ----------------------------------------------------------------- maps */

static const char *tok_text(const emt_tokenizer *t, int32_t id) { return t->text_arena + t->text_off[id]; }

static emt_tok_map_entry *map_slot(const emt_tokenizer *t, const char *s, size_t n, uint32_t h) {
    size_t i = h & t->map_mask;
    for (;;) {
        emt_tok_map_entry *e = &t->map[i];
        if (e->id < 0) return e;
        if (e->hash == h && t->text_len[e->id] == n && memcmp(tok_text(t, e->id), s, n) == 0)
            return e;
        i = (i + 1) & t->map_mask;
    }
}

static const emt_tok_map_entry *map_find(const emt_tokenizer *t, const char *s, size_t n) {
    const emt_tok_map_entry *e = map_slot(t, s, n, hash_bytes(s, n));
    return e->id >= 0 ? e : NULL;
}

static int32_t map_any(const emt_tokenizer *t, const char *s, size_t n) {
    const emt_tok_map_entry *e = map_find(t, s, n);
    return e ? e->id : -1;
}

static int32_t map_bpe(const emt_tokenizer *t, const char *s, size_t n) {
    const emt_tok_map_entry *e = map_find(t, s, n);
    return e ? e->bpe_id : -1;
}

static const emt_merge_entry *merge_find(const emt_tokenizer *t, int32_t a, int32_t b) {
    if (!t->merges) return NULL;
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    size_t i = mix64(key) & t->merges_mask;
    for (;;) {
        const emt_merge_entry *e = &t->merges[i];
        if (e->key == UINT64_MAX) return NULL;
        if (e->key == key) return e;
        i = (i + 1) & t->merges_mask;
    }
}

/* ------------------------------------------------------- construction */

static int usable_in_bpe(const emt_tokenizer *t, int32_t id) {
    int ty = t->types[id];
    if (ty == EMT_TOKEN_NORMAL) return 1;
    return t->kind == EMT_TOK_BPE && ty == EMT_TOKEN_BYTE;
}

static int is_literal_type(int ty) {
    return ty == EMT_TOKEN_CONTROL || ty == EMT_TOKEN_USER_DEFINED || ty == EMT_TOKEN_UNKNOWN;
}

/* Literal-token list sorted by first byte, longest first; duplicates of the
 * same text keep the lowest id. */
typedef struct lit_key {
    uint8_t first;
    uint32_t len;
    const char *text;
    int32_t id;
} lit_key;

static int lit_key_cmp(const void *pa, const void *pb) {
    const lit_key *a = pa, *b = pb;
    if (a->first != b->first) return a->first < b->first ? -1 : 1;
    if (a->len != b->len) return a->len > b->len ? -1 : 1;
    int c = memcmp(a->text, b->text, a->len);
    if (c) return c;
    return a->id < b->id ? -1 : (a->id > b->id);
}

static entmtp_status build_literals(emt_tokenizer *t) {
    int32_t n = 0;
    for (int32_t i = 0; i < t->n_tokens; i++)
        if (is_literal_type(t->types[i]) && t->text_len[i] > 0) n++;
    for (int c = 0; c <= 256; c++) t->lit_start[c] = 0;
    if (n == 0) return ENTMTP_OK;
    lit_key *keys = emt_malloc((size_t)n, sizeof *keys);
    t->lit_ids = emt_malloc((size_t)n, sizeof *t->lit_ids);
    if (!keys || !t->lit_ids) { free(keys); return ENTMTP_ERR_OUT_OF_MEMORY; }
    int32_t k = 0;
    for (int32_t i = 0; i < t->n_tokens; i++)
        if (is_literal_type(t->types[i]) && t->text_len[i] > 0)
            keys[k++] = (lit_key){ (uint8_t)tok_text(t, i)[0], t->text_len[i], tok_text(t, i), i };
    qsort(keys, (size_t)n, sizeof *keys, lit_key_cmp);
    int32_t m = 0;
    int32_t count[256] = { 0 };
    for (int32_t i = 0; i < n; i++) {
        if (m > 0) {
            const lit_key *p = &keys[i - 1];
            if (p->len == keys[i].len && memcmp(p->text, keys[i].text, p->len) == 0) continue;
        }
        t->lit_ids[m++] = keys[i].id;
        count[keys[i].first]++;
    }
    t->n_lit = m;
    int32_t acc = 0;
    for (int c = 0; c < 256; c++) {
        t->lit_start[c] = acc;
        acc += count[c];
    }
    t->lit_start[256] = acc;
    free(keys);
    return ENTMTP_OK;
}

static entmtp_status compile_patterns(emt_tokenizer *t, int n, const char *const *pats) {
    for (int i = 0; i < n; i++) {
        int errcode;
        PCRE2_SIZE erroff;
        pcre2_code *re = pcre2_compile((PCRE2_SPTR)pats[i], PCRE2_ZERO_TERMINATED,
                                       PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF, &errcode,
                                       &erroff, NULL);
        if (!re) {
            PCRE2_UCHAR msg[256];
            pcre2_get_error_message(errcode, msg, sizeof msg);
            return emt_fail(ENTMTP_ERR_UNSUPPORTED,
                            "pre-tokenizer regex '%s' does not compile at offset %zu: %s", pats[i],
                            (size_t)erroff, (const char *)msg);
        }
        (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* the interpreter is the fallback */
        t->patterns[t->n_patterns++] = re;
    }
    return ENTMTP_OK;
}

static entmtp_status choose_patterns(emt_tokenizer *t, const emt_tok_build *b) {
    if (t->kind == EMT_TOK_SPM) {
        t->pre_name = emt_strdup("none");
        return t->pre_name ? ENTMTP_OK : ENTMTP_ERR_OUT_OF_MEMORY;
    }
    if (b->n_patterns > 0) {
        if (b->n_patterns > EMT_TOK_MAX_PATTERNS)
            return emt_fail(ENTMTP_ERR_UNSUPPORTED, "%d pre-tokenizer regexes (at most %d)",
                            b->n_patterns, EMT_TOK_MAX_PATTERNS);
        t->pre_name = emt_strdup(b->pre_name ? b->pre_name : "custom");
        if (!t->pre_name) return ENTMTP_ERR_OUT_OF_MEMORY;
        return compile_patterns(t, b->n_patterns, b->patterns);
    }
    const char *pre = b->spec->pre ? b->spec->pre : "default";
    const char *list[2];
    int n;
    if (strcmp(pre, "smollm") == 0) {
        list[0] = emt_pat_digit;
        list[1] = emt_pat_gpt2;
        n = 2;
    } else if (strcmp(pre, "gpt2") == 0 || strcmp(pre, "gpt-2") == 0 ||
               strcmp(pre, "default") == 0) {
        list[0] = emt_pat_gpt2;
        n = 1;
    } else if (strcmp(pre, "llama-bpe") == 0 || strcmp(pre, "llama3") == 0) {
        list[0] = emt_pat_llama3;
        n = 1;
    } else if (strcmp(pre, "qwen2") == 0) {
        list[0] = emt_pat_qwen2;
        n = 1;
    } else {
        return emt_fail(ENTMTP_ERR_UNSUPPORTED,
                        "pre-tokenizer '%s' is not supported (supported: smollm, llama-bpe, qwen2, "
                        "gpt2, default)", pre);
    }
    t->pre_name = emt_strdup(pre);
    if (!t->pre_name) return ENTMTP_ERR_OUT_OF_MEMORY;
    return compile_patterns(t, n, list);
}

static entmtp_status check_id(const char *what, int32_t id, int32_t n) {
    if (id < -1 || id >= n)
        return emt_fail(ENTMTP_ERR_OUT_OF_RANGE,
                        "tokenizer spec: %s = %d is out of range (vocabulary of %d tokens, -1 = none)",
                        what, id, n);
    return ENTMTP_OK;
}

/* Split merge i into its two parts. */
static entmtp_status merge_parts(const emt_tok_build *b, int32_t i, emt_strref *l, emt_strref *r) {
    if (b->merge_pairs) {
        *l = b->merge_pairs[2 * (size_t)i];
        *r = b->merge_pairs[2 * (size_t)i + 1];
        if (!l->s || !r->s || l->n == 0 || r->n == 0)
            return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "merge %d has an empty part", i);
        return ENTMTP_OK;
    }
    emt_strref m;
    if (b->merge_strs) {
        m = b->merge_strs[i];
    } else {
        const char *s = b->spec->merges[i];
        if (!s) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "merge %d is NULL", i);
        m = (emt_strref){ s, strlen(s) };
    }
    const char *sp = m.s ? memchr(m.s, ' ', m.n) : NULL;
    if (!sp || sp == m.s || sp == m.s + m.n - 1 || memchr(sp + 1, ' ', m.n - (size_t)(sp + 1 - m.s)))
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT,
                        "merge %d ('%.*s') is not of the form 'left right' (one space between "
                        "two non-empty parts)", i, (int)(m.n > 80 ? 80 : m.n), m.s ? m.s : "");
    *l = (emt_strref){ m.s, (size_t)(sp - m.s) };
    *r = (emt_strref){ sp + 1, m.n - (size_t)(sp + 1 - m.s) };
    return ENTMTP_OK;
}

static entmtp_status build_merges(emt_tokenizer *t, const emt_tok_build *b) {
    int32_t n = b->spec->n_merges;
    if (n < 0) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "n_merges = %d", n);
    if (n > 0 && !b->merge_pairs && !b->merge_strs && !b->spec->merges)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "n_merges = %d but merges is NULL", n);
    if (n == 0) return ENTMTP_OK;
    size_t cap = pow2_at_least((size_t)n * 2);
    t->merges = emt_malloc(cap, sizeof *t->merges);
    if (!t->merges) return ENTMTP_ERR_OUT_OF_MEMORY;
    for (size_t i = 0; i < cap; i++) t->merges[i].key = UINT64_MAX;
    t->merges_mask = cap - 1;
    char *cat = NULL;
    size_t cat_cap = 0;
    entmtp_status st = ENTMTP_OK;
    for (int32_t i = 0; i < n; i++) {
        emt_strref l = { NULL, 0 }, r = { NULL, 0 };
        if ((st = merge_parts(b, i, &l, &r))) break;
        const emt_tok_map_entry *el = map_find(t, l.s, l.n), *er = map_find(t, r.s, r.n);
        if (!el || !er) {
            emt_strref bad = el ? r : l;
            st = emt_fail(ENTMTP_ERR_INVALID_ARGUMENT,
                          "merge %d ('%.*s %.*s'): '%.*s' is not in the vocabulary", i,
                          (int)(l.n > 60 ? 60 : l.n), l.s, (int)(r.n > 60 ? 60 : r.n), r.s,
                          (int)(bad.n > 60 ? 60 : bad.n), bad.s);
            break;
        }
        if (l.n + r.n > cat_cap) {
            size_t nc = (l.n + r.n) * 2;
            char *nb = emt_realloc(cat, nc, 1);
            if (!nb) { st = ENTMTP_ERR_OUT_OF_MEMORY; break; }
            cat = nb;
            cat_cap = nc;
        }
        memcpy(cat, l.s, l.n);
        memcpy(cat + l.n, r.s, r.n);
        const emt_tok_map_entry *ec = map_find(t, cat, l.n + r.n);
        if (!ec) {
            st = emt_fail(ENTMTP_ERR_INVALID_ARGUMENT,
                          "merge %d ('%.*s %.*s'): the concatenation '%.*s' is not in the "
                          "vocabulary", i, (int)(l.n > 60 ? 60 : l.n), l.s,
                          (int)(r.n > 60 ? 60 : r.n), r.s, (int)(l.n + r.n > 120 ? 120 : l.n + r.n),
                          cat);
            break;
        }
        /* merges that involve only-special tokens can never apply */
        if (el->bpe_id < 0 || er->bpe_id < 0 || ec->bpe_id < 0) continue;
        uint64_t key = ((uint64_t)(uint32_t)el->bpe_id << 32) | (uint32_t)er->bpe_id;
        size_t j = mix64(key) & t->merges_mask;
        while (t->merges[j].key != UINT64_MAX && t->merges[j].key != key)
            j = (j + 1) & t->merges_mask;
        if (t->merges[j].key == key) continue; /* a repeated pair keeps its first rank */
        t->merges[j] = (emt_merge_entry){ key, i, ec->bpe_id };
        t->n_merges++;
    }
    free(cat);
    return st;
}

/* Bytes each token renders to. */
static entmtp_status build_decoded(emt_tokenizer *t, const int16_t *cp_byte) {
    size_t total = 0;
    for (int32_t i = 0; i < t->n_tokens; i++) total += t->text_len[i];
    t->dec_arena = emt_malloc(total + 1, 1);
    t->dec_off = emt_malloc((size_t)t->n_tokens, sizeof *t->dec_off);
    t->dec_len = emt_malloc((size_t)t->n_tokens, sizeof *t->dec_len);
    if (!t->dec_arena || !t->dec_off || !t->dec_len) return ENTMTP_ERR_OUT_OF_MEMORY;
    size_t pos = 0;
    for (int32_t id = 0; id < t->n_tokens; id++) {
        const uint8_t *s = (const uint8_t *)tok_text(t, id);
        size_t n = t->text_len[id];
        char *out = t->dec_arena + pos;
        size_t m = 0;
        int ty = t->types[id];
        if (ty == EMT_TOKEN_CONTROL || ty == EMT_TOKEN_UNKNOWN || ty == EMT_TOKEN_UNUSED) {
            memcpy(out, s, n);
            m = n;
        } else if (t->kind == EMT_TOK_BPE && ty != EMT_TOKEN_USER_DEFINED) {
            /* reverse the byte map; a token with a character outside it
             * renders as its raw text (what HF's ByteLevel decoder does) */
            int ok = 1;
            for (size_t i = 0; i < n && ok;) {
                size_t L = utf8_seq_len(s + i, n - i);
                uint32_t cp = 0x200;
                if (L == 1 && s[i] < 0x80) cp = s[i];
                else if (L == 2) cp = ((uint32_t)(s[i] & 0x1F) << 6) | (s[i + 1] & 0x3F);
                if (cp < 0x144 && cp_byte[cp] >= 0) out[m++] = (char)cp_byte[cp];
                else ok = 0;
                i += L;
            }
            if (!ok) {
                memcpy(out, s, n);
                m = n;
            }
        } else if (t->kind == EMT_TOK_SPM && ty == EMT_TOKEN_BYTE && n == 6 &&
                   memcmp(s, "<0x", 3) == 0 && s[5] == '>') {
            unsigned v;
            char hex[3] = { (char)s[3], (char)s[4], 0 };
            char *end;
            v = (unsigned)strtoul(hex, &end, 16);
            if (end == hex + 2) out[m++] = (char)v;
            else { memcpy(out, s, n); m = n; }
        } else if (t->kind == EMT_TOK_SPM) {
            /* U+2581 (e2 96 81) -> space */
            for (size_t i = 0; i < n;) {
                if (i + 3 <= n && s[i] == 0xE2 && s[i + 1] == 0x96 && s[i + 2] == 0x81) {
                    out[m++] = ' ';
                    i += 3;
                } else {
                    out[m++] = (char)s[i++];
                }
            }
        } else {
            memcpy(out, s, n);
            m = n;
        }
        t->dec_off[id] = pos;
        t->dec_len[id] = (uint32_t)m;
        pos += m;
    }
    return ENTMTP_OK;
}

static const char *const g_eog_texts[] = { "<|im_end|>", "<|eot_id|>", "<|endoftext|>", "</s>",
                                           "<|end_of_text|>", "<|eom_id|>" };

entmtp_status emt_tokenizer_build(const emt_tok_build *b, emt_tokenizer **out) {
    if (!out) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "emt_tokenizer_create: out is NULL");
    *out = NULL;
    const emt_tokenizer_spec *sp = b ? b->spec : NULL;
    if (!sp) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "emt_tokenizer_create: spec is NULL");
    if (!sp->model)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "tokenizer spec: model is NULL (\"gpt2\" or \"llama\")");
    emt_tok_kind kind;
    if (strcmp(sp->model, "gpt2") == 0) kind = EMT_TOK_BPE;
    else if (strcmp(sp->model, "llama") == 0) kind = EMT_TOK_SPM;
    else
        return emt_fail(ENTMTP_ERR_UNSUPPORTED,
                        "tokenizer model '%s' is not supported (supported: gpt2, llama)", sp->model);
    int32_t n = sp->n_tokens;
    if (n < 1) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "tokenizer spec: n_tokens = %d (need >= 1)", n);
    if (!b->tokens && !sp->tokens)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "tokenizer spec: tokens is NULL");
    entmtp_status st;
    if ((st = check_id("bos", sp->bos, n)) || (st = check_id("eos", sp->eos, n)) ||
        (st = check_id("unk", sp->unk, n)) || (st = check_id("pad", sp->pad, n)) ||
        (st = check_id("eot", sp->eot, n)))
        return st;

    uint32_t byte_cp[256];
    int16_t cp_byte[0x144];
    byte_map(byte_cp, cp_byte);
    emt_tokenizer *t = emt_calloc(1, sizeof *t);
    if (!t) return ENTMTP_ERR_OUT_OF_MEMORY;
    t->kind = kind;
    t->n_tokens = n;
    t->bos = sp->bos;
    t->eos = sp->eos;
    t->unk = sp->unk;
    t->pad = sp->pad;
    t->eot = sp->eot;
    t->add_bos = sp->add_bos ? 1 : 0;
    t->add_eos = sp->add_eos ? 1 : 0;
    t->unk_for_missing = b->unk_for_missing;
    t->add_space_prefix = b->add_space_prefix < 0 ? 1 : b->add_space_prefix;
    t->use_byte_fallback = !b->no_byte_fallback;
    t->fuse_unk = b->fuse_unk;
    t->spm_merges = b->spm_merges || sp->n_merges > 0;
    t->prefix_if_no_space = b->prefix_if_no_space;
    t->model_name = emt_strdup(sp->model);
    if (!t->model_name) goto oom;

    /* token texts */
    t->text_off = emt_malloc((size_t)n, sizeof *t->text_off);
    t->text_len = emt_malloc((size_t)n, sizeof *t->text_len);
    t->types = emt_malloc((size_t)n, 1);
    if (!t->text_off || !t->text_len || !t->types) goto oom;
    size_t total = 0;
    for (int32_t i = 0; i < n; i++) {
        size_t L;
        if (b->tokens) {
            if (!b->tokens[i].s && b->tokens[i].n) {
                st = emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "tokenizer spec: token %d is NULL", i);
                goto fail;
            }
            L = b->tokens[i].n;
        } else {
            if (!sp->tokens[i]) {
                st = emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "tokenizer spec: token %d is NULL", i);
                goto fail;
            }
            L = sp->token_lens ? sp->token_lens[i] : strlen(sp->tokens[i]);
        }
        if (L > UINT32_MAX / 2) {
            st = emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "tokenizer spec: token %d is %zu bytes long", i, L);
            goto fail;
        }
        t->text_len[i] = (uint32_t)L;
        t->text_off[i] = total;
        total += L + 1;
        int ty = sp->token_types ? sp->token_types[i] : EMT_TOKEN_NORMAL;
        if (ty == 0) ty = EMT_TOKEN_NORMAL; /* llama.cpp's "undefined" */
        if (ty < EMT_TOKEN_NORMAL || ty > EMT_TOKEN_BYTE) {
            st = emt_fail(ENTMTP_ERR_INVALID_ARGUMENT,
                          "tokenizer spec: token %d has type %d (expected 1..6)", i, ty);
            goto fail;
        }
        t->types[i] = (uint8_t)ty;
    }
    t->text_arena = emt_malloc(total + 1, 1);
    if (!t->text_arena) goto oom;
    for (int32_t i = 0; i < n; i++) {
        const char *src = b->tokens ? b->tokens[i].s : sp->tokens[i];
        if (t->text_len[i]) memcpy(t->text_arena + t->text_off[i], src, t->text_len[i]);
        t->text_arena[t->text_off[i] + t->text_len[i]] = '\0';
    }
    if (kind == EMT_TOK_SPM) {
        t->scores = emt_calloc((size_t)n, sizeof *t->scores);
        if (!t->scores) goto oom;
        if (sp->scores) memcpy(t->scores, sp->scores, (size_t)n * sizeof *t->scores);
    }

    /* text -> id map (first id wins) */
    size_t cap = pow2_at_least((size_t)n * 2);
    t->map = emt_malloc(cap, sizeof *t->map);
    if (!t->map) goto oom;
    for (size_t i = 0; i < cap; i++) t->map[i] = (emt_tok_map_entry){ 0, -1, -1 };
    t->map_mask = cap - 1;
    for (int32_t i = 0; i < n; i++) {
        if (t->text_len[i] == 0) continue;
        uint32_t h = hash_bytes(tok_text(t, i), t->text_len[i]);
        emt_tok_map_entry *e = map_slot(t, tok_text(t, i), t->text_len[i], h);
        if (e->id < 0) {
            e->hash = h;
            e->id = i;
        }
        if (e->bpe_id < 0 && usable_in_bpe(t, i)) e->bpe_id = i;
    }

    /* merges: byte-level BPE, and SentencePiece vocabularies from
     * tokenizer.json (HF's BPE with byte fallback); GGUF "llama" ones
     * merge by score instead */
    if ((st = build_merges(t, b))) goto fail;
    if (kind == EMT_TOK_BPE) {
        for (int c = 0; c < 256; c++) {
            char u[4];
            int L = utf8_put(byte_cp[c], u);
            t->byte_tok[c] = map_bpe(t, u, (size_t)L);
            memcpy(t->byte_chr[c], u, 2);
            t->byte_chr_len[c] = (uint8_t)L;
            t->byte_fallback[c] = -1;
        }
    } else {
        for (int c = 0; c < 256; c++) {
            char hex[8];
            snprintf(hex, sizeof hex, "<0x%02X>", c);
            t->byte_fallback[c] = t->use_byte_fallback ? map_any(t, hex, 6) : -1;
            t->byte_tok[c] = -1;
        }
    }
    if ((st = build_decoded(t, cp_byte))) goto fail;
    if ((st = build_literals(t))) goto fail;
    if ((st = choose_patterns(t, b))) goto fail;
    if (b->ignore_merges >= 0) t->ignore_merges = b->ignore_merges;
    else
        t->ignore_merges = kind == EMT_TOK_BPE && (strcmp(t->pre_name, "llama-bpe") == 0 ||
                                                   strcmp(t->pre_name, "llama3") == 0);

    t->eog = emt_calloc((size_t)n, 1);
    if (!t->eog) goto oom;
    if (t->eos >= 0) t->eog[t->eos] = 1;
    if (t->eot >= 0) t->eog[t->eot] = 1;
    for (int32_t j = 0; j < n; j++) {
        if (t->types[j] == EMT_TOKEN_NORMAL || t->types[j] == EMT_TOKEN_BYTE) continue;
        for (size_t k = 0; k < sizeof g_eog_texts / sizeof g_eog_texts[0]; k++)
            if (t->text_len[j] == strlen(g_eog_texts[k]) &&
                memcmp(tok_text(t, j), g_eog_texts[k], t->text_len[j]) == 0)
                t->eog[j] = 1;
    }
    if (b->strip) {
        t->strip = emt_malloc((size_t)n, 1);
        if (!t->strip) goto oom;
        memcpy(t->strip, b->strip, (size_t)n);
    }
    if (sp->chat_template) {
        t->chat_template = emt_strdup(sp->chat_template);
        if (!t->chat_template) goto oom;
    }
    *out = t;
    return ENTMTP_OK;
oom:
    st = ENTMTP_ERR_OUT_OF_MEMORY;
fail:
    emt_tokenizer_free(t);
    return st;
}

entmtp_status emt_tokenizer_create(const emt_tokenizer_spec *spec, emt_tokenizer **out) {
    emt_tok_build b;
    memset(&b, 0, sizeof b);
    b.spec = spec;
    b.add_space_prefix = -1;
    b.ignore_merges = -1;
    return emt_tokenizer_build(&b, out);
}

void emt_tokenizer_free(emt_tokenizer *t) {
    if (!t) return;
    for (int i = 0; i < t->n_patterns; i++) pcre2_code_free(t->patterns[i]);
    free(t->model_name);
    free(t->pre_name);
    free(t->text_arena);
    free(t->text_off);
    free(t->text_len);
    free(t->types);
    free(t->scores);
    free(t->dec_arena);
    free(t->dec_off);
    free(t->dec_len);
    free(t->eog);
    free(t->strip);
    free(t->map);
    free(t->merges);
    free(t->lit_ids);
    free(t->chat_template);
    free(t);
}

/* ------------------------------------------------------------ encoding */

typedef struct bpe_sym {
    int32_t id;
    int32_t prev, next;
    uint32_t start, len; /* bytes of the input (SentencePiece) */
} bpe_sym;

typedef struct bpe_item {
    float score;   /* SentencePiece: higher first */
    int32_t rank;  /* BPE: lower first */
    int32_t left;  /* position of the left symbol: lower first */
    int32_t right;
    int32_t result;
    uint32_t size;
} bpe_item;

typedef struct enc_ctx {
    const emt_tokenizer *t;
    emt_ivec out;
    pcre2_match_data *md[EMT_TOK_MAX_PATTERNS];
    bpe_sym *sym;
    size_t sym_cap;
    bpe_item *heap;
    size_t heap_n, heap_cap;
    char *buf; /* SentencePiece: escaped text; byte-level: mapped pre-token */
    const uint8_t *text_start;
    size_t buf_cap;
} enc_ctx;

static int item_before(const emt_tokenizer *t, const bpe_item *a, const bpe_item *b) {
    if (t->kind == EMT_TOK_BPE || t->spm_merges) {
        if (a->rank != b->rank) return a->rank < b->rank;
    } else {
        if (a->score != b->score) return a->score > b->score;
    }
    return a->left < b->left;
}

static entmtp_status heap_push(enc_ctx *c, bpe_item it) {
    if (c->heap_n == c->heap_cap) {
        size_t ncap = c->heap_cap ? c->heap_cap * 2 : 64;
        bpe_item *nh = emt_realloc(c->heap, ncap, sizeof *nh);
        if (!nh) return ENTMTP_ERR_OUT_OF_MEMORY;
        c->heap = nh;
        c->heap_cap = ncap;
    }
    size_t i = c->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!item_before(c->t, &it, &c->heap[p])) break;
        c->heap[i] = c->heap[p];
        i = p;
    }
    c->heap[i] = it;
    return ENTMTP_OK;
}

static bpe_item heap_pop(enc_ctx *c) {
    bpe_item top = c->heap[0];
    bpe_item last = c->heap[--c->heap_n];
    size_t i = 0, n = c->heap_n;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        const bpe_item *best = &last;
        if (l < n && item_before(c->t, &c->heap[l], best)) { m = l; best = &c->heap[l]; }
        if (r < n && item_before(c->t, &c->heap[r], best)) { m = r; best = &c->heap[r]; }
        if (m == i) break;
        c->heap[i] = c->heap[m];
        i = m;
    }
    if (n > 0) c->heap[i] = last;
    return top;
}

static entmtp_status sym_reserve(enc_ctx *c, size_t n) {
    if (n <= c->sym_cap) return ENTMTP_OK;
    size_t ncap = c->sym_cap ? c->sym_cap : 64;
    while (ncap < n) ncap *= 2;
    bpe_sym *ns = emt_realloc(c->sym, ncap, sizeof *ns);
    if (!ns) return ENTMTP_ERR_OUT_OF_MEMORY;
    c->sym = ns;
    c->sym_cap = ncap;
    return ENTMTP_OK;
}

static entmtp_status bpe_try_pair(enc_ctx *c, int32_t a, int32_t b) {
    if (a < 0 || b < 0) return ENTMTP_OK;
    const emt_merge_entry *m = merge_find(c->t, c->sym[a].id, c->sym[b].id);
    if (!m) return ENTMTP_OK;
    return heap_push(c, (bpe_item){ 0.0f, m->rank, a, b, m->result, 0 });
}

static entmtp_status bpe_run(enc_ctx *c, int32_t ns);

/* Byte-level BPE of one pre-token: each byte is one symbol (its GPT-2
 * character); the lowest-rank adjacent pair merges first, leftmost on ties. */
static entmtp_status bpe_piece(enc_ctx *c, const uint8_t *p, size_t n) {
    const emt_tokenizer *t = c->t;
    entmtp_status st;
    if (t->ignore_merges) {
        /* the pre-token as one token, when the vocabulary has it */
        if (2 * n > c->buf_cap) {
            char *nb = emt_realloc(c->buf, 2 * n, 1);
            if (!nb) return ENTMTP_ERR_OUT_OF_MEMORY;
            c->buf = nb;
            c->buf_cap = 2 * n;
        }
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
            memcpy(c->buf + m, t->byte_chr[p[i]], t->byte_chr_len[p[i]]);
            m += t->byte_chr_len[p[i]];
        }
        int32_t whole = map_bpe(t, c->buf, m);
        if (whole >= 0) return ivec_push(&c->out, whole);
    }
    if ((st = sym_reserve(c, n))) return st;
    int32_t ns = 0;
    for (size_t i = 0; i < n; i++) {
        int32_t id = t->byte_tok[p[i]];
        if (id < 0) {
            if (t->unk_for_missing && t->unk >= 0) id = t->unk;
            else continue; /* no symbol for this byte: dropped, like HF with unk_token null */
        }
        c->sym[ns] = (bpe_sym){ id, ns - 1, ns + 1, 0, 0 };
        ns++;
    }
    return bpe_run(c, ns);
}

/* Merge c->sym[0..ns) by pair rank, lowest first, leftmost on ties (stale
 * heap entries are skipped), and emit the result. */
static entmtp_status bpe_run(enc_ctx *c, int32_t ns) {
    const emt_tokenizer *t = c->t;
    entmtp_status st;
    if (ns == 0) return ENTMTP_OK;
    c->sym[ns - 1].next = -1;
    c->heap_n = 0;
    for (int32_t i = 0; i + 1 < ns; i++)
        if ((st = bpe_try_pair(c, i, i + 1))) return st;
    while (c->heap_n > 0) {
        bpe_item it = heap_pop(c);
        bpe_sym *L = &c->sym[it.left];
        if (L->id < 0 || L->next != it.right) continue; /* stale */
        bpe_sym *R = &c->sym[it.right];
        const emt_merge_entry *m = merge_find(t, L->id, R->id);
        if (!m || m->result != it.result) continue;
        L->id = it.result;
        L->next = R->next;
        if (R->next >= 0) c->sym[R->next].prev = it.left;
        R->id = -1;
        if ((st = bpe_try_pair(c, L->prev, it.left))) return st;
        if ((st = bpe_try_pair(c, it.left, L->next))) return st;
    }
    for (int32_t i = 0; i >= 0; i = c->sym[i].next)
        if ((st = ivec_push(&c->out, c->sym[i].id))) return st;
    return ENTMTP_OK;
}

static entmtp_status regex_error(int rc) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(rc, msg, sizeof msg);
    return emt_fail(ENTMTP_ERR_UNSUPPORTED, "pre-tokenizer regex match failed: %s", (const char *)msg);
}

/* Split s[0..n) with pattern `level`; matches and the gaps between them are
 * both pieces (HF "Isolated"); each piece goes on to the next pattern. */
static entmtp_status pretok(enc_ctx *c, int level, const uint8_t *s, size_t n) {
    if (n == 0) return ENTMTP_OK;
    if (level == c->t->n_patterns) return bpe_piece(c, s, n);
    pcre2_code *re = c->t->patterns[level];
    pcre2_match_data *md = c->md[level];
    size_t off = 0, gap = 0;
    entmtp_status st;
    while (off < n) {
        int rc = pcre2_match(re, (PCRE2_SPTR)s, n, off, 0, md, NULL);
        if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
            rc = pcre2_match(re, (PCRE2_SPTR)s, n, off, PCRE2_NO_JIT, md, NULL);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) return regex_error(rc);
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(md);
        size_t a = ov[0], e = ov[1];
        if (e <= a) { /* empty match: no piece; step one character */
            off = a + utf8_seq_len(s + a, n - a);
            continue;
        }
        if (a > gap && (st = pretok(c, level + 1, s + gap, a - gap))) return st;
        if ((st = pretok(c, level + 1, s + a, e - a))) return st;
        off = gap = e;
    }
    if (gap < n) return pretok(c, level + 1, s + gap, n - gap);
    return ENTMTP_OK;
}

static entmtp_status spm_try_pair(enc_ctx *c, int32_t a, int32_t b) {
    if (a < 0 || b < 0) return ENTMTP_OK;
    const bpe_sym *L = &c->sym[a], *R = &c->sym[b];
    int32_t id = map_bpe(c->t, c->buf + L->start, (size_t)L->len + R->len);
    if (id < 0) return ENTMTP_OK;
    return heap_push(c, (bpe_item){ c->t->scores[id], 0, a, b, id, L->len + R->len });
}

/* SentencePiece BPE (llama.cpp's "llama" vocabulary): spaces become U+2581,
 * optionally one is prefixed; adjacent pieces whose concatenation is a token
 * merge, highest score first, leftmost on ties; characters left without a
 * token fall back to <0xNN> byte tokens. */
static entmtp_status spm_fragment(enc_ctx *c, const uint8_t *s, size_t n, int prefix) {
    const emt_tokenizer *t = c->t;
    size_t need = 3 * n + 3;
    if (need > c->buf_cap) {
        char *nb = emt_realloc(c->buf, need, 1);
        if (!nb) return ENTMTP_ERR_OUT_OF_MEMORY;
        c->buf = nb;
        c->buf_cap = need;
    }
    size_t m = 0;
    if (prefix && t->prefix_if_no_space &&
        (s[0] == ' ' || (n >= 3 && s[0] == 0xE2 && s[1] == 0x96 && s[2] == 0x81)))
        prefix = 0;
    if (prefix) { memcpy(c->buf, "\xE2\x96\x81", 3); m = 3; }
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') { memcpy(c->buf + m, "\xE2\x96\x81", 3); m += 3; }
        else c->buf[m++] = (char)s[i];
    }
    if (m == 0) return ENTMTP_OK;
    entmtp_status st;
    if ((st = sym_reserve(c, m))) return st;
    int32_t ns = 0;
    if (t->spm_merges) {
        /* Hugging Face's BPE with byte fallback (SentencePiece vocabularies
         * from tokenizer.json): characters are the symbols, a character
         * without a token becomes its <0xNN> tokens (all of them exist) or
         * unk; merges by rank */
        for (size_t i = 0; i < m;) {
            size_t L = utf8_seq_len((const uint8_t *)c->buf + i, m - i);
            int32_t id = map_bpe(t, c->buf + i, L);
            if (id >= 0) {
                c->sym[ns] = (bpe_sym){ id, ns - 1, ns + 1, 0, 0 };
                ns++;
            } else {
                int all = t->use_byte_fallback;
                for (size_t k = 0; k < L && all; k++)
                    all = t->byte_fallback[(uint8_t)c->buf[i + k]] >= 0;
                if (all) {
                    for (size_t k = 0; k < L; k++) {
                        c->sym[ns] = (bpe_sym){ t->byte_fallback[(uint8_t)c->buf[i + k]], ns - 1, ns + 1, 0, 0 };
                        ns++;
                    }
                } else if (t->unk >= 0 && !(t->fuse_unk && ns > 0 && c->sym[ns - 1].id == t->unk)) {
                    c->sym[ns] = (bpe_sym){ t->unk, ns - 1, ns + 1, 0, 0 };
                    ns++;
                }
            }
            i += L;
        }
        return bpe_run(c, ns);
    }
    for (size_t i = 0; i < m;) {
        size_t L = utf8_seq_len((const uint8_t *)c->buf + i, m - i);
        c->sym[ns] = (bpe_sym){ 0, ns - 1, ns + 1, (uint32_t)i, (uint32_t)L };
        ns++;
        i += L;
    }
    c->sym[ns - 1].next = -1;
    c->heap_n = 0;
    for (int32_t i = 0; i + 1 < ns; i++)
        if ((st = spm_try_pair(c, i, i + 1))) return st;
    while (c->heap_n > 0) {
        bpe_item it = heap_pop(c);
        bpe_sym *L = &c->sym[it.left], *R = &c->sym[it.right];
        if (L->len == 0 || R->len == 0 || L->len + R->len != it.size) continue;
        L->len += R->len;
        R->len = 0;
        L->next = R->next;
        if (R->next >= 0) c->sym[R->next].prev = it.left;
        if ((st = spm_try_pair(c, L->prev, it.left))) return st;
        if ((st = spm_try_pair(c, it.left, L->next))) return st;
    }
    for (int32_t i = 0; i >= 0; i = c->sym[i].next) {
        const bpe_sym *y = &c->sym[i];
        int32_t id = map_bpe(t, c->buf + y->start, y->len);
        if (id >= 0) {
            if ((st = ivec_push(&c->out, id))) return st;
            continue;
        }
        for (uint32_t k = 0; k < y->len; k++) {
            uint8_t byte = (uint8_t)c->buf[y->start + k];
            int32_t bid = t->byte_fallback[byte] >= 0 ? t->byte_fallback[byte] : t->unk;
            if (bid >= 0 && (st = ivec_push(&c->out, bid))) return st;
        }
    }
    return ENTMTP_OK;
}

/* The whitespace llama.cpp strips next to lstrip/rstrip tokens (C isspace). */
static int is_c_space(uint8_t b) { return b == ' ' || (b >= '\t' && b <= '\r'); }

static entmtp_status encode_raw(enc_ctx *c, const uint8_t *s, size_t n, int *prev_special) {
    if (n == 0) return ENTMTP_OK;
    entmtp_status st;
    if (c->t->kind == EMT_TOK_SPM)
        st = spm_fragment(c, s, n,
                          c->t->add_space_prefix == 1 ? *prev_special
                          : c->t->add_space_prefix == 2 ? s == c->text_start : 0);
    else
        st = pretok(c, 0, s, n);
    *prev_special = 0;
    return st;
}

entmtp_status emt_tokenize(const emt_tokenizer *t, const char *text, size_t len, int specials,
                           int parse_special, int32_t *tokens, int32_t capacity, int32_t *n_out) {
    if (!t) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "tokenize: tokenizer is NULL");
    if (!n_out) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "tokenize: n_tokens output is NULL");
    if (!text && len > 0) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "tokenize: text is NULL");
    if (capacity < 0)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "tokenize: capacity = %d", capacity);
    if (!tokens && capacity > 0)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "tokenize: tokens is NULL with capacity %d", capacity);
    enc_ctx c;
    memset(&c, 0, sizeof c);
    c.t = t;
    c.text_start = (const uint8_t *)text;
    entmtp_status st = ENTMTP_OK;
    for (int i = 0; i < t->n_patterns; i++) {
        c.md[i] = pcre2_match_data_create_from_pattern(t->patterns[i], NULL);
        if (!c.md[i]) { st = emt_fail(ENTMTP_ERR_OUT_OF_MEMORY, "tokenize: out of memory"); goto done; }
    }
    int prev_special = 1;
    /* llama.cpp's add_special: the config's BOS first and EOS last (a text that
     * already starts with the BOS gets a second one there too) */
    int add_special = specials == ENTMTP_TOKENIZE_ADD_SPECIAL;
    int add_bos = add_special ? t->add_bos : specials != ENTMTP_TOKENIZE_NO_SPECIAL;
    if (add_bos && t->bos >= 0 && (st = ivec_push(&c.out, t->bos))) goto done;
    const uint8_t *s = (const uint8_t *)text;
    size_t raw = 0, i = 0;
    while (i < len && t->n_lit > 0) {
        uint8_t b = s[i];
        int32_t found = -1;
        for (int32_t k = t->lit_start[b]; k < t->lit_start[b + 1]; k++) {
            int32_t id = t->lit_ids[k];
            if (!parse_special && t->types[id] != EMT_TOKEN_USER_DEFINED) continue;
            uint32_t L = t->text_len[id];
            if (L <= len - i && memcmp(s + i, tok_text(t, id), L) == 0) {
                found = id;
                break;
            }
        }
        if (found < 0) {
            i++;
            continue;
        }
        uint8_t strip = t->strip ? t->strip[found] : 0;
        size_t left_end = i;
        if (strip & EMT_TOK_LSTRIP)
            while (left_end > raw && is_c_space(s[left_end - 1])) left_end--;
        if ((st = encode_raw(&c, s + raw, left_end - raw, &prev_special))) goto done;
        if ((st = ivec_push(&c.out, found))) goto done;
        prev_special = 1;
        i += t->text_len[found];
        if (strip & EMT_TOK_RSTRIP)
            while (i < len && is_c_space(s[i])) i++;
        raw = i;
    }
    if ((st = encode_raw(&c, s + raw, len - raw, &prev_special))) goto done;
    if (add_special && t->add_eos && t->eos >= 0 && (st = ivec_push(&c.out, t->eos))) goto done;
    if (c.out.n > (size_t)INT32_MAX) {
        st = emt_fail(ENTMTP_ERR_OUT_OF_RANGE, "tokenize: %zu tokens do not fit in int32", c.out.n);
        goto done;
    }
    *n_out = (int32_t)c.out.n;
    if (c.out.n > (size_t)capacity) {
        st = emt_fail(ENTMTP_ERR_BUFFER_TOO_SMALL,
                      "tokenize: %zu tokens need a buffer of that many, capacity is %d", c.out.n,
                      capacity);
        goto done;
    }
    if (c.out.n) memcpy(tokens, c.out.v, c.out.n * sizeof *tokens);
done:
    for (int k = 0; k < t->n_patterns; k++) pcre2_match_data_free(c.md[k]);
    free(c.out.v);
    free(c.sym);
    free(c.heap);
    free(c.buf);
    return st;
}

/* ------------------------------------------------------------ decoding */

entmtp_status emt_detokenize(const emt_tokenizer *t, const int32_t *tokens, int32_t n, char *text,
                             size_t capacity, size_t *len_out) {
    if (!t) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "detokenize: tokenizer is NULL");
    if (!len_out) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "detokenize: text_len output is NULL");
    if (n < 0) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "detokenize: n_tokens = %d", n);
    if (!tokens && n > 0) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "detokenize: tokens is NULL");
    if (!text && capacity > 0)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "detokenize: text is NULL with capacity %zu", capacity);
    size_t need = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t id = tokens[i];
        if (id < 0 || id >= t->n_tokens)
            return emt_fail(ENTMTP_ERR_OUT_OF_RANGE,
                            "detokenize: token id %d at position %d is out of range [0, %d)", id, i,
                            t->n_tokens);
        need += t->dec_len[id];
    }
    *len_out = need;
    if (need > capacity)
        return emt_fail(ENTMTP_ERR_BUFFER_TOO_SMALL,
                        "detokenize: %zu bytes needed (plus 1 for the NUL), capacity is %zu", need,
                        capacity);
    size_t pos = 0;
    for (int32_t i = 0; i < n; i++) {
        memcpy(text + pos, t->dec_arena + t->dec_off[tokens[i]], t->dec_len[tokens[i]]);
        pos += t->dec_len[tokens[i]];
    }
    if (pos < capacity) text[pos] = '\0';
    return ENTMTP_OK;
}

/* ------------------------------------------------------------- queries */

int emt_tokenizer_is_eog(const emt_tokenizer *t, int32_t token) {
    return t && token >= 0 && token < t->n_tokens && t->eog[token];
}
int32_t emt_tokenizer_n_vocab(const emt_tokenizer *t) { return t ? t->n_tokens : 0; }

uint64_t emt_tokenizer_vocab_hash(const emt_tokenizer *t) {
    uint64_t h = 0xcbf29ce484222325ull; /* 64-bit FNV-1a */
    for (int32_t i = 0; t && i < t->n_tokens; i++) {
        const unsigned char *s = (const unsigned char *)t->text_arena + t->text_off[i];
        for (uint32_t j = 0; j <= t->text_len[i]; j++) { /* the text, then its 0 byte */
            h ^= j < t->text_len[i] ? s[j] : 0;
            h *= 0x100000001b3ull;
        }
    }
    return h;
}
int32_t emt_tokenizer_bos(const emt_tokenizer *t) { return t ? t->bos : -1; }
int32_t emt_tokenizer_eos(const emt_tokenizer *t) { return t ? t->eos : -1; }
int32_t emt_tokenizer_eot(const emt_tokenizer *t) { return t ? t->eot : -1; }
int32_t emt_tokenizer_unk(const emt_tokenizer *t) { return t ? t->unk : -1; }
int32_t emt_tokenizer_pad(const emt_tokenizer *t) { return t ? t->pad : -1; }
int emt_tokenizer_add_bos(const emt_tokenizer *t) { return t ? t->add_bos : 0; }
int emt_tokenizer_add_eos(const emt_tokenizer *t) { return t ? t->add_eos : 0; }
const char *emt_tokenizer_model(const emt_tokenizer *t) { return t ? t->model_name : NULL; }
const char *emt_tokenizer_pre(const emt_tokenizer *t) { return t ? t->pre_name : NULL; }
const char *emt_tokenizer_chat_template(const emt_tokenizer *t) { return t ? t->chat_template : NULL; }

const char *emt_tokenizer_token_text(const emt_tokenizer *t, int32_t id, size_t *len) {
    if (!t || id < 0 || id >= t->n_tokens) return NULL;
    if (len) *len = t->text_len[id];
    return tok_text(t, id);
}

int emt_tokenizer_token_type(const emt_tokenizer *t, int32_t id) {
    if (!t || id < 0 || id >= t->n_tokens) return 0;
    return t->types[id];
}

int32_t emt_tokenizer_find(const emt_tokenizer *t, const char *text, size_t len) {
    if (!t || (!text && len)) return -1;
    if (len == 0) return -1;
    return map_any(t, text, len);
}
