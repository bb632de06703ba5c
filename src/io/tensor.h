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
    EMT_Q5_0,
    EMT_Q5_1,
    EMT_Q4_K, /* K-quants: 256-value super-blocks (EMT_QK_K) */
    EMT_Q5_K,
    EMT_Q6_K,
    EMT_I32, /* safetensors I32/I64 (not weights; readable for metadata) */
    EMT_I64,
    EMT_BOOL, /* safetensors BOOL, one byte (EAGLE-3's t2d mask) */
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

/* float -> bfloat16, round to nearest even (a NaN stays a quiet NaN): the
 * device's cvt.rn.bf16.f32 (cuda/bf16_split.h), bit for bit. */
static inline uint16_t emt_f32_to_bf16(float f) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7FFFFFFFu) > 0x7F800000u) return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

/* float -> IEEE half, round to nearest even (overflow to infinity). */
uint16_t emt_f32_to_f16(float f);

/* Quantize n values (a multiple of 32) into GGUF Q4_0 blocks the way
 * llama.cpp's reference quantizer does: d = the value of largest magnitude
 * / -8, codes round(x / d) + 8 clamped to [0, 15]. */
void emt_quantize_q4_0(const float *x, int64_t n, void *out);

/* llama.cpp's block layouts (ggml-common.h), bytes in file order; every
 * F16 is little-endian. Element i of a block is value v_i:
 *   Q5_0  (32 values, 22 bytes): d, qh[4], qs[16]. q_i = nibble | bit << 4
 *         (nibble: low of qs[i] for i < 16, high of qs[i-16] otherwise; bit:
 *         bit i of the little-endian u32 qh); v = d * (q - 16).
 *   Q5_1  (32 values, 24 bytes): d, m, qh[4], qs[16]; q as Q5_0; v = d*q + m.
 *   Q4_K  (256 values, 144 bytes): d, dmin, scales[12], qs[128]. Eight
 *         sub-blocks of 32 with 6-bit scale sc and minimum m packed in
 *         scales (emt_kquant_scale_min); sub-block 2k, 2k+1 take the low and
 *         high nibbles of qs[32k .. 32k+31]; v = d*sc * q - dmin*m.
 *   Q5_K  (256 values, 176 bytes): d, dmin, scales[12], qh[32], qs[128]; as
 *         Q4_K plus a fifth bit: bit s of qh[l] for element l of sub-block s.
 *   Q6_K  (256 values, 210 bytes): ql[128], qh[64], int8 scales[16], d (at
 *         the end). Sixteen sub-blocks of 16 values; v = d * scales[s] * (q - 32)
 *         with q = 4 bits of ql | 2 bits of qh (see emt_dequant_q6_k). */
#define EMT_QK_K 256

/* Sub-block j (0..7) of a Q4_K/Q5_K super-block: its 6-bit scale and minimum. */
static inline void emt_kquant_scale_min(const uint8_t *scales, int j, uint8_t *sc, uint8_t *m) {
    if (j < 4) {
        *sc = scales[j] & 63;
        *m = scales[j + 4] & 63;
    } else {
        *sc = (uint8_t)((scales[j + 4] & 0x0F) | ((scales[j - 4] >> 6) << 4));
        *m = (uint8_t)((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
    }
}

/* Scalar reference dequantization of one block (32 values for Q5_0/Q5_1,
 * 256 for the K-quants): the CPU reference every kernel (CPU SIMD, CUDA) is
 * compared with; tests/unit/test_kquant_ref checks them against the gguf
 * package's numpy dequantization. */
void emt_dequant_q5_0(const uint8_t *blk, float *out);
void emt_dequant_q5_1(const uint8_t *blk, float *out);
void emt_dequant_q4_k(const uint8_t *blk, float *out);
void emt_dequant_q5_k(const uint8_t *blk, float *out);
void emt_dequant_q6_k(const uint8_t *blk, float *out);

/* Quantize n values (whole blocks) of Q8_0, Q4_0, Q5_0, Q5_1, Q4_K, Q5_K or Q6_K:
 * per-block ranges rounded to the format (src/io/kquant.c), not llama.cpp's
 * search for the best scales. ENTMTP_ERR_UNSUPPORTED for other types. */
entmtp_status emt_quantize_blocks(emt_dtype t, const float *x, int64_t n, void *out);

const char *emt_dtype_name(emt_dtype t);
/* Values per block (1 for plain types, 32, or 256 for the K-quants) and
 * bytes per block. */
size_t emt_dtype_block_elems(emt_dtype t);
size_t emt_dtype_block_bytes(emt_dtype t);
/* 1 for the block-quantized dtypes (Q8_0 .. Q6_K). */
int emt_dtype_is_quantized(emt_dtype t);
int64_t emt_tensor_numel(const emt_tensor *t);
/* Bytes needed for `numel` elements of dtype (blocks for quantized types);
 * returns 0 when numel is not a whole number of blocks. */
size_t emt_dtype_nbytes(emt_dtype t, int64_t numel);

/* Convert elements [first, first + count) of a tensor to F32. For quantized
 * types, first and count must be multiples of the block size (32, or 256
 * for the K-quants). Checks NaN/Inf only in the
 * block scales of quantized types (error names the tensor). */
entmtp_status emt_tensor_to_f32(const emt_tensor *t, int64_t first, int64_t count, float *out);

/* Whether every value of a tensor is finite, without converting it: for
 * quantized types the block scales (an ENTMTP_ERR_FORMAT naming the block,
 * as emt_tensor_to_f32), for F32/F16/BF16 each value's exponent bits
 * (*bad = the first non-finite element's index, -1 when none; integer
 * tensors are always finite). */
entmtp_status emt_tensor_check_finite(const emt_tensor *t, int64_t *bad);
/* Read-only memory mapping of a whole file. */
typedef struct emt_mapping {
    const uint8_t *data;
    size_t size;
    char *path;
} emt_mapping;
entmtp_status emt_map_file(const char *path, emt_mapping *out);
void emt_unmap_file(emt_mapping *m);
/* Gives back the resident pages wholly inside [p, p + bytes) of a file
 * mapping (read again from the file if touched later). Only for pointers
 * into an emt_map_file mapping. */
void emt_mapping_drop(const void *p, size_t bytes);

#endif
