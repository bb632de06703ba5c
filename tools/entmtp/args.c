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
