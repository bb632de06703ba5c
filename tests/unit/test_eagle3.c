/* EAGLE-3 drafters behind the drafter interface: a random drafter written
 * in the published layout (SafeAILab/EAGLE, SpecForge) loads, its checks
 * name the tensor or field and the shapes at fault, and greedy EntMTP with
 * it emits exactly greedy AR's tokens on every built-in tree and every
 * policy (one of which switches tree every step), with a reduced draft
 * vocabulary (d2t) and with the drafter's own embeddings, on F32 and native
 * quantized weights, across prompts that span prefill chunks. */
#include "check.h"
#include "session_run.h"
#include "engine/engine.h"
#include "test_policies.h"
#include "tiny_model.h"

#include <stdio.h>
#include <stdlib.h>

#define N_GEN 40

static int32_t g_prompt[300];
static int32_t g_n_prompt = 9;

static entmtp_status generate(entmtp_model *m, entmtp_heads *h, entmtp_bank *b, entmtp_policy *pol, int ar,
                              int32_t *out, int32_t *n_out, double *mean_accept) {
    return emt_test_generate(m, h, b, pol, ar, g_prompt, g_n_prompt, N_GEN, 400, out, n_out, mean_accept);
}

/* Returns the best mean accept length over the static trees and policies. */
static double check_lossless(const char *model_path, entmtp_compute_type compute, const char *drafter,
                             const char *label) {
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CPU;
    mp.n_threads = 2;
    mp.compute_type = compute;
    entmtp_model *m = NULL;
    entmtp_heads *h = NULL;
    CHECK_OK(entmtp_model_load(model_path, &mp, &m));
    if (!m) return 0;
    CHECK_OK(entmtp_heads_load(m, drafter, &h));
    if (!h) { entmtp_model_free(m); return 0; }
    entmtp_heads_info hi = { sizeof hi };
    CHECK_OK(entmtp_heads_get_info(h, &hi));
    CHECK_EQ_INT(hi.kind, ENTMTP_HEADS_EAGLE3);
    CHECK_EQ_INT(hi.n_layers, 1);
    entmtp_bank *bank = NULL;
    int32_t n_trees = emt_test_bank_of_builtins(hi.n_heads, &bank);
    int32_t ar[400], spec[400], n_ar = 0, n_spec = 0;
    double mean = 0, best_mean = 0;
    CHECK_OK(generate(m, h, bank, NULL, 1, ar, &n_ar, &mean));
    CHECK_NEAR(mean, 1.0, 1e-12);
    for (int32_t k = 0; k < n_trees; k++) {
        entmtp_policy_config pc = entmtp_policy_default_config(ENTMTP_POLICY_STATIC);
        pc.static_tree = k;
        entmtp_policy *pol = NULL;
        CHECK_OK(entmtp_policy_create(&pc, &pol));
        CHECK_OK(generate(m, h, bank, pol, 0, spec, &n_spec, &mean));
        entmtp_tree_info ti = { sizeof ti };
        entmtp_bank_tree_info(bank, k, &ti);
        int same = n_spec == n_ar && !memcmp(spec, ar, (size_t)n_ar * sizeof *ar);
        if (!same) fprintf(stderr, "%s: tree %s: speculative tokens differ from AR\n", label, ti.name);
        CHECK(same);
        if (mean > best_mean) best_mean = mean;
        printf("%s: tree %-24s nodes %3d depth %d mean accept %.3f\n", label, ti.name, ti.n_nodes, ti.depth, mean);
        entmtp_policy_free(pol);
    }
    /* drafts must be accepted at times, or the drafter's commit of an
     * accepted path is untested (rejections are the common case) */
    CHECK(best_mean > 1.0);
    for (int i = 0; i < EMT_TEST_N_POLICIES; i++) {
        int32_t counter = 0;
        entmtp_policy_config pc = emt_test_policy_config(i, n_trees, &counter);
        entmtp_policy *pol = NULL;
        CHECK_OK(entmtp_policy_create(&pc, &pol));
        CHECK_OK(generate(m, h, bank, pol, 0, spec, &n_spec, &mean));
        int same = n_spec == n_ar && !memcmp(spec, ar, (size_t)n_ar * sizeof *ar);
        if (!same) fprintf(stderr, "%s: policy %s: tokens differ from AR\n", label, entmtp_policy_kind_name(pc.kind));
        CHECK(same);
        printf("%s: policy %-10s mean accept %.3f\n", label, entmtp_policy_kind_name(pc.kind), mean);
        if (mean > best_mean) best_mean = mean;
        entmtp_policy_free(pol);
    }
    entmtp_bank_free(bank);
    entmtp_heads_free(h);
    entmtp_model_free(m);
    return best_mean;
}

/* The host path (acceptance and commit on the host, emt_evaluate_posterior_
 * nodes) and the device step's CPU twins give the same tokens with the
 * drafter, greedy (== AR) and at temperature > 0 seed for seed. */
static void check_host_path(const char *model_path, const char *drafter) {
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CPU;
    mp.compute_type = ENTMTP_COMPUTE_F32;
    entmtp_model *m = NULL;
    entmtp_heads *h = NULL;
    entmtp_bank *bank = NULL;
    CHECK_OK(entmtp_model_load(model_path, &mp, &m));
    if (m) CHECK_OK(entmtp_heads_load(m, drafter, &h));
    entmtp_bank_params bp = entmtp_bank_default_params();
    CHECK_OK(entmtp_bank_create(&bp, &bank));
    CHECK_OK(entmtp_bank_add_builtin(bank, "mc_sim_7b_63", NULL));
    if (!m || !h || !bank) return;
    const float temps[2] = { 0.0f, 0.8f };
    for (int ti = 0; ti < 2; ti++) {
        int32_t out[2][400], n[2] = { 0, 0 };
        for (int device = 0; device < 2; device++) {
            entmtp_session_params sp = entmtp_session_default_params();
            sp.kv_capacity = 400;
            sp.n_stop_tokens = 0;
            sp.temperature = temps[ti];
            sp.seed = 1234;
            entmtp_session *s = NULL;
            CHECK_OK(entmtp_session_create(m, h, bank, &sp, &s));
            if (!s) continue;
            emt_session_set_device_step(s, device);
            CHECK_OK(entmtp_session_prefill(s, g_prompt, g_n_prompt));
            CHECK_OK(entmtp_generate(s, N_GEN, 0, NULL, NULL));
            const int32_t *toks;
            CHECK_OK(entmtp_session_tokens(s, &toks, &n[device]));
            memcpy(out[device], toks, (size_t)n[device] * sizeof *toks);
            entmtp_session_free(s);
        }
        int same = n[0] == n[1] && !memcmp(out[0], out[1], (size_t)n[0] * sizeof(int32_t));
        if (!same) fprintf(stderr, "T=%g: the host path and the device step differ\n", (double)temps[ti]);
        CHECK(same);
        printf("host path == device step at T=%g (%d tokens)\n", (double)temps[ti], n[0]);
    }
    entmtp_bank_free(bank);
    entmtp_heads_free(h);
    entmtp_model_free(m);
}

/* A drafter file that does not fit the model: the error names the tensor
 * or field and the shapes. */
static void check_mismatches(const char *model_path, const emt_tiny_eagle3 *good) {
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CPU;
    entmtp_model *m = NULL;
    CHECK_OK(entmtp_model_load(model_path, &mp, &m));
    if (!m) return;
    char dir[512];
    entmtp_heads *h = NULL;
    struct { const char *what; emt_tiny_eagle3 e; entmtp_status want; const char *needle; } cases[] = {
        { "target hidden", *good, ENTMTP_ERR_MISMATCH, "fc.weight" },
        { "layer id", *good, ENTMTP_ERR_MISMATCH, "eagle_aux_hidden_state_layer_ids[2]" },
        { "vocab", *good, ENTMTP_ERR_MISMATCH, "vocab_size" },
        { "draft hidden without embeddings", *good, ENTMTP_ERR_FORMAT, "embed_tokens.weight" },
    };
    cases[0].e.target_hidden = good->hidden * 2;  /* fc reads 3 x 64 inputs, the model has 32 */
    cases[1].e.taps[2] = 99;
    cases[2].e.vocab = good->vocab + 5;
    cases[2].e.n_draft = good->vocab + 5;
    cases[3].e.hidden = good->hidden + 16;
    cases[3].e.target_hidden = good->hidden;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        snprintf(dir, sizeof dir, "%s/eagle3_bad_%zu", ENTMTP_TEST_TMP_DIR, i);
        CHECK_OK(emt_tiny_write_eagle3(dir, &cases[i].e));
        CHECK_ERR(entmtp_heads_load(m, dir, &h), cases[i].want, cases[i].needle);
        CHECK(h == NULL);
        printf("mismatch (%s): %s\n", cases[i].what, entmtp_last_error());
    }
    entmtp_model_free(m);
}

int main(void) {
    emt_tiny_config c = emt_tiny_default_config();
    c.vocab = 32;
    c.n_layers = 4;
    c.ffn = 64;
    c.ctx = 512;
    c.seed = 7;
    for (int32_t i = 0; i < (int32_t)(sizeof g_prompt / sizeof g_prompt[0]); i++)
        g_prompt[i] = (int32_t)((i * 13 + 5) % c.vocab);
    char gguf[512], q8[512], full[512], reduced[512], embed[512];
    snprintf(gguf, sizeof gguf, "%s/eagle3_tiny.gguf", ENTMTP_TEST_TMP_DIR);
    snprintf(q8, sizeof q8, "%s/eagle3_tiny_q8.gguf", ENTMTP_TEST_TMP_DIR);
    snprintf(full, sizeof full, "%s/eagle3_full", ENTMTP_TEST_TMP_DIR);
    snprintf(reduced, sizeof reduced, "%s/eagle3_reduced", ENTMTP_TEST_TMP_DIR);
    snprintf(embed, sizeof embed, "%s/eagle3_embed", ENTMTP_TEST_TMP_DIR);
    CHECK_OK(emt_tiny_write_gguf(gguf, &c, EMT_F32));
    CHECK_OK(emt_tiny_write_gguf(q8, &c, EMT_Q8_0));
    emt_tiny_eagle3 e = { .hidden = c.hidden, .ffn = 48, .n_heads = 4, .n_kv_heads = 2, .head_dim = 8,
                          .vocab = c.vocab, .n_draft = c.vocab, .taps = { 0, 1, 3 }, .rope_theta = 10000.0f,
                          .seed = 21 };
    CHECK_OK(emt_tiny_write_eagle3(full, &e));
    emt_tiny_eagle3 r = e;
    r.n_draft = 24;
    r.seed = 22;
    CHECK_OK(emt_tiny_write_eagle3(reduced, &r));
    emt_tiny_eagle3 o = e;
    o.own_embed = 1;
    o.taps[0] = 1;
    o.taps[1] = 2;
    o.seed = 23;
    CHECK_OK(emt_tiny_write_eagle3(embed, &o));
    double best = check_lossless(gguf, ENTMTP_COMPUTE_F32, full, "f32+eagle3");
    double b = check_lossless(gguf, ENTMTP_COMPUTE_F32, reduced, "f32+eagle3 d2t");
    best = b > best ? b : best;
    b = check_lossless(q8, ENTMTP_COMPUTE_NATIVE, embed, "q8_0+eagle3 embed");
    best = b > best ? b : best;
    g_n_prompt = 260; /* prefill in three chunks: the drafter's rows span them */
    b = check_lossless(q8, ENTMTP_COMPUTE_NATIVE, reduced, "q8_0+eagle3 long prompt");
    best = b > best ? b : best;
    /* some configuration accepts multi-token paths often */
    CHECK(best > 1.15);
    check_host_path(gguf, reduced);
    check_mismatches(gguf, &e);
    return emt_test_finish("test_eagle3");
}
