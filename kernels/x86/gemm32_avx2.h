/*
 * gemm32_avx2.h - the Q4_0 / Q5_0 / Q8_0 x Q8_0 tiles of 1-4 tokens on
 * 256-bit vectors, written once for two ways of multiplying signed bytes:
 * quants_avx2.c includes it with the abs/sign trick on vpmaddubsw +
 * vpmaddwd (avx2), gemm_avxvnni.c with the weights made unsigned (w + K)
 * on AVX-VNNI's vpdpbusd, K times the token's byte sums coming off as a
 * per-token correction (avxvnni).  The integer sum of each (row, token,
 * block) is exact either way and the float steps are the reference's, so
 * the bits are vec_dot's.
 *
 * The includer includes x86_util.h and defines struct w32 (a row's block,
 * prepared), W32_PREP(type, blk, struct w32 *), W32_CORR(type, a) (the
 * per-token correction vector, or anything when unused) and
 * W32_DOT(const struct w32 *, a, corr): int32 lanes whose sum is the
 * block's sum of w * a.
 */
#ifndef INFER_GEMM32_AVX2_H
#define INFER_GEMM32_AVX2_H

/* The 32 weights of a Q4_0 / Q5_0 / Q8_0 / IQ4_NL block as unsigned bytes
 * u = w + K (K = 8, 16, 128, 128: the quants as stored, plus the fifth bit;
 * Q8_0 and the IQ4_NL codebook values xor 0x80). */
/* An IQ4_NL block's nibbles through the codebook (signed). */
INLINE __m256i w32_iq4nl(const uint8_t *blk)
{
    const __m128i q = _mm_loadu_si128((const __m128i *)(blk + 2));
    const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
    return _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kvalues_iq4nl)), nib);
}

INLINE __m256i w32_unsigned(const int type, const uint8_t *blk)
{
    if (type == GGML_TYPE_IQ4_NL)
        return _mm256_xor_si256(w32_iq4nl(blk), _mm256_set1_epi8((char)0x80));
    if (type == GGML_TYPE_Q8_0)
        return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(blk + 2)), _mm256_set1_epi8((char)0x80));
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m128i qs = _mm_loadu_si128((const __m128i *)(blk + (type == GGML_TYPE_Q5_0 ? 6 : 2)));
    const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(qs, 4), qs), m4);
    if (type == GGML_TYPE_Q4_0)
        return nib;
    /* Q5_0: bit j of the little-endian qh is the fifth bit of element j;
     * byte j of the shuffle holds qh byte j/8, tested against bit j%8 */
    uint32_t qh;
    memcpy(&qh, blk + 2, 4);
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3,
                                          3, 3, 3, 3, 3, 3, 3);
    const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i h = _mm256_shuffle_epi8(_mm256_set1_epi32((int)qh), shuf);
    h = _mm256_cmpeq_epi8(_mm256_and_si256(h, bits), bits); /* 0xFF where the bit is set */
    return _mm256_or_si256(nib, _mm256_and_si256(h, _mm256_set1_epi8(16)));
}

/* The same as signed bytes w. */
INLINE __m256i w32_signed(const int type, const uint8_t *blk)
{
    if (type == GGML_TYPE_Q8_0)
        return _mm256_loadu_si256((const __m256i *)(blk + 2));
    if (type == GGML_TYPE_IQ4_NL)
        return w32_iq4nl(blk);
    return _mm256_sub_epi8(w32_unsigned(type, blk), _mm256_set1_epi8((char)(type == GGML_TYPE_Q4_0 ? 8 : 16)));
}

/* acc + (block sums s) * dx * dy, associated as the reference does per type. */
INLINE __m128 fma32(const int type, __m128 acc, __m128i s, __m128 dx, __m128 dy)
{
    const __m128 f = _mm_cvtepi32_ps(s);
    if (type == GGML_TYPE_Q4_0) /* (float)sumi * d_x * d_y */
        return _mm_add_ps(acc, _mm_mul_ps(_mm_mul_ps(f, dx), dy));
    return _mm_add_ps(acc, _mm_mul_ps(_mm_mul_ps(dx, dy), f)); /* (d_x * d_y) * sumi, either side */
}

/* Block b of NR (<= 4) rows against one token, added to acc (lanes = rows).
 * seq: the NR rows are contiguous (w_row = NR blocks' bytes per block of a
 * row), prefetched PF_ROWS rows on as one stream, NR blocks' bytes per
 * block, not as NR streams of a row each.  On an EPYC (Zen 3, avx2) with
 * short rows the NR streams read little faster than the hardware
 * prefetcher alone: a 65536x640 Q8_0 GEMV (gemma-3-270m's output matrix is
 * 262144x640) read 12.9 GB/s from memory, one stream 20.9 GB/s (CPU time
 * 1.64x; 16384x2048: 1.11x). */
INLINE __m128 gemv32_block(const int type, const int NR, const int seq, const uint8_t *w, size_t w_row,
                           const uint8_t *a, int64_t b, __m128 acc)
{
    const size_t bs = bbytes32(type);
    const __m256i zero = _mm256_setzero_si256();
    const block_q8_0 *ab = (const block_q8_0 *)(a + (size_t)b * sizeof(block_q8_0));
    const __m256i av = _mm256_loadu_si256((const __m256i *)ab->qs);
    const __m256i corr = W32_CORR(type, av);
    __m256i v[4] = {zero, zero, zero, zero};
    uint16_t dh[4] = {0, 0, 0, 0};
    if (seq) {
        const uint8_t *pf = w + PF_ROWS * w_row + (size_t)(NR * b) * bs;
        UNROLL
        for (size_t o = 0; o < NR * bs; o += 64)
            _mm_prefetch((const char *)pf + o, PF_HINT);
    }
    UNROLL
    for (int r = 0; r < NR; r++) {
        const uint8_t *blk = w + (size_t)r * w_row + (size_t)b * bs;
        if (!seq)
            prefetch_block(blk, b, w_row, bs);
        struct w32 wp;
        W32_PREP(type, blk, &wp);
        v[r] = W32_DOT(&wp, av, corr);
        dh[r] = ld16(blk);
    }
    const __m128i s = reduce4(v[0], v[1], v[2], v[3]);
    return fma32(type, acc, s, h2f4(dh[0], dh[1], dh[2], dh[3]), _mm_set1_ps(h2f(ld16(&ab->d))));
}

/* NR (<= 4) rows x NT (<= 4) tokens.  NT == 1 reduces over rows, NT > 1
 * over tokens; the lane arithmetic is the same either way. */
INLINE void gemm32(const int type, const int NR, const int NT, int64_t n, const uint8_t *w, size_t w_row,
                   const uint8_t *a, size_t a_row, float *y, size_t ys)
{
    const int64_t nb = n / 32;
    const size_t bs = bbytes32(type);
    const __m256i zero = _mm256_setzero_si256();
    if (NT == 1) {
        __m128 acc = _mm_setzero_ps();
        if (NR == 4 && w_row == (size_t)nb * bs)
            for (int64_t b = 0; b < nb; b++)
                acc = gemv32_block(type, 4, 1, w, w_row, a, b, acc);
        else
            for (int64_t b = 0; b < nb; b++)
                acc = gemv32_block(type, NR, 0, w, w_row, a, b, acc);
        store_rows(y, acc, NR);
        return;
    }
    __m128 acc[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};
    for (int64_t b = 0; b < nb; b++) {
        __m256i av[4] = {zero, zero, zero, zero}, corr[4] = {zero, zero, zero, zero};
        uint16_t dh[4] = {0, 0, 0, 0};
        UNROLL
        for (int t = 0; t < NT; t++) {
            const block_q8_0 *ab = (const block_q8_0 *)(a + (size_t)t * a_row + (size_t)b * sizeof(block_q8_0));
            av[t] = _mm256_loadu_si256((const __m256i *)ab->qs);
            corr[t] = W32_CORR(type, av[t]);
            dh[t] = ld16(&ab->d);
        }
        const __m128 dy = h2f4(dh[0], dh[1], dh[2], dh[3]);
        UNROLL
        for (int r = 0; r < NR; r++) {
            const uint8_t *blk = w + (size_t)r * w_row + (size_t)b * bs;
            prefetch_block(blk, b, w_row, bs);
            struct w32 wp;
            W32_PREP(type, blk, &wp);
            __m256i v[4] = {zero, zero, zero, zero};
            UNROLL
            for (int t = 0; t < NT; t++)
                v[t] = W32_DOT(&wp, av[t], corr[t]);
            const __m128i s = reduce4(v[0], v[1], v[2], v[3]);
            acc[r] = fma32(type, acc[r], s, _mm_set1_ps(h2f(ld16(blk))), dy);
        }
    }
    store_rows_tokens(y, ys, acc, NR, NT);
}

#endif
