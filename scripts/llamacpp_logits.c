/* The llama.cpp side of the per-architecture checks (scripts/record-model-
 * fixtures.sh builds it against the static libraries of
 * scripts/build-llamacpp.sh; never part of EntMTP's build):
 *
 *   llamacpp_logits MODEL.gguf PROMPT LOGITS.f32
 *
 * tokenizes PROMPT the way llama-cli does (special tokens added, special
 * text parsed), decodes it in one batch on the CPU, prints the token ids as a
 * JSON array on stdout and writes the last position's logits (float32, the
 * whole vocabulary) to LOGITS.f32. The KV cache is F32 (llama.cpp's
 * default is F16). */
#include "llama.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void quiet(enum ggml_log_level level, const char *text, void *user) {
    (void)user;
    if (level >= GGML_LOG_LEVEL_WARN && level != GGML_LOG_LEVEL_CONT) fputs(text, stderr);
}

int main(int argc, char **argv) {
    if (argc != 4) {
        fprintf(stderr, "usage: %s MODEL.gguf PROMPT LOGITS.f32\n", argv[0]);
        return 2;
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = 0;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) { fprintf(stderr, "%s: llama.cpp could not load it\n", argv[1]); return 1; }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    int32_t cap = (int32_t)strlen(argv[2]) + 16;
    llama_token *ids = malloc((size_t)cap * sizeof *ids);
    int32_t n = llama_tokenize(vocab, argv[2], (int32_t)strlen(argv[2]), ids, cap, true, true);
    if (n <= 0) { fprintf(stderr, "tokenization failed (%d)\n", n); return 1; }

    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)n + 16;
    cp.n_batch = cp.n_ubatch = (uint32_t)n;
    cp.n_threads = cp.n_threads_batch = 2;
    cp.type_k = cp.type_v = GGML_TYPE_F32; /* not the default F16 cache: compare the model, not the cache */
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) { fprintf(stderr, "llama_init_from_model failed\n"); return 1; }
    if (llama_decode(ctx, llama_batch_get_one(ids, n)) != 0) { fprintf(stderr, "llama_decode failed\n"); return 1; }
    const float *logits = llama_get_logits_ith(ctx, -1);
    int32_t n_vocab = llama_vocab_n_tokens(vocab);
    FILE *f = fopen(argv[3], "wb");
    if (!f || fwrite(logits, sizeof(float), (size_t)n_vocab, f) != (size_t)n_vocab || fclose(f)) {
        perror(argv[3]);
        return 1;
    }
    printf("[");
    for (int32_t i = 0; i < n; i++) printf(i ? ", %d" : "%d", ids[i]);
    printf("]\n");
    free(ids);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
