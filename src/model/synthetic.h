/* Models and heads with random weights at a chosen shape, built in memory:
 * what `entmtp bench --synthetic` measures speed on without downloading. */
#ifndef EMT_SYNTHETIC_H
#define EMT_SYNTHETIC_H

#include "model/heads.h"

/* Named shapes: "llama-7b" (4096/32 layers/32 heads/11008/32000),
 * "smollm2-135m" (576/30/9 heads, 3 kv/1536/49152, tied), "tiny". */
entmtp_status emt_synthetic_config(const char *name, emt_model_config *out);
/* Weight matrices in dtype wt: EMT_F32, F16, BF16, or a type
 * emt_quantize_blocks writes (quantized from the random values); F32 where
 * the backend has no kernel for wt or a row is not whole blocks. Rows repeat
 * every 256 (src/model/synthetic.c says why). */
entmtp_status emt_model_create_synthetic(const emt_model_config *c, uint64_t seed, emt_dtype wt,
                                         const entmtp_model_params *params, entmtp_model **out);

#endif
