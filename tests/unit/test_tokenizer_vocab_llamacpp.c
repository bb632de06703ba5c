/* Real vocabularies against llama.cpp's own expectations: the pinned
 * llama.cpp source (scripts/build-llamacpp.sh unpacks it into
 * .cache/llama.cpp-py<version>/src) ships vocabulary-only GGUF files
 * (models/ggml-vocab-*.gguf) with test strings (.inp, separated by
 * "\n__ggml_vocab_test__\n") and the ids llama.cpp's tokenizer gives them
 * (.out, one line per string; test-tokenizer-0 tokenizes with
 * add_special = false, parse_special = false). Every string of every family
 * we support must give the same ids and decode back to its text. Then the
 * strings of tests/data/llamacpp/vocab-special.inp with special tokens
 * parsed (chat markers of each family, Phi-3's rstrip) against llama.cpp's
 * ids recorded by scripts/record-vocab-fixtures.sh.
 *
 * Folder: $ENTMTP_LLAMACPP_VOCABS, else .cache/llama.cpp-py0.3.16/src/models;
 * skipped (77) with a message when it is absent. A family file missing from a
 * folder that exists is a failure, not a skip. */
#include "check.h"
#include "common/common.h"
#include "io/gguf.h"
#include "tokenizer/tokenizer.h"

#include <sys/stat.h>

#define DEFAULT_DIR ENTMTP_SOURCE_DIR "/.cache/llama.cpp-py0.3.16/src/models"

/* The families whose models we load (docs/models.md), with the pre-tokenizer
 * or SentencePiece rules each exercises. Gemma's SentencePiece vocabulary
 * is not among llama.cpp's test vocabularies; llama-spm is the same
 * algorithm (score-ordered merges, byte fallback, U+2581 spaces). */
static const char *const k_families[] = {
    "qwen2",     /* Qwen2/2.5/3: Llama 3's regex, single digits */
    "llama-bpe", /* Llama 3: digits in groups of up to three, ignore_merges */
    "gpt-2",     /* GPT-2's regex */
    "llama-spm", /* Llama 2 / Mistral / Gemma style SentencePiece */
    "phi-3",     /* Phi-3: SentencePiece, special tokens with rstrip */
};

/* Parse one .out line ("  1 2 3") into ids; returns the count. */
static int parse_ids(const char *line, size_t n, int32_t *ids, int cap) {
    int k = 0;
    size_t i = 0;
    while (i < n) {
        while (i < n && line[i] == ' ') i++;
        if (i >= n) break;
        long v = strtol(line + i, NULL, 10);
        if (k < cap) ids[k] = (int32_t)v;
        k++;
        while (i < n && line[i] != ' ') i++;
    }
    return k;
}

static void print_ids(const char *label, const int32_t *ids, int n) {
    fprintf(stderr, "    %s:", label);
    for (int i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, "\n");
}

/* Tokenize every string of `inp_path` and compare with the ids of the same
 * line of `out_path`; a match must also decode back to the string.
 * Returns the number of strings compared. */
static int compare_file(const emt_tokenizer *t, const char *family, const char *inp_path,
                        const char *out_path, int parse_special) {
    size_t inp_len = 0, out_len = 0;
    char *inp = emt_test_read_file(inp_path, &inp_len), *out = emt_test_read_file(out_path, &out_len);
    int compared = 0, wrong = 0;
    if (!inp || !out) {
        fprintf(stderr, "%s: cannot read %s or %s\n", family, inp_path, out_path);
        emt_test_failures++;
        goto done;
    }
    static const char sep[] = "\n__ggml_vocab_test__\n";
    const size_t sep_len = sizeof sep - 1;
    const char *s = inp, *end = inp + inp_len;
    const char *line = out, *out_end = out + out_len;
    int spm = strcmp(emt_tokenizer_model(t), "llama") == 0;
    while (s < end && line < out_end) {
        const char *next = strstr(s, sep);
        size_t n = next ? (size_t)(next - s) : (size_t)(end - s);
        const char *eol = memchr(line, '\n', (size_t)(out_end - line));
        size_t line_n = eol ? (size_t)(eol - line) : (size_t)(out_end - line);

        int32_t want[512], got[512];
        int n_want = parse_ids(line, line_n, want, 512);
        int32_t n_got = 0;
        entmtp_status st = emt_tokenize(t, s, n, 0, parse_special, got, 512, &n_got);
        compared++;
        int same = st == ENTMTP_OK && n_got == n_want && n_want <= 512 &&
                   memcmp(got, want, (size_t)n_want * sizeof *got) == 0;
        if (!same) {
            wrong++;
            fprintf(stderr, "  %s: '%.*s' (%zu bytes): status %s\n", family, (int)n, s, n,
                    entmtp_status_string(st));
            print_ids("llama.cpp", want, n_want < 512 ? n_want : 512);
            print_ids("entmtp   ", got, n_got < 512 ? n_got : 512);
        } else if (!parse_special) {
            /* and back to the text (SentencePiece: less the space it
             * prefixed); with special tokens, stripped whitespace is gone */
            char text[4096];
            size_t tl = 0;
            CHECK_OK(emt_detokenize(t, got, n_got, text, sizeof text, &tl));
            const char *dec = text;
            if (spm && tl == n + 1 && text[0] == ' ') {
                dec++;
                tl--;
            }
            if (tl != n || memcmp(dec, s, n) != 0) {
                fprintf(stderr, "  %s: '%.*s' decodes to '%.*s'\n", family, (int)n, s, (int)tl, dec);
                emt_test_failures++;
            }
        }
        if (!next) break;
        s = next + sep_len;
        line = eol ? eol + 1 : out_end;
    }
    if (s < end && line >= out_end) {
        fprintf(stderr, "%s: %s has fewer lines than %s has strings\n", family, out_path, inp_path);
        emt_test_failures++;
    }
    fprintf(stderr, "%s (%s special tokens): %d strings, %d with different ids\n", family,
            parse_special ? "with" : "without", compared, wrong);
    emt_test_failures += wrong;
done:
    free(inp);
    free(out);
    return compared;
}

/* llama.cpp's own test strings (plain text), then ours with special tokens
 * (tests/data/llamacpp/vocab-special.*, scripts/record-vocab-fixtures.sh). */
static int check_family(const char *dir, const char *family) {
    char path[1024], inp[1040], out[1040];
    snprintf(path, sizeof path, "%s/ggml-vocab-%s.gguf", dir, family);
    emt_gguf *g = NULL;
    emt_tokenizer *t = NULL;
    int compared = 0;
    CHECK_OK(emt_gguf_open(path, &g));
    if (g) CHECK_OK(emt_tokenizer_from_gguf(g, &t));
    if (t) {
        fprintf(stderr, "%s: tokenizer %s, pre-tokenizer %s\n", family, emt_tokenizer_model(t),
                emt_tokenizer_pre(t));
        snprintf(inp, sizeof inp, "%s.inp", path);
        snprintf(out, sizeof out, "%s.out", path);
        compared += compare_file(t, family, inp, out, 0);
        snprintf(inp, sizeof inp, "%s/llamacpp/vocab-special.inp", ENTMTP_TEST_DATA_DIR);
        snprintf(out, sizeof out, "%s/llamacpp/vocab-special.%s.out", ENTMTP_TEST_DATA_DIR, family);
        compared += compare_file(t, family, inp, out, 1);
    }
    emt_tokenizer_free(t);
    emt_gguf_close(g);
    return compared;
}

int main(void) {
    const char *dir = getenv("ENTMTP_LLAMACPP_VOCABS");
    if (!dir || !*dir) dir = DEFAULT_DIR;
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "SKIP: %s is absent: run scripts/build-llamacpp.sh (it unpacks llama.cpp's "
                        "source with its test vocabularies) or set ENTMTP_LLAMACPP_VOCABS\n", dir);
        return 77;
    }
    int total = 0;
    for (size_t i = 0; i < sizeof k_families / sizeof k_families[0]; i++)
        total += check_family(dir, k_families[i]);
    CHECK(total > 0);
    fprintf(stderr, "%d strings compared, %d failures\n", total, emt_test_failures);
    return emt_test_failures ? 1 : 0;
}
