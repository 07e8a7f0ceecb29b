/*
 * attention_neon.c - causal attention over F16 / Q8_0 K/V blocks
 * (attention.h) for every aarch64 variant: kernels/attention_body.h with
 * 128-bit NEON vectors and sixteen accumulators (aarch64 has 32 vector
 * registers), sleef's Advanced SIMD expf.  Until this file the Pis ran the
 * scalar reference attention, ~15-20x slower per token (bench-kernels -T
 * attn on x86 for the same shapes).
 */
#include "neon.h"

#if defined(__aarch64__)

#include <arm_neon.h>
#include <math.h>
#include <sleef.h>
#include <string.h>

#include "../attention.h"
#include "../quants.h"

typedef float32x4_t atv;
typedef float64x2_t atd;
#define AT_W 4
#define AT_NACC 16
#define AT_FN(x) x##_neon

static inline float32x4_t at_loadf_tail(const float *p, int n)
{
    float tmp[4] = {0};
    memcpy(tmp, p, (size_t)n * 4);
    return vld1q_f32(tmp);
}

static inline float32x4_t at_loadh(const uint16_t *p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }

static inline float32x4_t at_loadh_tail(const uint16_t *p, int n)
{
    uint16_t tmp[4] = {0};
    memcpy(tmp, p, (size_t)n * 2);
    return at_loadh(tmp);
}

/* Four int8 values as floats (read as one 4-byte word: never past the row). */
static inline float32x4_t at_loadq8(const int8_t *qs)
{
    int32_t w;
    memcpy(&w, qs, 4);
    const int16x8_t h = vmovl_s8(vreinterpret_s8_s32(vdup_n_s32(w)));
    return vcvtq_f32_s32(vmovl_s16(vget_low_s16(h)));
}

static inline void at_storef_tail(float *p, float32x4_t v, int n)
{
    float tmp[4];
    vst1q_f32(tmp, v);
    memcpy(p, tmp, (size_t)n * 4);
}

static inline float32x4_t at_keep_first(float32x4_t x, int n)
{
    static const uint32_t lane[4] = {0, 1, 2, 3};
    const uint32x4_t keep = vcltq_u32(vld1q_u32(lane), vdupq_n_u32((uint32_t)n));
    return vreinterpretq_f32_u32(vandq_u32(vreinterpretq_u32_f32(x), keep));
}

static inline float64x2_t at_add_d(float64x2_t s, float32x4_t x)
{
    return vaddq_f64(vaddq_f64(s, vcvt_f64_f32(vget_low_f32(x))), vcvt_high_f64_f32(x));
}

/* sums[x] = sum of the lanes of v[x] for x < 16: pairwise adds, four
 * vectors at a time. */
static inline void at_reduce16(const float32x4_t *v, float *sums)
{
    for (int x = 0; x < 16; x += 4)
        vst1q_f32(sums + x, vpaddq_f32(vpaddq_f32(v[x], v[x + 1]), vpaddq_f32(v[x + 2], v[x + 3])));
}

static inline float at_h2f(uint16_t h)
{
    __fp16 f;
    memcpy(&f, &h, 2);
    return (float)f;
}

#define AT_LOADF(p) vld1q_f32(p)
#define AT_LOADF_TAIL(p, n) at_loadf_tail(p, n)
#define AT_LOADH(p) at_loadh(p)
#define AT_LOADH_TAIL(p, n) at_loadh_tail(p, n)
#define AT_LOADQ8(qs) at_loadq8(qs)
#define AT_STOREF(p, v) vst1q_f32(p, v)
#define AT_STOREF_TAIL(p, v, n) at_storef_tail(p, v, n)
#define AT_MUL(a, b) vmulq_f32(a, b)
#define AT_SUB(a, b) vsubq_f32(a, b)
#define AT_FMA(a, b, c) vfmaq_f32(c, a, b)
#define AT_SET1(x) vdupq_n_f32(x)
#define AT_ZERO() vdupq_n_f32(0.0f)
#define AT_REDUCE(v, sums) at_reduce16(v, sums)
#define AT_H2F(h) at_h2f(h)
#define AT_EXP(x) Sleef_expf4_u10advsimd(x)
#define AT_MAX(a, b) vmaxq_f32(a, b)
#define AT_HMAX(v) vmaxvq_f32(v)
#define AT_KEEP_FIRST(x, n) at_keep_first(x, n)
#define AT_ZERO_D() vdupq_n_f64(0.0)
#define AT_ADD_D(s, x) at_add_d(s, x)
#define AT_HSUM_D(s) vaddvq_f64(s)

#include "../attention_body.h"

void kernels_fill_attention_neon(struct kernel_table *t) { t->attention = attention_neon; }

#else
typedef int attention_neon_empty; /* ISO C wants a declaration in every file */
#endif /* __aarch64__ */
