/* hysteresis (EntMTP-tau): up when s > tau_on, down when s <= tau_off, and
 * no flapping while s stays between them. */
#include "check.h"
#include "policy_support.h"

#include <math.h>

int main(void) {
    entmtp_policy_config c = entmtp_policy_default_config(ENTMTP_POLICY_HYSTERESIS);
    c.tau_on = 0.5f;
    c.tau_off = 0.2f;
    c.conservative_tree = 1;
    c.aggressive_tree = 3;
    entmtp_policy *p = NULL;
    CHECK_OK(entmtp_policy_create(&c, &p));
    CHECK_EQ_INT(pick(p, 0.3f, 4), 1);  /* starts conservative */
    CHECK_EQ_INT(pick(p, 0.5f, 4), 1);  /* equal to tau_on: not above */
    CHECK_EQ_INT(pick(p, 0.51f, 4), 3); /* up */
    /* stays aggressive anywhere in (tau_off, tau_on] and above */
    const float inside[] = { 0.49f, 0.21f, 0.5f, 0.3f, 0.9f, 0.2001f };
    for (int i = 0; i < 6; i++) CHECK_EQ_INT(pick(p, inside[i], 4), 3);
    CHECK_EQ_INT(pick(p, 0.2f, 4), 1);  /* <= tau_off: down */
    for (int i = 0; i < 6; i++)         /* stays conservative inside the band */
        if (inside[i] <= 0.5f) CHECK_EQ_INT(pick(p, inside[i], 4), 1);
    CHECK_EQ_INT(pick(p, 0.7f, 4), 3);
    entmtp_policy_reset(p);
    CHECK_EQ_INT(pick(p, 0.4f, 4), 1);  /* reset -> conservative */
    /* a long random walk inside the band never switches */
    int32_t first = pick(p, 0.35f, 4), switches = 0;
    uint32_t x = 12345;
    for (int i = 0; i < 1000; i++) {
        x = x * 1103515245u + 12345u;
        float s = 0.2001f + 0.2999f * (float)(x >> 8) / 16777216.0f;
        if (pick(p, s, 4) != first) switches++;
    }
    CHECK_EQ_INT(switches, 0);
    CHECK_ERR(entmtp_policy_validate(p, 3), ENTMTP_ERR_OUT_OF_RANGE, "aggressive_tree = 3");
    entmtp_policy_free(p);
    /* tau_off == tau_on is allowed: a single threshold */
    c.tau_on = c.tau_off = 0.4f;
    CHECK_OK(entmtp_policy_create(&c, &p));
    CHECK_EQ_INT(pick(p, 0.41f, 4), 3);
    CHECK_EQ_INT(pick(p, 0.4f, 4), 1);
    entmtp_policy_free(p);
    c.tau_on = 0.1f;
    c.tau_off = 0.2f;
    CHECK_ERR(entmtp_policy_create(&c, &p), ENTMTP_ERR_INVALID_CONFIG, "tau_off (0.2) > tau_on (0.1)");
    c.tau_off = NAN;
    CHECK_ERR(entmtp_policy_create(&c, &p), ENTMTP_ERR_INVALID_CONFIG, "tau_off");
    return emt_test_finish("test_policy_hysteresis");
}
