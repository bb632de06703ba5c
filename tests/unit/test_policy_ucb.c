/* UCB1 with the Mamba-drafter reward -(1 + lambda * gamma) / N_accept: tries
 * every arm once in order, then settles on the best arm of a stationary bandit. */
#include "check.h"
#include "policy_support.h"

static uint64_t rng = 88172645463325252ull;
static double uniform(void) {
    rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

int main(void) {
    entmtp_policy_config c = entmtp_policy_default_config(ENTMTP_POLICY_UCB);
    c.ucb_exploration = 0.3f;
    entmtp_policy *p = NULL;
    CHECK_OK(entmtp_policy_create(&c, &p));
    /* arm k accepts 1 + Bernoulli trials; arm 2 has the best mean */
    const double success[4] = { 0.2, 0.4, 0.8, 0.5 };
    const int32_t depth[4] = { 2, 3, 4, 4 };
    int pulls[4] = { 0 };
    for (int t = 0; t < 1500; t++) {
        int32_t k = pick(p, 0.5f, 4);
        CHECK(k >= 0 && k < 4);
        if (t < 4) CHECK_EQ_INT(k, t); /* every arm once, in order */
        int acc = 1;
        for (int d = 0; d < depth[k]; d++) {
            if (uniform() < success[k]) acc++;
            else break;
        }
        entmtp_outcome o = { sizeof o, k, 10, depth[k], acc, 0.01 };
        CHECK_OK(entmtp_policy_observe(p, &o));
        if (t >= 1000) pulls[k]++;
    }
    printf("last 500 pulls: %d %d %d %d\n", pulls[0], pulls[1], pulls[2], pulls[3]);
    CHECK(pulls[2] > 400);
    /* reset forgets everything: arms are tried in order again */
    entmtp_policy_reset(p);
    CHECK_EQ_INT(pick(p, 0.5f, 4), 0);
    entmtp_policy_free(p);

    /* the length penalty decides between arms with equal accept lengths:
     * arm 0 (gamma 1) vs arm 1 (gamma 4), both always accept 2 tokens.
     * reward = -(1 + 0.5*gamma)/2: arm 0 -0.75, arm 1 -1.5 */
    c.ucb_exploration = 0.1f;
    c.ucb_length_penalty = 0.5f;
    CHECK_OK(entmtp_policy_create(&c, &p));
    int count0 = 0;
    for (int t = 0; t < 200; t++) {
        int32_t k = pick(p, 0.5f, 2);
        entmtp_outcome o = { sizeof o, k, 5, k == 0 ? 1 : 4, 2, 0.01 };
        entmtp_policy_observe(p, &o);
        if (t >= 100 && k == 0) count0++;
    }
    CHECK(count0 >= 95);
    entmtp_policy_free(p);
    /* without the penalty, a tie is broken toward the lower index */
    c.ucb_length_penalty = 0.0f;
    c.ucb_exploration = 0.0f;
    CHECK_OK(entmtp_policy_create(&c, &p));
    for (int t = 0; t < 2; t++) {
        int32_t k = pick(p, 0.5f, 2);
        entmtp_outcome o = { sizeof o, k, 5, 2, 2, 0.01 };
        entmtp_policy_observe(p, &o);
    }
    CHECK_EQ_INT(pick(p, 0.5f, 2), 0);
    entmtp_outcome bad = { sizeof bad, 5, 5, 2, 2, 0.01 };
    CHECK_ERR(entmtp_policy_observe(p, &bad), ENTMTP_ERR_OUT_OF_RANGE, "tree_index = 5");
    bad.tree_index = 0;
    bad.accept_length = 0;
    CHECK_ERR(entmtp_policy_observe(p, &bad), ENTMTP_ERR_INVALID_ARGUMENT, "accept_length");
    entmtp_policy_free(p);
    c.ucb_exploration = -1;
    CHECK_ERR(entmtp_policy_create(&c, &p), ENTMTP_ERR_INVALID_CONFIG, "ucb_exploration");
    return emt_test_finish("test_policy_ucb");
}
