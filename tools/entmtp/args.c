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

static const cli_option *find_option(const cli_option *opts, size_t n, const char *name) {
    for (size_t k = 0; k < n; k++)
        if (!strcmp(opts[k].name, name)) return &opts[k];
    return NULL;
}

/* Store one option's value; 1 on success (a bad value has been reported). */
static int store(const char *cmd, const cli_option *o, const char *v) {
    switch (o->kind) {
    case CLI_FLAG: *(int *)o->out = 1; return 1;
    case CLI_STRING: *(const char **)o->out = v; return 1;
    case CLI_LONG: return cli_arg_long(cmd, o->name, v, (long)o->lo, (long)o->hi, (long *)o->out);
    case CLI_FLOAT: {
        char *end;
        float x = strtof(v, &end);
        if (!*v || *end || !isfinite(x) || x < o->lo) {
            if (isinf(o->lo)) fprintf(stderr, "entmtp %s: %s: '%s' is not a number\n", cmd, o->name, v);
            else fprintf(stderr, "entmtp %s: %s: '%s' is not a number >= %g\n", cmd, o->name, v, o->lo);
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
        if (!store(cmd, o, v)) return 2;
    }
    return 0;
}
