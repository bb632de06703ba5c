/* Tokenizers from model files: GGUF metadata or Hugging Face tokenizer.json. */
#include "io/gguf.h"
#include "tokenizer/tokenizer.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static int32_t opt_id(const emt_gguf *g, const char *key) {
    int64_t v;
    if (emt_gguf_get_i64(g, key, &v) != ENTMTP_OK || v < 0 || v > INT32_MAX) return -1;
    return (int32_t)v;
}

entmtp_status emt_tokenizer_from_gguf(const emt_gguf *g, emt_tokenizer **out) {
    *out = NULL;
    const char *path = emt_gguf_path(g);
    emt_gguf_type et;
    int64_t n;
    if (!emt_gguf_has_key(g, "tokenizer.ggml.tokens")) {
        return emt_fail(ENTMTP_ERR_NOT_FOUND, "%s: no tokenizer", path);
    }
    entmtp_status st = emt_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n);
    if (st) return st;
    if (et != EMT_GGUF_STRING || n < 1 || n > (1 << 24))
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: tokenizer.ggml.tokens must be a non-empty string array", path);
    char model[32] = "gpt2", pre[64] = "default";
    const char *s;
    size_t len;
    if (emt_gguf_get_str(g, "tokenizer.ggml.model", &s, &len) == ENTMTP_OK) snprintf(model, sizeof model, "%.*s", (int)len, s);
    if (emt_gguf_get_str(g, "tokenizer.ggml.pre", &s, &len) == ENTMTP_OK) snprintf(pre, sizeof pre, "%.*s", (int)len, s);
    const char **tokens = emt_calloc((size_t)n, sizeof *tokens);
    size_t *lens = emt_calloc((size_t)n, sizeof *lens);
    int32_t *types = emt_calloc((size_t)n, sizeof *types);
    const char **merges = NULL;
    char **merge_copies = NULL;
    int64_t n_merges = 0;
    char *tpl = NULL;
    if (!tokens || !lens || !types) { st = ENTMTP_ERR_OUT_OF_MEMORY; goto done; }
    for (int64_t i = 0; i < n && !st; i++) st = emt_gguf_arr_str(g, "tokenizer.ggml.tokens", i, &tokens[i], &lens[i]);
    if (st) goto done;
    int64_t nt = 0;
    if (emt_gguf_get_arr(g, "tokenizer.ggml.token_type", &et, &nt) == ENTMTP_OK && nt == n) {
        for (int64_t i = 0; i < n && !st; i++) {
            int64_t v;
            st = emt_gguf_arr_i64(g, "tokenizer.ggml.token_type", i, &v);
            types[i] = (int32_t)v;
        }
        if (st) goto done;
    } else {
        entmtp_clear_error();
        for (int64_t i = 0; i < n; i++) types[i] = EMT_TOKEN_NORMAL;
    }
    if (emt_gguf_get_arr(g, "tokenizer.ggml.merges", &et, &n_merges) == ENTMTP_OK) {
        if (et != EMT_GGUF_STRING) { st = emt_fail(ENTMTP_ERR_FORMAT, "%s: tokenizer.ggml.merges must be strings", path); goto done; }
        merges = emt_calloc((size_t)n_merges + 1, sizeof *merges);
        merge_copies = emt_calloc((size_t)n_merges + 1, sizeof *merge_copies);
        if (!merges || !merge_copies) { st = ENTMTP_ERR_OUT_OF_MEMORY; goto done; }
        for (int64_t i = 0; i < n_merges; i++) {
            if ((st = emt_gguf_arr_str(g, "tokenizer.ggml.merges", i, &s, &len))) goto done;
            merge_copies[i] = emt_malloc(len + 1, 1);
            if (!merge_copies[i]) { st = ENTMTP_ERR_OUT_OF_MEMORY; goto done; }
            memcpy(merge_copies[i], s, len);
            merge_copies[i][len] = '\0';
            merges[i] = merge_copies[i];
        }
    } else {
        entmtp_clear_error();
        n_merges = 0;
    }
    if (emt_gguf_get_str(g, "tokenizer.chat_template", &s, &len) == ENTMTP_OK) {
        tpl = emt_malloc(len + 1, 1);
        if (!tpl) { st = ENTMTP_ERR_OUT_OF_MEMORY; goto done; }
        memcpy(tpl, s, len);
        tpl[len] = '\0';
    }
    int add_bos = 0;
    if (emt_gguf_get_bool(g, "tokenizer.ggml.add_bos_token", &add_bos) != ENTMTP_OK) add_bos = 0;
    entmtp_clear_error();
    emt_tokenizer_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.model = model;
    spec.pre = pre;
    spec.n_tokens = (int32_t)n;
    spec.tokens = tokens;
    spec.token_lens = lens;
    spec.token_types = types;
    spec.n_merges = (int32_t)n_merges;
    spec.merges = merges;
    spec.bos = opt_id(g, "tokenizer.ggml.bos_token_id");
    spec.eos = opt_id(g, "tokenizer.ggml.eos_token_id");
    spec.unk = opt_id(g, "tokenizer.ggml.unknown_token_id");
    spec.pad = opt_id(g, "tokenizer.ggml.padding_token_id");
    spec.eot = opt_id(g, "tokenizer.ggml.eot_token_id");
    entmtp_clear_error();
    spec.add_bos = add_bos;
    spec.chat_template = tpl;
    st = emt_tokenizer_create(&spec, out);
    if (st) emt_error_prefix("%s: ", path);
done:
    free(tokens);
    free(lens);
    free(types);
    for (int64_t i = 0; merge_copies && i < n_merges; i++) free(merge_copies[i]);
    free(merge_copies);
    free(merges);
    free(tpl);
    return st;
}

/* tokenizer.json: model.vocab {text: id}, model.merges ["a b"] or [["a","b"]],
 * added_tokens [{id, content, special}], pre_tokenizer (to pick the pattern) */
entmtp_status emt_tokenizer_from_hf_dir(const char *dir, emt_tokenizer **out) {
    *out = NULL;
    char path[4096];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    char *text;
    if (access(path, R_OK) != 0) return emt_fail(ENTMTP_ERR_NOT_FOUND, "%s: no tokenizer.json", dir);
    entmtp_status st = emt_read_file(path, &text, NULL);
    if (st) return st;
    cJSON *root = cJSON_Parse(text);
    free(text);
    const cJSON *model = root ? cJSON_GetObjectItemCaseSensitive(root, "model") : NULL;
    const cJSON *vocab = model ? cJSON_GetObjectItemCaseSensitive(model, "vocab") : NULL;
    const cJSON *mtype = model ? cJSON_GetObjectItemCaseSensitive(model, "type") : NULL;
    if (!cJSON_IsObject(vocab)) { cJSON_Delete(root); return emt_fail(ENTMTP_ERR_FORMAT, "%s: no model.vocab object", path); }
    if (cJSON_IsString(mtype) && strcmp(mtype->valuestring, "BPE") != 0) {
        cJSON_Delete(root);
        return emt_fail(ENTMTP_ERR_UNSUPPORTED, "%s: tokenizer model '%s' is not supported (BPE)", path, mtype->valuestring);
    }
    int32_t n = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, vocab) {
        if (!cJSON_IsNumber(it) || it->valuedouble < 0 || it->valuedouble >= (1 << 24)) {
            cJSON_Delete(root);
            return emt_fail(ENTMTP_ERR_FORMAT, "%s: vocab entry '%s' has no valid id", path, it->string);
        }
        if ((int32_t)it->valuedouble + 1 > n) n = (int32_t)it->valuedouble + 1;
    }
    const cJSON *added = cJSON_GetObjectItemCaseSensitive(root, "added_tokens");
    cJSON_ArrayForEach(it, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id");
        if (cJSON_IsNumber(id) && id->valuedouble >= 0 && id->valuedouble < (1 << 24) && (int32_t)id->valuedouble + 1 > n)
            n = (int32_t)id->valuedouble + 1;
    }
    const char **tokens = emt_calloc((size_t)n + 1, sizeof *tokens);
    int32_t *types = emt_calloc((size_t)n + 1, sizeof *types);
    const cJSON *merges_j = cJSON_GetObjectItemCaseSensitive(model, "merges");
    int32_t n_merges = cJSON_IsArray(merges_j) ? cJSON_GetArraySize(merges_j) : 0;
    char **merges = emt_calloc((size_t)n_merges + 1, sizeof *merges);
    char *tpl = NULL;
    if (!tokens || !types || !merges) { st = ENTMTP_ERR_OUT_OF_MEMORY; goto done; }
    cJSON_ArrayForEach(it, vocab) { tokens[(int32_t)it->valuedouble] = it->string; types[(int32_t)it->valuedouble] = EMT_TOKEN_NORMAL; }
    cJSON_ArrayForEach(it, added) {
        const cJSON *id = cJSON_GetObjectItemCaseSensitive(it, "id"), *c = cJSON_GetObjectItemCaseSensitive(it, "content");
        if (!cJSON_IsNumber(id) || !cJSON_IsString(c) || id->valuedouble < 0 || id->valuedouble >= n) continue;
        tokens[(int32_t)id->valuedouble] = c->valuestring;
        types[(int32_t)id->valuedouble] = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(it, "special")) ? EMT_TOKEN_CONTROL : EMT_TOKEN_USER_DEFINED;
    }
    for (int32_t i = 0; i < n; i++)
        if (!tokens[i]) { tokens[i] = ""; types[i] = EMT_TOKEN_UNUSED; }
    int32_t k = 0;
    cJSON_ArrayForEach(it, merges_j) {
        if (cJSON_IsString(it)) {
            merges[k] = emt_strdup(it->valuestring);
        } else if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 && cJSON_IsString(cJSON_GetArrayItem(it, 0)) &&
                   cJSON_IsString(cJSON_GetArrayItem(it, 1))) {
            const char *a = cJSON_GetArrayItem(it, 0)->valuestring, *b = cJSON_GetArrayItem(it, 1)->valuestring;
            merges[k] = emt_malloc(strlen(a) + strlen(b) + 2, 1);
            if (merges[k]) sprintf(merges[k], "%s %s", a, b);
        } else {
            st = emt_fail(ENTMTP_ERR_FORMAT, "%s: model.merges[%d] is neither \"a b\" nor [a, b]", path, k);
            goto done;
        }
        if (!merges[k]) { st = ENTMTP_ERR_OUT_OF_MEMORY; goto done; }
        k++;
    }
    /* pre-tokenizer: Digits(individual) + ByteLevel = smollm; a Split with
     * the Llama 3 pattern = llama-bpe; plain ByteLevel = gpt2 */
    const char *pre = "gpt2";
    char *pre_json = cJSON_PrintUnformatted(cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer"));
    if (pre_json) {
        if (strstr(pre_json, "\"Digits\"") && strstr(pre_json, "individual_digits\":true")) pre = "smollm";
        else if (strstr(pre_json, "\\\\p{N}{1,3}")) pre = "llama-bpe";
        cJSON_free(pre_json);
    }
    int32_t bos = -1, eos = -1;
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    if (access(path, R_OK) == 0 && emt_read_file(path, &text, NULL) == ENTMTP_OK) {
        cJSON *cfg = cJSON_Parse(text);
        free(text);
        const cJSON *ct = cfg ? cJSON_GetObjectItemCaseSensitive(cfg, "chat_template") : NULL;
        if (cJSON_IsString(ct)) tpl = emt_strdup(ct->valuestring);
        const char *names[2] = { "bos_token", "eos_token" };
        int32_t *dst[2] = { &bos, &eos };
        for (int j = 0; j < 2 && cfg; j++) {
            const cJSON *v = cJSON_GetObjectItemCaseSensitive(cfg, names[j]);
            if (cJSON_IsObject(v)) v = cJSON_GetObjectItemCaseSensitive(v, "content");
            if (!cJSON_IsString(v)) continue;
            for (int32_t i = 0; i < n; i++)
                if (!strcmp(tokens[i], v->valuestring)) { *dst[j] = i; break; }
        }
        cJSON_Delete(cfg);
    }
    entmtp_clear_error();
    emt_tokenizer_spec spec;
    memset(&spec, 0, sizeof spec);
    spec.model = "gpt2";
    spec.pre = pre;
    spec.n_tokens = n;
    spec.tokens = tokens;
    spec.token_types = types;
    spec.n_merges = k;
    spec.merges = (const char *const *)merges;
    spec.bos = bos;
    spec.eos = eos;
    spec.unk = spec.pad = spec.eot = -1;
    spec.chat_template = tpl;
    st = emt_tokenizer_create(&spec, out);
    if (st) emt_error_prefix("%s/tokenizer.json: ", dir);
done:
    for (int32_t i = 0; merges && i < n_merges; i++) free(merges[i]);
    free(merges);
    free(tokens);
    free(types);
    free(tpl);
    cJSON_Delete(root);
    return st;
}
