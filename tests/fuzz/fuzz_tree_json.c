/* Tree choices JSON: parse, validate, compile into a bank. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char *text = malloc(size + 1);
    if (!text) return 0;
    memcpy(text, data, size);
    text[size] = '\0';
    entmtp_bank *bank = NULL;
    entmtp_bank_params bp = entmtp_bank_default_params();
    bp.max_nodes = 300;
    if (entmtp_bank_create(&bp, &bank) == ENTMTP_OK) {
        int32_t idx = -1;
        entmtp_clear_error();
        entmtp_status st = entmtp_bank_add_tree_json(bank, "fuzz", text, &idx);
        fuzz_check_error(st);
        if (st == ENTMTP_OK) {
            entmtp_tree_buffers b = { sizeof b };
            if (entmtp_bank_tree_buffers(bank, idx, &b) != ENTMTP_OK) abort();
            /* structural invariants of a compiled tree */
            if (b.n_nodes < 1 || b.attn_mask[0] != 1 || b.position_ids[0] != 0) abort();
            for (int32_t i = 1; i < b.n_nodes; i++)
                if (b.parents[i] < 0 || b.parents[i] >= i || b.position_ids[i] != b.position_ids[b.parents[i]] + 1) abort();
        }
        entmtp_bank_free(bank);
    }
    free(text);
    return 0;
}
