/* entmtp info: a model's configuration and a summary of its tensors. */
#include "cli.h"

#include "io/gguf.h"
#include "model/model.h"
#include "io/safetensors.h"

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

static void tensor_summary(const char *path) {
    struct stat sb;
    int dir = stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
    emt_gguf *g = NULL;
    emt_st *st = NULL;
    if (dir ? emt_st_open(path, &st) : emt_gguf_open(path, &g)) return;
    int64_t n = g ? emt_gguf_n_tensors(g) : emt_st_n_tensors(st);
    int64_t count[EMT_DTYPE_COUNT] = { 0 };
    size_t bytes[EMT_DTYPE_COUNT] = { 0 };
    for (int64_t i = 0; i < n; i++) {
        const emt_tensor *t = g ? emt_gguf_tensor(g, i) : emt_st_tensor(st, i);
        count[t->dtype]++;
        bytes[t->dtype] += t->nbytes;
    }
    printf("tensors: %lld\n", (long long)n);
    for (int d = 0; d < EMT_DTYPE_COUNT; d++)
        if (count[d])
            printf("  %-6s %5lld tensors %10.1f MiB\n", emt_dtype_name((emt_dtype)d), (long long)count[d],
                   (double)bytes[d] / (1024.0 * 1024.0));
    int64_t show = n < 12 ? n : 12;
    for (int64_t i = 0; i < show; i++) {
        const emt_tensor *t = g ? emt_gguf_tensor(g, i) : emt_st_tensor(st, i);
        printf("  %-40s %-5s [", t->name, emt_dtype_name(t->dtype));
        for (int32_t k = 0; k < t->n_dims; k++) printf(k ? ", %lld" : "%lld", (long long)t->shape[k]);
        printf("]\n");
    }
    if (n > show) printf("  ... %lld more\n", (long long)(n - show));
    emt_gguf_close(g);
    emt_st_close(st);
}

static void usage(FILE *f) { fprintf(f, "usage: entmtp info --model PATH\n"); }

int cmd_info(int argc, char **argv) {
    const char *path = NULL;
    const cli_option opts[] = { { "--model", CLI_STRING, &path } };
    int rc = cli_parse("info", argc, argv, CLI_TABLE(opts), usage);
    if (rc) return rc == 1 ? 0 : rc;
    if (!path) { fprintf(stderr, "entmtp info: --model is required\n"); return 2; }
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CPU;
    mp.progress = cli_progress;
    entmtp_model *m = NULL;
    entmtp_status st = entmtp_model_load(path, &mp, &m);
    if (st) return cli_fail(path, st);
    entmtp_model_info mi = { sizeof mi };
    entmtp_model_get_info(m, &mi);
    printf("model: %s\n", path);
    char features[512];
    printf("name: %s\narchitecture: %s (supported)\n", mi.name, mi.architecture);
    printf("features: %s\n", emt_model_describe(m, features, sizeof features));
    printf("parameters: %lld\n", (long long)mi.n_params);
    printf("vocab_size: %d\nhidden_size: %d\nintermediate_size: %d\nlayers: %d\n", mi.vocab_size,
           mi.hidden_size, mi.intermediate_size, mi.n_layers);
    printf("heads: %d (kv %d, head_dim %d)\ncontext_length: %d\nrope_theta: %g\nrms_norm_eps: %g\n",
           mi.n_heads, mi.n_kv_heads, mi.head_dim, mi.context_length, (double)mi.rope_theta,
           (double)mi.rms_norm_eps);
    printf("kernels: %s\n", emt_model_kernels(m));
    printf("tied_embeddings: %s\nbos: %d\neos: %d\n", mi.tied_embeddings ? "yes" : "no", mi.bos_token,
           mi.eos_token);
    /* the identity a drafter's X.train.json records (entmtp_drafter_find) */
    printf("drafter identity: \"model\": {\"architecture\": \"%s\", \"hidden_size\": %d, \"n_layers\": %d, "
           "\"vocab_size\": %d, \"vocab_hash\": \"fnv1a64:%016llx\"}\n",
           mi.architecture, mi.hidden_size, mi.n_layers, mi.vocab_size, (unsigned long long)mi.vocab_hash);
    entmtp_model_free(m);
    tensor_summary(path);
    return 0;
}
