/*
 * gemm_avx512.c - the many-token matmul of the avx512 variant (gemm_many in
 * dispatch.h): prefill with AVX-512 VNNI, for Q4_0, Q5_0, Q8_0, IQ4_NL (x Q8_0) and
 * Q4_K, Q5_K, Q6_K, Q2_K, Q3_K, IQ4_XS (x Q8_K).  Compiled with the avx512
 * variant's flags.
 *
 * Layout: vector lanes are tokens.  The activations of the call are
 * transposed once into groups of LT = 16 tokens: for every block, vector k
 * holds bytes 4k..4k+3 of each token (biased to unsigned, a + 128).  The
 * weights of a tile of LR rows are unpacked once into signed bytes, and
 *     vpdpbusd(acc, act[k], broadcast(4 weight bytes))
 * adds those four products for 16 tokens at once, so a block's integer sum
 * lands in one lane per token with no horizontal reduction.  The bias is
 * removed exactly: acc starts at -128 * sum(w), computed when unpacking.
 *
 * Every lane then does the reference's float steps in its order (quants.c:
 * (float)sumi * d_x * d_y for Q4_0, (d_x * d_y) * sumi for Q5_0/Q8_0,
 * (d_x d_y) isum - (dmin_x d_y) summ for the K-quants, block after block),
 * so the results are bit-identical to vec_dot, as gemm_many must be.
 * K-quants: the sub-block sums are scaled by their 6-bit (Q6_K: 8-bit
 * signed; Q2_K: 4-bit; Q3_K, IQ4_XS: 6-bit minus 32) scales with vpmulld,
 * the minimums through vpdpwssd on pairs of 32-element (Q2_K: 16-element)
 * sums of the activations (Q8_K bsums).
 *
 * Cost model: unpacking is O(rows * n) once per call, transposing O(tokens
 * * n) once per call; the rest is 8 (Q8_0-like) or 64+ (K) vpdpbusd per
 * block for LR rows x 16 tokens plus a few float ops per block and lane.
 */
#include <immintrin.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "../dispatch.h"
#include "../quants.h"
#include "x86_util.h"
#include "lowbit_scales_x86.h"
#include "act_x86.h"

#define LT 16 /* tokens per group: the lanes of a vector */
#define LR 8  /* weight rows per tile */
#define K_PF 4 /* K-quant unpack: super-blocks of prefetch distance */

/* ------------------------- transposed activations ------------------------- */

/* One Q8_0 block of a group of LT tokens: q[k][t] = bytes 4k..4k+3 of token
 * t, each + 128; d[t] its scale (0 for padding tokens). */
struct act32 {
    uint32_t q[8][LT];
    float d[LT];
};

/* One Q8_K super-block of a group: as act32, plus bs[k][t] = the int16 pair
 * (sum of elements 64k..64k+31, sum of 64k+32..64k+63) of token t. */
struct actK {
    uint32_t q[64][LT];
    float d[LT];
    uint32_t bs[4][LT];
    uint32_t bs16[8][LT]; /* Q2_K: the pairs (bsums[2k], bsums[2k+1]) */
};

_Static_assert(sizeof(struct act32) % 64 == 0 && sizeof(struct actK) % 64 == 0, "vector-aligned groups");

/* Dword k of every token of a group: gathered from the tokens' rows (token t
 * of the group at a + t * a_row), lanes past the last token 0. */
INLINE __m512i gather_tok(const uint8_t *a, __m512i rows, __mmask16 live, size_t off)
{
    return _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, rows, a + off, 1);
}

/* The byte offsets t * a_row of a group's tokens, and which of them exist
 * (the activation buffer of one call is far below 2 GB: matmul passes at
 * most MATMUL_MANY_TOK rows of a few KB). */
INLINE __m512i group_rows(size_t a_row, int64_t n_tok, int64_t g, __mmask16 *live)
{
    const int64_t left = n_tok - g * LT;
    *live = left >= LT ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
    return _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                              _mm512_set1_epi32((int)a_row));
}

/* The activations of a call, transposed: Q8_0 blocks into act32 (kq
 * false) or Q8_K super-blocks into actK (kq true), group after group. */
INLINE void act_pack(const bool kq, void *A, const uint8_t *a, size_t a_row, int64_t n_tok, int64_t nb)
{
    const int64_t ng = (n_tok + LT - 1) / LT;
    const size_t bsz = kq ? sizeof(block_q8_K) : sizeof(block_q8_0);
    const size_t qs = kq ? offsetof(block_q8_K, qs) : offsetof(block_q8_0, qs);
    const __m512i x80 = _mm512_set1_epi32((int)0x80808080u), lo16 = _mm512_set1_epi32(0xFFFF);
    for (int64_t g = 0; g < ng; g++) {
        __mmask16 live;
        const __m512i rows = group_rows(a_row, n_tok, g, &live);
        const uint8_t *ag = a + (size_t)(g * LT) * a_row;
        for (int64_t b = 0; b < nb; b++) {
            const size_t blk = (size_t)b * bsz;
            uint32_t(*q)[LT] = kq ? ((struct actK *)A)[g * nb + b].q : ((struct act32 *)A)[g * nb + b].q;
            for (int k = 0; k < (kq ? 64 : 8); k++) /* padding lanes: 0 ^ 0x80 = the biased zero */
                _mm512_store_si512((void *)q[k], _mm512_xor_si512(gather_tok(ag, rows, live, blk + qs + 4 * (size_t)k), x80));
            if (!kq) { /* the f16 scale: the low half of the dword at d */
                const __m512i dh = gather_tok(ag, rows, live, blk + offsetof(block_q8_0, d));
                _mm512_store_ps(((struct act32 *)A)[g * nb + b].d, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dh)));
                continue;
            }
            struct actK *o = (struct actK *)A + g * nb + b;
            _mm512_store_si512((void *)o->d, gather_tok(ag, rows, live, blk + offsetof(block_q8_K, d)));
            __m512i p[8];
            UNROLL
            for (int k = 0; k < 8; k++) { /* (bsums[2k], bsums[2k+1]) */
                p[k] = gather_tok(ag, rows, live, blk + offsetof(block_q8_K, bsums) + 4 * (size_t)k);
                _mm512_store_si512((void *)o->bs16[k], p[k]);
            }
            UNROLL
            for (int k = 0; k < 4; k++) { /* (sum of the first 32, of the next 32), truncated to 16 bits */
                const __m512i lo = _mm512_madd_epi16(p[2 * k], _mm512_set1_epi16(1));
                const __m512i hi = _mm512_madd_epi16(p[2 * k + 1], _mm512_set1_epi16(1));
                _mm512_store_si512((void *)o->bs[k], _mm512_or_si512(_mm512_and_si512(lo, lo16), _mm512_slli_epi32(hi, 16)));
            }
        }
    }
}

/* ---------------------------- unpacked weights ---------------------------- */

/* Per row and block (Q4_0, Q5_0, Q8_0): -128 * sum(w), and the scale. */
struct meta32 {
    int32_t corr;
    float d;
};

/* Per row and super-block (K-quants): -128 * sum_j sc_j sum_{i in j} w_i,
 * the sub-block scales, the minimum pairs (m_2k | m_2k+1 << 16), d, dmin. */
struct metaK {
    int32_t corr;
    int32_t sc[16];
    uint32_t mp[4];
    uint32_t mp16[8]; /* Q2_K: the minimum pairs (m_2k | m_2k+1 << 16) of its 16 groups */
    float d, dmin;
};

/* The natural-order signed weights of a Q2_K (0..3), Q3_K (-4..3) or
 * IQ4_XS (codebook) block into wb[256], the scales of its groups (Q2_K,
 * Q3_K: 16 of 16; IQ4_XS: 8 of 32) into mt->sc, Q2_K's minimum pairs;
 * returns sum_j sc_j sum_{i in j} w_i. */
static int64_t unpack_lowbit(const int type, const uint8_t *blk, uint8_t *wb, struct metaK *mt)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F), x80 = _mm256_set1_epi8((char)0x80);
    int64_t c_sum = 0;
    memset(mt->mp, 0, sizeof(mt->mp));
    memset(mt->mp16, 0, sizeof(mt->mp16));
    mt->dmin = 0.0f;
    if (type == GGML_TYPE_IQ4_XS) {
        const block_iq4_xs *x = (const block_iq4_xs *)blk;
        const __m256i cb = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kvalues_iq4nl));
        for (int j = 0; j < 8; j++) {
            const __m128i q = _mm_loadu_si128((const __m128i *)(x->qs + 16 * j));
            const __m256i w = _mm256_shuffle_epi8(cb, _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4));
            _mm256_storeu_si256((__m256i *)(wb + 32 * j), w);
            mt->sc[j] = iq4_xs_scale(x, j);
            c_sum += (int64_t)mt->sc[j] * (sum_u8(_mm256_xor_si256(w, x80)) - 128 * 32);
        }
        mt->d = h2f(ld16(&x->d));
        return c_sum;
    }
    const uint8_t *qs = type == GGML_TYPE_Q2_K ? ((const block_q2_K *)blk)->qs : ((const block_q3_K *)blk)->qs;
    int16_t sc[16];
    if (type == GGML_TYPE_Q2_K) {
        const block_q2_K *x = (const block_q2_K *)blk;
        for (int j = 0; j < 16; j++)
            sc[j] = x->scales[j] & 0xF;
        for (int k = 0; k < 8; k++)
            mt->mp16[k] = (uint32_t)(x->scales[2 * k] >> 4) | (uint32_t)(x->scales[2 * k + 1] >> 4) << 16;
        mt->d = h2f(ld16(&x->d));
        mt->dmin = h2f(ld16(&x->dmin));
    } else {
        const block_q3_K *x = (const block_q3_K *)blk;
        q3_K_scales(x->scales, sc);
        mt->d = h2f(ld16(&x->d));
    }
    const __m256i hm = type == GGML_TYPE_Q3_K ? _mm256_loadu_si256((const __m256i *)((const block_q3_K *)blk)->hmask)
                                             : _mm256_setzero_si256();
    for (int c = 0; c < 8; c++) { /* elements 32c + l: bits 2 (c % 4) of qs[32 (c / 4) + l] */
        const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * (c / 4)));
        __m256i w = _mm256_and_si256(_mm256_srli_epi16(q, 2 * (c % 4)), _mm256_set1_epi8(3));
        if (type == GGML_TYPE_Q3_K) /* - 4 where bit c of hmask[l] is clear */
            w = _mm256_mask_sub_epi8(w, _mm256_testn_epi8_mask(hm, _mm256_set1_epi8((char)(1 << c))), w,
                                     _mm256_set1_epi8(4));
        _mm256_storeu_si256((__m256i *)(wb + 32 * c), w);
        const __m256i s = _mm256_sad_epu8(_mm256_xor_si256(w, x80), _mm256_setzero_si256());
        const int s0 = _mm256_extract_epi32(s, 0) + _mm256_extract_epi32(s, 2) - 128 * 16;
        const int s1 = _mm256_extract_epi32(s, 4) + _mm256_extract_epi32(s, 6) - 128 * 16;
        c_sum += (int64_t)sc[2 * c] * s0 + (int64_t)sc[2 * c + 1] * s1;
    }
    for (int j = 0; j < 16; j++)
        mt->sc[j] = sc[j];
    return c_sum;
}

/* The 32 weights of a Q4_0/Q5_0 block (quants qs, Q5_0 high bits qh), a
 * Q8_0 block (quants qs) or an IQ4_NL block (nibbles qs through the
 * codebook) as signed bytes, and their sum. */
INLINE __m256i unpack32q(const int type, const uint8_t *qs, uint32_t qh, int *sum)
{
    if (type == GGML_TYPE_Q8_0 || type == GGML_TYPE_IQ4_NL) {
        __m256i w;
        if (type == GGML_TYPE_Q8_0) {
            w = _mm256_loadu_si256((const __m256i *)qs);
        } else {
            const __m128i q = _mm_loadu_si128((const __m128i *)qs);
            const __m256i nib = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
            w = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kvalues_iq4nl)), nib);
        }
        *sum = sum_u8(_mm256_xor_si256(w, _mm256_set1_epi8((char)0x80))) - 128 * 32;
        return w;
    }
    const __m128i q = _mm_loadu_si128((const __m128i *)qs);
    __m256i u = _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
    int off = 8;
    if (type == GGML_TYPE_Q5_0) {
        u = _mm256_mask_add_epi8(u, (__mmask32)qh, u, _mm256_set1_epi8(16));
        off = 16;
    }
    *sum = sum_u8(u) - off * 32;
    return _mm256_sub_epi8(u, _mm256_set1_epi8((char)off));
}

/* Row `row` of nb blocks, unpacked: when x4 (repack.h), row is the group
 * and r the row within it. */
static void unpack_row32(const int type, const uint8_t *row, int64_t nb, uint8_t *w, struct meta32 *meta, bool x4,
                         int r)
{
    const size_t bs = bbytes32(type);
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *blk = row + (size_t)b * bs, *d = blk, *qs = blk + (type == GGML_TYPE_Q5_0 ? 6 : 2);
        uint32_t qh = type == GGML_TYPE_Q5_0 ? ld32(blk + 2) : 0;
        uint8_t q8[32];
        if (x4 && b < nb / 4 * 4 && type == GGML_TYPE_Q8_0) { /* Q8_0 x4: words of four bytes */
            d = row + repack_x4_d(r, b, bs);
            repack_x8_qs(row, r, b, q8);
            qs = q8;
        } else if (x4 && b < nb / 4 * 4) { /* repack.h's tile layout */
            d = row + repack_x4_d(r, b, bs);
            qs = row + repack_x4_qs(type, r, b, bs);
            if (type == GGML_TYPE_Q5_0)
                qh = (uint32_t)ld16(row + repack_x4_qh(r, b, bs, 0)) |
                     (uint32_t)ld16(row + repack_x4_qh(r, b, bs, 1)) << 16;
        } else if (x4) { /* the last nb % 4 columns: four blocks side by side */
            d = row + repack_x4_whole(r, b, nb, bs);
            qs = d + (type == GGML_TYPE_Q5_0 ? 6 : 2);
            qh = type == GGML_TYPE_Q5_0 ? ld32(d + 2) : 0;
        }
        int sum;
        _mm256_storeu_si256((__m256i *)(w + 32 * b), unpack32q(type, qs, qh, &sum));
        meta[b].corr = -128 * sum;
        meta[b].d = h2f(ld16(d));
    }
}

/* ------------------------------ the kernels ------------------------------ */

/* LT lanes -> y[t * ys] for the first nt tokens. */
INLINE void store_lanes(float *y, size_t ys, __m512 v, int nt)
{
    float tmp[LT];
    _mm512_storeu_ps(tmp, v);
    for (int t = 0; t < nt; t++)
        y[(size_t)t * ys] = tmp[t];
}

/* The outputs of a tile (rows r < nr, lanes = tokens t < nt).  A full
 * tile (8 rows x 16 tokens) is transposed in registers so that each token's
 * eight outputs go out as two 16-byte stores: sixteen scalar stores per row,
 * each to another token's cache line, were a fifth of many_q4_K's time. */
INLINE void store_tile(float *y, size_t ys, const __m512 *f, int nr, int nt)
{
    _Static_assert(LR == 8 && LT == 16, "store_tile transposes 8 x 16");
    if (nr < LR || nt < LT) {
        for (int r = 0; r < nr; r++)
            store_lanes(y + r, ys, f[r], nt);
        return;
    }
    const __m512 t0 = _mm512_unpacklo_ps(f[0], f[1]), t1 = _mm512_unpackhi_ps(f[0], f[1]);
    const __m512 t2 = _mm512_unpacklo_ps(f[2], f[3]), t3 = _mm512_unpackhi_ps(f[2], f[3]);
    const __m512 t4 = _mm512_unpacklo_ps(f[4], f[5]), t5 = _mm512_unpackhi_ps(f[4], f[5]);
    const __m512 t6 = _mm512_unpacklo_ps(f[6], f[7]), t7 = _mm512_unpackhi_ps(f[6], f[7]);
    /* u[k] (rows 0-3) and u[4 + k] (rows 4-7): in 128-bit lane L, token 4L + k */
    const __m512 u[8] = {_mm512_shuffle_ps(t0, t2, 0x44), _mm512_shuffle_ps(t0, t2, 0xEE),
                         _mm512_shuffle_ps(t1, t3, 0x44), _mm512_shuffle_ps(t1, t3, 0xEE),
                         _mm512_shuffle_ps(t4, t6, 0x44), _mm512_shuffle_ps(t4, t6, 0xEE),
                         _mm512_shuffle_ps(t5, t7, 0x44), _mm512_shuffle_ps(t5, t7, 0xEE)};
#define STORE_LANE(L)                                                                                          \
    for (int k = 0; k < 4; k++) {                                                                              \
        float *yt = y + (size_t)(4 * (L) + k) * ys;                                                            \
        _mm_storeu_ps(yt, _mm512_extractf32x4_ps(u[k], L));                                                    \
        _mm_storeu_ps(yt + 4, _mm512_extractf32x4_ps(u[4 + k], L));                                            \
    }
    STORE_LANE(0)
    STORE_LANE(1)
    STORE_LANE(2)
    STORE_LANE(3)
#undef STORE_LANE
}

/* The weights of a tile, interleaved for the kernels: dword k of block b of
 * row r at wi[(b * kpb + k) * LR + r] (kpb: dwords per block, 8 or 64), so
 * the LR broadcasts of one step are consecutive dwords behind one pointer;
 * the per-block metadata likewise with the row index last. */
struct tile32 {
    int32_t corr[LR];
    float d[LR];
};

struct tileK {
    int32_t corr[LR];
    int32_t sc[LR][16]; /* row r's group scales together: one vector store */
    uint32_t mp[4][LR];
    uint32_t mp16[8][LR];
    float d[LR], dmin[LR];
};

/* acc + vpdpbusd(a, the dword at p broadcast), with the broadcast folded
 * into the instruction ({1to16}): GCC 12 emits a separate vpbroadcastd for
 * _mm512_set1_epi32(*p) here, and in these loops every extra vector
 * instruction costs about a cycle (bench: 24 vpdpbusd + 8 vpbroadcastd take
 * ~30% longer than 24 alone; with the folded form, no longer). */
INLINE __m512i dp_bcast(__m512i acc, __m512i a, const uint32_t *p)
{
    __asm__("vpdpbusd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(a), "m"(*p));
    return acc;
}

/* acc + vpdpwssd(a, the int16 pair at p broadcast), folded likewise. */
INLINE __m512i dpw_bcast(__m512i acc, __m512i a, const uint32_t *p)
{
    __asm__("vpdpwssd %2%{1to16%}, %1, %0" : "+v"(acc) : "v"(a), "m"(*p));
    return acc;
}

/* acc + vpdpbusd(a, w), w already broadcast (kept in a register: GCC would
 * fold a broadcast it can see into each instruction's memory operand, one
 * load per use where one per NG uses is the point). */
INLINE __m512i dp_reg(__m512i acc, __m512i a, __m512i w)
{
    __asm__("vpdpbusd %2, %1, %0" : "+v"(acc) : "v"(a), "v"(w));
    return acc;
}

#define GP_VEC __m512
#define GP_ZERO() _mm512_setzero_ps()
#define GP_LOAD(p) _mm512_load_ps(p)
#define GP_STORE(p, v) _mm512_store_ps(p, v)
#include "gemm_pass.h"

/* Block b of NG token groups (g, g + NG - 1) and the LR rows of a tile,
 * their float accumulators in F (row r of group g at F + LT (g LR + r)).
 * Inside a block the LR rows advance together, one vpdpbusd per row,
 * activation vector and group, so NG x LR accumulation chains are in flight
 * (LR = 8 chains, one group, left the vector unit waiting on vpdpbusd's
 * latency: ~58% of the peak; 16 chains, two groups: see run32).  Each
 * broadcast weight dword is folded into both groups' vpdpbusd (two loads,
 * no extra vector instruction), the corrections are broadcast once for both.
 * The float steps per (row, token) are the reference's, block after block. */
INLINE void run32_part(const int type, const int NG, int64_t nb, const uint32_t *wi, const struct tile32 *tm,
                       const struct act32 *A, int64_t g, float *F, int64_t b)
{
    const struct act32 *ag[2] = {A + g * nb + b, A + (g + NG - 1) * nb + b};
    const struct tile32 *mt = tm + b;
    const uint32_t *wb = wi + (size_t)b * 8 * LR;
    float *Fg = F + (size_t)g * LR * LT; /* one base, constant offsets: no pointer per row */
    __m512i acc[2][LR];
    UNROLL
    for (int r = 0; r < LR; r++) {
        acc[0][r] = _mm512_set1_epi32(mt->corr[r]);
        if (NG == 2)
            acc[1][r] = acc[0][r];
    }
    UNROLL
    for (int k = 0; k < 8; k++) {
        __m512i av[2];
        UNROLL
        for (int q = 0; q < NG; q++)
            av[q] = _mm512_load_si512((const void *)ag[q]->q[k]);
        UNROLL
        for (int r = 0; r < LR; r++) {
            if (NG == 1) {
                acc[0][r] = dp_bcast(acc[0][r], av[0], wb + k * LR + r);
                continue;
            }
            const __m512i w = _mm512_set1_epi32((int)wb[k * LR + r]);
            UNROLL
            for (int q = 0; q < NG; q++)
                acc[q][r] = dp_reg(acc[q][r], av[q], w);
        }
    }
    UNROLL
    for (int q = 0; q < NG; q++) {
        const __m512 dy = _mm512_load_ps(ag[q]->d);
        UNROLL
        for (int r = 0; r < LR; r++) {
            float *fp = Fg + (q * LR + r) * LT;
            const __m512 f = _mm512_cvtepi32_ps(acc[q][r]), dx = _mm512_set1_ps(mt->d[r]);
            if (type == GGML_TYPE_Q4_0)
                _mm512_store_ps(fp, _mm512_add_ps(_mm512_load_ps(fp), _mm512_mul_ps(_mm512_mul_ps(f, dx), dy)));
            else
                _mm512_store_ps(fp, _mm512_add_ps(_mm512_load_ps(fp), _mm512_mul_ps(_mm512_mul_ps(dx, dy), f)));
        }
    }
}

/* A tile of LR interleaved rows against token groups g and g + 1 (or g
 * alone when it is the last, ng odd), blocks [b0, b1) (one pass; F: the
 * tile's float accumulators, kept there between blocks). */
INLINE void run32(const int type, int64_t n, const uint32_t *wi, const struct tile32 *tm, const struct act32 *A,
                  int64_t ng, int64_t g, float *F, int64_t b0, int64_t b1)
{
    const int64_t nb = n / 32;
    if (g + 2 <= ng)
        for (int64_t b = b0; b < b1; b++)
            run32_part(type, 2, nb, wi, tm, A, g, F, b);
    else
        for (int64_t b = b0; b < b1; b++)
            run32_part(type, 1, nb, wi, tm, A, g, F, b);
}

/* Super-blocks [b0, b1) of NG token groups (g, g + NG - 1) and NR = LR / NG
 * rows (r0 .. r0 + NR - 1) of a tile, their float accumulators in F.  Two
 * sub-blocks go at once, so NG x NR x 2 = 16 vpdpbusd chains are in flight
 * (vpdpbusd's latency needs more than the eight of one sub-block: 8 chains
 * ran at ~78% of the peak, 16 at ~88%), and with NG = 2 each broadcast
 * weight dword serves both groups (one load per two vpdpbusd instead of one
 * per vpdpbusd).  The integer sums are exact in any grouping; the float
 * steps per (row, token) are the reference's, block after block. */
INLINE void runK_part(const int type, const int NG, int64_t nb, const uint32_t *wi, const struct tileK *tm,
                      const struct actK *A, int64_t g, int r0, float *F, int64_t b)
{
    const int NR = LR / NG;
    const int n_sub = type == GGML_TYPE_Q4_K || type == GGML_TYPE_Q5_K || type == GGML_TYPE_IQ4_XS ? 8 : 16;
    const int per_sub = 64 / n_sub; /* dwords per sub-block */
    const struct tileK *mt = tm + b;
    const struct actK *ag[2] = {A + g * nb + b, A + (g + NG - 1) * nb + b};
    float *Fg = F + (size_t)g * LR * LT;
    __m512i isum[2][LR];
    UNROLL
    for (int q = 0; q < NG; q++)
        UNROLL
        for (int r = 0; r < NR; r++)
            isum[q][r] = _mm512_set1_epi32(mt->corr[r0 + r]);
    for (int j = 0; j < n_sub; j += 2) {
        const uint32_t *wj = wi + ((size_t)b * 64 + (size_t)(per_sub * j)) * LR + r0;
        __m512i acc[2][2][LR]; /* [group][sub-block j + h][row] */
        UNROLL
        for (int q = 0; q < NG; q++)
            UNROLL
            for (int r = 0; r < NR; r++)
                acc[q][0][r] = acc[q][1][r] = _mm512_setzero_si512();
        UNROLL
        for (int k = 0; k < per_sub; k++) {
            __m512i av[2][2];
            UNROLL
            for (int h = 0; h < 2; h++)
                UNROLL
                for (int q = 0; q < NG; q++)
                    av[q][h] = _mm512_load_si512((const void *)ag[q]->q[per_sub * (j + h) + k]);
            UNROLL
            for (int h = 0; h < 2; h++)
                UNROLL
                for (int r = 0; r < NR; r++) {
                    const uint32_t *p = wj + (per_sub * h + k) * LR + r;
                    if (NG == 1) {
                        acc[0][h][r] = dp_bcast(acc[0][h][r], av[0][h], p);
                        continue;
                    }
                    const __m512i w = _mm512_set1_epi32((int)*p);
                    UNROLL
                    for (int q = 0; q < NG; q++)
                        acc[q][h][r] = dp_reg(acc[q][h][r], av[q][h], w);
                }
        }
        UNROLL
        for (int q = 0; q < NG; q++)
            UNROLL
            for (int r = 0; r < NR; r++)
                isum[q][r] = _mm512_add_epi32(
                    isum[q][r],
                    _mm512_add_epi32(_mm512_mullo_epi32(acc[q][0][r], _mm512_set1_epi32(mt->sc[r0 + r][j])),
                                     _mm512_mullo_epi32(acc[q][1][r], _mm512_set1_epi32(mt->sc[r0 + r][j + 1]))));
    }
    UNROLL
    for (int q = 0; q < NG; q++) {
        const __m512 dy = _mm512_load_ps(ag[q]->d);
        __m512i bs[4], bs16[8]; /* the activation sums the minimums need */
        UNROLL
        for (int k = 0; k < 4; k++)
            bs[k] = type == GGML_TYPE_Q2_K ? _mm512_setzero_si512() : _mm512_load_si512((const void *)ag[q]->bs[k]);
        UNROLL
        for (int k = 0; k < 8; k++)
            bs16[k] = type == GGML_TYPE_Q2_K ? _mm512_load_si512((const void *)ag[q]->bs16[k]) : _mm512_setzero_si512();
        UNROLL
        for (int r = 0; r < NR; r++) {
            float *fp = Fg + (q * LR + r0 + r) * LT;
            __m512 f = _mm512_load_ps(fp);
            const __m512 dd = _mm512_mul_ps(_mm512_set1_ps(mt->d[r0 + r]), dy);
            f = _mm512_add_ps(f, _mm512_mul_ps(dd, _mm512_cvtepi32_ps(isum[q][r])));
            if (type == GGML_TYPE_Q4_K || type == GGML_TYPE_Q5_K || type == GGML_TYPE_Q2_K) {
                __m512i summ = _mm512_setzero_si512();
                if (type == GGML_TYPE_Q2_K) {
                    UNROLL
                    for (int k = 0; k < 8; k++)
                        summ = dpw_bcast(summ, bs16[k], &mt->mp16[k][r0 + r]);
                } else {
                    UNROLL
                    for (int k = 0; k < 4; k++)
                        summ = dpw_bcast(summ, bs[k], &mt->mp[k][r0 + r]);
                }
                f = _mm512_sub_ps(f, _mm512_mul_ps(_mm512_mul_ps(_mm512_set1_ps(mt->dmin[r0 + r]), dy),
                                                   _mm512_cvtepi32_ps(summ)));
            }
            _mm512_store_ps(fp, f);
        }
    }
}

/* A tile of LR interleaved rows against token groups g and g + 1 by halves
 * of the tile (or g alone, whole, when it is the last, ng odd), super-blocks
 * [b0, b1) (one pass; F: the tile's float accumulators, kept there between
 * blocks). */
INLINE void runK(const int type, int64_t n, const uint32_t *wi, const struct tileK *tm, const struct actK *A,
                 int64_t ng, int64_t g, float *F, int64_t b0, int64_t b1)
{
    const int64_t nb = n / QK_K;
    if (g + 2 <= ng)
        for (int64_t b = b0; b < b1; b++) {
            runK_part(type, 2, nb, wi, tm, A, g, 0, F, b);
            runK_part(type, 2, nb, wi, tm, A, g, LR / 2, F, b);
        }
    else
        for (int64_t b = b0; b < b1; b++)
            runK_part(type, 1, nb, wi, tm, A, g, 0, F, b);
}

/* Round up to a multiple of 64 bytes. */
static size_t up64(size_t x) { return (x + 63) & ~(size_t)63; }

/* sum_l u_l s_l over 32 unsigned bytes u and signed bytes s, added to the
 * int32 lanes of acc (exact: the caller's totals stay far below 2^31). */
INLINE __m256i dot_us(__m256i acc, __m256i u, __m256i s) { return _mm256_dpbusd_epi32(acc, u, s); }

/* Eight lanes of each v[r] summed: lane r of the result (exact). */
INLINE __m256i reduce8(const __m256i *v)
{
    const __m256i t0 = _mm256_hadd_epi32(v[0], v[1]), t1 = _mm256_hadd_epi32(v[2], v[3]);
    const __m256i t2 = _mm256_hadd_epi32(v[4], v[5]), t3 = _mm256_hadd_epi32(v[6], v[7]);
    const __m256i u0 = _mm256_hadd_epi32(t0, t1), u1 = _mm256_hadd_epi32(t2, t3);
    return _mm256_add_epi32(_mm256_permute2x128_si256(u0, u1, 0x20), _mm256_permute2x128_si256(u0, u1, 0x31));
}

/* Eight dwords of each of the LR rows v[r] into the interleaved weights at
 * o (dword k of row r at o[k LR + r]) by an 8 x 8 transpose. */
INLINE void transpose8_store(uint32_t *o, const __m256i *v)
{
    _Static_assert(LR == 8, "transpose8_store transposes 8 rows");
    __m256i t[8], q[8];
    UNROLL
    for (int r = 0; r < 8; r += 2) {
        t[r] = _mm256_unpacklo_epi32(v[r], v[r + 1]);     /* dwords 0 1 | 4 5 of rows r, r+1 */
        t[r + 1] = _mm256_unpackhi_epi32(v[r], v[r + 1]); /* dwords 2 3 | 6 7 */
    }
    UNROLL
    for (int h = 0; h < 8; h += 4) { /* rows h..h+3: q[h + k] holds dword k | k + 4 */
        q[h] = _mm256_unpacklo_epi64(t[h], t[h + 2]);
        q[h + 1] = _mm256_unpackhi_epi64(t[h], t[h + 2]);
        q[h + 2] = _mm256_unpacklo_epi64(t[h + 1], t[h + 3]);
        q[h + 3] = _mm256_unpackhi_epi64(t[h + 1], t[h + 3]);
    }
    UNROLL
    for (int k = 0; k < 4; k++) {
        _mm256_storeu_si256((__m256i *)(o + 8 * k), _mm256_permute2x128_si256(q[k], q[4 + k], 0x20));
        _mm256_storeu_si256((__m256i *)(o + 8 * (k + 4)), _mm256_permute2x128_si256(q[k], q[4 + k], 0x31));
    }
}

/* The LR unpacked rows of a tile (row r at u + r n) into the interleaved
 * weights, eight dwords of every row at a time. */
static void interleave_tile(uint32_t *wi, const uint8_t *u, int64_t n)
{
    for (int64_t i = 0; i < n / 4; i += 8) {
        __m256i v[8];
        UNROLL
        for (int r = 0; r < 8; r++)
            v[r] = _mm256_loadu_si256((const __m256i *)(u + (size_t)r * (size_t)n + 4 * (size_t)i));
        transpose8_store(wi + (size_t)i * LR, v);
    }
}

/* A tile of LR whole Q8_0 rows (row r at w + r w_row) straight into the
 * interleaved weights and the tile's metadata, block by block, a few blocks
 * ahead prefetched (row by row through unpack_row32, a scalar metadata
 * copy and interleave_tile, this was ~7% of a 2048x8192 Q8_0 GEMM). */
static void unpack_tile_q8_0(uint32_t *wi, struct tile32 *tm, const uint8_t *w, size_t w_row, int64_t nb)
{
    const __m256i ones = _mm256_set1_epi8(1);
    for (int64_t b = 0; b < nb; b++) {
        __m256i v[LR], cs[LR];
        UNROLL
        for (int r = 0; r < LR; r++) {
            const uint8_t *blk = w + (size_t)r * w_row + (size_t)b * sizeof(block_q8_0);
            _mm_prefetch((const char *)(blk + 4 * sizeof(block_q8_0)), _MM_HINT_T0);
            v[r] = _mm256_loadu_si256((const __m256i *)(blk + offsetof(block_q8_0, qs)));
            cs[r] = _mm256_dpbusd_epi32(_mm256_setzero_si256(), ones, v[r]);
            tm[b].d[r] = h2f(ld16(blk));
        }
        _mm256_storeu_si256((__m256i *)tm[b].corr, _mm256_mullo_epi32(reduce8(cs), _mm256_set1_epi32(-128)));
        transpose8_store(wi + (size_t)b * 8 * LR, v);
    }
}

/* Block b's metadata of a tile of two x4 groups (rows 0-3 at g0, 4-7 at
 * g1): the corrections from sum (lane 8 j + r: part j of row r's weight
 * sum) and the eight scales. */
INLINE void x4_pair_meta(struct tile32 *tm, __m512i sum, const uint8_t *g0, const uint8_t *g1, int64_t b, size_t bs)
{
    const __m256i rs = _mm256_add_epi32(_mm512_castsi512_si256(sum), _mm512_extracti64x4_epi64(sum, 1));
    _mm256_storeu_si256((__m256i *)tm->corr, _mm256_mullo_epi32(rs, _mm256_set1_epi32(-128)));
    for (int r = 0; r < 4; r++) {
        tm->d[r] = h2f(ld16(g0 + repack_x4_d(r, b, bs)));
        tm->d[4 + r] = h2f(ld16(g1 + repack_x4_d(r, b, bs)));
    }
}

/* The blocks [0, nb4 * 4) of a tile of eight Q4_0 rows that are two whole
 * x4 groups (repack.h; rows 0-3 at g0, rows 4-7 at g1) straight into the
 * interleaved weights and the tile's metadata: per block, the 64 bytes of
 * quants of each group's four rows give their natural-order dwords by two
 * masks (elements 0-15: low nibbles = dwords 0-3; 16-31: high = 4-7) and
 * four two-source permutes.  Row by row through unpack_row32, a scalar
 * metadata copy and interleave_tile, this was ~8% of the Q4_0 prefill
 * GEMM. */
static void unpack_tile_q4_0x4(uint32_t *wi, struct tile32 *tm, const uint8_t *g0, const uint8_t *g1, int64_t nb4)
{
    const size_t bs = sizeof(block_q4_0);
    const __m512i m4 = _mm512_set1_epi8(0x0F), x8 = _mm512_set1_epi8(8), ones = _mm512_set1_epi8(1);
    /* output vector h: dwords k = 2h, 2h + 1 of rows 0-7, from (row r, dword j) at 4r + j */
    const __m512i p0 = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 1, 5, 9, 13, 17, 21, 25, 29);
    const __m512i p1 = _mm512_setr_epi32(2, 6, 10, 14, 18, 22, 26, 30, 3, 7, 11, 15, 19, 23, 27, 31);
    for (int64_t b = 0; b < nb4 * 4; b++) {
        /* ~1 KB ahead in both groups (72 bytes per block): the loads below
         * waited on the L3 for two thirds of this function's time */
        const size_t ahead = (size_t)b * 4 * bs + 1024;
        _mm_prefetch((const char *)(g0 + ahead), _MM_HINT_T0);
        _mm_prefetch((const char *)(g0 + ahead + 64), _MM_HINT_T0);
        _mm_prefetch((const char *)(g1 + ahead), _MM_HINT_T0);
        _mm_prefetch((const char *)(g1 + ahead + 64), _MM_HINT_T0);
        const __m512i qa = _mm512_loadu_si512((const void *)(g0 + repack_x4_qs(GGML_TYPE_Q4_0, 0, b, bs)));
        const __m512i qb = _mm512_loadu_si512((const void *)(g1 + repack_x4_qs(GGML_TYPE_Q4_0, 0, b, bs)));
        const __m512i la = _mm512_and_si512(qa, m4), lb = _mm512_and_si512(qb, m4);
        const __m512i ha = _mm512_and_si512(_mm512_srli_epi16(qa, 4), m4), hb = _mm512_and_si512(_mm512_srli_epi16(qb, 4), m4);
        const __m512i o[4] = {_mm512_sub_epi8(_mm512_permutex2var_epi32(la, p0, lb), x8),
                              _mm512_sub_epi8(_mm512_permutex2var_epi32(la, p1, lb), x8),
                              _mm512_sub_epi8(_mm512_permutex2var_epi32(ha, p0, hb), x8),
                              _mm512_sub_epi8(_mm512_permutex2var_epi32(ha, p1, hb), x8)};
        __m512i sum = _mm512_setzero_si512(); /* lane h * 8 + r: row r's dwords 2h, 2h + 1 (+ 4, + 5) */
        UNROLL
        for (int h = 0; h < 4; h++) {
            _mm512_storeu_si512((void *)(wi + (size_t)b * 8 * LR + 16 * h), o[h]);
            sum = _mm512_dpbusd_epi32(sum, ones, o[h]);
        }
        x4_pair_meta(tm + b, sum, g0, g1, b, bs);
    }
}

/* The same for Q8_0 x4 (repack.h's SDOT order): dword k of a block's rows
 * 0-3 are the 16 bytes at 16 k of the group's piece, so each output vector
 * (dwords 2h, 2h + 1 of rows 0-7) is one two-source permute of the two
 * groups' pieces. */
static void unpack_tile_q8_0x4(uint32_t *wi, struct tile32 *tm, const uint8_t *g0, const uint8_t *g1, int64_t nb4)
{
    const size_t bs = sizeof(block_q8_0);
    const __m512i ones = _mm512_set1_epi8(1);
    /* from piece (k < 4: dword 4k + r), rows 0-3 from g0, 4-7 from g1 (+ 16) */
    const __m512i p0 = _mm512_setr_epi32(0, 1, 2, 3, 16, 17, 18, 19, 4, 5, 6, 7, 20, 21, 22, 23);
    const __m512i p1 = _mm512_add_epi32(p0, _mm512_set1_epi32(8));
    for (int64_t b = 0; b < nb4 * 4; b++) {
        const size_t ahead = (size_t)b * 4 * bs + 1024;
        for (size_t o = 0; o < 192; o += 64) {
            _mm_prefetch((const char *)(g0 + ahead + o), _MM_HINT_T0);
            _mm_prefetch((const char *)(g1 + ahead + o), _MM_HINT_T0);
        }
        __m512i sum = _mm512_setzero_si512();
        UNROLL
        for (int half = 0; half < 2; half++) { /* elements 0-15, 16-31: dwords 0-3, 4-7 */
            const __m512i qa = _mm512_loadu_si512((const void *)(g0 + repack_x4s_q(0, b, bs, 32, 16 * half)));
            const __m512i qb = _mm512_loadu_si512((const void *)(g1 + repack_x4s_q(0, b, bs, 32, 16 * half)));
            const __m512i o0 = _mm512_permutex2var_epi32(qa, p0, qb), o1 = _mm512_permutex2var_epi32(qa, p1, qb);
            _mm512_storeu_si512((void *)(wi + (size_t)b * 8 * LR + 32 * half), o0);
            _mm512_storeu_si512((void *)(wi + (size_t)b * 8 * LR + 32 * half + 16), o1);
            sum = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(sum, ones, o0), ones, o1);
        }
        x4_pair_meta(tm + b, sum, g0, g1, b, bs);
    }
}

static void tile32_set(struct tile32 *tm, const struct meta32 *m, int64_t nb, int r)
{
    for (int64_t b = 0; b < nb; b++) {
        tm[b].corr[r] = m[b].corr;
        tm[b].d[r] = m[b].d;
    }
}

/* One K-quant super-block of tile row r: its 256 natural-order weights
 * (signed; Q4_K/Q5_K: the unsigned quant) into wb, its scales, minimum
 * pairs, d and dmin straight into the tile's metadata tm (only the fields
 * runK reads for the type); returns int32 lanes summing to
 * sum_j sc_j sum_{i in j} w_i (tm->corr is -128 times it, set by the caller
 * for the eight rows at once; exact in any order).  Unpacking a tile block by
 * block keeps the eight rows' block in L1 for interleave_tile (row by row,
 * then interleaving, plus a copy of the metadata into the tile, took 12% of a
 * llama1b Q4_K_M prefill; now ~5%). */
INLINE __m256i unpack_blockK(const int type, const uint8_t *blk, int xr, uint8_t *wb, struct tileK *tm, int r)
{
    const __m256i m4 = _mm256_set1_epi8(0x0F);
    __m256i acc = _mm256_setzero_si256();
    if (type == GGML_TYPE_Q2_K) {
        struct metaK mt;
        const int64_t c_sum = unpack_lowbit(type, blk, wb, &mt);
        for (int j = 0; j < 16; j++)
            tm->sc[r][j] = mt.sc[j];
        for (int k = 0; k < 8; k++)
            tm->mp16[k][r] = mt.mp16[k];
        tm->d[r] = mt.d;
        tm->dmin[r] = mt.dmin;
        return _mm256_setr_epi32((int)c_sum, 0, 0, 0, 0, 0, 0, 0);
    }
    if (type == GGML_TYPE_Q3_K) { /* w = q - 4 where the hmask bit is clear: u = w + 4 in 0..7 */
        const block_q3_K *x = (const block_q3_K *)blk;
        const __m128i sc8 = lbx_sc_q3(x);
        _mm512_storeu_si512((void *)tm->sc[r], _mm512_cvtepi8_epi32(sc8));
        const __m256i scb = _mm256_broadcastsi128_si256(sc8);
        const __m256i hm = _mm256_loadu_si256((const __m256i *)x->hmask);
        UNROLL
        for (int c = 0; c < 8; c++) { /* elements 32c + l: bits 2 (c % 4) of qs[32 (c / 4) + l], bit c of hmask[l] */
            const __m256i q = _mm256_loadu_si256((const __m256i *)(x->qs + 32 * (c / 4)));
            const __m256i q2 = _mm256_and_si256(_mm256_srli_epi16(q, 2 * (c % 4)), _mm256_set1_epi8(3));
            const __m256i u = _mm256_mask_add_epi8(q2, _mm256_test_epi8_mask(hm, _mm256_set1_epi8((char)(1 << c))), q2,
                                                   _mm256_set1_epi8(4));
            _mm256_storeu_si256((__m256i *)(wb + 32 * c), _mm256_sub_epi8(u, _mm256_set1_epi8(4)));
            /* groups 2c (bytes 0-15) and 2c + 1 (16-31) */
            const __m256i sv = _mm256_shuffle_epi8(
                scb, _mm256_set_m128i(_mm_set1_epi8((char)(2 * c + 1)), _mm_set1_epi8((char)(2 * c))));
            acc = dot_us(acc, u, sv);
        }
        /* - 4 * 16 * sum_g s_g: the scales' sum by vpsadbw on s + 128 */
        const __m128i ss = _mm_sad_epu8(_mm_xor_si128(sc8, _mm_set1_epi8((char)0x80)), _mm_setzero_si128());
        const int ssum = _mm_cvtsi128_si32(ss) + _mm_extract_epi32(ss, 2) - 128 * 16;
        tm->d[r] = h2f(ld16(&x->d));
        return _mm256_add_epi32(acc, _mm256_setr_epi32(-64 * ssum, 0, 0, 0, 0, 0, 0, 0));
    }
    if (type == GGML_TYPE_IQ4_XS) { /* w = codebook value, u = w + 128; eight scales of 32 */
        const block_iq4_xs *x = (const block_iq4_xs *)blk;
        const __m128i sc2 = lbx_sc_iq4(x); /* scale j in bytes 2j, 2j + 1 */
        const __m128i sc8 = _mm_shuffle_epi8(sc2, _mm_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, -1, -1, -1, -1, -1, -1, -1, -1));
        _mm256_storeu_si256((__m256i *)tm->sc[r], _mm256_cvtepi8_epi32(sc8));
        const __m256i cb = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)kvalues_iq4nl));
        const __m256i scb = _mm256_broadcastsi128_si256(sc8);
        UNROLL
        for (int j = 0; j < 8; j++) {
            const __m128i q = _mm_loadu_si128((const __m128i *)(x->qs + 16 * j));
            const __m256i w = _mm256_shuffle_epi8(cb, _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), m4));
            _mm256_storeu_si256((__m256i *)(wb + 32 * j), w);
            acc = dot_us(acc, _mm256_xor_si256(w, _mm256_set1_epi8((char)0x80)),
                         _mm256_shuffle_epi8(scb, _mm256_set1_epi8((char)j)));
        }
        const __m128i ss = _mm_sad_epu8(_mm_xor_si128(sc8, _mm_setr_epi8(-128, -128, -128, -128, -128, -128, -128, -128, 0, 0, 0, 0, 0, 0, 0, 0)),
                                        _mm_setzero_si128());
        const int ssum = _mm_cvtsi128_si32(ss) - 128 * 8; /* the low 8 bytes */
        tm->d[r] = h2f(ld16(&x->d));
        return _mm256_add_epi32(acc, _mm256_setr_epi32(-128 * 32 * ssum, 0, 0, 0, 0, 0, 0, 0));
    }
    if (type == GGML_TYPE_Q6_K) {
        /* GGUF's block, or (xr >= 0) row xr of a Q6_K x4 tile (repack.h),
         * read in place: ql and qh in 16-byte pieces, two per load */
        const block_q6_K *x = (const block_q6_K *)blk;
        const uint8_t *scp = xr >= 0 ? blk + repack_x6k_sc(xr) : (const uint8_t *)x->scales;
        const __m256i m2 = _mm256_set1_epi8(0x30);
        const __m256i sc16 = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)scp));
        UNROLL
        for (int h = 0; h < 2; h++) {
            const __m256i qh = xr >= 0 ? _mm256_loadu2_m128i((const __m128i *)(blk + repack_x6k_qh(xr, 2 * h + 1)),
                                                             (const __m128i *)(blk + repack_x6k_qh(xr, 2 * h)))
                                       : _mm256_loadu_si256((const __m256i *)(x->qh + 32 * h));
            UNROLL
            for (int j = 0; j < 4; j++) {
                const int pc = 4 * h + 2 * (j & 1); /* ql bytes 64h + 32(j & 1): pieces pc, pc + 1 */
                const __m256i ql = xr >= 0 ? _mm256_loadu2_m128i((const __m128i *)(blk + repack_x6k_ql(xr, pc + 1)),
                                                                 (const __m128i *)(blk + repack_x6k_ql(xr, pc)))
                                           : _mm256_loadu_si256((const __m256i *)(x->ql + 64 * h + 32 * (j & 1)));
                const __m256i lo4 = j < 2 ? _mm256_and_si256(ql, m4) : _mm256_and_si256(_mm256_srli_epi16(ql, 4), m4);
                const __m256i hi2 = j == 0 ? _mm256_slli_epi16(qh, 4)
                                    : j == 1 ? _mm256_slli_epi16(qh, 2)
                                    : j == 2 ? qh
                                             : _mm256_srli_epi16(qh, 2);
                const __m256i u = _mm256_or_si256(lo4, _mm256_and_si256(hi2, m2)); /* q + 32 */
                _mm256_storeu_si256((__m256i *)(wb + 128 * h + 32 * j), _mm256_sub_epi8(u, _mm256_set1_epi8(32)));
                /* sub-blocks 8h + 2j (bytes 0-15), 8h + 2j + 1 (16-31) */
                const char j0 = (char)(8 * h + 2 * j);
                const __m256i sv = _mm256_shuffle_epi8(sc16, _mm256_set_m128i(_mm_set1_epi8((char)(j0 + 1)), _mm_set1_epi8(j0)));
                acc = dot_us(acc, u, sv);
            }
        }
        int ssum = 0; /* u = q + 32: take off 32 * 16 * sum_j sc_j */
        for (int j = 0; j < 16; j++) {
            tm->sc[r][j] = (int8_t)scp[j];
            ssum += (int8_t)scp[j];
        }
        tm->d[r] = h2f(ld16(xr >= 0 ? blk + repack_x6k_d(xr) : (const uint8_t *)&x->d));
        return _mm256_add_epi32(acc, _mm256_setr_epi32(-512 * ssum, 0, 0, 0, 0, 0, 0, 0));
    }
    uint8_t sc[8], m[8], sw[12];
    const uint8_t *scales = blk + 4, *dp = blk, *dmp = blk + 2;
    if (xr >= 0) { /* Q4_K x4 (repack.h): blk is the tile of four rows' super-blocks, this is row xr */
        for (int i = 0; i < 3; i++)
            memcpy(sw + 4 * i, blk + repack_x4k_sw(xr, i), 4);
        scales = sw;
        dp = blk + repack_x4k_d(xr);
        dmp = blk + repack_x4k_dmin(xr);
    }
    for (int j = 0; j < 8; j++)
        k_scale_min(j, scales, &sc[j], &m[j]);
    const uint8_t *qs = type == GGML_TYPE_Q4_K ? ((const block_q4_K *)blk)->qs : ((const block_q5_K *)blk)->qs;
    __m256i qh = _mm256_setzero_si256();
    if (type == GGML_TYPE_Q5_K)
        qh = _mm256_loadu_si256((const __m256i *)((const block_q5_K *)blk)->qh);
    UNROLL
    for (int c = 0; c < 4; c++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(xr >= 0 ? blk + repack_x4k_qs(xr, c) : qs + 32 * c));
        __m256i lo = _mm256_and_si256(q, m4), hi = _mm256_and_si256(_mm256_srli_epi16(q, 4), m4);
        if (type == GGML_TYPE_Q5_K) {
            const __m256i b0 = _mm256_set1_epi8((char)(1 << (2 * c)));
            const __m256i b1 = _mm256_set1_epi8((char)(2 << (2 * c)));
            lo = _mm256_mask_add_epi8(lo, _mm256_test_epi8_mask(qh, b0), lo, _mm256_set1_epi8(16));
            hi = _mm256_mask_add_epi8(hi, _mm256_test_epi8_mask(qh, b1), hi, _mm256_set1_epi8(16));
        }
        _mm256_storeu_si256((__m256i *)(wb + 64 * c), lo);
        _mm256_storeu_si256((__m256i *)(wb + 64 * c + 32), hi);
        acc = dot_us(acc, lo, _mm256_set1_epi8((char)sc[2 * c]));
        acc = dot_us(acc, hi, _mm256_set1_epi8((char)sc[2 * c + 1]));
    }
    for (int j = 0; j < 8; j++)
        tm->sc[r][j] = sc[j];
    for (int k = 0; k < 4; k++)
        tm->mp[k][r] = (uint32_t)m[2 * k] | (uint32_t)m[2 * k + 1] << 16;
    tm->d[r] = h2f(ld16(dp));
    tm->dmin[r] = h2f(ld16(dmp));
    return acc;
}

/* prep: the transposed activations of the call's tokens (act_pack's
 * layout, made once per matmul by many_prep), or NULL: transposed here.
 * wu: NULL, or the fused gate/up form (gemm_many_glu_fn, dispatch.h): wv
 * the gate rows, wu the up rows, y[t ys + r] = act(gate) * up.  Tiles then
 * alternate, gate rows 8i.. (tile 2i) and the same up rows (tile 2i + 1),
 * in one block, so both sweep each pass of the activations while it is in
 * the L1/L2, and the outputs leave the accumulators once, as the product. */
INLINE int many(const int type, int64_t n, const void *wv, size_t w_row, int64_t n_rows, const void *av,
                size_t a_row, const void *prep, int64_t n_tok, float *y, size_t ys, bool x4, const void *wu,
                enum glu_act glu)
{
    const bool k = type == GGML_TYPE_Q4_K || type == GGML_TYPE_Q5_K || type == GGML_TYPE_Q6_K ||
                   type == GGML_TYPE_Q2_K || type == GGML_TYPE_Q3_K || type == GGML_TYPE_IQ4_XS;
    const int64_t nb = n / (k ? QK_K : 32), ng = (n_tok + LT - 1) / LT;
    const size_t msz = k ? sizeof(struct metaK) : sizeof(struct meta32);
    const size_t act_bytes =
        prep ? 0 : up64((size_t)(ng * nb) * (k ? sizeof(struct actK) : sizeof(struct act32)));
    /* rows in blocks of rb tiles, unpacked first; each pass over a chunk of
     * the activations then serves all tiles of the block (gemm_pass.h) */
    const size_t f_tile = (size_t)ng * LR * LT; /* floats of one tile's accumulators */
    const int64_t n_mt = (n_rows + LR - 1) / LR, n_tiles = wu ? 2 * n_mt : n_mt; /* matrix tiles, tiles */
    int64_t rb = block_tiles(f_tile, n_tiles);
    if (wu) /* whole (gate, up) pairs */
        rb = rb < 2 ? 2 : rb / 2 * 2;
    const size_t tsz = k ? sizeof(struct tileK) : sizeof(struct tile32);
    const size_t wi_bytes = up64((size_t)rb * LR * (size_t)n), tile_bytes = up64((size_t)(rb * nb) * tsz);
    const size_t f_bytes = up64((size_t)rb * f_tile * sizeof(float));
    const size_t u_bytes = up64((size_t)LR * (size_t)n), meta_bytes = up64((size_t)nb * msz);
    uint8_t *scratch = kernels_scratch(act_bytes + wi_bytes + tile_bytes + f_bytes + u_bytes + meta_bytes);
    if (!scratch)
        return -1;
    const void *act = prep ? prep : scratch;
    uint32_t *wi = (uint32_t *)(scratch + act_bytes);
    uint8_t *tile = scratch + act_bytes + wi_bytes;
    float *F = (float *)(scratch + act_bytes + wi_bytes + tile_bytes);
    uint8_t *u = scratch + act_bytes + wi_bytes + tile_bytes + f_bytes; /* one tile's rows, unpacked */
    void *meta = u + u_bytes;
    const int64_t kc = pass_blocks(nb, ng, k ? sizeof(struct actK) : sizeof(struct act32));
    if (!prep && k)
        act_pack(true, scratch, av, a_row, n_tok, nb);
    else if (!prep)
        act_pack(false, scratch, av, a_row, n_tok, nb);
    for (int64_t t0 = 0; t0 < n_tiles; t0 += rb) {
        const int64_t t1 = t0 + rb < n_tiles ? t0 + rb : n_tiles;
        for (int64_t t = t0; t < t1; t++) {
            const int64_t r0 = (wu ? t / 2 : t) * LR; /* first row in its matrix */
            const int nr = n_rows - r0 < LR ? (int)(n_rows - r0) : LR;
            const uint8_t *wb = wu && t % 2 ? wu : wv;
            uint8_t *tm = tile + (size_t)((t - t0) * nb) * tsz;
            if (k) { /* block by block: the eight rows' block unpacked in L1, then interleaved */
                uint32_t *wt = wi + (size_t)(t - t0) * LR * (size_t)(n / 4);
                /* row r's blocks: at rowp[r] + b bstep[r], in GGUF's layout
                 * (xr[r] = -1) or row xr[r] of an x4 group's tiles (Q4_K,
                 * Q6_K: read in place; only a matrix's last n_rows % 4 rows
                 * are not in a group) */
                const uint8_t *rowp[LR];
                size_t bstep[LR];
                int xr[LR];
                for (int r = 0; r < nr; r++) {
                    const int64_t row_i = r0 + r;
                    const bool grouped = x4 && row_i < n_rows / 4 * 4;
                    rowp[r] = wb + (size_t)(grouped ? row_i / 4 * 4 : row_i) * w_row;
                    bstep[r] = !grouped ? kbytes(type) : type == GGML_TYPE_Q6_K ? REPACK_X6K_TILE : REPACK_X4K_TILE;
                    xr[r] = grouped ? (int)(row_i % 4) : -1;
                }
                for (int64_t b = 0; b < nb; b++) {
                    struct tileK *tb = (struct tileK *)tm + b;
                    __m256i cs[LR];
                    /* K_PF super-blocks ahead in the matrix's stream of
                     * tiles (a tile's rows end where the next tile's start,
                     * LR w_row bytes on), once per x4 group or row: the
                     * weights come from the L3 or memory.  Expert matrices
                     * have 2-4 super-blocks a row: a prefetch within the
                     * row only left every tile's first blocks to miss
                     * (moe-ab, granitemoe1b 512 tokens, 1 thread: 11-14%
                     * less CPU for the experts). */
                    const int64_t pf = b + K_PF, pf_t = pf / nb, pf_b = pf % nb;
                    for (int r = 0; r < nr; r++)
                        if (xr[r] <= 0)
                            for (size_t o = 0; o < bstep[r]; o += 64)
                                _mm_prefetch((const char *)(rowp[r] + (size_t)pf_t * LR * w_row + (size_t)pf_b * bstep[r] + o),
                                             _MM_HINT_T0);
                    UNROLL
                    for (int r = 0; r < LR; r++) {
                        uint8_t *ub = u + 256 * r;
                        if (r < nr) {
                            cs[r] = unpack_blockK(type, rowp[r] + (size_t)b * bstep[r], xr[r], ub, tb, r);
                            continue;
                        }
                        memset(ub, 0, 256); /* padding rows: zero weights, scales and corrections */
                        for (int j = 0; j < 16; j++)
                            tb->sc[r][j] = 0;
                        for (int q = 0; q < 4; q++)
                            tb->mp[q][r] = 0;
                        for (int q = 0; q < 8; q++)
                            tb->mp16[q][r] = 0;
                        tb->d[r] = tb->dmin[r] = 0.0f;
                        cs[r] = _mm256_setzero_si256();
                    }
                    _mm256_storeu_si256((__m256i *)tb->corr, _mm256_mullo_epi32(reduce8(cs), _mm256_set1_epi32(-128)));
                    interleave_tile(wt + (size_t)b * 64 * LR, u, 256);
                }
                continue;
            }
            /* Q4_0 or Q8_0 x4, two whole groups: the full block columns
             * straight into the tile, the last nb % 4 blocks as below */
            const bool fast = (type == GGML_TYPE_Q4_0 || type == GGML_TYPE_Q8_0) && x4 && nr == LR &&
                              r0 + LR <= n_rows / 4 * 4;
            const int64_t bf = fast ? nb / 4 * 4 : 0;
            if (type == GGML_TYPE_Q8_0 && nr == LR && !x4) {
                unpack_tile_q8_0(wi + (size_t)(t - t0) * LR * (size_t)(n / 4), (struct tile32 *)tm,
                                 wb + (size_t)r0 * w_row, w_row, nb);
                continue;
            }
            if (fast && type == GGML_TYPE_Q8_0)
                unpack_tile_q8_0x4(wi + (size_t)(t - t0) * LR * (size_t)(n / 4), (struct tile32 *)tm,
                                   wb + (size_t)r0 * w_row, wb + (size_t)(r0 + 4) * w_row, nb / 4);
            else if (fast)
                unpack_tile_q4_0x4(wi + (size_t)(t - t0) * LR * (size_t)(n / 4), (struct tile32 *)tm,
                                   wb + (size_t)r0 * w_row, wb + (size_t)(r0 + 4) * w_row, nb / 4);
            if (fast && bf == nb)
                continue;
            for (int r = 0; r < LR; r++) {
                uint8_t *ur = u + (size_t)r * (size_t)n;
                if (r >= nr) { /* padding rows: zero weights, scales and corrections */
                    memset(ur, 0, (size_t)n);
                    memset(meta, 0, (size_t)nb * msz);
                } else {
                    const int64_t row_i = r0 + r;
                    if (x4 && row_i < n_rows / 4 * 4) /* a full group (the last rows of a matrix are not) */
                        unpack_row32(type, wb + (size_t)(row_i / 4 * 4) * w_row, nb, ur, meta, true,
                                     (int)(row_i % 4));
                    else
                        unpack_row32(type, wb + (size_t)row_i * w_row, nb, ur, meta, false, 0);
                }
                tile32_set((struct tile32 *)tm, meta, nb, r);
            }
            interleave_tile(wi + (size_t)(t - t0) * LR * (size_t)(n / 4), u, n);
        }
        /* Each pass: Q4_0/Q5_0/Q8_0 pair by pair of token groups, tile by
         * tile (the pair's chunk of the activations, ~32 KB, stays in the L1
         * while every tile of the block uses it; tile by tile over all
         * groups, each tile streamed the whole chunk from the L2, ~18 bytes
         * per cycle); K-quants tile by tile (measured no better the other
         * way: their tile metadata is read as often as the weights). */
        memset(F, 0, (size_t)(t1 - t0) * f_tile * sizeof(float));
        const int64_t n_pairs = (ng + 1) / 2;
        for (int64_t b0 = 0; b0 < nb; b0 += kc) {
            const int64_t b1 = b0 + kc < nb ? b0 + kc : nb;
            for (int64_t i = 0; i < (t1 - t0) * n_pairs; i++) {
                const int64_t t = t0 + (k ? i / n_pairs : i % (t1 - t0));
                const int64_t g = 2 * (k ? i % n_pairs : i / (t1 - t0));
                const uint32_t *wt = wi + (size_t)(t - t0) * LR * (size_t)(n / 4);
                const void *tm = tile + (size_t)((t - t0) * nb) * tsz;
                float *Ft = F + (size_t)(t - t0) * f_tile;
                if (k)
                    runK(type, n, wt, tm, act, ng, g, Ft, b0, b1);
                else
                    run32(type, n, wt, tm, act, ng, g, Ft, b0, b1);
            }
        }
        /* The outputs of the block's tiles, group by group: a token's rows
         * from consecutive tiles are neighbours in y, so each token row is
         * written as one run of the block's rows (tile by tile, with long y
         * rows, each of a tile's 16 token rows was another line and page). */
        for (int64_t g = 0; g < ng && wu; g++)
            for (int64_t t = t0; t < t1; t += 2) { /* act(gate) * up, silu16/gelu16 as ops_avx512.c's */
                const int64_t r0 = t / 2 * LR;
                const int nr = n_rows - r0 < LR ? (int)(n_rows - r0) : LR;
                __m512 fg[LR], fu[LR];
                facc_load(fg, F + (size_t)(t - t0) * f_tile, g, false);
                facc_load(fu, F + (size_t)(t + 1 - t0) * f_tile, g, false);
                UNROLL
                for (int r = 0; r < LR; r++)
                    fg[r] = _mm512_mul_ps(glu == GLU_GELU ? gelu16(fg[r]) : silu16(fg[r]), fu[r]);
                facc_done(fg, NULL, g, true, n_tok, nr, y + r0, ys);
            }
        for (int64_t g = 0; g < ng && !wu; g++)
            for (int64_t t = t0; t < t1; t++) {
                const int64_t r0 = t * LR;
                const int nr = n_rows - r0 < LR ? (int)(n_rows - r0) : LR;
                __m512 facc[LR];
                facc_load(facc, F + (size_t)(t - t0) * f_tile, g, false);
                facc_done(facc, NULL, g, true, n_tok, nr, y + r0, ys);
            }
    }
    return 0;
}

#define DEFINE_MANY(NAME, TYPE, X4)                                                                           \
    static int NAME(int64_t n, const void *w, size_t w_row, int64_t n_rows, const void *a, size_t a_row,       \
                    int64_t n_tok, float *y, size_t ys)                                                       \
    {                                                                                                         \
        return many(TYPE, n, w, w_row, n_rows, a, a_row, NULL, n_tok, y, ys, X4, NULL, GLU_SILU);             \
    }                                                                                                         \
    static int NAME##_glu(int64_t n, const void *wg, const void *wu, size_t w_row, int64_t n_rows, const void *a, \
                          size_t a_row, const void *prep, int64_t n_tok, float *y, size_t ys, enum glu_act act) \
    {                                                                                                         \
        return many(TYPE, n, wg, w_row, n_rows, a, a_row, prep, n_tok, y, ys, X4, wu, act);                   \
    }                                                                                                         \
    static int NAME##_prep(int64_t n, const void *w, size_t w_row, int64_t n_rows, const void *a, size_t a_row, \
                           const void *prep, int64_t n_tok, float *y, size_t ys)                              \
    {                                                                                                         \
        return many(TYPE, n, w, w_row, n_rows, a, a_row, prep, n_tok, y, ys, X4, NULL, GLU_SILU);             \
    }

DEFINE_MANY(many_q4_0, GGML_TYPE_Q4_0, false)
DEFINE_MANY(many_q5_0, GGML_TYPE_Q5_0, false)
DEFINE_MANY(many_q8_0, GGML_TYPE_Q8_0, false)
DEFINE_MANY(many_q4_K, GGML_TYPE_Q4_K, false)
DEFINE_MANY(many_q5_K, GGML_TYPE_Q5_K, false)
DEFINE_MANY(many_q6_K, GGML_TYPE_Q6_K, false)
DEFINE_MANY(many_q2_K, GGML_TYPE_Q2_K, false)
DEFINE_MANY(many_q3_K, GGML_TYPE_Q3_K, false)
DEFINE_MANY(many_iq4_xs, GGML_TYPE_IQ4_XS, false)
DEFINE_MANY(many_iq4_nl, GGML_TYPE_IQ4_NL, false)
/* The x4 layouts (repack.h).  matmul passes ranges of rows that start at a
 * multiple of 16, so a call's groups are its rows 4g .. 4g + 3 up to the
 * last multiple of four: only a matrix's last range has leftover rows. */
DEFINE_MANY(many_q4_0x4, GGML_TYPE_Q4_0, true)
DEFINE_MANY(many_q5_0x4, GGML_TYPE_Q5_0, true)
DEFINE_MANY(many_q4_Kx4, GGML_TYPE_Q4_K, true)
DEFINE_MANY(many_q6_Kx4, GGML_TYPE_Q6_K, true)
DEFINE_MANY(many_iq4_nlx4, GGML_TYPE_IQ4_NL, true)
DEFINE_MANY(many_q8_0x4, GGML_TYPE_Q8_0, true)

/* many_prep (dispatch.h): one group of LT tokens (nt <= LT) transposed as
 * many() would, Q8_0 activations into act32 blocks, Q8_K into actK. */
static void prep_act32(int64_t n, const void *a, size_t a_row, int nt, void *prep)
{
    act_pack(false, prep, a, a_row, nt, n / 32);
}

static void prep_actK(int64_t n, const void *a, size_t a_row, int nt, void *prep)
{
    act_pack(true, prep, a, a_row, nt, n / QK_K);
}

_Static_assert(sizeof(struct act32) % 64 == 0 && sizeof(struct act32) <= UINT16_MAX &&
                   sizeof(struct actK) % (QK_K / 32) == 0 && sizeof(struct actK) / (QK_K / 32) <= UINT16_MAX,
               "many_prep_bytes");

static void set_many(struct kernel_table *t, uint32_t type, gemm_many_fn fn, gemm_many_prep_fn fn_prep,
                     gemm_many_glu_fn fn_glu, bool kq)
{
    t->types[type].gemm_many = fn;
    t->types[type].gemm_many_glu = fn_glu;
    t->types[type].gemm_many_prep = fn_prep;
    t->types[type].many_prep = kq ? prep_actK : prep_act32;
    t->types[type].many_prep_tok = LT;
    t->types[type].many_prep_bytes = (uint16_t)(kq ? sizeof(struct actK) / (QK_K / 32) : sizeof(struct act32));
}

/* The crossovers (kernels_many_min, dispatch.h).  An earlier build on an
 * Intel Xeon had gemm_many ahead from ~10 tokens for every type, which
 * stays the table's.  On a Zen 5 the x4 layouts' 4-token tiles, Q3_K's and
 * IQ4_NL's hold out longer: prompts of 8-48 tokens through infer bench -t 1
 * (1B and Qwen3-0.6B shapes, against a build with 10 for all) 1.1-1.4x at
 * 12-24 tokens with these, within noise at 32-48.  The single-matrix
 * figures of bench-kernels (hot: the weights stay in the caches between
 * calls) put every crossover at 20-96 tokens, but on a model the tiles'
 * repeated passes over the weights cost more than there (IQ4_XS at 16
 * tokens: tiles 0.61x gemm_many on the Qwen3-0.6B shape, ~1x hot), so only
 * what the models confirmed is set.  Q4_K x4 at 40 since its 1-4 token
 * tile went to one row per 128-bit lane (gemmK_x4z): infer bench -t 1
 * against 20, llama1b Q4_K_M 1.57x / 1.15x / 1.12x at 20 / 28 / 36 tokens,
 * qwen06b 1.37x / 1.06x at 24 / 36; 96 against 40: 1.00x / 0.87x / 0.71x
 * at 40 / 56 / 80. */
static const struct kernel_many_min many_min[] = {
    {GGML_TYPE_Q3_K, 16},     {GGML_TYPE_IQ4_NL, 16},   {INFER_TYPE_Q4_0_X4, 24},
    {INFER_TYPE_Q5_0_X4, 24}, {INFER_TYPE_Q4_K_X4, 40}, {INFER_TYPE_Q6_K_X4, 20}, {INFER_TYPE_IQ4_NL_X4, 24},
};

void kernels_fill_gemm_avx512(struct kernel_table *t)
{
    kernels_many_min_set(t, 10, many_min, sizeof(many_min) / sizeof(many_min[0]));
#define SET_MANY(TYPE, NAME, KQ) set_many(t, TYPE, NAME, NAME##_prep, NAME##_glu, KQ)
    SET_MANY(GGML_TYPE_Q4_0, many_q4_0, false);
    SET_MANY(GGML_TYPE_Q5_0, many_q5_0, false);
    SET_MANY(GGML_TYPE_Q8_0, many_q8_0, false);
    SET_MANY(GGML_TYPE_Q4_K, many_q4_K, true);
    SET_MANY(GGML_TYPE_Q5_K, many_q5_K, true);
    SET_MANY(GGML_TYPE_Q6_K, many_q6_K, true);
    SET_MANY(GGML_TYPE_Q2_K, many_q2_K, true);
    SET_MANY(GGML_TYPE_Q3_K, many_q3_K, true);
    SET_MANY(GGML_TYPE_IQ4_XS, many_iq4_xs, true);
    SET_MANY(GGML_TYPE_IQ4_NL, many_iq4_nl, false);
    SET_MANY(INFER_TYPE_IQ4_NL_X4, many_iq4_nlx4, false);
    SET_MANY(INFER_TYPE_Q4_0_X4, many_q4_0x4, false);
    SET_MANY(INFER_TYPE_Q5_0_X4, many_q5_0x4, false);
    SET_MANY(INFER_TYPE_Q4_K_X4, many_q4_Kx4, true);
    SET_MANY(INFER_TYPE_Q6_K_X4, many_q6_Kx4, true);
    SET_MANY(INFER_TYPE_Q8_0_X4, many_q8_0x4, false);
#undef SET_MANY
}
