/*
 * quants_neon_body.h - the quantized dot products of the aarch64 variants,
 * written once and compiled once per variant (see neon.h).
 *
 * The including file defines, before including this one:
 *   NEON_FN(name)          the variant's name for a kernel (name##_neon, ...)
 *   DOT_SMALL(acc, a, b)   acc (int32x4) + the 16 products a[i]*b[i] of two
 *                          int8x16, spread over the 4 lanes in any way; a's
 *                          values must lie in -64..64 (weights of 6 bits or
 *                          fewer), b's are any int8
 *   DOT_WIDE(acc, a, b)    the same for any int8 a and b
 *   GEMM_SDOT              1 when the variant has SDOT (gemm_neon_body.h)
 * and this file defines the kernels plus NEON_FN(fill_int_dots), which puts
 * them into a table.
 *
 * Every type has one tile function, inlined twice: as vec_dot (one weight
 * row, one activation row) and as gemm (GEMM_ROWS rows by up to GEMM_TOKS
 * activation rows, dispatch.h).  A tile walks the blocks in order and, per
 * block, unpacks each weight row once and dots it with every activation
 * row; each (row, token) sum sees the same operations in the same order in
 * both, so gemm gives exactly the bits of vec_dot.
 *
 * Each block's integer sum is exact whatever the order of the products, and
 * the float work per block is the reference's (quants.c), in its order, with
 * no contraction (-std=c11 implies -ffp-contract=off): every dot returns the
 * reference's bits.  Layouts of the blocks: quants.h.
 */
#include <arm_neon.h>
#include <string.h>

#include "../dispatch.h"
#include "../quants.h"

#ifndef INFER_ARM_NEON_HELPERS
#define INFER_ARM_NEON_HELPERS

/* fp16 -> fp32 with the scalar FCVT of ARMv8-A: exact, as fp16_to_fp32. */
static inline float neon_h2f(ggml_half h)
{
    __fp16 v;
    memcpy(&v, &h, sizeof(v));
    return (float)v;
}

/* Bytes i of the 16-byte mask vector: 1 << (i % 8), to test bit i % 8 of a
 * byte broadcast over 8 lanes (Q5_0 / Q5_1 fifth bits). */
static const uint8_t neon_bit_sel[16] = {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128};

/* 0xFF in lane i where bit i of qh (lanes 0..15) resp. bit 16 + i (the
 * second vector) is set. */
static inline void neon_q5_bits(const uint8_t qh_bytes[4], uint8x16_t *lo, uint8x16_t *hi)
{
    uint32_t qh;
    memcpy(&qh, qh_bytes, sizeof(qh)); /* little-endian, as the format */
    const uint8x8_t b = vcreate_u8((uint64_t)qh);
    const uint8x16_t sel = vld1q_u8(neon_bit_sel);
    *lo = vtstq_u8(vcombine_u8(vdup_lane_u8(b, 0), vdup_lane_u8(b, 1)), sel);
    *hi = vtstq_u8(vcombine_u8(vdup_lane_u8(b, 2), vdup_lane_u8(b, 3)), sel);
}

/* The eight 6-bit scales and mins of a Q4_K/Q5_K block (k_scale_min in
 * quants.h), four at a time on 32-bit words: bytes 0-3 hold the low six bits
 * of scales 0-3, bytes 4-7 those of mins 0-3, and bytes 8-11 the low four
 * bits of scales (low nibble) and mins (high nibble) 4-7, whose top two bits
 * are the top bits of bytes 0-3 (scales) and 4-7 (mins). */
static inline void neon_k_scales(const uint8_t scales[12], uint8_t sc[8], uint8_t m[8])
{
    uint32_t w[3];
    memcpy(w, scales, sizeof(w));
    const uint32_t sc03 = w[0] & 0x3f3f3f3fu, m03 = w[1] & 0x3f3f3f3fu;
    const uint32_t sc47 = (w[2] & 0x0f0f0f0fu) | ((w[0] >> 6) & 0x03030303u) << 4;
    const uint32_t m47 = ((w[2] >> 4) & 0x0f0f0f0fu) | ((w[1] >> 6) & 0x03030303u) << 4;
    memcpy(sc, &sc03, 4);
    memcpy(sc + 4, &sc47, 4);
    memcpy(m, &m03, 4);
    memcpy(m + 4, &m47, 4);
}

/* sum_j m[j] * (sum of the 32 activations of sub-block j), from bsums;
 * mm holds the eight mins widened to int16. */
static inline int32_t neon_k_summ(const block_q8_K *y, int16x8_t mm)
{
    const int16x8_t s = vpaddq_s16(vld1q_s16(y->bsums), vld1q_s16(y->bsums + 8));
    return vaddvq_s32(vmlal_high_s16(vmull_s16(vget_low_s16(s), vget_low_s16(mm)), s, mm));
}

/* 16 x 16 -> 32-bit products of a Q6_K block's scales and a Q8_K block's
 * bsums, summed: sum_g sc[g] * bsums[g]; sc0/sc1 are the scales widened. */
static inline int32_t neon_q6_corr(const block_q8_K *y, int16x8_t sc0, int16x8_t sc1)
{
    const int16x8_t bs0 = vld1q_s16(y->bsums), bs1 = vld1q_s16(y->bsums + 8);
    int32x4_t c = vmull_s16(vget_low_s16(sc0), vget_low_s16(bs0));
    c = vmlal_high_s16(c, sc0, bs0);
    c = vmlal_s16(c, vget_low_s16(sc1), vget_low_s16(bs1));
    c = vmlal_high_s16(c, sc1, bs1);
    return vaddvq_s32(c);
}

#define NEON_INLINE static inline __attribute__((always_inline))

/* Software prefetch of the weight block NEON_PF_ROWS rows further on: the
 * tiles read four rows at a time, four streams the hardware prefetchers
 * follow poorly (on x86 the same prefetch took decode from about half to
 * 75-95% of the read bandwidth; on the Cortex-A72/A76 it is not measured
 * here, the kernels run under qemu). */
#ifndef NEON_PF_ROWS
#define NEON_PF_ROWS 8
#endif
NEON_INLINE void neon_prefetch_ahead(const void *blk, size_t w_row, size_t bytes)
{
    for (size_t o = 0; o < bytes; o += 64)
        __builtin_prefetch((const char *)blk + NEON_PF_ROWS * w_row + o, 0, 3);
}

/* The same for block b of a row of bs-byte blocks, once every 64 / bs
 * blocks: prefetches at most 64 bytes apart still touch every line, with a
 * third (Q4_0) to a half (Q8_0) of the instructions (a Cortex-A72 has one
 * load pipe, which PRFM shares; the x86 tiles do the same). */
NEON_INLINE void neon_prefetch_block(const void *blk, int64_t b, size_t w_row, size_t bs)
{
    const int64_t every = bs >= 64 ? 1 : (int64_t)(64 / bs);
    if (b % every == 0)
        neon_prefetch_ahead(blk, w_row, bs);
}

#endif /* INFER_ARM_NEON_HELPERS */

/* s[r * GEMM_TOKS + t] += dot(weight row r, activation row t) for r < nr,
 * t < nt; the rows are w_row / a_row bytes apart. */
#define TILE_ARGS                                                                                     \
    int64_t n, const char *w, size_t w_row, const char *a, size_t a_row, float *restrict s, const int nr, \
        const int nt

/* vec_dot and gemm from a tile; the gemm's full tiles (nt == GEMM_TOKS) get
 * constant loop bounds. */
#define NEON_VEC_DOT_GEMM(T, DOT)                                                                          \
    static float NEON_FN(DOT)(int64_t n, const void *w, const void *a)                                     \
    {                                                                                                      \
        float s[1] = {0.0f};                                                                               \
        NEON_FN(tile_##T)(n, w, 0, a, 0, s, 1, 1);                                                        \
        return s[0];                                                                                       \
    }                                                                                                      \
    static void NEON_FN(gemm_##T)(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row,     \
                                  float *y, size_t ys, int nt)                                             \
    {                                                                                                      \
        float s[GEMM_ROWS * GEMM_TOKS] = {0.0f};                                                           \
        if (nt == GEMM_TOKS)                                                                               \
            NEON_FN(tile_##T)(n, w, w_row, a, a_row, s, GEMM_ROWS, GEMM_TOKS);                             \
        else                                                                                               \
            NEON_FN(tile_##T)(n, w, w_row, a, a_row, s, GEMM_ROWS, nt);                                    \
        for (int t = 0; t < nt; t++)                                                                       \
            for (int r = 0; r < GEMM_ROWS; r++)                                                            \
                y[(size_t)t * ys + (size_t)r] = s[r * GEMM_TOKS + t];                                      \
    }

/* ============================ Q4_0 / Q4_1 ============================ */

NEON_INLINE void NEON_FN(tile_q4_0)(TILE_ARGS)
{
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    const int8x16_t s8 = vdupq_n_s8(8);
    for (int64_t b = 0; b < n / QK8_0; b++) {
        for (int r = 0; r < nr; r++) {
            const block_q4_0 *x = (const block_q4_0 *)(w + r * w_row) + b;
            neon_prefetch_block(x, b, w_row, sizeof(*x));
            const uint8x16_t q = vld1q_u8(x->qs);
            const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, m4)), s8);
            const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), s8);
            const float dx = neon_h2f(x->d);
            for (int t = 0; t < nt; t++) {
                const block_q8_0 *y = (const block_q8_0 *)(a + t * a_row) + b;
                int32x4_t acc = DOT_SMALL(vdupq_n_s32(0), lo, vld1q_s8(y->qs));
                acc = DOT_SMALL(acc, hi, vld1q_s8(y->qs + 16));
                s[r * GEMM_TOKS + t] += (float)vaddvq_s32(acc) * dx * neon_h2f(y->d);
            }
        }
    }
}
NEON_VEC_DOT_GEMM(q4_0, vec_dot_q4_0_q8_0)

NEON_INLINE void NEON_FN(tile_q4_1)(TILE_ARGS)
{
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    for (int64_t b = 0; b < n / QK8_1; b++) {
        for (int r = 0; r < nr; r++) {
            const block_q4_1 *x = (const block_q4_1 *)(w + r * w_row) + b;
            neon_prefetch_block(x, b, w_row, sizeof(*x));
            const uint8x16_t q = vld1q_u8(x->qs);
            const int8x16_t lo = vreinterpretq_s8_u8(vandq_u8(q, m4));
            const int8x16_t hi = vreinterpretq_s8_u8(vshrq_n_u8(q, 4));
            const float dx = neon_h2f(x->d), mx = neon_h2f(x->m);
            for (int t = 0; t < nt; t++) {
                const block_q8_1 *y = (const block_q8_1 *)(a + t * a_row) + b;
                int32x4_t acc = DOT_SMALL(vdupq_n_s32(0), lo, vld1q_s8(y->qs));
                acc = DOT_SMALL(acc, hi, vld1q_s8(y->qs + 16));
                s[r * GEMM_TOKS + t] += (dx * neon_h2f(y->d)) * (float)vaddvq_s32(acc) + mx * neon_h2f(y->s);
            }
        }
    }
}
NEON_VEC_DOT_GEMM(q4_1, vec_dot_q4_1_q8_1)

/* ============================ Q5_0 / Q5_1 ============================ */

/* q - 16 = nibble - (fifth bit clear ? 16 : 0) */
NEON_INLINE void NEON_FN(tile_q5_0)(TILE_ARGS)
{
    const uint8x16_t m4 = vdupq_n_u8(0x0F), v16 = vdupq_n_u8(16);
    for (int64_t b = 0; b < n / QK8_0; b++) {
        for (int r = 0; r < nr; r++) {
            const block_q5_0 *x = (const block_q5_0 *)(w + r * w_row) + b;
            neon_prefetch_block(x, b, w_row, sizeof(*x));
            uint8x16_t set_lo, set_hi;
            neon_q5_bits(x->qh, &set_lo, &set_hi);
            const uint8x16_t q = vld1q_u8(x->qs);
            const int8x16_t lo = vreinterpretq_s8_u8(vsubq_u8(vandq_u8(q, m4), vbicq_u8(v16, set_lo)));
            const int8x16_t hi = vreinterpretq_s8_u8(vsubq_u8(vshrq_n_u8(q, 4), vbicq_u8(v16, set_hi)));
            const float dx = neon_h2f(x->d);
            for (int t = 0; t < nt; t++) {
                const block_q8_0 *y = (const block_q8_0 *)(a + t * a_row) + b;
                int32x4_t acc = DOT_SMALL(vdupq_n_s32(0), lo, vld1q_s8(y->qs));
                acc = DOT_SMALL(acc, hi, vld1q_s8(y->qs + 16));
                s[r * GEMM_TOKS + t] += (dx * neon_h2f(y->d)) * (float)vaddvq_s32(acc);
            }
        }
    }
}
NEON_VEC_DOT_GEMM(q5_0, vec_dot_q5_0_q8_0)

NEON_INLINE void NEON_FN(tile_q5_1)(TILE_ARGS)
{
    const uint8x16_t m4 = vdupq_n_u8(0x0F), v16 = vdupq_n_u8(16);
    for (int64_t b = 0; b < n / QK8_1; b++) {
        for (int r = 0; r < nr; r++) {
            const block_q5_1 *x = (const block_q5_1 *)(w + r * w_row) + b;
            neon_prefetch_block(x, b, w_row, sizeof(*x));
            uint8x16_t set_lo, set_hi;
            neon_q5_bits(x->qh, &set_lo, &set_hi);
            const uint8x16_t q = vld1q_u8(x->qs);
            const int8x16_t lo = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q, m4), vandq_u8(v16, set_lo)));
            const int8x16_t hi = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(q, 4), vandq_u8(v16, set_hi)));
            const float dx = neon_h2f(x->d), mx = neon_h2f(x->m);
            for (int t = 0; t < nt; t++) {
                const block_q8_1 *y = (const block_q8_1 *)(a + t * a_row) + b;
                int32x4_t acc = DOT_SMALL(vdupq_n_s32(0), lo, vld1q_s8(y->qs));
                acc = DOT_SMALL(acc, hi, vld1q_s8(y->qs + 16));
                s[r * GEMM_TOKS + t] += (dx * neon_h2f(y->d)) * (float)vaddvq_s32(acc) + mx * neon_h2f(y->s);
            }
        }
    }
}
NEON_VEC_DOT_GEMM(q5_1, vec_dot_q5_1_q8_1)

/* ================================ Q8_0 ================================ */

NEON_INLINE void NEON_FN(tile_q8_0)(TILE_ARGS)
{
    for (int64_t b = 0; b < n / QK8_0; b++) {
        for (int r = 0; r < nr; r++) {
            const block_q8_0 *x = (const block_q8_0 *)(w + r * w_row) + b;
            neon_prefetch_block(x, b, w_row, sizeof(*x));
            const int8x16_t q0 = vld1q_s8(x->qs), q1 = vld1q_s8(x->qs + 16);
            const float dx = neon_h2f(x->d);
            for (int t = 0; t < nt; t++) {
                const block_q8_0 *y = (const block_q8_0 *)(a + t * a_row) + b;
                int32x4_t acc = DOT_WIDE(vdupq_n_s32(0), q0, vld1q_s8(y->qs));
                acc = DOT_WIDE(acc, q1, vld1q_s8(y->qs + 16));
                s[r * GEMM_TOKS + t] += (float)vaddvq_s32(acc) * (dx * neon_h2f(y->d));
            }
        }
    }
}
NEON_VEC_DOT_GEMM(q8_0, vec_dot_q8_0_q8_0)

/* =============================== IQ4_NL =============================== */

/* The 32 codebook values of an IQ4_NL block (nibbles as Q4_0's), signed;
 * they span -127..113, so the dots take DOT_WIDE. */
NEON_INLINE void NEON_FN(iq4nl_unpack)(const block_iq4_nl *x, int8x16_t *lo, int8x16_t *hi)
{
    const int8x16_t kv = vld1q_s8(kvalues_iq4nl);
    const uint8x16_t q = vld1q_u8(x->qs);
    *lo = vqtbl1q_s8(kv, vandq_u8(q, vdupq_n_u8(0x0F)));
    *hi = vqtbl1q_s8(kv, vshrq_n_u8(q, 4));
}

NEON_INLINE void NEON_FN(tile_iq4_nl)(TILE_ARGS)
{
    for (int64_t b = 0; b < n / QK4_NL; b++) {
        for (int r = 0; r < nr; r++) {
            const block_iq4_nl *x = (const block_iq4_nl *)(w + r * w_row) + b;
            neon_prefetch_block(x, b, w_row, sizeof(*x));
            int8x16_t lo, hi;
            NEON_FN(iq4nl_unpack)(x, &lo, &hi);
            const float dx = neon_h2f(x->d);
            for (int t = 0; t < nt; t++) {
                const block_q8_0 *y = (const block_q8_0 *)(a + t * a_row) + b;
                int32x4_t acc = DOT_WIDE(vdupq_n_s32(0), lo, vld1q_s8(y->qs));
                acc = DOT_WIDE(acc, hi, vld1q_s8(y->qs + 16));
                s[r * GEMM_TOKS + t] += (dx * neon_h2f(y->d)) * (float)vaddvq_s32(acc);
            }
        }
    }
}
NEON_VEC_DOT_GEMM(iq4_nl, vec_dot_iq4_nl_q8_0)

/* ================ one token, four rows: Q4_0 / Q5_0 / Q8_0 ================ */

/*
 * Decode's GEMV: the four rows' block sums are reduced together by a tree
 * of pairwise adds (exact, as vaddvq per row is) and the float steps run in
 * the four lanes of one vector (lane r: row r), each the tile's operations
 * in the tile's order, so the bits are the tile's: one reduction tree and
 * one set of float ops per block instead of four.
 */
/* Block x of a Q4_0 / Q5_0 / Q8_0 row as signed bytes, elements 0-15 and
 * 16-31 (as the tiles unpack it). */
NEON_INLINE void NEON_FN(row32)(const int type, const char *x, int8x16_t *lo, int8x16_t *hi)
{
    if (type == GGML_TYPE_Q8_0) {
        *lo = vld1q_s8(((const block_q8_0 *)x)->qs);
        *hi = vld1q_s8(((const block_q8_0 *)x)->qs + 16);
        return;
    }
    if (type == GGML_TYPE_IQ4_NL) {
        NEON_FN(iq4nl_unpack)((const block_iq4_nl *)x, lo, hi);
        return;
    }
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    if (type == GGML_TYPE_Q4_0) {
        const uint8x16_t q = vld1q_u8(((const block_q4_0 *)x)->qs);
        *lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, m4)), vdupq_n_s8(8));
        *hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), vdupq_n_s8(8));
        return;
    }
    const block_q5_0 *xb = (const block_q5_0 *)x;
    const uint8x16_t v16 = vdupq_n_u8(16);
    uint8x16_t set_lo, set_hi;
    neon_q5_bits(xb->qh, &set_lo, &set_hi);
    const uint8x16_t q = vld1q_u8(xb->qs);
    *lo = vreinterpretq_s8_u8(vsubq_u8(vandq_u8(q, m4), vbicq_u8(v16, set_lo)));
    *hi = vreinterpretq_s8_u8(vsubq_u8(vshrq_n_u8(q, 4), vbicq_u8(v16, set_hi)));
}

/* The int32 lanes of a row block's dot with a token's (Q8_0's bytes take
 * the full int8 range: DOT_WIDE). */
NEON_INLINE int32x4_t NEON_FN(dot32)(const int type, int8x16_t lo, int8x16_t hi, int8x16_t a0, int8x16_t a1)
{
    if (type == GGML_TYPE_Q8_0 || type == GGML_TYPE_IQ4_NL)
        return DOT_WIDE(DOT_WIDE(vdupq_n_s32(0), lo, a0), hi, a1);
    return DOT_SMALL(DOT_SMALL(vdupq_n_s32(0), lo, a0), hi, a1);
}

/* Bytes of a block of the 32-element types. */
NEON_INLINE size_t NEON_FN(bytes32)(const int type)
{
    return type == GGML_TYPE_Q4_0   ? sizeof(block_q4_0)
           : type == GGML_TYPE_Q5_0 ? sizeof(block_q5_0)
           : type == GGML_TYPE_IQ4_NL ? sizeof(block_iq4_nl)
                                    : sizeof(block_q8_0);
}

NEON_INLINE void NEON_FN(gemv4_32)(const int type, int64_t n, const char *w, size_t w_row, const char *a, float *y)
{
    const size_t bs = NEON_FN(bytes32)(type);
    float32x4_t acc = vdupq_n_f32(0.0f);
    for (int64_t b = 0; b < n / QK8_0; b++) {
        const block_q8_0 *yb = (const block_q8_0 *)a + b;
        const int8x16_t a0 = vld1q_s8(yb->qs), a1 = vld1q_s8(yb->qs + 16);
        int32x4_t v[4];
        const char *xr[4];
        for (int r = 0; r < 4; r++) {
            const char *x = xr[r] = w + r * w_row + b * (int64_t)bs;
            neon_prefetch_block(x, b, w_row, bs);
            int8x16_t lo, hi;
            NEON_FN(row32)(type, x, &lo, &hi);
            v[r] = NEON_FN(dot32)(type, lo, hi, a0, a1);
        }
        /* the four rows' d (each block's first field) into one vector: FCVTL
         * is exact, as the scalar conversion */
        uint16x4_t dh = vld1_dup_u16((const uint16_t *)xr[0]);
        dh = vld1_lane_u16((const uint16_t *)xr[1], dh, 1);
        dh = vld1_lane_u16((const uint16_t *)xr[2], dh, 2);
        dh = vld1_lane_u16((const uint16_t *)xr[3], dh, 3);
        const float32x4_t f = vcvtq_f32_s32(vpaddq_s32(vpaddq_s32(v[0], v[1]), vpaddq_s32(v[2], v[3])));
        const float32x4_t dxv = vcvt_f32_f16(vreinterpret_f16_u16(dh)), dy = vdupq_n_f32(neon_h2f(yb->d));
        if (type == GGML_TYPE_Q4_0) /* tile: (sum * dx) * dy */
            acc = vaddq_f32(acc, vmulq_f32(vmulq_f32(f, dxv), dy));
        else /* tile: (dx * dy) * sum */
            acc = vaddq_f32(acc, vmulq_f32(vmulq_f32(dxv, dy), f));
    }
    vst1q_f32(y, acc);
}

/*
 * 2-4 tokens (sequences decoding together) against four rows: per row and
 * block, the tokens' block sums are reduced by one pairwise-add tree and
 * the float steps run in the lanes of one vector (lane t: token t), each
 * the tile's operations in the tile's order: the tile's bits.
 */
NEON_INLINE void NEON_FN(gemm4_32)(const int type, const int NT, int64_t n, const char *w, size_t w_row,
                                   const char *a, size_t a_row, float *y, size_t ys)
{
    const size_t bs = NEON_FN(bytes32)(type);
    float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    for (int64_t b = 0; b < n / QK8_0; b++) {
        int8x16_t a0[4], a1[4];
        float dyt[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int t = 0; t < NT; t++) {
            const block_q8_0 *yb = (const block_q8_0 *)(a + t * a_row) + b;
            a0[t] = vld1q_s8(yb->qs);
            a1[t] = vld1q_s8(yb->qs + 16);
            dyt[t] = neon_h2f(yb->d);
        }
        const float32x4_t dy = vld1q_f32(dyt);
        for (int r = 0; r < 4; r++) {
            const char *x = w + r * w_row + b * (int64_t)bs;
            neon_prefetch_block(x, b, w_row, bs);
            ggml_half d;
            memcpy(&d, x, sizeof(d));
            const float32x4_t dx = vdupq_n_f32(neon_h2f(d));
            int32x4_t v[4] = {vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0), vdupq_n_s32(0)};
            int8x16_t lo, hi;
            NEON_FN(row32)(type, x, &lo, &hi);
            for (int t = 0; t < NT; t++)
                v[t] = NEON_FN(dot32)(type, lo, hi, a0[t], a1[t]);
            const float32x4_t f = vcvtq_f32_s32(vpaddq_s32(vpaddq_s32(v[0], v[1]), vpaddq_s32(v[2], v[3])));
            if (type == GGML_TYPE_Q4_0) /* tile: (sum * dx) * dy */
                acc[r] = vaddq_f32(acc[r], vmulq_f32(vmulq_f32(f, dx), dy));
            else /* tile: (dx * dy) * sum */
                acc[r] = vaddq_f32(acc[r], vmulq_f32(vmulq_f32(dx, dy), f));
        }
    }
    for (int r = 0; r < 4; r++) {
        float out[4];
        vst1q_f32(out, acc[r]);
        for (int t = 0; t < NT; t++)
            y[(size_t)t * ys + (size_t)r] = out[t];
    }
}

/* gemm of Q4_0 / Q5_0 / Q8_0 tiles: one token through gemv4_32, 2-4 through
 * gemm4_32 */
#define NEON_GEMM_GEMV(T, TYPE)                                                                            \
    static void NEON_FN(gemm1_##T)(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row,    \
                                   float *y, size_t ys, int nt)                                            \
    {                                                                                                      \
        switch (nt) {                                                                                      \
        case 1: NEON_FN(gemv4_32)(TYPE, n, w, w_row, a, y); break;                                         \
        case 2: NEON_FN(gemm4_32)(TYPE, 2, n, w, w_row, a, a_row, y, ys); break;                           \
        case 3: NEON_FN(gemm4_32)(TYPE, 3, n, w, w_row, a, a_row, y, ys); break;                           \
        default: NEON_FN(gemm4_32)(TYPE, 4, n, w, w_row, a, a_row, y, ys); break;                          \
        }                                                                                                  \
    }
NEON_GEMM_GEMV(q4_0, GGML_TYPE_Q4_0)
NEON_GEMM_GEMV(q5_0, GGML_TYPE_Q5_0)
NEON_GEMM_GEMV(q8_0, GGML_TYPE_Q8_0)
NEON_GEMM_GEMV(iq4_nl, GGML_TYPE_IQ4_NL)

/* ============================ Q4_K / Q5_K ============================ */

/* The 256 quants of a Q4_K/Q5_K block as 16 vectors: v[4c], v[4c+1] are
 * sub-block 2c, v[4c+2], v[4c+3] sub-block 2c+1.  Per activation row,
 *   isum = sum_j sc[j] * (q . p over sub-block j)
 * is kept as a vector of partial sums (vmlaq_n by the scale), reduced once,
 * and the block adds d_x d_y isum - dmin_x d_y summ, as the reference. */
NEON_INLINE void NEON_FN(k_block)(const int8x16_t v[16], const uint8_t sc[8], int16x8_t mins, float d, float dmin,
                                  const block_q8_K *y, float *restrict s)
{
    const int32x4_t zero = vdupq_n_s32(0);
    const int8_t *p = y->qs;
    int32x4_t acc = zero;
    for (int c = 0; c < 4; c++, p += 64) {
        int32x4_t lo = DOT_SMALL(zero, v[4 * c], vld1q_s8(p));
        lo = DOT_SMALL(lo, v[4 * c + 1], vld1q_s8(p + 16));
        int32x4_t hi = DOT_SMALL(zero, v[4 * c + 2], vld1q_s8(p + 32));
        hi = DOT_SMALL(hi, v[4 * c + 3], vld1q_s8(p + 48));
        acc = vmlaq_n_s32(acc, lo, sc[2 * c]);
        acc = vmlaq_n_s32(acc, hi, sc[2 * c + 1]);
    }
    const int32_t summ = neon_k_summ(y, mins);
    *s += (d * y->d) * (float)vaddvq_s32(acc);
    *s -= (dmin * y->d) * (float)summ;
}

NEON_INLINE void NEON_FN(tile_q4_K)(TILE_ARGS)
{
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    for (int64_t b = 0; b < n / QK_K; b++) {
        for (int r = 0; r < nr; r++) {
            const block_q4_K *x = (const block_q4_K *)(w + r * w_row) + b;
            neon_prefetch_block(x, b, w_row, sizeof(*x));
            uint8_t sc[8], m[8];
            neon_k_scales(x->scales, sc, m);
            const int16x8_t mins = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(m)));
            int8x16_t v[16];
            for (int c = 0; c < 4; c++) {
                const uint8x16_t q0 = vld1q_u8(x->qs + 32 * c), q1 = vld1q_u8(x->qs + 32 * c + 16);
                v[4 * c] = vreinterpretq_s8_u8(vandq_u8(q0, m4));
                v[4 * c + 1] = vreinterpretq_s8_u8(vandq_u8(q1, m4));
                v[4 * c + 2] = vreinterpretq_s8_u8(vshrq_n_u8(q0, 4));
                v[4 * c + 3] = vreinterpretq_s8_u8(vshrq_n_u8(q1, 4));
            }
            const float d = neon_h2f(x->d), dmin = neon_h2f(x->dmin);
            for (int t = 0; t < nt; t++)
                NEON_FN(k_block)(v, sc, mins, d, dmin, (const block_q8_K *)(a + t * a_row) + b,
                                 &s[r * GEMM_TOKS + t]);
        }
    }
}
NEON_VEC_DOT_GEMM(q4_K, vec_dot_q4_K_q8_K)

/* The fifth bits of sub-blocks 2c and 2c+1 are bits 2c and 2c+1 of qh[l]. */
NEON_INLINE void NEON_FN(tile_q5_K)(TILE_ARGS)
{
    const uint8x16_t m4 = vdupq_n_u8(0x0F), one = vdupq_n_u8(1), two = vdupq_n_u8(2);
    for (int64_t b = 0; b < n / QK_K; b++) {
        for (int r = 0; r < nr; r++) {
            const block_q5_K *x = (const block_q5_K *)(w + r * w_row) + b;
            neon_prefetch_block(x, b, w_row, sizeof(*x));
            uint8_t sc[8], m[8];
            neon_k_scales(x->scales, sc, m);
            const int16x8_t mins = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(m)));
            uint8x16_t h0 = vld1q_u8(x->qh), h1 = vld1q_u8(x->qh + 16);
            int8x16_t v[16];
            for (int c = 0; c < 4; c++) {
                const uint8x16_t q0 = vld1q_u8(x->qs + 32 * c), q1 = vld1q_u8(x->qs + 32 * c + 16);
                v[4 * c] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q0, m4), vshlq_n_u8(vandq_u8(h0, one), 4)));
                v[4 * c + 1] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(q1, m4), vshlq_n_u8(vandq_u8(h1, one), 4)));
                v[4 * c + 2] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(q0, 4), vshlq_n_u8(vandq_u8(h0, two), 3)));
                v[4 * c + 3] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(q1, 4), vshlq_n_u8(vandq_u8(h1, two), 3)));
                h0 = vshrq_n_u8(h0, 2);
                h1 = vshrq_n_u8(h1, 2);
            }
            const float d = neon_h2f(x->d), dmin = neon_h2f(x->dmin);
            for (int t = 0; t < nt; t++)
                NEON_FN(k_block)(v, sc, mins, d, dmin, (const block_q8_K *)(a + t * a_row) + b,
                                 &s[r * GEMM_TOKS + t]);
        }
    }
}
NEON_VEC_DOT_GEMM(q5_K, vec_dot_q5_K_q8_K)

/* ================================ Q6_K ================================ */

/* The quants are used unsigned (0..63) and the offset of 32 comes back
 * through the activation sums:
 *     sum_g sc[g] sum_i (q_i - 32) p_i = sum_g sc[g] sum_i q_i p_i - 32 sum_g sc[g] bsums[g].
 * Element 128h + 32k + l (see vec_dot_q6_K_q8_K_ref): low nibble of
 * ql[64h + l] (k = 0) or ql[64h + 32 + l] (k = 1), high nibbles of the same
 * for k = 2, 3; top bits 2k, 2k+1 of qh[32h + l]; scale 8h + 2k + l/16.
 * v[8h + g] holds elements 128h + 16g .. +15, of scale sc[8h + g]. */
NEON_INLINE void NEON_FN(tile_q6_K)(TILE_ARGS)
{
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m3 = vdupq_n_u8(0x03), m30 = vdupq_n_u8(0x30);
    const uint8x16_t mc = vdupq_n_u8(0x0C), mc0 = vdupq_n_u8(0xC0);
    const int32x4_t zero = vdupq_n_s32(0);
    for (int64_t b = 0; b < n / QK_K; b++) {
        for (int r = 0; r < nr; r++) {
            const block_q6_K *x = (const block_q6_K *)(w + r * w_row) + b;
            neon_prefetch_block(x, b, w_row, sizeof(*x));
            int8x16_t v[16];
            for (int h = 0; h < 2; h++) {
                const uint8_t *ql = x->ql + 64 * h, *qh = x->qh + 32 * h;
                const uint8x16_t l0 = vld1q_u8(ql), l1 = vld1q_u8(ql + 16);
                const uint8x16_t l2 = vld1q_u8(ql + 32), l3 = vld1q_u8(ql + 48);
                const uint8x16_t h0 = vld1q_u8(qh), h1 = vld1q_u8(qh + 16);
                int8x16_t *o = v + 8 * h;
                o[0] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(l0, m4), vshlq_n_u8(vandq_u8(h0, m3), 4)));
                o[1] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(l1, m4), vshlq_n_u8(vandq_u8(h1, m3), 4)));
                o[2] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(l2, m4), vshlq_n_u8(vandq_u8(h0, mc), 2)));
                o[3] = vreinterpretq_s8_u8(vorrq_u8(vandq_u8(l3, m4), vshlq_n_u8(vandq_u8(h1, mc), 2)));
                o[4] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(l0, 4), vandq_u8(h0, m30)));
                o[5] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(l1, 4), vandq_u8(h1, m30)));
                o[6] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(l2, 4), vshrq_n_u8(vandq_u8(h0, mc0), 2)));
                o[7] = vreinterpretq_s8_u8(vorrq_u8(vshrq_n_u8(l3, 4), vshrq_n_u8(vandq_u8(h1, mc0), 2)));
            }
            const int8x16_t scv = vld1q_s8(x->scales);
            const int16x8_t sc0 = vmovl_s8(vget_low_s8(scv)), sc1 = vmovl_high_s8(scv);
            const int8_t *sc = x->scales;
            const float d = neon_h2f(x->d);
            for (int t = 0; t < nt; t++) {
                const block_q8_K *y = (const block_q8_K *)(a + t * a_row) + b;
                int32x4_t acc = zero;
                for (int g = 0; g < 16; g++)
                    acc = vmlaq_n_s32(acc, DOT_SMALL(zero, v[g], vld1q_s8(y->qs + 16 * g)), sc[g]);
                const int32_t isum = vaddvq_s32(acc) - 32 * neon_q6_corr(y, sc0, sc1);
                s[r * GEMM_TOKS + t] += (d * y->d) * (float)isum;
            }
        }
    }
}
NEON_VEC_DOT_GEMM(q6_K, vec_dot_q6_K_q8_K)

/*
 * Decode's Q6_K gemm: four rows, 1-4 tokens, lanes = rows at the end.  Per
 * row the quants are unpacked with shift-and-insert (6 bit = low nibble
 * from ql, two bits from qh: SLI / SRI put them side by side, an AND drops
 * what SLI shifts in above bit 5), used unsigned (0..63) as tile_q6_K; per
 * token each 16-element group's dot is multiplied by its scale by element
 * (scales widened to int32 once per row), the offset of 32 comes off as
 * 32 sc[g] bsums[g] (multiply-subtract long), and the four rows' int32
 * partial sums are reduced by one pairwise-add tree (exact).  The isum is
 * tile_q6_K's exact integer and the float step is vec_dot_q6_K's,
 * (d * dy) * isum, in the lanes: the bits of vec_dot.
 */
/* The four 16-byte vectors of sub-blocks 8h + i, 8h + 2 + i, 8h + 4 + i,
 * 8h + 6 + i (o[0..3]) from piece 2h + i of qh (hh) and pieces 4h + i (la),
 * 4h + 2 + i (lb) of ql.  Bytewise, so it serves any arrangement of the
 * bytes that hh, la and lb share (the x4 tile's transposed rows too). */
NEON_INLINE void NEON_FN(q6_bits)(uint8x16_t hh, uint8x16_t la, uint8x16_t lb, int8x16_t o[4])
{
    const uint8x16_t m6 = vdupq_n_u8(0x3F), m30 = vdupq_n_u8(0x30), h2 = vshrq_n_u8(hh, 2);
    o[0] = vreinterpretq_s8_u8(vandq_u8(vsliq_n_u8(la, hh, 4), m6)); /* bits 0-1 */
    o[1] = vreinterpretq_s8_u8(vandq_u8(vsliq_n_u8(lb, h2, 4), m6)); /* bits 2-3 */
    o[2] = vreinterpretq_s8_u8(vsriq_n_u8(vandq_u8(hh, m30), la, 4)); /* bits 4-5 */
    o[3] = vreinterpretq_s8_u8(vsriq_n_u8(h2, lb, 4));               /* bits 6-7 */
}

/* A block's quants from its ql and qh, whose 16-byte pieces lie ps bytes
 * apart (16 in GGUF's block, 64 in the x4 tile). */
NEON_INLINE void NEON_FN(q6_unpack_at)(const uint8_t *ql, const uint8_t *qh, size_t ps, int8x16_t v[16])
{
    for (int h = 0; h < 2; h++)
        for (int i = 0; i < 2; i++) {
            int8x16_t o[4];
            NEON_FN(q6_bits)(vld1q_u8(qh + (2 * h + i) * ps), vld1q_u8(ql + (4 * h + i) * ps),
                             vld1q_u8(ql + (4 * h + 2 + i) * ps), o);
            for (int k = 0; k < 4; k++)
                v[8 * h + 2 * k + i] = o[k];
        }
}

NEON_INLINE void NEON_FN(q6_unpack)(const block_q6_K *x, int8x16_t v[16])
{
    NEON_FN(q6_unpack_at)(x->ql, x->qh, 16, v);
}

NEON_INLINE void NEON_FN(q6_rows)(const int NT, int64_t n, const char *w, size_t w_row, const char *a, size_t a_row,
                                  float *y, size_t ys)
{
    float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    for (int64_t b = 0; b < n / QK_K; b++) {
        const block_q8_K *yb[4];
        for (int t = 0; t < NT; t++)
            yb[t] = (const block_q8_K *)(a + t * a_row) + b;
        int32x4_t part[4][2]; /* [t][pair]: rows 0|1, 2|3 after the first add */
        uint16_t dh[4];
        for (int r = 0; r < 4; r++) {
            const block_q6_K *x = (const block_q6_K *)(w + r * w_row) + b;
            neon_prefetch_block(x, b, w_row, sizeof(*x));
            int8x16_t v[16];
            NEON_FN(q6_unpack)(x, v);
            const int8x16_t scv = vld1q_s8(x->scales);
            const int16x8_t sc0 = vmovl_s8(vget_low_s8(scv)), sc1 = vmovl_high_s8(scv);
            const int32x4_t s32[4] = {vmovl_s16(vget_low_s16(sc0)), vmovl_high_s16(sc0), vmovl_s16(vget_low_s16(sc1)),
                                      vmovl_high_s16(sc1)};
            const int16x8_t c0 = vshlq_n_s16(sc0, 5), c1 = vshlq_n_s16(sc1, 5); /* 32 sc: |.| <= 4096 */
            memcpy(&dh[r], &x->d, sizeof(dh[r]));
            for (int t = 0; t < NT; t++) {
                const int8_t *p = yb[t]->qs;
                int32x4_t s = vmulq_laneq_s32(DOT_SMALL(vdupq_n_s32(0), v[0], vld1q_s8(p)), s32[0], 0);
#define Q6_G(g) s = vmlaq_laneq_s32(s, DOT_SMALL(vdupq_n_s32(0), v[g], vld1q_s8(p + 16 * (g))), s32[(g) / 4], (g) % 4)
                Q6_G(1);
                Q6_G(2);
                Q6_G(3);
                Q6_G(4);
                Q6_G(5);
                Q6_G(6);
                Q6_G(7);
                Q6_G(8);
                Q6_G(9);
                Q6_G(10);
                Q6_G(11);
                Q6_G(12);
                Q6_G(13);
                Q6_G(14);
                Q6_G(15);
#undef Q6_G
                const int16x8_t bs0 = vld1q_s16(yb[t]->bsums), bs1 = vld1q_s16(yb[t]->bsums + 8);
                s = vmlsl_s16(s, vget_low_s16(c0), vget_low_s16(bs0));
                s = vmlsl_high_s16(s, c0, bs0);
                s = vmlsl_s16(s, vget_low_s16(c1), vget_low_s16(bs1));
                s = vmlsl_high_s16(s, c1, bs1);
                if (r % 2 == 0)
                    part[t][r / 2] = s;
                else
                    part[t][r / 2] = vpaddq_s32(part[t][r / 2], s);
            }
        }
        const float32x4_t d = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16(dh)));
        for (int t = 0; t < NT; t++) {
            const int32x4_t isum = vpaddq_s32(part[t][0], part[t][1]); /* lane r: row r */
            acc[t] = vaddq_f32(acc[t], vmulq_f32(vmulq_n_f32(d, yb[t]->d), vcvtq_f32_s32(isum)));
        }
    }
    for (int t = 0; t < NT; t++)
        vst1q_f32(y + (size_t)t * ys, acc[t]);
}

static void NEON_FN(gemm1_q6_K)(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y,
                                size_t ys, int nt)
{
    switch (nt) {
    case 1: NEON_FN(q6_rows)(1, n, w, w_row, a, a_row, y, ys); break;
    case 2: NEON_FN(q6_rows)(2, n, w, w_row, a, a_row, y, ys); break;
    case 3: NEON_FN(q6_rows)(3, n, w, w_row, a, a_row, y, ys); break;
    default: NEON_FN(q6_rows)(4, n, w, w_row, a, a_row, y, ys); break;
    }
}

/* ======================= Q2_K / Q3_K / IQ4_XS ======================= */

/* lowbit_body.h on 16-byte vectors: chunk c (0..15) is group c, elements
 * 16c .. 16c+15 = 128h + 32j + 16(c % 2) + i for h = c / 8, j = (c % 8) / 2,
 * activations as stored; IQ4_XS's pair p is sub-block p (chunk 2p its low
 * nibbles, elements 0-15, chunk 2p+1 the high ones). */
#ifndef INFER_ARM_LOWBIT_HELPERS
#define INFER_ARM_LOWBIT_HELPERS
typedef struct {
    int16x8_t lo, hi;
} neon_qcor;
static inline int8x16_t neon_sc_q3(const block_q3_K *x)
{
    int16_t s16[16];
    int8_t s8[16];
    q3_K_scales(x->scales, s16);
    for (int j = 0; j < 16; j++)
        s8[j] = (int8_t)s16[j];
    return vld1q_s8(s8);
}
static inline int8x16_t neon_sc_iq4(const block_iq4_xs *x)
{
    int8_t s8[16];
    for (int j = 0; j < 8; j++)
        s8[2 * j] = s8[2 * j + 1] = (int8_t)iq4_xs_scale(x, j);
    return vld1q_s8(s8);
}
static inline neon_qcor neon_cor(int8x16_t sc, int k)
{
    neon_qcor c = {vmulq_n_s16(vmovl_s8(vget_low_s8(sc)), (int16_t)k), vmulq_n_s16(vmovl_s8(vget_high_s8(sc)), (int16_t)k)};
    return c;
}
static inline int32x4_t neon_bsum(int32x4_t acc, const int16_t *bs, neon_qcor c)
{
    const int16x8_t b0 = vld1q_s16(bs), b1 = vld1q_s16(bs + 8);
    acc = vmlal_s16(acc, vget_low_s16(b0), vget_low_s16(c.lo));
    acc = vmlal_s16(acc, vget_high_s16(b0), vget_high_s16(c.lo));
    acc = vmlal_s16(acc, vget_low_s16(b1), vget_low_s16(c.hi));
    return vmlal_s16(acc, vget_high_s16(b1), vget_high_s16(c.hi));
}
static inline void neon_hsum4(const int32x4_t *v, int32_t *out)
{
    vst1q_s32(out, vpaddq_s32(vpaddq_s32(v[0], v[1]), vpaddq_s32(v[2], v[3])));
}
#endif
typedef int8x16_t qv;
typedef int32x4_t qacc;
typedef int32_t qscl;
typedef int8x16_t qsc8;
typedef neon_qcor qcor;
#define QV_W 16
#define QV_ZERO() vdupq_n_s32(0)
#define QV_H2F(h) neon_h2f(h)
#define QV_PREFETCH(p, w_row, bytes) neon_prefetch_ahead(p, w_row, bytes)
#define QV_CRUMBS(qs, c)                                                                                     \
    vreinterpretq_s8_u8(vandq_u8(vshlq_u8(vld1q_u8((qs) + 32 * ((c) / 8) + 16 * ((c) % 2)),                 \
                                          vdupq_n_s8((int8_t)(-2 * (((c) % 8) / 2)))),                          \
                                 vdupq_n_u8(3)))
/* + 4 where bit c / 2 of hmask[16 (c % 2) + i] is set (element 16c + i) */
#define QV_Q3(qs, hm, c)                                                                                     \
    vorrq_s8(QV_CRUMBS(qs, c),                                                                               \
             vreinterpretq_s8_u8(vandq_u8(vtstq_u8(vld1q_u8((hm) + 16 * ((c) % 2)), vdupq_n_u8((uint8_t)(1 << ((c) / 2)))), \
                                          vdupq_n_u8(4))))
#define QV_ACTK(qs, c) vld1q_s8((qs) + 16 * (c))
/* sub-block c / 2: low nibbles (even c) or high nibbles of qs[16 (c / 2) ..] */
NEON_INLINE int8x16_t NEON_FN(qv_iq4)(const uint8_t *qs, int c)
{
    const uint8x16_t q = vld1q_u8(qs + 16 * (c / 2));
    return vqtbl1q_s8(vld1q_s8(kvalues_iq4nl), c % 2 ? vshrq_n_u8(q, 4) : vandq_u8(q, vdupq_n_u8(0x0F)));
}
#define QV_IQ4(qs, c) NEON_FN(qv_iq4)(qs, c)
#define QV_ACTI(qs, c) vld1q_s8((qs) + 16 * (c))
#define QV_IQ4_BIAS 0
#define QV_SC_Q2(x, sc, m)                                                                                   \
    do {                                                                                                     \
        const uint8x16_t v_ = vld1q_u8((x)->scales);                                                         \
        (sc) = vreinterpretq_s8_u8(vandq_u8(v_, vdupq_n_u8(0x0F)));                                          \
        (m) = vreinterpretq_s8_u8(vshrq_n_u8(v_, 4));                                                        \
    } while (0)
#define QV_SC_Q3(x) neon_sc_q3(x)
#define QV_SC_IQ4(x) neon_sc_iq4(x)
#define QV_SCALESK(sc, s)                                                                                    \
    do {                                                                                                     \
        int8_t t_[16];                                                                                       \
        vst1q_s8(t_, sc);                                                                                    \
        for (int c_ = 0; c_ < 16; c_++)                                                                      \
            (s)[c_] = t_[c_];                                                                                \
    } while (0)
#define QV_SCALESI(sc, s)                                                                                    \
    do {                                                                                                     \
        int8_t t_[16];                                                                                       \
        vst1q_s8(t_, sc);                                                                                    \
        for (int p_ = 0; p_ < 8; p_++)                                                                       \
            (s)[p_] = t_[2 * p_];                                                                            \
    } while (0)
#define QV_COR(sc, k) neon_cor(sc, k)
#define QV_BSUM(acc, bs, cor) neon_bsum(acc, bs, cor)
/* the codebook spans -127..113: DOT_WIDE; the 0..7 quants: DOT_SMALL */
#define QV_DOTK(acc, u, a, s) vmlaq_n_s32(acc, DOT_SMALL(vdupq_n_s32(0), u, a), s)
#define QV_DOTI(acc, lo, alo, hi, ahi, s) vmlaq_n_s32(acc, DOT_WIDE(DOT_WIDE(vdupq_n_s32(0), lo, alo), hi, ahi), s)
#define QV_HSUM4(v, out) neon_hsum4(v, out)
#include "../lowbit_body.h"

#include "gemm_neon_body.h"

/* Install this variant's integer dot products, gemm tiles and gemm_many. */
static void NEON_FN(fill_int_dots)(struct kernel_table *t)
{
#define SET(TYPE, T, DOT)                                   \
    do {                                                    \
        t->types[GGML_TYPE_##TYPE].vec_dot = NEON_FN(DOT);  \
        t->types[GGML_TYPE_##TYPE].gemm = NEON_FN(gemm_##T); \
    } while (0)
    SET(Q4_0, q4_0, vec_dot_q4_0_q8_0);
    SET(Q4_1, q4_1, vec_dot_q4_1_q8_1);
    SET(Q5_0, q5_0, vec_dot_q5_0_q8_0);
    SET(Q5_1, q5_1, vec_dot_q5_1_q8_1);
    SET(Q8_0, q8_0, vec_dot_q8_0_q8_0);
    SET(Q4_K, q4_K, vec_dot_q4_K_q8_K);
    SET(Q5_K, q5_K, vec_dot_q5_K_q8_K);
    SET(Q6_K, q6_K, vec_dot_q6_K_q8_K);
    SET(IQ4_NL, iq4_nl, vec_dot_iq4_nl_q8_0);
#undef SET
    lowbit_fill(t);
    t->types[GGML_TYPE_Q4_0].gemm = NEON_FN(gemm1_q4_0);
    t->types[GGML_TYPE_Q5_0].gemm = NEON_FN(gemm1_q5_0);
    t->types[GGML_TYPE_Q8_0].gemm = NEON_FN(gemm1_q8_0);
    t->types[GGML_TYPE_IQ4_NL].gemm = NEON_FN(gemm1_iq4_nl);
    t->types[GGML_TYPE_Q6_K].gemm = NEON_FN(gemm1_q6_K);
    NEON_FN(fill_gemm_many)(t);
}
