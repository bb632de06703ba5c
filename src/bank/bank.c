/* The TopologyBank: compiled trees, their measured figures and the
 * calibrated policy settings; JSON load/save (docs/bank-format.md). */
#include "bank/tree.h"
#include "policy/policy_internal.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

struct entmtp_bank {
    entmtp_bank_params p;
    emt_tree *trees;
    int32_t n, cap;
    int has_policy[EMT_POLICY_KIND_COUNT];           /* by kind; CUSTOM never */
    emt_policy_settings policy[EMT_POLICY_KIND_COUNT];
    int32_t default_policy; /* kind, or -1 */
};

static const entmtp_bank_params g_bank_defaults = { sizeof g_bank_defaults, EMT_MAX_HEADS, 10, 256 };

ENTMTP_API entmtp_status entmtp_bank_params_init(entmtp_bank_params *params, size_t size) {
    return emt_init_versioned(params, size, &g_bank_defaults, sizeof g_bank_defaults, "entmtp_bank_params");
}

ENTMTP_API entmtp_status entmtp_bank_create(const entmtp_bank_params *params, entmtp_bank **out) {
    if (!out) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_bank_create: out_bank is NULL");
    *out = NULL;
    entmtp_bank_params p = g_bank_defaults;
    entmtp_status st = emt_copy_versioned(&p, sizeof p, params, "entmtp_bank_params");
    if (st) return st;
    if (p.max_depth < 1 || p.max_depth > EMT_MAX_HEADS)
        return emt_fail(ENTMTP_ERR_INVALID_CONFIG, "bank params: max_depth = %d outside [1, %d]", p.max_depth, EMT_MAX_HEADS);
    if (p.topk < 1 || p.topk > EMT_MAX_TOPK)
        return emt_fail(ENTMTP_ERR_INVALID_CONFIG, "bank params: topk = %d outside [1, %d]", p.topk, EMT_MAX_TOPK);
    if (p.max_nodes < 1 || p.max_nodes > EMT_MAX_TREE_NODES)
        return emt_fail(ENTMTP_ERR_INVALID_CONFIG, "bank params: max_nodes = %d outside [1, %d]", p.max_nodes,
                        EMT_MAX_TREE_NODES);
    entmtp_bank *b = emt_calloc(1, sizeof *b);
    if (!b) return ENTMTP_ERR_OUT_OF_MEMORY;
    b->p = p;
    b->default_policy = -1;
    *out = b;
    return ENTMTP_OK;
}

ENTMTP_API void entmtp_bank_free(entmtp_bank *b) {
    if (!b) return;
    for (int32_t i = 0; i < b->n; i++) emt_tree_destroy(&b->trees[i]);
    free(b->trees);
    free(b);
}

ENTMTP_API int32_t entmtp_bank_size(const entmtp_bank *b) { return b ? b->n : 0; }

ENTMTP_API entmtp_status entmtp_bank_find(const entmtp_bank *b, const char *name, int32_t *out) {
    if (!b || !name || !out) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_bank_find: NULL argument");
    for (int32_t i = 0; i < b->n; i++)
        if (!strcmp(b->trees[i].name, name)) { *out = i; return ENTMTP_OK; }
    return emt_fail(ENTMTP_ERR_NOT_FOUND, "bank has no tree named '%s'", name);
}

ENTMTP_API entmtp_status entmtp_bank_add_tree(entmtp_bank *b, const char *name, const int32_t *ranks,
                                              const int32_t *path_lengths, int32_t n_paths, int32_t *out_index) {
    if (!b) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_bank_add_tree: bank is NULL");
    if (!name || !name[0]) return emt_fail(ENTMTP_ERR_INVALID_TREE, "entmtp_bank_add_tree: a tree needs a non-empty name");
    if (strlen(name) > 255) return emt_fail(ENTMTP_ERR_INVALID_TREE, "entmtp_bank_add_tree: tree name longer than 255 bytes");
    for (int32_t i = 0; i < b->n; i++)
        if (!strcmp(b->trees[i].name, name))
            return emt_fail(ENTMTP_ERR_INVALID_TREE, "bank already has a tree named '%s' (index %d)", name, i);
    if (b->n == b->cap) {
        int32_t cap = b->cap ? 2 * b->cap : 8;
        emt_tree *t = emt_realloc(b->trees, (size_t)cap, sizeof *t);
        if (!t) return ENTMTP_ERR_OUT_OF_MEMORY;
        b->trees = t;
        b->cap = cap;
    }
    emt_tree t;
    entmtp_status st = emt_tree_compile(name, ranks, path_lengths, n_paths, b->p.topk, b->p.max_depth, b->p.max_nodes, &t);
    if (st) return st;
    b->trees[b->n] = t;
    if (out_index) *out_index = b->n;
    b->n++;
    return ENTMTP_OK;
}

ENTMTP_API entmtp_status entmtp_bank_add_tree_json(entmtp_bank *b, const char *name, const char *json, int32_t *out_index) {
    if (!b || !json) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_bank_add_tree_json: bank and choices_json must not be NULL");
    int32_t *ranks, *lens, n;
    entmtp_status st = emt_parse_choices_json(json, &ranks, &lens, &n);
    if (st) return st;
    st = entmtp_bank_add_tree(b, name, ranks, lens, n, out_index);
    free(ranks);
    free(lens);
    return st;
}

ENTMTP_API entmtp_status entmtp_bank_add_builtin(entmtp_bank *b, const char *builtin_name, int32_t *out_index) {
    const int32_t *ranks, *lens;
    int32_t n;
    if (!b) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_bank_add_builtin: bank is NULL");
    entmtp_status st = emt_builtin_tree(builtin_name, &ranks, &lens, &n);
    if (st) return st;
    return entmtp_bank_add_tree(b, builtin_name, ranks, lens, n, out_index);
}

static entmtp_status check_index(const entmtp_bank *b, int32_t i, const char *fn) {
    if (!b) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "%s: bank is NULL", fn);
    if (i < 0 || i >= b->n) return emt_fail(ENTMTP_ERR_OUT_OF_RANGE, "%s: tree index %d outside [0, %d)", fn, i, b->n);
    return ENTMTP_OK;
}

ENTMTP_API entmtp_status entmtp_bank_tree_info(const entmtp_bank *b, int32_t i, entmtp_tree_info *out) {
    entmtp_status st = check_index(b, i, "entmtp_bank_tree_info");
    if (st) return st;
    if (!out) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_bank_tree_info: out is NULL");
    const emt_tree *t = &b->trees[i];
    entmtp_tree_info info = { sizeof info, t->name, t->n_nodes, t->depth, t->n_paths, t->n_leaves,
                              t->mean_accept_length, t->tokens_per_second };
    return emt_copy_out(out, &info, sizeof info, "entmtp_tree_info");
}

ENTMTP_API entmtp_status entmtp_bank_set_figures(entmtp_bank *b, int32_t i, float mal, float tps) {
    entmtp_status st = check_index(b, i, "entmtp_bank_set_figures");
    if (st) return st;
    if (!isfinite(mal) || mal < 0 || !isfinite(tps) || tps < 0)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_bank_set_figures: figures must be finite and >= 0 (got %g, %g)",
                        (double)mal, (double)tps);
    b->trees[i].mean_accept_length = mal;
    b->trees[i].tokens_per_second = tps;
    return ENTMTP_OK;
}

ENTMTP_API entmtp_status entmtp_bank_tree_buffers(const entmtp_bank *b, int32_t i, entmtp_tree_buffers *out) {
    entmtp_status st = check_index(b, i, "entmtp_bank_tree_buffers");
    if (st) return st;
    if (!out) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_bank_tree_buffers: out is NULL");
    const emt_tree *t = &b->trees[i];
    entmtp_tree_buffers buf = { sizeof buf, t->n_nodes, t->depth, t->topk, t->attn_mask, t->tree_indices,
                                t->position_ids, t->retrieve_indices, t->n_leaves, t->parents, t->node_ranks };
    return emt_copy_out(out, &buf, sizeof buf, "entmtp_tree_buffers");
}

const emt_tree *emt_bank_tree(const entmtp_bank *b, int32_t i) { return &b->trees[i]; }

ENTMTP_API entmtp_status entmtp_bank_default_policy(const entmtp_bank *b, entmtp_policy_kind *out_kind) {
    if (!b || !out_kind) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_bank_default_policy: NULL argument");
    if (b->default_policy < 0) return emt_fail(ENTMTP_ERR_NOT_FOUND, "the bank holds no policy settings");
    *out_kind = (entmtp_policy_kind)b->default_policy;
    return ENTMTP_OK;
}

int32_t emt_bank_max_nodes_used(const entmtp_bank *b) {
    int32_t m = 1;
    for (int32_t i = 0; i < b->n; i++) if (b->trees[i].n_nodes > m) m = b->trees[i].n_nodes;
    return m;
}

int32_t emt_bank_max_depth_used(const entmtp_bank *b) {
    int32_t m = 0;
    for (int32_t i = 0; i < b->n; i++) if (b->trees[i].depth > m) m = b->trees[i].depth;
    return m;
}

ENTMTP_API entmtp_status entmtp_bank_set_policy_config(entmtp_bank *b, const entmtp_policy_config *c) {
    if (!b || !c) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_bank_set_policy_config: NULL argument");
    if (c->struct_size < offsetof(entmtp_policy_config, kind) + sizeof c->kind)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_policy_config.struct_size = %zu is too small", c->struct_size);
    if (c->kind < ENTMTP_POLICY_STATIC || c->kind >= EMT_POLICY_KIND_COUNT || c->kind == ENTMTP_POLICY_CUSTOM)
        return emt_fail(ENTMTP_ERR_INVALID_CONFIG, "bank: policy kind %d cannot be stored (custom policies live in code)", (int)c->kind);
    emt_policy_settings full;
    entmtp_status st = emt_policy_settings_from(&full, c);
    if (st) return st;
    entmtp_policy *probe = NULL;
    if ((st = entmtp_policy_create(&full.cfg, &probe))) return st;
    st = entmtp_policy_validate(probe, b->n);
    entmtp_policy_free(probe);
    if (st) return st;
    full.cfg.select = NULL;
    full.cfg.observe = NULL;
    full.cfg.reset = NULL;
    full.cfg.user_data = NULL;
    emt_policy_settings_copy(&b->policy[c->kind], &full);
    b->has_policy[c->kind] = 1;
    if (b->default_policy < 0) b->default_policy = c->kind;
    return ENTMTP_OK;
}

ENTMTP_API entmtp_status entmtp_bank_policy_config(const entmtp_bank *b, entmtp_policy_kind kind, entmtp_policy_config *out) {
    if (!b || !out) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_bank_policy_config: NULL argument");
    if (kind < ENTMTP_POLICY_STATIC || kind >= EMT_POLICY_KIND_COUNT || kind == ENTMTP_POLICY_CUSTOM || !b->has_policy[kind])
        return emt_fail(ENTMTP_ERR_NOT_FOUND, "bank holds no '%s' policy settings",
                        entmtp_policy_kind_name(kind) ? entmtp_policy_kind_name(kind) : "?");
    return emt_copy_out(out, &b->policy[kind].cfg, sizeof b->policy[kind].cfg, "entmtp_policy_config");
}

/* ------------------------------------------------------------------ JSON */

static entmtp_status tree_ref(const entmtp_bank *b, const cJSON *v, const char *file, const char *where, int32_t *out) {
    if (cJSON_IsString(v)) {
        for (int32_t i = 0; i < b->n; i++)
            if (!strcmp(b->trees[i].name, v->valuestring)) { *out = i; return ENTMTP_OK; }
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: %s: no tree named '%s' in the bank", file, where, v->valuestring);
    }
    if (cJSON_IsNumber(v) && v->valuedouble == floor(v->valuedouble) && v->valuedouble >= 0 && v->valuedouble < b->n) {
        *out = (int32_t)v->valuedouble;
        return ENTMTP_OK;
    }
    return emt_fail(ENTMTP_ERR_FORMAT, "%s: %s: expected a tree name or index", file, where);
}

static entmtp_status num_field(const cJSON *o, const char *key, const char *file, const char *where, float *out) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!v) return ENTMTP_OK;
    /* finite as a float, not only as a double: 1e300 would become inf */
    if (!cJSON_IsNumber(v) || !isfinite((float)v->valuedouble))
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: %s.%s must be a finite number within float range", file, where, key);
    *out = (float)v->valuedouble;
    return ENTMTP_OK;
}

static entmtp_status load_policy(entmtp_bank *b, const cJSON *pol, const char *file) {
    if (!cJSON_IsObject(pol)) return emt_fail(ENTMTP_ERR_FORMAT, "%s: \"policy\" must be an object", file);
    entmtp_status st;
    const cJSON *o;
    int32_t idx;
    if ((o = cJSON_GetObjectItemCaseSensitive(pol, "static"))) {
        entmtp_policy_config c = entmtp_policy_default_config(ENTMTP_POLICY_STATIC);
        const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "tree");
        if (t) { if ((st = tree_ref(b, t, file, "policy.static.tree", &idx))) return st; c.static_tree = idx; }
        if ((st = entmtp_bank_set_policy_config(b, &c))) { emt_error_prefix("%s: policy.static: ", file); return ENTMTP_ERR_FORMAT; }
    }
    if ((o = cJSON_GetObjectItemCaseSensitive(pol, "ladder"))) {
        entmtp_policy_config c = entmtp_policy_default_config(ENTMTP_POLICY_LADDER);
        float thresholds[EMT_MAX_LADDER - 1];
        int32_t ladder_trees[EMT_MAX_LADDER];
        c.thresholds = thresholds;
        const cJSON *th = cJSON_GetObjectItemCaseSensitive(o, "thresholds"), *tr = cJSON_GetObjectItemCaseSensitive(o, "trees");
        if (!cJSON_IsArray(th) || cJSON_GetArraySize(th) > EMT_MAX_LADDER - 1)
            return emt_fail(ENTMTP_ERR_FORMAT, "%s: policy.ladder.thresholds must be a list of at most %d numbers", file, EMT_MAX_LADDER - 1);
        const cJSON *v;
        c.n_thresholds = 0;
        cJSON_ArrayForEach(v, th) {
            if (!cJSON_IsNumber(v) || !isfinite((float)v->valuedouble))
                return emt_fail(ENTMTP_ERR_FORMAT, "%s: policy.ladder.thresholds[%d] is not a finite number within float range", file, c.n_thresholds);
            thresholds[c.n_thresholds++] = (float)v->valuedouble;
        }
        if (tr) {
            if (!cJSON_IsArray(tr) || cJSON_GetArraySize(tr) != c.n_thresholds + 1)
                return emt_fail(ENTMTP_ERR_FORMAT, "%s: policy.ladder.trees must list %d trees (one per bin)", file, c.n_thresholds + 1);
            int32_t k = 0;
            cJSON_ArrayForEach(v, tr) {
                char where[64];
                snprintf(where, sizeof where, "policy.ladder.trees[%d]", k);
                if ((st = tree_ref(b, v, file, where, &idx))) return st;
                ladder_trees[k++] = idx;
            }
            c.ladder_trees = ladder_trees;
        }
        if ((st = entmtp_bank_set_policy_config(b, &c))) { emt_error_prefix("%s: policy.ladder: ", file); return ENTMTP_ERR_FORMAT; }
    }
    if ((o = cJSON_GetObjectItemCaseSensitive(pol, "hysteresis"))) {
        entmtp_policy_config c = entmtp_policy_default_config(ENTMTP_POLICY_HYSTERESIS);
        if ((st = num_field(o, "tau_on", file, "policy.hysteresis", &c.tau_on)) ||
            (st = num_field(o, "tau_off", file, "policy.hysteresis", &c.tau_off)))
            return st;
        const cJSON *t;
        if ((t = cJSON_GetObjectItemCaseSensitive(o, "conservative_tree"))) {
            if ((st = tree_ref(b, t, file, "policy.hysteresis.conservative_tree", &idx))) return st;
            c.conservative_tree = idx;
        }
        if ((t = cJSON_GetObjectItemCaseSensitive(o, "aggressive_tree"))) {
            if ((st = tree_ref(b, t, file, "policy.hysteresis.aggressive_tree", &idx))) return st;
            c.aggressive_tree = idx;
        }
        if ((st = entmtp_bank_set_policy_config(b, &c))) { emt_error_prefix("%s: policy.hysteresis: ", file); return ENTMTP_ERR_FORMAT; }
    }
    if ((o = cJSON_GetObjectItemCaseSensitive(pol, "ucb"))) {
        entmtp_policy_config c = entmtp_policy_default_config(ENTMTP_POLICY_UCB);
        if ((st = num_field(o, "exploration", file, "policy.ucb", &c.ucb_exploration)) ||
            (st = num_field(o, "length_penalty", file, "policy.ucb", &c.ucb_length_penalty)))
            return st;
        if ((st = entmtp_bank_set_policy_config(b, &c))) { emt_error_prefix("%s: policy.ucb: ", file); return ENTMTP_ERR_FORMAT; }
    }
    /* the policies without settings: an empty object stores them */
    const entmtp_policy_kind plain[2] = { EMT_POLICY_THROUGHPUT, EMT_POLICY_DYNAMIC };
    for (int i = 0; i < 2; i++) {
        const char *name = entmtp_policy_kind_name(plain[i]);
        if (!(o = cJSON_GetObjectItemCaseSensitive(pol, name))) continue;
        if (!cJSON_IsObject(o)) return emt_fail(ENTMTP_ERR_FORMAT, "%s: policy.%s must be an object", file, name);
        entmtp_policy_config c = entmtp_policy_default_config(plain[i]);
        if ((st = entmtp_bank_set_policy_config(b, &c))) { emt_error_prefix("%s: policy.%s: ", file, name); return ENTMTP_ERR_FORMAT; }
    }
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(pol, "default");
    if (d) {
        entmtp_policy_kind k;
        if (!cJSON_IsString(d) || entmtp_policy_kind_from_name(d->valuestring, &k) || k == ENTMTP_POLICY_CUSTOM || !b->has_policy[k])
            return emt_fail(ENTMTP_ERR_FORMAT, "%s: policy.default must name a policy whose settings the file holds", file);
        b->default_policy = k;
    }
    return ENTMTP_OK;
}

ENTMTP_API entmtp_status entmtp_bank_load(const char *path, const entmtp_bank_params *params, entmtp_bank **out) {
    if (!path || !out) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_bank_load: path and out_bank must not be NULL");
    *out = NULL;
    char *text;
    entmtp_status st = emt_read_file(path, &text, NULL);
    if (st) return st;
    cJSON *root = cJSON_Parse(text);
    free(text);
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: not a JSON object", path);
    }
    entmtp_bank *b = NULL;
    if ((st = entmtp_bank_create(params, &b))) { cJSON_Delete(root); return st; }
    const cJSON *trees = cJSON_GetObjectItemCaseSensitive(root, "trees");
    if (!cJSON_IsArray(trees)) { st = emt_fail(ENTMTP_ERR_FORMAT, "%s: \"trees\" must be a list", path); goto done; }
    const cJSON *t;
    int32_t i = 0;
    cJSON_ArrayForEach(t, trees) {
        const cJSON *name = cJSON_GetObjectItemCaseSensitive(t, "name");
        const cJSON *choices = cJSON_GetObjectItemCaseSensitive(t, "choices");
        if (!cJSON_IsObject(t) || !cJSON_IsString(name) || !cJSON_IsArray(choices)) {
            st = emt_fail(ENTMTP_ERR_FORMAT, "%s: trees[%d] needs a string \"name\" and a \"choices\" list", path, i);
            goto done;
        }
        char *cj = cJSON_PrintUnformatted(choices);
        if (!cj) { st = ENTMTP_ERR_OUT_OF_MEMORY; goto done; }
        int32_t idx;
        st = entmtp_bank_add_tree_json(b, name->valuestring, cj, &idx);
        cJSON_free(cj);
        if (st) {
            emt_error_prefix("%s: trees[%d]: ", path, i);
            goto done;
        }
        const emt_tree *tr = &b->trees[idx];
        const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(t, "nodes"), *depth = cJSON_GetObjectItemCaseSensitive(t, "depth");
        if (nodes && (!cJSON_IsNumber(nodes) || nodes->valuedouble != tr->n_nodes)) {
            st = emt_fail(ENTMTP_ERR_FORMAT, "%s: trees[%d].nodes disagrees with its choices (%d nodes)", path, i, tr->n_nodes);
            goto done;
        }
        if (depth && (!cJSON_IsNumber(depth) || depth->valuedouble != tr->depth)) {
            st = emt_fail(ENTMTP_ERR_FORMAT, "%s: trees[%d].depth disagrees with its choices (depth %d)", path, i, tr->depth);
            goto done;
        }
        float mal = 0, tps = 0;
        char where[32];
        snprintf(where, sizeof where, "trees[%d]", i);
        if ((st = num_field(t, "mean_accept_length", path, where, &mal)) || (st = num_field(t, "tokens_per_second", path, where, &tps)))
            goto done;
        if (mal < 0 || tps < 0) { st = emt_fail(ENTMTP_ERR_FORMAT, "%s: trees[%d]: figures must be >= 0", path, i); goto done; }
        b->trees[idx].mean_accept_length = mal;
        b->trees[idx].tokens_per_second = tps;
        i++;
    }
    const cJSON *pol = cJSON_GetObjectItemCaseSensitive(root, "policy");
    if (pol && (st = load_policy(b, pol, path))) goto done;
done:
    cJSON_Delete(root);
    if (st) { entmtp_bank_free(b); return st; }
    *out = b;
    return ENTMTP_OK;
}

static cJSON *tree_name_json(const entmtp_bank *b, int32_t i) { return cJSON_CreateString(b->trees[i].name); }

ENTMTP_API entmtp_status entmtp_bank_save(const entmtp_bank *b, const char *path) {
    if (!b || !path) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "entmtp_bank_save: bank and path must not be NULL");
    cJSON *root = cJSON_CreateObject(), *trees = cJSON_AddArrayToObject(root, "trees");
    for (int32_t i = 0; i < b->n; i++) {
        const emt_tree *t = &b->trees[i];
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "name", t->name);
        cJSON *ch = cJSON_AddArrayToObject(o, "choices");
        for (int32_t p = 0; p < t->n_paths; p++) {
            cJSON *path_arr = cJSON_CreateArray();
            for (int32_t k = t->path_offsets[p]; k < t->path_offsets[p + 1]; k++) cJSON_AddItemToArray(path_arr, cJSON_CreateNumber(t->ranks[k]));
            cJSON_AddItemToArray(ch, path_arr);
        }
        cJSON_AddNumberToObject(o, "nodes", t->n_nodes);
        cJSON_AddNumberToObject(o, "depth", t->depth);
        cJSON_AddNumberToObject(o, "mean_accept_length", t->mean_accept_length);
        cJSON_AddNumberToObject(o, "tokens_per_second", t->tokens_per_second);
        cJSON_AddItemToArray(trees, o);
    }
    int any = 0;
    for (int k = 0; k < EMT_POLICY_KIND_COUNT; k++) any |= b->has_policy[k];
    if (any) {
        cJSON *pol = cJSON_AddObjectToObject(root, "policy");
        if (b->default_policy >= 0) cJSON_AddStringToObject(pol, "default", entmtp_policy_kind_name((entmtp_policy_kind)b->default_policy));
        if (b->has_policy[ENTMTP_POLICY_STATIC]) {
            cJSON *o = cJSON_AddObjectToObject(pol, "static");
            cJSON_AddItemToObject(o, "tree", tree_name_json(b, b->policy[ENTMTP_POLICY_STATIC].cfg.static_tree));
        }
        if (b->has_policy[ENTMTP_POLICY_LADDER]) {
            const entmtp_policy_config *c = &b->policy[ENTMTP_POLICY_LADDER].cfg;
            cJSON *o = cJSON_AddObjectToObject(pol, "ladder");
            cJSON *th = cJSON_AddArrayToObject(o, "thresholds"), *tr = cJSON_AddArrayToObject(o, "trees");
            for (int32_t k = 0; k < c->n_thresholds; k++) cJSON_AddItemToArray(th, cJSON_CreateNumber(c->thresholds[k]));
            for (int32_t k = 0; k <= c->n_thresholds; k++) cJSON_AddItemToArray(tr, tree_name_json(b, c->ladder_trees[k]));
        }
        if (b->has_policy[ENTMTP_POLICY_HYSTERESIS]) {
            const entmtp_policy_config *c = &b->policy[ENTMTP_POLICY_HYSTERESIS].cfg;
            cJSON *o = cJSON_AddObjectToObject(pol, "hysteresis");
            cJSON_AddNumberToObject(o, "tau_on", c->tau_on);
            cJSON_AddNumberToObject(o, "tau_off", c->tau_off);
            cJSON_AddItemToObject(o, "conservative_tree", tree_name_json(b, c->conservative_tree));
            cJSON_AddItemToObject(o, "aggressive_tree", tree_name_json(b, c->aggressive_tree));
        }
        if (b->has_policy[ENTMTP_POLICY_UCB]) {
            cJSON *o = cJSON_AddObjectToObject(pol, "ucb");
            cJSON_AddNumberToObject(o, "exploration", b->policy[ENTMTP_POLICY_UCB].cfg.ucb_exploration);
            cJSON_AddNumberToObject(o, "length_penalty", b->policy[ENTMTP_POLICY_UCB].cfg.ucb_length_penalty);
        }
        if (b->has_policy[EMT_POLICY_THROUGHPUT]) cJSON_AddObjectToObject(pol, "throughput");
        if (b->has_policy[EMT_POLICY_DYNAMIC]) cJSON_AddObjectToObject(pol, "dynamic");
    }
    char *text = cJSON_Print(root);
    cJSON_Delete(root);
    if (!text) return emt_fail(ENTMTP_ERR_OUT_OF_MEMORY, "entmtp_bank_save: out of memory");
    FILE *f = fopen(path, "w");
    if (!f) { cJSON_free(text); return emt_fail(ENTMTP_ERR_IO, "%s: cannot create", path); }
    size_t n = strlen(text);
    int bad = fwrite(text, 1, n, f) != n;
    bad |= fputc('\n', f) == EOF;
    bad |= fclose(f) != 0;
    cJSON_free(text);
    return bad ? emt_fail(ENTMTP_ERR_IO, "%s: write failed", path) : ENTMTP_OK;
}
