/* Policies: pick a tree per step from the features. Each is a small state
 * machine over a copied config; see docs/policies.md. */
#include "policy/policy_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The payoff gate of the throughput and dynamic policies ("never slower
 * than AR", docs/policies.md). Their choice rests on *expected* accept
 * lengths; the gate checks what drafting steps actually emitted against
 * what plain steps would have in the same time: decayed sums of the tokens
 * of each step chosen while speculating and of its cost in plain AR steps
 * (the outlook's expected seconds of the chosen tree over a plain step's).
 * When the tokens fall below the cost the policy takes plain steps, and
 * after a wait (doubling while probes fail) drafts one step with the best
 * drafting tree to see whether drafts pay again. Only counts and the
 * outlook's figures enter, so a session that keeps the bank's costs
 * (reproducible) repeats its choices exactly. */
#define EMT_GATE_DECAY 0.95    /* a window of about 20 drafting steps */
#define EMT_GATE_PRIOR 2.0     /* plain-step units at break-even: a fresh gate, and one that just fell back */
#define EMT_GATE_MIN_STEPS 6   /* counted steps before the gate may fall back (3 misses in a row are common) */
#define EMT_GATE_FIRST_WAIT 8  /* plain steps before the first probe */
#define EMT_GATE_MAX_WAIT 128  /* the longest wait between probes */
/* Drafting within 2% of plain steps is within the promise (>= 0.98x AR):
 * the gate closes only below that, so that a drafter that pays a little,
 * measured against an estimated cost, does not flap; a probe must pay in
 * full to reopen it. */
#define EMT_GATE_CLOSE 0.98

typedef struct emt_payoff_gate {
    double tokens, cost;   /* decayed sums over the counted steps: tokens emitted, cost in plain steps */
    int32_t steps;         /* counted steps since the gate last (re)opened */
    int plain;             /* 1: drafts did not pay; plain steps, probing now and then */
    int32_t wait, backoff; /* plain steps left before the next probe; the current interval */
    int probing;           /* the step selected last is a probe */
    double pending_cost;   /* the step selected last: its cost in plain steps; 0 = not counted */
    int32_t ar_tree;       /* the root-only tree; -1 while not known */
} emt_payoff_gate;

static void gate_reset(emt_payoff_gate *g) {
    memset(g, 0, sizeof *g);
    g->tokens = g->cost = EMT_GATE_PRIOR;
    g->backoff = EMT_GATE_FIRST_WAIT;
    g->ar_tree = -1;
}

struct entmtp_policy {
    emt_policy_settings set;
    /* hysteresis */
    int aggressive;
    /* ucb */
    int32_t n_arms;
    int64_t *pulls;
    double *reward_sum;
    int64_t t;
    /* throughput and dynamic: the payoff gate (emt_policy_drafts) */
    emt_payoff_gate gate;
};

void emt_policy_settings_default(emt_policy_settings *out, entmtp_policy_kind kind) {
    memset(out, 0, sizeof *out);
    entmtp_policy_config *c = &out->cfg;
    c->struct_size = sizeof *c;
    c->kind = kind;
    c->static_tree = 0;
    c->n_thresholds = 0;
    for (int32_t b = 0; b < EMT_MAX_LADDER; b++) out->ladder_trees[b] = b;
    c->thresholds = out->thresholds;
    c->ladder_trees = out->ladder_trees;
    c->tau_on = 0.01f;
    c->tau_off = 0.01f;
    c->conservative_tree = 0;
    c->aggressive_tree = 1;
    c->ucb_exploration = 1.0f;
    c->ucb_length_penalty = 0.0f;
}

void emt_policy_settings_copy(emt_policy_settings *dst, const emt_policy_settings *src) {
    *dst = *src;
    dst->cfg.thresholds = dst->thresholds;
    dst->cfg.ladder_trees = dst->ladder_trees;
}

ENTMTP_API entmtp_status entmtp_policy_config_init(entmtp_policy_config *config, size_t size,
                                                   entmtp_policy_kind kind) {
    /* the caller's config points at no storage: defaults are NULL arrays
     * (no thresholds; ladder bin b -> tree b) */
    emt_policy_settings d;
    emt_policy_settings_default(&d, kind);
    d.cfg.thresholds = NULL;
    d.cfg.ladder_trees = NULL;
    return emt_init_versioned(config, size, &d.cfg, sizeof d.cfg, "entmtp_policy_config");
}

ENTMTP_API const char *entmtp_policy_kind_name(entmtp_policy_kind kind) {
    switch ((int)kind) {
    case ENTMTP_POLICY_STATIC: return "static";
    case ENTMTP_POLICY_LADDER: return "ladder";
    case ENTMTP_POLICY_HYSTERESIS: return "hysteresis";
    case ENTMTP_POLICY_UCB: return "ucb";
    case ENTMTP_POLICY_CUSTOM: return "custom";
    case EMT_POLICY_THROUGHPUT: return "throughput";
    case EMT_POLICY_DYNAMIC: return "dynamic";
    }
    return NULL;
}

ENTMTP_API entmtp_status entmtp_policy_kind_from_name(const char *name, entmtp_policy_kind *out) {
    if (!name || !out) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_policy_kind_from_name: NULL argument");
    for (int k = 0; k < EMT_POLICY_KIND_COUNT; k++)
        if (!strcmp(name, entmtp_policy_kind_name((entmtp_policy_kind)k))) {
            *out = (entmtp_policy_kind)k;
            return ENTMTP_OK;
        }
    return emt_fail(ENTMTP_ERR_NOT_FOUND, "policy kind '%s' is unknown (static, ladder, hysteresis, ucb, custom, throughput, dynamic)", name);
}

static entmtp_status validate_config(const entmtp_policy_config *c) {
#define BAD(...) return emt_fail(ENTMTP_ERR_INVALID_CONFIG, __VA_ARGS__)
    switch ((int)c->kind) {
    case ENTMTP_POLICY_STATIC:
        if (c->static_tree < 0) BAD("static: static_tree = %d is negative", c->static_tree);
        break;
    case ENTMTP_POLICY_LADDER:
        if (c->n_thresholds < 0 || c->n_thresholds > EMT_MAX_LADDER - 1)
            BAD("ladder: n_thresholds = %d is outside [0, %d]", c->n_thresholds, EMT_MAX_LADDER - 1);
        for (int32_t i = 0; i < c->n_thresholds; i++) {
            if (!isfinite(c->thresholds[i])) BAD("ladder: thresholds[%d] = %g is not finite", i, (double)c->thresholds[i]);
            if (i > 0 && !(c->thresholds[i] > c->thresholds[i - 1]))
                BAD("ladder: thresholds[%d] = %g is not above thresholds[%d] = %g", i, (double)c->thresholds[i], i - 1,
                    (double)c->thresholds[i - 1]);
        }
        for (int32_t b = 0; b <= c->n_thresholds; b++)
            if (c->ladder_trees[b] < 0) BAD("ladder: ladder_trees[%d] = %d is negative", b, c->ladder_trees[b]);
        break;
    case ENTMTP_POLICY_HYSTERESIS:
        if (!isfinite(c->tau_on)) BAD("hysteresis: tau_on = %g is not finite", (double)c->tau_on);
        if (!isfinite(c->tau_off)) BAD("hysteresis: tau_off = %g is not finite", (double)c->tau_off);
        if (c->tau_off > c->tau_on) BAD("hysteresis: tau_off (%g) > tau_on (%g)", (double)c->tau_off, (double)c->tau_on);
        if (c->conservative_tree < 0) BAD("hysteresis: conservative_tree = %d is negative", c->conservative_tree);
        if (c->aggressive_tree < 0) BAD("hysteresis: aggressive_tree = %d is negative", c->aggressive_tree);
        break;
    case ENTMTP_POLICY_UCB:
        if (!isfinite(c->ucb_exploration) || c->ucb_exploration < 0)
            BAD("ucb: ucb_exploration = %g must be finite and >= 0", (double)c->ucb_exploration);
        if (!isfinite(c->ucb_length_penalty) || c->ucb_length_penalty < 0)
            BAD("ucb: ucb_length_penalty = %g must be finite and >= 0", (double)c->ucb_length_penalty);
        break;
    case ENTMTP_POLICY_CUSTOM:
        if (!c->select) BAD("custom: the select callback is NULL");
        break;
    case EMT_POLICY_THROUGHPUT:
    case EMT_POLICY_DYNAMIC: break; /* no settings: they read the session's outlook */
    default:
        BAD("policy kind %d is unknown", (int)c->kind);
    }
#undef BAD
    return ENTMTP_OK;
}

entmtp_status emt_policy_settings_from(emt_policy_settings *out, const entmtp_policy_config *config) {
    if (config->struct_size < offsetof(entmtp_policy_config, kind) + sizeof config->kind)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_policy_config.struct_size = %zu; initialise it with entmtp_policy_config_init()",
                        config->struct_size);
    emt_policy_settings_default(out, config->kind);
    entmtp_policy_config c = out->cfg;
    entmtp_status st = emt_copy_versioned(&c, sizeof c, config, "entmtp_policy_config");
    if (st) return st;
    if (c.kind == ENTMTP_POLICY_LADDER) {
        if (c.n_thresholds < 0 || c.n_thresholds > EMT_MAX_LADDER - 1)
            return emt_fail(ENTMTP_ERR_INVALID_CONFIG, "ladder: n_thresholds = %d is outside [0, %d]", c.n_thresholds,
                            EMT_MAX_LADDER - 1);
        if (c.n_thresholds > 0 && !c.thresholds)
            return emt_fail(ENTMTP_ERR_INVALID_CONFIG, "ladder: thresholds is NULL but n_thresholds = %d", c.n_thresholds);
        for (int32_t i = 0; i < c.n_thresholds; i++) out->thresholds[i] = c.thresholds[i];
        if (c.ladder_trees)
            for (int32_t b = 0; b <= c.n_thresholds; b++) out->ladder_trees[b] = c.ladder_trees[b];
    }
    c.thresholds = out->thresholds;
    c.ladder_trees = out->ladder_trees;
    out->cfg = c;
    return validate_config(&out->cfg);
}

ENTMTP_API entmtp_status entmtp_policy_create(const entmtp_policy_config *config, entmtp_policy **out) {
    if (!config || !out) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_policy_create: config and out must not be NULL");
    *out = NULL;
    emt_policy_settings set;
    entmtp_status st = emt_policy_settings_from(&set, config);
    if (st) return st;
    entmtp_policy *p = emt_calloc(1, sizeof *p);
    if (!p) return ENTMTP_ERR_OUT_OF_MEMORY;
    emt_policy_settings_copy(&p->set, &set);
    gate_reset(&p->gate);
    *out = p;
    return ENTMTP_OK;
}

ENTMTP_API void entmtp_policy_free(entmtp_policy *p) {
    if (!p) return;
    free(p->pulls);
    free(p->reward_sum);
    free(p);
}

ENTMTP_API entmtp_policy_kind entmtp_policy_get_kind(const entmtp_policy *p) {
    return p ? p->set.cfg.kind : ENTMTP_POLICY_STATIC;
}

ENTMTP_API entmtp_status entmtp_policy_validate(const entmtp_policy *p, int32_t n_trees) {
    if (!p) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_policy_validate: policy is NULL");
    const entmtp_policy_config *c = &p->set.cfg;
    if (n_trees < 1) return emt_fail(ENTMTP_ERR_INVALID_CONFIG, "%s policy: the bank is empty", entmtp_policy_kind_name(c->kind));
#define CHECK_IDX(field, v)                                                                            \
    if ((v) >= n_trees)                                                                                \
        return emt_fail(ENTMTP_ERR_OUT_OF_RANGE, "%s policy: %s = %d is outside the bank of %d trees", \
                        entmtp_policy_kind_name(c->kind), field, (v), n_trees)
    switch (c->kind) {
    case ENTMTP_POLICY_STATIC: CHECK_IDX("static_tree", c->static_tree); break;
    case ENTMTP_POLICY_LADDER:
        for (int32_t b = 0; b <= c->n_thresholds; b++) {
            char f[32];
            snprintf(f, sizeof f, "ladder_trees[%d]", b);
            CHECK_IDX(f, c->ladder_trees[b]);
        }
        break;
    case ENTMTP_POLICY_HYSTERESIS:
        CHECK_IDX("conservative_tree", c->conservative_tree);
        CHECK_IDX("aggressive_tree", c->aggressive_tree);
        break;
    default: break;
    }
#undef CHECK_IDX
    return ENTMTP_OK;
}

static entmtp_status check_features(const entmtp_features *f) {
    if (!isfinite(f->s)) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "features.s = %g is not finite", (double)f->s);
    if (!isfinite(f->p0)) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "features.p0 = %g is not finite", (double)f->p0);
    return ENTMTP_OK;
}

static entmtp_status ucb_select(entmtp_policy *p, int32_t n_trees, int32_t *out) {
    if (n_trees > p->n_arms) { /* the bank grew (or first use): grow the arm state */
        int64_t *pulls = emt_realloc(p->pulls, (size_t)n_trees, sizeof *pulls);
        if (!pulls) return ENTMTP_ERR_OUT_OF_MEMORY;
        p->pulls = pulls;
        double *sum = emt_realloc(p->reward_sum, (size_t)n_trees, sizeof *sum);
        if (!sum) return ENTMTP_ERR_OUT_OF_MEMORY;
        p->reward_sum = sum;
        for (int32_t k = p->n_arms; k < n_trees; k++) { p->pulls[k] = 0; p->reward_sum[k] = 0; }
        p->n_arms = n_trees;
    }
    for (int32_t k = 0; k < n_trees; k++)
        if (p->pulls[k] == 0) { *out = k; return ENTMTP_OK; }
    double lt = log((double)(p->t > 0 ? p->t : 1));
    int32_t best = 0;
    double best_v = -INFINITY;
    for (int32_t k = 0; k < n_trees; k++) {
        double v = p->reward_sum[k] / (double)p->pulls[k] +
                   (double)p->set.cfg.ucb_exploration * sqrt(2.0 * lt / (double)p->pulls[k]);
        if (v > best_v) { best_v = v; best = k; }
    }
    *out = best;
    return ENTMTP_OK;
}

/* Expected throughput: the tree with the most expected tokens per expected
 * second. Ties go to the lower index (the bank lists smaller trees first). */
static entmtp_status throughput_select(const emt_tree_outlook *o, int32_t n_trees, int32_t *out) {
    if (!o || !o->expected_accept || !o->expected_seconds)
        return emt_fail(ENTMTP_ERR_STATE, "throughput/dynamic policy: no per-tree outlook (features.expected_accept and "
                                          "expected_seconds are NULL); attach the policy to a session with "
                                          "entmtp_policy_set, or set them");
    int32_t best = -1;
    double best_v = -INFINITY;
    for (int32_t k = 0; k < n_trees; k++) {
        double a = o->expected_accept[k], t = o->expected_seconds[k];
        if (!isfinite(a) || a < 1 || !isfinite(t) || !(t > 0))
            return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "throughput policy: tree %d has expected accept %g and step time %g s "
                                                         "(need a finite accept >= 1 and a time > 0)", k, a, t);
        if (a / t > best_v) { best_v = a / t; best = k; }
    }
    *out = best;
    return ENTMTP_OK;
}

/* The root-only tree of an outlook that does not name it: the cheapest
 * tree expected to emit exactly one token (ties to the lower index). */
static int32_t outlook_ar_tree(const emt_tree_outlook *o, int32_t n_trees) {
    if (o->ar_tree >= 0) return o->ar_tree < n_trees ? o->ar_tree : -1;
    int32_t a = -1;
    for (int32_t k = 0; k < n_trees; k++)
        if (o->expected_accept[k] <= 1.0f && (a < 0 || o->expected_seconds[k] < o->expected_seconds[a])) a = k;
    return a;
}

/* The throughput choice behind the payoff gate (above). */
static entmtp_status gated_select(entmtp_policy *p, const emt_tree_outlook *o, int32_t n_trees, int32_t *out) {
    emt_payoff_gate *g = &p->gate;
    g->pending_cost = 0;
    g->probing = 0;
    if (g->plain && g->wait > 0 && g->ar_tree >= 0 && g->ar_tree < n_trees) {
        g->wait--; /* a plain step: the outlook is not needed (the session has not drafted) */
        *out = g->ar_tree;
        return ENTMTP_OK;
    }
    int32_t k = 0;
    entmtp_status st = throughput_select(o, n_trees, &k);
    if (st) return st;
    int32_t a = outlook_ar_tree(o, n_trees);
    g->ar_tree = a;
    if (a < 0) { /* no plain step in the bank: nothing to fall back to */
        *out = k;
        return ENTMTP_OK;
    }
    if (g->plain) { /* the probe: the best drafting tree, whatever the outlook prefers */
        int32_t best = -1;
        for (int32_t j = 0; j < n_trees; j++)
            if (j != a && (best < 0 || o->expected_accept[j] / o->expected_seconds[j] >
                                           o->expected_accept[best] / o->expected_seconds[best]))
                best = j;
        if (best >= 0) {
            k = best;
            g->probing = 1;
        }
    }
    double plain = o->ar_seconds > 0 && isfinite(o->ar_seconds) ? o->ar_seconds : o->expected_seconds[a];
    double cost = o->expected_seconds[k] / plain;
    /* a root-only step that did no drafting work is a plain step: not counted */
    g->pending_cost = k != a || cost > 1.0 + 1e-9 ? cost : 0.0;
    *out = k;
    return ENTMTP_OK;
}

static void gate_observe(emt_payoff_gate *g, int32_t accept_length) {
    if (!(g->pending_cost > 0)) return;
    /* a probe is judged on its own (from break-even), not on the failed
     * probes before it: the text may have changed since */
    if (g->probing) g->tokens = g->cost = EMT_GATE_PRIOR;
    g->tokens = EMT_GATE_DECAY * g->tokens + accept_length;
    g->cost = EMT_GATE_DECAY * g->cost + g->pending_cost;
    g->pending_cost = 0;
    int pays = g->tokens >= g->cost;
    if (g->probing) {
        g->probing = 0;
        if (pays) { /* drafts pay again: back to the throughput choice */
            g->plain = 0;
            g->steps = 0;
            g->backoff = EMT_GATE_FIRST_WAIT;
        } else {
            g->backoff = g->backoff * 2 < EMT_GATE_MAX_WAIT ? g->backoff * 2 : EMT_GATE_MAX_WAIT;
            g->wait = g->backoff;
        }
        return;
    }
    if (++g->steps >= EMT_GATE_MIN_STEPS && g->tokens < EMT_GATE_CLOSE * g->cost) {
        /* fall back; the sums restart at break-even so that a probe's own
         * result decides whether drafting resumes */
        g->plain = 1;
        g->wait = g->backoff;
        g->tokens = g->cost = EMT_GATE_PRIOR;
    }
}

int emt_policy_drafts(const entmtp_policy *p) {
    return !(emt_policy_needs_outlook(p) && p->gate.plain && p->gate.wait > 0 && p->gate.ar_tree >= 0);
}

int emt_policy_needs_outlook(const entmtp_policy *p) {
    return p && (p->set.cfg.kind == EMT_POLICY_THROUGHPUT || p->set.cfg.kind == EMT_POLICY_DYNAMIC);
}

int emt_policy_wants_dynamic_tree(const entmtp_policy *p) { return p && p->set.cfg.kind == EMT_POLICY_DYNAMIC; }

int emt_policy_shows_outlook(const entmtp_policy *p) {
    return emt_policy_needs_outlook(p) || (p && p->set.cfg.kind == ENTMTP_POLICY_CUSTOM);
}

int32_t emt_policy_static_tree(const entmtp_policy *p) {
    return p && p->set.cfg.kind == ENTMTP_POLICY_STATIC ? p->set.cfg.static_tree : -1;
}

entmtp_status emt_policy_select_outlook(entmtp_policy *p, const entmtp_features *f, const emt_tree_outlook *outlook,
                                        int32_t n_trees, int32_t *out_index) {
    if (!p || !f || !out_index)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_policy_select: policy, features and out_index must not be NULL");
    if (n_trees < 1) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_policy_select: n_trees = %d", n_trees);
    entmtp_status st = emt_check_versioned(f, sizeof *f, "entmtp_features");
    if (st) return st;
    /* the caller's struct may be an older, smaller one: read only its bytes,
     * and show a custom callback the library's struct with the rest zero */
    size_t given;
    memcpy(&given, f, sizeof given);
    entmtp_features full;
    if (given < sizeof full) {
        memset(&full, 0, sizeof full);
        memcpy(&full, f, given);
        full.struct_size = sizeof full;
        f = &full;
    }
    emt_tree_outlook from_features = { f->expected_accept, f->expected_seconds, -1, 0.0 };
    if (!outlook && emt_policy_needs_outlook(p) && (f->expected_accept || f->expected_seconds)) {
        if (!f->expected_accept || !f->expected_seconds)
            return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_policy_select: features.%s is NULL but %s is set; "
                                                         "give both or neither",
                            f->expected_accept ? "expected_seconds" : "expected_accept",
                            f->expected_accept ? "expected_accept" : "expected_seconds");
        if (f->n_trees != n_trees)
            return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_policy_select: features.n_trees = %d but n_trees = %d; "
                                                         "the outlook needs one entry per tree", f->n_trees, n_trees);
        outlook = &from_features;
    }
    const entmtp_policy_config *c = &p->set.cfg;
    int32_t k = 0;
    if ((c->kind == ENTMTP_POLICY_LADDER || c->kind == ENTMTP_POLICY_HYSTERESIS) && (st = check_features(f))) return st;
    switch ((int)c->kind) {
    case ENTMTP_POLICY_STATIC: k = c->static_tree; break;
    case ENTMTP_POLICY_LADDER: {
        int32_t b = 0;
        while (b < c->n_thresholds && f->s > c->thresholds[b]) b++;
        k = c->ladder_trees[b];
        break;
    }
    case ENTMTP_POLICY_HYSTERESIS:
        if (!p->aggressive && f->s > c->tau_on) p->aggressive = 1;
        else if (p->aggressive && f->s <= c->tau_off) p->aggressive = 0;
        k = p->aggressive ? c->aggressive_tree : c->conservative_tree;
        break;
    case ENTMTP_POLICY_UCB:
        if ((st = ucb_select(p, n_trees, &k))) return st;
        break;
    case EMT_POLICY_THROUGHPUT:
    case EMT_POLICY_DYNAMIC:
        if ((st = gated_select(p, outlook, n_trees, &k))) return st;
        break;
    case ENTMTP_POLICY_CUSTOM: {
        /* the caller's earlier error stays; a message the callback set with
         * entmtp_set_error is passed through */
        uint64_t serial = emt_error_serial();
        k = -1;
        st = c->select(c->user_data, f, n_trees, &k);
        if (st != ENTMTP_OK) {
            if (emt_error_serial() == serial)
                emt_fail(st, "custom policy: the select callback returned %s", entmtp_status_string(st));
            return st;
        }
        break;
    }
    }
    if (k < 0 || k >= n_trees)
        return emt_fail(ENTMTP_ERR_OUT_OF_RANGE, "%s policy chose tree %d, outside the bank [0, %d)",
                        entmtp_policy_kind_name(c->kind), k, n_trees);
    *out_index = k;
    return ENTMTP_OK;
}

ENTMTP_API entmtp_status entmtp_policy_select(entmtp_policy *p, const entmtp_features *f, int32_t n_trees,
                                              int32_t *out_index) {
    return emt_policy_select_outlook(p, f, NULL, n_trees, out_index);
}

ENTMTP_API entmtp_status entmtp_policy_observe(entmtp_policy *p, const entmtp_outcome *o) {
    if (!p || !o) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_policy_observe: policy and outcome must not be NULL");
    entmtp_status st = emt_check_versioned(o, sizeof *o, "entmtp_outcome");
    if (st) return st;
    if (o->accept_length < 1)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_policy_observe: outcome.accept_length = %d must be >= 1", o->accept_length);
    if (p->set.cfg.kind == ENTMTP_POLICY_UCB) {
        if (o->tree_index < 0 || o->tree_index >= p->n_arms)
            return emt_fail(ENTMTP_ERR_OUT_OF_RANGE, "ucb policy: outcome.tree_index = %d was never selected (%d arms)",
                            o->tree_index, p->n_arms);
        /* the Mamba-drafter reward: -(1 + lambda_gamma * gamma) / N_accept */
        double r = -(1.0 + (double)p->set.cfg.ucb_length_penalty * (double)o->draft_length) / (double)o->accept_length;
        p->pulls[o->tree_index]++;
        p->reward_sum[o->tree_index] += r;
        p->t++;
    } else if (emt_policy_needs_outlook(p)) {
        gate_observe(&p->gate, o->accept_length);
    } else if (p->set.cfg.kind == ENTMTP_POLICY_CUSTOM && p->set.cfg.observe) {
        p->set.cfg.observe(p->set.cfg.user_data, o);
    }
    return ENTMTP_OK;
}

ENTMTP_API void entmtp_policy_reset(entmtp_policy *p) {
    if (!p) return;
    p->aggressive = 0;
    for (int32_t k = 0; k < p->n_arms; k++) { p->pulls[k] = 0; p->reward_sum[k] = 0; }
    p->t = 0;
    gate_reset(&p->gate);
    if (p->set.cfg.kind == ENTMTP_POLICY_CUSTOM && p->set.cfg.reset) p->set.cfg.reset(p->set.cfg.user_data);
}
