/* `entmtp generate` / `entmtp info` on a tiny model with a tokenizer: the
 * JSON fields tools rely on, AR == EntMTP tokens, and failures that exit
 * non-zero with the library's message. */
#include "check.h"
#include "cli_run.h"
#include "tiny_model.h"

#include <cjson/cJSON.h>
#include <stdio.h>

static char *run(const char *args, int *rc) { return emt_cli_run(args, rc); }

int main(void) {
    if (!getenv("ENTMTP_CLI")) TEST_SKIP("ENTMTP_CLI not set");
    char model[512], heads[512], args[2048];
    emt_cli_tiny_files("cli", model, sizeof model, heads, sizeof heads);
    int rc;
    snprintf(args, sizeof args, "generate --model %s --heads %s --tree chain_2,mc_sim_7b_63 --policy ucb --prompt 'the the' --max-tokens 24 --json", model, heads);
    char *out = run(args, &rc);
    CHECK_EQ_INT(rc, 0);
    cJSON *j = cJSON_Parse(out);
    CHECK(j != NULL);
    const char *keys[] = { "tokens", "text", "steps", "mean_accept_length", "tokens_per_second", "tree_usage" };
    for (int i = 0; j && i < 6; i++)
        if (!cJSON_GetObjectItem(j, keys[i])) { fprintf(stderr, "missing key %s in %s\n", keys[i], out); emt_test_failures++; }
    int64_t usage = 0;
    const cJSON *it;
    if (j) cJSON_ArrayForEach(it, cJSON_GetObjectItem(j, "tree_usage")) usage += (int64_t)it->valuedouble;
    CHECK(j && usage == (int64_t)cJSON_GetObjectItem(j, "steps")->valuedouble);
    CHECK(j && cJSON_GetArraySize(cJSON_GetObjectItem(j, "tokens")) >= 1 && cJSON_GetArraySize(cJSON_GetObjectItem(j, "tokens")) <= 24);
    snprintf(args, sizeof args, "generate --model %s --prompt 'the the' --max-tokens 24 --json --ar", model);
    char *out_ar = run(args, &rc);
    CHECK_EQ_INT(rc, 0);
    cJSON *k = cJSON_Parse(out_ar);
    if (j && k) {
        char *a = cJSON_PrintUnformatted(cJSON_GetObjectItem(j, "tokens"));
        char *b = cJSON_PrintUnformatted(cJSON_GetObjectItem(k, "tokens"));
        CHECK(!strcmp(a, b)); /* greedy EntMTP == greedy AR through the CLI */
        CHECK(!strcmp(cJSON_GetObjectItem(k, "text")->valuestring, cJSON_GetObjectItem(j, "text")->valuestring));
        CHECK_NEAR(cJSON_GetObjectItem(k, "mean_accept_length")->valuedouble, 1.0, 1e-9);
        cJSON_free(a);
        cJSON_free(b);
    }
    cJSON_Delete(j);
    cJSON_Delete(k);
    free(out);
    free(out_ar);
    /* text mode prints the summary */
    snprintf(args, sizeof args, "generate --model %s --heads %s --tree chain_3 --prompt hello --max-tokens 8", model, heads);
    out = run(args, &rc);
    CHECK(rc == 0 && strstr(out, "mean accept length") && strstr(out, "chain_3="));
    free(out);
    /* failures */
    out = run("generate --model /nonexistent.gguf --prompt x", &rc);
    CHECK(rc != 0 && strstr(out, "/nonexistent.gguf") && strstr(out, "cannot open"));
    free(out);
    snprintf(args, sizeof args, "generate --model %s --max-tokens abc", model);
    out = run(args, &rc);
    CHECK(rc != 0 && strstr(out, "--max-tokens"));
    free(out);
    snprintf(args, sizeof args, "generate --model %s --heads %s --tree no_such_tree", model, heads);
    out = run(args, &rc);
    CHECK(rc != 0 && strstr(out, "no_such_tree"));
    free(out);
    snprintf(args, sizeof args, "generate --model %s --heads %s --policy hysteresis --tau-on 0.1 --tau-off 0.5 --tree chain_1,chain_2", model, heads);
    out = run(args, &rc);
    CHECK(rc != 0 && strstr(out, "tau_off"));
    free(out);
    snprintf(args, sizeof args, "generate --model %s --heads %s", model, model);
    out = run(args, &rc);
    CHECK(rc != 0);
    free(out);
    snprintf(args, sizeof args, "info --model %s", model);
    out = run(args, &rc);
    CHECK(rc == 0 && strstr(out, "vocab_size: 300") && strstr(out, "Q8_0"));
    free(out);
    /* bench on a synthetic model: the figures a reader relies on are there */
    out = run("bench --synthetic tiny --tokens 4 --reps 1 --nodes 1,2,8 --json", &rc);
    CHECK_EQ_INT(rc, 0);
    cJSON *bj = cJSON_Parse(out);
    CHECK(bj != NULL);
    const char *bkeys[] = { "ar_tokens_per_second", "ar_step_bytes", "ar_bandwidth_fraction", "copy_bandwidth_gbs", "verify" };
    for (int i = 0; bj && i < 5; i++) CHECK(cJSON_GetObjectItem(bj, bkeys[i]) != NULL);
    CHECK(bj && cJSON_GetArraySize(cJSON_GetObjectItem(bj, "verify")) == 3);
    if (bj) CHECK(cJSON_GetObjectItem(cJSON_GetArrayItem(cJSON_GetObjectItem(bj, "verify"), 2), "ratio_to_ar")->valuedouble > 0);
    cJSON_Delete(bj);
    free(out);
    /* --weights builds the synthetic matrices in that type: the kernels say so */
    out = run("bench --synthetic tiny --weights bf16 --tokens 2 --reps 1 --nodes 1 --json", &rc);
    CHECK(rc == 0 && strstr(out, "native weights (BF16 16)") && strstr(out, "\"copy_bandwidth_gbs\""));
    free(out);
    out = run("bench --synthetic tiny --weights q8_0 --tokens 2 --reps 1 --nodes 1 --json", &rc);
    CHECK(rc == 0 && strstr(out, "native weights (Q8_0 16)"));
    free(out);
    out = run("bench --synthetic tiny --weights q4_1", &rc);
    CHECK(rc != 0 && strstr(out, "q4_1") && strstr(out, "bf16"));
    free(out);
    out = run("bench --synthetic nope", &rc);
    CHECK(rc != 0 && strstr(out, "nope"));
    free(out);
    out = run("frobnicate", &rc);
    CHECK(rc != 0);
    free(out);
    return emt_test_finish("test_generate_cli");
}
