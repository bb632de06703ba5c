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
    float *k_new, *v_new;             /* [max_rows][kv_dim]: the new K/V rows before a BF16 cache takes them (else NULL) */
    float *hidden;                    /* [max_rows][H] post-norm hidden of the last call */
    float *logits;                    /* [max_rows][V] */
    /* heads */
    float *head_in;                   /* [max_rows][H*(n_heads+1)] */
    float *head_x, *head_tmp, *head_res; /* [max_rows][H] */
    float *head_logits;               /* [max_rows][V] */
    /* target layers a drafter reads (EAGLE-3): every forward leaves, for
     * each row, the outputs of layers tap_layers[0..n_taps) side by side in
     * taps ([max_rows][n_taps * H]); n_taps = 0: none */
    int32_t n_taps, tap_layers[3];
    float *taps;
    int32_t *tap_dst, *tap_src;       /* host [max_rows]: copy_rows index arrays */
    /* the state carried between steps */
    float *next_logits;               /* [V] */
    float *last_hidden;               /* [H] */
} emt_scratch;

typedef struct emt_kv {
    int32_t capacity;                 /* committed tokens it may hold */
    int32_t rows;                     /* capacity + tree scratch rows */
    /* per layer [rows][n_kv*hd] of `dtype` (F32, or BF16: two values per
     * float-sized word), views into block */
    float **k, **v;
    emt_dtype dtype;
    size_t row_words;                 /* 4-byte words per cache row */
    size_t slab;                      /* words between one layer's K or V and the next */
    float *block;                     /* all layers' K and V in one allocation, so that it
                                       * is mapped and unmapped whole (a per-layer slab is
                                       * under malloc's mmap threshold and stays in an arena) */
} emt_kv;

/* Forward n rows (tokens at positions) whose KV go to cache rows
 * kv_start..kv_start+n-1, attending to rows [0, kv_start) plus the new rows
 * under `mask` (NULL = causal). Leaves the post-norm hidden state of every
 * row in s->hidden and, when logits_rows > 0, the logits of the last
 * `logits_rows` rows in s->logits. */
entmtp_status emt_forward(emt_exec *ex, const entmtp_model *m, emt_kv *kv, emt_scratch *s,
                          const int32_t *tokens, const int32_t *positions, int32_t n,
                          int32_t kv_start, const uint8_t *mask, int exact, int32_t logits_rows);

/* emt_forward with the token ids in device memory (drafted on the device;
 * backends with embed_device). */
entmtp_status emt_forward_device_tokens(emt_exec *ex, const entmtp_model *m, emt_kv *kv, emt_scratch *s,
                                        const int32_t *d_tokens, const int32_t *positions, int32_t n,
                                        int32_t kv_start, const uint8_t *mask, int exact, int32_t logits_rows);

/* emt_forward of n rows whose lengths live in device memory (emt_dyn_rows:
 * the prefix length, the rows' positions L + offsets[i], their K/V at cache
 * rows rows->row0 + i), token ids in device memory: no argument depends on
 * the context length (backends with rope_dyn and attention_dyn). */
entmtp_status emt_forward_dyn(emt_exec *ex, const entmtp_model *m, emt_kv *kv, emt_scratch *s,
                              const int32_t *d_tokens, const emt_dyn_rows *rows, int32_t n, const uint8_t *mask,
                              int exact, int32_t logits_rows);
/* 1 when the model and the backend can run emt_forward_dyn */
int emt_forward_dyn_supported(const entmtp_model *m);

/* Benchmark support: run the verify forward of bank tree `tree_index` at the
 * session's current position `reps` times without committing anything, and
 * return the median seconds per verify (tokens are arbitrary ids). */
entmtp_status emt_session_time_verify(entmtp_session *S, int32_t tree_index, int32_t reps,
                                      double *median_seconds);

/* entmtp_session_create with buffers for trees of at least min_nodes nodes,
 * min_depth levels and top-k min_topk beyond what the bank needs (tree
 * search verifies trees that are not in any bank). min_nodes > 0 also
 * allocates what emt_session_probe_step needs. */
entmtp_status emt_session_create_sized(const entmtp_model *model, const entmtp_heads *heads,
                                       const entmtp_bank *bank,
                                       const entmtp_session_params *params, int32_t min_nodes,
                                       int32_t min_depth, int32_t min_topk,
                                       entmtp_session **out_session);

/* Tree search's what-if step (Algorithm 1 of the EntMTP paper): draft and
 * verify every node of `tree`, write each node's acceptance to node_ok
 * (emt_accept_node_flags), then accept and commit as entmtp_step would with
 * only the paths in `commit` (commit_rows rows of tree node ids, width
 * tree->depth + 1, -1 padded): the trajectory advances with the base tree
 * while the extra nodes are only scored. No policy is consulted. */
entmtp_status emt_session_probe_step(entmtp_session *S, const emt_tree *tree, const int32_t *commit,
                                     int32_t commit_rows, uint8_t *node_ok, entmtp_step_result *r);

/* The heads' top-k ids (emt_session_topk(S) per level) at the current
 * position, for head levels 0..n_heads-1: Medusa heads read the last hidden
 * state only; Hydra head d is conditioned on path[0..d] (the tokens after
 * the current position, e.g. the true continuation for accuracy tables).
 * Output [n_heads][topk]. Nothing is committed. */
entmtp_status emt_session_head_topk(entmtp_session *S, const int32_t *path, int32_t n_heads,
                                    int32_t *top_ids);
int32_t emt_session_topk(const entmtp_session *S);

/* Negative log-likelihood of tokens[first_scored..n_tokens) under the model,
 * each given all tokens before it (teacher forcing), summed into *nll_sum
 * (nats) over *n_scored tokens: continuation perplexity for benchmarks.
 * Resets the session; rows go through the model in chunks of the session's
 * tree size, so create it with emt_session_create_sized(.., 64, ..). */
entmtp_status emt_session_score(entmtp_session *S, const int32_t *tokens, int32_t n_tokens,
                                int32_t first_scored, double *nll_sum, int32_t *n_scored);

/* The work of a session's steps since it was created or reset, summed over
 * n_steps steps: the backend's counters (launches, syncs, copies; all zero
 * when counted = 0, the CPU backend) and the host time, i.e. step time less
 * the time spent waiting for the device. replayed_*: the steps that were one
 * graph launch and no kernel launch (a replayed step graph), apart, so their
 * host time is not averaged with a tree's first, direct use or its
 * recording. */
typedef struct emt_step_counters {
    int64_t n_steps;
    int counted;
    emt_exec_counters device;
    double step_seconds, host_seconds;
    int64_t replayed_steps;
    double replayed_host_seconds;
} emt_step_counters;
void emt_session_step_counters(const entmtp_session *S, emt_step_counters *out);
/* Zeroes those sums, so that a reading covers only the steps after it
 * (entmtp bench times steps after a warm-up). */
void emt_session_reset_step_counters(entmtp_session *S);

/* Test support: batch_heads = 0 makes Medusa heads that share the base
 * lm_head take one lm_head product per head (the reference path) instead of
 * one for all heads; last_head_topk exposes the last step's per-head top-k
 * ([n_heads][k] ids and probabilities). */
void emt_session_set_batch_heads(entmtp_session *S, int batch_heads);
/* device_step = 0 makes the session take the host path (top-k and
 * acceptance read back to the host, emt_evaluate_posterior_nodes) even on a
 * backend with the step ops (test support); 1 turns on the device step, and
 * its replayable and sampling forms, where the backend has the ops (session
 * creation does, once the step buffers exist). Takes effect from the next
 * prefill or step. */
void emt_session_set_device_step(entmtp_session *S, int device_step);
/* the element type of the session's target KV cache (kv_type resolved:
 * ENTMTP_KV_DEFAULT is BF16 on the CUDA backend, F32 on the CPU) */
emt_dtype emt_session_kv_dtype(const entmtp_session *S);
/* 1 when the backend has the ops of the device step (topk_device,
 * embed_device, accept, commit, gather_i32) */
int emt_backend_has_step_ops(const emt_backend_ops *op);
void emt_session_last_head_topk(const entmtp_session *S, const int32_t **ids, const float **probs,
                                int32_t *k);

#endif
