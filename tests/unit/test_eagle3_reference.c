/* EAGLE-3 drafters written by tests/python/make_eagle3_drafter.py (the
 * published tensor names, for a given model): a good file loads; each kind
 * of mismatch is an error naming the tensor or field; and the drafter's
 * chain (top-k ids and probabilities per level, over prompts that span
 * prefill chunks and several steps) matches a numpy EAGLE-3 forward
 * (tests/python/eagle3_reference.py). Skipped without python3 + numpy. */
#define ENTMTP_EXPERIMENTAL_API
#include "check.h"
#include "engine/engine.h"
#include "tiny_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>

static int run(const char *cmd) {
    int rc = system(cmd);
    return rc == -1 ? -1 : WEXITSTATUS(rc);
}

static const struct { const char *kind, *needle; } g_mismatch[] = {
    { "fc", "fc.weight" }, { "q_proj", "midlayer.self_attn.q_proj.weight" }, { "lm_head", "lm_head.weight" },
    { "norm", "midlayer.hidden_norm.weight" }, { "layer", "eagle_aux_hidden_state_layer_ids" },
    { "vocab", "vocab_size" }, { "d2t_range", "d2t[" }, { "t2d", "t2d" },
    { "missing", "midlayer.mlp.down_proj.weight" },
};

int main(void) {
    if (run("python3 -c 'import numpy' 2>/dev/null") != 0) {
        printf("SKIP: python3 with numpy is needed\n");
        return 77;
    }
    emt_tiny_config c = emt_tiny_default_config();
    c.vocab = 48;
    c.n_layers = 5;
    c.ctx = 512;
    c.seed = 3;
    char model[512], drafter[512], dump[512], cmd[4096];
    snprintf(model, sizeof model, "%s/eagle3_ref_model", ENTMTP_TEST_TMP_DIR);
    snprintf(drafter, sizeof drafter, "%s/eagle3_ref_drafter", ENTMTP_TEST_TMP_DIR);
    snprintf(dump, sizeof dump, "%s/eagle3_ref_dump.json", ENTMTP_TEST_TMP_DIR);
    CHECK_OK(emt_tiny_write_hf(model, &c, EMT_F32, 1));
    const char *script = ENTMTP_SOURCE_DIR "/tests/python/make_eagle3_drafter.py";
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CPU;
    mp.compute_type = ENTMTP_COMPUTE_F32;
    entmtp_model *m = NULL;
    CHECK_OK(entmtp_model_load(model, &mp, &m));
    if (!m) return emt_test_finish("test_eagle3_reference");

    /* every kind of mismatch is refused, naming what is wrong */
    for (size_t i = 0; i < sizeof g_mismatch / sizeof g_mismatch[0]; i++) {
        char bad[600];
        snprintf(bad, sizeof bad, "%s_bad_%s", drafter, g_mismatch[i].kind);
        snprintf(cmd, sizeof cmd, "python3 %s %s %s --draft-vocab 40 --seed 9 --mismatch %s", script, model, bad,
                 g_mismatch[i].kind);
        CHECK_EQ_INT(run(cmd), 0);
        entmtp_heads *h = NULL;
        entmtp_status st = entmtp_heads_load(m, bad, &h);
        CHECK(st != ENTMTP_OK && h == NULL);
        if (!strstr(entmtp_last_error(), g_mismatch[i].needle)) {
            fprintf(stderr, "mismatch %s: message \"%s\" lacks \"%s\"\n", g_mismatch[i].kind, entmtp_last_error(),
                    g_mismatch[i].needle);
            CHECK(0);
        }
        printf("%-9s -> %s: %s\n", g_mismatch[i].kind, entmtp_status_string(st), entmtp_last_error());
    }

    /* the good file: its chain against numpy, at several steps */
    snprintf(cmd, sizeof cmd, "python3 %s %s %s --draft-vocab 40 --seed 5", script, model, drafter);
    CHECK_EQ_INT(run(cmd), 0);
    entmtp_heads *h = NULL;
    /* the safetensors file itself loads too: with config.json beside it,
     * and alone (the attention shape is then the target's, as the script
     * wrote it, and the layers SafeAILab's default, the last three here) */
    char file[600], lone[600];
    snprintf(file, sizeof file, "%s/model.safetensors", drafter);
    snprintf(lone, sizeof lone, "%s_lone", drafter);
    CHECK_OK(entmtp_heads_load(m, file, &h));
    entmtp_heads_free(h);
    h = NULL;
    snprintf(cmd, sizeof cmd, "mkdir -p %s && cp %s %s/drafter.safetensors", lone, file, lone);
    CHECK_EQ_INT(run(cmd), 0);
    snprintf(lone + strlen(lone), sizeof lone - strlen(lone), "/drafter.safetensors");
    entmtp_status lone_st = entmtp_heads_load(m, lone, &h);
    /* a 5-layer target has no SafeAILab default (outputs of 1, 1, 1): the error says so */
    CHECK(lone_st == ENTMTP_ERR_MISMATCH && strstr(entmtp_last_error(), "default layers"));
    printf("lone file on a 5-layer target: %s\n", entmtp_last_error());
    entmtp_heads_free(h);
    h = NULL;
    CHECK_OK(entmtp_heads_load(m, drafter, &h));
    entmtp_bank *bank = NULL;
    entmtp_bank_params bp = entmtp_bank_default_params();
    CHECK_OK(entmtp_bank_create(&bp, &bank));
    CHECK_OK(entmtp_bank_add_builtin(bank, "chain_4", NULL));      /* tree 0: four chain levels a step */
    CHECK_OK(entmtp_bank_add_builtin(bank, "mc_sim_7b_63", NULL)); /* sizes top-k to 10 */
    entmtp_session *s = NULL;
    entmtp_session_params sp = entmtp_session_default_params();
    sp.n_stop_tokens = 0;
    CHECK_OK(entmtp_session_create(m, h, bank, &sp, &s));
    if (!s) return emt_test_finish("test_eagle3_reference");
    int32_t prompt[140];
    for (int32_t i = 0; i < 140; i++) prompt[i] = (i * 11 + 2) % c.vocab;
    CHECK_OK(entmtp_session_prefill(s, prompt, 140)); /* two prefill chunks */
    FILE *f = fopen(dump, "w");
    CHECK(f != NULL);
    if (!f) return emt_test_finish("test_eagle3_reference");
    fprintf(f, "{\"steps\":[");
    for (int step = 0; step < 6; step++) {
        const int32_t *toks;
        int32_t n;
        CHECK_OK(entmtp_session_tokens(s, &toks, &n));
        fprintf(f, "%s{\"context\":[", step ? "," : "");
        for (int32_t i = 0; i < n; i++) fprintf(f, "%s%d", i ? "," : "", toks[i]);
        entmtp_step_result r = { sizeof r };
        CHECK_OK(entmtp_step(s, 0, &r));
        const int32_t *ids;
        const float *probs;
        int32_t k;
        emt_session_last_head_topk(s, &ids, &probs, &k);
        fprintf(f, "],\"root\":%d,\"ids\":[", r.tokens[0]);
        for (int d = 0; d < 4; d++) {
            fprintf(f, "%s[", d ? "," : "");
            for (int32_t j = 0; j < k; j++) fprintf(f, "%s%d", j ? "," : "", ids[d * k + j]);
            fprintf(f, "]");
        }
        fprintf(f, "],\"probs\":[");
        for (int d = 0; d < 4; d++) {
            fprintf(f, "%s[", d ? "," : "");
            for (int32_t j = 0; j < k; j++) fprintf(f, "%s%.9g", j ? "," : "", (double)probs[d * k + j]);
            fprintf(f, "]");
        }
        fprintf(f, "]}");
    }
    fprintf(f, "]}\n");
    fclose(f);
    snprintf(cmd, sizeof cmd, "python3 %s/tests/python/eagle3_reference.py %s %s %s", ENTMTP_SOURCE_DIR, model,
             drafter, dump);
    CHECK_EQ_INT(run(cmd), 0);
    entmtp_session_free(s);
    entmtp_bank_free(bank);
    entmtp_heads_free(h);
    entmtp_model_free(m);
    return emt_test_finish("test_eagle3_reference");
}
