/* CPU backend ops, avx2 variant (target flags in CMakeLists.txt). */
#if defined(__x86_64__) || defined(_M_X64)
#define EMT_CPU_OPS emt_cpu_ops_avx2
#include "backend/cpu/cpu_variant.h"
#else
typedef int emt_cpu_avx2_unused; /* other architectures: baseline only */
#endif
