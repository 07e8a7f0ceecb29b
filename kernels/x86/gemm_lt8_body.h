/*
 * gemm_lt8_body.h - the many-token matmul (gemm_many, dispatch.h) in 256-bit
 * vectors, included by gemm_avx2.c (GEMM_VNNI 0: vpmaddubsw) and
 * gemm_avxvnni.c (GEMM_VNNI 1: AVX-VNNI vpdpbusd), each compiled with its
 * variant's flags.  The 512-bit version is gemm_avx512.c; the layout is the
 * same with LT = 8 tokens per vector:
 *
 *   activations, transposed once per call: for each block of a group of 8
 *     tokens, vector k holds bytes 4k..4k+3 of each token (signed, as
 *     quantized), plus each token's scale and the sums the corrections need;
 *   weights, unpacked once per tile of LR rows into unsigned bytes u (the
 *     quant as stored, or w + 128 for Q8_0 with VNNI; Q8_0 without VNNI
 *     keeps w signed, see below) with per-block metadata;
 *   the weights are broadcast four bytes at a time and multiplied by the
 *     activation vectors, so each token's block sum lands in its own lane:
 *     no horizontal sums.  The offset of u is removed exactly with the
 *     activation sums (Q4_0: sumi = sum u a - 8 sum a; Q6_K: - 32 sum_j sc_j
 *     bsum_j).
 *
 * The low-bit K-quants take the same path: Q2_K's u is its 2-bit field (its
 * minimums, like Q4_K's, come from the bsums), Q3_K's u = q + 4 (0..7) with
 * 4 sum_g s_g bsum_g taken off, and IQ4_XS's u = codebook value + 128 with
 * 128 sum_j s_j bsum_j taken off (without VNNI as two nibble planes:
 * vpmaddubsw would overflow on 8-bit u).
 * IQ4_NL goes as Q8_0 does: its codebook values (|w| <= 127) signed
 * without VNNI, + 128 with.
 *
 * vpmaddubsw adds pairs into int16 without overflow while 2 * 127 * u_max
 * times the number of groups summed stays below 2^15: 8 groups for 4-bit
 * quants, 4 for 5-bit, 2 for 6-bit.  Q8_0 (8-bit w, no offset) multiplies
 * |w| (0..128, unsigned) by a sign(w) (vpsignb of the activation vector by
 * the broadcast weights): one pair sums to at most 2 * 128 * 127 < 2^15 as
 * the activations, from the Q8_0 quantizer (d = amax/127), keep |a| <= 127
 * (the avx2 vec_dot's own bound: its dot_s8 in quants_avx2.c pairs the same
 * bytes the same way, so the two agree bit for bit on any bytes); each
 * vpmaddubsw is widened on its own (vpmaddwd).  vpdpbusd takes Q8_0's
 * u = w + 128 whole.
 *
 * Every lane does the reference's float steps in its order, so the results
 * are vec_dot's bits (as gemm_many must give).
 */
#include <immintrin.h>
#include <stdlib.h>
#include <string.h>

#include "../dispatch.h"
#include "../quants.h"
#include "../repack.h"
#include "x86_util.h"
#include "act_x86.h"

#ifndef GEMM_VNNI
#error "define GEMM_VNNI (0: AVX2 maddubs, 1: AVX-VNNI) before including gemm_lt8_body.h"
#endif

#define LT 8 /* tokens per group: the lanes of a vector */
#define LR 4 /* weight rows per tile (16 vector registers) */

/* ------------------------- transposed activations ------------------------- */

struct act32 {
    uint32_t q[8][LT];
    int32_t corr[LT]; /* -K * sum of the token's block (K: the weights' offset) */
    float d[LT];
};

struct actK {
    uint32_t q[64][LT];
    uint32_t bsp[8][LT]; /* int16 pairs (bsums[2k], bsums[2k+1]) */
    float d[LT];
};

/* Sum of the 32 signed activation bytes of a Q8_0 block. */
INLINE int sum_s8(const int8_t *q)
{
    const __m256i v = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)q), _mm256_set1_epi8((char)0x80));
    return sum_u8(v) - 128 * 32;
}

static void act32_pack(struct act32 *A, const uint8_t *a, size_t a_row, int64_t n_tok, int64_t nb, int koff)
{
    const int64_t ng = (n_tok + LT - 1) / LT;
    for (int64_t g = 0; g < ng; g++) {
        for (int t = 0; t < LT; t++) {
            const int64_t tok = g * LT + t;
            for (int64_t b = 0; b < nb; b++) {
                struct act32 *ag = A + g * nb + b;
                if (tok >= n_tok) {
                    for (int k = 0; k < 8; k++)
                        ag->q[k][t] = 0;
                    ag->corr[t] = 0;
                    ag->d[t] = 0.0f;
                    continue;
                }
                const block_q8_0 *ab = (const block_q8_0 *)(a + (size_t)tok * a_row) + b;
                for (int k = 0; k < 8; k++)
                    ag->q[k][t] = ld32(ab->qs + 4 * k);
                ag->corr[t] = koff ? -koff * sum_s8(ab->qs) : 0;
                ag->d[t] = h2f(ld16(&ab->d));
            }
        }
    }
}

static void actK_pack(struct actK *A, const uint8_t *a, size_t a_row, int64_t n_tok, int64_t nb)
{
    const int64_t ng = (n_tok + LT - 1) / LT;
    for (int64_t g = 0; g < ng; g++) {
        for (int t = 0; t < LT; t++) {
            const int64_t tok = g * LT + t;
            for (int64_t b = 0; b < nb; b++) {
                struct actK *ag = A + g * nb + b;
                if (tok >= n_tok) {
                    for (int k = 0; k < 64; k++)
                        ag->q[k][t] = 0;
                    for (int k = 0; k < 8; k++)
                        ag->bsp[k][t] = 0;
                    ag->d[t] = 0.0f;
                    continue;
                }
                const block_q8_K *yb = (const block_q8_K *)(a + (size_t)tok * a_row) + b;
                for (int k = 0; k < 64; k++)
                    ag->q[k][t] = ld32(yb->qs + 4 * k);
                for (int k = 0; k < 8; k++)
                    ag->bsp[k][t] =
                        (uint32_t)(uint16_t)yb->bsums[2 * k] | (uint32_t)(uint16_t)yb->bsums[2 * k + 1] << 16;
                ag->d[t] = yb->d;
            }
        }
    }
}

/* ---------------------------- unpacked weights ---------------------------- */

struct meta32 {
    float d;
};

/* Per row and super-block: scales, the int16 pairs multiplying the bsum
 * pairs (Q4_K/Q5_K: (m_j, m_j), the minimum of sub-block j; Q2_K: the
 * minimums (m_2k, m_2k+1); Q6_K/Q3_K: (sc_2k, sc_2k+1); IQ4_XS: (s_k, s_k)),
 * d and dmin. */
struct metaK {
    int32_t sc[16];
    uint32_t mp[8];
    float d, dmin;
};

/* Q8_0 and IQ4_NL without VNNI: the weights stay signed (the sign trick of
 * dot_tile; IQ4_NL's codebook values + 128 reach 241, and vpmaddubsw's pair
 * sums of those would overflow int16). */
INLINE bool signed32(const int type) { return (type == GGML_TYPE_Q8_0 || type == GGML_TYPE_IQ4_NL) && !GEMM_VNNI; }

/* The weights of a Q4_0 / Q5_0 / Q8_0 / IQ4_NL block as unsigned bytes
 * u = w + K (signed32: w as stored, IQ4_NL's codebook values). */
INLINE __m256i unpack32(const int type, const uint8_t *blk)
{
    if (type == GGML_TYPE_IQ4_NL) {
        const __m128i qs = _mm_loadu_si128((const __m128i *)(blk + 2));
        const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(qs, 4), qs), _mm256_set1_epi8(0x0F));
        const __m256i w =
            _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kvalues_iq4nl)), nib);
        return signed32(type) ? w : _mm256_xor_si256(w, _mm256_set1_epi8((char)0x80));
    }
    if (type == GGML_TYPE_Q8_0) {
        const __m256i w = _mm256_loadu_si256((const __m256i *)(blk + 2));
        return signed32(type) ? w : _mm256_xor_si256(w, _mm256_set1_epi8((char)0x80));
    }
    const __m128i qs = _mm_loadu_si128((const __m128i *)(blk + (type == GGML_TYPE_Q5_0 ? 6 : 2)));
    const __m256i u = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(qs, 4), qs), _mm256_set1_epi8(0x0F));
    if (type == GGML_TYPE_Q4_0)
        return u;
    /* Q5_0: bit j of qh is the fifth bit of element j */
    const __m256i shuf = _mm256_setr_epi8(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 2, 2, 2, 2, 2, 2, 3,
                                          3, 3, 3, 3, 3, 3, 3);
    const __m256i bits = _mm256_set1_epi64x((long long)0x8040201008040201ull);
    __m256i h = _mm256_shuffle_epi8(_mm256_set1_epi32((int)ld32(blk + 2)), shuf);
    h = _mm256_cmpeq_epi8(_mm256_and_si256(h, bits), bits);
    return _mm256_or_si256(u, _mm256_and_si256(h, _mm256_set1_epi8(16)));
}

/* IQ4_XS without VNNI: unpacked rows hold two planes (lo, then hi
 * nibbles). */
INLINE int planesK(const int type) { return type == GGML_TYPE_IQ4_XS && !GEMM_VNNI ? 2 : 1; }

INLINE int koff32(const int type)
{
    return type == GGML_TYPE_Q4_0 ? 8 : type == GGML_TYPE_Q5_0 ? 16 : signed32(type) ? 0 : 128;
}

/* The unpacked weights of a tile: its LR rows interleaved by dword, so that
 * the LR broadcasts of one step are consecutive dwords behind one pointer
 * (as gemm_avx512.c): dword k of block b of row r at w[(b kpb + k) LR + r],
 * kpb = 8 (Q4_0, Q5_0, Q8_0) or 64 (K-quants) dwords per block; the second
 * plane of planesK follows the first (nb kpb LR dwords later).
 * Per-block metadata likewise row last: meta[b LR + r]. */

/* Four rows' eight dwords v[r] interleaved: dword k of row r to o[4 k + r]. */
INLINE void store_x4(uint32_t *o, const __m256i *v)
{
    _Static_assert(LR == 4, "store_x4 interleaves four rows");
    const __m256i t0 = _mm256_unpacklo_epi32(v[0], v[1]), t1 = _mm256_unpackhi_epi32(v[0], v[1]);
    const __m256i t2 = _mm256_unpacklo_epi32(v[2], v[3]), t3 = _mm256_unpackhi_epi32(v[2], v[3]);
    /* four rows of dword k in 128-bit lane 0, of k + 4 in lane 1: k = 0, 1, 2, 3 */
    const __m256i u0 = _mm256_unpacklo_epi64(t0, t2), u1 = _mm256_unpackhi_epi64(t0, t2);
    const __m256i u2 = _mm256_unpacklo_epi64(t1, t3), u3 = _mm256_unpackhi_epi64(t1, t3);
    _mm256_storeu_si256((__m256i *)o, _mm256_permute2x128_si256(u0, u1, 0x20));
    _mm256_storeu_si256((__m256i *)(o + 8), _mm256_permute2x128_si256(u2, u3, 0x20));
    _mm256_storeu_si256((__m256i *)(o + 16), _mm256_permute2x128_si256(u0, u1, 0x31));
    _mm256_storeu_si256((__m256i *)(o + 24), _mm256_permute2x128_si256(u2, u3, 0x31));
}

/* Block b of row r of a tile whose rows start at `rows` (w_row apart), or
 * (grouped: 1, or 2 for Q4_K x4i) of its group of four rows in repack.h's
 * x4 layout, whose parts are put back together in tmp (one block of the
 * base type). */
INLINE const uint8_t *tile_block(const int type, const uint8_t *rows, size_t w_row, int64_t nb, int grouped, int r,
                                 int64_t b, uint8_t *tmp)
{
    if (type == GGML_TYPE_Q4_K || type == GGML_TYPE_Q6_K || type == GGML_TYPE_Q4_0 || type == GGML_TYPE_Q5_0 ||
        type == GGML_TYPE_IQ4_NL || type == GGML_TYPE_Q8_0) {
        if (!grouped)
            return rows + (size_t)r * w_row + (size_t)b * (w_row / (size_t)nb);
    } else {
        return rows + (size_t)r * w_row + (size_t)b * (w_row / (size_t)nb);
    }
    if (type == GGML_TYPE_Q4_K) {
        const uint8_t *t = rows + (size_t)b * REPACK_X4K_TILE;
        memcpy(tmp + offsetof(block_q4_K, d), t + repack_x4k_d(r), 2);
        memcpy(tmp + offsetof(block_q4_K, dmin), t + repack_x4k_dmin(r), 2);
        for (int i = 0; i < 3; i++)
            memcpy(tmp + offsetof(block_q4_K, scales) + 4 * i, t + repack_x4k_sw(r, i), 4);
        for (int c = 0; c < 4; c++)
            for (int i = 0; i < 4; i++)
                memcpy(tmp + offsetof(block_q4_K, qs) + 32 * c + 8 * i,
                       grouped == 2 ? t + repack_x4ki_qs(r, c, i) : t + repack_x4k_qs(r, c) + 8 * i, 8);
        return tmp;
    }
    if (type == GGML_TYPE_Q6_K) {
        const uint8_t *t = rows + (size_t)b * REPACK_X6K_TILE;
        memcpy(tmp + offsetof(block_q6_K, d), t + repack_x6k_d(r), 2);
        memcpy(tmp + offsetof(block_q6_K, scales), t + repack_x6k_sc(r), 16);
        for (int i = 0; i < 8; i++)
            memcpy(tmp + offsetof(block_q6_K, ql) + 16 * i, t + repack_x6k_ql(r, i), 16);
        for (int i = 0; i < 4; i++)
            memcpy(tmp + offsetof(block_q6_K, qh) + 16 * i, t + repack_x6k_qh(r, i), 16);
        return tmp;
    }
    const size_t bs = bbytes32(type);
    if (b >= nb / 4 * 4) /* past the tiles: whole blocks */
        return rows + repack_x4_whole(r, b, nb, bs);
    memcpy(tmp, rows + repack_x4_d(r, b, bs), 2);
    if (type == GGML_TYPE_Q8_0) { /* Q8_0 x4: the SDOT order, words of four bytes */
        repack_x8_qs(rows, r, b, tmp + offsetof(block_q8_0, qs));
    } else if (type == GGML_TYPE_Q5_0) {
        memcpy(tmp + offsetof(block_q5_0, qh), rows + repack_x4_qh(r, b, bs, 0), 2);
        memcpy(tmp + offsetof(block_q5_0, qh) + 2, rows + repack_x4_qh(r, b, bs, 1), 2);
        memcpy(tmp + offsetof(block_q5_0, qs), rows + repack_x4_qs(type, r, b, bs), 16);
    } else {
        memcpy(tmp + offsetof(block_q4_0, qs), rows + repack_x4_qs(type, r, b, bs), 16);
    }
    return tmp;
}

/* A tile's nr (<= LR) rows, Q4_0 / Q5_0 / Q8_0, into w and meta (padding
 * rows: zero weights and scales). */
INLINE void unpack_tile32(const int type, const uint8_t *rows, size_t w_row, int64_t nb, int nr, int grouped,
                          uint32_t *w, struct meta32 *meta)
{
    for (int64_t b = 0; b < nb; b++) {
        __m256i u[LR];
        UNROLL
        for (int r = 0; r < LR; r++) {
            if (r >= nr) {
                u[r] = _mm256_setzero_si256();
                meta[b * LR + r].d = 0.0f;
                continue;
            }
            uint8_t tmp[sizeof(block_q8_0)];
            const uint8_t *blk = tile_block(type, rows, w_row, nb, grouped, r, b, tmp);
            u[r] = unpack32(type, blk);
            meta[b * LR + r].d = h2f(ld16(blk));
        }
        store_x4(w + (size_t)b * 8 * LR, u);
    }
}

/* One K-quant super-block blk into wb (256 unsigned bytes u, natural order;
 * IQ4_XS without VNNI: lo nibbles there, hi nibbles at whi) and mt. */
INLINE void unpack_blockK(const int type, const uint8_t *blk, uint8_t *wb, uint8_t *whi, struct metaK *mt)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    {
        if (type == GGML_TYPE_Q6_K) {
            const block_q6_K *x = (const block_q6_K *)blk;
            const __m256i m2 = _mm256_set1_epi8(0x30);
            for (int h = 0; h < 2; h++) {
                const __m256i qh = _mm256_loadu_si256((const __m256i *)(x->qh + 32 * h));
                for (int j = 0; j < 4; j++) {
                    const __m256i ql = _mm256_loadu_si256((const __m256i *)(x->ql + 64 * h + 32 * (j & 1)));
                    const __m256i lo4 =
                        j < 2 ? _mm256_and_si256(ql, m4) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), m4);
                    const __m256i hi2 = j == 0 ? _mm256_slli_epi16(qh, 4)
                                        : j == 1 ? _mm256_slli_epi16(qh, 2)
                                        : j == 2 ? qh
                                                 : _mm256_srli_epi16(qh, 2);
                    _mm256_storeu_si256((__m256i *)(wb + 128 * h + 32 * j),
                                        _mm256_or_si256(lo4, _mm256_and_si256(hi2, m2))); /* q + 32 */
                }
            }
            for (int j = 0; j < 16; j++)
                mt->sc[j] = x->scales[j];
            for (int k = 0; k < 8; k++)
                mt->mp[k] = (uint32_t)(uint16_t)x->scales[2 * k] | (uint32_t)(uint16_t)x->scales[2 * k + 1] << 16;
            mt->d = h2f(ld16(&x->d));
            mt->dmin = 0.0f;
            return;
        }
        if (type == GGML_TYPE_Q2_K || type == GGML_TYPE_Q3_K) {
            /* element 128h + 32s + l: bits 2s, 2s+1 of qs[32h + l]; Q3_K's
             * hmask bit 4h + s of hmask[l] adds 4 (u = q + 4) */
            const uint8_t *qs = type == GGML_TYPE_Q2_K ? ((const block_q2_K *)blk)->qs : ((const block_q3_K *)blk)->qs;
            const __m256i m3 = _mm256_set1_epi8(3), one = _mm256_set1_epi8(1);
            const __m256i hm = type == GGML_TYPE_Q3_K
                                   ? _mm256_loadu_si256((const __m256i *)((const block_q3_K *)blk)->hmask)
                                   : _mm256_setzero_si256();
            for (int h = 0; h < 2; h++) {
                const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * h));
                for (int sh = 0; sh < 4; sh++) {
                    __m256i u = _mm256_and_si256(_mm256_srl_epi16(q, _mm_cvtsi32_si128(2 * sh)), m3);
                    if (type == GGML_TYPE_Q3_K) {
                        const __m256i bit = _mm256_and_si256(_mm256_srl_epi16(hm, _mm_cvtsi32_si128(4 * h + sh)), one);
                        u = _mm256_or_si256(u, _mm256_slli_epi16(bit, 2));
                    }
                    _mm256_storeu_si256((__m256i *)(wb + 128 * h + 32 * sh), u);
                }
            }
            int16_t sc16[16];
            if (type == GGML_TYPE_Q2_K) {
                const block_q2_K *x = (const block_q2_K *)blk;
                for (int j = 0; j < 16; j++) {
                    mt->sc[j] = x->scales[j] & 0xF;
                    sc16[j] = (int16_t)(x->scales[j] >> 4); /* the minimums */
                }
                mt->d = h2f(ld16(&x->d));
                mt->dmin = h2f(ld16(&x->dmin));
            } else {
                const block_q3_K *x = (const block_q3_K *)blk;
                q3_K_scales(x->scales, sc16);
                for (int j = 0; j < 16; j++)
                    mt->sc[j] = sc16[j];
                mt->d = h2f(ld16(&x->d));
                mt->dmin = 0.0f;
            }
            for (int k = 0; k < 8; k++)
                mt->mp[k] = (uint32_t)(uint16_t)sc16[2 * k] | (uint32_t)(uint16_t)sc16[2 * k + 1] << 16;
            return;
        }
        if (type == GGML_TYPE_IQ4_XS) { /* u = codebook value + 128, sub-block j: low nibbles, then high */
            const block_iq4_xs *x = (const block_iq4_xs *)blk;
            __m128i tab;
            {
                uint8_t t8[16];
                for (int i = 0; i < 16; i++)
                    t8[i] = (uint8_t)(kvalues_iq4nl[i] + 128);
                tab = _mm_loadu_si128((const __m128i *)t8);
            }
            const __m256i tab2 = _mm256_broadcastsi128_si256(tab);
            for (int j = 0; j < 8; j++) {
                const __m128i q = _mm_loadu_si128((const __m128i *)(x->qs + 16 * j));
                const __m256i m4v = _mm256_set1_epi8(0x0F);
                const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4v);
                const __m256i u = _mm256_shuffle_epi8(tab2, nib);
                if (planesK(type) == 2) { /* lo nibbles of u here, hi nibbles one plane (256 nb bytes) later */
                    _mm256_storeu_si256((__m256i *)(wb + 32 * j), _mm256_and_si256(u, m4v));
                    _mm256_storeu_si256((__m256i *)(whi + 32 * j),
                                        _mm256_and_si256(_mm256_srli_epi16(u, 4), m4v));
                } else {
                    _mm256_storeu_si256((__m256i *)(wb + 32 * j), u);
                }
                const int sj = iq4_xs_scale(x, j);
                mt->sc[j] = sj;
                mt->mp[j] = (uint32_t)(uint16_t)sj | (uint32_t)(uint16_t)sj << 16;
            }
            mt->d = h2f(ld16(&x->d));
            mt->dmin = 0.0f;
            return;
        }
        uint8_t sc[8], m[8];
        for (int j = 0; j < 8; j++)
            k_scale_min(j, blk + 4, &sc[j], &m[j]);
        const uint8_t *qs = type == GGML_TYPE_Q4_K ? ((const block_q4_K *)blk)->qs : ((const block_q5_K *)blk)->qs;
        __m256i qh = _mm256_setzero_si256();
        if (type == GGML_TYPE_Q5_K)
            qh = _mm256_loadu_si256((const __m256i *)((const block_q5_K *)blk)->qh);
        for (int c = 0; c < 4; c++) {
            const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
            __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
            if (type == GGML_TYPE_Q5_K) {
                const __m256i b0 = _mm256_set1_epi8((char)(1 << (2 * c)));
                const __m256i b1 = _mm256_set1_epi8((char)(2 << (2 * c)));
                const __m256i h16 = _mm256_set1_epi8(16);
                lo = _mm256_or_si256(lo, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b0), b0), h16));
                hi = _mm256_or_si256(hi, _mm256_and_si256(_mm256_cmpeq_epi8(_mm256_and_si256(qh, b1), b1), h16));
            }
            _mm256_storeu_si256((__m256i *)(wb + 64 * c), lo);
            _mm256_storeu_si256((__m256i *)(wb + 64 * c + 32), hi);
        }
        for (int j = 0; j < 8; j++) {
            mt->sc[j] = sc[j];
            mt->mp[j] = (uint32_t)m[j] | (uint32_t)m[j] << 16;
        }
        mt->d = h2f(ld16(blk));
        mt->dmin = h2f(ld16(blk + 2));
    }
}

/* Row r's super-block of a Q3_K x4 tile (repack.h) as unpack_blockK
 * leaves a Q3_K block: u = q + 4 in natural order (octet k of quarter T
 * from row r's eight bytes of A, B, C), the scales, d. */
INLINE void unpack_x3k(const uint8_t *tile, int r, uint8_t *wb, struct metaK *mt)
{
    const uint64_t m7 = 0x0707070707070707ull;
    for (int T = 0; T < 4; T++) {
        const uint64_t A = ld64(tile + repack_x3k_q(r, T, 0)), B = ld64(tile + repack_x3k_q(r, T, 1)),
                       C = ld64(tile + repack_x3k_q(r, T, 2));
        const uint64_t Y = ((A >> 3) & 0x1111111111111111ull) | ((B >> 2) & 0x2222222222222222ull) |
                           ((C >> 1) & 0x4444444444444444ull);
        const uint64_t o[8] = {A & m7, (A >> 4) & m7, B & m7, (B >> 4) & m7, C & m7, (C >> 4) & m7, Y & m7, (Y >> 4) & m7};
        memcpy(wb + 64 * T, o, 64);
    }
    uint8_t raw[12];
    int16_t sc16[16];
    memcpy(raw, tile + repack_x3k_sl(r), 8);
    memcpy(raw + 8, tile + repack_x3k_sh(r), 4);
    q3_K_scales(raw, sc16);
    for (int j = 0; j < 16; j++)
        mt->sc[j] = sc16[j];
    for (int k = 0; k < 8; k++)
        mt->mp[k] = (uint32_t)(uint16_t)sc16[2 * k] | (uint32_t)(uint16_t)sc16[2 * k + 1] << 16;
    mt->d = h2f(ld16(tile + repack_x3k_d(r)));
    mt->dmin = 0.0f;
}

/* A tile's nr (<= LR) rows of K-quant super-blocks into w and meta
 * (padding rows: zero weights and scales), block by block: each row's
 * block unpacked in natural order, then the four interleaved. */
INLINE void unpack_tileK(const int type, const uint8_t *rows, size_t w_row, int64_t nb, int nr, int grouped,
                         uint32_t *w, struct metaK *meta)
{
    _Alignas(32) uint8_t u[2][LR][256]; /* [plane][row] */
    for (int64_t b = 0; b < nb; b++) {
        for (int r = 0; r < LR; r++) {
            if (r >= nr) {
                memset(u[0][r], 0, 256);
                memset(u[1][r], 0, 256);
                memset(meta + b * LR + r, 0, sizeof *meta);
                continue;
            }
            if (type == GGML_TYPE_Q3_K && grouped) {
                unpack_x3k(rows + (size_t)b * REPACK_X3K_TILE, r, u[0][r], meta + b * LR + r);
                continue;
            }
            _Alignas(32) uint8_t tmp[sizeof(block_q6_K)];
            unpack_blockK(type, tile_block(type, rows, w_row, nb, grouped, r, b, tmp), u[0][r], u[1][r],
                          meta + b * LR + r);
        }
        for (int p = 0; p < planesK(type); p++)
            for (int c = 0; c < 8; c++) {
                __m256i v[LR];
                UNROLL
                for (int r = 0; r < LR; r++)
                    v[r] = _mm256_load_si256((const __m256i *)(u[p][r] + 32 * c));
                store_x4(w + ((size_t)(p * nb + b) * 64 + 8 * (size_t)c) * LR, v);
            }
    }
}

/* ------------------------------ the kernels ------------------------------ */

INLINE void store_lanes(float *y, size_t ys, __m256 v, int nt)
{
    float tmp[LT];
    _mm256_storeu_ps(tmp, v);
    for (int t = 0; t < nt; t++)
        y[(size_t)t * ys] = tmp[t];
}

/* The outputs of a tile (rows r < nr, lanes = tokens t < nt); a full one
 * (4 rows x 8 tokens) transposed in registers so that each token's four
 * outputs go out as one 16-byte store instead of four scattered ones (as
 * store_tile in gemm_avx512.c). */
INLINE void store_tile(float *y, size_t ys, const __m256 *f, int nr, int nt)
{
    _Static_assert(LR == 4 && LT == 8, "store_tile transposes 4 x 8");
    if (nr < LR || nt < LT) {
        for (int r = 0; r < nr; r++)
            store_lanes(y + r, ys, f[r], nt);
        return;
    }
    const __m256 t0 = _mm256_unpacklo_ps(f[0], f[1]), t1 = _mm256_unpackhi_ps(f[0], f[1]);
    const __m256 t2 = _mm256_unpacklo_ps(f[2], f[3]), t3 = _mm256_unpackhi_ps(f[2], f[3]);
    /* u[k]: in 128-bit lane L, the four rows of token 4L + k */
    const __m256 u[4] = {_mm256_shuffle_ps(t0, t2, 0x44), _mm256_shuffle_ps(t0, t2, 0xEE),
                         _mm256_shuffle_ps(t1, t3, 0x44), _mm256_shuffle_ps(t1, t3, 0xEE)};
    for (int k = 0; k < 4; k++) {
        _mm_storeu_ps(y + (size_t)k * ys, _mm256_castps256_ps128(u[k]));
        _mm_storeu_ps(y + (size_t)(4 + k) * ys, _mm256_extractf128_ps(u[k], 1));
    }
}

INLINE __m256i bcast(const uint32_t *p) { return _mm256_set1_epi32((int)*p); }
INLINE __m256i ldq(const uint32_t *p) { return _mm256_load_si256((const __m256i *)p); }

#define GP_VEC __m256
#define GP_ZERO() _mm256_setzero_ps()
#define GP_LOAD(p) _mm256_load_ps(p)
#define GP_STORE(p, v) _mm256_store_ps(p, v)
#include "gemm_pass.h"

/* a + b in int16 lanes, opaque to the compiler: GCC reassociates a chain
 * of vpaddw into a tree and, with eight chains in flight, spills the
 * products it holds for the tree to the stack. */
INLINE __m256i add16(__m256i a, __m256i b)
{
    __asm__("vpaddw %1, %0, %0" : "+x"(a) : "x"(b));
    return a;
}

/* acc + the int32 lane sums (four bytes each) of the weights w times the
 * activations a, all in registers.  With VNNI, vpdpbusd(u, a): GCC folds
 * the load of an activation vector into each instruction that uses it (one
 * load per product where one per NR products is the point).  Without,
 * Q8_0's signed w as |w| . a sign(w): vpsignb, vpmaddubsw, vpmaddwd with
 * int16 ones and vpaddd in one piece, for add16's reason (as intrinsics
 * GCC holds a whole block's products for a tree); |w| (GCC takes it once
 * per broadcast) is its own operand. */
INLINE __m256i dot32(__m256i acc, __m256i w, __m256i a)
{
#if GEMM_VNNI
    __asm__("%{vex%} vpdpbusd %2, %1, %0" : "+x"(acc) : "x"(w), "x"(a));
#else
    __m256i t;
    __asm__("vpsignb %[w], %[a], %[t]\n\t"
            "vpmaddubsw %[t], %[uw], %[t]\n\t"
            "vpmaddwd %[ones], %[t], %[t]\n\t"
            "vpaddd %[t], %[acc], %[acc]"
            : [acc] "+x"(acc), [t] "=&x"(t)
            : [uw] "x"(_mm256_abs_epi8(w)), [w] "x"(w), [a] "x"(a), [ones] "x"(_mm256_set1_epi16(1)));
#endif
    return acc;
}

/* s[q][r] = m_r sum_{k < nk} u_{r,k} . a_{q,k} plus start[q] when given,
 * or plus s[q][r] itself (accum), exactly, for NG token groups q (dword k
 * of each of their tokens at aq[q][k]) and NR interleaved rows r (u_{r,k}
 * at w[k LR + r]); m: the rows' int16 factors (NULL: 1).  Each broadcast
 * weight dword serves the NG groups, and the NG x NR accumulation chains
 * advance together.  With VNNI, and without for Q8_0's signed w (ubits 8),
 * each product goes straight into int32 chains (dot32) and m multiplies
 * their sums (vpmulld); otherwise vpmaddubsw adds into int16 runs of `per`
 * dwords (its bound for ubits-bit u), each widened by vpmaddwd with m. */
INLINE void dot_tile(const int ubits, const int NG, const int NR, const uint32_t *w, const uint32_t (*const *aq)[LT],
                     int nk, const int32_t *m, const int32_t *const *start, bool accum, __m256i s[2][LR])
{
    if (GEMM_VNNI || ubits == 8) { /* int32 chains */
        __m256i t[2][LR];
        UNROLL
        for (int q = 0; q < NG; q++)
            UNROLL
            for (int r = 0; r < NR; r++)
                t[q][r] = start && !m ? _mm256_load_si256((const __m256i *)start[q])
                          : accum && !m ? s[q][r]
                                        : _mm256_setzero_si256();
        UNROLL
        for (int k = 0; k < nk; k++) {
            __m256i av[2];
            UNROLL
            for (int q = 0; q < NG; q++)
                av[q] = ldq(aq[q][k]);
            UNROLL
            for (int r = 0; r < NR; r++) {
                const __m256i wv = bcast(w + k * LR + r);
                UNROLL
                for (int q = 0; q < NG; q++)
                    t[q][r] = dot32(t[q][r], wv, av[q]);
            }
        }
        UNROLL
        for (int r = 0; r < NR; r++) {
            const __m256i mr = _mm256_set1_epi32(m ? m[r] : 1);
            UNROLL
            for (int q = 0; q < NG; q++) {
                if (!m) {
                    s[q][r] = t[q][r];
                    continue;
                }
                const __m256i v = _mm256_mullo_epi32(t[q][r], mr);
                s[q][r] = start   ? _mm256_add_epi32(_mm256_load_si256((const __m256i *)start[q]), v)
                          : accum ? _mm256_add_epi32(s[q][r], v)
                                  : v;
            }
        }
        return;
    }
#if !GEMM_VNNI /* int16 runs */
    const int per = ubits <= 4 ? 8 : ubits == 5 ? 4 : 2;
    UNROLL
    for (int k0 = 0; k0 < nk; k0 += per) {
        __m256i s16[2][LR];
        const int k1 = k0 + per < nk ? k0 + per : nk;
        UNROLL
        for (int k = k0; k < k1; k++) {
            __m256i av[2];
            UNROLL
            for (int q = 0; q < NG; q++)
                av[q] = ldq(aq[q][k]);
            UNROLL
            for (int r = 0; r < NR; r++) {
                const __m256i wv = bcast(w + k * LR + r);
                UNROLL
                for (int q = 0; q < NG; q++) {
                    const __m256i v = _mm256_maddubs_epi16(wv, av[q]);
                    s16[q][r] = k == k0 ? v : add16(s16[q][r], v);
                }
            }
        }
        UNROLL
        for (int r = 0; r < NR; r++) {
            const __m256i mr = _mm256_set1_epi16((short)(m ? m[r] : 1));
            UNROLL
            for (int q = 0; q < NG; q++) {
                const __m256i v = _mm256_madd_epi16(s16[q][r], mr);
                if (k0 > 0 || accum)
                    s[q][r] = _mm256_add_epi32(s[q][r], v);
                else /* s starts with the first run: not live during it */
                    s[q][r] = start ? _mm256_add_epi32(_mm256_load_si256((const __m256i *)start[q]), v) : v;
            }
        }
    }
#endif
}

/* acc + (block sums s) * dx * dy in the reference's association per type. */
INLINE __m256 fstep32(const int type, __m256 acc, __m256i s, float dxs, __m256 dy)
{
    const __m256 f = _mm256_cvtepi32_ps(s), dx = _mm256_set1_ps(dxs);
    if (type == GGML_TYPE_Q4_0) /* (float)sumi * d_x * d_y */
        return _mm256_add_ps(acc, _mm256_mul_ps(_mm256_mul_ps(f, dx), dy));
    return _mm256_add_ps(acc, _mm256_mul_ps(_mm256_mul_ps(dx, dy), f)); /* (d_x * d_y) * sumi */
}

/* Token groups per step of run32: two (4 rows x 2 groups = 8 accumulation
 * chains, one broadcast per two products) when the int16 runs and the
 * int32 sums fit the 16 registers together: with VNNI always, with
 * vpmaddubsw when one int16 run covers the block (4-bit u) or runs are a
 * single dword (signed Q8_0). */
INLINE int ng32(const int type) { return GEMM_VNNI || type == GGML_TYPE_Q4_0 || signed32(type) ? 2 : 1; }

/* Block b (weights wb, metadata mb) of NG token groups ag[q] into their
 * float accumulators facc[q]: the exact sums u . a + corr, then the
 * reference's float step. */
INLINE void step32(const int type, const int NG, const uint32_t *wb, const struct meta32 *mb,
                   const struct act32 *const *ag, __m256 facc[2][LR])
{
    const int ubits = type == GGML_TYPE_Q5_0 ? 5 : type == GGML_TYPE_Q8_0 || type == GGML_TYPE_IQ4_NL ? 8 : 4;
    const uint32_t(*aq[2])[LT] = {ag[0]->q, ag[NG - 1]->q};
    const int32_t *corr[2] = {ag[0]->corr, ag[NG - 1]->corr};
    __m256i s[2][LR];
    dot_tile(ubits, NG, LR, wb, aq, 8, NULL, signed32(type) ? NULL : corr, false, s);
    UNROLL
    for (int q = 0; q < NG; q++) {
        const __m256 dy = _mm256_load_ps(ag[q]->d);
        UNROLL
        for (int r = 0; r < LR; r++)
            facc[q][r] = fstep32(type, facc[q][r], s[q][r], mb[r].d, dy);
    }
}

/* A tile of LR rows against all token groups, blocks [b0, b1) (one pass;
 * F: the tile's float accumulators between passes), ng32(type) groups at a
 * time, then an odd last group alone.  The float steps per (row, token) are
 * the reference's, block after block, whatever the grouping. */
INLINE void run32(const int type, int64_t n, const uint32_t *w, const struct meta32 *meta, const struct act32 *A,
                  int64_t n_tok, int nr, float *y, size_t ys, float *F, int64_t b0, int64_t b1)
{
    const int64_t nb = n / 32, ng = (n_tok + LT - 1) / LT;
    int64_t g = 0;
    if (ng32(type) == 2)
        for (; g + 2 <= ng; g += 2) {
            __m256 facc[2][LR];
            facc_load(facc[0], F, g, b0 == 0);
            facc_load(facc[1], F, g + 1, b0 == 0);
            for (int64_t b = b0; b < b1; b++) {
                const struct act32 *ag[2] = {A + g * nb + b, A + (g + 1) * nb + b};
                step32(type, 2, w + (size_t)b * 8 * LR, meta + b * LR, ag, facc);
            }
            facc_done(facc[0], F, g, b1 == nb && y, n_tok, nr, y, ys);
            facc_done(facc[1], F, g + 1, b1 == nb && y, n_tok, nr, y, ys);
        }
    for (; g < ng; g++) {
        __m256 facc[2][LR];
        facc_load(facc[0], F, g, b0 == 0);
        for (int64_t b = b0; b < b1; b++) {
            const struct act32 *ag[1] = {A + g * nb + b};
            step32(type, 1, w + (size_t)b * 8 * LR, meta + b * LR, ag, facc);
        }
        facc_done(facc[0], F, g, b1 == nb && y, n_tok, nr, y, ys);
    }
}

/* Super-block b of NG token groups (g, g + NG - 1) and NR rows (r0 ..
 * r0 + NR - 1) of a tile: the sub-block sums scaled (dot_tile's m) and
 * added, the offset or minimums through the bsums, then the reference's
 * float steps into the groups' accumulators in F (row r of group g at
 * F + LT (g LR + r)). */
INLINE void stepK(const int type, const int NG, const int NR, int r0, const uint32_t *wb, size_t hi,
                  const struct metaK *mb, const struct actK *const *ag, float *F, int64_t g)
{
    const bool sub16 = type == GGML_TYPE_Q6_K || type == GGML_TYPE_Q2_K || type == GGML_TYPE_Q3_K;
    const int n_sub = sub16 ? 16 : 8, per_sub = 64 / n_sub;
    const int ubits = type == GGML_TYPE_Q2_K   ? 2
                      : type == GGML_TYPE_Q3_K ? 3
                      : type == GGML_TYPE_Q4_K ? 4
                      : type == GGML_TYPE_Q5_K ? 5
                      : type == GGML_TYPE_Q6_K ? 6
                                               : planesK(type) == 2 ? 4 : 8;
    /* the offset of u taken off with the bsums (log2), or 0: the bsums carry the minimums */
    const int off_shift = type == GGML_TYPE_Q6_K ? 5 : type == GGML_TYPE_Q3_K ? 2 : type == GGML_TYPE_IQ4_XS ? 7 : 0;
    const bool mins = type == GGML_TYPE_Q4_K || type == GGML_TYPE_Q5_K || type == GGML_TYPE_Q2_K;
    __m256i isum[2][LR];
    UNROLL
    for (int q = 0; q < NG; q++)
        UNROLL
        for (int r = 0; r < NR; r++)
            isum[q][r] = _mm256_setzero_si256();
    for (int j = 0; j < n_sub; j++) {
        const uint32_t(*aq[2])[LT] = {ag[0]->q + per_sub * j, ag[NG - 1]->q + per_sub * j};
        int32_t sc[LR];
        UNROLL
        for (int r = 0; r < NR; r++)
            sc[r] = mb[r0 + r].sc[j];
        dot_tile(ubits, NG, NR, wb + (size_t)(per_sub * j) * LR + r0, aq, per_sub, sc, NULL, true, isum);
        if (planesK(type) == 2) { /* u = 16 hi + lo */
            UNROLL
            for (int r = 0; r < NR; r++)
                sc[r] *= 16;
            dot_tile(4, NG, NR, wb + hi + (size_t)(per_sub * j) * LR + r0, aq, per_sub, sc, NULL, true, isum);
        }
    }
    UNROLL
    for (int q = 0; q < NG; q++) {
        const __m256 dy = _mm256_load_ps(ag[q]->d);
        UNROLL
        for (int r = 0; r < NR; r++) {
            const struct metaK *mt = mb + r0 + r;
            float *fp = F + (size_t)((g + q) * LR + r0 + r) * LT;
            /* sum_k mp_k . (bsum pair k): the minimums (Q4_K/Q5_K/Q2_K)
             * or the scales, times the offset of u (Q6_K 32, Q3_K 4,
             * IQ4_XS 128) */
            __m256i bs = _mm256_setzero_si256();
            UNROLL
            for (int k = 0; k < 8; k++)
                bs = _mm256_add_epi32(bs, _mm256_madd_epi16(ldq(ag[q]->bsp[k]), bcast(&mt->mp[k])));
            __m256i is = isum[q][r];
            if (off_shift)
                is = _mm256_sub_epi32(is, _mm256_slli_epi32(bs, off_shift));
            const __m256 dd = _mm256_mul_ps(_mm256_set1_ps(mt->d), dy);
            __m256 f = _mm256_add_ps(_mm256_load_ps(fp), _mm256_mul_ps(dd, _mm256_cvtepi32_ps(is)));
            if (mins)
                f = _mm256_sub_ps(f, _mm256_mul_ps(_mm256_mul_ps(_mm256_set1_ps(mt->dmin), dy), _mm256_cvtepi32_ps(bs)));
            _mm256_store_ps(fp, f);
        }
    }
}

/* A tile of LR rows against all token groups, super-blocks [b0, b1) (one
 * pass; F: the tile's float accumulators, kept there between blocks):
 * pairs of groups by halves of the tile, then an odd last group whole. */
/* Rows per stepK with two token groups: all four (8 accumulation chains;
 * the 8 super-block sums do not fit the registers with the chains and
 * partly wait in the stack), but 2 for IQ4_XS's two planes without VNNI
 * (measured: 4 rows there spill more than they save). */
INLINE int nrK(const int type) { return GEMM_VNNI || planesK(type) == 1 ? LR : LR / 2; }

INLINE void runK(const int type, int64_t n, const uint32_t *w, const struct metaK *meta, const struct actK *A,
                 int64_t n_tok, int nr, float *y, size_t ys, float *F, int64_t b0, int64_t b1)
{
    const int64_t nb = n / QK_K, ng = (n_tok + LT - 1) / LT;
    const size_t hi = (size_t)nb * 64 * LR; /* dwords to the second plane */
    if (b0 == 0)
        memset(F, 0, (size_t)ng * LR * LT * sizeof(float));
    int64_t g = 0;
    for (; g + 2 <= ng; g += 2)
        for (int64_t b = b0; b < b1; b++) {
            const struct actK *ag[2] = {A + g * nb + b, A + (g + 1) * nb + b};
            const uint32_t *wb = w + (size_t)b * 64 * LR;
            UNROLL
            for (int r0 = 0; r0 < LR; r0 += nrK(type))
                stepK(type, 2, nrK(type), r0, wb, hi, meta + b * LR, ag, F, g);
        }
    for (; g < ng; g++)
        for (int64_t b = b0; b < b1; b++) {
            const struct actK *ag[1] = {A + g * nb + b};
            stepK(type, 1, LR, 0, w + (size_t)b * 64 * LR, hi, meta + b * LR, ag, F, g);
        }
    if (b1 == nb && y)
        for (g = 0; g < ng; g++) {
            __m256 facc[LR];
            facc_load(facc, F, g, false);
            facc_done(facc, F, g, true, n_tok, nr, y, ys);
        }
}

static size_t up64(size_t x) { return (x + 63) & ~(size_t)63; }

/* wu: NULL, or the fused gate/up form (gemm_many_glu_fn, dispatch.h) as
 * gemm_avx512.c's: tiles alternate gate rows (2i) and the same up rows
 * (2i + 1), the run functions leave their sums in F (y NULL), and the
 * outputs are act(gate) * up.  x4: 0 rows as stored, 1 repack.h's x4
 * layout, 2 Q4_K x4i. */
INLINE int many(const int type, int64_t n, const void *wv, size_t w_row, int64_t n_rows, const void *av,
                size_t a_row, int64_t n_tok, float *y, size_t ys, const int x4, const void *wu, enum glu_act glu)
{
    const bool k = type == GGML_TYPE_Q4_K || type == GGML_TYPE_Q5_K || type == GGML_TYPE_Q6_K ||
                   type == GGML_TYPE_Q2_K || type == GGML_TYPE_Q3_K || type == GGML_TYPE_IQ4_XS;
    const int64_t nb = n / (k ? QK_K : 32), ng = (n_tok + LT - 1) / LT;
    const size_t msz = k ? sizeof(struct metaK) : sizeof(struct meta32);
    const size_t act_bytes = up64((size_t)(ng * nb) * (k ? sizeof(struct actK) : sizeof(struct act32)));
    const size_t stride = (size_t)n * (size_t)(k ? planesK(type) : 1); /* bytes per unpacked row */
    /* rows in blocks of rb tiles, unpacked first; each pass over a chunk of
     * the activations then serves all tiles of the block (gemm_pass.h) */
    const size_t f_tile = (size_t)ng * LR * LT; /* floats of one tile's accumulators */
    const int64_t n_mt = (n_rows + LR - 1) / LR, n_tiles = wu ? 2 * n_mt : n_mt; /* matrix tiles, tiles */
    int64_t rb = block_tiles(f_tile, n_tiles);
    if (wu) /* whole (gate, up) pairs */
        rb = rb < 2 ? 2 : rb / 2 * 2;
    const size_t w_tile = (size_t)LR * stride, m_tile = (size_t)(LR * nb) * msz;
    const size_t w_bytes = up64((size_t)rb * w_tile), meta_bytes = up64((size_t)rb * m_tile);
    const size_t f_bytes = up64((size_t)rb * f_tile * sizeof(float));
    uint8_t *scratch = kernels_scratch(act_bytes + w_bytes + meta_bytes + f_bytes);
    if (!scratch)
        return -1;
    void *act = scratch;
    uint8_t *w = scratch + act_bytes, *meta = scratch + act_bytes + w_bytes;
    float *F = (float *)(scratch + act_bytes + w_bytes + meta_bytes);
    const int64_t kc = pass_blocks(nb, ng, k ? sizeof(struct actK) : sizeof(struct act32));
    if (k)
        actK_pack(act, av, a_row, n_tok, nb);
    else
        act32_pack(act, av, a_row, n_tok, nb, koff32(type));
    for (int64_t t0 = 0; t0 < n_tiles; t0 += rb) {
        const int64_t t1 = t0 + rb < n_tiles ? t0 + rb : n_tiles;
        for (int64_t t = t0; t < t1; t++) {
            const int64_t r0 = (wu ? t / 2 : t) * LR; /* first row in its matrix */
            const int nr = n_rows - r0 < LR ? (int)(n_rows - r0) : LR;
            const uint8_t *wb = wu && t % 2 ? wu : wv;
            uint32_t *wt = (uint32_t *)(w + (size_t)(t - t0) * w_tile);
            uint8_t *mt = meta + (size_t)(t - t0) * m_tile;
            /* matmul's ranges start at multiples of 16 rows: a call's groups
             * are its tiles, all full but perhaps a matrix's last */
            const int grouped = nr == LR && r0 + LR <= n_rows / 4 * 4 ? x4 : 0;
            if (k)
                unpack_tileK(type, wb + (size_t)r0 * w_row, w_row, nb, nr, grouped, wt, (struct metaK *)mt);
            else
                unpack_tile32(type, wb + (size_t)r0 * w_row, w_row, nb, nr, grouped, wt, (struct meta32 *)mt);
        }
        for (int64_t b0 = 0; b0 < nb; b0 += kc) {
            const int64_t b1 = b0 + kc < nb ? b0 + kc : nb;
            for (int64_t t = t0; t < t1; t++) {
                const int64_t r0 = (wu ? t / 2 : t) * LR;
                const int nr = n_rows - r0 < LR ? (int)(n_rows - r0) : LR;
                const uint32_t *wt = (const uint32_t *)(w + (size_t)(t - t0) * w_tile);
                const uint8_t *mt = meta + (size_t)(t - t0) * m_tile;
                float *Ft = F + (size_t)(t - t0) * f_tile, *yt = wu ? NULL : y + r0;
                if (k)
                    runK(type, n, wt, (const struct metaK *)mt, act, n_tok, nr, yt, ys, Ft, b0, b1);
                else
                    run32(type, n, wt, (const struct meta32 *)mt, act, n_tok, nr, yt, ys, Ft, b0, b1);
            }
        }
        for (int64_t g = 0; g < ng && wu; g++) /* act(gate) * up, silu8/gelu8 as ops_avx2.c's */
            for (int64_t t = t0; t < t1; t += 2) {
                const int64_t r0 = t / 2 * LR;
                const int nr = n_rows - r0 < LR ? (int)(n_rows - r0) : LR;
                __m256 fg[LR], fu[LR];
                facc_load(fg, F + (size_t)(t - t0) * f_tile, g, false);
                facc_load(fu, F + (size_t)(t + 1 - t0) * f_tile, g, false);
                UNROLL
                for (int r = 0; r < LR; r++)
                    fg[r] = _mm256_mul_ps(glu == GLU_GELU ? gelu8(fg[r]) : silu8(fg[r]), fu[r]);
                facc_done(fg, NULL, g, true, n_tok, nr, y + r0, ys);
            }
    }
    return 0;
}

#define DEFINE_MANY_X(NAME, TYPE, X4)                                                                         \
    static int NAME(int64_t n, const void *w, size_t w_row, int64_t n_rows, const void *a, size_t a_row,       \
                    int64_t n_tok, float *y, size_t ys)                                                       \
    {                                                                                                         \
        return many(TYPE, n, w, w_row, n_rows, a, a_row, n_tok, y, ys, X4, NULL, GLU_SILU);                   \
    }                                                                                                         \
    /* no many_prep here: prep is always NULL */                                                              \
    static int NAME##_glu(int64_t n, const void *wg, const void *wu, size_t w_row, int64_t n_rows, const void *a, \
                          size_t a_row, const void *prep, int64_t n_tok, float *y, size_t ys, enum glu_act act) \
    {                                                                                                         \
        (void)prep;                                                                                           \
        return many(TYPE, n, wg, w_row, n_rows, a, a_row, n_tok, y, ys, X4, wu, act);                         \
    }
#define DEFINE_MANY(NAME, TYPE) DEFINE_MANY_X(NAME, TYPE, 0)

DEFINE_MANY(many_q4_0, GGML_TYPE_Q4_0)
DEFINE_MANY(many_q5_0, GGML_TYPE_Q5_0)
DEFINE_MANY(many_q8_0, GGML_TYPE_Q8_0)
DEFINE_MANY(many_q4_K, GGML_TYPE_Q4_K)
DEFINE_MANY(many_q5_K, GGML_TYPE_Q5_K)
DEFINE_MANY(many_q6_K, GGML_TYPE_Q6_K)
DEFINE_MANY(many_q2_K, GGML_TYPE_Q2_K)
DEFINE_MANY(many_q3_K, GGML_TYPE_Q3_K)
DEFINE_MANY(many_iq4_xs, GGML_TYPE_IQ4_XS)
DEFINE_MANY(many_iq4_nl, GGML_TYPE_IQ4_NL)
/* the x4 layouts (repack.h) */
DEFINE_MANY_X(many_q4_0x4, GGML_TYPE_Q4_0, 1)
DEFINE_MANY_X(many_q5_0x4, GGML_TYPE_Q5_0, 1)
DEFINE_MANY_X(many_q4_Kx4, GGML_TYPE_Q4_K, 1)
DEFINE_MANY_X(many_q4_Kx4i, GGML_TYPE_Q4_K, 2)
DEFINE_MANY_X(many_q6_Kx4, GGML_TYPE_Q6_K, 1)
DEFINE_MANY_X(many_q3_Kx4, GGML_TYPE_Q3_K, 1)
DEFINE_MANY_X(many_iq4_nlx4, GGML_TYPE_IQ4_NL, 1)
DEFINE_MANY_X(many_q8_0x4, GGML_TYPE_Q8_0, 1)

/* Install this file's gemm_many kernels. */
static void fill_many(struct kernel_table *t)
{
    t->types[GGML_TYPE_Q4_0].gemm_many = many_q4_0;
    t->types[GGML_TYPE_Q4_0].gemm_many_glu = many_q4_0_glu;
    t->types[GGML_TYPE_Q5_0].gemm_many = many_q5_0;
    t->types[GGML_TYPE_Q5_0].gemm_many_glu = many_q5_0_glu;
    t->types[GGML_TYPE_Q8_0].gemm_many = many_q8_0;
    t->types[GGML_TYPE_Q8_0].gemm_many_glu = many_q8_0_glu;
    t->types[GGML_TYPE_Q4_K].gemm_many = many_q4_K;
    t->types[GGML_TYPE_Q4_K].gemm_many_glu = many_q4_K_glu;
    t->types[GGML_TYPE_Q5_K].gemm_many = many_q5_K;
    t->types[GGML_TYPE_Q5_K].gemm_many_glu = many_q5_K_glu;
    t->types[GGML_TYPE_Q6_K].gemm_many = many_q6_K;
    t->types[GGML_TYPE_Q6_K].gemm_many_glu = many_q6_K_glu;
    t->types[GGML_TYPE_Q2_K].gemm_many = many_q2_K;
    t->types[GGML_TYPE_Q2_K].gemm_many_glu = many_q2_K_glu;
    t->types[GGML_TYPE_Q3_K].gemm_many = many_q3_K;
    t->types[GGML_TYPE_Q3_K].gemm_many_glu = many_q3_K_glu;
    t->types[GGML_TYPE_IQ4_XS].gemm_many = many_iq4_xs;
    t->types[GGML_TYPE_IQ4_XS].gemm_many_glu = many_iq4_xs_glu;
    t->types[INFER_TYPE_Q4_0_X4].gemm_many = many_q4_0x4;
    t->types[INFER_TYPE_Q4_0_X4].gemm_many_glu = many_q4_0x4_glu;
    t->types[INFER_TYPE_Q5_0_X4].gemm_many = many_q5_0x4;
    t->types[INFER_TYPE_Q5_0_X4].gemm_many_glu = many_q5_0x4_glu;
    t->types[INFER_TYPE_Q4_K_X4].gemm_many = many_q4_Kx4;
    t->types[INFER_TYPE_Q4_K_X4].gemm_many_glu = many_q4_Kx4_glu;
    t->types[INFER_TYPE_Q4_K_X4I].gemm_many = many_q4_Kx4i;
    t->types[INFER_TYPE_Q4_K_X4I].gemm_many_glu = many_q4_Kx4i_glu;
    t->types[INFER_TYPE_Q6_K_X4].gemm_many = many_q6_Kx4;
    t->types[INFER_TYPE_Q6_K_X4].gemm_many_glu = many_q6_Kx4_glu;
    t->types[INFER_TYPE_Q3_K_X4].gemm_many = many_q3_Kx4;
    t->types[INFER_TYPE_Q3_K_X4].gemm_many_glu = many_q3_Kx4_glu;
    t->types[GGML_TYPE_IQ4_NL].gemm_many = many_iq4_nl;
    t->types[GGML_TYPE_IQ4_NL].gemm_many_glu = many_iq4_nl_glu;
    t->types[INFER_TYPE_IQ4_NL_X4].gemm_many = many_iq4_nlx4;
    t->types[INFER_TYPE_IQ4_NL_X4].gemm_many_glu = many_iq4_nlx4_glu;
    t->types[INFER_TYPE_Q8_0_X4].gemm_many = many_q8_0x4;
    t->types[INFER_TYPE_Q8_0_X4].gemm_many_glu = many_q8_0x4_glu;
}
