/* Tokenizer from a Hugging Face directory: tokenizer.json (model.vocab,
 * model.merges, added_tokens, pre_tokenizer) and tokenizer_config.json
 * (chat_template, bos/eos/pad token names, add_bos_token) when present. */
#define _POSIX_C_SOURCE 200809L
#include "tokenizer/tokenizer_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

typedef struct hf_pre {
    int n;
    const char *pats[EMT_TOK_MAX_PATTERNS];
    char *owned[EMT_TOK_MAX_PATTERNS];
    int byte_level; /* a ByteLevel step was seen */
} hf_pre;

static void hf_pre_free(hf_pre *p) {
    for (int i = 0; i < EMT_TOK_MAX_PATTERNS; i++) free(p->owned[i]);
}

static const char *jstr(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

/* true / false / absent (dflt) */
static int jbool(const cJSON *o, const char *key, int dflt) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsBool(v)) return cJSON_IsTrue(v) ? 1 : 0;
    return dflt;
}

/* A token named in tokenizer_config.json: "text" or {"content": "text"}. */
static const char *jtoken(const cJSON *o, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (cJSON_IsString(v)) return v->valuestring;
    if (cJSON_IsObject(v)) return jstr(v, "content");
    return NULL;
}

static entmtp_status add_pattern(hf_pre *p, const char *name, const char *pat, int owned) {
    if (p->n == EMT_TOK_MAX_PATTERNS) {
        if (owned) free((char *)pat);
        return emt_fail(ENTMTP_ERR_UNSUPPORTED, "%s: more than %d pre-tokenizer steps", name,
                        EMT_TOK_MAX_PATTERNS);
    }
    if (owned) p->owned[p->n] = (char *)pat;
    p->pats[p->n++] = pat;
    return ENTMTP_OK;
}

/* A literal string as a PCRE2 pattern. */
static char *quote_literal(const char *s) {
    size_t n = strlen(s);
    char *out = emt_malloc(2 * n + 1, 1);
    if (!out) return NULL;
    size_t m = 0;
    for (size_t i = 0; i < n; i++) {
        if (strchr("\\^$.|?*+()[]{}", s[i])) out[m++] = '\\';
        out[m++] = s[i];
    }
    out[m] = '\0';
    return out;
}

static entmtp_status parse_pre_step(const char *name, const cJSON *step, hf_pre *p) {
    const char *type = jstr(step, "type");
    if (!type) return emt_fail(ENTMTP_ERR_FORMAT, "%s: pre_tokenizer step without a type", name);
    if (strcmp(type, "ByteLevel") == 0) {
        if (jbool(step, "add_prefix_space", 0))
            return emt_fail(ENTMTP_ERR_UNSUPPORTED,
                            "%s: ByteLevel pre-tokenizer with add_prefix_space = true is not supported",
                            name);
        p->byte_level = 1;
        if (jbool(step, "use_regex", 1)) return add_pattern(p, name, emt_pat_gpt2, 0);
        return ENTMTP_OK;
    }
    if (strcmp(type, "Digits") == 0)
        return add_pattern(p, name, jbool(step, "individual_digits", 0) ? emt_pat_digit : "\\p{N}+", 0);
    if (strcmp(type, "Split") == 0) {
        const char *behavior = jstr(step, "behavior");
        if (!behavior || strcmp(behavior, "Isolated") != 0 || jbool(step, "invert", 0))
            return emt_fail(ENTMTP_ERR_UNSUPPORTED,
                            "%s: Split pre-tokenizer with behavior '%s'%s is not supported "
                            "(Isolated only)", name, behavior ? behavior : "(none)",
                            jbool(step, "invert", 0) ? " and invert" : "");
        const cJSON *pat = cJSON_GetObjectItemCaseSensitive(step, "pattern");
        const char *re = jstr(pat, "Regex");
        if (re) {
            char *copy = emt_strdup(re);
            if (!copy) return ENTMTP_ERR_OUT_OF_MEMORY;
            return add_pattern(p, name, copy, 1);
        }
        const char *lit = jstr(pat, "String");
        if (lit && *lit) {
            char *q = quote_literal(lit);
            if (!q) return ENTMTP_ERR_OUT_OF_MEMORY;
            return add_pattern(p, name, q, 1);
        }
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: Split pre-tokenizer without a pattern", name);
    }
    return emt_fail(ENTMTP_ERR_UNSUPPORTED, "%s: pre-tokenizer '%s' is not supported", name, type);
}

static entmtp_status parse_pre(const char *name, const cJSON *pre, hf_pre *p) {
    if (!cJSON_IsObject(pre))
        return emt_fail(ENTMTP_ERR_UNSUPPORTED,
                        "%s: a byte-level BPE tokenizer without a pre_tokenizer is not supported", name);
    const char *type = jstr(pre, "type");
    entmtp_status st;
    if (type && strcmp(type, "Sequence") == 0) {
        const cJSON *steps = cJSON_GetObjectItemCaseSensitive(pre, "pretokenizers");
        const cJSON *s;
        cJSON_ArrayForEach(s, steps) {
            if ((st = parse_pre_step(name, s, p))) return st;
        }
    } else if ((st = parse_pre_step(name, pre, p))) {
        return st;
    }
    if (!p->byte_level)
        return emt_fail(ENTMTP_ERR_UNSUPPORTED,
                        "%s: BPE tokenizer without a ByteLevel pre-tokenizer (SentencePiece-style "
                        "tokenizer.json) is not supported yet", name);
    return ENTMTP_OK;
}

#define METASPACE "\xE2\x96\x81" /* U+2581 */

/* SentencePiece-style tokenizer.json (Llama 2, Mistral, TinyLlama): spaces
 * become U+2581 through a normalizer (Prepend + Replace) or a Metaspace
 * pre-tokenizer. *prefix: 0 never, 1 each text segment, 2 the first only. */
static int is_spm_style(const cJSON *root, const cJSON *model) {
    if (jbool(model, "byte_fallback", 0)) return 1;
    const char *pt = jstr(cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), "type");
    if (pt && strcmp(pt, "Metaspace") == 0) return 1;
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    const cJSON *n;
    const char *nt = jstr(norm, "type");
    if (nt && (strcmp(nt, "Prepend") == 0 || strcmp(nt, "Replace") == 0)) return 1;
    cJSON_ArrayForEach(n, cJSON_GetObjectItemCaseSensitive(norm, "normalizers")) {
        const char *t = jstr(n, "type");
        if (t && (strcmp(t, "Prepend") == 0 || strcmp(t, "Replace") == 0)) return 1;
    }
    return 0;
}

static entmtp_status spm_normalizer_step(const char *name, const cJSON *n, int *prepend, int *replace) {
    const char *t = jstr(n, "type");
    if (t && strcmp(t, "Prepend") == 0 && jstr(n, "prepend") && strcmp(jstr(n, "prepend"), METASPACE) == 0) {
        *prepend = 1;
        return ENTMTP_OK;
    }
    if (t && strcmp(t, "Replace") == 0) {
        const char *from = jstr(cJSON_GetObjectItemCaseSensitive(n, "pattern"), "String");
        const char *to = jstr(n, "content");
        if (from && to && strcmp(from, " ") == 0 && strcmp(to, METASPACE) == 0) {
            *replace = 1;
            return ENTMTP_OK;
        }
    }
    return emt_fail(ENTMTP_ERR_UNSUPPORTED, "%s: normalizer '%s' is not supported here (only "
                    "Prepend(\u2581) and Replace(' ', \u2581))", name, t ? t : "?");
}

static entmtp_status parse_spm_style(const char *name, const cJSON *root, int *prefix,
                                     int *metaspace) {
    const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
    int prepend = 0, replace = 0;
    entmtp_status st;
    if (norm && !cJSON_IsNull(norm)) {
        const char *nt = jstr(norm, "type");
        if (nt && strcmp(nt, "Sequence") == 0) {
            const cJSON *n;
            cJSON_ArrayForEach(n, cJSON_GetObjectItemCaseSensitive(norm, "normalizers")) {
                if ((st = spm_normalizer_step(name, n, &prepend, &replace))) return st;
            }
        } else if ((st = spm_normalizer_step(name, norm, &prepend, &replace))) {
            return st;
        }
    }
    *prefix = prepend ? 1 : 0;
    const cJSON *pre = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer");
    if (pre && !cJSON_IsNull(pre)) {
        const char *pt = jstr(pre, "type");
        if (!pt || strcmp(pt, "Metaspace") != 0)
            return emt_fail(ENTMTP_ERR_UNSUPPORTED,
                            "%s: pre-tokenizer '%s' with a SentencePiece-style vocabulary is not "
                            "supported (only Metaspace)", name, pt ? pt : "?");
        const char *rep = jstr(pre, "replacement");
        if (rep && strcmp(rep, METASPACE) != 0)
            return emt_fail(ENTMTP_ERR_UNSUPPORTED, "%s: Metaspace replacement '%s' is not supported",
                            name, rep);
        if (jbool(pre, "split", 0))
            return emt_fail(ENTMTP_ERR_UNSUPPORTED, "%s: Metaspace with split = true is not supported",
                            name);
        replace = 1;
        *metaspace = 1;
        const char *scheme = jstr(pre, "prepend_scheme");
        if (scheme) {
            if (strcmp(scheme, "always") == 0) *prefix = 1;
            else if (strcmp(scheme, "first") == 0) *prefix = 2;
            else if (strcmp(scheme, "never") == 0) *prefix = 0;
            else
                return emt_fail(ENTMTP_ERR_UNSUPPORTED, "%s: Metaspace prepend_scheme '%s'", name, scheme);
        } else {
            *prefix = jbool(pre, "add_prefix_space", 1);
        }
    }
    if (!replace)
        return emt_fail(ENTMTP_ERR_UNSUPPORTED,
                        "%s: SentencePiece-style vocabulary without the space -> U+2581 step", name);
    return ENTMTP_OK;
}

static int is_byte_token(const char *s) {
    return strlen(s) == 6 && memcmp(s, "<0x", 3) == 0 && s[5] == '>' && strchr("0123456789ABCDEF", s[3]) &&
           strchr("0123456789ABCDEF", s[4]) && s[3] && s[4];
}

static const char *pre_name_of(const hf_pre *p) {
    if (p->n == 2 && strcmp(p->pats[0], emt_pat_digit) == 0 && strcmp(p->pats[1], emt_pat_gpt2) == 0)
        return "smollm";
    if (p->n == 1 && strcmp(p->pats[0], emt_pat_gpt2) == 0) return "gpt2";
    if (p->n == 1 && strcmp(p->pats[0], emt_pat_llama3) == 0) return "llama-bpe";
    return "custom";
}

static entmtp_status json_int_id(const char *name, const char *what, const cJSON *v, int32_t *id) {
    if (!cJSON_IsNumber(v) || v->valuedouble < 0 || v->valuedouble > (double)(INT32_MAX - 1) ||
        v->valuedouble != (double)(int32_t)v->valuedouble)
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: %s has id %g (expected an integer in [0, 2^31 - 1))",
                        name, what, cJSON_IsNumber(v) ? v->valuedouble : -1.0);
    *id = (int32_t)v->valuedouble;
    return ENTMTP_OK;
}

entmtp_status emt_tokenizer_from_hf_json(const char *tokenizer_json, const char *config_json,
                                         const char *name, emt_tokenizer **out) {
    if (!out) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "tokenizer_from_hf_json: out is NULL");
    *out = NULL;
    if (!name) name = "tokenizer.json";
    if (!tokenizer_json)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "%s: tokenizer.json text is NULL", name);
    entmtp_status st = ENTMTP_OK;
    cJSON *root = cJSON_Parse(tokenizer_json);
    cJSON *cfg = NULL;
    emt_strref *toks = NULL, *merges = NULL;
    int32_t *types = NULL;
    uint8_t *strip = NULL;
    hf_pre pre;
    memset(&pre, 0, sizeof pre);
    if (!root || !cJSON_IsObject(root)) {
        const char *at = cJSON_GetErrorPtr();
        st = emt_fail(ENTMTP_ERR_FORMAT, "%s: not a JSON object (error near byte %zu)", name,
                      at && at >= tokenizer_json ? (size_t)(at - tokenizer_json) : (size_t)0);
        goto done;
    }
    if (config_json) {
        cfg = cJSON_Parse(config_json);
        if (!cfg || !cJSON_IsObject(cfg)) {
            st = emt_fail(ENTMTP_ERR_FORMAT, "%s: tokenizer_config.json is not a JSON object", name);
            goto done;
        }
    }
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsObject(model)) {
        st = emt_fail(ENTMTP_ERR_FORMAT, "%s: no \"model\" object", name);
        goto done;
    }
    const char *mtype = jstr(model, "type");
    const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
    const cJSON *jmerges = cJSON_GetObjectItemCaseSensitive(model, "merges");
    if (mtype ? strcmp(mtype, "BPE") != 0 : !cJSON_IsArray(jmerges)) {
        st = emt_fail(ENTMTP_ERR_UNSUPPORTED,
                      "%s: tokenizer model type '%s' is not supported (BPE only)", name,
                      mtype ? mtype : "(none)");
        goto done;
    }
    if (!cJSON_IsObject(vocab)) {
        st = emt_fail(ENTMTP_ERR_FORMAT, "%s: model.vocab is not an object", name);
        goto done;
    }
    if (jstr(model, "continuing_subword_prefix") || jstr(model, "end_of_word_suffix")) {
        st = emt_fail(ENTMTP_ERR_UNSUPPORTED,
                      "%s: BPE with continuing_subword_prefix/end_of_word_suffix is not supported", name);
        goto done;
    }
    int spm = is_spm_style(root, model), spm_prefix = 0, metaspace = 0;
    if (spm) {
        if ((st = parse_spm_style(name, root, &spm_prefix, &metaspace))) goto done;
    } else {
        const cJSON *norm = cJSON_GetObjectItemCaseSensitive(root, "normalizer");
        if (norm && !cJSON_IsNull(norm)) {
            const char *nt = jstr(norm, "type");
            st = emt_fail(ENTMTP_ERR_UNSUPPORTED, "%s: normalizer '%s' is not supported", name,
                          nt ? nt : "?");
            goto done;
        }
        if ((st = parse_pre(name, cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"), &pre)))
            goto done;
    }

    /* vocabulary size: the largest id + 1 over vocab and added_tokens */
    int64_t n = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, vocab) {
        int32_t id = 0;
        if ((st = json_int_id(name, it->string ? it->string : "?", it, &id))) goto done;
        if (id + 1 > n) n = id + 1;
    }
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    cJSON_ArrayForEach(it, added) {
        int32_t id = 0;
        const char *content = jstr(it, "content");
        if (!content) {
            st = emt_fail(ENTMTP_ERR_FORMAT, "%s: added token without content", name);
            goto done;
        }
        if ((st = json_int_id(name, content, cJSON_GetObjectItemCaseSensitive(it, "id"), &id)))
            goto done;
        if (id + 1 > n) n = id + 1;
    }
    if (n < 1) {
        st = emt_fail(ENTMTP_ERR_FORMAT, "%s: empty vocabulary", name);
        goto done;
    }
    toks = emt_calloc((size_t)n, sizeof *toks);
    types = emt_calloc((size_t)n, sizeof *types);
    if (!toks || !types) { st = ENTMTP_ERR_OUT_OF_MEMORY; goto done; }
    cJSON_ArrayForEach(it, vocab) {
        int32_t id = (int32_t)it->valuedouble;
        if (types[id]) {
            st = emt_fail(ENTMTP_ERR_FORMAT, "%s: id %d is given to both '%.60s' and '%.60s'", name,
                          id, toks[id].s, it->string ? it->string : "");
            goto done;
        }
        toks[id] = (emt_strref){ it->string ? it->string : "", it->string ? strlen(it->string) : 0 };
        types[id] = spm && it->string && is_byte_token(it->string) ? EMT_TOKEN_BYTE : EMT_TOKEN_NORMAL;
    }
    cJSON_ArrayForEach(it, added) {
        int32_t id = (int32_t)cJSON_GetObjectItemCaseSensitive(it, "id")->valuedouble;
        const char *content = jstr(it, "content");
        toks[id] = (emt_strref){ content, strlen(content) };
        types[id] = jbool(it, "special", 0) ? EMT_TOKEN_CONTROL : EMT_TOKEN_USER_DEFINED;
        int lr = (jbool(it, "lstrip", 0) ? EMT_TOK_LSTRIP : 0) | (jbool(it, "rstrip", 0) ? EMT_TOK_RSTRIP : 0);
        if (lr && !strip && !(strip = emt_calloc((size_t)n, 1))) {
            st = ENTMTP_ERR_OUT_OF_MEMORY;
            goto done;
        }
        if (lr) strip[id] = (uint8_t)lr;
    }
    for (int64_t i = 0; i < n; i++)
        if (!types[i]) {
            toks[i] = (emt_strref){ "", 0 };
            types[i] = EMT_TOKEN_UNUSED;
        }

    /* merges: "a b" strings or [a, b] pairs */
    int32_t n_merges = cJSON_GetArraySize(jmerges);
    if (n_merges > 0) {
        int pairs = cJSON_IsArray(cJSON_GetArrayItem(jmerges, 0));
        merges = emt_calloc((size_t)n_merges * (pairs ? 2 : 1), sizeof *merges);
        if (!merges) { st = ENTMTP_ERR_OUT_OF_MEMORY; goto done; }
        int32_t i = 0;
        cJSON_ArrayForEach(it, jmerges) {
            if (pairs) {
                const cJSON *a = cJSON_GetArrayItem(it, 0), *b = cJSON_GetArrayItem(it, 1);
                if (!cJSON_IsArray(it) || cJSON_GetArraySize(it) != 2 || !cJSON_IsString(a) ||
                    !cJSON_IsString(b)) {
                    st = emt_fail(ENTMTP_ERR_FORMAT, "%s: merge %d is not a pair of strings", name, i);
                    goto done;
                }
                merges[2 * i] = (emt_strref){ a->valuestring, strlen(a->valuestring) };
                merges[2 * i + 1] = (emt_strref){ b->valuestring, strlen(b->valuestring) };
            } else {
                if (!cJSON_IsString(it)) {
                    st = emt_fail(ENTMTP_ERR_FORMAT, "%s: merge %d is not a string", name, i);
                    goto done;
                }
                merges[i] = (emt_strref){ it->valuestring, strlen(it->valuestring) };
            }
            i++;
        }
    }

    emt_tokenizer_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.model = spm ? "llama" : "gpt2";
    spec.n_tokens = (int32_t)n;
    spec.token_types = types;
    spec.n_merges = n_merges;
    spec.bos = spec.eos = spec.unk = spec.pad = spec.eot = -1;
    emt_tok_build b;
    memset(&b, 0, sizeof b);
    b.spec = &spec;
    b.tokens = toks;
    b.strip = strip;
    b.add_space_prefix = spm_prefix;
    b.no_byte_fallback = !jbool(model, "byte_fallback", 0);
    b.fuse_unk = jbool(model, "fuse_unk", 0);
    b.spm_merges = 1;
    b.prefix_if_no_space = metaspace;
    b.ignore_merges = jbool(model, "ignore_merges", 0);
    if (n_merges > 0) {
        if (cJSON_IsArray(cJSON_GetArrayItem(jmerges, 0))) b.merge_pairs = merges;
        else b.merge_strs = merges;
    }
    b.n_patterns = pre.n;
    for (int k = 0; k < pre.n; k++) b.patterns[k] = pre.pats[k];
    b.pre_name = pre_name_of(&pre);

    /* special ids by name */
    const char *unk_name = jstr(model, "unk_token");
    const char *bos_name = cfg ? jtoken(cfg, "bos_token") : NULL;
    const char *eos_name = cfg ? jtoken(cfg, "eos_token") : NULL;
    const char *pad_name = cfg ? jtoken(cfg, "pad_token") : NULL;
    int add_bos = cfg ? jbool(cfg, "add_bos_token", -1) : -1;
    int add_eos = cfg ? jbool(cfg, "add_eos_token", -1) : -1;
    /* TemplateProcessing that starts with a special token: that is the BOS;
     * one that ends with the eos_token adds the EOS (gguf-py's reading) */
    const cJSON *post = cJSON_GetObjectItemCaseSensitive(root, "post_processor");
    const char *post_bos = NULL, *post_last = NULL;
    {
        const cJSON *pp = post;
        const char *pt = jstr(pp, "type");
        if (pt && strcmp(pt, "Sequence") == 0) {
            const cJSON *q;
            cJSON_ArrayForEach(q, cJSON_GetObjectItemCaseSensitive(post, "processors")) {
                const char *qt = jstr(q, "type");
                if (qt && strcmp(qt, "TemplateProcessing") == 0) pp = q;
            }
            pt = jstr(pp, "type");
        }
        if (pt && strcmp(pt, "TemplateProcessing") == 0) {
            const cJSON *single = cJSON_GetObjectItemCaseSensitive(pp, "single");
            const cJSON *first = cJSON_GetArrayItem(single, 0);
            post_bos = jstr(cJSON_GetObjectItemCaseSensitive(first, "SpecialToken"), "id");
            int n_single = cJSON_GetArraySize(single);
            if (n_single > 1)
                post_last = jstr(cJSON_GetObjectItemCaseSensitive(cJSON_GetArrayItem(single, n_single - 1),
                                                                  "SpecialToken"), "id");
        }
    }
    if (!bos_name) bos_name = post_bos;
    if (!eos_name && !cfg) eos_name = post_last; /* gguf-py: without a config, the last special is the EOS */
    if (add_bos < 0) add_bos = post_bos != NULL && bos_name && strcmp(post_bos, bos_name) == 0;
    spec.add_bos = add_bos;
    if (add_eos < 0) add_eos = post_last != NULL && eos_name && strcmp(post_last, eos_name) == 0;
    spec.add_eos = add_eos;

    /* chat template: a string, or a list of {name, template} */
    const cJSON *ct = cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "chat_template") : NULL;
    if (cJSON_IsString(ct)) {
        spec.chat_template = ct->valuestring;
    } else if (cJSON_IsArray(ct)) {
        cJSON_ArrayForEach(it, ct) {
            const char *nm = jstr(it, "name"), *tx = jstr(it, "template");
            if (!tx) continue;
            if (!spec.chat_template || (nm && strcmp(nm, "default") == 0)) spec.chat_template = tx;
        }
    }

    emt_tokenizer *t = NULL;
    st = emt_tokenizer_build(&b, &t);
    if (st) {
        emt_error_prefix("%s: ", name);
        if (st == ENTMTP_ERR_INVALID_ARGUMENT || st == ENTMTP_ERR_OUT_OF_RANGE) st = ENTMTP_ERR_FORMAT;
        goto done;
    }
    /* ids by name, looked up in the built vocabulary */
    struct { const char *name; int32_t *dst; const char *what; } names[] = {
        { bos_name, &t->bos, "bos_token" }, { eos_name, &t->eos, "eos_token" },
        { pad_name, &t->pad, "pad_token" }, { unk_name, &t->unk, "unk_token" },
    };
    for (size_t k = 0; k < sizeof names / sizeof names[0]; k++) {
        if (!names[k].name) continue;
        int32_t id = emt_tokenizer_find(t, names[k].name, strlen(names[k].name));
        if (id < 0) {
            st = emt_fail(ENTMTP_ERR_FORMAT, "%s: %s '%.60s' is not in the vocabulary", name,
                          names[k].what, names[k].name);
            emt_tokenizer_free(t);
            goto done;
        }
        *names[k].dst = id;
    }
    if (t->unk >= 0) t->unk_for_missing = 1; /* HF: a character without a token becomes unk */

    if (t->eos >= 0) t->eog[t->eos] = 1;
    if (t->bos < 0) t->add_bos = 0;
    if (t->eos < 0) t->add_eos = 0;
    *out = t;
done:
    hf_pre_free(&pre);
    free(toks);
    free(types);
    free(strip);
    free(merges);
    cJSON_Delete(root);
    cJSON_Delete(cfg);
    return st;
}

static char *path_join(const char *dir, const char *file) {
    size_t a = strlen(dir), b = strlen(file);
    char *p = emt_malloc(a + b + 2, 1);
    if (!p) return NULL;
    memcpy(p, dir, a);
    p[a] = '/';
    memcpy(p + a + 1, file, b + 1);
    return p;
}

entmtp_status emt_tokenizer_from_hf_dir(const char *dir, emt_tokenizer **out) {
    if (!out) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "tokenizer_from_hf_dir: out is NULL");
    *out = NULL;
    if (!dir) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "tokenizer_from_hf_dir: dir is NULL");
    char *tj = path_join(dir, "tokenizer.json");
    char *cj = path_join(dir, "tokenizer_config.json");
    char *tjs = NULL, *cjs = NULL;
    size_t len;
    entmtp_status st = ENTMTP_OK;
    if (!tj || !cj) { st = ENTMTP_ERR_OUT_OF_MEMORY; goto done; }
    struct stat sb;
    if (stat(tj, &sb) != 0) {
        int err = errno;
        char *sp = path_join(dir, "tokenizer.model");
        int has_sp = sp && stat(sp, &sb) == 0;
        free(sp);
        st = emt_fail(ENTMTP_ERR_NOT_FOUND, "%s: no tokenizer (%s)%s", tj, strerror(err),
                      has_sp ? "; tokenizer.model (SentencePiece protobuf) is not read" : "");
        goto done;
    }
    if ((st = emt_read_file(tj, &tjs, &len))) goto done;
    if (stat(cj, &sb) == 0 && (st = emt_read_file(cj, &cjs, &len))) goto done;
    st = emt_tokenizer_from_hf_json(tjs, cjs, tj, out);
done:
    free(tj);
    free(cj);
    free(tjs);
    free(cjs);
    return st;
}
