/* `entmtp generate` / `entmtp info` on a tiny model with a tokenizer: the
 * JSON fields tools rely on, AR == EntMTP tokens, and failures that exit
 * non-zero with the library's message. */
#include "check.h"
#include "cli_run.h"
#include "tiny_model.h"

#include <cjson/cJSON.h>
#include <stdio.h>

static char *run(const char *args, int *rc) { return emt_cli_run(args, rc); }

/* bench --heads --bank: one record per bank tree, in the bank's order,
 * each timing exactly --tokens steps of that tree; the root-only tree is
 * an AR step (accepts exactly 1); the speed estimate is the bank's accept
 * length over the step's cost relative to the AR step timed alike, and
 * absent without a bank figure. */
static void check_bench_bank(const char *model, const char *heads) {
    char bank[512], args[2048];
    snprintf(bank, sizeof bank, "%s/cli_bench_bank.json", ENTMTP_TEST_TMP_DIR);
    FILE *f = fopen(bank, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs("{\"trees\":[{\"name\":\"root\",\"choices\":[],\"mean_accept_length\":1.0},"
          "{\"name\":\"chain_2\",\"choices\":[[0],[0,0]],\"mean_accept_length\":1.8},"
          "{\"name\":\"w\\\"ide\",\"choices\":[[0],[1],[2],[0,0]]}]}",
          f);
    fclose(f);
    int rc;
    snprintf(args, sizeof args, "bench --model %s --heads %s --bank %s --context 8 --tokens 3 --reps 1 --nodes 1 --json",
             model, heads, bank);
    char *out = run(args, &rc);
    CHECK_EQ_INT(rc, 0);
    cJSON *j = cJSON_Parse(out);
    CHECK(j != NULL);
    const cJSON *trees = j ? cJSON_GetObjectItem(j, "tree_steps") : NULL;
    CHECK(trees && cJSON_GetArraySize(trees) == 3);
    const char *names[] = { "root", "chain_2", "w\"ide" }; /* a quote: the JSON escapes it */
    const int nodes[] = { 1, 3, 5 }, depth[] = { 0, 2, 2 };
    double ar = j ? cJSON_GetObjectItem(j, "tree_ar_step_seconds")->valuedouble : 0;
    CHECK(ar > 0);
    /* the tiny model's name holds quotes (tiny_model.c): escaped, it reads back */
    const cJSON *name = j ? cJSON_GetObjectItem(j, "model") : NULL;
    CHECK(name && cJSON_IsString(name) && !strcmp(name->valuestring, "tiny \"llama\""));
    /* the EntMTP-vs-AR generation drafts with the --bank given (no policy
     * stored in it: static on its first tree), not a built-in tree */
    const cJSON *drafts = j ? cJSON_GetObjectItem(j, "entmtp_drafts") : NULL;
    CHECK(drafts && cJSON_IsString(drafts) && strstr(drafts->valuestring, "cli_bench_bank.json") &&
          strstr(drafts->valuestring, "policy static"));
    CHECK(j && cJSON_GetObjectItem(cJSON_GetObjectItem(j, "tree_ar_counters"), "steps")->valuedouble == 3);
    for (int t = 0; trees && t < 3 && t < cJSON_GetArraySize(trees); t++) {
        const cJSON *r = cJSON_GetArrayItem(trees, t);
        CHECK(!strcmp(cJSON_GetObjectItem(r, "name")->valuestring, names[t]));
        CHECK_EQ_INT((int)cJSON_GetObjectItem(r, "nodes")->valuedouble, nodes[t]);
        CHECK_EQ_INT((int)cJSON_GetObjectItem(r, "depth")->valuedouble, depth[t]);
        CHECK_EQ_INT((int)cJSON_GetObjectItem(cJSON_GetObjectItem(r, "counters"), "steps")->valuedouble, 3);
        double step = cJSON_GetObjectItem(r, "step_seconds")->valuedouble;
        double here = cJSON_GetObjectItem(r, "accepted_here")->valuedouble;
        double bank_acc = cJSON_GetObjectItem(r, "bank_mean_accept_length")->valuedouble;
        double est = cJSON_GetObjectItem(r, "estimated_speedup")->valuedouble;
        CHECK(step > 0);
        CHECK(here >= 1.0 && here <= depth[t] + 1);
        if (t == 0) CHECK_NEAR(here, 1.0, 1e-12);
        CHECK_NEAR(cJSON_GetObjectItem(r, "ratio_to_ar")->valuedouble, step / ar, 1e-3 * step / ar);
        if (t == 2) CHECK_NEAR(est, 0.0, 0.0); /* no accept length in the bank */
        else CHECK_NEAR(est, bank_acc * ar / step, 1e-3 * est);
    }
    cJSON_Delete(j);
    free(out);
    /* the text report names every tree and the best estimate */
    snprintf(args, sizeof args, "bench --model %s --heads %s --bank %s --context 8 --tokens 2 --reps 1 --nodes 1", model,
             heads, bank);
    out = run(args, &rc);
    CHECK(rc == 0 && strstr(out, "EntMTP step by bank tree") && strstr(out, "chain_2") && strstr(out, "w\"ide") &&
          strstr(out, "best static tree"));
    free(out);
    /* failures name what is at fault */
    snprintf(args, sizeof args, "bench --model %s --bank %s", model, bank);
    out = run(args, &rc);
    CHECK(rc != 0 && strstr(out, "--bank") && strstr(out, "--heads"));
    free(out);
    snprintf(args, sizeof args, "bench --model %s --heads %s --bank /nonexistent_bank.json --context 8 --tokens 2 --nodes 1", model,
             heads);
    out = run(args, &rc);
    CHECK(rc != 0 && strstr(out, "/nonexistent_bank.json"));
    free(out);
    /* a tree deeper than the heads: the session refuses it, named */
    f = fopen(bank, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs("{\"trees\":[{\"name\":\"too_deep\",\"choices\":[[0],[0,0],[0,0,0],[0,0,0,0],[0,0,0,0,0]]}]}", f);
    fclose(f);
    snprintf(args, sizeof args, "bench --model %s --heads %s --bank %s --context 8 --tokens 2 --nodes 1", model, heads, bank);
    out = run(args, &rc);
    CHECK(rc != 0 && strstr(out, "too_deep"));
    free(out);
}

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
    check_bench_bank(model, heads);
    out = run("frobnicate", &rc);
    CHECK(rc != 0);
    free(out);
    return emt_test_finish("test_generate_cli");
}
