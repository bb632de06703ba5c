/* SentencePiece BPE ("llama" vocabularies) against the `sentencepiece`
 * library: a tiny model trained with Llama 2's settings and the ids it gives
 * for a few hundred strings (tests/data/tokenizer_spm_tiny.json, made by
 * tests/python/make_spm_fixture.py). */
#include "check.h"
#include "common/common.h"
#include "tokenizer/tokenizer.h"

#include <cjson/cJSON.h>

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
    free(text);
    free(types);
    free(scores);
    cJSON_Delete(root);
    free(data);
    return emt_test_finish("test_tokenizer_spm");
}
