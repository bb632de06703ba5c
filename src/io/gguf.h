/* GGUF v3 reader (llama.cpp's format): metadata and tensor table, validated
 * against the file size; tensor data left in the mapping. */
#ifndef EMT_GGUF_H
#define EMT_GGUF_H

#include "io/tensor.h"

typedef enum emt_gguf_type {
    EMT_GGUF_UINT8 = 0, EMT_GGUF_INT8 = 1, EMT_GGUF_UINT16 = 2, EMT_GGUF_INT16 = 3,
    EMT_GGUF_UINT32 = 4, EMT_GGUF_INT32 = 5, EMT_GGUF_FLOAT32 = 6, EMT_GGUF_BOOL = 7,
    EMT_GGUF_STRING = 8, EMT_GGUF_ARRAY = 9, EMT_GGUF_UINT64 = 10, EMT_GGUF_INT64 = 11,
    EMT_GGUF_FLOAT64 = 12
} emt_gguf_type;

typedef struct emt_gguf emt_gguf;

entmtp_status emt_gguf_open(const char *path, emt_gguf **out);
void emt_gguf_close(emt_gguf *g);
const char *emt_gguf_path(const emt_gguf *g);

/* Metadata. Getters coerce between integer types when the value fits and
 * return ENTMTP_ERR_NOT_FOUND (key absent) or ENTMTP_ERR_FORMAT (wrong type,
 * message names file and key). */
entmtp_status emt_gguf_get_i64(const emt_gguf *g, const char *key, int64_t *out);
entmtp_status emt_gguf_get_f32(const emt_gguf *g, const char *key, float *out);
entmtp_status emt_gguf_get_bool(const emt_gguf *g, const char *key, int *out);
/* String value: pointer into the mapping, not NUL-terminated. */
entmtp_status emt_gguf_get_str(const emt_gguf *g, const char *key, const char **s, size_t *len);
/* Array value: element type and count. */
entmtp_status emt_gguf_get_arr(const emt_gguf *g, const char *key, emt_gguf_type *elem_type,
                               int64_t *n);
/* Element i of a string array (pointer into the mapping, length). */
entmtp_status emt_gguf_arr_str(const emt_gguf *g, const char *key, int64_t i, const char **s,
                               size_t *len);
/* Element i of a numeric array, converted. */
entmtp_status emt_gguf_arr_i64(const emt_gguf *g, const char *key, int64_t i, int64_t *out);
entmtp_status emt_gguf_arr_f32(const emt_gguf *g, const char *key, int64_t i, float *out);

int64_t emt_gguf_n_kv(const emt_gguf *g);
const char *emt_gguf_kv_key(const emt_gguf *g, int64_t i); /* NUL-terminated copy */

int64_t emt_gguf_n_tensors(const emt_gguf *g);
const emt_tensor *emt_gguf_tensor(const emt_gguf *g, int64_t i);
const emt_tensor *emt_gguf_find_tensor(const emt_gguf *g, const char *name);

#endif
