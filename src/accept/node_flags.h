/* Per-node acceptance of a verified tree, for tree search: which nodes the
 * verifier would accept, so that the accept length of every prefix-closed
 * subtree can be read off one verification of a larger tree. */
#ifndef EMT_NODE_FLAGS_H
#define EMT_NODE_FLAGS_H

#include "common/common.h"

/* ok[0] = 1 (the root is always emitted); for i > 0, ok[i] = ok[parents[i]]
 * and node i's token is acceptable under its parent's distribution: the
 * parent's argmax at temperature 0, else probability > min(epsilon,
 * delta * exp(-H)) under softmax(logits / temperature) - the rule of
 * emt_evaluate_posterior_nodes, so the deepest ok node of a subtree is that
 * subtree's accept length. Parents must precede their children (node order
 * of a compiled tree). probs: `vocab` floats of scratch (typical only). */
entmtp_status emt_accept_node_flags(int32_t n_nodes, int32_t vocab, const float *node_logits,
                                    const int32_t *node_tokens, const int32_t *parents,
                                    float temperature, float epsilon, float delta, float *probs,
                                    uint8_t *ok);

#endif
