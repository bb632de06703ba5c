/* Bank files: trees, figures and policy settings; save what loads. */
#include "fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write_tmp(data, size, ".bank.json");
    entmtp_bank *bank = NULL;
    entmtp_clear_error();
    entmtp_status st = entmtp_bank_load(path, NULL, &bank);
    fuzz_check_error(st);
    if (st == ENTMTP_OK) {
        char out[256];
        snprintf(out, sizeof out, "/tmp/entmtp-fuzz-%d.out.json", (int)getpid());
        fuzz_check_error(entmtp_bank_save(bank, out));
        entmtp_bank *again = NULL;
        if (entmtp_bank_load(out, NULL, &again) != ENTMTP_OK) abort(); /* what we write we read */
        if (entmtp_bank_size(again) != entmtp_bank_size(bank)) abort();
        entmtp_bank_free(again);
        unlink(out);
        for (int k = 0; k <= ENTMTP_POLICY_UCB; k++) {
            entmtp_policy_config pc = { sizeof pc };
            if (entmtp_bank_policy_config(bank, (entmtp_policy_kind)k, &pc) == ENTMTP_OK) {
                entmtp_policy *p = NULL;
                if (entmtp_policy_create(&pc, &p) == ENTMTP_OK) {
                    fuzz_check_error(entmtp_policy_validate(p, entmtp_bank_size(bank)));
                    entmtp_policy_free(p);
                }
            }
        }
        entmtp_bank_free(bank);
    }
    unlink(path);
    return 0;
}
