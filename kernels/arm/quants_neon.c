/*
 * quants_neon.c - the baseline aarch64 variant "neon" (ARMv8-A Advanced
 * SIMD, e.g. Raspberry Pi 4 / Cortex-A72), and the kernels all aarch64
 * variants share: activation quantizers and the F32/F16/BF16 dots.
 *
 * Without SDOT, an int8 dot of 16 lanes is SMULL + SMLAL2 (two products per
 * int16 lane) + SADALP into int32 lanes; that is exact when one factor is a
 * weight of at most 6 bits (2 * 64 * 128 < 2^15).  Q8_0 weights can be any
 * int8, so each product is widened alone (DOT_WIDE).  See neon.h for the
 * accuracy contract.
 */
#include "neon.h"

#if defined(__aarch64__)

#include <arm_neon.h>
#include <math.h>
#include <string.h>

#define NEON_FN(name) name##_neon

static inline int32x4_t dot_small_neon(int32x4_t acc, int8x16_t a, int8x16_t b)
{
    const int16x8_t p = vmlal_high_s8(vmull_s8(vget_low_s8(a), vget_low_s8(b)), a, b);
    return vpadalq_s16(acc, p);
}

static inline int32x4_t dot_wide_neon(int32x4_t acc, int8x16_t a, int8x16_t b)
{
    acc = vpadalq_s16(acc, vmull_s8(vget_low_s8(a), vget_low_s8(b)));
    return vpadalq_s16(acc, vmull_high_s8(a, b));
}

#define DOT_SMALL(acc, a, b) dot_small_neon((acc), (a), (b))
#define DOT_WIDE(acc, a, b) dot_wide_neon((acc), (a), (b))

#define GEMM_SDOT 0
#include "quants_neon_body.h"

/* fp32 -> fp16 with FCVT (round to nearest even, as fp32_to_fp16 for every
 * non-NaN value). */
static inline ggml_half neon_f2h(float f)
{
    const __fp16 v = (__fp16)f;
    ggml_half h;
    memcpy(&h, &v, sizeof(h));
    return h;
}

/* ======================= activation quantizers ======================= */

/* Absolute maximum of 32 floats; NaNs are ignored, as by fmaxf. */
static inline float absmax32(const float *x)
{
    float32x4_t m = vabsq_f32(vld1q_f32(x));
    for (int j = 4; j < 32; j += 4)
        m = vmaxnmq_f32(m, vabsq_f32(vld1q_f32(x + j)));
    return vmaxnmvq_f32(m);
}

/* q[j] = round(x[j] * id) for 32 values; vcvtaq rounds half away from zero
 * as roundf does, and |x[j] * id| <= 127 (+rounding) fits int8. */
static inline void round32(const float *x, float id, int8_t *q)
{
    for (int j = 0; j < 32; j += 8) {
        const int32x4_t a = vcvtaq_s32_f32(vmulq_n_f32(vld1q_f32(x + j), id));
        const int32x4_t b = vcvtaq_s32_f32(vmulq_n_f32(vld1q_f32(x + j + 4), id));
        vst1_s8(q + j, vqmovn_s16(vcombine_s16(vqmovn_s32(a), vqmovn_s32(b))));
    }
}

void quantize_row_q8_0_neon(const float *src, void *dst, int64_t n)
{
    block_q8_0 *y = dst;
    for (int64_t b = 0; b < n / QK8_0; b++, src += QK8_0) {
        const float d = absmax32(src) / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = neon_f2h(d);
        round32(src, id, y[b].qs);
    }
}

void quantize_row_q8_1_neon(const float *src, void *dst, int64_t n)
{
    block_q8_1 *y = dst;
    for (int64_t b = 0; b < n / QK8_1; b++, src += QK8_1) {
        const float d = absmax32(src) / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        y[b].d = neon_f2h(d);
        round32(src, id, y[b].qs);
        const int sum = vaddlvq_s8(vld1q_s8(y[b].qs)) + vaddlvq_s8(vld1q_s8(y[b].qs + 16));
        y[b].s = neon_f2h((float)sum * d);
    }
}

/* As quantize_row_q8_K_ref: the element of largest magnitude (the first one
 * on a tie of +a and -a) maps to -127; rounding is half to even (vcvtnq). */
void quantize_row_q8_K_neon(const float *src, void *dst, int64_t n)
{
    block_q8_K *y = dst;
    for (int64_t b = 0; b < n / QK_K; b++, src += QK_K) {
        float32x4_t mx = vdupq_n_f32(0.0f);
        for (int j = 0; j < QK_K; j += 4)
            mx = vmaxnmq_f32(mx, vabsq_f32(vld1q_f32(src + j)));
        const float amax = vmaxnmvq_f32(mx);
        if (amax == 0.0f) {
            memset(&y[b], 0, sizeof(y[b]));
            continue;
        }
        /* the sign of the first element with |x| == amax */
        uint32x4_t pos = vdupq_n_u32(0), neg = vdupq_n_u32(0);
        for (int j = 0; j < QK_K; j += 4) {
            const float32x4_t v = vld1q_f32(src + j);
            pos = vorrq_u32(pos, vceqq_f32(v, vdupq_n_f32(amax)));
            neg = vorrq_u32(neg, vceqq_f32(v, vdupq_n_f32(-amax)));
        }
        float max = vmaxvq_u32(neg) ? -amax : amax;
        if (vmaxvq_u32(pos) && vmaxvq_u32(neg)) {
            for (int j = 0; j < QK_K; j++) {
                if (fabsf(src[j]) == amax) {
                    max = src[j];
                    break;
                }
            }
        }
        const float iscale = -127.f / max;
        const int32x4_t top = vdupq_n_s32(127);
        for (int j = 0; j < QK_K; j += 8) {
            const int32x4_t a = vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(src + j), iscale)), top);
            const int32x4_t c = vminq_s32(vcvtnq_s32_f32(vmulq_n_f32(vld1q_f32(src + j + 4), iscale)), top);
            vst1_s8(y[b].qs + j, vqmovn_s16(vcombine_s16(vqmovn_s32(a), vqmovn_s32(c))));
        }
        for (int g = 0; g < QK_K / 16; g++)
            y[b].bsums[g] = (int16_t)vaddlvq_s8(vld1q_s8(y[b].qs + 16 * g));
        y[b].d = 1 / iscale;
    }
}

/* =========================== float dots ===========================
 * As the reference: every product rounded to float (exact for F16 and BF16
 * inputs), the products summed in double -- in four double accumulators of
 * two lanes instead of one, a difference far below float precision. */

static inline float32x4_t f32x4(const float *p) { return vld1q_f32(p); }
static inline float32x4_t f16x4(const uint16_t *p) { return vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(p))); }
static inline float32x4_t bf16x4(const uint16_t *p)
{
    return vreinterpretq_f32_u32(vshll_n_u16(vld1_u16(p), 16));
}
static inline float f32x1(const float *p) { return *p; }
static inline float f16x1(const uint16_t *p) { return neon_h2f(*p); }
static inline float bf16x1(const uint16_t *p) { return bf16_to_fp32(*p); }

#define FLOAT_DOT(NAME, ELEM, LOAD4, LOAD1)                                                     \
    float NAME(int64_t n, const void *w, const void *a)                                        \
    {                                                                                          \
        const ELEM *x = w, *y = a;                                                             \
        float64x2_t s0 = vdupq_n_f64(0.0), s1 = s0, s2 = s0, s3 = s0;                          \
        int64_t i = 0;                                                                         \
        for (; i + 8 <= n; i += 8) {                                                           \
            const float32x4_t p0 = vmulq_f32(LOAD4(x + i), LOAD4(y + i));                      \
            const float32x4_t p1 = vmulq_f32(LOAD4(x + i + 4), LOAD4(y + i + 4));              \
            s0 = vaddq_f64(s0, vcvt_f64_f32(vget_low_f32(p0)));                                \
            s1 = vaddq_f64(s1, vcvt_high_f64_f32(p0));                                         \
            s2 = vaddq_f64(s2, vcvt_f64_f32(vget_low_f32(p1)));                                \
            s3 = vaddq_f64(s3, vcvt_high_f64_f32(p1));                                         \
        }                                                                                      \
        double sum = vaddvq_f64(vaddq_f64(vaddq_f64(s0, s1), vaddq_f64(s2, s3)));              \
        for (; i < n; i++)                                                                     \
            sum += (double)(LOAD1(x + i) * LOAD1(y + i));                                      \
        return (float)sum;                                                                     \
    }

FLOAT_DOT(vec_dot_f32_f32_neon, float, f32x4, f32x1)
FLOAT_DOT(vec_dot_f16_f16_neon, uint16_t, f16x4, f16x1)
FLOAT_DOT(vec_dot_bf16_bf16_neon, uint16_t, bf16x4, bf16x1)

/* fp16 <-> fp32 rows with FCVTL / FCVTN: bit-exact with the reference for
 * every non-NaN value (NaNs stay NaN, payloads may differ). */
void dequantize_row_f16_neon(const void *src, float *dst, int64_t n)
{
    const uint16_t *x = src;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        vst1q_f32(dst + i, f16x4(x + i));
        vst1q_f32(dst + i + 4, f16x4(x + i + 4));
    }
    for (; i < n; i++)
        dst[i] = neon_h2f(x[i]);
}

void quantize_row_f16_neon(const float *src, void *dst, int64_t n)
{
    uint16_t *y = dst;
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1_u16(y + i, vreinterpret_u16_f16(vcvt_f16_f32(vld1q_f32(src + i))));
    for (; i < n; i++)
        y[i] = neon_f2h(src[i]);
}

/* gemm tiles of the float types: one vec_dot per output (the bits of
 * vec_dot by construction; no unpacking to share). */
#define FLOAT_GEMM(T, DOT)                                                                                    \
    static void gemm_##T##_neon(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, \
                                size_t ys, int nt)                                                           \
    {                                                                                                         \
        for (int t = 0; t < nt; t++)                                                                          \
            for (int r = 0; r < GEMM_ROWS; r++)                                                               \
                y[(size_t)t * ys + (size_t)r] =                                                               \
                    DOT(n, (const char *)w + (size_t)r * w_row, (const char *)a + (size_t)t * a_row);         \
    }
FLOAT_GEMM(f32, vec_dot_f32_f32_neon)
FLOAT_GEMM(f16, vec_dot_f16_f16_neon)
FLOAT_GEMM(bf16, vec_dot_bf16_bf16_neon)

static float vec_dot_f32_ops_neon(const float *a, const float *b, int64_t n)
{
    return n > 0 ? vec_dot_f32_f32_neon(n, a, b) : 0.0f;
}

void kernels_fill_neon_common(struct kernel_table *t)
{
    *t = *kernels_ref();
    t->types[GGML_TYPE_Q8_0].from_float = quantize_row_q8_0_neon;
    t->types[GGML_TYPE_Q8_1].from_float = quantize_row_q8_1_neon;
    t->types[GGML_TYPE_Q8_K].from_float = quantize_row_q8_K_neon;
    t->types[GGML_TYPE_F32].vec_dot = vec_dot_f32_f32_neon;
    t->types[GGML_TYPE_F16].vec_dot = vec_dot_f16_f16_neon;
    t->types[GGML_TYPE_BF16].vec_dot = vec_dot_bf16_bf16_neon;
    t->types[GGML_TYPE_F32].gemm = gemm_f32_neon;
    t->types[GGML_TYPE_F16].gemm = gemm_f16_neon;
    t->types[GGML_TYPE_BF16].gemm = gemm_bf16_neon;
    t->types[GGML_TYPE_F16].to_float = dequantize_row_f16_neon;
    t->types[GGML_TYPE_F16].from_float = quantize_row_f16_neon;
    t->vec_dot_f32 = vec_dot_f32_ops_neon;
    kernels_fill_ops_neon(t);
    kernels_fill_attention_neon(t);
}

void kernels_fill_neon(struct kernel_table *t)
{
    kernels_fill_neon_common(t);
    fill_int_dots_neon(t);
    t->name = "neon";
}

#else
typedef int quants_neon_empty; /* ISO C wants a declaration in every file */
#endif /* __aarch64__ */
