/* Tokenizer on small hand-built vocabularies with hand-worked expected ids:
 * merge order, special and user-defined tokens, pre-tokenizers (digits,
 * whitespace runs, Llama 3 groups), unicode and invalid UTF-8, buffer
 * protocol, spec validation, detokenisation round trips, SentencePiece,
 * chat formats, the tokenizer.json loader. */
#include "check.h"
#include "tokenizer/tokenizer.h"

#include <stdint.h>
#include <sys/stat.h>

/* ------------------------------------------------------------ helpers */

/* GPT-2's byte -> character map, written out independently of the library. */
static void byte_char(int b, char out[3]) {
    int printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    unsigned cp = (unsigned)b;
    if (!printable) {
        unsigned k = 0;
        for (int c = 0; c < b; c++)
            if (!((c >= 0x21 && c <= 0x7E) || (c >= 0xA1 && c <= 0xAC) || (c >= 0xAE && c <= 0xFF))) k++;
        cp = 0x100 + k;
    }
    if (cp < 0x80) {
        out[0] = (char)cp;
        out[1] = 0;
    } else {
        out[0] = (char)(0xC0 | (cp >> 6));
        out[1] = (char)(0x80 | (cp & 0x3F));
        out[2] = 0;
    }
}

/* Byte-level vocabulary: ids 0..255 are the bytes, then these. */
enum {
    IM_START = 256, IM_END, ENDOFTEXT, TOOL, IM_PREFIX, HE, LL, HELL, HELLO, G_HELLO, GG, T12, AA,
    AAA, BC, AB, E_ACUTE, LT_BAR, IM, HE_DUP, SLASH_S, XYZ, N_TOKENS
};
static const struct { const char *text; int type; } g_extra[] = {
    { "<|im_start|>", EMT_TOKEN_CONTROL }, { "<|im_end|>", EMT_TOKEN_CONTROL },
    { "<|endoftext|>", EMT_TOKEN_CONTROL }, { "<tool>", EMT_TOKEN_USER_DEFINED },
    { "<|im", EMT_TOKEN_CONTROL }, { "he", 1 }, { "ll", 1 }, { "hell", 1 }, { "hello", 1 },
    { "\xC4\xA0hello", 1 }, { "\xC4\xA0\xC4\xA0", 1 }, { "12", 1 }, { "aa", 1 }, { "aaa", 1 },
    { "bc", 1 }, { "ab", 1 }, { "\xC3\x83\xC2\xA9", 1 }, { "<|", 1 }, { "im", 1 }, { "he", 1 },
    { "</s>", 1 }, { "xyz", 1 },
};
static const char *const g_merges[] = {
    "h e", "l l", "he ll", "hell o", "\xC4\xA0 hello", "\xC4\xA0 \xC4\xA0", "1 2", "a a", "b c",
    "a b", "aa a", "\xC3\x83 \xC2\xA9", "< |", "i m",
    "<| im", /* "<|im" exists only as a control token: never formed by BPE */
    "h e",   /* repeated pair: keeps rank 0 */
};

static char g_texts[N_TOKENS][16];
static const char *g_tok[N_TOKENS];
static int32_t g_types[N_TOKENS];

static void init_vocab(void) {
    for (int b = 0; b < 256; b++) {
        byte_char(b, g_texts[b]);
        g_tok[b] = g_texts[b];
        g_types[b] = EMT_TOKEN_NORMAL;
    }
    for (int i = 256; i < N_TOKENS; i++) {
        g_tok[i] = g_extra[i - 256].text;
        g_types[i] = g_extra[i - 256].type;
    }
}

static emt_tokenizer_spec base_spec(const char *pre) {
    emt_tokenizer_spec s;
    memset(&s, 0, sizeof s);
    s.model = "gpt2";
    s.pre = pre;
    s.n_tokens = N_TOKENS;
    s.tokens = g_tok;
    s.token_types = g_types;
    s.n_merges = (int32_t)(sizeof g_merges / sizeof g_merges[0]);
    s.merges = g_merges;
    s.bos = IM_START;
    s.eos = IM_END;
    s.unk = -1;
    s.pad = -1;
    s.eot = ENDOFTEXT;
    return s;
}

static emt_tokenizer *make(const char *pre) {
    emt_tokenizer_spec s = base_spec(pre);
    emt_tokenizer *t = NULL;
    CHECK_OK(emt_tokenizer_create(&s, &t));
    return t;
}

/* Tokenize and compare with the expected ids (terminated by -1). */
#define EXPECT_BUF(t, text, len, bos, special, ...)                                         \
    do {                                                                                     \
        const int32_t exp_[] = { __VA_ARGS__, -1 };                                          \
        expect_ids(t, text, len, bos, special, exp_, __LINE__);                              \
    } while (0)
/* `lit` is a string literal (may hold NULs) */
#define EXPECT(t, lit, bos, special, ...) EXPECT_BUF(t, lit, sizeof(lit) - 1, bos, special, __VA_ARGS__)

static void expect_ids(const emt_tokenizer *t, const char *text, size_t len, int bos, int special,
                       const int32_t *exp, int line) {
    int32_t got[512], n = -1;
    int32_t n_exp = 0;
    while (exp[n_exp] != -1) n_exp++;
    entmtp_status st = emt_tokenize(t, text, len, bos, special, got, 512, &n);
    int ok = st == ENTMTP_OK && n == n_exp;
    for (int32_t i = 0; ok && i < n; i++) ok = got[i] == exp[i];
    if (!ok) {
        fprintf(stderr, "line %d: tokenize(\"%.*s\") status %d:\n  got     ", line, (int)len, text, st);
        for (int32_t i = 0; i < n && i < 512; i++) fprintf(stderr, " %d", got[i]);
        fprintf(stderr, "\n  expected");
        for (int32_t i = 0; i < n_exp; i++) fprintf(stderr, " %d", exp[i]);
        fprintf(stderr, "\n");
        emt_test_failures++;
    }
}

static void expect_roundtrip(const emt_tokenizer *t, const char *text, size_t len) {
    int32_t n = 0;
    int32_t *ids = malloc((len + 2) * sizeof *ids);
    char *back = malloc(len + 1);
    CHECK_OK(emt_tokenize(t, text, len, 0, 0, ids, (int32_t)len + 2, &n));
    size_t m = 0;
    CHECK_OK(emt_detokenize(t, ids, n, back, len + 1, &m));
    CHECK_EQ_INT(m, len);
    CHECK(m == len && memcmp(back, text, len) == 0);
    free(ids);
    free(back);
}

#define S(lit) lit, sizeof(lit) - 1

/* ------------------------------------------------------------ byte-level */

static void test_bpe_merges(void) {
    emt_tokenizer *t = make("smollm");
    if (!t) return;
    EXPECT(t, "hello", 0, 1, HELLO);
    EXPECT(t, " hello", 0, 1, G_HELLO);
    EXPECT(t, "hello hello", 0, 1, HELLO, G_HELLO);
    EXPECT(t, "he", 0, 1, HE);          /* first id of a duplicated text */
    EXPECT(t, "hel", 0, 1, HE, 'l');
    /* rank order, not left to right: "b c" (rank 8) before "a b" (rank 9) */
    EXPECT(t, "abc", 0, 1, 'a', BC);
    EXPECT(t, "ab", 0, 1, AB);
    /* equal ranks: leftmost first; new pairs compete by rank */
    EXPECT(t, "aa", 0, 1, AA);
    EXPECT(t, "aaa", 0, 1, AAA);
    EXPECT(t, "aaaa", 0, 1, AA, AA);
    EXPECT(t, "aaaaa", 0, 1, AA, AAA);
    /* whitespace runs: "  " + " b" (\s+(?!\S)), newlines, tabs */
    EXPECT(t, "a   b", 0, 1, 'a', GG, ' ', 'b');
    EXPECT(t, "a  ", 0, 1, 'a', GG);
    EXPECT(t, "\n\n", 0, 1, '\n', '\n');
    EXPECT(t, "a\t b", 0, 1, 'a', '\t', ' ', 'b');
    EXPECT(t, "x \n y", 0, 1, 'x', ' ', '\n', ' ', 'y');
    /* contractions */
    EXPECT(t, "it's", 0, 1, 'i', 't', '\'', 's');
    /* unicode: bytes through the byte map, é merged */
    EXPECT(t, "\xC3\xA9", 0, 1, E_ACUTE);
    EXPECT(t, "\xE6\x97\xA5", 0, 1, 0xE6, 0x97, 0xA5);
    EXPECT(t, "\xF0\x9F\x98\x80", 0, 1, 0xF0, 0x9F, 0x98, 0x80);
    /* invalid UTF-8: the bytes still go through byte-level BPE */
    EXPECT(t, "\xFF\xC3(", 0, 1, 0xFF, 0xC3, '(');
    EXPECT(t, "\xC3\xC3\xA9", 0, 1, 0xC3, E_ACUTE);
    EXPECT(t, "a\x00" "b", 0, 1, 'a', 0, 'b');
    /* empty text, BOS */
    int32_t one[1], n = -1;
    CHECK_OK(emt_tokenize(t, "", 0, 0, 1, NULL, 0, &n));
    CHECK_EQ_INT(n, 0);
    CHECK_OK(emt_tokenize(t, NULL, 0, 1, 1, one, 1, &n));
    CHECK_EQ_INT(n, 1);
    CHECK_EQ_INT(one[0], IM_START);
    EXPECT(t, "hello", 1, 1, IM_START, HELLO);
    emt_tokenizer_free(t);
}

static void test_pretokenizers(void) {
    emt_tokenizer *sm = make("smollm"), *g2 = make("gpt2"), *df = make("default"),
                  *l3 = make("llama-bpe");
    if (!sm || !g2 || !df || !l3) return;
    /* smollm: every digit alone; gpt2: " ?\p{N}+" then merges */
    EXPECT(sm, "12345", 0, 1, '1', '2', '3', '4', '5');
    EXPECT(g2, "12345", 0, 1, T12, '3', '4', '5');
    EXPECT(df, "12345", 0, 1, T12, '3', '4', '5');
    EXPECT(sm, "a 12", 0, 1, 'a', ' ', '1', '2');
    EXPECT(g2, "a 12", 0, 1, 'a', ' ', T12); /* one pre-token " 12" */
    /* non-ASCII digits are \p{N} too: U+0661 U+0662 (d9 a1, d9 a2) */
    EXPECT(sm, "\xD9\xA1\xD9\xA2", 0, 1, 0xD9, 0xA1, 0xD9, 0xA2);
    /* llama-bpe: digits in groups of three, a letter run takes one leading
     * non-letter, whole pre-tokens that are tokens are not merged */
    EXPECT(l3, "1212", 0, 1, T12, '1', '2');
    EXPECT(l3, "xyz", 0, 1, XYZ);
    EXPECT(g2, "xyz", 0, 1, 'x', 'y', 'z');
    EXPECT(l3, "IT'S", 0, 1, 'I', 'T', '\'', 'S');
    EXPECT(l3, "_hello", 0, 1, '_', HELLO); /* "_hello" is one pre-token */
    CHECK(strcmp(emt_tokenizer_pre(l3), "llama-bpe") == 0);
    CHECK(strcmp(emt_tokenizer_model(l3), "gpt2") == 0);
    emt_tokenizer_free(sm);
    emt_tokenizer_free(g2);
    emt_tokenizer_free(df);
    emt_tokenizer_free(l3);
}

static void test_specials(void) {
    emt_tokenizer *t = make("smollm");
    if (!t) return;
    EXPECT(t, "<|im_start|>hello<|im_end|>", 0, 1, IM_START, HELLO, IM_END);
    /* as text: "<|" + "im" + "_" + "start" + "|>" ... never the control ids */
    EXPECT(t, "<|im_start|>hello<|im_end|>", 0, 0, LT_BAR, IM, '_', 's', 't', 'a', 'r', 't',
               '|', '>', HELLO, LT_BAR, IM, '_', 'e', 'n', 'd', '|', '>');
    /* longest match: "<|im_start|>" over its prefix "<|im" */
    EXPECT(t, "<|im_x", 0, 1, IM_PREFIX, '_', 'x');
    EXPECT(t, "<|im_x", 0, 0, LT_BAR, IM, '_', 'x');
    EXPECT(t, "<|im_start|><|im_start|>", 0, 1, IM_START, IM_START);
    EXPECT(t, "a<|endoftext|>", 1, 1, IM_START, 'a', ENDOFTEXT);
    /* user-defined tokens match with or without parse_special */
    EXPECT(t, "<tool>he", 0, 0, TOOL, HE);
    EXPECT(t, "<tool>he", 0, 1, TOOL, HE);
    /* a special splits the text: no BPE across it */
    EXPECT(t, "he<|im_end|>llo", 0, 1, HE, IM_END, LL, 'o');
    CHECK_EQ_INT(emt_tokenizer_find(t, "<|im", 4), IM_PREFIX);
    CHECK_EQ_INT(emt_tokenizer_find(t, "he", 2), HE);
    CHECK_EQ_INT(emt_tokenizer_find(t, "nope", 4), -1);
    CHECK_EQ_INT(emt_tokenizer_token_type(t, TOOL), EMT_TOKEN_USER_DEFINED);
    size_t L = 0;
    CHECK(strcmp(emt_tokenizer_token_text(t, G_HELLO, &L), "\xC4\xA0hello") == 0 && L == 7);
    CHECK(emt_tokenizer_token_text(t, N_TOKENS, NULL) == NULL);
    /* end of generation: eos, eot and control tokens spelled like one */
    CHECK(emt_tokenizer_is_eog(t, IM_END));
    CHECK(emt_tokenizer_is_eog(t, ENDOFTEXT));
    CHECK(!emt_tokenizer_is_eog(t, IM_START));
    CHECK(!emt_tokenizer_is_eog(t, SLASH_S)); /* a normal token "</s>" is text */
    CHECK(!emt_tokenizer_is_eog(t, -1));
    CHECK(!emt_tokenizer_is_eog(t, N_TOKENS));
    CHECK_EQ_INT(emt_tokenizer_n_vocab(t), N_TOKENS);
    CHECK_EQ_INT(emt_tokenizer_bos(t), IM_START);
    CHECK_EQ_INT(emt_tokenizer_eos(t), IM_END);
    CHECK_EQ_INT(emt_tokenizer_eot(t), ENDOFTEXT);
    emt_tokenizer_free(t);

    /* eog by text alone (no eos/eot set) */
    emt_tokenizer_spec s = base_spec("smollm");
    s.eos = s.eot = -1;
    CHECK_OK(emt_tokenizer_create(&s, &t));
    CHECK(emt_tokenizer_is_eog(t, IM_END) && emt_tokenizer_is_eog(t, ENDOFTEXT));
    emt_tokenizer_free(t);
}

static void test_buffers_and_decode(void) {
    emt_tokenizer *t = make("smollm");
    if (!t) return;
    int32_t ids[8], n = -1;
    /* "hello hello x" = 4 tokens */
    CHECK_ERR(emt_tokenize(t, S("hello hello x"), 0, 1, NULL, 0, &n), ENTMTP_ERR_BUFFER_TOO_SMALL, "");
    CHECK_EQ_INT(n, 4);
    CHECK_ERR(emt_tokenize(t, S("hello hello x"), 0, 1, ids, 3, &n), ENTMTP_ERR_BUFFER_TOO_SMALL, "4 tokens");
    CHECK_EQ_INT(n, 4);
    CHECK_OK(emt_tokenize(t, S("hello hello x"), 0, 1, ids, 4, &n));
    CHECK_EQ_INT(n, 4);
    CHECK_ERR(emt_tokenize(t, S("x"), 0, 1, NULL, 2, &n), ENTMTP_ERR_INVALID_ARGUMENT, "");
    CHECK_ERR(emt_tokenize(t, S("x"), 0, 1, ids, -1, &n), ENTMTP_ERR_INVALID_ARGUMENT, "");
    CHECK_ERR(emt_tokenize(t, S("x"), 0, 1, ids, 8, NULL), ENTMTP_ERR_INVALID_ARGUMENT, "");

    /* detokenize: exact bytes, specials as text */
    const int32_t toks[] = { IM_START, HELLO, G_HELLO, E_ACUTE, GG, 0xFF, IM_END };
    const char want[] = "<|im_start|>hello hello\xC3\xA9  \xFF<|im_end|>";
    char buf[64];
    size_t len = 0;
    CHECK_OK(emt_detokenize(t, toks, 7, buf, sizeof buf, &len));
    CHECK_EQ_INT(len, sizeof want - 1);
    CHECK(memcmp(buf, want, sizeof want) == 0); /* NUL-terminated when it fits */
    CHECK_ERR(emt_detokenize(t, toks, 7, buf, 10, &len), ENTMTP_ERR_BUFFER_TOO_SMALL, "");
    CHECK_EQ_INT(len, sizeof want - 1);
    CHECK_ERR(emt_detokenize(t, toks, 7, NULL, 0, &len), ENTMTP_ERR_BUFFER_TOO_SMALL, "");
    CHECK_EQ_INT(len, sizeof want - 1);
    memset(buf, 'Z', sizeof buf);
    CHECK_OK(emt_detokenize(t, toks, 7, buf, sizeof want - 1, &len)); /* fits without the NUL */
    CHECK(buf[sizeof want - 1] == 'Z');
    CHECK_OK(emt_detokenize(t, toks, 0, buf, sizeof buf, &len));
    CHECK_EQ_INT(len, 0);
    CHECK(buf[0] == '\0');
    const int32_t bad[] = { HELLO, 3, N_TOKENS + 5 };
    CHECK_ERR(emt_detokenize(t, bad, 3, buf, sizeof buf, &len), ENTMTP_ERR_OUT_OF_RANGE,
              "token id 283 at position 2");
    const int32_t neg[] = { -1 };
    CHECK_ERR(emt_detokenize(t, neg, 1, buf, sizeof buf, &len), ENTMTP_ERR_OUT_OF_RANGE, "-1");

    /* round trips of arbitrary bytes, invalid UTF-8 and NULs included */
    char all[256];
    for (int b = 0; b < 256; b++) all[b] = (char)b;
    expect_roundtrip(t, all, sizeof all);
    const char *samples[] = { "hello hello  world\n\n\t x", "\xC3\xA9\xE6\x97\xA5\xF0\x9F\x98\x80",
                              "\xFF\xFE\xC3\x28\xA0\xA1\xE2\x82\x28\xF0\x90\x28\xBC", "aaaaa12345abc",
                              "<|im_start|> <tool>" };
    for (size_t i = 0; i < sizeof samples / sizeof samples[0]; i++)
        expect_roundtrip(t, samples[i], strlen(samples[i]));
    uint32_t x = 12345;
    char rnd[300];
    for (int k = 0; k < 200; k++) {
        size_t L = (size_t)(k % 37) * 8;
        for (size_t i = 0; i < L; i++) {
            x = x * 1664525u + 1013904223u;
            rnd[i] = (char)(x >> 24);
        }
        expect_roundtrip(t, rnd, L);
    }
    emt_tokenizer_free(t);
}

static void test_missing_bytes(void) {
    /* a vocabulary without the byte 'q': dropped (no unk) */
    init_vocab();
    char none[2] = "";
    g_tok['q'] = none; /* empty text: no token for that byte */
    emt_tokenizer_spec s = base_spec("smollm");
    emt_tokenizer *t = NULL;
    CHECK_OK(emt_tokenizer_create(&s, &t));
    if (t) {
        EXPECT(t, "aqa", 0, 1, AA); /* the neighbours meet, as in HF */
        emt_tokenizer_free(t);
    }
    init_vocab();
}

static void test_invalid_specs(void) {
    emt_tokenizer *t = (emt_tokenizer *)1;
    emt_tokenizer_spec s = base_spec("smollm");
    CHECK_ERR(emt_tokenizer_create(NULL, &t), ENTMTP_ERR_INVALID_ARGUMENT, "spec");
    CHECK(t == NULL);
    s.n_tokens = 0;
    CHECK_ERR(emt_tokenizer_create(&s, &t), ENTMTP_ERR_INVALID_ARGUMENT, "n_tokens = 0");
    s = base_spec("smollm");
    s.bos = N_TOKENS;
    CHECK_ERR(emt_tokenizer_create(&s, &t), ENTMTP_ERR_OUT_OF_RANGE, "bos = 278");
    s = base_spec("smollm");
    s.eot = -2;
    CHECK_ERR(emt_tokenizer_create(&s, &t), ENTMTP_ERR_OUT_OF_RANGE, "eot = -2");
    s = base_spec("fancy");
    CHECK_ERR(emt_tokenizer_create(&s, &t), ENTMTP_ERR_UNSUPPORTED, "'fancy'");
    s = base_spec("smollm");
    s.model = "bert";
    CHECK_ERR(emt_tokenizer_create(&s, &t), ENTMTP_ERR_UNSUPPORTED, "'bert'");
    s.model = NULL;
    CHECK_ERR(emt_tokenizer_create(&s, &t), ENTMTP_ERR_INVALID_ARGUMENT, "model");

    const char *m_nospace[] = { "h e", "ll" };
    const char *m_twospace[] = { "h  e" };
    const char *m_missing[] = { "h e", "q zz" };
    const char *m_nocat[] = { "h e", "l l", "e l" };
    const char *m_null[] = { NULL };
    struct { const char **m; int n; const char *needle; } cases[] = {
        { m_nospace, 2, "merge 1 ('ll')" }, { m_twospace, 1, "merge 0" },
        { m_missing, 2, "merge 1 ('q zz'): 'zz' is not in the vocabulary" },
        { m_nocat, 3, "merge 2 ('e l'): the concatenation 'el'" }, { m_null, 1, "merge 0 is NULL" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        s = base_spec("smollm");
        s.merges = cases[i].m;
        s.n_merges = cases[i].n;
        CHECK_ERR(emt_tokenizer_create(&s, &t), ENTMTP_ERR_INVALID_ARGUMENT, cases[i].needle);
    }
    s = base_spec("smollm");
    s.merges = NULL;
    CHECK_ERR(emt_tokenizer_create(&s, &t), ENTMTP_ERR_INVALID_ARGUMENT, "merges is NULL");
    s = base_spec("smollm");
    int32_t types[N_TOKENS];
    memcpy(types, g_types, sizeof types);
    types[7] = 9;
    s.token_types = types;
    CHECK_ERR(emt_tokenizer_create(&s, &t), ENTMTP_ERR_INVALID_ARGUMENT, "token 7 has type 9");
    s = base_spec("smollm");
    const char *tok[N_TOKENS];
    memcpy(tok, g_tok, sizeof tok);
    tok[49] = NULL;
    s.tokens = tok;
    CHECK_ERR(emt_tokenizer_create(&s, &t), ENTMTP_ERR_INVALID_ARGUMENT, "token 49 is NULL");

    /* minimal valid specs: one token, no merges, no types, default pre */
    const char *one[] = { "a" };
    emt_tokenizer_spec m;
    memset(&m, 0, sizeof m);
    m.model = "gpt2";
    m.n_tokens = 1;
    m.tokens = one;
    m.bos = m.eos = m.unk = m.pad = m.eot = -1;
    t = NULL;
    CHECK_OK(emt_tokenizer_create(&m, &t));
    if (t) {
        EXPECT(t, "aba", 1, 1, 0, 0); /* no bos; 'b' has no token */
        CHECK(strcmp(emt_tokenizer_pre(t), "default") == 0);
        emt_tokenizer_free(t);
    }
    emt_tokenizer_free(NULL);
}

/* ---------------------------------------------------------- SentencePiece */

static void test_spm(void) {
    static char bytes[256][8];
    const char *tok[271];
    int32_t types[271];
    float scores[271];
    tok[0] = "<unk>"; types[0] = EMT_TOKEN_UNKNOWN;
    tok[1] = "<s>"; types[1] = EMT_TOKEN_CONTROL;
    tok[2] = "</s>"; types[2] = EMT_TOKEN_CONTROL;
    for (int b = 0; b < 256; b++) {
        snprintf(bytes[b], sizeof bytes[b], "<0x%02X>", b);
        tok[3 + b] = bytes[b];
        types[3 + b] = EMT_TOKEN_BYTE;
    }
    const char *rest[] = { "\xE2\x96\x81", "h", "e", "l", "o", "\xE2\x96\x81h", "he", "ll", "llo",
                           "hello", "\xE2\x96\x81hello", "\xE2\x96\x81he" };
    const float rs[] = { 0, 0, 0, 0, 0, -5, -3, -1, -4, -6, -7, -2 };
    for (int i = 0; i < 12; i++) {
        tok[259 + i] = rest[i];
        types[259 + i] = EMT_TOKEN_NORMAL;
        scores[259 + i] = rs[i];
    }
    for (int i = 0; i < 259; i++) scores[i] = 0;
    enum { SP = 259, H, E, L, O, SP_H, HE2, LL2, LLO, HELLO2, SP_HELLO, SP_HE };
    emt_tokenizer_spec s;
    memset(&s, 0, sizeof s);
    s.model = "llama";
    s.n_tokens = 271;
    s.tokens = tok;
    s.token_types = types;
    s.scores = scores;
    s.bos = 1;
    s.eos = 2;
    s.unk = 0;
    s.pad = s.eot = -1;
    s.add_bos = 1;
    s.chat_template = "{% if messages[0]['role'] == 'system' %}[INST] <<SYS>>...{% endif %}";
    emt_tokenizer *t = NULL;
    CHECK_OK(emt_tokenizer_create(&s, &t));
    if (!t) return;
    CHECK(strcmp(emt_tokenizer_model(t), "llama") == 0);
    /* "▁hello": ll (-1), he (-3), ▁he (-2), llo (-4), then ▁he+llo = ▁hello */
    EXPECT(t, "hello", 0, 1, SP_HELLO);
    EXPECT(t, "hello", 1, 1, 1, SP_HELLO);
    /* 'i' has no piece: byte fallback <0x69> */
    EXPECT(t, "hi", 0, 1, SP_H, 3 + 'i');
    EXPECT(t, "<s>hello", 0, 1, 1, SP_HELLO);         /* prefix after a special */
    EXPECT(t, "hello hello", 0, 1, SP_HELLO, SP_HELLO);
    EXPECT(t, "\xFF", 0, 1, SP, 3 + 0xFF);
    EXPECT(t, "<s>", 0, 0, SP, 3 + '<', 3 + 's', 3 + '>'); /* never the control token */
    char buf[64];
    size_t len;
    const int32_t ids[] = { 1, SP_HELLO, SP_H, 3 + 'i', 3 + 0xFF, 2 };
    CHECK_OK(emt_detokenize(t, ids, 6, buf, sizeof buf, &len));
    CHECK(len == 17 && memcmp(buf, "<s> hello hi\xFF</s>", 17) == 0);
    CHECK(emt_tokenizer_is_eog(t, 2));
    CHECK_OK(emt_chat_prompt(t, "Be brief.", "  Hi  ", buf, sizeof buf, &len));
    CHECK(strcmp(buf, "[INST] <<SYS>>\nBe brief.\n<</SYS>>\n\nHi [/INST]") == 0);
    CHECK_OK(emt_chat_prompt(t, NULL, "Hi", buf, sizeof buf, &len));
    CHECK(strcmp(buf, "[INST] Hi [/INST]") == 0);
    /* multi-turn: the eos and bos tokens' text between turns, as Llama 2's template writes them */
    const char *roles[] = { "system", "user", "assistant", "user" }, *contents[] = { "S", " a", "b ", "c" };
    char turns[128];
    CHECK_OK(emt_chat_render(t, roles, contents, 4, turns, sizeof turns, &len));
    CHECK(strcmp(turns, "[INST] <<SYS>>\nS\n<</SYS>>\n\na [/INST] b </s><s>[INST] c [/INST]") == 0);
    const char *two_users[] = { "user", "user" };
    CHECK_ERR(emt_chat_render(t, two_users, contents, 2, turns, sizeof turns, &len), ENTMTP_ERR_INVALID_ARGUMENT,
              "the Llama 2 template needs user and assistant turns to alternate");
    emt_tokenizer_free(t);
}

/* ---------------------------------------------------------------- chat */

static const char g_smollm_template[] =
    "{% for message in messages %}{% if loop.first and messages[0]['role'] != 'system' %}{{ "
    "'<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
    "Face<|im_end|>\n' }}{% endif %}{{'<|im_start|>' + message['role'] + '\n' + "
    "message['content'] + '<|im_end|>' + '\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\n' }}{% endif %}";

static void expect_chat(const char *tmpl, const char *sys, const char *user, const char *want, int line) {
    emt_tokenizer_spec s = base_spec("smollm");
    s.chat_template = tmpl;
    s.add_bos = 1; /* the tokenizer adds the BOS: a template's bos_token stays out of the text */
    emt_tokenizer *t = NULL;
    CHECK_OK(emt_tokenizer_create(&s, &t));
    if (!t) return;
    char buf[512];
    size_t len = 0;
    entmtp_status st = emt_chat_prompt(t, sys, user, buf, sizeof buf, &len);
    if (st != ENTMTP_OK || len != strlen(want) || strcmp(buf, want) != 0) {
        fprintf(stderr, "line %d: chat prompt status %d:\n  got  [%s]\n  want [%s]\n", line, st,
                st ? entmtp_last_error() : buf, want);
        emt_test_failures++;
    }
    emt_tokenizer_free(t);
}

static void expect_turns(const char *tmpl, int32_t n, const char *const *roles, const char *const *contents,
                         const char *want, int line) {
    emt_tokenizer_spec s = base_spec("smollm");
    s.chat_template = tmpl;
    s.add_bos = 1;
    emt_tokenizer *t = NULL;
    CHECK_OK(emt_tokenizer_create(&s, &t));
    if (!t) return;
    char buf[1024];
    size_t len = 0;
    entmtp_status st = emt_chat_render(t, roles, contents, n, buf, sizeof buf, &len);
    if (st != ENTMTP_OK || len != strlen(want) || strcmp(buf, want) != 0) {
        fprintf(stderr, "line %d: chat render status %d:\n  got  [%s]\n  want [%s]\n", line, st,
                st ? entmtp_last_error() : buf, want);
        emt_test_failures++;
    }
    emt_tokenizer_free(t);
}

/* Multi-turn conversations in every family (Llama 2's in test_sentencepiece,
 * whose vocabulary has <s> and </s>) and the turn orders refused. */
static void test_chat_turns(const char *l3, const char *phi3, const char *gemma) {
    const char *r3[] = { "user", "assistant", "user" }, *c3[] = { "Hi", " Hello! ", "Bye" };
    const char *r4[] = { "system", "user", "assistant", "user" }, *c4[] = { "S", "a", "b", "c" };
    expect_turns(g_smollm_template, 3, r3, c3,
                 "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
                 "Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n Hello! <|im_end|>\n"
                 "<|im_start|>user\nBye<|im_end|>\n<|im_start|>assistant\n", __LINE__);
    expect_turns(g_smollm_template, 4, r4, c4,
                 "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\na<|im_end|>\n<|im_start|>assistant\n"
                 "b<|im_end|>\n<|im_start|>user\nc<|im_end|>\n<|im_start|>assistant\n", __LINE__);
    expect_turns(l3, 3, r3, c3,
                 "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant"
                 "<|end_header_id|>\n\nHello!<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
                 "<|start_header_id|>assistant<|end_header_id|>\n\n", __LINE__);
    expect_turns(phi3, 4, r4, c4,
                 "<|system|>\nS<|end|>\n<|user|>\na<|end|>\n<|assistant|>\nb<|end|>\n<|user|>\nc<|end|>\n"
                 "<|assistant|>\n", __LINE__);
    expect_turns(gemma, 4, r4, c4,
                 "<start_of_turn>user\nS\n\na<end_of_turn>\n<start_of_turn>model\nb<end_of_turn>\n"
                 "<start_of_turn>user\nc<end_of_turn>\n<start_of_turn>model\n", __LINE__);
    /* ChatML takes consecutive user turns; Gemma (and Llama 2) need alternation */
    const char *ruu[] = { "user", "user" }, *cuu[] = { "a", "b" };
    expect_turns(l3, 2, ruu, cuu,
                 "<|start_header_id|>user<|end_header_id|>\n\na<|eot_id|><|start_header_id|>user"
                 "<|end_header_id|>\n\nb<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n", __LINE__);
    emt_tokenizer_spec s = base_spec("smollm");
    s.chat_template = gemma;
    emt_tokenizer *t = NULL;
    CHECK_OK(emt_tokenizer_create(&s, &t));
    char buf[256];
    size_t len = 0;
    CHECK_ERR(emt_chat_render(t, ruu, cuu, 2, buf, sizeof buf, &len), ENTMTP_ERR_INVALID_ARGUMENT,
              "message 1: the Gemma template needs user and assistant turns to alternate");
    emt_tokenizer_free(t);
    s.chat_template = g_smollm_template;
    CHECK_OK(emt_tokenizer_create(&s, &t));
    const char *ends_assistant[] = { "user", "assistant" }, *bad_role[] = { "user", "tool", "user" };
    const char *late_system[] = { "user", "system", "user" }, *nulls[] = { "a", NULL, "c" };
    CHECK_ERR(emt_chat_render(t, ends_assistant, cuu, 2, buf, sizeof buf, &len), ENTMTP_ERR_INVALID_ARGUMENT,
              "the last of the 2 messages must be a user message");
    CHECK_ERR(emt_chat_render(t, bad_role, c3, 3, buf, sizeof buf, &len), ENTMTP_ERR_INVALID_ARGUMENT,
              "message 1: role 'tool' is not system, user or assistant");
    CHECK_ERR(emt_chat_render(t, late_system, c3, 3, buf, sizeof buf, &len), ENTMTP_ERR_INVALID_ARGUMENT,
              "message 1: a system message may only come first");
    CHECK_ERR(emt_chat_render(t, r3, nulls, 3, buf, sizeof buf, &len), ENTMTP_ERR_INVALID_ARGUMENT,
              "message 1: content is NULL");
    CHECK_ERR(emt_chat_render(t, r4, c4, 1, buf, sizeof buf, &len), ENTMTP_ERR_INVALID_ARGUMENT,
              "the last of the 1 messages must be a user message");
    CHECK_ERR(emt_chat_render(t, NULL, NULL, 0, buf, sizeof buf, &len), ENTMTP_ERR_INVALID_ARGUMENT,
              "the last of the 0 messages");
    CHECK_ERR(emt_chat_render(t, NULL, c3, 3, buf, sizeof buf, &len), ENTMTP_ERR_INVALID_ARGUMENT, "roles is NULL");
    emt_tokenizer_free(t);
}

static void test_chat(void) {
    expect_chat(g_smollm_template, NULL, "Hi",
                "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging "
                "Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", __LINE__);
    expect_chat(g_smollm_template, "Be terse.", "Hi",
                "<|im_start|>system\nBe terse.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                "<|im_start|>assistant\n", __LINE__);
    expect_chat(g_smollm_template, "", "Hi",
                "<|im_start|>system\n<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                "<|im_start|>assistant\n", __LINE__);
    /* the template's "\n" as a Jinja escape (two characters) */
    expect_chat("{{ '<|im_start|>system\\nYou are Bob.<|im_end|>\\n' }}{% for m in messages %}"
                "{{'<|im_start|>' + m['role'] + '\\n' + m['content'] + '<|im_end|>\\n'}}{% endfor %}",
                NULL, "Hi",
                "<|im_start|>system\nYou are Bob.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                "<|im_start|>assistant\n", __LINE__);
    /* ChatML without a default system prompt */
    expect_chat("{% for m in messages %}{{'<|im_start|>' + m['role'] + '\n' + m['content'] + "
                "'<|im_end|>' + '\n'}}{% endfor %}", NULL, "Hi",
                "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", __LINE__);
    /* no template: ChatML because the vocabulary has <|im_start|> */
    expect_chat(NULL, NULL, "Hi", "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", __LINE__);
    /* Llama 3 */
    const char *l3 = "{{ bos_token }}{% for m in messages %}{{ '<|start_header_id|>' + m['role'] + "
                     "'<|end_header_id|>\n\n' + m['content'] | trim + '<|eot_id|>' }}{% endfor %}";
    expect_chat(l3, "Sys", " Hi\n",
                "<|start_header_id|>system<|end_header_id|>\n\nSys<|eot_id|><|start_header_id|>user"
                "<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n",
                __LINE__);
    expect_chat(l3, NULL, "Hi",
                "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|><|start_header_id|>assistant"
                "<|end_header_id|>\n\n", __LINE__);
    /* Phi-3 (the template of Phi-3-mini-4k-instruct, abridged) */
    const char *phi3 = "{% for message in messages %}{% if message['role'] == 'system' %}{{'<|system|>\n' + "
                       "message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}{{'<|user|>\n' "
                       "+ message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}";
    expect_chat(phi3, NULL, "Hi", "<|user|>\nHi<|end|>\n<|assistant|>\n", __LINE__);
    expect_chat(phi3, "Sys", "Hi", "<|system|>\nSys<|end|>\n<|user|>\nHi<|end|>\n<|assistant|>\n", __LINE__);
    /* Gemma 2/3: no system role; Gemma 3 puts the system text before the user's */
    const char *gemma = "{{ bos_token }}{% for message in messages %}{{ '<start_of_turn>' + role + '\n' + "
                        "message['content'] | trim + '<end_of_turn>\n' }}{% endfor %}";
    expect_chat(gemma, NULL, " Hi ", "<start_of_turn>user\nHi<end_of_turn>\n<start_of_turn>model\n", __LINE__);
    expect_chat(gemma, "Sys", "Hi", "<start_of_turn>user\nSys\n\nHi<end_of_turn>\n<start_of_turn>model\n",
                __LINE__);
    test_chat_turns(l3, phi3, gemma);
    /* unknown template */
    emt_tokenizer_spec s = base_spec("smollm");
    s.chat_template = "{{ messages }}";
    emt_tokenizer *t = NULL;
    CHECK_OK(emt_tokenizer_create(&s, &t));
    char buf[256];
    size_t len = 0;
    CHECK_ERR(emt_chat_prompt(t, NULL, "Hi", buf, sizeof buf, &len), ENTMTP_ERR_UNSUPPORTED,
              "{{ messages }}");
    emt_tokenizer_free(t);
    /* buffer protocol */
    s.chat_template = g_smollm_template;
    CHECK_OK(emt_tokenizer_create(&s, &t));
    size_t want = strlen("<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained "
                         "by Hugging Face<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                         "<|im_start|>assistant\n");
    CHECK_ERR(emt_chat_prompt(t, NULL, "Hi", NULL, 0, &len), ENTMTP_ERR_BUFFER_TOO_SMALL, "");
    CHECK_EQ_INT(len, want);
    CHECK_ERR(emt_chat_prompt(t, NULL, "Hi", buf, 20, &len), ENTMTP_ERR_BUFFER_TOO_SMALL, "");
    CHECK_EQ_INT(len, want);
    CHECK_OK(emt_chat_prompt(t, NULL, "Hi", buf, want, &len));
    CHECK_ERR(emt_chat_prompt(t, NULL, NULL, buf, sizeof buf, &len), ENTMTP_ERR_INVALID_ARGUMENT, "user");
    CHECK(strcmp(emt_tokenizer_chat_template(t), g_smollm_template) == 0);
    /* the rendered prompt tokenizes with its specials */
    CHECK_OK(emt_chat_prompt(t, "x", "hello", buf, sizeof buf, &len));
    EXPECT_BUF(t, buf, len, 0, 1, IM_START, 's', 'y', 's', 't', 'e', 'm', '\n', 'x', IM_END, '\n',
               IM_START, 'u', 's', 'e', 'r', '\n', HELLO, IM_END, '\n', IM_START, 'a', 's', 's', 'i',
               's', 't', 'a', 'n', 't', '\n');
    emt_tokenizer_free(t);
    /* no template and no ChatML/Llama 3 tokens */
    const char *one[] = { "a" };
    emt_tokenizer_spec m;
    memset(&m, 0, sizeof m);
    m.model = "gpt2";
    m.n_tokens = 1;
    m.tokens = one;
    m.bos = m.eos = m.unk = m.pad = m.eot = -1;
    CHECK_OK(emt_tokenizer_create(&m, &t));
    CHECK_ERR(emt_chat_prompt(t, NULL, "Hi", buf, sizeof buf, &len), ENTMTP_ERR_UNSUPPORTED, "no chat template");
    emt_tokenizer_free(t);
}

/* ------------------------------------------------------- tokenizer.json */

static void test_hf_json(void) {
    /* vocabulary: the bytes a, b, c, Ġ, 1, 2 and merges as strings */
    const char *json =
        "{\"version\":\"1.0\",\"added_tokens\":[{\"id\":9,\"content\":\"<|end|>\",\"special\":true},"
        "{\"id\":10,\"content\":\"<x>\",\"special\":false}],\"normalizer\":null,"
        "\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Digits\","
        "\"individual_digits\":true},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
        "\"trim_offsets\":true,\"use_regex\":true}]},\"post_processor\":null,"
        "\"decoder\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"dropout\":null,"
        "\"unk_token\":null,\"vocab\":{\"a\":0,\"b\":1,\"c\":2,\"\\u0120\":3,\"1\":4,\"2\":5,"
        "\"ab\":6,\"\\u0120ab\":7,\"12\":8},\"merges\":[\"a b\",\"\\u0120 ab\",\"1 2\"]}}";
    const char *cfg = "{\"bos_token\":null,\"eos_token\":{\"content\":\"<|end|>\"},"
                      "\"chat_template\":\"{{'<|im_start|>' + m}}\"}";
    emt_tokenizer *t = NULL;
    CHECK_OK(emt_tokenizer_from_hf_json(json, cfg, "mem.json", &t));
    if (t) {
        CHECK(strcmp(emt_tokenizer_pre(t), "smollm") == 0);
        CHECK_EQ_INT(emt_tokenizer_n_vocab(t), 11);
        CHECK_EQ_INT(emt_tokenizer_eos(t), 9);
        CHECK_EQ_INT(emt_tokenizer_bos(t), -1);
        CHECK(emt_tokenizer_is_eog(t, 9));
        EXPECT(t, "ab ab12<|end|><x>", 0, 1, 6, 7, 4, 5, 9, 10);
        EXPECT(t, "ab ab12<|end|><x>", 1, 0, 6, 7, 4, 5, 10); /* "<|end|>": no tokens for <,|,... */
        CHECK(strcmp(emt_tokenizer_chat_template(t), "{{'<|im_start|>' + m}}") == 0);
        emt_tokenizer_free(t);
    }
    /* merges as pairs, plain ByteLevel, unk token, BOS from the post-processor */
    const char *json2 =
        "{\"added_tokens\":[{\"id\":0,\"content\":\"<s>\",\"special\":true},"
        "{\"id\":1,\"content\":\"<unk>\",\"special\":true}],"
        "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false},"
        "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":"
        "\"<s>\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}]},"
        "\"model\":{\"type\":\"BPE\",\"unk_token\":\"<unk>\",\"vocab\":{\"<s>\":0,\"<unk>\":1,\"1\":2,"
        "\"2\":3,\"12\":4},\"merges\":[[\"1\",\"2\"]]}}";
    CHECK_OK(emt_tokenizer_from_hf_json(json2, NULL, "mem2.json", &t));
    if (t) {
        CHECK(strcmp(emt_tokenizer_pre(t), "gpt2") == 0);
        CHECK_EQ_INT(emt_tokenizer_bos(t), 0);
        CHECK_EQ_INT(emt_tokenizer_add_bos(t), 1);
        CHECK_EQ_INT(emt_tokenizer_unk(t), 1);
        EXPECT(t, "12x", 1, 1, 0, 4, 1); /* 'x' has no token: unk */
        emt_tokenizer_free(t);
    }
    /* add_special: a post-processor "<s> $A </s>" adds both (gguf-py's reading
     * for llama.cpp's add_bos/add_eos); tokenizer_config.json's add_*_token
     * overrides it */
    const char *json_post =
        "{\"added_tokens\":[{\"id\":0,\"content\":\"<s>\",\"special\":true},"
        "{\"id\":1,\"content\":\"</s>\",\"special\":true}],"
        "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false},"
        "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":"
        "\"<s>\",\"type_id\":0}},{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},{\"SpecialToken\":{\"id\":"
        "\"</s>\",\"type_id\":0}}]},"
        "\"model\":{\"type\":\"BPE\",\"vocab\":{\"<s>\":0,\"</s>\":1,\"1\":2,"
        "\"2\":3,\"12\":4},\"merges\":[[\"1\",\"2\"]]}}";
    CHECK_OK(emt_tokenizer_from_hf_json(json_post, NULL, "mem3.json", &t));
    if (t) {
        CHECK_EQ_INT(emt_tokenizer_add_bos(t), 1);
        CHECK_EQ_INT(emt_tokenizer_add_eos(t), 1);
        EXPECT(t, "12", ENTMTP_TOKENIZE_ADD_SPECIAL, 1, 0, 4, 1);
        EXPECT(t, "12", ENTMTP_TOKENIZE_FORCE_BOS, 1, 0, 4); /* the old switch: BOS only */
        EXPECT(t, "12", ENTMTP_TOKENIZE_NO_SPECIAL, 1, 4);
        EXPECT(t, "", ENTMTP_TOKENIZE_ADD_SPECIAL, 1, 0, 1);
        emt_tokenizer_free(t);
    }
    CHECK_OK(emt_tokenizer_from_hf_json(json_post, "{\"bos_token\":\"<s>\",\"eos_token\":\"</s>\",\"add_eos_token\":false}",
                                        "mem3.json", &t));
    if (t) {
        CHECK_EQ_INT(emt_tokenizer_add_bos(t), 1);
        CHECK_EQ_INT(emt_tokenizer_add_eos(t), 0);
        EXPECT(t, "12", ENTMTP_TOKENIZE_ADD_SPECIAL, 1, 0, 4);
        emt_tokenizer_free(t);
    }
    CHECK_OK(emt_tokenizer_from_hf_json(json_post, "{\"bos_token\":\"<s>\",\"eos_token\":\"</s>\",\"add_bos_token\":false,"
                                        "\"add_eos_token\":true}", "mem3.json", &t));
    if (t) {
        EXPECT(t, "12", ENTMTP_TOKENIZE_ADD_SPECIAL, 1, 4, 1);
        EXPECT(t, "12", 7, 1, 0, 4); /* any other non-zero value: the old switch */
        emt_tokenizer_free(t);
    }
    /* Llama 3 style: Split(regex, Isolated) + ByteLevel(use_regex=false), ignore_merges */
    const char *json3 =
        "{\"pre_tokenizer\":{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\","
        "\"pattern\":{\"Regex\":\"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\\\r\\\\n\\\\p{L}\\\\p{N}]?\\\\p{L}+|"
        "\\\\p{N}{1,3}| ?[^\\\\s\\\\p{L}\\\\p{N}]+[\\\\r\\\\n]*|\\\\s*[\\\\r\\\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},"
        "\"behavior\":\"Isolated\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
        "\"use_regex\":false}]},\"model\":{\"type\":\"BPE\",\"ignore_merges\":true,"
        "\"vocab\":{\"1\":0,\"2\":1,\"3\":2,\"4\":3,\"123\":4,\"12\":5},\"merges\":[\"1 2\"]}}";
    CHECK_OK(emt_tokenizer_from_hf_json(json3, NULL, "mem3.json", &t));
    if (t) {
        CHECK(strcmp(emt_tokenizer_pre(t), "llama-bpe") == 0);
        EXPECT(t, "12341", 0, 1, 4, 3, 0); /* "123" whole (ignore_merges), "41" */
        emt_tokenizer_free(t);
    }
    /* added tokens' rstrip / lstrip (Phi-3's tokenizer.json): the whitespace
     * after <|end|> and before <x> is dropped when they are matched */
    const char *json4 =
        "{\"added_tokens\":[{\"id\":4,\"content\":\"<|end|>\",\"special\":true,\"rstrip\":true},"
        "{\"id\":5,\"content\":\"<x>\",\"special\":true,\"lstrip\":true,\"rstrip\":false}],"
        "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false},"
        "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"\\u0120\":2,\"\\u010a\":3},"
        "\"merges\":[]}}";
    CHECK_OK(emt_tokenizer_from_hf_json(json4, NULL, "mem4.json", &t));
    if (t) {
        EXPECT(t, "a <|end|> \n b \n<x> a", 0, 1, 0, 2, 4, 1, 5, 2, 0);
        /* not parsed as special: no stripping */
        EXPECT(t, "a \n<x>", 0, 0, 0, 2, 3);
        emt_tokenizer_free(t);
    }
    /* errors */
    CHECK_ERR(emt_tokenizer_from_hf_json("{", NULL, "bad.json", &t), ENTMTP_ERR_FORMAT, "bad.json");
    CHECK_ERR(emt_tokenizer_from_hf_json("{\"model\":{\"type\":\"Unigram\",\"vocab\":[]}}", NULL, "u.json", &t),
              ENTMTP_ERR_UNSUPPORTED, "'Unigram'");
    /* malformed or unsupported tokenizer.json files: one row each */
    static const struct {
        const char *json, *config, *name;
        entmtp_status status;
        const char *message;
    } bad_files[] = {
        { "{\"pre_tokenizer\":{\"type\":\"Metaspace\",\"split\":true},\"model\":{\"type\":\"BPE\","
          "\"vocab\":{\"a\":0},\"merges\":[]}}", NULL, "m.json",
          ENTMTP_ERR_UNSUPPORTED, "m.json: Metaspace with split = true" },
        { "{\"pre_tokenizer\":{\"type\":\"Whitespace\"},\"model\":{\"type\":\"BPE\","
          "\"vocab\":{\"a\":0},\"merges\":[]}}", NULL, "w.json",
          ENTMTP_ERR_UNSUPPORTED, "pre-tokenizer 'Whitespace'" },
        { "{\"normalizer\":{\"type\":\"NFC\"},\"pre_tokenizer\":{\"type\":\"ByteLevel\"},"
          "\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]}}", NULL, "n.json",
          ENTMTP_ERR_UNSUPPORTED, "normalizer 'NFC'" },
        { "{\"pre_tokenizer\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"vocab\":"
          "{\"a\":0,\"b\":1},\"merges\":[\"a b\"]}}", NULL, "x.json",
          ENTMTP_ERR_FORMAT, "x.json: merge 0 ('a b'): the concatenation 'ab'" },
        { "{\"pre_tokenizer\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"vocab\":"
          "{\"a\":0,\"b\":0},\"merges\":[]}}", NULL, "d.json",
          ENTMTP_ERR_FORMAT, "id 0 is given to both" },
        { "{\"pre_tokenizer\":{\"type\":\"ByteLevel\"},\"model\":{\"type\":\"BPE\",\"vocab\":"
          "{\"a\":0},\"merges\":[]}}", "{\"eos_token\":\"</s>\"}", "e.json",
          ENTMTP_ERR_FORMAT, "eos_token '</s>'" },
    };
    for (size_t i = 0; i < sizeof bad_files / sizeof bad_files[0]; i++)
        CHECK_ERR(emt_tokenizer_from_hf_json(bad_files[i].json, bad_files[i].config, bad_files[i].name, &t),
                  bad_files[i].status, bad_files[i].message);
    CHECK_ERR(emt_tokenizer_from_hf_dir(ENTMTP_TEST_TMP_DIR "/no-such-dir", &t), ENTMTP_ERR_NOT_FOUND,
              "tokenizer.json");
    CHECK(t == NULL);
    /* a directory with the files */
    const char *dir = ENTMTP_TEST_TMP_DIR "/tok_hf_small";
    mkdir(dir, 0755);
    FILE *f = fopen(ENTMTP_TEST_TMP_DIR "/tok_hf_small/tokenizer.json", "w");
    if (f) {
        fputs(json, f);
        fclose(f);
    }
    f = fopen(ENTMTP_TEST_TMP_DIR "/tok_hf_small/tokenizer_config.json", "w");
    if (f) {
        fputs(cfg, f);
        fclose(f);
    }
    CHECK_OK(emt_tokenizer_from_hf_dir(dir, &t));
    if (t) {
        CHECK_EQ_INT(emt_tokenizer_eos(t), 9);
        EXPECT(t, "ab", 0, 1, 6);
        emt_tokenizer_free(t);
    }
}

int main(void) {
    init_vocab();
    test_bpe_merges();
    test_pretokenizers();
    test_specials();
    test_buffers_and_decode();
    test_missing_bytes();
    test_invalid_specs();
    test_spm();
    test_chat();
    test_hf_json();
    return emt_test_finish("test_tokenizer");
}
