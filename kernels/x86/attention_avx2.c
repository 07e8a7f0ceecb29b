/*
 * attention_avx2.c - causal attention over F16 K/V blocks (attention.h) in
 * AVX2 + FMA + F16C, the "avx2" variant's `attention` (the avxvnni and
 * avx512 variants use it too).  Compiled with the avx2 flags.
 *
 * Same contract as attention_ref (kernels/attention.c).  Work items are
 * (token, head) for one token and (token, up to ATTN_GROUP heads sharing a KV
 * head) for batches, each computed the same way whatever the thread count or
 * grouping.  Per head, positions are taken in chunks of
 * ATTN_CHUNK with an online softmax (running max m, running sum l, the
 * accumulator rescaled by exp(m_old - m_new) when the max grows), so no
 * buffer grows with the context:
 *   scores  s_j = scale * q . k_j, several positions and heads at a time (each
 *           k_j converted from F16 by vcvtph2ps once for the group's heads);
 *   softmax e_j = exp(s_j - m) with sleef's expf (1 ulp), l summed in double;
 *   values  acc += e_j v_j, 64 dims (over the group's heads) in registers.
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
#include "../quants.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")

#define ATTN_CHUNK 256  /* positions per online-softmax step */
#define ATTN_MAX_DIM 1024

/* The row of position pos of KV head kvh, K (V = 0) or V (V = 1), its
 * elements F16 or (Q = 1) Q8_0 blocks. */
INLINE const uint8_t *kv_row(const struct attn_kv *kv, const int32_t *blocks, const int V, const int Q, int kvh,
                             int64_t pos, int head_dim)
{
    const size_t hb = V && kv->head_bytes_v ? kv->head_bytes_v : kv->head_bytes;
    const size_t rb = Q ? (size_t)(head_dim / 32) * sizeof(block_q8_0) : (size_t)head_dim * sizeof(uint16_t);
    const uint8_t *blk = kv->base + (size_t)blocks[pos / kv->block_tokens] * kv->block_bytes;
    return blk + (V ? kv->v_off : kv->k_off) + (size_t)kvh * hb + (size_t)(pos % kv->block_tokens) * rb;
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

/* Eight elements of a K/V row at d: F16, or (Q) q * d of a Q8_0 block (a
 * Q8_0 row's head_dim is a multiple of 32, so eight never straddle two). */
INLINE __m256 ld8kv(const int Q, const uint8_t *row, int d, int n)
{
    if (!Q)
        return ld8h((const uint16_t *)row, d, n);
    const block_q8_0 *b = (const block_q8_0 *)row + d / 32;
    uint16_t dh;
    memcpy(&dh, &b->d, 2);
    const __m256 q = _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i *)(b->qs + d % 32))));
    return _mm256_mul_ps(q, _mm256_set1_ps(_cvtsh_ss(dh)));
}

INLINE __m256 ld8f(const float *p, int d, int n)
{
    if (d + 8 <= n)
        return _mm256_loadu_ps(p + d);
    float tmp[8] = {0};
    memcpy(tmp, p + d, (size_t)(n - d) * 4);
    return _mm256_loadu_ps(tmp);
}

/* The query heads of one KV head are done together, up to ATTN_GROUP at a
 * time, so that each K and V row is loaded and converted once for all of
 * them.  Per head the operations are the same whatever G, so grouping (used
 * for batches) and single heads (decode) give the same bits. */
#define ATTN_GROUP 4

/* s[g][i] = scale * q_g . k_{j0 + i} for heads g < G (q_g at q + g * head_dim)
 * and i < m; 8 / G positions at a time (8 accumulators). */
INLINE void scores(const int G, const int KQ, float (*s)[ATTN_CHUNK], const float *q, const struct attn_kv *kv,
                   const int32_t *blocks, int kvh, int64_t j0, int m, int head_dim, float scale)
{
    const int P = 8 / G;
    for (int i0 = 0; i0 < m; i0 += P) {
        const int np = m - i0 < P ? m - i0 : P;
        const uint8_t *k[8];
        __m256 acc[4][8];
        UNROLL
        for (int p = 0; p < P; p++) {
            k[p] = kv_row(kv, blocks, 0, KQ, kvh, j0 + i0 + (p < np ? p : 0), head_dim);
            UNROLL
            for (int g = 0; g < G; g++)
                acc[g][p] = _mm256_setzero_ps();
        }
        for (int d = 0; d < head_dim; d += 8) {
            __m256 kv8[8];
            UNROLL
            for (int p = 0; p < P; p++)
                kv8[p] = ld8kv(KQ, k[p], d, head_dim);
            UNROLL
            for (int g = 0; g < G; g++) {
                const __m256 qv = ld8f(q + (size_t)g * (size_t)head_dim, d, head_dim);
                UNROLL
                for (int p = 0; p < P; p++)
                    acc[g][p] = _mm256_fmadd_ps(qv, kv8[p], acc[g][p]);
            }
        }
        /* the G x P (<= 8) horizontal sums at once: a tree of hadds */
        __m256 v[8];
        UNROLL
        for (int x = 0; x < 8; x++)
            v[x] = x < G * P ? acc[x / P][x % P] : _mm256_setzero_ps();
        const __m256 h0 = _mm256_hadd_ps(_mm256_hadd_ps(v[0], v[1]), _mm256_hadd_ps(v[2], v[3]));
        const __m256 h1 = _mm256_hadd_ps(_mm256_hadd_ps(v[4], v[5]), _mm256_hadd_ps(v[6], v[7]));
        float sums[8];
        _mm256_storeu_ps(sums, _mm256_add_ps(_mm256_permute2f128_ps(h0, h1, 0x20),
                                             _mm256_permute2f128_ps(h0, h1, 0x31)));
        UNROLL
        for (int g = 0; g < G; g++)
            UNROLL
            for (int p = 0; p < P; p++)
                if (p < np)
                    s[g][i0 + p] = sums[g * P + p] * scale;
    }
}

/* acc_g[d] = acc_g[d] * f[g] + sum_i e[g][i] v_{j0 + i}[d] for heads g < G,
 * 64 / G dims at a time (8 accumulators). */
INLINE void values(const int G, const int VQ, float (*acc)[ATTN_MAX_DIM], const float *f, float (*e)[ATTN_CHUNK],
                   const struct attn_kv *kv, const int32_t *blocks, int kvh, int64_t j0, int m, int head_dim)
{
    const int C = 8 / G; /* vectors of 8 dims per head */
    for (int d0 = 0; d0 < head_dim; d0 += 8 * C) {
        __m256 a[4][8];
        UNROLL
        for (int g = 0; g < G; g++)
            UNROLL
            for (int c = 0; c < C; c++)
                a[g][c] = d0 + 8 * c < head_dim ? _mm256_mul_ps(ld8f(acc[g], d0 + 8 * c, head_dim), _mm256_set1_ps(f[g]))
                                                : _mm256_setzero_ps();
        for (int i = 0; i < m; i++) {
            const uint8_t *v = kv_row(kv, blocks, 1, VQ, kvh, j0 + i, head_dim);
            __m256 vv[8];
            UNROLL
            for (int c = 0; c < C; c++)
                vv[c] = d0 + 8 * c < head_dim ? ld8kv(VQ, v, d0 + 8 * c, head_dim) : _mm256_setzero_ps();
            UNROLL
            for (int g = 0; g < G; g++) {
                const __m256 w = _mm256_set1_ps(e[g][i]);
                UNROLL
                for (int c = 0; c < C; c++)
                    a[g][c] = _mm256_fmadd_ps(w, vv[c], a[g][c]);
            }
        }
        UNROLL
        for (int g = 0; g < G; g++) {
            UNROLL
            for (int c = 0; c < C; c++) {
                const int d = d0 + 8 * c;
                if (d + 8 <= head_dim) {
                    _mm256_storeu_ps(acc[g] + d, a[g][c]);
                } else if (d < head_dim) {
                    float tmp[8];
                    _mm256_storeu_ps(tmp, a[g][c]);
                    memcpy(acc[g] + d, tmp, (size_t)(head_dim - d) * 4);
                }
            }
        }
    }
}

/* e = exp(s - m) in place for i < n (n <= ATTN_CHUNK), returning sum(e) in
 * double. */
static double exp_sum(float *s, int n, float m)
{
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
    const __m128d h = _mm_add_pd(_mm256_castpd256_pd128(sum), _mm256_extractf128_pd(sum, 1));
    return _mm_cvtsd_f64(_mm_add_sd(h, _mm_unpackhi_pd(h, h)));
}

/* G query heads (q, out: G consecutive heads of head_dim) of one KV head,
 * over positions [first, pos]. */
INLINE void attend(const int G, const int KQ, const int VQ, float *out, const float *q, const struct attn_kv *kv,
                   const int32_t *blocks, int kvh, int64_t first, int64_t pos, int head_dim, float scale)
{
    float s[ATTN_GROUP][ATTN_CHUNK] __attribute__((aligned(32)));
    float acc[ATTN_GROUP][ATTN_MAX_DIM] __attribute__((aligned(32)));
    float m[ATTN_GROUP], f[ATTN_GROUP];
    double l[ATTN_GROUP];
    for (int g = 0; g < G; g++) {
        memset(acc[g], 0, (size_t)head_dim * sizeof(float));
        m[g] = -INFINITY;
        l[g] = 0.0;
    }
    for (int64_t j0 = first; j0 <= pos; j0 += ATTN_CHUNK) {
        const int n = pos + 1 - j0 < ATTN_CHUNK ? (int)(pos + 1 - j0) : ATTN_CHUNK;
        scores(G, KQ, s, q, kv, blocks, kvh, j0, n, head_dim, scale);
        for (int g = 0; g < G; g++) {
            float mc = m[g];
            for (int i = 0; i < n; i++)
                mc = s[g][i] > mc ? s[g][i] : mc;
            /* the first chunk sets the max (factor 0 on an empty accumulator) */
            f[g] = m[g] == -INFINITY ? 0.0f : expf(m[g] - mc);
            m[g] = mc;
            l[g] = l[g] * (double)f[g] + exp_sum(s[g], n, mc);
        }
        values(G, VQ, acc, f, s, kv, blocks, kvh, j0, n, head_dim);
    }
    for (int g = 0; g < G; g++) {
        const float inv = (float)(1.0 / l[g]);
        for (int d = 0; d < head_dim; d++)
            out[(size_t)g * (size_t)head_dim + (size_t)d] = acc[g][d] * inv;
    }
}

#define ATTEND_G(KQ, VQ)                                                                                      \
    switch (G) {                                                                                              \
    case 1: attend(1, KQ, VQ, out, q, kv, blocks, kvh, first, pos, head_dim, scale); break;                   \
    case 2: attend(2, KQ, VQ, out, q, kv, blocks, kvh, first, pos, head_dim, scale); break;                   \
    case 3: attend(3, KQ, VQ, out, q, kv, blocks, kvh, first, pos, head_dim, scale); break;                   \
    default: attend(4, KQ, VQ, out, q, kv, blocks, kvh, first, pos, head_dim, scale); break;                  \
    }

static void attend_heads(int G, float *out, const float *q, const struct attn_kv *kv, const int32_t *blocks, int kvh,
                         int64_t first, int64_t pos, int head_dim, float scale)
{
    if (!kv->k_q8 && !kv->v_q8) {
        ATTEND_G(0, 0)
    } else if (kv->k_q8 && kv->v_q8) {
        ATTEND_G(1, 1)
    } else if (kv->k_q8) {
        ATTEND_G(1, 0)
    } else {
        ATTEND_G(0, 1)
    }
}
#undef ATTEND_G

/* Work items: (token, head) for a single token (decode: the heads give the
 * parallelism), (token, group of up to ATTN_GROUP heads of one KV head) for
 * batches. */
static void attention_avx2(float *out, const float *q, int64_t n_tok, const struct attn_kv *kv, int n_head,
                           int n_head_kv, int head_dim, float scale, int window)
{
    if (head_dim > ATTN_MAX_DIM || head_dim <= 0 || ((kv->k_q8 || kv->v_q8) && head_dim % 32)) {
        attention_ref(out, q, n_tok, kv, n_head, n_head_kv, head_dim, scale, window);
        return;
    }
    const int group = n_head / n_head_kv;
    const int G = n_tok > 1 ? (group < ATTN_GROUP ? group : ATTN_GROUP) : 1;
    const int per_kv = (group + G - 1) / G; /* items per KV head: they never straddle two */
#pragma omp parallel for collapse(2) schedule(static, 1)
    for (int64_t t = 0; t < n_tok; t++) {
        for (int it = 0; it < n_head_kv * per_kv; it++) {
            const int kvh = it / per_kv, h0 = kvh * group + (it % per_kv) * G;
            const int g = group - (h0 - kvh * group) < G ? group - (h0 - kvh * group) : G;
            const int64_t pos = kv->pos[t];
            const int64_t first = window > 0 && pos - window + 1 > 0 ? pos - window + 1 : 0;
            const size_t o = ((size_t)t * (size_t)n_head + (size_t)h0) * (size_t)head_dim;
            attend_heads(g, out + o, q + o, kv, kv->blocks[t], kvh, first, pos, head_dim, scale);
        }
    }
}

void kernels_fill_attention_avx2(struct kernel_table *t) { t->attention = attention_avx2; }
