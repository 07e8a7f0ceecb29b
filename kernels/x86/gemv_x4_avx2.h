/*
 * gemv_x4_avx2.h - GEMV of four Q4_0 / Q5_0 / IQ4_NL rows against one token on
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
 * and hi unsigned (< 32), a0 and a1 signed; optionally X4_DOT16 (the same
 * in int16 lanes over pairs of bytes, for lo, hi < 16) and X4_WIDEN16 (int16
 * pairs added into int32), with which Q4_0's 2-4 token tile sums in int16.
 *
 * IQ4_NL (the x4 layout is Q4_0's bytes, repack.h) looks its nibbles up in
 * the codebook: signed values (-127 .. 113) and no offset (K = 0), which
 * X4_SDOT multiplies: by default the abs/sign trick on maddubs (|w| times
 * the activation with w's sign, |pair| <= 2 * 127 * 127 < 2^15, each half
 * widened on its own: the two halves' int16 sum could reach 2^16), as the
 * avx2 IQ4_NL vec_dot does.  Its float steps are Q5_0's ((d_x * d_y) * sum,
 * the reference's).  An includer whose X4_DOT takes unsigned bytes whole
 * (vpdpbusd) defines X4_IQ4NL_UNSIGNED: IQ4_NL then goes as Q4_0 does, its
 * codebook values + 128 (1 .. 241) with K = 128.
 */
#ifndef INFER_GEMV_X4_AVX2_H
#define INFER_GEMV_X4_AVX2_H

#ifndef X4_SDOT
#define X4_SDOT(lo, a0, hi, a1)                                                                                 \
    _mm256_add_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(lo), _mm256_sign_epi8(a0, lo)),     \
                                       _mm256_set1_epi16(1)),                                                   \
                     _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_abs_epi8(hi), _mm256_sign_epi8(a1, hi)),     \
                                       _mm256_set1_epi16(1)))
#endif

#ifndef X4_IQ4NL_UNSIGNED
#define X4_IQ4NL_UNSIGNED 0
#endif
/* IQ4_NL's unpacked quants are its signed codebook values (X4_SDOT, no
 * offset), unless X4_IQ4NL_UNSIGNED. */
INLINE bool x4_signed(const int type) { return type == GGML_TYPE_IQ4_NL && !X4_IQ4NL_UNSIGNED; }

/* The offset K of a type's unpacked quants (0: x4_signed), and the eight
 * int32 lanes of sum(lo * a0) + sum(hi * a1) over groups of four bytes for
 * the type's lo, hi. */
INLINE int x4_koff(const int type)
{
    return type == GGML_TYPE_Q5_0 ? 16 : x4_signed(type) ? 0 : type == GGML_TYPE_IQ4_NL ? 128 : 8;
}
INLINE __m256i x4_dot(const int type, __m256i lo, __m256i a0, __m256i hi, __m256i a1)
{
    return x4_signed(type) ? X4_SDOT(lo, a0, hi, a1) : X4_DOT(lo, a0, hi, a1);
}

/* The (row, block) sums sb[p] ([row 2p's blocks 0-3 | row 2p + 1's]),
 * scaled by dx[p] (the same order) and dy4 (the token's four blocks) as the
 * reference does ((sum * d_x) * d_y for Q4_0, (d_x * d_y) * sum for Q5_0),
 * added to acc (lane r: row r) in block order (blocks 0 .. KB - 1). */
INLINE __m128 x4_finish_sb(const int type, const int KB, const __m256i sb[2], const __m256 dx[2], __m128 dy4,
                           __m128 acc)
{
    const __m256 dy = _mm256_set_m128(dy4, dy4);
    __m256 t[2];
    UNROLL
    for (int p = 0; p < 2; p++) {
        const __m256 f = _mm256_cvtepi32_ps(sb[p]);
        t[p] = type == GGML_TYPE_Q4_0 ? _mm256_mul_ps(_mm256_mul_ps(f, dx[p]), dy)
                                      : _mm256_mul_ps(_mm256_mul_ps(dx[p], dy), f);
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

/* x4_finish_sb of the sums v[p][k] (rows 2p | 2p + 1 in the two 128-bit
 * lanes, block k < KB; int32 partial sums in each lane's four dwords). */
INLINE __m128 x4_finish(const int type, const int KB, __m256i v[2][4], const __m256 dx[2], __m128 dy4, __m128 acc)
{
    __m256i sb[2];
    UNROLL
    for (int p = 0; p < 2; p++) /* lane 0: row 2p's blocks 0-3; lane 1: row 2p+1's */
        sb[p] = _mm256_hadd_epi32(_mm256_hadd_epi32(v[p][0], v[p][1]), _mm256_hadd_epi32(v[p][2], v[p][3]));
    return x4_finish_sb(type, KB, sb, dx, dy4, acc);
}

/* Rows 2p | 2p + 1's quants of one block as unsigned bytes (IQ4_NL: the
 * signed codebook values), row 2p in the
 * low 128-bit lane: lo gets elements 0-15, hi 16-31.  q holds the rows' 16
 * quant bytes per lane; for Q5_0, hl and hh hold the high bits of elements
 * 0-15 and 16-31, which shl and shh spread (bit i of a byte for element i
 * mod 8) over each lane's 16 bytes. */
INLINE void x4_unpack_pair(const int type, __m256i q, __m256i hl, __m256i hh, __m256i shl, __m256i shh,
                           __m256i *lo, __m256i *hi)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), b5 = _mm256_set1_epi8(16);
    const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    *lo = _mm256_and_si256(q, m4);
    *hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    if (type == GGML_TYPE_IQ4_NL) {
        __m256i cb = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kvalues_iq4nl));
        if (!x4_signed(type))
            cb = _mm256_xor_si256(cb, _mm256_set1_epi8((char)0x80));
        *lo = _mm256_shuffle_epi8(cb, *lo);
        *hi = _mm256_shuffle_epi8(cb, *hi);
    }
    if (type == GGML_TYPE_Q5_0) {
        const __m256i ml = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(hl, shl), bits), bits);
        const __m256i mh = _mm256_cmpeq_epi8(_mm256_and_si256(_mm256_shuffle_epi8(hh, shh), bits), bits);
        *lo = _mm256_or_si256(*lo, _mm256_and_si256(ml, b5));
        *hi = _mm256_or_si256(*hi, _mm256_and_si256(mh, b5));
    }
}

/* x4_unpack_pair of two blocks in GGUF's format, r0 and r1. */
INLINE void x4_unpack_blocks(const int type, const uint8_t *r0, const uint8_t *r1, __m256i *lo, __m256i *hi)
{
    const size_t off = type == GGML_TYPE_Q5_0 ? 6 : 2;
    /* per lane: bytes 0-7 from qh byte 0 (elements 0-7), 8-15 from byte 1; or bytes 2, 3 (16-31) */
    const __m256i shl = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 1, 1,
                                         1, 1, 1, 1, 1, 1);
    const __m256i shh = _mm256_setr_epi8(2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                         3, 3, 3, 3, 3, 3);
    const __m256i q = _mm256_loadu2_m128i((const __m128i *)(r1 + off), (const __m128i *)(r0 + off));
    __m256i qh = _mm256_setzero_si256();
    if (type == GGML_TYPE_Q5_0)
        qh = _mm256_set_m128i(_mm_set1_epi32((int)ld32(r1 + 2)), _mm_set1_epi32((int)ld32(r0 + 2)));
    x4_unpack_pair(type, q, qh, qh, shl, shh, lo, hi);
}

/* x4_unpack_pair of block k of tile (the x4 layout, repack.h), rows 2p |
 * 2p + 1: one 256-bit load of the quants, Q5_0's high bits two words. */
INLINE void x4_unpack_tile(const int type, const uint8_t *tile, int p, int k, size_t bs, __m256i *lo, __m256i *hi)
{
    /* bytes 0-7 from bit byte 0, 8-15 from 1 | 16-23 from 2, 24-31 from 3 */
    const __m256i sh = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3, 3,
                                        3, 3, 3, 3, 3, 3);
    const __m256i q = _mm256_loadu_si256((const __m256i *)(tile + repack_x4_qs(type, 2 * p, k, bs)));
    __m256i hl = _mm256_setzero_si256(), hh = hl;
    if (type == GGML_TYPE_Q5_0) {
        hl = _mm256_set1_epi32((int)ld32(tile + repack_x4_qh(2 * p, k, bs, 0)));
        hh = _mm256_set1_epi32((int)ld32(tile + repack_x4_qh(2 * p, k, bs, 1)));
    }
    x4_unpack_pair(type, q, hl, hh, sh, sh, lo, hi);
}

/* Blocks b .. b + KB - 1 (KB = 4, or 1 for the last blocks of a row) of four
 * rows, added to acc (lane r: row r) in block order. */
INLINE __m128 x4_group(const int type, const int KB, const uint8_t *w, size_t w_row, const block_q8_0 *ab, int64_t b,
                       __m128 acc)
{
    const size_t bs = bbytes32(type);
    const __m256i zero = _mm256_setzero_si256();
    const __m256i K = _mm256_set1_epi8((char)x4_koff(type));
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
        const __m256i c = x4_signed(type) ? zero : X4_DOT(K, a0, K, a1);
        dyh[k] = ld16(&ab[b + k].d);
        UNROLL
        for (int p = 0; p < 2; p++) {
            const uint8_t *r0 = blk + (size_t)(2 * p) * w_row, *r1 = r0 + w_row;
            __m256i lo, hi;
            x4_unpack_blocks(type, r0, r1, &lo, &hi);
            v[p][k] = x4_signed(type) ? x4_dot(type, lo, a0, hi, a1)
                                               : _mm256_sub_epi32(X4_DOT(lo, a0, hi, a1), c);
            dxh[p][k] = ld16(r0);
            dxh[p][4 + k] = ld16(r1);
        }
    }
    const __m256 dx[2] = {_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dxh[0])),
                          _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)dxh[1]))};
    return x4_finish(type, KB, v, dx, _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)dyh)), acc);
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

/*
 * 1-4 tokens against the four rows of a group in the x4 layout (repack.h):
 * x4_group's arithmetic without its gathering.  Per tile of 4 rows x 4
 * blocks, block k's quants are two 256-bit loads (rows 0 | 1, rows 2 | 3,
 * the pairs x4_group builds from four row pointers), Q5_0's high bits of a
 * pair one 32-bit word per half, and the sixteen scales two 128-bit loads
 * already in x4_finish's order; the weights are unpacked once per tile for
 * all NT tokens.  The nb % 4 last block columns (GGUF's blocks, four rows
 * side by side) go through x4_group with a row stride of one block.
 */
INLINE void gemm32_x4p(const int type, const int NT, int64_t n, const uint8_t *w, const uint8_t *a, size_t a_row,
                       float *y, size_t ys)
{
    const int64_t nb = n / 32, nb4 = nb / 4;
    const size_t bs = bbytes32(type), tb = 16 * bs;
    const __m256i K = _mm256_set1_epi8((char)x4_koff(type));
    __m128 acc[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};
    for (int64_t j = 0; j < nb4; j++) {
        const uint8_t *tile = w + (size_t)j * tb;
        prefetch_tile(tile, tb);
        __m256i v[4][2][4];
        uint16_t dyh[4][4];
        UNROLL
        for (int k = 0; k < 4; k++) {
            __m256i a0[4], a1[4], c[4];
            UNROLL
            for (int t = 0; t < NT; t++) {
                const block_q8_0 *ab = (const block_q8_0 *)(a + (size_t)t * a_row) + 4 * j + k;
                a0[t] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ab->qs));
                a1[t] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(ab->qs + 16)));
                c[t] = x4_signed(type) ? _mm256_setzero_si256() : X4_DOT(K, a0[t], K, a1[t]);
                dyh[t][k] = ld16(&ab->d);
            }
            UNROLL
            for (int p = 0; p < 2; p++) {
                __m256i lo, hi;
                x4_unpack_tile(type, tile, p, k, bs, &lo, &hi);
                UNROLL
                for (int t = 0; t < NT; t++)
                    v[t][p][k] = x4_signed(type) ? x4_dot(type, lo, a0[t], hi, a1[t])
                                                          : _mm256_sub_epi32(X4_DOT(lo, a0[t], hi, a1[t]), c[t]);
            }
        }
        const __m256 dx[2] = {_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(tile + repack_x4_d(0, 0, bs)))),
                              _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(tile + repack_x4_d(2, 0, bs))))};
        UNROLL
        for (int t = 0; t < NT; t++)
            acc[t] = x4_finish(type, 4, v[t], dx, _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)dyh[t])), acc[t]);
    }
    for (int64_t b = 4 * nb4; b < nb; b++) {
        const uint8_t *col = w + repack_x4_whole(0, b, nb, bs);
        UNROLL
        for (int t = 0; t < NT; t++)
            acc[t] = x4_group(type, 1, col, bs, (const block_q8_0 *)(a + (size_t)t * a_row) + b, 0, acc[t]);
    }
    UNROLL
    for (int t = 0; t < NT; t++)
        _mm_storeu_ps(y + (size_t)t * ys, acc[t]);
}

/*
 * One token against the four rows of a group in the x4 layout, Q4_0 and
 * Q5_0 where the pair dots have int16 forms (X4_DOT16; avx2), with the
 * one-token prep (x4r1_act_prep, once per matmul): the blocks' offset
 * corrections (-K times the token's block sums) and scales as vectors of
 * four blocks.  gemm32_x4p's NT = 1 computes each block's correction with
 * two more maddubs and a madd, widens every pair's int16 sums with a madd
 * and adds them with three hadds per pair: here a pair's four blocks of
 * int16 sums (|.| <= 2 * 2 * 15 * 128 = 7680 for Q4_0, 2 * 2 * 31 * 128 =
 * 15872 for Q5_0) are added pairwise by vphaddw, twice for Q4_0 (<= 30720 <
 * 2^15) and once for Q5_0 (<= 31744), then widened, giving the same (row,
 * block) sums in x4_finish's order with 18 or 20 multiplies per tile where
 * gemm32_x4p takes 36.  The float steps are x4_finish's: the same bits.
 * On a Zen 3 EPYC (AVX2 only), `bench-kernels -t 1 -c -b -r 41 -n 1 -s
 * 8192x2048 -T q4_0x4,q5_0x4 -v avx2 -A OLD.so`: 1.19-1.24x (Q4_0, 31.7 ->
 * 37.8 GMAC/s) and 1.21x (Q5_0); decode of the 1B Q4_0 file 1.16-1.22x on
 * one thread, 1.07-1.18x on two, where the old tile was still compute-bound.
 */
struct x4r1_prep {
    int32_t corr[4]; /* -K * the sum of block 4j + i's activations */
    float d[4];      /* its scale */
};

INLINE void x4r1_act_prep(const int K, int64_t n, const void *a, void *prep)
{
    const __m256i x80 = _mm256_set1_epi8((char)0x80);
    const block_q8_0 *ab = (const block_q8_0 *)a;
    struct x4r1_prep *p = (struct x4r1_prep *)prep;
    for (int64_t b = 0; b < n / 32; b++) {
        /* the bytes + 128 are unsigned: their sum less 32 * 128 */
        p[b / 4].corr[b % 4] = -K * (sum_u8(_mm256_xor_si256(_mm256_loadu_si256((const __m256i *)ab[b].qs), x80)) - 4096);
        p[b / 4].d[b % 4] = h2f(ld16(&ab[b].d));
    }
}

#ifdef X4_DOT16
INLINE bool x4_one_prep(const int type) { return type == GGML_TYPE_Q4_0 || type == GGML_TYPE_Q5_0; }

INLINE void gemm32_x4_1(const int type, int64_t n, const uint8_t *w, const uint8_t *a, const struct x4r1_prep *prep,
                        float *y)
{
    const int64_t nb = n / 32, nb4 = nb / 4;
    const size_t bs = bbytes32(type), tb = 16 * bs;
    const block_q8_0 *ab = (const block_q8_0 *)a;
    __m128 acc = _mm_setzero_ps();
    for (int64_t j = 0; j < nb4; j++) {
        const uint8_t *tile = w + (size_t)j * tb;
        prefetch_tile(tile, tb);
        __m256i s[2][4];
        UNROLL
        for (int k = 0; k < 4; k++) {
            const __m256i a0 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)ab[4 * j + k].qs));
            const __m256i a1 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(ab[4 * j + k].qs + 16)));
            UNROLL
            for (int p = 0; p < 2; p++) {
                __m256i lo, hi;
                x4_unpack_tile(type, tile, p, k, bs, &lo, &hi);
                s[p][k] = X4_DOT16(lo, a0, hi, a1);
            }
        }
        const __m256i corr = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)prep[j].corr));
        __m256i sb[2];
        UNROLL
        for (int p = 0; p < 2; p++) {
            /* per lane: [block 0's four sums, block 1's] and [2's, 3's] */
            const __m256i h01 = _mm256_hadd_epi16(s[p][0], s[p][1]), h23 = _mm256_hadd_epi16(s[p][2], s[p][3]);
            sb[p] = type == GGML_TYPE_Q4_0 ? X4_WIDEN16(_mm256_hadd_epi16(h01, h23))
                                           : _mm256_hadd_epi32(X4_WIDEN16(h01), X4_WIDEN16(h23));
            sb[p] = _mm256_add_epi32(sb[p], corr);
        }
        const __m256 dx[2] = {_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(tile + repack_x4_d(0, 0, bs)))),
                              _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(tile + repack_x4_d(2, 0, bs))))};
        acc = x4_finish_sb(type, 4, sb, dx, _mm_loadu_ps(prep[j].d), acc);
    }
    for (int64_t b = 4 * nb4; b < nb; b++)
        acc = x4_group(type, 1, w + repack_x4_whole(0, b, nb, bs), bs, ab + b, 0, acc);
    _mm_storeu_ps(y, acc);
}
#else
INLINE bool x4_one_prep(const int type)
{
    (void)type;
    return false;
}
#define gemm32_x4_1(type, n, w, a, prep, y) ((void)0)
#endif

/* x4q_pair's rotation: product s (v[s]) has token (j + s) % 4's partial sum
 * in dword j (two tokens: (j + s) % 2), so that rotating it by s dwords
 * and adding lines each token up in its own dword; the additions in int16
 * (W16) or int32 lanes. */
INLINE __m256i x4q_rotsum(const int NT, const int W16, const __m256i v[4])
{
#define X4Q_ADD(x, y) (W16 ? _mm256_add_epi16(x, y) : _mm256_add_epi32(x, y))
    if (NT == 2) { /* dword j: token j % 2 */
        const __m256i x = X4Q_ADD(v[0], _mm256_shuffle_epi32(v[1], 0xB1));
        return X4Q_ADD(x, _mm256_shuffle_epi32(x, 0x4E));
    }
    /* dword t of the result takes dword (t - s) % 4 of product s */
    return X4Q_ADD(X4Q_ADD(v[0], _mm256_shuffle_epi32(v[1], 0x93)),
                   X4Q_ADD(_mm256_shuffle_epi32(v[2], 0x4E), _mm256_shuffle_epi32(v[3], 0x39)));
#undef X4Q_ADD
}

/* One block of rows 2p | 2p + 1 (lo, hi: their quants + K in the two
 * 128-bit lanes) against NT tokens' rotated quants from the prep (a0, a1:
 * x4r_prep's q[0][s], q[1][s] in both lanes; corr: its correction): lane
 * 4 i + t of the result gets (row 2p + i, token t)'s term, added to acc.
 * As avx512's x4q_block, the products lined up by x4q_rotsum. */
INLINE __m256 x4q_pair(const int type, const int NT, __m256i lo, __m256i hi, const __m256i *a0, const __m256i *a1,
                       __m256i corr, __m256 dxk, __m256 dy, __m256 acc)
{
    __m256i v[4];
#ifdef X4_DOT16
    if (type == GGML_TYPE_Q4_0) { /* int16 sums, widened once: |sum| <= 4 * 4 * 15 * 128 < 2^15 */
        UNROLL
        for (int s = 0; s < 4; s++)
            if (s < 2 || NT > 2)
                v[s] = X4_DOT16(lo, a0[s], hi, a1[s]);
        const __m256 f = _mm256_cvtepi32_ps(_mm256_add_epi32(X4_WIDEN16(x4q_rotsum(NT, 1, v)), corr));
        return _mm256_add_ps(acc, _mm256_mul_ps(_mm256_mul_ps(f, dxk), dy));
    }
#endif
    UNROLL
    for (int s = 0; s < 4; s++)
        if (s < 2 || NT > 2)
            v[s] = x4_dot(type, lo, a0[s], hi, a1[s]);
    if (!x4_signed(type)) /* signed IQ4_NL: no offset, corr is 0 */
        v[0] = _mm256_add_epi32(v[0], corr);
    const __m256 f = _mm256_cvtepi32_ps(x4q_rotsum(NT, 0, v));
    return _mm256_add_ps(acc, type == GGML_TYPE_Q4_0 ? _mm256_mul_ps(_mm256_mul_ps(f, dxk), dy)
                                                     : _mm256_mul_ps(_mm256_mul_ps(dxk, dy), f));
}

/* Block b's prep (x4r_prep) in both lanes. */
INLINE void x4q_acts(const int NT, const struct x4r_prep *p, __m256i *a0, __m256i *a1, __m256i *corr, __m256 *dy)
{
    UNROLL
    for (int s = 0; s < 4; s++)
        if (s < 2 || NT > 2) {
            a0[s] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p->q[0][s]));
            a1[s] = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p->q[1][s]));
        }
    *corr = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)p->corr));
    *dy = _mm256_broadcast_ps((const __m128 *)p->d);
}

/*
 * 2-4 tokens against the four rows of a group in the x4 layout, with the
 * prep (x4r_act_prep) made once per matmul: gemm32_x4p's products, but
 * lanes (row, token) straight from the rotated products (x4q_pair), the
 * offset taken off with one addition (minus K times the tokens' block sums,
 * from the prep) and the reference's float steps run once per block and row
 * pair on eight outputs, added to the accumulators in block order:
 * vec_dot's bits.  gemm32_x4p instead takes the offset off per token and
 * block (X4_DOT of K) and pair, and does x4_finish's reduction and float
 * steps per token.
 */
INLINE void gemm32_x4q(const int type, const int NT, int64_t n, const uint8_t *w, const struct x4r_prep *prep,
                       float *y, size_t ys)
{
    const int64_t nb = n / 32, nb4 = nb / 4;
    const size_t bs = bbytes32(type), tb = 16 * bs;
    __m256 acc[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (int64_t j = 0; j < nb4; j++) {
        const uint8_t *tile = w + (size_t)j * tb;
        prefetch_tile(tile, tb);
        /* [row 2p's scales of blocks 0-3 | row 2p + 1's] */
        const __m256 dx[2] = {_mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(tile + repack_x4_d(0, 0, bs)))),
                              _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(tile + repack_x4_d(2, 0, bs))))};
        UNROLL
        for (int k = 0; k < 4; k++) {
            __m256i a0[4], a1[4], corr;
            __m256 dy;
            x4q_acts(NT, prep + 4 * j + k, a0, a1, &corr, &dy);
            UNROLL
            for (int p = 0; p < 2; p++) {
                __m256i lo, hi;
                x4_unpack_tile(type, tile, p, k, bs, &lo, &hi);
                acc[p] = x4q_pair(type, NT, lo, hi, a0, a1, corr, _mm256_permutevar_ps(dx[p], _mm256_set1_epi32(k)),
                                  dy, acc[p]);
            }
        }
    }
    for (int64_t b = 4 * nb4; b < nb; b++) { /* GGUF's blocks, rows 0-3 side by side (as x4_group) */
        const uint8_t *col = w + repack_x4_whole(0, b, nb, bs);
        __m256i a0[4], a1[4], corr;
        __m256 dy;
        x4q_acts(NT, prep + b, a0, a1, &corr, &dy);
        UNROLL
        for (int p = 0; p < 2; p++) {
            const uint8_t *r0 = col + (size_t)(2 * p) * bs, *r1 = r0 + bs;
            __m256i lo, hi;
            x4_unpack_blocks(type, r0, r1, &lo, &hi);
            const __m256 dxk = _mm256_set_m128(_mm_set1_ps(h2f(ld16(r1))), _mm_set1_ps(h2f(ld16(r0))));
            acc[p] = x4q_pair(type, NT, lo, hi, a0, a1, corr, dxk, dy, acc[p]);
        }
    }
    UNROLL
    for (int p = 0; p < 2; p++) {
        float out[8];
        _mm256_storeu_ps(out, acc[p]);
        UNROLL
        for (int t = 0; t < NT; t++) {
            y[(size_t)t * ys + (size_t)(2 * p)] = out[t];
            y[(size_t)t * ys + (size_t)(2 * p + 1)] = out[4 + t];
        }
    }
}

/* The 1-4 token gemm of an x4 type on its prep (one token: gemm32_x4_1 where
 * x4_one_prep, else gemm32_x4p, which reads no prep), and the prep. */
#define DEFINE_GEMM_X4Q(NAME, PREP, TYPE)                                                                     \
    static void NAME(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, const void *prep,    \
                     float *y, size_t ys, int nt)                                                             \
    {                                                                                                         \
        (void)w_row; /* a group is contiguous */                                                              \
        switch (nt) {                                                                                         \
        case 1:                                                                                               \
            if (x4_one_prep(TYPE))                                                                            \
                gemm32_x4_1(TYPE, n, w, a, prep, y);                                                          \
            else                                                                                              \
                gemm32_x4p(TYPE, 1, n, w, a, a_row, y, ys);                                                   \
            break;                                                                                            \
        case 2: gemm32_x4q(TYPE, 2, n, w, prep, y, ys); break;                                                \
        case 3: gemm32_x4q(TYPE, 3, n, w, prep, y, ys); break;                                                \
        default: gemm32_x4q(TYPE, 4, n, w, prep, y, ys); break;                                               \
        }                                                                                                     \
    }                                                                                                         \
    static void PREP(int64_t n, const void *a, size_t a_row, int nt, void *prep)                              \
    {                                                                                                         \
        if (nt == 1 && x4_one_prep(TYPE))                                                                     \
            x4r1_act_prep(x4_koff(TYPE), n, a, prep);                                                         \
        else                                                                                                  \
            x4r_act_prep(x4_koff(TYPE), n, a, a_row, nt, prep);                                               \
    }

/* The gemm of an x4 type (1-4 tokens). */
#define DEFINE_GEMM_X4P(NAME, TYPE)                                                                           \
    static void NAME(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, \
                     int nt)                                                                                  \
    {                                                                                                         \
        (void)w_row; /* a group is contiguous */                                                              \
        switch (nt) {                                                                                         \
        case 1: gemm32_x4p(TYPE, 1, n, w, a, a_row, y, ys); break;                                            \
        case 2: gemm32_x4p(TYPE, 2, n, w, a, a_row, y, ys); break;                                            \
        case 3: gemm32_x4p(TYPE, 3, n, w, a, a_row, y, ys); break;                                            \
        default: gemm32_x4p(TYPE, 4, n, w, a, a_row, y, ys); break;                                           \
        }                                                                                                     \
    }

#endif
