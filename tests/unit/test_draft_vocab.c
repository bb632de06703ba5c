/* Heads with a draft vocabulary rank only those ids: their top-k equals the
 * full-vocabulary top-k filtered to the draft ids, greedy decoding stays
 * exactly AR, and malformed draft vocabularies are errors naming the entry. */
#include "check.h"
#include "tiny_model.h"

#include "engine/engine.h"

#include <stdio.h>

#define V 32
static const int32_t prompt[] = { 1, 5, 9, 3, 17, 2, 30, 11, 4 };
static const int32_t draft[] = { 30, 2, 17, 5, 9, 1, 11, 3, 4, 28, 0, 7, 21, 13, 25, 8, 19, 6, 12, 24 };
#define N_DRAFT ((int32_t)(sizeof draft / sizeof draft[0]))

static entmtp_session *session(entmtp_model *m, entmtp_heads *h, entmtp_bank *b, int32_t topk) {
    entmtp_session_params sp = entmtp_session_default_params();
    sp.kv_capacity = 160;
    sp.n_stop_tokens = 0;
    entmtp_session *s = NULL;
    CHECK_OK(emt_session_create_sized(m, h, b, &sp, 1, 4, topk, &s));
    if (s) CHECK_OK(entmtp_session_prefill(s, prompt, 9));
    return s;
}

static int in_draft(int32_t id) {
    for (int32_t i = 0; i < N_DRAFT; i++) if (draft[i] == id) return 1;
    return 0;
}

static void check_kind(entmtp_model *m, entmtp_heads_kind kind, const char *full_path, const char *draft_path) {
    entmtp_heads *full = NULL, *dh = NULL;
    CHECK_OK(entmtp_heads_load(m, full_path, &full));
    CHECK_OK(entmtp_heads_load(m, draft_path, &dh));
    if (!full || !dh) { entmtp_heads_free(full); entmtp_heads_free(dh); return; }
    /* top-k over the draft ids == the full ranking filtered to them */
    entmtp_session *a = session(m, full, NULL, V), *b = session(m, dh, NULL, 10);
    const int32_t path[4] = { 7, 3, 30, 2 };
    int32_t all[4 * V], top[4 * 10];
    if (a && b) {
        CHECK_OK(emt_session_head_topk(a, path, 4, all));
        CHECK_OK(emt_session_head_topk(b, path, 4, top));
        for (int d = 0; d < 4; d++) {
            int32_t k = 0;
            for (int32_t r = 0; r < V && k < 10; r++) {
                int32_t id = all[d * V + r];
                if (!in_draft(id)) continue;
                if (top[d * 10 + k] != id) {
                    fprintf(stderr, "%s head %d rank %d: draft top-k has %d, filtered full ranking %d\n",
                            kind == ENTMTP_HEADS_HYDRA ? "hydra" : "medusa", d, k, top[d * 10 + k], id);
                    emt_test_failures++;
                }
                k++;
            }
        }
    }
    entmtp_session_free(a);
    entmtp_session_free(b);
    /* greedy EntMTP with the draft vocabulary == greedy AR, for every built-in tree */
    entmtp_bank *bank = NULL;
    entmtp_bank_params bp = entmtp_bank_default_params();
    bp.max_depth = 4;
    CHECK_OK(entmtp_bank_create(&bp, &bank));
    for (int32_t i = 0; entmtp_builtin_tree_name(i); i++) {
        entmtp_status st = entmtp_bank_add_builtin(bank, entmtp_builtin_tree_name(i), NULL);
        if (st != ENTMTP_ERR_INVALID_TREE) CHECK_OK(st);
    }
    entmtp_session *ar = session(m, dh, NULL, 10);
    if (ar) CHECK_OK(entmtp_generate(ar, 40, 1, NULL, NULL));
    const int32_t *ref = NULL, *got = NULL;
    int32_t n_ref = 0, n_got = 0;
    if (ar) entmtp_session_tokens(ar, &ref, &n_ref);
    double best = 0;
    for (int32_t t = 0; t < entmtp_bank_size(bank); t++) {
        entmtp_policy_config pc = entmtp_policy_default_config(ENTMTP_POLICY_STATIC);
        pc.static_tree = t;
        entmtp_policy *pol = NULL;
        CHECK_OK(entmtp_policy_create(&pc, &pol));
        entmtp_session *s = session(m, dh, bank, 10);
        if (s && pol) {
            CHECK_OK(entmtp_policy_set(s, pol));
            CHECK_OK(entmtp_generate(s, 40, 0, NULL, NULL));
            entmtp_session_tokens(s, &got, &n_got);
            CHECK(n_got == n_ref && !memcmp(got, ref, (size_t)n_ref * sizeof *ref));
            entmtp_session_stats st = { sizeof st };
            entmtp_session_get_stats(s, &st);
            if (st.mean_accept_length > best) best = st.mean_accept_length;
            entmtp_policy_set(s, NULL);
        }
        entmtp_session_free(s);
        entmtp_policy_free(pol);
    }
    CHECK(best > 1.05); /* drafts were accepted, so the comparison covered multi-token steps */
    entmtp_session_free(ar);
    /* a tree whose ranks exceed the draft vocabulary cannot be used */
    entmtp_bank_free(bank);
    entmtp_heads_free(full);
    entmtp_heads_free(dh);
}

int main(void) {
    emt_tiny_config c = emt_tiny_default_config();
    c.vocab = V;
    c.seed = 7;
    char model[512], paths[4][512], bad[512];
    snprintf(model, sizeof model, "%s/draft_tiny.gguf", ENTMTP_TEST_TMP_DIR);
    CHECK_OK(emt_tiny_write_gguf(model, &c, EMT_F32));
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CPU;
    entmtp_model *m = NULL;
    CHECK_OK(entmtp_model_load(model, &mp, &m));
    if (!m) return emt_test_finish("test_draft_vocab");
    const entmtp_heads_kind kinds[] = { ENTMTP_HEADS_MEDUSA, ENTMTP_HEADS_HYDRA };
    for (int k = 0; k < 2; k++) {
        snprintf(paths[2 * k], sizeof paths[0], "%s/draft_full_%d.safetensors", ENTMTP_TEST_TMP_DIR, k);
        snprintf(paths[2 * k + 1], sizeof paths[0], "%s/draft_draft_%d.safetensors", ENTMTP_TEST_TMP_DIR, k);
        CHECK_OK(emt_tiny_write_heads_draft(paths[2 * k], kinds[k], c.hidden, V, 4, 1, k, 11, NULL, 0));
        CHECK_OK(emt_tiny_write_heads_draft(paths[2 * k + 1], kinds[k], c.hidden, V, 4, 1, k, 11, draft, N_DRAFT));
        check_kind(m, kinds[k], paths[2 * k], paths[2 * k + 1]);
    }
    /* malformed draft vocabularies */
    snprintf(bad, sizeof bad, "%s/draft_bad.safetensors", ENTMTP_TEST_TMP_DIR);
    entmtp_heads *h = NULL;
    const int32_t dup[] = { 3, 4, 3 }, out_of_range[] = { 3, 32 };
    CHECK_OK(emt_tiny_write_heads_draft(bad, ENTMTP_HEADS_MEDUSA, c.hidden, V, 2, 1, 0, 3, dup, 3));
    CHECK_ERR(entmtp_heads_load(m, bad, &h), ENTMTP_ERR_FORMAT, "draft_vocab[2] = 3 is a duplicate");
    CHECK_OK(emt_tiny_write_heads_draft(bad, ENTMTP_HEADS_MEDUSA, c.hidden, V, 2, 1, 0, 3, out_of_range, 2));
    CHECK_ERR(entmtp_heads_load(m, bad, &h), ENTMTP_ERR_FORMAT, "draft_vocab[1] = 32 is outside the vocabulary");
    /* a bank whose trees rank deeper than the draft vocabulary holds */
    const int32_t small[] = { 1, 2, 3, 4, 5 };
    CHECK_OK(emt_tiny_write_heads_draft(bad, ENTMTP_HEADS_MEDUSA, c.hidden, V, 4, 1, 0, 3, small, 5));
    CHECK_OK(entmtp_heads_load(m, bad, &h));
    entmtp_bank *b = NULL;
    CHECK_OK(entmtp_bank_create(NULL, &b));
    CHECK_OK(entmtp_bank_add_builtin(b, "mc_sim_7b_63", NULL));
    entmtp_session *s = NULL;
    if (h) CHECK_ERR(entmtp_session_create(m, h, b, NULL, &s), ENTMTP_ERR_MISMATCH, "draft vocabulary (5 ids)");
    entmtp_bank_free(b);
    entmtp_heads_free(h);
    entmtp_model_free(m);
    return emt_test_finish("test_draft_vocab");
}
