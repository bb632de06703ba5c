/* Stage 2 of a step, verify: one forward over the tree's nodes at positions
 * L + depth, under the tree mask, with the exact (batch-invariant) products,
 * so every node's logits are those AR would compute at its position. */
#include "engine/session_internal.h"

entmtp_status emt_step_verify(entmtp_session *S, emt_step *st) {
    const emt_tree *t = st->tree;
    for (int32_t i = 0; i < t->n_nodes; i++) S->positions[i] = st->L + t->position_ids[i];
    if (st->nodes_on_device)
        return emt_forward_device_tokens(S->ex, S->model, &S->kv, &S->s, S->rec_dev + S->w_node_tok, S->positions,
                                         t->n_nodes, st->L, t->attn_mask, 1, t->n_nodes);
    return emt_forward(S->ex, S->model, &S->kv, &S->s, S->node_tokens, S->positions, t->n_nodes, st->L,
                       t->attn_mask, 1, t->n_nodes);
}
