/* End to end on the CUDA backend: greedy tokens of EntMTP with every built-in
 * tree and every policy, with Medusa and with Hydra heads, on the tiny
 * models, equal the CPU backend's greedy AR tokens; and the CUDA backend's
 * own AR run equals them too. Each F32 run is made twice, with the step
 * graphs (one recorded graph per tree, replayed) and with direct launches
 * (ENTMTP_CUDA_GRAPHS=0), and a long prompt checks that graphs recorded at
 * one context length replay at others. With a BF16 KV cache (kv_type) the
 * same runs against the CUDA backend's own BF16 AR (the contract is per
 * backend; the CPU's BF16 AR agreement is printed), and the long-context
 * sessions on both attention kernels. Runs on a GPU or, in CI, on the CPU
 * CUDA harness (docs/cuda-harness.md); SKIPPED when neither is there. */
#include "backend/backend.h"
#include "engine/engine.h"
#include "model/model.h"
#include "check.h"
#include "cuda_test.h"
#include "test_policies.h"
#include "tiny_model.h"

#include <stdio.h>
#include <unistd.h>

#define N_GEN 16
static const int32_t prompt[] = { 3, 1, 4, 1, 5, 9, 2, 6 };
#define N_PROMPT ((int32_t)(sizeof prompt / sizeof prompt[0]))
#define N_TOKENS (N_PROMPT + N_GEN)

/* Steps whose host waits were counted, and those that waited exactly once
 * with exactly one download (the step record). */
static int64_t g_counted_steps, g_single_copy_steps;

/* The step graphs: on (g_graphs = 1) or off for the sessions created next.
 * With graphs, a step is replayed (one graph launch, no kernel launch, one
 * host-to-device copy: the step's L and max_tokens), recorded (its span
 * captured, then launched) or direct (a tree's first use, which sizes the
 * graph's constants; a dynamic tree); without, every step is direct. */
static int g_graphs;
/* kv_type of the sessions created next, set on both backends (the CUDA
 * default is BF16, the CPU's F32): F32 compares tokens with the CPU's */
static int32_t g_kv_type = ENTMTP_KV_F32;
static int64_t g_replayed, g_recorded, g_direct[2], g_direct_launches[2];

static void set_graphs(int on) {
    setenv("ENTMTP_CUDA_GRAPHS", on ? "1" : "0", 1);
    g_graphs = on;
}

static void count_graph_step(const emt_exec_counters *d, const entmtp_step_result *r, int ar) {
    int ok = 1;
    if (!g_graphs) {
        ok = d->graph_launches == 0 && d->graph_captures == 0;
        g_direct[0]++;
        g_direct_launches[0] += d->launches;
    } else if (d->graph_launches == 1 && d->graph_captures == 0) {
        ok = d->launches == 0 && d->h2d_copies == 1;
        g_replayed++;
    } else if (d->graph_launches == 1 && d->graph_captures == 1) {
        ok = d->launches == 0;
        g_recorded++;
    } else {
        ok = d->graph_launches == 0 && d->graph_fallbacks <= 1;
        g_direct[1]++;
        g_direct_launches[1] += d->launches;
    }
    if (!ok) {
        fprintf(stderr, "step (%s, %d nodes, graphs %s): %lld launches, %lld graph launches, %lld captures, "
                "%lld direct spans, %lld h2d copies\n", ar ? "AR" : "tree", r->n_nodes, g_graphs ? "on" : "off",
                (long long)d->launches, (long long)d->graph_launches, (long long)d->graph_captures,
                (long long)d->graph_fallbacks, (long long)d->h2d_copies);
        emt_test_failures++;
    }
}

/* the tokens of one greedy run (AR when pol is NULL and ar is set);
 * one_copy: every step must leave the device exactly once (one download,
 * one wait), checked from the step counters */
static void generate_counted(entmtp_model *m, entmtp_heads *h, entmtp_bank *b, entmtp_policy *pol, int ar,
                             int32_t *out, int one_copy) {
    memset(out, 0xff, N_TOKENS * sizeof *out);
    entmtp_session_params sp = entmtp_session_default_params();
    sp.kv_capacity = 128;
    sp.n_stop_tokens = 0;
    sp.kv_type = g_kv_type;
    entmtp_session *s = NULL;
    CHECK_OK(entmtp_session_create(m, h, b, &sp, &s));
    if (!s) return;
    if (pol) CHECK_OK(entmtp_policy_set(s, pol));
    CHECK_OK(entmtp_session_prefill(s, prompt, N_PROMPT));
    if (one_copy) {
        /* step by step: each step's counters on its own */
        int32_t produced = 0;
        while (produced < N_GEN) {
            emt_step_counters before, after;
            emt_session_step_counters(s, &before);
            entmtp_step_result r = { .struct_size = sizeof r };
            entmtp_status st = ar ? entmtp_step_ar(s, &r) : entmtp_step(s, N_GEN - produced, &r);
            CHECK_OK(st);
            if (st) break;
            produced += r.n_tokens;
            emt_session_step_counters(s, &after);
            if (!after.counted) continue; /* the CPU backend counts nothing */
            g_counted_steps++;
            int64_t d2h = after.device.d2h_copies - before.device.d2h_copies;
            int64_t syncs = after.device.syncs - before.device.syncs;
            emt_exec_counters d = after.device;
            d.launches -= before.device.launches;
            d.h2d_copies -= before.device.h2d_copies;
            d.graph_launches -= before.device.graph_launches;
            d.graph_captures -= before.device.graph_captures;
            d.graph_fallbacks -= before.device.graph_fallbacks;
            count_graph_step(&d, &r, ar);
            /* the session counts a replayed step apart (entmtp bench's replayed host time) exactly when it was one */
            const int64_t replayed = d.graph_launches == 1 && d.launches == 0;
            if (after.replayed_steps - before.replayed_steps != replayed ||
                after.replayed_host_seconds < before.replayed_host_seconds) {
                fprintf(stderr, "step %lld: replayed_steps grew by %lld for a step of %lld graph and %lld kernel launches\n",
                        (long long)after.n_steps, (long long)(after.replayed_steps - before.replayed_steps),
                        (long long)d.graph_launches, (long long)d.launches);
                emt_test_failures++;
            }
            if (d2h == 1 && syncs == 1) g_single_copy_steps++;
            else {
                fprintf(stderr, "step %lld (%s, %d nodes): %lld downloads, %lld waits; expected 1 and 1\n",
                        (long long)after.n_steps, ar ? "AR" : "tree", r.n_nodes, (long long)d2h, (long long)syncs);
                emt_test_failures++;
            }
        }
    } else {
        CHECK_OK(entmtp_generate(s, N_GEN, ar, NULL, NULL));
    }
    const int32_t *toks;
    int32_t n = 0;
    CHECK_OK(entmtp_session_tokens(s, &toks, &n));
    CHECK_EQ_INT(n, N_TOKENS);
    if (n == N_TOKENS) memcpy(out, toks, sizeof(int32_t) * N_TOKENS);
    entmtp_policy_set(s, NULL);
    entmtp_session_free(s);
}

static void generate(entmtp_model *m, entmtp_heads *h, entmtp_bank *b, entmtp_policy *pol, int ar, int32_t *out) {
    generate_counted(m, h, b, pol, ar, out, 0);
}

static void compare(const int32_t *ref, const int32_t *got, const char *label, const char *what) {
    if (!memcmp(ref, got, sizeof(int32_t) * N_TOKENS)) return;
    int32_t i = 0;
    while (ref[i] == got[i]) i++;
    fprintf(stderr, "%s: %s: CUDA token %d is %d, CPU AR says %d\n", label, what, i, got[i], ref[i]);
    emt_test_failures++;
}

/* One model + heads: CPU AR is the reference for every CUDA run; with
 * quantized weights (kept quantized on the device, whose products round
 * differently from the CPU's 16-bit activation blocks) CUDA AR is. */
static void check_heads(const char *gguf, const char *heads, const char *label, const char *device_dtype) {
    entmtp_model *m[2] = { NULL, NULL };
    entmtp_heads *h[2] = { NULL, NULL };
    for (int k = 0; k < 2; k++) {
        entmtp_model_params mp = entmtp_model_default_params();
        mp.backend = k ? ENTMTP_BACKEND_CUDA : ENTMTP_BACKEND_CPU;
        mp.n_threads = 1;
        CHECK_OK(entmtp_model_load(gguf, &mp, &m[k]));
        if (m[k]) CHECK_OK(entmtp_heads_load(m[k], heads, &h[k]));
    }
    entmtp_heads_info hi = { sizeof hi };
    entmtp_bank *b = NULL;
    entmtp_bank_params bp = entmtp_bank_default_params();
    if (h[0] && entmtp_heads_get_info(h[0], &hi) == ENTMTP_OK) bp.max_depth = hi.n_heads;
    CHECK_OK(entmtp_bank_create(&bp, &b));
    for (int32_t i = 0; b && entmtp_builtin_tree_name(i); i++) {
        entmtp_status st = entmtp_bank_add_builtin(b, entmtp_builtin_tree_name(i), NULL);
        if (st != ENTMTP_ERR_INVALID_TREE) CHECK_OK(st); /* deeper than these heads: skipped */
    }
    int32_t n_trees = b ? entmtp_bank_size(b) : 0;
    CHECK(n_trees >= 5);
    if (m[0] && m[1] && h[0] && h[1] && n_trees > 0) {
        int32_t ref[N_TOKENS], got[N_TOKENS];
        char what[96];
        /* quantized weights or a BF16 cache: the device's own AR is the reference */
        const int device_ref = device_dtype != NULL || g_kv_type == ENTMTP_KV_BF16;
        if (device_dtype) {
            const char *kernels = emt_model_kernels(m[1]);
            printf("%s: %s\n", label, kernels);
            CHECK(strstr(kernels, device_dtype) != NULL); /* the weights stayed quantized */
        }
        if (device_ref) {
            generate(m[1], h[1], b, NULL, 1, ref);
        } else {
            generate(m[0], h[0], b, NULL, 1, ref);
        }
        if (g_kv_type == ENTMTP_KV_BF16) { /* informative: rounding K/V may differ across backends at a tie */
            int32_t cpu_ar[N_TOKENS], same = 0;
            generate(m[0], h[0], b, NULL, 1, cpu_ar);
            while (same < N_TOKENS && cpu_ar[same] == ref[same]) same++;
            printf("%s: CPU BF16 AR equals CUDA BF16 AR for the first %d of %d tokens\n", label, same, N_TOKENS);
        }
        /* F32: with graphs, then with direct launches; typed weights, BF16 caches: graphs */
        for (int pass = 0; pass < (device_ref ? 1 : 2); pass++) {
        set_graphs(pass == 0);
        if (!device_ref) {
            generate_counted(m[1], h[1], b, NULL, 1, got, 1);
            compare(ref, got, label, g_graphs ? "AR (graphs)" : "AR (direct launches)");
        }
        for (int32_t t = 0; t < n_trees; t++) {
            entmtp_policy_config pc = entmtp_policy_default_config(ENTMTP_POLICY_STATIC);
            pc.static_tree = t;
            entmtp_policy *pol = NULL;
            CHECK_OK(entmtp_policy_create(&pc, &pol));
            generate_counted(m[1], h[1], b, pol, 0, got, 1);
            entmtp_tree_info ti = { sizeof ti };
            entmtp_bank_tree_info(b, t, &ti);
            snprintf(what, sizeof what, "tree %s (%s)", ti.name, g_graphs ? "graphs" : "direct launches");
            compare(ref, got, label, what);
            entmtp_policy_free(pol);
        }
        for (int i = 0; i < EMT_TEST_N_POLICIES; i++) {
            int32_t counter = 0;
            entmtp_policy_config pc = emt_test_policy_config(i, n_trees, &counter);
            entmtp_policy *pol = NULL;
            CHECK_OK(entmtp_policy_create(&pc, &pol));
            generate_counted(m[1], h[1], b, pol, 0, got, 1);
            snprintf(what, sizeof what, "policy %s (%s)", entmtp_policy_kind_name(pc.kind),
                     g_graphs ? "graphs" : "direct launches");
            compare(ref, got, label, what);
            entmtp_policy_free(pol);
        }
        }
        set_graphs(1);
        printf("%s: CUDA == %s AR for %d trees and %d policies\n", label, device_ref ? "CUDA" : "CPU", n_trees,
               EMT_TEST_N_POLICIES);
    }
    entmtp_bank_free(b);
    for (int k = 0; k < 2; k++) {
        entmtp_heads_free(h[k]);
        entmtp_model_free(m[k]);
    }
}

/* One session decoding several prompts: entmtp_session_reset drops its
 * graphs, and a longer prompt's prefill grows the plugin's scratch, which
 * drops them too (they read the old buffer); the trees are then recorded
 * again. Tokens equal a fresh session's with direct launches each time. */
static void check_reuse(const char *gguf, const char *heads) {
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CUDA;
    mp.n_threads = 1;
    entmtp_model *m = NULL;
    entmtp_heads *h = NULL;
    entmtp_bank *b = NULL;
    entmtp_bank_params bp = entmtp_bank_default_params();
    bp.max_depth = 5;
    CHECK_OK(entmtp_model_load(gguf, &mp, &m));
    if (m) CHECK_OK(entmtp_heads_load(m, heads, &h));
    CHECK_OK(entmtp_bank_create(&bp, &b));
    /* two trees, switched every step by the custom policy: each is recorded on its second use */
    for (int32_t i = 0; b && entmtp_builtin_tree_name(i) && entmtp_bank_size(b) < 2; i++) {
        entmtp_status st = entmtp_bank_add_builtin(b, entmtp_builtin_tree_name(i), NULL);
        if (st != ENTMTP_ERR_INVALID_TREE) CHECK_OK(st);
    }
    int32_t counter = 0;
    entmtp_policy_config pc = emt_test_policy_config(3, 2, &counter);
    CHECK(pc.kind == ENTMTP_POLICY_CUSTOM);
    int32_t long_prompt[100];
    for (int32_t i = 0; i < 100; i++) long_prompt[i] = (i * 5 + 1) % 32;
    const int32_t *prompts[3] = { prompt, prompt, long_prompt }, lens[3] = { N_PROMPT, N_PROMPT, 100 };
    entmtp_session *s[2] = { NULL, NULL };
    entmtp_policy *pol[2] = { NULL, NULL };
    entmtp_session_params sp = entmtp_session_default_params();
    sp.kv_capacity = 128;
    sp.n_stop_tokens = 0;
    for (int k = 0; m && h && b && k < 2; k++) { /* 0: graphs, reused; 1: direct launches, fresh each time */
        set_graphs(k == 0);
        CHECK_OK(entmtp_policy_create(&pc, &pol[k]));
        if (k == 0) CHECK_OK(entmtp_session_create(m, h, b, &sp, &s[0]));
        if (k == 0 && s[0]) CHECK_OK(entmtp_policy_set(s[0], pol[0]));
        if (k == 0 && s[0]) CHECK(emt_session_kv_dtype(s[0]) == EMT_BF16); /* kv_type 0: the CUDA default */
    }
    int64_t captures = 0;
    for (int p = 0; s[0] && pol[1] && p < 3; p++) {
        int32_t out[2][100 + N_GEN];
        for (int k = 0; k < 2; k++) {
            entmtp_session *x = s[0];
            if (k == 1) {
                set_graphs(0);
                counter = 0;
                entmtp_policy_reset(pol[1]);
                CHECK_OK(entmtp_session_create(m, h, b, &sp, &x));
                if (!x) return;
                CHECK_OK(entmtp_policy_set(x, pol[1]));
            } else {
                counter = 0;
                entmtp_session_reset(x); /* also resets the policy */
            }
            CHECK_OK(entmtp_session_prefill(x, prompts[p], lens[p]));
            emt_step_counters before, after;
            emt_session_step_counters(x, &before);
            CHECK_OK(entmtp_generate(x, N_GEN, 0, NULL, NULL));
            emt_session_step_counters(x, &after);
            if (k == 0) captures += after.device.graph_captures - before.device.graph_captures;
            const int32_t *all;
            int32_t n = 0;
            CHECK_OK(entmtp_session_tokens(x, &all, &n));
            CHECK_EQ_INT(n, lens[p] + N_GEN);
            memset(out[k], 0xff, sizeof out[k]);
            if (n == lens[p] + N_GEN) memcpy(out[k], all, (size_t)n * sizeof(int32_t));
            if (k == 1) {
                entmtp_policy_set(x, NULL);
                entmtp_session_free(x);
            }
        }
        if (memcmp(out[0], out[1], sizeof out[0])) {
            fprintf(stderr, "reused session, prompt %d: graph tokens differ from a fresh session's direct launches\n", p);
            emt_test_failures++;
        }
    }
    /* every prompt records both trees again (reset; then the grown scratch) */
    printf("reused session: 3 prompts, %lld graphs recorded\n", (long long)captures);
    CHECK(captures >= 6);
    set_graphs(1);
    if (s[0]) entmtp_policy_set(s[0], NULL);
    entmtp_session_free(s[0]);
    entmtp_policy_free(pol[0]);
    entmtp_policy_free(pol[1]);
    entmtp_bank_free(b);
    entmtp_heads_free(h);
    entmtp_model_free(m);
}

/* Graphs recorded at one context length replay at any other: a 250-token
 * prompt, so that the steps' keys cross attention's chunk boundary (256
 * positions) with graphs recorded before it; the largest built-in tree the
 * heads take, tokens equal to the same backend's AR with direct launches
 * (the prompt's prefill goes through cuBLAS on both). With n_heads = 1 the
 * head is 32 wide: tree attention's tensor-core kernel (head_dim 32-256),
 * which the default 8-wide heads never reach, whole sessions through it. */
#define LONG_PROMPT 250
#define LONG_GEN 24
static void check_long_context(emt_tiny_config *c, const emt_cuda_test_files *f, int32_t n_heads) {
    c->ctx = 640;
    c->n_heads = c->n_kv_heads = n_heads;
    CHECK_OK(emt_tiny_write_gguf(f->gguf, c, EMT_F32));
    int32_t toks[LONG_PROMPT];
    for (int32_t i = 0; i < LONG_PROMPT; i++) toks[i] = (i * 7 + 3) % c->vocab;
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CUDA;
    mp.n_threads = 1;
    entmtp_model *m = NULL;
    CHECK_OK(entmtp_model_load(f->gguf, &mp, &m));
    const char *heads_files[2] = { f->medusa, f->hydra };
    for (int k = 0; m && k < 2; k++) {
        entmtp_heads *h = NULL;
        CHECK_OK(entmtp_heads_load(m, heads_files[k], &h));
        entmtp_bank *b = NULL;
        entmtp_bank_params bp = entmtp_bank_default_params();
        bp.max_depth = 5;
        CHECK_OK(entmtp_bank_create(&bp, &b));
        for (int32_t i = 0; b && entmtp_builtin_tree_name(i); i++) {
            entmtp_status st = entmtp_bank_add_builtin(b, entmtp_builtin_tree_name(i), NULL);
            if (st != ENTMTP_ERR_INVALID_TREE) CHECK_OK(st);
        }
        int32_t out[2][LONG_PROMPT + LONG_GEN];
        for (int graphs = 0; h && b && graphs < 2; graphs++) {
            set_graphs(graphs);
            entmtp_session_params sp = entmtp_session_default_params();
            sp.kv_capacity = 600;
            sp.n_stop_tokens = 0;
            sp.kv_type = g_kv_type;
            entmtp_session *s = NULL;
            CHECK_OK(entmtp_session_create(m, h, b, &sp, &s));
            if (!s) break;
            entmtp_policy *pol = NULL;
            if (graphs) { /* the largest tree */
                entmtp_policy_config pc = entmtp_policy_default_config(ENTMTP_POLICY_STATIC);
                int32_t best = 0;
                entmtp_tree_info ti = { sizeof ti }, bi = { sizeof bi };
                for (int32_t t = 0; t < entmtp_bank_size(b); t++) {
                    entmtp_bank_tree_info(b, t, &ti);
                    entmtp_bank_tree_info(b, best, &bi);
                    if (ti.n_nodes > bi.n_nodes) best = t;
                }
                pc.static_tree = best;
                CHECK_OK(entmtp_policy_create(&pc, &pol));
                CHECK_OK(entmtp_policy_set(s, pol));
            }
            CHECK_OK(entmtp_session_prefill(s, toks, LONG_PROMPT));
            emt_step_counters before, after;
            emt_session_step_counters(s, &before);
            CHECK_OK(entmtp_generate(s, LONG_GEN, !graphs, NULL, NULL));
            emt_session_step_counters(s, &after);
            const int32_t *all;
            int32_t n = 0;
            CHECK_OK(entmtp_session_tokens(s, &all, &n));
            CHECK_EQ_INT(n, LONG_PROMPT + LONG_GEN);
            memset(out[graphs], 0xff, sizeof out[graphs]);
            if (n == LONG_PROMPT + LONG_GEN) memcpy(out[graphs], all, sizeof out[graphs]);
            if (graphs) { /* every step after the first two of the tree is a replay */
                int64_t steps = after.n_steps - before.n_steps;
                int64_t replays = after.device.graph_launches - before.device.graph_launches -
                                  (after.device.graph_captures - before.device.graph_captures);
                printf("long context (%s, head_dim %d, %s KV): %lld steps from position %d, %lld replayed\n",
                       k ? "hydra" : "medusa", c->hidden / n_heads, g_kv_type == ENTMTP_KV_BF16 ? "BF16" : "F32",
                       (long long)steps, LONG_PROMPT, (long long)replays);
                CHECK(steps > 2 && replays == steps - 2);
            }
            entmtp_policy_set(s, NULL);
            entmtp_policy_free(pol);
            entmtp_session_free(s);
        }
        if (memcmp(out[0], out[1], sizeof out[0])) {
            int32_t i = 0;
            while (out[0][i] == out[1][i]) i++;
            fprintf(stderr, "long context (%s, head_dim %d): token %d is %d with graphs, %d with direct AR\n",
                    k ? "hydra" : "medusa", c->hidden / n_heads, i, out[1][i], out[0][i]);
            emt_test_failures++;
        }
        set_graphs(1);
        entmtp_bank_free(b);
        entmtp_heads_free(h);
    }
    entmtp_model_free(m);
}

int main(void) {
    if (!emt_cuda_test_have_device()) return 77;
    emt_tiny_config c;
    emt_cuda_test_files files;
    emt_cuda_test_write_files("cuda_lossless", &c, &files);
    const emt_tiny_config c0 = c; /* check_long_context changes the shape */
    const char *gguf = files.gguf, *medusa = files.medusa, *hydra = files.hydra;
    check_heads(gguf, medusa, "medusa", NULL);
    check_reuse(gguf, medusa);
    check_heads(gguf, hydra, "hydra", NULL);
    /* weights kept in their stored dtype on the device */
    CHECK_OK(emt_tiny_write_gguf(gguf, &c, EMT_Q4_0));
    check_heads(gguf, medusa, "medusa, Q4_0 weights", "Q4_0");
    CHECK_OK(emt_tiny_write_gguf(gguf, &c, EMT_Q8_0));
    check_heads(gguf, hydra, "hydra, Q8_0 weights", "Q8_0");
    check_long_context(&c, &files, c.n_heads);
    check_long_context(&c, &files, 1);
    /* a BF16 KV cache: both attention kernels (head_dim 8: FP32; 32: tensor cores) */
    g_kv_type = ENTMTP_KV_BF16;
    c = c0;
    CHECK_OK(emt_tiny_write_gguf(gguf, &c, EMT_F32));
    check_heads(gguf, medusa, "medusa, BF16 KV", NULL);
    check_long_context(&c, &files, c0.n_heads);
    check_long_context(&c, &files, 1);
    g_kv_type = ENTMTP_KV_F32;
    emt_cuda_test_remove_files(&files);
    printf("step counters: %lld of %lld greedy steps (AR and trees) downloaded once and waited once\n",
           (long long)g_single_copy_steps, (long long)g_counted_steps);
    CHECK(g_counted_steps > 100 && g_single_copy_steps == g_counted_steps);
    printf("graphs: %lld steps replayed (1 graph launch, 0 kernel launches, 1 h2d copy each), %lld recorded, "
           "%lld direct (%.1f kernel launches per step: first uses, dynamic trees); without graphs %lld steps, "
           "%.1f kernel launches per step\n",
           (long long)g_replayed, (long long)g_recorded, (long long)g_direct[1],
           g_direct[1] ? (double)g_direct_launches[1] / (double)g_direct[1] : 0.0, (long long)g_direct[0],
           g_direct[0] ? (double)g_direct_launches[0] / (double)g_direct[0] : 0.0);
    CHECK(g_replayed > g_recorded && g_replayed > g_direct[1] && g_direct[0] > 100);
    return emt_test_finish("test_cuda_lossless");
}
