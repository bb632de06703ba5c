/* The CPU kernel variants: one table of backend ops per instruction set,
 * all compiled from cpu_variant.h, and the choice among them at load. */
#ifndef EMT_CPU_VARIANTS_H
#define EMT_CPU_VARIANTS_H

#include "backend/backend.h"

typedef enum emt_cpu_variant {
    EMT_CPU_BASELINE = 0, /* portable C (SSE2 on x86-64) */
    EMT_CPU_AVX2,         /* AVX2 + FMA + F16C */
    EMT_CPU_AVX512,       /* AVX-512 F/BW/VL + VNNI */
    EMT_CPU_AMX,          /* avx512 + AMX-INT8 tiles (Q4_0 / Q8_0 products of 16+ rows) */
    EMT_CPU_VARIANT_COUNT
} emt_cpu_variant;

/* Weight dtypes every variant's matmul_q takes besides F32. */
#define EMT_CPU_WEIGHT_TYPES                                                                      \
    ((1u << EMT_F16) | (1u << EMT_BF16) | (1u << EMT_Q8_0) | (1u << EMT_Q4_0) | (1u << EMT_Q4_1) |     \
     (1u << EMT_Q5_0) | (1u << EMT_Q5_1) | (1u << EMT_Q4_K) | (1u << EMT_Q5_K) | (1u << EMT_Q6_K))

extern const emt_backend_ops emt_cpu_ops_baseline;
#if defined(__x86_64__) || defined(_M_X64)
#define EMT_CPU_HAVE_X86_VARIANTS 1
extern const emt_backend_ops emt_cpu_ops_avx2;
extern const emt_backend_ops emt_cpu_ops_avx512;
extern const emt_backend_ops emt_cpu_ops_amx; /* defined where the compiler has AMX (EMT_CPU_HAVE_AMX) */
#endif

const char *emt_cpu_variant_name(emt_cpu_variant v);
/* 1 when this build has the variant and this processor can run it. */
int emt_cpu_variant_supported(emt_cpu_variant v);
/* The variant the CPU backend runs: the best supported one, or the one the
 * environment variable ENTMTP_CPU_KERNELS (baseline | avx2 | avx512 | amx) asks
 * for. ENTMTP_ERR_INVALID_ARGUMENT naming the value when it is unknown or
 * this processor cannot run it. */
entmtp_status emt_cpu_variant_selected(emt_cpu_variant *out);
/* The ops table of variant v; NULL when this build lacks it. */
const emt_backend_ops *emt_cpu_variant_ops(emt_cpu_variant v);
/* How far ahead of the block it decodes a product kernel asks for the
 * weights (prefetch_ahead, cpu_variant.h), in bytes: ENTMTP_CPU_PREFETCH
 * when set (0 to 65536, a multiple of 64), else 8192 on processors with AMX
 * tiles (Sapphire Rapids and later, whose longer memory latency needs the
 * longer lead: docs/performance.md) and 2048 elsewhere. Set once, by the
 * first CPU backend created; read by every kernel variant. */
extern size_t emt_cpu_prefetch_bytes;
/* Ranges of outputs the amx variant's tile kernels have computed in this
 * process (tests check that 16-row products take them). */
long emt_cpu_amx_tile_ranges(void);
void emt_cpu_amx_tile_range_done(void);
/* A CPU backend running variant v (tests compare the variants). */
entmtp_status emt_backend_cpu_create_variant(emt_cpu_variant v, emt_backend **out);

#endif
