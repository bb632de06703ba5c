/* Policy configs: names, defaults, versioned structs, bad arguments. */
#include "check.h"
#include "policy_support.h"

int main(void) {
    for (int k = 0; k <= ENTMTP_POLICY_DYNAMIC; k++) {
        entmtp_policy_kind back;
        CHECK_OK(entmtp_policy_kind_from_name(entmtp_policy_kind_name((entmtp_policy_kind)k), &back));
        CHECK_EQ_INT(back, k);
    }
    entmtp_policy_kind back;
    CHECK_ERR(entmtp_policy_kind_from_name("greedy", &back), ENTMTP_ERR_NOT_FOUND, "greedy");
    CHECK(entmtp_policy_kind_name((entmtp_policy_kind)42) == NULL);
    entmtp_policy_config d = entmtp_policy_default_config(ENTMTP_POLICY_HYSTERESIS);
    CHECK_EQ_INT(d.struct_size, sizeof d);
    CHECK_NEAR(d.tau_on, 0.01, 1e-9);
    CHECK_NEAR(d.tau_off, 0.01, 1e-9);
    CHECK_EQ_INT(d.aggressive_tree, 1);
    /* an old caller's shorter struct: fields it lacks take their defaults */
    struct old_config { size_t struct_size; entmtp_policy_kind kind; int32_t static_tree; } old = {
        sizeof old, ENTMTP_POLICY_STATIC, 3 };
    entmtp_policy *p = NULL;
    CHECK_OK(entmtp_policy_create((const entmtp_policy_config *)(const void *)&old, &p));
    CHECK_EQ_INT(pick(p, 0.5f, 4), 3);
    entmtp_policy_free(p);
    entmtp_policy_config z = d;
    z.struct_size = 0;
    CHECK_ERR(entmtp_policy_create(&z, &p), ENTMTP_ERR_INVALID_ARGUMENT, "struct_size");
    z = d;
    z.kind = (entmtp_policy_kind)9;
    CHECK_ERR(entmtp_policy_create(&z, &p), ENTMTP_ERR_INVALID_CONFIG, "kind 9");
    CHECK_ERR(entmtp_policy_create(NULL, &p), ENTMTP_ERR_INVALID_ARGUMENT, "NULL");
    CHECK_OK(entmtp_policy_create(&d, &p));
    CHECK_ERR(entmtp_policy_validate(p, 0), ENTMTP_ERR_INVALID_CONFIG, "empty");
    int32_t k;
    CHECK_ERR(entmtp_policy_select(p, NULL, 2, &k), ENTMTP_ERR_INVALID_ARGUMENT, "NULL");
    entmtp_policy_free(p);
    entmtp_policy_free(NULL);
    return emt_test_finish("test_policy_config");
}
