/* The CPU backend: picks the kernel variant for this processor at load.
 * The installed library runs on any x86-64; the variants are built with
 * per-file target flags (CMakeLists.txt) and chosen here from cpuid. */
#include "backend/cpu/cpu_variants.h"

#include <stdlib.h>

static const char *const g_names[EMT_CPU_VARIANT_COUNT] = { "baseline", "avx2", "avx512" };

const char *emt_cpu_variant_name(emt_cpu_variant v) {
    return (unsigned)v < EMT_CPU_VARIANT_COUNT ? g_names[v] : "?";
}

int emt_cpu_variant_supported(emt_cpu_variant v) {
#ifdef EMT_CPU_HAVE_X86_VARIANTS
    __builtin_cpu_init();
    int avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
               __builtin_cpu_supports("f16c");
    switch (v) {
    case EMT_CPU_BASELINE: return 1;
    case EMT_CPU_AVX2: return avx2;
    case EMT_CPU_AVX512:
        return avx2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
               __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512vnni");
    default: return 0;
    }
#else
    return v == EMT_CPU_BASELINE;
#endif
}

entmtp_status emt_cpu_variant_selected(emt_cpu_variant *out) {
    const char *env = getenv("ENTMTP_CPU_KERNELS");
    if (env && *env) {
        for (int v = 0; v < EMT_CPU_VARIANT_COUNT; v++) {
            if (strcmp(env, g_names[v]) != 0) continue;
            if (!emt_cpu_variant_supported((emt_cpu_variant)v))
                return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT,
                                "ENTMTP_CPU_KERNELS=%s: this processor or build cannot run that kernel variant", env);
            *out = (emt_cpu_variant)v;
            return ENTMTP_OK;
        }
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT,
                        "ENTMTP_CPU_KERNELS=%s: not a kernel variant (baseline, avx2, avx512)", env);
    }
    *out = EMT_CPU_BASELINE;
    for (int v = EMT_CPU_VARIANT_COUNT - 1; v > 0; v--)
        if (emt_cpu_variant_supported((emt_cpu_variant)v)) { *out = (emt_cpu_variant)v; break; }
    return ENTMTP_OK;
}

const emt_backend_ops *emt_cpu_variant_ops(emt_cpu_variant v) {
    if (v == EMT_CPU_BASELINE) return &emt_cpu_ops_baseline;
#ifdef EMT_CPU_HAVE_X86_VARIANTS
    if (v == EMT_CPU_AVX2) return &emt_cpu_ops_avx2;
    if (v == EMT_CPU_AVX512) return &emt_cpu_ops_avx512;
#endif
    return NULL;
}

entmtp_status emt_backend_cpu_create_variant(emt_cpu_variant v, emt_backend **out) {
    if (!emt_cpu_variant_supported(v))
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "cpu backend: kernel variant '%s' cannot run here",
                        emt_cpu_variant_name(v));
    const emt_backend_ops *ops = emt_cpu_variant_ops(v);
    emt_backend *be = emt_calloc(1, sizeof *be);
    if (!be) return ENTMTP_ERR_OUT_OF_MEMORY;
    be->ops = ops;
    *out = be;
    return ENTMTP_OK;
}

entmtp_status emt_backend_cpu_create(emt_backend **out) {
    emt_cpu_variant v = EMT_CPU_BASELINE;
    entmtp_status st = emt_cpu_variant_selected(&v);
    if (st) return st;
    return emt_backend_cpu_create_variant(v, out);
}
