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
        emt_tree_outlook view = { S->outlook.expected_accept, S->outlook.expected_seconds, S->outlook.ar_tree,
                                  S->outlook.ar_seconds };
        int drafts = emt_policy_drafts(S->policy);
        dynamic = drafts && emt_policy_wants_dynamic_tree(S->policy);
        if (!drafts) ol = &view; /* a plain step of the payoff gate: the policy names the root-only tree */
        /* the throughput and dynamic policies choose by the outlook; a custom
         * policy is shown it (features.expected_accept/expected_seconds) */
        else if (emt_policy_shows_outlook(S->policy) && S->outlook.expected_accept) {
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

/* A drafter whose chain is a call per level (Hydra, EAGLE-3) costs, on a
 * CPU, about a tenth of an AR step a level, so a step runs only the levels
 * it can use: those of the tree it will draft when that is known in
 * advance (no policy, or the static policy), and for the outlook policies
 * (throughput, dynamic) one level at a time while a deeper tree could
 * still pay (emt_outlook_deeper_may_pay). Policies that read every level's
 * features (ladder, hysteresis, UCB, custom) and tree search's probes get
 * every level; so does a drafter whose levels come out of one call
 * (Medusa). None run while the payoff gate of the throughput and dynamic
 * policies has found that drafts do not pay (emt_policy_drafts). Returns
 * the levels run. */
static int32_t draft_chain(entmtp_session *S, const emt_step *st) {
    const emt_drafter *dr = S->drafter;
    const int32_t all = S->heads->n_heads;
    if (st->probe) return dr->chain(S, st->root, 0, all);
    if (S->policy && !emt_policy_drafts(S->policy)) return 0; /* drafts do not pay now: a plain step */
    if (!dr->by_level) return dr->chain(S, st->root, 0, all);
    int32_t fixed = !S->policy ? 0 : emt_policy_static_tree(S->policy);
    if (fixed >= 0 && fixed < S->n_trees) {
        int32_t depth = emt_bank_tree(S->bank, fixed)->depth;
        return dr->chain(S, st->root, 0, depth < all ? depth : all);
    }
    if (!emt_policy_needs_outlook(S->policy)) return dr->chain(S, st->root, 0, all);
    int dynamic = emt_policy_wants_dynamic_tree(S->policy);
    int32_t levels = 0;
    while (levels < all && emt_outlook_deeper_may_pay(&S->outlook, S->bank, S->chain_p, S->topk, levels, all,
                                                       S->topk, dynamic))
        levels = dr->chain(S, st->root, levels, levels + 1);
    return levels;
}

/* The node tokens where the record's root and head lists are (the same
 * picks as on the host): a one-node tree's root in one gather, any other
 * tree by its drafter. The index arrays depend on the tree alone. */
void emt_step_draft_device(entmtp_session *S, const emt_step *st) {
    const emt_tree *t = st->tree;
    if (t->n_nodes > 1) {
        S->drafter->fill_tree(S, t, 0, 1);
        return;
    }
    S->gather_idx[0] = (int32_t)(offsetof(emt_step_record, next_root) / sizeof(int32_t));
    S->model->be->ops->gather_i32(S->ex, S->rec_dev + S->w_node_tok, S->rec_dev, S->gather_idx, 1);
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
        st->n_heads = S->drafter->chain(S, st->root, st->n_heads, st->tree->depth);
        st->head_seconds += emt_now() - t0;
    }
    /* the root and the heads' lists still on the device: the node tokens are
     * drafted there too (emt_step_draft_device, in the step's device span) */
    st->nodes_on_device = root_ready && (st->tree->n_nodes == 1 || heads_ready) && emt_step_on_device(S, st);
    if (st->nodes_on_device) return ENTMTP_OK;
    if (st->tree->n_nodes > 1) S->drafter->fill_tree(S, st->tree, st->root, 0);
    else S->node_tokens[0] = st->root;
    return ENTMTP_OK;
}
