/* The lossless invariant on the real SmolLM2-135M-Instruct with random
 * Medusa and Hydra heads (low acceptance, but greedy EntMTP must still equal
 * greedy AR token for token), for several trees and a policy that switches
 * tree every step; the Medusa runs once more with a BF16 KV cache (kv_type:
 * greedy EntMTP equals greedy AR at the same setting). Skipped when the model
 * is absent. */
#include "check.h"
#include "tiny_model.h"

#include <stdio.h>
#include <unistd.h>

#define N_GEN 20

static int32_t g_kv_type = ENTMTP_KV_DEFAULT; /* of the sessions run() creates */

static entmtp_status rotate(void *user, const entmtp_features *f, int32_t n, int32_t *out) {
    (void)f;
    *out = (*(int32_t *)user)++ % n;
    return ENTMTP_OK;
}

static void run(entmtp_model *m, entmtp_heads *h, entmtp_bank *b, entmtp_policy *p, int ar, const int32_t *prompt,
                int32_t n_prompt, int32_t *out, double *mean) {
    entmtp_session_params sp = entmtp_session_default_params();
    sp.kv_capacity = 512;
    sp.n_stop_tokens = 0;
    sp.kv_type = g_kv_type;
    entmtp_session *s = NULL;
    CHECK_OK(entmtp_session_create(m, h, b, &sp, &s));
    if (!s) return;
    if (p) CHECK_OK(entmtp_policy_set(s, p));
    CHECK_OK(entmtp_session_prefill(s, prompt, n_prompt));
    CHECK_OK(entmtp_generate(s, N_GEN, ar, NULL, NULL));
    const int32_t *t;
    int32_t n;
    entmtp_session_tokens(s, &t, &n);
    CHECK_EQ_INT(n, n_prompt + N_GEN);
    memcpy(out, t + n_prompt, N_GEN * sizeof *t);
    entmtp_session_stats st = { sizeof st };
    entmtp_session_get_stats(s, &st);
    *mean = st.mean_accept_length;
    entmtp_policy_set(s, NULL);
    entmtp_session_free(s);
}

int main(void) {
    char mbuf[1024];
    const char *path = getenv("ENTMTP_MODEL");
    if (!path || !*path) {
        snprintf(mbuf, sizeof mbuf, "%s/.cache/models/SmolLM2-135M-Instruct.Q4_1.gguf", ENTMTP_SOURCE_DIR);
        path = mbuf;
    }
    if (access(path, R_OK) != 0) TEST_SKIP("SmolLM2 model not fetched (scripts/fetch-model.sh)");
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CPU;
    entmtp_model *m = NULL;
    CHECK_OK(entmtp_model_load(path, &mp, &m));
    if (!m) return emt_test_finish("test_smollm2_lossless");
    char medusa[512], hydra[512];
    snprintf(medusa, sizeof medusa, "%s/smollm2_medusa_random.safetensors", ENTMTP_TEST_TMP_DIR);
    snprintf(hydra, sizeof hydra, "%s/smollm2_hydra_random.safetensors", ENTMTP_TEST_TMP_DIR);
    CHECK_OK(emt_tiny_write_medusa_heads(medusa, 576, 49152, 4, 1, 0, 3));
    CHECK_OK(emt_tiny_write_hydra_heads(hydra, 576, 49152, 4, 1, 0, 4));
    const char *prompt_text = "<|im_start|>user\nWrite a Python function that adds two numbers.<|im_end|>\n<|im_start|>assistant\n";
    int32_t prompt[128], n_prompt = 0;
    CHECK_OK(entmtp_tokenize(m, prompt_text, -1, 0, 1, prompt, 128, &n_prompt));
    const char *files[2] = { medusa, hydra };
    for (int pass = 0; pass < 3; pass++) { /* medusa, hydra, then medusa over a BF16 KV cache */
        const int hk = pass == 1;
        g_kv_type = pass == 2 ? ENTMTP_KV_BF16 : ENTMTP_KV_DEFAULT;
        entmtp_heads *h = NULL;
        CHECK_OK(entmtp_heads_load(m, files[hk], &h));
        if (!h) continue;
        entmtp_bank *b = NULL;
        entmtp_bank_create(NULL, &b);
        CHECK_OK(entmtp_bank_add_builtin(b, "chain_3", NULL));
        CHECK_OK(entmtp_bank_add_tree_json(b, "small", "[[0],[1],[2],[0,0],[0,1],[1,0],[0,0,0]]", NULL));
        CHECK_OK(entmtp_bank_add_builtin(b, hk ? "hydra_default" : "medusa_vicuna_7b_stage2", NULL));
        int32_t ar[N_GEN], spec[N_GEN];
        double mean;
        run(m, h, b, NULL, 1, prompt, n_prompt, ar, &mean);
        entmtp_policy_kind throughput;
        CHECK_OK(entmtp_policy_kind_from_name("throughput", &throughput));
        entmtp_policy_kind dynamic;
        CHECK_OK(entmtp_policy_kind_from_name("dynamic", &dynamic));
        for (int32_t k = 0; k < 6; k++) {
            entmtp_policy_config pc = entmtp_policy_default_config(k < 3 ? ENTMTP_POLICY_STATIC
                                                                   : k == 3 ? ENTMTP_POLICY_CUSTOM
                                                                   : k == 4 ? throughput : dynamic);
            int32_t counter = 0;
            pc.static_tree = k < 3 ? k : 0;
            pc.select = rotate;
            pc.user_data = &counter;
            entmtp_policy *p = NULL;
            CHECK_OK(entmtp_policy_create(&pc, &p));
            run(m, h, b, p, 0, prompt, n_prompt, spec, &mean);
            int same = !memcmp(ar, spec, sizeof ar);
            printf("%s heads%s, %s: mean accept length %.3f, %s\n", hk ? "hydra" : "medusa",
                   g_kv_type == ENTMTP_KV_BF16 ? " (BF16 KV)" : "",
                   k < 3 ? "static tree" : k == 3 ? "switching every step" : k == 4 ? "expected-throughput policy" : "dynamic trees", mean, same ? "identical to AR" : "DIFFERENT");
            CHECK(same);
            entmtp_policy_free(p);
        }
        entmtp_bank_free(b);
        entmtp_heads_free(h);
    }
    entmtp_model_free(m);
    return emt_test_finish("test_smollm2_lossless");
}
