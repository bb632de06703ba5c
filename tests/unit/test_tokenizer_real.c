/* SmolLM2's tokenizer against the reference (Hugging Face `tokenizers` built
 * from the same GGUF vocabulary): tests/data/tokenizer_smollm2.jsonl was made
 * by tests/python/make_tokenizer_fixture.py. Skipped when the model is absent. */
#include "check.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <unistd.h>

static const char *model_path(char *buf, size_t cap) {
    const char *env = getenv("ENTMTP_MODEL");
    if (env && *env) return env;
    snprintf(buf, cap, "%s/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf", ENTMTP_SOURCE_DIR);
    return buf;
}

int main(void) {
    char buf[1024];
    const char *path = model_path(buf, sizeof buf);
    if (access(path, R_OK) != 0) TEST_SKIP("SmolLM2 model not fetched (scripts/fetch-model.sh)");
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CPU;
    entmtp_model *m = NULL;
    CHECK_OK(entmtp_model_load(path, &mp, &m));
    if (!m) return emt_test_finish("test_tokenizer_real");
    char fx[1024];
    snprintf(fx, sizeof fx, "%s/tokenizer_smollm2.jsonl", ENTMTP_TEST_DATA_DIR);
    FILE *f = fopen(fx, "r");
    CHECK(f != NULL);
    static char line[1 << 16];
    int n_cases = 0, n_bad = 0;
    while (f && fgets(line, sizeof line, f)) {
        cJSON *j = cJSON_Parse(line);
        if (!j) continue;
        const char *text = cJSON_GetObjectItem(j, "text")->valuestring;
        const cJSON *ids = cJSON_GetObjectItem(j, "ids");
        int32_t want[4096], got[4096], n = 0, nw = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, ids) want[nw++] = it->valueint;
        entmtp_status st = entmtp_tokenize(m, text, -1, 0, 1, got, 4096, &n);
        int same = st == ENTMTP_OK && n == nw && !memcmp(got, want, (size_t)n * sizeof *got);
        if (!same && n_bad++ < 10) {
            fprintf(stderr, "mismatch for \"%s\": got", text);
            for (int i = 0; i < n && i < 20; i++) fprintf(stderr, " %d", got[i]);
            fprintf(stderr, " | want");
            for (int i = 0; i < nw && i < 20; i++) fprintf(stderr, " %d", want[i]);
            fprintf(stderr, "\n");
        }
        char back[1 << 16];
        size_t len = 0;
        if (st == ENTMTP_OK) {
            CHECK_OK(entmtp_detokenize(m, got, n, back, sizeof back, &len));
            if (len != strlen(text) || memcmp(back, text, len)) { n_bad++; fprintf(stderr, "round trip failed for \"%s\"\n", text); }
        }
        n_cases++;
        cJSON_Delete(j);
    }
    if (f) fclose(f);
    printf("%d strings, %d mismatches\n", n_cases, n_bad);
    CHECK(n_cases >= 300);
    CHECK_EQ_INT(n_bad, 0);
    /* the chat template with SmolLM2's default system prompt */
    char chat[512];
    size_t len;
    CHECK_OK(entmtp_chat_prompt(m, NULL, "Hi", chat, sizeof chat, &len));
    CHECK(!strcmp(chat, "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
                        "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"));
    CHECK(entmtp_token_is_eog(m, 2));
    CHECK(entmtp_token_is_eog(m, 0));
    CHECK(!entmtp_token_is_eog(m, 1));
    entmtp_model_info mi = { sizeof mi };
    CHECK_OK(entmtp_model_get_info(m, &mi));
    CHECK_EQ_INT(mi.vocab_size, 49152);
    CHECK_EQ_INT(mi.n_layers, 30);
    CHECK_EQ_INT(mi.n_kv_heads, 3);
    CHECK_EQ_INT(mi.tied_embeddings, 1);
    CHECK_EQ_INT(mi.n_params, 134515008);
    entmtp_model_free(m);
    return emt_test_finish("test_tokenizer_real");
}
