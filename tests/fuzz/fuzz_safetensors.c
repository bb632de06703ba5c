/* safetensors: header JSON, offsets, dtypes; every tensor converted. */
#include "fuzz_common.h"
#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write_tmp(data, size, ".safetensors");
    emt_st *st = NULL;
    entmtp_clear_error();
    entmtp_status s = emt_st_open(path, &st);
    fuzz_check_error(s);
    if (s == ENTMTP_OK) {
        for (int64_t i = 0; i < emt_st_n_tensors(st); i++) {
            const emt_tensor *t = emt_st_tensor(st, i);
            int64_t n = emt_tensor_numel(t);
            if (n > 0 && n <= (1 << 16)) {
                float *out = malloc((size_t)n * sizeof(float));
                if (out) fuzz_check_error(emt_tensor_to_f32(t, 0, n, out));
                free(out);
            }
        }
        emt_st_metadata(st, "format");
        emt_st_close(st);
    }
    unlink(path);
    return 0;
}
