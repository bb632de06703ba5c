/* Head files (safetensors in the Medusa/Hydra layouts) against a tiny model. */
#include "fuzz_common.h"
#include "tiny_model.h"

static entmtp_model *g_model;

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc;
    (void)argv;
    char path[256];
    snprintf(path, sizeof path, "/tmp/entmtp-fuzz-model-%d.gguf", (int)getpid());
    emt_tiny_config c = emt_tiny_default_config();
    if (emt_tiny_write_gguf(path, &c, EMT_F32) != ENTMTP_OK) abort();
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CPU;
    mp.n_threads = 1;
    if (entmtp_model_load(path, &mp, &g_model) != ENTMTP_OK) abort();
    unlink(path);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    const char *path = fuzz_write_tmp(data, size, ".heads.safetensors");
    entmtp_heads *h = NULL;
    entmtp_clear_error();
    entmtp_status st = entmtp_heads_load(g_model, path, &h);
    fuzz_check_error(st);
    entmtp_heads_free(h);
    unlink(path);
    return 0;
}
