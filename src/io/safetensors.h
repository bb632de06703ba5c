/* safetensors reader: one file, or a directory of shards described by
 * model.safetensors.index.json. Header JSON parsed with cJSON and validated
 * (offsets in range, non-overlapping, shapes consistent with dtype sizes). */
#ifndef EMT_SAFETENSORS_H
#define EMT_SAFETENSORS_H

#include "io/tensor.h"

typedef struct emt_st emt_st; /* a set of one or more files */

/* `path` is a .safetensors file, or a directory containing model.safetensors
 * or model.safetensors.index.json. */
entmtp_status emt_st_open(const char *path, emt_st **out);
void emt_st_close(emt_st *st);
int64_t emt_st_n_tensors(const emt_st *st);
const emt_tensor *emt_st_tensor(const emt_st *st, int64_t i);
const emt_tensor *emt_st_find(const emt_st *st, const char *name);
/* "__metadata__" string entry of the (first) file, NULL if absent. */
const char *emt_st_metadata(const emt_st *st, const char *key);

#endif
