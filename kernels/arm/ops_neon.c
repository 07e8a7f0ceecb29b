/*
 * ops_neon.c - the f32 ops of the aarch64 variants (baseline NEON; all
 * three use them): RMSNorm, softmax, SiLU, GELU and the
 * vector helpers, 4 lanes at a time with a scalar tail (SiLU and GELU: the
 * tail padded to four lanes, act_neon.h).  RoPE stays the reference's.
 *
 * Contracts as ops.h.  The arithmetic is the reference's, operation by
 * operation, with these differences:
 *   - exp and tanh are sleef's Advanced SIMD versions (Sleef_expf4_u10advsimd,
 *     Sleef_tanhf4_u10advsimd; error <= 1 ulp) instead of libm's, so
 *     softmax, silu and gelu can differ from the reference by an ulp or two,
 *     and gelu_ggml (rounded to fp16 afterwards) very rarely by one fp16 ulp;
 *   - the double sums (rmsnorm, softmax) add in another order (a difference
 *     far below float precision).
 * vec_mul, vec_add and vec_scale give the reference's bits.
 */
#include "neon.h"

#if defined(__aarch64__)

#include <arm_neon.h>
#include <math.h>
#include <sleef.h>
#include <string.h>

#include "../ops.h"
#include "act_neon.h"

/* Sum of the four float lanes of v into a pair of double lanes. */
static inline float64x2_t add_f64(float64x2_t acc, float32x4_t v)
{
    return vaddq_f64(vaddq_f64(acc, vcvt_f64_f32(vget_low_f32(v))), vcvt_high_f64_f32(v));
}

static void rmsnorm_neon(float *out, const float *x, const float *w, int64_t n, float eps)
{
    if (n <= 0)
        return;
    float64x2_t acc = vdupq_n_f64(0.0);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = vld1q_f32(x + i);
        acc = add_f64(acc, vmulq_f32(v, v));
    }
    double sum = vaddvq_f64(acc);
    for (; i < n; i++)
        sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    i = 0;
    if (w) {
        for (; i + 4 <= n; i += 4)
            vst1q_f32(out + i, vmulq_f32(vmulq_n_f32(vld1q_f32(x + i), scale), vld1q_f32(w + i)));
        for (; i < n; i++)
            out[i] = x[i] * scale * w[i];
    } else {
        for (; i + 4 <= n; i += 4)
            vst1q_f32(out + i, vmulq_n_f32(vld1q_f32(x + i), scale));
        for (; i < n; i++)
            out[i] = x[i] * scale;
    }
}

static void softmax_neon(float *x, int64_t n)
{
    if (n <= 0)
        return;
    float32x4_t mx = vdupq_n_f32(-INFINITY);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        mx = vmaxnmq_f32(mx, vld1q_f32(x + i));
    float max = vmaxnmvq_f32(mx);
    for (; i < n; i++)
        max = fmaxf(max, x[i]);
    const float32x4_t vmax = vdupq_n_f32(max);
    float64x2_t acc = vdupq_n_f64(0.0);
    for (i = 0; i + 4 <= n; i += 4) {
        const float32x4_t e = Sleef_expf4_u10advsimd(vsubq_f32(vld1q_f32(x + i), vmax));
        vst1q_f32(x + i, e);
        acc = add_f64(acc, e);
    }
    double sum = vaddvq_f64(acc);
    for (; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += (double)x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (i = 0; i + 4 <= n; i += 4)
        vst1q_f32(x + i, vmulq_n_f32(vld1q_f32(x + i), inv));
    for (; i < n; i++)
        x[i] *= inv;
}

/* The first n (1-3) elements of x through f, padded with zeros. */
static inline __attribute__((always_inline)) void map_tail(float *x, int64_t n, float32x4_t (*f)(float32x4_t))
{
    float buf[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    memcpy(buf, x, (size_t)n * sizeof(float));
    vst1q_f32(buf, f(vld1q_f32(buf)));
    memcpy(x, buf, (size_t)n * sizeof(float));
}

/* silu and gelu: silu4 / gelu4 (act_neon.h) on every element, the last 1-3
 * too (padded), so that an element's bits do not depend on where it sits
 * in the row (the fused gate/up kernels give those of one element). */
static void silu_neon(float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(x + i, silu4(vld1q_f32(x + i)));
    if (i < n)
        map_tail(x + i, n - i, silu4);
}

/* gelu4 of one element with libm's tanhf (gelu_ggml's tail) */
static inline float gelu1(float x)
{
    return 0.5f * x * (1.0f + tanhf(SQRT_2_OVER_PI * x * (1.0f + GELU_COEF_A * x * x)));
}

static void gelu_neon(float *x, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(x + i, gelu4(vld1q_f32(x + i)));
    if (i < n)
        map_tail(x + i, n - i, gelu4);
}

/* Round to fp16 and back (FCVTN / FCVTL: nearest even, as fp32_to_fp16). */
static inline float32x4_t round_f16(float32x4_t v) { return vcvt_f32_f16(vcvt_f16_f32(v)); }

/* As gelu_ggml_ref: 0 for x <= -10, x for x >= 10, else the fp16-rounded
 * GELU of the fp16-rounded input. */
static void gelu_ggml_neon(float *x, int64_t n)
{
    const float32x4_t lo = vdupq_n_f32(-10.0f), hi = vdupq_n_f32(10.0f), zero = vdupq_n_f32(0.0f);
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        const float32x4_t v = vld1q_f32(x + i);
        float32x4_t g = round_f16(gelu4(round_f16(v)));
        g = vbslq_f32(vcleq_f32(v, lo), zero, g);
        g = vbslq_f32(vcgeq_f32(v, hi), v, g);
        vst1q_f32(x + i, g);
    }
    for (; i < n; i++) {
        const float v = x[i];
        if (v <= -10.0f)
            x[i] = 0.0f;
        else if (v >= 10.0f)
            x[i] = v;
        else
            x[i] = fp16_to_fp32(fp32_to_fp16(gelu1(fp16_to_fp32(fp32_to_fp16(v)))));
    }
}

static void vec_mul_neon(float *out, const float *a, const float *b, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(out + i, vmulq_f32(vld1q_f32(a + i), vld1q_f32(b + i)));
    for (; i < n; i++)
        out[i] = a[i] * b[i];
}

static void vec_add_neon(float *out, const float *a, const float *b, int64_t n)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(out + i, vaddq_f32(vld1q_f32(a + i), vld1q_f32(b + i)));
    for (; i < n; i++)
        out[i] = a[i] + b[i];
}

static void vec_scale_neon(float *x, int64_t n, float s)
{
    int64_t i = 0;
    for (; i + 4 <= n; i += 4)
        vst1q_f32(x + i, vmulq_n_f32(vld1q_f32(x + i), s));
    for (; i < n; i++)
        x[i] *= s;
}

/* As argmax_avx2: the largest value (vmaxnmq ignores NaN lanes), then the
 * first element equal to it; a NaN x[0] stays the answer. */
static int64_t argmax_neon(const float *x, int64_t n)
{
    if (n <= 1 || x[0] != x[0])
        return 0;
    float32x4_t m0 = vdupq_n_f32(-INFINITY), m1 = m0, m2 = m0, m3 = m0;
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        m0 = vmaxnmq_f32(m0, vld1q_f32(x + i));
        m1 = vmaxnmq_f32(m1, vld1q_f32(x + i + 4));
        m2 = vmaxnmq_f32(m2, vld1q_f32(x + i + 8));
        m3 = vmaxnmq_f32(m3, vld1q_f32(x + i + 12));
    }
    float m = vmaxnmvq_f32(vmaxnmq_f32(vmaxnmq_f32(m0, m1), vmaxnmq_f32(m2, m3)));
    m = x[0] > m ? x[0] : m;
    for (; i < n; i++)
        m = x[i] > m ? x[i] : m;
    const float32x4_t mv = vdupq_n_f32(m);
    for (i = 0; i + 4 <= n; i += 4)
        if (vmaxvq_u32(vceqq_f32(vld1q_f32(x + i), mv)))
            break;
    for (; i < n; i++)
        if (x[i] == m)
            return i;
    return 0; /* not reached: m is one of the elements */
}

void kernels_fill_ops_neon(struct kernel_table *t)
{
    t->rmsnorm = rmsnorm_neon;
    t->softmax = softmax_neon;
    t->silu = silu_neon;
    t->gelu = gelu_neon;
    t->gelu_ggml = gelu_ggml_neon;
    t->vec_mul = vec_mul_neon;
    t->vec_add = vec_add_neon;
    t->vec_scale = vec_scale_neon;
    t->argmax = argmax_neon;
}

#else
typedef int ops_neon_empty; /* ISO C wants a declaration in every file */
#endif /* __aarch64__ */
