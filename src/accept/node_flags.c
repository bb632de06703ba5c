/* Per-node acceptance flags (see node_flags.h). */
#include "accept/node_flags.h"

#include "accept/accept.h"

static int32_t argmax(const float *x, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best]) best = i; /* ties to the lower id, as evaluate_posterior */
    return best;
}

entmtp_status emt_accept_node_flags(int32_t n_nodes, int32_t vocab, const float *node_logits,
                                    const int32_t *node_tokens, const int32_t *parents,
                                    float temperature, float epsilon, float delta, float *probs,
                                    uint8_t *ok) {
    if (n_nodes < 1 || vocab < 1 || (temperature > 0 && !probs))
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "accept_node_flags: %d nodes, vocabulary %d", n_nodes, vocab);
    ok[0] = 1;
    for (int32_t i = 1; i < n_nodes; i++) {
        if (parents[i] < 0 || parents[i] >= i)
            return emt_fail(ENTMTP_ERR_OUT_OF_RANGE, "accept_node_flags: node %d has parent %d (must precede it)", i, parents[i]);
        ok[i] = 0;
    }
    /* one pass per parent that is itself accepted: its distribution is
     * examined once, whatever the number of children */
    for (int32_t p = 0; p < n_nodes; p++) {
        if (!ok[p]) continue;
        const float *lg = node_logits + (size_t)p * (size_t)vocab;
        int32_t arg = -1;
        float thr = 0;
        for (int32_t i = p + 1; i < n_nodes; i++) {
            if (parents[i] != p) continue;
            int32_t tok = node_tokens[i];
            if (tok < 0 || tok >= vocab) continue;
            if (temperature <= 0) {
                if (arg < 0) arg = argmax(lg, vocab);
                ok[i] = tok == arg;
            } else {
                if (arg < 0) {
                    thr = emt_typical_threshold(lg, vocab, temperature, epsilon, delta, probs);
                    arg = 0;
                }
                ok[i] = probs[tok] > thr;
            }
        }
    }
    return ENTMTP_OK;
}
