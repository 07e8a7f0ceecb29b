/*
 * ops_avx512.c - the f32 ops of the "avx512" variant that gain from 16
 * lanes: rmsnorm, softmax, SiLU and GELU (exp and tanh from sleef's
 * Sleef_expf16_u10 / Sleef_tanhf16_u10); RoPE and the vector helpers stay
 * those of ops_avx2.c.  Compiled with the avx512 variant's flags.
 *
 * The arithmetic is ops_avx2.c's (and the reference's, ops.c): sums of
 * squares and of exponentials in double, the same formulas associated the
 * same way, tails through masked loads and stores.
 */
#include <immintrin.h>
#include <math.h>
#include <sleef.h>

#include "../dispatch.h"
#include "../ops.h"
#include "act_x86.h"

#define INLINE static inline __attribute__((always_inline))

INLINE __mmask16 tail_mask(int64_t m) { return m >= 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << m) - 1); }

/* acc + the 16 float products p, in double. */
INLINE __m512d acc_pd(__m512d acc, __m512 p)
{
    acc = _mm512_add_pd(acc, _mm512_cvtps_pd(_mm512_castps512_ps256(p)));
    return _mm512_add_pd(acc, _mm512_cvtps_pd(_mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(p), 1))));
}

static void rmsnorm_avx512(float *out, const float *x, const float *w, int64_t n, float eps)
{
    if (n <= 0)
        return;
    __m512d acc = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 16) {
        const __m512 v = _mm512_maskz_loadu_ps(tail_mask(n - i), x + i);
        acc = acc_pd(acc, _mm512_mul_ps(v, v));
    }
    const float mean = (float)(_mm512_reduce_add_pd(acc) / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    const __m512 s = _mm512_set1_ps(scale);
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = tail_mask(n - i);
        __m512 v = _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), s);
        if (w)
            v = _mm512_mul_ps(v, _mm512_maskz_loadu_ps(k, w + i));
        _mm512_mask_storeu_ps(out + i, k, v);
    }
}

static void softmax_avx512(float *x, int64_t n)
{
    if (n <= 0)
        return;
    const __m512 ninf = _mm512_set1_ps(-INFINITY);
    __m512 mv = ninf;
    for (int64_t i = 0; i < n; i += 16)
        mv = _mm512_max_ps(mv, _mm512_mask_loadu_ps(ninf, tail_mask(n - i), x + i));
    const __m512 m = _mm512_set1_ps(_mm512_reduce_max_ps(mv));
    __m512d acc = _mm512_setzero_pd();
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = tail_mask(n - i);
        const __m512 e = Sleef_expf16_u10avx512f(_mm512_sub_ps(_mm512_mask_loadu_ps(ninf, k, x + i), m));
        acc = acc_pd(acc, e); /* exp(-inf) = 0 in the padding */
        _mm512_mask_storeu_ps(x + i, k, e);
    }
    const __m512 inv = _mm512_set1_ps((float)(1.0 / _mm512_reduce_add_pd(acc)));
    for (int64_t i = 0; i < n; i += 16) {
        const __mmask16 k = tail_mask(n - i);
        _mm512_mask_storeu_ps(x + i, k, _mm512_mul_ps(_mm512_maskz_loadu_ps(k, x + i), inv));
    }
}

INLINE __m512 round_f16(__m512 x) { return _mm512_cvtph_ps(_mm512_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT)); }

INLINE __m512 gelu_ggml16(__m512 x)
{
    const __m512 g = round_f16(gelu16(round_f16(x)));
    const __mmask16 lo = _mm512_cmp_ps_mask(x, _mm512_set1_ps(-10.0f), _CMP_LE_OQ);
    const __mmask16 hi = _mm512_cmp_ps_mask(x, _mm512_set1_ps(10.0f), _CMP_GE_OQ);
    return _mm512_mask_blend_ps(hi, _mm512_maskz_mov_ps((__mmask16)~lo, g), x);
}

#define MAP16(x, n, f)                                                                                        \
    do {                                                                                                      \
        for (int64_t i_ = 0; i_ < (n); i_ += 16) {                                                            \
            const __mmask16 k_ = tail_mask((n) - i_);                                                         \
            _mm512_mask_storeu_ps((x) + i_, k_, f(_mm512_maskz_loadu_ps(k_, (x) + i_)));                      \
        }                                                                                                     \
    } while (0)

static void silu_avx512(float *x, int64_t n) { MAP16(x, n, silu16); }
static void gelu_avx512(float *x, int64_t n) { MAP16(x, n, gelu16); }
static void gelu_ggml_avx512(float *x, int64_t n) { MAP16(x, n, gelu_ggml16); }

void kernels_fill_ops_avx512(struct kernel_table *t)
{
    t->rmsnorm = rmsnorm_avx512;
    t->softmax = softmax_avx512;
    t->silu = silu_avx512;
    t->gelu = gelu_avx512;
    t->gelu_ggml = gelu_ggml_avx512;
}
