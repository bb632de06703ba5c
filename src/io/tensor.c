/* dtypes and conversion to F32, including llama.cpp's quant blocks. */
#include "io/tensor.h"

#include <math.h>

static const struct { const char *name; size_t block_elems, block_bytes; } g_types[EMT_DTYPE_COUNT] = {
    [EMT_F32] = { "F32", 1, 4 },    [EMT_F16] = { "F16", 1, 2 },   [EMT_BF16] = { "BF16", 1, 2 },
    [EMT_Q8_0] = { "Q8_0", 32, 34 }, [EMT_Q4_0] = { "Q4_0", 32, 18 }, [EMT_Q4_1] = { "Q4_1", 32, 20 },
    [EMT_Q5_0] = { "Q5_0", 32, 22 }, [EMT_Q5_1] = { "Q5_1", 32, 24 },
    [EMT_Q4_K] = { "Q4_K", EMT_QK_K, 144 }, [EMT_Q5_K] = { "Q5_K", EMT_QK_K, 176 }, [EMT_Q6_K] = { "Q6_K", EMT_QK_K, 210 },
    [EMT_I32] = { "I32", 1, 4 },    [EMT_I64] = { "I64", 1, 8 },   [EMT_BOOL] = { "BOOL", 1, 1 },
};

const char *emt_dtype_name(emt_dtype t) {
    return (unsigned)t < EMT_DTYPE_COUNT ? g_types[t].name : "?";
}

size_t emt_dtype_block_elems(emt_dtype t) {
    return (unsigned)t < EMT_DTYPE_COUNT ? g_types[t].block_elems : 0;
}

size_t emt_dtype_block_bytes(emt_dtype t) {
    return (unsigned)t < EMT_DTYPE_COUNT ? g_types[t].block_bytes : 0;
}

int emt_dtype_is_quantized(emt_dtype t) {
    return (unsigned)t < EMT_DTYPE_COUNT && g_types[t].block_elems > 1;
}

int64_t emt_tensor_numel(const emt_tensor *t) {
    int64_t n = 1;
    for (int32_t i = 0; i < t->n_dims; i++) n *= t->shape[i];
    return n;
}

size_t emt_dtype_nbytes(emt_dtype t, int64_t numel) {
    if ((unsigned)t >= EMT_DTYPE_COUNT || numel < 0) return 0;
    size_t be = g_types[t].block_elems;
    if ((uint64_t)numel % be) return 0;
    uint64_t blocks = (uint64_t)numel / be;
    if (blocks > SIZE_MAX / g_types[t].block_bytes) return 0;
    return (size_t)blocks * g_types[t].block_bytes;
}

uint16_t emt_f32_to_f16(float f) {
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000, e = (x >> 23) & 0xFF, man = x & 0x7FFFFF;
    if (e == 0xFF) return (uint16_t)(sign | 0x7C00 | (man ? 0x200 : 0)); /* inf / nan */
    int32_t he = (int32_t)e - 127 + 15;
    if (he >= 31) return (uint16_t)(sign | 0x7C00);
    if (he <= 0) { /* subnormal half (or zero): shift the implicit bit in */
        if (he < -10) return (uint16_t)sign;
        man |= 0x800000;
        uint32_t shift = (uint32_t)(14 - he), half = man >> shift, rem = man & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rem > mid || (rem == mid && (half & 1))) half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((uint32_t)he << 10) | (man >> 13), rem = man & 0x1FFF;
    if (rem > 0x1000 || (rem == 0x1000 && (half & 1))) half++; /* may carry into the exponent: right */
    return (uint16_t)(sign | half);
}

void emt_quantize_q4_0(const float *x, int64_t n, void *out) {
    uint8_t *o = out;
    for (int64_t b = 0; b < n / 32; b++, o += 18) {
        const float *xb = x + b * 32;
        float amax = 0.0f, max = 0.0f;
        for (int j = 0; j < 32; j++)
            if (fabsf(xb[j]) > amax) { amax = fabsf(xb[j]); max = xb[j]; }
        float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
        uint16_t dh = emt_f32_to_f16(d);
        memcpy(o, &dh, 2);
        for (int j = 0; j < 16; j++) {
            int lo = (int)(xb[j] * id + 8.5f), hi = (int)(xb[j + 16] * id + 8.5f);
            lo = lo < 0 ? 0 : lo > 15 ? 15 : lo;
            hi = hi < 0 ? 0 : hi > 15 ? 15 : hi;
            o[2 + j] = (uint8_t)(lo | (hi << 4));
        }
    }
}

static inline uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | (p[1] << 8)); }

/* Block b's F16 scales (Q6_K keeps its d last; Q4_1, Q5_1, Q4_K and Q5_K
 * have a second one, the minimum, next to d): an error naming the block
 * when one is not finite. With finite scales every value of the block is
 * finite (codes and sub-block scales are small integers). */
static entmtp_status block_scales(const emt_tensor *t, const uint8_t *blk, int64_t b, float *d, float *d2) {
    int second = t->dtype == EMT_Q4_1 || t->dtype == EMT_Q5_1 || t->dtype == EMT_Q4_K || t->dtype == EMT_Q5_K;
    *d = emt_f16_to_f32(rd16(blk + (t->dtype == EMT_Q6_K ? 208 : 0)));
    *d2 = second ? emt_f16_to_f32(rd16(blk + 2)) : 0.0f;
    if (!isfinite(*d) || !isfinite(*d2))
        return emt_fail(ENTMTP_ERR_FORMAT, "%s: tensor '%s': block %lld has a non-finite %s",
                        t->file ? t->file : "?", t->name, (long long)b, isfinite(*d) ? "minimum" : "scale");
    return ENTMTP_OK;
}

entmtp_status emt_tensor_check_finite(const emt_tensor *t, int64_t *bad) {
    *bad = -1;
    const uint8_t *p = t->data;
    int64_t numel = emt_tensor_numel(t);
    if (emt_dtype_is_quantized(t->dtype)) {
        int64_t be = (int64_t)g_types[t->dtype].block_elems;
        size_t bb = g_types[t->dtype].block_bytes;
        float d, d2;
        for (int64_t b = 0; b < numel / be; b++) {
            entmtp_status st = block_scales(t, p + (size_t)b * bb, b, &d, &d2);
            if (st) return st;
        }
        return ENTMTP_OK;
    }
    if (t->dtype != EMT_F32 && t->dtype != EMT_F16 && t->dtype != EMT_BF16) return ENTMTP_OK; /* integers */
    /* the exponent's bits all ones: infinity or NaN */
    for (int64_t i = 0; i < numel && *bad < 0; i++) {
        if (t->dtype == EMT_F16 && (rd16(p + i * 2) & 0x7C00) == 0x7C00) *bad = i;
        else if (t->dtype == EMT_BF16 && (rd16(p + i * 2) & 0x7F80) == 0x7F80) *bad = i;
        else if (t->dtype == EMT_F32) {
            uint32_t bits;
            memcpy(&bits, p + i * 4, 4);
            if ((bits & 0x7F800000u) == 0x7F800000u) *bad = i;
        }
    }
    return ENTMTP_OK;
}

entmtp_status emt_tensor_to_f32(const emt_tensor *t, int64_t first, int64_t count, float *out) {
    int64_t numel = emt_tensor_numel(t);
    if (first < 0 || count < 0 || first > numel || count > numel - first)
        return emt_fail(ENTMTP_ERR_OUT_OF_RANGE, "%s: tensor '%s': range [%lld, +%lld) outside %lld elements",
                        t->file ? t->file : "?", t->name, (long long)first, (long long)count, (long long)numel);
    const uint8_t *p = t->data;
    switch (t->dtype) {
    case EMT_F32:
        memcpy(out, p + first * 4, (size_t)count * 4);
        return ENTMTP_OK;
    case EMT_F16:
        for (int64_t i = 0; i < count; i++) out[i] = emt_f16_to_f32(rd16(p + (first + i) * 2));
        return ENTMTP_OK;
    case EMT_BF16:
        for (int64_t i = 0; i < count; i++) {
            uint32_t bits = (uint32_t)rd16(p + (first + i) * 2) << 16;
            memcpy(&out[i], &bits, 4);
        }
        return ENTMTP_OK;
    case EMT_I32:
        for (int64_t i = 0; i < count; i++) {
            int32_t v;
            memcpy(&v, p + (first + i) * 4, 4);
            out[i] = (float)v;
        }
        return ENTMTP_OK;
    case EMT_I64:
        for (int64_t i = 0; i < count; i++) {
            int64_t v;
            memcpy(&v, p + (first + i) * 8, 8);
            out[i] = (float)v;
        }
        return ENTMTP_OK;
    case EMT_Q8_0: case EMT_Q4_0: case EMT_Q4_1:
    case EMT_Q5_0: case EMT_Q5_1: case EMT_Q4_K: case EMT_Q5_K: case EMT_Q6_K: break;
    default:
        return emt_fail(ENTMTP_ERR_UNSUPPORTED, "tensor '%s': dtype %d cannot be converted", t->name, (int)t->dtype);
    }
    int64_t be = (int64_t)g_types[t->dtype].block_elems;
    if (first % be || count % be)
        return emt_fail(ENTMTP_ERR_INVALID_ARGUMENT, "tensor '%s': quantized ranges must be whole %lld-element blocks",
                        t->name, (long long)be);
    size_t bb = g_types[t->dtype].block_bytes;
    for (int64_t b = first / be; b < (first + count) / be; b++) {
        const uint8_t *blk = p + (size_t)b * bb;
        float *o = out + (b - first / be) * be;
        float d, d2;
        entmtp_status st = block_scales(t, blk, b, &d, &d2);
        if (st) return st;
        if (t->dtype == EMT_Q5_0) { emt_dequant_q5_0(blk, o); continue; }
        if (t->dtype == EMT_Q5_1) { emt_dequant_q5_1(blk, o); continue; }
        if (t->dtype == EMT_Q4_K) { emt_dequant_q4_k(blk, o); continue; }
        if (t->dtype == EMT_Q5_K) { emt_dequant_q5_k(blk, o); continue; }
        if (t->dtype == EMT_Q6_K) { emt_dequant_q6_k(blk, o); continue; }
        if (t->dtype == EMT_Q8_0) {
            const int8_t *q = (const int8_t *)(blk + 2);
            for (int j = 0; j < 32; j++) o[j] = (float)q[j] * d;
        } else if (t->dtype == EMT_Q4_0) {
            const uint8_t *q = blk + 2;
            for (int j = 0; j < 16; j++) {
                o[j] = (float)((q[j] & 0x0F) - 8) * d;
                o[j + 16] = (float)((q[j] >> 4) - 8) * d;
            }
        } else {
            float m = d2;
            const uint8_t *q = blk + 4;
            for (int j = 0; j < 16; j++) {
                o[j] = (float)(q[j] & 0x0F) * d + m;
                o[j + 16] = (float)(q[j] >> 4) * d + m;
            }
        }
    }
    return ENTMTP_OK;
}
