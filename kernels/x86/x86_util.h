/*
 * x86_util.h - the small helpers every x86 kernel file uses: inlining and
 * unrolling, unaligned 16/32-bit loads, F16 -> float, byte sums, weight
 * prefetching, a four-vector reduction and the block sizes of the quant
 * types.  Each kernel file is compiled with its
 * own variant's flags and includes this once; these need AVX2 and F16C,
 * which every x86 variant has.
 */
#ifndef INFER_X86_UTIL_H
#define INFER_X86_UTIL_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../quants.h"
#include "../repack.h"

#define INLINE static inline __attribute__((always_inline))
/* Fully unroll the short constant loops (rows, tokens, chunks), so that
 * their vector arrays live in registers. */
#define UNROLL _Pragma("GCC unroll 16")

INLINE float h2f(ggml_half h) { return _cvtsh_ss(h); }

INLINE uint16_t ld16(const void *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

INLINE uint32_t ld32(const void *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

INLINE uint64_t ld64(const void *p)
{
    uint64_t v;
    memcpy(&v, p, 8);
    return v;
}

/* Sum of the 32 unsigned bytes of v. */
INLINE int sum_u8(__m256i v)
{
    const __m256i s = _mm256_sad_epu8(v, _mm256_setzero_si256());
    const __m128i h = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    return (int)(_mm_cvtsi128_si64(h) + _mm_extract_epi64(h, 1));
}

/* Software prefetch distance of the weight streams, in rows: the tile
 * kernels touch four rows at a time, each a separate stream, and the
 * hardware prefetchers alone left decode at about half the read bandwidth
 * (contrib/bench/bench-kernels). */
#ifndef PF_ROWS
#define PF_ROWS 8
#endif

/* Into L2 (T1), not L1 (T0): the GEMV streams use each line once, and
 * prefetches into L1 evict what the kernel is working on.  infer bench -p 0
 * -n 128, 2 threads, three alternations of T0/T1 builds: default model
 * tg128 78-83 -> 93-94 (a second series: 86-95 -> 103-109), Q8_0 250M 121-128
 * -> 141-149, Q8_0 with INFER_KERNELS=avx2 115-119 -> 129, one thread
 * (default model) 45-46 -> 50-51; Q4_0 and Q4_K_M within noise, pp512
 * unchanged.  T2 measured as T1. */
#ifndef PF_HINT
#define PF_HINT _MM_HINT_T1
#endif

/* Prefetch distance in a group's stream of tiles of the x4 layouts
 * (bytes).  The x4 layout turns a tile's four row streams into one, which
 * the hardware prefetchers follow less far ahead: without software
 * prefetch the 250M Q4_0 model decodes at 146 tok/s against 270 in GGUF's
 * layout.  Measured with infer bench -p 0 -n 128, 2 threads, alternating
 * with INFER_NO_REPACK=1 (~270): 1.5 KB ahead 220-232, 4 KB 290-301, 8 KB
 * 313-317, 12 KB 302-306, 16 KB 316-331, 24 KB 294-307 tok/s. */
#ifndef X4_PF
#define X4_PF 8192
#endif

/* Ask for the lines X4_PF bytes past each of a tile's `bytes`. */
INLINE void prefetch_tile(const uint8_t *tile, size_t bytes)
{
    UNROLL
    for (size_t o = 0; o < bytes; o += 64)
        _mm_prefetch((const char *)tile + X4_PF + o, PF_HINT);
}

/* The gemm (dispatch.h) of an x4 layout whose tile CORE(NT, n, w, a,
 * a_row, y, ys) takes 1-4 tokens against a group of four rows (contiguous:
 * w_row is not needed). */
#define DEFINE_GEMM_GROUP(NAME, CORE)                                                                         \
    static void NAME(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, \
                     int nt)                                                                                  \
    {                                                                                                         \
        (void)w_row;                                                                                          \
        switch (nt) {                                                                                         \
        case 1: CORE(1, n, w, a, a_row, y, ys); break;                                                        \
        case 2: CORE(2, n, w, a, a_row, y, ys); break;                                                        \
        case 3: CORE(3, n, w, a, a_row, y, ys); break;                                                        \
        default: CORE(4, n, w, a, a_row, y, ys); break;                                                       \
        }                                                                                                     \
    }

/* Ask for the bytes of a weight block PF_ROWS rows further on. */
INLINE void prefetch_ahead(const uint8_t *blk, size_t w_row, size_t bytes)
{
    for (size_t o = 0; o < bytes; o += 64)
        _mm_prefetch((const char *)blk + PF_ROWS * w_row + o, PF_HINT);
}

/* The same for block b of a row of bs-byte blocks, once every 64 / bs blocks:
 * prefetches at most 64 bytes apart still touch every line, with a third
 * (Q4_0) to a half (Q5_0) of the prefetch instructions. */
INLINE void prefetch_block(const uint8_t *blk, int64_t b, size_t w_row, size_t bs)
{
    const int64_t every = bs >= 64 ? 1 : (int64_t)(64 / bs);
    if (b % every == 0)
        prefetch_ahead(blk, w_row, bs);
}

/* Four halves -> four floats. */
INLINE __m128 h2f4(uint16_t h0, uint16_t h1, uint16_t h2, uint16_t h3)
{
    return _mm_cvtph_ps(_mm_setr_epi16((short)h0, (short)h1, (short)h2, (short)h3, 0, 0, 0, 0));
}

/* [sum(v0), sum(v1), sum(v2), sum(v3)] of the eight int32 lanes of each. */
INLINE __m128i reduce4(__m256i v0, __m256i v1, __m256i v2, __m256i v3)
{
    const __m256i s01 = _mm256_hadd_epi32(v0, v1); /* v0 01 23, v1 01 23 | v0 45 67, v1 45 67 */
    const __m256i s23 = _mm256_hadd_epi32(v2, v3);
    const __m256i s = _mm256_hadd_epi32(s01, s23); /* v0..v3 0123 | v0..v3 4567 */
    return _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
}

/* The first NR lanes of acc (one token; lane r: row r) to y[0..NR). */
INLINE void store_rows(float *y, __m128 acc, const int NR)
{
    float out[4];
    _mm_storeu_ps(out, acc);
    UNROLL
    for (int r = 0; r < NR; r++)
        y[r] = out[r];
}

/* acc[r] lane t (row r, token t) to y[t * ys + r], for r < NR and t < NT. */
INLINE void store_rows_tokens(float *y, size_t ys, const __m128 *acc, const int NR, const int NT)
{
    UNROLL
    for (int r = 0; r < NR; r++) {
        float out[4];
        _mm_storeu_ps(out, acc[r]);
        UNROLL
        for (int t = 0; t < NT; t++)
            y[(size_t)t * ys + (size_t)r] = out[t];
    }
}

/*
 * The prep (dispatch.h's act_prep) of the x4 tiles for 2-4 tokens (gemm32_x4q
 * of avx512, and of avx2/avxvnni in gemv_x4_avx2.h), made once per matmul, per
 * block of 32: the tokens' quants arranged so that each dword lane of a
 * vpdpbusd against one weight row (a 128-bit lane: elements 0-15 low
 * nibbles, 16-31 high) sums for one token, with no reduction after it.
 * q[h][s] holds in dword j the bytes 4j .. 4j + 3 of half h (elements 16h
 * + 4j ..) of token (j + s) % 4, so that the products with row r's
 * unpermuted quants leave (token (j + s) % 4, elements 4j ..) in dword j,
 * and rotating product s by s dwords lines every token up in its own
 * dword: summed over s = 0-3, dword t is token t's whole block.  For two
 * tokens, q[h][s] (s < 2) holds token (j + s) % 2's bytes, and two pair
 * swaps sum dwords t, t + 2 (both token t).  corr: minus K (the weights'
 * offset) times each token's quant sum in dword t (two tokens: dwords 0, 1
 * only, as both dwords of a token are summed); d: the tokens' scales in
 * dword t.  Tokens past nt are zeros.
 */
struct x4r_prep {
    int32_t corr[4];
    float d[4];
    int8_t q[2][4][16];
};

INLINE void x4r_act_prep(const int K, int64_t n, const void *a, size_t a_row, int nt, void *prep)
{
    const __m256i x80 = _mm256_set1_epi8((char)0x80);
    const int slots = nt == 2 ? 2 : 4;
    for (int64_t b = 0; b < n / 32; b++) {
        struct x4r_prep q;
        memset(&q, 0, sizeof(q));
        const block_q8_0 *ab[4];
        for (int t = 0; t < nt; t++) {
            ab[t] = (const block_q8_0 *)((const char *)a + (size_t)t * a_row) + b;
            /* the bytes + 128 are unsigned: their sum less 32 * 128 */
            q.corr[t] = -K * (sum_u8(_mm256_xor_si256(_mm256_loadu_si256((const __m256i *)ab[t]->qs), x80)) - 4096);
            q.d[t] = h2f(ld16(&ab[t]->d));
        }
        for (int h = 0; h < 2; h++)
            for (int s = 0; s < slots; s++)
                for (int j = 0; j < 4; j++) {
                    const int t = (j + s) % slots;
                    if (t < nt)
                        memcpy(&q.q[h][s][4 * j], ab[t]->qs + 16 * h + 4 * j, 4);
                }
        memcpy((struct x4r_prep *)prep + b, &q, sizeof(q));
    }
}

/* Bytes of a block of the 32-element types (Q4_0, Q5_0, Q8_0, IQ4_NL) and of the
 * super-blocks of 256 (Q4_K, Q5_K, Q6_K; Q2_K, Q3_K, IQ4_XS). */
INLINE size_t bbytes32(const int type)
{
    return type == GGML_TYPE_Q4_0   ? sizeof(block_q4_0)
           : type == GGML_TYPE_Q5_0 ? sizeof(block_q5_0)
           : type == GGML_TYPE_IQ4_NL ? sizeof(block_iq4_nl)
                                    : sizeof(block_q8_0);
}

INLINE size_t kbytes(const int type)
{
    return type == GGML_TYPE_Q4_K   ? sizeof(block_q4_K)
           : type == GGML_TYPE_Q5_K ? sizeof(block_q5_K)
           : type == GGML_TYPE_Q2_K ? sizeof(block_q2_K)
           : type == GGML_TYPE_Q3_K ? sizeof(block_q3_K)
           : type == GGML_TYPE_IQ4_XS ? sizeof(block_iq4_xs)
                                    : sizeof(block_q6_K);
}

/* Super-block b of NT token rows (Q8_K, a_row bytes apart): yb[t] and its
 * scale dy[t] (0 past NT). */
INLINE void k_tokens(const int NT, const uint8_t *a, size_t a_row, int64_t b, const block_q8_K *yb[4], float dy[4])
{
    UNROLL
    for (int t = 0; t < 4; t++) {
        dy[t] = 0.0f;
        if (t < NT) {
            yb[t] = (const block_q8_K *)(a + (size_t)t * a_row) + b;
            dy[t] = yb[t]->d;
        }
    }
}

/* The int32 lanes of a 1-4 token x4 tile with rows in 64-bit lanes
 * (gemm6_x4t, gemm3_x4t): acc[t] starts at -(sum_g sc_g bsum_g) << shift
 * for t < NT (the offset of u times the rows' scales against the token's
 * bsums), 0 after; Z[i]: the four rows' int16 scales of bsums 4i..4i+3. */
INLINE void x4t_acc_start(const int NT, const __m256i Z[4], const block_q8_K *const yb[4], const int shift,
                          __m256i acc[4])
{
    UNROLL
    for (int t = 0; t < 4; t++) {
        acc[t] = _mm256_setzero_si256();
        if (t < NT) {
            __m256i c = _mm256_madd_epi16(Z[0], _mm256_set1_epi64x((long long)ld64(yb[t]->bsums)));
            UNROLL
            for (int i = 1; i < 4; i++)
                c = _mm256_add_epi32(c, _mm256_madd_epi16(Z[i], _mm256_set1_epi64x((long long)ld64(yb[t]->bsums + 4 * i))));
            acc[t] = _mm256_sub_epi32(acc[t], _mm256_slli_epi32(c, shift));
        }
    }
}

/* The outputs of a 1-4 token x4 tile (gemmK_x4t, gemm3_x4t) whose float
 * lanes are accx [r0t0 r1t0 r0t1 r1t1 | r2t0 r3t0 r2t1 r3t1] and accy the
 * same for tokens 2 and 3. */
INLINE void x4t_store(const int NT, __m256 accx, __m256 accy, float *y, size_t ys)
{
    float ox[8], oy[8];
    _mm256_storeu_ps(ox, accx);
    _mm256_storeu_ps(oy, accy);
    UNROLL
    for (int t = 0; t < NT; t++) {
        const float *o = t < 2 ? ox : oy;
        const int u = t % 2;
        y[(size_t)t * ys + 0] = o[2 * u];
        y[(size_t)t * ys + 1] = o[2 * u + 1];
        y[(size_t)t * ys + 2] = o[4 + 2 * u];
        y[(size_t)t * ys + 3] = o[4 + 2 * u + 1];
    }
}

/* K-quant block of NR rows: acc + (d_x d_y) isum [- (dmin_x d_y) summ], in
 * the reference's order (shared by the avx2, avxvnni and avx512 tiles). */
INLINE __m128 kfma(const int type, __m128 acc, __m128 dx, __m128 dminx, __m128 dy, __m128i isum, __m128i summ)
{
    acc = _mm_add_ps(acc, _mm_mul_ps(_mm_mul_ps(dx, dy), _mm_cvtepi32_ps(isum)));
    if (type != GGML_TYPE_Q6_K)
        acc = _mm_sub_ps(acc, _mm_mul_ps(_mm_mul_ps(dminx, dy), _mm_cvtepi32_ps(summ)));
    return acc;
}

/* Q4_K x4 (repack.h): the 12 scale bytes of a tile's four rows unpacked at
 * once (k_unpack_scales' 6-bit fields, word by word on four lanes), as
 * bytes: byte 4r + j of s03 is row r's sc_j, of s47 its sc_(4 + j), of m03
 * and m47 its minimums alike. */
INLINE void x4k_fields(const uint8_t *tile, __m128i *s03, __m128i *s47, __m128i *m03, __m128i *m47)
{
    const __m128i w0 = _mm_loadu_si128((const __m128i *)(tile + repack_x4k_sw(0, 0)));
    const __m128i w1 = _mm_loadu_si128((const __m128i *)(tile + repack_x4k_sw(0, 1)));
    const __m128i w2 = _mm_loadu_si128((const __m128i *)(tile + repack_x4k_sw(0, 2)));
    const __m128i km1 = _mm_set1_epi32(0x3f3f3f3f), km2 = _mm_set1_epi32(0x0f0f0f0f), km3 = _mm_set1_epi32(0x03030303);
    *s03 = _mm_and_si128(w0, km1);
    *m03 = _mm_and_si128(w1, km1);
    *s47 = _mm_or_si128(_mm_and_si128(w2, km2), _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(w0, 6), km3), 4));
    *m47 = _mm_or_si128(_mm_and_si128(_mm_srli_epi32(w2, 4), km2),
                        _mm_slli_epi32(_mm_and_si128(_mm_srli_epi32(w1, 6), km3), 4));
}

/* x4k_fields' bytes widened: s16[r] = row r's [sc0..7, m0..7] as int16; d
 * and dmin of the four rows as floats. */
INLINE void x4k_scales(const uint8_t *tile, __m256i s16[4], __m128 *d, __m128 *dmin)
{
    __m128i s03, s47, m03, m47;
    x4k_fields(tile, &s03, &s47, &m03, &m47);
    /* rows 0 | 1, 2 | 3: [sc0..7 of row 2p, of row 2p + 1], the mins alike */
    const __m128i sp0 = _mm_unpacklo_epi32(s03, s47), sp1 = _mm_unpackhi_epi32(s03, s47);
    const __m128i mp0 = _mm_unpacklo_epi32(m03, m47), mp1 = _mm_unpackhi_epi32(m03, m47);
    s16[0] = _mm256_cvtepu8_epi16(_mm_unpacklo_epi64(sp0, mp0));
    s16[1] = _mm256_cvtepu8_epi16(_mm_unpackhi_epi64(sp0, mp0));
    s16[2] = _mm256_cvtepu8_epi16(_mm_unpacklo_epi64(sp1, mp1));
    s16[3] = _mm256_cvtepu8_epi16(_mm_unpackhi_epi64(sp1, mp1));
    *d = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(tile + repack_x4k_d(0))));
    *dmin = _mm_cvtph_ps(_mm_loadl_epi64((const __m128i *)(tile + repack_x4k_dmin(0))));
}

#endif
