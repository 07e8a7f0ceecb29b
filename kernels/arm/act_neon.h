/*
 * act_neon.h - the FFN activations of four lanes, with sleef's u10 exp and
 * tanh: silu4, x / (1 + exp(-x)), and gelu4, the tanh form associated as
 * gelu_f32 in ops.c.  The f32 ops' silu and gelu (ops_neon.c, which also
 * pass a row's last 1-3 elements through them, padded) and the fused
 * gate/up epilogue of the many-token kernels (gemm_neon_body.h) use these,
 * so an element's result has the same bits wherever it sits in a row.
 */
#ifndef INFER_KERNELS_ARM_ACT_NEON_H
#define INFER_KERNELS_ARM_ACT_NEON_H

#include <arm_neon.h>
#include <sleef.h>

#define GELU_COEF_A 0.044715f
#define SQRT_2_OVER_PI 0.79788456080286535587989211986876f

static inline __attribute__((always_inline)) float32x4_t silu4(float32x4_t x)
{
    return vdivq_f32(x, vaddq_f32(vdupq_n_f32(1.0f), Sleef_expf4_u10advsimd(vnegq_f32(x))));
}

/* 0.5 x (1 + tanh(sqrt(2/pi) x (1 + a x^2))), in the reference's order. */
static inline __attribute__((always_inline)) float32x4_t gelu4(float32x4_t x)
{
    const float32x4_t one = vdupq_n_f32(1.0f);
    const float32x4_t inner = vaddq_f32(one, vmulq_f32(vmulq_n_f32(x, GELU_COEF_A), x));
    const float32x4_t t = Sleef_tanhf4_u10advsimd(vmulq_f32(vmulq_n_f32(x, SQRT_2_OVER_PI), inner));
    return vmulq_f32(vmulq_n_f32(x, 0.5f), vaddq_f32(one, t));
}

#endif
