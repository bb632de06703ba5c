/* CPU backend ops, amx variant: the avx512 variant's kernels plus AMX tile
 * products of Q4_0 / Q8_0 matrices over 16 or more rows (target flags in
 * CMakeLists.txt; built only where the compiler takes -mamx-int8). */
#if (defined(__x86_64__) || defined(_M_X64)) && (defined(__AMX_INT8__) || defined(__AMXINT8__)) /* GCC's, clang's names */
#define EMT_CPU_OPS emt_cpu_ops_amx
#include "backend/cpu/cpu_variant.h"
#else
typedef int emt_cpu_amx_unused; /* other architectures and compilers: no amx variant */
#endif
