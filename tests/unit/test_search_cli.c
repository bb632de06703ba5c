/* `entmtp search` and `entmtp bench --suite` through the binary on a tiny
 * model with a tokenizer: the bank they write loads and drives `generate`,
 * the suite's greedy rows emit AR's tokens, and bad input exits non-zero
 * with a message naming what was wrong. */
#include "check.h"
#include "cli_run.h"
#include "tiny_model.h"

#include <cjson/cJSON.h>
#include <stdio.h>

static cJSON *read_json(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    static char buf[1 << 20];
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    return cJSON_Parse(buf);
}

int main(void) {
    if (!getenv("ENTMTP_CLI")) TEST_SKIP("ENTMTP_CLI not set");
    char model[512], hydra[512], medusa[512], prompts[512], bad_prompts[512], bank[512], suite[512], args[4096];
    snprintf(model, sizeof model, "%s/search_cli.gguf", ENTMTP_TEST_TMP_DIR);
    snprintf(hydra, sizeof hydra, "%s/search_cli_hydra.safetensors", ENTMTP_TEST_TMP_DIR);
    snprintf(medusa, sizeof medusa, "%s/search_cli_medusa.safetensors", ENTMTP_TEST_TMP_DIR);
    snprintf(prompts, sizeof prompts, "%s/search_cli_prompts.jsonl", ENTMTP_TEST_TMP_DIR);
    snprintf(bad_prompts, sizeof bad_prompts, "%s/search_cli_bad.jsonl", ENTMTP_TEST_TMP_DIR);
    snprintf(bank, sizeof bank, "%s/search_cli_bank.json", ENTMTP_TEST_TMP_DIR);
    snprintf(suite, sizeof suite, "%s/search_cli_suite.json", ENTMTP_TEST_TMP_DIR);
    emt_tiny_config c = emt_tiny_default_config();
    c.vocab = 300;
    c.with_tokenizer = 1;
    CHECK_OK(emt_tiny_write_gguf(model, &c, EMT_F32));
    CHECK_OK(emt_tiny_write_hydra_heads(hydra, c.hidden, c.vocab, 4, 1, 0, 5));
    CHECK_OK(emt_tiny_write_medusa_heads(medusa, c.hidden, c.vocab, 4, 1, 0, 6));
    FILE *f = fopen(prompts, "w");
    fprintf(f, "{\"id\": \"a\", \"task\": \"code\", \"prompt\": \"the the the\"}\n\n"
               "{\"prompt\": \"hello world\"}\n{\"prompt\": \"a b c d\"}\n");
    fclose(f);
    f = fopen(bad_prompts, "w");
    fprintf(f, "{\"prompt\": \"ok\"}\n[1, 2]\n");
    fclose(f);

    int rc;
    snprintf(args, sizeof args, "search --model %s --heads %s --prompt-file %s --prompts 2 --budget 5 --max-tokens 10 "
                                "--temperature 0 --out %s", model, hydra, prompts, bank);
    char *out = emt_cli_run(args, &rc);
    CHECK_EQ_INT(rc, 0);
    if (rc) fprintf(stderr, "%s\n", out);
    CHECK(strstr(out, "stage 1 (greedy) done") != NULL);
    free(out);
    entmtp_bank *b = NULL;
    CHECK_OK(entmtp_bank_load(bank, NULL, &b));
    CHECK(b && entmtp_bank_size(b) >= 1);
    entmtp_policy_config pc = { sizeof pc };
    if (b) CHECK_OK(entmtp_bank_policy_config(b, ENTMTP_POLICY_STATIC, &pc));
    entmtp_bank_free(b);
    cJSON *j = read_json(bank);
    const cJSON *fr = cJSON_GetObjectItem(cJSON_GetObjectItem(j, "search"), "frontier");
    CHECK_EQ_INT(cJSON_GetArraySize(fr), 5); /* root-only + trees of 2..5 nodes */
    const cJSON *t;
    int i = 0, pareto = 0;
    cJSON_ArrayForEach(t, fr) {
        CHECK_EQ_INT((int)cJSON_GetObjectItem(t, "nodes")->valuedouble, i + 1);
        CHECK(cJSON_GetObjectItem(t, "self_accept_length")->valuedouble >= 1.0);
        CHECK(cJSON_GetObjectItem(t, "tokens_per_second")->valuedouble > 0);
        pareto += cJSON_IsTrue(cJSON_GetObjectItem(t, "pareto"));
        i++;
    }
    CHECK(pareto >= 1 && pareto == cJSON_GetArraySize(cJSON_GetObjectItem(j, "trees")));
    cJSON_Delete(j);

    /* the bank drives generate; greedy output equals AR's */
    snprintf(args, sizeof args, "generate --model %s --heads %s --bank %s --policy ucb --prompt 'the the' --max-tokens 16 --json",
             model, hydra, bank);
    char *spec = emt_cli_run(args, &rc);
    CHECK_EQ_INT(rc, 0);
    snprintf(args, sizeof args, "generate --model %s --prompt 'the the' --max-tokens 16 --json --ar", model);
    char *ar = emt_cli_run(args, &rc);
    CHECK_EQ_INT(rc, 0);
    cJSON *js = cJSON_Parse(spec), *ja = cJSON_Parse(ar);
    if (js && ja) {
        char *x = cJSON_PrintUnformatted(cJSON_GetObjectItem(js, "tokens"));
        char *y = cJSON_PrintUnformatted(cJSON_GetObjectItem(ja, "tokens"));
        CHECK(x && y && !strcmp(x, y));
        cJSON_free(x);
        cJSON_free(y);
    } else {
        CHECK(!"generate --json output parses");
    }
    cJSON_Delete(js);
    cJSON_Delete(ja);
    free(spec);
    free(ar);

    /* the accuracy builder */
    snprintf(args, sizeof args, "search --model %s --heads %s --prompt-file %s --prompts 1 --budget 4 --max-tokens 8 "
                                "--builder accuracy --no-calibrate --out %s", model, medusa, prompts, bank);
    out = emt_cli_run(args, &rc);
    CHECK_EQ_INT(rc, 0);
    CHECK(strstr(out, "stage 1 (accuracy) done") != NULL);
    free(out);
    j = read_json(bank);
    CHECK(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "search"), "frontier")) == 4);
    CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(j, "search"), "head_accuracy") != NULL);
    cJSON_Delete(j);

    /* the suite at temperature 0: every row emits AR's tokens */
    snprintf(args, sizeof args, "search --model %s --heads %s --prompt-file %s --prompts 2 --budget 5 --max-tokens 10 "
                                "--out %s", model, hydra, prompts, bank);
    out = emt_cli_run(args, &rc);
    CHECK_EQ_INT(rc, 0);
    free(out);
    snprintf(args, sizeof args, "bench --suite --model %s --medusa-heads %s --hydra-heads %s --task code=%s,%s --task chat=%s "
                                "--prompts 2 --max-tokens 10 --temperature 0 --json %s",
             model, medusa, hydra, prompts, bank, prompts, suite);
    out = emt_cli_run(args, &rc);
    CHECK_EQ_INT(rc, 0);
    if (rc) fprintf(stderr, "%s\n", out);
    CHECK(strstr(out, "| code | AR |") != NULL && strstr(out, "emitted other tokens") == NULL);
    /* stderr is not a terminal here: progress comes as lines, ending at 100% */
    CHECK(strstr(out, "entmtp bench --suite, task code: 100%") != NULL);
    free(out);
    j = read_json(suite);
    const cJSON *tasks = cJSON_GetObjectItem(j, "tasks");
    CHECK_EQ_INT(cJSON_GetArraySize(tasks), 2);
    const cJSON *rows = cJSON_GetObjectItem(cJSON_GetArrayItem(tasks, 0), "rows");
    CHECK(cJSON_GetArraySize(rows) >= 5); /* AR, 2 defaults, static, ucb (+ calibrated policies) */
    CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(cJSON_GetArrayItem(tasks, 1), "rows")), 3);
    const cJSON *ar_ppl = cJSON_GetObjectItem(cJSON_GetArrayItem(rows, 0), "perplexity");
    double ppl0 = cJSON_IsNumber(ar_ppl) ? ar_ppl->valuedouble : 0.0;
    CHECK(ppl0 > 1.0);
    cJSON_ArrayForEach(t, rows) {
        const cJSON *ppl = cJSON_GetObjectItem(t, "perplexity"), *acc = cJSON_GetObjectItem(t, "mean_accept_length");
        CHECK(cJSON_IsTrue(cJSON_GetObjectItem(t, "same_tokens_as_ar")));
        CHECK(cJSON_IsNumber(ppl) && ppl->valuedouble == ppl0);
        CHECK(cJSON_IsNumber(acc) && acc->valuedouble >= 1.0);
    }
    cJSON_Delete(j);

    /* --prompt-file in plain text, one prompt per line: by the .txt name, or
     * by content when the name says nothing; a plot script that cannot be
     * found leaves the bank written and says how to plot it */
    static const char *text_names[] = { "search_cli_prompts.txt", "search_cli_prompts" };
    for (int k = 0; k < 2; k++) {
        char text_prompts[512];
        snprintf(text_prompts, sizeof text_prompts, "%s/%s", ENTMTP_TEST_TMP_DIR, text_names[k]);
        f = fopen(text_prompts, "w");
        fprintf(f, "the the the\n\n{not json, just a prompt}\r\nhello world\n");
        fclose(f);
        snprintf(args, sizeof args, "search --model %s --heads %s --prompt-file %s --budget 3 --max-tokens 6 "
                                    "--no-calibrate --plot-script /nonexistent/plot.py --out %s",
                 model, hydra, text_prompts, bank);
        out = emt_cli_run(args, &rc);
        CHECK_EQ_INT(rc, 0);
        if (rc) fprintf(stderr, "%s\n", out);
        CHECK(strstr(out, "3 prompts from") != NULL);
        CHECK(strstr(out, "no plot: /nonexistent/plot.py not found") != NULL);
        free(out);
    }

    /* bad input: clear messages, non-zero exits */
    snprintf(args, sizeof args, "search --model %s --heads %s --prompt-file %s --out %s", model, hydra, bad_prompts, bank);
    out = emt_cli_run(args, &rc);
    CHECK(rc != 0 && strstr(out, "search_cli_bad.jsonl:2") != NULL && strstr(out, "*.txt") != NULL);
    free(out);
    snprintf(args, sizeof args, "search --model %s --heads %s --prompt-file %s --depth 9 --out %s", model, hydra, prompts, bank);
    out = emt_cli_run(args, &rc);
    CHECK(rc != 0 && strstr(out, "--depth 9") != NULL && strstr(out, "at most 4 tokens") != NULL);
    free(out);
    snprintf(args, sizeof args, "search --model %s --heads %s --prompt-file %s", model, hydra, prompts);
    out = emt_cli_run(args, &rc);
    CHECK(rc == 2 && strstr(out, "--out") != NULL);
    free(out);
    snprintf(args, sizeof args, "search --model %s --heads %s --prompt-file /nonexistent.jsonl --out %s", model, hydra, bank);
    out = emt_cli_run(args, &rc);
    CHECK(rc != 0 && strstr(out, "/nonexistent.jsonl") != NULL);
    free(out);
    snprintf(args, sizeof args, "bench --suite --model %s --medusa-heads %s --hydra-heads %s --task nobank", model, medusa, hydra);
    out = emt_cli_run(args, &rc);
    CHECK(rc == 2 && strstr(out, "NAME=PROMPTS") != NULL);
    free(out);
    return emt_test_finish("test_search_cli");
}
