/*
 * lowbit_x86.h - lowbit_body.h's primitives on x86, then the body itself:
 * Q2_K, Q3_K and IQ4_XS x Q8_K dots and gemm tiles.  Included by
 * quants_avx2.c (LB_WIDTH 256, LB_VNNI 0), gemm_avxvnni.c (256, 1) and
 * quants_avx512.c (512, 1), each after x86_util.h and (256 bits)
 * gemmk_avx2.h, whose pshufb masks it uses.
 *
 * Element orders (lowbit_body.h lets the includer choose):
 *   Q2_K/Q3_K, 256 bits: chunk c (0..7) is elements 32c .. 32c+31 (groups
 *     2c, 2c+1 in the two 128-bit lanes): the quant bytes shifted by
 *     2 (c % 4), activations as stored.
 *   Q2_K/Q3_K, 512 bits: chunk c (0..3) is elements 32c + l and 128 + 32c
 *     + l (l < 32; groups 2c, 2c+1, 8+2c, 9+2c in the four 128-bit lanes):
 *     all 64 quant bytes shifted by 2c; the activations of a chunk are two
 *     32-byte loads.
 *   IQ4_XS: one W-byte load of quants (W/16 sub-blocks, one per 128-bit
 *     lane) gives a pair of chunks, the low nibbles (elements 0-15 of each
 *     sub-block) and the high ones (16-31); the activations are gathered
 *     to match with one in-register shuffle per chunk and token.
 * IQ4_XS with VNNI: the codebook + 128 (unsigned) on vpdpbusd, whole 32-bit
 * sub-block sums scaled with vpmulld once per pair, 128 * sum_g s_g bsum_g
 * taken off; without: the signed codebook through the abs/sign trick.
 * Q2_K/Q3_K: vpmaddubsw (u <= 7, no saturation), then the group scales with
 * vpmaddwd (avx2) or vpdpwssd (VNNI).
 */
#ifndef LB_WIDTH
#error "define LB_WIDTH (256 or 512) and LB_VNNI before including lowbit_x86.h"
#endif

#include "lowbit_scales_x86.h"

typedef __m128i qsc8;
#define QV_SC_Q2(x, sc, m) lbx_sc_q2(x, &(sc), &(m))
#define QV_SC_Q3(x) lbx_sc_q3(x)
#define QV_SC_IQ4(x) lbx_sc_iq4(x)
#define QV_H2F(h) h2f(h)
#define QV_PREFETCH(p, w_row, bytes) prefetch_ahead(p, w_row, bytes)

#if LB_WIDTH == 256
/* ============================ 256 bits ============================ */
typedef __m256i qv;
typedef __m256i qacc;
typedef __m256i qscl;
typedef __m256i qcor;
#define QV_W 32
#define QV_ZERO() _mm256_setzero_si256()
#define QV_IQ4_BIAS (LB_VNNI ? 128 : 0)

INLINE __m256i lbx_crumbs(const uint8_t *qs, int c)
{
    const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * (c / 4)));
    return _mm256_and_si256(_mm256_srli_epi16(q, 2 * (c % 4)), _mm256_set1_epi8(3));
}
#define QV_CRUMBS(qs, c) lbx_crumbs(qs, c)

/* + 4 where bit c of hmask[l] is set: that bit shifted to bit 2 (16-bit
 * shifts by at most 5 keep each byte's bit 2 within the byte) */
INLINE __m256i lbx_q3(const uint8_t *qs, const uint8_t *hm, int c)
{
    const __m256i h = _mm256_loadu_si256((const __m256i *)hm);
    const __m256i hs = c >= 2 ? _mm256_srli_epi16(h, c - 2) : _mm256_slli_epi16(h, 2 - c);
    return _mm256_or_si256(lbx_crumbs(qs, c), _mm256_and_si256(hs, _mm256_set1_epi8(4)));
}
#define QV_Q3(qs, hm, c) lbx_q3(qs, hm, c)
#define QV_ACTK(qs, c) _mm256_loadu_si256((const __m256i *)((qs) + 32 * (c)))

/* pair p = sub-blocks 2p (low lane), 2p+1 (high lane) */
INLINE __m256i lbx_iq4(const uint8_t *qs, int c)
{
    const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * (c / 2)));
    const __m256i nib = _mm256_and_si256(c % 2 ? _mm256_srli_epi16(q, 4) : q, _mm256_set1_epi8(0x0F));
    __m256i cb = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kvalues_iq4nl));
    if (LB_VNNI)
        cb = _mm256_xor_si256(cb, _mm256_set1_epi8((char)0x80));
    return _mm256_shuffle_epi8(cb, nib);
}
#define QV_IQ4(qs, c) lbx_iq4(qs, c)
/* elements 0-15 (even c) or 16-31 of sub-blocks 2p and 2p+1 */
INLINE __m256i lbx_acti(const int8_t *qs, int c)
{
    const __m256i a0 = _mm256_loadu_si256((const __m256i *)(qs + 64 * (c / 2)));
    const __m256i a1 = _mm256_loadu_si256((const __m256i *)(qs + 64 * (c / 2) + 32));
    return c % 2 ? _mm256_permute2x128_si256(a0, a1, 0x31) : _mm256_permute2x128_si256(a0, a1, 0x20);
}
#define QV_ACTI(qs, c) lbx_acti(qs, c)

/* chunk c: group 2c's scale (int16) in the low lane, 2c+1's in the high */
INLINE void lbx_scalesk(__m128i sc, __m256i *s)
{
    const __m256i v = _mm256_cvtepi8_epi16(sc);
    const __m256i lo = _mm256_permute4x64_epi64(v, 0x44), hi = _mm256_permute4x64_epi64(v, 0xEE);
    UNROLL
    for (int c = 0; c < 4; c++) {
        s[c] = _mm256_shuffle_epi8(lo, lmask(mask_pair[c]));
        s[c + 4] = _mm256_shuffle_epi8(hi, lmask(mask_pair[c]));
    }
}
#define QV_SCALESK(sc, s) lbx_scalesk(sc, s)
/* pair p: sub-block 2p's scale in the low lane, 2p+1's in the high; int32
 * lanes (VNNI, for vpmulld) or int16 (vpmaddwd) */
INLINE void lbx_scalesi(__m128i sc, __m256i *s)
{
    UNROLL
    for (int p = 0; p < 4; p++) {
        const char a = (char)(4 * p), b = (char)(4 * p + 2);
        if (LB_VNNI)
            s[p] = _mm256_cvtepi8_epi32(_mm_shuffle_epi8(sc, _mm_setr_epi8(a, a, a, a, b, b, b, b, 0, 0, 0, 0, 0, 0, 0, 0)));
        else
            s[p] = _mm256_cvtepi8_epi16(
                _mm_shuffle_epi8(sc, _mm_setr_epi8(a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b)));
    }
}
#define QV_SCALESI(sc, s) lbx_scalesi(sc, s)
#define QV_COR(sc, k)                                                                                         \
    ((k) == 1 ? _mm256_cvtepi8_epi16(sc) : _mm256_mullo_epi16(_mm256_cvtepi8_epi16(sc), _mm256_set1_epi16((short)(k))))
#define QV_BSUM(acc, bs, cor) _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(bs)), cor))
#if LB_VNNI
#define QV_DOTK(acc, u, a, s) _mm256_dpwssd_avx_epi32(acc, _mm256_maddubs_epi16(u, a), s)
#define QV_DOTI(acc, lo, alo, hi, ahi, s)                                                                     \
    _mm256_add_epi32(acc, _mm256_mullo_epi32(_mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(                 \
                                                                         _mm256_setzero_si256(), lo, alo),    \
                                                                     hi, ahi),                                \
                                             s))
#else
#define QV_DOTK(acc, u, a, s) _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, a), s))
INLINE __m256i lbx_dots(__m256i q, __m256i a, __m256i s)
{
    return _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(q), _mm256_sign_epi8(a, q)), s);
}
#define QV_DOTI(acc, lo, alo, hi, ahi, s)                                                                     \
    _mm256_add_epi32(acc, _mm256_add_epi32(lbx_dots(lo, alo, s), lbx_dots(hi, ahi, s)))
#endif
#define QV_HSUM4(v, out) _mm_storeu_si128((__m128i *)(out), reduce4((v)[0], (v)[1], (v)[2], (v)[3]))

#else
/* ============================ 512 bits ============================ */
typedef __m512i qv;
typedef __m512i qacc;
typedef __m512i qscl;
typedef __m256i qcor;
#define QV_W 64
#define QV_ZERO() _mm512_setzero_si512()
#define QV_IQ4_BIAS 128

INLINE __m512i lbx_crumbs(const uint8_t *qs, int c)
{
    return _mm512_and_si512(_mm512_srli_epi16(_mm512_loadu_si512((const void *)qs), 2 * c), _mm512_set1_epi8(3));
}
#define QV_CRUMBS(qs, c) lbx_crumbs(qs, c)

/* + 4 where bit c (elements 32c + l) or c + 4 (128 + 32c + l) of hmask[l] is set */
INLINE __m512i lbx_q3(const uint8_t *qs, const uint8_t *hm, int c)
{
    const __m512i h = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)hm));
    const __m512i bits =
        _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << c)), _mm256_set1_epi8((char)(16 << c)), 1);
    const __m512i u = lbx_crumbs(qs, c);
    return _mm512_mask_add_epi8(u, _mm512_test_epi8_mask(h, bits), u, _mm512_set1_epi8(4));
}
#define QV_Q3(qs, hm, c) lbx_q3(qs, hm, c)
#define QV_ACTK(qs, c)                                                                                        \
    _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)((qs) + 32 * (c)))),        \
                       _mm256_loadu_si256((const __m256i *)((qs) + 128 + 32 * (c))), 1)

/* pair p = sub-blocks 4p .. 4p+3, one per 128-bit lane */
INLINE __m512i lbx_iq4(const uint8_t *qs, int c)
{
    const __m512i q = _mm512_loadu_si512((const void *)(qs + 64 * (c / 2)));
    const __m512i nib = _mm512_and_si512(c % 2 ? _mm512_srli_epi16(q, 4) : q, _mm512_set1_epi8(0x0F));
    const __m512i cb = _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)kvalues_iq4nl)),
                                        _mm512_set1_epi8((char)0x80));
    return _mm512_shuffle_epi8(cb, nib);
}
#define QV_IQ4(qs, c) lbx_iq4(qs, c)
/* elements 0-15 (even c) or 16-31 of sub-blocks 4p .. 4p+3 */
INLINE __m512i lbx_acti(const int8_t *qs, int c)
{
    const __m512i a0 = _mm512_loadu_si512((const void *)(qs + 128 * (c / 2)));
    const __m512i a1 = _mm512_loadu_si512((const void *)(qs + 128 * (c / 2) + 64));
    return c % 2 ? _mm512_shuffle_i64x2(a0, a1, _MM_SHUFFLE(3, 1, 3, 1))
                 : _mm512_shuffle_i64x2(a0, a1, _MM_SHUFFLE(2, 0, 2, 0));
}
#define QV_ACTI(qs, c) lbx_acti(qs, c)

/* chunk c: groups 2c, 2c+1, 8+2c, 9+2c (int16) in the four 128-bit lanes:
 * [g0..7, g0..7, g8..15, g8..15], then value 2c or 2c+1 of each lane */
static const uint8_t lbx_pick[4][64] __attribute__((aligned(64))) = {
#define P2(j) 2 * (j), 2 * (j) + 1
#define L(j) P2(j), P2(j), P2(j), P2(j), P2(j), P2(j), P2(j), P2(j)
#define C(a, b) {L(a), L(b), L(a), L(b)}
    C(0, 1), C(2, 3), C(4, 5), C(6, 7),
#undef C
#undef L
#undef P2
};
INLINE void lbx_scalesk(__m128i sc, __m512i *s)
{
    const __m512i v = _mm512_castsi256_si512(_mm256_cvtepi8_epi16(sc));
    const __m512i z = _mm512_shuffle_i64x2(v, v, _MM_SHUFFLE(1, 1, 0, 0));
    UNROLL
    for (int c = 0; c < 4; c++)
        s[c] = _mm512_shuffle_epi8(z, _mm512_load_si512((const void *)lbx_pick[c]));
}
#define QV_SCALESK(sc, s) lbx_scalesk(sc, s)
/* pair p: sub-block 4p + L's scale in the int32 lanes of 128-bit lane L */
INLINE void lbx_scalesi(__m128i sc, __m512i *s)
{
    UNROLL
    for (int p = 0; p < 2; p++) {
        const char a = (char)(8 * p);
        s[p] = _mm512_cvtepi8_epi32(_mm_shuffle_epi8(
            sc, _mm_setr_epi8(a, a, a, a, a + 2, a + 2, a + 2, a + 2, a + 4, a + 4, a + 4, a + 4, a + 6, a + 6, a + 6,
                              a + 6)));
    }
}
#define QV_SCALESI(sc, s) lbx_scalesi(sc, s)
#define QV_COR(sc, k)                                                                                         \
    ((k) == 1 ? _mm256_cvtepi8_epi16(sc) : _mm256_mullo_epi16(_mm256_cvtepi8_epi16(sc), _mm256_set1_epi16((short)(k))))
#define QV_BSUM(acc, bs, cor)                                                                                 \
    _mm512_add_epi32(acc, _mm512_zextsi256_si512(_mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)(bs)), cor)))
#define QV_DOTK(acc, u, a, s) _mm512_dpwssd_epi32(acc, _mm512_maddubs_epi16(u, a), s)
#define QV_DOTI(acc, lo, alo, hi, ahi, s)                                                                     \
    _mm512_add_epi32(acc, _mm512_mullo_epi32(_mm512_dpbusd_epi32(_mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, alo), \
                                                                 hi, ahi),                                    \
                                             s))
#define QV_HSUM4(v, out) _mm_storeu_si128((__m128i *)(out), reduce4_512((v)[0], (v)[1], (v)[2], (v)[3]))
#endif

#include "../lowbit_body.h"
