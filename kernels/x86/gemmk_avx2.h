/*
 * gemmk_avx2.h - the K-quant (Q4_K, Q5_K, Q6_K x Q8_K) tiles on 256-bit
 * vectors, written once for two ways of applying the sub-block scales:
 * quants_avx2.c includes it with K_MADD_ACC on vpmaddwd + vpaddd (avx2),
 * gemm_avxvnni.c with AVX-VNNI's vpdpwssd, which does both in one
 * instruction (avxvnni: Intel N100/N150).
 *
 * The integer sum of each super-block (or sub-block) is computed exactly
 * with maddubs and the scale multiply-add, reduced to one integer per (row,
 * token), then scaled and added in float in exactly the reference's order
 * (quants.c), so every variant gives the reference's bits.  The reduction
 * of eight int32 lanes to one is done for four vectors at once (reduce4):
 * over four tokens (one row at a time, nt >= 2) or, for a single token,
 * over four rows.
 *
 * The includer includes x86_util.h and defines K_MADD_ACC(acc, p, s): acc +
 * the int32 lanes of p * s (int16 pairs multiplied and added pairwise).
 */
#ifndef INFER_GEMMK_AVX2_H
#define INFER_GEMMK_AVX2_H

/* pshufb masks on a vector holding eight int16 values in each 128-bit lane:
 * bcast[j] repeats value j in every lane; pair[k] repeats value 2k in the
 * low lane and 2k+1 in the high lane. */
static const uint8_t mask_bcast[8][32] __attribute__((aligned(32))) = {
#define B(j) {2*j, 2*j+1, 2*j, 2*j+1, 2*j, 2*j+1, 2*j, 2*j+1, 2*j, 2*j+1, 2*j, 2*j+1, 2*j, 2*j+1, 2*j, 2*j+1, \
              2*j, 2*j+1, 2*j, 2*j+1, 2*j, 2*j+1, 2*j, 2*j+1, 2*j, 2*j+1, 2*j, 2*j+1, 2*j, 2*j+1, 2*j, 2*j+1}
    B(0), B(1), B(2), B(3), B(4), B(5), B(6), B(7),
#undef B
};
static const uint8_t mask_pair[4][32] __attribute__((aligned(32))) = {
#define P(k) {4*k, 4*k+1, 4*k, 4*k+1, 4*k, 4*k+1, 4*k, 4*k+1, 4*k, 4*k+1, 4*k, 4*k+1, 4*k, 4*k+1, 4*k, 4*k+1, \
              4*k+2, 4*k+3, 4*k+2, 4*k+3, 4*k+2, 4*k+3, 4*k+2, 4*k+3, 4*k+2, 4*k+3, 4*k+2, 4*k+3, 4*k+2, 4*k+3, \
              4*k+2, 4*k+3}
    P(0), P(1), P(2), P(3),
#undef P
};
/* [m0 m0 m1 m1 m2 m2 m3 m3 | m4 m4 .. m7 m7] from [m0..m7 | m0..m7] */
static const uint8_t mask_mdup[32] __attribute__((aligned(32))) = {
    0, 1, 0, 1, 2, 3, 2, 3, 4, 5, 4, 5, 6, 7, 6, 7, 8, 9, 8, 9, 10, 11, 10, 11, 12, 13, 12, 13, 14, 15, 14, 15,
};

INLINE __m256i lmask(const uint8_t *m) { return _mm256_load_si256((const __m256i *)m); }

/* The unpacked form of one Q4_K/Q5_K/Q6_K super-block of one row: what
 * every token's dot with it needs. */
struct kblock {
    __m256i sc;   /* Q4_K/Q5_K: [sc0..7 | sc0..7] int16; Q6_K: [s0..7 | s8..15] int16 */
    __m256i mdup; /* Q4_K/Q5_K: [m0 m0 .. m7 m7] int16 */
    __m256i qh;   /* Q5_K: the 32 bytes of high bits */
    const uint8_t *ql, *qhp;
    size_t cstride; /* Q4_K/Q5_K: bytes from one chunk of ql to the next (32) */
    float d, dmin;
};

INLINE void kblock_load(const int type, struct kblock *k, const uint8_t *blk)
{
    if (type == GGML_TYPE_Q6_K) {
        const block_q6_K *x = (const block_q6_K *)blk;
        k->sc = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->scales));
        k->ql = x->ql;
        k->qhp = x->qh;
        k->d = h2f(ld16(&x->d));
        k->dmin = 0.0f;
        return;
    }
    /* Q4_K and Q5_K share d, dmin and the 12 scale bytes at the front */
    uint32_t u[4];
    memcpy(u, blk + 4, 12);
    const uint32_t km1 = 0x3f3f3f3f, km2 = 0x0f0f0f0f, km3 = 0x03030303;
    u[3] = ((u[2] >> 4) & km2) | (((u[1] >> 6) & km3) << 4); /* m4..m7 */
    const uint32_t m03 = u[1] & km1;                           /* m0..m3 */
    u[1] = (u[2] & km2) | (((u[0] >> 6) & km3) << 4);         /* sc4..sc7 */
    u[2] = m03;
    u[0] &= km1; /* sc0..sc3 */
    const __m256i s16 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)u)); /* [sc0..7 | m0..7] */
    k->sc = _mm256_permute4x64_epi64(s16, 0x44);
    k->mdup = _mm256_shuffle_epi8(_mm256_permute4x64_epi64(s16, 0xEE), lmask(mask_mdup));
    k->d = h2f(ld16(blk));
    k->dmin = h2f(ld16(blk + 2));
    k->cstride = 32;
    if (type == GGML_TYPE_Q4_K) {
        k->ql = ((const block_q4_K *)blk)->qs;
    } else {
        const block_q5_K *x = (const block_q5_K *)blk;
        k->ql = x->qs;
        k->qh = _mm256_loadu_si256((const __m256i *)x->qh);
    }
}

/* Sub-blocks 2c (low nibbles) and 2c+1 (high nibbles) of a Q4_K/Q5_K block. */
INLINE void kblock_q45(const int type, const struct kblock *k, int c, __m256i *lo, __m256i *hi)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    const __m256i q = _mm256_loadu_si256((const __m256i *)(k->ql + k->cstride * (size_t)c));
    *lo = _mm256_and_si256(q, m4);
    *hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
    if (type == GGML_TYPE_Q5_K) { /* fifth bits: bit 2c / 2c+1 of qh[l] */
        const __m256i b0 = _mm256_set1_epi8((char)(1 << (2 * c))), b1 = _mm256_set1_epi8((char)(2 << (2 * c)));
        const __m256i h16 = _mm256_set1_epi8(16);
        *lo = _mm256_or_si256(*lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(k->qh, b0), b0), h16));
        *hi = _mm256_or_si256(*hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(k->qh, b1), b1), h16));
    }
}

/* Chunk j (0..3) of half h of a Q6_K block: elements 128h + 32j .. +31,
 * unsigned 6-bit (q + 32). */
INLINE __m256i kblock_q6(const struct kblock *k, int h, int j)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), m2 = _mm256_set1_epi8(0x30);
    const __m256i ql = _mm256_loadu_si256((const __m256i *)(k->ql + 64 * h + 32 * (j & 1)));
    const __m256i qh = _mm256_loadu_si256((const __m256i *)(k->qhp + 32 * h));
    const __m256i lo4 = j < 2 ? _mm256_and_si256(ql, m4) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), m4);
    __m256i hi2;
    switch (j) {
    case 0: hi2 = _mm256_slli_epi16(qh, 4); break; /* bits 0-1 -> 4-5 */
    case 1: hi2 = _mm256_slli_epi16(qh, 2); break; /* bits 2-3 */
    case 2: hi2 = qh; break;                       /* bits 4-5 */
    default: hi2 = _mm256_srli_epi16(qh, 2); break; /* bits 6-7 */
    }
    return _mm256_or_si256(lo4, _mm256_and_si256(hi2, m2));
}

/* One super-block of one row against one token: the int32 lanes whose sum
 * is isum (sum_j sc_j * sum_{i in j} q_i p_i; for Q6_K with q signed), and
 * for Q4_K/Q5_K the lanes of summ (sum_j m_j * (bsum_2j + bsum_2j+1)). */
INLINE __m256i kdot(const int type, const struct kblock *k, const block_q8_K *y, __m256i *summ)
{
    __m256i acc = _mm256_setzero_si256();
    if (type == GGML_TYPE_Q6_K) {
        UNROLL
        for (int h = 0; h < 2; h++) {
            const __m256i sch = h ? _mm256_permute4x64_epi64(k->sc, 0xEE) : _mm256_permute4x64_epi64(k->sc, 0x44);
            UNROLL
            for (int j = 0; j < 4; j++) {
                const __m256i p = _mm256_maddubs_epi16(kblock_q6(k, h, j),
                                         _mm256_loadu_si256((const __m256i *)(y->qs + 128 * h + 32 * j)));
                acc = K_MADD_ACC(acc, p, _mm256_shuffle_epi8(sch, lmask(mask_pair[j])));
            }
        }
        /* q - 32: subtract 32 * sum_j sc_j * bsum_j */
        const __m256i bs = _mm256_loadu_si256((const __m256i *)y->bsums);
        return _mm256_sub_epi32(acc, _mm256_slli_epi32(_mm256_madd_epi16(bs, k->sc), 5));
    }
    UNROLL
    for (int c = 0; c < 4; c++) {
        __m256i lo, hi;
        kblock_q45(type, k, c, &lo, &hi);
        const __m256i plo = _mm256_maddubs_epi16(lo, _mm256_loadu_si256((const __m256i *)(y->qs + 64 * c)));
        const __m256i phi = _mm256_maddubs_epi16(hi, _mm256_loadu_si256((const __m256i *)(y->qs + 64 * c + 32)));
        acc = K_MADD_ACC(acc, plo, _mm256_shuffle_epi8(k->sc, lmask(mask_bcast[2 * c])));
        acc = K_MADD_ACC(acc, phi, _mm256_shuffle_epi8(k->sc, lmask(mask_bcast[2 * c + 1])));
    }
    *summ = _mm256_madd_epi16(_mm256_loadu_si256((const __m256i *)y->bsums), k->mdup);
    return acc;
}

INLINE void gemmK(const int type, const int NR, const int NT, int64_t n, const uint8_t *w, size_t w_row,
                  const uint8_t *a, size_t a_row, float *y, size_t ys)
{
    const int64_t nb = n / QK_K;
    const size_t bs = kbytes(type);
    const __m256i zero = _mm256_setzero_si256();
    if (NT == 1) {
        __m128 acc = _mm_setzero_ps();
        for (int64_t b = 0; b < nb; b++) {
            const block_q8_K *yb = (const block_q8_K *)a + b;
            __m256i v[4] = {zero, zero, zero, zero}, m[4] = {zero, zero, zero, zero};
            float dx[4] = {0, 0, 0, 0}, dm[4] = {0, 0, 0, 0};
            UNROLL
            for (int r = 0; r < NR; r++) {
                struct kblock k;
                prefetch_ahead(w + (size_t)r * w_row + (size_t)b * bs, w_row, bs);
                kblock_load(type, &k, w + (size_t)r * w_row + (size_t)b * bs);
                v[r] = kdot(type, &k, yb, &m[r]);
                dx[r] = k.d;
                dm[r] = k.dmin;
            }
            const __m128i isum = reduce4(v[0], v[1], v[2], v[3]);
            const __m128i summ = type == GGML_TYPE_Q6_K ? _mm_setzero_si128() : reduce4(m[0], m[1], m[2], m[3]);
            acc = kfma(type, acc, _mm_loadu_ps(dx), _mm_loadu_ps(dm), _mm_set1_ps(yb->d), isum, summ);
        }
        store_rows(y, acc, NR);
        return;
    }
    __m128 acc[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};
    for (int64_t b = 0; b < nb; b++) {
        const block_q8_K *yb[4];
        float dy[4];
        k_tokens(NT, a, a_row, b, yb, dy);
        const __m128 dyv = _mm_loadu_ps(dy);
        UNROLL
        for (int r = 0; r < NR; r++) {
            struct kblock k;
            prefetch_ahead(w + (size_t)r * w_row + (size_t)b * bs, w_row, bs);
            kblock_load(type, &k, w + (size_t)r * w_row + (size_t)b * bs);
            __m256i v[4] = {zero, zero, zero, zero}, m[4] = {zero, zero, zero, zero};
            UNROLL
            for (int t = 0; t < NT; t++)
                v[t] = kdot(type, &k, yb[t], &m[t]);
            const __m128i isum = reduce4(v[0], v[1], v[2], v[3]);
            const __m128i summ = type == GGML_TYPE_Q6_K ? _mm_setzero_si128() : reduce4(m[0], m[1], m[2], m[3]);
            acc[r] = kfma(type, acc[r], _mm_set1_ps(k.d), _mm_set1_ps(k.dmin), dyv, isum, summ);
        }
    }
    store_rows_tokens(y, ys, acc, NR, NT);
}

/*
 * Q4_K x4i (repack.h), 1-4 tokens: the four rows side by side, eight bytes
 * each per vector (64-bit lane r: row r), so that a token's activation
 * bytes are one broadcast load and its products for all four rows one
 * instruction.  The layout stores each chunk of 64 elements that way
 * (vector i: bytes 8i .. 8i + 7 of each row), one load per vector; Q4_K
 * x4's row-major chunks took two unpacks and a lane permute per two vectors
 * here (1.14-1.21x one token, 1.12x four on avx2, `bench-kernels -t 1 -c -b
 * -r 41 -n N -s 8192x2048 -T q4_kx4,q4_kx4i`, Zen 5); per token, the four vectors of a sub-block go into one accumulator (VNNI:
 * vpdpbusd, each dword summing 16 products; avx2: vpmaddubsw, int16 sums of
 * 8 products, added), exact since |sum| <= 16 * 15 * 128 < 2^15, and are
 * then multiplied by the sub-block's scale and added with one vpdpwssd /
 * vpmaddwd: one scale instruction per 128 products where gemmK's tile
 * needs one per 32.  The minimums likewise (m_j times the token's bsums).
 * The integer sums are gemmK's, and the float steps kfma's in each lane
 * (row, token), so the bits are the reference's.
 */
#if !defined(K_TOK_VNNI)
#error "define K_TOK_VNNI (0: avx2 vpmaddubsw, 1: AVX-VNNI vpdpbusd) before including gemmk_avx2.h"
#endif
/* pshufb masks taking byte 4r + j of x4k_fields' s03 / s47 (row r's scale
 * j) into both dwords of 64-bit lane r: as (sc, 0) int16 pairs for
 * vpdpwssd on dwords, (sc, sc) for vpmaddwd on int16 pairs (add j). */
#define KT_SC(r, z) r, 0x80, z, 0x80, r, 0x80, z, 0x80
#if K_TOK_VNNI
#define KT_SCR(r) KT_SC(r, 0x80)
#else
#define KT_SCR(r) KT_SC(r, r)
#endif
static const uint8_t kt_sc_mask[32] __attribute__((aligned(32))) = {KT_SCR(0), KT_SCR(4), KT_SCR(8), KT_SCR(12)};
/* byte 4r + 2h, 4r + 2h + 1 of m03 / m47 as int16 (m, m, m', m') in lane r */
#define KT_M(r) r, 0x80, r, 0x80, r + 1, 0x80, r + 1, 0x80
static const uint8_t kt_m_mask[2][32] __attribute__((aligned(32))) = {{KT_M(0), KT_M(4), KT_M(8), KT_M(12)},
                                                                       {KT_M(2), KT_M(6), KT_M(10), KT_M(14)}};
#undef KT_M
#undef KT_SCR
#undef KT_SC

/* One sub-block (four vectors q[i] of 8 bytes per row) of one token: the
 * products' sums, ready for the scale (dwords for VNNI, int16 for avx2);
 * a points at the token's 8 bytes for q[0], the others 8 apart. */
INLINE __m256i kt_sub(const __m256i q[4], const int8_t *a)
{
    __m256i p[4];
    UNROLL
    for (int i = 0; i < 4; i++)
        p[i] = _mm256_set1_epi64x((long long)ld64(a + 8 * i));
#if K_TOK_VNNI
    __m256i s = _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), q[0], p[0]);
    s = _mm256_dpbusd_avx_epi32(s, q[1], p[1]);
    s = _mm256_dpbusd_avx_epi32(s, q[2], p[2]);
    return _mm256_dpbusd_avx_epi32(s, q[3], p[3]);
#else
    return _mm256_add_epi16(_mm256_add_epi16(_mm256_maddubs_epi16(q[0], p[0]), _mm256_maddubs_epi16(q[1], p[1])),
                            _mm256_add_epi16(_mm256_maddubs_epi16(q[2], p[2]), _mm256_maddubs_epi16(q[3], p[3])));
#endif
}

INLINE void gemmK_x4t(const int NT, int64_t n, const uint8_t *w, const uint8_t *a, size_t a_row, float *y, size_t ys)
{
    const int64_t nb = n / QK_K;
    const __m256i zero = _mm256_setzero_si256(), m4 = _mm256_set1_epi8(0x0F);
    const __m256i scm = lmask(kt_sc_mask);
    /* lanes (row, token): X [r0t0 r1t0 r0t1 r1t1 | r2t0 r3t0 r2t1 r3t1], Y the same for tokens 2, 3 */
    __m256 accx = _mm256_setzero_ps(), accy = _mm256_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *tile = w + (size_t)b * REPACK_X4K_TILE;
        prefetch_tile(tile, REPACK_X4K_TILE);
        const block_q8_K *yb[4];
        float dy[4];
        k_tokens(NT, a, a_row, b, yb, dy);
        __m128i s03, s47, m03, m47;
        x4k_fields(tile, &s03, &s47, &m03, &m47);
        const __m256i sc03 = _mm256_broadcastsi128_si256(s03), sc47 = _mm256_broadcastsi128_si256(s47);
        __m256i tot[4] = {zero, zero, zero, zero};
        UNROLL
        for (int c = 0; c < 4; c++) {
            /* sub-block 2c + h: the low nibbles (h = 0), then the high
             * ones, four quant vectors live instead of eight, and one chain
             * per token (the asm): GCC otherwise hoisted and spilled ~90
             * vectors per super-block at four tokens.  avx2 on a Zen 3,
             * `bench-kernels -t 1 -c -b -r 41 -n N -G -s 8192x2048 -T q4_kx4i
             * -A OLD.so`: 1.02-1.03x at four tokens, 1.07-1.08x at two,
             * 1.01-1.02x at one (avxvnni not measured: no AVX-VNNI there) */
            UNROLL
            for (int h = 0; h < 2; h++) {
                __m256i q[4];
                UNROLL
                for (int i = 0; i < 4; i++) { /* bytes 8i .. 8i + 7 of rows 0-3 */
                    const __m256i v = _mm256_loadu_si256((const __m256i *)(tile + repack_x4ki_qs(0, c, i)));
                    q[i] = _mm256_and_si256(h ? _mm256_srli_epi16(v, 4) : v, m4);
                }
                const __m256i sc =
                    _mm256_shuffle_epi8(c < 2 ? sc03 : sc47, _mm256_add_epi8(scm, _mm256_set1_epi8((char)(2 * c % 4 + h))));
                UNROLL
                for (int t = 0; t < NT; t++) {
                    tot[t] = K_MADD_ACC(tot[t], kt_sub(q, yb[t]->qs + 64 * c + 32 * h), sc);
                    __asm__("" : "+x"(tot[t]));
                }
            }
        }
        /* minimums: m_j times the token's bsums 2j, 2j + 1 */
        const __m256i mm03 = _mm256_broadcastsi128_si256(m03), mm47 = _mm256_broadcastsi128_si256(m47);
        const __m256i mk[4] = {_mm256_shuffle_epi8(mm03, lmask(kt_m_mask[0])), _mm256_shuffle_epi8(mm03, lmask(kt_m_mask[1])),
                               _mm256_shuffle_epi8(mm47, lmask(kt_m_mask[0])), _mm256_shuffle_epi8(mm47, lmask(kt_m_mask[1]))};
        __m256i sm[4] = {zero, zero, zero, zero};
        UNROLL
        for (int t = 0; t < NT; t++)
            UNROLL
            for (int k = 0; k < 4; k++)
                sm[t] = K_MADD_ACC(sm[t], mk[k], _mm256_set1_epi64x((long long)ld64(yb[t]->bsums + 4 * k)));
        const __m128 d = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(tile + repack_x4k_d(0))));
        const __m128 dmin = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(tile + repack_x4k_dmin(0))));
        const __m256 dx = _mm256_set_m128(_mm_movehl_ps(d, d), _mm_movelh_ps(d, d));
        const __m256 dmx = _mm256_set_m128(_mm_movehl_ps(dmin, dmin), _mm_movelh_ps(dmin, dmin));
        /* kfma's steps on eight lanes */
        const __m256 dyx = _mm256_setr_ps(dy[0], dy[0], dy[1], dy[1], dy[0], dy[0], dy[1], dy[1]);
        const __m256i ix = _mm256_hadd_epi32(tot[0], tot[1]), mx = _mm256_hadd_epi32(sm[0], sm[1]);
        accx = _mm256_add_ps(accx, _mm256_mul_ps(_mm256_mul_ps(dx, dyx), _mm256_cvtepi32_ps(ix)));
        accx = _mm256_sub_ps(accx, _mm256_mul_ps(_mm256_mul_ps(dmx, dyx), _mm256_cvtepi32_ps(mx)));
        if (NT > 2) {
            const __m256 dyy = _mm256_setr_ps(dy[2], dy[2], dy[3], dy[3], dy[2], dy[2], dy[3], dy[3]);
            const __m256i iy = _mm256_hadd_epi32(tot[2], tot[3]), my = _mm256_hadd_epi32(sm[2], sm[3]);
            accy = _mm256_add_ps(accy, _mm256_mul_ps(_mm256_mul_ps(dx, dyy), _mm256_cvtepi32_ps(iy)));
            accy = _mm256_sub_ps(accy, _mm256_mul_ps(_mm256_mul_ps(dmx, dyy), _mm256_cvtepi32_ps(my)));
        }
    }
    x4t_store(NT, accx, accy, y, ys);
}
/* One token too: the tile applies a sub-block's scale with one vpmaddwd
 * (avx2) or vpdpwssd (avxvnni) per four rows (32 x 4 products) where
 * gemmK's one-token rows need one per row, and adds four vpmaddubsw in
 * int16 before it: 10 multiplies per 256 products instead of 16.  On an
 * EPYC (Zen 3, avx2) a 512x1024 Q4_K x4 GEMV ran 1.15-1.19x faster in CPU
 * time (bench-kernels -A), and from memory one core read ~12 -> ~15-17 GB/s
 * of it: the old tile was bound by its multiplies, not by the reads, which
 * left MoE decode (its experts mostly Q4_K) below the memory's rate on two
 * cores; avxvnni on a Zen 5, `bench-kernels -t 1 -c -b -r 41 -n 1 -s
 * 8192x2048 -T q4_kx4 -v avxvnni -A` against the one-token rows:
 * 1.12-1.13x hot, from memory on one thread 34.0-35.5 -> 37.5-37.8 GB/s.
 * Same integer sums, same float steps per lane: the same bits. */
DEFINE_GEMM_GROUP(gemm_q4_Kx4i, gemmK_x4t)

#endif
