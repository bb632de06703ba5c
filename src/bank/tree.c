/* Tree validation and compilation into the verifier buffers of the public
 * Medusa reference (generate_medusa_buffers); see docs/trees-and-banks.md. */
#include "bank/tree.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

typedef struct path_ref {
    const int32_t *r;
    int32_t len;
} path_ref;

/* (length, lexicographic) order, as Python sorts with key=(len, path) */
static int cmp_path(const void *a, const void *b) {
    const path_ref *x = a, *y = b;
    if (x->len != y->len) return x->len < y->len ? -1 : 1;
    for (int32_t i = 0; i < x->len; i++)
        if (x->r[i] != y->r[i]) return x->r[i] < y->r[i] ? -1 : 1;
    return 0;
}

static void path_str(const int32_t *r, int32_t len, char *buf, size_t cap) {
    size_t n = (size_t)snprintf(buf, cap, "[");
    for (int32_t i = 0; i < len && n + 16 < cap; i++) n += (size_t)snprintf(buf + n, cap - n, i ? ",%d" : "%d", r[i]);
    if (n + 2 < cap) snprintf(buf + n, cap - n, "]");
}

/* index of `len`-long prefix of p in sorted S, or -1 */
static int32_t find_path(const path_ref *S, int32_t n, const int32_t *r, int32_t len) {
    path_ref key = { r, len };
    int32_t lo = 0, hi = n - 1;
    while (lo <= hi) {
        int32_t mid = lo + (hi - lo) / 2;
        int c = cmp_path(&S[mid], &key);
        if (!c) return mid;
        if (c < 0) lo = mid + 1; else hi = mid - 1;
    }
    return -1;
}

void emt_tree_destroy(emt_tree *t) {
    if (!t) return;
    free(t->name);
    free(t->path_offsets);
    free(t->ranks);
    free(t->attn_mask);
    free(t->tree_indices);
    free(t->position_ids);
    free(t->parents);
    free(t->node_ranks);
    free(t->retrieve_indices);
    memset(t, 0, sizeof *t);
}

entmtp_status emt_tree_compile(const char *name, const int32_t *ranks, const int32_t *path_lengths,
                               int32_t n_paths, int32_t topk, int32_t max_depth, int32_t max_nodes,
                               emt_tree *out) {
    memset(out, 0, sizeof *out);
    const char *nm = name ? name : "?";
    if (n_paths < 0 || (n_paths > 0 && (!ranks || !path_lengths)))
        return emt_fail(ENTMTP_ERR_INVALID_TREE, "tree '%s': %d paths with missing arrays", nm, n_paths);
    if (n_paths + 1 > max_nodes)
        return emt_fail(ENTMTP_ERR_INVALID_TREE, "tree '%s': %d nodes (root included) exceed the limit of %d", nm, n_paths + 1, max_nodes);
    path_ref *S = emt_malloc((size_t)n_paths + 1, sizeof *S);
    if (!S) return ENTMTP_ERR_OUT_OF_MEMORY;
    char ps[256];
    entmtp_status st = ENTMTP_OK;
    int64_t off = 0;
    for (int32_t i = 0; i < n_paths; i++) {
        int32_t len = path_lengths[i];
        if (len < 1) { st = emt_fail(ENTMTP_ERR_INVALID_TREE, "tree '%s': path %d is empty (the root is implicit)", nm, i); break; }
        if (len > max_depth) {
            path_str(ranks + off, len, ps, sizeof ps);
            st = emt_fail(ENTMTP_ERR_INVALID_TREE, "tree '%s': path %s has depth %d, more than the %d heads allow", nm, ps, len, max_depth);
            break;
        }
        for (int32_t d = 0; d < len; d++) {
            if (ranks[off + d] < 0 || ranks[off + d] >= topk) {
                path_str(ranks + off, len, ps, sizeof ps);
                st = emt_fail(ENTMTP_ERR_INVALID_TREE, "tree '%s': path %s has rank %d outside [0, %d)", nm, ps, ranks[off + d], topk);
                break;
            }
        }
        if (st) break;
        S[i].r = ranks + off;
        S[i].len = len;
        off += len;
    }
    if (st) { free(S); return st; }
    qsort(S, (size_t)n_paths, sizeof *S, cmp_path);
    for (int32_t i = 1; i < n_paths && !st; i++)
        if (!cmp_path(&S[i - 1], &S[i])) {
            path_str(S[i].r, S[i].len, ps, sizeof ps);
            st = emt_fail(ENTMTP_ERR_INVALID_TREE, "tree '%s': path %s appears twice", nm, ps);
        }
    for (int32_t i = 0; i < n_paths && !st; i++)
        for (int32_t c = 1; c < S[i].len; c++)
            if (find_path(S, n_paths, S[i].r, c) < 0) {
                char pre[256];
                path_str(S[i].r, S[i].len, ps, sizeof ps);
                path_str(S[i].r, c, pre, sizeof pre);
                st = emt_fail(ENTMTP_ERR_INVALID_TREE, "tree '%s': path %s: prefix %s missing", nm, ps, pre);
                break;
            }
    if (st) { free(S); return st; }

    int32_t N = n_paths + 1, D = 0;
    for (int32_t i = 0; i < n_paths; i++) if (S[i].len > D) D = S[i].len;
    out->name = emt_strdup(nm);
    out->n_paths = n_paths;
    out->path_offsets = emt_malloc((size_t)n_paths + 1, sizeof(int32_t));
    out->ranks = emt_malloc((size_t)off + 1, sizeof(int32_t));
    out->attn_mask = emt_calloc((size_t)N * (size_t)N, 1);
    out->tree_indices = emt_malloc((size_t)N, sizeof(int32_t));
    out->position_ids = emt_malloc((size_t)N, sizeof(int32_t));
    out->parents = emt_malloc((size_t)N, sizeof(int32_t));
    out->node_ranks = emt_malloc((size_t)N, sizeof(int32_t));
    uint8_t *covered = emt_calloc((size_t)N, 1);
    out->retrieve_indices = emt_malloc((size_t)N * (size_t)(D + 1), sizeof(int32_t));
    if (!out->name || !out->path_offsets || !out->ranks || !out->attn_mask || !out->tree_indices ||
        !out->position_ids || !out->parents || !out->node_ranks || !covered || !out->retrieve_indices) {
        free(covered);
        free(S);
        emt_tree_destroy(out);
        return ENTMTP_ERR_OUT_OF_MEMORY;
    }
    out->n_nodes = N;
    out->depth = D;
    out->topk = topk;
    int32_t k = 0;
    for (int32_t i = 0; i < n_paths; i++) {
        out->path_offsets[i] = k;
        for (int32_t d = 0; d < S[i].len; d++) out->ranks[k++] = S[i].r[d];
    }
    out->path_offsets[n_paths] = k;
    /* node i+1 = sorted path i */
    out->attn_mask[0] = 1;
    out->tree_indices[0] = 0;
    out->position_ids[0] = 0;
    out->parents[0] = -1;
    out->node_ranks[0] = -1;
    for (int32_t i = 0; i < n_paths; i++) {
        int32_t node = i + 1, len = S[i].len;
        uint8_t *row = out->attn_mask + (size_t)node * N;
        row[0] = 1;
        row[node] = 1;
        for (int32_t c = 1; c < len; c++) row[find_path(S, n_paths, S[i].r, c) + 1] = 1;
        out->tree_indices[node] = S[i].r[len - 1] + topk * (len - 1) + 1;
        out->position_ids[node] = len;
        out->parents[node] = len == 1 ? 0 : find_path(S, n_paths, S[i].r, len - 1) + 1;
        out->node_ranks[node] = S[i].r[len - 1];
    }
    /* retrieve: leaves in reverse sorted order, root column first, -1 padding */
    int32_t W = D + 1, rows = 0;
    if (n_paths == 0) {
        out->retrieve_indices[0] = 0;
        rows = 1;
    }
    for (int32_t i = n_paths - 1; i >= 0; i--) {
        if (covered[i + 1]) continue;
        int32_t *row = out->retrieve_indices + (size_t)rows * W;
        row[0] = 0;
        for (int32_t c = 1; c <= S[i].len; c++) {
            int32_t id = find_path(S, n_paths, S[i].r, c) + 1;
            row[c] = id;
            covered[id] = 1;
        }
        for (int32_t c = S[i].len + 1; c < W; c++) row[c] = -1;
        rows++;
    }
    out->n_leaves = rows;
    free(covered);
    free(S);
    return ENTMTP_OK;
}

entmtp_status emt_parse_choices_json(const char *json, int32_t **ranks_out, int32_t **lens_out, int32_t *n_out) {
    *ranks_out = NULL;
    *lens_out = NULL;
    *n_out = 0;
    cJSON *root = cJSON_Parse(json ? json : "");
    if (!root) return emt_fail(ENTMTP_ERR_INVALID_TREE, "tree choices: not valid JSON");
    const cJSON *list = root;
    if (cJSON_IsObject(root)) list = cJSON_GetObjectItemCaseSensitive(root, "choices");
    if (!cJSON_IsArray(list)) {
        cJSON_Delete(root);
        return emt_fail(ENTMTP_ERR_INVALID_TREE, "tree choices: expected a list of paths like [[0],[0,0],[1]]");
    }
    int32_t n = cJSON_GetArraySize(list), total = 0;
    entmtp_status st = ENTMTP_OK;
    const cJSON *p;
    int32_t i = 0;
    cJSON_ArrayForEach(p, list) {
        if (!cJSON_IsArray(p)) { st = emt_fail(ENTMTP_ERR_INVALID_TREE, "tree choices: element %d is not a list of ranks", i); break; }
        total += cJSON_GetArraySize(p);
        i++;
    }
    int32_t *ranks = NULL, *lens = NULL;
    if (!st) {
        ranks = emt_malloc((size_t)total + 1, sizeof *ranks);
        lens = emt_malloc((size_t)n + 1, sizeof *lens);
        if (!ranks || !lens) st = ENTMTP_ERR_OUT_OF_MEMORY;
    }
    int32_t k = 0;
    i = 0;
    if (!st) cJSON_ArrayForEach(p, list) {
        int32_t d = 0;
        const cJSON *r;
        cJSON_ArrayForEach(r, p) {
            double v = r->valuedouble;
            if (!cJSON_IsNumber(r) || v != floor(v) || v < -1e9 || v > 1e9) {
                st = emt_fail(ENTMTP_ERR_INVALID_TREE, "tree choices: element %d, rank %d is not an integer", i, d);
                break;
            }
            ranks[k++] = (int32_t)v;
            d++;
        }
        if (st) break;
        lens[i++] = d;
    }
    cJSON_Delete(root);
    if (st) { free(ranks); free(lens); return st; }
    *ranks_out = ranks;
    *lens_out = lens;
    *n_out = n;
    return ENTMTP_OK;
}
