/* A complete EntMTP program: text in, text out. Loads a model (and heads),
 * wraps the prompt in the model's chat template, tokenizes it with the
 * model's tokenizer, generates with a bank of two trees and the hysteresis
 * policy (plain AR without heads), streams the text to stdout, and frees
 * everything. Build it against an installed EntMTP with:
 *
 *   cc generate.c $(pkg-config --cflags --libs entmtp) \
 *      -Wl,-rpath,$(pkg-config --variable=libdir entmtp) -o generate
 *
 * usage: generate MODEL PROMPT [HEADS [MAX_TOKENS]]
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
    entmtp_policy *pol = NULL;
    int rc = 1;
    entmtp_status st = entmtp_bank_create(NULL, &bank);
    if (st) return fail("bank", st);
    const int32_t ranks[] = { 0, 0, 0, 1 };         /* paths [0], [0,0], [1] */
    const int32_t lengths[] = { 1, 2, 1 };
    if ((st = entmtp_bank_add_tree(bank, "small", ranks, lengths, 3, NULL))) { fail("small", st); goto done; }
    if ((st = entmtp_bank_add_builtin(bank, "mc_sim_7b_63", NULL))) { fail("mc_sim_7b_63", st); goto done; }
    for (int32_t k = 0; k < entmtp_bank_size(bank); k++) {
        entmtp_tree_info ti = { .struct_size = sizeof ti };
        if ((st = entmtp_bank_tree_info(bank, k, &ti))) { fail("tree info", st); goto done; }
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
    if ((st = entmtp_policy_create(&pc, &pol))) { fail("policy", st); goto done; }
    const float s_values[] = { 0.01f, 0.3f, 0.1f, 0.04f };
    for (int i = 0; i < 4; i++) {
        entmtp_features f;
        memset(&f, 0, sizeof f);
        f.struct_size = sizeof f;
        f.s = s_values[i];
        int32_t k = -1;
        if ((st = entmtp_policy_select(pol, &f, entmtp_bank_size(bank), &k))) { fail("select", st); goto done; }
        printf("s = %.2f -> tree %d\n", (double)f.s, k);
    }
    rc = 0;
done:
    entmtp_policy_free(pol);
    entmtp_bank_free(bank);
    return rc;
}

/* The generated tokens so far, and how much of their text is printed. */
typedef struct stream {
    const entmtp_model *model;
    int32_t *tokens;
    int32_t n, cap;
    char *text;
    size_t text_cap, len, printed;
    entmtp_status error;
} stream;

/* Detokenizes everything generated so far (a token may complete the UTF-8
 * character an earlier one began) and prints what is new, holding back an
 * unfinished character. Returning non-zero would stop the generation. */
static int on_tokens(const int32_t *toks, int32_t n, void *user) {
    stream *s = user;
    for (int32_t i = 0; i < n && s->n < s->cap; i++) {
        if (entmtp_token_is_eog(s->model, toks[i])) continue; /* the stop token is not text */
        s->tokens[s->n++] = toks[i];
    }
    size_t len = 0;
    entmtp_status st = entmtp_detokenize(s->model, s->tokens, s->n, s->text, s->text_cap, &len);
    if (st == ENTMTP_ERR_BUFFER_TOO_SMALL) {
        char *bigger = realloc(s->text, 2 * len + 1);
        if (!bigger) { s->error = ENTMTP_ERR_OUT_OF_MEMORY; return 1; }
        s->text = bigger;
        s->text_cap = 2 * len + 1;
        st = entmtp_detokenize(s->model, s->tokens, s->n, s->text, s->text_cap, &len);
    }
    if (st) { s->error = st; return 1; }
    s->len = len;
    size_t end = len, back = 0;
    while (end > s->printed && back < 3 && ((unsigned char)s->text[end - 1] & 0xC0) == 0x80) { end--; back++; }
    if (end > s->printed && ((unsigned char)s->text[end - 1] & 0x80)) {
        unsigned char lead = (unsigned char)s->text[end - 1];
        size_t want = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
        end = want == back + 1 ? len : end - 1; /* complete, or wait for the rest */
    } else {
        end = len;
    }
    if (end > s->printed) {
        fwrite(s->text + s->printed, 1, end - s->printed, stdout);
        fflush(stdout);
        s->printed = end;
    }
    return 0;
}

/* The prompt in the model's chat template (malloc'ed); a model without one
 * gets the prompt as it is. NULL after printing the error. */
static char *chat_prompt(const entmtp_model *model, const char *user) {
    size_t need = 0;
    entmtp_status st = entmtp_chat_prompt(model, NULL, user, NULL, 0, &need);
    if (st == ENTMTP_ERR_UNSUPPORTED) {
        fprintf(stderr, "note: %s; using the prompt as it is\n", entmtp_last_error());
        char *copy = malloc(strlen(user) + 1);
        if (copy) strcpy(copy, user);
        return copy;
    }
    if (st != ENTMTP_OK && st != ENTMTP_ERR_BUFFER_TOO_SMALL) { fail("chat template", st); return NULL; }
    char *text = malloc(need + 1);
    if (!text) { fail("chat template", ENTMTP_ERR_OUT_OF_MEMORY); return NULL; }
    if ((st = entmtp_chat_prompt(model, NULL, user, text, need + 1, &need))) {
        fail("chat template", st);
        free(text);
        return NULL;
    }
    return text;
}

/* Tokens of `text` (malloc'ed, *n of them) with the BOS etc. the model asks for
 * (ENTMTP_TOKENIZE_ADD_SPECIAL); special-token text such as
 * "<|im_start|>" maps to its id. NULL after printing the error. */
static int32_t *tokenize(const entmtp_model *model, const char *text, int32_t *n) {
    entmtp_status st = entmtp_tokenize(model, text, -1, ENTMTP_TOKENIZE_ADD_SPECIAL, 1, NULL, 0, n);
    if (st != ENTMTP_OK && st != ENTMTP_ERR_BUFFER_TOO_SMALL) { fail("tokenize", st); return NULL; }
    int32_t *ids = malloc(((size_t)*n + 1) * sizeof *ids);
    if (!ids) { fail("tokenize", ENTMTP_ERR_OUT_OF_MEMORY); return NULL; }
    if ((st = entmtp_tokenize(model, text, -1, ENTMTP_TOKENIZE_ADD_SPECIAL, 1, ids, *n + 1, n))) {
        fail("tokenize", st);
        free(ids);
        return NULL;
    }
    return ids;
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "--bank-demo")) {
        printf("EntMTP %s (header %d.%d.%d)\n", entmtp_version_string(), ENTMTP_VERSION_MAJOR,
               ENTMTP_VERSION_MINOR, ENTMTP_VERSION_PATCH);
        return bank_demo();
    }
    if (argc < 3 || argc > 5) {
        fprintf(stderr, "usage: %s MODEL PROMPT [HEADS [MAX_TOKENS]] | --bank-demo\n", argv[0]);
        return 2;
    }
    const char *heads_path = argc > 3 ? argv[3] : NULL;
    int32_t max_tokens = argc > 4 ? (int32_t)atoi(argv[4]) : 64;
    if (max_tokens < 1) {
        fprintf(stderr, "MAX_TOKENS: '%s' is not a positive integer\n", argv[4]);
        return 2;
    }
    entmtp_model *model = NULL;
    entmtp_heads *heads = NULL;
    entmtp_bank *bank = NULL;
    entmtp_policy *pol = NULL;
    entmtp_session *s = NULL;
    char *prompt = NULL;
    int32_t *ids = NULL, n_ids = 0;
    stream out = { 0 };
    entmtp_status st;
    int rc = 1;
    entmtp_model_params mp = entmtp_model_default_params();
    if ((st = entmtp_model_load(argv[1], &mp, &model))) { fail(argv[1], st); goto done; }
    if (heads_path) { /* heads, a bank of two trees no deeper than the heads, and a policy */
        if ((st = entmtp_heads_load(model, heads_path, &heads))) { fail(heads_path, st); goto done; }
        entmtp_heads_info hi = { .struct_size = sizeof hi };
        if ((st = entmtp_heads_get_info(heads, &hi))) { fail(heads_path, st); goto done; }
        entmtp_bank_params bp = entmtp_bank_default_params();
        bp.max_depth = hi.n_heads;
        if ((st = entmtp_bank_create(&bp, &bank))) { fail("bank", st); goto done; }
        const char *small = "chain_1", *large = hi.n_heads >= 3 ? "chain_3" : "chain_2";
        if ((st = entmtp_bank_add_builtin(bank, small, NULL))) { fail(small, st); goto done; }
        if ((st = entmtp_bank_add_builtin(bank, large, NULL))) { fail(large, st); goto done; }
        entmtp_policy_config pc = entmtp_policy_default_config(ENTMTP_POLICY_HYSTERESIS);
        if ((st = entmtp_policy_create(&pc, &pol))) { fail("policy", st); goto done; }
    }
    if ((st = entmtp_session_create(model, heads, bank, NULL, &s))) { fail("session", st); goto done; }
    if (pol && (st = entmtp_policy_set(s, pol))) { fail("policy", st); goto done; }
    if (!(prompt = chat_prompt(model, argv[2])) || !(ids = tokenize(model, prompt, &n_ids))) goto done;
    if ((st = entmtp_session_prefill(s, ids, n_ids))) { fail("prefill", st); goto done; }

    out.model = model;
    out.cap = max_tokens;
    out.tokens = malloc((size_t)max_tokens * sizeof *out.tokens);
    if (!out.tokens) { fail("generate", ENTMTP_ERR_OUT_OF_MEMORY); goto done; }
    st = entmtp_generate(s, max_tokens, heads == NULL, on_tokens, &out);
    if (out.len > out.printed) fwrite(out.text + out.printed, 1, out.len - out.printed, stdout); /* a cut character */
    printf("\n");
    if (out.error) { fail("detokenize", out.error); goto done; }
    if (st != ENTMTP_OK && st != ENTMTP_ERR_KV_FULL) { fail("generate", st); goto done; }
    entmtp_session_stats stats = { .struct_size = sizeof stats };
    if ((st = entmtp_session_get_stats(s, &stats))) { fail("stats", st); goto done; }
    fprintf(stderr, "%lld tokens in %lld steps (%s), mean accept length %.2f, %.1f tokens/s\n",
            (long long)stats.n_generated, (long long)stats.n_steps, heads ? "EntMTP" : "AR",
            stats.mean_accept_length, stats.tokens_per_second);
    rc = 0;
done:
    entmtp_session_free(s); /* first: the session borrows the policy, bank, heads and model */
    entmtp_policy_free(pol);
    entmtp_bank_free(bank);
    entmtp_heads_free(heads);
    entmtp_model_free(model);
    free(prompt);
    free(ids);
    free(out.tokens);
    free(out.text);
    return rc;
}
