/*
 * lowbit_scales_x86.h - the group scales of Q2_K, Q3_K and IQ4_XS blocks as
 * 16 int8 in an xmm, shared by lowbit_x86.h (the 1-4 token tiles) and
 * gemm_avx512.c (the many-token tiles).  AVX-512 BW/VL forms where the
 * includer's flags have them (__AVX512BW__), AVX2 otherwise.  The includer
 * includes x86_util.h first.
 */
#ifndef INFER_LOWBIT_SCALES_X86_H
#define INFER_LOWBIT_SCALES_X86_H

/* ---- the group scales as 16 int8 (any width) ---- */

/* 12 bytes at p into the low bytes of an xmm (reads nothing past them). */
INLINE __m128i lbx_load12(const uint8_t *p)
{
#ifdef __AVX512BW__
    return _mm_maskz_loadu_epi8((__mmask16)0x0FFF, p);
#else
    uint64_t lo;
    memcpy(&lo, p, 8); /* two loads, not a stack copy: that stalled on store forwarding */
    return _mm_insert_epi32(_mm_cvtsi64_si128((long long)lo), (int)ld32(p + 8), 2);
#endif
}

/* q3_K_scales (quants.h): low nibbles of scales[j % 8] (j < 8: low, else
 * high), top bits 2(j/4) of scales[8 + j % 4] (dword j/4 of the
 * broadcast third word, shifted by 2(j/4)), minus 32. */
INLINE __m128i lbx_sc_q3(const block_q3_K *x)
{
    const __m128i v = lbx_load12(x->scales), m4 = _mm_set1_epi8(0x0F);
    const __m128i lo = _mm_and_si128(_mm_unpacklo_epi64(v, _mm_srli_epi16(v, 4)), m4);
    const __m128i hi = _mm_and_si128(_mm_srlv_epi32(_mm_shuffle_epi32(v, 0xAA), _mm_setr_epi32(0, 2, 4, 6)),
                                     _mm_set1_epi8(3));
    return _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32));
}

INLINE void lbx_sc_q2(const block_q2_K *x, __m128i *sc, __m128i *m)
{
    const __m128i v = _mm_loadu_si128((const __m128i *)x->scales), m4 = _mm_set1_epi8(0x0F);
    *sc = _mm_and_si128(v, m4);
    *m = _mm_and_si128(_mm_srli_epi16(v, 4), m4);
}

/* iq4_xs_scale (quants.h) of sub-block j in bytes 2j, 2j+1 */
INLINE __m128i lbx_sc_iq4(const block_iq4_xs *x)
{
    const __m128i l = _mm_cvtsi32_si128((int)ld32(x->scales_l)), m4 = _mm_set1_epi8(0x0F);
    const __m128i lo = _mm_unpacklo_epi8(_mm_and_si128(l, m4), _mm_and_si128(_mm_srli_epi16(l, 4), m4));
#ifdef __AVX512BW__
    const __m128i h = _mm_srlv_epi16(_mm_set1_epi16((short)x->scales_h), _mm_setr_epi16(0, 2, 4, 6, 8, 10, 12, 14));
#else
    const __m128i hb = _mm_set1_epi32(x->scales_h);
    const __m128i h = _mm_packs_epi32(_mm_and_si128(_mm_srlv_epi32(hb, _mm_setr_epi32(0, 2, 4, 6)), _mm_set1_epi32(3)),
                                      _mm_and_si128(_mm_srlv_epi32(hb, _mm_setr_epi32(8, 10, 12, 14)), _mm_set1_epi32(3)));
#endif
    const __m128i hi = _mm_packus_epi16(_mm_and_si128(h, _mm_set1_epi16(3)), _mm_setzero_si128());
    const __m128i s = _mm_sub_epi8(_mm_or_si128(lo, _mm_slli_epi16(hi, 4)), _mm_set1_epi8(32));
    return _mm_unpacklo_epi8(s, s);
}

#endif
