/* The ABI review points of include/entmtp.h, each checked against the
 * library: versioned structs honour the caller's struct_size both ways
 * (initialisers, inputs, outputs), unknown trailing bytes are refused,
 * limits are run-time values, arguments are checked before a step commits
 * anything, entmtp_generate reports a callback stop, a custom policy can set
 * its own error message and the caller's earlier error survives callbacks. */
#include "check.h"
#include "tiny_model.h"

#include <stdio.h>

/* A struct area with a canary tail: what a caller compiled against an older,
 * smaller header would hand over, or a newer, larger one. */
typedef union {
    size_t struct_size;
    unsigned char bytes[1024];
} raw_struct;

static int tail_is(const raw_struct *r, size_t from, unsigned char v) {
    for (size_t i = from; i < sizeof r->bytes; i++)
        if (r->bytes[i] != v) return 0;
    return 1;
}

static void check_initialisers(void) {
    /* an older caller's smaller struct: only its bytes are written */
    raw_struct r;
    size_t old = offsetof(entmtp_session_params, temperature) + sizeof(float);
    memset(&r, 0xAB, sizeof r);
    CHECK_OK(entmtp_session_params_init((entmtp_session_params *)&r, old));
    CHECK_EQ_INT(r.struct_size, old);
    CHECK(tail_is(&r, old, 0xAB));
    CHECK_NEAR(((entmtp_session_params *)&r)->temperature, 0.0, 0);
    /* a newer caller's larger struct: the fields this library knows get
     * defaults, the rest is zeroed, struct_size is the caller's size */
    memset(&r, 0xAB, sizeof r);
    CHECK_OK(entmtp_session_params_init((entmtp_session_params *)&r, sizeof(entmtp_session_params) + 16));
    CHECK_EQ_INT(r.struct_size, sizeof(entmtp_session_params) + 16);
    for (size_t i = sizeof(entmtp_session_params); i < sizeof(entmtp_session_params) + 16; i++)
        CHECK_EQ_INT(r.bytes[i], 0);
    CHECK(tail_is(&r, sizeof(entmtp_session_params) + 16, 0xAB));
    /* the inline defaults are the initialiser's values */
    entmtp_session_params sp = entmtp_session_default_params();
    CHECK_EQ_INT(sp.struct_size, sizeof sp);
    CHECK_NEAR(sp.epsilon, 0.09, 1e-7);
    CHECK_EQ_INT(sp.n_stop_tokens, -1);
    CHECK(sp.stop_tokens == NULL);
    entmtp_model_params mp = entmtp_model_default_params();
    CHECK_EQ_INT(mp.backend, ENTMTP_BACKEND_AUTO);
    entmtp_bank_params bp = entmtp_bank_default_params();
    CHECK_EQ_INT(bp.topk, 10);
    entmtp_policy_config pc = entmtp_policy_default_config(ENTMTP_POLICY_HYSTERESIS);
    CHECK_EQ_INT(pc.kind, ENTMTP_POLICY_HYSTERESIS);
    CHECK_EQ_INT(pc.aggressive_tree, 1);
    CHECK(pc.thresholds == NULL && pc.ladder_trees == NULL);
    /* bad calls */
    CHECK_ERR(entmtp_model_params_init(NULL, sizeof mp), ENTMTP_ERR_INVALID_ARGUMENT, "NULL");
    CHECK_ERR(entmtp_bank_params_init(&bp, 4), ENTMTP_ERR_INVALID_ARGUMENT, "size = 4");
    CHECK_ERR(entmtp_policy_config_init(&pc, 0, ENTMTP_POLICY_STATIC), ENTMTP_ERR_INVALID_ARGUMENT, "size = 0");
}

static void check_unknown_tail_refused(void) {
    /* a newer caller set a field this library does not know: refused, never
     * silently ignored; a zero tail is accepted */
    raw_struct r;
    memset(&r, 0, sizeof r);
    CHECK_OK(entmtp_bank_params_init((entmtp_bank_params *)&r, sizeof(entmtp_bank_params) + 8));
    entmtp_bank *b = NULL;
    CHECK_OK(entmtp_bank_create((entmtp_bank_params *)&r, &b));
    entmtp_bank_free(b);
    b = NULL;
    r.bytes[sizeof(entmtp_bank_params) + 3] = 1;
    CHECK_ERR(entmtp_bank_create((entmtp_bank_params *)&r, &b), ENTMTP_ERR_INVALID_ARGUMENT, "newer field");
    CHECK(b == NULL);

    memset(&r, 0, sizeof r);
    CHECK_OK(entmtp_policy_config_init((entmtp_policy_config *)&r, sizeof(entmtp_policy_config) + 8,
                                       ENTMTP_POLICY_STATIC));
    entmtp_policy *p = NULL;
    CHECK_OK(entmtp_policy_create((entmtp_policy_config *)&r, &p));
    entmtp_policy_free(p);
    p = NULL;
    r.bytes[sizeof(entmtp_policy_config) + 7] = 0x40;
    CHECK_ERR(entmtp_policy_create((entmtp_policy_config *)&r, &p), ENTMTP_ERR_INVALID_ARGUMENT,
              "entmtp_policy_config.struct_size");
    CHECK(p == NULL);
}

static void check_outputs_honour_size(void) {
    entmtp_bank *b = NULL;
    CHECK_OK(entmtp_bank_create(NULL, &b));
    if (!b) return;
    CHECK_OK(entmtp_bank_add_builtin(b, "chain_1", NULL));
    CHECK_OK(entmtp_bank_add_builtin(b, "chain_2", NULL));
    entmtp_policy_kind kind;
    CHECK_ERR(entmtp_bank_default_policy(b, &kind), ENTMTP_ERR_NOT_FOUND, "no policy");
    entmtp_policy_config h = entmtp_policy_default_config(ENTMTP_POLICY_HYSTERESIS);
    h.tau_on = 0.4f;
    h.tau_off = 0.2f;
    CHECK_OK(entmtp_bank_set_policy_config(b, &h));
    CHECK_OK(entmtp_bank_default_policy(b, &kind));
    CHECK_EQ_INT(kind, ENTMTP_POLICY_HYSTERESIS);
    /* an older caller's config ends after `kind`: nothing past it is written */
    raw_struct r;
    memset(&r, 0xAB, sizeof r);
    r.struct_size = offsetof(entmtp_policy_config, kind) + sizeof(entmtp_policy_kind);
    CHECK_OK(entmtp_bank_policy_config(b, ENTMTP_POLICY_HYSTERESIS, (entmtp_policy_config *)&r));
    CHECK_EQ_INT(((entmtp_policy_config *)&r)->kind, ENTMTP_POLICY_HYSTERESIS);
    CHECK(tail_is(&r, r.struct_size, 0xAB));
    r.struct_size = 0;
    CHECK_ERR(entmtp_bank_policy_config(b, ENTMTP_POLICY_HYSTERESIS, (entmtp_policy_config *)&r),
              ENTMTP_ERR_INVALID_ARGUMENT, "struct_size = 0");
    /* tree info: same rule */
    memset(&r, 0xAB, sizeof r);
    r.struct_size = offsetof(entmtp_tree_info, n_nodes) + sizeof(int32_t);
    CHECK_OK(entmtp_bank_tree_info(b, 1, (entmtp_tree_info *)&r));
    CHECK_EQ_INT(((entmtp_tree_info *)&r)->n_nodes, 3);
    CHECK(tail_is(&r, r.struct_size, 0xAB));
    /* ladder arrays come back as pointers into the bank */
    const float th[1] = { 0.5f };
    entmtp_policy_config l = entmtp_policy_default_config(ENTMTP_POLICY_LADDER);
    l.n_thresholds = 1;
    l.thresholds = th;
    CHECK_OK(entmtp_bank_set_policy_config(b, &l));
    entmtp_policy_config got = { sizeof got };
    CHECK_OK(entmtp_bank_policy_config(b, ENTMTP_POLICY_LADDER, &got));
    CHECK(got.thresholds && got.thresholds != th && got.ladder_trees);
    if (got.thresholds && got.ladder_trees) {
        CHECK_NEAR(got.thresholds[0], 0.5, 0);
        CHECK_EQ_INT(got.ladder_trees[1], 1);
    }
    CHECK_OK(entmtp_bank_default_policy(b, &kind)); /* still the first stored */
    CHECK_EQ_INT(kind, ENTMTP_POLICY_HYSTERESIS);
    entmtp_bank_free(b);
}

static void check_limits(void) {
    CHECK_EQ_INT(entmtp_limit(ENTMTP_LIMIT_MAX_HEADS), 16);
    CHECK(entmtp_limit(ENTMTP_LIMIT_MAX_LADDER) >= 2);
    CHECK(entmtp_limit(ENTMTP_LIMIT_MAX_STOP_TOKENS) >= 8);
    CHECK(entmtp_limit(ENTMTP_LIMIT_MAX_TREE_NODES) >= 256);
    CHECK(entmtp_limit(ENTMTP_LIMIT_MAX_TOPK) >= 10);
    CHECK_EQ_INT(entmtp_limit((entmtp_limit_kind)99), -1);
    /* a bank's max_nodes is checked against the published limit */
    entmtp_bank_params bp = entmtp_bank_default_params();
    bp.max_nodes = entmtp_limit(ENTMTP_LIMIT_MAX_TREE_NODES) + 1;
    entmtp_bank *b = NULL;
    CHECK_ERR(entmtp_bank_create(&bp, &b), ENTMTP_ERR_INVALID_CONFIG, "max_nodes");
}

/* custom policy whose select fails with its own message */
static entmtp_status select_with_message(void *user, const entmtp_features *f, int32_t n_trees, int32_t *out) {
    (void)user;
    (void)n_trees;
    (void)out;
    char msg[128];
    snprintf(msg, sizeof msg, "my policy saw %d heads and gave up", f->n_heads);
    return entmtp_set_error(ENTMTP_ERR_CALLBACK, msg);
}

static entmtp_status select_silently(void *user, const entmtp_features *f, int32_t n_trees, int32_t *out) {
    (void)user;
    (void)n_trees;
    (void)f;
    *out = 0;
    return ENTMTP_ERR_CALLBACK; /* no message of its own */
}

static entmtp_status select_ok(void *user, const entmtp_features *f, int32_t n_trees, int32_t *out) {
    (void)n_trees;
    int32_t *seen_heads = user;
    *seen_heads = f->n_heads;
    /* the features' arrays are readable during the callback */
    float product = f->p0;
    for (int32_t d = 0; d < f->n_heads; d++) product *= f->head_p[d];
    if (f->n_heads > 0 && !(product <= f->g[f->n_heads - 1] * 1.0001f + 1e-12f)) return ENTMTP_ERR_CALLBACK;
    *out = 0;
    return ENTMTP_OK;
}

static int stop_after_first(const int32_t *tokens, int32_t n, void *user) {
    (void)tokens;
    (void)n;
    (*(int *)user)++;
    return 1;
}

static void check_session(void) {
    emt_tiny_config c = emt_tiny_default_config();
    c.seed = 11;
    char gguf[512], heads_path[512];
    snprintf(gguf, sizeof gguf, "%s/abi_tiny.gguf", ENTMTP_TEST_TMP_DIR);
    snprintf(heads_path, sizeof heads_path, "%s/abi_heads.safetensors", ENTMTP_TEST_TMP_DIR);
    CHECK_OK(emt_tiny_write_gguf(gguf, &c, EMT_F32));
    CHECK_OK(emt_tiny_write_medusa_heads(heads_path, c.hidden, c.vocab, 3, 1, 0, 5));
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CPU;
    entmtp_model *m = NULL;
    entmtp_heads *h = NULL;
    entmtp_bank *bank = NULL;
    CHECK_OK(entmtp_model_load(gguf, &mp, &m));
    if (!m) return;
    CHECK_OK(entmtp_heads_load(m, heads_path, &h));
    CHECK_OK(entmtp_bank_create(NULL, &bank));
    CHECK_OK(entmtp_bank_add_builtin(bank, "chain_3", NULL));

    /* const model, heads and bank */
    const entmtp_model *cm = m;
    const entmtp_heads *ch = h;
    const entmtp_bank *cb = bank;
    int32_t stops[2] = { 5, 6 };
    entmtp_session_params sp = entmtp_session_default_params();
    sp.n_stop_tokens = 2;
    sp.stop_tokens = NULL;
    entmtp_session *s = NULL;
    CHECK_ERR(entmtp_session_create(cm, ch, cb, &sp, &s), ENTMTP_ERR_INVALID_CONFIG, "stop_tokens is NULL");
    sp.stop_tokens = stops;
    sp.n_stop_tokens = entmtp_limit(ENTMTP_LIMIT_MAX_STOP_TOKENS) + 1;
    CHECK_ERR(entmtp_session_create(cm, ch, cb, &sp, &s), ENTMTP_ERR_INVALID_CONFIG, "n_stop_tokens");
    sp.n_stop_tokens = 0;
    CHECK_OK(entmtp_session_create(cm, ch, cb, &sp, &s));
    if (!s) goto done;
    const int32_t prompt[4] = { 1, 2, 3, 4 };
    CHECK_OK(entmtp_session_prefill(s, prompt, 4));

    /* the reproduced bug: struct_size = 0 used to commit a token, then fail */
    const int32_t *toks = NULL;
    int32_t n_before = 0, n_after = 0;
    CHECK_OK(entmtp_session_tokens(s, &toks, &n_before));
    entmtp_step_result r;
    memset(&r, 0, sizeof r);
    CHECK_ERR(entmtp_step(s, 0, &r), ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_step_result.struct_size = 0");
    CHECK_ERR(entmtp_step_ar(s, &r), ENTMTP_ERR_INVALID_ARGUMENT, "struct_size = 0");
    CHECK_OK(entmtp_session_tokens(s, &toks, &n_after));
    CHECK_EQ_INT(n_after, n_before);
    entmtp_session_stats stats = { sizeof stats };
    CHECK_OK(entmtp_session_get_stats(s, &stats));
    CHECK_EQ_INT(stats.n_steps, 0);

    /* an older caller's step result: the fields past its size stay untouched */
    raw_struct rr;
    memset(&rr, 0xAB, sizeof rr);
    rr.struct_size = offsetof(entmtp_step_result, n_tokens) + sizeof(int32_t);
    CHECK_OK(entmtp_step(s, 0, (entmtp_step_result *)&rr));
    CHECK(((entmtp_step_result *)&rr)->n_tokens >= 1);
    CHECK(tail_is(&rr, rr.struct_size, 0xAB));

    /* tree usage: -1 for a bad index or session */
    CHECK_EQ_INT(entmtp_session_tree_usage(s, 0), 1);
    CHECK_EQ_INT(entmtp_session_tree_usage(s, 1), -1);
    CHECK_EQ_INT(entmtp_session_tree_usage(s, -1), -1);
    CHECK_EQ_INT(entmtp_session_tree_usage(NULL, 0), -1);

    /* entmtp_generate: a callback stop is its own status, after the batch */
    int calls = 0;
    CHECK_OK(entmtp_session_tokens(s, &toks, &n_before));
    entmtp_status st = entmtp_generate(s, 50, 0, stop_after_first, &calls);
    CHECK_EQ_INT(st, ENTMTP_STOPPED);
    CHECK_EQ_INT(calls, 1);
    CHECK_OK(entmtp_session_tokens(s, &toks, &n_after));
    CHECK(n_after > n_before);
    CHECK(strstr(entmtp_status_string(ENTMTP_STOPPED), "ENTMTP_STOPPED") != NULL);

    /* custom policy errors: the callback's own message passes through */
    entmtp_policy_config pc = entmtp_policy_default_config(ENTMTP_POLICY_CUSTOM);
    pc.select = select_with_message;
    entmtp_policy *pol = NULL;
    CHECK_OK(entmtp_policy_create(&pc, &pol));
    CHECK_OK(entmtp_policy_set(s, pol));
    memset(&r, 0, sizeof r);
    r.struct_size = sizeof r;
    CHECK_ERR(entmtp_step(s, 0, &r), ENTMTP_ERR_CALLBACK, "my policy saw 3 heads and gave up");
    entmtp_policy_set(s, NULL);
    entmtp_policy_free(pol);
    /* ... and without one, the library names the callback */
    pc.select = select_silently;
    CHECK_OK(entmtp_policy_create(&pc, &pol));
    CHECK_OK(entmtp_policy_set(s, pol));
    CHECK_ERR(entmtp_step(s, 0, &r), ENTMTP_ERR_CALLBACK, "select callback returned");
    entmtp_policy_set(s, NULL);
    entmtp_policy_free(pol);
    /* a successful callback leaves the caller's earlier error alone */
    int32_t seen_heads = -1;
    pc.select = select_ok;
    pc.user_data = &seen_heads;
    CHECK_OK(entmtp_policy_create(&pc, &pol));
    CHECK_OK(entmtp_policy_set(s, pol));
    entmtp_set_error(ENTMTP_ERR_IO, "the caller's own earlier error");
    CHECK_OK(entmtp_step(s, 0, &r));
    CHECK_EQ_INT(seen_heads, 3);
    CHECK(strcmp(entmtp_last_error(), "the caller's own earlier error") == 0);
    entmtp_policy_set(s, NULL);
    entmtp_policy_free(pol);
    entmtp_session_free(s);
done:
    entmtp_bank_free(bank);
    entmtp_heads_free(h);
    entmtp_model_free(m);
}

static void check_set_error(void) {
    CHECK_EQ_INT(entmtp_set_error(ENTMTP_ERR_FORMAT, "x.json: bad"), ENTMTP_ERR_FORMAT);
    CHECK(strcmp(entmtp_last_error(), "x.json: bad") == 0);
    CHECK_EQ_INT(entmtp_set_error(ENTMTP_ERR_IO, NULL), ENTMTP_ERR_IO);
    CHECK(strstr(entmtp_last_error(), "ENTMTP_ERR_IO") != NULL);
}

int main(void) {
    check_initialisers();
    check_unknown_tail_refused();
    check_outputs_honour_size();
    check_limits();
    check_set_error();
    check_session();
    return emt_test_finish("test_abi_structs");
}
