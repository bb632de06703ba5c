/* The decoding session: KV cache, scratch, drafting, verification, commit. */
#ifndef EMT_ENGINE_H
#define EMT_ENGINE_H

#include "bank/tree.h"
#include "model/heads.h"
#include "model/model.h"

/* Per-session device buffers, sized at creation so that no step allocates. */
typedef struct emt_scratch {
    int32_t max_rows;                 /* rows one forward call may process */
    float *x, *xn, *q, *att, *tmp, *gate, *up; /* [max_rows][...] */
    float *hidden;                    /* [max_rows][H] post-norm hidden of the last call */
    float *logits;                    /* [max_rows][V] */
    /* heads */
    float *head_in;                   /* [max_rows][H*(n_heads+1)] */
    float *head_x, *head_tmp, *head_res; /* [max_rows][H] */
    float *head_logits;               /* [max_rows][V] */
    /* the state carried between steps */
    float *next_logits;               /* [V] */
    float *last_hidden;               /* [H] */
} emt_scratch;

typedef struct emt_kv {
    int32_t capacity;                 /* committed tokens it may hold */
    int32_t rows;                     /* capacity + tree scratch rows */
    float **k, **v;                   /* per layer [rows][n_kv*hd] */
} emt_kv;

/* Forward n rows (tokens at positions) whose KV go to cache rows
 * kv_start..kv_start+n-1, attending to rows [0, kv_start) plus the new rows
 * under `mask` (NULL = causal). Leaves the post-norm hidden state of every
 * row in s->hidden and, when logits_rows > 0, the logits of the last
 * `logits_rows` rows in s->logits. */
entmtp_status emt_forward(emt_exec *ex, const entmtp_model *m, emt_kv *kv, emt_scratch *s,
                          const int32_t *tokens, const int32_t *positions, int32_t n,
                          int32_t kv_start, const uint8_t *mask, int exact, int32_t logits_rows);

/* Benchmark support: run the verify forward of bank tree `tree_index` at the
 * session's current position `reps` times without committing anything, and
 * return the median seconds per verify (tokens are arbitrary ids). */
entmtp_status emt_session_time_verify(entmtp_session *S, int32_t tree_index, int32_t reps,
                                      double *median_seconds);

/* Test support: batch_heads = 0 makes Medusa heads that share the base
 * lm_head take one lm_head product per head (the reference path) instead of
 * one for all heads; head_topk exposes the last step's per-head top-k
 * ([n_heads][k] ids and probabilities). */
void emt_session_set_batch_heads(entmtp_session *S, int batch_heads);
void emt_session_head_topk(const entmtp_session *S, const int32_t **ids, const float **probs,
                           int32_t *k);

#endif
