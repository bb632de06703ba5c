/* The CLI's conventions (issue 33): -c/--ctx-size and --temp as aliases,
 * bad values refused at parse time with exit 2 and the real range, --tree
 * naming the valid trees, --top-k/--top-p refused with the reason,
 * --chat-template (a family name, a file, a bad template), the model load
 * announced, and the interactive chat on piped stdin: each reply equals a
 * fresh generation over the rendered conversation. */
#include "check.h"
#include "cli_run.h"
#include "tiny_model.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <sys/wait.h>

static void write_text(const char *path, const char *text, size_t n) {
    FILE *f = fopen(path, "wb");
    CHECK(f != NULL);
    if (!f) return;
    fwrite(text, 1, n, f);
    fclose(f);
}

/* The "prompt_ids" array of a --json run, as text, for comparisons. */
static char *prompt_ids(const char *args, int *rc) {
    char *out = emt_cli_run_stdout(args, rc);
    cJSON *j = out ? cJSON_Parse(out) : NULL;
    char *ids = j ? cJSON_PrintUnformatted(cJSON_GetObjectItem(j, "prompt_ids")) : NULL;
    if (!ids) fprintf(stderr, "no prompt_ids from: %s\n%s\n", args, out ? out : "(no output)");
    cJSON_Delete(j);
    free(out);
    return ids;
}

/* A refused option: exit 2 and every needle in the message. */
static void expect_refused(const char *model, const char *opts, const char *n1, const char *n2) {
    char args[2048];
    int rc;
    snprintf(args, sizeof args, "generate --model %s %s", model, opts);
    char *out = emt_cli_run(args, &rc);
    int ok = out && rc == 2 && strstr(out, n1) && (!n2 || strstr(out, n2));
    if (!ok) fprintf(stderr, "%s: rc %d, output:\n%s\n", opts, rc, out ? out : "(none)");
    CHECK(ok);
    free(out);
}

int main(void) {
    if (!getenv("ENTMTP_CLI")) TEST_SKIP("ENTMTP_CLI not set");
    char model[512], heads[512], args[4096], path[512], path2[512];
    emt_cli_tiny_files("conv", model, sizeof model, heads, sizeof heads);
    int rc;

    /* bad values: exit 2 at parse time, saying the real range or the choices */
    expect_refused(model, "--temperature -1", "--temperature", ">= 0");
    expect_refused(model, "--temp -0.5", "--temp", ">= 0");
    expect_refused(model, "--max-tokens -5", "--max-tokens", "[1, 2147483647]");
    expect_refused(model, "--max-tokens 0", "--max-tokens", "[1, 2147483647]");
    expect_refused(model, "-c -3", "-c", "[0, 2147483647]");
    expect_refused(model, "--tree chain_2,bogus", "'bogus' is not a built-in tree", "chain_2, chain_3");
    expect_refused(model, "--top-k 40", "--top-k", "typical acceptance");
    expect_refused(model, "--top-p 0.9", "--top-p", "typical acceptance");
    expect_refused(model, "-i --prompt hi", "--interactive", "--prompt");
    snprintf(args, sizeof args, "--heads %s --tree mc_sim_7b_63,chain_9", heads);
    expect_refused(model, args, "chain_9", "medusa_vicuna_7b_stage2");

    /* the aliases set the same thing as the old names; -c takes effect */
    snprintf(args, sizeof args, "generate --model %s --prompt 'the the' --max-tokens 8 --json --temperature 0.8 --seed 7 --kv 64", model);
    char *a = emt_cli_run_stdout(args, &rc);
    CHECK_EQ_INT(rc, 0);
    snprintf(args, sizeof args, "generate --model %s --prompt 'the the' --max-tokens 8 --json --temp 0.8 --seed 7 -c 64 --top-k 0 --top-p 1", model);
    char *b = emt_cli_run_stdout(args, &rc);
    CHECK_EQ_INT(rc, 0);
    cJSON *ja = a ? cJSON_Parse(a) : NULL, *jb = b ? cJSON_Parse(b) : NULL;
    char *ta = ja ? cJSON_PrintUnformatted(cJSON_GetObjectItem(ja, "tokens")) : NULL;
    char *tb = jb ? cJSON_PrintUnformatted(cJSON_GetObjectItem(jb, "tokens")) : NULL;
    CHECK(ta && tb && !strcmp(ta, tb));
    cJSON_free(ta);
    cJSON_free(tb);
    cJSON_Delete(ja);
    cJSON_Delete(jb);
    free(a);
    free(b);
    snprintf(args, sizeof args, "generate --model %s --prompt 'the the the the the the' --max-tokens 8 --ctx-size 4", model);
    char *out = emt_cli_run(args, &rc);
    CHECK(out && rc != 0 && strstr(out, "prefill"));
    free(out);

    /* the load is announced (not in --json) */
    snprintf(args, sizeof args, "generate --model %s --prompt hi --max-tokens 2", model);
    out = emt_cli_run(args, &rc);
    CHECK(out && rc == 0 && strstr(out, "loading model") && strstr(out, "done in"));
    free(out);
    snprintf(args, sizeof args, "generate --model %s --prompt hi --max-tokens 2 --json", model);
    out = emt_cli_run(args, &rc);
    CHECK(out && rc == 0 && !strstr(out, "loading model"));
    free(out);

    /* --chat-template: the model's own family by name or from a file gives the
     * same prompt; another family gives another; a template of no family fails */
    snprintf(args, sizeof args, "generate --model %s --prompt 'the the' --max-tokens 1 --json --ar", model);
    char *ids_model = prompt_ids(args, &rc);
    snprintf(args, sizeof args, "generate --model %s --prompt 'the the' --max-tokens 1 --json --ar --chat-template chatml", model);
    char *ids_name = prompt_ids(args, &rc);
    snprintf(path, sizeof path, "%s/conv_template.jinja", ENTMTP_TEST_TMP_DIR);
    const char *jinja = "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] + "
                        "'<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";
    write_text(path, jinja, strlen(jinja));
    snprintf(args, sizeof args, "generate --model %s --prompt 'the the' --max-tokens 1 --json --ar --chat-template %s", model, path);
    char *ids_file = prompt_ids(args, &rc);
    snprintf(args, sizeof args, "generate --model %s --prompt 'the the' --max-tokens 1 --json --ar --chat-template gemma", model);
    char *ids_gemma = prompt_ids(args, &rc);
    CHECK(ids_model && ids_name && ids_file && ids_gemma);
    if (ids_model && ids_name && ids_file && ids_gemma) {
        CHECK(!strcmp(ids_model, ids_name));
        CHECK(!strcmp(ids_model, ids_file));
        CHECK(strcmp(ids_model, ids_gemma) != 0);
    }
    cJSON_free(ids_model);
    cJSON_free(ids_name);
    cJSON_free(ids_file);
    cJSON_free(ids_gemma);
    snprintf(args, sizeof args, "generate --model %s --prompt hi --chat-template '{{ messages }} no markers'", model);
    out = emt_cli_run(args, &rc);
    CHECK(out && rc != 0 && strstr(out, "--chat-template") && strstr(out, "not recognised"));
    free(out);

    /* the chat on piped stdin: two turns, each reply the same text as a fresh
     * greedy run over the conversation rendered so far */
    snprintf(path, sizeof path, "%s/conv_chat_in.txt", ENTMTP_TEST_TMP_DIR);
    write_text(path, "hello\n\nthe the\n", 15);
    snprintf(args, sizeof args, "chat --model %s --heads %s --tree chain_2,mc_sim_7b_63 --max-tokens 6 < %s", model, heads, path);
    char *chat = emt_cli_run_stdout(args, &rc);
    CHECK_EQ_INT(rc, 0);
    snprintf(args, sizeof args, "generate --model %s --prompt hello --max-tokens 6 --ar", model);
    char *first = emt_cli_run_stdout(args, &rc);
    CHECK_EQ_INT(rc, 0);
    size_t n_first = first ? strlen(first) : 0;
    CHECK(chat && first && n_first > 0 && !strncmp(chat, first, n_first));
    if (chat && first && n_first > 0 && !strncmp(chat, first, n_first)) {
        /* the conversation after turn one, in the tiny model's ChatML */
        char conv[2048];
        int n = snprintf(conv, sizeof conv,
                         "<|im_start|>user\nhello<|im_end|>\n<|im_start|>assistant\n%.*s<|im_end|>\n"
                         "<|im_start|>user\nthe the<|im_end|>\n<|im_start|>assistant\n",
                         (int)(n_first - 1), first);
        snprintf(path2, sizeof path2, "%s/conv_turn2.txt", ENTMTP_TEST_TMP_DIR);
        write_text(path2, conv, (size_t)n);
        snprintf(args, sizeof args, "generate --model %s --raw --prompt-file %s --max-tokens 6 --ar", model, path2);
        char *second = emt_cli_run_stdout(args, &rc);
        CHECK_EQ_INT(rc, 0);
        int same = second && !strcmp(chat + n_first, second);
        if (!same) fprintf(stderr, "chat turn 2 '%s' != fresh run '%s'\n", chat + n_first, second ? second : "");
        CHECK(same);
        free(second);
    }
    free(first);
    free(chat);
    /* -i is the same chat; its figures go to stderr, one line per reply */
    snprintf(args, sizeof args, "generate -i --model %s --max-tokens 4 < %s", model, path);
    out = emt_cli_run(args, &rc);
    int lines = 0;
    for (const char *p = out; p && (p = strstr(p, "tokens/s")); p++) lines++;
    CHECK(out && rc == 0 && lines == 2);
    free(out);
    return emt_test_finish("test_cli_conventions");
}
