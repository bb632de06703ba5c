/* SmolLM2-135M-Instruct's tokenizer read from the real GGUF must reproduce
 * the ids Hugging Face `tokenizers` gives for every string of
 * tests/data/tokenizer_smollm2.jsonl (made by
 * tests/python/make_tokenizer_fixture.py), decode them back, and render the
 * chat prompts as the GGUF's Jinja template does. The same checks then run
 * on a tokenizer.json + tokenizer_config.json written from the GGUF's
 * vocabulary. Model path: $ENTMTP_MODEL, else
 * .cache/models/SmolLM2-135M-Instruct.Q4_1.gguf (scripts/fetch-model.sh);
 * skipped (77) when absent. */
#include "check.h"
#include "common/common.h"
#include "tokenizer/tokenizer.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <sys/stat.h>
#include <unistd.h>

#define HAVE_GGUF_READER 1 /* the reader is on main */
#include "io/gguf.h"

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif

#define DEFAULT_MODEL ENTMTP_SOURCE_DIR "/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf"
#define FIXTURE ENTMTP_TEST_DATA_DIR "/tokenizer_smollm2.jsonl"

#ifdef HAVE_GGUF_READER

static int ids_equal(const int32_t *got, int32_t n, const cJSON *exp) {
    if (!cJSON_IsArray(exp) || cJSON_GetArraySize(exp) != n) return 0;
    int32_t i = 0;
    const cJSON *e;
    cJSON_ArrayForEach(e, exp) {
        if (got[i++] != (int32_t)e->valuedouble) return 0;
    }
    return 1;
}

static void print_ids(const char *what, const int32_t *ids, int32_t n) {
    fprintf(stderr, "  %s:", what);
    for (int32_t i = 0; i < n && i < 64; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "%s\n", n > 64 ? " ..." : "");
}

typedef struct fixture_result {
    int strings, chats, failures;
} fixture_result;

/* Every record of the fixture against `t`; returns the number of failures. */
static fixture_result run_fixture(const emt_tokenizer *t, const char *data, const char *label,
                                  const char *key, int quiet) {
    int variant = strcmp(key, "ids") != 0; /* another pre-tokenizer: "ids_gpt2", ... */
    fixture_result r = { 0, 0, 0 };
    enum { CAP = 8192 };
    int32_t *ids = malloc(CAP * sizeof *ids);
    char *text = malloc(65536);
    for (const char *line = data; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t n = end ? (size_t)(end - line) : strlen(line);
        cJSON *rec = cJSON_ParseWithLength(line, n);
        line = end ? end + 1 : NULL;
        if (!rec) continue;
        const cJSON *chat = cJSON_GetObjectItemCaseSensitive(rec, "chat");
        const cJSON *tx = cJSON_GetObjectItemCaseSensitive(rec, "text");
        int32_t m = -1;
        if (cJSON_IsString(tx)) {
            r.strings++;
            const char *s = tx->valuestring;
            size_t len = strlen(s);
            const cJSON *exp = cJSON_GetObjectItemCaseSensitive(rec, key);
            if (!exp) exp = cJSON_GetObjectItemCaseSensitive(rec, "ids");
            entmtp_status st = emt_tokenize(t, s, len, 0, 1, ids, CAP, &m);
            if (st || !ids_equal(ids, m, exp)) {
                r.failures++;
                if (!quiet) {
                    char *e = cJSON_PrintUnformatted(exp);
                    fprintf(stderr, "%s: encode %s: status %d\n  expected: %s\n", label,
                            cJSON_PrintUnformatted(tx), st, e);
                    print_ids("got", ids, m);
                    free(e);
                }
                cJSON_Delete(rec);
                continue;
            }
            /* decode: the text again (or HF's decode where bytes without a
             * token were dropped) */
            const cJSON *dec = cJSON_GetObjectItemCaseSensitive(rec, "decoded");
            const char *want = cJSON_IsString(dec) ? dec->valuestring : s;
            size_t tl = 0;
            st = emt_detokenize(t, ids, m, text, 65536, &tl);
            if (st || tl != strlen(want) || memcmp(text, want, tl) != 0) {
                r.failures++;
                if (!quiet)
                    fprintf(stderr, "%s: decode of %s: status %d, %zu bytes\n", label,
                            cJSON_PrintUnformatted(tx), st, tl);
            }
            if (variant) {
                cJSON_Delete(rec);
                continue;
            }
            /* special-token text as plain text */
            const cJSON *raw = cJSON_GetObjectItemCaseSensitive(rec, "ids_raw");
            st = emt_tokenize(t, s, len, 0, 0, ids, CAP, &m);
            if (st || !ids_equal(ids, m, raw ? raw : cJSON_GetObjectItemCaseSensitive(rec, "ids"))) {
                r.failures++;
                if (!quiet) {
                    fprintf(stderr, "%s: encode without specials %s: status %d\n", label,
                            cJSON_PrintUnformatted(tx), st);
                    print_ids("got", ids, m);
                }
            }
        } else if (cJSON_IsObject(chat) && !variant) {
            r.chats++;
            const cJSON *sys = cJSON_GetObjectItemCaseSensitive(chat, "system");
            const char *user = cJSON_GetObjectItemCaseSensitive(chat, "user")->valuestring;
            const char *want = cJSON_GetObjectItemCaseSensitive(chat, "text")->valuestring;
            size_t tl = 0;
            entmtp_status st = emt_chat_prompt(t, cJSON_IsString(sys) ? sys->valuestring : NULL,
                                               user, text, 65536, &tl);
            if (st || tl != strlen(want) || strcmp(text, want) != 0) {
                r.failures++;
                if (!quiet)
                    fprintf(stderr, "%s: chat prompt status %d:\n  got  [%s]\n  want [%s]\n", label,
                            st, st ? entmtp_last_error() : text, want);
            }
            st = emt_tokenize(t, want, strlen(want), 0, 1, ids, CAP, &m);
            if (st || !ids_equal(ids, m, cJSON_GetObjectItemCaseSensitive(chat, "ids"))) {
                r.failures++;
                if (!quiet) {
                    fprintf(stderr, "%s: chat prompt tokens differ\n", label);
                    print_ids("got", ids, m);
                }
            }
        }
        cJSON_Delete(rec);
    }
    free(ids);
    free(text);
    return r;
}

static void check_fixture(const emt_tokenizer *t, const char *data, const char *label,
                          const char *key) {
    double t0 = emt_now();
    fixture_result r = run_fixture(t, data, label, key, 0);
    double dt = emt_now() - t0;
    printf("%s: %d strings, %d chat prompts, %d failures (%.1f ms)\n", label, r.strings, r.chats,
           r.failures, dt * 1e3);
    CHECK(r.strings >= 300);
    CHECK_EQ_INT(r.chats, strcmp(key, "ids") == 0 ? 3 : 0);
    CHECK_EQ_INT(r.failures, 0);
}

typedef struct thread_arg {
    const emt_tokenizer *t;
    const char *data;
    int failures;
} thread_arg;

static void *thread_main(void *p) {
    thread_arg *a = p;
    for (int k = 0; k < 3; k++) a->failures += run_fixture(a->t, a->data, "thread", "ids", 1).failures;
    return NULL;
}

/* The same tokenizer used from several threads at once. */
static void check_threads(const emt_tokenizer *t, const char *data) {
    pthread_t th[4];
    thread_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (thread_arg){ t, data, 0 };
        CHECK(pthread_create(&th[i], NULL, thread_main, &args[i]) == 0);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        CHECK_EQ_INT(args[i].failures, 0);
    }
}

/* GPT-2's byte -> character map, written out here independently. */
static size_t byte_char(uint8_t b, char ch[2]) {
#define PRINTABLE(c) (((c) >= 0x21 && (c) <= 0x7E) || ((c) >= 0xA1 && (c) <= 0xAC) || (c) >= 0xAE)
    unsigned cp = b;
    if (!PRINTABLE(b)) {
        cp = 0x100;
        for (unsigned c = 0; c < b; c++) cp += !PRINTABLE(c);
    }
#undef PRINTABLE
    if (cp < 0x80) {
        ch[0] = (char)cp;
        return 1;
    }
    ch[0] = (char)(0xC0 | (cp >> 6));
    ch[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
}

/* Random bytes (invalid UTF-8 included) decode back to themselves, less the
 * bytes SmolLM2's vocabulary has no token for (dropped, as HF does). */
static void check_random_bytes(const emt_tokenizer *t) {
    int has_token[256];
    for (int b = 0; b < 256; b++) {
        char ch[2];
        size_t cl = byte_char((uint8_t)b, ch);
        has_token[b] = emt_tokenizer_find(t, ch, cl) >= 0;
    }
    uint32_t x = 777;
    char in[512], want[512], out[1024];
    int32_t ids[1024];
    int bad = 0;
    for (int k = 0; k < 3000; k++) {
        size_t n = (size_t)(k % 64) * 8, m = 0;
        for (size_t i = 0; i < n; i++) {
            x = x * 1664525u + 1013904223u;
            uint8_t b = (uint8_t)(x >> 24);
            if (k % 3 == 0) b = (uint8_t)" aZ9\n\t.\xC3\xA9\xE4"[b % 10]; /* text-like */
            in[i] = (char)b;
            if (has_token[b]) want[m++] = (char)b;
        }
        int32_t nt = 0;
        size_t ol = 0;
        if (emt_tokenize(t, in, n, 0, 0, ids, 1024, &nt) != ENTMTP_OK ||
            emt_detokenize(t, ids, nt, out, sizeof out, &ol) != ENTMTP_OK || ol != m ||
            memcmp(out, want, m) != 0)
            bad++;
    }
    CHECK_EQ_INT(bad, 0);
}

static void check_meta(const emt_tokenizer *t, const char *data, int from_gguf) {
    cJSON *rec = cJSON_ParseWithLength(data, (size_t)(strchr(data, '\n') - data));
    const cJSON *meta = cJSON_GetObjectItemCaseSensitive(rec, "meta");
    CHECK(meta != NULL);
    if (!meta) return;
#define META(k) ((int)cJSON_GetObjectItemCaseSensitive(meta, k)->valuedouble)
    CHECK_EQ_INT(emt_tokenizer_n_vocab(t), META("n_vocab"));
    CHECK_EQ_INT(emt_tokenizer_bos(t), META("bos"));
    CHECK_EQ_INT(emt_tokenizer_eos(t), META("eos"));
    if (from_gguf) {
        CHECK_EQ_INT(emt_tokenizer_unk(t), META("unk"));
        CHECK_EQ_INT(emt_tokenizer_pad(t), META("pad"));
    }
    CHECK_EQ_INT(emt_tokenizer_add_bos(t), cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(meta, "add_bos")));
    CHECK(strcmp(emt_tokenizer_pre(t), cJSON_GetObjectItemCaseSensitive(meta, "pre")->valuestring) == 0);
    CHECK(strcmp(emt_tokenizer_model(t), "gpt2") == 0);
    int n_control = 0;
    for (int32_t i = 0; i < emt_tokenizer_n_vocab(t); i++)
        n_control += emt_tokenizer_token_type(t, i) == EMT_TOKEN_CONTROL;
    CHECK_EQ_INT(n_control, META("n_control"));
#undef META
    cJSON_Delete(rec);
    /* stop on <|im_end|> (2) and <|endoftext|> (0), not on <|im_start|> */
    CHECK(emt_tokenizer_is_eog(t, 2));
    CHECK(emt_tokenizer_is_eog(t, 0));
    CHECK(!emt_tokenizer_is_eog(t, 1));
    CHECK(!emt_tokenizer_is_eog(t, 198));
    CHECK(emt_tokenizer_chat_template(t) != NULL);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* tokenizer.json in SmolLM2's layout (vocab, merges, control tokens as
 * special added tokens, Digits + ByteLevel pre-tokenizer) and
 * tokenizer_config.json (chat template, bos/eos/pad names), both written
 * from the GGUF's metadata. */
static int write_hf_dir(const emt_gguf *g, const char *dir, const char *pre_kind) {
    mkdir(dir, 0755);
    cJSON *root = cJSON_CreateObject(), *model = cJSON_CreateObject(), *vocab = cJSON_CreateObject();
    cJSON *merges = cJSON_CreateArray(), *added = cJSON_CreateArray();
    emt_gguf_type et;
    int64_t n = 0, nm = 0;
    CHECK_OK(emt_gguf_get_arr(g, "tokenizer.ggml.tokens", &et, &n));
    CHECK_OK(emt_gguf_get_arr(g, "tokenizer.ggml.merges", &et, &nm));
    char *buf = malloc(4096);
    for (int64_t i = 0; i < n; i++) {
        const char *s;
        size_t len;
        int64_t ty = 1;
        emt_gguf_arr_str(g, "tokenizer.ggml.tokens", i, &s, &len);
        emt_gguf_arr_i64(g, "tokenizer.ggml.token_type", i, &ty);
        memcpy(buf, s, len < 4095 ? len : 4095);
        buf[len < 4095 ? len : 4095] = '\0';
        cJSON_AddNumberToObject(vocab, buf, (double)i);
        if (ty == EMT_TOKEN_CONTROL) {
            cJSON *a = cJSON_CreateObject();
            cJSON_AddNumberToObject(a, "id", (double)i);
            cJSON_AddStringToObject(a, "content", buf);
            cJSON_AddBoolToObject(a, "special", 1);
            cJSON_AddItemToArray(added, a);
        }
    }
    for (int64_t i = 0; i < nm; i++) {
        const char *s;
        size_t len;
        emt_gguf_arr_str(g, "tokenizer.ggml.merges", i, &s, &len);
        memcpy(buf, s, len < 4095 ? len : 4095);
        buf[len < 4095 ? len : 4095] = '\0';
        cJSON_AddItemToArray(merges, cJSON_CreateString(buf));
    }
    cJSON_AddStringToObject(root, "version", "1.0");
    cJSON_AddItemToObject(root, "added_tokens", added);
    cJSON_AddNullToObject(root, "normalizer");
    cJSON *pre = cJSON_CreateObject(), *steps = cJSON_CreateArray();
    cJSON *first = cJSON_CreateObject(), *bl = cJSON_CreateObject();
    int llama3 = strcmp(pre_kind, "llama-bpe") == 0;
    if (llama3) { /* Split(Llama 3 regex, Isolated) */
        cJSON *pat = cJSON_CreateObject();
        cJSON_AddStringToObject(pat, "Regex",
                                "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}|"
                                " ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+");
        cJSON_AddStringToObject(first, "type", "Split");
        cJSON_AddItemToObject(first, "pattern", pat);
        cJSON_AddStringToObject(first, "behavior", "Isolated");
        cJSON_AddBoolToObject(first, "invert", 0);
    } else {
        cJSON_AddStringToObject(first, "type", "Digits");
        cJSON_AddBoolToObject(first, "individual_digits", 1);
    }
    cJSON_AddStringToObject(bl, "type", "ByteLevel");
    cJSON_AddBoolToObject(bl, "add_prefix_space", 0);
    cJSON_AddBoolToObject(bl, "trim_offsets", 1);
    cJSON_AddBoolToObject(bl, "use_regex", !llama3);
    if (strcmp(pre_kind, "gpt2") == 0) {
        cJSON_Delete(first);
        cJSON_Delete(steps);
        cJSON_Delete(pre);
        pre = bl;
    } else {
        cJSON_AddItemToArray(steps, first);
        cJSON_AddItemToArray(steps, bl);
        cJSON_AddStringToObject(pre, "type", "Sequence");
        cJSON_AddItemToObject(pre, "pretokenizers", steps);
    }
    cJSON_AddItemToObject(root, "pre_tokenizer", pre);
    cJSON_AddNullToObject(root, "post_processor");
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON_AddNullToObject(model, "unk_token");
    cJSON_AddBoolToObject(model, "byte_fallback", 0);
    cJSON_AddBoolToObject(model, "ignore_merges", llama3);
    cJSON_AddItemToObject(model, "vocab", vocab);
    cJSON_AddItemToObject(model, "merges", merges);
    cJSON_AddItemToObject(root, "model", model);
    char *json = cJSON_PrintUnformatted(root);
    char path[1024];
    snprintf(path, sizeof path, "%s/tokenizer.json", dir);
    write_file(path, json);
    free(json);
    cJSON_Delete(root);

    cJSON *cfg = cJSON_CreateObject();
    const char *tmpl;
    size_t tl;
    CHECK_OK(emt_gguf_get_str(g, "tokenizer.chat_template", &tmpl, &tl));
    char *tcopy = malloc(tl + 1);
    memcpy(tcopy, tmpl, tl);
    tcopy[tl] = '\0';
    cJSON_AddStringToObject(cfg, "chat_template", tcopy);
    cJSON_AddStringToObject(cfg, "bos_token", "<|im_start|>");
    cJSON_AddStringToObject(cfg, "eos_token", "<|im_end|>");
    cJSON_AddStringToObject(cfg, "pad_token", "<|im_end|>");
    cJSON_AddStringToObject(cfg, "unk_token", "<|endoftext|>");
    json = cJSON_PrintUnformatted(cfg);
    snprintf(path, sizeof path, "%s/tokenizer_config.json", dir);
    write_file(path, json);
    free(json);
    free(tcopy);
    free(buf);
    cJSON_Delete(cfg);
    return 1;
}
#endif /* HAVE_GGUF_READER */

int main(void) {
#ifndef HAVE_GGUF_READER
    TEST_SKIP("this tree has no GGUF reader yet (src/io/gguf.c)");
#else
    const char *path = getenv("ENTMTP_MODEL");
    if (!path || !*path) path = DEFAULT_MODEL;
    if (access(path, R_OK) != 0) TEST_SKIP("SmolLM2 GGUF not found (run scripts/fetch-model.sh or set ENTMTP_MODEL)");
    char *data = NULL;
    size_t data_len = 0;
    CHECK_OK(emt_read_file(FIXTURE, &data, &data_len));
    if (!data) return emt_test_finish("test_tokenizer_real");

    emt_gguf *g = NULL;
    CHECK_OK(emt_gguf_open(path, &g));
    if (!g) return emt_test_finish("test_tokenizer_real");
    emt_tokenizer *t = NULL;
    double t0 = emt_now();
    CHECK_OK(emt_tokenizer_from_gguf(g, &t));
    double dt = emt_now() - t0;
    printf("tokenizer from GGUF: %d tokens in %.1f ms\n", emt_tokenizer_n_vocab(t), dt * 1e3);
#ifdef SANITIZED
    CHECK(dt < 5.0);
#else
    CHECK(dt < 1.0);
#endif
    if (t) {
        check_meta(t, data, 1);
        check_fixture(t, data, "gguf", "ids");
        check_threads(t, data);
        /* a long input: 200 KB of mixed text in one call */
        size_t big_len = 200000;
        char *big = malloc(big_len);
        const char *chunk = "The quick brown fox, 12345 \xE4\xBD\xA0\xE5\xA5\xBD!\n\t  <|im_end|> ";
        for (size_t i = 0; i < big_len; i++) big[i] = chunk[i % strlen(chunk)];
        int32_t n = 0;
        t0 = emt_now();
        CHECK_ERR(emt_tokenize(t, big, big_len, 0, 1, NULL, 0, &n), ENTMTP_ERR_BUFFER_TOO_SMALL, "");
        printf("200 KB tokenized into %d tokens in %.1f ms\n", n, (emt_now() - t0) * 1e3);
        int32_t *ids = malloc((size_t)n * sizeof *ids);
        char *back = malloc(big_len + 1);
        size_t bl = 0;
        CHECK_OK(emt_tokenize(t, big, big_len, 0, 1, ids, n, &n));
        CHECK_OK(emt_detokenize(t, ids, n, back, big_len + 1, &bl));
        CHECK(bl == big_len && memcmp(back, big, big_len) == 0);
        free(ids);
        free(back);
        free(big);
        check_random_bytes(t);
        emt_tokenizer_free(t);
    }

    /* the same vocabulary through tokenizer.json, with SmolLM2's
     * pre-tokenizer and with two others (Hugging Face ids in the fixture) */
    static const struct { const char *pre, *dir, *key; } hf[] = {
        { "smollm", ENTMTP_TEST_TMP_DIR "/smollm2_hf", "ids" },
        { "gpt2", ENTMTP_TEST_TMP_DIR "/smollm2_hf_gpt2", "ids_gpt2" },
        { "llama-bpe", ENTMTP_TEST_TMP_DIR "/smollm2_hf_llama3", "ids_llama3" },
    };
    for (size_t k = 0; k < sizeof hf / sizeof hf[0]; k++) {
        write_hf_dir(g, hf[k].dir, hf[k].pre);
        t0 = emt_now();
        CHECK_OK(emt_tokenizer_from_hf_dir(hf[k].dir, &t));
        printf("tokenizer from tokenizer.json (%s): %.1f ms\n", hf[k].pre, (emt_now() - t0) * 1e3);
        if (!t) continue;
        CHECK(strcmp(emt_tokenizer_pre(t), hf[k].pre) == 0);
        if (k == 0) check_meta(t, data, 0);
        char label[64];
        snprintf(label, sizeof label, "tokenizer.json %s", hf[k].pre);
        check_fixture(t, data, label, hf[k].key);
        emt_tokenizer_free(t);
        t = NULL;
    }
    emt_gguf_close(g);
    free(data);
    return emt_test_finish("test_tokenizer_real");
#endif
}
