/*
 * quants_avx512.c - AVX-512 (F/BW/VL) + VNNI dot products and gemm tiles
 * (the "avx512" variant: Cascade Lake, Ice Lake, Sapphire Rapids, Zen 4).
 *
 * Compiled with the avx2 flags plus -mavx512f -mavx512bw -mavx512vl
 * -mavx512vnni (Makefile.am); the BF16 dot additionally carries
 * target("avx512bf16") and is installed only when cpuid reports it.  The
 * variant starts from the avx2 table (activation quantizers, Q4_1/Q5_1 and
 * anything not overridden here come from there or from the reference).
 *
 * Same contract and same arithmetic as quants_avx2.c: exact integer block
 * sums, reduced four at a time, then the reference's float steps in its
 * order, so the integer dots give the reference's bits.  What changes is
 * the width and the instructions:
 *   Q4_0, Q5_0, Q8_0: two blocks per 512-bit vector.  vpdpbusd multiplies
 *     unsigned by signed bytes without saturation, so weights are used as
 *     u = w + K >= 0 (K = 8, 16, 128) and each token's lanes start from
 *     -K * (its four-byte sums), computed once per block and token:
 *     lane = sum (w + K) a - K sum a = sum w a.
 *   Q4_K, Q5_K, Q6_K: 64 quants per vector; vpmaddubsw pairs (exact, < 2^15)
 *     then vpdpwssd multiplies by the sub-block scale and accumulates.
 *   F32, F16, BF16: 16 lanes per accumulator, masked loads for the tail;
 *     BF16 uses vdpbf16ps where present (pairs of bf16 products summed in
 *     float, subnormals flushed: within the float-type bound of the tests).
 */
#include <immintrin.h>
#include <string.h>

#include "../cpu.h"
#include "../dispatch.h"
#include "../quants.h"
#include "x86_util.h"

/* Per 128-bit lane L: [sum of v0's four int32 in L, v1's, v2's, v3's]. */
INLINE __m512i reduce4_lanes(__m512i v0, __m512i v1, __m512i v2, __m512i v3)
{
    const __m512i t0 = _mm512_add_epi32(_mm512_unpacklo_epi32(v0, v1), _mm512_unpackhi_epi32(v0, v1));
    const __m512i t1 = _mm512_add_epi32(_mm512_unpacklo_epi32(v2, v3), _mm512_unpackhi_epi32(v2, v3));
    return _mm512_add_epi32(_mm512_unpacklo_epi64(t0, t1), _mm512_unpackhi_epi64(t0, t1));
}

/* Two blocks per vector: [sums over lanes 0-7 of v0..v3 | over lanes 8-15]. */
INLINE __m256i reduce4_2blk(__m512i v0, __m512i v1, __m512i v2, __m512i v3)
{
    const __m512i u = reduce4_lanes(v0, v1, v2, v3);
    const __m512i s = _mm512_add_epi32(_mm512_shuffle_i32x4(u, u, _MM_SHUFFLE(2, 0, 2, 0)),
                                       _mm512_shuffle_i32x4(u, u, _MM_SHUFFLE(3, 1, 3, 1)));
    return _mm512_castsi512_si256(s);
}

/* [sum(v0), .., sum(v3)] of all sixteen lanes of each. */
INLINE __m128i reduce4_512(__m512i v0, __m512i v1, __m512i v2, __m512i v3)
{
    const __m512i u = reduce4_lanes(v0, v1, v2, v3);
    const __m256i h = _mm256_add_epi32(_mm512_castsi512_si256(u), _mm512_extracti64x4_epi64(u, 1));
    return _mm_add_epi32(_mm256_castsi256_si128(h), _mm256_extracti128_si256(h, 1));
}

/* --------------------- 32-element blocks x Q8_0 --------------------- */

/* The offset K making the weights of a type non-negative (see the header). */
INLINE int koff(const int type) { return type == GGML_TYPE_Q4_0 ? 8 : type == GGML_TYPE_Q5_0 ? 16 : 128; }

/* IQ4_NL's codebook as unsigned bytes (value + 128) in every 128-bit lane. */
INLINE __m512i iq4nl_u(void)
{
    return _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)kvalues_iq4nl)),
                            _mm512_set1_epi8((char)0x80));
}

/* Nibbles of a Q4_0/Q5_0 block as bytes 0..15 (element order). */
INLINE __m256i nibbles(const uint8_t *qs)
{
    const __m128i q = _mm_loadu_si128((const __m128i *)qs);
    return _mm256_and_si256(_mm256_set_m128i(_mm_srli_epi16(q, 4), q), _mm256_set1_epi8(0x0F));
}

/* Weights of one block as unsigned bytes w + K. */
INLINE __m256i unpack1(const int type, const uint8_t *blk)
{
    if (type == GGML_TYPE_Q8_0)
        return _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)(blk + 2)), _mm256_set1_epi8((char)0x80));
    if (type == GGML_TYPE_Q4_0)
        return nibbles(blk + 2);
    if (type == GGML_TYPE_IQ4_NL)
        return _mm256_shuffle_epi8(_mm512_castsi512_si256(iq4nl_u()), nibbles(blk + 2));
    uint32_t qh;
    memcpy(&qh, blk + 2, 4);
    const __m256i n = nibbles(blk + 6);
    return _mm256_mask_add_epi8(n, (__mmask32)qh, n, _mm256_set1_epi8(16));
}

/* Weights of blocks b, b+1 (at blk and blk + block size) as w + K. */
INLINE __m512i unpack2(const int type, const uint8_t *blk)
{
    const size_t bs = bbytes32(type);
    if (type == GGML_TYPE_Q8_0) {
        const __m512i w = _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(blk + 2))),
                                             _mm256_loadu_si256((const __m256i *)(blk + bs + 2)), 1);
        return _mm512_xor_si512(w, _mm512_set1_epi8((char)0x80));
    }
    const size_t off = type == GGML_TYPE_Q5_0 ? 6 : 2;
    const __m256i q = _mm256_set_m128i(_mm_loadu_si128((const __m128i *)(blk + bs + off)),
                                       _mm_loadu_si128((const __m128i *)(blk + off)));
    /* [qs_b, qs_b1, qs_b >> 4, qs_b1 >> 4] -> [b lo, b hi, b1 lo, b1 hi] */
    __m512i z = _mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4), 1);
    z = _mm512_and_si512(_mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(3, 1, 2, 0)), _mm512_set1_epi8(0x0F));
    if (type == GGML_TYPE_Q4_0)
        return z;
    if (type == GGML_TYPE_IQ4_NL)
        return _mm512_shuffle_epi8(iq4nl_u(), z);
    uint32_t h0, h1;
    memcpy(&h0, blk + 2, 4);
    memcpy(&h1, blk + bs + 2, 4);
    const __mmask64 k = (__mmask64)h0 | (__mmask64)h1 << 32;
    return _mm512_mask_add_epi8(z, k, z, _mm512_set1_epi8(16));
}

/* Activations of blocks b, b+1 of a Q8_0 row. */
INLINE __m512i act2(const block_q8_0 *a)
{
    return _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)a[0].qs)),
                              _mm256_loadu_si256((const __m256i *)a[1].qs), 1);
}

/* acc + block sums * dx * dy, associated as the reference per type. */
INLINE __m128 fma32(const int type, __m128 acc, __m128 f, __m128 dx, __m128 dy)
{
    if (type == GGML_TYPE_Q4_0)
        return _mm_add_ps(acc, _mm_mul_ps(_mm_mul_ps(f, dx), dy));
    return _mm_add_ps(acc, _mm_mul_ps(_mm_mul_ps(dx, dy), f));
}

/* One block (the odd last one) of NR rows against one token, in 256-bit
 * vectors, same lanes as gemm32: acc[0] lane r is row r. */
INLINE void gemm32_one(const int type, const int NR, const uint8_t *w, size_t w_row, const uint8_t *a, int64_t b,
                       __m128 *acc)
{
    const size_t bs = bbytes32(type);
    const __m256i zero = _mm256_setzero_si256(), K = _mm256_set1_epi8((char)koff(type));
    const block_q8_0 *ab = (const block_q8_0 *)a + b;
    const __m256i av = _mm256_loadu_si256((const __m256i *)ab->qs);
    const __m256i corr = _mm256_sub_epi32(zero, _mm256_dpbusd_epi32(zero, K, av));
    __m256i v[4] = {zero, zero, zero, zero};
    uint16_t dxh[4] = {0, 0, 0, 0};
    UNROLL
    for (int r = 0; r < NR; r++) {
        const uint8_t *blk = w + (size_t)r * w_row + (size_t)b * bs;
        v[r] = _mm256_dpbusd_epi32(corr, unpack1(type, blk), av);
        dxh[r] = ld16(blk);
    }
    const __m128 f = _mm_cvtepi32_ps(reduce4(v[0], v[1], v[2], v[3]));
    acc[0] = fma32(type, acc[0], f, h2f4(dxh[0], dxh[1], dxh[2], dxh[3]), _mm_set1_ps(h2f(ld16(&ab->d))));
}

/* NR (<= 4) rows against one token, two blocks per 512-bit vector, lanes
 * are rows: the dot product (NR = 1) of the 32-element types.  Tiles of
 * 1-4 tokens use gemv32_x4 and gemm32_few below, with the same float steps. */
INLINE void gemm32(const int type, const int NR, int64_t n, const uint8_t *w, size_t w_row, const uint8_t *a,
                   float *y)
{
    const int64_t nb = n / 32;
    const size_t bs = bbytes32(type);
    const __m512i zero = _mm512_setzero_si512(), K = _mm512_set1_epi8((char)koff(type));
    __m128 acc[1] = {_mm_setzero_ps()};
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        const block_q8_0 *ab = (const block_q8_0 *)a + b;
        const __m512i av = act2(ab);
        const __m512i corr = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(zero, K, av));
        __m512i v[4] = {zero, zero, zero, zero};
        uint16_t dxh[2][4] = {{0, 0, 0, 0}, {0, 0, 0, 0}};
        UNROLL
        for (int r = 0; r < NR; r++) {
            const uint8_t *blk = w + (size_t)r * w_row + (size_t)b * bs;
            prefetch_ahead(blk, w_row, 2 * bs);
            v[r] = _mm512_dpbusd_epi32(corr, unpack2(type, blk), av);
            dxh[0][r] = ld16(blk);
            dxh[1][r] = ld16(blk + bs);
        }
        const __m256 f = _mm256_cvtepi32_ps(reduce4_2blk(v[0], v[1], v[2], v[3]));
        acc[0] = fma32(type, acc[0], _mm256_castps256_ps128(f), h2f4(dxh[0][0], dxh[0][1], dxh[0][2], dxh[0][3]),
                       _mm_set1_ps(h2f(ld16(&ab[0].d))));
        acc[0] = fma32(type, acc[0], _mm256_extractf128_ps(f, 1), h2f4(dxh[1][0], dxh[1][1], dxh[1][2], dxh[1][3]),
                       _mm_set1_ps(h2f(ld16(&ab[1].d))));
    }
    if (b < nb)
        gemm32_one(type, NR, w, w_row, a, b, acc);
    store_rows(y, acc[0], NR);
}

/* The outputs of a 4-row tile of NT tokens whose 16 float lanes are
 * (token t, row r) at 4t + r, or with rows_major at 4r + t. */
INLINE void store16_tokens(const int NT, __m512 acc, bool rows_major, float *y, size_t ys)
{
    float f[16];
    _mm512_storeu_ps(f, acc);
    UNROLL
    for (int t = 0; t < NT; t++)
        UNROLL
        for (int r = 0; r < 4; r++)
            y[(size_t)t * ys + (size_t)r] = f[rows_major ? 4 * r + t : 4 * t + r];
}

/*
 * 2-4 tokens (several sequences decoding together) against 4 rows, one
 * block at a time, with lanes that are (token, dword) pairs: 128-bit lane t
 * of a vector holds 16 bytes of token t's block (A0: bytes 0-15, A1:
 * 16-31), and the 16 matching weight bytes of row r are broadcast to all
 * four lanes, so two vpdpbusd per row cover the whole 4-token x 32-byte
 * block with no padding and no unpacked copy of the weights.  The four
 * rows' vectors are then summed within each 128-bit lane (reduce4_lanes),
 * giving the exact integer sum of (token t, row r) in lane 4t + r, and
 * every lane does the same float steps as gemm32, so the bits are
 * vec_dot's.  Per block this is about two thirds of gemm32's instructions
 * for a 4 x 4 tile, and none of its cross-lane shuffles in the row loop.
 */
INLINE void gemm32_few(const int type, const int NT, int64_t n, const uint8_t *w, size_t w_row, const uint8_t *a,
                       size_t a_row, float *y, size_t ys)
{
    const int64_t nb = n / 32;
    const size_t bs = bbytes32(type);
    const __m512i zero = _mm512_setzero_si512(), K = _mm512_set1_epi8((char)koff(type));
    const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    __m512 facc = _mm512_setzero_ps();
    for (int64_t b = 0; b < nb; b++) {
        __m512i A0 = zero, A1 = zero;
        uint16_t dyh[4] = {0, 0, 0, 0};
        UNROLL
        for (int t = 0; t < NT; t++) {
            const block_q8_0 *ab = (const block_q8_0 *)(a + (size_t)t * a_row) + b;
            const __mmask16 lane = (__mmask16)(0xF << (4 * t));
            A0 = _mm512_mask_broadcast_i32x4(A0, lane, _mm_loadu_si128((const __m128i *)ab->qs));
            A1 = _mm512_mask_broadcast_i32x4(A1, lane, _mm_loadu_si128((const __m128i *)(ab->qs + 16)));
            dyh[t] = ld16(&ab->d);
        }
        /* K * (four-byte sums of each token), removed from every row's lanes */
        const __m512i C = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, K, A0), K, A1);
        __m512i v[4];
        uint16_t dxh[4];
        UNROLL
        for (int r = 0; r < 4; r++) {
            const uint8_t *blk = w + (size_t)r * w_row + (size_t)b * bs;
            __m512i W0, W1;
            prefetch_ahead(blk, w_row, bs);
            dxh[r] = ld16(blk);
            if (type == GGML_TYPE_Q8_0) {
                W0 = _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(blk + 2))),
                                      _mm512_set1_epi8((char)0x80));
                W1 = _mm512_xor_si512(_mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(blk + 18))),
                                      _mm512_set1_epi8((char)0x80));
            } else {
                const size_t off = type == GGML_TYPE_Q5_0 ? 6 : 2;
                const __m512i q = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(blk + off)));
                W0 = _mm512_and_si512(q, m4);
                W1 = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
                if (type == GGML_TYPE_IQ4_NL) {
                    W0 = _mm512_shuffle_epi8(iq4nl_u(), W0);
                    W1 = _mm512_shuffle_epi8(iq4nl_u(), W1);
                }
                if (type == GGML_TYPE_Q5_0) {
                    uint32_t qh;
                    memcpy(&qh, blk + 2, 4);
                    const __mmask64 k0 = (__mmask64)(qh & 0xFFFFu) * 0x0001000100010001ull;
                    const __mmask64 k1 = (__mmask64)(qh >> 16) * 0x0001000100010001ull;
                    W0 = _mm512_mask_add_epi8(W0, k0, W0, _mm512_set1_epi8(16));
                    W1 = _mm512_mask_add_epi8(W1, k1, W1, _mm512_set1_epi8(16));
                }
            }
            v[r] = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, W0, A0), W1, A1), C);
        }
        const __m512 f = _mm512_cvtepi32_ps(reduce4_lanes(v[0], v[1], v[2], v[3]));
        const __m512 dx = _mm512_broadcast_f32x4(h2f4(dxh[0], dxh[1], dxh[2], dxh[3]));
        const __m512 dy = _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(h2f4(dyh[0], dyh[1], dyh[2], dyh[3])));
        if (type == GGML_TYPE_Q4_0)
            facc = _mm512_add_ps(facc, _mm512_mul_ps(_mm512_mul_ps(f, dx), dy));
        else
            facc = _mm512_add_ps(facc, _mm512_mul_ps(_mm512_mul_ps(dx, dy), f));
    }
    store16_tokens(NT, facc, false, y, ys);
}

/* acc (lane r: row r) plus the terms of lane 4r + k (row r, block k) of t,
 * added block after block as vec_dot adds them. */
INLINE __m128 add_blocks_in_order(__m128 acc, __m512 t)
{
    UNROLL
    for (int k = 0; k < 4; k++) {
        const __m512i idx =
            _mm512_add_epi32(_mm512_setr_epi32(0, 4, 8, 12, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0), _mm512_set1_epi32(k));
        acc = _mm_add_ps(acc, _mm512_castps512_ps128(_mm512_permutexvar_ps(idx, t)));
    }
    return acc;
}

/*
 * GEMV of four Q4_0 / Q5_0 rows (one token), four blocks at a time: the
 * rows' 16 quant bytes of a block fill the four 128-bit lanes of one vector
 * (low nibbles = elements 0-15, high = 16-31) against the token's two
 * half-blocks broadcast to every lane, so two vpdpbusd cover 4 rows x 32
 * elements with no shuffle of the weights; an in-lane reduction of four
 * blocks gives (row, block) sums in lane 4 row + block, the sixteen row
 * scales come in one gather, and each row then adds its four blocks in
 * order with gemm32's float steps: vec_dot's bits.  gemm32 spent ~80
 * instructions per 4 rows x 2 blocks here (an unpacking shuffle per row,
 * scattered scales), which kept these types' decode compute-bound at
 * ~24 GB/s even from cache.  Blocks past the last group of four go through
 * gemm32_one.
 */
INLINE void gemv32_x4(const int type, int64_t n, const uint8_t *w, size_t w_row, const uint8_t *a, float *y)
{
    const int64_t nb = n / 32;
    const size_t bs = bbytes32(type);
    const size_t off = type == GGML_TYPE_Q5_0 ? 6 : 2;
    const __m512i zero = _mm512_setzero_si512(), K = _mm512_set1_epi8((char)koff(type));
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    /* gather offsets of the scales: row r, block b at lane 4r + b */
    const __m512i goff = _mm512_add_epi32(
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                           _mm512_set1_epi32((int)w_row)),
        _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3),
                           _mm512_set1_epi32((int)bs)));
    __m128 acc[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};
    const block_q8_0 *ab = (const block_q8_0 *)a;
    int64_t b = 0;
    for (; b + 4 <= nb; b += 4) {
        __m512i v[4];
        uint16_t dyh[4];
        /* one prefetch per cache line of each row's four blocks (groups are
         * contiguous, so lines at +0, +64 (, +128) cover them) */
        UNROLL
        for (int r = 0; r < 4; r++)
            prefetch_ahead(w + (size_t)r * w_row + (size_t)b * bs, w_row, 4 * bs);
        UNROLL
        for (int k = 0; k < 4; k++) {
            const uint8_t *blk = w + (size_t)(b + k) * bs;
            if (type == GGML_TYPE_Q8_0) {
                /* rows 0|1 and 2|3 as 256-bit halves, + 128; the token's 32 bytes in both halves */
                const __m512i x80 = _mm512_set1_epi8((char)0x80);
                const __m512i w01 = _mm512_xor_si512(
                    _mm512_inserti64x4(_mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(blk + 2))),
                                       _mm256_loadu_si256((const __m256i *)(blk + w_row + 2)), 1), x80);
                const __m512i w23 = _mm512_xor_si512(
                    _mm512_inserti64x4(
                        _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(blk + 2 * w_row + 2))),
                        _mm256_loadu_si256((const __m256i *)(blk + 3 * w_row + 2)), 1), x80);
                const __m512i at = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)ab[b + k].qs));
                const __m512i c = _mm512_dpbusd_epi32(zero, K, at);
                __m512i v01 = _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, w01, at), c);
                __m512i v23 = _mm512_sub_epi32(_mm512_dpbusd_epi32(zero, w23, at), c);
                /* fold each row's two 128-bit lanes, then rows 0-3 into lanes 0-3 */
                v01 = _mm512_add_epi32(v01, _mm512_shuffle_i32x4(v01, v01, _MM_SHUFFLE(2, 3, 0, 1)));
                v23 = _mm512_add_epi32(v23, _mm512_shuffle_i32x4(v23, v23, _MM_SHUFFLE(2, 3, 0, 1)));
                v[k] = _mm512_shuffle_i32x4(v01, v23, _MM_SHUFFLE(2, 0, 2, 0));
                dyh[k] = ld16(&ab[b + k].d);
                continue;
            }
            __m512i q = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(blk + off)));
            q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)(blk + w_row + off)), 1);
            q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)(blk + 2 * w_row + off)), 2);
            q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)(blk + 3 * w_row + off)), 3);
            __m512i lo = _mm512_and_si512(q, m4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
            if (type == GGML_TYPE_Q5_0) {
                /* the rows' qh words side by side; their low halves are the
                 * high bits of elements 0-15, the high halves of 16-31 */
                uint32_t qh[4];
                UNROLL
                for (int r = 0; r < 4; r++)
                    memcpy(&qh[r], blk + (size_t)r * w_row + 2, 4);
                const __m128i h = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)qh),
                                                   _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15));
                lo = _mm512_mask_add_epi8(lo, (__mmask64)(uint64_t)_mm_cvtsi128_si64(h), lo, _mm512_set1_epi8(16));
                hi = _mm512_mask_add_epi8(hi, (__mmask64)(uint64_t)_mm_extract_epi64(h, 1), hi,
                                          _mm512_set1_epi8(16));
            }
            const __m512i a0 = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)ab[b + k].qs));
            const __m512i a1 = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(ab[b + k].qs + 16)));
            const __m512i c = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, K, a0), K, a1);
            v[k] = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, lo, a0), hi, a1), c);
            dyh[k] = ld16(&ab[b + k].d);
        }
        const __m512 f = _mm512_cvtepi32_ps(reduce4_lanes(v[0], v[1], v[2], v[3]));
        const __m512i g = _mm512_i32gather_epi32(goff, (const void *)(w + (size_t)b * bs), 1);
        const __m512 dx = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(g));
        const __m512 dy = _mm512_broadcast_f32x4(h2f4(dyh[0], dyh[1], dyh[2], dyh[3]));
        const __m512 t = type == GGML_TYPE_Q4_0 ? _mm512_mul_ps(_mm512_mul_ps(f, dx), dy)
                                                : _mm512_mul_ps(_mm512_mul_ps(dx, dy), f);
        acc[0] = add_blocks_in_order(acc[0], t);
    }
    for (; b < nb; b++)
        gemm32_one(type, 4, w, w_row, a, b, acc);
    _mm_storeu_ps(y, acc[0]);
}

/*
 * 1-4 tokens against the four rows of a group in the x4 layout (repack.h):
 * gemv32_x4's arithmetic without its gathering.  Per tile of 4 rows x 4
 * blocks: one 512-bit load per block brings the four rows' quants (row r in
 * 128-bit lane r), Q5_0's high bits are two ready masks, and the sixteen
 * scales are one 256-bit load already in gemv32_x4's lane order (4 row +
 * block).  The weights are unpacked once per tile for all NT tokens.  Each
 * row adds its blocks in order with gemm32's float steps, so every output
 * has vec_dot's bits; the nb % 4 last block columns (kept in GGUF's format,
 * four rows side by side) go through gemm32_one.
 */
INLINE void gemm32_x4p(const int type, const int NT, int64_t n, const uint8_t *w, size_t w_row, const uint8_t *a,
                       size_t a_row, float *y, size_t ys)
{
    (void)w_row; /* a group is contiguous: 4 * w_row bytes */
    const int64_t nb = n / 32, nb4 = nb / 4;
    const size_t bs = bbytes32(type), tb = 16 * bs;
    const __m512i zero = _mm512_setzero_si512(), K = _mm512_set1_epi8((char)koff(type));
    const __m512i m4 = _mm512_set1_epi8(0x0F), sixteen = _mm512_set1_epi8(16);
    __m128 acc[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};
    for (int64_t j = 0; j < nb4; j++) {
        const uint8_t *tile = w + (size_t)j * tb;
        prefetch_tile(tile, tb);
        __m512i v[4][4];
        uint16_t dyh[4][4];
        UNROLL
        for (int k = 0; k < 4; k++) {
            /* row 0's quants of block k start the four rows' 64 bytes */
            const __m512i q = _mm512_loadu_si512((const void *)(tile + repack_x4_qs(type, 0, k, bs)));
            __m512i lo = _mm512_and_si512(q, m4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
            if (type == GGML_TYPE_Q5_0) {
                uint64_t hb[2];
                memcpy(hb, tile + repack_x4_qh(0, k, bs, 0), 16); /* both halves' masks */
                lo = _mm512_mask_add_epi8(lo, (__mmask64)hb[0], lo, sixteen);
                hi = _mm512_mask_add_epi8(hi, (__mmask64)hb[1], hi, sixteen);
            }
            if (type == GGML_TYPE_IQ4_NL) { /* the nibbles through the codebook, + 128 (K) */
                lo = _mm512_shuffle_epi8(iq4nl_u(), lo);
                hi = _mm512_shuffle_epi8(iq4nl_u(), hi);
            }
            UNROLL
            for (int t = 0; t < NT; t++) {
                const block_q8_0 *ab = (const block_q8_0 *)(a + (size_t)t * a_row) + 4 * j + k;
                const __m512i a0 = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)ab->qs));
                const __m512i a1 = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(ab->qs + 16)));
                const __m512i c = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, K, a0), K, a1);
                v[t][k] = _mm512_sub_epi32(_mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, lo, a0), hi, a1), c);
                dyh[t][k] = ld16(&ab->d);
            }
        }
        const __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(tile + repack_x4_d(0, 0, bs))));
        UNROLL
        for (int t = 0; t < NT; t++) {
            const __m512 f = _mm512_cvtepi32_ps(reduce4_lanes(v[t][0], v[t][1], v[t][2], v[t][3]));
            const __m512 dy = _mm512_broadcast_f32x4(h2f4(dyh[t][0], dyh[t][1], dyh[t][2], dyh[t][3]));
            const __m512 p = type == GGML_TYPE_Q4_0 ? _mm512_mul_ps(_mm512_mul_ps(f, dx), dy)
                                                    : _mm512_mul_ps(_mm512_mul_ps(dx, dy), f);
            acc[t] = add_blocks_in_order(acc[t], p);
        }
    }
    for (int64_t b = 4 * nb4; b < nb; b++) {
        const uint8_t *col = w + repack_x4_whole(0, b, nb, bs);
        UNROLL
        for (int t = 0; t < NT; t++)
            gemm32_one(type, 4, col, bs, a + (size_t)t * a_row + (size_t)b * sizeof(block_q8_0), 0, &acc[t]);
    }
    UNROLL
    for (int t = 0; t < NT; t++)
        _mm_storeu_ps(y + (size_t)t * ys, acc[t]);
}

/*
 * 2-4 tokens against the four rows of a group in the x4 layout, with the
 * prep of the tokens (x4r_act_prep: their quants rotated, minus K times
 * their block sums, their scales as floats) made once per matmul.  Lanes
 * are (row, token): for block k of a tile, row r's quants (128-bit lane r,
 * as in gemm32_x4p) against the prep's rotated quants leave in dword j of
 * product s the sum of token (j + s) % 4 over elements 4j .. 4j + 3 and
 * 16 + 4j ..; rotating product s by s dwords (vpshufd) and adding the four
 * gives the exact sum of (row r, token t) in lane 4 r + t, the offset
 * already off (product 0 starts from the prep's correction).  Then the
 * float steps of gemm32 run once per block on sixteen outputs (the row
 * scale of block k broadcast within each 128-bit lane, the tokens' scales
 * from the prep), added to the accumulator in block order: vec_dot's bits.
 * Per block: 8 vpdpbusd, 3 rotations and 3 additions for four tokens
 * (gemm32_x4p: 16 vpdpbusd, 4 subtractions and a reduction of 9 shuffles
 * and additions per token); two tokens take 4 vpdpbusd and two pair swaps.
 */
INLINE __m512 x4q_block(const int type, const int NT, __m512i lo, __m512i hi, const struct x4r_prep *p, __m512 dxk,
                        __m512 acc)
{
#define X4Q_ACT(h, s) _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)p->q[h][s]))
    const __m512i zero = _mm512_setzero_si512();
    const __m512i c = _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)p->corr));
    const __m512i v0 = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(c, lo, X4Q_ACT(0, 0)), hi, X4Q_ACT(1, 0));
    const __m512i v1 = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, lo, X4Q_ACT(0, 1)), hi, X4Q_ACT(1, 1));
    __m512i s;
    if (NT == 2) { /* dword j: token j % 2 */
        const __m512i x = _mm512_add_epi32(v0, _mm512_shuffle_epi32(v1, (_MM_PERM_ENUM)0xB1));
        s = _mm512_add_epi32(x, _mm512_shuffle_epi32(x, (_MM_PERM_ENUM)0x4E));
    } else {
        const __m512i v2 = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, lo, X4Q_ACT(0, 2)), hi, X4Q_ACT(1, 2));
        const __m512i v3 = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, lo, X4Q_ACT(0, 3)), hi, X4Q_ACT(1, 3));
        /* dword t of the result takes dword (t - s) % 4 of product s */
        s = _mm512_add_epi32(_mm512_add_epi32(v0, _mm512_shuffle_epi32(v1, (_MM_PERM_ENUM)0x93)),
                             _mm512_add_epi32(_mm512_shuffle_epi32(v2, (_MM_PERM_ENUM)0x4E),
                                              _mm512_shuffle_epi32(v3, (_MM_PERM_ENUM)0x39)));
    }
#undef X4Q_ACT
    const __m512 f = _mm512_cvtepi32_ps(s);
    const __m512 dy = _mm512_broadcast_f32x4(_mm_loadu_ps(p->d));
    return _mm512_add_ps(acc, type == GGML_TYPE_Q4_0 ? _mm512_mul_ps(_mm512_mul_ps(f, dxk), dy)
                                                     : _mm512_mul_ps(_mm512_mul_ps(dxk, dy), f));
}

INLINE void gemm32_x4q(const int type, const int NT, int64_t n, const uint8_t *w, const struct x4r_prep *prep,
                       float *y, size_t ys)
{
    const int64_t nb = n / 32, nb4 = nb / 4;
    const size_t bs = bbytes32(type), tb = 16 * bs, off = type == GGML_TYPE_Q5_0 ? 6 : 2;
    const __m512i m4 = _mm512_set1_epi8(0x0F), sixteen = _mm512_set1_epi8(16);
    __m512 acc = _mm512_setzero_ps();
    for (int64_t j = 0; j < nb4; j++) {
        const uint8_t *tile = w + (size_t)j * tb;
        prefetch_tile(tile, tb);
        /* lane 4 r + k: row r's scale of block k */
        const __m512 dx = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(tile + repack_x4_d(0, 0, bs))));
        UNROLL
        for (int k = 0; k < 4; k++) {
            const __m512i q = _mm512_loadu_si512((const void *)(tile + repack_x4_qs(type, 0, k, bs)));
            __m512i lo = _mm512_and_si512(q, m4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
            if (type == GGML_TYPE_Q5_0) {
                uint64_t hb[2];
                memcpy(hb, tile + repack_x4_qh(0, k, bs, 0), 16);
                lo = _mm512_mask_add_epi8(lo, (__mmask64)hb[0], lo, sixteen);
                hi = _mm512_mask_add_epi8(hi, (__mmask64)hb[1], hi, sixteen);
            }
            if (type == GGML_TYPE_IQ4_NL) { /* the nibbles through the codebook, + 128 (K) */
                lo = _mm512_shuffle_epi8(iq4nl_u(), lo);
                hi = _mm512_shuffle_epi8(iq4nl_u(), hi);
            }
            acc = x4q_block(type, NT, lo, hi, prep + 4 * j + k, _mm512_permutevar_ps(dx, _mm512_set1_epi32(k)), acc);
        }
    }
    for (int64_t b = 4 * nb4; b < nb; b++) { /* GGUF's blocks, rows 0-3 side by side */
        const uint8_t *col = w + repack_x4_whole(0, b, nb, bs);
        __m512i q = _mm512_castsi128_si512(_mm_loadu_si128((const __m128i *)(col + off)));
        uint16_t dxh[4];
        uint32_t qh[4];
        UNROLL
        for (int r = 0; r < 4; r++) {
            if (r > 0)
                q = _mm512_inserti32x4(q, _mm_loadu_si128((const __m128i *)(col + (size_t)r * bs + off)), r);
            dxh[r] = ld16(col + (size_t)r * bs);
            memcpy(&qh[r], col + (size_t)r * bs + 2, 4);
        }
        __m512i lo = _mm512_and_si512(q, m4), hi = _mm512_and_si512(_mm512_srli_epi16(q, 4), m4);
        if (type == GGML_TYPE_Q5_0) { /* as in gemv32_x4 */
            const __m128i h = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)qh),
                                               _mm_setr_epi8(0, 1, 4, 5, 8, 9, 12, 13, 2, 3, 6, 7, 10, 11, 14, 15));
            lo = _mm512_mask_add_epi8(lo, (__mmask64)(uint64_t)_mm_cvtsi128_si64(h), lo, sixteen);
            hi = _mm512_mask_add_epi8(hi, (__mmask64)(uint64_t)_mm_extract_epi64(h, 1), hi, sixteen);
        }
        if (type == GGML_TYPE_IQ4_NL) {
            lo = _mm512_shuffle_epi8(iq4nl_u(), lo);
            hi = _mm512_shuffle_epi8(iq4nl_u(), hi);
        }
        const __m512 dxk = _mm512_permutexvar_ps(_mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3),
                                                 _mm512_castps128_ps512(h2f4(dxh[0], dxh[1], dxh[2], dxh[3])));
        acc = x4q_block(type, NT, lo, hi, prep + b, dxk, acc);
    }
    store16_tokens(NT, acc, true, y, ys);
}

_Static_assert(sizeof(struct x4r_prep) == GEMM_PREP_BLOCK, "one x4r_prep per block of 32");

/*
 * 1-4 tokens against the four rows of a group in the Q8_0 x4 layout (the
 * SDOT order, repack.h: a 64-byte piece holds elements 4v .. 4v + 3 of row
 * r in dword 4v + r, v < 4; a block is two pieces).  The weights stay
 * signed and the activations become unsigned (a + 128): vpdpbusd's
 * operands, with the offset removed as 128 times each dword's weight sum,
 * computed once per block for all tokens.  A token's block is one 256-bit
 * load whose dword v goes to the four dwords 4v + r by one vpermd per
 * piece, so two vpdpbusd give block k's sums spread over the lanes (dword
 * 4v + r: row r); folding the four 128-bit lanes of the tile's four blocks
 * leaves row r of block k in element 4k + r, where the float steps of
 * gemm32 run, and each row adds its blocks in order: vec_dot's bits.  One
 * contiguous stream per group, the sixteen scales one 256-bit load: the
 * GGUF-layout GEMV (gemv32_x4) reads four row streams and gathers the
 * scales, and decoded a 1B Q8_0 file at ~87% of the bandwidth where the x4
 * layouts of the 4-bit types reach 90-95%.  The nb % 4 block columns after
 * the tiles (GGUF's blocks, four rows side by side) go through gemm32_one.
 */
INLINE void gemm8_x4s(const int NT, int64_t n, const uint8_t *w, const uint8_t *a, size_t a_row, float *y,
                      size_t ys)
{
    const int64_t nb = n / 32, nb4 = nb / 4;
    const size_t bs = sizeof(block_q8_0), tb = 16 * bs;
    const __m512i zero = _mm512_setzero_si512(), K = _mm512_set1_epi8((char)0x80);
    const __m256i x80 = _mm256_set1_epi8((char)0x80);
    const __m512i lo4 = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    const __m512i hi4 = _mm512_add_epi32(lo4, _mm512_set1_epi32(4));
    /* element 4k + r takes scale 4r + k (the tile's order) */
    const __m512i dperm = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
    __m128 acc[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};
    for (int64_t j = 0; j < nb4; j++) {
        const uint8_t *tile = w + (size_t)j * tb;
        prefetch_tile(tile, tb);
        __m512i s[4][4];
        UNROLL
        for (int k = 0; k < 4; k++) {
            const __m512i w0 = _mm512_loadu_si512((const void *)(tile + repack_x4s_q(0, k, bs, 32, 0)));
            const __m512i w1 = _mm512_loadu_si512((const void *)(tile + repack_x4s_q(0, k, bs, 32, 16)));
            const __m512i c = _mm512_sub_epi32(zero, _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(zero, K, w0), K, w1));
            UNROLL
            for (int t = 0; t < NT; t++) {
                const block_q8_0 *ab = (const block_q8_0 *)(a + (size_t)t * a_row) + 4 * j + k;
                const __m512i au = _mm512_castsi256_si512(
                    _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)ab->qs), x80));
                s[t][k] = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(c, _mm512_permutexvar_epi32(lo4, au), w0),
                                              _mm512_permutexvar_epi32(hi4, au), w1);
            }
        }
        const __m512 dx = _mm512_permutexvar_ps(
            dperm, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(tile + repack_x4_d(0, 0, bs)))));
        UNROLL
        for (int t = 0; t < NT; t++) {
            /* lane k: block k's 128-bit lanes added, dword r = row r */
            const __m512i t01 = _mm512_add_epi32(_mm512_shuffle_i32x4(s[t][0], s[t][1], _MM_SHUFFLE(1, 0, 1, 0)),
                                                 _mm512_shuffle_i32x4(s[t][0], s[t][1], _MM_SHUFFLE(3, 2, 3, 2)));
            const __m512i t23 = _mm512_add_epi32(_mm512_shuffle_i32x4(s[t][2], s[t][3], _MM_SHUFFLE(1, 0, 1, 0)),
                                                 _mm512_shuffle_i32x4(s[t][2], s[t][3], _MM_SHUFFLE(3, 2, 3, 2)));
            const __m512i r = _mm512_add_epi32(_mm512_shuffle_i32x4(t01, t23, _MM_SHUFFLE(2, 0, 2, 0)),
                                               _mm512_shuffle_i32x4(t01, t23, _MM_SHUFFLE(3, 1, 3, 1)));
            const block_q8_0 *ab = (const block_q8_0 *)(a + (size_t)t * a_row) + 4 * j;
            const __m512 dy = _mm512_permutexvar_ps(
                lo4, _mm512_castps128_ps512(h2f4(ld16(&ab[0].d), ld16(&ab[1].d), ld16(&ab[2].d), ld16(&ab[3].d))));
            const __m512 p = _mm512_mul_ps(_mm512_mul_ps(dx, dy), _mm512_cvtepi32_ps(r));
            acc[t] = _mm_add_ps(acc[t], _mm512_castps512_ps128(p));
            acc[t] = _mm_add_ps(acc[t], _mm512_extractf32x4_ps(p, 1));
            acc[t] = _mm_add_ps(acc[t], _mm512_extractf32x4_ps(p, 2));
            acc[t] = _mm_add_ps(acc[t], _mm512_extractf32x4_ps(p, 3));
        }
    }
    for (int64_t b = 4 * nb4; b < nb; b++) {
        const uint8_t *col = w + repack_x4_whole(0, b, nb, bs);
        UNROLL
        for (int t = 0; t < NT; t++)
            gemm32_one(GGML_TYPE_Q8_0, 4, col, bs, a + (size_t)t * a_row + (size_t)b * bs, 0, &acc[t]);
    }
    UNROLL
    for (int t = 0; t < NT; t++)
        _mm_storeu_ps(y + (size_t)t * ys, acc[t]);
}

DEFINE_GEMM_GROUP(gemm_q8_0x4, gemm8_x4s)

#define DEFINE_GEMM_X4Q(NAME, PREP, TYPE)                                                                     \
    static void NAME(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, const void *prep,    \
                     float *y, size_t ys, int nt)                                                             \
    {                                                                                                         \
        switch (nt) {                                                                                         \
        case 1: gemm32_x4p(TYPE, 1, n, w, w_row, a, a_row, y, ys); break; /* the GEMV needs no prep */        \
        case 2: gemm32_x4q(TYPE, 2, n, w, prep, y, ys); break;                                                \
        case 3: gemm32_x4q(TYPE, 3, n, w, prep, y, ys); break;                                                \
        default: gemm32_x4q(TYPE, 4, n, w, prep, y, ys); break;                                               \
        }                                                                                                     \
    }                                                                                                         \
    static void PREP(int64_t n, const void *a, size_t a_row, int nt, void *prep)                              \
    {                                                                                                         \
        x4r_act_prep(koff(TYPE), n, a, a_row, nt, prep);                                                      \
    }
DEFINE_GEMM_X4Q(gemm_q4_0x4q, prep_q4_0x4, GGML_TYPE_Q4_0)
DEFINE_GEMM_X4Q(gemm_q5_0x4q, prep_q5_0x4, GGML_TYPE_Q5_0)
DEFINE_GEMM_X4Q(gemm_iq4_nlx4q, prep_iq4_nlx4, GGML_TYPE_IQ4_NL)

#define DEFINE_GEMM_X4(NAME, TYPE)                                                                            \
    static void NAME(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, \
                     int nt)                                                                                  \
    {                                                                                                         \
        switch (nt) {                                                                                         \
        case 1: gemm32_x4p(TYPE, 1, n, w, w_row, a, a_row, y, ys); break;                                     \
        case 2: gemm32_x4p(TYPE, 2, n, w, w_row, a, a_row, y, ys); break;                                     \
        case 3: gemm32_x4p(TYPE, 3, n, w, w_row, a, a_row, y, ys); break;                                     \
        default: gemm32_x4p(TYPE, 4, n, w, w_row, a, a_row, y, ys); break;                                    \
        }                                                                                                     \
    }
DEFINE_GEMM_X4(gemm_q4_0x4, GGML_TYPE_Q4_0)
DEFINE_GEMM_X4(gemm_q5_0x4, GGML_TYPE_Q5_0)
DEFINE_GEMM_X4(gemm_iq4_nlx4, GGML_TYPE_IQ4_NL)

#define DEFINE_GEMM_FEW(NAME, TYPE)                                                                           \
    static void NAME(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, \
                     int nt)                                                                                  \
    {                                                                                                         \
        switch (nt) {                                                                                         \
        case 1: gemv32_x4(TYPE, n, w, w_row, a, y); break;                                                    \
        case 2: gemm32_few(TYPE, 2, n, w, w_row, a, a_row, y, ys); break;                                     \
        case 3: gemm32_few(TYPE, 3, n, w, w_row, a, a_row, y, ys); break;                                     \
        default: gemm32_few(TYPE, 4, n, w, w_row, a, a_row, y, ys); break;                                    \
        }                                                                                                     \
    }

#define DEFINE_GEMM(NAME, CORE, TYPE)                                                                         \
    static void NAME(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, \
                     int nt)                                                                                  \
    {                                                                                                         \
        switch (nt) {                                                                                         \
        case 1: CORE(TYPE, 4, 1, n, w, w_row, a, a_row, y, ys); break;                                        \
        case 2: CORE(TYPE, 4, 2, n, w, w_row, a, a_row, y, ys); break;                                        \
        case 3: CORE(TYPE, 4, 3, n, w, w_row, a, a_row, y, ys); break;                                        \
        default: CORE(TYPE, 4, 4, n, w, w_row, a, a_row, y, ys); break;                                       \
        }                                                                                                     \
    }
#define DEFINE_DOT(NAME, CORE, TYPE)                                                                          \
    static float NAME(int64_t n, const void *w, const void *a)                                                \
    {                                                                                                         \
        float y;                                                                                              \
        CORE(TYPE, 1, 1, n, w, 0, a, 0, &y, 1);                                                               \
        return y;                                                                                             \
    }

DEFINE_GEMM_FEW(gemm_q4_0, GGML_TYPE_Q4_0)
DEFINE_GEMM_FEW(gemm_q5_0, GGML_TYPE_Q5_0)
DEFINE_GEMM_FEW(gemm_q8_0, GGML_TYPE_Q8_0)
#define DEFINE_DOT32(NAME, TYPE)                                                                              \
    static float NAME(int64_t n, const void *w, const void *a)                                                \
    {                                                                                                         \
        float y;                                                                                              \
        gemm32(TYPE, 1, n, w, 0, a, &y);                                                                      \
        return y;                                                                                             \
    }
DEFINE_DOT32(vec_dot_q4_0, GGML_TYPE_Q4_0)
DEFINE_DOT32(vec_dot_q5_0, GGML_TYPE_Q5_0)
DEFINE_DOT32(vec_dot_q8_0, GGML_TYPE_Q8_0)

/* IQ4_NL: one token through gemm32 (four rows), 2-4 through gemm32_few. */
static void gemm_iq4_nl(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys,
                        int nt)
{
    switch (nt) {
    case 1: gemm32(GGML_TYPE_IQ4_NL, 4, n, w, w_row, a, y); break;
    case 2: gemm32_few(GGML_TYPE_IQ4_NL, 2, n, w, w_row, a, a_row, y, ys); break;
    case 3: gemm32_few(GGML_TYPE_IQ4_NL, 3, n, w, w_row, a, a_row, y, ys); break;
    default: gemm32_few(GGML_TYPE_IQ4_NL, 4, n, w, w_row, a, a_row, y, ys); break;
    }
}
DEFINE_DOT32(vec_dot_iq4_nl, GGML_TYPE_IQ4_NL)

/* --------------------- Q2_K / Q3_K / IQ4_XS x Q8_K --------------------- */

#define LB_WIDTH 512
#define LB_VNNI 1
#include "lowbit_x86.h"

/* ----------------------- K-quants x Q8_K ----------------------- */

/* Q4_K/Q5_K chunk c (64 quants): sc[2c] for the first 32, sc[2c+1] after:
 * pshufb controls picking int16 value 2c in 128-bit lanes 0-1, 2c+1 in 2-3 */
static const uint8_t pick_k4[4][64] __attribute__((aligned(64))) = {
#define P2(j) 2 * (j), 2 * (j) + 1
#define L(j) P2(j), P2(j), P2(j), P2(j), P2(j), P2(j), P2(j), P2(j)
#define C(a, b) {L(a), L(a), L(b), L(b)}
    C(0, 1), C(2, 3), C(4, 5), C(6, 7),
#undef C
#undef L
#undef P2
};
/* vpermw indices for Q6_K half h, chunk 01 or 23 (the source holds the
 * sixteen scales): sub-blocks 8h + 4j + 0..3, 8 pairs each */
static const uint16_t idx_k6[4][32] __attribute__((aligned(64))) = {
#define E(a, b, c, d) {a, a, a, a, a, a, a, a, b, b, b, b, b, b, b, b, c, c, c, c, c, c, c, c, d, d, d, d, d, d, d, d}
    E(0, 1, 2, 3), E(4, 5, 6, 7), E(8, 9, 10, 11), E(12, 13, 14, 15),
#undef E
};
/* [m0 m0 m1 m1 .. m7 m7] from the 16 int16 [sc0..7, m0..7] */
static const uint16_t idx_mdup[16] __attribute__((aligned(32))) = {8,  8,  9,  9,  10, 10, 11, 11,
                                                                   12, 12, 13, 13, 14, 14, 15, 15};

INLINE __m512i lidx(const uint16_t *p) { return _mm512_load_si512((const void *)p); }

/* One super-block of one row, unpacked once for all tokens of a tile. */
struct kblock {
    __m512i sc[4];   /* int16 scale per maddubs lane, per chunk */
    __m512i q[4];    /* the 256 quants, 64 per vector (Q6_K: + 32, unsigned) */
    __m256i s16;     /* Q6_K: the 16 scales as int16; Q4_K/Q5_K: mins doubled */
    float d, dmin;
};

INLINE void kblock_load(const int type, struct kblock *k, const uint8_t *blk)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    if (type == GGML_TYPE_Q6_K) {
        const block_q6_K *x = (const block_q6_K *)blk;
        k->s16 = _mm256_cvtepi8_epi16(_mm_loadu_si128((const __m128i *)x->scales));
        const __m512i s = _mm512_castsi256_si512(k->s16);
        const __m512i m2 = _mm512_set1_epi8(0x30);
        UNROLL
        for (int h = 0; h < 2; h++) {
            const __m512i ql = _mm512_loadu_si512((const void *)(x->ql + 64 * h));
            const __m512i qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)(x->qh + 32 * h)));
            /* [q0 | q1]: high bits (qh << 4) and (qh << 2); [q2 | q3]: qh and (qh >> 2) */
            const __m512i sl = _mm512_inserti64x4(_mm512_set1_epi16(4), _mm256_set1_epi16(2), 1);
            const __m512i sr = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(2), 1);
            k->q[2 * h] = _mm512_or_si512(_mm512_and_si512(ql, m4), _mm512_and_si512(_mm512_sllv_epi16(qh, sl), m2));
            k->q[2 * h + 1] = _mm512_or_si512(_mm512_and_si512(_mm512_srli_epi16(ql, 4), m4),
                                              _mm512_and_si512(_mm512_srlv_epi16(qh, sr), m2));
            k->sc[2 * h] = _mm512_permutexvar_epi16(lidx(idx_k6[2 * h]), s);
            k->sc[2 * h + 1] = _mm512_permutexvar_epi16(lidx(idx_k6[2 * h + 1]), s);
        }
        k->d = h2f(ld16(&x->d));
        k->dmin = 0.0f;
        return;
    }
    uint32_t u[4];
    memcpy(u, blk + 4, 12);
    const uint32_t km1 = 0x3f3f3f3f, km2 = 0x0f0f0f0f, km3 = 0x03030303;
    u[3] = ((u[2] >> 4) & km2) | (((u[1] >> 6) & km3) << 4);
    const uint32_t m03 = u[1] & km1;
    u[1] = (u[2] & km2) | (((u[0] >> 6) & km3) << 4);
    u[2] = m03;
    u[0] &= km1;
    const __m256i s16 = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i *)u)); /* [sc0..7, m0..7] */
    /* [sc0..7] in every 128-bit lane; chunk c takes sc_2c in lanes 0-1 and
     * sc_2c+1 in lanes 2-3 with an in-lane shuffle (vpermw is two uops) */
    const __m512i sb = _mm512_broadcast_i32x4(_mm256_castsi256_si128(s16));
    UNROLL
    for (int c = 0; c < 4; c++)
        k->sc[c] = _mm512_shuffle_epi8(sb, _mm512_load_si512((const void *)pick_k4[c]));
    k->s16 = _mm256_permutexvar_epi16(_mm256_load_si256((const __m256i *)idx_mdup), s16);
    k->d = h2f(ld16(blk));
    k->dmin = h2f(ld16(blk + 2));
    const uint8_t *qs = type == GGML_TYPE_Q4_K ? ((const block_q4_K *)blk)->qs : ((const block_q5_K *)blk)->qs;
    __m512i qh = _mm512_setzero_si512();
    if (type == GGML_TYPE_Q5_K)
        qh = _mm512_broadcast_i64x4(_mm256_loadu_si256((const __m256i *)((const block_q5_K *)blk)->qh));
    UNROLL
    for (int c = 0; c < 4; c++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(qs + 32 * c));
        __m512i z = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4), 1), m4);
        if (type == GGML_TYPE_Q5_K) { /* bit 2c of qh[l] for the low half, 2c+1 for the high */
            const __m512i bits = _mm512_inserti64x4(_mm512_set1_epi8((char)(1 << (2 * c))),
                                                    _mm256_set1_epi8((char)(2 << (2 * c))), 1);
            const __mmask64 hk = _mm512_test_epi8_mask(qh, bits);
            z = _mm512_mask_add_epi8(z, hk, z, _mm512_set1_epi8(16));
        }
        k->q[c] = z;
    }
}

/* isum lanes (and summ lanes for Q4_K/Q5_K) of one row's super-block
 * against one token's. */
INLINE __m512i kdot(const int type, const struct kblock *k, const block_q8_K *y, __m256i *summ)
{
    __m512i acc = _mm512_setzero_si512();
    UNROLL
    for (int c = 0; c < 4; c++) {
        const __m512i p = _mm512_maddubs_epi16(k->q[c], _mm512_loadu_si512((const void *)(y->qs + 64 * c)));
        acc = _mm512_dpwssd_epi32(acc, p, k->sc[c]);
    }
    const __m256i bs = _mm256_loadu_si256((const __m256i *)y->bsums);
    if (type == GGML_TYPE_Q6_K) { /* q - 32 */
        const __m256i corr = _mm256_slli_epi32(_mm256_madd_epi16(bs, k->s16), 5);
        return _mm512_sub_epi32(acc, _mm512_zextsi256_si512(corr));
    }
    *summ = _mm256_madd_epi16(bs, k->s16);
    return acc;
}

INLINE void gemmK(const int type, const int NR, const int NT, int64_t n, const uint8_t *w, size_t w_row,
                  const uint8_t *a, size_t a_row, float *y, size_t ys)
{
    const int64_t nb = n / QK_K;
    const size_t bs = kbytes(type);
    const __m512i zero = _mm512_setzero_si512();
    const __m256i zero8 = _mm256_setzero_si256();
    __m128 acc[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};
    for (int64_t b = 0; b < nb; b++) {
        const block_q8_K *yb[4];
        float dy[4] = {0, 0, 0, 0};
        UNROLL
        for (int t = 0; t < NT; t++) {
            yb[t] = (const block_q8_K *)(a + (size_t)t * a_row) + b;
            dy[t] = yb[t]->d;
        }
        if (NT == 1) { /* lanes are rows */
            __m512i v[4] = {zero, zero, zero, zero};
            __m256i m[4] = {zero8, zero8, zero8, zero8};
            float dx[4] = {0, 0, 0, 0}, dm[4] = {0, 0, 0, 0};
            UNROLL
            for (int r = 0; r < NR; r++) {
                struct kblock k;
                prefetch_ahead(w + (size_t)r * w_row + (size_t)b * bs, w_row, bs);
                kblock_load(type, &k, w + (size_t)r * w_row + (size_t)b * bs);
                v[r] = kdot(type, &k, yb[0], &m[r]);
                dx[r] = k.d;
                dm[r] = k.dmin;
            }
            const __m128i isum = reduce4_512(v[0], v[1], v[2], v[3]);
            const __m128i summ = type == GGML_TYPE_Q6_K ? _mm_setzero_si128() : reduce4(m[0], m[1], m[2], m[3]);
            acc[0] = kfma(type, acc[0], _mm_loadu_ps(dx), _mm_loadu_ps(dm), _mm_set1_ps(dy[0]), isum, summ);
            continue;
        }
        const __m128 dyv = _mm_loadu_ps(dy);
        UNROLL
        for (int r = 0; r < NR; r++) { /* lanes are tokens */
            struct kblock k;
            prefetch_ahead(w + (size_t)r * w_row + (size_t)b * bs, w_row, bs);
            kblock_load(type, &k, w + (size_t)r * w_row + (size_t)b * bs);
            __m512i v[4] = {zero, zero, zero, zero};
            __m256i m[4] = {zero8, zero8, zero8, zero8};
            UNROLL
            for (int t = 0; t < NT; t++)
                v[t] = kdot(type, &k, yb[t], &m[t]);
            const __m128i isum = reduce4_512(v[0], v[1], v[2], v[3]);
            const __m128i summ = type == GGML_TYPE_Q6_K ? _mm_setzero_si128() : reduce4(m[0], m[1], m[2], m[3]);
            acc[r] = kfma(type, acc[r], _mm_set1_ps(k.d), _mm_set1_ps(k.dmin), dyv, isum, summ);
        }
    }
    if (NT == 1) {
        store_rows(y, acc[0], NR);
        return;
    }
    store_rows_tokens(y, ys, acc, NR, NT);
}

/* Q4_K x4 (repack.h): row r's super-block of a tile, kblock_load's Q4_K
 * unpacking from x4k_scales' s16 and the row's chunks (128 bytes apart). */
INLINE void kblock_x4(struct kblock *k, __m256i s16, const uint8_t *q0)
{
    const __m512i m4 = _mm512_set1_epi8(0x0F);
    const __m512i sb = _mm512_broadcast_i32x4(_mm256_castsi256_si128(s16));
    UNROLL
    for (int c = 0; c < 4; c++)
        k->sc[c] = _mm512_shuffle_epi8(sb, _mm512_load_si512((const void *)pick_k4[c]));
    k->s16 = _mm256_permutexvar_epi16(_mm256_load_si256((const __m256i *)idx_mdup), s16);
    UNROLL
    for (int c = 0; c < 4; c++) {
        const __m256i q = _mm256_loadu_si256((const __m256i *)(q0 + repack_x4k_qs(0, c) - repack_x4k_qs(0, 0)));
        k->q[c] = _mm512_and_si512(_mm512_inserti64x4(_mm512_castsi256_si512(q), _mm256_srli_epi16(q, 4), 1), m4);
    }
}

/*
 * Q4_K x4, 2-4 tokens: one row per 128-bit lane, 16 quant bytes each, so
 * that a token's 16 activation bytes are one broadcast load and its
 * products with the four rows one vpdpbusd (avx2's gemmK_x4t puts 8 bytes
 * of a row in a 64-bit lane: twice the instructions at this width).  Per
 * chunk of 64 elements the two 512-bit loads of the tile (rows 0-1, 2-3)
 * become bytes 0-15 and 16-31 of each row by one vshufi64x2 each; per
 * token, the two vectors of a sub-block go into one vpdpbusd chain (dwords
 * of 8 products, |sum| <= 8 * 15 * 128 < 2^15); a chunk's two sub-blocks'
 * dwords are packed into int16 (vpackssdw, exact) and multiplied by their
 * scales and added with one vpdpwssd (1-2% over one per sub-block); the
 * minimums likewise, m_j against the pair of bsums of
 * sub-block j.  At a super-block's end the four dwords of each (row,
 * token) are summed into element t of lane r (exact integers: gemmK's
 * sums), and kfma's float steps run per element, so the bits are the
 * reference's.  With matmul's prep (x4k_prep, 2-4 tokens) the minimums'
 * sums come from four vpdpwssd straight into element 4r + t and the
 * tokens' scales from one load: `bench-kernels -t 1 -c -b -r 41 -n 4 -s
 * 8192x2048 -T q4_kx4 -v avx512 -A` (the build before), 1.05-1.06x at four
 * tokens, 1.03x at two.
 */
/* pshufb controls, lane r: bytes 4r + j and 4r + j + 1 (row r's scales j,
 * j + 1 in x4k_fields' s03 / s47) as int16 (sc_j, sc_j, sc_j, sc_j,
 * sc_j+1, ...), against a chunk's vpackssdw of its two sub-blocks' dwords */
#define KZ_SC(r, j) 4 * (r) + (j), 0x80, 4 * (r) + (j), 0x80
#define KZ_SC4(r, j) KZ_SC(r, j), KZ_SC(r, j), KZ_SC(r, (j) + 1), KZ_SC(r, (j) + 1)
#define KZ_SCJ(j) {KZ_SC4(0, j), KZ_SC4(1, j), KZ_SC4(2, j), KZ_SC4(3, j)}
static const uint8_t kz_sc[2][64] __attribute__((aligned(64))) = {KZ_SCJ(0), KZ_SCJ(2)};
/* lane r: row r's minimums m0 m0 m1 m1 m2 m2 m3 m3 (of m03 / m47) as int16 */
#define KZ_M(r, j) 4 * (r) + (j), 0x80, 4 * (r) + (j), 0x80
#define KZ_ML(r) KZ_M(r, 0), KZ_M(r, 1), KZ_M(r, 2), KZ_M(r, 3)
static const uint8_t kz_m[64] __attribute__((aligned(64))) = {KZ_ML(0), KZ_ML(1), KZ_ML(2), KZ_ML(3)};
#undef KZ_ML
#undef KZ_M
#undef KZ_SCJ
#undef KZ_SC4
#undef KZ_SC

/* lane r, dword t: row r's minimums m_2k, m_2k+1 (of m03 for k < 2, else m47)
 * as int16, against the prep's pair sums of bsums bp[k] (x4k_prep) */
#define KZ_MK(r, k) 4 * (r) + 2 * ((k) % 2), 0x80, 4 * (r) + 2 * ((k) % 2) + 1, 0x80
#define KZ_MK4(r, k) KZ_MK(r, k), KZ_MK(r, k), KZ_MK(r, k), KZ_MK(r, k)
#define KZ_MKK(k) {KZ_MK4(0, k), KZ_MK4(1, k), KZ_MK4(2, k), KZ_MK4(3, k)}
static const uint8_t kz_mk[4][64] __attribute__((aligned(64))) = {KZ_MKK(0), KZ_MKK(1), KZ_MKK(2), KZ_MKK(3)};
#undef KZ_MKK
#undef KZ_MK4
#undef KZ_MK

/* The prep (dispatch.h's act_prep) of gemmK_x4z for 2-4 tokens, per
 * super-block: bp[k] holds in dword t token t's sums B_2k, B_2k+1 (int16;
 * B_j = bsums[2j] + bsums[2j+1], the 32 elements of sub-block j, |B_j| <=
 * 4096), d the tokens' scales; zeros past nt.  Made once per matmul, it
 * turns the minimums' correction of a (row, token) tile into four vpdpwssd
 * with no reduction after them, and the scales into one load. */
struct x4k_prep {
    int16_t bp[4][8];
    float d[4];
    int32_t pad[4];
};
_Static_assert(sizeof(struct x4k_prep) <= GEMM_PREP_BLOCK * (QK_K / 32), "x4k_prep exceeds the prep space");

static void prep_q4_Kx4(int64_t n, const void *a, size_t a_row, int nt, void *prep)
{
    struct x4k_prep *p = prep;
    for (int64_t b = 0; b < n / QK_K; b++, p++) {
        memset(p, 0, sizeof(*p));
        for (int t = 0; t < nt; t++) {
            const block_q8_K *yb = (const block_q8_K *)((const char *)a + (size_t)t * a_row) + b;
            p->d[t] = yb->d;
            for (int j = 0; j < 8; j++)
                p->bp[j / 2][2 * t + j % 2] = (int16_t)(yb->bsums[2 * j] + yb->bsums[2 * j + 1]);
        }
    }
}

INLINE void gemmK_x4z(const int NT, int64_t n, const uint8_t *w, const uint8_t *a, size_t a_row,
                      const struct x4k_prep *prep, float *y, size_t ys)
{
    const int64_t nb = n / QK_K;
    const __m512i m4 = _mm512_set1_epi8(0x0F), zero = _mm512_setzero_si512();
    const __m512i dlanes = _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
    __m512 facc = _mm512_setzero_ps(); /* element 4r + t: row r, token t */
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *tile = w + (size_t)b * REPACK_X4K_TILE;
        prefetch_tile(tile, REPACK_X4K_TILE);
        const block_q8_K *yb[4];
        float dy[4];
        k_tokens(NT, a, a_row, b, yb, dy);
        __m128i s03, s47, m03, m47;
        x4k_fields(tile, &s03, &s47, &m03, &m47);
        const __m512i sb03 = _mm512_broadcast_i32x4(s03), sb47 = _mm512_broadcast_i32x4(s47);
        /* per token: sub-blocks with even and odd index (two chains) */
        __m512i tot[4][2];
        UNROLL
        for (int t = 0; t < 4; t++)
            tot[t][0] = tot[t][1] = zero;
        UNROLL
        for (int c = 0; c < 4; c++) {
            const uint8_t *qc = tile + repack_x4k_qs(0, c);
            const __m512i w01 = _mm512_loadu_si512((const void *)qc), w23 = _mm512_loadu_si512((const void *)(qc + 64));
            const __m512i q0 = _mm512_shuffle_i64x2(w01, w23, 0x88); /* bytes 0-15 of rows 0-3 */
            const __m512i q1 = _mm512_shuffle_i64x2(w01, w23, 0xDD); /* bytes 16-31 */
            const __m512i lo0 = _mm512_and_si512(q0, m4), lo1 = _mm512_and_si512(q1, m4);
            const __m512i hi0 = _mm512_and_si512(_mm512_srli_epi16(q0, 4), m4);
            const __m512i hi1 = _mm512_and_si512(_mm512_srli_epi16(q1, 4), m4);
            const __m512i sc = _mm512_shuffle_epi8(c < 2 ? sb03 : sb47, _mm512_load_si512((const void *)kz_sc[c % 2]));
            UNROLL
            for (int t = 0; t < NT; t++) {
                const int8_t *qa = yb[t]->qs + 64 * c;
                __m512i pl = _mm512_dpbusd_epi32(zero, lo0, _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)qa)));
                pl = _mm512_dpbusd_epi32(pl, lo1, _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(qa + 16))));
                __m512i ph = _mm512_dpbusd_epi32(zero, hi0, _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(qa + 32))));
                ph = _mm512_dpbusd_epi32(ph, hi1, _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(qa + 48))));
                /* both sub-blocks' dwords as int16 (exact: |sum| < 2^15) and
                 * each pair times its sub-block's scale by one vpdpwssd */
                tot[t][c % 2] = _mm512_dpwssd_epi32(tot[t][c % 2], _mm512_packs_epi32(pl, ph), sc);
            }
        }
        /* per lane: the four dwords of token t summed into element t */
        __m512i z[4];
        UNROLL
        for (int t = 0; t < 4; t++)
            z[t] = t < NT ? _mm512_add_epi32(tot[t][0], tot[t][1]) : zero;
        const __m512i s01 = _mm512_add_epi32(_mm512_unpacklo_epi32(z[0], z[1]), _mm512_unpackhi_epi32(z[0], z[1]));
        const __m512i s23 = _mm512_add_epi32(_mm512_unpacklo_epi32(z[2], z[3]), _mm512_unpackhi_epi32(z[2], z[3]));
        const __m512i isum = _mm512_add_epi32(_mm512_unpacklo_epi64(s01, s23), _mm512_unpackhi_epi64(s01, s23));
        /* the minimums' sums in element 4r + t: sum_j m_j (bsum_2j + bsum_2j+1) */
        const __m512i mb03 = _mm512_broadcast_i32x4(m03), mb47 = _mm512_broadcast_i32x4(m47);
        __m512i msum = zero;
        __m512 dyv;
        if (prep) { /* the pairs of bsums already summed and in dword t */
            const struct x4k_prep *p = prep + b;
            UNROLL
            for (int k = 0; k < 4; k++) {
                const __m512i mk = _mm512_shuffle_epi8(k < 2 ? mb03 : mb47, _mm512_load_si512((const void *)kz_mk[k]));
                msum = _mm512_dpwssd_epi32(msum, mk, _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)p->bp[k])));
            }
            dyv = _mm512_broadcast_f32x4(_mm_load_ps(p->d));
        } else { /* dword j of lane r = m_j (bsum_2j + bsum_2j+1), j < 4 and (m47) j >= 4, summed as isum */
            const __m512i mk0 = _mm512_shuffle_epi8(mb03, _mm512_load_si512((const void *)kz_m));
            const __m512i mk1 = _mm512_shuffle_epi8(mb47, _mm512_load_si512((const void *)kz_m));
            __m512i zm[4];
            UNROLL
            for (int t = 0; t < 4; t++) {
                zm[t] = zero;
                if (t < NT) {
                    const int16_t *bs = yb[t]->bsums;
                    zm[t] = _mm512_dpwssd_epi32(zero, mk0, _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)bs)));
                    zm[t] = _mm512_dpwssd_epi32(zm[t], mk1, _mm512_broadcast_i32x4(_mm_loadu_si128((const __m128i *)(bs + 8))));
                }
            }
            const __m512i m01 = _mm512_add_epi32(_mm512_unpacklo_epi32(zm[0], zm[1]), _mm512_unpackhi_epi32(zm[0], zm[1]));
            const __m512i m23 = _mm512_add_epi32(_mm512_unpacklo_epi32(zm[2], zm[3]), _mm512_unpackhi_epi32(zm[2], zm[3]));
            msum = _mm512_add_epi32(_mm512_unpacklo_epi64(m01, m23), _mm512_unpackhi_epi64(m01, m23));
            dyv = _mm512_broadcast_f32x4(_mm_loadu_ps(dy));
        }
        /* kfma's steps per element */
        const __m128 d4 = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(tile + repack_x4k_d(0))));
        const __m128 dm4 = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(tile + repack_x4k_dmin(0))));
        const __m512 dx = _mm512_permutexvar_ps(dlanes, _mm512_castps128_ps512(d4));
        const __m512 dmx = _mm512_permutexvar_ps(dlanes, _mm512_castps128_ps512(dm4));
        facc = _mm512_add_ps(facc, _mm512_mul_ps(_mm512_mul_ps(dx, dyv), _mm512_cvtepi32_ps(isum)));
        facc = _mm512_sub_ps(facc, _mm512_mul_ps(_mm512_mul_ps(dmx, dyv), _mm512_cvtepi32_ps(msum)));
    }
    store16_tokens(NT, facc, true, y, ys);
}
#define GKX_TOKENS(NT, n, w, a, a_row, y, ys) gemmK_x4z(NT, n, w, a, a_row, NULL, y, ys)
/* one token too: `bench-kernels -t 1 -c -b -r 15 -n N -s 8192x2048 -T q4_kx4
 * -v avx512 -A` (the build before) on a Zen 5, hot: 1 token 1.28-1.43x
 * faster than gemmK_x4's kdot rows, 2-4 tokens 1.65-1.73x; four tokens
 * now cost 1.33x one (Q4_0 x4: 2.0x) */
#define GKX_TOKENS_MIN 1

#define GKX_VEC __m512i
#define GKX_ZERO() _mm512_setzero_si512()
#define GKX_REDUCE4(v0, v1, v2, v3) reduce4_512(v0, v1, v2, v3)
#include "gemmk_x4_body.h"

/* The gemm_prep of Q4_K x4: gemmK_x4z with the tokens' prep (x4k_prep) from
 * two tokens on; one token needs none. */
static void gemm_q4_Kx4q(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, const void *prep,
                         float *y, size_t ys, int nt)
{
    (void)w_row;
    switch (nt) {
    case 1: gemmK_x4z(1, n, w, a, a_row, NULL, y, ys); break;
    case 2: gemmK_x4z(2, n, w, a, a_row, prep, y, ys); break;
    case 3: gemmK_x4z(3, n, w, a, a_row, prep, y, ys); break;
    default: gemmK_x4z(4, n, w, a, a_row, prep, y, ys); break;
    }
}

/* Q6_K x4 (repack.h): four rows per vector, one per 128-bit lane. */
#define Q6X_W 512
#include "gemm_q6kx4_body.h"

DEFINE_GEMM(gemm_q4_K, gemmK, GGML_TYPE_Q4_K)
DEFINE_GEMM(gemm_q5_K, gemmK, GGML_TYPE_Q5_K)
DEFINE_GEMM(gemm_q6_K, gemmK, GGML_TYPE_Q6_K)
DEFINE_DOT(vec_dot_q4_K, gemmK, GGML_TYPE_Q4_K)
DEFINE_DOT(vec_dot_q5_K, gemmK, GGML_TYPE_Q5_K)
DEFINE_DOT(vec_dot_q6_K, gemmK, GGML_TYPE_Q6_K)

/* ------------------------- F32 / F16 / BF16 ------------------------- */

/* Sixteen elements of a float row at i as floats; the last m < 16 through
 * a masked (zeroing) load, which reads nothing past the row. */
INLINE __m512 loadf(const int type, const uint8_t *row, int64_t i, int m)
{
    const __mmask16 k = m == 16 ? (__mmask16)0xFFFF : (__mmask16)((1u << m) - 1);
    if (type == GGML_TYPE_F32)
        return _mm512_maskz_loadu_ps(k, (const float *)row + i);
    const __m256i h = _mm256_maskz_loadu_epi16(k, (const uint16_t *)row + i);
    if (type == GGML_TYPE_F16)
        return _mm512_cvtph_ps(h);
    return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
}

INLINE void gemmf(const int type, const int NR, const int NT, int64_t n, const uint8_t *w, size_t w_row,
                  const uint8_t *a, size_t a_row, float *y, size_t ys)
{
    __m512 acc[4][4];
    UNROLL
    for (int r = 0; r < NR; r++)
        UNROLL
        for (int t = 0; t < NT; t++)
            acc[r][t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 16) {
        const int m = n - i < 16 ? (int)(n - i) : 16;
        __m512 wv[4];
        UNROLL
        for (int r = 0; r < NR; r++)
            wv[r] = loadf(type, w + (size_t)r * w_row, i, m);
        UNROLL
        for (int t = 0; t < NT; t++) {
            const __m512 av = loadf(type, a + (size_t)t * a_row, i, m);
            UNROLL
            for (int r = 0; r < NR; r++)
                acc[r][t] = _mm512_fmadd_ps(wv[r], av, acc[r][t]);
        }
    }
    UNROLL
    for (int r = 0; r < NR; r++)
        UNROLL
        for (int t = 0; t < NT; t++)
            y[(size_t)t * ys + (size_t)r] = _mm512_reduce_add_ps(acc[r][t]);
}

DEFINE_GEMM(gemm_f32, gemmf, GGML_TYPE_F32)
DEFINE_GEMM(gemm_f16, gemmf, GGML_TYPE_F16)
DEFINE_GEMM(gemm_bf16, gemmf, GGML_TYPE_BF16)
DEFINE_DOT(vec_dot_f32, gemmf, GGML_TYPE_F32)
DEFINE_DOT(vec_dot_f16, gemmf, GGML_TYPE_F16)
DEFINE_DOT(vec_dot_bf16, gemmf, GGML_TYPE_BF16)

/* BF16 with vdpbf16ps: 32 elements (16 pairs) per step, masked tail. */
#define BF16_FN static inline __attribute__((always_inline, target("avx512bf16")))

BF16_FN __m512bh loadbh(const uint8_t *row, int64_t i, int m)
{
    const __mmask32 k = m == 32 ? (__mmask32)0xFFFFFFFFu : (__mmask32)((1u << m) - 1);
    return (__m512bh)_mm512_maskz_loadu_epi16(k, (const uint16_t *)row + i);
}

BF16_FN void gemmbf(const int NR, const int NT, int64_t n, const uint8_t *w, size_t w_row, const uint8_t *a,
                    size_t a_row, float *y, size_t ys)
{
    __m512 acc[4][4];
    UNROLL
    for (int r = 0; r < NR; r++)
        UNROLL
        for (int t = 0; t < NT; t++)
            acc[r][t] = _mm512_setzero_ps();
    for (int64_t i = 0; i < n; i += 32) {
        const int m = n - i < 32 ? (int)(n - i) : 32;
        __m512bh wv[4];
        UNROLL
        for (int r = 0; r < NR; r++)
            wv[r] = loadbh(w + (size_t)r * w_row, i, m);
        UNROLL
        for (int t = 0; t < NT; t++) {
            const __m512bh av = loadbh(a + (size_t)t * a_row, i, m);
            UNROLL
            for (int r = 0; r < NR; r++)
                acc[r][t] = _mm512_dpbf16_ps(acc[r][t], wv[r], av);
        }
    }
    UNROLL
    for (int r = 0; r < NR; r++)
        UNROLL
        for (int t = 0; t < NT; t++)
            y[(size_t)t * ys + (size_t)r] = _mm512_reduce_add_ps(acc[r][t]);
}

__attribute__((target("avx512bf16"))) static void gemm_bf16_dp(int64_t n, const void *w, size_t w_row,
                                                                const void *a, size_t a_row, float *y, size_t ys,
                                                                int nt)
{
    switch (nt) {
    case 1: gemmbf(4, 1, n, w, w_row, a, a_row, y, ys); break;
    case 2: gemmbf(4, 2, n, w, w_row, a, a_row, y, ys); break;
    case 3: gemmbf(4, 3, n, w, w_row, a, a_row, y, ys); break;
    default: gemmbf(4, 4, n, w, w_row, a, a_row, y, ys); break;
    }
}

__attribute__((target("avx512bf16"))) static float vec_dot_bf16_dp(int64_t n, const void *w, const void *a)
{
    float y;
    gemmbf(1, 1, n, w, 0, a, 0, &y, 1);
    return y;
}

/* ------------------------------ the table ------------------------------ */

void kernels_fill_avx512(struct kernel_table *t)
{
    kernels_fill_avx2(t);
#define SET(T, dot, gemm_)                                                                                    \
    do {                                                                                                      \
        t->types[GGML_TYPE_##T].vec_dot = (dot);                                                              \
        t->types[GGML_TYPE_##T].gemm = (gemm_);                                                               \
    } while (0)
    SET(F32, vec_dot_f32, gemm_f32);
    SET(F16, vec_dot_f16, gemm_f16);
    SET(BF16, vec_dot_bf16, gemm_bf16);
    if (cpu_features_get()->avx512bf16)
        SET(BF16, vec_dot_bf16_dp, gemm_bf16_dp);
    SET(Q4_0, vec_dot_q4_0, gemm_q4_0);
    SET(Q5_0, vec_dot_q5_0, gemm_q5_0);
    SET(Q8_0, vec_dot_q8_0, gemm_q8_0);
    SET(Q4_K, vec_dot_q4_K, gemm_q4_K);
    SET(Q5_K, vec_dot_q5_K, gemm_q5_K);
    SET(Q6_K, vec_dot_q6_K, gemm_q6_K);
    SET(IQ4_NL, vec_dot_iq4_nl, gemm_iq4_nl);
#undef SET
    lowbit_fill(t);
    /* the x4 layouts: gemm tiles of their own, vec_dot of the base type
     * for the rows after the last group (repack.h) */
    kernels_use_x4_prep(t, GGML_TYPE_Q4_0, gemm_q4_0x4, prep_q4_0x4, gemm_q4_0x4q);
    kernels_use_x4_prep(t, GGML_TYPE_Q5_0, gemm_q5_0x4, prep_q5_0x4, gemm_q5_0x4q);
    kernels_use_x4_prep(t, GGML_TYPE_Q4_K, gemm_q4_Kx4, prep_q4_Kx4, gemm_q4_Kx4q);
    kernels_use_x4(t, GGML_TYPE_Q6_K, gemm_q6_Kx4);
    kernels_use_x4(t, GGML_TYPE_Q8_0, gemm_q8_0x4); /* the SDOT order (Q8_0 x4 of repack.h) */
    /* IQ4_NL x4: Q4_0 x4's tiles with the nibbles through the codebook (+ 128,
     * K = 128).  avx2's Q3_K x4 (inherited above) is not used here: on a Zen 5
     * (bench-kernels -t 1 -c -b -r 15 -n 1|4 -s 8192x2048) its tiles are level
     * with this variant's on the weights as stored for one token (55.9 / 55.0
     * GMAC/s), 1.15x for four, but this file has no 16-lane gemm_many for Q3_K
     * x4's re-coded planes, so prefill would drop to avx2's 8-lane one */
    kernels_use_x4_prep(t, GGML_TYPE_IQ4_NL, gemm_iq4_nlx4, prep_iq4_nlx4, gemm_iq4_nlx4q);
    t->types[GGML_TYPE_Q3_K].repack_type = 0;
    kernels_fill_gemm_avx512(t);
    kernels_fill_ops_avx512(t);
    kernels_fill_attention_avx512(t);
}
