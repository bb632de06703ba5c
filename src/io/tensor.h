/* Tensors as found in model files: a name, a dtype, a shape (outermost
 * first, PyTorch order; GGUF's ne[] reversed) and bytes inside a mapping. */
#ifndef EMT_TENSOR_H
#define EMT_TENSOR_H

#include "common/common.h"

typedef enum emt_dtype {
    EMT_F32 = 0,
    EMT_F16,
    EMT_BF16,
    EMT_Q8_0,
    EMT_Q4_0,
    EMT_Q4_1,
    EMT_I32, /* safetensors I32/I64 (not weights; readable for metadata) */
    EMT_I64,
    EMT_DTYPE_COUNT
} emt_dtype;

#define EMT_MAX_DIMS 4

typedef struct emt_tensor {
    const char *name;        /* owned by the file object */
    emt_dtype dtype;
    int32_t n_dims;
    int64_t shape[EMT_MAX_DIMS]; /* outermost first */
    const void *data;        /* inside the mapping */
    size_t nbytes;
    const char *file;        /* path of the file holding it */
} emt_tensor;

/* IEEE half -> float, exact (subnormals included). */
static inline float emt_f16_to_f32(uint16_t h) {
    uint32_t sign = (uint32_t)(h & 0x8000) << 16, exp = (h >> 10) & 0x1F, man = h & 0x3FF, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do { man <<= 1; e++; } while (!(man & 0x400));
            bits = sign | ((uint32_t)(127 - 15 - e) << 23) | ((man & 0x3FF) << 13);
        }
    } else if (exp == 31) {
        bits = sign | 0x7F800000u | (man << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* bfloat16 -> float: the high half of the float's bits. */
static inline float emt_bf16_to_f32(uint16_t h) {
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* float -> IEEE half, round to nearest even (overflow to infinity). */
uint16_t emt_f32_to_f16(float f);

/* Quantize n values (a multiple of 32) into GGUF Q4_0 blocks the way
 * llama.cpp's reference quantizer does: d = the value of largest magnitude
 * / -8, codes round(x / d) + 8 clamped to [0, 15]. */
void emt_quantize_q4_0(const float *x, int64_t n, void *out);

const char *emt_dtype_name(emt_dtype t);
int64_t emt_tensor_numel(const emt_tensor *t);
/* Bytes needed for `numel` elements of dtype (blocks for quantized types);
 * returns 0 when numel is not a whole number of blocks. */
size_t emt_dtype_nbytes(emt_dtype t, int64_t numel);

/* Convert elements [first, first + count) of a tensor to F32. For quantized
 * types, first and count must be multiples of 32. Checks NaN/Inf only in the
 * block scales of quantized types (error names the tensor). */
entmtp_status emt_tensor_to_f32(const emt_tensor *t, int64_t first, int64_t count, float *out);

/* Read-only memory mapping of a whole file. */
typedef struct emt_mapping {
    const uint8_t *data;
    size_t size;
    char *path;
} emt_mapping;
entmtp_status emt_map_file(const char *path, emt_mapping *out);
void emt_unmap_file(emt_mapping *m);

#endif
