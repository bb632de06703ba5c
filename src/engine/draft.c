/* Stage 1 of a step, draft: the root token and the base model's statistics,
 * the heads' top-k lists, the policy's tree and the tree's node tokens. */
#include "engine/session_internal.h"
#include "policy/policy_internal.h"

#include <stddef.h>

static const emt_tree g_ar_tree = {
    .name = "ar", .n_paths = 0, .n_nodes = 1, .depth = 0, .topk = 1,
    .attn_mask = (uint8_t[]){ 1 }, .tree_indices = (int32_t[]){ 0 }, .position_ids = (int32_t[]){ 0 },
    .parents = (int32_t[]){ -1 }, .node_ranks = (int32_t[]){ -1 }, .n_leaves = 1,
    .retrieve_indices = (int32_t[]){ 0 },
};

/* The root: greedy top-1 of the next-token logits, or a typical sample at
 * temperature > 0; p0 and entropy are the base model's features. Where the
 * previous step's record has it (the device sampled it with this root's
 * uniform), it is taken from there. */
static entmtp_status draft_root(entmtp_session *S, emt_step *st) {
    const emt_backend_ops *op = S->model->be->ops;
    const int32_t V = S->model->cfg.vocab;
    if (S->next_ready) {
        const emt_step_record *r = (const emt_step_record *)S->rec_host;
        st->root = r->next_root;
        st->p0 = r->next_p0;
        st->entropy = r->next_entropy;
        emt_root_taken(S);
        return ENTMTP_OK;
    }
    op->topk(S->ex, S->s.next_logits, 1, V, 1, &st->root, &st->p0, &st->entropy);
    if (S->p.temperature <= 0) return ENTMTP_OK;
    const float *next_host = S->s.next_logits;
    if (!op->host_memory) {
        entmtp_status status = op->download(S->ex, S->host_next, S->s.next_logits, (size_t)V * sizeof(float));
        if (status) return status;
        next_host = S->host_next;
    }
    double u = emt_u53_uniform(emt_root_uniform(S));
    emt_root_taken(S);
    st->root = emt_sample_typical_u(next_host, V, S->p.temperature, S->p.epsilon, S->p.delta, u);
    return ENTMTP_OK;
}

/* The policy's tree for this step (bank tree 0 without a policy). */
static entmtp_status choose_tree(entmtp_session *S, emt_step *st) {
    int32_t k = 0;
    int dynamic = 0; /* the policy asked for a dynamic tree of the chosen tree's size */
    if (S->policy) {
        const emt_tree_outlook *ol = NULL;
        emt_tree_outlook view = { S->outlook.expected_accept, S->outlook.expected_seconds };
        dynamic = emt_policy_wants_dynamic_tree(S->policy);
        /* the throughput and dynamic policies choose by the outlook; a custom
         * policy is shown it (features.expected_accept/expected_seconds) */
        if (emt_policy_shows_outlook(S->policy) && S->outlook.expected_accept) {
            emt_outlook_compute(&S->outlook, S->bank, S->chain_p, S->topk, st->n_heads, S->topk, dynamic);
            emt_features_set_outlook(&S->features, S->outlook.expected_accept, S->outlook.expected_seconds);
            ol = &view;
        }
        entmtp_status status = emt_policy_select_outlook(S->policy, &S->features.f, ol, S->n_trees, &k);
        if (status) return status;
    }
    if (k < 0 || k >= S->n_trees)
        return emt_fail(ENTMTP_ERR_OUT_OF_RANGE, "entmtp_step: the policy chose tree %d, outside the bank [0, %d)", k, S->n_trees);
    st->tree = emt_outlook_tree(&S->outlook, S->bank, k, dynamic);
    st->tree_index = k;
    st->dynamic_tree = dynamic;
    return ENTMTP_OK;
}

/* Hydra's chain runs one head call per level, and on a CPU a level costs
 * about a tenth of an AR step, so a step runs only the levels it can use:
 * those of the tree it will draft when that is known in advance (no
 * policy, or the static policy), and for the outlook policies (throughput,
 * dynamic) one level at a time while a deeper tree could still pay
 * (emt_outlook_deeper_may_pay). Policies that read every head's features
 * (ladder, hysteresis, UCB, custom) and tree search's probes get every
 * level; so do Medusa heads, which run in one product. Returns the levels
 * run. */
static int32_t draft_chain(entmtp_session *S, const emt_step *st) {
    const int32_t all = S->heads->n_heads;
    if (S->heads->kind != ENTMTP_HEADS_HYDRA || st->probe) return emt_draft_heads(S, st->root, 0, all);
    int32_t fixed = !S->policy ? 0 : emt_policy_static_tree(S->policy);
    if (fixed >= 0 && fixed < S->n_trees) {
        int32_t depth = emt_bank_tree(S->bank, fixed)->depth;
        return emt_draft_heads(S, st->root, 0, depth < all ? depth : all);
    }
    if (!emt_policy_needs_outlook(S->policy)) return emt_draft_heads(S, st->root, 0, all);
    int dynamic = emt_policy_wants_dynamic_tree(S->policy);
    int32_t levels = 0;
    while (levels < all && emt_outlook_deeper_may_pay(&S->outlook, S->bank, S->chain_p, S->topk, levels, all,
                                                       S->topk, dynamic))
        levels = emt_draft_heads(S, st->root, levels, levels + 1);
    return levels;
}

/* Node tokens for the chosen tree. */
static void draft_nodes(entmtp_session *S, const emt_tree *t, int32_t root) {
    S->node_tokens[0] = root;
    if (t->n_nodes == 1) return;
    if (S->heads->kind == ENTMTP_HEADS_MEDUSA) {
        for (int32_t i = 1; i < t->n_nodes; i++)
            S->node_tokens[i] = S->chain_ids[(size_t)(t->position_ids[i] - 1) * S->topk + t->node_ranks[i]];
        return;
    }
    /* Hydra: nodes are sorted by depth, so parents are drafted first. A
     * parent on the rank-0 chain reuses the chain's head call. */
    for (int32_t i = 0; i < t->n_nodes; i++) S->parent_row[i] = -1;
    int32_t i = 1;
    while (i < t->n_nodes) {
        int32_t depth = t->position_ids[i];
        int32_t end = i;
        while (end < t->n_nodes && t->position_ids[end] == depth) end++;
        /* one head call for the off-chain parents of this depth */
        int32_t rows = 0;
        for (int32_t k = i; k < end; k++) {
            int32_t par = t->parents[k];
            int on_chain = 1;
            for (int32_t a = par; a > 0; a = t->parents[a])
                if (t->node_ranks[a] != 0) on_chain = 0;
            if (on_chain || S->parent_row[par] >= 0) continue;
            int32_t d = t->position_ids[par];
            for (int32_t a = par; a >= 0; a = t->parents[a]) S->path[t->position_ids[a]] = S->node_tokens[a];
            emt_hydra_input_row(S, rows, S->path, d + 1);
            S->parent_row[par] = rows++;
        }
        if (rows > 0) emt_head_run(S, depth - 1, rows, S->s.head_in, S->top_ids, S->top_p);
        for (int32_t k = i; k < end; k++) {
            int32_t par = t->parents[k];
            const int32_t *ids = S->parent_row[par] >= 0
                                     ? S->top_ids + (size_t)S->parent_row[par] * S->topk
                                     : S->chain_ids + (size_t)(depth - 1) * S->topk;
            S->node_tokens[k] = ids[t->node_ranks[k]];
        }
        i = end;
    }
}

/* Hydra's node tokens on the device, where the heads leave their top-k
 * lists: the root and the rank-0 chain from the step record, each level's
 * off-chain parents in one head call whose input rows are embedded from the
 * device tokens of their paths, then one gather per level into the node
 * tokens (rec_dev + w_node_tok). Same tokens as draft_nodes. */
static void draft_hydra_on_device(entmtp_session *S, const emt_tree *t) {
    const emt_backend_ops *op = S->model->be->ops;
    const int32_t H = S->model->cfg.hidden, K = S->topk;
    int32_t *rec = S->rec_dev, *idx = S->gather_idx;
    const int32_t w_root = (int32_t)(offsetof(emt_step_record, next_root) / sizeof(int32_t));
    idx[0] = w_root;
    op->gather_i32(S->ex, rec + S->w_node_tok, rec, idx, 1);
    for (int32_t i = 0; i < t->n_nodes; i++) S->parent_row[i] = -1;
    int32_t i = 1;
    while (i < t->n_nodes) {
        int32_t depth = t->position_ids[i];
        int32_t end = i;
        while (end < t->n_nodes && t->position_ids[end] == depth) end++;
        /* rows of [h, e(path tokens)]: the h slot's token is a placeholder
         * (the root), overwritten by the hidden state after the embedding */
        int32_t rows = 0, n_idx = 0;
        for (int32_t k = i; k < end; k++) {
            int32_t par = t->parents[k];
            int on_chain = 1;
            for (int32_t a = par; a > 0; a = t->parents[a])
                if (t->node_ranks[a] != 0) on_chain = 0;
            if (on_chain || S->parent_row[par] >= 0) continue;
            for (int32_t a = par; a >= 0; a = t->parents[a]) S->path[t->position_ids[a]] = a;
            idx[n_idx++] = w_root;
            for (int32_t j = 0; j < depth; j++) idx[n_idx++] = (int32_t)S->w_node_tok + S->path[j];
            S->parent_row[par] = rows++;
        }
        if (rows > 0) {
            op->gather_i32(S->ex, rec + S->w_row_tok, rec, idx, n_idx);
            op->embed_device(S->ex, &S->model->tok_embd, H, rec + S->w_row_tok, n_idx, S->s.head_in);
            for (int32_t r = 0; r < rows; r++) {
                S->dst_rows[r] = r * (depth + 1);
                S->src_rows[r] = 0;
            }
            op->copy_rows(S->ex, S->s.head_in, S->s.last_hidden, (size_t)H, S->dst_rows, S->src_rows, rows);
            emt_head_run_device(S, depth - 1, rows, S->s.head_in, rec + S->w_draft_ids, (float *)(rec + S->w_draft_p));
        }
        for (int32_t k = i; k < end; k++) {
            int32_t par = t->parents[k];
            idx[k - i] = S->parent_row[par] >= 0 ? (int32_t)S->w_draft_ids + S->parent_row[par] * K + t->node_ranks[k]
                                                 : (int32_t)S->rec_lay.head_ids + (depth - 1) * K + t->node_ranks[k];
        }
        op->gather_i32(S->ex, rec + S->w_node_tok + i, rec, idx, end - i);
        i = end;
    }
}

/* The node tokens where the record's root and head lists are: Medusa's and
 * a one-node tree's in one gather (the same picks as draft_nodes), Hydra's
 * by draft_hydra_on_device. The index arrays depend on the tree alone. */
void emt_step_draft_device(entmtp_session *S, const emt_step *st) {
    const emt_tree *t = st->tree;
    if (t->n_nodes > 1 && S->heads->kind == ENTMTP_HEADS_HYDRA) {
        draft_hydra_on_device(S, t);
        return;
    }
    int32_t *idx = S->gather_idx;
    idx[0] = (int32_t)(offsetof(emt_step_record, next_root) / sizeof(int32_t));
    for (int32_t i = 1; i < t->n_nodes; i++)
        idx[i] = (int32_t)S->rec_lay.head_ids + (t->position_ids[i] - 1) * S->topk + t->node_ranks[i];
    S->model->be->ops->gather_i32(S->ex, S->rec_dev + S->w_node_tok, S->rec_dev, idx, t->n_nodes);
}

entmtp_status emt_step_draft(entmtp_session *S, emt_step *st) {
    int root_ready = S->next_ready; /* the root is in the device record */
    entmtp_status status = draft_root(S, st);
    int heads_ready = S->next_ready && S->next_heads;
    S->next_ready = S->next_heads = 0; /* consumed: the position moves on */
    if (status) return status;
    int speculate = !st->force_ar && S->heads && (st->probe || (S->bank && S->n_trees > 0));
    st->n_heads = 0;
    st->head_seconds = 0;
    if (speculate) {
        st->n_heads = S->heads->n_heads;
        if (heads_ready) {
            size_t n = (size_t)st->n_heads * S->topk;
            memcpy(S->chain_ids, S->rec_host + S->rec_lay.head_ids, n * sizeof(int32_t));
            memcpy(S->chain_p, S->rec_host + S->rec_lay.head_p, n * sizeof(float));
        } else {
            double t0 = emt_now();
            st->n_heads = draft_chain(S, st);
            st->head_seconds = emt_now() - t0;
        }
    }
    emt_features_fill(&S->features, st->p0, st->entropy, S->chain_p, st->n_heads, S->topk, S->topk, S->n_trees,
                      S->last_accept, S->ema, S->stats.n_steps);
    st->tree = &g_ar_tree;
    st->tree_index = -1;
    if (st->probe) st->tree = st->probe->tree;
    else if (speculate && (status = choose_tree(S, st))) return status;
    if (st->tree->depth > st->n_heads) { /* a tree deeper than the levels the policy looked at */
        double t0 = emt_now();
        st->n_heads = emt_draft_heads(S, st->root, st->n_heads, st->tree->depth);
        st->head_seconds += emt_now() - t0;
    }
    /* the root and the heads' lists still on the device: the node tokens are
     * drafted there too (emt_step_draft_device, in the step's device span) */
    st->nodes_on_device = root_ready && (st->tree->n_nodes == 1 || heads_ready) && emt_step_on_device(S, st);
    if (!st->nodes_on_device) draft_nodes(S, st->tree, st->root);
    return ENTMTP_OK;
}
