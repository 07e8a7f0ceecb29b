/*
 * gemv_x4_avx2.h - GEMV of four Q4_0 / Q5_0 rows against one token on
 * 256-bit vectors, written once for the two ways of multiplying bytes:
 * quants_avx2.c includes it with X4_DOT on maddubs + madd (avx2 variant),
 * gemm_avxvnni.c with AVX-VNNI's vpdpbusd (avxvnni: Intel N100/N150).
 *
 * Two rows' 16 quant bytes of a block fill the two 128-bit lanes of one
 * vector, so the nibbles are the weights' unsigned quants (elements 0-15
 * low, 16-31 high, plus the fifth bit for Q5_0) against the token's
 * half-blocks broadcast to both lanes: no unpacking shuffle, no abs/sign;
 * the offset 8 or 16 comes off as K times the token's block sums.  Three
 * hadds give (row, block) sums, scaled as the scalar reference does
 * ((sum * d_x) * d_y for Q4_0, (d_x * d_y) * sum for Q5_0) and added to each
 * row in block order: the reference's (and vec_dot's) bits.
 *
 * The includer includes x86_util.h and defines X4_DOT(lo, a0, hi, a1): the eight
 * int32 lanes of sum(lo * a0) + sum(hi * a1) over groups of four bytes, lo
 * and hi unsigned (< 32), a0 and a1 signed.
 */
#ifndef INFER_GEMV_X4_AVX2_H
#define INFER_GEMV_X4_AVX2_H

/* Blocks b .. b + KB - 1 (KB = 4, or 1 for the last blocks of a row) of four
 * rows, added to acc (lane r: row r) in block order. */
INLINE __m128 x4_group(const int type, const int KB, const uint8_t *w, size_t w_row, const block_q8_0 *ab, int64_t b,
                       __m128 acc)
{
    const size_t bs = bbytes32(type), off = type == GGML_TYPE_Q5_0 ? 6 : 2;
    const __m256i m4 = _mm256_set1_epi8(0x0F), zero = _mm256_setzero_si256();
    const __m256i K = _mm256_set1_epi8(type == GGML_TYPE_Q5_0 ? 16 : 8);
    const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ull), b5 = _mm256_set1_epi8(16);
    /* per lane: bytes 0-7 from qh byte 0 (elements 0-7), 8-15 from byte 1; or bytes 2, 3 (16-31) */
    const __m256i shuf_lo = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0,
                                             1, 1, 1, 1, 1, 1, 1, 1);
    const __m256i shuf_hi = _mm256_setr_epi8(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2,
                                             3, 3, 3, 3, 3, 3, 3, 3);
    __m256i v[2][4] = {{zero, zero, zero, zero}, {zero, zero, zero, zero}};
    uint16_t dxh[2][8] = {{0}}, dyh[4] = {0};
    /* one prefetch per cache line of each row's blocks, PF_ROWS rows on */
    UNROLL
    for (int r = 0; r < 4; r++)
        prefetch_ahead(w + (size_t)r * w_row + (size_t)b * bs, w_row, KB * bs);
    UNROLL
    for (int k = 0; k < KB; k++) {
        const uint8_t *blk = w + (size_t)(b + k) * bs;
        const __m256i a0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ab[b + k].qs));
        const __m256i a1 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(ab[b + k].qs + 16)));
        const __m256i c = X4_DOT(K, a0, K, a1);
        dyh[k] = ld16(&ab[b + k].d);
        UNROLL
        for (int p = 0; p < 2; p++) {
            const uint8_t *r0 = blk + (size_t)(2 * p) * w_row, *r1 = r0 + w_row;
            const __m256i q = _mm256_loadu2_m128i((const __m128i *)(r1 + off), (const __m128i *)(r0 + off));
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (type == GGML_TYPE_Q5_0) {
                uint32_t h0, h1;
                memcpy(&h0, r0 + 2, 4);
                memcpy(&h1, r1 + 2, 4);
                const __m256i qh = _mm256_set_m128i(_mm_set1_epi32((int)h1), _mm_set1_epi32((int)h0));
                const __m256i ml = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(qh, shuf_lo), bits), bits);
                const __m256i mh = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(qh, shuf_hi), bits), bits);
                lo = _mm256_or_si256(lo, _mm256_and_si256(ml, b5));
                hi = _mm256_or_si256(hi, _mm256_and_si256(mh, b5));
            }
            v[p][k] = _mm256_sub_epi32(X4_DOT(lo, a0, hi, a1), c);
            dxh[p][k] = ld16(r0);
            dxh[p][4 + k] = ld16(r1);
        }
    }
    const __m128 dy4 = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)dyh));
    const __m256 dy = _mm256_set_m128(dy4, dy4);
    __m256 t[2];
    UNROLL
    for (int p = 0; p < 2; p++) {
        /* lane 0: row 2p's blocks 0-3; lane 1: row 2p+1's */
        const __m256i sb = _mm256_hadd_epi32(_mm256_hadd_epi32(v[p][0], v[p][1]), _mm256_hadd_epi32(v[p][2], v[p][3]));
        const __m256 f = _mm256_cvtepi32_ps(sb);
        const __m256 dx = _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dxh[p]));
        t[p] = type == GGML_TYPE_Q4_0 ? _mm256_mul_ps(_mm256_mul_ps(f, dx), dy)
                                      : _mm256_mul_ps(_mm256_mul_ps(dx, dy), f);
    }
    /* columns (block k of rows 0-3), added in block order */
    const __m256 x = _mm256_unpacklo_ps(t[0], t[1]), z = _mm256_unpackhi_ps(t[0], t[1]);
    const __m128 xl = _mm256_castps256_ps128(x), xh = _mm256_extractf128_ps(x, 1);
    const __m128 zl = _mm256_castps256_ps128(z), zh = _mm256_extractf128_ps(z, 1);
    acc = _mm_add_ps(acc, _mm_unpacklo_ps(xl, xh));
    if (KB > 1) {
        acc = _mm_add_ps(acc, _mm_unpackhi_ps(xl, xh));
        acc = _mm_add_ps(acc, _mm_unpacklo_ps(zl, zh));
        acc = _mm_add_ps(acc, _mm_unpackhi_ps(zl, zh));
    }
    return acc;
}

INLINE void gemv32_x4(const int type, int64_t n, const uint8_t *w, size_t w_row, const uint8_t *a, float *y)
{
    const int64_t nb = n / 32;
    const block_q8_0 *ab = (const block_q8_0 *)a;
    __m128 acc = _mm_setzero_ps();
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4)
        acc = x4_group(type, 4, w, w_row, ab, b, acc);
    for (; b < nb; b++)
        acc = x4_group(type, 1, w, w_row, ab, b, acc);
    _mm_storeu_ps(y, acc);
}

#endif
