/* Acceptance exactly as the public Medusa reference's evaluate_posterior
 * (see docs/acceptance.md), in the reference's row form and in the node
 * form engines use; features and sampling helpers. */
#include "accept/accept.h"

#include <math.h>
#include <stdlib.h>

static int32_t argmax(const float *x, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i;
    return best;
}

/* Probabilities of softmax(x / T) into p (double accumulation) and the
 * entropy with the reference's +1e-5 inside the log. */
static float softmax_t(const float *x, int32_t n, float T, float *p) {
    float mx = x[argmax(x, n)];
    double z = 0.0;
    for (int32_t i = 0; i < n; i++) {
        double e = exp(((double)x[i] - (double)mx) / (double)T);
        p[i] = (float)e;
        z += e;
    }
    double h = 0.0;
    for (int32_t i = 0; i < n; i++) {
        p[i] = (float)((double)p[i] / z);
        h -= (double)p[i] * log((double)p[i] + 1e-5);
    }
    return (float)h;
}

float emt_typical_threshold(const float *logits, int32_t vocab, float temperature, float epsilon,
                            float delta, float *probs) {
    float *p = probs ? probs : emt_malloc((size_t)vocab, sizeof(float));
    if (!p) return epsilon;
    float h = softmax_t(logits, vocab, temperature, p);
    if (!probs) free(p);
    float t = delta * expf(-h);
    return t < epsilon ? t : epsilon;
}

/* Pick the best row from per-slot acceptance: lengths by cumulative
 * product, the longest wins; ties go to the larger sum of log-probabilities
 * of the accepted candidates (typical) or the first row (greedy). */
static void pick(int32_t n_rows, int32_t width, const uint8_t *acc, const float *logp, int typical,
                 int32_t *best_row, int32_t *accept_length) {
    int32_t best = 0, best_len = -1;
    double best_score = -INFINITY;
    for (int32_t r = 0; r < n_rows; r++) {
        int32_t len = 0;
        double score = 0.0;
        while (len < width - 1 && acc[(size_t)r * (width - 1) + len]) {
            if (logp) score += logp[(size_t)r * (width - 1) + len];
            len++;
        }
        if (len > best_len || (typical && len == best_len && len > 0 && score > best_score)) {
            best = r;
            best_len = len;
            best_score = score;
        }
    }
    if (best_len <= 0) best = 0;
    *best_row = best;
    *accept_length = best_len < 0 ? 0 : best_len;
}

entmtp_status emt_evaluate_posterior_rows(const emt_posterior_rows *in, int32_t *best_row,
                                          int32_t *accept_length) {
    if (in->n_rows < 1 || in->width < 1 || in->vocab < 1)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "evaluate_posterior: %d rows x %d slots x %d vocabulary",
                        in->n_rows, in->width, in->vocab);
    int32_t slots = in->width - 1;
    if (slots == 0) { *best_row = 0; *accept_length = 0; return ENTMTP_OK; }
    uint8_t *acc = emt_calloc((size_t)in->n_rows * (size_t)slots, 1);
    float *logp = emt_calloc((size_t)in->n_rows * (size_t)slots, sizeof(float));
    float *p = in->temperature > 0 ? emt_malloc((size_t)in->vocab, sizeof(float)) : NULL;
    if (!acc || !logp || (in->temperature > 0 && !p)) {
        free(acc); free(logp); free(p);
        return ENTMTP_ERR_OUT_OF_MEMORY;
    }
    for (int32_t r = 0; r < in->n_rows; r++) {
        for (int32_t j = 0; j < slots; j++) {
            size_t slot = (size_t)r * (size_t)in->width + (size_t)j;
            if (in->valid && !in->valid[slot + 1]) continue;
            int32_t cand = in->candidates[slot + 1];
            if (cand < 0 || cand >= in->vocab) continue;
            const float *lg = in->logits + slot * (size_t)in->vocab;
            if (in->temperature <= 0) {
                acc[(size_t)r * slots + j] = cand == argmax(lg, in->vocab);
            } else {
                float h = softmax_t(lg, in->vocab, in->temperature, p);
                float t = in->delta * expf(-h);
                if (t > in->epsilon) t = in->epsilon;
                acc[(size_t)r * slots + j] = p[cand] > t;
                logp[(size_t)r * slots + j] = logf(p[cand]);
            }
        }
    }
    pick(in->n_rows, in->width, acc, in->temperature > 0 ? logp : NULL, in->temperature > 0, best_row,
         accept_length);
    free(acc);
    free(logp);
    free(p);
    return ENTMTP_OK;
}

entmtp_status emt_evaluate_posterior_nodes(const emt_posterior_nodes *in, int32_t *best_row,
                                           int32_t *accept_length) {
    if (in->n_nodes < 1 || in->n_leaves < 1 || in->width < 1 || in->vocab < 1)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "evaluate_posterior: %d nodes, %d leaves, width %d",
                        in->n_nodes, in->n_leaves, in->width);
    int32_t slots = in->width - 1;
    if (slots == 0) { *best_row = 0; *accept_length = 0; return ENTMTP_OK; }
    /* per node: is its token acceptable under its parent's distribution? The
     * parent of node retrieve[r][j+1] is retrieve[r][j]. */
    uint8_t *node_ok = emt_calloc((size_t)in->n_nodes, 1);
    float *node_logp = emt_calloc((size_t)in->n_nodes, sizeof(float));
    uint8_t *done = emt_calloc((size_t)in->n_nodes, 1);
    uint8_t *acc = emt_calloc((size_t)in->n_leaves * (size_t)slots, 1);
    float *logp = emt_calloc((size_t)in->n_leaves * (size_t)slots, sizeof(float));
    /* per parent: argmax (greedy) or probabilities + threshold (typical),
     * computed once and cached per parent */
    int32_t *par_arg = emt_malloc((size_t)in->n_nodes, sizeof(int32_t));
    float *par_thr = emt_malloc((size_t)in->n_nodes, sizeof(float));
    uint8_t *par_done = emt_calloc((size_t)in->n_nodes, 1);
    float *p = in->temperature > 0 ? emt_malloc((size_t)in->vocab * (size_t)in->n_nodes, sizeof(float)) : NULL;
    entmtp_status st = ENTMTP_OK;
    if (!node_ok || !node_logp || !done || !acc || !logp || !par_arg || !par_thr || !par_done ||
        (in->temperature > 0 && !p)) {
        st = ENTMTP_ERR_OUT_OF_MEMORY;
        goto out;
    }
    for (int32_t r = 0; r < in->n_leaves; r++) {
        const int32_t *row = in->retrieve + (size_t)r * (size_t)in->width;
        for (int32_t j = 0; j < slots; j++) {
            int32_t parent = row[j], node = row[j + 1];
            if (node < 0 || parent < 0) break; /* padding: never accepted */
            if (node >= in->n_nodes || parent >= in->n_nodes) {
                st = emt_fail(ENTMTP_ERR_OUT_OF_RANGE, "evaluate_posterior: retrieve[%d][%d] = %d outside %d nodes", r, j + 1, node, in->n_nodes);
                goto out;
            }
            if (!done[node]) {
                const float *lg = in->node_logits + (size_t)parent * (size_t)in->vocab;
                int32_t tok = in->node_tokens[node];
                if (!par_done[parent]) {
                    if (in->temperature <= 0) {
                        par_arg[parent] = argmax(lg, in->vocab);
                    } else {
                        float h = softmax_t(lg, in->vocab, in->temperature, p + (size_t)parent * in->vocab);
                        float t = in->delta * expf(-h);
                        par_thr[parent] = t < in->epsilon ? t : in->epsilon;
                    }
                    par_done[parent] = 1;
                }
                if (tok >= 0 && tok < in->vocab) {
                    if (in->temperature <= 0) {
                        node_ok[node] = tok == par_arg[parent];
                    } else {
                        float pt = p[(size_t)parent * in->vocab + (size_t)tok];
                        node_ok[node] = pt > par_thr[parent];
                        node_logp[node] = logf(pt);
                    }
                }
                done[node] = 1;
            }
            acc[(size_t)r * slots + j] = node_ok[node];
            logp[(size_t)r * slots + j] = node_logp[node];
        }
    }
    pick(in->n_leaves, in->width, acc, in->temperature > 0 ? logp : NULL, in->temperature > 0, best_row,
         accept_length);
out:
    free(node_ok); free(node_logp); free(done); free(acc); free(logp);
    free(par_arg); free(par_thr); free(par_done); free(p);
    return st;
}

void emt_softmax_stats(const float *logits, int32_t vocab, int32_t *top1, float *p_top1, float *entropy) {
    int32_t a = argmax(logits, vocab);
    double mx = logits[a], z = 0.0, sxz = 0.0;
    for (int32_t i = 0; i < vocab; i++) {
        double e = exp((double)logits[i] - mx);
        z += e;
        sxz += e * ((double)logits[i] - mx);
    }
    if (top1) *top1 = a;
    if (p_top1) *p_top1 = (float)(1.0 / z);
    if (entropy) *entropy = (float)(log(z) - sxz / z);
}

void emt_features_clear(emt_features_store *store) {
    memset(store, 0, sizeof *store);
    store->f.struct_size = sizeof store->f;
    store->f.head_p = store->head_p;
    store->f.g = store->g;
    store->f.head_topk_p = store->head_topk_p;
}

void emt_features_fill(emt_features_store *store, float p0, float entropy, const float *head_topk_p,
                       int32_t n_heads, int32_t topk, int32_t stride, int32_t n_trees,
                       int32_t last_accept_length, float accept_length_ema, int64_t step) {
    emt_features_clear(store);
    entmtp_features *out = &store->f;
    if (n_heads > EMT_MAX_HEADS) n_heads = EMT_MAX_HEADS;
    if (n_heads < 0 || !head_topk_p) n_heads = 0;
    if (topk > EMT_MAX_TOPK) topk = EMT_MAX_TOPK;
    if (topk > stride) topk = stride;
    if (topk < 1 || n_heads == 0) topk = n_heads = 0;
    out->p0 = p0;
    out->n_heads = n_heads;
    out->topk = topk;
    out->n_trees = n_trees > 0 ? n_trees : 0;
    out->entropy = entropy;
    out->s = p0;
    float g = p0;
    for (int32_t d = 0; d < n_heads; d++) {
        const float *row = head_topk_p + (size_t)d * (size_t)stride;
        memcpy(store->head_topk_p + (size_t)d * (size_t)topk, row, (size_t)topk * sizeof *row);
        store->head_p[d] = row[0];
        g *= row[0];
        store->g[d] = g;
        if (g > out->s) out->s = g;
    }
    out->last_accept_length = last_accept_length;
    out->accept_length_ema = accept_length_ema;
    out->step = step;
}

void emt_features_set_outlook(emt_features_store *store, const float *expected_accept,
                              const double *expected_seconds) {
    int shown = expected_accept && expected_seconds && store->f.n_trees > 0;
    store->f.expected_accept = shown ? expected_accept : NULL;
    store->f.expected_seconds = shown ? expected_seconds : NULL;
}

void emt_topk(const float *values, int32_t n, int32_t k, int32_t *indices, float *top_values) {
    if (k > n) k = n;
    int32_t m = 0;
    for (int32_t i = 0; i < n; i++) {
        float v = values[i];
        if (m == k && !(v > top_values[k - 1])) continue;
        int32_t pos = m < k ? m++ : k - 1;
        while (pos > 0 && v > top_values[pos - 1]) {
            top_values[pos] = top_values[pos - 1];
            indices[pos] = indices[pos - 1];
            pos--;
        }
        top_values[pos] = v;
        indices[pos] = i;
    }
}

void emt_topk_softmax(const float *logits, int32_t vocab, int32_t k, int32_t *ids, float *probs, float *entropy) {
    emt_topk(logits, vocab, k, ids, probs);
    double mx = probs[0], z = 0.0, sxz = 0.0;
    for (int32_t i = 0; i < vocab; i++) {
        double e = exp((double)logits[i] - mx);
        z += e;
        sxz += e * ((double)logits[i] - mx);
    }
    for (int32_t t = 0; t < k; t++) probs[t] = (float)(exp((double)probs[t] - mx) / z);
    if (entropy) *entropy = (float)(log(z) - sxz / z);
}

uint64_t emt_rng_next_u64(uint64_t *s) {
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t emt_rng_u53(uint64_t *s) { return emt_rng_next_u64(s) >> 11; }

double emt_u53_uniform(uint64_t u53) { return (double)u53 * (1.0 / 9007199254740992.0); }

double emt_rng_uniform(uint64_t *s) { return emt_u53_uniform(emt_rng_u53(s)); }

/* The typical sample's summation order (the CUDA sample_root kernel follows
 * it step for step, one thread per chunk): the vocabulary in
 * EMT_SAMPLE_CHUNKS contiguous chunks of ceil(vocab / chunks) ids; every
 * sum is each chunk's own sum in id order, then the chunk sums added in
 * chunk order. p_i = exp((x_i - max) / T) / z, recomputed the same way in
 * every pass. */
/* chunk c's ids [*lo, *hi) (empty past the vocabulary's end) */
static void sample_chunk(int32_t c, int32_t width, int32_t vocab, int32_t *lo, int32_t *hi) {
    *lo = c * width < vocab ? c * width : vocab;
    *hi = *lo + width < vocab ? *lo + width : vocab;
}

int32_t emt_sample_typical_u(const float *logits, int32_t vocab, float temperature, float epsilon, float delta,
                             double u) {
    const int32_t width = (vocab + EMT_SAMPLE_CHUNKS - 1) / EMT_SAMPLE_CHUNKS;
    const int32_t top = argmax(logits, vocab);
    const double mx = logits[top], T = temperature;
    double z = 0.0;
    for (int32_t c = 0; c < EMT_SAMPLE_CHUNKS; c++) {
        int32_t lo, hi;
        sample_chunk(c, width, vocab, &lo, &hi);
        double s = 0.0;
        for (int32_t i = lo; i < hi; i++) s += exp(((double)logits[i] - mx) / T);
        z += s;
    }
    double h = 0.0;
    for (int32_t c = 0; c < EMT_SAMPLE_CHUNKS; c++) {
        int32_t lo, hi;
        sample_chunk(c, width, vocab, &lo, &hi);
        double s = 0.0;
        for (int32_t i = lo; i < hi; i++) {
            double p = exp(((double)logits[i] - mx) / T) / z;
            s -= p * log(p + 1e-5);
        }
        h += s;
    }
    double thr = delta * exp(-h);
    if (thr > epsilon) thr = epsilon;
    /* per chunk: the mass of the allowed tokens (above the threshold, or the top-1) */
    double mass_of[EMT_SAMPLE_CHUNKS], mass = 0.0;
    int32_t last = top;
    for (int32_t c = 0; c < EMT_SAMPLE_CHUNKS; c++) {
        int32_t lo, hi;
        sample_chunk(c, width, vocab, &lo, &hi);
        double s = 0.0;
        for (int32_t i = lo; i < hi; i++) {
            double p = exp(((double)logits[i] - mx) / T) / z;
            if (p > thr || i == top) {
                s += p;
                last = i;
            }
        }
        mass_of[c] = s;
        mass += s;
    }
    /* the first chunk whose end passes u * mass (the running sum of the
     * chunk sums, as `mass` was added), then the first allowed id of it
     * whose running sum, added to the chunks before, passes it */
    const double target = u * mass;
    double before = 0.0;
    for (int32_t c = 0; c < EMT_SAMPLE_CHUNKS; c++) {
        double after = before + mass_of[c];
        if (target < after) {
            int32_t lo, hi;
            sample_chunk(c, width, vocab, &lo, &hi);
            double s = 0.0;
            for (int32_t i = lo; i < hi; i++) {
                double p = exp(((double)logits[i] - mx) / T) / z;
                if (!(p > thr || i == top)) continue;
                s += p;
                if (target < before + s) return i;
            }
        }
        before = after;
    }
    return last; /* u * mass rounded up to the whole mass: the last allowed id */
}

entmtp_status emt_sample_typical(const float *logits, int32_t vocab, float temperature, float epsilon,
                                 float delta, uint64_t *rng_state, int32_t *out_token) {
    if (!(temperature > 0))
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "sample_typical: temperature = %g must be > 0", (double)temperature);
    *out_token = emt_sample_typical_u(logits, vocab, temperature, epsilon, delta, emt_rng_uniform(rng_state));
    return ENTMTP_OK;
}
