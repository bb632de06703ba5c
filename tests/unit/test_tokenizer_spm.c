/* SentencePiece BPE ("llama" vocabularies) against the `sentencepiece`
 * library: a tiny model trained with Llama 2's settings and the ids it gives
 * for a few hundred strings (tests/data/tokenizer_spm_tiny.json, made by
 * tests/python/make_spm_fixture.py). Then the same model as a Hugging Face
 * tokenizer.json (merges, byte fallback; "legacy" normalizer and
 * "metaspace" pre-tokenizer variants) against `tokenizers`' ids. */
#include "check.h"
#include "common/common.h"
#include "tokenizer/tokenizer.h"

#include <cjson/cJSON.h>

/* tokenizer.json for the fixture's model in transformers' Llama layout */
static char *hf_json(const cJSON *root, int metaspace) {
    cJSON *j = cJSON_CreateObject(), *model = cJSON_CreateObject(), *vocab = cJSON_CreateObject();
    cJSON *added = cJSON_CreateArray();
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(root, "tokens")) {
        const char *txt = cJSON_GetObjectItemCaseSensitive(it, "text")->valuestring;
        cJSON_AddNumberToObject(vocab, txt, i);
        if (i < 3) {
            cJSON *a = cJSON_CreateObject();
            cJSON_AddNumberToObject(a, "id", i);
            cJSON_AddStringToObject(a, "content", txt);
            cJSON_AddBoolToObject(a, "special", 1);
            cJSON_AddItemToArray(added, a);
        }
        i++;
    }
    cJSON_AddItemToObject(j, "added_tokens", added);
    if (metaspace) {
        cJSON *pre = cJSON_CreateObject();
        cJSON_AddStringToObject(pre, "type", "Metaspace");
        cJSON_AddStringToObject(pre, "replacement", "\xE2\x96\x81");
        cJSON_AddStringToObject(pre, "prepend_scheme", "first");
        cJSON_AddBoolToObject(pre, "split", 0);
        cJSON_AddNullToObject(j, "normalizer");
        cJSON_AddItemToObject(j, "pre_tokenizer", pre);
    } else {
        cJSON *norm = cJSON_CreateObject(), *seq = cJSON_CreateArray();
        cJSON *prep = cJSON_CreateObject(), *rep = cJSON_CreateObject(), *pat = cJSON_CreateObject();
        cJSON_AddStringToObject(prep, "type", "Prepend");
        cJSON_AddStringToObject(prep, "prepend", "\xE2\x96\x81");
        cJSON_AddStringToObject(pat, "String", " ");
        cJSON_AddStringToObject(rep, "type", "Replace");
        cJSON_AddItemToObject(rep, "pattern", pat);
        cJSON_AddStringToObject(rep, "content", "\xE2\x96\x81");
        cJSON_AddItemToArray(seq, prep);
        cJSON_AddItemToArray(seq, rep);
        cJSON_AddStringToObject(norm, "type", "Sequence");
        cJSON_AddItemToObject(norm, "normalizers", seq);
        cJSON_AddItemToObject(j, "normalizer", norm);
        cJSON_AddNullToObject(j, "pre_tokenizer");
    }
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddStringToObject(model, "unk_token", "<unk>");
    cJSON_AddBoolToObject(model, "fuse_unk", 1);
    cJSON_AddBoolToObject(model, "byte_fallback", 1);
    cJSON_AddItemToObject(model, "vocab", vocab);
    cJSON_AddItemToObject(model, "merges",
                          cJSON_Duplicate(cJSON_GetObjectItemCaseSensitive(root, "merges"), 1));
    cJSON_AddItemToObject(j, "model", model);
    char *out = cJSON_PrintUnformatted(j);
    cJSON_Delete(j);
    return out;
}

static void check_hf(const cJSON *root, int metaspace) {
    char *json = hf_json(root, metaspace);
    const char *cfg = "{\"bos_token\":\"<s>\",\"eos_token\":\"</s>\",\"add_bos_token\":true}";
    emt_tokenizer *t = NULL;
    CHECK_OK(emt_tokenizer_from_hf_json(json, cfg, metaspace ? "metaspace.json" : "legacy.json", &t));
    free(json);
    if (!t) return;
    CHECK(strcmp(emt_tokenizer_model(t), "llama") == 0);
    CHECK_EQ_INT(emt_tokenizer_bos(t), 1);
    CHECK_EQ_INT(emt_tokenizer_add_bos(t), 1);
    CHECK_EQ_INT(emt_tokenizer_unk(t), 0);
    CHECK_EQ_INT(emt_tokenizer_token_type(t, 3), EMT_TOKEN_BYTE); /* <0x00> */
    const char *key = metaspace ? "ids_hf_metaspace" : "ids_hf_legacy";
    enum { CAP = 4096 };
    int32_t *ids = malloc(CAP * sizeof *ids);
    char *out = malloc(65536);
    int cases = 0, bad = 0, bad_decode = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(root, "cases")) {
        const char *str = cJSON_GetObjectItemCaseSensitive(it, "text")->valuestring;
        const cJSON *exp = cJSON_GetObjectItemCaseSensitive(it, key);
        if (!exp) exp = cJSON_GetObjectItemCaseSensitive(it, "ids");
        int32_t m = -1;
        entmtp_status st = emt_tokenize(t, str, strlen(str), 0, 1, ids, CAP, &m);
        int ok = st == ENTMTP_OK && m == cJSON_GetArraySize(exp);
        int k = 0;
        const cJSON *e;
        cJSON_ArrayForEach(e, exp) {
            if (ok && ids[k] != (int32_t)e->valuedouble) ok = 0;
            k++;
        }
        cases++;
        if (!ok) {
            bad++;
            char *es = cJSON_PrintUnformatted(exp);
            fprintf(stderr, "%s: encode \"%s\": status %d\n  expected %s\n  got     ", key, str, st, es);
            for (int32_t j = 0; j < m && j < 64; j++) fprintf(stderr, " %d", ids[j]);
            fprintf(stderr, "\n");
            free(es);
            continue;
        }
        if (strchr(str, '<') || !*str) continue;
        /* decoding: the text, after the prefixed space if one was added */
        size_t ol = 0, sl = strlen(str);
        int prefixed = !(metaspace && str[0] == ' ');
        st = emt_detokenize(t, ids, m, out, 65536, &ol);
        if (st || ol != sl + (size_t)prefixed || (prefixed && out[0] != ' ') ||
            memcmp(out + prefixed, str, sl) != 0)
            bad_decode++;
    }
    printf("%s: %d strings, %d mismatches, %d decode mismatches\n", key, cases, bad, bad_decode);
    CHECK(cases >= 300);
    CHECK_EQ_INT(bad, 0);
    CHECK_EQ_INT(bad_decode, 0);
    /* BOS from the config, no prefix after a special (metaspace "first") */
    int32_t m = 0;
    CHECK_OK(emt_tokenize(t, "x", 1, 1, 1, ids, CAP, &m));
    CHECK(m >= 2 && ids[0] == 1);
    free(ids);
    free(out);
    emt_tokenizer_free(t);
}

int main(void) {
    char *data = NULL;
    size_t len = 0;
    CHECK_OK(emt_read_file(ENTMTP_TEST_DATA_DIR "/tokenizer_spm_tiny.json", &data, &len));
    cJSON *root = data ? cJSON_Parse(data) : NULL;
    CHECK(root != NULL);
    if (!root) return emt_test_finish("test_tokenizer_spm");
    const cJSON *toks = cJSON_GetObjectItemCaseSensitive(root, "tokens");
    int n = cJSON_GetArraySize(toks);
    const char **text = malloc((size_t)n * sizeof *text);
    int32_t *types = malloc((size_t)n * sizeof *types);
    float *scores = malloc((size_t)n * sizeof *scores);
    int i = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, toks) {
        text[i] = cJSON_GetObjectItemCaseSensitive(it, "text")->valuestring;
        types[i] = (int32_t)cJSON_GetObjectItemCaseSensitive(it, "type")->valuedouble;
        scores[i] = (float)cJSON_GetObjectItemCaseSensitive(it, "score")->valuedouble;
        i++;
    }
    emt_tokenizer_spec s;
    memset(&s, 0, sizeof s);
    s.model = "llama";
    s.n_tokens = n;
    s.tokens = text;
    s.token_types = types;
    s.scores = scores;
    s.bos = 1;
    s.eos = 2;
    s.unk = 0;
    s.pad = s.eot = -1;
    s.add_bos = 1;
    emt_tokenizer *t = NULL;
    CHECK_OK(emt_tokenizer_create(&s, &t));
    if (t) {
        enum { CAP = 4096 };
        int32_t *ids = malloc(CAP * sizeof *ids);
        char *out = malloc(65536);
        int cases = 0, bad = 0, bad_decode = 0, byte_fallback = 0;
        cJSON_ArrayForEach(it, cJSON_GetObjectItemCaseSensitive(root, "cases")) {
            const char *str = cJSON_GetObjectItemCaseSensitive(it, "text")->valuestring;
            const cJSON *exp = cJSON_GetObjectItemCaseSensitive(it, "ids");
            int32_t m = -1;
            entmtp_status st = emt_tokenize(t, str, strlen(str), 0, 0, ids, CAP, &m);
            int ok = st == ENTMTP_OK && m == cJSON_GetArraySize(exp);
            int k = 0;
            const cJSON *e;
            cJSON_ArrayForEach(e, exp) {
                if (ok && ids[k] != (int32_t)e->valuedouble) ok = 0;
                if (ok && types[ids[k]] == EMT_TOKEN_BYTE) byte_fallback++;
                k++;
            }
            cases++;
            if (!ok) {
                bad++;
                char *es = cJSON_PrintUnformatted(exp);
                fprintf(stderr, "encode \"%s\": status %d\n  expected %s\n  got     ", str, st, es);
                for (int32_t j = 0; j < m && j < 64; j++) fprintf(stderr, " %d", ids[j]);
                fprintf(stderr, "\n");
                free(es);
                continue;
            }
            /* decoding keeps the prefixed space: " " + text */
            size_t ol = 0;
            st = emt_detokenize(t, ids, m, out, 65536, &ol);
            size_t sl = strlen(str);
            if (st || (sl == 0 ? ol != 0 : (ol != sl + 1 || out[0] != ' ' || memcmp(out + 1, str, sl) != 0)))
                bad_decode++;
        }
        printf("%d strings, %d mismatches, %d decode mismatches, %d byte-fallback tokens\n", cases,
               bad, bad_decode, byte_fallback);
        CHECK(cases >= 300);
        CHECK_EQ_INT(bad, 0);
        CHECK_EQ_INT(bad_decode, 0);
        CHECK(byte_fallback > 0);
        /* BOS, and a control token's text parsed as the token */
        int32_t m = 0;
        CHECK_OK(emt_tokenize(t, "<s>", 3, 1, 1, ids, CAP, &m));
        CHECK_EQ_INT(m, 2);
        CHECK_EQ_INT(ids[0], 1);
        CHECK_EQ_INT(ids[1], 1);
        CHECK(emt_tokenizer_is_eog(t, 2));
        free(ids);
        free(out);
        emt_tokenizer_free(t);
    }
    check_hf(root, 0);
    check_hf(root, 1);
    free(text);
    free(types);
    free(scores);
    cJSON_Delete(root);
    free(data);
    return emt_test_finish("test_tokenizer_spm");
}
