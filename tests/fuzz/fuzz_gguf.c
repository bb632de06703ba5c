/* GGUF: open, read every key and tensor header, convert every tensor. */
#include "fuzz_common.h"
#include "io/gguf.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write_tmp(data, size, ".gguf");
    emt_gguf *g = NULL;
    entmtp_clear_error();
    entmtp_status st = emt_gguf_open(path, &g);
    fuzz_check_error(st);
    if (st == ENTMTP_OK) {
        for (int64_t i = 0; i < emt_gguf_n_kv(g); i++) {
            const char *key = emt_gguf_kv_key(g, i);
            int64_t v;
            float f;
            const char *s;
            size_t len;
            emt_gguf_get_i64(g, key, &v);
            emt_gguf_get_f32(g, key, &f);
            emt_gguf_get_str(g, key, &s, &len);
        }
        for (int64_t i = 0; i < emt_gguf_n_tensors(g); i++) {
            const emt_tensor *t = emt_gguf_tensor(g, i);
            int64_t n = emt_tensor_numel(t);
            if (n > 0 && n <= (1 << 16)) {
                float *out = malloc((size_t)n * sizeof(float));
                if (out) fuzz_check_error(emt_tensor_to_f32(t, 0, n, out));
                free(out);
            }
        }
        emt_gguf_close(g);
    }
    /* the full model loader on the same bytes */
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CPU;
    mp.n_threads = 1;
    entmtp_model *m = NULL;
    entmtp_clear_error();
    st = entmtp_model_load(path, &mp, &m);
    fuzz_check_error(st);
    entmtp_model_free(m);
    unlink(path);
    return 0;
}
