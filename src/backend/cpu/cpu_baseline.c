/* CPU backend ops, baseline variant (target flags in CMakeLists.txt). */
#define EMT_CPU_OPS emt_cpu_ops_baseline
#include "backend/cpu/cpu_variant.h"
