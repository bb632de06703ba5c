/* Internal helpers shared by every layer: error reporting, checked
 * allocation, versioned-struct copying. Never included by users. */
#ifndef EMT_COMMON_H
#define EMT_COMMON_H

#include "entmtp.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#if defined(__GNUC__) || defined(__clang__)
#  define EMT_PRINTF(a, b) __attribute__((format(printf, a, b)))
#  define EMT_UNUSED __attribute__((unused))
#else
#  define EMT_PRINTF(a, b)
#  define EMT_UNUSED
#endif

/* Limits of this build, published at run time by entmtp_limit(). */
#define EMT_MAX_HEADS 16       /* drafting depth (heads per model) */
#define EMT_MAX_LADDER 16      /* trees in a threshold ladder */
#define EMT_MAX_STOP_TOKENS 64 /* session stop tokens */
#define EMT_MAX_TREE_NODES 4096
#define EMT_MAX_TOPK 64

/* Record `status` with a formatted message as this thread's last error and
 * return it: `return emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor %s ...", ...);` */
entmtp_status emt_fail(entmtp_status status, const char *fmt, ...) EMT_PRINTF(2, 3);
/* Counts the errors recorded on this thread: compare before and after a
 * user callback to see whether it set its own message. */
uint64_t emt_error_serial(void);
/* Prefix the current last-error message ("file.gguf: " + old message). */
void emt_error_prefix(const char *fmt, ...) EMT_PRINTF(1, 2);

/* Allocation that records ENTMTP_ERR_OUT_OF_MEMORY on failure. Sizes are
 * checked for overflow (count * size). */
void *emt_malloc(size_t count, size_t size);
void *emt_calloc(size_t count, size_t size);
void *emt_realloc(void *ptr, size_t count, size_t size);
char *emt_strdup(const char *s);

/* Check a caller's versioned struct: struct_size >= sizeof(size_t), and every
 * byte past the `known` bytes this library understands is zero. */
entmtp_status emt_check_versioned(const void *src, size_t known, const char *what);
/* Copy a caller's versioned struct (first field size_t struct_size) into
 * `dst`, which the caller pre-filled with defaults: only min(src->struct_size,
 * dst_size) bytes are taken, after emt_check_versioned. NULL src: nothing. */
entmtp_status emt_copy_versioned(void *dst, size_t dst_size, const void *src, const char *what);
/* The body of an entmtp_*_init(dst, size): zero `size` bytes, copy the first
 * min(size, known) bytes of `defaults`, set struct_size = size. */
entmtp_status emt_init_versioned(void *dst, size_t size, const void *defaults, size_t known,
                                 const char *what);

/* Copy a library struct out to a caller's versioned struct: only
 * min(dst->struct_size, size) bytes are written; struct_size is kept. */
entmtp_status emt_copy_out(void *dst, const void *src, size_t size, const char *what);

/* Monotonic wall clock in seconds. */
double emt_now(void);

/* Read a whole file into a NUL-terminated buffer (free()). */
entmtp_status emt_read_file(const char *path, char **out, size_t *out_len);

#endif
