/* emt_tokenizer_from_gguf on small GGUF files written here (metadata only):
 * a byte-level and a SentencePiece vocabulary, and the error cases (no
 * tokenizer, unsupported model or pre-tokenizer, bad merges, arrays of the
 * wrong length). Skipped (77) in a tree without the GGUF reader. */
#include "check.h"
#include "tokenizer/tokenizer.h"

#define HAVE_GGUF_READER 1 /* the reader is on main */
#include "io/gguf.h"

#ifdef HAVE_GGUF_READER

/* --------------------------------------------------- a minimal GGUF writer */

typedef struct kvw {
    FILE *f;
    uint64_t n_kv;
} kvw;

static void w_u32(FILE *f, uint32_t v) { fwrite(&v, 4, 1, f); }
static void w_u64(FILE *f, uint64_t v) { fwrite(&v, 8, 1, f); }
static void w_str(FILE *f, const char *s) {
    w_u64(f, strlen(s));
    fwrite(s, 1, strlen(s), f);
}

static void kv_str(kvw *w, const char *key, const char *val) {
    w_str(w->f, key);
    w_u32(w->f, 8);
    w_str(w->f, val);
    w->n_kv++;
}
static void kv_u32(kvw *w, const char *key, uint32_t val) {
    w_str(w->f, key);
    w_u32(w->f, 4);
    w_u32(w->f, val);
    w->n_kv++;
}
static void kv_bool(kvw *w, const char *key, int val) {
    w_str(w->f, key);
    w_u32(w->f, 7);
    uint8_t b = (uint8_t)val;
    fwrite(&b, 1, 1, w->f);
    w->n_kv++;
}
static void kv_strs(kvw *w, const char *key, const char *const *v, int n) {
    w_str(w->f, key);
    w_u32(w->f, 9);
    w_u32(w->f, 8);
    w_u64(w->f, (uint64_t)n);
    for (int i = 0; i < n; i++) w_str(w->f, v[i]);
    w->n_kv++;
}
static void kv_i32s(kvw *w, const char *key, const int32_t *v, int n) {
    w_str(w->f, key);
    w_u32(w->f, 9);
    w_u32(w->f, 5);
    w_u64(w->f, (uint64_t)n);
    fwrite(v, 4, (size_t)n, w->f);
    w->n_kv++;
}
static void kv_f32s(kvw *w, const char *key, const float *v, int n) {
    w_str(w->f, key);
    w_u32(w->f, 9);
    w_u32(w->f, 6);
    w_u64(w->f, (uint64_t)n);
    fwrite(v, 4, (size_t)n, w->f);
    w->n_kv++;
}

static kvw begin(const char *path) {
    kvw w = { fopen(path, "wb"), 0 };
    CHECK(w.f != NULL);
    fwrite("GGUF", 1, 4, w.f);
    w_u32(w.f, 3);
    w_u64(w.f, 0); /* tensors */
    w_u64(w.f, 0); /* kv count, patched in end() */
    kv_str(&w, "general.architecture", "llama");
    return w;
}

static void end(kvw *w) {
    long pos = ftell(w->f);
    while (pos % 32) { /* pad to the default alignment */
        fputc(0, w->f);
        pos++;
    }
    fseek(w->f, 16, SEEK_SET);
    w_u64(w->f, w->n_kv);
    fclose(w->f);
}

/* Open `path` and build its tokenizer; returns the status. */
static entmtp_status load(const char *path, emt_tokenizer **t) {
    emt_gguf *g = NULL;
    *t = NULL;
    entmtp_status st = emt_gguf_open(path, &g);
    CHECK_OK(st);
    if (st) return st;
    st = emt_tokenizer_from_gguf(g, t);
    emt_gguf_close(g);
    return st;
}

#define TMP(name) ENTMTP_TEST_TMP_DIR "/tok_" name ".gguf"

/* ids 0..4 specials-ish, then a b c ab abc Ġ */
static const char *const g_tok[] = { "<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tool>", "x",
                                     "a", "b", "c", "ab", "abc", "\xC4\xA0", "\xC4\xA0\x61" };
static const int32_t g_types[] = { 3, 3, 3, 4, 1, 1, 1, 1, 1, 1, 1, 1 };
static const char *const g_merges[] = { "a b", "ab c", "\xC4\xA0 a" };
#define NT 12

static void write_bpe(const char *path, const char *model, const char *pre, const char *const *merges,
                      int n_merges, int n_types) {
    kvw w = begin(path);
    if (model) kv_str(&w, "tokenizer.ggml.model", model);
    if (pre) kv_str(&w, "tokenizer.ggml.pre", pre);
    kv_strs(&w, "tokenizer.ggml.tokens", g_tok, NT);
    kv_i32s(&w, "tokenizer.ggml.token_type", g_types, n_types);
    kv_strs(&w, "tokenizer.ggml.merges", merges, n_merges);
    kv_u32(&w, "tokenizer.ggml.bos_token_id", 1);
    kv_u32(&w, "tokenizer.ggml.eos_token_id", 2);
    kv_u32(&w, "tokenizer.ggml.unknown_token_id", 0);
    kv_u32(&w, "tokenizer.ggml.padding_token_id", 99999); /* out of range: ignored */
    kv_bool(&w, "tokenizer.ggml.add_bos_token", 0);
    kv_str(&w, "tokenizer.chat_template", "{{'<|im_start|>' + m['role']}}");
    end(&w);
}

static void test_bpe(void) {
    emt_tokenizer *t = NULL;
    write_bpe(TMP("bpe"), "gpt2", "smollm", g_merges, 3, NT);
    CHECK_OK(load(TMP("bpe"), &t));
    if (!t) return;
    CHECK_EQ_INT(emt_tokenizer_n_vocab(t), NT);
    CHECK_EQ_INT(emt_tokenizer_bos(t), 1);
    CHECK_EQ_INT(emt_tokenizer_eos(t), 2);
    CHECK_EQ_INT(emt_tokenizer_unk(t), 0);
    CHECK_EQ_INT(emt_tokenizer_pad(t), -1);
    CHECK_EQ_INT(emt_tokenizer_add_bos(t), 0);
    CHECK(strcmp(emt_tokenizer_pre(t), "smollm") == 0);
    int32_t ids[16], n = 0;
    CHECK_OK(emt_tokenize(t, "<|im_start|>abc a<tool>", 23, 0, 1, ids, 16, &n));
    CHECK_EQ_INT(n, 4);
    CHECK(n == 4 && ids[0] == 1 && ids[1] == 9 && ids[2] == 11 && ids[3] == 3);
    char buf[64];
    size_t len;
    CHECK_OK(emt_chat_prompt(t, NULL, "Hi", buf, sizeof buf, &len));
    CHECK(strcmp(buf, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n") == 0);
    CHECK(emt_tokenizer_is_eog(t, 2) && emt_tokenizer_is_eog(t, 0));
    emt_tokenizer_free(t);

    /* no pre-tokenizer key: "default" */
    write_bpe(TMP("nopre"), "gpt2", NULL, g_merges, 3, NT);
    CHECK_OK(load(TMP("nopre"), &t));
    if (t) CHECK(strcmp(emt_tokenizer_pre(t), "default") == 0);
    emt_tokenizer_free(t);
}

static void test_errors(void) {
    emt_tokenizer *t = NULL;
    write_bpe(TMP("nomodel"), NULL, "smollm", g_merges, 3, NT);
    CHECK_ERR(load(TMP("nomodel"), &t), ENTMTP_ERR_NOT_FOUND, "tok_nomodel.gguf: no tokenizer");
    write_bpe(TMP("none"), "none", NULL, g_merges, 3, NT);
    CHECK_ERR(load(TMP("none"), &t), ENTMTP_ERR_NOT_FOUND, "no tokenizer");
    write_bpe(TMP("bert"), "bert", NULL, g_merges, 3, NT);
    CHECK_ERR(load(TMP("bert"), &t), ENTMTP_ERR_UNSUPPORTED, "tokenizer model 'bert'");
    write_bpe(TMP("pre"), "gpt2", "qwen9", g_merges, 3, NT);
    CHECK_ERR(load(TMP("pre"), &t), ENTMTP_ERR_UNSUPPORTED, "tok_pre.gguf: pre-tokenizer 'qwen9'");
    const char *bad[] = { "a b", "b c" };
    write_bpe(TMP("merge"), "gpt2", "gpt2", bad, 2, NT);
    CHECK_ERR(load(TMP("merge"), &t), ENTMTP_ERR_FORMAT,
              "tok_merge.gguf: merge 1 ('b c'): the concatenation 'bc' is not in the vocabulary");
    write_bpe(TMP("types"), "gpt2", "gpt2", g_merges, 3, NT - 1);
    CHECK_ERR(load(TMP("types"), &t), ENTMTP_ERR_FORMAT, "tokenizer.ggml.token_type has 11 entries");
    kvw w = begin(TMP("notokens"));
    kv_str(&w, "tokenizer.ggml.model", "gpt2");
    end(&w);
    CHECK_ERR(load(TMP("notokens"), &t), ENTMTP_ERR_FORMAT, "tokenizer.ggml.tokens is absent");
    CHECK(t == NULL);
    CHECK_ERR(emt_tokenizer_from_gguf(NULL, &t), ENTMTP_ERR_INVALID_ARGUMENT, "");
}

/* A boolean key and its value, for write_spm. */
typedef struct {
    const char *key;
    int value;
} bool_key;

/* Writes test_spm's SentencePiece vocabulary (264 tokens) to path: with the
 * BOS (1) and EOS (2) ids when `bos_eos`, the UNK id (0) when `unk`, then the
 * n_bools boolean keys. */
static void write_spm(const char *path, const char **tok, const int32_t *types, const float *scores, int bos_eos,
                      int unk, const bool_key *bools, int n_bools) {
    kvw w = begin(path);
    kv_str(&w, "tokenizer.ggml.model", "llama");
    kv_strs(&w, "tokenizer.ggml.tokens", tok, 264);
    kv_i32s(&w, "tokenizer.ggml.token_type", types, 264);
    kv_f32s(&w, "tokenizer.ggml.scores", scores, 264);
    if (bos_eos) {
        kv_u32(&w, "tokenizer.ggml.bos_token_id", 1);
        kv_u32(&w, "tokenizer.ggml.eos_token_id", 2);
    }
    if (unk) kv_u32(&w, "tokenizer.ggml.unknown_token_id", 0);
    for (int i = 0; i < n_bools; i++) kv_bool(&w, bools[i].key, bools[i].value);
    end(&w);
}

static void test_spm(void) {
    /* <unk> <s> </s> <0x00>..<0xFF> ▁ h i ▁h ▁hi */
    static char bytes[256][8];
    const char *tok[264];
    int32_t types[264];
    float scores[264];
    tok[0] = "<unk>"; tok[1] = "<s>"; tok[2] = "</s>";
    types[0] = 2; types[1] = 3; types[2] = 3;
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        tok[3 + b] = bytes[b];
        types[3 + b] = 6;
    }
    const char *rest[] = { "\xE2\x96\x81", "h", "i", "\xE2\x96\x81h", "\xE2\x96\x81hi" };
    for (int i = 0; i < 5; i++) {
        tok[259 + i] = rest[i];
        types[259 + i] = 1;
    }
    for (int i = 0; i < 264; i++) scores[i] = i >= 259 ? -(float)(i - 259) : 0.0f;
    write_spm(TMP("spm"), tok, types, scores, 1, 1, NULL, 0);
    emt_tokenizer *t = NULL;
    CHECK_OK(load(TMP("spm"), &t));
    if (!t) return;
    CHECK(strcmp(emt_tokenizer_model(t), "llama") == 0);
    CHECK_EQ_INT(emt_tokenizer_add_bos(t), 1); /* llama default */
    int32_t ids[16], n = 0;
    CHECK_OK(emt_tokenize(t, "hi!", 3, 1, 0, ids, 16, &n));
    CHECK(n == 3 && ids[0] == 1 && ids[1] == 263 && ids[2] == 3 + '!');
    char buf[32];
    size_t len;
    CHECK_OK(emt_detokenize(t, ids, n, buf, sizeof buf, &len));
    CHECK(strcmp(buf, "<s> hi!") == 0);
    CHECK_EQ_INT(emt_tokenizer_add_eos(t), 0); /* llama default */
    CHECK_OK(emt_tokenize(t, "hi!", 3, ENTMTP_TOKENIZE_ADD_SPECIAL, 0, ids, 16, &n));
    CHECK(n == 3 && ids[0] == 1 && ids[1] == 263 && ids[2] == 3 + '!');
    emt_tokenizer_free(t);

    /* add_eos_token: ADD_SPECIAL ends with the EOS, the old switch does not;
     * add_sep_token adds nothing to a SentencePiece vocabulary (llama.cpp) */
    const bool_key eos_keys[] = { { "tokenizer.ggml.add_eos_token", 1 }, { "tokenizer.ggml.add_sep_token", 1 } };
    write_spm(TMP("spm_eos"), tok, types, scores, 1, 0, eos_keys, 2);
    CHECK_OK(load(TMP("spm_eos"), &t));
    if (!t) return;
    CHECK_EQ_INT(emt_tokenizer_add_eos(t), 1);
    CHECK_OK(emt_tokenize(t, "hi!", 3, ENTMTP_TOKENIZE_ADD_SPECIAL, 0, ids, 16, &n));
    CHECK(n == 4 && ids[0] == 1 && ids[1] == 263 && ids[2] == 3 + '!' && ids[3] == 2);
    CHECK_OK(emt_tokenize(t, "hi!", 3, ENTMTP_TOKENIZE_FORCE_BOS, 0, ids, 16, &n));
    CHECK(n == 3 && ids[0] == 1);
    CHECK_OK(emt_tokenize(t, "hi!", 3, ENTMTP_TOKENIZE_NO_SPECIAL, 0, ids, 16, &n));
    CHECK(n == 2 && ids[0] == 263);
    emt_tokenizer_free(t);

    /* add_space_prefix = false */
    const bool_key noprefix_keys[] = { { "tokenizer.ggml.add_space_prefix", 0 }, { "tokenizer.ggml.add_bos_token", 0 } };
    write_spm(TMP("spm_noprefix"), tok, types, scores, 0, 0, noprefix_keys, 2);
    CHECK_OK(load(TMP("spm_noprefix"), &t));
    if (!t) return;
    CHECK_EQ_INT(emt_tokenizer_add_bos(t), 0);
    CHECK_EQ_INT(emt_tokenizer_bos(t), -1);
    CHECK_OK(emt_tokenize(t, "hi", 2, 1, 0, ids, 16, &n));
    CHECK(n == 2 && ids[0] == 260 && ids[1] == 261);
    emt_tokenizer_free(t);
}

int main(void) {
    test_bpe();
    test_errors();
    test_spm();
    return emt_test_finish("test_tokenizer_gguf");
}

#else
int main(void) { TEST_SKIP("this tree has no GGUF reader yet (src/io/gguf.c)"); }
#endif
