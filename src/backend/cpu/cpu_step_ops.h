/* The device step ops of the CPU backend (backend.h: topk_device, accept,
 * commit, sample_root): the reference twins of cuda/step_ops.cu. "Device" memory is host
 * memory here, so these are plain loops; cpu_variant.h wires them into each
 * variant's ops table. */
#ifndef EMT_CPU_STEP_OPS_H
#define EMT_CPU_STEP_OPS_H

#include "backend/backend.h"
#include "backend/cpu/pool.h"

/* topk (the scalar insertion top-k of accept.c, statistics in double), one
 * pool task per row, ids mapped through id_map when non-NULL */
void emt_cpu_topk_device(emt_pool *pool, const float *logits, int32_t n_rows, int32_t vocab, int32_t k,
                         const int32_t *id_map, int32_t *ids, float *probs, float *entropy);
/* emt_evaluate_posterior_nodes itself, then the cuts; NULL or the reason it failed */
const char *emt_cpu_accept(const emt_accept_desc *d, void *rec);
void emt_cpu_commit(const emt_commit_desc *d, const void *rec);
void emt_cpu_gather_i32(int32_t *dst, const int32_t *src, const int32_t *idx, int32_t n);
/* sample_root: emt_sample_typical_u with u from the words uniform[0..1] (backend.h) */
int32_t emt_cpu_sample_root(const float *logits, int32_t vocab, float temperature, float epsilon, float delta,
                            const int32_t *uniform);

#endif
