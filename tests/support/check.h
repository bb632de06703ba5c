/* Minimal assertions for the unit tests. A failed CHECK prints the location
 * and the library's last error and marks the test failed; the test keeps
 * running so one run reports every failure. Exit code 77 = skipped. */
#ifndef EMT_TEST_CHECK_H
#define EMT_TEST_CHECK_H

#include "entmtp.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern int emt_test_failures;

/* `full`, or `shrunk` when ENTMTP_TEST_SHRINK is set: the sizes a test runs
 * under a slow checker (compute-sanitizer's racecheck and synccheck,
 * scripts/gpu-check.sh). Shrunk cases still cross the kernels' chunk and
 * tile boundaries; they only do fewer of them. */
static inline int emt_test_size(int full, int shrunk) {
    const char *e = getenv("ENTMTP_TEST_SHRINK");
    return e && *e && strcmp(e, "0") != 0 ? shrunk : full;
}

#define CHECK(cond)                                                                      \
    do {                                                                                 \
        if (!(cond)) {                                                                   \
            fprintf(stderr, "%s:%d: CHECK(%s) failed (last error: %s)\n", __FILE__,      \
                    __LINE__, #cond, entmtp_last_error());                               \
            emt_test_failures++;                                                         \
        }                                                                                \
    } while (0)

#define CHECK_OK(expr)                                                                   \
    do {                                                                                 \
        entmtp_status st_ = (expr);                                                      \
        if (st_ != ENTMTP_OK) {                                                          \
            fprintf(stderr, "%s:%d: %s returned %s: %s\n", __FILE__, __LINE__, #expr,    \
                    entmtp_status_string(st_), entmtp_last_error());                     \
            emt_test_failures++;                                                         \
        }                                                                                \
    } while (0)

/* Expect a specific failure status and a message containing `needle`. */
#define CHECK_ERR(expr, status, needle)                                                  \
    do {                                                                                 \
        entmtp_status st_ = (expr);                                                      \
        if (st_ != (status)) {                                                           \
            fprintf(stderr, "%s:%d: %s returned %s, expected %s (%s)\n", __FILE__,       \
                    __LINE__, #expr, entmtp_status_string(st_),                          \
                    entmtp_status_string(status), entmtp_last_error());                  \
            emt_test_failures++;                                                         \
        } else if ((needle) && !strstr(entmtp_last_error(), (needle))) {                 \
            fprintf(stderr, "%s:%d: message \"%s\" lacks \"%s\"\n", __FILE__, __LINE__,  \
                    entmtp_last_error(), (const char *)(needle));                        \
            emt_test_failures++;                                                         \
        }                                                                                \
    } while (0)

#define CHECK_EQ_INT(a, b)                                                               \
    do {                                                                                 \
        long long a_ = (long long)(a), b_ = (long long)(b);                              \
        if (a_ != b_) {                                                                  \
            fprintf(stderr, "%s:%d: %s == %lld, expected %s == %lld\n", __FILE__,        \
                    __LINE__, #a, a_, #b, b_);                                           \
            emt_test_failures++;                                                         \
        }                                                                                \
    } while (0)

#define CHECK_NEAR(a, b, tol)                                                            \
    do {                                                                                 \
        double a_ = (double)(a), b_ = (double)(b);                                       \
        if (!(fabs(a_ - b_) <= (tol))) {                                                 \
            fprintf(stderr, "%s:%d: %s = %.9g, expected %.9g +- %g\n", __FILE__,         \
                    __LINE__, #a, a_, b_, (double)(tol));                                \
            emt_test_failures++;                                                         \
        }                                                                                \
    } while (0)

#define TEST_SKIP(why)                                                                   \
    do {                                                                                 \
        printf("SKIP: %s\n", why);                                                       \
        exit(77);                                                                        \
    } while (0)

/* The whole file, NUL-terminated (malloc'd; NULL when unreadable); *len
 * receives its size (len may be NULL). */
char *emt_test_read_file(const char *path, size_t *len);

/* Finish main(): prints a summary, returns the exit code. */
int emt_test_finish(const char *name);

#endif
