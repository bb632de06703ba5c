/* threshold ladder: bin b = number of thresholds t with s > t. */
#include "check.h"
#include "policy_support.h"

#include <math.h>

int main(void) {
    entmtp_policy_config c = entmtp_policy_default_config(ENTMTP_POLICY_LADDER);
    float th[20] = { 0.1f, 0.3f, 0.6f };
    int32_t trees[4];
    c.n_thresholds = 3;
    c.thresholds = th;
    entmtp_policy *p = NULL;
    CHECK_OK(entmtp_policy_create(&c, &p));
    CHECK_EQ_INT(pick(p, 0.0f, 4), 0);
    CHECK_EQ_INT(pick(p, 0.1f, 4), 0);   /* equal to a threshold: lower bin */
    CHECK_EQ_INT(pick(p, 0.1001f, 4), 1);
    CHECK_EQ_INT(pick(p, 0.3f, 4), 1);
    CHECK_EQ_INT(pick(p, 0.31f, 4), 2);
    CHECK_EQ_INT(pick(p, 0.6f, 4), 2);
    CHECK_EQ_INT(pick(p, 0.61f, 4), 3);
    CHECK_EQ_INT(pick(p, 1.0f, 4), 3);
    CHECK_EQ_INT(pick(p, -5.0f, 4), 0);
    CHECK_ERR(entmtp_policy_validate(p, 3), ENTMTP_ERR_OUT_OF_RANGE, "ladder_trees[3]");
    entmtp_features f = feat_s(NAN);
    int32_t k;
    CHECK_ERR(entmtp_policy_select(p, &f, 4, &k), ENTMTP_ERR_INVALID_ARGUMENT, "features.s");
    /* the policy copied the thresholds: the caller's array may change */
    th[0] = 0.9f;
    CHECK_EQ_INT(pick(p, 0.2f, 4), 1);
    entmtp_policy_free(p);
    /* custom bin -> tree mapping */
    c.n_thresholds = 1;
    th[0] = 0.5f;
    trees[0] = 3;
    trees[1] = 1;
    c.ladder_trees = trees;
    CHECK_OK(entmtp_policy_create(&c, &p));
    CHECK_EQ_INT(pick(p, 0.2f, 4), 3);
    CHECK_EQ_INT(pick(p, 0.7f, 4), 1);
    entmtp_policy_free(p);
    /* no thresholds: one bin */
    c.n_thresholds = 0;
    trees[0] = 0;
    CHECK_OK(entmtp_policy_create(&c, &p));
    CHECK_EQ_INT(pick(p, 0.9f, 1), 0);
    entmtp_policy_free(p);
    /* invalid configs */
    c.n_thresholds = 2;
    th[0] = 0.5f;
    th[1] = 0.2f;
    CHECK_ERR(entmtp_policy_create(&c, &p), ENTMTP_ERR_INVALID_CONFIG, "thresholds[1] = 0.2 is not above thresholds[0] = 0.5");
    th[1] = 0.5f;
    CHECK_ERR(entmtp_policy_create(&c, &p), ENTMTP_ERR_INVALID_CONFIG, "not above");
    th[1] = NAN;
    CHECK_ERR(entmtp_policy_create(&c, &p), ENTMTP_ERR_INVALID_CONFIG, "not finite");
    c.n_thresholds = entmtp_limit(ENTMTP_LIMIT_MAX_LADDER);
    CHECK(c.n_thresholds > 1 && c.n_thresholds <= 20);
    for (int32_t i = 0; i < c.n_thresholds; i++) th[i] = 0.01f * (float)(i + 1);
    CHECK_ERR(entmtp_policy_create(&c, &p), ENTMTP_ERR_INVALID_CONFIG, "n_thresholds");
    /* thresholds given by count but no array */
    c.n_thresholds = 2;
    c.thresholds = NULL;
    CHECK_ERR(entmtp_policy_create(&c, &p), ENTMTP_ERR_INVALID_CONFIG, "thresholds is NULL");
    return emt_test_finish("test_policy_ladder");
}
