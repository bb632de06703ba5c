/* The byte-level BPE tokenizer on a hand-built vocabulary (the tiny GGUF's:
 * ids 0-2 specials, 3 + byte for the 256 byte symbols, 259 "Ġt", 260 "he",
 * 261 "Ġthe", merges in that order), worked by hand; buffer protocol;
 * arbitrary bytes round-trip; chat prompt; bad specs. */
#include "check.h"
#include "io/gguf.h"
#include "tiny_model.h"
#include "tokenizer/tokenizer.h"

#include <stdio.h>

static int ids_equal(const int32_t *a, int32_t na, const int32_t *b, int32_t nb) {
    return na == nb && !memcmp(a, b, (size_t)na * sizeof *a);
}

int main(void) {
    char path[512];
    snprintf(path, sizeof path, "%s/tok_tiny.gguf", ENTMTP_TEST_TMP_DIR);
    emt_tiny_config c = emt_tiny_default_config();
    c.vocab = 300;
    c.with_tokenizer = 1;
    CHECK_OK(emt_tiny_write_gguf(path, &c, EMT_F32));
    emt_gguf *g = NULL;
    CHECK_OK(emt_gguf_open(path, &g));
    emt_tokenizer *t = NULL;
    CHECK_OK(emt_tokenizer_from_gguf(g, &t));
    emt_gguf_close(g);
    if (!t) return emt_test_finish("test_tokenizer");

    int32_t out[64], n = 0;
    /* "the the": pieces "the", " the". "the" -> t,h,e -> merge "h e" -> [t, he];
     * " the" -> Ġ,t,h,e -> "Ġ t" (rank 0) -> [Ġt,h,e] -> "h e" -> [Ġt,he] -> "Ġt he" -> [Ġthe] */
    CHECK_OK(emt_tokenize(t, "the the", 7, 0, 0, out, 64, &n));
    const int32_t want1[] = { 3 + 't', 260, 261 };
    CHECK(ids_equal(out, n, want1, 3));
    /* digits are split one by one ("smollm"): " 12" -> " ", "1", "2" */
    CHECK_OK(emt_tokenize(t, " 12", 3, 0, 0, out, 64, &n));
    const int32_t want2[] = { 3 + ' ', 3 + '1', 3 + '2' };
    CHECK(ids_equal(out, n, want2, 3));
    /* specials are parsed only when asked */
    CHECK_OK(emt_tokenize(t, "<|im_end|>x", 11, 0, 1, out, 64, &n));
    const int32_t want3[] = { 2, 3 + 'x' };
    CHECK(ids_equal(out, n, want3, 2));
    CHECK_OK(emt_tokenize(t, "<|im_end|>", 10, 0, 0, out, 64, &n));
    CHECK_EQ_INT(n, 10); /* ten byte-level symbols, no special */
    /* bos */
    CHECK_OK(emt_tokenize(t, "a", 1, 1, 0, out, 64, &n));
    CHECK_EQ_INT(n, 2);
    CHECK_EQ_INT(out[0], 1);
    /* buffer protocol */
    CHECK_ERR(emt_tokenize(t, "the the", 7, 0, 0, out, 2, &n), ENTMTP_ERR_BUFFER_TOO_SMALL, "3 tokens");
    CHECK_EQ_INT(n, 3);
    CHECK_OK(emt_tokenize(t, "", 0, 0, 0, out, 0, &n));
    CHECK_EQ_INT(n, 0);
    /* every byte value, including invalid UTF-8, round-trips */
    char all[256];
    for (int i = 0; i < 256; i++) all[i] = (char)i;
    int32_t many[512];
    CHECK_OK(emt_tokenize(t, all, 256, 0, 0, many, 512, &n));
    char back[600];
    size_t len = 0;
    CHECK_OK(emt_detokenize(t, many, n, back, sizeof back, &len));
    CHECK_EQ_INT(len, 256);
    CHECK(!memcmp(back, all, 256));
    const char *bad_utf8 = "ok \xff\xfe \xc3 end";
    CHECK_OK(emt_tokenize(t, bad_utf8, strlen(bad_utf8), 0, 0, many, 512, &n));
    CHECK_OK(emt_detokenize(t, many, n, back, sizeof back, &len));
    CHECK(len == strlen(bad_utf8) && !memcmp(back, bad_utf8, len));
    /* detokenize errors */
    const int32_t oob[] = { 5, 300 };
    CHECK_ERR(emt_detokenize(t, oob, 2, back, sizeof back, &len), ENTMTP_ERR_OUT_OF_RANGE, "token 300 at position 1");
    CHECK_ERR(emt_detokenize(t, want1, 3, back, 3, &len), ENTMTP_ERR_BUFFER_TOO_SMALL, "7 bytes");
    CHECK_EQ_INT(len, 7);
    /* chat: ChatML without a default system prompt for this template */
    CHECK_OK(emt_chat_prompt(t, NULL, "Hi", back, sizeof back, &len));
    CHECK(!strcmp(back, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"));
    CHECK_OK(emt_chat_prompt(t, "Be brief.", "Hi", back, sizeof back, &len));
    CHECK(!strcmp(back, "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"));
    CHECK(emt_tokenizer_is_eog(t, 2));
    CHECK(emt_tokenizer_is_eog(t, 0)); /* <|endoftext|> */
    CHECK(!emt_tokenizer_is_eog(t, 1));
    emt_tokenizer_free(t);

    /* invalid specs */
    const char *toks[] = { "a", "b", "ab" };
    const char *bad_merge[] = { "a c" };
    emt_tokenizer_spec s;
    memset(&s, 0, sizeof s);
    s.model = "gpt2"; s.pre = "gpt2"; s.n_tokens = 3; s.tokens = toks; s.n_merges = 1; s.merges = bad_merge;
    s.bos = s.eos = s.unk = s.pad = s.eot = -1;
    CHECK_ERR(emt_tokenizer_create(&s, &t), ENTMTP_ERR_FORMAT, "merge 0 ('a c'): the right part");
    const char *nospace[] = { "ab" };
    s.merges = nospace;
    CHECK_ERR(emt_tokenizer_create(&s, &t), ENTMTP_ERR_FORMAT, "merge 0");
    s.n_merges = 0;
    s.bos = 7;
    CHECK_ERR(emt_tokenizer_create(&s, &t), ENTMTP_ERR_FORMAT, "bos token id 7");
    s.bos = -1;
    s.pre = "klingon";
    CHECK_ERR(emt_tokenizer_create(&s, &t), ENTMTP_ERR_UNSUPPORTED, "klingon");
    s.pre = "gpt2";
    s.model = "llama";
    CHECK_ERR(emt_tokenizer_create(&s, &t), ENTMTP_ERR_UNSUPPORTED, "SentencePiece");
    return emt_test_finish("test_tokenizer");
}
