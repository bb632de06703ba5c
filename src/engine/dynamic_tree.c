/* Dynamic draft trees, best-first under a node budget; see dynamic_tree.h. */
#include "engine/dynamic_tree.h"

#include <stdlib.h>

entmtp_status emt_dynamic_tree_init(emt_dynamic_tree *dt, int32_t cap_nodes, int32_t cap_depth, int32_t topk) {
    memset(dt, 0, sizeof *dt);
    if (cap_nodes < 1 || cap_depth < 0 || cap_depth > EMT_MAX_HEADS || topk < 1 || topk > 64)
        return emt_fail(ENTMTP_ERR_INVALID_CONFIG, "dynamic tree: %d nodes, %d levels, top-%d outside [1..], [0, %d], [1, 64]",
                        cap_nodes, cap_depth, topk, EMT_MAX_HEADS);
    dt->cap_nodes = cap_nodes;
    dt->cap_depth = cap_depth;
    dt->topk = topk;
    size_t n = (size_t)cap_nodes;
    emt_tree *t = &dt->tree;
    t->name = emt_strdup("dynamic");
    t->path_offsets = emt_malloc(n + 1, sizeof(int32_t));
    t->ranks = emt_malloc(n * (size_t)(cap_depth + 1), sizeof(int32_t));
    t->attn_mask = emt_calloc(n * n, 1);
    t->tree_indices = emt_malloc(n, sizeof(int32_t));
    t->position_ids = emt_malloc(n, sizeof(int32_t));
    t->parents = emt_malloc(n, sizeof(int32_t));
    t->node_ranks = emt_malloc(n, sizeof(int32_t));
    t->retrieve_indices = emt_malloc(n * (size_t)(cap_depth + 1), sizeof(int32_t));
    dt->sel_parent = emt_malloc(n, sizeof(int32_t));
    dt->sel_depth = emt_malloc(n, sizeof(int32_t));
    dt->sel_rank = emt_malloc(n, sizeof(int32_t));
    dt->sel_next_sibling = emt_malloc(n, sizeof(int32_t));
    dt->sel_prob = emt_malloc(n, sizeof(float));
    dt->expected = emt_malloc(n + 1, sizeof(float));
    dt->new_index = emt_malloc(n, sizeof(int32_t));
    dt->order = emt_malloc(n, sizeof(int32_t));
    dt->first_child = emt_malloc(n, sizeof(int32_t));
    dt->fr_parent = emt_malloc(n + 1, sizeof(int32_t));
    dt->fr_pos = emt_malloc(n + 1, sizeof(int32_t));
    dt->fr_prob = emt_malloc(n + 1, sizeof(float));
    if (!t->name || !t->path_offsets || !t->ranks || !t->attn_mask || !t->tree_indices || !t->position_ids ||
        !t->parents || !t->node_ranks || !t->retrieve_indices || !dt->sel_parent || !dt->sel_depth || !dt->sel_rank ||
        !dt->sel_next_sibling || !dt->sel_prob || !dt->expected || !dt->new_index || !dt->order || !dt->first_child ||
        !dt->fr_parent || !dt->fr_pos || !dt->fr_prob) {
        emt_dynamic_tree_free(dt);
        return ENTMTP_ERR_OUT_OF_MEMORY;
    }
    /* until the first selection: the root alone */
    dt->n_selected = 1;
    dt->sel_parent[0] = -1;
    dt->sel_depth[0] = 0;
    dt->sel_rank[0] = -1;
    dt->sel_prob[0] = 1.0f;
    dt->expected[0] = 1.0f;
    dt->expected[1] = 1.0f;
    return ENTMTP_OK;
}

void emt_dynamic_tree_free(emt_dynamic_tree *dt) {
    emt_tree_destroy(&dt->tree);
    void *bufs[] = { dt->sel_parent, dt->sel_depth, dt->sel_rank, dt->sel_next_sibling, dt->sel_prob, dt->expected,
                     dt->new_index, dt->order, dt->first_child, dt->fr_parent, dt->fr_pos, dt->fr_prob };
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) free(bufs[i]);
    memset(dt, 0, sizeof *dt);
}

/* The frontier holds, for every selected node with children left, its best
 * unselected child: the next rank (in its level's order) after those taken. */
static void frontier_set(emt_dynamic_tree *dt, int32_t slot, int32_t parent, int32_t pos) {
    int32_t d = dt->sel_depth[parent];
    dt->fr_parent[slot] = parent;
    dt->fr_pos[slot] = pos;
    dt->fr_prob[slot] = dt->sel_prob[parent] * dt->cq[d][dt->rank_order[d][pos]];
}

void emt_dynamic_tree_select(emt_dynamic_tree *dt, const float *cq, int32_t cq_stride, int32_t n_levels) {
    if (n_levels > dt->cap_depth) n_levels = dt->cap_depth;
    const int32_t K = dt->topk;
    dt->n_levels = n_levels;
    /* each level's ranks by calibrated probability (insertion sort: K <= 64) */
    for (int32_t d = 0; d < n_levels; d++) {
        for (int32_t r = 0; r < K; r++) {
            float p = cq[(size_t)d * cq_stride + r];
            dt->cq[d][r] = p < 0 ? 0 : p > 1 ? 1 : p;
            int32_t j = r;
            while (j > 0 && dt->cq[d][dt->rank_order[d][j - 1]] < dt->cq[d][r]) {
                dt->rank_order[d][j] = dt->rank_order[d][j - 1];
                j--;
            }
            dt->rank_order[d][j] = r;
        }
    }
    int32_t n = 1, n_front = 0;
    double sum = 1.0;
    dt->expected[1] = 1.0f;
    if (n_levels > 0) frontier_set(dt, n_front++, 0, 0);
    while (n < dt->cap_nodes && n_front > 0) {
        int32_t best = 0;
        for (int32_t f = 1; f < n_front; f++)
            if (dt->fr_prob[f] > dt->fr_prob[best]) best = f;
        int32_t parent = dt->fr_parent[best], pos = dt->fr_pos[best], d = dt->sel_depth[parent];
        dt->sel_parent[n] = parent;
        dt->sel_depth[n] = d + 1;
        dt->sel_rank[n] = dt->rank_order[d][pos];
        dt->sel_prob[n] = dt->fr_prob[best];
        sum += dt->sel_prob[n];
        /* the parent's next child replaces this one; the new node's first child joins */
        if (pos + 1 < K) {
            frontier_set(dt, best, parent, pos + 1);
        } else { /* no ranks left under this parent: the last entry takes the slot */
            n_front--;
            dt->fr_parent[best] = dt->fr_parent[n_front];
            dt->fr_pos[best] = dt->fr_pos[n_front];
            dt->fr_prob[best] = dt->fr_prob[n_front];
        }
        if (d + 1 < n_levels) frontier_set(dt, n_front++, n, 0);
        n++;
        dt->expected[n] = (float)sum;
    }
    dt->n_selected = n;
    for (int32_t m = n + 1; m <= dt->cap_nodes; m++) dt->expected[m] = (float)sum;
}

const emt_tree *emt_dynamic_tree_build(emt_dynamic_tree *dt, int32_t n) {
    if (n > dt->n_selected) n = dt->n_selected;
    if (n < 1) n = 1;
    emt_tree *t = &dt->tree;
    /* children lists sorted by rank (selection order is by probability) */
    for (int32_t i = 0; i < n; i++) dt->first_child[i] = -1;
    for (int32_t i = 1; i < n; i++) {
        int32_t *link = &dt->first_child[dt->sel_parent[i]];
        while (*link >= 0 && dt->sel_rank[*link] < dt->sel_rank[i]) link = &dt->sel_next_sibling[*link];
        dt->sel_next_sibling[i] = *link;
        *link = i;
    }
    /* breadth first, children by rank: the (length, lexicographic) order of
     * emt_tree_compile, so node ids match a bank tree of the same paths */
    dt->order[0] = 0;
    dt->new_index[0] = 0;
    int32_t next = 1, depth = 0;
    for (int32_t q = 0; q < next; q++)
        for (int32_t c = dt->first_child[dt->order[q]]; c >= 0; c = dt->sel_next_sibling[c]) {
            dt->new_index[c] = next;
            dt->order[next++] = c;
        }
    memset(t->attn_mask, 0, (size_t)n * (size_t)n);
    int32_t k = 0;
    for (int32_t v = 0; v < n; v++) {
        int32_t s = dt->order[v], d = dt->sel_depth[s];
        if (d > depth) depth = d;
        t->position_ids[v] = d;
        t->parents[v] = v ? dt->new_index[dt->sel_parent[s]] : -1;
        t->node_ranks[v] = v ? dt->sel_rank[s] : -1;
        t->tree_indices[v] = v ? dt->sel_rank[s] + dt->topk * (d - 1) + 1 : 0;
        for (int32_t a = v; a >= 0; a = t->parents[a]) t->attn_mask[(size_t)v * n + a] = 1;
        if (v) { /* path v-1: the ranks from the root down */
            t->path_offsets[v - 1] = k;
            k += d;
            for (int32_t a = v, j = k - 1; a > 0; a = t->parents[a], j--) t->ranks[j] = t->node_ranks[a];
        }
    }
    t->path_offsets[n - 1] = k;
    t->n_nodes = n;
    t->n_paths = n - 1;
    t->depth = depth;
    t->topk = dt->topk;
    /* retrieve rows: leaves in reverse order, root column first, -1 padding */
    int32_t W = depth + 1, rows = 0;
    for (int32_t v = n - 1; v >= 0; v--) {
        if (dt->first_child[dt->order[v]] >= 0) continue;
        int32_t *row = t->retrieve_indices + (size_t)rows * W;
        for (int32_t c = t->position_ids[v] + 1; c < W; c++) row[c] = -1;
        for (int32_t a = v; a >= 0; a = t->parents[a]) row[t->position_ids[a]] = a;
        rows++;
    }
    t->n_leaves = rows;
    return t;
}
