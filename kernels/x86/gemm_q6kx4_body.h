/*
 * gemm_q6kx4_body.h - 1-4 tokens against a group of four Q6_K rows in the
 * x4 layout (repack.h), written once over the vector width: the includer
 * defines Q6X_W 512 (avx512: the four rows of a sub-block in one vector) or
 * 256 (avx2, avxvnni: two vectors of two rows; K_MADD_ACC as for
 * gemmk_avx2.h), optionally Q6X_NACC (one token's accumulators per vector:
 * dependency chains for a multiply-add of some latency) and Q6X_SPLIT (256
 * bits: from this many tokens on, one row pair per pass over a super-block,
 * not both; default 2), optionally Q6X_QWORDS (256 bits: 2-4 tokens through
 * gemm6_x4t, rows in 64-bit lanes; Q6X_TOKENS_MIN 1: one token too), and
 * includes x86_util.h.
 *
 * Each 128-bit lane of a vector holds one row's 16-element sub-block (one
 * piece of ql, one of qh: repack.h), so a sub-block's int16 scale is one
 * value per lane (a pshufb of the row's sixteen scales), the token's
 * sixteen activations are one broadcast 128-bit load, and the lanes stay
 * rows until the super-block's end: no reduction across rows, one
 * per-lane reduction over the tokens per tile.  The sums are integer and
 * exact, minus 32 sum_j sc_j bsum_j for the quants' offset (taken as the
 * accumulator's start value), then scaled and added in float as
 * vec_dot_q6_K_q8_K_ref does: sumf += (d * d_y) * (float)isum per
 * super-block, so the result has the reference's bits.
 */
#ifndef INFER_GEMM_Q6KX4_BODY_H
#define INFER_GEMM_Q6KX4_BODY_H

#if Q6X_W == 512
typedef __m512i q6v;
typedef __m512 q6f;
#define Q6X_NV 1 /* vectors per sub-block of the four rows */
#ifndef Q6X_NACC
#define Q6X_NACC 2 /* one token's accumulators per vector (dependency chains) */
#endif
#define Q6X_SPLIT 5  /* (one vector per sub-block of the four rows) */
#define V_LOAD(p) _mm512_loadu_si512((const void *)(p))
#define V_BCAST(p) _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(p)))
#define V_MASK(p) _mm512_load_si512((const void *)(p))
#define V_SET1_8(x) _mm512_set1_epi8((char)(x))
#define V_ZERO() _mm512_setzero_si512()
#define V_AND _mm512_and_si512
#define V_OR _mm512_or_si512
#define V_SLLI16 _mm512_slli_epi16
#define V_SRLI16 _mm512_srli_epi16
#define V_SRAI16 _mm512_srai_epi16
#define V_UNPACKLO8 _mm512_unpacklo_epi8
#define V_UNPACKHI8 _mm512_unpackhi_epi8
#define V_UNPACKLO32 _mm512_unpacklo_epi32
#define V_UNPACKHI32 _mm512_unpackhi_epi32
#define V_UNPACKLO64 _mm512_unpacklo_epi64
#define V_UNPACKHI64 _mm512_unpackhi_epi64
#define V_SHUF32 _mm512_shuffle_epi32
#define V_SHUFB _mm512_shuffle_epi8
#define V_MADDUBS _mm512_maddubs_epi16
#define V_MADD16 _mm512_madd_epi16
#define V_DPWSSD(acc, p, s) _mm512_dpwssd_epi32(acc, p, s)
#define V_ADD32 _mm512_add_epi32
#define V_SUB32 _mm512_sub_epi32
#define V_SLLI32 _mm512_slli_epi32
#define F_ZERO() _mm512_setzero_ps()
#define F_ADD _mm512_add_ps
#define F_MUL _mm512_mul_ps
#define F_CVT _mm512_cvtepi32_ps
#define F_BCAST4(p) _mm512_broadcast_f32x4(_mm_loadu_ps(p))
#define F_STORE(p, v) _mm512_storeu_ps(p, v)
/* lane r: d_r in every element */
#define F_DLANES(d4, v)                                                                                       \
    _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),                 \
                          _mm512_castps128_ps512(d4))
#else
typedef __m256i q6v;
typedef __m256 q6f;
#define Q6X_NV 2
#ifndef Q6X_NACC
#define Q6X_NACC 1
#endif
#ifndef Q6X_SPLIT
#define Q6X_SPLIT 2
#endif
#define V_LOAD(p) _mm256_loadu_si256((const __m256i *)(p))
#define V_BCAST(p) _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(p)))
#define V_MASK(p) _mm256_load_si256((const __m256i *)(p))
#define V_SET1_8(x) _mm256_set1_epi8((char)(x))
#define V_ZERO() _mm256_setzero_si256()
#define V_AND _mm256_and_si256
#define V_OR _mm256_or_si256
#define V_SLLI16 _mm256_slli_epi16
#define V_SRLI16 _mm256_srli_epi16
#define V_SRAI16 _mm256_srai_epi16
#define V_UNPACKLO8 _mm256_unpacklo_epi8
#define V_UNPACKHI8 _mm256_unpackhi_epi8
#define V_UNPACKLO32 _mm256_unpacklo_epi32
#define V_UNPACKHI32 _mm256_unpackhi_epi32
#define V_UNPACKLO64 _mm256_unpacklo_epi64
#define V_UNPACKHI64 _mm256_unpackhi_epi64
#define V_SHUF32 _mm256_shuffle_epi32
#define V_SHUFB _mm256_shuffle_epi8
#define V_MADDUBS _mm256_maddubs_epi16
#define V_MADD16 _mm256_madd_epi16
#define V_DPWSSD(acc, p, s) K_MADD_ACC(acc, p, s)
#define V_ADD32 _mm256_add_epi32
#define V_SUB32 _mm256_sub_epi32
#define V_SLLI32 _mm256_slli_epi32
#define F_ZERO() _mm256_setzero_ps()
#define F_ADD _mm256_add_ps
#define F_MUL _mm256_mul_ps
#define F_CVT _mm256_cvtepi32_ps
#define F_BCAST4(p) _mm256_broadcast_ps((const __m128 *)(p))
#define F_STORE(p, v) _mm256_storeu_ps(p, v)
#define F_DLANES(d4, v)                                                                                       \
    _mm256_permutevar8x32_ps(_mm256_castps128_ps256(d4),                                                     \
                             _mm256_setr_epi32(2 * (v), 2 * (v), 2 * (v), 2 * (v), 2 * (v) + 1, 2 * (v) + 1, \
                                               2 * (v) + 1, 2 * (v) + 1))
#endif
#define Q6X_VR (4 / Q6X_NV) /* rows per vector */

/* pshufb controls: int16 value j of each 128-bit lane in all its eight */
static const uint8_t q6x_pick[8][64] __attribute__((aligned(64))) = {
#define P2(j) 2 * (j), 2 * (j) + 1
#define L(j) P2(j), P2(j), P2(j), P2(j), P2(j), P2(j), P2(j), P2(j)
#define B(j) {L(j), L(j), L(j), L(j)}
    B(0), B(1), B(2), B(3), B(4), B(5), B(6), B(7),
#undef B
#undef L
#undef P2
};

/* 256 bits with Q6X_QWORDS: gemm6_x4t from this many tokens on */
#ifndef Q6X_TOKENS_MIN
#define Q6X_TOKENS_MIN 2
#endif

#if Q6X_W == 256 && defined(Q6X_QWORDS)
/*
 * 2-4 tokens on 256 bits (the includer defines Q6X_QWORDS): the four rows
 * side by side, eight bytes each per vector, as gemmK_x4t (gemmk_avx2.h)
 * has them for Q4_K.  A piece of ql (16 bytes of each row) loaded as rows
 * 0 | 1 and 2 | 3 gives, with one unpack of qwords each, A = bytes 0-7 and
 * B = bytes 8-15 of the four rows, 64-bit lanes in the order rows 0, 2 |
 * 1, 3 (qh likewise, so the 6-bit unpacking is gemm6_x4's).  A token's
 * eight activation bytes are then one broadcast and its products with the
 * four rows one vpmaddubsw; the two vectors of a 16-element sub-block are
 * added as int16 (|sum| <= 4 * 63 * 127 < 2^15) before the sub-block's
 * scale (one int16 per row lane, a pshufb of the rows' scales) multiplies
 * and adds them into the token's dwords: per token and piece two
 * sub-blocks of 2 vpmaddubsw, a vpaddw and the scale's K_MADD_ACC, where
 * the lanes-are-rows tile above spends 2 vpmaddubsw and 2 K_MADD_ACC per
 * row pair and piece.  The sums are the same integers (the -32 offset
 * again as the accumulators' start, -32 sum_j sc_j bsum_j, from the same
 * scale vectors), scaled and added per (row, token) lane as
 * vec_dot_q6_K_q8_K_ref does, so the bits are the reference's.
 */
/* pshufb controls on Z[j / 4] (int16 [row a: sc 4i..4i+3, row b: the
 * same] per 128-bit lane): scale j % 4 of row a in qword 0, of row b in
 * qword 1, four times each */
static const uint8_t q6t_pick[4][32] __attribute__((aligned(32))) = {
#define P2(j) 2 * (j), 2 * (j) + 1
#define L(j) P2(j), P2(j), P2(j), P2(j), P2(j + 4), P2(j + 4), P2(j + 4), P2(j + 4)
    {L(0), L(0)}, {L(1), L(1)}, {L(2), L(2)}, {L(3), L(3)},
#undef L
#undef P2
};

INLINE void gemm6_x4t(const int NT, int64_t n, const uint8_t *w, const uint8_t *a, size_t a_row, float *y, size_t ys)
{
    const int64_t nb = n / QK_K;
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x30);
    /* lanes (row, token): X [r0t0 r2t0 r0t1 r2t1 | r1t0 r3t0 r1t1 r3t1], Y the same for tokens 2, 3 */
    __m256 accx = _mm256_setzero_ps(), accy = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *tile = w + (size_t)b * REPACK_X6K_TILE;
        prefetch_tile(tile, REPACK_X6K_TILE);
        const block_q8_K *yb[4];
        float dy[4];
        k_tokens(NT, a, a_row, b, yb, dy);
        /* Z[i]: int16 scales 4i .. 4i + 3 of rows 0, 2 | 1, 3 */
        const __m256i s01 = _mm256_loadu_si256((const __m256i *)(tile + repack_x6k_sc(0)));
        const __m256i s23 = _mm256_loadu_si256((const __m256i *)(tile + repack_x6k_sc(2)));
        const __m256i x0 = _mm256_srai_epi16(_mm256_unpacklo_epi8(s01, s01), 8);
        const __m256i x1 = _mm256_srai_epi16(_mm256_unpackhi_epi8(s01, s01), 8);
        const __m256i y0 = _mm256_srai_epi16(_mm256_unpacklo_epi8(s23, s23), 8);
        const __m256i y1 = _mm256_srai_epi16(_mm256_unpackhi_epi8(s23, s23), 8);
        const __m256i Z[4] = {_mm256_unpacklo_epi64(x0, y0), _mm256_unpackhi_epi64(x0, y0),
                              _mm256_unpacklo_epi64(x1, y1), _mm256_unpackhi_epi64(x1, y1)};
        /* the accumulators start at -32 sum_j sc_j bsum_j (dwords of a row's lane) */
        __m256i acc[4];
        x4t_acc_start(NT, Z, yb, 5, acc);
        /* the sixteen sub-blocks' scale vectors, kept in memory (operands
         * of the multiply-adds): in registers with the accumulators, the
         * quants and the masks they spilled */
        __m256i scv[16];
        UNROLL
        for (int j = 0; j < 16; j++)
            scv[j] = _mm256_shuffle_epi8(Z[j / 4], _mm256_load_si256((const __m256i *)q6t_pick[j % 4]));
        __asm__ volatile("" : : "r"(scv) : "memory");
        UNROLL
        for (int p = 0; p < 8; p++) {
            const int h = p / 4, k = (p / 2) % 2, m = p % 2;
            const int slo = 8 * h + 2 * k + m, shi = slo + 4;
            const __m256i l01 = _mm256_loadu_si256((const __m256i *)(tile + repack_x6k_ql(0, p)));
            const __m256i l23 = _mm256_loadu_si256((const __m256i *)(tile + repack_x6k_ql(2, p)));
            const __m256i h01 = _mm256_loadu_si256((const __m256i *)(tile + repack_x6k_qh(0, 2 * h + m)));
            const __m256i h23 = _mm256_loadu_si256((const __m256i *)(tile + repack_x6k_qh(2, 2 * h + m)));
            const __m256i ql[2] = {_mm256_unpacklo_epi64(l01, l23), _mm256_unpackhi_epi64(l01, l23)};
            const __m256i qh[2] = {_mm256_unpacklo_epi64(h01, h23), _mm256_unpackhi_epi64(h01, h23)};
            /* low nibbles (sub-block slo), then high ones (shi) */
            UNROLL
            for (int half = 0; half < 2; half++) {
                const int sb = half ? shi : slo;
                __m256i q[2];
                UNROLL
                for (int i = 0; i < 2; i++) {
                    const __m256i hb = half ? (k ? _mm256_srli_epi16(qh[i], 2) : qh[i])
                                            : (k ? _mm256_slli_epi16(qh[i], 2) : _mm256_slli_epi16(qh[i], 4));
                    const __m256i lb = half ? _mm256_srli_epi16(ql[i], 4) : ql[i];
                    q[i] = _mm256_or_si256(_mm256_and_si256(lb, m4), _mm256_and_si256(hb, m2));
                }
                UNROLL
                for (int t = 0; t < NT; t++) {
                    const int8_t *pa = yb[t]->qs + 16 * sb;
                    const __m256i s16 =
                        _mm256_add_epi16(_mm256_maddubs_epi16(q[0], _mm256_set1_epi64x((long long)ld64(pa))),
                                         _mm256_maddubs_epi16(q[1], _mm256_set1_epi64x((long long)ld64(pa + 8))));
                    acc[t] = K_MADD_ACC(acc[t], s16, scv[sb]);
                    /* one chain per token: otherwise GCC reassociates the
                     * additions into a tree over the piece loop and keeps
                     * every product on the stack until the end */
                    __asm__("" : "+x"(acc[t]));
                }
            }
        }
        /* d of rows 0, 2 | 1, 3 for two tokens; the reference's float steps per lane */
        const __m128 d4 = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(tile + repack_x6k_d(0))));
        const __m256 dx = _mm256_permutevar8x32_ps(_mm256_castps128_ps256(d4), _mm256_setr_epi32(0, 2, 0, 2, 1, 3, 1, 3));
        const __m256 dyx = _mm256_setr_ps(dy[0], dy[0], dy[1], dy[1], dy[0], dy[0], dy[1], dy[1]);
        accx = _mm256_add_ps(accx, _mm256_mul_ps(_mm256_mul_ps(dx, dyx), _mm256_cvtepi32_ps(_mm256_hadd_epi32(acc[0], acc[1]))));
        if (NT > 2) {
            const __m256 dyy = _mm256_setr_ps(dy[2], dy[2], dy[3], dy[3], dy[2], dy[2], dy[3], dy[3]);
            accy = _mm256_add_ps(accy,
                                 _mm256_mul_ps(_mm256_mul_ps(dx, dyy), _mm256_cvtepi32_ps(_mm256_hadd_epi32(acc[2], acc[3]))));
        }
    }
    float ox[8], oy[8];
    _mm256_storeu_ps(ox, accx);
    _mm256_storeu_ps(oy, accy);
    UNROLL
    for (int t = 0; t < NT; t++) {
        const float *o = t < 2 ? ox : oy;
        const int u = t % 2;
        y[(size_t)t * ys + 0] = o[2 * u];
        y[(size_t)t * ys + 2] = o[2 * u + 1];
        y[(size_t)t * ys + 1] = o[4 + 2 * u];
        y[(size_t)t * ys + 3] = o[4 + 2 * u + 1];
    }
}
#endif

INLINE void gemm6_x4(const int NT, int64_t n, const uint8_t *w, const uint8_t *a, size_t a_row, float *y, size_t ys)
{
#if Q6X_W == 256 && defined(Q6X_QWORDS)
    if (NT >= Q6X_TOKENS_MIN) {
        gemm6_x4t(NT, n, w, a, a_row, y, ys);
        return;
    }
#endif
    const int64_t nb = n / QK_K;
    const int na = NT == 1 ? Q6X_NACC : 1; /* more tokens: chains enough */
    /* vectors per pass over a super-block: from Q6X_SPLIT tokens on 256
     * bits, one row pair at a time, so that a pass's accumulators, scales
     * and temporaries fit the sixteen registers (both pairs at once spill) */
    const int vs = NT >= Q6X_SPLIT ? 1 : Q6X_NV;
    const q6v m4 = V_SET1_8(0x0F), m2 = V_SET1_8(0x30);
    q6f facc[Q6X_NV];
    UNROLL
    for (int v = 0; v < Q6X_NV; v++)
        facc[v] = F_ZERO();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *tile = w + (size_t)b * REPACK_X6K_TILE;
        prefetch_tile(tile, REPACK_X6K_TILE);
        const block_q8_K *yb[4];
        float dy[4] = {0, 0, 0, 0};
        UNROLL
        for (int t = 0; t < NT; t++) {
            yb[t] = (const block_q8_K *)(a + (size_t)t * a_row) + b;
            dy[t] = yb[t]->d;
        }
        UNROLL
        for (int v0 = 0; v0 < Q6X_NV; v0 += vs) {
            /* the rows' scales as int16, sub-blocks 0-7 and 8-15 of the
             * lane's row; the accumulators start at -32 sum_j sc_j bsum_j */
            q6v s16[Q6X_NV][2], acc[4][Q6X_NV][2];
            /* with more than one pass, the tokens' rows as the compiler
             * cannot see them: it would keep one pass's activation loads for
             * the next, in the stack */
            const block_q8_K *yp[4];
            UNROLL
            for (int t = 0; t < NT; t++) {
                yp[t] = yb[t];
                if (vs < Q6X_NV)
                    __asm__ volatile("" : "+r"(yp[t]));
            }
            UNROLL
            for (int v = v0; v < v0 + vs; v++) {
                const q6v s = V_LOAD(tile + repack_x6k_sc(Q6X_VR * v));
                s16[v][0] = V_SRAI16(V_UNPACKLO8(s, s), 8);
                s16[v][1] = V_SRAI16(V_UNPACKHI8(s, s), 8);
                UNROLL
                for (int t = 0; t < NT; t++) {
                    const q6v c = V_ADD32(V_MADD16(s16[v][0], V_BCAST(yp[t]->bsums)),
                                          V_MADD16(s16[v][1], V_BCAST(yp[t]->bsums + 8)));
                    acc[t][v][0] = V_SUB32(V_ZERO(), V_SLLI32(c, 5));
                    UNROLL
                    for (int i = 1; i < na; i++)
                        acc[t][v][i] = V_ZERO();
                }
            }
            /* ql piece p = 4h + 2k + m holds sub-block 8h + 2k + m in its
             * low nibbles (top bits: bits 2k, 2k+1 of qh piece 2h + m) and
             * sub-block 8h + 2k + m + 4 in its high ones (bits 2k + 4, 2k + 5) */
            UNROLL
            for (int p = 0; p < 8; p++) {
                const int h = p / 4, k = (p / 2) % 2, m = p % 2;
                const int slo = 8 * h + 2 * k + m, shi = slo + 4;
                UNROLL
                for (int v = v0; v < v0 + vs; v++) {
                    const q6v ql = V_LOAD(tile + repack_x6k_ql(Q6X_VR * v, p));
                    const q6v qh = V_LOAD(tile + repack_x6k_qh(Q6X_VR * v, 2 * h + m));
                    const q6v hlo = k ? V_SLLI16(qh, 2) : V_SLLI16(qh, 4);
                    const q6v hhi = k ? V_SRLI16(qh, 2) : qh;
                    const q6v qlo = V_OR(V_AND(ql, m4), V_AND(hlo, m2));
                    const q6v qhi = V_OR(V_AND(V_SRLI16(ql, 4), m4), V_AND(hhi, m2));
                    const q6v sclo = V_SHUFB(s16[v][h], V_MASK(q6x_pick[2 * k + m]));
                    const q6v schi = V_SHUFB(s16[v][h], V_MASK(q6x_pick[2 * k + m + 4]));
                    UNROLL
                    for (int t = 0; t < NT; t++) {
                        acc[t][v][0] = V_DPWSSD(acc[t][v][0], V_MADDUBS(qlo, V_BCAST(yp[t]->qs + 16 * slo)), sclo);
                        acc[t][v][na - 1] = V_DPWSSD(acc[t][v][na - 1],
                                                     V_MADDUBS(qhi, V_BCAST(yp[t]->qs + 16 * shi)), schi);
                    }
                }
            }
            /* per lane (row): the four int32 of token t summed into element t */
            const __m128 d4 = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(tile + repack_x6k_d(0))));
            const q6f dyv = F_BCAST4(dy);
            UNROLL
            for (int v = v0; v < v0 + vs; v++) {
                q6v z[4];
                UNROLL
                for (int t = 0; t < 4; t++) {
                    z[t] = V_ZERO();
                    if (t < NT) {
                        z[t] = acc[t][v][0];
                        UNROLL
                        for (int i = 1; i < na; i++)
                            z[t] = V_ADD32(z[t], acc[t][v][i]);
                    }
                }
                q6v isum;
                if (NT == 1) { /* every element of a lane: its sum */
                    isum = V_ADD32(z[0], V_SHUF32(z[0], 0x4E));
                    isum = V_ADD32(isum, V_SHUF32(isum, 0xB1));
                } else {
                    const q6v s01 = V_ADD32(V_UNPACKLO32(z[0], z[1]), V_UNPACKHI32(z[0], z[1]));
                    const q6v s23 = V_ADD32(V_UNPACKLO32(z[2], z[3]), V_UNPACKHI32(z[2], z[3]));
                    isum = V_ADD32(V_UNPACKLO64(s01, s23), V_UNPACKHI64(s01, s23));
                }
                facc[v] = F_ADD(facc[v], F_MUL(F_MUL(F_DLANES(d4, v), dyv), F_CVT(isum)));
            }
        }
    }
    UNROLL
    for (int v = 0; v < Q6X_NV; v++) {
        float f[4 * Q6X_VR];
        F_STORE(f, facc[v]);
        for (int rr = 0; rr < Q6X_VR; rr++)
            for (int t = 0; t < NT; t++)
                y[(size_t)t * ys + (size_t)(Q6X_VR * v + rr)] = f[4 * rr + t];
    }
}

/* The gemm of Q6_K x4 (1-4 tokens). */
DEFINE_GEMM_GROUP(gemm_q6_Kx4, gemm6_x4)

#undef Q6X_NV
#undef Q6X_QWORDS
#undef Q6X_TOKENS_MIN
#undef Q6X_NACC
#undef Q6X_SPLIT
#undef Q6X_VR
#undef V_LOAD
#undef V_BCAST
#undef V_MASK
#undef V_SET1_8
#undef V_ZERO
#undef V_AND
#undef V_OR
#undef V_SLLI16
#undef V_SRLI16
#undef V_SRAI16
#undef V_UNPACKLO8
#undef V_UNPACKHI8
#undef V_UNPACKLO32
#undef V_UNPACKHI32
#undef V_UNPACKLO64
#undef V_UNPACKHI64
#undef V_SHUF32
#undef V_SHUFB
#undef V_MADDUBS
#undef V_MADD16
#undef V_DPWSSD
#undef V_ADD32
#undef V_SUB32
#undef V_SLLI32
#undef F_ZERO
#undef F_ADD
#undef F_MUL
#undef F_CVT
#undef F_BCAST4
#undef F_STORE
#undef F_DLANES

#endif
