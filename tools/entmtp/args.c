/* Option values shared by the subcommands: each prints
 * "entmtp <cmd>: <option>: ..." and returns 0 on a bad value. */
#include "cli.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int cli_arg_long(const char *cmd, const char *opt, const char *v, long lo, long hi, long *out) {
    char *end;
    long x = strtol(v, &end, 10);
    if (!*v || *end || x < lo || x > hi) {
        fprintf(stderr, "entmtp %s: %s: '%s' is not an integer in [%ld, %ld]\n", cmd, opt, v, lo, hi);
        return 0;
    }
    *out = x;
    return 1;
}

int cli_arg_float(const char *cmd, const char *opt, const char *v, float lo, float *out) {
    char *end;
    float x = strtof(v, &end);
    if (!*v || *end || !isfinite(x) || x < lo) {
        fprintf(stderr, "entmtp %s: %s: '%s' is not a number >= %g\n", cmd, opt, v, (double)lo);
        return 0;
    }
    *out = x;
    return 1;
}

int cli_arg_seed(const char *cmd, const char *v, unsigned long long *out) {
    char *end;
    unsigned long long x = strtoull(v, &end, 0);
    if (!*v || *end) {
        fprintf(stderr, "entmtp %s: --seed: '%s' is not an integer\n", cmd, v);
        return 0;
    }
    *out = x;
    return 1;
}

int cli_arg_backend(const char *cmd, const char *v, entmtp_backend *out) {
    if (!strcmp(v, "auto")) *out = ENTMTP_BACKEND_AUTO;
    else if (!strcmp(v, "cpu")) *out = ENTMTP_BACKEND_CPU;
    else if (!strcmp(v, "cuda")) *out = ENTMTP_BACKEND_CUDA;
    else {
        fprintf(stderr, "entmtp %s: --backend: '%s' is not auto, cpu or cuda\n", cmd, v);
        return 0;
    }
    return 1;
}

int cli_arg_compute(const char *cmd, const char *v, entmtp_compute_type *out) {
    if (!strcmp(v, "native")) *out = ENTMTP_COMPUTE_NATIVE;
    else if (!strcmp(v, "f32")) *out = ENTMTP_COMPUTE_F32;
    else {
        fprintf(stderr, "entmtp %s: --compute: '%s' is not native or f32\n", cmd, v);
        return 0;
    }
    return 1;
}

/* ---------------------------------------------------------------- parser */

/* An option's names are "|"-separated ("-c|--ctx-size|--kv"): the first
 * long one is the documented name, the others accepted aliases. */
static int names_match(const char *names, const char *name) {
    size_t n = strlen(name);
    for (const char *p = names; *p;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && !strncmp(p, name, n)) return 1;
        if (!bar) break;
        p = bar + 1;
    }
    return 0;
}

static const cli_option *find_option(const cli_option *opts, size_t n, const char *name) {
    for (size_t k = 0; k < n; k++)
        if (names_match(opts[k].name, name)) return &opts[k];
    return NULL;
}

/* Store one option's value under the name typed (`name`); 1 on success (a
 * bad value has been reported). */
static int store(const char *cmd, const cli_option *o, const char *name, const char *v) {
    switch (o->kind) {
    case CLI_FLAG: *(int *)o->out = 1; return 1;
    case CLI_STRING: *(const char **)o->out = v; return 1;
    case CLI_LONG: return cli_arg_long(cmd, name, v, (long)o->lo, (long)o->hi, (long *)o->out);
    case CLI_FLOAT: {
        char *end;
        float x = strtof(v, &end);
        if (!*v || *end || !isfinite(x) || x < o->lo) {
            if (isinf(o->lo)) fprintf(stderr, "entmtp %s: %s: '%s' is not a number\n", cmd, name, v);
            else fprintf(stderr, "entmtp %s: %s: '%s' is not a number >= %g\n", cmd, name, v, o->lo);
            return 0;
        }
        *(float *)o->out = x;
        return 1;
    }
    case CLI_SEED: return cli_arg_seed(cmd, v, (unsigned long long *)o->out);
    case CLI_BACKEND: return cli_arg_backend(cmd, v, (entmtp_backend *)o->out);
    case CLI_COMPUTE: return cli_arg_compute(cmd, v, (entmtp_compute_type *)o->out);
    case CLI_CALL: return o->call(cmd, v, o->out);
    }
    return 0;
}

int cli_parse(const char *cmd, int argc, char **argv, const cli_option *opts, size_t n_opts, void (*usage)(FILE *)) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 1;
        }
        const cli_option *o = find_option(opts, n_opts, a);
        if (!o) {
            fprintf(stderr, "entmtp %s: unknown option '%s'\n", cmd, a);
            usage(stderr);
            return 2;
        }
        const char *v = NULL;
        if (o->kind != CLI_FLAG) {
            if (i + 1 >= argc) {
                fprintf(stderr, "entmtp %s: %s needs a value\n", cmd, a);
                return 2;
            }
            v = argv[++i];
        }
        if (!store(cmd, o, a, v)) return 2;
    }
    return 0;
}

/* ------------------------------------------------ options shared by commands */

/* Typical acceptance (docs/acceptance.md) decides which tokens may be drawn:
 * those with p > min(epsilon, delta * exp(-H)) at the step's temperature. A
 * top-k or top-p cut on the root draw alone would not match what the tree's
 * drafts are accepted against, so the sampled text would no longer be the
 * one distribution both follow; only the "off" values are accepted. */
int cli_prompt_bits(const char *cmd, const char *v, void *out) {
    if (!strcmp(v, "8") || !strcmp(v, "16")) {
        *(int32_t *)out = (int32_t)atoi(v);
        return 1;
    }
    fprintf(stderr, "entmtp %s: --prompt-bits: '%s': give 8 or 16\n", cmd, v);
    return 0;
}

int cli_step_bits(const char *cmd, const char *v, void *out) {
    if (!strcmp(v, "8") || !strcmp(v, "16")) {
        *(int32_t *)out = (int32_t)atoi(v);
        return 1;
    }
    fprintf(stderr, "entmtp %s: --step-bits: '%s': give 8 or 16\n", cmd, v);
    return 0;
}

int cli_kv_type(const char *cmd, const char *v, void *out) {
    if (!strcmp(v, "f32") || !strcmp(v, "bf16")) {
        *(int32_t *)out = !strcmp(v, "f32") ? ENTMTP_KV_F32 : ENTMTP_KV_BF16;
        return 1;
    }
    fprintf(stderr, "entmtp %s: --kv-type: '%s': give f32 or bf16\n", cmd, v);
    return 0;
}

int cli_refuse_top_k(const char *cmd, const char *v, void *out) {
    (void)out;
    if (!strcmp(v, "0")) return 1; /* off, as llama.cpp spells it */
    fprintf(stderr,
            "entmtp %s: --top-k: '%s': not supported: EntMTP samples with typical acceptance, which keeps the\n"
            "  tokens with p > min(epsilon, delta * exp(-entropy)) for the root draw and the drafts alike\n"
            "  (docs/acceptance.md); a top-k cut would apply to one and not the other. Tighten or loosen that\n"
            "  set with --epsilon/--delta (larger keeps fewer tokens), or use --temperature 0 for greedy.\n"
            "  --top-k 0 (off) is accepted.\n", cmd, v);
    return 0;
}

int cli_refuse_top_p(const char *cmd, const char *v, void *out) {
    (void)out;
    char *end;
    double x = strtod(v, &end);
    if (*v && !*end && x == 1.0) return 1; /* off */
    fprintf(stderr,
            "entmtp %s: --top-p: '%s': not supported: EntMTP samples with typical acceptance, which keeps the\n"
            "  tokens with p > min(epsilon, delta * exp(-entropy)) for the root draw and the drafts alike\n"
            "  (docs/acceptance.md); a nucleus cut would apply to one and not the other. Tighten or loosen that\n"
            "  set with --epsilon/--delta (larger keeps fewer tokens), or use --temperature 0 for greedy.\n"
            "  --top-p 1 (off) is accepted.\n", cmd, v);
    return 0;
}

int cli_check_tree_names(const char *cmd, const char *list) {
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *save = NULL, *name = strtok_r(buf, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        int known = 0;
        for (int32_t i = 0; entmtp_builtin_tree_name(i) && !known; i++) known = !strcmp(name, entmtp_builtin_tree_name(i));
        if (known) continue;
        fprintf(stderr, "entmtp %s: --tree: '%s' is not a built-in tree; the built-in trees are", cmd, name);
        for (int32_t i = 0; entmtp_builtin_tree_name(i); i++) fprintf(stderr, "%s %s", i ? "," : "", entmtp_builtin_tree_name(i));
        fprintf(stderr, " (or give a searched bank with --bank FILE)\n");
        return 0;
    }
    return 1;
}

char *cli_chat_template_text(const char *cmd, const char *value) {
    FILE *f = strchr(value, '\n') ? NULL : fopen(value, "rb");
    if (!f) {
        char *copy = strdup(value);
        if (!copy) fprintf(stderr, "entmtp %s: --chat-template: out of memory\n", cmd);
        return copy;
    }
    char *text = NULL;
    size_t len = 0, cap = 0, got;
    char chunk[4096];
    while ((got = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (len + got + 1 > cap) {
            cap = 2 * (len + got + 1);
            char *t = realloc(text, cap);
            if (!t) { free(text); fclose(f); fprintf(stderr, "entmtp %s: --chat-template: out of memory\n", cmd); return NULL; }
            text = t;
        }
        memcpy(text + len, chunk, got);
        len += got;
    }
    int bad = ferror(f);
    fclose(f);
    if (bad || !len) {
        fprintf(stderr, "entmtp %s: --chat-template: '%s': %s\n", cmd, value, bad ? "read error" : "the file is empty");
        free(text);
        return NULL;
    }
    text[len] = '\0';
    return text;
}

/* Length of the well-formed UTF-8 sequence at s[0..n), or 0 when it is not
 * one (a token may end inside a character; cut text must not make bad JSON). */
static size_t utf8_sequence(const unsigned char *s, size_t n) {
    size_t len = s[0] < 0x80 ? 1 : (s[0] & 0xe0) == 0xc0 ? 2 : (s[0] & 0xf0) == 0xe0 ? 3 : (s[0] & 0xf8) == 0xf0 ? 4 : 0;
    if (len == 0 || len > n || (len == 2 && s[0] < 0xc2) || (len == 4 && s[0] > 0xf4)) return 0;
    for (size_t i = 1; i < len; i++)
        if ((s[i] & 0xc0) != 0x80) return 0;
    if (len == 3 && ((s[0] == 0xe0 && s[1] < 0xa0) || (s[0] == 0xed && s[1] >= 0xa0))) return 0; /* overlong, surrogate */
    if (len == 4 && ((s[0] == 0xf0 && s[1] < 0x90) || (s[0] == 0xf4 && s[1] >= 0x90))) return 0;
    return len;
}

/* A JSON string; bytes that are not well-formed UTF-8 become U+FFFD. */
void cli_json_string(FILE *f, const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    fputc('"', f);
    for (size_t i = 0; i < n;) {
        unsigned char ch = u[i];
        size_t len = utf8_sequence(u + i, n - i);
        if (len == 0) {
            fputs("\\ufffd", f);
            len = 1;
        } else if (len > 1) fwrite(u + i, 1, len, f);
        else if (ch == '"' || ch == '\\') fprintf(f, "\\%c", ch);
        else if (ch == '\n') fputs("\\n", f);
        else if (ch == '\r') fputs("\\r", f);
        else if (ch == '\t') fputs("\\t", f);
        else if (ch < 0x20) fprintf(f, "\\u%04x", ch);
        else fputc(ch, f);
        i += len;
    }
    fputc('"', f);
}

int cli_bank_policy_config(const entmtp_bank *bank, int bank_default, entmtp_policy_kind *kind,
                           entmtp_policy_config *pc) {
    int from_bank = !(bank_default && entmtp_bank_default_policy(bank, kind) != ENTMTP_OK) &&
                    entmtp_bank_policy_config(bank, *kind, pc) == ENTMTP_OK;
    if (!from_bank) *pc = entmtp_policy_default_config(*kind);
    return from_bank;
}
