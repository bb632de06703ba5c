/* Stage 2 of a step, verify: one forward over the tree's nodes at positions
 * L + depth, under the tree mask, with the exact (batch-invariant) products,
 * so every node's logits are those AR would compute at its position. With
 * the lengths in device memory (dyn_step) the nodes' K/V go to the tree
 * area past the KV capacity, and commit moves the accepted ones to L. */
#include "engine/session_internal.h"

entmtp_status emt_step_verify(entmtp_session *S, emt_step *st) {
    const emt_tree *t = st->tree;
    if (emt_step_dyn(S, st)) {
        emt_dyn_rows rows = { S->rec_dev + S->w_len, t->position_ids, S->kv.capacity };
        return emt_forward_dyn(S->ex, S->model, &S->kv, &S->s, S->rec_dev + S->w_node_tok, &rows, t->n_nodes,
                               t->attn_mask, 1, t->n_nodes);
    }
    for (int32_t i = 0; i < t->n_nodes; i++) S->positions[i] = st->L + t->position_ids[i];
    if (st->nodes_on_device)
        return emt_forward_device_tokens(S->ex, S->model, &S->kv, &S->s, S->rec_dev + S->w_node_tok, S->positions,
                                         t->n_nodes, st->L, t->attn_mask, 1, t->n_nodes);
    return emt_forward(S->ex, S->model, &S->kv, &S->s, S->node_tokens, S->positions, t->n_nodes, st->L,
                       t->attn_mask, 1, t->n_nodes);
}
