/*
 * attention_avx2.c - causal attention over F16 K/V blocks (attention.h) in
 * AVX2 + FMA + F16C, the "avx2" variant's `attention` (the avxvnni and
 * avx512 variants use it too).  Compiled with the avx2 flags.
 *
 * Same contract as attention_ref (kernels/attention.c) and the same work
 * split: one (token, head) pair per OpenMP work item, each computed the same
 * way whatever the thread count.  Per pair, positions are taken in chunks of
 * ATTN_CHUNK with an online softmax (running max m, running sum l, the
 * accumulator rescaled by exp(m_old - m_new) when the max grows), so no
 * buffer grows with the context:
 *   scores  s_j = scale * q . k_j, four positions at a time (q read once per
 *           8 dims for all four), k_j converted from F16 by vcvtph2ps;
 *   softmax e_j = exp(s_j - m) with sleef's expf (1 ulp), l summed in double;
 *   values  acc += e_j v_j, 64 dims at a time held in registers.
 * Contexts of at most ATTN_CHUNK positions follow the reference's steps
 * (max, exp, double sum, weighted sum, one scale); longer ones differ by the
 * rescaling's rounding.  The dot products use fma in 8 lanes instead of the
 * reference's sequential float sum: results agree to ~1e-6 relative
 * (tests/test-kernels-simd.c).  Heads wider than ATTN_MAX_DIM fall back to
 * attention_ref.
 */
#include <immintrin.h>
#include <math.h>
#include <sleef.h>
#include <string.h>

#include "../attention.h"
#include "../dispatch.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")

#define ATTN_CHUNK 256  /* positions per online-softmax step */
#define ATTN_MAX_DIM 1024

INLINE const uint16_t *kv_row(const struct attn_kv *kv, const int32_t *blocks, size_t off, int kvh, int64_t pos,
                              int head_dim)
{
    const uint8_t *blk = kv->base + (size_t)blocks[pos / kv->block_tokens] * kv->block_bytes;
    return (const uint16_t *)(blk + off + (size_t)kvh * kv->head_bytes) +
           (size_t)(pos % kv->block_tokens) * (size_t)head_dim;
}

INLINE float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Eight halves at p[d], zero past n (the head's last chunk). */
INLINE __m256 ld8h(const uint16_t *p, int d, int n)
{
    if (d + 8 <= n)
        return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(p + d)));
    uint16_t tmp[8] = {0};
    memcpy(tmp, p + d, (size_t)(n - d) * 2);
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)tmp));
}

INLINE __m256 ld8f(const float *p, int d, int n)
{
    if (d + 8 <= n)
        return _mm256_loadu_ps(p + d);
    float tmp[8] = {0};
    memcpy(tmp, p + d, (size_t)(n - d) * 4);
    return _mm256_loadu_ps(tmp);
}

/* s[i] = scale * q . k_{j0 + i} for i < m. */
static void scores(float *s, const float *q, const struct attn_kv *kv, const int32_t *blocks, int kvh, int64_t j0,
                   int m, int head_dim, float scale)
{
    int i = 0;
    for (; i + 4 <= m; i += 4) {
        const uint16_t *k[4];
        __m256 acc[4];
        UNROLL
        for (int r = 0; r < 4; r++) {
            k[r] = kv_row(kv, blocks, kv->k_off, kvh, j0 + i + r, head_dim);
            acc[r] = _mm256_setzero_ps();
        }
        for (int d = 0; d < head_dim; d += 8) {
            const __m256 qv = ld8f(q, d, head_dim);
            UNROLL
            for (int r = 0; r < 4; r++)
                acc[r] = _mm256_fmadd_ps(qv, ld8h(k[r], d, head_dim), acc[r]);
        }
        UNROLL
        for (int r = 0; r < 4; r++)
            s[i + r] = hsum(acc[r]) * scale;
    }
    for (; i < m; i++) {
        const uint16_t *k = kv_row(kv, blocks, kv->k_off, kvh, j0 + i, head_dim);
        __m256 acc = _mm256_setzero_ps();
        for (int d = 0; d < head_dim; d += 8)
            acc = _mm256_fmadd_ps(ld8f(q, d, head_dim), ld8h(k, d, head_dim), acc);
        s[i] = hsum(acc) * scale;
    }
}

/* acc[d] = acc[d] * f + sum_i e[i] v_{j0 + i}[d], 64 dims at a time. */
static void values(float *acc, float f, const float *e, const struct attn_kv *kv, const int32_t *blocks, int kvh,
                   int64_t j0, int m, int head_dim)
{
    for (int d0 = 0; d0 < head_dim; d0 += 64) {
        __m256 a[8];
        UNROLL
        for (int c = 0; c < 8; c++)
            a[c] = d0 + 8 * c < head_dim ? _mm256_mul_ps(ld8f(acc, d0 + 8 * c, head_dim), _mm256_set1_ps(f))
                                         : _mm256_setzero_ps();
        for (int i = 0; i < m; i++) {
            const uint16_t *v = kv_row(kv, blocks, kv->v_off, kvh, j0 + i, head_dim);
            const __m256 w = _mm256_set1_ps(e[i]);
            UNROLL
            for (int c = 0; c < 8; c++)
                if (d0 + 8 * c < head_dim)
                    a[c] = _mm256_fmadd_ps(w, ld8h(v, d0 + 8 * c, head_dim), a[c]);
        }
        UNROLL
        for (int c = 0; c < 8; c++) {
            const int d = d0 + 8 * c;
            if (d + 8 <= head_dim) {
                _mm256_storeu_ps(acc + d, a[c]);
            } else if (d < head_dim) {
                float tmp[8];
                _mm256_storeu_ps(tmp, a[c]);
                memcpy(acc + d, tmp, (size_t)(head_dim - d) * 4);
            }
        }
    }
}

/* One (token, head): out[d] over positions [first, pos]. */
static void attend(float *out, const float *q, const struct attn_kv *kv, const int32_t *blocks, int kvh,
                   int64_t first, int64_t pos, int head_dim, float scale)
{
    float s[ATTN_CHUNK] __attribute__((aligned(32)));
    float acc[ATTN_MAX_DIM] __attribute__((aligned(32)));
    memset(acc, 0, (size_t)head_dim * sizeof(float));
    float m = -INFINITY;
    double l = 0.0;
    for (int64_t j0 = first; j0 <= pos; j0 += ATTN_CHUNK) {
        const int n = pos + 1 - j0 < ATTN_CHUNK ? (int)(pos + 1 - j0) : ATTN_CHUNK;
        scores(s, q, kv, blocks, kvh, j0, n, head_dim, scale);
        float mc = m;
        for (int i = 0; i < n; i++)
            mc = s[i] > mc ? s[i] : mc;
        /* the first chunk sets the max (factor 0 * empty accumulator) */
        const float f = m == -INFINITY ? 0.0f : expf(m - mc);
        l *= (double)f;
        m = mc;
        const __m256 mv = _mm256_set1_ps(m);
        __m256d sum = _mm256_setzero_pd();
        for (int i = 0; i < n; i += 8) {
            __m256 x = i + 8 <= n ? _mm256_load_ps(s + i) : ld8f(s + i, 0, n - i);
            x = Sleef_expf8_u10avx2(_mm256_sub_ps(x, mv));
            if (i + 8 > n) { /* padding lanes must add nothing */
                const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
                x = _mm256_and_ps(x, _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(n - i), lane)));
            }
            _mm256_store_ps(s + i, x);
            sum = _mm256_add_pd(sum, _mm256_cvtps_pd(_mm256_castps256_ps128(x)));
            sum = _mm256_add_pd(sum, _mm256_cvtps_pd(_mm256_extractf128_ps(x, 1)));
        }
        __m128d h = _mm_add_pd(_mm256_castpd256_pd128(sum), _mm256_extractf128_pd(sum, 1));
        l += _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
        values(acc, f, s, kv, blocks, kvh, j0, n, head_dim);
    }
    const float inv = (float)(1.0 / l);
    for (int d = 0; d < head_dim; d++)
        out[d] = acc[d] * inv;
}

static void attention_avx2(float *out, const float *q, int64_t n_tok, const struct attn_kv *kv, int n_head,
                           int n_head_kv, int head_dim, float scale, int window)
{
    if (head_dim > ATTN_MAX_DIM || head_dim <= 0) {
        attention_ref(out, q, n_tok, kv, n_head, n_head_kv, head_dim, scale, window);
        return;
    }
    const int group = n_head / n_head_kv;
#pragma omp parallel for collapse(2) schedule(static)
    for (int64_t t = 0; t < n_tok; t++) {
        for (int h = 0; h < n_head; h++) {
            const int64_t pos = kv->pos[t];
            const int64_t first = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
            const size_t o = ((size_t)t * (size_t)n_head + (size_t)h) * (size_t)head_dim;
            attend(out + o, q + o, kv, kv->blocks[t], h / group, first, pos, head_dim, scale);
        }
    }
}

void kernels_fill_attention_avx2(struct kernel_table *t) { t->attention = attention_avx2; }
