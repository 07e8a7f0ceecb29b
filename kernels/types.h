/*
 * types.h - the ggml tensor type traits table and half-precision conversions.
 *
 * GGUF tensors carry a ggml type id.  Everything that needs to know how a type
 * is laid out (the loader computing byte sizes, the kernels, `infer info`) asks
 * this one table instead of switching on the id.
 */
#ifndef INFER_KERNELS_TYPES_H
#define INFER_KERNELS_TYPES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* ggml type ids as stored in GGUF (gaps are ids ggml has retired). */
enum ggml_type {
    GGML_TYPE_F32 = 0,
    GGML_TYPE_F16 = 1,
    GGML_TYPE_Q4_0 = 2,
    GGML_TYPE_Q4_1 = 3,
    GGML_TYPE_Q5_0 = 6,
    GGML_TYPE_Q5_1 = 7,
    GGML_TYPE_Q8_0 = 8,
    GGML_TYPE_Q8_1 = 9,
    GGML_TYPE_Q2_K = 10,
    GGML_TYPE_Q3_K = 11,
    GGML_TYPE_Q4_K = 12,
    GGML_TYPE_Q5_K = 13,
    GGML_TYPE_Q6_K = 14,
    GGML_TYPE_Q8_K = 15,
    GGML_TYPE_IQ2_XXS = 16,
    GGML_TYPE_IQ2_XS = 17,
    GGML_TYPE_IQ3_XXS = 18,
    GGML_TYPE_IQ1_S = 19,
    GGML_TYPE_IQ4_NL = 20,
    GGML_TYPE_IQ3_S = 21,
    GGML_TYPE_IQ2_S = 22,
    GGML_TYPE_IQ4_XS = 23,
    GGML_TYPE_I8 = 24,
    GGML_TYPE_I16 = 25,
    GGML_TYPE_I32 = 26,
    GGML_TYPE_I64 = 27,
    GGML_TYPE_F64 = 28,
    GGML_TYPE_IQ1_M = 29,
    GGML_TYPE_BF16 = 30,
    GGML_TYPE_TQ1_0 = 34,
    GGML_TYPE_TQ2_0 = 35,
    GGML_TYPE_MXFP4 = 39,
    GGML_TYPE_COUNT = 40,
};

struct ggml_type_traits {
    const char *name;      /* NULL for ids that are not (or no longer) types */
    uint32_t block_size;   /* elements per block */
    uint32_t type_size;    /* bytes per block */
    bool quantized;
};

/* Traits of a type id, or NULL when the id is not a known type.  Ids from
 * GGML_TYPE_COUNT on are infer's own repacked layouts (repack.h); a file's
 * type ids must be checked against GGML_TYPE_COUNT first. */
const struct ggml_type_traits *ggml_type_traits_get(uint32_t type);

/* Bytes of a row of n elements; 0 when the type is unknown or n is not a
 * multiple of the block size (callers treat 0 as an error). */
size_t ggml_row_size(uint32_t type, int64_t n);

/* IEEE half and bfloat16 <-> float, exact (round to nearest even). */
static inline float fp16_to_fp32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f;
    uint32_t mant = h & 0x3ff;
    uint32_t bits;
    if (exp == 0) {
        if (mant == 0) {
            bits = sign;
        } else { /* subnormal: renormalise */
            exp = 127 - 15 + 1;
            while (!(mant & 0x400)) {
                mant <<= 1;
                exp--;
            }
            mant &= 0x3ff;
            bits = sign | (exp << 23) | (mant << 13);
        }
    } else if (exp == 0x1f) {
        bits = sign | 0x7f800000u | (mant << 13);
    } else {
        bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint16_t fp32_to_fp16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000;
    uint32_t absx = x & 0x7fffffff;
    if (absx > 0x7f800000u) /* NaN */
        return (uint16_t)(sign | 0x7e00);
    if (absx >= 0x477ff000u) /* rounds to >= 65520: inf */
        return (uint16_t)(sign | 0x7c00);
    if (absx < 0x38800000u) { /* below the smallest normal half: subnormal or 0 */
        if (absx < 0x33000000u)
            return (uint16_t)sign;
        uint32_t e = absx >> 23;
        uint32_t m = (absx & 0x7fffff) | 0x800000;
        /* generic path: value = m * 2^(e-150); half subnormal unit is 2^-24 */
        uint32_t s = (uint32_t)(150 - 24) - e; /* right shift to units of 2^-24 */
        uint32_t q = m >> s;
        uint32_t rem = m & ((1u << s) - 1);
        uint32_t halfway = 1u << (s - 1);
        if (rem > halfway || (rem == halfway && (q & 1)))
            q++;
        return (uint16_t)(sign | q);
    }
    uint32_t e = (absx >> 23) - 127 + 15;
    uint32_t m = absx & 0x7fffff;
    uint32_t q = (e << 10) | (m >> 13);
    uint32_t rem = m & 0x1fff;
    if (rem > 0x1000 || (rem == 0x1000 && (q & 1)))
        q++;
    return (uint16_t)(sign | q);
}

static inline float bf16_to_fp32(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

static inline uint16_t fp32_to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffff) > 0x7f800000u) /* NaN: keep it quiet */
        return (uint16_t)((x >> 16) | 64);
    return (uint16_t)((x + (0x7fff + ((x >> 16) & 1))) >> 16);
}

#endif
