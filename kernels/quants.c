/*
 * quants.c - scalar reference kernels for the ggml block formats (quants.h):
 * dequantize, quantize and dot product, one group per type.
 *
 * The math follows ggml: ggml-quants.c for (de)quantization (our dequantizers
 * and the Q4_0..Q8_1 quantizers give the same bits, checked against gguf-py's
 * copy of them), and the *_generic dot products of ggml-cpu/quants.c for the
 * dots.  Integer partial sums are exact in any order, so the loops are shaped
 * for the compiler's vectorizer rather than copied; the float updates per
 * block are ggml's, except that the K-quant dots add one float per block
 * where ggml-generic keeps 8 float lanes (see the K-quant section).
 * Nothing here allocates or fails; n is assumed to be a multiple of the block
 * size (matmul.c checks it).
 */
#include "quants.h"

#include <math.h>
#include <string.h>

/* The references round after every operation (as ggml's C code compiled
 * without contraction): no fused multiply-adds.  GCC's -std=c11 already
 * implies -ffp-contract=off; clang needs the pragma. */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

static inline float h2f(ggml_half h) { return fp16_to_fp32(h); }
static inline ggml_half f2h(float f) { return fp32_to_fp16(f); }

/* Round to nearest, ties to even, for |x| < 2^22: adding 1.5*2^23 leaves the
 * integer in the low mantissa bits (what ggml's nearest_int does). */
static inline int round_half_even(float x)
{
    float v = x + 12582912.f;
    int32_t i;
    memcpy(&i, &v, sizeof(i));
    return (i & 0x007fffff) - 0x00400000;
}

static inline void store_u32le(uint8_t *p, uint32_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
    p[2] = (uint8_t)(v >> 16);
    p[3] = (uint8_t)(v >> 24);
}

static inline uint32_t load_u32le(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Q5_0/Q5_1: the fifth bit of element j is bit j of the little-endian qh;
 * (qh & bit_of[j]) ? 16 : 0 extracts it without a per-element variable
 * shift, which lets the compiler vectorize the loops. */
static const uint32_t bit_of[32] = {
    1u << 0,  1u << 1,  1u << 2,  1u << 3,  1u << 4,  1u << 5,  1u << 6,  1u << 7,
    1u << 8,  1u << 9,  1u << 10, 1u << 11, 1u << 12, 1u << 13, 1u << 14, 1u << 15,
    1u << 16, 1u << 17, 1u << 18, 1u << 19, 1u << 20, 1u << 21, 1u << 22, 1u << 23,
    1u << 24, 1u << 25, 1u << 26, 1u << 27, 1u << 28, 1u << 29, 1u << 30, 1u << 31,
};
#define Q5_HI(qh, j) (((qh) & bit_of[j]) ? 16 : 0)

/* ========================= F32 / F16 / BF16 ========================= */

void dequantize_row_f32_ref(const void *src, float *dst, int64_t n)
{
    memmove(dst, src, (size_t)n * sizeof(float));
}

void dequantize_row_f16_ref(const void *src, float *dst, int64_t n)
{
    const uint16_t *x = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = half_to_float(x[i]);
}

void dequantize_row_bf16_ref(const void *src, float *dst, int64_t n)
{
    const uint16_t *x = src;
    for (int64_t i = 0; i < n; i++)
        dst[i] = bf16_to_fp32(x[i]);
}

void quantize_row_f32_ref(const float *src, void *dst, int64_t n)
{
    memmove(dst, src, (size_t)n * sizeof(float));
}

void quantize_row_f16_ref(const float *src, void *dst, int64_t n)
{
    uint16_t *y = dst;
    for (int64_t i = 0; i < n; i++)
        y[i] = fp32_to_fp16(src[i]);
}

void quantize_row_bf16_ref(const float *src, void *dst, int64_t n)
{
    uint16_t *y = dst;
    for (int64_t i = 0; i < n; i++)
        y[i] = fp32_to_bf16(src[i]);
}

/* The float dots accumulate each float product in double, as ggml's generic
 * ggml_vec_dot_f32/f16/bf16 do. */
float vec_dot_f32_f32_ref(int64_t n, const void *w, const void *a)
{
    const float *x = w, *y = a;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(x[i] * y[i]);
    return (float)sum;
}

float vec_dot_f16_f16_ref(int64_t n, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(half_to_float(x[i]) * half_to_float(y[i]));
    return (float)sum;
}

float vec_dot_bf16_bf16_ref(int64_t n, const void *w, const void *a)
{
    const uint16_t *x = w, *y = a;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(bf16_to_fp32(x[i]) * bf16_to_fp32(y[i]));
    return (float)sum;
}

/* ============================== Q4_0 ============================== */

void dequantize_row_q4_0_ref(const void *src, float *dst, int64_t n)
{
    const block_q4_0 *x = src;
    for (int64_t b = 0; b < n / QK4_0; b++, dst += QK4_0) {
        const float d = h2f(x[b].d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            dst[j] = (float)((x[b].qs[j] & 0x0F) - 8) * d;
            dst[j + QK4_0 / 2] = (float)((x[b].qs[j] >> 4) - 8) * d;
        }
    }
}

/* The value of largest magnitude (keeping its sign; the first one on ties). */
static float signed_absmax(const float *x, int n)
{
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < n; j++) {
        if (amax < fabsf(x[j])) {
            amax = fabsf(x[j]);
            max = x[j];
        }
    }
    return max;
}

void quantize_row_q4_0_ref(const float *src, void *dst, int64_t n)
{
    block_q4_0 *y = dst;
    for (int64_t b = 0; b < n / QK4_0; b++, src += QK4_0) {
        /* the extreme value maps to -8, the one level without a mirror */
        const float d = signed_absmax(src, QK4_0) / -8;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = f2h(d);
        for (int j = 0; j < QK4_0 / 2; j++) {
            int q0 = (int8_t)(src[j] * id + 8.5f);
            int q1 = (int8_t)(src[j + QK4_0 / 2] * id + 8.5f);
            q0 = q0 > 15 ? 15 : q0;
            q1 = q1 > 15 ? 15 : q1;
            y[b].qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

float vec_dot_q4_0_q8_0_ref(int64_t n, const void *w, const void *a)
{
    const block_q4_0 *x = w;
    const block_q8_0 *y = a;
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / QK8_0; b++) {
        int sumi = 0;
        for (int j = 0; j < QK8_0 / 2; j++) {
            sumi += ((x[b].qs[j] & 0x0F) - 8) * y[b].qs[j];
            sumi += ((x[b].qs[j] >> 4) - 8) * y[b].qs[j + QK8_0 / 2];
        }
        sumf += (float)sumi * h2f(x[b].d) * h2f(y[b].d);
    }
    return sumf;
}

/* ============================== Q4_1 ============================== */

void dequantize_row_q4_1_ref(const void *src, float *dst, int64_t n)
{
    const block_q4_1 *x = src;
    for (int64_t b = 0; b < n / QK4_1; b++, dst += QK4_1) {
        const float d = h2f(x[b].d), m = h2f(x[b].m);
        for (int j = 0; j < QK4_1 / 2; j++) {
            dst[j] = (float)(x[b].qs[j] & 0x0F) * d + m;
            dst[j + QK4_1 / 2] = (float)(x[b].qs[j] >> 4) * d + m;
        }
    }
}

static void minmax(const float *x, int n, float *min, float *max)
{
    float lo = INFINITY, hi = -INFINITY;
    for (int j = 0; j < n; j++) {
        if (x[j] < lo)
            lo = x[j];
        if (x[j] > hi)
            hi = x[j];
    }
    *min = lo;
    *max = hi;
}

void quantize_row_q4_1_ref(const float *src, void *dst, int64_t n)
{
    block_q4_1 *y = dst;
    for (int64_t b = 0; b < n / QK4_1; b++, src += QK4_1) {
        float min, max;
        minmax(src, QK4_1, &min, &max);
        const float d = (max - min) / 15;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = f2h(d);
        y[b].m = f2h(min);
        for (int j = 0; j < QK4_1 / 2; j++) {
            int q0 = (int8_t)((src[j] - min) * id + 0.5f);
            int q1 = (int8_t)((src[j + QK4_1 / 2] - min) * id + 0.5f);
            q0 = q0 > 15 ? 15 : q0;
            q1 = q1 > 15 ? 15 : q1;
            y[b].qs[j] = (uint8_t)(q0 | q1 << 4);
        }
    }
}

/* sum_i (d_x q_i + m_x) d_y p_i = d_x d_y sum(q p) + m_x (d_y sum p) = ... + m_x s_y */
float vec_dot_q4_1_q8_1_ref(int64_t n, const void *w, const void *a)
{
    const block_q4_1 *x = w;
    const block_q8_1 *y = a;
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / QK8_1; b++) {
        int sumi = 0;
        for (int j = 0; j < QK8_1 / 2; j++) {
            sumi += (x[b].qs[j] & 0x0F) * y[b].qs[j];
            sumi += (x[b].qs[j] >> 4) * y[b].qs[j + QK8_1 / 2];
        }
        sumf += (h2f(x[b].d) * h2f(y[b].d)) * (float)sumi + h2f(x[b].m) * h2f(y[b].s);
    }
    return sumf;
}

/* ============================== Q5_0 ============================== */

void dequantize_row_q5_0_ref(const void *src, float *dst, int64_t n)
{
    const block_q5_0 *x = src;
    for (int64_t b = 0; b < n / QK5_0; b++, dst += QK5_0) {
        const float d = h2f(x[b].d);
        const uint32_t qh = load_u32le(x[b].qh);
        for (int j = 0; j < QK5_0 / 2; j++) {
            dst[j] = (float)(((x[b].qs[j] & 0x0F) | Q5_HI(qh, j)) - 16) * d;
            dst[j + QK5_0 / 2] = (float)(((x[b].qs[j] >> 4) | Q5_HI(qh, j + 16)) - 16) * d;
        }
    }
}

void quantize_row_q5_0_ref(const float *src, void *dst, int64_t n)
{
    block_q5_0 *y = dst;
    for (int64_t b = 0; b < n / QK5_0; b++, src += QK5_0) {
        const float d = signed_absmax(src, QK5_0) / -16;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = f2h(d);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_0 / 2; j++) {
            int q0 = (int8_t)(src[j] * id + 16.5f);
            int q1 = (int8_t)(src[j + QK5_0 / 2] * id + 16.5f);
            q0 = q0 > 31 ? 31 : q0;
            q1 = q1 > 31 ? 31 : q1;
            y[b].qs[j] = (uint8_t)((q0 & 0x0F) | (q1 & 0x0F) << 4);
            qh |= (uint32_t)((q0 >> 4) & 1) << j;
            qh |= (uint32_t)((q1 >> 4) & 1) << (j + QK5_0 / 2);
        }
        store_u32le(y[b].qh, qh);
    }
}

float vec_dot_q5_0_q8_0_ref(int64_t n, const void *w, const void *a)
{
    const block_q5_0 *x = w;
    const block_q8_0 *y = a;
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / QK8_0; b++) {
        const uint32_t qh = load_u32le(x[b].qh);
        int sumi = 0;
        for (int j = 0; j < QK8_0 / 2; j++) {
            sumi += (((x[b].qs[j] & 0x0F) | Q5_HI(qh, j)) - 16) * y[b].qs[j];
            sumi += (((x[b].qs[j] >> 4) | Q5_HI(qh, j + 16)) - 16) * y[b].qs[j + QK8_0 / 2];
        }
        sumf += (h2f(x[b].d) * h2f(y[b].d)) * (float)sumi;
    }
    return sumf;
}

/* ============================== Q5_1 ============================== */

void dequantize_row_q5_1_ref(const void *src, float *dst, int64_t n)
{
    const block_q5_1 *x = src;
    for (int64_t b = 0; b < n / QK5_1; b++, dst += QK5_1) {
        const float d = h2f(x[b].d), m = h2f(x[b].m);
        const uint32_t qh = load_u32le(x[b].qh);
        for (int j = 0; j < QK5_1 / 2; j++) {
            dst[j] = (float)((x[b].qs[j] & 0x0F) | Q5_HI(qh, j)) * d + m;
            dst[j + QK5_1 / 2] = (float)((x[b].qs[j] >> 4) | Q5_HI(qh, j + 16)) * d + m;
        }
    }
}

void quantize_row_q5_1_ref(const float *src, void *dst, int64_t n)
{
    block_q5_1 *y = dst;
    for (int64_t b = 0; b < n / QK5_1; b++, src += QK5_1) {
        float min, max;
        minmax(src, QK5_1, &min, &max);
        const float d = (max - min) / 31;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = f2h(d);
        y[b].m = f2h(min);
        uint32_t qh = 0;
        for (int j = 0; j < QK5_1 / 2; j++) {
            const int q0 = (uint8_t)((src[j] - min) * id + 0.5f);
            const int q1 = (uint8_t)((src[j + QK5_1 / 2] - min) * id + 0.5f);
            y[b].qs[j] = (uint8_t)((q0 & 0x0F) | (q1 & 0x0F) << 4);
            qh |= (uint32_t)((q0 >> 4) & 1) << j;
            qh |= (uint32_t)((q1 >> 4) & 1) << (j + QK5_1 / 2);
        }
        store_u32le(y[b].qh, qh);
    }
}

float vec_dot_q5_1_q8_1_ref(int64_t n, const void *w, const void *a)
{
    const block_q5_1 *x = w;
    const block_q8_1 *y = a;
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / QK8_1; b++) {
        const uint32_t qh = load_u32le(x[b].qh);
        int sumi = 0;
        for (int j = 0; j < QK8_1 / 2; j++) {
            sumi += ((x[b].qs[j] & 0x0F) | Q5_HI(qh, j)) * y[b].qs[j];
            sumi += ((x[b].qs[j] >> 4) | Q5_HI(qh, j + 16)) * y[b].qs[j + QK8_1 / 2];
        }
        sumf += (h2f(x[b].d) * h2f(y[b].d)) * (float)sumi + h2f(x[b].m) * h2f(y[b].s);
    }
    return sumf;
}

/* ========================== Q8_0 / Q8_1 ========================== */

void dequantize_row_q8_0_ref(const void *src, float *dst, int64_t n)
{
    const block_q8_0 *x = src;
    for (int64_t b = 0; b < n / QK8_0; b++, dst += QK8_0) {
        const float d = h2f(x[b].d);
        for (int j = 0; j < QK8_0; j++)
            dst[j] = (float)x[b].qs[j] * d;
    }
}

/* d = amax/127, q = round(x/d) half away from zero (C roundf, as ggml). */
void quantize_row_q8_0_ref(const float *src, void *dst, int64_t n)
{
    block_q8_0 *y = dst;
    for (int64_t b = 0; b < n / QK8_0; b++, src += QK8_0) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_0; j++)
            amax = fmaxf(amax, fabsf(src[j]));
        const float d = amax / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = f2h(d);
        for (int j = 0; j < QK8_0; j++)
            y[b].qs[j] = (int8_t)roundf(src[j] * id);
    }
}

float vec_dot_q8_0_q8_0_ref(int64_t n, const void *w, const void *a)
{
    const block_q8_0 *x = w;
    const block_q8_0 *y = a;
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / QK8_0; b++) {
        int sumi = 0;
        for (int j = 0; j < QK8_0; j++)
            sumi += x[b].qs[j] * y[b].qs[j];
        sumf += (float)sumi * (h2f(x[b].d) * h2f(y[b].d));
    }
    return sumf;
}

void dequantize_row_q8_1_ref(const void *src, float *dst, int64_t n)
{
    const block_q8_1 *x = src;
    for (int64_t b = 0; b < n / QK8_1; b++, dst += QK8_1) {
        const float d = h2f(x[b].d);
        for (int j = 0; j < QK8_1; j++)
            dst[j] = (float)x[b].qs[j] * d;
    }
}

void quantize_row_q8_1_ref(const float *src, void *dst, int64_t n)
{
    block_q8_1 *y = dst;
    for (int64_t b = 0; b < n / QK8_1; b++, src += QK8_1) {
        float amax = 0.0f;
        for (int j = 0; j < QK8_1; j++)
            amax = fmaxf(amax, fabsf(src[j]));
        const float d = amax / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = f2h(d);
        int sum = 0;
        for (int j = 0; j < QK8_1; j++) {
            y[b].qs[j] = (int8_t)roundf(src[j] * id);
            sum += y[b].qs[j];
        }
        y[b].s = f2h((float)sum * d);
    }
}

/* ============================== Q8_K ============================== */

void dequantize_row_q8_K_ref(const void *src, float *dst, int64_t n)
{
    const block_q8_K *x = src;
    for (int64_t b = 0; b < n / QK_K; b++, dst += QK_K)
        for (int j = 0; j < QK_K; j++)
            dst[j] = x[b].d * (float)x[b].qs[j];
}

/* As ggml: the value of largest magnitude maps to -127 (scale -max/127),
 * rounding half to even; a zero block gets d = 0. */
void quantize_row_q8_K_ref(const float *src, void *dst, int64_t n)
{
    block_q8_K *y = dst;
    for (int64_t b = 0; b < n / QK_K; b++, src += QK_K) {
        const float max = signed_absmax(src, QK_K);
        if (max == 0.0f) {
            memset(&y[b], 0, sizeof(y[b]));
            continue;
        }
        const float iscale = -127.f / max;
        for (int j = 0; j < QK_K; j++) {
            const int v = round_half_even(iscale * src[j]);
            y[b].qs[j] = (int8_t)(v > 127 ? 127 : v);
        }
        for (int g = 0; g < QK_K / 16; g++) {
            int sum = 0;
            for (int j = 0; j < 16; j++)
                sum += y[b].qs[g * 16 + j];
            y[b].bsums[g] = (int16_t)sum;
        }
        y[b].d = 1 / iscale;
    }
}

/* ========================= Q4_K / Q5_K ========================= */

/* Unpack the eight 6-bit scales and mins of a Q4_K/Q5_K block. */
static void k_unpack_scales(const uint8_t *scales, uint8_t sc[8], uint8_t m[8])
{
    for (int j = 0; j < 8; j++)
        k_scale_min(j, scales, &sc[j], &m[j]);
}

void dequantize_row_q4_K_ref(const void *src, float *dst, int64_t n)
{
    const block_q4_K *x = src;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = h2f(x[b].d), dmin = h2f(x[b].dmin);
        uint8_t sc[8], m[8];
        k_unpack_scales(x[b].scales, sc, m);
        const uint8_t *q = x[b].qs;
        for (int j = 0; j < 8; j += 2, q += 32) {
            const float d0 = d * sc[j], m0 = dmin * m[j];
            const float d1 = d * sc[j + 1], m1 = dmin * m[j + 1];
            for (int l = 0; l < 32; l++)
                *dst++ = d0 * (float)(q[l] & 0xF) - m0;
            for (int l = 0; l < 32; l++)
                *dst++ = d1 * (float)(q[l] >> 4) - m1;
        }
    }
}

void dequantize_row_q5_K_ref(const void *src, float *dst, int64_t n)
{
    const block_q5_K *x = src;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = h2f(x[b].d), dmin = h2f(x[b].dmin);
        uint8_t sc[8], m[8];
        k_unpack_scales(x[b].scales, sc, m);
        const uint8_t *ql = x[b].qs, *qh = x[b].qh;
        for (int j = 0; j < 8; j += 2, ql += 32) {
            const float d0 = d * sc[j], m0 = dmin * m[j];
            const float d1 = d * sc[j + 1], m1 = dmin * m[j + 1];
            for (int l = 0; l < 32; l++)
                *dst++ = d0 * (float)((ql[l] & 0xF) + (((qh[l] >> j) & 1) << 4)) - m0;
            for (int l = 0; l < 32; l++)
                *dst++ = d1 * (float)((ql[l] >> 4) + (((qh[l] >> (j + 1)) & 1) << 4)) - m1;
        }
    }
}

/*
 * K-quant dots.  Per super-block, the integer sums are exact:
 *     isum = sum_j sc[j] * sum_{i in sub-block j} q_i p_i
 *     summ = sum_j m[j] * sum_{i in sub-block j} p_i      (from bsums)
 * and the block adds d_x d_y isum - dmin_x d_y summ to a float total.
 * (ggml's generic code spreads isum over 8 float lanes instead; the results
 * differ by float rounding only, ~1e-7 relative, far below the activation
 * quantization error, and its SIMD paths use other orders again.)
 */
static inline int dot32_u8(const uint8_t *q, const int8_t *p)
{
    int s = 0;
    for (int i = 0; i < 32; i++)
        s += q[i] * p[i];
    return s;
}

static inline int q4k_block_isum(const block_q4_K *x, const int8_t *p, const uint8_t sc[8])
{
    int isum = 0;
    for (int c = 0; c < 4; c++) { /* 64 elements: sub-blocks 2c (low nibbles), 2c+1 (high) */
        const uint8_t *qs = x->qs + 32 * c;
        int lo = 0, hi = 0;
        for (int l = 0; l < 32; l++) {
            lo += (qs[l] & 0xF) * p[64 * c + l];
            hi += (qs[l] >> 4) * p[64 * c + 32 + l];
        }
        isum += sc[2 * c] * lo + sc[2 * c + 1] * hi;
    }
    return isum;
}

static inline int k_block_summ(const block_q8_K *y, const uint8_t m[8])
{
    int summ = 0;
    for (int g = 0; g < QK_K / 16; g++)
        summ += y->bsums[g] * m[g / 2];
    return summ;
}

float vec_dot_q4_K_q8_K_ref(int64_t n, const void *w, const void *a)
{
    const block_q4_K *x = w;
    const block_q8_K *y = a;
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / QK_K; b++) {
        uint8_t sc[8], m[8];
        k_unpack_scales(x[b].scales, sc, m);
        const int isum = q4k_block_isum(&x[b], y[b].qs, sc);
        sumf += (h2f(x[b].d) * y[b].d) * (float)isum;
        sumf -= (h2f(x[b].dmin) * y[b].d) * (float)k_block_summ(&y[b], m);
    }
    return sumf;
}

float vec_dot_q5_K_q8_K_ref(int64_t n, const void *w, const void *a)
{
    const block_q5_K *x = w;
    const block_q8_K *y = a;
    float sumf = 0.0f;
    uint8_t q[64];
    for (int64_t b = 0; b < n / QK_K; b++) {
        uint8_t sc[8], m[8];
        k_unpack_scales(x[b].scales, sc, m);
        const uint8_t *qh = x[b].qh;
        int isum = 0;
        for (int c = 0; c < 4; c++) { /* sub-blocks 2c, 2c+1: fifth bits 2c, 2c+1 of qh[l] */
            const uint8_t *qs = x[b].qs + 32 * c;
            for (int l = 0; l < 32; l++) {
                q[l] = (uint8_t)((qs[l] & 0xF) | (((qh[l] >> (2 * c)) & 1) << 4));
                q[32 + l] = (uint8_t)((qs[l] >> 4) | (((qh[l] >> (2 * c + 1)) & 1) << 4));
            }
            isum += sc[2 * c] * dot32_u8(q, y[b].qs + 64 * c);
            isum += sc[2 * c + 1] * dot32_u8(q + 32, y[b].qs + 64 * c + 32);
        }
        sumf += (h2f(x[b].d) * y[b].d) * (float)isum;
        sumf -= (h2f(x[b].dmin) * y[b].d) * (float)k_block_summ(&y[b], m);
    }
    return sumf;
}

/* ============================== Q6_K ============================== */

/* The 256 signed 6-bit quants (-32..31) of a Q6_K block, in element order. */
static void q6_K_unpack(const block_q6_K *x, int8_t q[QK_K])
{
    const uint8_t *ql = x->ql, *qh = x->qh;
    for (int h = 0; h < 2; h++, ql += 64, qh += 32, q += 128) { /* halves of 128 */
        for (int l = 0; l < 32; l++) {
            q[l] = (int8_t)(((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32);
            q[l + 32] = (int8_t)(((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32);
            q[l + 64] = (int8_t)(((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32);
            q[l + 96] = (int8_t)(((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32);
        }
    }
}

void dequantize_row_q6_K_ref(const void *src, float *dst, int64_t n)
{
    const block_q6_K *x = src;
    int8_t q[QK_K];
    for (int64_t b = 0; b < n / QK_K; b++, dst += QK_K) {
        const float d = h2f(x[b].d);
        q6_K_unpack(&x[b], q);
        for (int i = 0; i < QK_K; i++)
            dst[i] = d * (float)x[b].scales[i / 16] * (float)q[i];
    }
}

/* Element 128h + 32k + l of a block (h < 2, k < 4, l < 32) takes its low 4
 * bits from ql[64h + 32(k&1) + l] (the low nibble for k < 2, the high one
 * for k >= 2), its top 2 bits from bits 2k, 2k+1 of qh[32h + l], and its
 * scale from sub-block 8h + 2k + l/16. */
float vec_dot_q6_K_q8_K_ref(int64_t n, const void *w, const void *a)
{
    const block_q6_K *x = w;
    const block_q8_K *y = a;
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / QK_K; b++) {
        int isum = 0;
        for (int h = 0; h < 2; h++) {
            const uint8_t *ql = x[b].ql + 64 * h, *qh = x[b].qh + 32 * h;
            const int8_t *p = y[b].qs + 128 * h, *sc = x[b].scales + 8 * h;
            for (int lh = 0; lh < 2; lh++) {
                int s0 = 0, s1 = 0, s2 = 0, s3 = 0;
                for (int l = 16 * lh; l < 16 * lh + 16; l++) {
                    s0 += (((ql[l] & 0xF) | ((qh[l] & 3) << 4)) - 32) * p[l];
                    s1 += (((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32) * p[l + 32];
                    s2 += (((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32) * p[l + 64];
                    s3 += (((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32) * p[l + 96];
                }
                isum += sc[lh] * s0 + sc[2 + lh] * s1 + sc[4 + lh] * s2 + sc[6 + lh] * s3;
            }
        }
        sumf += (h2f(x[b].d) * y[b].d) * (float)isum;
    }
    return sumf;
}

/* ============================ Q2_K / Q3_K ============================ */

/* The 2-bit field of element e of a Q2_K/Q3_K block (see quants.h). */
static inline int crumb(const uint8_t *qs, int e)
{
    return (qs[32 * (e / 128) + e % 32] >> (2 * ((e / 32) % 4))) & 3;
}

/* Q3_K's quant of element e: the 2-bit field, minus 4 where the hmask bit
 * is clear (-4..3). */
static inline int q3_K_quant(const block_q3_K *x, int e)
{
    return crumb(x->qs, e) - ((x->hmask[e % 32] >> (e / 32)) & 1 ? 0 : 4);
}

void dequantize_row_q2_K_ref(const void *src, float *dst, int64_t n)
{
    const block_q2_K *x = src;
    for (int64_t b = 0; b < n / QK_K; b++, dst += QK_K) {
        const float d = h2f(x[b].d), dmin = h2f(x[b].dmin);
        for (int j = 0; j < QK_K / 16; j++) {
            const float dl = d * (float)(x[b].scales[j] & 0xF), ml = dmin * (float)(x[b].scales[j] >> 4);
            for (int l = 0; l < 16; l++)
                dst[16 * j + l] = dl * (float)crumb(x[b].qs, 16 * j + l) - ml;
        }
    }
}

void dequantize_row_q3_K_ref(const void *src, float *dst, int64_t n)
{
    const block_q3_K *x = src;
    for (int64_t b = 0; b < n / QK_K; b++, dst += QK_K) {
        const float d = h2f(x[b].d);
        int16_t sc[16];
        q3_K_scales(x[b].scales, sc);
        for (int j = 0; j < QK_K / 16; j++) {
            const float dl = d * (float)sc[j];
            for (int l = 0; l < 16; l++)
                dst[16 * j + l] = dl * (float)q3_K_quant(&x[b], 16 * j + l);
        }
    }
}

/* Per super-block, exact integers as for the other K-quants:
 *   Q2_K  isum = sum_j (sc_j & 15) * sum_{i in j} q_i p_i,
 *         summ = sum_j (sc_j >> 4) * bsums_j   (sub-blocks of 16 = bsums)
 *         sumf += (d_x d_y) isum;  sumf -= (dmin_x d_y) summ
 *   Q3_K  isum = sum_j (s_j - 32) * sum_{i in j} q_i p_i;  sumf += (d_x d_y) isum
 * (ggml's generic Q2_K adds d_y d_x isum - d_y dmin_x summ as one term and
 * its Q3_K spreads isum over 8 float lanes: rounding differences only.) */
float vec_dot_q2_K_q8_K_ref(int64_t n, const void *w, const void *a)
{
    const block_q2_K *x = w;
    const block_q8_K *y = a;
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / QK_K; b++) {
        int isum = 0, summ = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++)
                s += crumb(x[b].qs, 16 * j + l) * y[b].qs[16 * j + l];
            isum += (x[b].scales[j] & 0xF) * s;
            summ += (x[b].scales[j] >> 4) * y[b].bsums[j];
        }
        sumf += (h2f(x[b].d) * y[b].d) * (float)isum;
        sumf -= (h2f(x[b].dmin) * y[b].d) * (float)summ;
    }
    return sumf;
}

float vec_dot_q3_K_q8_K_ref(int64_t n, const void *w, const void *a)
{
    const block_q3_K *x = w;
    const block_q8_K *y = a;
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / QK_K; b++) {
        int16_t sc[16];
        q3_K_scales(x[b].scales, sc);
        int isum = 0;
        for (int j = 0; j < QK_K / 16; j++) {
            int s = 0;
            for (int l = 0; l < 16; l++)
                s += q3_K_quant(&x[b], 16 * j + l) * y[b].qs[16 * j + l];
            isum += sc[j] * s;
        }
        sumf += (h2f(x[b].d) * y[b].d) * (float)isum;
    }
    return sumf;
}

/* ========================== IQ4_NL / IQ4_XS ========================== */

void dequantize_row_iq4_nl_ref(const void *src, float *dst, int64_t n)
{
    const block_iq4_nl *x = src;
    for (int64_t b = 0; b < n / QK4_NL; b++, dst += QK4_NL) {
        const float d = h2f(x[b].d);
        for (int j = 0; j < QK4_NL / 2; j++) {
            dst[j] = d * (float)kvalues_iq4nl[x[b].qs[j] & 0xF];
            dst[j + QK4_NL / 2] = d * (float)kvalues_iq4nl[x[b].qs[j] >> 4];
        }
    }
}

/* Sum over one 32-element group of codebook values (nibbles in qs[0..15] as
 * IQ4_NL) times activations. */
static inline int iq4_dot32(const uint8_t *qs, const int8_t *p)
{
    int s = 0;
    for (int j = 0; j < 16; j++)
        s += kvalues_iq4nl[qs[j] & 0xF] * p[j] + kvalues_iq4nl[qs[j] >> 4] * p[j + 16];
    return s;
}

/* As ggml: sumf += (d_x d_y) * sumi per block. */
float vec_dot_iq4_nl_q8_0_ref(int64_t n, const void *w, const void *a)
{
    const block_iq4_nl *x = w;
    const block_q8_0 *y = a;
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / QK4_NL; b++)
        sumf += (h2f(x[b].d) * h2f(y[b].d)) * (float)iq4_dot32(x[b].qs, y[b].qs);
    return sumf;
}

void dequantize_row_iq4_xs_ref(const void *src, float *dst, int64_t n)
{
    const block_iq4_xs *x = src;
    for (int64_t b = 0; b < n / QK_K; b++) {
        const float d = h2f(x[b].d);
        for (int j = 0; j < QK_K / 32; j++, dst += 32) {
            const float dl = d * (float)iq4_xs_scale(&x[b], j);
            const uint8_t *qs = x[b].qs + 16 * j;
            for (int l = 0; l < 16; l++) {
                dst[l] = dl * (float)kvalues_iq4nl[qs[l] & 0xF];
                dst[l + 16] = dl * (float)kvalues_iq4nl[qs[l] >> 4];
            }
        }
    }
}

/* isum = sum_j (s_j - 32) * (sub-block j's codebook dot), exact (|isum| <
 * 8 * 32 * 32 * 127 * 127 < 2^31); sumf += (d_x d_y) isum.  (ggml's generic
 * code adds one float term per sub-block instead.) */
float vec_dot_iq4_xs_q8_K_ref(int64_t n, const void *w, const void *a)
{
    const block_iq4_xs *x = w;
    const block_q8_K *y = a;
    float sumf = 0.0f;
    for (int64_t b = 0; b < n / QK_K; b++) {
        int isum = 0;
        for (int j = 0; j < QK_K / 32; j++)
            isum += iq4_xs_scale(&x[b], j) * iq4_dot32(x[b].qs + 16 * j, y[b].qs + 32 * j);
        sumf += (h2f(x[b].d) * y[b].d) * (float)isum;
    }
    return sumf;
}
