/* A policy's decisions priced without the clock: runs the policy on real
 * prompts through the public API and prices every step it took with a fixed
 * cost table, verify[n] AR steps for an n-node tree plus `head` per Hydra
 * level run (the units of tools/policy_sim/simulate.py). Tokens per unit
 * then compare policies and static trees free of timing noise: a policy
 * that wins here and loses on the clock pays for something the table does
 * not hold; one that loses here chose badly. Not a test:
 *   build/.../tests/bench_decisions MODEL HEADS BANK POLICY TOKENS PROMPT.txt...
 * POLICY: a kind (throughput, dynamic, ...) or static:K (bank tree K).
 * Environment: VERIFY (comma list for 1, 2, .. nodes; default this
 * machine's 1,1.23,1.45,1.68,1.94, then +0.25 a node), HEAD (0.037),
 * FIXED=1 (the session keeps the bank's costs: reproducible = 1), TEMP
 * (temperature: sampled steps, each policy then emits its own text),
 * COLD=1 (a new session per prompt; default one session, reset between). */
#define ENTMTP_EXPERIMENTAL_API
#include "check.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_NODES 256

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    char *buf = NULL;
    long n = fseek(f, 0, SEEK_END) == 0 ? ftell(f) : -1;
    if (n >= 0 && fseek(f, 0, SEEK_SET) == 0 && (buf = malloc((size_t)n + 1))) {
        if (fread(buf, 1, (size_t)n, f) != (size_t)n) { free(buf); buf = NULL; }
        else buf[n] = 0;
    }
    fclose(f);
    return buf;
}

/* an environment switch: set to a non-zero number */
static int env_on(const char *name) {
    const char *v = getenv(name);
    return v && atoi(v) != 0;
}

/* verify[n] for n = 1..MAX_NODES-1 from VERIFY, extended by the last step */
static int verify_table(double *verify) {
    const char *spec = getenv("VERIFY");
    if (!spec) spec = "1,1.23,1.45,1.68,1.94";
    int n = 0;
    for (const char *p = spec; *p && n < MAX_NODES - 1;) {
        char *end;
        double v = strtod(p, &end);
        if (end == p || !(v > 0)) return 0;
        verify[++n] = v;
        p = *end == ',' ? end + 1 : end;
    }
    double step = n >= 2 ? verify[n] - verify[n - 1] : 0.25;
    for (int i = n + 1; i < MAX_NODES; i++) verify[i] = verify[i - 1] + step;
    return n;
}

static entmtp_status run_prompt(entmtp_model *m, entmtp_session *S, const char *text, int32_t max_tokens,
                                const double *verify, double head, double *units, long *tokens, long *steps,
                                long *levels) {
    size_t len = 0;
    entmtp_status st = entmtp_chat_prompt(m, NULL, text, NULL, 0, &len);
    if (st && st != ENTMTP_ERR_BUFFER_TOO_SMALL) return st;
    char *chat = malloc(len + 1);
    int32_t n = 0, cap = (int32_t)len + 16;
    int32_t *ids = malloc((size_t)cap * sizeof *ids);
    if (!chat || !ids) { free(chat); free(ids); return ENTMTP_ERR_OUT_OF_MEMORY; }
    if (!(st = entmtp_chat_prompt(m, NULL, text, chat, len + 1, &len)) &&
        !(st = entmtp_tokenize(m, chat, -1, 0, 1, ids, cap, &n)))
        st = entmtp_session_prefill(S, ids, n);
    free(chat);
    free(ids);
    for (int32_t got = 0; !st && got < max_tokens;) {
        entmtp_step_result r = { .struct_size = sizeof r };
        if ((st = entmtp_step(S, max_tokens - got, &r))) break;
        entmtp_features f = { .struct_size = sizeof f };
        if ((st = entmtp_session_features(S, &f))) break;
        *units += verify[r.n_nodes < MAX_NODES ? r.n_nodes : MAX_NODES - 1] + head * f.n_heads;
        *levels += f.n_heads;
        *tokens += r.n_tokens;
        (*steps)++;
        got += r.n_tokens;
        if (r.stopped) break;
    }
    return st == ENTMTP_ERR_KV_FULL ? ENTMTP_OK : st;
}

int main(int argc, char **argv) {
    double verify[MAX_NODES] = { 0 };
    if (argc < 7 || !verify_table(verify)) {
        fprintf(stderr, "usage: bench_decisions MODEL HEADS BANK POLICY TOKENS PROMPT.txt... (see the file's head)\n");
        return 2;
    }
    const double head = getenv("HEAD") ? atof(getenv("HEAD")) : 0.037;
    const int fixed = env_on("FIXED"), cold = env_on("COLD");
    entmtp_model *m = NULL;
    entmtp_heads *h = NULL;
    entmtp_bank *b = NULL;
    entmtp_policy *pol = NULL;
    entmtp_policy_config pc;
    if (!strncmp(argv[4], "static:", 7)) {
        pc = entmtp_policy_default_config(ENTMTP_POLICY_STATIC);
        pc.static_tree = atoi(argv[4] + 7);
    } else {
        entmtp_policy_kind kind = ENTMTP_POLICY_STATIC;
        CHECK_OK(entmtp_policy_kind_from_name(argv[4], &kind));
        pc = entmtp_policy_default_config(kind);
    }
    CHECK_OK(entmtp_model_load(argv[1], NULL, &m));
    if (m) CHECK_OK(entmtp_heads_load(m, argv[2], &h));
    if (h) CHECK_OK(entmtp_bank_load(argv[3], NULL, &b));
    if (b) CHECK_OK(entmtp_policy_create(&pc, &pol));
    double units = 0;
    long tokens = 0, steps = 0, levels = 0;
    entmtp_session *S = NULL;
    for (int i = 6; pol && i < argc && !emt_test_failures; i++) {
        if (!S || cold) {
            entmtp_session_free(S);
            S = NULL;
            entmtp_session_params sp = entmtp_session_default_params();
            sp.kv_capacity = 4096;
            sp.reproducible = fixed;
            if (getenv("TEMP")) sp.temperature = (float)atof(getenv("TEMP")); /* sampled steps */
            CHECK_OK(entmtp_session_create(m, h, b, &sp, &S));
            if (S) CHECK_OK(entmtp_policy_set(S, pol));
        } else {
            entmtp_session_reset(S);
        }
        char *text = slurp(argv[i]);
        if (!text) {
            fprintf(stderr, "bench_decisions: cannot read '%s'\n", argv[i]);
            emt_test_failures++;
        } else if (S) {
            CHECK_OK(run_prompt(m, S, text, atoi(argv[5]), verify, head, &units, &tokens, &steps, &levels));
        }
        free(text);
    }
    if (steps > 0 && !emt_test_failures)
        printf("%s: %ld tokens in %ld steps (accept %.3f), %.2f levels a step, %.1f AR steps of cost: "
               "%.4f tokens per AR step\n",
               argv[4], tokens, steps, (double)tokens / steps, (double)levels / steps, units, tokens / units);
    entmtp_session_free(S);
    entmtp_policy_free(pol);
    entmtp_bank_free(b);
    entmtp_heads_free(h);
    entmtp_model_free(m);
    return emt_test_finish("bench_decisions");
}
