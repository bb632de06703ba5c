/* The session's state and the four stages of one decoding step, shared by
 * the files of src/engine/ (never installed):
 *   draft  (draft.c)       root token, heads' top-k, tree choice, node tokens
 *   verify (verify.c)      one forward over the tree's nodes
 *   accept (accept_step.c) the longest accepted path, cut by stop tokens,
 *                          max_tokens and the KV capacity
 *   commit (commit.c)      the accepted path's KV rows, last hidden and
 *                          logits rows, tokens and statistics
 * step.c runs them in that order; session.c holds the lifecycle, prefill
 * and the accessors. */
#ifndef EMT_SESSION_INTERNAL_H
#define EMT_SESSION_INTERNAL_H

#include "accept/accept.h"
#include "engine/drafter.h"
#include "engine/engine.h"
#include "engine/features.h"

#define EMT_PREFILL_CHUNK 128

struct entmtp_session {
    const entmtp_model *model;
    const entmtp_heads *heads; /* NULL: AR only */
    const emt_drafter *drafter; /* the heads' drafter (drafter.h); NULL without heads */
    void *drafter_state;        /* its own state over the context (EAGLE-3), or NULL */
    const entmtp_bank *bank;   /* NULL: AR only */
    entmtp_policy *policy;     /* borrowed; NULL: static tree 0 */
    entmtp_session_params p;   /* p.stop_tokens points at stop_tokens */
    int32_t stop_tokens[EMT_MAX_STOP_TOKENS];
    emt_exec *ex;
    emt_kv kv;
    emt_scratch s;
    int32_t n_trees, max_nodes, max_depth, topk;
    /* tokens: prompt then generated; committed KV rows == n_tokens */
    int32_t *tokens;
    int32_t n_tokens, n_prompt;
    int have_logits;
    uint64_t rng;
    /* the uniform of the next root sample (temperature > 0), drawn from rng
     * ahead of the step that samples it on the device and kept until a root
     * is taken, so the stream gives each root the uniform it gives without
     * the device (one draw per root, in order) */
    uint64_t root_u53;
    int root_u_drawn;
    /* host-side per-step buffers */
    int32_t *node_tokens, *positions, *dst_rows, *src_rows, *emit;
    int32_t *top_ids;      /* [max_rows][topk] */
    float *top_p;          /* [max_rows][topk] */
    int32_t *chain_ids;    /* the drafter's greedy chain, top-k per level: [n_heads][topk] */
    float *chain_p;
    int32_t *parent_row;   /* Hydra: node -> row of its head call (-1 none) */
    int32_t *path;         /* scratch for one node's path */
    float *host_logits;    /* device backends: node logits copied for acceptance */
    float *host_next;      /* device backends: next-token logits on the host */
    float *probe_probs;    /* search probes at temperature > 0: one distribution */
    emt_features_store features;
    int32_t last_accept;
    float ema;
    int batch_heads;       /* Medusa: one lm_head product for all heads (default) */
    int64_t *usage;
    entmtp_session_stats stats;
    emt_step_counters counters; /* per-step work (step.c) */
    emt_outlook_state outlook; /* per-tree expected accept and step time (bank + heads only) */
    /* the device step (backends with the step ops, backend.h): accept,
     * commit and the next root and heads stay on the device, and one
     * download of the step record per step brings back what the host needs */
    int device_step;           /* the backend has topk_device, embed_device, accept, commit */
    /* ... and the step's lengths live in device memory (rec_dev + w_len),
     * so that its launches do not depend on the context length and the
     * backend may replay them as one graph per tree (backend.h, graphs) */
    int dyn_step;
    /* ... and samples the root at temperature > 0 (sample_root, write_i32):
     * the uniform goes to rec_dev + w_len + 2 with the step's inputs */
    int device_sample;
    emt_step_record_layout rec_lay;
    int32_t *rec_dev;          /* device record */
    int32_t *rec_host;         /* its host copy */
    uint8_t *stop_dev;         /* device [vocab]: 1 for a stop token */
    int32_t *draft_ids_dev;    /* device copy of heads->draft_ids (NULL: no draft vocabulary) */
    /* rec_dev's words beyond the downloaded record: Hydra's device drafting */
    size_t w_node_tok;         /* [max_nodes] the tree's node tokens */
    size_t w_draft_ids, w_draft_p; /* [head_rows][topk] one level's head calls */
    size_t w_row_tok;          /* [head_rows][n_heads + 1] those calls' input tokens */
    size_t w_len;              /* [4] the step's inputs: L, max_tokens (dyn_step), the next root's
                                * uniform (device_sample, temperature > 0: u53's low and high words) */
    int32_t *gather_idx;       /* host [head_rows * (n_heads + 1)] */
    int next_ready;            /* rec_host holds the current position's root, p0, entropy */
    int next_heads;            /* ... and the heads' top-k lists */
};

/* What a search probe changes in a step: the tree verified is `tree` (not
 * chosen by the policy), every node's acceptance goes to node_ok, and the
 * committed path is the best one among the rows of `commit` (retrieve rows
 * in the tree's node ids, width tree->depth + 1). */
typedef struct emt_step_probe {
    const emt_tree *tree;
    const int32_t *commit;
    int32_t commit_rows;
    uint8_t *node_ok;
} emt_step_probe;

/* One step in flight: what each stage leaves for the next. */
typedef struct emt_step {
    /* inputs */
    int force_ar;                /* verify the root alone (entmtp_step_ar) */
    int32_t max_tokens;          /* > 0: emit at most this many tokens */
    const emt_step_probe *probe; /* NULL outside tree search */
    int32_t L;                   /* committed tokens before the step */
    double t0;                   /* host clock at the start */
    /* draft */
    int32_t root;                /* the first token (greedy or sampled) */
    float p0, entropy;           /* base model's top-1 probability and entropy */
    int32_t n_heads;             /* heads run this step (0: AR) */
    double head_seconds;         /* host time of the Hydra levels the host ran (0: the device ran them) */
    const emt_tree *tree;        /* the tree verified */
    int nodes_on_device;         /* node tokens drafted on the device (rec_dev + w_node_tok) */
    int32_t tree_index;          /* its bank index, -1 when not from the bank */
    int dynamic_tree;            /* built for this step (not a bank tree: never replayed) */
    /* accept */
    int32_t acc;                 /* accepted draft tokens on the best path */
    const int32_t *path;         /* the best path's node ids (root first) */
    int32_t accept_length;       /* acc + 1, before any cut */
    int32_t n_emit;              /* tokens kept after the cuts */
    int stopped, kv_full;
    /* commit */
    int committed;               /* the tokens are in the session */
    double seconds;              /* host time of the whole step */
} emt_step;

/* The stages, in order; each returns a status with its error recorded. On
 * the device path (emt_step_on_device) the device's part of the stages is
 * queued without a wait, as one span that step.c may record as a graph:
 * emt_step_draft_device (node tokens), verify, accept, emt_step_commit_queue;
 * then emt_step_commit downloads the record. */
entmtp_status emt_step_draft(entmtp_session *S, emt_step *st);
void emt_step_draft_device(entmtp_session *S, const emt_step *st);
entmtp_status emt_step_verify(entmtp_session *S, emt_step *st);
entmtp_status emt_step_accept(entmtp_session *S, emt_step *st);
void emt_step_commit_queue(entmtp_session *S, const emt_step *st);
entmtp_status emt_step_commit(entmtp_session *S, emt_step *st);

/* accept_step.c: whether `tok` ends generation (the session's stop tokens,
 * or the model's end-of-generation tokens when none were given) */
int emt_is_stop(const entmtp_session *S, int32_t tok);

/* step_mode.c: whether this step takes the device path (accept, commit
 * and the next position's root and heads on the device, one record
 * download). */
int emt_step_on_device(const entmtp_session *S, const emt_step *st);
/* step_mode.c: whether the device queues the next position's root into the
 * record (greedy top-1, or at temperature > 0 the typical sample with the
 * uniform of emt_root_uniform) */
int emt_root_on_device(const entmtp_session *S);
/* step_mode.c: ... and the root is a sample drawn there (temperature > 0) */
int emt_root_sampled_on_device(const entmtp_session *S);
/* step_mode.c: the next root's uniform (u53), drawn from the session's RNG
 * on the first call after a root was taken; emt_root_taken consumes it */
uint64_t emt_root_uniform(entmtp_session *S);
void emt_root_taken(entmtp_session *S);
/* step_mode.c: u53's low and high words, as sample_root reads them */
void emt_uniform_words(uint64_t u53, int32_t *w);
/* step_mode.c: at temperature > 0, write the next root's uniform where the
 * device's sample_root reads it (rec_dev + w_len + 2) */
void emt_root_uniform_write(entmtp_session *S);

/* step_mode.c: whether this device step reads its lengths from device
 * memory (rec_dev + w_len): the verify forward, accept and commit take them
 * there */
int emt_step_dyn(const entmtp_session *S, const emt_step *st);

/* commit.c: with root_next, queue the next position's root (top-1, p0,
 * entropy; at temperature > 0 the root is then the typical sample of
 * sample_root) and, with want_heads when the session drafts, its heads'
 * top-k into the device record (emt_step_queue_next); then download the
 * record (emt_step_download): the step's one device-to-host copy and one
 * wait. An AR step does not ask for heads (the next step, if it drafts,
 * then runs them on its own). */
void emt_step_queue_next(entmtp_session *S, int root_next, int want_heads);
entmtp_status emt_step_download(entmtp_session *S, int root_next, int want_heads);
entmtp_status emt_step_finish_device(entmtp_session *S, int root_next, int want_heads);

/* heads.c: drop the backend's recorded step graphs (session reset, a
 * change of the ops a step issues) */
void emt_session_forget_graphs(entmtp_session *S);

/* commit.c: copy hidden row `hidden_row` to last_hidden and logits row
 * `logits_row` to next_logits (queued, no sync). */
void emt_keep_last_row(entmtp_session *S, int32_t hidden_row, int32_t logits_row);

#endif
