/* A small persistent thread pool: run fn(ctx, task) for task in [0, n_tasks)
 * across the workers and the calling thread, and wait. One pool per session,
 * so a pool is only ever driven by one thread at a time. */
#ifndef EMT_POOL_H
#define EMT_POOL_H

#include "common/common.h"

typedef struct emt_pool emt_pool;
typedef void (*emt_pool_fn)(void *ctx, int32_t task);

/* n_threads total (including the caller); <= 1 creates no threads. */
emt_pool *emt_pool_create(int32_t n_threads);
void emt_pool_destroy(emt_pool *pool);
int32_t emt_pool_size(const emt_pool *pool);
void emt_pool_run(emt_pool *pool, int32_t n_tasks, emt_pool_fn fn, void *ctx);

#endif
