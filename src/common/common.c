#define _POSIX_C_SOURCE 200809L
#include "common.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define EMT_ERROR_CAP 1024

static _Thread_local char g_last_error[EMT_ERROR_CAP];
static _Thread_local uint64_t g_error_serial; /* bumped by every recorded error */

entmtp_status emt_fail(entmtp_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(g_last_error, sizeof g_last_error, fmt, ap);
    va_end(ap);
    g_error_serial++;
    return status;
}

uint64_t emt_error_serial(void) { return g_error_serial; }

ENTMTP_API entmtp_status entmtp_set_error(entmtp_status status, const char *message) {
    return emt_fail(status, "%s", message ? message : entmtp_status_string(status));
}

ENTMTP_API int32_t entmtp_limit(entmtp_limit_kind kind) {
    switch (kind) {
    case ENTMTP_LIMIT_MAX_HEADS: return EMT_MAX_HEADS;
    case ENTMTP_LIMIT_MAX_LADDER: return EMT_MAX_LADDER;
    case ENTMTP_LIMIT_MAX_STOP_TOKENS: return EMT_MAX_STOP_TOKENS;
    case ENTMTP_LIMIT_MAX_TREE_NODES: return EMT_MAX_TREE_NODES;
    case ENTMTP_LIMIT_MAX_TOPK: return EMT_MAX_TOPK;
    }
    return -1;
}

void emt_error_prefix(const char *fmt, ...) {
    char prefix[512];
    char old[EMT_ERROR_CAP];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    memcpy(old, g_last_error, sizeof old);
    size_t n = strlen(prefix);
    if (n >= sizeof g_last_error) n = sizeof g_last_error - 1;
    memcpy(g_last_error, prefix, n);
    size_t m = strlen(old);
    if (m > sizeof g_last_error - 1 - n) m = sizeof g_last_error - 1 - n;
    memcpy(g_last_error + n, old, m);
    g_last_error[n + m] = '\0';
}

ENTMTP_API const char *entmtp_last_error(void) { return g_last_error; }
ENTMTP_API void entmtp_clear_error(void) { g_last_error[0] = '\0'; }

ENTMTP_API const char *entmtp_status_string(entmtp_status status) {
    switch (status) {
    case ENTMTP_OK: return "ENTMTP_OK: success";
    case ENTMTP_ERR_INVALID_ARGUMENT: return "ENTMTP_ERR_INVALID_ARGUMENT: invalid argument";
    case ENTMTP_ERR_OUT_OF_MEMORY: return "ENTMTP_ERR_OUT_OF_MEMORY: out of memory";
    case ENTMTP_ERR_IO: return "ENTMTP_ERR_IO: input/output error";
    case ENTMTP_ERR_FORMAT: return "ENTMTP_ERR_FORMAT: malformed or corrupt file";
    case ENTMTP_ERR_UNSUPPORTED: return "ENTMTP_ERR_UNSUPPORTED: unsupported input";
    case ENTMTP_ERR_INVALID_TREE: return "ENTMTP_ERR_INVALID_TREE: invalid tree";
    case ENTMTP_ERR_INVALID_CONFIG: return "ENTMTP_ERR_INVALID_CONFIG: invalid configuration";
    case ENTMTP_ERR_OUT_OF_RANGE: return "ENTMTP_ERR_OUT_OF_RANGE: value out of range";
    case ENTMTP_ERR_KV_FULL: return "ENTMTP_ERR_KV_FULL: KV cache full";
    case ENTMTP_ERR_MISMATCH: return "ENTMTP_ERR_MISMATCH: components do not fit together";
    case ENTMTP_ERR_BACKEND: return "ENTMTP_ERR_BACKEND: backend unavailable or failed";
    case ENTMTP_ERR_CALLBACK: return "ENTMTP_ERR_CALLBACK: callback reported failure";
    case ENTMTP_ERR_STATE: return "ENTMTP_ERR_STATE: call not valid in this state";
    case ENTMTP_ERR_NOT_FOUND: return "ENTMTP_ERR_NOT_FOUND: not found";
    case ENTMTP_ERR_BUFFER_TOO_SMALL: return "ENTMTP_ERR_BUFFER_TOO_SMALL: output buffer too small";
    case ENTMTP_STOPPED: return "ENTMTP_STOPPED: stopped by the token callback";
    }
    return "ENTMTP_ERR_UNKNOWN: unknown status code";
}

#define EMT_STR2(x) #x
#define EMT_STR(x) EMT_STR2(x)

ENTMTP_API unsigned entmtp_version_number(void) { return ENTMTP_VERSION_NUMBER; }
ENTMTP_API const char *entmtp_version_string(void) {
    return EMT_STR(ENTMTP_VERSION_MAJOR) "." EMT_STR(ENTMTP_VERSION_MINOR) "." EMT_STR(
        ENTMTP_VERSION_PATCH);
}

void *emt_malloc(size_t count, size_t size) {
    if (size != 0 && count > SIZE_MAX / size) {
        emt_fail(ENTMTP_ERR_OUT_OF_MEMORY, "allocation of %zu x %zu bytes overflows", count, size);
        return NULL;
    }
    size_t n = count * size;
    void *p = malloc(n ? n : 1);
    if (!p) emt_fail(ENTMTP_ERR_OUT_OF_MEMORY, "out of memory allocating %zu bytes", n);
    return p;
}

void *emt_calloc(size_t count, size_t size) {
    if (size != 0 && count > SIZE_MAX / size) {
        emt_fail(ENTMTP_ERR_OUT_OF_MEMORY, "allocation of %zu x %zu bytes overflows", count, size);
        return NULL;
    }
    void *p = calloc(count ? count : 1, size ? size : 1);
    if (!p) emt_fail(ENTMTP_ERR_OUT_OF_MEMORY, "out of memory allocating %zu bytes", count * size);
    return p;
}

void *emt_realloc(void *ptr, size_t count, size_t size) {
    if (size != 0 && count > SIZE_MAX / size) {
        emt_fail(ENTMTP_ERR_OUT_OF_MEMORY, "allocation of %zu x %zu bytes overflows", count, size);
        return NULL;
    }
    size_t n = count * size;
    void *p = realloc(ptr, n ? n : 1);
    if (!p) emt_fail(ENTMTP_ERR_OUT_OF_MEMORY, "out of memory allocating %zu bytes", n);
    return p;
}

char *emt_strdup(const char *s) {
    size_t n = strlen(s) + 1;
    char *p = emt_malloc(n, 1);
    if (p) memcpy(p, s, n);
    return p;
}

entmtp_status emt_check_versioned(const void *src, size_t known, const char *what) {
    size_t given;
    memcpy(&given, src, sizeof given);
    if (given < sizeof(size_t))
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT,
                        "%s.struct_size = %zu; initialise it with the matching _init function",
                        what, given);
    /* a newer caller's fields this library does not know must be unset */
    for (size_t i = known; i < given; i++)
        if (((const unsigned char *)src)[i])
            return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT,
                            "%s.struct_size = %zu but this library (%s) knows %zu bytes; byte %zu past them "
                            "is set: a newer field this library cannot honour",
                            what, given, entmtp_version_string(), known, i);
    return ENTMTP_OK;
}

entmtp_status emt_copy_versioned(void *dst, size_t dst_size, const void *src, const char *what) {
    if (!src) return ENTMTP_OK;
    entmtp_status st = emt_check_versioned(src, dst_size, what);
    if (st) return st;
    size_t given;
    memcpy(&given, src, sizeof given);
    size_t n = given < dst_size ? given : dst_size;
    memcpy((char *)dst + sizeof(size_t), (const char *)src + sizeof(size_t), n - sizeof(size_t));
    memcpy(dst, &dst_size, sizeof dst_size);
    return ENTMTP_OK;
}

entmtp_status emt_init_versioned(void *dst, size_t size, const void *defaults, size_t known,
                                 const char *what) {
    if (!dst) return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "%s_init: the struct pointer is NULL", what);
    if (size < sizeof(size_t))
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "%s_init: size = %zu; pass sizeof(%s)", what, size, what);
    memset(dst, 0, size);
    memcpy(dst, defaults, size < known ? size : known);
    memcpy(dst, &size, sizeof size);
    return ENTMTP_OK;
}

entmtp_status emt_copy_out(void *dst, const void *src, size_t size, const char *what) {
    size_t given;
    memcpy(&given, dst, sizeof given);
    if (given < sizeof(size_t))
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "%s.struct_size = %zu; set it to sizeof(%s)",
                        what, given, what);
    size_t n = given < size ? given : size;
    memcpy((char *)dst + sizeof(size_t), (const char *)src + sizeof(size_t), n - sizeof(size_t));
    return ENTMTP_OK;
}

double emt_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

entmtp_status emt_read_file(const char *path, char **out, size_t *out_len) {
    FILE *f = fopen(path, "rb");
    if (!f) return emt_fail(ENTMTP_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (cap - len < 65536) {
            size_t ncap = cap ? cap * 2 : 65536;
            char *nb = emt_realloc(buf, ncap + 1, 1);
            if (!nb) { free(buf); fclose(f); return ENTMTP_ERR_OUT_OF_MEMORY; }
            buf = nb;
            cap = ncap;
        }
        size_t got = fread(buf + len, 1, cap - len, f);
        len += got;
        if (got == 0) break;
    }
    int err = ferror(f);
    fclose(f);
    if (err) { free(buf); return emt_fail(ENTMTP_ERR_IO, "%s: read error", path); }
    buf[len] = '\0';
    *out = buf;
    if (out_len) *out_len = len;
    return ENTMTP_OK;
}
