/*
 * quants.h - ggml quantization block formats and their scalar reference
 * kernels: dequantize a row, quantize a row, and dot a weight row with an
 * activation row.
 *
 * The block structs reproduce ggml's ggml-common.h layouts byte for byte (the
 * GGUF file stores them verbatim); the static asserts pin them to the sizes in
 * kernels/types.c.  The functions here are the specification every SIMD
 * variant is tested against; they follow ggml's reference math (ggml-quants.c
 * and the *_generic dot products of ggml-cpu/quants.c) so that results match
 * llama.cpp numerically (bit for bit for dequantization and quantization; to
 * float rounding, ~1e-7 relative, for the dot products).
 *
 * A matmul computes each output as vec_dot(weight row, activation row) where
 * the activation row was first converted by the from_float of the weight
 * type's vec_dot_type (see dispatch.h):
 *
 *   weight type                 vec_dot_type (activation format)
 *   F32                         F32
 *   F16                         F16
 *   BF16                        BF16
 *   Q4_0, Q5_0, Q8_0            Q8_0
 *   Q4_1, Q5_1                  Q8_1  (as ggml: the block sum s = d*sum(q)
 *                                      folds the weight minimum in exactly)
 *   IQ4_NL                      Q8_0
 *   Q2_K, Q3_K, Q4_K, Q5_K,     Q8_K
 *   Q6_K, IQ4_XS
 *
 * Every function takes n = number of elements, a multiple of the type's block
 * size (checked by the callers in matmul.c; the kernels themselves assume it).
 * Block pointers must be aligned to the struct's alignment (2 bytes for the
 * ggml_half types, 4 for Q8_K) -- GGUF's data alignment guarantees it.
 */
#ifndef INFER_KERNELS_QUANTS_H
#define INFER_KERNELS_QUANTS_H

#include <stdint.h>
#include <string.h>

#include "types.h"

#define QK_K 256
#define K_SCALE_SIZE 12
#define QK4_0 32
#define QK4_1 32
#define QK5_0 32
#define QK5_1 32
#define QK8_0 32
#define QK8_1 32
#define QK4_NL 32

typedef uint16_t ggml_half; /* IEEE binary16 bits */

/* 4-bit, scale only: x = d * (q - 8).  qs[j] holds element j (low nibble)
 * and element j+16 (high nibble). */
typedef struct {
    ggml_half d;
    uint8_t qs[QK4_0 / 2];
} block_q4_0;

/* 4-bit with minimum: x = d * q + m. */
typedef struct {
    ggml_half d;
    ggml_half m;
    uint8_t qs[QK4_1 / 2];
} block_q4_1;

/* 5-bit, scale only: x = d * (q - 16); bit 4 of element j is bit j of qh
 * (little-endian uint32). */
typedef struct {
    ggml_half d;
    uint8_t qh[4];
    uint8_t qs[QK5_0 / 2];
} block_q5_0;

/* 5-bit with minimum: x = d * q + m. */
typedef struct {
    ggml_half d;
    ggml_half m;
    uint8_t qh[4];
    uint8_t qs[QK5_1 / 2];
} block_q5_1;

/* 8-bit, scale only: x = d * q. */
typedef struct {
    ggml_half d;
    int8_t qs[QK8_0];
} block_q8_0;

/* 8-bit activation block for Q4_1/Q5_1 dots: s = d * sum(qs). */
typedef struct {
    ggml_half d;
    ggml_half s;
    int8_t qs[QK8_1];
} block_q8_1;

/* 4-bit K-quant super-block of 8 sub-blocks of 32: x = d*sc[j]*q - dmin*m[j],
 * with 6-bit sc/m packed in scales[12]; qs holds sub-blocks 2k (low nibbles)
 * and 2k+1 (high nibbles) in bytes 32k..32k+31. */
typedef struct {
    ggml_half d;
    ggml_half dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qs[QK_K / 2];
} block_q4_K;

/* 5-bit K-quant: as Q4_K plus a fifth bit per element in qh (bit 2k / 2k+1
 * of qh[l] for sub-blocks 2k / 2k+1). */
typedef struct {
    ggml_half d;
    ggml_half dmin;
    uint8_t scales[K_SCALE_SIZE];
    uint8_t qh[QK_K / 8];
    uint8_t qs[QK_K / 2];
} block_q5_K;

/* 6-bit K-quant of 16 sub-blocks of 16: x = d * scales[j] * (q - 32); low 4
 * bits in ql, high 2 bits in qh. */
typedef struct {
    uint8_t ql[QK_K / 2];
    uint8_t qh[QK_K / 4];
    int8_t scales[QK_K / 16];
    ggml_half d;
} block_q6_K;

/* 2-bit K-quant super-block of 16 sub-blocks of 16: x = d*(sc&15)*q -
 * dmin*(sc>>4) with sc = scales[j] for sub-block j = element/16.  Element
 * 128h + 32k + l (h < 2, k < 4, l < 32) is bits 2k, 2k+1 of qs[32h + l]. */
typedef struct {
    uint8_t scales[QK_K / 16];
    uint8_t qs[QK_K / 4];
    ggml_half d;
    ggml_half dmin;
} block_q2_K;

/* 3-bit K-quant, 16 sub-blocks of 16: x = d * (s_j - 32) * q, q in -4..3:
 * the low two bits as Q2_K's qs, minus 4 where bit k (element 32k + l, k <
 * 8) of hmask[l] is clear; the 6-bit s_j packed in scales[12] (q3_K_scales). */
typedef struct {
    uint8_t hmask[QK_K / 8];
    uint8_t qs[QK_K / 4];
    uint8_t scales[12];
    ggml_half d;
} block_q3_K;

/* Non-linear 4-bit, scale only: x = d * kvalues_iq4nl[nibble], nibbles as
 * Q4_0 (qs[j]: element j low, element j+16 high). */
typedef struct {
    ggml_half d;
    uint8_t qs[QK4_NL / 2];
} block_iq4_nl;

/* IQ4_NL's codebook in super-blocks of 8 sub-blocks of 32 with 6-bit scales
 * (iq4_xs_scale): x = d * (s_j - 32) * kvalues_iq4nl[nibble]; sub-block j's
 * nibbles are qs[16j .. 16j+15] laid out as IQ4_NL's. */
typedef struct {
    ggml_half d;
    uint16_t scales_h;
    uint8_t scales_l[QK_K / 64];
    uint8_t qs[QK_K / 2];
} block_iq4_xs;

/* 8-bit activation super-block for K-quant dots (float scale); bsums[j] is
 * the sum of qs[16j..16j+15]. */
typedef struct {
    float d;
    int8_t qs[QK_K];
    int16_t bsums[QK_K / 16];
} block_q8_K;

_Static_assert(sizeof(block_q4_0) == 18, "block_q4_0 size");
_Static_assert(sizeof(block_q4_1) == 20, "block_q4_1 size");
_Static_assert(sizeof(block_q5_0) == 22, "block_q5_0 size");
_Static_assert(sizeof(block_q5_1) == 24, "block_q5_1 size");
_Static_assert(sizeof(block_q8_0) == 34, "block_q8_0 size");
_Static_assert(sizeof(block_q8_1) == 36, "block_q8_1 size");
_Static_assert(sizeof(block_q2_K) == 84, "block_q2_K size");
_Static_assert(sizeof(block_q3_K) == 110, "block_q3_K size");
_Static_assert(sizeof(block_iq4_nl) == 18, "block_iq4_nl size");
_Static_assert(sizeof(block_iq4_xs) == 136, "block_iq4_xs size");
_Static_assert(sizeof(block_q4_K) == 144, "block_q4_K size");
_Static_assert(sizeof(block_q5_K) == 176, "block_q5_K size");
_Static_assert(sizeof(block_q6_K) == 210, "block_q6_K size");
_Static_assert(sizeof(block_q8_K) == 292, "block_q8_K size");

/* Dequantize a row of n elements of some type into floats. */
typedef void (*to_float_fn)(const void *src, float *dst, int64_t n);
/* Quantize a row of n floats into some type (activation types and the simple
 * 32-element weight formats). */
typedef void (*from_float_fn)(const float *src, void *dst, int64_t n);
/* Dot product of a weight row w (type T) and an activation row a (type
 * vec_dot_type(T)), both of n elements. */
typedef float (*vec_dot_fn)(int64_t n, const void *w, const void *a);

/* ---- dequantization (to_float) ---- */
void dequantize_row_f32_ref(const void *src, float *dst, int64_t n);
void dequantize_row_f16_ref(const void *src, float *dst, int64_t n);
void dequantize_row_bf16_ref(const void *src, float *dst, int64_t n);
void dequantize_row_q4_0_ref(const void *src, float *dst, int64_t n);
void dequantize_row_q4_1_ref(const void *src, float *dst, int64_t n);
void dequantize_row_q5_0_ref(const void *src, float *dst, int64_t n);
void dequantize_row_q5_1_ref(const void *src, float *dst, int64_t n);
void dequantize_row_q8_0_ref(const void *src, float *dst, int64_t n);
void dequantize_row_q8_1_ref(const void *src, float *dst, int64_t n);
void dequantize_row_q2_K_ref(const void *src, float *dst, int64_t n);
void dequantize_row_q3_K_ref(const void *src, float *dst, int64_t n);
void dequantize_row_iq4_nl_ref(const void *src, float *dst, int64_t n);
void dequantize_row_iq4_xs_ref(const void *src, float *dst, int64_t n);
void dequantize_row_q4_K_ref(const void *src, float *dst, int64_t n);
void dequantize_row_q5_K_ref(const void *src, float *dst, int64_t n);
void dequantize_row_q6_K_ref(const void *src, float *dst, int64_t n);
void dequantize_row_q8_K_ref(const void *src, float *dst, int64_t n);

/* ---- quantization (from_float) ----
 * q4_0..q8_1 are bit-exact with ggml's quantize_row_*_ref (q = roundf(x/d),
 * ties away from zero, with 1/d = 1/(amax/127)); q8_K rounds half to even as
 * ggml's nearest_int does.  Note that llama.cpp quantizes activations with
 * its SIMD quantizers, which differ slightly: the AVX2 quantize_row_q8_0 uses
 * 1/d = 127/amax and rounds half to even, so an activation can land one unit
 * away from this reference now and then (error ~d/2 on that element). */
void quantize_row_f32_ref(const float *src, void *dst, int64_t n);
void quantize_row_f16_ref(const float *src, void *dst, int64_t n);
void quantize_row_bf16_ref(const float *src, void *dst, int64_t n);
void quantize_row_q4_0_ref(const float *src, void *dst, int64_t n);
void quantize_row_q4_1_ref(const float *src, void *dst, int64_t n);
void quantize_row_q5_0_ref(const float *src, void *dst, int64_t n);
void quantize_row_q5_1_ref(const float *src, void *dst, int64_t n);
void quantize_row_q8_0_ref(const float *src, void *dst, int64_t n);
void quantize_row_q8_1_ref(const float *src, void *dst, int64_t n);
void quantize_row_q8_K_ref(const float *src, void *dst, int64_t n);

/* ---- dot products (vec_dot): weight type x vec_dot_type ---- */
float vec_dot_f32_f32_ref(int64_t n, const void *w, const void *a);
float vec_dot_f16_f16_ref(int64_t n, const void *w, const void *a);
float vec_dot_bf16_bf16_ref(int64_t n, const void *w, const void *a);
float vec_dot_q4_0_q8_0_ref(int64_t n, const void *w, const void *a);
float vec_dot_q4_1_q8_1_ref(int64_t n, const void *w, const void *a);
float vec_dot_q5_0_q8_0_ref(int64_t n, const void *w, const void *a);
float vec_dot_q5_1_q8_1_ref(int64_t n, const void *w, const void *a);
float vec_dot_q8_0_q8_0_ref(int64_t n, const void *w, const void *a);
float vec_dot_iq4_nl_q8_0_ref(int64_t n, const void *w, const void *a);
float vec_dot_q2_K_q8_K_ref(int64_t n, const void *w, const void *a);
float vec_dot_q3_K_q8_K_ref(int64_t n, const void *w, const void *a);
float vec_dot_iq4_xs_q8_K_ref(int64_t n, const void *w, const void *a);
float vec_dot_q4_K_q8_K_ref(int64_t n, const void *w, const void *a);
float vec_dot_q5_K_q8_K_ref(int64_t n, const void *w, const void *a);
float vec_dot_q6_K_q8_K_ref(int64_t n, const void *w, const void *a);

/* fp16 -> fp32 without branches, so that loops over halves vectorize.  Same
 * value as fp16_to_fp32 (types.h) for every non-NaN input (NaNs stay NaN;
 * tested exhaustively).  Normal halves: shift exponent and mantissa into
 * float position, rebias the exponent by adding 224 and scaling by 2^-112.
 * Subnormals (exponent 0): put the mantissa under the exponent of 0.5 and
 * subtract 0.5, leaving mant * 2^-24 exactly. */
static inline float half_to_float(uint16_t h)
{
    const uint32_t w = (uint32_t)h << 16;
    const uint32_t sign = w & 0x80000000u;
    const uint32_t two_w = w + w; /* exponent and mantissa, sign shifted out */
    const uint32_t nbits = (two_w >> 4) + (0xE0u << 23);
    const uint32_t sbits = (two_w >> 17) | (126u << 23);
    float normal, sub;
    memcpy(&normal, &nbits, 4);
    memcpy(&sub, &sbits, 4);
    normal *= 0x1p-112f;
    sub -= 0.5f;
    uint32_t nr, sr;
    memcpy(&nr, &normal, 4);
    memcpy(&sr, &sub, 4);
    const uint32_t r = sign | (two_w < (1u << 27) ? sr : nr);
    float f;
    memcpy(&f, &r, 4);
    return f;
}

/* The 6-bit scale and minimum of sub-block j (0..7) of a Q4_K/Q5_K block. */
static inline void k_scale_min(int j, const uint8_t *scales, uint8_t *sc, uint8_t *m)
{
    if (j < 4) {
        *sc = scales[j] & 63;
        *m = scales[j + 4] & 63;
    } else {
        *sc = (uint8_t)((scales[j + 4] & 0xF) | ((scales[j - 4] >> 6) << 4));
        *m = (uint8_t)((scales[j + 4] >> 4) | ((scales[j] >> 6) << 4));
    }
}

/* ggml's non-linear 4-bit codebook of IQ4_NL and IQ4_XS. */
static const int8_t kvalues_iq4nl[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                         1,    13,   25,  38,  53,  69,  89,  113};

/* The sixteen 6-bit scales of a Q3_K block, minus 32: scale j's low four
 * bits are the low (j < 8) or high nibble of scales[j % 8], its top two
 * bits are bits 2(j/4), 2(j/4)+1 of scales[8 + j % 4].  Four scales at a
 * time in the bytes of 32-bit words (byte k of word i is scale 4i + k). */
static inline void q3_K_scales(const uint8_t scales[12], int16_t sc[16])
{
    uint32_t a[3];
    for (int i = 0; i < 3; i++)
        a[i] = (uint32_t)scales[4 * i] | (uint32_t)scales[4 * i + 1] << 8 | (uint32_t)scales[4 * i + 2] << 16 |
               (uint32_t)scales[4 * i + 3] << 24;
    const uint32_t m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
    const uint32_t w[4] = {
        (a[0] & m4) | (a[2] & m2) << 4,
        (a[1] & m4) | ((a[2] >> 2) & m2) << 4,
        ((a[0] >> 4) & m4) | ((a[2] >> 4) & m2) << 4,
        ((a[1] >> 4) & m4) | ((a[2] >> 6) & m2) << 4,
    };
    for (int j = 0; j < 16; j++)
        sc[j] = (int16_t)((int)((w[j / 4] >> (8 * (j % 4))) & 0xFF) - 32);
}

/* The 6-bit scale of sub-block j (0..7) of an IQ4_XS block, minus 32: the
 * low four bits are nibble j % 2 of scales_l[j / 2], the top two bits 2j,
 * 2j+1 of scales_h. */
static inline int iq4_xs_scale(const block_iq4_xs *x, int j)
{
    const int lo = (x->scales_l[j / 2] >> (4 * (j % 2))) & 0xF;
    const int hi = (x->scales_h >> (2 * j)) & 3;
    return (lo | hi << 4) - 32;
}

#endif
