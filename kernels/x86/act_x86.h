/*
 * act_x86.h - the FFN activations of a vector, with sleef's u10 exp and
 * tanh: SiLU x / (1 + exp(-x)) and GELU (tanh form, associated as gelu_f32
 * in ops.c), silu8/gelu8 (AVX2) and, where the file is compiled for
 * AVX-512, silu16/gelu16.  The f32 ops' silu and gelu (ops_avx2.c,
 * ops_avx512.c) and the fused gate/up epilogues of the many-token kernels
 * (gemm_lt8_body.h, gemm_avx512.c) use these, so they give the same bits
 * lane by lane.
 */
#ifndef INFER_ACT_X86_H
#define INFER_ACT_X86_H

#include <immintrin.h>
#include <sleef.h>

#define GELU_COEF 0.044715f
#define GELU_SQRT_2_PI 0.79788456080286535587989211986876f

static inline __attribute__((always_inline)) __m256 silu8(__m256 x)
{
    const __m256 e = Sleef_expf8_u10avx2(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

/* 0.5 x (1 + tanh(sqrt(2/pi) x (1 + 0.044715 x^2))) */
static inline __attribute__((always_inline)) __m256 gelu8(__m256 x)
{
    const __m256 one = _mm256_set1_ps(1.0f);
    const __m256 inner = _mm256_add_ps(one, _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(GELU_COEF), x), x));
    const __m256 arg = _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(GELU_SQRT_2_PI), x), inner);
    const __m256 t = Sleef_tanhf8_u10avx2(arg);
    return _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(0.5f), x), _mm256_add_ps(one, t));
}

#ifdef __AVX512F__
static inline __attribute__((always_inline)) __m512 silu16(__m512 x)
{
    const __m512 e = Sleef_expf16_u10avx512f(_mm512_sub_ps(_mm512_setzero_ps(), x));
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

static inline __attribute__((always_inline)) __m512 gelu16(__m512 x)
{
    const __m512 one = _mm512_set1_ps(1.0f);
    const __m512 inner = _mm512_add_ps(one, _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(GELU_COEF), x), x));
    const __m512 arg = _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(GELU_SQRT_2_PI), x), inner);
    const __m512 t = Sleef_tanhf16_u10avx512f(arg);
    return _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(0.5f), x), _mm512_add_ps(one, t));
}
#endif

#endif
