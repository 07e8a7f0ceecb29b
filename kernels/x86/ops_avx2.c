/*
 * ops_avx2.c - the f32 ops of ops.h in AVX2 + FMA + F16C, with exp and tanh
 * from sleef (the "avx2" variant; compiled with -mavx2 -mfma -mf16c
 * -ffp-contract=off).
 *
 * Each op keeps the reference's arithmetic (ops.c) wherever that costs
 * nothing: rmsnorm and softmax still sum in double and scale as the
 * reference does, RoPE takes the reference's angles and rotates with
 * separate multiplies and adds (the same bits), vec ops are exact.  What
 * differs is exp and tanh: sleef's u10 versions are within 1 ulp, like
 * glibc's, but not always the same ulp, so softmax, SiLU and GELU agree with
 * the reference to a few ulp (tests/test-kernels-simd.c).
 */
#include <immintrin.h>
#include <math.h>
#include <sleef.h>
#include <string.h>

#include "../dispatch.h"
#include "../ops.h"
#include "../types.h"
#include "act_x86.h"

#define INLINE static inline __attribute__((always_inline))

/* The last m < 8 elements of a row through a zero- (or `pad`-) filled
 * buffer, so that tails take the same vector path. */
INLINE __m256 load_tail(const float *x, int64_t m, float pad)
{
    float tmp[8];
    for (int i = 0; i < 8; i++)
        tmp[i] = i < m ? x[i] : pad;
    return _mm256_loadu_ps(tmp);
}

INLINE void store_tail(float *x, __m256 v, int64_t m)
{
    float tmp[8];
    _mm256_storeu_ps(tmp, v);
    memcpy(x, tmp, (size_t)m * sizeof(float));
}

/* Sum of float products in double: four lanes of double per half. */
INLINE __m256d acc_pd(__m256d acc, __m256 p)
{
    acc = _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_castps256_ps128(p)));
    return _mm256_add_pd(acc, _mm256_cvtps_pd(_mm256_extractf128_ps(p, 1)));
}

INLINE double hsum_pd(__m256d v)
{
    __m128d s = _mm_add_pd(_mm256_castpd256_pd128(v), _mm256_extractf128_pd(v, 1));
    s = _mm_add_sd(s, _mm_unpackhi_pd(s, s));
    return _mm_cvtsd_f64(s);
}

static void rmsnorm_avx2(float *out, const float *x, const float *w, int64_t n, float eps)
{
    if (n <= 0)
        return;
    __m256d acc = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256 v = _mm256_loadu_ps(x + i);
        acc = acc_pd(acc, _mm256_mul_ps(v, v));
    }
    double sum = hsum_pd(acc);
    for (; i < n; i++)
        sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    const __m256 s = _mm256_set1_ps(scale);
    for (i = 0; i + 8 <= n; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), s);
        if (w)
            v = _mm256_mul_ps(v, _mm256_loadu_ps(w + i));
        _mm256_storeu_ps(out + i, v);
    }
    for (; i < n; i++)
        out[i] = w ? x[i] * scale * w[i] : x[i] * scale;
}

static void softmax_avx2(float *x, int64_t n)
{
    if (n <= 0)
        return;
    __m256 mv = _mm256_set1_ps(-INFINITY);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        mv = _mm256_max_ps(mv, _mm256_loadu_ps(x + i));
    float max = -INFINITY;
    {
        float t[8];
        _mm256_storeu_ps(t, mv);
        for (int k = 0; k < 8; k++)
            max = fmaxf(max, t[k]);
        for (int64_t j = i; j < n; j++)
            max = fmaxf(max, x[j]);
    }
    const __m256 m = _mm256_set1_ps(max);
    __m256d acc = _mm256_setzero_pd();
    for (i = 0; i < n; i += 8) {
        const int64_t r = n - i < 8 ? n - i : 8;
        const __m256 v = r == 8 ? _mm256_loadu_ps(x + i) : load_tail(x + i, r, -INFINITY);
        const __m256 e = Sleef_expf8_u10avx2(_mm256_sub_ps(v, m));
        acc = acc_pd(acc, e); /* exp(-inf) = 0 in the padding */
        if (r == 8)
            _mm256_storeu_ps(x + i, e);
        else
            store_tail(x + i, e, r);
    }
    const __m256 inv = _mm256_set1_ps((float)(1.0 / hsum_pd(acc)));
    for (i = 0; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), inv));
    for (; i < n; i++)
        x[i] *= _mm256_cvtss_f32(inv);
}

/* Apply f to x in chunks of 8, the tail through a padded buffer. */
#define MAP8(x, n, f)                                                                                         \
    do {                                                                                                      \
        for (int64_t i_ = 0; i_ < (n); i_ += 8) {                                                             \
            const int64_t r_ = (n) - i_ < 8 ? (n) - i_ : 8;                                                   \
            const __m256 v_ = r_ == 8 ? _mm256_loadu_ps((x) + i_) : load_tail((x) + i_, r_, 0.0f);            \
            const __m256 o_ = f(v_);                                                                          \
            if (r_ == 8)                                                                                      \
                _mm256_storeu_ps((x) + i_, o_);                                                               \
            else                                                                                              \
                store_tail((x) + i_, o_, r_);                                                                 \
        }                                                                                                     \
    } while (0)

INLINE __m256 round_f16(__m256 x) { return _mm256_cvtph_ps(_mm256_cvtps_ph(x, _MM_FROUND_TO_NEAREST_INT)); }

/* ggml's fp16 GELU (see gelu_ggml_ref): 0 below -10, x above 10, otherwise
 * the formula on the fp16-rounded input, rounded to fp16. */
INLINE __m256 gelu_ggml8(__m256 x)
{
    const __m256 g = round_f16(gelu8(round_f16(x)));
    const __m256 lo = _mm256_cmp_ps(x, _mm256_set1_ps(-10.0f), _CMP_LE_OQ);
    const __m256 hi = _mm256_cmp_ps(x, _mm256_set1_ps(10.0f), _CMP_GE_OQ);
    return _mm256_blendv_ps(_mm256_andnot_ps(lo, g), x, hi);
}

static void silu_avx2(float *x, int64_t n) { MAP8(x, n, silu8); }
static void gelu_avx2(float *x, int64_t n) { MAP8(x, n, gelu8); }
static void gelu_ggml_avx2(float *x, int64_t n) { MAP8(x, n, gelu_ggml8); }

static void vec_mul_avx2(float *out, const float *a, const float *b, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    for (; i < n; i++)
        out[i] = a[i] * b[i];
}

static void vec_add_avx2(float *out, const float *a, const float *b, int64_t n)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(out + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
    for (; i < n; i++)
        out[i] = a[i] + b[i];
}

static void vec_scale_avx2(float *x, int64_t n, float s)
{
    const __m256 sv = _mm256_set1_ps(s);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(x + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), sv));
    for (; i < n; i++)
        x[i] *= s;
}

/* Products in float, sum in double, as the reference. */
static float vec_dot_f32_avx2(const float *a, const float *b, int64_t n)
{
    __m256d acc0 = _mm256_setzero_pd(), acc1 = _mm256_setzero_pd();
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        acc0 = acc_pd(acc0, _mm256_mul_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
        acc1 = acc_pd(acc1, _mm256_mul_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8)));
    }
    double sum = hsum_pd(_mm256_add_pd(acc0, acc1));
    for (; i < n; i++)
        sum += (double)(a[i] * b[i]);
    return (float)sum;
}

/*
 * RoPE rotation with the angles of rope_angles (cs): x0 c - x1 s, x0 s + x1 c
 * with separate multiplies and adds, so the result has the reference's bits.
 * rope_norm's pairs (2k, 2k+1) are done as [x0 x1] * [c c] + [x1 x0] * [-s s].
 */
static void rope_avx2(float *x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float *cs, int neox)
{
    if (n_heads <= 0 || head_dim <= 0 || n_rot <= 0 || n_rot > head_dim)
        return;
    const int64_t n_pairs = n_rot / 2;
    const __m256 sign = _mm256_setr_ps(-0.0f, 0.0f, -0.0f, 0.0f, -0.0f, 0.0f, -0.0f, 0.0f);
    for (int64_t h = 0; h < n_heads; h++) {
        float *xh = x + h * head_dim;
        int64_t k = 0;
        if (neox) { /* pairs (k, k + n_rot/2); cs interleaved [c0 s0 c1 s1 ...] */
            float *xa = xh, *xb = xh + n_pairs;
            for (; k + 8 <= n_pairs; k += 8) {
                const __m256 lo = _mm256_loadu_ps(cs + 2 * k), hi = _mm256_loadu_ps(cs + 2 * k + 8);
                /* de-interleave: c = [c0..c7], s = [s0..s7] */
                const __m256 t0 = _mm256_permute2f128_ps(lo, hi, 0x20), t1 = _mm256_permute2f128_ps(lo, hi, 0x31);
                const __m256 cv = _mm256_shuffle_ps(t0, t1, 0x88), sv = _mm256_shuffle_ps(t0, t1, 0xDD);
                const __m256 x0 = _mm256_loadu_ps(xa + k), x1 = _mm256_loadu_ps(xb + k);
                _mm256_storeu_ps(xa + k, _mm256_sub_ps(_mm256_mul_ps(x0, cv), _mm256_mul_ps(x1, sv)));
                _mm256_storeu_ps(xb + k, _mm256_add_ps(_mm256_mul_ps(x0, sv), _mm256_mul_ps(x1, cv)));
            }
            for (; k < n_pairs; k++) {
                const float c = cs[2 * k], sn = cs[2 * k + 1], x0 = xa[k], x1 = xb[k];
                xa[k] = x0 * c - x1 * sn;
                xb[k] = x0 * sn + x1 * c;
            }
        } else {
            for (; k + 4 <= n_pairs; k += 4) {
                const __m256 v = _mm256_loadu_ps(xh + 2 * k), a = _mm256_loadu_ps(cs + 2 * k);
                const __m256 cc = _mm256_moveldup_ps(a);                        /* [c c] per pair */
                const __m256 ss = _mm256_xor_ps(_mm256_movehdup_ps(a), sign);   /* [-s s] per pair */
                const __m256 sw = _mm256_permute_ps(v, 0xB1);                   /* swap within pairs */
                _mm256_storeu_ps(xh + 2 * k, _mm256_add_ps(_mm256_mul_ps(v, cc), _mm256_mul_ps(sw, ss)));
            }
            for (; k < n_pairs; k++) {
                const float c = cs[2 * k], sn = cs[2 * k + 1], x0 = xh[2 * k], x1 = xh[2 * k + 1];
                xh[2 * k] = x0 * c - x1 * sn;
                xh[2 * k + 1] = x0 * sn + x1 * c;
            }
        }
    }
}

static void rope_norm_avx2(float *x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float *cs)
{
    rope_avx2(x, n_heads, head_dim, n_rot, cs, 0);
}

static void rope_neox_avx2(float *x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float *cs)
{
    rope_avx2(x, n_heads, head_dim, n_rot, cs, 1);
}

/* Two passes: the largest value (max_ps(x, m) keeps m when x is NaN), then
 * the first element equal to it.  A NaN x[0] stays the answer, as in the
 * reference's strict comparison. */
static int64_t argmax_avx2(const float *x, int64_t n)
{
    if (n <= 1 || x[0] != x[0])
        return 0;
    __m256 m0 = _mm256_set1_ps(-INFINITY), m1 = m0, m2 = m0, m3 = m0;
    int64_t i = 0;
    for (; i + 32 <= n; i += 32) {
        m0 = _mm256_max_ps(_mm256_loadu_ps(x + i), m0);
        m1 = _mm256_max_ps(_mm256_loadu_ps(x + i + 8), m1);
        m2 = _mm256_max_ps(_mm256_loadu_ps(x + i + 16), m2);
        m3 = _mm256_max_ps(_mm256_loadu_ps(x + i + 24), m3);
    }
    m0 = _mm256_max_ps(_mm256_max_ps(m0, m1), _mm256_max_ps(m2, m3));
    float lanes[8], m = x[0];
    _mm256_storeu_ps(lanes, m0);
    for (int k = 0; k < 8; k++)
        m = lanes[k] > m ? lanes[k] : m;
    for (; i < n; i++)
        m = x[i] > m ? x[i] : m;
    const __m256 mv = _mm256_set1_ps(m);
    for (i = 0; i + 8 <= n; i += 8) {
        const int hit = _mm256_movemask_ps(_mm256_cmp_ps(_mm256_loadu_ps(x + i), mv, _CMP_EQ_OQ));
        if (hit)
            return i + __builtin_ctz((unsigned)hit);
    }
    for (; i < n; i++)
        if (x[i] == m)
            return i;
    return 0; /* not reached: m is one of the elements */
}

void kernels_fill_ops_avx2(struct kernel_table *t)
{
    t->rmsnorm = rmsnorm_avx2;
    t->rope_norm = rope_norm_avx2;
    t->rope_neox = rope_neox_avx2;
    t->softmax = softmax_avx2;
    t->silu = silu_avx2;
    t->gelu = gelu_avx2;
    t->gelu_ggml = gelu_ggml_avx2;
    t->vec_mul = vec_mul_avx2;
    t->vec_add = vec_add_avx2;
    t->vec_scale = vec_scale_avx2;
    t->vec_dot_f32 = vec_dot_f32_avx2;
    t->argmax = argmax_avx2;
}
