/* entmtp_drafter_find: shipped heads are matched to a model by the identity
 * their X.train.json records (architecture, shapes, vocabulary hash), not by
 * file name: a renamed copy of the model finds them; a model whose
 * vocabulary differs in one token text, or whose shapes differ, is refused
 * with the field named; Hydra heads come before Medusa ones; the bank beside
 * the heads comes with them; `entmtp generate` says which it used and why. */
#include "check.h"
#include "cli_run.h"
#include "tiny_model.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmp[512];

static entmtp_model *load(const char *path) {
    entmtp_model_params mp = entmtp_model_default_params();
    mp.backend = ENTMTP_BACKEND_CPU;
    mp.n_threads = 1;
    entmtp_model *m = NULL;
    CHECK_OK(entmtp_model_load(path, &mp, &m));
    return m;
}

static void write_text(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    CHECK(f != NULL);
    if (!f) return;
    fputs(text, f);
    fclose(f);
}

/* X.train.json recording `m`'s identity as `entmtp info` prints it */
static void write_train_json(const char *stem, const char *kind, const entmtp_model *m) {
    entmtp_model_info mi = { sizeof mi };
    CHECK_OK(entmtp_model_get_info(m, &mi));
    char path[700], text[600];
    snprintf(path, sizeof path, "%s.train.json", stem);
    snprintf(text, sizeof text,
             "{\"kind\": \"%s\", \"model\": {\"architecture\": \"%s\", \"hidden_size\": %d, \"n_layers\": %d, "
             "\"vocab_size\": %d, \"vocab_hash\": \"fnv1a64:%016" PRIx64 "\"}}\n",
             kind, mi.architecture, mi.hidden_size, mi.n_layers, mi.vocab_size, mi.vocab_hash);
    write_text(path, text);
}

/* A copy of `src` with the first occurrence of `from` replaced by `to` (same length). */
static void patched_copy(const char *src, const char *dst, const char *from, const char *to) {
    char *data = NULL;
    size_t n = 0;
    CHECK_OK(emt_read_file(src, &data, &n));
    if (!data) return;
    size_t k = strlen(from);
    char *hit = NULL;
    for (size_t i = 0; i + k <= n && !hit; i++)
        if (!memcmp(data + i, from, k)) hit = data + i;
    CHECK(hit != NULL);
    if (hit) memcpy(hit, to, k);
    FILE *f = fopen(dst, "wb");
    CHECK(f && fwrite(data, 1, n, f) == n);
    if (f) fclose(f);
    free(data);
}

static int ends_with(const char *s, const char *suffix) {
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

int main(void) {
    snprintf(tmp, sizeof tmp, "%s/drafter", ENTMTP_TEST_TMP_DIR);
    mkdir(tmp, 0755);
    char heads_dir[600], model[600], renamed[600], other_vocab[600], other_shape[600], stem[700], path[800];
    snprintf(heads_dir, sizeof heads_dir, "%s/heads", tmp);
    mkdir(heads_dir, 0755);
    snprintf(model, sizeof model, "%s/tiny-chat.gguf", tmp);
    snprintf(renamed, sizeof renamed, "%s/my-download-q8.gguf", tmp);
    snprintf(other_vocab, sizeof other_vocab, "%s/tiny-chat-other-vocab.gguf", tmp);
    snprintf(other_shape, sizeof other_shape, "%s/tiny-chat-wide.gguf", tmp);
    emt_tiny_config c = emt_tiny_default_config();
    c.vocab = 300;
    c.with_tokenizer = 1;
    CHECK_OK(emt_tiny_write_gguf(model, &c, EMT_Q8_0));
    unlink(renamed);
    CHECK(symlink(model, renamed) == 0 || errno == EEXIST);
    /* the same shapes, one token text changed: another vocabulary */
    patched_copy(model, other_vocab, "<pad_280>", "<pad_x80>");
    emt_tiny_config wide = c;
    wide.hidden = 64;
    CHECK_OK(emt_tiny_write_gguf(other_shape, &wide, EMT_Q8_0));

    entmtp_model *m = load(model);
    if (!m) return emt_test_finish("test_drafter_find");
    /* two drafters for the model: Medusa and Hydra (named unlike the model) */
    snprintf(stem, sizeof stem, "%s/a-medusa", heads_dir);
    snprintf(path, sizeof path, "%s.safetensors", stem);
    CHECK_OK(emt_tiny_write_medusa_heads(path, c.hidden, c.vocab, 3, 1, 0, 2));
    write_train_json(stem, "medusa", m);
    snprintf(stem, sizeof stem, "%s/z-hydra", heads_dir);
    snprintf(path, sizeof path, "%s.safetensors", stem);
    CHECK_OK(emt_tiny_write_hydra_heads(path, c.hidden, c.vocab, 3, 1, 0, 2));
    write_train_json(stem, "hydra", m);
    snprintf(path, sizeof path, "%s.bank.json", stem);
    entmtp_bank *b = NULL;
    CHECK_OK(entmtp_bank_create(NULL, &b));
    CHECK_OK(entmtp_bank_add_builtin(b, "chain_2", NULL));
    CHECK_OK(entmtp_bank_save(b, path));
    entmtp_bank_free(b);
    /* heads without an identity are passed over, with the reason */
    snprintf(path, sizeof path, "%s/b-unlabelled.safetensors", heads_dir);
    CHECK_OK(emt_tiny_write_medusa_heads(path, c.hidden, c.vocab, 2, 1, 0, 3));

    /* the model, and its renamed copy: the Hydra drafter and its bank */
    char search[1400];
    snprintf(search, sizeof search, "%s/no-such-dir:%s", tmp, heads_dir);
    const char *models[] = { model, renamed };
    for (int i = 0; i < 2; i++) {
        entmtp_model *mm = i == 0 ? m : load(renamed);
        if (!mm) continue;
        entmtp_drafter d = { sizeof d };
        CHECK_OK(entmtp_drafter_find(mm, search, &d));
        CHECK(ends_with(d.heads_path, "/z-hydra.safetensors"));
        CHECK(ends_with(d.bank_path, "/z-hydra.bank.json"));
        CHECK(strstr(d.reason, "matched by identity") && strstr(d.reason, "vocab 300"));
        /* and the heads load for it */
        entmtp_heads *h = NULL;
        CHECK_OK(entmtp_heads_load(mm, d.heads_path, &h));
        entmtp_heads_free(h);
        if (i) entmtp_model_free(mm);
        (void)models;
    }
    entmtp_model_info mi = { sizeof mi };
    CHECK_OK(entmtp_model_get_info(m, &mi));
    CHECK(mi.vocab_hash != 0);

    /* another vocabulary with the same shapes: refused, the hash named */
    entmtp_model *ov = load(other_vocab);
    if (ov) {
        entmtp_model_info oi = { sizeof oi };
        CHECK_OK(entmtp_model_get_info(ov, &oi));
        CHECK(oi.vocab_hash != mi.vocab_hash && oi.vocab_size == mi.vocab_size && oi.hidden_size == mi.hidden_size);
        entmtp_drafter d = { sizeof d };
        CHECK_ERR(entmtp_drafter_find(ov, search, &d), ENTMTP_ERR_NOT_FOUND, "vocabulary hash");
        CHECK(d.heads_path[0] == '\0' && d.bank_path[0] == '\0');
        CHECK(strstr(d.reason, "no drafter in") && strstr(d.reason, "z-hydra.safetensors: vocabulary hash") &&
              strstr(d.reason, "another tokenizer"));
        CHECK(strstr(d.reason, "b-unlabelled.safetensors: no readable .train.json"));
        entmtp_model_free(ov);
    }
    /* other shapes: the field named */
    entmtp_model *os = load(other_shape);
    if (os) {
        entmtp_drafter d = { sizeof d };
        CHECK_ERR(entmtp_drafter_find(os, search, &d), ENTMTP_ERR_NOT_FOUND, "hidden_size 32 != the model's 64");
        entmtp_model_free(os);
    }
    /* no heads at all; bad arguments */
    entmtp_drafter d = { sizeof d };
    snprintf(search, sizeof search, "%s/no-such-dir", tmp);
    CHECK_ERR(entmtp_drafter_find(m, search, &d), ENTMTP_ERR_NOT_FOUND, "no heads (*.safetensors) there");
    CHECK_ERR(entmtp_drafter_find(m, NULL, &d), ENTMTP_ERR_INVALID_ARGUMENT, "NULL");
    d.struct_size = 0;
    CHECK_ERR(entmtp_drafter_find(m, heads_dir, &d), ENTMTP_ERR_INVALID_ARGUMENT, "struct_size = 0");
    entmtp_model_free(m);

    /* the CLI: the renamed model gets the drafter, the other vocabulary AR */
    if (getenv("ENTMTP_CLI")) {
        setenv("ENTMTP_HEADS_DIR", heads_dir, 1);
        char args[2048];
        int rc = -1;
        snprintf(args, sizeof args, "generate --model %s --prompt 'the the' --max-tokens 8 --quiet", renamed);
        char *out = emt_cli_run(args, &rc);
        CHECK_EQ_INT(rc, 0);
        CHECK(out && strstr(out, "z-hydra.safetensors (hydra, 3 heads): matched by identity"));
        CHECK(out && strstr(out, "z-hydra.bank.json (shipped with the heads)"));
        CHECK(out && strstr(out, "-- speedup: none (the bank has no step costs"));
        if (emt_test_failures && out) fprintf(stderr, "%s\n", out);
        free(out);
        snprintf(args, sizeof args, "generate --model %s --prompt 'the the' --max-tokens 8 --quiet", other_vocab);
        out = emt_cli_run(args, &rc);
        CHECK_EQ_INT(rc, 0);
        CHECK(out && strstr(out, "-- drafter: none (no drafter in") && strstr(out, "vocabulary hash"));
        CHECK(out && strstr(out, "-- AR on cpu") && strstr(out, "-- speedup: none (plain AR decoding)"));
        if (emt_test_failures && out) fprintf(stderr, "%s\n", out);
        free(out);
    }
    return emt_test_finish("test_drafter_find");
}
