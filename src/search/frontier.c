/* Tree growth and selection rules of the offline search (see frontier.h). */
#include "search/frontier.h"

void emt_grow_init(emt_grow_tree *t) {
    memset(t, 0, sizeof *t);
    t->n = 1;
    t->parent[0] = -1;
    t->rank[0] = -1;
}

int32_t emt_grow_candidates(const emt_grow_tree *t, int32_t max_depth, int32_t topk,
                            int32_t *cand_parent) {
    int32_t n = 0;
    for (int32_t i = 0; i < t->n; i++)
        if (t->depth[i] < max_depth && t->n_children[i] < topk) cand_parent[n++] = i;
    return n;
}

int32_t emt_grow_add(emt_grow_tree *t, int32_t parent) {
    if (t->n >= EMT_GROW_MAX_NODES || parent < 0 || parent >= t->n) return -1;
    int32_t id = t->n++;
    t->parent[id] = parent;
    t->rank[id] = t->n_children[parent]++;
    t->depth[id] = t->depth[parent] + 1;
    t->n_children[id] = 0;
    return id;
}

int32_t emt_grow_rank_sum(const emt_grow_tree *t, int32_t node) {
    int32_t s = 0;
    for (; node > 0; node = t->parent[node]) s += t->rank[node];
    return s;
}

/* ranks of the path root -> node into out[0 .. depth), returns depth */
static int32_t path_of(const emt_grow_tree *t, int32_t node, int32_t *out) {
    int32_t d = t->depth[node];
    for (int32_t k = d - 1; node > 0; k--, node = t->parent[node]) out[k] = t->rank[node];
    return d;
}

int32_t emt_grow_choices(const emt_grow_tree *t, const int32_t *extra_parent, int32_t n_extra,
                         int32_t *ranks, int32_t *lens) {
    int32_t np = 0, k = 0;
    for (int32_t i = 1; i < t->n; i++) {
        lens[np++] = path_of(t, i, ranks + k);
        k += lens[np - 1];
    }
    for (int32_t e = 0; e < n_extra; e++) {
        int32_t p = extra_parent[e];
        int32_t d = path_of(t, p, ranks + k);
        ranks[k + d] = t->n_children[p];
        lens[np++] = d + 1;
        k += d + 1;
    }
    return np;
}

int32_t emt_grow_pick(int32_t n, const int64_t *accept_sum, const int32_t *rank_sum,
                      const int32_t *depth) {
    int32_t best = -1;
    for (int32_t i = 0; i < n; i++) {
        if (best < 0 || accept_sum[i] > accept_sum[best] ||
            (accept_sum[i] == accept_sum[best] &&
             (rank_sum[i] < rank_sum[best] || (rank_sum[i] == rank_sum[best] && depth[i] < depth[best]))))
            best = i;
    }
    return best;
}

void emt_pareto_max(int32_t n, const int32_t *nodes, const double *value, uint8_t *keep) {
    for (int32_t i = 0; i < n; i++) {
        keep[i] = 1;
        for (int32_t j = 0; j < n && keep[i]; j++) {
            if (j == i || nodes[j] > nodes[i] || value[j] < value[i]) continue;
            int better = nodes[j] < nodes[i] || value[j] > value[i];
            if (better || j < i) keep[i] = 0; /* dominated, or an earlier duplicate */
        }
    }
}
