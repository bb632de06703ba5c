/* The offline tree search: growth and selection rules on hand-worked cases;
 * per-node acceptance flags against evaluate_posterior on random trees; the
 * what-if probe against real steps with the augmented trees (the claim
 * Algorithm 1 rests on); greedy probes stay lossless; both builders on a
 * tiny model. */
#include "check.h"
#include "tiny_model.h"

#include "accept/accept.h"
#include "accept/node_flags.h"
#include "bank/tree.h"
#include "engine/engine.h"
#include "search/search.h"

#include <stdio.h>

static void test_grow_rules(void) {
    emt_grow_tree t;
    emt_grow_init(&t);
    int32_t cand[EMT_GROW_MAX_NODES];
    CHECK_EQ_INT(emt_grow_candidates(&t, 3, 10, cand), 1); /* the root's first child */
    CHECK_EQ_INT(cand[0], 0);
    int32_t a = emt_grow_add(&t, 0); /* [0] */
    int32_t b = emt_grow_add(&t, 0); /* [1] */
    int32_t c = emt_grow_add(&t, a); /* [0,0] */
    CHECK(a == 1 && b == 2 && c == 3);
    CHECK_EQ_INT(t.rank[b], 1);
    CHECK_EQ_INT(t.depth[c], 2);
    CHECK_EQ_INT(emt_grow_rank_sum(&t, b), 1);
    CHECK_EQ_INT(emt_grow_rank_sum(&t, c), 0);
    /* every node is a parent of a candidate while shallower than D */
    CHECK_EQ_INT(emt_grow_candidates(&t, 3, 10, cand), 4);
    CHECK_EQ_INT(emt_grow_candidates(&t, 1, 10, cand), 1); /* only the root's [2] */
    CHECK_EQ_INT(emt_grow_candidates(&t, 2, 2, cand), 2);  /* root is full at top-k 2: [0,1] and [1,0] */
    CHECK(cand[0] == a && cand[1] == b);
    int32_t ranks[64], lens[16];
    int32_t extra[] = { 0, c };
    CHECK_EQ_INT(emt_grow_choices(&t, extra, 2, ranks, lens), 5);
    int32_t want_lens[] = { 1, 1, 2, 1, 3 };
    int32_t want_ranks[] = { 0, 1, 0, 0, 2, 0, 0, 0 };
    CHECK(!memcmp(lens, want_lens, sizeof want_lens));
    CHECK(!memcmp(ranks, want_ranks, sizeof want_ranks));
    /* Algorithm 1's order: accept sum, then smaller rank sum, then shallower */
    int64_t sums[] = { 10, 12, 12, 12 };
    int32_t rsum[] = { 0, 3, 1, 1 }, depth[] = { 1, 1, 3, 2 };
    CHECK_EQ_INT(emt_grow_pick(4, sums, rsum, depth), 3);
    int64_t sums2[] = { 5, 5 };
    int32_t r2[] = { 0, 0 }, d2[] = { 1, 1 };
    CHECK_EQ_INT(emt_grow_pick(2, sums2, r2, d2), 0);
    /* Pareto over (fewer nodes, more tokens/s) */
    int32_t nodes[] = { 1, 2, 4, 4, 8, 16 };
    double tps[] = { 10, 9, 14, 14, 13, 20 };
    uint8_t keep[6];
    emt_pareto_max(6, nodes, tps, keep);
    uint8_t want_keep[] = { 1, 0, 1, 0, 0, 1 };
    CHECK(!memcmp(keep, want_keep, sizeof keep));
}

static uint64_t rng = 99;
static float frand(void) { return (float)emt_rng_uniform(&rng); }

/* Flags vs evaluate_posterior: the deepest ok node of a subtree is the
 * subtree's accept length, for the full tree and random subtrees. */
static void test_node_flags(float temperature) {
    const int32_t *r, *l;
    int32_t np;
    CHECK_OK(emt_builtin_tree("mc_sim_7b_63", &r, &l, &np));
    emt_tree t;
    CHECK_OK(emt_tree_compile("t", r, l, np, 10, 5, 256, &t));
    const int32_t V = 12, N = t.n_nodes, W = t.depth + 1;
    float *logits = malloc((size_t)N * V * sizeof *logits), *probs = malloc(V * sizeof *probs);
    int32_t *tokens = malloc(N * sizeof *tokens), *rows = malloc((size_t)N * W * sizeof *rows);
    uint8_t *ok = malloc(N), *in = malloc(N);
    int deep = 0;
    for (int trial = 0; trial < 300; trial++) {
        for (int32_t i = 0; i < N * V; i++) logits[i] = 3.0f * frand();
        for (int32_t i = 0; i < N; i++) {
            int32_t p = t.parents[i];
            int32_t arg = 0;
            if (p >= 0)
                for (int32_t v = 1; v < V; v++) if (logits[p * V + v] > logits[p * V + arg]) arg = v;
            tokens[i] = p >= 0 && frand() < 0.7f ? arg : (int32_t)(frand() * V);
        }
        CHECK_OK(emt_accept_node_flags(N, V, logits, tokens, t.parents, temperature, 0.09f, 0.3f, probs, ok));
        /* a random prefix-closed subtree: keep each node with prob 0.6 if its parent is kept */
        in[0] = 1;
        for (int32_t i = 1; i < N; i++) in[i] = in[t.parents[i]] && (trial == 0 || frand() < 0.6f);
        int32_t n_rows = 0, want = 0;
        for (int32_t i = 0; i < N; i++) {
            if (!in[i]) continue;
            int leaf = 1;
            for (int32_t k = i + 1; k < N; k++) if (t.parents[k] == i && in[k]) leaf = 0;
            if (ok[i] && t.position_ids[i] > want) want = t.position_ids[i];
            if (!leaf) continue;
            int32_t *row = rows + (size_t)n_rows++ * W;
            for (int32_t k = 0; k < W; k++) row[k] = -1;
            for (int32_t n = i; n >= 0; n = t.parents[n]) row[t.position_ids[n]] = n;
        }
        emt_posterior_nodes pn = { N, V, logits, tokens, n_rows, W, rows, temperature, 0.09f, 0.3f };
        int32_t best = -1, acc = -1;
        CHECK_OK(emt_evaluate_posterior_nodes(&pn, &best, &acc));
        if (acc != want) {
            fprintf(stderr, "T=%g trial %d: evaluate_posterior accepts %d, flags say %d\n", (double)temperature, trial, acc, want);
            emt_test_failures++;
            break;
        }
        if (acc >= 2) deep++;
    }
    CHECK(deep > 20); /* the comparison covered multi-token acceptance */
    free(logits); free(probs); free(tokens); free(rows); free(ok); free(in);
    emt_tree_destroy(&t);
}

#define N_PROMPTS 16
static int32_t prompts_data[N_PROMPTS][9]; /* random ids, filled by main */

static entmtp_session *prefilled(entmtp_model *m, entmtp_heads *h, entmtp_bank *b, float temperature,
                                 int32_t min_nodes, int p) {
    entmtp_session_params sp = entmtp_session_default_params();
    sp.kv_capacity = 200;
    sp.n_stop_tokens = 0;
    sp.temperature = temperature;
    entmtp_session *s = NULL;
    CHECK_OK(emt_session_create_sized(m, h, b, &sp, min_nodes, min_nodes ? 4 : 0, 10, &s));
    if (s) CHECK_OK(entmtp_session_prefill(s, prompts_data[p], 9));
    return s;
}

/* A probe over T + NextChildren(T) must give, for every candidate, the
 * accept length a real step with T + {candidate} gets from the same state,
 * and commit what a real step with T commits. T is built by adding the next
 * child of each parent in `adds`. Returns how many candidates gained tokens. */
static int probe_vs_real(entmtp_model *m, entmtp_heads *h, float temperature, const int32_t *adds,
                         int32_t n_adds) {
    emt_grow_tree T;
    emt_grow_init(&T);
    for (int32_t i = 0; i < n_adds; i++) emt_grow_add(&T, adds[i]);
    int32_t cand[EMT_GROW_MAX_NODES], ranks[256], lens[64];
    int32_t n_cand = emt_grow_candidates(&T, 4, 10, cand);
    int32_t np = emt_grow_choices(&T, cand, n_cand, ranks, lens);
    emt_tree J;
    CHECK_OK(emt_tree_compile("joint", ranks, lens, np, 10, 4, 64, &J));
    /* J id of every choices entry (T's nodes, then the candidates) */
    int32_t jid[64];
    jid[0] = 0;
    for (int32_t p = 0, off = 0; p < np; off += lens[p], p++)
        for (int32_t k = 0; k < J.n_paths; k++)
            if (J.path_offsets[k + 1] - J.path_offsets[k] == lens[p] &&
                !memcmp(J.ranks + J.path_offsets[k], ranks + off, (size_t)lens[p] * sizeof(int32_t)))
                jid[p + 1] = k + 1;
    int32_t W = J.depth + 1, commit[64 * 8], n_commit = 0;
    for (int32_t i = 0; i < T.n; i++) {
        if (T.n_children[i] > 0) continue;
        int32_t *row = commit + n_commit++ * W;
        for (int32_t k = 0; k < W; k++) row[k] = -1;
        for (int32_t n = i; n >= 0; n = T.parent[n]) row[T.depth[n]] = jid[n];
    }
    int gained = 0;
    for (int p = 0; p < N_PROMPTS; p++) {
        entmtp_session *probe = prefilled(m, h, NULL, temperature, J.n_nodes, p);
        uint8_t ok[64];
        entmtp_step_result pr = { .struct_size = sizeof pr };
        if (probe) CHECK_OK(emt_session_probe_step(probe, &J, commit, n_commit, ok, &pr));
        int32_t acc_T = 0;
        for (int32_t i = 1; i < T.n; i++) if (ok[jid[i]] && T.depth[i] > acc_T) acc_T = T.depth[i];
        CHECK_EQ_INT(pr.accept_length, acc_T + 1);
        for (int32_t c = -1; c < n_cand; c++) { /* c = -1: T itself */
            int32_t tr[256], tl[64];
            int32_t tn = emt_grow_choices(&T, c < 0 ? NULL : &cand[c], c < 0 ? 0 : 1, tr, tl);
            entmtp_bank *bk = NULL;
            CHECK_OK(entmtp_bank_create(NULL, &bk));
            CHECK_OK(entmtp_bank_add_tree(bk, "t", tr, tl, tn, NULL));
            entmtp_session *real = prefilled(m, h, bk, temperature, 0, p);
            entmtp_step_result rr = { .struct_size = sizeof rr };
            if (real) CHECK_OK(entmtp_step(real, 0, &rr));
            int32_t predicted = acc_T + 1;
            if (c >= 0) {
                int32_t d = T.depth[cand[c]] + 1;
                if (ok[jid[T.n + c]] && d > acc_T) predicted = d + 1;
                gained += predicted > acc_T + 1;
            } else {
                CHECK(rr.n_tokens == pr.n_tokens && !memcmp(rr.tokens, pr.tokens, (size_t)rr.n_tokens * sizeof(int32_t)));
            }
            if (rr.accept_length != predicted) {
                fprintf(stderr, "T=%g prompt %d candidate %d: a real step accepts %d, the probe predicts %d\n",
                        (double)temperature, p, c, rr.accept_length, predicted);
                emt_test_failures++;
            }
            entmtp_session_free(real);
            entmtp_bank_free(bk);
        }
        entmtp_session_free(probe);
    }
    emt_tree_destroy(&J);
    return gained;
}

static int test_probe_matches_real_steps(entmtp_model *m, entmtp_heads *h, float temperature) {
    const int32_t chain[] = { 0 };          /* T = [[0]] */
    const int32_t bushy[] = { 0, 0, 1 };     /* T = [[0],[1],[0,0]] */
    int g1 = probe_vs_real(m, h, temperature, chain, 1);
    int g2 = probe_vs_real(m, h, temperature, bushy, 3);
    printf("probe vs real steps at T=%g: %d + %d candidates gained a token\n", (double)temperature, g1, g2);
    return g1 + g2;
}

/* Probes advance the trajectory with the base tree: greedy probes emit
 * exactly the greedy AR tokens. */
static void test_probe_lossless(entmtp_model *m, entmtp_heads *h) {
    const char *choices = "[[0],[1],[2],[0,0],[0,1],[1,0],[0,0,0],[0,0,0,0]]";
    int32_t *ranks = NULL, *lens = NULL, np = 0;
    CHECK_OK(emt_parse_choices_json(choices, &ranks, &lens, &np));
    emt_tree J;
    CHECK_OK(emt_tree_compile("joint", ranks, lens, np, 10, 4, 64, &J));
    int32_t W = J.depth + 1;
    int32_t commit[8] = { 0, 1, 4, -1, -1 }; /* base tree: the path [0],[0,0] only */
    (void)W;
    entmtp_session *ar = prefilled(m, h, NULL, 0, 0, 0), *pr = prefilled(m, h, NULL, 0, J.n_nodes, 0);
    if (ar) CHECK_OK(entmtp_generate(ar, 40, 1, NULL, NULL));
    int32_t n = 0;
    uint8_t ok[16];
    while (pr && n < 40) {
        entmtp_step_result r = { .struct_size = sizeof r };
        entmtp_status st = emt_session_probe_step(pr, &J, commit, 1, ok, &r);
        CHECK_OK(st);
        if (st) break;
        n += r.n_tokens;
    }
    const int32_t *a, *b;
    int32_t na = 0, nb = 0;
    if (ar && pr) {
        entmtp_session_tokens(ar, &a, &na);
        entmtp_session_tokens(pr, &b, &nb);
        int32_t cmp = na < nb ? na : nb;
        CHECK(cmp >= 9 + 40 && !memcmp(a, b, (size_t)cmp * sizeof *a));
    }
    entmtp_session_free(ar);
    entmtp_session_free(pr);
    emt_tree_destroy(&J);
    free(ranks);
    free(lens);
}

static int same_trees(const emt_frontier *x, const emt_frontier *y) {
    if (x->n != y->n) return 0;
    for (int32_t i = 0; i < x->n; i++) {
        const emt_frontier_tree *a = &x->trees[i], *b = &y->trees[i];
        if (a->n_paths != b->n_paths || memcmp(a->lens, b->lens, (size_t)a->n_paths * sizeof(int32_t)) ||
            a->accept != b->accept)
            return 0;
    }
    return 1;
}

static void test_builders(entmtp_model *m, entmtp_heads *h) {
    int32_t *toks[3];
    int32_t lens[3] = { 9, 9, 9 };
    for (int p = 0; p < 3; p++) toks[p] = (int32_t *)prompts_data[p];
    emt_prompts ps = { 3, toks, lens };
    emt_search_config cfg = { 7, 3, 10, 24, entmtp_session_default_params(), NULL, NULL };
    cfg.session.n_stop_tokens = 0;
    cfg.session.kv_capacity = 200;
    for (int greedy = 1; greedy >= 0; greedy--) {
        cfg.session.temperature = greedy ? 0.0f : 0.7f;
        emt_frontier f = { 0 }, g = { 0 };
        CHECK_OK(emt_search_acceptance(m, h, &ps, &cfg, &f));
        CHECK_EQ_INT(f.n, 6);
        CHECK(f.probe_steps > 0);
        for (int32_t i = 0; i < f.n; i++) {
            const emt_frontier_tree *t = &f.trees[i];
            CHECK_EQ_INT(t->n_nodes, i + 2);
            CHECK(t->depth >= 1 && t->depth <= 3);
            CHECK(t->accept >= 1.0 && t->accept <= 1.0 + t->depth);
            emt_tree c;
            CHECK_OK(emt_tree_compile("f", t->ranks, t->lens, t->n_paths, 10, 3, 64, &c));
            emt_tree_destroy(&c);
            /* trees grow: each holds the previous one's paths, in the same order */
            if (i > 0) {
                const emt_frontier_tree *p = &f.trees[i - 1];
                CHECK(!memcmp(t->lens, p->lens, (size_t)p->n_paths * sizeof(int32_t)));
            }
        }
        CHECK_OK(emt_search_acceptance(m, h, &ps, &cfg, &g));
        CHECK(same_trees(&f, &g)); /* seeded: repeatable */
        printf("greedy search at T=%g: 7-node tree accepts %.3f per step (probe estimate)\n",
               (double)cfg.session.temperature, f.n ? f.trees[f.n - 1].accept : 0.0);
        emt_frontier_free(&f);
        emt_frontier_free(&g);
    }
    emt_frontier a = { 0 };
    CHECK_OK(emt_search_accuracy(m, h, &ps, &cfg, &a));
    CHECK_EQ_INT(a.n, 6);
    CHECK(a.accuracy != NULL && a.accuracy_levels == 3 && a.accuracy_topk == 10);
    for (int32_t d = 0; a.accuracy && d < 3; d++) {
        double sum = 0;
        for (int32_t r = 0; r < 10; r++) sum += a.accuracy[d * 10 + r];
        CHECK(sum >= 0 && sum <= 1.0 + 1e-12);
    }
    for (int32_t i = 1; i < a.n; i++) CHECK(a.trees[i].accept >= a.trees[i - 1].accept);
    emt_frontier_free(&a);
    /* bad settings are errors naming the field */
    emt_frontier e = { 0 };
    emt_search_config bad = cfg;
    bad.max_depth = 9;
    CHECK_ERR(emt_search_acceptance(m, h, &ps, &bad, &e), ENTMTP_ERR_INVALID_CONFIG, "depth 9");
    bad = cfg;
    bad.budget = 1;
    CHECK_ERR(emt_search_acceptance(m, h, &ps, &bad, &e), ENTMTP_ERR_INVALID_CONFIG, "budget 1");
}

int main(void) {
    for (int p = 0; p < N_PROMPTS; p++)
        for (int i = 0; i < 9; i++) prompts_data[p][i] = (int32_t)(frand() * 32);
    test_grow_rules();
    test_node_flags(0.0f);
    test_node_flags(0.7f);

    emt_tiny_config c = emt_tiny_default_config();
    c.vocab = 32;
    c.seed = 7;
    char gguf[512], medusa[512], hydra[512];
    snprintf(gguf, sizeof gguf, "%s/search_tiny.gguf", ENTMTP_TEST_TMP_DIR);
    snprintf(medusa, sizeof medusa, "%s/search_medusa.safetensors", ENTMTP_TEST_TMP_DIR);
    snprintf(hydra, sizeof hydra, "%s/search_hydra.safetensors", ENTMTP_TEST_TMP_DIR);
    CHECK_OK(emt_tiny_write_gguf(gguf, &c, EMT_F32));
    CHECK_OK(emt_tiny_write_medusa_heads(medusa, c.hidden, c.vocab, 4, 1, 0, 11));
    CHECK_OK(emt_tiny_write_hydra_heads(hydra, c.hidden, c.vocab, 4, 1, 0, 12));
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CPU;
    mp.n_threads = 2;
    entmtp_model *m = NULL;
    CHECK_OK(entmtp_model_load(gguf, &mp, &m));
    const char *head_files[] = { medusa, hydra };
    for (int k = 0; m && k < 2; k++) {
        entmtp_heads *h = NULL;
        CHECK_OK(entmtp_heads_load(m, head_files[k], &h));
        if (!h) continue;
        printf("-- %s heads\n", k ? "Hydra" : "Medusa");
        int gained = test_probe_matches_real_steps(m, h, 0.0f) + test_probe_matches_real_steps(m, h, 0.7f);
        CHECK(gained >= 3); /* the comparison saw candidates that change the outcome */
        test_probe_lossless(m, h);
        test_builders(m, h);
        entmtp_heads_free(h);
    }
    entmtp_model_free(m);

    /* an EAGLE-3 drafter (it reads three layers: a 4-layer model): the probe
     * drafts the joint tree with the drafter's own state, and commits only
     * the base tree's path */
    c.n_layers = 4;
    char gguf4[512], eagle[512];
    snprintf(gguf4, sizeof gguf4, "%s/search_tiny4.gguf", ENTMTP_TEST_TMP_DIR);
    snprintf(eagle, sizeof eagle, "%s/search_eagle3", ENTMTP_TEST_TMP_DIR);
    CHECK_OK(emt_tiny_write_gguf(gguf4, &c, EMT_F32));
    emt_tiny_eagle3 e = { .hidden = c.hidden, .ffn = 48, .n_heads = 4, .n_kv_heads = 2, .head_dim = 8,
                          .vocab = c.vocab, .n_draft = c.vocab, .taps = { 0, 1, 3 }, .rope_theta = 10000.0f,
                          .seed = 21 };
    CHECK_OK(emt_tiny_write_eagle3(eagle, &e));
    m = NULL;
    CHECK_OK(entmtp_model_load(gguf4, &mp, &m));
    entmtp_heads *h = NULL;
    if (m) CHECK_OK(entmtp_heads_load(m, eagle, &h));
    if (h) {
        printf("-- EAGLE-3 drafter\n");
        int gained = test_probe_matches_real_steps(m, h, 0.0f) + test_probe_matches_real_steps(m, h, 0.7f);
        CHECK(gained >= 1);
        test_probe_lossless(m, h);
        test_builders(m, h);
    }
    entmtp_heads_free(h);
    entmtp_model_free(m);
    return emt_test_finish("test_search");
}
