/* CPU backend ops, avx512 variant (target flags in CMakeLists.txt). */
#if defined(__x86_64__) || defined(_M_X64)
#define EMT_CPU_OPS emt_cpu_ops_avx512
#include "backend/cpu/cpu_variant.h"
#else
typedef int emt_cpu_avx512_unused; /* other architectures: baseline only */
#endif
