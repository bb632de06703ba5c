/* Tokenizer from GGUF metadata (tokenizer.ggml.*, tokenizer.chat_template). */
#include "tokenizer/tokenizer_internal.h"

#include <stdlib.h>

#include "io/gguf.h"


/* Optional id key: -1 when absent or outside the vocabulary (llama.cpp
 * ignores such ids too); other read errors are returned. */
static entmtp_status opt_id(const emt_gguf *g, const char *key, int32_t n, int32_t *out) {
    int64_t v;
    *out = -1;
    entmtp_status st = emt_gguf_get_i64(g, key, &v);
    if (st == ENTMTP_ERR_NOT_FOUND) return ENTMTP_OK;
    if (st) return st;
    if (v >= 0 && v < n) *out = (int32_t)v;
    return ENTMTP_OK;
}

static entmtp_status opt_bool(const emt_gguf *g, const char *key, int dflt, int *out) {
    *out = dflt;
    entmtp_status st = emt_gguf_get_bool(g, key, out);
    if (st == ENTMTP_ERR_NOT_FOUND) {
        *out = dflt;
        return ENTMTP_OK;
    }
    return st;
}

/* Byte-level BPE pre-tokenizers for which llama.cpp adds a BOS when the GGUF
 * has no tokenizer.ggml.add_bos_token (llama-vocab.cpp, load()). */
static int bos_by_default(const char *pre) {
    static const char *const names[] = { "llama3", "llama-v3", "llama-bpe", "falcon3", "falcon-h1",
                                         "pixtral", "midm-2.0", "lfm2", "tekken", "chameleon" };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        if (strcmp(pre, names[i]) == 0) return 1;
    return 0;
}

/* Optional string key copied with a NUL; *out NULL when absent. */
static entmtp_status opt_str(const emt_gguf *g, const char *key, char **out) {
    const char *s;
    size_t n;
    *out = NULL;
    entmtp_status st = emt_gguf_get_str(g, key, &s, &n);
    if (st == ENTMTP_ERR_NOT_FOUND) return ENTMTP_OK;
    if (st) return st;
    char *c = emt_malloc(n + 1, 1);
    if (!c) return ENTMTP_ERR_OUT_OF_MEMORY;
    memcpy(c, s, n);
    c[n] = '\0';
    *out = c;
    return ENTMTP_OK;
}

/* Array key of `n` elements (or absent: *present = 0). */
static entmtp_status opt_arr(const emt_gguf *g, const char *key, int64_t n, int *present) {
    emt_gguf_type et;
    int64_t m;
    *present = 0;
    entmtp_status st = emt_gguf_get_arr(g, key, &et, &m);
    if (st == ENTMTP_ERR_NOT_FOUND) return ENTMTP_OK;
    if (st) return st;
    if (n >= 0 && m != n)
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: %s has %lld entries, tokenizer.ggml.tokens has %lld",
                        emt_gguf_path(g), key, (long long)m, (long long)n);
    *present = 1;
    return ENTMTP_OK;
}

static int token_is(const emt_strref *tok, const char *text) {
    return tok->n == strlen(text) && memcmp(tok->s, text, tok->n) == 0;
}

/* Phi-3's special tokens swallow the whitespace after them (its
 * tokenizer.json marks them rstrip; GGUF has no field for it). llama.cpp
 * decides by general.name containing "phi-3" or "phi3" (any case): every
 * control / user-defined / unknown token and </s> get rstrip, except <unk>,
 * <s> and <|endoftext|>. Same rule here, so both give the same ids. */
static entmtp_status phi3_strip(const emt_gguf *g, const emt_strref *toks, const int32_t *types,
                                int32_t n, uint8_t **out) {
    char *name = NULL;
    *out = NULL;
    entmtp_status st = opt_str(g, "general.name", &name);
    if (st || !name) return st;
    for (char *p = name; *p; p++)
        if (*p >= 'A' && *p <= 'Z') *p = (char)(*p - 'A' + 'a');
    int phi3 = strstr(name, "phi-3") || strstr(name, "phi3");
    free(name);
    if (!phi3) return ENTMTP_OK;
    uint8_t *strip = emt_calloc((size_t)n, 1);
    if (!strip) return ENTMTP_ERR_OUT_OF_MEMORY;
    for (int32_t i = 0; i < n; i++) {
        int special = types[i] == EMT_TOKEN_CONTROL || types[i] == EMT_TOKEN_USER_DEFINED ||
                      types[i] == EMT_TOKEN_UNKNOWN;
        if ((special || token_is(&toks[i], "</s>")) && !token_is(&toks[i], "<unk>") &&
            !token_is(&toks[i], "<s>") && !token_is(&toks[i], "<|endoftext|>"))
            strip[i] = EMT_TOK_RSTRIP;
    }
    *out = strip;
    return ENTMTP_OK;
}

entmtp_status emt_tokenizer_from_gguf(const struct emt_gguf *g, emt_tokenizer **out) {
    if (!out) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "tokenizer_from_gguf: out is NULL");
    *out = NULL;
    if (!g) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "tokenizer_from_gguf: gguf is NULL");
    const char *path = emt_gguf_path(g);
    char *model = NULL, *pre = NULL, *tmpl = NULL;
    emt_strref *toks = NULL, *merges = NULL;
    int32_t *types = NULL;
    float *scores = NULL;
    uint8_t *strip = NULL;
    entmtp_status st = opt_str(g, "tokenizer.ggml.model", &model);
    if (st) goto done;
    if (!model || strcmp(model, "none") == 0 || strcmp(model, "no_vocab") == 0) {
        st = emt_fail(ENTMTP_ERR_NOT_FOUND, "%s: no tokenizer (tokenizer.ggml.model is %s)", path,
                      model ? model : "absent");
        goto done;
    }
    if (strcmp(model, "gpt2") != 0 && strcmp(model, "llama") != 0) {
        st = emt_fail(ENTMTP_ERR_UNSUPPORTED,
                      "%s: tokenizer model '%s' is not supported (supported: gpt2, llama)", path, model);
        goto done;
    }
    int spm = strcmp(model, "llama") == 0;
    if ((st = opt_str(g, "tokenizer.ggml.pre", &pre))) goto done;

    emt_gguf_type et;
    int64_t n;
    st = emt_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n);
    if (st == ENTMTP_ERR_NOT_FOUND) {
        st = emt_fail(ENTMTP_ERR_FORMAT, "%s: tokenizer.ggml.model is '%s' but tokenizer.ggml.tokens is absent",
                      path, model);
        goto done;
    }
    if (st) goto done;
    if (et != EMT_GGUF_STRING || n < 1 || n > INT32_MAX - 1) {
        st = emt_fail(ENTMTP_ERR_FORMAT, "%s: tokenizer.ggml.tokens must be a non-empty string array "
                      "(type %d, %lld entries)", path, (int)et, (long long)n);
        goto done;
    }
    toks = emt_malloc((size_t)n, sizeof *toks);
    types = emt_malloc((size_t)n, sizeof *types);
    if (!toks || !types) { st = ENTMTP_ERR_OUT_OF_MEMORY; goto done; }
    for (int64_t i = 0; i < n; i++) {
        if ((st = emt_gguf_arr_str(g, "tokenizer.ggml.tokens", i, &toks[i].s, &toks[i].n))) goto done;
        types[i] = EMT_TOKEN_NORMAL;
    }
    int present;
    if ((st = opt_arr(g, "tokenizer.ggml.token_type", n, &present))) goto done;
    for (int64_t i = 0; present && i < n; i++) {
        int64_t v;
        if ((st = emt_gguf_arr_i64(g, "tokenizer.ggml.token_type", i, &v))) goto done;
        if (v < 0 || v > EMT_TOKEN_BYTE) {
            st = emt_fail(ENTMTP_ERR_FORMAT, "%s: tokenizer.ggml.token_type[%lld] = %lld (expected 0..6)",
                          path, (long long)i, (long long)v);
            goto done;
        }
        types[i] = (int32_t)v;
    }
    if (spm) {
        if ((st = opt_arr(g, "tokenizer.ggml.scores", n, &present))) goto done;
        if (present) {
            scores = emt_malloc((size_t)n, sizeof *scores);
            if (!scores) { st = ENTMTP_ERR_OUT_OF_MEMORY; goto done; }
            for (int64_t i = 0; i < n; i++)
                if ((st = emt_gguf_arr_f32(g, "tokenizer.ggml.scores", i, &scores[i]))) goto done;
        }
    }
    int64_t n_merges = 0;
    if (!spm) {
        st = emt_gguf_get_arr(g, "tokenizer.ggml.merges", &et, &n_merges);
        if (st == ENTMTP_ERR_NOT_FOUND) {
            n_merges = 0;
            st = ENTMTP_OK;
        } else if (st) {
            goto done;
        } else if (n_merges > 0 && (et != EMT_GGUF_STRING || n_merges > INT32_MAX)) {
            st = emt_fail(ENTMTP_ERR_FORMAT, "%s: tokenizer.ggml.merges must be a string array", path);
            goto done;
        }
        if (n_merges > 0) {
            merges = emt_malloc((size_t)n_merges, sizeof *merges);
            if (!merges) { st = ENTMTP_ERR_OUT_OF_MEMORY; goto done; }
            for (int64_t i = 0; i < n_merges; i++)
                if ((st = emt_gguf_arr_str(g, "tokenizer.ggml.merges", i, &merges[i].s, &merges[i].n)))
                    goto done;
        }
    }

    emt_tokenizer_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.model = model;
    spec.pre = pre ? pre : "default";
    spec.n_tokens = (int32_t)n;
    spec.token_types = types;
    spec.scores = scores;
    spec.n_merges = (int32_t)n_merges;
    int32_t eom = -1;
    if ((st = opt_id(g, "tokenizer.ggml.bos_token_id", spec.n_tokens, &spec.bos)) ||
        (st = opt_id(g, "tokenizer.ggml.eos_token_id", spec.n_tokens, &spec.eos)) ||
        (st = opt_id(g, "tokenizer.ggml.unknown_token_id", spec.n_tokens, &spec.unk)) ||
        (st = opt_id(g, "tokenizer.ggml.padding_token_id", spec.n_tokens, &spec.pad)) ||
        (st = opt_id(g, "tokenizer.ggml.eot_token_id", spec.n_tokens, &spec.eot)) ||
        (st = opt_id(g, "tokenizer.ggml.eom_token_id", spec.n_tokens, &eom)))
        goto done;
    /* llama.cpp's defaults when the keys are absent (llama-vocab.cpp): BOS
     * on for SentencePiece and for the Llama 3 family of pre-tokenizers, EOS
     * off; add_sep_token is not read (llama.cpp appends a SEP only to BERT
     * WordPiece vocabularies) */
    if ((st = opt_bool(g, "tokenizer.ggml.add_bos_token", spm || bos_by_default(spec.pre), &spec.add_bos)) ||
        (st = opt_bool(g, "tokenizer.ggml.add_eos_token", 0, &spec.add_eos)))
        goto done;
    int space_prefix;
    if ((st = opt_bool(g, "tokenizer.ggml.add_space_prefix", 1, &space_prefix))) goto done;
    if ((st = opt_str(g, "tokenizer.chat_template", &tmpl))) goto done;
    spec.chat_template = tmpl;

    if ((st = phi3_strip(g, toks, types, spec.n_tokens, &strip))) goto done;

    emt_tok_build b;
    memset(&b, 0, sizeof b);
    b.spec = &spec;
    b.tokens = toks;
    b.strip = strip;
    b.merge_strs = merges;
    b.add_space_prefix = space_prefix;
    b.ignore_merges = -1;
    emt_tokenizer *t = NULL;
    st = emt_tokenizer_build(&b, &t);
    if (st) {
        emt_error_prefix("%s: ", path);
        if (st == ENTMTP_ERR_INVALID_ARGUMENT || st == ENTMTP_ERR_OUT_OF_RANGE) st = ENTMTP_ERR_FORMAT;
        goto done;
    }
    if (eom >= 0) t->eog[eom] = 1;
    *out = t;
done:
    free(model);
    free(pre);
    free(tmpl);
    free(toks);
    free(types);
    free(scores);
    free(merges);
    free(strip);
    return st;
}
