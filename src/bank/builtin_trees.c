/* Built-in trees. The two 63-node lists are the public Medusa reference's
 * published tree data (medusa/model/medusa_choices.py), in the order given
 * there: mc_sim_7b_63 (also Hydra's default) and vicuna_7b_stage2 (Medusa's
 * default for Vicuna-7B). */
#include "bank/tree.h"

#include <stdio.h>

static const int32_t mc_sim_7b_63_ranks[] = {0, 0, 0, 1, 0, 1, 2, 0, 0, 0, 1, 0, 0, 2, 3, 0, 3, 4, 0, 4, 2, 0, 0, 5, 0, 0, 1, 5, 0, 6, 6, 0, 7, 0, 1, 0, 1, 1, 7, 0, 8, 0, 0, 2, 3, 0, 0, 9, 8, 9, 1, 0, 0, 0, 2, 0, 1, 2, 0, 0, 3, 4, 0, 2, 1, 0, 0, 4, 0, 0, 5, 0, 0, 0, 0, 0, 1, 1, 0, 0, 6, 0, 3, 0, 5, 0, 1, 3, 0, 0, 7, 0, 0, 8, 0, 0, 9, 6, 0, 0, 4, 0, 1, 4, 7, 0, 0, 1, 2, 2, 0, 0, 3, 1, 2, 2, 8, 0, 0, 5, 0, 1, 5, 1, 0, 1, 0, 2, 1, 9, 0, 0, 6, 0, 0, 0, 0, 1, 1, 6, 0, 7, 0};
static const int32_t mc_sim_7b_63_lens[] = {1, 2, 1, 2, 1, 3, 2, 2, 1, 2, 1, 2, 2, 2, 3, 1, 2, 1, 2, 3, 2, 1, 2, 3, 2, 2, 1, 1, 3, 3, 2, 3, 2, 2, 3, 3, 4, 3, 3, 3, 2, 2, 3, 3, 3, 2, 3, 2, 2, 3, 3, 2, 2, 2, 3, 2, 3, 3, 2, 3, 4, 2, 3};
static const int32_t vicuna_7b_stage2_ranks[] = {0, 0, 0, 1, 0, 1, 0, 0, 0, 1, 0, 2, 0, 2, 0, 0, 1, 0, 3, 3, 0, 1, 0, 2, 0, 4, 0, 0, 2, 0, 4, 1, 1, 1, 0, 0, 0, 0, 0, 0, 5, 0, 0, 3, 0, 5, 0, 2, 0, 3, 0, 0, 1, 1, 0, 6, 6, 0, 7, 0, 0, 4, 4, 0, 1, 2, 0, 8, 7, 0, 3, 0, 0, 0, 0, 1, 0, 0, 5, 2, 1, 0, 0, 6, 1, 0, 1, 0, 0, 1, 0, 2, 0, 0, 5, 0, 0, 9, 0, 1, 2, 8, 0, 4, 0, 0, 2, 1, 1, 3, 0, 0, 7, 0, 0, 0, 2, 0, 0, 8, 1, 1, 0, 0, 1, 0, 0, 6, 0, 9, 0, 1, 3, 0, 0, 0, 3, 1, 0, 2, 0, 5, 0, 3, 1, 0, 0, 2, 0, 7, 0, 1, 4};
static const int32_t vicuna_7b_stage2_lens[] = {1, 2, 1, 2, 3, 2, 1, 2, 3, 2, 1, 3, 2, 1, 3, 2, 2, 3, 4, 1, 3, 2, 3, 2, 3, 2, 1, 2, 3, 2, 2, 2, 1, 3, 4, 3, 2, 3, 3, 4, 3, 2, 2, 3, 1, 3, 3, 2, 3, 4, 3, 3, 4, 2, 1, 3, 4, 3, 3, 2, 4, 2, 2};
static const int32_t chain_ranks[] = { 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0 };
static const int32_t chain_lens[] = { 1, 2, 3, 4, 5 };

typedef struct builtin {
    const char *name;
    const int32_t *ranks, *lens;
    int32_t n_paths;
} builtin;

static const builtin g_builtins[] = {
    { "medusa_vicuna_7b_stage2", vicuna_7b_stage2_ranks, vicuna_7b_stage2_lens, 63 },
    { "mc_sim_7b_63", mc_sim_7b_63_ranks, mc_sim_7b_63_lens, 63 },
    { "hydra_default", mc_sim_7b_63_ranks, mc_sim_7b_63_lens, 63 },
    { "chain_1", chain_ranks, chain_lens, 1 },
    { "chain_2", chain_ranks, chain_lens, 2 },
    { "chain_3", chain_ranks, chain_lens, 3 },
    { "chain_4", chain_ranks, chain_lens, 4 },
    { "chain_5", chain_ranks, chain_lens, 5 },
    { "ar", chain_ranks, chain_lens, 0 },
};

ENTMTP_API const char *entmtp_builtin_tree_name(int32_t i) {
    if (i < 0 || i >= (int32_t)(sizeof g_builtins / sizeof g_builtins[0])) return NULL;
    return g_builtins[i].name;
}

/* chain_k's paths are [0], [0,0], ...: the flat ranks are all zero and the
 * lengths 1..k, so the shared arrays serve every chain. */
entmtp_status emt_builtin_tree(const char *name, const int32_t **ranks, const int32_t **lens, int32_t *n_paths) {
    for (size_t i = 0; i < sizeof g_builtins / sizeof g_builtins[0]; i++)
        if (name && !strcmp(name, g_builtins[i].name)) {
            *ranks = g_builtins[i].ranks;
            *lens = g_builtins[i].lens;
            *n_paths = g_builtins[i].n_paths;
            return ENTMTP_OK;
        }
    /* the message lists the valid names: a typo is fixed from the message alone */
    char known[512] = "";
    size_t used = 0;
    for (size_t i = 0; i < sizeof g_builtins / sizeof g_builtins[0] && used < sizeof known; i++)
        used += (size_t)snprintf(known + used, sizeof known - used, "%s%s", i ? ", " : "", g_builtins[i].name);
    return emt_fail(ENTMTP_ERR_NOT_FOUND, "built-in tree '%s' is unknown; the built-in trees are %s",
                    name ? name : "(null)", known);
}
