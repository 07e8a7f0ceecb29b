/*
 * silu_x86.h - SiLU, x / (1 + exp(-x)) with sleef's u10 exp, of a vector:
 * silu8 (AVX2) and, where the file is compiled for AVX-512, silu16.  The f32
 * ops' silu (ops_avx2.c, ops_avx512.c) and the fused gate/up epilogues of
 * the many-token kernels (gemm_lt8_body.h, gemm_avx512.c) use these, so
 * they give the same bits lane by lane.
 */
#ifndef INFER_SILU_X86_H
#define INFER_SILU_X86_H

#include <immintrin.h>
#include <sleef.h>

static inline __attribute__((always_inline)) __m256 silu8(__m256 x)
{
    const __m256 e = Sleef_expf8_u10avx2(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

#ifdef __AVX512F__
static inline __attribute__((always_inline)) __m512 silu16(__m512 x)
{
    const __m512 e = Sleef_expf16_u10avx512f(_mm512_sub_ps(_mm512_setzero_ps(), x));
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}
#endif

#endif
