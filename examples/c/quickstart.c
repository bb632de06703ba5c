#include <entmtp.h>
#include <stdio.h>

/* Every call returns a status; entmtp_last_error() says what was wrong. */
#define TRY(call)                                                                   \
    do {                                                                            \
        entmtp_status st_ = (call);                                                 \
        if (st_) {                                                                  \
            fprintf(stderr, "%s: %s\n", entmtp_status_string(st_), entmtp_last_error()); \
            goto done;                                                              \
        }                                                                           \
    } while (0)

int main(int argc, char **argv) { /* quickstart MODEL.gguf HEADS.safetensors */
    if (argc != 3) { fprintf(stderr, "usage: %s MODEL HEADS\n", argv[0]); return 2; }
    entmtp_model *model = NULL;
    entmtp_heads *heads = NULL;
    entmtp_bank *bank = NULL;
    entmtp_policy *policy = NULL;
    entmtp_session *s = NULL;
    int32_t ids[256], n_ids = 0;
    int rc = 1;
    TRY(entmtp_model_load(argv[1], NULL, &model));
    TRY(entmtp_heads_load(model, argv[2], &heads));
    TRY(entmtp_bank_create(NULL, &bank));
    TRY(entmtp_bank_add_builtin(bank, "chain_2", NULL));
    TRY(entmtp_bank_add_builtin(bank, "chain_3", NULL));
    entmtp_policy_config pc; /* versioned: the library writes only sizeof pc bytes */
    TRY(entmtp_policy_config_init(&pc, sizeof pc, ENTMTP_POLICY_HYSTERESIS));
    TRY(entmtp_policy_create(&pc, &policy));
    TRY(entmtp_session_create(model, heads, bank, NULL, &s));
    TRY(entmtp_policy_set(s, policy));
    TRY(entmtp_tokenize(model, "The capital of France is", -1, ENTMTP_TOKENIZE_ADD_SPECIAL, 0, ids, 256, &n_ids));
    TRY(entmtp_session_prefill(s, ids, n_ids));
    entmtp_step_result r = { .struct_size = sizeof r };
    TRY(entmtp_step(s, 0, &r)); /* r.tokens[0 .. r.n_tokens): one verified tree's tokens */
    printf("one step: %d tokens (tree %d, %d nodes)\n", r.n_tokens, r.tree_index, r.n_nodes);
    rc = 0;
done:
    entmtp_session_free(s); /* the session first: it borrows the rest */
    entmtp_policy_free(policy);
    entmtp_bank_free(bank);
    entmtp_heads_free(heads);
    entmtp_model_free(model);
    return rc;
}
