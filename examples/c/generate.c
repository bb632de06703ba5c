/* A complete EntMTP program: load a model and heads, build a bank of two
 * trees, attach the hysteresis policy and generate. Build it against an
 * installed EntMTP with:
 *
 *   cc generate.c $(pkg-config --cflags --libs entmtp) -o generate
 *
 * usage: generate MODEL HEADS [PROMPT_IDS...]
 *        generate --bank-demo       (no model: shows trees and a policy)
 */
#include <entmtp.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, entmtp_status st) {
    fprintf(stderr, "%s: %s: %s\n", what, entmtp_status_string(st), entmtp_last_error());
    return 1;
}

static int bank_demo(void) {
    entmtp_bank *bank = NULL;
    entmtp_status st = entmtp_bank_create(NULL, &bank);
    if (st) return fail("bank", st);
    int32_t idx;
    const int32_t ranks[] = { 0, 0, 0, 1 };         /* paths [0], [0,0], [1] */
    const int32_t lengths[] = { 1, 2, 1 };
    if ((st = entmtp_bank_add_tree(bank, "small", ranks, lengths, 3, &idx))) return fail("small", st);
    if ((st = entmtp_bank_add_builtin(bank, "mc_sim_7b_63", &idx))) return fail("mc_sim_7b_63", st);
    for (int32_t k = 0; k < entmtp_bank_size(bank); k++) {
        entmtp_tree_info ti = { .struct_size = sizeof ti };
        entmtp_bank_tree_info(bank, k, &ti);
        printf("tree %d: %-14s %3d nodes, depth %d, %d leaves\n", k, ti.name, ti.n_nodes, ti.depth, ti.n_leaves);
    }
    /* an invalid tree is an error with a message, never a crash */
    const int32_t bad[] = { 0, 1, 2 };               /* path [1,2] lacks its prefix [1] */
    const int32_t bad_len[] = { 1, 2 };
    st = entmtp_bank_add_tree(bank, "bad", bad, bad_len, 2, NULL);
    printf("invalid tree -> %s: %s\n", entmtp_status_string(st), entmtp_last_error());

    entmtp_policy_config pc = entmtp_policy_default_config(ENTMTP_POLICY_HYSTERESIS);
    pc.tau_on = 0.2f;
    pc.tau_off = 0.05f;
    entmtp_policy *pol = NULL;
    if ((st = entmtp_policy_create(&pc, &pol))) return fail("policy", st);
    const float s_values[] = { 0.01f, 0.3f, 0.1f, 0.04f };
    for (int i = 0; i < 4; i++) {
        entmtp_features f;
        memset(&f, 0, sizeof f);
        f.struct_size = sizeof f;
        f.s = s_values[i];
        int32_t k = -1;
        entmtp_policy_select(pol, &f, entmtp_bank_size(bank), &k);
        printf("s = %.2f -> tree %d\n", (double)f.s, k);
    }
    entmtp_policy_free(pol);
    entmtp_bank_free(bank);
    return 0;
}

static int print_tokens(const int32_t *toks, int32_t n, void *user) {
    (void)user;
    for (int32_t i = 0; i < n; i++) printf(" %d", toks[i]);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv) {
    printf("EntMTP %s (header %d.%d.%d)\n", entmtp_version_string(), ENTMTP_VERSION_MAJOR,
           ENTMTP_VERSION_MINOR, ENTMTP_VERSION_PATCH);
    if (argc == 2 && !strcmp(argv[1], "--bank-demo")) return bank_demo();
    if (argc < 3) {
        fprintf(stderr, "usage: %s MODEL HEADS [PROMPT_IDS...] | --bank-demo\n", argv[0]);
        return 2;
    }
    entmtp_model_params mp = entmtp_model_default_params();
    entmtp_model *model = NULL;
    entmtp_heads *heads = NULL;
    entmtp_bank *bank = NULL;
    entmtp_policy *pol = NULL;
    entmtp_session *s = NULL;
    entmtp_status st;
    int rc = 1;
    if ((st = entmtp_model_load(argv[1], &mp, &model))) { rc = fail(argv[1], st); goto done; }
    if ((st = entmtp_heads_load(model, argv[2], &heads))) { rc = fail(argv[2], st); goto done; }
    entmtp_heads_info hi = { .struct_size = sizeof hi };
    entmtp_heads_get_info(heads, &hi);
    entmtp_bank_params bp = entmtp_bank_default_params();
    bp.max_depth = hi.n_heads;
    if ((st = entmtp_bank_create(&bp, &bank))) { rc = fail("bank", st); goto done; }
    if ((st = entmtp_bank_add_builtin(bank, "chain_2", NULL)) ||
        (st = entmtp_bank_add_builtin(bank, "mc_sim_7b_63", NULL))) { rc = fail("bank", st); goto done; }
    entmtp_policy_config pc = entmtp_policy_default_config(ENTMTP_POLICY_HYSTERESIS);
    pc.tau_on = 0.3f;
    pc.tau_off = 0.1f;
    if ((st = entmtp_policy_create(&pc, &pol))) { rc = fail("policy", st); goto done; }
    if ((st = entmtp_session_create(model, heads, bank, NULL, &s))) { rc = fail("session", st); goto done; }
    if ((st = entmtp_policy_set(s, pol))) { rc = fail("policy", st); goto done; }
    int32_t prompt[64] = { 1, 2, 3, 4 };
    int32_t n_prompt = 4;
    if (argc > 3) {
        n_prompt = 0;
        for (int i = 3; i < argc && n_prompt < 64; i++) prompt[n_prompt++] = atoi(argv[i]);
    }
    if ((st = entmtp_session_prefill(s, prompt, n_prompt))) { rc = fail("prefill", st); goto done; }
    printf("tokens:");
    st = entmtp_generate(s, 32, 0, print_tokens, NULL);
    printf("\n");
    if (st) { rc = fail("generate", st); goto done; }
    entmtp_session_stats stats = { .struct_size = sizeof stats };
    entmtp_session_get_stats(s, &stats);
    printf("%lld tokens in %lld steps, mean accept length %.2f\n", (long long)stats.n_generated,
           (long long)stats.n_steps, stats.mean_accept_length);
    rc = 0;
done:
    if (s) entmtp_policy_set(s, NULL);
    entmtp_session_free(s);
    entmtp_policy_free(pol);
    entmtp_bank_free(bank);
    entmtp_heads_free(heads);
    entmtp_model_free(model);
    return rc;
}
