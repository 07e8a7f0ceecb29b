/*
 * attention_avx512.c - causal attention over F16 / Q8_0 K/V blocks
 * (attention.h) for the "avx512" variant: attention_body.h with 512-bit
 * vectors and sixteen accumulators (four positions x four heads per score
 * step, 64 dims x four heads per value step), masked loads for head tails.
 * Compiled with the avx512 variant's flags.
 */
#include <immintrin.h>
#include <math.h>
#include <sleef.h>
#include <string.h>

#include "../attention.h"
#include "../dispatch.h"
#include "../quants.h"

typedef __m512 atv;
typedef __m512d atd;
#define AT_W 16
#define AT_NACC 16
#define AT_FN(x) x##_avx512

#define AT_MASK(n) ((__mmask16)((1u << (n)) - 1u))

static inline __m512d at_add_d(__m512d s, __m512 x)
{
    const __m512d lo = _mm512_cvtps_pd(_mm512_castps512_ps256(x));
    const __m512d hi = _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(x), 1)));
    return _mm512_add_pd(_mm512_add_pd(s, lo), hi);
}

/* sums[x] = sum of the lanes of v[x] for x < 16: each folded to 256 bits,
 * then trees of hadds eight at a time. */
static inline void at_reduce16(const __m512 *v, float *sums)
{
    _Pragma("GCC unroll 2")
    for (int x = 0; x < 16; x += 8) {
        __m256 f[8];
        _Pragma("GCC unroll 8")
        for (int k = 0; k < 8; k++)
            f[k] = _mm256_add_ps(_mm512_castps512_ps256(v[x + k]),
                                 _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(v[x + k]), 1)));
        const __m256 h0 = _mm256_hadd_ps(_mm256_hadd_ps(f[0], f[1]), _mm256_hadd_ps(f[2], f[3]));
        const __m256 h1 = _mm256_hadd_ps(_mm256_hadd_ps(f[4], f[5]), _mm256_hadd_ps(f[6], f[7]));
        _mm256_storeu_ps(sums + x,
                         _mm256_add_ps(_mm256_permute2f128_ps(h0, h1, 0x20), _mm256_permute2f128_ps(h0, h1, 0x31)));
    }
}

#define AT_LOADF(p) _mm512_loadu_ps(p)
#define AT_LOADF_TAIL(p, n) _mm512_maskz_loadu_ps(AT_MASK(n), p)
#define AT_LOADH(p) _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(p)))
#define AT_LOADH_TAIL(p, n) _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(AT_MASK(n), p))
#define AT_LOADQ8(qs) _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i *)(qs))))
#define AT_STOREF(p, v) _mm512_storeu_ps(p, v)
#define AT_STOREF_TAIL(p, v, n) _mm512_mask_storeu_ps(p, AT_MASK(n), v)
#define AT_MUL(a, b) _mm512_mul_ps(a, b)
#define AT_SUB(a, b) _mm512_sub_ps(a, b)
#define AT_FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define AT_SET1(x) _mm512_set1_ps(x)
#define AT_ZERO() _mm512_setzero_ps()
#define AT_REDUCE(v, sums) at_reduce16(v, sums)
#define AT_H2F(h) _cvtsh_ss(h)
#define AT_EXP(x) Sleef_expf16_u10avx512f(x)
#define AT_MAX(a, b) _mm512_max_ps(a, b)
#define AT_HMAX(v) _mm512_reduce_max_ps(v)
#define AT_KEEP_FIRST(x, n) _mm512_maskz_mov_ps(AT_MASK(n), x)
#define AT_ZERO_D() _mm512_setzero_pd()
#define AT_ADD_D(s, x) at_add_d(s, x)
#define AT_HSUM_D(s) _mm512_reduce_add_pd(s)

#include "../attention_body.h"

void kernels_fill_attention_avx512(struct kernel_table *t) { t->attention = attention_avx512; }
