/* The contract between libentmtp and the CUDA plugin. The plugin exports one
 * C function; it receives the interface version it must implement and fills
 * an emt_backend whose ops run on `device`. It reports failures as text in
 * `err` (it cannot reach libentmtp's hidden error functions). */
#ifndef EMT_CUDA_PLUGIN_H
#define EMT_CUDA_PLUGIN_H

#include "backend/backend.h"

#define EMT_CUDA_PLUGIN_ABI 8 /* 2: device-resident lengths, graphs, graph counters; 3: sample_root; 4: emt_wmat.packed, pack op; 5: set_activation_bits op; 6: set_kv_dtype, round_bf16; 7: rope_round_kv; 8: matmul_q_add, rope_q_round_kv */
#define EMT_CUDA_PLUGIN_ENTRY "entmtp_cuda_plugin_create"

typedef int (*emt_cuda_plugin_entry_fn)(int abi_version, int32_t device, emt_backend **out,
                                        char *err, size_t err_cap);

#endif
