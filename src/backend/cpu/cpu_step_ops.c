/* The CPU backend's device step ops: the reference twins of the CUDA
 * kernels in cuda/step_ops.cu (backend.h describes the ops). Acceptance is
 * the host oracle itself (src/accept/accept.c), so the CPU engine decides
 * exactly as before the ops existed. */
#include "backend/cpu/cpu_step_ops.h"

#include "accept/accept.h"

#include <math.h>

typedef struct topk_dev_job {
    const float *logits;
    int32_t vocab, k;
    const int32_t *id_map;
    int32_t *ids;
    float *probs, *entropy;
} topk_dev_job;

/* One row, as the CPU topk op: insertion top-k (ties to the lower id), then
 * the softmax statistics at T = 1 in double. */
static void topk_dev_task(void *ctx, int32_t r) {
    const topk_dev_job *j = ctx;
    const int32_t vocab = j->vocab, k = j->k;
    const float *x = j->logits + (size_t)r * vocab;
    int32_t *ids = j->ids + (size_t)r * k;
    float *vals = j->probs + (size_t)r * k;
    emt_topk_softmax(x, vocab, k, ids, vals, j->entropy ? &j->entropy[r] : NULL);
    if (j->id_map)
        for (int32_t t = 0; t < k; t++) ids[t] = j->id_map[ids[t]];
}

void emt_cpu_topk_device(emt_pool *pool, const float *logits, int32_t n_rows, int32_t vocab, int32_t k,
                         const int32_t *id_map, int32_t *ids, float *probs, float *entropy) {
    topk_dev_job job = { logits, vocab, k > vocab ? vocab : k, id_map, ids, probs, entropy };
    emt_pool_run(pool, n_rows, topk_dev_task, &job);
}

const char *emt_cpu_accept(const emt_accept_desc *d, void *rec_words) {
    emt_step_record *rec = rec_words;
    int32_t *path = (int32_t *)rec_words + sizeof(emt_step_record) / 4;
    int32_t *tokens = path + d->max_path;
    int32_t best = 0, acc = 0;
    const int32_t *node_tokens = d->node_tokens_device ? d->node_tokens_device : d->node_tokens;
    if (d->width > d->max_path) return "accept: the tree is deeper than the step record's path";
    if (d->width > 1 && d->n_nodes > 1) {
        emt_posterior_nodes in = { d->n_nodes, d->vocab, d->node_logits, node_tokens, d->n_rows, d->width,
                                   d->retrieve, d->temperature, d->epsilon, d->delta };
        if (emt_evaluate_posterior_nodes(&in, &best, &acc))
            return "accept: evaluate_posterior failed (out of memory, or a retrieve index outside the tree)";
    }
    memset(rec, 0, sizeof *rec);
    rec->best_row = best;
    rec->accepted = acc;
    int32_t n = acc + 1;
    if (d->width > 1 && d->n_nodes > 1)
        for (int32_t j = 0; j < n; j++) path[j] = d->retrieve[(size_t)best * d->width + j];
    else
        path[0] = 0;
    int32_t keep = n;
    const int32_t max_tokens = d->lengths ? d->lengths[1] : d->max_tokens;
    const int32_t kv_room = d->lengths ? d->kv_capacity - d->lengths[0] : d->kv_room;
    if (max_tokens > 0 && keep > max_tokens) keep = max_tokens;
    if (keep > kv_room) {
        keep = kv_room;
        rec->kv_full = 1;
    }
    for (int32_t j = 0; j < keep; j++) {
        tokens[j] = node_tokens[path[j]];
        if (d->stop && d->stop[tokens[j]]) {
            keep = j + 1;
            rec->stopped = 1;
            rec->kv_full = 0;
            break;
        }
    }
    rec->n_emit = keep;
    rec->last_node = path[keep - 1];
    return NULL;
}

void emt_cpu_commit(const emt_commit_desc *d, const void *rec_words) {
    const emt_step_record *rec = rec_words;
    const int32_t *path = (const int32_t *)rec_words + sizeof(emt_step_record) / 4;
    const int32_t L = d->lengths ? d->lengths[0] : d->L, src0 = d->lengths ? d->src_row0 : L;
    for (int32_t s = 0; s < d->n_slabs; s++) {
        float *slab = d->kv + (size_t)s * d->slab_floats;
        for (int32_t j = 0; j < rec->n_emit; j++) {
            if (src0 + path[j] == L + j) continue;
            memcpy(slab + (size_t)(L + j) * d->row_floats, slab + (size_t)(src0 + path[j]) * d->row_floats,
                   d->row_floats * sizeof(float));
        }
    }
    int32_t last = rec->last_node;
    memcpy(d->last_hidden, d->hidden + (size_t)last * d->hidden_dim, (size_t)d->hidden_dim * sizeof(float));
    memcpy(d->next_logits, d->logits + (size_t)last * d->vocab, (size_t)d->vocab * sizeof(float));
}

void emt_cpu_gather_i32(int32_t *dst, const int32_t *src, const int32_t *idx, int32_t n) {
    for (int32_t i = 0; i < n; i++) dst[i] = src[idx[i]];
}

int32_t emt_cpu_sample_root(const float *logits, int32_t vocab, float temperature, float epsilon, float delta,
                            const int32_t *uniform) {
    uint64_t u53 = (uint64_t)(uint32_t)uniform[0] | (uint64_t)(uint32_t)uniform[1] << 32;
    return emt_sample_typical_u(logits, vocab, temperature, epsilon, delta, emt_u53_uniform(u53));
}
