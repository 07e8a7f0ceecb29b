/*
 * gemm_q3kx4_avx2.h - the Q3_K x4 tile (repack.h) on avx2, 1-4 tokens:
 * included by quants_avx2.c after gemmk_avx2.h (X4_PF) and x86_util.h.
 *
 * The four rows side by side, eight bytes each per vector (64-bit lane r:
 * row r), as gemmK_x4t has Q4_K: a token's eight activation bytes are one
 * broadcast and its products with the four rows one vpmaddubsw.  The
 * layout stores u = q + 4 (0..7) re-coded so that a quarter's 96 bytes per
 * row (three vectors A, B, C) give its eight octets with 20 instructions
 * (six of them one AND and perhaps a shift), where lowbit_body.h's plain
 * tile spends five per 32 quants of one row gathering the crumbs and the
 * hmask bit.  The two vpmaddubsw of a 16-element sub-block are added as
 * int16 (|sum| <= 16 * 7 * 128 < 2^15) before one vpmaddwd applies the
 * sub-block's scale to the four rows (one int16 per row lane); the
 * accumulators start at -4 sum_g s_g bsum_g (u = q + 4), as the plain
 * tile takes it off.  Same integer sums, and per (row, token) lane the
 * float step of vec_dot_q3_K_q8_K_ref, so the bits are the reference's.
 */

/* pshufb controls on Z[j / 4] (int16 [row a: s 4i..4i+3 | row b: the same]
 * per 128-bit lane): scale j % 4 of each row in all four words of its
 * qword */
static const uint8_t q3t_pick[4][32] __attribute__((aligned(32))) = {
#define P2(j) 2 * (j), 2 * (j) + 1
#define L(j) P2(j), P2(j), P2(j), P2(j), P2(j + 4), P2(j + 4), P2(j + 4), P2(j + 4)
    {L(0), L(0)}, {L(1), L(1)}, {L(2), L(2)}, {L(3), L(3)},
#undef L
#undef P2
};

/* Z[i]: int16 scales 4i .. 4i + 3 (minus 32) of rows 0 | 1 | 2 | 3, one
 * row per qword, from the tile's low nibbles and top bits (q3_K_scales) */
INLINE void x3k_scales(const uint8_t *tile, __m256i Z[4])
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m3 = _mm256_set1_epi8(3), k32 = _mm256_set1_epi8(32);
    const __m256i L = _mm256_loadu_si256((const __m256i *)(tile + repack_x3k_sl(0)));
    /* qword r: row r's four top-bit bytes twice */
    const __m256i H = _mm256_permutevar8x32_epi32(
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(tile + repack_x3k_sh(0)))),
        _mm256_setr_epi32(0, 0, 1, 1, 2, 2, 3, 3));
    /* scales 0-7: low nibbles, top bits at 0 (j < 4) and 2; 8-15: high nibbles, 4 and 6 */
    const __m256i ha = _mm256_and_si256(_mm256_srlv_epi32(H, _mm256_setr_epi32(0, 2, 0, 2, 0, 2, 0, 2)), m3);
    const __m256i hb = _mm256_and_si256(_mm256_srlv_epi32(H, _mm256_setr_epi32(4, 6, 4, 6, 4, 6, 4, 6)), m3);
    const __m256i sa = _mm256_sub_epi8(_mm256_or_si256(_mm256_and_si256(L, m4), _mm256_slli_epi16(ha, 4)), k32);
    const __m256i sb = _mm256_sub_epi8(
        _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(L, 4), m4), _mm256_slli_epi16(hb, 4)), k32);
    /* int16: [row 0 | row 2] and [row 1 | row 3] per half */
    const __m256i a0 = _mm256_srai_epi16(_mm256_unpacklo_epi8(sa, sa), 8);
    const __m256i a1 = _mm256_srai_epi16(_mm256_unpackhi_epi8(sa, sa), 8);
    const __m256i b0 = _mm256_srai_epi16(_mm256_unpacklo_epi8(sb, sb), 8);
    const __m256i b1 = _mm256_srai_epi16(_mm256_unpackhi_epi8(sb, sb), 8);
    Z[0] = _mm256_unpacklo_epi64(a0, a1);
    Z[1] = _mm256_unpackhi_epi64(a0, a1);
    Z[2] = _mm256_unpacklo_epi64(b0, b1);
    Z[3] = _mm256_unpackhi_epi64(b0, b1);
}

INLINE void gemm3_x4t(const int NT, int64_t n, const uint8_t *w, const uint8_t *a, size_t a_row, float *y, size_t ys)
{
    const int64_t nb = n / QK_K;
    const __m256i m7 = _mm256_set1_epi8(7);
    /* lanes (row, token): X [r0t0 r1t0 r0t1 r1t1 | r2t0 r3t0 r2t1 r3t1], Y the same for tokens 2, 3 */
    __m256 accx = _mm256_setzero_ps(), accy = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *tile = w + (size_t)b * REPACK_X3K_TILE;
        prefetch_tile(tile, REPACK_X3K_TILE);
        const block_q8_K *yb[4];
        float dy[4];
        k_tokens(NT, a, a_row, b, yb, dy);
        __m256i Z[4];
        x3k_scales(tile, Z);
        /* the accumulators start at -4 sum_g s_g bsum_g (dwords of a row's lane) */
        __m256i acc[4];
        x4t_acc_start(NT, Z, yb, 2, acc);
        /* the sixteen sub-blocks' scale vectors, kept in memory (operands
         * of the multiply-adds), as gemm6_x4t keeps its own */
        __m256i scv[16];
        UNROLL
        for (int j = 0; j < 16; j++)
            scv[j] = _mm256_shuffle_epi8(Z[j / 4], _mm256_load_si256((const __m256i *)q3t_pick[j % 4]));
        __asm__ volatile("" : : "r"(scv) : "memory");
        UNROLL
        for (int T = 0; T < 4; T++) {
            const __m256i A = _mm256_loadu_si256((const __m256i *)(tile + repack_x3k_q(0, T, 0)));
            const __m256i B = _mm256_loadu_si256((const __m256i *)(tile + repack_x3k_q(0, T, 1)));
            const __m256i C = _mm256_loadu_si256((const __m256i *)(tile + repack_x3k_q(0, T, 2)));
            /* octets 6, 7: bit 3 (7) of A, B, C as bits 0, 1, 2 (4, 5, 6) */
            const __m256i Y = _mm256_or_si256(
                _mm256_or_si256(_mm256_and_si256(_mm256_srli_epi16(A, 3), _mm256_set1_epi8(0x11)),
                                _mm256_and_si256(_mm256_srli_epi16(B, 2), _mm256_set1_epi8(0x22))),
                _mm256_and_si256(_mm256_srli_epi16(C, 1), _mm256_set1_epi8(0x44)));
            const __m256i u[8] = {
                _mm256_and_si256(A, m7), _mm256_and_si256(_mm256_srli_epi16(A, 4), m7),
                _mm256_and_si256(B, m7), _mm256_and_si256(_mm256_srli_epi16(B, 4), m7),
                _mm256_and_si256(C, m7), _mm256_and_si256(_mm256_srli_epi16(C, 4), m7),
                _mm256_and_si256(Y, m7), _mm256_and_si256(_mm256_srli_epi16(Y, 4), m7),
            };
            UNROLL
            for (int i = 0; i < 4; i++) { /* sub-block 4T + i: octets 2i, 2i + 1 */
                const int sb = 4 * T + i;
                UNROLL
                for (int t = 0; t < NT; t++) {
                    const int8_t *pa = yb[t]->qs + 16 * sb;
                    const __m256i s16 =
                        _mm256_add_epi16(_mm256_maddubs_epi16(u[2 * i], _mm256_set1_epi64x((long long)ld64(pa))),
                                         _mm256_maddubs_epi16(u[2 * i + 1], _mm256_set1_epi64x((long long)ld64(pa + 8))));
                    acc[t] = _mm256_add_epi32(acc[t], _mm256_madd_epi16(s16, scv[sb]));
                    __asm__("" : "+x"(acc[t])); /* one chain per token (see gemm6_x4t) */
                }
            }
        }
        /* d of rows 0, 1 | 2, 3 for two tokens; the reference's float step per lane */
        const __m128 d = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(tile + repack_x3k_d(0))));
        const __m256 dx = _mm256_set_m128(_mm_movehl_ps(d, d), _mm_movelh_ps(d, d));
        const __m256 dyx = _mm256_setr_ps(dy[0], dy[0], dy[1], dy[1], dy[0], dy[0], dy[1], dy[1]);
        accx = _mm256_add_ps(accx, _mm256_mul_ps(_mm256_mul_ps(dx, dyx), _mm256_cvtepi32_ps(_mm256_hadd_epi32(acc[0], acc[1]))));
        if (NT > 2) {
            const __m256 dyy = _mm256_setr_ps(dy[2], dy[2], dy[3], dy[3], dy[2], dy[2], dy[3], dy[3]);
            accy = _mm256_add_ps(accy,
                                 _mm256_mul_ps(_mm256_mul_ps(dx, dyy), _mm256_cvtepi32_ps(_mm256_hadd_epi32(acc[2], acc[3]))));
        }
    }
    x4t_store(NT, accx, accy, y, ys);
}

/* The gemm of Q3_K x4 (1-4 tokens). */
DEFINE_GEMM_GROUP(gemm_q3_Kx4, gemm3_x4t)
