/* Host reference of acceptance (Medusa's evaluate_posterior) and of the
 * policy features. These are the oracle for the CPU engine and CUDA kernels. */
#ifndef EMT_ACCEPT_H
#define EMT_ACCEPT_H

#include "common/common.h"

/* Row form, exactly the reference: logits [n_rows][width][vocab] where
 * logits[r][j] is the verifier's distribution after candidate token
 * candidates[r][j]; candidates [n_rows][width] with column 0 the root token.
 * Padded slots (retrieve index -1) are marked by valid[r][j] == 0 and never
 * accepted. temperature == 0 selects greedy. Outputs: *best_row and
 * *accept_length = number of accepted candidates after the root (0..width-1). */
typedef struct emt_posterior_rows {
    int32_t n_rows, width, vocab;
    const float *logits;       /* n_rows * width * vocab */
    const int32_t *candidates; /* n_rows * width */
    const uint8_t *valid;      /* n_rows * width, may be NULL (all valid) */
    float temperature, epsilon, delta;
} emt_posterior_rows;

entmtp_status emt_evaluate_posterior_rows(const emt_posterior_rows *in, int32_t *best_row,
                                          int32_t *accept_length);

/* Node form used by engines: logits per tree node [n_nodes][vocab] (the
 * distribution after node i), node tokens (root included), and the tree's
 * retrieve_indices [n_leaves][width] (-1 padded). Same answer as the row form. */
typedef struct emt_posterior_nodes {
    int32_t n_nodes, vocab;
    const float *node_logits;     /* n_nodes * vocab */
    const int32_t *node_tokens;   /* n_nodes */
    int32_t n_leaves, width;
    const int32_t *retrieve;      /* n_leaves * width */
    float temperature, epsilon, delta;
} emt_posterior_nodes;

entmtp_status emt_evaluate_posterior_nodes(const emt_posterior_nodes *in, int32_t *best_row,
                                           int32_t *accept_length);

/* Softmax statistics of one distribution at temperature 1: top-1 index and
 * probability, entropy (nats). */
void emt_softmax_stats(const float *logits, int32_t vocab, int32_t *top1, float *p_top1,
                       float *entropy);

/* Features with the storage their arrays point into. */
typedef struct emt_features_store {
    entmtp_features f; /* f.head_p, f.g and f.head_topk_p point at the arrays below;
                        * f.expected_accept/expected_seconds at the session's outlook */
    float head_p[EMT_MAX_HEADS];
    float g[EMT_MAX_HEADS];
    float head_topk_p[EMT_MAX_HEADS * EMT_MAX_TOPK];
} emt_features_store;

/* Zeroed features (no heads, no outlook), arrays pointing into `out`. */
void emt_features_clear(emt_features_store *out);
/* Fill features from p0, entropy and the heads' top-k probabilities
 * (head_topk_p: [n_heads][stride], the first topk ranks taken; head_p[d] is
 * rank 0). n_trees: the bank's size; the outlook stays NULL (set it with
 * emt_features_set_outlook once computed). */
void emt_features_fill(emt_features_store *out, float p0, float entropy, const float *head_topk_p,
                       int32_t n_heads, int32_t topk, int32_t stride, int32_t n_trees,
                       int32_t last_accept_length, float accept_length_ema, int64_t step);
/* Show the per-tree outlook (f.n_trees entries each; NULL: none). */
void emt_features_set_outlook(emt_features_store *out, const float *expected_accept,
                              const double *expected_seconds);

/* Typical-acceptance threshold for one distribution: min(eps, delta*exp(-H))
 * where H is the entropy of softmax(logits / temperature) with the reference's
 * +1e-5 inside the log. Also returns the probabilities if probs != NULL. */
float emt_typical_threshold(const float *logits, int32_t vocab, float temperature, float epsilon,
                            float delta, float *probs);

/* Top-k (k <= vocab) of a vector, descending, ties to the lower index. */
void emt_topk(const float *values, int32_t n, int32_t k, int32_t *indices, float *top_values);
/* One logits row's top-k ids (descending, ties to the lower id) and their
 * softmax probabilities at temperature 1, plus the row's entropy (NULL to
 * skip), the statistics in double: the CPU backend's topk ops. */
void emt_topk_softmax(const float *logits, int32_t vocab, int32_t k, int32_t *ids, float *probs, float *entropy);

/* Seeded RNG (splitmix64): runs repeat exactly for a given seed. */
uint64_t emt_rng_next_u64(uint64_t *state);
uint64_t emt_rng_u53(uint64_t *state);   /* the next value's top 53 bits */
double emt_u53_uniform(uint64_t u53);    /* u53 * 2^-53, in [0, 1) */
double emt_rng_uniform(uint64_t *state); /* emt_u53_uniform(emt_rng_u53(state)) */

/* The chunks of the typical sample's summation order (emt_sample_typical_u) */
#define EMT_SAMPLE_CHUNKS 256

/* The root token at temperature > 0 for the uniform u in [0, 1): from
 * softmax(logits / T) restricted to tokens whose probability exceeds the
 * typical threshold min(epsilon, delta * exp(-H)) (the top-1 token, ties to
 * the lower id, is always allowed), renormalised: the first allowed token
 * whose cumulative probability exceeds u times the allowed mass. The sums
 * run in a fixed order of EMT_SAMPLE_CHUNKS contiguous chunks (accept.c),
 * the one the backends' sample_root op follows (the CUDA kernel and the CPU
 * backend both), so that every backend picks the same token for the same
 * logits and u. temperature must be > 0. */
int32_t emt_sample_typical_u(const float *logits, int32_t vocab, float temperature, float epsilon, float delta,
                             double u);
/* emt_sample_typical_u with u = emt_rng_uniform(rng_state); ENTMTP_ERR_INVALID_ARGUMENT
 * when temperature is not > 0. */
entmtp_status emt_sample_typical(const float *logits, int32_t vocab, float temperature,
                                 float epsilon, float delta, uint64_t *rng_state,
                                 int32_t *out_token);

#endif
