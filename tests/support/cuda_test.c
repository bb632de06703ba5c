#include "cuda_test.h"

#include "check.h"

#include <stdio.h>
#include <unistd.h>

float emt_test_urand(uint64_t *state) {
    *state = *state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((double)(*state >> 11) / 9007199254740992.0 * 2.0 - 1.0);
}

int32_t emt_test_irand(uint64_t *state, int32_t n) {
    return (int32_t)((emt_test_urand(state) * 0.5f + 0.5f) * (float)n) % n;
}

float *emt_test_host_random(uint64_t *state, size_t n, float scale) {
    float *h = malloc(n * sizeof(float));
    for (size_t i = 0; h && i < n; i++) h[i] = emt_test_urand(state) * scale;
    return h;
}

void *emt_test_device_copy(emt_backend *be, const void *host, size_t bytes) {
    void *d = be->ops->alloc(be, bytes);
    CHECK(d != NULL);
    if (d) CHECK_OK(be->ops->upload(be, d, host, bytes));
    return d;
}

int emt_cuda_test_have_device(void) {
    emt_backend *gpu = NULL;
    if (emt_backend_cuda_create(0, &gpu) != ENTMTP_OK) {
        printf("SKIP: %s\n", entmtp_last_error());
        return 0;
    }
    gpu->ops->destroy(gpu);
    return 1;
}

int emt_cuda_test_open_pair(emt_backend **cpu, emt_exec **ec, emt_backend **gpu, emt_exec **eg) {
    if (emt_backend_cuda_create(0, gpu) != ENTMTP_OK) {
        printf("SKIP: %s\n", entmtp_last_error());
        return 0;
    }
    CHECK_OK(emt_backend_cpu_create(cpu));
    *ec = (*cpu)->ops->exec_create(*cpu, 2);
    *eg = (*gpu)->ops->exec_create(*gpu, 0);
    CHECK(*ec && *eg);
    return 1;
}

void emt_cuda_test_close_pair(emt_backend *cpu, emt_exec *ec, emt_backend *gpu, emt_exec *eg) {
    if (ec) cpu->ops->exec_destroy(ec);
    if (eg) gpu->ops->exec_destroy(eg);
    cpu->ops->destroy(cpu);
    gpu->ops->destroy(gpu);
}

void emt_cuda_test_write_files(const char *stem, emt_tiny_config *c, emt_cuda_test_files *f) {
    *c = emt_tiny_default_config();
    c->vocab = 32;
    int pid = (int)getpid();
    snprintf(f->gguf, sizeof f->gguf, "%s/%s_tiny_%d.gguf", ENTMTP_TEST_TMP_DIR, stem, pid);
    snprintf(f->medusa, sizeof f->medusa, "%s/%s_medusa_%d.safetensors", ENTMTP_TEST_TMP_DIR, stem, pid);
    snprintf(f->hydra, sizeof f->hydra, "%s/%s_hydra_%d.safetensors", ENTMTP_TEST_TMP_DIR, stem, pid);
    CHECK_OK(emt_tiny_write_gguf(f->gguf, c, EMT_F32));
    CHECK_OK(emt_tiny_write_medusa_heads(f->medusa, c->hidden, c->vocab, 5, 1, 0, 3));
    CHECK_OK(emt_tiny_write_hydra_heads(f->hydra, c->hidden, c->vocab, 5, 2, 0, 12));
}

void emt_cuda_test_remove_files(const emt_cuda_test_files *f) {
    remove(f->gguf);
    remove(f->medusa);
    remove(f->hydra);
}
