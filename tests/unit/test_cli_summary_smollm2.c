/* The main command's summary on the bundled model (what scripts/run.sh
 * prints): under another file name the model still gets its shipped Hydra
 * heads and bank (matched by identity); the summary has the speedup line,
 * naming its source, and its numbers agree with each other (tokens = steps x
 * mean accept length, speedup = warm rate / AR rate, load and prefill on
 * their own line); --compare-ar measures AR instead (JSON fields). */
#include "check.h"
#include "cli_run.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <unistd.h>

static double number_after(const char *text, const char *key) {
    const char *at = text ? strstr(text, key) : NULL;
    return at ? strtod(at + strlen(key), NULL) : -1;
}

int main(void) {
    if (!getenv("ENTMTP_CLI")) TEST_SKIP("ENTMTP_CLI not set");
    const char *path = getenv("ENTMTP_MODEL");
    char mbuf[1024], renamed[1024], args[4096];
    if (!path) {
        snprintf(mbuf, sizeof mbuf, "%s/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf", ENTMTP_SOURCE_DIR);
        path = mbuf;
    }
    if (access(path, R_OK) != 0) TEST_SKIP("SmolLM2 model not fetched (scripts/fetch-model.sh)");
    char *real = realpath(path, NULL);
    snprintf(renamed, sizeof renamed, "%s/downloaded-chat-model.gguf", ENTMTP_TEST_TMP_DIR);
    unlink(renamed);
    CHECK(real && symlink(real, renamed) == 0);
    free(real);
    setenv("ENTMTP_HEADS_DIR", ENTMTP_SOURCE_DIR "/heads", 1);

    int rc = -1;
    snprintf(args, sizeof args, "generate --model %s --max-tokens 48 --threads 2 --quiet", renamed);
    char *out = emt_cli_run(args, &rc);
    CHECK_EQ_INT(rc, 0);
    /* "-- EntMTP on cpu: P prompt tokens, N generated in S steps, mean accept length A, W tokens/s" */
    double n = number_after(out, "prompt tokens, "), steps = number_after(out, " generated in ");
    double accept = number_after(out, "mean accept length ");
    CHECK(n >= 1 && n <= 48 && steps >= 1 && steps <= n);
    CHECK(accept >= 1);
    CHECK_NEAR(accept * steps, n, 0.0005 * steps + 1e-9);
    /* "-- speedup: X.XXx over AR (estimated from the bank's step costs: AR about Y tokens/s" */
    double speedup = number_after(out, "-- speedup: ");
    double ar = number_after(out, "AR about ");
    double warm = number_after(out, "-- decode: ");
    CHECK(out && strstr(out, "x over AR (estimated from the bank's step costs"));
    CHECK(speedup > 0 && ar > 0 && warm > 0);
    CHECK_NEAR(speedup, warm / ar, 0.006 + 0.01 * speedup); /* two-decimal rounding */
    CHECK(out && strstr(out, "-- load ") && strstr(out, " s; prefill ") && strstr(out, " tokens/s)"));
    CHECK(out && strstr(out, "SmolLM2-135M-Instruct.hydra.safetensors (hydra, 4 heads): matched by identity (llama, hidden 576"));
    CHECK(out && strstr(out, "SmolLM2-135M-Instruct.hydra.bank.json (shipped with the heads); policy throughput"));
    if (emt_test_failures && out) fprintf(stderr, "%s\n", out);
    free(out);

    /* measured: the JSON fields, consistent with each other */
    snprintf(args, sizeof args, "generate --model %s --max-tokens 32 --threads 2 --json --compare-ar", renamed);
    out = emt_cli_run(args, &rc);
    CHECK_EQ_INT(rc, 0);
    cJSON *j = out ? cJSON_Parse(strchr(out, '{') ? strchr(out, '{') : out) : NULL;
    CHECK(j != NULL);
    if (j) {
        const cJSON *src = cJSON_GetObjectItem(j, "speedup_source");
        CHECK(cJSON_IsString(src) && !strcmp(src->valuestring, "measured"));
        double sp = cJSON_GetObjectItem(j, "speedup")->valuedouble;
        double w = cJSON_GetObjectItem(j, "warm_tokens_per_second")->valuedouble;
        double a = cJSON_GetObjectItem(j, "ar_tokens_per_second")->valuedouble;
        CHECK(sp > 0 && w > 0 && a > 0);
        CHECK_NEAR(sp, w / a, 1e-3 * sp + 1e-3);
        int generated = (int)cJSON_GetObjectItem(j, "generated")->valuedouble;
        CHECK_EQ_INT(cJSON_GetArraySize(cJSON_GetObjectItem(j, "tokens")), generated);
        int64_t usage = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, cJSON_GetObjectItem(j, "tree_usage")) usage += (int64_t)it->valuedouble;
        CHECK_EQ_INT(usage, (int64_t)cJSON_GetObjectItem(j, "steps")->valuedouble);
        CHECK(cJSON_GetObjectItem(j, "warmup_steps")->valuedouble >= 1);
        CHECK(cJSON_GetObjectItem(j, "load_seconds")->valuedouble > 0);
        CHECK(cJSON_GetObjectItem(j, "prefill_tokens_per_second")->valuedouble > 0);
        CHECK(strstr(cJSON_GetObjectItem(j, "heads_reason")->valuestring, "matched by identity"));
        cJSON_Delete(j);
    }
    if (emt_test_failures && out) fprintf(stderr, "%s\n", out);
    free(out);
    unlink(renamed);
    return emt_test_finish("test_cli_summary_smollm2");
}
