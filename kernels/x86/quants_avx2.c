/*
 * quants_avx2.c - AVX2 + FMA + F16C dot products, gemm tiles and activation
 * quantizers (the "avx2" variant; Haswell and later, Zen, Intel N100/N150).
 *
 * Compiled with -mavx2 -mfma -mf16c -ffp-contract=off (Makefile.am); nothing
 * here runs unless dispatch.c found those instructions.
 *
 * Integer types (Q4_0, Q5_0, Q8_0, IQ4_NL x Q8_0; Q4_K, Q5_K, Q6_K x Q8_K;
 * Q2_K, Q3_K, IQ4_XS x Q8_K through lowbit_body.h): the
 * integer sum of each block (32 elements) or super-block (256) is computed
 * exactly with maddubs/madd, reduced to one integer per (row, token), and
 * then scaled and added in float in exactly the reference's order
 * (quants.c).  So these dots give the reference's bits: every variant agrees
 * with the specification and with every other variant.
 *
 * The reduction of eight int32 lanes to one is the expensive step, so it is
 * done for four vectors at once (reduce4): a gemm tile reduces over its four
 * tokens (one row at a time, nt >= 2) or, for a single token, over its four
 * rows.  The float updates then run in the lanes of an __m128 (tokens or
 * rows), op for op as the scalar reference does them.
 *
 * maddubs multiplies unsigned by signed bytes and saturates pairs to int16;
 * every use below keeps |pair| <= 2*128*127 < 32767 (signed weights through
 * the abs/sign trick, 4-6 bit unsigned quants as they are; activations are
 * in [-127, 127] by construction of our quantizers).
 *
 * The many-token path (gemm_many) is in gemm_avx2.c; this file's gemm tiles
 * serve decode (one token: four rows reduced together) and small batches.
 *
 * Float types (F32, F16, BF16): one 8-lane fma accumulator per (row, token),
 * chunks of 8 in order, a zero-padded last chunk, and a fixed horizontal
 * sum, shared by vec_dot and gemm; rounding differs from the reference's
 * double accumulation by ~n * 2^-24 relative (the tests' threshold).
 */
#include <immintrin.h>
#include <math.h>
#include <string.h>

#include "../dispatch.h"
#include "../quants.h"
#include "x86_util.h"

/* ------------------------------ helpers ------------------------------ */

/* Sum of eight floats in a fixed order. */
INLINE float hsum_ps(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

/* Lanes of per-(row, token) int32 vectors: sum_i w_i a_i over each group of
 * four bytes, w signed (|w| <= 128), a signed (|a| <= 127). */
INLINE __m256i dot_s8(__m256i w, __m256i wabs, __m256i a)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(wabs, _mm256_sign_epi8(a, w)), _mm256_set1_epi16(1));
}


/* --------------------- 32-element blocks x Q8_0 --------------------- */

/* a row's block for the abs/sign dot: signed weights and their magnitudes */
struct w32 {
    __m256i w, wabs;
};
#define W32_PREP(type, blk, wp) ((wp)->w = w32_signed(type, blk), (wp)->wabs = _mm256_abs_epi8((wp)->w))
#define W32_CORR(type, a) _mm256_setzero_si256()
#define W32_DOT(wp, a, corr) ((void)(corr), dot_s8((wp)->w, (wp)->wabs, a))
#include "gemm32_avx2.h"

/* gemv32_x4: four Q4_0 / Q5_0 rows against one token (gemv_x4_avx2.h; its x4
 * tiles for Q4_0, Q5_0 and IQ4_NL: 1-4 tokens),
 * the pair dots on maddubs + madd. */
#define X4_DOT(lo, a0, hi, a1)                                                                                  \
    _mm256_madd_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(lo, a0), _mm256_maddubs_epi16(hi, a1)),             \
                      _mm256_set1_epi16(1))
#define X4_DOT16(lo, a0, hi, a1) _mm256_add_epi16(_mm256_maddubs_epi16(lo, a0), _mm256_maddubs_epi16(hi, a1))
#define X4_WIDEN16(v) _mm256_madd_epi16(v, _mm256_set1_epi16(1))
#include "gemv_x4_avx2.h"
DEFINE_GEMM_X4P(gemm_q4_0x4, GGML_TYPE_Q4_0)
DEFINE_GEMM_X4P(gemm_q5_0x4, GGML_TYPE_Q5_0)
DEFINE_GEMM_X4Q(gemm_q4_0x4q, prep_q4_0x4, GGML_TYPE_Q4_0)
DEFINE_GEMM_X4Q(gemm_q5_0x4q, prep_q5_0x4, GGML_TYPE_Q5_0)
DEFINE_GEMM_X4P(gemm_iq4_nlx4, GGML_TYPE_IQ4_NL)
DEFINE_GEMM_X4Q(gemm_iq4_nlx4q, prep_iq4_nlx4, GGML_TYPE_IQ4_NL)

/* The gemm entry of a kernel family: full tiles of GEMM_ROWS rows, nt tokens,
 * dispatched to constant-shape instances of CORE(type, NR, NT, ...). */
#define DEFINE_GEMM(NAME, CORE, TYPE)                                                                         \
    static void NAME(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, \
                     int nt)                                                                                  \
    {                                                                                                         \
        switch (nt) {                                                                                         \
        case 1: CORE(TYPE, 4, 1, n, w, w_row, a, a_row, y, ys); break;                                        \
        case 2: CORE(TYPE, 4, 2, n, w, w_row, a, a_row, y, ys); break;                                        \
        case 3: CORE(TYPE, 4, 3, n, w, w_row, a, a_row, y, ys); break;                                        \
        default: CORE(TYPE, 4, 4, n, w, w_row, a, a_row, y, ys); break;                                       \
        }                                                                                                     \
    }
#define DEFINE_DOT(NAME, CORE, TYPE)                                                                          \
    static float NAME(int64_t n, const void *w, const void *a)                                                \
    {                                                                                                         \
        float y;                                                                                              \
        CORE(TYPE, 1, 1, n, w, 0, a, 0, &y, 1);                                                               \
        return y;                                                                                             \
    }

/* Q4_0 / Q5_0: one token through gemv32_x4. */
#define DEFINE_GEMM_X4(NAME, TYPE)                                                                            \
    static void NAME(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, \
                     int nt)                                                                                  \
    {                                                                                                         \
        switch (nt) {                                                                                         \
        case 1: gemv32_x4(TYPE, n, w, w_row, a, y); break;                                                    \
        case 2: gemm32(TYPE, 4, 2, n, w, w_row, a, a_row, y, ys); break;                                      \
        case 3: gemm32(TYPE, 4, 3, n, w, w_row, a, a_row, y, ys); break;                                      \
        default: gemm32(TYPE, 4, 4, n, w, w_row, a, a_row, y, ys); break;                                     \
        }                                                                                                     \
    }
DEFINE_GEMM_X4(gemm_q4_0, GGML_TYPE_Q4_0)
DEFINE_GEMM_X4(gemm_q5_0, GGML_TYPE_Q5_0)
DEFINE_GEMM(gemm_q8_0, gemm32, GGML_TYPE_Q8_0)
DEFINE_DOT(vec_dot_q4_0, gemm32, GGML_TYPE_Q4_0)
DEFINE_DOT(vec_dot_q5_0, gemm32, GGML_TYPE_Q5_0)
DEFINE_DOT(vec_dot_q8_0, gemm32, GGML_TYPE_Q8_0)
DEFINE_GEMM(gemm_iq4_nl, gemm32, GGML_TYPE_IQ4_NL)
DEFINE_DOT(vec_dot_iq4_nl, gemm32, GGML_TYPE_IQ4_NL)

/* ----------------------- K-quants x Q8_K ----------------------- */

#define K_MADD_ACC(acc, p, s) _mm256_add_epi32(acc, _mm256_madd_epi16(p, s))
#define K_TOK_VNNI 0
#include "gemmk_avx2.h"
#define Q6X_W 256
#define Q6X_SPLIT 5 /* madd + add: a row pair per pass measured no faster */
#define Q6X_QWORDS /* 2-4 tokens: rows in 64-bit lanes (gemm6_x4t) */
/* one token too: two vpmaddubsw added in int16 before one vpmaddwd per
 * four rows' sub-block, 12 multiplies per 256 products where the
 * lanes-are-rows path needs 16.  On an EPYC (Zen 3, avx2) bench-kernels -t 1
 * -c -b -r 25 -n 1 -T q6_Kx4: 1.05-1.08x in CPU time (2048x8192, 8192x2048),
 * hot 24.2 -> 25.8 GB/s, cold 19.3 -> 20.5-20.9 GB/s.  Same bits. */
#define Q6X_TOKENS_MIN 1
#include "gemm_q6kx4_body.h"

DEFINE_GEMM(gemm_q4_K, gemmK, GGML_TYPE_Q4_K)
DEFINE_GEMM(gemm_q5_K, gemmK, GGML_TYPE_Q5_K)
DEFINE_GEMM(gemm_q6_K, gemmK, GGML_TYPE_Q6_K)
DEFINE_DOT(vec_dot_q4_K, gemmK, GGML_TYPE_Q4_K)
DEFINE_DOT(vec_dot_q5_K, gemmK, GGML_TYPE_Q5_K)
DEFINE_DOT(vec_dot_q6_K, gemmK, GGML_TYPE_Q6_K)

/* --------------------- Q2_K / Q3_K / IQ4_XS x Q8_K --------------------- */

#define LB_WIDTH 256
#define LB_VNNI 0
#include "lowbit_x86.h"
/* Q3_K x4: rows in 64-bit lanes, 1-4 tokens */
#include "gemm_q3kx4_avx2.h"

/* ------------------------- F32 / F16 / BF16 ------------------------- */

/* Eight elements of a float row at i, as floats; the last chunk of a row
 * (m < 8 elements) is zero-padded. */
INLINE __m256 loadf(const int type, const uint8_t *row, int64_t i, int m)
{
    if (m == 8) {
        if (type == GGML_TYPE_F32)
            return _mm256_loadu_ps((const float *)row + i);
        const __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)row + i));
        if (type == GGML_TYPE_F16)
            return _mm256_cvtph_ps(h);
        return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
    }
    uint16_t tmp16[8] = {0};
    float tmp32[8] = {0};
    if (type == GGML_TYPE_F32) {
        memcpy(tmp32, (const float *)row + i, (size_t)m * 4);
        return _mm256_loadu_ps(tmp32);
    }
    memcpy(tmp16, (const uint16_t *)row + i, (size_t)m * 2);
    const __m128i h = _mm_loadu_si128((const __m128i *)tmp16);
    if (type == GGML_TYPE_F16)
        return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* R rows x NT tokens of float dots (R * NT <= 8 accumulators). */
INLINE void gemmf_part(const int type, const int R, const int NT, int64_t n, const uint8_t *w, size_t w_row,
                       const uint8_t *a, size_t a_row, float *y, size_t ys)
{
    __m256 acc[4][4];
    UNROLL
    for (int r = 0; r < R; r++)
        UNROLL
        for (int t = 0; t < NT; t++)
            acc[r][t] = _mm256_setzero_ps();
    for (int64_t i = 0; i < n; i += 8) {
        const int m = n - i < 8 ? (int)(n - i) : 8;
        __m256 wv[4];
        UNROLL
        for (int r = 0; r < R; r++)
            wv[r] = loadf(type, w + (size_t)r * w_row, i, m);
        UNROLL
        for (int t = 0; t < NT; t++) {
            const __m256 av = loadf(type, a + (size_t)t * a_row, i, m);
            UNROLL
            for (int r = 0; r < R; r++)
                acc[r][t] = _mm256_fmadd_ps(wv[r], av, acc[r][t]);
        }
    }
    UNROLL
    for (int r = 0; r < R; r++)
        UNROLL
        for (int t = 0; t < NT; t++)
            y[(size_t)t * ys + (size_t)r] = hsum_ps(acc[r][t]);
}

INLINE void gemmf(const int type, const int NR, const int NT, int64_t n, const uint8_t *w, size_t w_row,
                  const uint8_t *a, size_t a_row, float *y, size_t ys)
{
    if (NR * NT <= 8) {
        gemmf_part(type, NR, NT, n, w, w_row, a, a_row, y, ys);
    } else { /* two row pairs, to keep the accumulators in registers */
        gemmf_part(type, 2, NT, n, w, w_row, a, a_row, y, ys);
        gemmf_part(type, NR - 2, NT, n, w + 2 * w_row, w_row, a, a_row, y + 2, ys);
    }
}

DEFINE_GEMM(gemm_f32, gemmf, GGML_TYPE_F32)
DEFINE_GEMM(gemm_f16, gemmf, GGML_TYPE_F16)
DEFINE_GEMM(gemm_bf16, gemmf, GGML_TYPE_BF16)
DEFINE_DOT(vec_dot_f32, gemmf, GGML_TYPE_F32)
DEFINE_DOT(vec_dot_f16, gemmf, GGML_TYPE_F16)
DEFINE_DOT(vec_dot_bf16, gemmf, GGML_TYPE_BF16)

/* ---------------------- activation quantizers ---------------------- */

/* Eight floats -> int32, rounding half away from zero as roundf does:
 * adding the largest float below 0.5 (with x's sign) and truncating is exact
 * for |x| < 2^23. */
INLINE __m256i round_away(__m256 x)
{
    const __m256 sign = _mm256_and_ps(x, _mm256_set1_ps(-0.0f));
    const __m256 h = _mm256_or_ps(sign, _mm256_set1_ps(0.49999997f));
    return _mm256_cvttps_epi32(_mm256_add_ps(x, h));
}

/* 32 int32 (four vectors) -> 32 int8 in order (values fit: no saturation). */
INLINE __m256i pack32(__m256i i0, __m256i i1, __m256i i2, __m256i i3)
{
    const __m256i p01 = _mm256_packs_epi32(i0, i1), p23 = _mm256_packs_epi32(i2, i3);
    const __m256i p = _mm256_packs_epi16(p01, p23); /* lanes interleaved: 0 2 4 6 1 3 5 7 (dwords) */
    return _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

INLINE float hmax_ps(__m256 v)
{
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_movehdup_ps(m));
    return _mm_cvtss_f32(m);
}

/* Same bytes as quantize_row_q8_0_ref: d = amax/127, q = roundf(x * (1/d)). */
static void quantize_q8_0(const float *src, void *dst, int64_t n)
{
    block_q8_0 *y = dst;
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t b = 0; b < n / QK8_0; b++, src += QK8_0) {
        __m256 v[4];
        __m256 amax = _mm256_setzero_ps();
        UNROLL
        for (int k = 0; k < 4; k++) {
            v[k] = _mm256_loadu_ps(src + 8 * k);
            amax = _mm256_max_ps(amax, _mm256_and_ps(v[k], abs_mask));
        }
        const float d = hmax_ps(amax) / 127;
        const float id = d != 0.0f ? 1.0f / d : 0.0f;
        const uint16_t dh = _cvtss_sh(d, _MM_FROUND_TO_NEAREST_INT);
        memcpy(&y[b].d, &dh, 2);
        const __m256 idv = _mm256_set1_ps(id);
        __m256i q[4];
        UNROLL
        for (int k = 0; k < 4; k++)
            q[k] = round_away(_mm256_mul_ps(v[k], idv));
        _mm256_storeu_si256((__m256i *)y[b].qs, pack32(q[0], q[1], q[2], q[3]));
    }
}

/* Same bytes as quantize_row_q8_K_ref: scale -127/max where max is the
 * first value of largest magnitude, round half to even, bsums. */
static void quantize_q8_K(const float *src, void *dst, int64_t n)
{
    block_q8_K *y = dst;
    const __m256 abs_mask = _mm256_castsi256_ps(_mm256_set1_epi32(0x7fffffff));
    for (int64_t b = 0; b < n / QK_K; b++, src += QK_K) {
        __m256 amaxv = _mm256_setzero_ps();
        for (int k = 0; k < QK_K / 8; k++)
            amaxv = _mm256_max_ps(amaxv, _mm256_and_ps(_mm256_loadu_ps(src + 8 * k), abs_mask));
        const float amax = hmax_ps(amaxv);
        if (amax == 0.0f) {
            memset(&y[b], 0, sizeof(y[b]));
            continue;
        }
        float max = 0.0f;
        const __m256 amv = _mm256_set1_ps(amax);
        for (int k = 0; k < QK_K / 8; k++) { /* the first element of that magnitude keeps its sign */
            const int m = _mm256_movemask_ps(
                _mm256_cmp_ps(_mm256_and_ps(_mm256_loadu_ps(src + 8 * k), abs_mask), amv, _CMP_EQ_OQ));
            if (m) {
                max = src[8 * k + __builtin_ctz((unsigned)m)];
                break;
            }
        }
        const float iscale = -127.f / max;
        const __m256 is = _mm256_set1_ps(iscale);
        for (int g = 0; g < QK_K / 32; g++) {
            __m256i q[4];
            UNROLL
            for (int k = 0; k < 4; k++) {
                const __m256 x = _mm256_mul_ps(_mm256_loadu_ps(src + 32 * g + 8 * k), is);
                q[k] = _mm256_min_epi32(_mm256_cvtps_epi32(x), _mm256_set1_epi32(127)); /* nearest even */
            }
            const __m256i q8 = pack32(q[0], q[1], q[2], q[3]);
            _mm256_storeu_si256((__m256i *)(y[b].qs + 32 * g), q8);
            /* bsums of the two groups of 16 */
            const __m256i s16 = _mm256_maddubs_epi16(_mm256_set1_epi8(1), q8);
            const __m256i s32 = _mm256_madd_epi16(s16, _mm256_set1_epi16(1)); /* 4 per 128-bit lane */
            const __m256i h1 = _mm256_hadd_epi32(s32, s32);
            const __m256i h2 = _mm256_hadd_epi32(h1, h1); /* lane sums in element 0 and 4 */
            y[b].bsums[2 * g] = (int16_t)_mm256_extract_epi32(h2, 0);
            y[b].bsums[2 * g + 1] = (int16_t)_mm256_extract_epi32(h2, 4);
        }
        y[b].d = 1 / iscale;
    }
}

/* F16 activations: F16C rounds to nearest even, as fp32_to_fp16. */
static void quantize_f16(const float *src, void *dst, int64_t n)
{
    uint16_t *y = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(y + i), _mm256_cvtps_ph(_mm256_loadu_ps(src + i), _MM_FROUND_TO_NEAREST_INT));
    for (; i < n; i++)
        y[i] = fp32_to_fp16(src[i]);
}

/* BF16 activations: fp32_to_bf16's rounding (to nearest even; NaN kept quiet). */
static void quantize_bf16(const float *src, void *dst, int64_t n)
{
    uint16_t *y = dst;
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        const __m256i x = _mm256_loadu_si256((const __m256i *)(src + i));
        const __m256i odd = _mm256_and_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(1));
        __m256i r = _mm256_srli_epi32(_mm256_add_epi32(x, _mm256_add_epi32(odd, _mm256_set1_epi32(0x7fff))), 16);
        const __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, _mm256_set1_epi32(0x7fffffff)),
                                               _mm256_set1_epi32(0x7f800000));
        r = _mm256_blendv_epi8(r, _mm256_or_si256(_mm256_srli_epi32(x, 16), _mm256_set1_epi32(64)), nan);
        /* 8 x 32-bit -> 8 x 16-bit (values < 2^16: the unsigned pack is exact) */
        const __m128i p = _mm_packus_epi32(_mm256_castsi256_si128(r), _mm256_extracti128_si256(r, 1));
        _mm_storeu_si128((__m128i *)(y + i), p);
    }
    for (; i < n; i++)
        y[i] = fp32_to_bf16(src[i]);
}

/* ------------------------------ the table ------------------------------ */

void kernels_fill_avx2(struct kernel_table *t)
{
#define SET(T, dot, gemm_)                                                                                    \
    do {                                                                                                      \
        t->types[GGML_TYPE_##T].vec_dot = (dot);                                                              \
        t->types[GGML_TYPE_##T].gemm = (gemm_);                                                               \
    } while (0)
    SET(F32, vec_dot_f32, gemm_f32);
    SET(F16, vec_dot_f16, gemm_f16);
    SET(BF16, vec_dot_bf16, gemm_bf16);
    SET(Q4_0, vec_dot_q4_0, gemm_q4_0);
    SET(Q5_0, vec_dot_q5_0, gemm_q5_0);
    SET(Q8_0, vec_dot_q8_0, gemm_q8_0);
    SET(Q4_K, vec_dot_q4_K, gemm_q4_K);
    SET(Q5_K, vec_dot_q5_K, gemm_q5_K);
    SET(Q6_K, vec_dot_q6_K, gemm_q6_K);
    SET(IQ4_NL, vec_dot_iq4_nl, gemm_iq4_nl);
#undef SET
    lowbit_fill(t);
    /* the x4 layouts (repack.h): 1-4 tokens in gemm32_x4p; the leftover
     * rows of a matrix (n_out % 4, not repacked) through vec_dot */
    kernels_use_x4_prep(t, GGML_TYPE_Q4_0, gemm_q4_0x4, prep_q4_0x4, gemm_q4_0x4q);
    kernels_use_x4_prep(t, GGML_TYPE_Q5_0, gemm_q5_0x4, prep_q5_0x4, gemm_q5_0x4q);
    kernels_use_x4_prep(t, GGML_TYPE_IQ4_NL, gemm_iq4_nlx4, prep_iq4_nlx4, gemm_iq4_nlx4q);
    /* Q4_0 and Q5_0: one token on its own prep too (gemm32_x4_1) */
    t->types[repack_x4_of(GGML_TYPE_Q4_0)].prep_min_tok = 1;
    t->types[repack_x4_of(GGML_TYPE_Q5_0)].prep_min_tok = 1;
    kernels_use_layout(t, INFER_TYPE_Q4_K_X4I, gemm_q4_Kx4i); /* Q4_K x4's quants by eight bytes */
    kernels_use_x4(t, GGML_TYPE_Q6_K, gemm_q6_Kx4);
    kernels_use_x4(t, GGML_TYPE_Q3_K, gemm_q3_Kx4); /* avx2 only: avxvnni and avx512 turn it off */
    t->types[GGML_TYPE_Q8_0].from_float = quantize_q8_0;
    t->types[GGML_TYPE_Q8_K].from_float = quantize_q8_K;
    t->types[GGML_TYPE_F16].from_float = quantize_f16;
    t->types[GGML_TYPE_BF16].from_float = quantize_bf16;
    kernels_fill_gemm_avx2(t);
    kernels_fill_ops_avx2(t);
    kernels_fill_attention_avx2(t);
}
