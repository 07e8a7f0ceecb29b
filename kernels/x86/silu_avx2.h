/*
 * silu_avx2.h - SiLU of 8 floats, x / (1 + exp(-x)) with sleef's
 * Sleef_expf8_u10avx2: ops_avx2.c's silu, and the fused gate/up epilogue of
 * gemm_lt8_body.h (the same bits, lane by lane).  For files compiled with
 * the avx2 variant's flags.
 */
#ifndef INFER_SILU_AVX2_H
#define INFER_SILU_AVX2_H

#include <immintrin.h>
#include <sleef.h>

static inline __attribute__((always_inline)) __m256 silu8(__m256 x)
{
    const __m256 e = Sleef_expf8_u10avx2(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

#endif
