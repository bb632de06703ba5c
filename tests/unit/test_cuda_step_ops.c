/* The device step ops (backend.h: topk_device, embed_device, accept,
 * commit) on the CUDA backend against their CPU twins
 * (src/backend/cpu/cpu_step_ops.c), whose acceptance is the host oracle
 * emt_evaluate_posterior_nodes itself:
 * - topk_device: ids equal to the CPU topk op's (ties to the lower id, on
 *   rows full of ties too), draft-vocabulary id maps, k from 1 to 40 (the
 *   one-pass kernel up to 32, the rescan beyond), probabilities and entropy
 *   within 1e-5;
 * - accept: greedy and typical (T = 0.5, 0.7, 1, 1.3) over every built-in
 *   tree's candidate paths, on random logits and on logits recorded from a
 *   tiny model's real forward passes: the same record (best row, accepted
 *   count, path, tokens) as the oracle; the cuts (max_tokens, KV room, stop
 *   tokens) as the engine made them;
 * - commit: the gather of the accepted rows of every K/V slab in place,
 *   bit-identical to the CPU's;
 * - sample_root: the sampled root equal to the CPU op's and the twin
 *   emt_sample_typical_u's for random and boundary uniforms, vocabularies
 *   of 1 to 50000 (chunks of 1 to 196 ids), flat and peaked distributions.
 * Runs on a GPU or on the CPU CUDA harness; SKIPPED when neither is there. */
#define ENTMTP_EXPERIMENTAL_API 1
#include "accept/accept.h"
#include "backend/backend.h"
#include "bank/tree.h"
#include "check.h"
#include "cuda_test.h"
#include "model/model.h"
#include "tiny_model.h"

#include <stdio.h>
#include <unistd.h>

static emt_backend *cpu, *gpu;
static emt_exec *ec, *eg;
static uint64_t rng = 0x5eedULL;

static void *dev_copy(const void *host, size_t bytes) { return emt_test_device_copy(gpu, host, bytes); }

static void download(void *dst, const void *src, size_t bytes) { CHECK_OK(gpu->ops->download(eg, dst, src, bytes)); }

/* ------------------------------------------------------------------ top-k */

static void check_topk(int32_t rows, int32_t vocab, int32_t k, int ties, int map) {
    float *x = emt_test_host_random(&rng, (size_t)rows * vocab, 3.0f);
    if (ties) /* a handful of levels: most values tie */
        for (size_t i = 0; i < (size_t)rows * vocab; i++) x[i] = (float)(int)(x[i] * 2.0f);
    int32_t *id_map = NULL;
    if (map) {
        id_map = malloc(sizeof(int32_t) * vocab);
        for (int32_t i = 0; i < vocab; i++) id_map[i] = 3 * i + 7;
    }
    size_t nk = (size_t)rows * k;
    int32_t *ci = malloc(nk * sizeof *ci), *gi = malloc(nk * sizeof *gi);
    float *cp = malloc(nk * sizeof *cp), *gp = malloc(nk * sizeof *gp);
    float *ch = malloc(rows * sizeof *ch), *gh = malloc(rows * sizeof *gh);
    cpu->ops->topk_device(ec, x, rows, vocab, k, id_map, ci, cp, ch);
    /* the CPU twin is the topk op with the ids mapped */
    int32_t *ri = malloc(nk * sizeof *ri);
    float *rp = malloc(nk * sizeof *rp), *rh = malloc(rows * sizeof *rh);
    cpu->ops->topk(ec, x, rows, vocab, k, ri, rp, rh);
    for (size_t i = 0; i < nk; i++)
        if (id_map) ri[i] = id_map[ri[i]];
    CHECK(!memcmp(ri, ci, nk * sizeof *ri) && !memcmp(rp, cp, nk * sizeof *rp) && !memcmp(rh, ch, rows * sizeof *rh));
    float *dx = dev_copy(x, (size_t)rows * vocab * sizeof(float));
    int32_t *dmap = map ? dev_copy(id_map, sizeof(int32_t) * vocab) : NULL;
    int32_t *di = gpu->ops->alloc(gpu, nk * sizeof(int32_t));
    float *dp = gpu->ops->alloc(gpu, nk * sizeof(float)), *dh = gpu->ops->alloc(gpu, rows * sizeof(float));
    gpu->ops->topk_device(eg, dx, rows, vocab, k, dmap, di, dp, dh);
    download(gi, di, nk * sizeof *gi);
    download(gp, dp, nk * sizeof *gp);
    download(gh, dh, rows * sizeof *gh);
    int ids_equal = !memcmp(ci, gi, nk * sizeof *ci);
    double worst = 0;
    for (size_t i = 0; i < nk; i++) worst = fmax(worst, fabs((double)gp[i] - cp[i]));
    for (int32_t r = 0; r < rows; r++) worst = fmax(worst, fabs((double)gh[r] - ch[r]));
    printf("topk_device %3d rows x %5d, k %2d%s%s: ids %s, worst probability/entropy difference %.3g\n", rows, vocab, k,
           ties ? ", ties" : "", map ? ", id map" : "", ids_equal ? "equal" : "DIFFER", worst);
    CHECK(ids_equal);
    CHECK(worst < 1e-5);
    gpu->ops->release(gpu, dx);
    gpu->ops->release(gpu, dmap);
    gpu->ops->release(gpu, di);
    gpu->ops->release(gpu, dp);
    gpu->ops->release(gpu, dh);
    free(x); free(id_map); free(ci); free(gi); free(cp); free(gp); free(ch); free(gh); free(ri); free(rp); free(rh);
}

/* ------------------------------------------------------------- acceptance */

#define MAX_PATH (EMT_MAX_HEADS + 1)

/* The tree's node tokens: a child takes its parent's top-1 token with
 * probability `follow`, else one of the parent's top 4, else any token. */
static void draft_tokens(const emt_tree *t, const float *logits, int32_t vocab, float follow, int32_t *tokens) {
    tokens[0] = emt_test_irand(&rng, vocab);
    for (int32_t i = 1; i < t->n_nodes; i++) {
        const float *x = logits + (size_t)t->parents[i] * vocab;
        int32_t top[4];
        float tv[4];
        emt_topk(x, vocab, 4, top, tv);
        float u = (emt_test_urand(&rng) + 1.0f) / 2.0f;
        tokens[i] = u < follow ? top[0] : u < 0.95f ? top[emt_test_irand(&rng, vocab < 4 ? vocab : 4)]
                                                    : emt_test_irand(&rng, vocab);
    }
}

typedef struct accept_case {
    float T;
    int32_t max_tokens, kv_room;
    const uint8_t *stop; /* host [vocab] */
} accept_case;

/* One acceptance on both backends; returns 1 when the records agree. */
static int run_accept(const emt_tree *t, const float *logits, int32_t vocab, const int32_t *tokens,
                      const accept_case *c, const char *label) {
    emt_step_record_layout lay = emt_step_record_layout_make(MAX_PATH, 0, 0);
    size_t bytes = lay.words * 4;
    int32_t *rc = calloc(lay.words, 4), *rg = calloc(lay.words, 4);
    emt_accept_desc d = { logits, tokens, t->retrieve_indices, t->n_nodes, vocab, t->n_leaves, t->depth + 1,
                          c->T, 0.09f, 0.3f, c->max_tokens, c->kv_room, c->stop, MAX_PATH, NULL };
    cpu->ops->accept(ec, &d, rc);
    CHECK_OK(cpu->ops->sync(ec));
    /* the oracle, directly */
    int32_t best = 0, acc = 0;
    if (t->n_nodes > 1) {
        emt_posterior_nodes in = { t->n_nodes, vocab, logits, tokens, t->n_leaves, t->depth + 1, t->retrieve_indices,
                                   c->T, 0.09f, 0.3f };
        CHECK_OK(emt_evaluate_posterior_nodes(&in, &best, &acc));
    }
    const emt_step_record *hc = (const emt_step_record *)rc;
    CHECK_EQ_INT(hc->best_row, best);
    CHECK_EQ_INT(hc->accepted, acc);
    float *dl = dev_copy(logits, (size_t)t->n_nodes * vocab * sizeof(float));
    uint8_t *dstop = c->stop ? dev_copy(c->stop, (size_t)vocab) : NULL;
    void *drec = gpu->ops->alloc(gpu, bytes);
    d.node_logits = dl;
    d.stop = dstop;
    gpu->ops->accept(eg, &d, drec);
    download(rg, drec, bytes);
    const emt_step_record *hg = (const emt_step_record *)rg;
    int same = hc->best_row == hg->best_row && hc->accepted == hg->accepted && hc->n_emit == hg->n_emit &&
               hc->stopped == hg->stopped && hc->kv_full == hg->kv_full && hc->last_node == hg->last_node &&
               !memcmp(rc + lay.path, rg + lay.path, sizeof(int32_t) * (hc->accepted + 1)) &&
               !memcmp(rc + lay.tokens, rg + lay.tokens, sizeof(int32_t) * hc->n_emit);
    if (!same) {
        fprintf(stderr, "%s (T %.2f): CPU best %d acc %d emit %d stop %d full %d, CUDA best %d acc %d emit %d stop %d full %d\n",
                label, (double)c->T, hc->best_row, hc->accepted, hc->n_emit, hc->stopped, hc->kv_full, hg->best_row,
                hg->accepted, hg->n_emit, hg->stopped, hg->kv_full);
        emt_test_failures++;
    }
    gpu->ops->release(gpu, dl);
    gpu->ops->release(gpu, dstop);
    gpu->ops->release(gpu, drec);
    int accepted = hc->accepted;
    free(rc);
    free(rg);
    return same ? accepted : -1;
}

/* Every built-in tree x temperatures on logits from `source` (n_source rows
 * of `vocab` values assigned to nodes in turn). */
static void check_accept_trees(const char *what, const float *source, int32_t n_source, int32_t vocab) {
    entmtp_bank_params bp = entmtp_bank_default_params();
    entmtp_bank *b = NULL;
    CHECK_OK(entmtp_bank_create(&bp, &b));
    for (int32_t i = 0; b && entmtp_builtin_tree_name(i); i++) {
        entmtp_status st = entmtp_bank_add_builtin(b, entmtp_builtin_tree_name(i), NULL);
        if (st != ENTMTP_ERR_INVALID_TREE) CHECK_OK(st);
    }
    const float temps[] = { 0.0f, 0.5f, 0.7f, 1.0f, 1.3f };
    int32_t cases = 0, accepted_total = 0, agreed = 0;
    for (int32_t k = 0; b && k < entmtp_bank_size(b); k++) {
        const emt_tree *t = emt_bank_tree(b, k);
        if (t->depth + 1 > MAX_PATH) continue;
        float *logits = malloc(sizeof(float) * t->n_nodes * vocab);
        int32_t *tokens = malloc(sizeof(int32_t) * t->n_nodes);
        for (int rep = 0; rep < 3; rep++) {
            for (int32_t i = 0; i < t->n_nodes; i++)
                memcpy(logits + (size_t)i * vocab, source + (size_t)emt_test_irand(&rng, n_source) * vocab,
                       sizeof(float) * vocab);
            draft_tokens(t, logits, vocab, rep == 0 ? 0.9f : 0.6f, tokens);
            for (size_t ti = 0; ti < sizeof temps / sizeof temps[0]; ti++) {
                accept_case c = { temps[ti], 0, 1000, NULL };
                int a = run_accept(t, logits, vocab, tokens, &c, t->name);
                cases++;
                if (a >= 0) { agreed++; accepted_total += a; }
            }
        }
        free(logits);
        free(tokens);
    }
    printf("accept on %s: %d of %d cases (%d trees x 5 temperatures x 3 drafts) agree with the oracle, %d tokens accepted\n",
           what, agreed, cases, b ? entmtp_bank_size(b) : 0, accepted_total);
    CHECK(accepted_total > cases / 4); /* the drafts do get accepted: the comparison is not vacuous */
    entmtp_bank_free(b);
}

/* The cuts on one long chain whose every token is accepted. */
static void check_cuts(void) {
    const int32_t vocab = 50, D = 5;
    int32_t ranks[5] = { 0, 0, 0, 0, 0 }, lengths[5] = { 1, 2, 3, 4, 5 };
    int32_t flat[15], n = 0;
    for (int32_t p = 0; p < D; p++)
        for (int32_t j = 0; j < lengths[p]; j++) flat[n++] = ranks[j];
    emt_tree t;
    CHECK_OK(emt_tree_compile("chain", flat, lengths, D, 1, D, 64, &t));
    float *logits = calloc((size_t)t.n_nodes * vocab, sizeof(float));
    int32_t tokens[6];
    for (int32_t i = 0; i < t.n_nodes; i++) {
        tokens[i] = 10 + i;
        if (i + 1 < t.n_nodes) logits[(size_t)i * vocab + 11 + i] = 5.0f; /* node i predicts node i+1 */
    }
    uint8_t stop[50] = { 0 };
    stop[13] = 1;
    const struct { int32_t max_tokens, kv_room; int use_stop; int32_t emit, stopped, full; } cases[] = {
        { 0, 100, 0, 6, 0, 0 }, { 3, 100, 0, 3, 0, 0 }, { 0, 4, 0, 4, 0, 1 }, { 4, 4, 0, 4, 0, 0 },
        { 2, 100, 1, 2, 0, 0 }, { 0, 100, 1, 4, 1, 0 }, { 0, 3, 1, 3, 0, 1 },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        accept_case c = { 0.0f, cases[i].max_tokens, cases[i].kv_room, cases[i].use_stop ? stop : NULL };
        CHECK_EQ_INT(run_accept(&t, logits, vocab, tokens, &c, "cuts"), 5);
        emt_step_record_layout lay = emt_step_record_layout_make(MAX_PATH, 0, 0);
        int32_t *rc = calloc(lay.words, 4);
        emt_accept_desc d = { logits, tokens, t.retrieve_indices, t.n_nodes, vocab, t.n_leaves, t.depth + 1, 0.0f,
                              0.09f, 0.3f, c.max_tokens, c.kv_room, c.stop, MAX_PATH, NULL };
        cpu->ops->accept(ec, &d, rc);
        const emt_step_record *r = (const emt_step_record *)rc;
        CHECK_EQ_INT(r->n_emit, cases[i].emit);
        CHECK_EQ_INT(r->stopped, cases[i].stopped);
        CHECK_EQ_INT(r->kv_full, cases[i].full);
        CHECK_EQ_INT(r->last_node, cases[i].emit - 1);
        /* the same cuts with max_tokens and L in device memory (the replayable step):
         * the KV room is kv_capacity - L */
        int32_t lens[2] = { 50, c.max_tokens }, *rg = calloc(lay.words, 4);
        int32_t *dlen = dev_copy(lens, sizeof lens);
        d.max_tokens = -7; /* ignored */
        d.kv_room = -7;
        d.lengths = lens;
        d.kv_capacity = 50 + c.kv_room;
        memset(rc, 0, lay.words * 4);
        cpu->ops->accept(ec, &d, rc);
        float *dl = dev_copy(logits, (size_t)t.n_nodes * vocab * sizeof(float));
        uint8_t *dstop = c.stop ? dev_copy(c.stop, (size_t)vocab) : NULL;
        void *drec = gpu->ops->alloc(gpu, lay.words * 4);
        d.node_logits = dl;
        d.stop = dstop;
        d.lengths = dlen;
        gpu->ops->accept(eg, &d, drec);
        download(rg, drec, lay.words * 4);
        const emt_step_record *g = (const emt_step_record *)rg;
        CHECK_EQ_INT(r->n_emit, cases[i].emit);
        CHECK_EQ_INT(r->kv_full, cases[i].full);
        CHECK_EQ_INT(g->n_emit, cases[i].emit);
        CHECK_EQ_INT(g->stopped, cases[i].stopped);
        CHECK_EQ_INT(g->kv_full, cases[i].full);
        gpu->ops->release(gpu, dl);
        if (dstop) gpu->ops->release(gpu, dstop);
        gpu->ops->release(gpu, drec);
        gpu->ops->release(gpu, dlen);
        free(rg);
        free(rc);
    }
    printf("accept cuts (max_tokens, KV room, stop tokens): %zu cases as the engine cuts, from arguments and from "
           "device lengths\n", sizeof cases / sizeof cases[0]);
    free(logits);
    emt_tree_destroy(&t);
}

/* Distributions recorded from a tiny model: the next-token logits after
 * prefixes of a fixed token stream. */
static float *record_model_logits(int32_t *n_out, int32_t *vocab_out) {
    emt_tiny_config c = emt_tiny_default_config();
    c.vocab = 300;
    char gguf[512];
    snprintf(gguf, sizeof gguf, "%s/step_ops_tiny_%d.gguf", ENTMTP_TEST_TMP_DIR, (int)getpid());
    CHECK_OK(emt_tiny_write_gguf(gguf, &c, EMT_F32));
    entmtp_model *m = NULL;
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CPU;
    mp.n_threads = 1;
    CHECK_OK(entmtp_model_load(gguf, &mp, &m));
    const int32_t n = 48;
    float *out = calloc((size_t)n * c.vocab, sizeof(float));
    entmtp_session *s = NULL;
    if (m) CHECK_OK(entmtp_session_create(m, NULL, NULL, NULL, &s));
    for (int32_t i = 0; s && i < n; i++) {
        int32_t tok = (int32_t)((i * 37 + 11) % c.vocab);
        CHECK_OK(entmtp_session_prefill(s, &tok, 1));
        const float *lg;
        int32_t V;
        CHECK_OK(entmtp_session_logits(s, &lg, &V));
        /* sharpened so that typical acceptance accepts often */
        for (int32_t v = 0; v < V; v++) out[(size_t)i * V + v] = lg[v] * (1.0f + (float)(i % 4));
    }
    entmtp_session_free(s);
    entmtp_model_free(m);
    remove(gguf);
    *n_out = n;
    *vocab_out = c.vocab;
    return out;
}

/* ----------------------------------------------------------------- commit */

static void check_commit(void) {
    const int32_t slabs = 6, rows = 40, row_floats = 24, H = 16, V = 70, L = 20;
    size_t slab_floats = (size_t)rows * row_floats + 8;
    float *kv = emt_test_host_random(&rng, slab_floats * slabs, 1.0f);
    float *hidden = emt_test_host_random(&rng, (size_t)8 * H, 1.0f), *logits = emt_test_host_random(&rng, (size_t)8 * V, 1.0f);
    const int32_t paths[][4] = { { 0, 2, 5, 7 }, { 0, 1, 2, 3 }, { 0, 3, 4, 6 }, { 0, 2, 5, 7 } };
    /* the last path from the tree area at rows 30.. to L = 20 read from device memory */
    const int32_t lengths[1] = { L }, src0 = 30;
    for (int p = 0; p < 4; p++) {
        const int dyn = p == 3;
        emt_step_record_layout lay = emt_step_record_layout_make(MAX_PATH, 0, 0);
        int32_t *rec = calloc(lay.words, 4);
        emt_step_record *r = (emt_step_record *)rec;
        r->n_emit = 4 - p % 2;
        r->last_node = paths[p][r->n_emit - 1];
        memcpy(rec + lay.path, paths[p], sizeof paths[p]);
        float *kc = malloc(slab_floats * slabs * sizeof(float)), *kg = malloc(slab_floats * slabs * sizeof(float));
        memcpy(kc, kv, slab_floats * slabs * sizeof(float));
        float lh_c[16], nl_c[70], lh_g[16], nl_g[70];
        emt_commit_desc d = { kc, slab_floats, row_floats, slabs, dyn ? -1 : L, hidden, lh_c, H, logits, nl_c, V,
                              MAX_PATH, dyn ? lengths : NULL, src0 };
        cpu->ops->commit(ec, &d, rec);
        float *dkv = dev_copy(kv, slab_floats * slabs * sizeof(float));
        float *dh = dev_copy(hidden, (size_t)8 * H * sizeof(float)), *dlg = dev_copy(logits, (size_t)8 * V * sizeof(float));
        float *dlh = gpu->ops->alloc(gpu, sizeof lh_g), *dnl = gpu->ops->alloc(gpu, sizeof nl_g);
        int32_t *drec = dev_copy(rec, lay.words * 4);
        int32_t *dlen = dev_copy(lengths, sizeof lengths);
        emt_commit_desc dg = { dkv, slab_floats, row_floats, slabs, dyn ? -1 : L, dh, dlh, H, dlg, dnl, V, MAX_PATH,
                               dyn ? dlen : NULL, src0 };
        gpu->ops->commit(eg, &dg, drec);
        download(kg, dkv, slab_floats * slabs * sizeof(float));
        download(lh_g, dlh, sizeof lh_g);
        download(nl_g, dnl, sizeof nl_g);
        CHECK(!memcmp(kc, kg, slab_floats * slabs * sizeof(float)));
        CHECK(!memcmp(lh_c, lh_g, sizeof lh_c) && !memcmp(nl_c, nl_g, sizeof nl_c));
        /* and the CPU moved what it should: row L+j of every slab is old row L+path[j] (src0+path[j]) */
        for (int32_t s = 0; s < slabs; s++)
            for (int32_t j = 0; j < r->n_emit; j++)
                CHECK(!memcmp(kc + s * slab_floats + (size_t)(L + j) * row_floats,
                              kv + s * slab_floats + (size_t)((dyn ? src0 : L) + paths[p][j]) * row_floats,
                              row_floats * sizeof(float)));
        CHECK(!memcmp(lh_c, hidden + (size_t)r->last_node * H, sizeof lh_c));
        gpu->ops->release(gpu, dkv); gpu->ops->release(gpu, dh); gpu->ops->release(gpu, dlg);
        gpu->ops->release(gpu, dlh); gpu->ops->release(gpu, dnl); gpu->ops->release(gpu, drec);
        gpu->ops->release(gpu, dlen);
        free(kc); free(kg); free(rec);
    }
    printf("commit: the gather of %d slabs and the last rows equal the CPU's for 4 paths (one from the tree area "
           "to L in device memory)\n", slabs);
    free(kv); free(hidden); free(logits);
}

/* embed_device: ids in device memory, F32 rows as embed's */
static void check_embed_device(void) {
    const int32_t V = 40, dim = 64, n = 5;
    float *table = emt_test_host_random(&rng, (size_t)V * dim, 1.0f);
    int32_t tok[5] = { 3, 39, 0, 3, 17 };
    float out_c[5 * 64], out_g[5 * 64];
    emt_wmat w = { EMT_F32, table, NULL };
    cpu->ops->embed_device(ec, &w, dim, tok, n, out_c);
    float *dt = dev_copy(table, (size_t)V * dim * sizeof(float));
    int32_t *dtok = dev_copy(tok, sizeof tok);
    float *dout = gpu->ops->alloc(gpu, sizeof out_g);
    emt_wmat wg = { EMT_F32, dt, NULL };
    gpu->ops->embed_device(eg, &wg, dim, dtok, n, dout);
    download(out_g, dout, sizeof out_g);
    CHECK(!memcmp(out_c, out_g, sizeof out_c));
    for (int32_t r = 0; r < n; r++) CHECK(!memcmp(out_c + r * dim, table + (size_t)tok[r] * dim, dim * sizeof(float)));
    gpu->ops->release(gpu, dt); gpu->ops->release(gpu, dtok); gpu->ops->release(gpu, dout);
    free(table);
}

/* ------------------------------------------------------------ sampled root */

/* What sample_root promises across backends (src/backend/backend.h): the
 * CPU op's token equals the twin's exactly; a device's token equals it too,
 * except where u lies within SAMPLE_BAND of the boundary between the twin's
 * token and the next allowed token on either side. There the device may
 * pick that neighbour: CUDA's double exp and log may differ from glibc's in
 * the last bit (cuda/step_ops.cu is built with -fmad=false, so FMA
 * contraction is not a second source), which moves a cumulative end by a
 * few ulps (~1e-16 relative). The harness runs glibc's exp, so there the
 * band is never used. */
#define SAMPLE_BAND 1e-12

static int is_allowed(const double *p, double thr, int32_t top, int32_t i) { return p[i] > thr || i == top; }

/* Is `got` the allowed neighbour of `twin` across a boundary that u is
 * within SAMPLE_BAND of? cum/mass are the plain reference's cumulative
 * allowed probabilities (check_sample_root). */
static int in_boundary_band(const double *p, double thr, int32_t top, int32_t vocab, const double *cum, double mass,
                            int32_t twin, int32_t got, double u) {
    if (got < 0 || got >= vocab || !is_allowed(p, thr, top, got)) return 0;
    int32_t lo = got < twin ? got : twin, hi = got < twin ? twin : got;
    for (int32_t i = lo + 1; i < hi; i++)
        if (is_allowed(p, thr, top, i)) return 0; /* not neighbours */
    return fabs(u - cum[lo] / mass) <= SAMPLE_BAND;
}

/* sample_root on both backends against the twin emt_sample_typical_u, for
 * n uniforms: random ones, 0, the largest, and ones on the token
 * boundaries of a plain sequential cumulative sum (where an off-by-one in
 * the kernel's running sums picks a neighbour). Device == CPU op == twin,
 * token for token; the twin's token is allowed and its plain cumulative
 * interval holds u (within 1e-9: the sums' orders differ). */
static void check_sample_root(int32_t vocab, float T, float scale, int32_t n) {
    const float eps = 0.09f, delta = 0.3f;
    float *x = emt_test_host_random(&rng, (size_t)vocab, scale);
    uint64_t *u53 = malloc(sizeof(uint64_t) * n);
    int32_t *words = malloc(sizeof(int32_t) * 2 * n), *tc = malloc(sizeof(int32_t) * n),
            *tg = malloc(sizeof(int32_t) * n);
    /* the plain reference: probabilities, threshold, allowed mass and cumulative ends */
    double *p = malloc(sizeof(double) * vocab), *cum = malloc(sizeof(double) * vocab);
    int32_t top = 0;
    for (int32_t i = 1; i < vocab; i++)
        if (x[i] > x[top]) top = i;
    double z = 0, h = 0, mass = 0;
    for (int32_t i = 0; i < vocab; i++) z += exp(((double)x[i] - x[top]) / T);
    for (int32_t i = 0; i < vocab; i++) {
        p[i] = exp(((double)x[i] - x[top]) / T) / z;
        h -= p[i] * log(p[i] + 1e-5);
    }
    double thr = fmin(delta * exp(-h), eps);
    int32_t n_allowed = 0;
    for (int32_t i = 0; i < vocab; i++) {
        if (p[i] > thr || i == top) {
            mass += p[i];
            n_allowed++;
        }
        cum[i] = mass;
    }
    for (int32_t k = 0; k < n; k++) {
        if (k == 0) u53[k] = 0;
        else if (k == 1) u53[k] = (1ull << 53) - 1;
        else if (k % 2 == 0) u53[k] = emt_rng_u53(&rng);
        else { /* next to the end of a random token's interval, a few ulps either side */
            int32_t i = emt_test_irand(&rng, vocab);
            double b = cum[i] / mass * 9007199254740992.0 + (double)(emt_test_irand(&rng, 9) - 4);
            u53[k] = b <= 0 ? 0 : b >= 9007199254740991.0 ? (1ull << 53) - 1 : (uint64_t)b;
        }
        words[2 * k] = (int32_t)(uint32_t)(u53[k] & 0xffffffffu);
        words[2 * k + 1] = (int32_t)(uint32_t)(u53[k] >> 32);
    }
    float *dx = dev_copy(x, sizeof(float) * vocab);
    int32_t *dw = dev_copy(words, sizeof(int32_t) * 2 * n), *dt = gpu->ops->alloc(gpu, sizeof(int32_t) * n);
    for (int32_t k = 0; k < n; k++) gpu->ops->sample_root(eg, dx, vocab, T, eps, delta, dw + 2 * k, dt + k);
    download(tg, dt, sizeof(int32_t) * n);
    int same = 1, sound = 1, banded = 0;
    for (int32_t k = 0; k < n; k++) {
        cpu->ops->sample_root(ec, x, vocab, T, eps, delta, words + 2 * k, &tc[k]);
        int32_t twin = emt_sample_typical_u(x, vocab, T, eps, delta, emt_u53_uniform(u53[k]));
        if (tg[k] != twin && tc[k] == twin && in_boundary_band(p, thr, top, vocab, cum, mass, twin, tg[k],
                                                                emt_u53_uniform(u53[k]))) {
            banded++; /* the stated band: a last-bit difference of exp/log, next to a boundary */
        } else if (tc[k] != twin || tg[k] != twin) {
            if (same)
                fprintf(stderr, "sample_root vocab %d, T %.1f, u53 %llu: CUDA %d, CPU op %d, twin %d\n", vocab,
                        (double)T, (unsigned long long)u53[k], tg[k], tc[k], twin);
            same = 0;
        }
        double u = emt_u53_uniform(u53[k]);
        int ok = twin >= 0 && twin < vocab && (p[twin] > thr * (1 + 1e-9) || twin == top ||
                                               fabs(p[twin] - thr) <= 1e-9 * thr);
        if (ok) {
            double lo = (twin ? cum[twin - 1] : 0) / mass, hi = cum[twin] / mass;
            ok = u >= lo - 1e-9 && u <= hi + 1e-9;
        }
        if (!ok && sound)
            fprintf(stderr, "sample_root vocab %d, T %.1f: u %.17g gave token %d outside its interval\n", vocab,
                    (double)T, u, twin);
        sound = sound && ok;
    }
    printf("sample_root vocab %5d, T %.1f, %4d allowed: %d uniforms, CUDA == CPU op == twin: %s "
           "(%d within the boundary band), each token's cumulative interval holds u: %s\n",
           vocab, (double)T, n_allowed, n, same ? "yes" : "NO", banded, sound ? "yes" : "NO");
    CHECK(same);
    CHECK(sound);
    gpu->ops->release(gpu, dx);
    gpu->ops->release(gpu, dw);
    gpu->ops->release(gpu, dt);
    free(x); free(u53); free(words); free(tc); free(tg); free(p); free(cum);
}

/* The plugin's step graphs as a state machine, on a span of one op (x += 1,
 * so the value counts how often the span ran): a key's first span runs
 * directly, its second is recorded and launched, later ones are replays
 * (EMT_GRAPH_REPLAYED, the engine issues nothing); a span that downloads
 * cannot be recorded: graph_end reports that nothing ran, and the key runs
 * directly from then on; a discarded recording runs nothing; graph_reset
 * starts over. */
static void check_graphs(void) {
    const emt_backend_ops *op = gpu->ops;
    if (!op->graph_begin) return; /* a backend without graphs */
    const float one = 1.0f;
    float *x = op->alloc(gpu, sizeof(float)), *y = dev_copy(&one, sizeof one), got = 0;
    int32_t ids[1];
    float probs[1];
    emt_exec_counters c0, c1;
    op->counters(eg, &c0);
    static char keys[3]; /* three distinct keys */
    const void *key_a = &keys[0], *key_b = &keys[1], *key_c = &keys[2];
    int ran = 0, not_run = 0;
    for (int i = 0; i < 5; i++) { /* key a: direct, recorded, then 3 replays */
        if (op->graph_begin(eg, key_a, 0) == EMT_GRAPH_REPLAYED) continue;
        op->add(eg, x, y, 1);
        not_run += op->graph_end(eg, 0);
        ran++;
    }
    download(&got, x, sizeof got);
    CHECK(ran == 2 && not_run == 0 && got == 5.0f);
    op->counters(eg, &c1);
    CHECK_EQ_INT((int)(c1.graph_captures - c0.graph_captures), 1);
    CHECK_EQ_INT((int)(c1.graph_launches - c0.graph_launches), 4);
    CHECK_EQ_INT((int)(c1.graph_fallbacks - c0.graph_fallbacks), 1);
    for (int i = 0; i < 3; i++) { /* key b: a download inside the span */
        CHECK(op->graph_begin(eg, key_b, 1) == 0);
        op->add(eg, x, y, 1);
        op->topk(eg, y, 1, 1, 1, ids, probs, NULL);
        int r = op->graph_end(eg, 0);
        CHECK_EQ_INT(r, i == 1); /* the recording failed: nothing ran, issue it again */
        if (r) op->add(eg, x, y, 1);
    }
    download(&got, x, sizeof got);
    CHECK(got == 8.0f);
    CHECK_OK(op->sync(eg)); /* the refused download is not the context's error */
    /* key c: the engine failed while issuing the recording: dropped, not launched */
    CHECK(op->graph_begin(eg, key_c, 0) == 0); /* first use: direct */
    op->add(eg, x, y, 1);
    CHECK_EQ_INT(op->graph_end(eg, 0), 0);
    CHECK(op->graph_begin(eg, key_c, 0) == 0);
    op->add(eg, x, y, 1);
    CHECK_EQ_INT(op->graph_end(eg, 1), 0);
    download(&got, x, sizeof got);
    CHECK(got == 9.0f);
    /* reset: key a starts over (direct, then recorded) */
    op->graph_reset(eg);
    for (int i = 0; i < 2; i++) {
        CHECK(op->graph_begin(eg, key_a, 0) == 0);
        op->add(eg, x, y, 1);
        CHECK_EQ_INT(op->graph_end(eg, 0), 0);
    }
    download(&got, x, sizeof got);
    CHECK(got == 11.0f);
    op->counters(eg, &c1);
    printf("graphs: direct first use, recorded second, replays; a span that downloads falls back to direct "
           "launches (%lld fallbacks, %lld captures, %lld graph launches)\n",
           (long long)(c1.graph_fallbacks - c0.graph_fallbacks), (long long)(c1.graph_captures - c0.graph_captures),
           (long long)(c1.graph_launches - c0.graph_launches));
    op->release(gpu, x);
    op->release(gpu, y);
}

int main(void) {
    if (!emt_cuda_test_open_pair(&cpu, &ec, &gpu, &eg)) return 77;
    CHECK(ec && eg && cpu->ops->accept && gpu->ops->accept);
    if (ec && eg && cpu->ops->accept && gpu->ops->accept) {
        check_topk(1, 1, 1, 0, 0);
        check_topk(3, 1001, 1, 0, 0);
        check_topk(5, 1001, 10, 0, 1);
        check_topk(4, 3000, 10, 1, 0);
        check_topk(2, 700, 32, 1, 1);
        check_topk(2, 700, 40, 0, 1);
        check_topk(1, 20, 20, 1, 0);
        check_embed_device();
        CHECK(cpu->ops->sample_root && gpu->ops->sample_root);
        if (cpu->ops->sample_root && gpu->ops->sample_root) {
            check_sample_root(1, 0.7f, 1.0f, 4);
            check_sample_root(32, 0.7f, 3.0f, 64);
            check_sample_root(257, 1.0f, 2.0f, 64);
            check_sample_root(1001, 1.3f, 3.0f, 64);
            check_sample_root(1001, 0.5f, 8.0f, 16); /* peaked: few allowed */
            check_sample_root(emt_test_size(50000, 5000), 0.7f, 2.0f, 24);
        }
        const int32_t V = 64;
        float *random = emt_test_host_random(&rng, (size_t)32 * V, 4.0f);
        check_accept_trees("random logits", random, 32, V);
        free(random);
        int32_t n_rec = 0, V_rec = 0;
        float *recorded = record_model_logits(&n_rec, &V_rec);
        check_accept_trees("recorded tiny-model logits", recorded, n_rec, V_rec);
        free(recorded);
        check_cuts();
        check_commit();
        check_graphs();
        CHECK_OK(gpu->ops->sync(eg));
    }
    emt_cuda_test_close_pair(cpu, ec, gpu, eg);
    return emt_test_finish("test_cuda_step_ops");
}
