/* Temperature > 0 on the device step: sampled EntMTP (typical acceptance)
 * with the root sampled on the device (sample_root, from the uniform the
 * host draws with the session's RNG), acceptance and the commit on the
 * device, emits the same tokens, seed for seed, as
 *  - the same backend's host path (emt_session_set_device_step(s, 0): the
 *    distribution downloaded and the root sampled by the twin
 *    emt_sample_typical_u, node logits downloaded and judged by the host
 *    oracle emt_evaluate_posterior_nodes),
 *  - on CUDA, the same device step with direct launches
 *    (ENTMTP_CUDA_GRAPHS=0) and with the step graphs (recorded on a bank
 *    tree's second use, replayed after),
 *  - the CPU backend's device step and host path (whose ops are the twins);
 * for every built-in tree (T = 0.7, and T = 1 on every other tree) and
 * every other policy of the lossless tests (T = 0.7), Medusa and Hydra.
 * Every sampled CUDA step is checked from the step counters: one download
 * (the step record) and one wait; a replayed step one graph launch, no
 * kernel launch and one 16-byte host-to-device copy (L, max_tokens and the
 * next root's uniform). Runs on a GPU or on the CPU CUDA harness; SKIPPED
 * when neither is there. */
#include "backend/backend.h"
#include "engine/engine.h"
#include "check.h"
#include "cuda_test.h"
#include "test_policies.h"
#include "tiny_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define N_GEN 16
static const int32_t prompt[] = { 2, 7, 1, 8, 2, 8 };
#define N_PROMPT ((int32_t)(sizeof prompt / sizeof prompt[0]))
#define N_TOKENS (N_PROMPT + N_GEN)

static int64_t g_steps, g_accepted;
/* the counted (CUDA device step) steps: all, those with one download and
 * one wait, and by graph state */
static int64_t g_counted, g_one_copy, g_replayed, g_recorded, g_direct, g_direct_launches;

/* How a run decodes: the backend's device step with graphs, with direct
 * launches, or its host path. */
enum { RUN_GRAPHS, RUN_DIRECT, RUN_HOST, N_RUNS };
static const char *const run_names[N_RUNS] = { "device step, graphs", "device step, direct launches", "host path" };

/* Checks one CUDA device step's counters; returns 0 (after a message) when wrong. */
static int check_step_counters(const emt_exec_counters *d, int graphs, int32_t n_nodes) {
    int ok = d->d2h_copies == 1 && d->syncs == 1;
    g_counted++;
    g_one_copy += ok;
    if (!graphs) {
        ok = ok && d->graph_launches == 0 && d->graph_captures == 0;
        g_direct++;
        g_direct_launches += d->launches;
    } else if (d->graph_launches == 1 && d->graph_captures == 0) { /* replayed */
        ok = ok && d->launches == 0 && d->h2d_copies == 1 && d->h2d_bytes == 16;
        g_replayed++;
    } else if (d->graph_launches == 1 && d->graph_captures == 1) { /* recorded, then launched */
        ok = ok && d->launches == 0;
        g_recorded++;
    } else { /* a tree's first use, a dynamic tree */
        ok = ok && d->graph_launches == 0 && d->graph_fallbacks <= 1;
        g_direct++;
        g_direct_launches += d->launches;
    }
    if (!ok)
        fprintf(stderr, "sampled step (%d nodes, graphs %s): %lld downloads, %lld waits, %lld launches, %lld graph "
                "launches, %lld captures, %lld h2d copies (%lld bytes)\n", n_nodes, graphs ? "on" : "off",
                (long long)d->d2h_copies, (long long)d->syncs, (long long)d->launches, (long long)d->graph_launches,
                (long long)d->graph_captures, (long long)d->h2d_copies, (long long)d->h2d_bytes);
    return ok;
}

static void generate(entmtp_model *m, entmtp_heads *h, entmtp_bank *b, entmtp_policy *pol, float T, uint64_t seed,
                     int run, int32_t *out) {
    memset(out, 0xff, N_TOKENS * sizeof *out);
    setenv("ENTMTP_CUDA_GRAPHS", run == RUN_DIRECT ? "0" : "1", 1); /* read when the context is created */
    entmtp_session_params sp = entmtp_session_default_params();
    sp.kv_capacity = 128;
    sp.n_stop_tokens = 0;
    sp.temperature = T;
    sp.seed = seed;
    sp.reproducible = 1; /* the tree sequence must not depend on timing */
    sp.kv_type = ENTMTP_KV_F32; /* on both backends (CUDA's default is BF16): the same draws as the CPU's */
    entmtp_session *s = NULL;
    CHECK_OK(entmtp_session_create(m, h, b, &sp, &s));
    setenv("ENTMTP_CUDA_GRAPHS", "1", 1);
    if (!s) return;
    emt_session_set_device_step(s, run != RUN_HOST);
    CHECK_OK(entmtp_policy_set(s, pol));
    CHECK_OK(entmtp_session_prefill(s, prompt, N_PROMPT));
    int32_t produced = 0;
    while (produced < N_GEN) { /* step by step: each step's counters on their own */
        emt_step_counters before, after;
        emt_session_step_counters(s, &before);
        entmtp_step_result r = { .struct_size = sizeof r };
        entmtp_status st = entmtp_step(s, N_GEN - produced, &r);
        CHECK_OK(st);
        if (st) break;
        produced += r.n_tokens;
        emt_session_step_counters(s, &after);
        if (!after.counted || run == RUN_HOST) continue; /* the CPU backend counts nothing */
        emt_exec_counters d = after.device;
        d.launches -= before.device.launches;
        d.syncs -= before.device.syncs;
        d.d2h_copies -= before.device.d2h_copies;
        d.h2d_copies -= before.device.h2d_copies;
        d.h2d_bytes -= before.device.h2d_bytes;
        d.graph_launches -= before.device.graph_launches;
        d.graph_captures -= before.device.graph_captures;
        d.graph_fallbacks -= before.device.graph_fallbacks;
        if (!check_step_counters(&d, run == RUN_GRAPHS, r.n_nodes)) emt_test_failures++;
    }
    const int32_t *toks;
    int32_t n = 0;
    CHECK_OK(entmtp_session_tokens(s, &toks, &n));
    CHECK_EQ_INT(n, N_TOKENS);
    if (n == N_TOKENS) memcpy(out, toks, sizeof(int32_t) * N_TOKENS);
    entmtp_session_stats st = { sizeof st };
    CHECK_OK(entmtp_session_get_stats(s, &st));
    if (run != RUN_HOST) {
        g_steps += st.n_steps;
        g_accepted += st.n_generated - st.n_steps;
    }
    entmtp_policy_set(s, NULL);
    entmtp_session_free(s);
}

/* The CUDA model and the CPU one, the same heads file on each. */
typedef struct pair {
    entmtp_model *m[2];
    entmtp_heads *h[2];
} pair;
static const char *const backend_names[2] = { "cuda", "cpu" };

/* Every run of (policy, T, seed) on both backends equals the CUDA device
 * step with graphs; returns the number of runs compared. */
static int compare_runs(const pair *p, entmtp_bank *b, const entmtp_policy_config *pc, int32_t *counter, float T,
                        uint64_t seed, const char *label, const char *what) {
    int32_t ref[N_TOKENS], got[N_TOKENS];
    int runs = 0;
    for (int k = 0; k < 2; k++)
        for (int run = 0; run < N_RUNS; run++) {
            if (k == 1 && run == RUN_DIRECT) continue; /* the CPU has no graphs */
            entmtp_policy *pol = NULL;
            CHECK_OK(entmtp_policy_create(pc, &pol));
            if (!pol) return runs;
            *counter = 0;
            generate(p->m[k], p->h[k], b, pol, T, seed, run, k == 0 && run == RUN_GRAPHS ? ref : got);
            entmtp_policy_free(pol);
            if (k == 0 && run == RUN_GRAPHS) continue;
            runs++;
            if (!memcmp(ref, got, sizeof ref)) continue;
            int32_t i = 0;
            while (ref[i] == got[i]) i++;
            fprintf(stderr, "%s: %s, T %.1f: %s %s token %d is %d, the CUDA device step with graphs says %d\n",
                    label, what, (double)T, backend_names[k], run_names[run], i, got[i], ref[i]);
            emt_test_failures++;
        }
    return runs;
}

static void check_heads(const char *gguf, const char *heads, const char *label) {
    pair p = { { NULL, NULL }, { NULL, NULL } };
    for (int k = 0; k < 2; k++) {
        entmtp_model_params mp = entmtp_model_default_params();
        mp.backend = k == 0 ? ENTMTP_BACKEND_CUDA : ENTMTP_BACKEND_CPU;
        mp.n_threads = 1;
        CHECK_OK(entmtp_model_load(gguf, &mp, &p.m[k]));
        if (p.m[k]) CHECK_OK(entmtp_heads_load(p.m[k], heads, &p.h[k]));
    }
    entmtp_heads_info hi = { sizeof hi };
    entmtp_bank *b = NULL;
    entmtp_bank_params bp = entmtp_bank_default_params();
    if (p.h[0] && entmtp_heads_get_info(p.h[0], &hi) == ENTMTP_OK) bp.max_depth = hi.n_heads;
    CHECK_OK(entmtp_bank_create(&bp, &b));
    for (int32_t i = 0; b && entmtp_builtin_tree_name(i); i++) {
        entmtp_status st = entmtp_bank_add_builtin(b, entmtp_builtin_tree_name(i), NULL);
        if (st != ENTMTP_ERR_INVALID_TREE) CHECK_OK(st);
    }
    int32_t n_trees = b ? entmtp_bank_size(b) : 0, runs = 0, counter = 0;
    CHECK(n_trees >= 5);
    char what[96];
    for (int32_t t = 0; p.h[0] && p.h[1] && t < n_trees; t++) {
        entmtp_policy_config pc = entmtp_policy_default_config(ENTMTP_POLICY_STATIC);
        pc.static_tree = t;
        entmtp_tree_info ti = { sizeof ti };
        entmtp_bank_tree_info(b, t, &ti);
        snprintf(what, sizeof what, "tree %s", ti.name);
        runs += compare_runs(&p, b, &pc, &counter, 0.7f, 0x1234u + (uint64_t)(7 * t), label, what);
        if (t % 2) runs += compare_runs(&p, b, &pc, &counter, 1.0f, 0x1234u + (uint64_t)(7 * t + 1), label, what);
    }
    for (int i = 0; p.h[0] && p.h[1] && i < EMT_TEST_N_POLICIES; i++) {
        entmtp_policy_config pc = emt_test_policy_config(i, n_trees, &counter);
        snprintf(what, sizeof what, "policy %s", entmtp_policy_kind_name(pc.kind));
        runs += compare_runs(&p, b, &pc, &counter, 0.7f, 0x4321u + (uint64_t)i, label, what);
    }
    printf("%s: %d sampled runs equal the CUDA device step with graphs (%d trees at T 0.7, every other one at 1.0 "
           "too; %d policies at T 0.7)\n", label, runs, n_trees, EMT_TEST_N_POLICIES);
    entmtp_bank_free(b);
    for (int k = 0; k < 2; k++) {
        entmtp_heads_free(p.h[k]);
        entmtp_model_free(p.m[k]);
    }
}

int main(void) {
    if (!emt_cuda_test_have_device()) return 77;
    emt_tiny_config c;
    emt_cuda_test_files files;
    emt_cuda_test_write_files("cuda_typical", &c, &files);
    check_heads(files.gguf, files.medusa, "medusa");
    check_heads(files.gguf, files.hydra, "hydra");
    printf("sampled device steps: %lld steps, %lld draft tokens accepted (typical acceptance did accept)\n",
           (long long)g_steps, (long long)g_accepted);
    CHECK(g_accepted > g_steps / 4);
    printf("step counters: %lld of %lld sampled CUDA steps downloaded once and waited once\n", (long long)g_one_copy,
           (long long)g_counted);
    CHECK(g_counted > 100 && g_one_copy == g_counted);
    printf("graphs: %lld sampled steps replayed (1 graph launch, 0 kernel launches, one 16-byte h2d copy each), "
           "%lld recorded, %lld direct (%.1f kernel launches per step)\n",
           (long long)g_replayed, (long long)g_recorded, (long long)g_direct,
           g_direct ? (double)g_direct_launches / (double)g_direct : 0.0);
    CHECK(g_replayed > g_recorded && g_recorded > 0);
    emt_cuda_test_remove_files(&files);
    return emt_test_finish("test_cuda_typical");
}
