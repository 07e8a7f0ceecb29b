/*
 * silu_avx512.h - SiLU of 16 floats, x / (1 + exp(-x)) with sleef's
 * Sleef_expf16_u10: ops_avx512.c's silu, and the fused gate/up epilogue of
 * gemm_avx512.c (the same bits, lane by lane).  For files compiled with
 * the avx512 variant's flags.
 */
#ifndef INFER_SILU_AVX512_H
#define INFER_SILU_AVX512_H

#include <immintrin.h>
#include <sleef.h>

static inline __attribute__((always_inline)) __m512 silu16(__m512 x)
{
    const __m512 e = Sleef_expf16_u10avx512f(_mm512_sub_ps(_mm512_setzero_ps(), x));
    return _mm512_div_ps(x, _mm512_add_ps(_mm512_set1_ps(1.0f), e));
}

#endif
