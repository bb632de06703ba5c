/* The lossless invariant: greedy EntMTP emits exactly the tokens of greedy
 * AR decoding, for every built-in tree and every policy (one of which
 * switches tree every step), with Medusa and with Hydra heads, on tiny random
 * models written as GGUF and as safetensors. Also: GGUF (permuted Q/K) and
 * safetensors copies of one model give the same logits. */
#define ENTMTP_EXPERIMENTAL_API /* entmtp_session_features, entmtp_session_logits */
#include "engine/engine.h"
#include "check.h"
#include "session_run.h"
#include "test_policies.h"
#include "tiny_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N_GEN 48

static const int32_t prompt[] = { 1, 5, 9, 3, 17, 2, 30, 11, 4 };
#define N_PROMPT ((int32_t)(sizeof prompt / sizeof prompt[0]))

static void generate(entmtp_model *m, entmtp_heads *h, entmtp_bank *b, entmtp_policy *pol, int ar,
                     int32_t *out, int32_t *n_out, double *mean_accept) {
    CHECK_OK(emt_test_generate(m, h, b, pol, ar, prompt, N_PROMPT, N_GEN, 200, out, n_out, mean_accept));
}

/* The EntMTP paper's path value s = max(p0, g_1..g_D), g_d = p0 * p_1 * ..
 * * p_d, equals p0 at every step (every p_d <= 1): the paper's threshold
 * policies see the base model's confidence only (docs/policies.md). */
static void check_path_value(entmtp_model *m, entmtp_heads *h, entmtp_bank *b) {
    entmtp_session *s = NULL;
    CHECK_OK(entmtp_session_create(m, h, b, NULL, &s));
    if (!s) return;
    CHECK_OK(entmtp_session_prefill(s, prompt, N_PROMPT));
    int32_t steps = 0, s_above_p0 = 0;
    for (; steps < 24; steps++) {
        entmtp_step_result r = { sizeof r };
        if (entmtp_step(s, 0, &r) != ENTMTP_OK) break;
        s_above_p0 += r.s != r.p0;
    }
    CHECK_EQ_INT(steps, 24);
    CHECK_EQ_INT(s_above_p0, 0);
    entmtp_session_free(s);
}

static void check_model(const char *model_path, const char *heads_path, const char *label) {
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CPU;
    mp.n_threads = 2;
    entmtp_model *m = NULL;
    entmtp_heads *h = NULL;
    CHECK_OK(entmtp_model_load(model_path, &mp, &m));
    if (!m) return;
    CHECK_OK(entmtp_heads_load(m, heads_path, &h));
    if (!h) { entmtp_model_free(m); return; }
    entmtp_heads_info hi = { sizeof hi };
    CHECK_OK(entmtp_heads_get_info(h, &hi));

    entmtp_bank *bank = NULL;
    int32_t n_trees = emt_test_bank_of_builtins(hi.n_heads, &bank);

    int32_t ar[N_PROMPT + N_GEN], spec[N_PROMPT + N_GEN], n_ar = 0, n_spec = 0;
    double mean_ar = 0, mean = 0, best_mean = 0;
    generate(m, h, bank, NULL, 1, ar, &n_ar, &mean_ar);
    CHECK_NEAR(mean_ar, 1.0, 1e-12);

    for (int32_t k = 0; k < n_trees; k++) {
        entmtp_policy_config pc = entmtp_policy_default_config(ENTMTP_POLICY_STATIC);
        pc.static_tree = k;
        entmtp_policy *pol = NULL;
        CHECK_OK(entmtp_policy_create(&pc, &pol));
        generate(m, h, bank, pol, 0, spec, &n_spec, &mean);
        entmtp_tree_info ti = { sizeof ti };
        entmtp_bank_tree_info(bank, k, &ti);
        int same = n_spec == n_ar && !memcmp(spec, ar, (size_t)n_ar * sizeof *ar);
        if (!same) fprintf(stderr, "%s: tree %s: speculative tokens differ from AR\n", label, ti.name);
        CHECK(same);
        if (mean > best_mean) best_mean = mean;
        printf("%s: tree %-24s nodes %3d mean accept %.3f\n", label, ti.name, ti.n_nodes, mean);
        entmtp_policy_free(pol);
    }
    /* multi-token acceptance must actually happen, or KV commit is untested */
    CHECK(best_mean > 1.05);
    check_path_value(m, h, bank);

    for (int i = 0; i < EMT_TEST_N_POLICIES; i++) {
        int32_t counter = 0;
        entmtp_policy_config pc = emt_test_policy_config(i, n_trees, &counter);
        entmtp_policy *pol = NULL;
        CHECK_OK(entmtp_policy_create(&pc, &pol));
        generate(m, h, bank, pol, 0, spec, &n_spec, &mean);
        int same = n_spec == n_ar && !memcmp(spec, ar, (size_t)n_ar * sizeof *ar);
        if (!same) fprintf(stderr, "%s: policy %s: tokens differ from AR\n", label, entmtp_policy_kind_name(pc.kind));
        CHECK(same);
        printf("%s: policy %-10s mean accept %.3f\n", label, entmtp_policy_kind_name(pc.kind), mean);
        if (pc.kind == ENTMTP_POLICY_CUSTOM) CHECK(counter >= N_GEN / 8);
        entmtp_policy_free(pol);
    }
    entmtp_bank_free(bank);
    entmtp_heads_free(h);
    entmtp_model_free(m);
}

/* The 8-bit prompt mode changes the prefill (its logits differ from the
 * 16-bit prefill's) and nothing else: greedy EntMTP still equals greedy AR
 * of sessions with the same setting, for every tree and policy. */
static void check_prompt_bits(const char *model_path, const char *heads_path, const char *label) {
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CPU;
    entmtp_model *m = NULL;
    CHECK_OK(entmtp_model_load(model_path, &mp, &m));
    if (!m) return;
    const float *l[2];
    int32_t v[2];
    entmtp_session *s[2] = { NULL, NULL };
    for (int i = 0; i < 2; i++) {
        entmtp_session_params sp = entmtp_session_default_params();
        sp.prompt_activation_bits = i ? 8 : 16;
        CHECK_OK(entmtp_session_create(m, NULL, NULL, &sp, &s[i]));
        CHECK_OK(entmtp_session_prefill(s[i], prompt, N_PROMPT));
        CHECK_OK(entmtp_session_logits(s[i], &l[i], &v[i]));
    }
    CHECK(v[0] == v[1] && memcmp(l[0], l[1], sizeof(float) * (size_t)v[0]) != 0);
    entmtp_session_params bad = entmtp_session_default_params();
    bad.prompt_activation_bits = 4;
    entmtp_session *none = NULL;
    CHECK(entmtp_session_create(m, NULL, NULL, &bad, &none) == ENTMTP_ERR_INVALID_CONFIG && !none);
    for (int i = 0; i < 2; i++) entmtp_session_free(s[i]);
    entmtp_model_free(m);
    emt_test_prompt_bits = 8;
    check_model(model_path, heads_path, label);
    emt_test_prompt_bits = 16;
}

/* 8-bit steps (step_activation_bits) leave the prefill as it was and change
 * every step's logits; greedy EntMTP equals greedy AR of sessions with the
 * same setting, for every tree and policy, with 8-bit prompts as well (the
 * whole session at llama.cpp's precision). */
static void check_step_bits(const char *model_path, const char *heads_path, const char *label) {
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CPU;
    entmtp_model *m = NULL;
    CHECK_OK(entmtp_model_load(model_path, &mp, &m));
    if (!m) return;
    const float *l[2][2];
    int32_t v[2][2];
    entmtp_session *s[2] = { NULL, NULL };
    for (int i = 0; i < 2; i++) {
        entmtp_session_params sp = entmtp_session_default_params();
        sp.step_activation_bits = i ? 8 : 16;
        CHECK_OK(entmtp_session_create(m, NULL, NULL, &sp, &s[i]));
        CHECK_OK(entmtp_session_prefill(s[i], prompt, N_PROMPT));
        CHECK_OK(entmtp_session_logits(s[i], &l[i][0], &v[i][0]));
        float *copy = malloc(sizeof(float) * (size_t)v[i][0]);
        if (copy) memcpy(copy, l[i][0], sizeof(float) * (size_t)v[i][0]);
        l[i][0] = copy;
        CHECK_OK(entmtp_generate(s[i], 1, 1, NULL, NULL));
        CHECK_OK(entmtp_session_logits(s[i], &l[i][1], &v[i][1]));
    }
    /* the prefill at 16 bits in both; the step after it at 16 and 8 bits */
    CHECK(l[0][0] && l[1][0] && !memcmp(l[0][0], l[1][0], sizeof(float) * (size_t)v[0][0]));
    CHECK(v[0][1] == v[1][1] && memcmp(l[0][1], l[1][1], sizeof(float) * (size_t)v[0][1]) != 0);
    free((void *)l[0][0]);
    free((void *)l[1][0]);
    entmtp_session_params bad = entmtp_session_default_params();
    bad.step_activation_bits = 12;
    entmtp_session *none = NULL;
    CHECK(entmtp_session_create(m, NULL, NULL, &bad, &none) == ENTMTP_ERR_INVALID_CONFIG && !none);
    for (int i = 0; i < 2; i++) entmtp_session_free(s[i]);
    entmtp_model_free(m);
    emt_test_step_bits = 8;
    check_model(model_path, heads_path, label);
    emt_test_prompt_bits = 8;
    check_model(model_path, heads_path, label);
    emt_test_prompt_bits = 16;
    emt_test_step_bits = 16;
}

/* A BF16 KV cache (kv_type): the prompt's logits move (attention reads K/V
 * rounded to BF16) but stay close to the F32 cache's; greedy EntMTP equals
 * greedy AR of sessions with the same setting, for every tree and policy;
 * a kv_type outside the enum is refused naming the field and the value. */
static void check_kv_bf16(const char *model_path, const char *heads_path, const char *label) {
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CPU;
    entmtp_model *m = NULL;
    CHECK_OK(entmtp_model_load(model_path, &mp, &m));
    if (!m) return;
    float *l[2] = { NULL, NULL };
    int32_t v[2] = { 0, 0 };
    for (int i = 0; i < 2; i++) {
        entmtp_session_params sp = entmtp_session_default_params();
        sp.kv_type = i ? ENTMTP_KV_BF16 : ENTMTP_KV_F32;
        entmtp_session *s = NULL;
        CHECK_OK(entmtp_session_create(m, NULL, NULL, &sp, &s));
        if (!s) continue;
        const float *lp = NULL;
        CHECK_OK(entmtp_session_prefill(s, prompt, N_PROMPT));
        CHECK_OK(entmtp_session_logits(s, &lp, &v[i]));
        l[i] = malloc(sizeof(float) * (size_t)v[i]);
        if (l[i] && lp) memcpy(l[i], lp, sizeof(float) * (size_t)v[i]);
        entmtp_session_free(s);
    }
    CHECK(l[0] && l[1] && v[0] == v[1]);
    if (l[0] && l[1] && v[0] == v[1]) {
        double worst = 0;
        for (int32_t t = 0; t < v[0]; t++) {
            double d = fabs((double)l[0][t] - l[1][t]);
            worst = d > worst ? d : worst;
        }
        CHECK(worst > 0);    /* the rounding reached the logits */
        CHECK(worst < 0.05); /* BF16 keys and values: about 3 decimal digits each */
    }
    free(l[0]);
    free(l[1]);
    entmtp_session *dflt = NULL; /* kv_type 0 on the CPU: F32, the bit-exact reference */
    CHECK_OK(entmtp_session_create(m, NULL, NULL, NULL, &dflt));
    if (dflt) CHECK(emt_session_kv_dtype(dflt) == EMT_F32);
    entmtp_session_free(dflt);
    entmtp_session_params bad = entmtp_session_default_params();
    bad.kv_type = 3;
    entmtp_session *none = NULL;
    CHECK(entmtp_session_create(m, NULL, NULL, &bad, &none) == ENTMTP_ERR_INVALID_CONFIG && !none);
    CHECK(strstr(entmtp_last_error(), "kv_type = 3") != NULL);
    entmtp_model_free(m);
    emt_test_kv_type = ENTMTP_KV_BF16;
    check_model(model_path, heads_path, label);
    emt_test_kv_type = ENTMTP_KV_DEFAULT;
}

static void check_formats_agree(const char *gguf_path, const char *hf_dir) {
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CPU;
    entmtp_model *a = NULL, *b = NULL;
    CHECK_OK(entmtp_model_load(gguf_path, &mp, &a));
    CHECK_OK(entmtp_model_load(hf_dir, &mp, &b));
    if (!a || !b) { entmtp_model_free(a); entmtp_model_free(b); return; }
    entmtp_session *sa = NULL, *sb = NULL;
    CHECK_OK(entmtp_session_create(a, NULL, NULL, NULL, &sa));
    CHECK_OK(entmtp_session_create(b, NULL, NULL, NULL, &sb));
    CHECK_OK(entmtp_session_prefill(sa, prompt, N_PROMPT));
    CHECK_OK(entmtp_session_prefill(sb, prompt, N_PROMPT));
    const float *la, *lb;
    int32_t va = 0, vb = 0;
    CHECK_OK(entmtp_session_logits(sa, &la, &va));
    CHECK_OK(entmtp_session_logits(sb, &lb, &vb));
    CHECK_EQ_INT(va, vb);
    double worst = 0;
    for (int32_t i = 0; i < va && va == vb; i++) {
        double d = fabs((double)la[i] - (double)lb[i]);
        if (d > worst) worst = d;
    }
    printf("GGUF vs safetensors: max |logit difference| = %.3g\n", worst);
    CHECK(worst < 1e-4);
    entmtp_session_free(sa);
    entmtp_session_free(sb);
    entmtp_model_free(a);
    entmtp_model_free(b);
}

int main(void) {
    emt_tiny_config c = emt_tiny_default_config();
    c.vocab = 32;
    c.seed = 7;
    char gguf[512], hf[512], medusa[512], hydra[512];
    snprintf(gguf, sizeof gguf, "%s/lossless_tiny.gguf", ENTMTP_TEST_TMP_DIR);
    snprintf(hf, sizeof hf, "%s/lossless_tiny_hf", ENTMTP_TEST_TMP_DIR);
    snprintf(medusa, sizeof medusa, "%s/lossless_medusa.safetensors", ENTMTP_TEST_TMP_DIR);
    snprintf(hydra, sizeof hydra, "%s/lossless_hydra.safetensors", ENTMTP_TEST_TMP_DIR);
    CHECK_OK(emt_tiny_write_gguf(gguf, &c, EMT_F32));
    CHECK_OK(emt_tiny_write_hf(hf, &c, EMT_F32, 2));
    CHECK_OK(emt_tiny_write_medusa_heads(medusa, c.hidden, c.vocab, 5, 1, 0, 11));
    CHECK_OK(emt_tiny_write_hydra_heads(hydra, c.hidden, c.vocab, 5, 2, 0, 12));
    check_formats_agree(gguf, hf);
    check_model(gguf, medusa, "gguf+medusa");
    check_model(hf, hydra, "hf+hydra");
    check_kv_bf16(gguf, medusa, "gguf+medusa kv bf16");
    check_kv_bf16(hf, hydra, "hf+hydra kv bf16");

    /* native mode: weights kept in their stored type, run by the quantized
     * and half-precision kernels (ffn 64 so every matrix row is whole blocks) */
    const emt_dtype native[] = { EMT_Q4_0, EMT_Q4_1, EMT_Q8_0, EMT_F16, EMT_BF16 };
    c.ffn = 64;
    for (size_t i = 0; i < sizeof native / sizeof native[0]; i++) {
        char path[512], label[64];
        snprintf(path, sizeof path, "%s/lossless_tiny_%s.gguf", ENTMTP_TEST_TMP_DIR, emt_dtype_name(native[i]));
        snprintf(label, sizeof label, "gguf %s+%s", emt_dtype_name(native[i]), i % 2 ? "hydra" : "medusa");
        CHECK_OK(emt_tiny_write_gguf(path, &c, native[i]));
        check_model(path, i % 2 ? hydra : medusa, label);
        if (i < 3) { /* the types with 8-bit prompt kernels */
            snprintf(label, sizeof label, "gguf %s+%s prompt 8-bit", emt_dtype_name(native[i]), i % 2 ? "hydra" : "medusa");
            check_prompt_bits(path, i % 2 ? hydra : medusa, label);
            snprintf(label, sizeof label, "gguf %s+%s steps 8-bit", emt_dtype_name(native[i]), i % 2 ? "hydra" : "medusa");
            check_step_bits(path, i % 2 ? hydra : medusa, label);
        }
    }
    return emt_test_finish("test_engine_lossless");
}
