/* custom: the caller's callbacks, their errors and their range. */
#include "check.h"
#include "policy_support.h"

typedef struct state {
    int selects, observes, resets;
    float last_s;
    int32_t last_n;
    int fail;
    int32_t answer;
} state;

static entmtp_status sel(void *u, const entmtp_features *f, int32_t n, int32_t *out) {
    state *s = u;
    s->selects++;
    s->last_s = f->s;
    s->last_n = n;
    if (s->fail) return ENTMTP_ERR_CALLBACK;
    *out = s->answer;
    return ENTMTP_OK;
}
static void obs(void *u, const entmtp_outcome *o) { ((state *)u)->observes += o->accept_length; }
static void rst(void *u) { ((state *)u)->resets++; }

int main(void) {
    state st = { 0 };
    entmtp_policy_config c = entmtp_policy_default_config(ENTMTP_POLICY_CUSTOM);
    entmtp_policy *p = NULL;
    CHECK_ERR(entmtp_policy_create(&c, &p), ENTMTP_ERR_INVALID_CONFIG, "select callback is NULL");
    c.select = sel;
    c.observe = obs;
    c.reset = rst;
    c.user_data = &st;
    CHECK_OK(entmtp_policy_create(&c, &p));
    st.answer = 2;
    CHECK_EQ_INT(pick(p, 0.25f, 5), 2);
    CHECK_EQ_INT(st.selects, 1);
    CHECK_NEAR(st.last_s, 0.25, 1e-7);
    CHECK_EQ_INT(st.last_n, 5);
    entmtp_outcome o = { sizeof o, 2, 9, 3, 4, 0.01 };
    CHECK_OK(entmtp_policy_observe(p, &o));
    CHECK_EQ_INT(st.observes, 4);
    entmtp_policy_reset(p);
    CHECK_EQ_INT(st.resets, 1);
    st.fail = 1;
    entmtp_features f = feat_s(0.1f);
    int32_t k;
    CHECK_ERR(entmtp_policy_select(p, &f, 5, &k), ENTMTP_ERR_CALLBACK, "select callback returned");
    st.fail = 0;
    st.answer = 7;
    CHECK_ERR(entmtp_policy_select(p, &f, 5, &k), ENTMTP_ERR_OUT_OF_RANGE, "custom policy chose tree 7");
    st.answer = -1;
    CHECK_ERR(entmtp_policy_select(p, &f, 5, &k), ENTMTP_ERR_OUT_OF_RANGE, "tree -1");
    CHECK_OK(entmtp_policy_validate(p, 1));
    entmtp_policy_free(p);
    return emt_test_finish("test_policy_custom");
}
