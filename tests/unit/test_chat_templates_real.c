/* The families' real chat templates (the .jinja files in models/templates of the pinned
 * llama.cpp source, scripts/fetch-llamacpp-src.sh) rendered by EntMTP must
 * give exactly what jinja2 gives for the same conversation, as recorded in
 * tests/data/chat_templates.json by tests/python/record_chat_fixtures.py;
 * a template the Jinja side refuses (Gemma 2 with a system message) must be
 * refused, and one EntMTP does not render must be ENTMTP_ERR_UNSUPPORTED
 * naming the template (the CLI then uses the documented plain prompt).
 *
 * Folder: $ENTMTP_LLAMACPP_VOCABS/templates, else
 * .cache/llama.cpp-py0.3.16/src/models/templates; skipped (77) when absent. */
#include "check.h"
#include "common/common.h"
#include "tokenizer/tokenizer.h"

#include <cjson/cJSON.h>
#include <sys/stat.h>

#define DEFAULT_DIR ENTMTP_SOURCE_DIR "/.cache/llama.cpp-py0.3.16/src/models"
#define FIXTURE ENTMTP_TEST_DATA_DIR "/chat_templates.json"
#define TODAY_2024_07_26 1721952000 /* the fixture's strftime_now day, 00:00 UTC */

/* A two-token vocabulary (<BOS>, <EOS>, as the fixture names them) carrying
 * the template; add_bos: the tokenizer's add_bos_token. */
static emt_tokenizer *tokenizer_with(const char *tmpl, int add_bos) {
    static const char *const toks[] = { "<BOS>", "<EOS>", "a" };
    static const int32_t types[] = { EMT_TOKEN_CONTROL, EMT_TOKEN_CONTROL, EMT_TOKEN_NORMAL };
    emt_tokenizer_spec sp;
    memset(&sp, 0, sizeof sp);
    sp.model = "gpt2";
    sp.n_tokens = 3;
    sp.tokens = toks;
    sp.token_types = types;
    sp.bos = 0;
    sp.eos = 1;
    sp.unk = sp.pad = sp.eot = -1;
    sp.add_bos = add_bos;
    sp.chat_template = tmpl;
    emt_tokenizer *t = NULL;
    CHECK_OK(emt_tokenizer_create(&sp, &t));
    return t;
}

static void check_case(const char *dir, const cJSON *c, int *rendered) {
    const char *name = cJSON_GetStringValue(cJSON_GetObjectItem(c, "template"));
    const char *conv = cJSON_GetStringValue(cJSON_GetObjectItem(c, "conversation"));
    const char *want = cJSON_GetStringValue(cJSON_GetObjectItem(c, "text"));
    int unsupported = cJSON_IsTrue(cJSON_GetObjectItem(c, "unsupported"));
    const cJSON *msgs = cJSON_GetObjectItem(c, "messages");
    char path[1024];
    snprintf(path, sizeof path, "%s/templates/%s", dir, name ? name : "?");
    char *tmpl = emt_test_read_file(path, NULL);
    if (!tmpl) {
        fprintf(stderr, "%s: cannot read\n", path);
        emt_test_failures++;
        return;
    }
    const char *roles[8], *contents[8];
    int32_t n = 0;
    const cJSON *m;
    cJSON_ArrayForEach(m, msgs) {
        if (n == 8) break;
        roles[n] = cJSON_GetStringValue(cJSON_GetObjectItem(m, "role"));
        contents[n] = cJSON_GetStringValue(cJSON_GetObjectItem(m, "content"));
        n++;
    }
    /* the fixture drops the template's leading bos_token, as llama.cpp does
     * when the tokenizer adds the BOS itself */
    emt_tokenizer *t = tokenizer_with(tmpl, 1);
    char text[8192];
    size_t len = 0;
    entmtp_status st =
        t ? emt_chat_render_at(t, roles, contents, n, TODAY_2024_07_26, text, sizeof text, &len)
          : ENTMTP_ERR_INVALID_ARGUMENT;
    if (unsupported) {
        /* not rendered: an error quoting the template's start */
        if (st != ENTMTP_ERR_UNSUPPORTED || !strstr(entmtp_last_error(), "chat template")) {
            fprintf(stderr, "%s / %s: expected ENTMTP_ERR_UNSUPPORTED, got %s (%s)\n", name, conv,
                    entmtp_status_string(st), entmtp_last_error());
            emt_test_failures++;
        }
    } else if (!want) {
        /* the template raises: so must we, naming why */
        if (st != ENTMTP_ERR_INVALID_ARGUMENT || !strstr(entmtp_last_error(), "System role not supported")) {
            fprintf(stderr, "%s / %s: expected the template's refusal, got %s (%s)\n", name, conv,
                    entmtp_status_string(st), entmtp_last_error());
            emt_test_failures++;
        }
    } else if (st != ENTMTP_OK || len != strlen(want) || memcmp(text, want, len) != 0) {
        fprintf(stderr, "%s / %s: status %s (%s)\n  jinja2: '%s'\n  entmtp: '%.*s'\n", name, conv,
                entmtp_status_string(st), st ? entmtp_last_error() : "", want, (int)len,
                st ? "" : text);
        emt_test_failures++;
    } else {
        (*rendered)++;
    }
    emt_tokenizer_free(t);
    free(tmpl);
}

/* A tokenizer that does not add a BOS keeps the template's leading
 * bos_token in the text (llama.cpp strips it only when add_bos is on); one
 * that adds it leaves it out; a template without bos_token never gets one. */
static void check_leading_bos(const char *dir) {
    static const struct { const char *file; int has_bos; } cases[] = {
        { "meta-llama-Llama-3.1-8B-Instruct.jinja", 1 }, { "google-gemma-2-2b-it.jinja", 1 },
        { "Qwen-Qwen2.5-7B-Instruct.jinja", 0 }, { "microsoft-Phi-3.5-mini-instruct.jinja", 0 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char path[1024];
        snprintf(path, sizeof path, "%s/templates/%s", dir, cases[i].file);
        char *tmpl = emt_test_read_file(path, NULL);
        CHECK(tmpl != NULL);
        if (!tmpl) continue;
        const char *roles[] = { "user" }, *contents[] = { "Hi" };
        for (int add_bos = 0; add_bos <= 1; add_bos++) {
            emt_tokenizer *t = tokenizer_with(tmpl, add_bos);
            char text[4096];
            size_t len = 0;
            CHECK_OK(emt_chat_render_at(t, roles, contents, 1, TODAY_2024_07_26, text, sizeof text, &len));
            int starts = len >= 5 && memcmp(text, "<BOS>", 5) == 0;
            if (starts != (cases[i].has_bos && !add_bos)) {
                fprintf(stderr, "%s, add_bos %d: text %s with <BOS>: '%.40s'\n", cases[i].file, add_bos,
                        starts ? "starts" : "does not start", text);
                emt_test_failures++;
            }
            emt_tokenizer_free(t);
        }
        free(tmpl);
    }
}

int main(void) {
    const char *dir = getenv("ENTMTP_LLAMACPP_VOCABS");
    if (!dir || !*dir) dir = DEFAULT_DIR;
    char tdir[1024];
    snprintf(tdir, sizeof tdir, "%s/templates", dir);
    struct stat sb;
    if (stat(tdir, &sb) != 0 || !S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "SKIP: %s is absent: run scripts/fetch-llamacpp-src.sh (llama.cpp's source "
                        "with its real chat templates) or set ENTMTP_LLAMACPP_VOCABS\n", tdir);
        return 77;
    }
    char *json = emt_test_read_file(FIXTURE, NULL);
    cJSON *cases = json ? cJSON_Parse(json) : NULL;
    CHECK(cases && cJSON_GetArraySize(cases) > 0);
    int rendered = 0, total = 0;
    const cJSON *c;
    cJSON_ArrayForEach(c, cases) {
        check_case(dir, c, &rendered);
        total++;
    }
    check_leading_bos(dir);
    fprintf(stderr, "%d template/conversation cases, %d rendered identically, %d failures\n", total,
            rendered, emt_test_failures);
    cJSON_Delete(cases);
    free(json);
    return emt_test_failures ? 1 : 0;
}
