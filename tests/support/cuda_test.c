#include "cuda_test.h"

#include "check.h"

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
