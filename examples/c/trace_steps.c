/* Per-step trace of a generation for policy design: a custom policy that
 * always picks one bank tree and records, for every step, what a policy is
 * shown (p0, entropy, every head's top-k probabilities) and what the step
 * gave (tokens accepted, seconds). With a chain tree as deep as the heads,
 * the accept length tells how many leading head drafts were right, which
 * is what tools/policy_sim/simulate.py needs to replay any depth rule
 * offline, free of timing noise. Build against an installed EntMTP:
 *
 *   cc trace_steps.c $(pkg-config --cflags --libs entmtp) -o trace_steps
 *
 * usage: trace_steps MODEL HEADS BANK TREE PROMPT_FILE MAX_TOKENS [THREADS]
 * prints one JSON object per step to stdout. */
#include <entmtp.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct trace {
    int32_t tree;
    int64_t step;
} trace;

static int fail(const char *what, entmtp_status st) {
    fprintf(stderr, "trace_steps: %s: %s: %s\n", what, entmtp_status_string(st), entmtp_last_error());
    return 1;
}

/* the policy: always the traced tree; prints the step's features */
static entmtp_status select_tree(void *user_data, const entmtp_features *f, int32_t n_trees, int32_t *out) {
    trace *t = user_data;
    (void)n_trees;
    printf("{\"step\": %lld, \"p0\": %.6g, \"entropy\": %.6g, \"q\": [", (long long)t->step, (double)f->p0,
           (double)f->entropy);
    int32_t topk = ENTMTP_FEATURES_HAS(f, head_topk_p) ? f->topk : 0;
    for (int32_t d = 0; d < f->n_heads; d++) {
        printf(d ? ", [" : "[");
        for (int32_t r = 0; r < topk; r++) printf(r ? ", %.6g" : "%.6g", (double)f->head_topk_p[d * topk + r]);
        printf("]");
    }
    printf("]");
    *out = t->tree;
    return ENTMTP_OK;
}

static void observe(void *user_data, const entmtp_outcome *o) {
    trace *t = user_data;
    printf(", \"nodes\": %d, \"accept\": %d, \"seconds\": %.6g}\n", o->n_nodes, o->accept_length, o->seconds);
    t->step++;
}

static char *read_file(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    size_t cap = 4096, n = 0;
    char *buf = malloc(cap);
    size_t got;
    while (buf && (got = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += got;
        if (cap - n - 1 == 0) {
            char *b = realloc(buf, cap * 2);
            if (!b) { free(buf); buf = NULL; break; }
            buf = b;
            cap *= 2;
        }
    }
    fclose(f);
    if (buf) buf[n] = 0;
    return buf;
}

int main(int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: trace_steps MODEL HEADS BANK TREE PROMPT_FILE MAX_TOKENS [THREADS]\n");
        return 2;
    }
    int max_tokens = atoi(argv[6]);
    if (max_tokens < 1) {
        fprintf(stderr, "trace_steps: MAX_TOKENS must be >= 1 (got '%s')\n", argv[6]);
        return 2;
    }
    char *prompt = read_file(argv[5]);
    if (!prompt) {
        fprintf(stderr, "trace_steps: cannot read the prompt file '%s'\n", argv[5]);
        return 1;
    }
    entmtp_model *model = NULL;
    entmtp_heads *heads = NULL;
    entmtp_bank *bank = NULL;
    entmtp_session *session = NULL;
    entmtp_policy *policy = NULL;
    char *text = NULL;
    int32_t *tokens = NULL;
    int rc = 1;
    entmtp_status st;
    entmtp_model_params mp;
    entmtp_model_params_init(&mp, sizeof mp);
    mp.n_threads = argc > 7 ? atoi(argv[7]) : 0;
    trace tr = { 0, 0 };
    size_t text_len = 0;
    int32_t n_tokens = 0;
    if ((st = entmtp_model_load(argv[1], &mp, &model))) { rc = fail(argv[1], st); goto out; }
    if ((st = entmtp_heads_load(model, argv[2], &heads))) { rc = fail(argv[2], st); goto out; }
    if ((st = entmtp_bank_load(argv[3], NULL, &bank))) { rc = fail(argv[3], st); goto out; }
    if ((st = entmtp_bank_find(bank, argv[4], &tr.tree))) { rc = fail(argv[4], st); goto out; }
    /* the chat template, then the tokens with the specials the model asks for
     * (its BOS: the template text leaves it to the tokenizer), sizes asked first */
    st = entmtp_chat_prompt(model, NULL, prompt, NULL, 0, &text_len);
    if (st && st != ENTMTP_ERR_BUFFER_TOO_SMALL) { rc = fail("chat template", st); goto out; }
    if (!(text = malloc(text_len + 1))) goto out;
    if ((st = entmtp_chat_prompt(model, NULL, prompt, text, text_len + 1, &text_len))) { rc = fail("chat template", st); goto out; }
    st = entmtp_tokenize(model, text, -1, ENTMTP_TOKENIZE_ADD_SPECIAL, 1, NULL, 0, &n_tokens);
    if (st && st != ENTMTP_ERR_BUFFER_TOO_SMALL) { rc = fail("tokenize", st); goto out; }
    if (!(tokens = malloc((size_t)n_tokens * sizeof *tokens))) goto out;
    if ((st = entmtp_tokenize(model, text, -1, ENTMTP_TOKENIZE_ADD_SPECIAL, 1, tokens, n_tokens, &n_tokens))) { rc = fail("tokenize", st); goto out; }
    if ((st = entmtp_session_create(model, heads, bank, NULL, &session))) { rc = fail("session", st); goto out; }
    entmtp_policy_config pc;
    entmtp_policy_config_init(&pc, sizeof pc, ENTMTP_POLICY_CUSTOM);
    pc.select = select_tree;
    pc.observe = observe;
    pc.user_data = &tr;
    if ((st = entmtp_policy_create(&pc, &policy))) { rc = fail("policy", st); goto out; }
    if ((st = entmtp_policy_set(session, policy))) { rc = fail("policy", st); goto out; }
    if ((st = entmtp_session_prefill(session, tokens, n_tokens))) { rc = fail("prefill", st); goto out; }
    for (int generated = 0; generated < max_tokens;) {
        entmtp_step_result r = { .struct_size = sizeof r };
        if ((st = entmtp_step(session, max_tokens - generated, &r))) { rc = fail("step", st); goto out; }
        generated += r.n_tokens;
        if (r.stopped) break;
    }
    rc = 0;
out:
    if (session) entmtp_policy_set(session, NULL);
    entmtp_policy_free(policy);
    entmtp_session_free(session);
    entmtp_bank_free(bank);
    entmtp_heads_free(heads);
    entmtp_model_free(model);
    free(tokens);
    free(text);
    free(prompt);
    return rc;
}
