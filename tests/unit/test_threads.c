/* One model shared by several sessions on several threads, each generating
 * from a different prompt, yields the same tokens as the same sessions run
 * one after another. (Run under ThreadSanitizer by scripts/test.sh.) */
#include "check.h"
#include "tiny_model.h"

#include <pthread.h>
#include <stdio.h>

#define N_THREADS 4
#define N_GEN 40

typedef struct job {
    entmtp_model *model;
    entmtp_heads *heads;
    entmtp_bank *bank;
    int32_t prompt[4];
    int32_t out[4 + N_GEN];
    int32_t n_out;
    entmtp_status status;
} job;

static void *run(void *arg) {
    job *j = arg;
    entmtp_session_params sp = entmtp_session_default_params();
    sp.kv_capacity = 128;
    sp.n_stop_tokens = 0;
    entmtp_session *s = NULL;
    entmtp_policy *pol = NULL;
    entmtp_policy_config pc = entmtp_policy_default_config(ENTMTP_POLICY_UCB);
    j->status = entmtp_session_create(j->model, j->heads, j->bank, &sp, &s);
    if (!j->status) j->status = entmtp_policy_create(&pc, &pol);
    if (!j->status) j->status = entmtp_policy_set(s, pol);
    if (!j->status) j->status = entmtp_session_prefill(s, j->prompt, 4);
    if (!j->status) j->status = entmtp_generate(s, N_GEN, 0, NULL, NULL);
    if (!j->status) {
        const int32_t *t;
        entmtp_session_tokens(s, &t, &j->n_out);
        memcpy(j->out, t, (size_t)j->n_out * sizeof *t);
    }
    if (s) entmtp_policy_set(s, NULL);
    entmtp_policy_free(pol);
    entmtp_session_free(s);
    return NULL;
}

int main(void) {
    emt_tiny_config c = emt_tiny_default_config();
    c.vocab = 32;
    c.seed = 21;
    char gguf[512], heads[512];
    snprintf(gguf, sizeof gguf, "%s/threads_tiny.gguf", ENTMTP_TEST_TMP_DIR);
    snprintf(heads, sizeof heads, "%s/threads_hydra.safetensors", ENTMTP_TEST_TMP_DIR);
    CHECK_OK(emt_tiny_write_gguf(gguf, &c, EMT_Q8_0));
    CHECK_OK(emt_tiny_write_hydra_heads(heads, c.hidden, c.vocab, 4, 1, 0, 9));
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CPU;
    mp.n_threads = 2;
    entmtp_model *m = NULL;
    entmtp_heads *h = NULL;
    entmtp_bank *b = NULL;
    CHECK_OK(entmtp_model_load(gguf, &mp, &m));
    if (!m) return emt_test_finish("test_threads");
    CHECK_OK(entmtp_heads_load(m, heads, &h));
    CHECK_OK(entmtp_bank_create(NULL, &b));
    CHECK_OK(entmtp_bank_add_builtin(b, "chain_3", NULL));
    CHECK_OK(entmtp_bank_add_builtin(b, "mc_sim_7b_63", NULL));

    job seq[N_THREADS], par[N_THREADS];
    memset(seq, 0, sizeof seq);
    for (int i = 0; i < N_THREADS; i++) {
        seq[i].model = m;
        seq[i].heads = h;
        seq[i].bank = b;
        for (int k = 0; k < 4; k++) seq[i].prompt[k] = (i * 7 + k * 3 + 1) % c.vocab;
        par[i] = seq[i];
        run(&seq[i]);
        CHECK_OK(seq[i].status);
    }
    pthread_t th[N_THREADS];
    for (int i = 0; i < N_THREADS; i++) pthread_create(&th[i], NULL, run, &par[i]);
    for (int i = 0; i < N_THREADS; i++) pthread_join(th[i], NULL);
    for (int i = 0; i < N_THREADS; i++) {
        CHECK_OK(par[i].status);
        CHECK_EQ_INT(par[i].n_out, 4 + N_GEN);
        CHECK(par[i].n_out == seq[i].n_out && !memcmp(par[i].out, seq[i].out, sizeof seq[i].out));
    }
    /* different prompts gave different continuations (the test is not vacuous) */
    CHECK(memcmp(seq[0].out + 4, seq[1].out + 4, N_GEN * sizeof(int32_t)) != 0);
    entmtp_bank_free(b);
    entmtp_heads_free(h);
    entmtp_model_free(m);
    return emt_test_finish("test_threads");
}
