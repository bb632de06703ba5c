/* The features a custom policy sees: every rank of every head
 * (head_topk_p) and each bank tree's expected accept length and step
 * seconds (expected_accept, expected_seconds). A custom policy that picks
 * argmax expected_accept / expected_seconds makes the built-in throughput
 * policy's choice at every step of a generation, Medusa and Hydra, and both
 * emit greedy AR's tokens. Also: the features a session keeps
 * (entmtp_session_features) and callers compiled against the struct before
 * these fields were appended. */
#define ENTMTP_EXPERIMENTAL_API /* entmtp_session_features */
#include "check.h"
#include "tiny_model.h"

#include <stddef.h>
#include <stdio.h>

#define N_GEN 40
#define MAX_STEPS (N_GEN + 1)

static const int32_t prompt[] = { 1, 5, 9, 3, 17, 2, 30, 11, 4 };
#define N_PROMPT ((int32_t)(sizeof prompt / sizeof prompt[0]))

/* entmtp_features as a caller compiled before topk..expected_seconds */
typedef struct old_features {
    size_t struct_size;
    float p0;
    int32_t n_heads;
    const float *head_p;
    const float *g;
    float s;
    float entropy;
    int32_t last_accept_length;
    float accept_length_ema;
    int64_t step;
} old_features;
/* the old fields never move: the new struct starts with the old one */
#define SAME_OFFSET(field) \
    _Static_assert(offsetof(old_features, field) == offsetof(entmtp_features, field), #field " moved")
SAME_OFFSET(p0);
SAME_OFFSET(n_heads);
SAME_OFFSET(head_p);
SAME_OFFSET(g);
SAME_OFFSET(s);
SAME_OFFSET(entropy);
SAME_OFFSET(last_accept_length);
SAME_OFFSET(accept_length_ema);
SAME_OFFSET(step);
_Static_assert(sizeof(old_features) == offsetof(entmtp_features, topk), "the new fields are appended");

/* The built-in policy's payoff gate (src/policy/policy.c, docs/policies.md
 * "Never slower than AR") from what a custom policy sees: each drafting
 * step's tokens (the outcome) against its cost in plain steps (its tree's
 * expected_seconds over the root-only tree's, which in a reproducible
 * session prices no drafter levels: a plain step's cost). */
typedef struct gate_mirror {
    double tokens, cost, pending;
    int32_t steps, plain, wait, backoff, probing;
} gate_mirror;

typedef struct throughput_rule {
    int32_t n_heads, topk, n_trees; /* what every call must show */
    int32_t calls, bad;             /* calls; calls whose features broke a rule */
    int32_t outlook_varied;         /* calls where argmax accept alone differs from accept/seconds */
    double rank_mass_max;           /* largest sum over a head's ranks */
    gate_mirror gate;
    int32_t plain_steps;            /* steps the gate made plain */
} throughput_rule;

static void gate_mirror_reset(gate_mirror *g) {
    memset(g, 0, sizeof *g);
    g->tokens = g->cost = 2.0;
    g->backoff = 8;
}

static void observe_gate(void *user, const entmtp_outcome *o) {
    gate_mirror *g = &((throughput_rule *)user)->gate;
    if (!(g->pending > 0)) return;
    if (g->probing) g->tokens = g->cost = 2.0;
    g->tokens = 0.95 * g->tokens + o->accept_length;
    g->cost = 0.95 * g->cost + g->pending;
    g->pending = 0;
    int pays = g->tokens >= g->cost;
    if (g->probing) {
        g->probing = 0;
        if (pays) {
            g->plain = 0;
            g->steps = 0;
            g->backoff = 8;
        } else {
            g->backoff = g->backoff * 2 < 128 ? g->backoff * 2 : 128;
            g->wait = g->backoff;
        }
        return;
    }
    if (++g->steps >= 6 && g->tokens < 0.98 * g->cost) {
        g->plain = 1;
        g->wait = g->backoff;
        g->tokens = g->cost = 2.0;
    }
}

/* argmax over trees of expected_accept / expected_seconds, ties to the lower
 * index: the throughput policy written against the public features */
static entmtp_status select_throughput(void *user, const entmtp_features *f, int32_t n_trees, int32_t *out) {
    throughput_rule *r = user;
    r->calls++;
    if (!ENTMTP_FEATURES_HAS(f, expected_seconds) || f->struct_size != sizeof *f || !f->expected_accept ||
        !f->expected_seconds || f->n_trees != n_trees || n_trees != r->n_trees || f->n_heads != r->n_heads ||
        f->topk != r->topk || !f->head_topk_p) {
        r->bad++;
        return entmtp_set_error(ENTMTP_ERR_CALLBACK, "features without the outlook or with the wrong shape");
    }
    for (int32_t d = 0; d < f->n_heads; d++) {
        const float *q = f->head_topk_p + (size_t)d * (size_t)f->topk;
        double mass = 0;
        if (q[0] != f->head_p[d]) r->bad++;
        for (int32_t k = 0; k < f->topk; k++) {
            if (!(q[k] >= 0 && q[k] <= 1) || (k > 0 && q[k] > q[k - 1])) r->bad++;
            mass += q[k];
        }
        if (mass > r->rank_mass_max) r->rank_mass_max = mass;
    }
    int32_t best = 0, most = 0, ar = -1;
    for (int32_t k = 0; k < n_trees; k++) {
        if (!(f->expected_accept[k] >= 1) || !(f->expected_seconds[k] > 0)) r->bad++;
        if (f->expected_accept[k] / f->expected_seconds[k] > f->expected_accept[best] / f->expected_seconds[best])
            best = k;
        if (f->expected_accept[k] > f->expected_accept[most]) most = k;
        if (f->expected_accept[k] <= 1.0f && (ar < 0 || f->expected_seconds[k] < f->expected_seconds[ar])) ar = k;
    }
    r->outlook_varied += most != best;
    gate_mirror *g = &r->gate;
    g->pending = 0;
    g->probing = 0;
    if (ar >= 0 && g->plain && g->wait > 0) {
        g->wait--;
        r->plain_steps++;
        *out = ar;
        return ENTMTP_OK;
    }
    if (ar >= 0 && g->plain) { /* the probe: the best drafting tree */
        int32_t probe = -1;
        for (int32_t k = 0; k < n_trees; k++)
            if (k != ar && (probe < 0 || f->expected_accept[k] / f->expected_seconds[k] >
                                             f->expected_accept[probe] / f->expected_seconds[probe]))
                probe = k;
        if (probe >= 0) {
            best = probe;
            g->probing = 1;
        }
    }
    if (ar >= 0) {
        double cost = f->expected_seconds[best] / f->expected_seconds[ar];
        g->pending = best != ar || cost > 1.0 + 1e-9 ? cost : 0.0;
    }
    *out = best;
    return ENTMTP_OK;
}

typedef struct run {
    int32_t tokens[N_PROMPT + N_GEN + 64];
    int32_t n_tokens;
    int32_t trees[MAX_STEPS];
    int32_t n_steps;
} run;

static entmtp_session *open_session(entmtp_model *m, entmtp_heads *h, entmtp_bank *b) {
    entmtp_session_params sp = entmtp_session_default_params();
    sp.kv_capacity = 200;
    sp.n_stop_tokens = 0;
    sp.reproducible = 1; /* step costs from the bank, not the clock: both runs see the same costs */
    entmtp_session *s = NULL;
    CHECK_OK(entmtp_session_create(m, h, b, &sp, &s));
    return s;
}

/* Step until N_GEN tokens (pol NULL: plain AR), recording each step's tree. */
static void generate(entmtp_model *m, entmtp_heads *h, entmtp_bank *b, entmtp_policy *pol, run *out) {
    memset(out, 0, sizeof *out);
    entmtp_session *s = open_session(m, h, b);
    if (!s) return;
    if (pol) CHECK_OK(entmtp_policy_set(s, pol));
    CHECK_OK(entmtp_session_prefill(s, prompt, N_PROMPT));
    int32_t emitted = 0;
    while (emitted < N_GEN && out->n_steps < MAX_STEPS) {
        entmtp_step_result r = { sizeof r };
        entmtp_status st = pol ? entmtp_step(s, N_GEN - emitted, &r) : entmtp_step_ar(s, &r);
        CHECK_OK(st);
        if (st) break;
        out->trees[out->n_steps++] = r.tree_index;
        emitted += r.n_tokens;
    }
    const int32_t *toks;
    CHECK_OK(entmtp_session_tokens(s, &toks, &out->n_tokens));
    CHECK_EQ_INT(out->n_tokens, N_PROMPT + N_GEN);
    if (out->n_tokens == N_PROMPT + N_GEN) memcpy(out->tokens, toks, (size_t)out->n_tokens * sizeof *toks);
    entmtp_policy_set(s, NULL);
    entmtp_session_free(s);
}

static int same_tokens(const run *a, const run *b) {
    return a->n_tokens == b->n_tokens && !memcmp(a->tokens, b->tokens, (size_t)a->n_tokens * sizeof *a->tokens);
}

/* The features a session keeps for entmtp_session_features: with the outlook
 * after a custom policy's step; without it (NULL) under a ladder policy; an
 * older caller's smaller struct gets only its bytes. */
static void check_session_features(entmtp_model *m, entmtp_heads *h, entmtp_bank *b, const throughput_rule *want) {
    entmtp_session *s = open_session(m, h, b);
    if (!s) return;
    entmtp_features f = { sizeof f };
    CHECK_OK(entmtp_session_features(s, &f)); /* before the first step: zeros */
    CHECK_EQ_INT(f.topk, 0);
    CHECK(f.expected_accept == NULL && f.expected_seconds == NULL);
    throughput_rule rule = *want;
    rule.calls = rule.bad = 0;
    gate_mirror_reset(&rule.gate);
    entmtp_policy_config pc = entmtp_policy_default_config(ENTMTP_POLICY_CUSTOM);
    pc.select = select_throughput;
    pc.user_data = &rule;
    entmtp_policy *pol = NULL;
    CHECK_OK(entmtp_policy_create(&pc, &pol));
    CHECK_OK(entmtp_policy_set(s, pol));
    CHECK_OK(entmtp_session_prefill(s, prompt, N_PROMPT));
    entmtp_step_result r = { sizeof r };
    CHECK_OK(entmtp_step(s, 0, &r));
    CHECK_OK(entmtp_session_features(s, &f));
    CHECK_EQ_INT(f.n_heads, want->n_heads);
    CHECK_EQ_INT(f.topk, want->topk);
    CHECK_EQ_INT(f.n_trees, want->n_trees);
    CHECK(f.head_topk_p != NULL && f.expected_accept != NULL && f.expected_seconds != NULL);
    if (f.head_topk_p && f.n_heads > 0) CHECK(f.head_topk_p[0] == f.head_p[0]);
    if (f.expected_accept) CHECK(f.expected_accept[r.tree_index] >= 1);

    /* an older caller: only its struct's bytes are written */
    union {
        old_features f;
        unsigned char bytes[sizeof(entmtp_features) + 32];
    } old;
    memset(&old, 0xAB, sizeof old);
    old.f.struct_size = sizeof old.f;
    CHECK_OK(entmtp_session_features(s, (entmtp_features *)&old));
    CHECK_EQ_INT(old.f.n_heads, want->n_heads);
    CHECK(old.f.head_p != NULL && old.f.step == 0);
    for (size_t i = sizeof old.f; i < sizeof old.bytes; i++) CHECK_EQ_INT(old.bytes[i], 0xAB);
    CHECK(!ENTMTP_FEATURES_HAS((const entmtp_features *)&old, topk));
    CHECK(ENTMTP_FEATURES_HAS((const entmtp_features *)&old, step));
    entmtp_policy_set(s, NULL);
    entmtp_policy_free(pol);

    /* a policy that does not read the outlook is shown none */
    const float th[1] = { 0.5f };
    entmtp_policy_config lc = entmtp_policy_default_config(ENTMTP_POLICY_LADDER);
    lc.n_thresholds = 1;
    lc.thresholds = th;
    CHECK_OK(entmtp_policy_create(&lc, &pol));
    CHECK_OK(entmtp_policy_set(s, pol));
    CHECK_OK(entmtp_step(s, 0, &r));
    CHECK_OK(entmtp_session_features(s, &f));
    CHECK(f.expected_accept == NULL && f.expected_seconds == NULL);
    CHECK_EQ_INT(f.n_trees, want->n_trees);
    CHECK_EQ_INT(f.topk, want->topk);
    entmtp_policy_set(s, NULL);
    entmtp_policy_free(pol);
    entmtp_session_free(s);
}

/* A custom callback compiled against the old header reads the old prefix
 * (the library passes its whole struct; the prefix is unchanged). */
static entmtp_status select_old_caller(void *user, const entmtp_features *f, int32_t n_trees, int32_t *out) {
    const old_features *o = (const old_features *)(const void *)f;
    int32_t *seen = user;
    if (o->struct_size < sizeof *o || o->n_heads < 1 || !o->head_p || !o->g) return ENTMTP_ERR_CALLBACK;
    *seen += 1;
    *out = o->head_p[0] > 0.5f ? n_trees - 1 : 0;
    return ENTMTP_OK;
}

static void check_heads(entmtp_model *m, const char *heads_path, const char *label) {
    entmtp_heads *h = NULL;
    CHECK_OK(entmtp_heads_load(m, heads_path, &h));
    if (!h) return;
    entmtp_heads_info hi = { sizeof hi };
    CHECK_OK(entmtp_heads_get_info(h, &hi));
    entmtp_bank *bank = NULL;
    entmtp_bank_params bp = entmtp_bank_default_params();
    bp.max_depth = hi.n_heads;
    CHECK_OK(entmtp_bank_create(&bp, &bank));
    int32_t topk = 1;
    for (int32_t i = 0; entmtp_builtin_tree_name(i); i++) {
        entmtp_status st = entmtp_bank_add_builtin(bank, entmtp_builtin_tree_name(i), NULL);
        if (st == ENTMTP_ERR_INVALID_TREE) continue; /* deeper than these heads */
        CHECK_OK(st);
        entmtp_tree_buffers tb = { sizeof tb };
        CHECK_OK(entmtp_bank_tree_buffers(bank, entmtp_bank_size(bank) - 1, &tb));
        if (tb.topk > topk) topk = tb.topk; /* the ranks the heads compute */
    }
    int32_t n_trees = entmtp_bank_size(bank);
    CHECK(n_trees >= 5);

    run ar, thr, cus;
    generate(m, h, bank, NULL, &ar);

    entmtp_policy_kind kind;
    CHECK_OK(entmtp_policy_kind_from_name("throughput", &kind));
    entmtp_policy_config tc = entmtp_policy_default_config(kind);
    entmtp_policy *tp = NULL;
    CHECK_OK(entmtp_policy_create(&tc, &tp));
    generate(m, h, bank, tp, &thr);
    entmtp_policy_free(tp);

    throughput_rule rule = { hi.n_heads, topk, n_trees, 0, 0, 0, 0, { 0 }, 0 };
    gate_mirror_reset(&rule.gate);
    entmtp_policy_config pc = entmtp_policy_default_config(ENTMTP_POLICY_CUSTOM);
    pc.select = select_throughput;
    pc.observe = observe_gate;
    pc.user_data = &rule;
    entmtp_policy *cp = NULL;
    CHECK_OK(entmtp_policy_create(&pc, &cp));
    generate(m, h, bank, cp, &cus);
    entmtp_policy_free(cp);

    /* greedy output is AR's under both policies */
    CHECK(same_tokens(&thr, &ar));
    CHECK(same_tokens(&cus, &ar));
    /* the custom rule chose as the built-in policy did, step by step */
    CHECK_EQ_INT(cus.n_steps, thr.n_steps);
    int32_t differ = 0, distinct = 0;
    int32_t used[64] = { 0 };
    for (int32_t i = 0; i < cus.n_steps && i < thr.n_steps; i++) {
        differ += cus.trees[i] != thr.trees[i];
        if (cus.trees[i] >= 0 && cus.trees[i] < 64 && !used[cus.trees[i]]++) distinct++;
    }
    CHECK_EQ_INT(differ, 0);
    CHECK_EQ_INT(rule.calls, cus.n_steps);
    CHECK_EQ_INT(rule.bad, 0);
    CHECK(rule.rank_mass_max <= 1.0 + 1e-4); /* a head's top-k ranks are one distribution's */
    printf("%s: %d steps, %d distinct trees, accept-only argmax differs at %d steps, max rank mass %.3f, "
           "%d plain steps of the gate\n", label, cus.n_steps, distinct, rule.outlook_varied, rule.rank_mass_max,
           rule.plain_steps);

    check_session_features(m, h, bank, &rule);

    /* a callback written against the old struct still works in a session */
    int32_t seen = 0;
    pc.select = select_old_caller;
    pc.observe = NULL; /* observe_gate reads a throughput_rule, not &seen */
    pc.user_data = &seen;
    CHECK_OK(entmtp_policy_create(&pc, &cp));
    run old;
    generate(m, h, bank, cp, &old);
    CHECK(same_tokens(&old, &ar));
    CHECK_EQ_INT(seen, old.n_steps);
    entmtp_policy_free(cp);

    entmtp_bank_free(bank);
    entmtp_heads_free(h);
}

/* entmtp_policy_select outside a session: the throughput policy reads the
 * caller's outlook; a custom callback is shown an older caller's struct with
 * the appended fields zero; bad outlooks are errors naming the field. */
typedef struct shown {
    size_t struct_size;
    int32_t topk, n_trees;
    const void *head_topk_p, *expected_accept, *expected_seconds;
    float p0;
} shown;

static entmtp_status select_record(void *user, const entmtp_features *f, int32_t n_trees, int32_t *out) {
    shown *s = user;
    s->struct_size = f->struct_size;
    s->p0 = f->p0;
    if (ENTMTP_FEATURES_HAS(f, expected_seconds)) {
        s->topk = f->topk;
        s->n_trees = f->n_trees;
        s->head_topk_p = f->head_topk_p;
        s->expected_accept = f->expected_accept;
        s->expected_seconds = f->expected_seconds;
    }
    *out = n_trees - 1;
    return ENTMTP_OK;
}

static void check_select_outside_session(void) {
    const float acc[3] = { 1.0f, 2.0f, 3.0f };
    const double sec[3] = { 1.0, 1.5, 3.0 };
    entmtp_features f;
    memset(&f, 0, sizeof f);
    f.struct_size = sizeof f;
    f.p0 = f.s = 0.5f;
    f.n_trees = 3;
    f.expected_accept = acc;
    f.expected_seconds = sec;
    entmtp_policy_kind kind;
    CHECK_OK(entmtp_policy_kind_from_name("throughput", &kind));
    entmtp_policy_config tc = entmtp_policy_default_config(kind);
    entmtp_policy *p = NULL;
    CHECK_OK(entmtp_policy_create(&tc, &p));
    int32_t k = -1;
    CHECK_OK(entmtp_policy_select(p, &f, 3, &k));
    CHECK_EQ_INT(k, 1); /* 1.0, 1.333, 1.0 tokens per second */
    CHECK_ERR(entmtp_policy_select(p, &f, 2, &k), ENTMTP_ERR_INVALID_ARGUMENT, "features.n_trees = 3");
    f.expected_seconds = NULL;
    CHECK_ERR(entmtp_policy_select(p, &f, 3, &k), ENTMTP_ERR_INVALID_ARGUMENT, "features.expected_seconds is NULL");
    f.expected_seconds = sec;

    /* an older caller's struct: the canary bytes past it are never read as
     * an outlook, so the throughput policy has none */
    union {
        old_features f;
        unsigned char bytes[sizeof(entmtp_features) + 32];
    } old;
    memset(&old, 0xAB, sizeof old);
    memcpy(&old.f, &f, sizeof old.f);
    old.f.struct_size = sizeof old.f;
    CHECK_ERR(entmtp_policy_select(p, (const entmtp_features *)&old, 3, &k), ENTMTP_ERR_STATE, "expected_accept");
    entmtp_policy_free(p);

    /* a custom policy sees the library's whole struct: the caller's fields,
     * the rest zero */
    shown seen;
    memset(&seen, 0x5A, sizeof seen);
    entmtp_policy_config pc = entmtp_policy_default_config(ENTMTP_POLICY_CUSTOM);
    pc.select = select_record;
    pc.user_data = &seen;
    CHECK_OK(entmtp_policy_create(&pc, &p));
    CHECK_OK(entmtp_policy_select(p, (const entmtp_features *)&old, 3, &k));
    CHECK_EQ_INT(k, 2);
    CHECK_EQ_INT(seen.struct_size, sizeof(entmtp_features));
    CHECK_NEAR(seen.p0, 0.5, 0);
    CHECK_EQ_INT(seen.topk, 0);
    CHECK_EQ_INT(seen.n_trees, 0);
    CHECK(seen.head_topk_p == NULL && seen.expected_accept == NULL && seen.expected_seconds == NULL);
    /* a current caller's struct is passed as it is */
    CHECK_OK(entmtp_policy_select(p, &f, 3, &k));
    CHECK(seen.expected_accept == acc && seen.expected_seconds == sec);
    CHECK_EQ_INT(seen.n_trees, 3);
    /* a newer caller's struct: bytes past the library's fields must be zero */
    union {
        entmtp_features f;
        unsigned char bytes[sizeof(entmtp_features) + 8];
    } newer;
    memset(&newer, 0, sizeof newer);
    newer.f = f;
    newer.f.struct_size = sizeof newer.bytes;
    CHECK_OK(entmtp_policy_select(p, &newer.f, 3, &k));
    newer.bytes[sizeof(entmtp_features) + 2] = 1;
    CHECK_ERR(entmtp_policy_select(p, &newer.f, 3, &k), ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_features.struct_size");
    entmtp_policy_free(p);
}

int main(void) {
    check_select_outside_session();

    emt_tiny_config c = emt_tiny_default_config();
    c.seed = 23;
    char gguf[512], medusa[512], hydra[512];
    snprintf(gguf, sizeof gguf, "%s/features_tiny.gguf", ENTMTP_TEST_TMP_DIR);
    snprintf(medusa, sizeof medusa, "%s/features_medusa.safetensors", ENTMTP_TEST_TMP_DIR);
    snprintf(hydra, sizeof hydra, "%s/features_hydra.safetensors", ENTMTP_TEST_TMP_DIR);
    CHECK_OK(emt_tiny_write_gguf(gguf, &c, EMT_F32));
    CHECK_OK(emt_tiny_write_medusa_heads(medusa, c.hidden, c.vocab, 4, 1, 0, 7));
    CHECK_OK(emt_tiny_write_hydra_heads(hydra, c.hidden, c.vocab, 5, 2, 0, 12));
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CPU;
    mp.n_threads = 1;
    entmtp_model *m = NULL;
    CHECK_OK(entmtp_model_load(gguf, &mp, &m));
    if (m) {
        check_heads(m, medusa, "medusa");
        check_heads(m, hydra, "hydra");
    }
    entmtp_model_free(m);
    return emt_test_finish("test_policy_features");
}
