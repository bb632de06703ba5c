/* The non-static policies the lossless tests run, configured for a bank of
 * n_trees: ladder, hysteresis, UCB, a custom one that picks a different tree
 * every step (counting its calls in *counter), throughput and dynamic. */
#ifndef EMT_TEST_POLICIES_H
#define EMT_TEST_POLICIES_H

#include "entmtp.h"

#define EMT_TEST_N_POLICIES 6
entmtp_policy_config emt_test_policy_config(int index, int32_t n_trees, int32_t *counter);

#endif
