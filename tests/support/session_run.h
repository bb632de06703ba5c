/* Whole-session helpers shared by the lossless tests (test_engine_lossless,
 * test_eagle3): one run of a session, and a bank of every built-in tree. */
#ifndef EMT_TEST_SESSION_RUN_H
#define EMT_TEST_SESSION_RUN_H

#include "entmtp.h"

/* Prefills `prompt` and generates n_gen tokens (AR when `ar`, else with
 * `pol`, NULL for the default policy), never stopping early (no stop tokens);
 * copies the session's tokens (prompt + n_gen, checked) to out and its mean
 * accept length to *mean_accept. Returns the session's creation status:
 * nothing runs when that fails; later failures are CHECK failures. */
entmtp_status emt_test_generate(entmtp_model *m, entmtp_heads *h, entmtp_bank *b, entmtp_policy *pol, int ar,
                                const int32_t *prompt, int32_t n_prompt, int32_t n_gen, int32_t kv_capacity,
                                int32_t *out, int32_t *n_out, double *mean_accept);

/* prompt_activation_bits of the sessions emt_test_generate creates (16) */
extern int32_t emt_test_prompt_bits;
/* step_activation_bits of the sessions emt_test_generate creates (16) */
extern int32_t emt_test_step_bits;
/* kv_type of the sessions emt_test_generate creates (ENTMTP_KV_DEFAULT) */
extern int32_t emt_test_kv_type;

/* A bank with every built-in tree no deeper than max_depth; the number of
 * trees (checked >= 5), 0 when the bank could not be created. */
int32_t emt_test_bank_of_builtins(int32_t max_depth, entmtp_bank **bank);

#endif
