/*
 * attention_avx2.c - causal attention over F16 / Q8_0 K/V blocks
 * (attention.h) in AVX2 + FMA + F16C, the "avx2" variant's `attention` (the
 * avxvnni variant uses it too): attention_body.h with 256-bit vectors and
 * eight accumulators.  Compiled with the avx2 flags.
 */
#include <immintrin.h>
#include <math.h>
#include <sleef.h>
#include <string.h>

#include "../attention.h"
#include "../dispatch.h"
#include "../quants.h"

typedef __m256 atv;
typedef __m256d atd;
#define AT_W 8
#define AT_NACC 8
#define AT_TILE_ROWS 8 /* attend_tile: all eight accumulators' rows (Zen 3 does three loads a cycle) */
#define AT_FN(x) x##_avx2

static inline __m256 at_loadf_tail(const float *p, int n)
{
    float tmp[8] = {0};
    memcpy(tmp, p, (size_t)n * 4);
    return _mm256_loadu_ps(tmp);
}

static inline __m256 at_loadh_tail(const uint16_t *p, int n)
{
    uint16_t tmp[8] = {0};
    memcpy(tmp, p, (size_t)n * 2);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)tmp));
}

static inline void at_storef_tail(float *p, __m256 v, int n)
{
    float tmp[8];
    _mm256_storeu_ps(tmp, v);
    memcpy(p, tmp, (size_t)n * 4);
}

/* Lanes n.. of x cleared. */
static inline __m256 at_keep_first(__m256 x, int n)
{
    const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n), lane)));
}

static inline __m256d at_add_d(__m256d s, __m256 x)
{
    s = _mm256_add_pd(s, _mm256_cvtps_pd(_mm256_castps256_ps128(x)));
    return _mm256_add_pd(s, _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)));
}

static inline double at_hsum_d(__m256d s)
{
    const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(s), _mm256_extractf128_pd(s, 1));
    return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}

/* sums[x] = sum of the lanes of v[x] for x < 8: a tree of hadds. */
static inline void at_reduce8(const __m256 *v, float *sums)
{
    const __m256 h0 = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
    const __m256 h1 = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
    _mm256_storeu_ps(sums, _mm256_add_ps(_mm256_permute2f128_ps(h0, h1, 0x20), _mm256_permute2f128_ps(h0, h1, 0x31)));
}

static inline float at_hmax(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    return _mm_cvtss_f32(_mm_max_ss(m, _mm_movehdup_ps(m)));
}

#define AT_LOADF(p) _mm256_loadu_ps(p)
#define AT_LOADF_TAIL(p, n) at_loadf_tail(p, n)
#define AT_LOADH(p) _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p)))
#define AT_LOADH_TAIL(p, n) at_loadh_tail(p, n)
#define AT_LOADQ8(qs) _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(qs))))
#define AT_STOREF(p, v) _mm256_storeu_ps(p, v)
#define AT_STOREF_TAIL(p, v, n) at_storef_tail(p, v, n)
#define AT_MUL(a, b) _mm256_mul_ps(a, b)
#define AT_SUB(a, b) _mm256_sub_ps(a, b)
#define AT_FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define AT_SET1(x) _mm256_set1_ps(x)
#define AT_ZERO() _mm256_setzero_ps()
#define AT_REDUCE(v, sums) at_reduce8(v, sums)
#define AT_H2F(h) _cvtsh_ss(h)
#define AT_EXP(x) Sleef_expf8_u10avx2(x)
#define AT_MAX(a, b) _mm256_max_ps(a, b)
#define AT_HMAX(v) at_hmax(v)
#define AT_KEEP_FIRST(x, n) at_keep_first(x, n)
#define AT_ZERO_D() _mm256_setzero_pd()
#define AT_ADD_D(s, x) at_add_d(s, x)
#define AT_HSUM_D(s) at_hsum_d(s)

#include "../attention_body.h"

void kernels_fill_attention_avx2(struct kernel_table *t) { t->attention = attention_avx2; }
