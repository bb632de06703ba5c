/* Corrupt files never crash the loaders: every truncation of the header
 * region (and a sample beyond), and byte overwrites across it, of tiny GGUF,
 * safetensors and head files, each end in success or in an error whose
 * message names the file. Plus specific corruptions with expected messages.
 * (CI runs this under ASan + UBSan.) */
#include "check.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "tiny_model.h"

#include <stdio.h>
#include <sys/stat.h>

static unsigned char *slurp(const char *path, size_t *n) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)sz + 1);
    *n = fread(b, 1, (size_t)sz, f);
    fclose(f);
    return b;
}

static void spit(const char *path, const unsigned char *b, size_t n) {
    FILE *f = fopen(path, "wb");
    if (n) fwrite(b, 1, n, f);
    fclose(f);
}

typedef entmtp_status (*loader_fn)(const char *path, void *ctx);

static entmtp_status load_model(const char *path, void *ctx) {
    (void)ctx;
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CPU;
    mp.n_threads = 1;
    entmtp_model *m = NULL;
    entmtp_status st = entmtp_model_load(path, &mp, &m);
    entmtp_model_free(m);
    return st;
}

static entmtp_status load_heads(const char *path, void *ctx) {
    entmtp_heads *h = NULL;
    entmtp_status st = entmtp_heads_load((entmtp_model *)ctx, path, &h);
    entmtp_heads_free(h);
    return st;
}

/* An EAGLE-3 drafter directory whose one file (model.safetensors or
 * config.json) is the corrupted copy: ctx is the model, the directory is
 * this file's dirname. */
static entmtp_status load_drafter_dir(const char *path, void *ctx) {
    char dir[600];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    entmtp_heads *h = NULL;
    entmtp_status st = entmtp_heads_load((entmtp_model *)ctx, dir, &h);
    entmtp_heads_free(h);
    return st;
}

static int n_loads, n_errors;

static void try_load(loader_fn fn, void *ctx, const char *path, const char *name_in_msg) {
    entmtp_clear_error();
    entmtp_status st = fn(path, ctx);
    n_loads++;
    if (st != ENTMTP_OK) {
        n_errors++;
        if (!strstr(entmtp_last_error(), name_in_msg)) {
            if (emt_test_failures < 20) fprintf(stderr, "error without the file name: %s\n", entmtp_last_error());
            emt_test_failures++;
        }
    }
}

/* header_len: bytes to corrupt exhaustively; beyond it every `stride`-th. */
static void corrupt_all(const char *src, const char *dst, size_t header_len, size_t stride, loader_fn fn, void *ctx,
                        const char *name_in_msg) {
    size_t n;
    unsigned char *orig = slurp(src, &n);
    CHECK(orig != NULL);
    if (!orig) return;
    if (header_len > n) header_len = n;
    for (size_t len = 0; len < n; len += len < header_len ? 1 : stride) {
        spit(dst, orig, len);
        try_load(fn, ctx, dst, name_in_msg);
    }
    unsigned char *buf = malloc(n);
    const unsigned char values[3] = { 0x00, 0xFF, 0x7F };
    for (size_t pos = 0; pos < header_len; pos++) {
        for (int v = 0; v < 4; v++) {
            memcpy(buf, orig, n);
            buf[pos] = v < 3 ? values[v] : (unsigned char)(orig[pos] ^ 0x10);
            if (buf[pos] == orig[pos]) continue;
            spit(dst, buf, n);
            try_load(fn, ctx, dst, name_in_msg);
        }
    }
    free(buf);
    free(orig);
}

static void expect_gguf_error(const char *path, unsigned char *bytes, size_t n, const char *needle) {
    spit(path, bytes, n);
    entmtp_model *m = NULL;
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CPU;
    entmtp_status st = entmtp_model_load(path, &mp, &m);
    if (st == ENTMTP_OK || !strstr(entmtp_last_error(), needle)) {
        fprintf(stderr, "expected an error containing \"%s\", got %d: %s\n", needle, (int)st, entmtp_last_error());
        emt_test_failures++;
    }
    entmtp_model_free(m);
}

int main(void) {
    char tiny[512], bad[512], hf[512], heads[512], badheads[512];
    snprintf(tiny, sizeof tiny, "%s/corrupt_src.gguf", ENTMTP_TEST_TMP_DIR);
    snprintf(bad, sizeof bad, "%s/corrupt_case.gguf", ENTMTP_TEST_TMP_DIR);
    snprintf(hf, sizeof hf, "%s/corrupt_hf", ENTMTP_TEST_TMP_DIR);
    snprintf(heads, sizeof heads, "%s/corrupt_heads_src.safetensors", ENTMTP_TEST_TMP_DIR);
    snprintf(badheads, sizeof badheads, "%s/corrupt_heads_case.safetensors", ENTMTP_TEST_TMP_DIR);
    emt_tiny_config c = emt_tiny_default_config();
    c.vocab = 270;
    c.hidden = 32;
    c.n_layers = 1;
    c.with_tokenizer = 1;
    CHECK_OK(emt_tiny_write_gguf(tiny, &c, EMT_Q4_1));
    /* the tokenizer metadata makes the header ~5 KB: cover 2 KB exhaustively */
    corrupt_all(tiny, bad, 2048, 61, load_model, NULL, "corrupt_case.gguf");

    /* safetensors model directory: corrupt its single file */
    c.with_tokenizer = 0;
    c.vocab = 64;
    CHECK_OK(emt_tiny_write_hf(hf, &c, EMT_BF16, 1));
    char st_file[600], st_copy[600];
    snprintf(st_file, sizeof st_file, "%s/model.safetensors", hf);
    snprintf(st_copy, sizeof st_copy, "%s/model.safetensors.orig", hf);
    size_t n;
    unsigned char *orig = slurp(st_file, &n);
    spit(st_copy, orig, n);
    free(orig);
    corrupt_all(st_copy, st_file, 1200, 53, load_model, NULL, "model.safetensors");

    /* heads against a good model */
    CHECK_OK(emt_tiny_write_gguf(tiny, &c, EMT_F32));
    entmtp_model *m = NULL;
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CPU;
    CHECK_OK(entmtp_model_load(tiny, &mp, &m));
    CHECK_OK(emt_tiny_write_hydra_heads(heads, c.hidden, c.vocab, 2, 1, 1, 5));
    if (m) corrupt_all(heads, badheads, 900, 37, load_heads, m, "corrupt_heads_case");
    entmtp_model_free(m);

    /* an EAGLE-3 drafter directory (reads 3 layers: a 4-layer model) */
    c.n_layers = 4;
    CHECK_OK(emt_tiny_write_gguf(tiny, &c, EMT_F32));
    m = NULL;
    CHECK_OK(entmtp_model_load(tiny, &mp, &m));
    char eagle[512], e_file[600], e_copy[600];
    snprintf(eagle, sizeof eagle, "%s/corrupt_eagle3", ENTMTP_TEST_TMP_DIR);
    emt_tiny_eagle3 e = { .hidden = c.hidden, .ffn = 48, .n_heads = 4, .n_kv_heads = 2, .head_dim = 8,
                          .vocab = c.vocab, .n_draft = 40, .taps = { 0, 1, 3 }, .rope_theta = 10000.0f, .seed = 4 };
    CHECK_OK(emt_tiny_write_eagle3(eagle, &e));
    const char *files[2] = { "model.safetensors", "config.json" };
    for (int f = 0; f < 2 && m; f++) {
        snprintf(e_file, sizeof e_file, "%s/%s", eagle, files[f]);
        snprintf(e_copy, sizeof e_copy, "%s/%s.orig", eagle, files[f]);
        orig = slurp(e_file, &n);
        spit(e_copy, orig, n);
        corrupt_all(e_copy, e_file, f == 0 ? 1600 : 600, 41, load_drafter_dir, m, "corrupt_eagle3");
        spit(e_file, orig, n); /* restored for the other file's round */
        free(orig);
    }
    entmtp_model_free(m);
    printf("%d corrupted loads, %d errors, no crash\n", n_loads, n_errors);
    CHECK(n_errors > n_loads / 2);

    /* specific corruptions and their messages */
    unsigned char *g = slurp(tiny, &n);
    unsigned char *w = malloc(n);
    /* regression (fuzz_gguf, clang UBSan): an empty file mapped to NULL */
    expect_gguf_error(bad, g, 0, "not a GGUF file");
    memcpy(w, g, n); w[0] = 'X';
    expect_gguf_error(bad, w, n, "not a GGUF file");
    memcpy(w, g, n); w[4] = 4;
    expect_gguf_error(bad, w, n, "GGUF version 4");
    memcpy(w, g, n); w[8] = 0xFF; w[9] = 0xFF; w[10] = 0xFF;
    expect_gguf_error(bad, w, n, "more than the file can hold");
    expect_gguf_error(bad, g, n - 100, "past the end of the file");
    memcpy(w, g, n); /* first key's string length: absurd */
    w[24] = 0xFF; w[25] = 0xFF; w[26] = 0xFF; w[27] = 0x7F;
    expect_gguf_error(bad, w, n, "runs past the end of the file");
    /* a tensor's dims and type: find "token_embd.weight" in the header */
    for (size_t i = 0; i + 17 < n; i++) {
        if (!memcmp(g + i, "token_embd.weight", 17)) {
            size_t at = i + 17; /* n_dims (u32) follows the name */
            memcpy(w, g, n); w[at] = 5;
            expect_gguf_error(bad, w, n, "5 dimensions");
            memcpy(w, g, n); w[at + 4 + 16] = 77; /* type after two u64 dims */
            expect_gguf_error(bad, w, n, "ggml type 77");
            memcpy(w, g, n); w[at + 4] = 33; /* ne0 = 33 instead of hidden 32 */
            expect_gguf_error(bad, w, n, "token_embd.weight");
            break;
        }
    }
    free(w);
    free(g);

    /* safetensors: specific cases */
    struct { const char *json; const char *needle; } cases[] = {
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},\"b\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[4,12]}}", "overlap" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[3],\"data_offsets\":[0,8]}}", "needs 12" },
        { "{\"a\":{\"dtype\":\"Q9\",\"shape\":[2],\"data_offsets\":[0,8]}}", "dtype Q9" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,800]}}", "outside the data" },
        { "{\"a\":{\"dtype\":\"F32\",\"shape\":[-2],\"data_offsets\":[0,8]}}", "shape[0]" },
        { "not json", "not a JSON object" },
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t jl = strlen(cases[i].json);
        unsigned char file[1024];
        uint64_t hl = jl;
        memcpy(file, &hl, 8);
        memcpy(file + 8, cases[i].json, jl);
        memset(file + 8 + jl, 0, 16);
        spit(badheads, file, 8 + jl + 16);
        emt_st *s = NULL;
        entmtp_status st = emt_st_open(badheads, &s);
        if (st == ENTMTP_OK || !strstr(entmtp_last_error(), cases[i].needle)) {
            fprintf(stderr, "safetensors case %zu: %d %s\n", i, (int)st, entmtp_last_error());
            emt_test_failures++;
        }
        emt_st_close(s);
    }
    unsigned char big[16] = { 0xFF, 0xFF, 0xFF, 0, 0, 0, 0, 0, '{', '}' };
    spit(badheads, big, 10);
    emt_st *s = NULL;
    CHECK_ERR(emt_st_open(badheads, &s), ENTMTP_ERR_FORMAT, "exceeds the file");
    /* a sharded checkpoint whose index names a missing shard */
    char shard_dir[512], ix[600];
    snprintf(shard_dir, sizeof shard_dir, "%s/corrupt_sharded", ENTMTP_TEST_TMP_DIR);
    CHECK_OK(emt_tiny_write_hf(shard_dir, &c, EMT_F16, 2));
    snprintf(ix, sizeof ix, "%s/model-00002-of-00002.safetensors", shard_dir);
    remove(ix);
    CHECK_ERR(entmtp_model_load(shard_dir, &mp, &m), ENTMTP_ERR_IO, "model-00002-of-00002.safetensors");
    CHECK(m == NULL);
    return emt_test_finish("test_corrupt_files");
}
