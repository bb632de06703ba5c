/* The CPU backend: picks the kernel variant for this processor at load.
 * The installed library runs on any x86-64; the variants are built with
 * per-file target flags (CMakeLists.txt) and chosen here from cpuid. */
#include "backend/cpu/cpu_variants.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

static const char *const g_names[EMT_CPU_VARIANT_COUNT] = { "baseline", "avx2", "avx512", "amx" };

const char *emt_cpu_variant_name(emt_cpu_variant v) {
    return (unsigned)v < EMT_CPU_VARIANT_COUNT ? g_names[v] : "?";
}

#ifdef EMT_CPU_HAVE_X86_VARIANTS
#include <cpuid.h>
#if defined(EMT_CPU_HAVE_AMX) && defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* What the processor and the OS (saved register state, XCR0) allow, read
 * with cpuid directly: compilers' __builtin_cpu_supports know different
 * feature names (clang 14 has no "f16c"). */
typedef struct x86_features { int avx2, avx512, amx; } x86_features;

/* AMX tiles need, besides cpuid and XCR0, the kernel's leave to use their
 * 8 KiB of register state (Linux: arch_prctl ARCH_REQ_XCOMP_PERM for
 * XTILEDATA, once per process; it is idempotent). */
static int x86_amx_permitted(void) {
#if defined(EMT_CPU_HAVE_AMX) && defined(__linux__)
    return syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XFEATURE_XTILEDATA */) == 0;
#else
    return 0;
#endif
}

static x86_features x86_read_features(void) {
    x86_features f = { 0, 0, 0 };
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
    int fma = (c >> 12) & 1, osxsave = (c >> 27) & 1, avx = (c >> 28) & 1, f16c = (c >> 29) & 1;
    if (!osxsave || !avx) return f;
    unsigned xcr0_lo, xcr0_hi;
    __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
    (void)xcr0_hi;
    int os_ymm = (xcr0_lo & 0x6) == 0x6, os_zmm = (xcr0_lo & 0xe6) == 0xe6;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return f;
    f.avx2 = os_ymm && fma && f16c && ((b >> 5) & 1);
    int avx512f = (b >> 16) & 1, avx512bw = (b >> 30) & 1, avx512vl = (b >> 31) & 1, vnni = (c >> 11) & 1;
    f.avx512 = f.avx2 && os_zmm && avx512f && avx512bw && avx512vl && vnni;
    int amx_tile = (d >> 24) & 1, amx_int8 = (d >> 25) & 1, os_tiles = (xcr0_lo & 0x60000) == 0x60000;
    f.amx = f.avx512 && amx_tile && amx_int8 && os_tiles && x86_amx_permitted();
    return f;
}
#endif

int emt_cpu_variant_supported(emt_cpu_variant v) {
#ifdef EMT_CPU_HAVE_X86_VARIANTS
    x86_features f = x86_read_features();
    switch (v) {
    case EMT_CPU_BASELINE: return 1;
    case EMT_CPU_AVX2: return f.avx2;
    case EMT_CPU_AVX512: return f.avx512;
#ifdef EMT_CPU_HAVE_AMX
    case EMT_CPU_AMX: return f.amx;
#endif
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
                        "ENTMTP_CPU_KERNELS=%s: not a kernel variant (baseline, avx2, avx512, amx)", env);
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
#ifdef EMT_CPU_HAVE_AMX
    if (v == EMT_CPU_AMX) return &emt_cpu_ops_amx;
#endif
#endif
    return NULL;
}

size_t emt_cpu_prefetch_bytes = 2048;

static _Atomic long g_amx_tile_ranges;
long emt_cpu_amx_tile_ranges(void) { return atomic_load_explicit(&g_amx_tile_ranges, memory_order_relaxed); }
void emt_cpu_amx_tile_range_done(void) { atomic_fetch_add_explicit(&g_amx_tile_ranges, 1, memory_order_relaxed); }

/* 1 with the distance in *out when s is a valid ENTMTP_CPU_PREFETCH value */
static int parse_prefetch(const char *s, size_t *out) {
    if (*s < '0' || *s > '9') return 0; /* strtol would take spaces and signs */
    char *end = NULL;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < 0 || v > 65536 || v % 64) return 0;
    *out = (size_t)v;
    return 1;
}

/* AMX tiles (cpuid leaf 7, edx bit 24), as a sign of a Sapphire Rapids or
 * later core, whatever the OS allows or this build uses */
static int cpu_has_amx_tiles(void) {
#ifdef EMT_CPU_HAVE_X86_VARIANTS
    unsigned a, b, c, d;
    return __get_cpuid_count(7, 0, &a, &b, &c, &d) && ((d >> 24) & 1);
#else
    return 0;
#endif
}

static void prefetch_once(void) {
    const char *env = getenv("ENTMTP_CPU_PREFETCH");
    size_t v;
    if (env && *env && parse_prefetch(env, &v)) emt_cpu_prefetch_bytes = v;
    else emt_cpu_prefetch_bytes = cpu_has_amx_tiles() ? 8192 : 2048;
}

entmtp_status emt_backend_cpu_create_variant(emt_cpu_variant v, emt_backend **out) {
    static pthread_once_t prefetch_set = PTHREAD_ONCE_INIT;
    const char *env = getenv("ENTMTP_CPU_PREFETCH");
    size_t ahead;
    if (env && *env && !parse_prefetch(env, &ahead))
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT,
                        "ENTMTP_CPU_PREFETCH=%s: not a byte distance from 0 to 65536 in steps of 64", env);
    pthread_once(&prefetch_set, prefetch_once);
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
