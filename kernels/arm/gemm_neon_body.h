/*
 * gemm_neon_body.h - gemm_many (dispatch.h) of the aarch64 variants for
 * Q4_0, Q5_0, Q8_0, IQ4_NL, Q4_K and Q6_K and their x4 layouts (repack.h):
 * prefill's many-token matmul, with vector lanes holding weight rows, so
 * that a block's integer sums of four rows come out in the four lanes of
 * one vector and the reference's float steps run on four outputs at a time.
 *
 * Included by quants_neon_body.h (after its tiles), so NEON_FN, the variant
 * and the helpers there are known; GEMM_SDOT is 1 for the variants with
 * SDOT (dotprod, i8mm), 0 for plain NEON.
 *
 * Plan of one call (rows [0, n_rows), tokens [0, n_tok)):
 *   - tokens are taken GM_TOKS at a time; their activations are packed by
 *     quads (per block the four tokens' quants side by side, then their d
 *     as float: two loads per block instead of eight; the K-quants' also
 *     their sums of the bsums by pairs);
 *   - rows then pass GM_CHUNK at a time; each group of four rows is
 *     unpacked into the thread's scratch ("packed"): per block the signed
 *     int8 quants of the four rows (IQ4_NL's: its codebook values, by TBL),
 *     their scales as float (and the K-quants' sub-block scales and mins as
 *     integer lanes);
 *   - per group, four tokens at a time (eight for the 32-element types with
 *     SDOT): per block, the group's packed weights are loaded once and
 *     dotted with each token's activations.
 * Up to GM_TOKS tokens the unpacking costs the same whatever the token
 * count, so a short prompt's marginal cost per token is the dot products
 * and float steps alone (a long one adds the unpacking once per GM_TOKS).
 *
 * Integer sums per block, lanes = rows:
 *   GEMM_SDOT: the packed quants of 32 elements are 8 vectors, vector k
 *     holding elements 4k..4k+3 of rows 0-3 (a 4 x 4 transpose of 32-bit
 *     words); SDOT by element k % 4 of the token's vector k / 4 adds row r's
 *     four products into lane r: 8 SDOTs per 4 rows x 32 elements, no
 *     horizontal sums.
 *   NEON: the quants stay in rows (row r's elements 0-15, 16-31); SMULL +
 *     SMLAL2 + SMLAL + SMLAL2 give eight int16 lanes of four products per
 *     row, and pairwise adds over the rows reduce them to [r0 r1 r2 r3].
 *     The int16 steps are exact while a lane sums at most 32767 / max|w a|
 *     products: 16 for Q4_0 (|w| <= 8, |a| <= 128: 1024 each) and Q4_K
 *     (0..15: 1920), 8 for Q5_0 (-16..15: 2048), 4 for Q6_K (q - 32 in
 *     -32..31: 4096), 2 for IQ4_NL (codebook values -127..113: 16256);
 *     Q8_0 widens every product (SMULL + SADALP: -128 * -128 twice would
 *     be 32768).
 * Every block's integer sum is exact, so it equals the reference's; the
 * float steps are the reference's, in its order, lane by lane: every output
 * has exactly the bits of vec_dot.
 *
 * The fused gate/up form (gemm_many_glu) runs each group of gate rows and
 * the same group of up rows on the same packed tokens and stores only
 * act(gate) * up (gm_many).
 */

#ifndef GEMM_SDOT
#error "define GEMM_SDOT before including gemm_neon_body.h"
#endif

#include "act_neon.h"

/* Tokens per pass (their activations packed once for the 32-element types), rows
 * unpacked per pass over them (four groups): the unpacking of a row is
 * repeated once per GM_TOKS tokens. */
#define GM_TOKS 64
#define GM_CHUNK 16

/* Move a stream's pointer on by n bytes, kept in its register (an empty
 * asm the compiler cannot see through): GCC would otherwise give each load
 * of an unrolled step its own address register, one ADD each, where a
 * post-indexed load moves the one pointer for free. */
#define GM_NEXT(p, n)          \
    do {                       \
        (p) += (n);            \
        __asm__("" : "+r"(p)); \
    } while (0)

/* --------------------------- packing helpers --------------------------- */

/* Store the 32 elements of four rows (lo[r]: elements 0-15, hi[r]: 16-31)
 * as the integer core below reads them: 8 vectors at out. */
NEON_INLINE void NEON_FN(gm_put32)(int8_t *out, const int8x16_t lo[4], const int8x16_t hi[4])
{
#if GEMM_SDOT
    for (int h = 0; h < 2; h++) {
        const int8x16_t *v = h ? hi : lo;
        const int32x4_t t0 = vtrn1q_s32(vreinterpretq_s32_s8(v[0]), vreinterpretq_s32_s8(v[1]));
        const int32x4_t t1 = vtrn2q_s32(vreinterpretq_s32_s8(v[0]), vreinterpretq_s32_s8(v[1]));
        const int32x4_t t2 = vtrn1q_s32(vreinterpretq_s32_s8(v[2]), vreinterpretq_s32_s8(v[3]));
        const int32x4_t t3 = vtrn2q_s32(vreinterpretq_s32_s8(v[2]), vreinterpretq_s32_s8(v[3]));
        int8_t *o = out + 64 * h;
        vst1q_s8(o, vreinterpretq_s8_s64(vtrn1q_s64(vreinterpretq_s64_s32(t0), vreinterpretq_s64_s32(t2))));
        vst1q_s8(o + 16, vreinterpretq_s8_s64(vtrn1q_s64(vreinterpretq_s64_s32(t1), vreinterpretq_s64_s32(t3))));
        vst1q_s8(o + 32, vreinterpretq_s8_s64(vtrn2q_s64(vreinterpretq_s64_s32(t0), vreinterpretq_s64_s32(t2))));
        vst1q_s8(o + 48, vreinterpretq_s8_s64(vtrn2q_s64(vreinterpretq_s64_s32(t1), vreinterpretq_s64_s32(t3))));
    }
#else
    for (int r = 0; r < 4; r++) {
        vst1q_s8(out + 32 * r, lo[r]);
        vst1q_s8(out + 32 * r + 16, hi[r]);
    }
#endif
}

/* The same for 16 elements of four rows: 4 vectors at out. */
NEON_INLINE void NEON_FN(gm_put16)(int8_t *out, const int8x16_t v[4])
{
#if GEMM_SDOT
    const int32x4_t t0 = vtrn1q_s32(vreinterpretq_s32_s8(v[0]), vreinterpretq_s32_s8(v[1]));
    const int32x4_t t1 = vtrn2q_s32(vreinterpretq_s32_s8(v[0]), vreinterpretq_s32_s8(v[1]));
    const int32x4_t t2 = vtrn1q_s32(vreinterpretq_s32_s8(v[2]), vreinterpretq_s32_s8(v[3]));
    const int32x4_t t3 = vtrn2q_s32(vreinterpretq_s32_s8(v[2]), vreinterpretq_s32_s8(v[3]));
    vst1q_s8(out, vreinterpretq_s8_s64(vtrn1q_s64(vreinterpretq_s64_s32(t0), vreinterpretq_s64_s32(t2))));
    vst1q_s8(out + 16, vreinterpretq_s8_s64(vtrn1q_s64(vreinterpretq_s64_s32(t1), vreinterpretq_s64_s32(t3))));
    vst1q_s8(out + 32, vreinterpretq_s8_s64(vtrn2q_s64(vreinterpretq_s64_s32(t0), vreinterpretq_s64_s32(t2))));
    vst1q_s8(out + 48, vreinterpretq_s8_s64(vtrn2q_s64(vreinterpretq_s64_s32(t1), vreinterpretq_s64_s32(t3))));
#else
    for (int r = 0; r < 4; r++)
        vst1q_s8(out + 16 * r, v[r]);
#endif
}

/* ---------------------------- integer cores ---------------------------- */

/* Lane r: sum over 32 elements of row r's packed quants w (8 vectors) times
 * the token's a0 (elements 0-15), a1 (16-31).  wide (NEON only): 0 when 16
 * products may share an int16 lane (|w| <= 15), 1 when 8 may (Q5_0, |w| <=
 * 16), 2 when 2 may (IQ4_NL, -127 <= w <= 113: |w a| <= 16256), 3 when the
 * quants may be any int8 (Q8_0: every product widened). */
NEON_INLINE int32x4_t NEON_FN(gm_dot32)(const int8x16_t w[8], int8x16_t a0, int8x16_t a1, const int wide)
{
#if GEMM_SDOT
    (void)wide;
    int32x4_t s = vdupq_n_s32(0);
    s = vdotq_laneq_s32(s, w[0], a0, 0);
    s = vdotq_laneq_s32(s, w[1], a0, 1);
    s = vdotq_laneq_s32(s, w[2], a0, 2);
    s = vdotq_laneq_s32(s, w[3], a0, 3);
    s = vdotq_laneq_s32(s, w[4], a1, 0);
    s = vdotq_laneq_s32(s, w[5], a1, 1);
    s = vdotq_laneq_s32(s, w[6], a1, 2);
    s = vdotq_laneq_s32(s, w[7], a1, 3);
    return s;
#else
    if (wide == 3) {
        int32x4_t r4[4];
        for (int r = 0; r < 4; r++) {
            int32x4_t s = vpaddlq_s16(vmull_s8(vget_low_s8(w[2 * r]), vget_low_s8(a0)));
            s = vpadalq_s16(s, vmull_high_s8(w[2 * r], a0));
            s = vpadalq_s16(s, vmull_s8(vget_low_s8(w[2 * r + 1]), vget_low_s8(a1)));
            r4[r] = vpadalq_s16(s, vmull_high_s8(w[2 * r + 1], a1));
        }
        return vpaddq_s32(vpaddq_s32(r4[0], r4[1]), vpaddq_s32(r4[2], r4[3]));
    }
    if (wide == 2) { /* SMULL + SMLAL2: two products per int16 lane, then widened */
        int32x4_t r4[4];
        for (int r = 0; r < 4; r++) {
            const int32x4_t s = vpaddlq_s16(vmlal_high_s8(vmull_s8(vget_low_s8(w[2 * r]), vget_low_s8(a0)), w[2 * r], a0));
            r4[r] = vpadalq_s16(s, vmlal_high_s8(vmull_s8(vget_low_s8(w[2 * r + 1]), vget_low_s8(a1)), w[2 * r + 1], a1));
        }
        return vpaddq_s32(vpaddq_s32(r4[0], r4[1]), vpaddq_s32(r4[2], r4[3]));
    }
    int16x8_t p[4];
    for (int r = 0; r < 4; r++) {
        int16x8_t q = vmull_s8(vget_low_s8(w[2 * r]), vget_low_s8(a0));
        q = vmlal_high_s8(q, w[2 * r], a0);
        q = vmlal_s8(q, vget_low_s8(w[2 * r + 1]), vget_low_s8(a1));
        p[r] = vmlal_high_s8(q, w[2 * r + 1], a1);
    }
    if (wide == 1) /* 4 -> 8 products per lane, then widened: [r0 r0 r1 r1], [r2 r2 r3 r3] */
        return vpaddq_s32(vpaddlq_s16(vpaddq_s16(p[0], p[1])), vpaddlq_s16(vpaddq_s16(p[2], p[3])));
    /* 4 -> 8 -> 16 products per lane: [r0 r0 r1 r1 r2 r2 r3 r3] */
    return vpaddlq_s16(vpaddq_s16(vpaddq_s16(p[0], p[1]), vpaddq_s16(p[2], p[3])));
#endif
}

/* Lane r: init plus the sum over 16 elements (4 packed vectors w) of row
 * r's quants times a; |w| <= 63 (NEON: four products of at most 63 * 128
 * per int16 lane, 32256, exact). */
NEON_INLINE int32x4_t NEON_FN(gm_dot16)(int32x4_t init, const int8x16_t w[4], int8x16_t a)
{
#if GEMM_SDOT
    int32x4_t s = vdotq_laneq_s32(init, w[0], a, 0);
    s = vdotq_laneq_s32(s, w[1], a, 1);
    s = vdotq_laneq_s32(s, w[2], a, 2);
    return vdotq_laneq_s32(s, w[3], a, 3);
#else
    int16x8_t p[4];
    for (int r = 0; r < 4; r++)
        p[r] = vmlal_high_s8(vmull_s8(vget_low_s8(w[r]), vget_low_s8(a)), w[r], a);
    /* 2 -> 4 products per int16 lane, then widened: [r0 r0 r1 r1], [r2 r2 r3 r3] */
    return vaddq_s32(init, vpaddq_s32(vpaddlq_s16(vpaddq_s16(p[0], p[1])), vpaddlq_s16(vpaddq_s16(p[2], p[3]))));
#endif
}

/* Store acc[t] (lane r: row r) of NT tokens to y. */
NEON_INLINE void NEON_FN(gm_store)(const int NT, const float32x4_t acc[4], float *y, size_t ys)
{
    for (int t = 0; t < NT; t++)
        vst1q_f32(y + (size_t)t * ys, acc[t]);
}

/* ==================== Q4_0 / Q5_0 / Q8_0 / IQ4_NL ==================== */

/* Per block of a group: 128 bytes of quants, then the four rows' d as float. */
#define GM32_BYTES 144

/* Bytes of a block of the base type of an x4 group: Q4_0, Q5_0 or Q8_0. */
NEON_INLINE size_t NEON_FN(x4_bs)(const int type)
{
    return type == GGML_TYPE_Q5_0 ? sizeof(block_q5_0) : type == GGML_TYPE_Q8_0 ? sizeof(block_q8_0) : sizeof(block_q4_0);
}

/* Block b of row r (0-3) of a Q4_0 or Q5_0 (type) x4 group at g
 * (repack.h; IQ4_NL's is Q4_0's): its quants, its scale (Q8_0's too), and
 * (Q5_0) its 32 fifth bits. */
NEON_INLINE const uint8_t *NEON_FN(x4_qs)(const int type, const char *g, int r, int64_t b, int64_t nb)
{
    const size_t bs = NEON_FN(x4_bs)(type);
    if (b < nb / 4 * 4)
        return (const uint8_t *)g + repack_x4_qs(type, r, b, bs);
    return (const uint8_t *)g + repack_x4_whole(r, b, nb, bs) +
           (type == GGML_TYPE_Q5_0 ? offsetof(block_q5_0, qs) : offsetof(block_q4_0, qs));
}
NEON_INLINE float NEON_FN(x4_d)(const int type, const char *g, int r, int64_t b, int64_t nb)
{
    const size_t bs = NEON_FN(x4_bs)(type);
    ggml_half d;
    memcpy(&d, g + (b < nb / 4 * 4 ? repack_x4_d(r, b, bs) : repack_x4_whole(r, b, nb, bs)), sizeof(d));
    return neon_h2f(d);
}
NEON_INLINE void NEON_FN(x4_qh)(const char *g, int r, int64_t b, int64_t nb, uint8_t qh[4])
{
    const size_t bs = sizeof(block_q5_0);
    if (b < nb / 4 * 4) {
        memcpy(qh, g + repack_x4_qh(r, b, bs, 0), 2);
        memcpy(qh + 2, g + repack_x4_qh(r, b, bs, 1), 2);
    } else {
        memcpy(qh, g + repack_x4_whole(r, b, nb, bs) + offsetof(block_q5_0, qh), 4);
    }
}

/* type: Q4_0, Q5_0, Q8_0, IQ4_NL, or INFER_TYPE_Q4_0_X4 / INFER_TYPE_Q5_0_X4 /
 * INFER_TYPE_Q8_0_X4 / INFER_TYPE_Q4_0_X4S / INFER_TYPE_IQ4_NL_X4 (w then
 * points at a group of that layout).  IQ4_NL's quants are packed as its
 * codebook values (TBL), signed int8 like Q8_0's. */
NEON_INLINE void NEON_FN(gm32_pack)(const int type, int64_t nb, const char *w, size_t w_row, int8_t *pk)
{
    for (int64_t b = 0; b < nb; b++, pk += GM32_BYTES) {
        int8x16_t lo[4], hi[4];
        float d[4];
#if GEMM_SDOT
        if ((type == INFER_TYPE_Q8_0_X4 || type == INFER_TYPE_Q4_0_X4S) && b < nb / 4 * 4) {
            /* the tile's words are gm_put32's vectors already (Q4_0: its
             * nibbles as signed values, from the 0x88-flipped bytes) */
            const int q8 = type == INFER_TYPE_Q8_0_X4;
            const size_t bs = q8 ? sizeof(block_q8_0) : sizeof(block_q4_0);
            const int8_t *q = (const int8_t *)w + repack_x4s_q(0, b, bs, bs - 2, 0);
            if (q8) {
                vst1q_s8_x4(pk, vld1q_s8_x4(q));
                vst1q_s8_x4(pk + 64, vld1q_s8_x4(q + 64));
            } else {
                const int8x16x4_t x = vld1q_s8_x4(q);
                for (int v = 0; v < 4; v++) {
                    vst1q_s8(pk + 16 * v, vshrq_n_s8(vshlq_n_s8(x.val[v], 4), 4));
                    vst1q_s8(pk + 64 + 16 * v, vshrq_n_s8(x.val[v], 4));
                }
            }
            for (int r = 0; r < 4; r++)
                d[r] = NEON_FN(x4_d)(q8 ? GGML_TYPE_Q8_0 : GGML_TYPE_Q4_0, w, r, b, nb);
            memcpy(pk + 128, d, sizeof(d));
            continue;
        }
#endif
        for (int r = 0; r < 4; r++) {
            if (type == INFER_TYPE_Q8_0_X4 || type == INFER_TYPE_Q4_0_X4S) { /* past the tiles: GGUF's blocks */
                const int q8 = type == INFER_TYPE_Q8_0_X4;
                const char *x = w + repack_x4_whole(r, b, nb, q8 ? sizeof(block_q8_0) : sizeof(block_q4_0));
                NEON_FN(row32)(q8 ? GGML_TYPE_Q8_0 : GGML_TYPE_Q4_0, x, &lo[r], &hi[r]);
                d[r] = neon_h2f(((const block_q4_0 *)x)->d);
            } else if (type == GGML_TYPE_Q8_0) {
                const block_q8_0 *x = (const block_q8_0 *)(w + r * w_row) + b;
                lo[r] = vld1q_s8(x->qs);
                hi[r] = vld1q_s8(x->qs + 16);
                d[r] = neon_h2f(x->d);
            } else if (type == GGML_TYPE_Q5_0) { /* as tile_q5_0 */
                const block_q5_0 *x = (const block_q5_0 *)(w + r * w_row) + b;
                const uint8x16_t m4 = vdupq_n_u8(0x0F), v16 = vdupq_n_u8(16);
                uint8x16_t set_lo, set_hi;
                neon_q5_bits(x->qh, &set_lo, &set_hi);
                const uint8x16_t q = vld1q_u8(x->qs);
                lo[r] = vreinterpretq_s8_u8(vsubq_u8(vandq_u8(q, m4), vbicq_u8(v16, set_lo)));
                hi[r] = vreinterpretq_s8_u8(vsubq_u8(vshrq_n_u8(q, 4), vbicq_u8(v16, set_hi)));
                d[r] = neon_h2f(x->d);
            } else if (type == INFER_TYPE_Q5_0_X4) { /* the same from the x4 layout */
                const uint8x16_t m4 = vdupq_n_u8(0x0F), v16 = vdupq_n_u8(16);
                uint8_t qh[4];
                NEON_FN(x4_qh)(w, r, b, nb, qh);
                uint8x16_t set_lo, set_hi;
                neon_q5_bits(qh, &set_lo, &set_hi);
                const uint8x16_t q = vld1q_u8(NEON_FN(x4_qs)(GGML_TYPE_Q5_0, w, r, b, nb));
                lo[r] = vreinterpretq_s8_u8(vsubq_u8(vandq_u8(q, m4), vbicq_u8(v16, set_lo)));
                hi[r] = vreinterpretq_s8_u8(vsubq_u8(vshrq_n_u8(q, 4), vbicq_u8(v16, set_hi)));
                d[r] = NEON_FN(x4_d)(GGML_TYPE_Q5_0, w, r, b, nb);
            } else if (type == GGML_TYPE_IQ4_NL) {
                const char *x = w + r * w_row + (size_t)b * sizeof(block_iq4_nl);
                NEON_FN(row32)(GGML_TYPE_IQ4_NL, x, &lo[r], &hi[r]);
                d[r] = neon_h2f(((const block_iq4_nl *)x)->d);
            } else if (type == INFER_TYPE_IQ4_NL_X4) { /* Q4_0 x4's bytes (repack.h) */
                const int8x16_t kv = vld1q_s8(kvalues_iq4nl);
                const uint8x16_t q = vld1q_u8(NEON_FN(x4_qs)(GGML_TYPE_Q4_0, w, r, b, nb));
                lo[r] = vqtbl1q_s8(kv, vandq_u8(q, vdupq_n_u8(0x0F)));
                hi[r] = vqtbl1q_s8(kv, vshrq_n_u8(q, 4));
                d[r] = NEON_FN(x4_d)(GGML_TYPE_Q4_0, w, r, b, nb);
            } else if (type == INFER_TYPE_Q4_0_X4) {
                const uint8x16_t q = vld1q_u8(NEON_FN(x4_qs)(GGML_TYPE_Q4_0, w, r, b, nb));
                lo[r] = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0F))), vdupq_n_s8(8));
                hi[r] = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), vdupq_n_s8(8));
                d[r] = NEON_FN(x4_d)(GGML_TYPE_Q4_0, w, r, b, nb);
            } else {
                const block_q4_0 *x = (const block_q4_0 *)(w + r * w_row) + b;
                const uint8x16_t q = vld1q_u8(x->qs);
                lo[r] = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0F))), vdupq_n_s8(8));
                hi[r] = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), vdupq_n_s8(8));
                d[r] = neon_h2f(x->d);
            }
        }
        NEON_FN(gm_put32)(pk, lo, hi);
        memcpy(pk + 128, d, sizeof(d));
    }
}

/* The activations of four tokens (Q8_0 rows; the missing ones of a short
 * quad as zeros), per block: their 4 x 32 quants, then their d as float. */
NEON_INLINE void NEON_FN(gm32_pack_act)(int64_t nb, const char *a, size_t a_row, int nt, int8_t *pa)
{
    for (int64_t b = 0; b < nb; b++, pa += GM32_BYTES) {
        float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int t = 0; t < 4; t++) {
            if (t < nt) {
                const block_q8_0 *yb = (const block_q8_0 *)(a + t * a_row) + b;
                vst1q_s8_x2(pa + 32 * t, vld1q_s8_x2(yb->qs));
                d[t] = neon_h2f(yb->d);
            } else {
                memset(pa + 32 * t, 0, 32);
            }
        }
        memcpy(pa + 128, d, sizeof(d));
    }
}

/* One block of a quad of tokens (packed at *pa, moved on by a block):
 * acc[t] += the block's float step of token t, lanes = the group's rows
 * (w: their quants, dx: their d; type the base type). */
NEON_INLINE void NEON_FN(gm32_quad)(const int type, const int NT, const int8x16_t w[8], float32x4_t dx,
                                    const int8_t **pa, float32x4_t acc[4])
{
    const int8_t *p = *pa;
    const int8x16x4_t a01 = vld1q_s8_x4(p);
    GM_NEXT(p, 64);
    const int8x16x4_t a23 = vld1q_s8_x4(p);
    GM_NEXT(p, 64);
    const float32x4_t dy = vld1q_f32((const float *)p);
    GM_NEXT(p, GM32_BYTES - 128);
    *pa = p;
    const int wide = type == GGML_TYPE_Q8_0 ? 3 : type == GGML_TYPE_IQ4_NL ? 2 : type == GGML_TYPE_Q5_0 ? 1 : 0;
    int32x4_t s[4];
    s[0] = NEON_FN(gm_dot32)(w, a01.val[0], a01.val[1], wide);
    if (NT > 1)
        s[1] = NEON_FN(gm_dot32)(w, a01.val[2], a01.val[3], wide);
    if (NT > 2)
        s[2] = NEON_FN(gm_dot32)(w, a23.val[0], a23.val[1], wide);
    if (NT > 3)
        s[3] = NEON_FN(gm_dot32)(w, a23.val[2], a23.val[3], wide);
#define GM32_STEP(t)                                                                                  \
    do {                                                                                              \
        if ((t) >= NT)                                                                                \
            break;                                                                                    \
        const float32x4_t f = vcvtq_f32_s32(s[t]);                                                    \
        if (type == GGML_TYPE_Q8_0) /* (float)sumi * (dx * dy) */                                     \
            acc[t] = vaddq_f32(acc[t], vmulq_f32(f, vmulq_laneq_f32(dx, dy, t)));                     \
        else if (type == GGML_TYPE_Q5_0 || type == GGML_TYPE_IQ4_NL) /* (dx * dy) * (float)sumi */   \
            acc[t] = vaddq_f32(acc[t], vmulq_f32(vmulq_laneq_f32(dx, dy, t), f));                     \
        else /* (float)sumi * dx * dy */                                                              \
            acc[t] = vaddq_f32(acc[t], vmulq_laneq_f32(vmulq_f32(f, dx), dy, t));                     \
    } while (0)
    GM32_STEP(0);
    GM32_STEP(1);
    GM32_STEP(2);
    GM32_STEP(3);
#undef GM32_STEP
}

/* NT tokens of a group (packed at pk): 1-4 (one quad, packed at pa), or 8
 * with SDOT (two quads, at pa and pa + qbytes: each block's weights loaded
 * once for eight tokens; the second quad may be short, its missing tokens
 * zeros);
 * the first ny outputs of each row go to y. */
NEON_INLINE void NEON_FN(gm32_run)(const int xtype, const int NT, int64_t nb, const int8_t *pk, const int8_t *pa,
                                   size_t qbytes, float *y, size_t ys, int ny)
{
    /* the layouts run as their base type (the packing made them alike) */
    const int type = xtype == INFER_TYPE_Q5_0_X4                                  ? GGML_TYPE_Q5_0
                     : xtype == INFER_TYPE_Q8_0_X4                                ? GGML_TYPE_Q8_0
                     : xtype == INFER_TYPE_IQ4_NL_X4                              ? GGML_TYPE_IQ4_NL
                     : xtype == INFER_TYPE_Q4_0_X4 || xtype == INFER_TYPE_Q4_0_X4S ? GGML_TYPE_Q4_0
                                                                                   : xtype;
    float32x4_t acc[8];
    for (int t = 0; t < 8; t++)
        acc[t] = vdupq_n_f32(0.0f);
    const int8_t *pb = pa + qbytes;
    for (int64_t b = 0; b < nb; b++) { /* pk, pa, pb: GM32_BYTES a block, post-indexed loads */
        const int8x16x4_t w0 = vld1q_s8_x4(pk);
        GM_NEXT(pk, 64);
        const int8x16x4_t w1 = vld1q_s8_x4(pk);
        GM_NEXT(pk, 64);
        const int8x16_t w[8] = {w0.val[0], w0.val[1], w0.val[2], w0.val[3], w1.val[0], w1.val[1], w1.val[2], w1.val[3]};
        const float32x4_t dx = vld1q_f32((const float *)pk);
        GM_NEXT(pk, GM32_BYTES - 128);
        NEON_FN(gm32_quad)(type, NT < 4 ? NT : 4, w, dx, &pa, acc);
        if (NT > 4) {
            __asm__ volatile("" ::: "memory"); /* keeps the second quad's loads after the first's steps */
            NEON_FN(gm32_quad)(type, 4, w, dx, &pb, acc + 4);
        }
    }
    for (int t = 0; t < (NT > 4 ? 8 : NT); t++)
        if (t < ny)
            vst1q_f32(y + (size_t)t * ys, acc[t]);
}

/* ========================== Q4_K and Q6_K ========================== */

/*
 * The K-quants' activations of four tokens, packed once per GM_TOKS tokens
 * (gmk_pack_act), per super-block: the quants by 32-element chunk with the
 * four tokens' side by side ([c][t][32]: a chunk of all four is two 64-byte
 * loads), the tokens' sums of the bsums by pairs (int16 [t][8]: Q4_K's
 * sub-block sums of 32), their d as float [t].  Missing tokens of a short
 * quad are zeros.
 *
 * The weights' sub-block scales are packed as int32 lanes (rows).  With
 * SDOT they are differences: isum = sum_j sc_j D_j (D_j the exact dot of
 * sub-block j) equals sum_j R_j (sc_j - sc_{j+1}), sc past the last = 0,
 * where R_j = D_0 + ... + D_j is what SDOT leaves in one accumulator that
 * runs over the whole super-block: one MLA per sub-block and no fresh
 * accumulator per dot, the same exact integer (int32 sums wrap exactly and
 * the result fits).  Plain NEON's dots are separate sums anyway and keep
 * the scales.
 */
#define GMK_ABYTES (1024 + 64 + 16)

NEON_INLINE void NEON_FN(gmk_pack_act)(int64_t nb, const char *a, size_t a_row, int nt, int8_t *pa)
{
    for (int64_t b = 0; b < nb; b++, pa += GMK_ABYTES) {
        int16_t s[4][8];
        float d[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        memset(s, 0, sizeof(s));
        for (int t = 0; t < 4; t++) {
            if (t >= nt) {
                for (int c = 0; c < 8; c++)
                    memset(pa + 128 * c + 32 * t, 0, 32);
                continue;
            }
            const block_q8_K *yb = (const block_q8_K *)(a + t * a_row) + b;
            for (int c = 0; c < 8; c++)
                vst1q_s8_x2(pa + 128 * c + 32 * t, vld1q_s8_x2(yb->qs + 32 * c));
            vst1q_s16(s[t], vpaddq_s16(vld1q_s16(yb->bsums), vld1q_s16(yb->bsums + 8)));
            d[t] = yb->d;
        }
        memcpy(pa + 1024, s, sizeof(s));
        memcpy(pa + 1088, d, sizeof(d));
    }
}

/* The scales of a group's sub-blocks as packed (see above): sc[j][r] in,
 * lanes out, n sub-blocks. */
NEON_INLINE void NEON_FN(gmk_scales)(const int n, int32_t sc[][4])
{
#if GEMM_SDOT
    for (int j = 0; j < n; j++)
        for (int r = 0; r < 4; r++)
            sc[j][r] -= j + 1 < n ? sc[j + 1][r] : 0;
#else
    (void)n;
    (void)sc;
#endif
}

/* Add sub-block j of NT tokens to isum[t] (lanes = rows):
 * w its quants of four rows (gm_dot32's 8 vectors, or gm_dot16's 4 when
 * n16), sc its packed scales, a0 / a1 token t's activations; with SDOT
 * r[t] is the running sum R (see above). */
NEON_INLINE void NEON_FN(gmk_sub)(const int n16, const int8x16_t *w, int32x4_t sc, int8x16_t a0,
                                  int8x16_t a1, int32x4_t *r, int32x4_t *isum)
{
#if GEMM_SDOT
    (void)a1;
    int32x4_t s = vdotq_laneq_s32(*r, w[0], a0, 0);
    s = vdotq_laneq_s32(s, w[1], a0, 1);
    s = vdotq_laneq_s32(s, w[2], a0, 2);
    s = vdotq_laneq_s32(s, w[3], a0, 3);
    if (!n16) {
        s = vdotq_laneq_s32(s, w[4], a1, 0);
        s = vdotq_laneq_s32(s, w[5], a1, 1);
        s = vdotq_laneq_s32(s, w[6], a1, 2);
        s = vdotq_laneq_s32(s, w[7], a1, 3);
    }
    *r = s;
#else
    (void)r;
    const int32x4_t s = n16 ? NEON_FN(gm_dot16)(vdupq_n_s32(0), w, a0) : NEON_FN(gm_dot32)(w, a0, a1, 0);
#endif
    *isum = vmlaq_s32(*isum, s, sc);
}

/* ================================ Q4_K ================================ */

/* Per block of a group: per sub-block j (at 144 j) its quants (128 bytes,
 * gm_put32's) and its packed scales as int32 lanes [r] (16), then the mins
 * as int16 lanes [j][r] (64), d and dmin as float (32). */
#define GMK4_BYTES 1248

NEON_INLINE void NEON_FN(gmk4_pack)(int64_t nb, const char *w, size_t w_row, int8_t *pk)
{
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    for (int64_t b = 0; b < nb; b++, pk += GMK4_BYTES) {
        int32_t sc32[8][4];
        int16_t mn16[8][4];
        float d[4], dmin[4];
        for (int c = 0; c < 4; c++) {
            int8x16_t lo[2][4], hi[2][4];
            for (int r = 0; r < 4; r++) {
                const block_q4_K *x = (const block_q4_K *)(w + r * w_row) + b;
                const uint8x16_t q0 = vld1q_u8(x->qs + 32 * c), q1 = vld1q_u8(x->qs + 32 * c + 16);
                lo[0][r] = vreinterpretq_s8_u8(vandq_u8(q0, m4));
                hi[0][r] = vreinterpretq_s8_u8(vandq_u8(q1, m4));
                lo[1][r] = vreinterpretq_s8_u8(vshrq_n_u8(q0, 4));
                hi[1][r] = vreinterpretq_s8_u8(vshrq_n_u8(q1, 4));
            }
            NEON_FN(gm_put32)(pk + 144 * (2 * c), lo[0], hi[0]);
            NEON_FN(gm_put32)(pk + 144 * (2 * c + 1), lo[1], hi[1]);
        }
        for (int r = 0; r < 4; r++) {
            const block_q4_K *x = (const block_q4_K *)(w + r * w_row) + b;
            uint8_t sc[8], m[8];
            neon_k_scales(x->scales, sc, m);
            for (int j = 0; j < 8; j++) {
                sc32[j][r] = sc[j];
                mn16[j][r] = m[j];
            }
            d[r] = neon_h2f(x->d);
            dmin[r] = neon_h2f(x->dmin);
        }
        NEON_FN(gmk_scales)(8, sc32);
        for (int j = 0; j < 8; j++)
            memcpy(pk + 144 * j + 128, sc32[j], sizeof(sc32[j]));
        memcpy(pk + 1152, mn16, sizeof(mn16));
        memcpy(pk + 1216, d, sizeof(d));
        memcpy(pk + 1232, dmin, sizeof(dmin));
    }
}

/* The float step of a Q4_K super-block for four rows (lanes) and NT tokens,
 * in the reference's order: acc += (d yd) isum, then acc -= (dmin yd) summ,
 * where summ = sum_j m[j][r] * s[t][j] (s: token t's sums of the bsums by
 * pairs); dd[t] = d yd and dm[t] = dmin yd with token t's yd; m01..m67 hold
 * the four rows' mins as int16, two sub-blocks each. */
NEON_INLINE void NEON_FN(k4_step)(const int NT, float32x4_t acc[4], const int32x4_t isum[4], int16x8_t m01,
                                  int16x8_t m23, int16x8_t m45, int16x8_t m67, const float32x4_t dd[4],
                                  const float32x4_t dm[4], const int16x8_t s[4])
{
    for (int t = 0; t < NT; t++) {
        int32x4_t summ = vmull_laneq_s16(vget_low_s16(m01), s[t], 0);
        summ = vmlal_high_laneq_s16(summ, m01, s[t], 1);
        summ = vmlal_laneq_s16(summ, vget_low_s16(m23), s[t], 2);
        summ = vmlal_high_laneq_s16(summ, m23, s[t], 3);
        summ = vmlal_laneq_s16(summ, vget_low_s16(m45), s[t], 4);
        summ = vmlal_high_laneq_s16(summ, m45, s[t], 5);
        summ = vmlal_laneq_s16(summ, vget_low_s16(m67), s[t], 6);
        summ = vmlal_high_laneq_s16(summ, m67, s[t], 7);
        acc[t] = vaddq_f32(acc[t], vmulq_f32(dd[t], vcvtq_f32_s32(isum[t])));
        acc[t] = vsubq_f32(acc[t], vmulq_f32(dm[t], vcvtq_f32_s32(summ)));
    }
}

/* out[t] = x times lane t of y. */
NEON_INLINE void NEON_FN(mul_lanes)(float32x4_t x, float32x4_t y, float32x4_t out[4])
{
    out[0] = vmulq_laneq_f32(x, y, 0);
    out[1] = vmulq_laneq_f32(x, y, 1);
    out[2] = vmulq_laneq_f32(x, y, 2);
    out[3] = vmulq_laneq_f32(x, y, 3);
}

/* Four tokens (packed at pa, gmk_pack_act) of a group (packed at pk); the
 * first NT outputs of each row go to y.  pk and pa are read front to back
 * by post-indexed loads. */
NEON_INLINE void NEON_FN(gmk4_run)(const int NT, int64_t nb, const int8_t *pk, const int8_t *pa, float *y, size_t ys)
{
    float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    for (int64_t b = 0; b < nb; b++) {
        int32x4_t r[4], isum[4];
        for (int t = 0; t < 4; t++)
            r[t] = isum[t] = vdupq_n_s32(0);
        for (int j = 0; j < 8; j++) {
            const int8x16x4_t w0 = vld1q_s8_x4(pk);
            GM_NEXT(pk, 64);
            const int8x16x4_t w1 = vld1q_s8_x4(pk);
            GM_NEXT(pk, 64);
            const int8x16_t wv[8] = {w0.val[0], w0.val[1], w0.val[2], w0.val[3],
                                     w1.val[0], w1.val[1], w1.val[2], w1.val[3]};
            const int32x4_t sc = vld1q_s32((const int32_t *)pk);
            GM_NEXT(pk, 16);
            const int8x16x4_t a01 = vld1q_s8_x4(pa); /* tokens 0 and 1 */
            GM_NEXT(pa, 64);
            const int8x16x4_t a23 = vld1q_s8_x4(pa);
            GM_NEXT(pa, 64);
            const int8x16x4_t *av[2] = {&a01, &a23};
            for (int t = 0; t < NT; t++)
                NEON_FN(gmk_sub)(0, wv, sc, av[t / 2]->val[2 * (t % 2)], av[t / 2]->val[2 * (t % 2) + 1],
                                 &r[t], &isum[t]);
        }
        const int16x8x4_t m = vld1q_s16_x4((const int16_t *)pk);
        GM_NEXT(pk, 64);
        const float32x4x2_t dd = vld1q_f32_x2((const float *)pk);
        GM_NEXT(pk, 32);
        const int16x8x4_t s = vld1q_s16_x4((const int16_t *)pa);
        GM_NEXT(pa, 64);
        const float32x4_t yd = vld1q_f32((const float *)pa);
        GM_NEXT(pa, 16);
        float32x4_t dy[4], dmy[4];
        NEON_FN(mul_lanes)(dd.val[0], yd, dy);
        NEON_FN(mul_lanes)(dd.val[1], yd, dmy);
        NEON_FN(k4_step)(NT, acc, isum, m.val[0], m.val[1], m.val[2], m.val[3], dy, dmy, s.val);
    }
    NEON_FN(gm_store)(NT, acc, y, ys);
}

/* ================================ Q6_K ================================ */

/* Per block of a group: per pair j of 16-element groups (at 160 j) their
 * quants q - 32 (128 bytes: group 2j, then 2j+1, gm_put16's) and their
 * packed scales as int32 lanes [g][r] (32), then d as float (16).  With
 * q - 32 in the weights the reference's isum needs no bsums correction
 * (the same exact integer). */
#define GMK6_BYTES 1296

/* x4: w is a group of Q6_K's x4 layout (repack.h), whose pieces of ql and
 * qh lie 64 bytes apart instead of 16. */
NEON_INLINE void NEON_FN(gmk6_pack)(const bool x4, int64_t nb, const char *w, size_t w_row, int8_t *pk)
{
    const int8x16_t s32 = vdupq_n_s8(32);
    for (int64_t b = 0; b < nb; b++, pk += GMK6_BYTES) {
        int8x16_t v[4][16];
        int32_t sc32[16][4];
        float d[4];
        for (int r = 0; r < 4; r++) {
            const uint8_t *ql, *qh;
            const int8_t *sc;
            ggml_half dh;
            if (x4) {
                const uint8_t *tile = (const uint8_t *)w + (size_t)b * REPACK_X6K_TILE;
                ql = tile + repack_x6k_ql(r, 0);
                qh = tile + repack_x6k_qh(r, 0);
                sc = (const int8_t *)tile + repack_x6k_sc(r);
                memcpy(&dh, tile + repack_x6k_d(r), sizeof(dh));
            } else {
                const block_q6_K *x = (const block_q6_K *)(w + r * w_row) + b;
                ql = x->ql;
                qh = x->qh;
                sc = x->scales;
                dh = x->d;
            }
            NEON_FN(q6_unpack_at)(ql, qh, x4 ? 64 : 16, v[r]); /* v[r][g]: elements 16g .. 16g+15 */
            for (int g = 0; g < 16; g++) {
                v[r][g] = vsubq_s8(v[r][g], s32);
                sc32[g][r] = sc[g];
            }
            d[r] = neon_h2f(dh);
        }
        NEON_FN(gmk_scales)(16, sc32);
        for (int g = 0; g < 16; g++) {
            const int8x16_t rows[4] = {v[0][g], v[1][g], v[2][g], v[3][g]};
            NEON_FN(gm_put16)(pk + 160 * (g / 2) + 64 * (g % 2), rows);
            memcpy(pk + 160 * (g / 2) + 128 + 16 * (g % 2), sc32[g], sizeof(sc32[g]));
        }
        memcpy(pk + 1280, d, sizeof(d));
    }
}

NEON_INLINE void NEON_FN(gmk6_run)(const int NT, int64_t nb, const int8_t *pk, const int8_t *pa, float *y, size_t ys)
{
    float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    for (int64_t b = 0; b < nb; b++) {
        int32x4_t r[4], isum[4];
        for (int t = 0; t < 4; t++)
            r[t] = isum[t] = vdupq_n_s32(0);
        for (int j = 0; j < 8; j++) {
            const int8x16x4_t w0 = vld1q_s8_x4(pk); /* group 2j */
            GM_NEXT(pk, 64);
            const int8x16x4_t w1 = vld1q_s8_x4(pk); /* 2j + 1 */
            GM_NEXT(pk, 64);
            const int32x4x2_t sc = vld1q_s32_x2((const int32_t *)pk);
            GM_NEXT(pk, 32);
            const int8x16x4_t a01 = vld1q_s8_x4(pa); /* tokens 0 and 1 */
            GM_NEXT(pa, 64);
            const int8x16x4_t a23 = vld1q_s8_x4(pa);
            GM_NEXT(pa, 64);
            const int8x16x4_t *av[2] = {&a01, &a23};
            for (int t = 0; t < NT; t++) {
                const int8x16_t a0 = av[t / 2]->val[2 * (t % 2)], a1 = av[t / 2]->val[2 * (t % 2) + 1];
                NEON_FN(gmk_sub)(1, w0.val, sc.val[0], a0, a0, &r[t], &isum[t]);
                NEON_FN(gmk_sub)(1, w1.val, sc.val[1], a1, a1, &r[t], &isum[t]);
            }
        }
        const float32x4_t d = vld1q_f32((const float *)pk);
        GM_NEXT(pk, 16);
        GM_NEXT(pa, 64); /* the bsums (Q4_K's) */
        const float32x4_t yd = vld1q_f32((const float *)pa);
        GM_NEXT(pa, 16);
        float32x4_t dy[4];
        NEON_FN(mul_lanes)(d, yd, dy);
        for (int t = 0; t < NT; t++)
            acc[t] = vaddq_f32(acc[t], vmulq_f32(dy[t], vcvtq_f32_s32(isum[t])));
    }
    NEON_FN(gm_store)(NT, acc, y, ys);
}

/* ======================== Q4_0 in the x4 layout ======================== */

/*
 * Decode's GEMV (and the 2-4 token tiles) on the x4 layout of repack.h: a
 * tile of four blocks brings the four rows' sixteen scales in one 32-byte
 * load (LD4 deinterleaves them into one vector per block, lanes = rows) and
 * each block's four rows of quants in one 64-byte load.  Per block and
 * token the four rows' sums are reduced together (pairwise adds, exact);
 * the nibbles enter unsigned, their offset of 8 as one more dot product
 * per token (-8 times the activations, the accumulators' start), so the
 * sums are the reference's exact integers; the float steps of
 * vec_dot_q4_0 run in the lanes, in its order:
 * ((float)sumi * dx) * dy, added block by block.  Past the tiles the blocks
 * are GGUF's, four rows side by side.
 *
 * IQ4_NL's x4 layout is the same bytes (repack.h): its nibbles go through
 * the codebook (TBL) to the signed values, which the dots take as they are
 * (DOT_WIDE: they span -127..113), with no offset, and its float steps are
 * vec_dot_iq4_nl's, (dx * dy) * (float)sumi.
 */
NEON_INLINE void NEON_FN(x4_block)(const int type, const int NT, const int8x16_t lo[4], const int8x16_t hi[4],
                                   float32x4_t dx, int64_t b, const char *a, size_t a_row, float32x4_t acc[4])
{
    const int8x16_t m8 = vdupq_n_s8(-8);
    for (int t = 0; t < NT; t++) {
        const block_q8_0 *yb = (const block_q8_0 *)(a + t * a_row) + b;
        const int8x16x2_t av = vld1q_s8_x2(yb->qs);
        int32x4_t v[4];
        if (type == GGML_TYPE_IQ4_NL) {
            for (int r = 0; r < 4; r++)
                v[r] = DOT_WIDE(DOT_WIDE(vdupq_n_s32(0), lo[r], av.val[0]), hi[r], av.val[1]);
        } else {
            /* the nibbles' offset: lanes summing to -8 * (sum of the activations) */
            const int32x4_t c = DOT_SMALL(DOT_SMALL(vdupq_n_s32(0), m8, av.val[0]), m8, av.val[1]);
            for (int r = 0; r < 4; r++)
                v[r] = DOT_SMALL(DOT_SMALL(c, lo[r], av.val[0]), hi[r], av.val[1]);
        }
        const float32x4_t f = vcvtq_f32_s32(vpaddq_s32(vpaddq_s32(v[0], v[1]), vpaddq_s32(v[2], v[3])));
        if (type == GGML_TYPE_IQ4_NL)
            acc[t] = vaddq_f32(acc[t], vmulq_f32(vmulq_n_f32(dx, neon_h2f(yb->d)), f));
        else
            acc[t] = vaddq_f32(acc[t], vmulq_n_f32(vmulq_f32(f, dx), neon_h2f(yb->d)));
    }
}

/* The unsigned nibbles (0..15) of four rows' 16 quant bytes q (IQ4_NL:
 * their codebook values). */
NEON_INLINE void NEON_FN(x4_nibbles)(const int type, const uint8x16_t q[4], int8x16_t lo[4], int8x16_t hi[4])
{
    const int8x16_t kv = vld1q_s8(kvalues_iq4nl);
    for (int r = 0; r < 4; r++) {
        lo[r] = vreinterpretq_s8_u8(vandq_u8(q[r], vdupq_n_u8(0x0F)));
        hi[r] = vreinterpretq_s8_u8(vshrq_n_u8(q[r], 4));
        if (type == GGML_TYPE_IQ4_NL) {
            lo[r] = vqtbl1q_s8(kv, vreinterpretq_u8_s8(lo[r]));
            hi[r] = vqtbl1q_s8(kv, vreinterpretq_u8_s8(hi[r]));
        }
    }
}

/* type: Q4_0 or IQ4_NL (the same bytes; offsets as Q4_0's) */
NEON_INLINE void NEON_FN(x4_tile)(const int type, const int NT, int64_t n, const char *w, const char *a,
                                  size_t a_row, float *y, size_t ys)
{
    const int64_t nb = n / QK8_0, nb4 = nb / 4 * 4;
    const size_t bs = sizeof(block_q4_0);
    float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    int8x16_t lo[4], hi[4];
    for (int64_t j = 0; j < nb4; j += 4) {
        const uint16x4x4_t dh = vld4_u16((const uint16_t *)(w + repack_x4_tile(j, bs))); /* val[k] lane r: row r, block j + k */
        const uint8_t *qs = (const uint8_t *)w + repack_x4_qs(GGML_TYPE_Q4_0, 0, j, bs); /* block j + k at 64 k */
#define X4_STEP(k)                                                                                            \
    do {                                                                                                      \
        const uint8x16x4_t q = vld1q_u8_x4(qs + 64 * (k));                                                    \
        NEON_FN(x4_nibbles)(type, q.val, lo, hi);                                                             \
        NEON_FN(x4_block)(type, NT, lo, hi, vcvt_f32_f16(vreinterpret_f16_u16(dh.val[k])), j + (k), a, a_row,  \
                          acc);                                                                               \
    } while (0)
        X4_STEP(0);
        X4_STEP(1);
        X4_STEP(2);
        X4_STEP(3);
#undef X4_STEP
    }
    for (int64_t b = nb4; b < nb; b++) {
        uint8x16_t q[4];
        float d[4];
        for (int r = 0; r < 4; r++) {
            q[r] = vld1q_u8(NEON_FN(x4_qs)(GGML_TYPE_Q4_0, w, r, b, nb));
            d[r] = NEON_FN(x4_d)(GGML_TYPE_Q4_0, w, r, b, nb);
        }
        NEON_FN(x4_nibbles)(type, q, lo, hi);
        NEON_FN(x4_block)(type, NT, lo, hi, vld1q_f32(d), b, a, a_row, acc);
    }
    NEON_FN(gm_store)(NT, acc, y, ys);
}

#define NEON_GEMM_X4(NAME, TYPE)                                                                              \
    static void NEON_FN(NAME)(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y,   \
                              size_t ys, int nt)                                                              \
    {                                                                                                         \
        (void)w_row;                                                                                          \
        switch (nt) {                                                                                         \
        case 1: NEON_FN(x4_tile)(TYPE, 1, n, w, a, a_row, y, ys); break;                                      \
        case 2: NEON_FN(x4_tile)(TYPE, 2, n, w, a, a_row, y, ys); break;                                      \
        case 3: NEON_FN(x4_tile)(TYPE, 3, n, w, a, a_row, y, ys); break;                                      \
        default: NEON_FN(x4_tile)(TYPE, 4, n, w, a, a_row, y, ys); break;                                     \
        }                                                                                                     \
    }
NEON_GEMM_X4(gemm_q4_0x4, GGML_TYPE_Q4_0)
NEON_GEMM_X4(gemm_iq4_nlx4, GGML_TYPE_IQ4_NL)

/* ======================== Q4_K in the x4 layout ======================== */

/*
 * Decode's GEMV (and the 2-4 token tiles) on Q4_K's x4 layout (repack.h):
 * per super-block column one 576-byte tile, read front to back.  The four
 * rows' d and dmin are one 16-byte load, word i of their 12 scale bytes one
 * more (the 6-bit unpacking of neon_k_scales runs on the four rows at once,
 * lane r: row r), and chunk c of the four rows is 128 bytes, brought into
 * the layout gm_dot32 reads: with SDOT two LD4s and UZP1/UZP2 give vector
 * k = elements 4k..4k+3 of rows 0-3 (words k of each row), so one SDOT by
 * element adds four products into each row's lane and no horizontal sums
 * are needed; plain NEON keeps the rows (row r's elements 0-15, 16-31).
 * Per token and sub-block j the lanes hold the four rows' exact integer
 * dots, multiplied by the rows' scales j and summed (isum, exact), the mins
 * by the activations' sub-block sums likewise (summ); then
 * vec_dot_q4_K's float steps, in its order, in the lanes:
 *   acc += (d * dy) * isum;  acc -= (dmin * dy) * summ.
 * The layout is one stream per group, which the hardware prefetchers
 * follow: no software prefetch.
 */

/* Lanes r of the tile's scales 0-3 (s03), 4-7 (s47), mins 0-3 and 4-7:
 * row r's four 6-bit values as bytes (neon_k_scales on four rows). */
NEON_INLINE void NEON_FN(x4k_words)(const uint8_t *tile, uint32x4_t *s03, uint32x4_t *s47, uint32x4_t *m03,
                                    uint32x4_t *m47)
{
    const uint8x16x3_t b = vld1q_u8_x3(tile + repack_x4k_sw(0, 0)); /* val[i] lane r: word i of row r */
    const uint32x4_t w0 = vreinterpretq_u32_u8(b.val[0]), w1 = vreinterpretq_u32_u8(b.val[1]);
    const uint32x4_t w2 = vreinterpretq_u32_u8(b.val[2]);
    const uint32x4_t k6 = vdupq_n_u32(0x3f3f3f3fu), k4 = vdupq_n_u32(0x0f0f0f0fu), k2 = vdupq_n_u32(0x03030303u);
    *s03 = vandq_u32(w0, k6);
    *m03 = vandq_u32(w1, k6);
    *s47 = vorrq_u32(vandq_u32(w2, k4), vshlq_n_u32(vandq_u32(vshrq_n_u32(w0, 6), k2), 4));
    *m47 = vorrq_u32(vandq_u32(vshrq_n_u32(w2, 4), k4), vshlq_n_u32(vandq_u32(vshrq_n_u32(w1, 6), k2), 4));
}

/* Chunk c of the four rows at q (row r at 32 r): lo = sub-block 2c (low
 * nibbles), hi = sub-block 2c+1, eight vectors each as gm_dot32 reads them. */
NEON_INLINE void NEON_FN(x4k_chunk)(const uint8_t *q, int8x16_t lo[8], int8x16_t hi[8])
{
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    uint8x16_t v[8];
#if GEMM_SDOT
    /* LD4 of rows 0-1 (2-3): val[k] = [r0 word k, r0 word k+4, r1 word k, r1 word k+4] */
    const uint32x4x4_t x = vld4q_u32((const uint32_t *)q), z = vld4q_u32((const uint32_t *)(q + 64));
    for (int k = 0; k < 4; k++) {
        v[k] = vreinterpretq_u8_u32(vuzp1q_u32(x.val[k], z.val[k]));
        v[k + 4] = vreinterpretq_u8_u32(vuzp2q_u32(x.val[k], z.val[k]));
    }
#else
    const uint8x16x4_t x = vld1q_u8_x4(q), z = vld1q_u8_x4(q + 64);
    for (int k = 0; k < 4; k++) {
        v[k] = x.val[k];
        v[k + 4] = z.val[k];
    }
#endif
    for (int k = 0; k < 8; k++) {
        lo[k] = vreinterpretq_s8_u8(vandq_u8(v[k], m4));
        hi[k] = vreinterpretq_s8_u8(vshrq_n_u8(v[k], 4));
    }
}

/* Bytes 4r + j -> 4j + r: [value 0 of rows 0-3, value 1 of rows 0-3, ...]. */
static const uint8_t NEON_FN(x4k_tr)[16] = {0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15};

NEON_INLINE void NEON_FN(x4k_tile)(const int NT, int64_t n, const char *w, const char *a, size_t a_row, float *y,
                                   size_t ys)
{
    const int64_t nb = n / QK_K;
    const uint8x16_t tr = vld1q_u8(NEON_FN(x4k_tr));
    const uint32x4_t ff = vdupq_n_u32(0xff);
    float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *tile = (const uint8_t *)w + (size_t)b * REPACK_X4K_TILE;
        uint32x4_t s03, s47, m03, m47;
        NEON_FN(x4k_words)(tile, &s03, &s47, &m03, &m47);
        const int32x4_t sc[8] = {
            vreinterpretq_s32_u32(vandq_u32(s03, ff)), vreinterpretq_s32_u32(vandq_u32(vshrq_n_u32(s03, 8), ff)),
            vreinterpretq_s32_u32(vandq_u32(vshrq_n_u32(s03, 16), ff)), vreinterpretq_s32_u32(vshrq_n_u32(s03, 24)),
            vreinterpretq_s32_u32(vandq_u32(s47, ff)), vreinterpretq_s32_u32(vandq_u32(vshrq_n_u32(s47, 8), ff)),
            vreinterpretq_s32_u32(vandq_u32(vshrq_n_u32(s47, 16), ff)), vreinterpretq_s32_u32(vshrq_n_u32(s47, 24))};
        const block_q8_K *yb[4];
        int32x4_t isum[4];
        for (int t = 0; t < NT; t++) {
            yb[t] = (const block_q8_K *)(a + t * a_row) + b;
            isum[t] = vdupq_n_s32(0);
        }
        for (int c = 0; c < 4; c++) {
            int8x16_t lo[8], hi[8];
            NEON_FN(x4k_chunk)(tile + repack_x4k_qs(0, c), lo, hi);
            for (int t = 0; t < NT; t++) {
                const int8x16x4_t av = vld1q_s8_x4(yb[t]->qs + 64 * c);
                isum[t] = vmlaq_s32(isum[t], NEON_FN(gm_dot32)(lo, av.val[0], av.val[1], 0), sc[2 * c]);
                isum[t] = vmlaq_s32(isum[t], NEON_FN(gm_dot32)(hi, av.val[2], av.val[3], 0), sc[2 * c + 1]);
            }
        }
        /* the mins as int16 lanes [j][r] (as gmk4_run's) */
        const uint8x16_t mt03 = vqtbl1q_u8(vreinterpretq_u8_u32(m03), tr), mt47 = vqtbl1q_u8(vreinterpretq_u8_u32(m47), tr);
        const int16x8_t m01 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mt03)));
        const int16x8_t m23 = vreinterpretq_s16_u16(vmovl_high_u8(mt03));
        const int16x8_t m45 = vreinterpretq_s16_u16(vmovl_u8(vget_low_u8(mt47)));
        const int16x8_t m67 = vreinterpretq_s16_u16(vmovl_high_u8(mt47));
        const float16x8_t dh = vreinterpretq_f16_u8(vld1q_u8(tile + repack_x4k_d(0))); /* d[4], dmin[4] */
        const float32x4_t d = vcvt_f32_f16(vget_low_f16(dh)), dmin = vcvt_high_f32_f16(dh);
        int16x8_t bs[4];
        float32x4_t dy[4], dmy[4];
        for (int t = 0; t < NT; t++) {
            bs[t] = vpaddq_s16(vld1q_s16(yb[t]->bsums), vld1q_s16(yb[t]->bsums + 8));
            dy[t] = vmulq_n_f32(d, yb[t]->d);
            dmy[t] = vmulq_n_f32(dmin, yb[t]->d);
        }
        NEON_FN(k4_step)(NT, acc, isum, m01, m23, m45, m67, dy, dmy, bs);
    }
    NEON_FN(gm_store)(NT, acc, y, ys);
}

static void NEON_FN(gemm_q4_Kx4)(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y,
                                 size_t ys, int nt)
{
    (void)w_row; /* a group is contiguous */
    switch (nt) {
    case 1: NEON_FN(x4k_tile)(1, n, w, a, a_row, y, ys); break;
    case 2: NEON_FN(x4k_tile)(2, n, w, a, a_row, y, ys); break;
    case 3: NEON_FN(x4k_tile)(3, n, w, a, a_row, y, ys); break;
    default: NEON_FN(x4k_tile)(4, n, w, a, a_row, y, ys); break;
    }
}

/* gemm_many's packing of a Q4_K x4 group: each super-block column's four
 * original blocks (repack_x4_block), packed as gmk4_pack packs GGUF rows. */
NEON_INLINE void NEON_FN(gmk4x4_pack)(int64_t nb, const char *w, int8_t *pk)
{
    for (int64_t b = 0; b < nb; b++) {
        block_q4_K xb[4];
        for (int r = 0; r < 4; r++)
            repack_x4_block(INFER_TYPE_Q4_K_X4, w, nb, r, b, &xb[r]);
        NEON_FN(gmk4_pack)(1, (const char *)xb, sizeof(block_q4_K), pk + (size_t)b * GMK4_BYTES);
    }
}

/* ======================== Q6_K in the x4 layout ======================== */

/*
 * Decode's GEMV (and the 2-4 token tiles) on Q6_K's x4 layout (repack.h):
 * per super-block column one 840-byte tile, read front to back.  A piece
 * of ql or qh is 64 bytes, row r's 16 at 16 r: with SDOT one LD4 of 32-bit
 * words makes vector k = elements 4k..4k+3 of rows 0-3, the layout
 * gm_dot16 reads (one SDOT by element adds four products into each row's
 * lane; plain NEON keeps the rows).  q6_bits unpacks bytewise, so it works
 * on the transposed bytes alike: qh piece 2h+i with ql pieces 4h+i and
 * 4h+2+i gives sub-blocks 8h+i, 8h+2+i, 8h+4+i, 8h+6+i of the four rows.
 * The quants are unsigned (0..63) and their offset of 32 is each
 * sub-block's start value, -32 bsums[g], so lane r holds row r's exact
 * sum over sub-block g of (q - 32) p; times row r's scale g (an LD4 of the
 * 64 scale bytes puts word g / 4 of row r in lane r, and two shifts take
 * out byte g % 4, sign-extended) into isum: tile_q6_K's exact integer.
 * Then vec_dot_q6_K's float step in the lanes: acc += (d * dy) * isum.
 */

/* Piece p of the four rows (64 bytes) as gm_dot16 reads them. */
NEON_INLINE void NEON_FN(x6k_piece)(const uint8_t *p, uint8x16_t v[4])
{
#if GEMM_SDOT
    const uint32x4x4_t x = vld4q_u32((const uint32_t *)p); /* val[k] lane r: word k of row r */
    for (int k = 0; k < 4; k++)
        v[k] = vreinterpretq_u8_u32(x.val[k]);
#else
    const uint8x16x4_t x = vld1q_u8_x4(p);
    for (int k = 0; k < 4; k++)
        v[k] = x.val[k];
#endif
}

NEON_INLINE void NEON_FN(x6k_tile)(const int NT, int64_t n, const char *w, const char *a, size_t a_row, float *y,
                                   size_t ys)
{
    const int64_t nb = n / QK_K;
    const int16x4_t m32 = vdup_n_s16(-32);
    float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *tile = (const uint8_t *)w + (size_t)b * REPACK_X6K_TILE;
        /* val[k] lane r: row r's scales 4k .. 4k+3 */
        const int32x4x4_t sw = vld4q_s32((const int32_t *)(tile + repack_x6k_sc(0)));
        const block_q8_K *yb[4];
        int16x8_t bs[4][2];
        int32x4_t isum[4];
        for (int t = 0; t < NT; t++) {
            yb[t] = (const block_q8_K *)(a + t * a_row) + b;
            bs[t][0] = vld1q_s16(yb[t]->bsums);
            bs[t][1] = vld1q_s16(yb[t]->bsums + 8);
            isum[t] = vdupq_n_s32(0);
        }
/* sub-block g (a literal expression) of the four rows, wv: its quants */
#define X6K_SUB(g, wv)                                                                                      \
    do {                                                                                                    \
        const int32x4_t sc_ = vshrq_n_s32(vshlq_n_s32(sw.val[(g) / 4], 24 - 8 * ((g) % 4)), 24);          \
        for (int t = 0; t < NT; t++) {                                                                      \
            const int32x4_t c_ = vmull_laneq_s16(m32, bs[t][(g) / 8], (g) % 8);                            \
            isum[t] = vmlaq_s32(isum[t], NEON_FN(gm_dot16)(c_, wv, vld1q_s8(yb[t]->qs + 16 * (g))), sc_); \
        }                                                                                                   \
    } while (0)
/* qh piece 2h+i with ql pieces 4h+i, 4h+2+i */
#define X6K_PIECES(h, i)                                                                                    \
    do {                                                                                                    \
        uint8x16_t hq_[4], la_[4], lb_[4];                                                                  \
        NEON_FN(x6k_piece)(tile + repack_x6k_qh(0, 2 * (h) + (i)), hq_);                                    \
        NEON_FN(x6k_piece)(tile + repack_x6k_ql(0, 4 * (h) + (i)), la_);                                    \
        NEON_FN(x6k_piece)(tile + repack_x6k_ql(0, 4 * (h) + 2 + (i)), lb_);                                \
        int8x16_t o_[4][4]; /* [sub-block][k] */                                                            \
        for (int k = 0; k < 4; k++) {                                                                       \
            int8x16_t q_[4];                                                                                \
            NEON_FN(q6_bits)(hq_[k], la_[k], lb_[k], q_);                                                   \
            for (int j = 0; j < 4; j++)                                                                     \
                o_[j][k] = q_[j];                                                                           \
        }                                                                                                   \
        X6K_SUB(8 * (h) + (i), o_[0]);                                                                      \
        X6K_SUB(8 * (h) + 2 + (i), o_[1]);                                                                  \
        X6K_SUB(8 * (h) + 4 + (i), o_[2]);                                                                  \
        X6K_SUB(8 * (h) + 6 + (i), o_[3]);                                                                  \
    } while (0)
        X6K_PIECES(0, 0);
        X6K_PIECES(0, 1);
        X6K_PIECES(1, 0);
        X6K_PIECES(1, 1);
#undef X6K_PIECES
#undef X6K_SUB
        const float32x4_t d = vcvt_f32_f16(vreinterpret_f16_u16(vld1_u16((const uint16_t *)(tile + repack_x6k_d(0)))));
        for (int t = 0; t < NT; t++)
            acc[t] = vaddq_f32(acc[t], vmulq_f32(vmulq_n_f32(d, yb[t]->d), vcvtq_f32_s32(isum[t])));
    }
    NEON_FN(gm_store)(NT, acc, y, ys);
}

static void NEON_FN(gemm_q6_Kx4)(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y,
                                 size_t ys, int nt)
{
    (void)w_row; /* a group is contiguous */
    switch (nt) {
    case 1: NEON_FN(x6k_tile)(1, n, w, a, a_row, y, ys); break;
    case 2: NEON_FN(x6k_tile)(2, n, w, a, a_row, y, ys); break;
    case 3: NEON_FN(x6k_tile)(3, n, w, a, a_row, y, ys); break;
    default: NEON_FN(x6k_tile)(4, n, w, a, a_row, y, ys); break;
    }
}

/* ======================== Q5_0 in the x4 layout ======================== */

/*
 * Decode's GEMV (and the 2-4 token tiles) on Q5_0's x4 layout (repack.h,
 * the x86 variants'): a tile of four block columns holds the four rows'
 * sixteen d (one LD4: a vector per block, lanes = rows), per block 16 bytes
 * of fifth bits (row r's 16 for elements 0-15 at bits 16r.., those for
 * 16-31 in the next 8 bytes) and 64 of quants (row r's 16 at 16 r).  The
 * quants are brought into gm_dot32's layout as Q6_K's pieces are (x6k_piece:
 * with SDOT vector w holds elements 4w..4w+3 (low nibbles) and 16+4w..
 * (high) of rows 0-3; plain NEON keeps row r in vector r), so that the
 * sums need no horizontal adds with SDOT.  The fifth bit of each byte: a
 * TBL takes the byte of the inverted bits that holds it (x5_idx) and a
 * CMTST tests it (x5_bit): 0xFF where the bit is clear, and q - 16 is then
 * the nibble with 0xF0 on top where it is clear, as int8: one BSL (low
 * nibbles) or SRI (high) per vector.  Each block's sums are exact and the
 * float step is vec_dot_q5_0's, (dx * dy) * (float)sumi, in the lanes; the
 * block columns past the tiles are GGUF's blocks, unpacked as gemv4_32's.
 */
#if GEMM_SDOT
/* [half][w]: byte 4r + m of vector w is element 4w + m (+16 for half 1) of
 * row r, whose bit is in byte 8 half + 2r + w / 2, bit 4 (w % 2) + m */
static const uint8_t NEON_FN(x5_idx)[2][4][16] = {{{0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6}, {0, 0, 0, 0, 2, 2, 2, 2, 4, 4, 4, 4, 6, 6, 6, 6}, {1, 1, 1, 1, 3, 3, 3, 3, 5, 5, 5, 5, 7, 7, 7, 7}, {1, 1, 1, 1, 3, 3, 3, 3, 5, 5, 5, 5, 7, 7, 7, 7}},
    {{8, 8, 8, 8, 10, 10, 10, 10, 12, 12, 12, 12, 14, 14, 14, 14}, {8, 8, 8, 8, 10, 10, 10, 10, 12, 12, 12, 12, 14, 14, 14, 14}, {9, 9, 9, 9, 11, 11, 11, 11, 13, 13, 13, 13, 15, 15, 15, 15}, {9, 9, 9, 9, 11, 11, 11, 11, 13, 13, 13, 13, 15, 15, 15, 15}}};
static const uint8_t NEON_FN(x5_bit)[4][16] = {{1, 2, 4, 8, 1, 2, 4, 8, 1, 2, 4, 8, 1, 2, 4, 8},
    {16, 32, 64, 128, 16, 32, 64, 128, 16, 32, 64, 128, 16, 32, 64, 128},
    {1, 2, 4, 8, 1, 2, 4, 8, 1, 2, 4, 8, 1, 2, 4, 8},
    {16, 32, 64, 128, 16, 32, 64, 128, 16, 32, 64, 128, 16, 32, 64, 128}};
#else
/* [half][r]: byte i of row r's vector is element i (+16), in byte
 * 8 half + 2r + i / 8 of the bits, bit i % 8 */
static const uint8_t NEON_FN(x5_idx)[2][4][16] = {{{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1}, {2, 2, 2, 2, 2, 2, 2, 2, 3, 3, 3, 3, 3, 3, 3, 3}, {4, 4, 4, 4, 4, 4, 4, 4, 5, 5, 5, 5, 5, 5, 5, 5}, {6, 6, 6, 6, 6, 6, 6, 6, 7, 7, 7, 7, 7, 7, 7, 7}},
    {{8, 8, 8, 8, 8, 8, 8, 8, 9, 9, 9, 9, 9, 9, 9, 9}, {10, 10, 10, 10, 10, 10, 10, 10, 11, 11, 11, 11, 11, 11, 11, 11}, {12, 12, 12, 12, 12, 12, 12, 12, 13, 13, 13, 13, 13, 13, 13, 13}, {14, 14, 14, 14, 14, 14, 14, 14, 15, 15, 15, 15, 15, 15, 15, 15}}};
static const uint8_t NEON_FN(x5_bit)[4][16] = {{1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128},
    {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128},
    {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128},
    {1, 2, 4, 8, 16, 32, 64, 128, 1, 2, 4, 8, 16, 32, 64, 128}};
#endif

/* The float step of a block for NT tokens: lane r of s[t] is row r's sum. */
NEON_INLINE void NEON_FN(x5_step)(const int NT, const int32x4_t s[4], float32x4_t dx, int64_t b, const char *a,
                                  size_t a_row, float32x4_t acc[4])
{
    for (int t = 0; t < NT; t++) {
        const float dy = neon_h2f(((const block_q8_0 *)(a + t * a_row) + b)->d);
        acc[t] = vaddq_f32(acc[t], vmulq_f32(vmulq_n_f32(dx, dy), vcvtq_f32_s32(s[t])));
    }
}

NEON_INLINE void NEON_FN(x5_tile)(const int NT, int64_t n, const char *w, const char *a, size_t a_row, float *y,
                                  size_t ys)
{
    const int64_t nb = n / QK8_0, nb4 = nb / 4 * 4;
    const size_t bs = sizeof(block_q5_0);
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    int32x4_t s[4];
    for (int64_t j = 0; j < nb4; j += 4) {
        const uint16x4x4_t dh = vld4_u16((const uint16_t *)(w + repack_x4_tile(j, bs))); /* val[k] lane r: row r, block j + k */
        const uint8x16x4_t hb = vld1q_u8_x4((const uint8_t *)w + repack_x4_qh(0, j, bs, 0)); /* val[k]: block j + k */
        for (int k = 0; k < 4; k++) {
            const uint8x16_t clear = vmvnq_u8(hb.val[k]);
            uint8x16_t q[4];
            NEON_FN(x6k_piece)((const uint8_t *)w + repack_x4_qs(GGML_TYPE_Q5_0, 0, j + k, bs), q);
            int8x16_t wv[8]; /* as gm_dot32 reads them */
            for (int v = 0; v < 4; v++) {
                const uint8x16_t bit = vld1q_u8(NEON_FN(x5_bit)[v]);
                const uint8x16_t c0 = vtstq_u8(vqtbl1q_u8(clear, vld1q_u8(NEON_FN(x5_idx)[0][v])), bit);
                const uint8x16_t c1 = vtstq_u8(vqtbl1q_u8(clear, vld1q_u8(NEON_FN(x5_idx)[1][v])), bit);
                const int8x16_t lo = vreinterpretq_s8_u8(vbslq_u8(m4, q[v], c0));
                const int8x16_t hi = vreinterpretq_s8_u8(vsriq_n_u8(c1, q[v], 4));
#if GEMM_SDOT
                wv[v] = lo;
                wv[4 + v] = hi;
#else
                wv[2 * v] = lo;
                wv[2 * v + 1] = hi;
#endif
            }
            for (int t = 0; t < NT; t++) {
                const int8x16x2_t av = vld1q_s8_x2(((const block_q8_0 *)(a + t * a_row) + j + k)->qs);
                s[t] = NEON_FN(gm_dot32)(wv, av.val[0], av.val[1], 1);
            }
            NEON_FN(x5_step)(NT, s, vcvt_f32_f16(vreinterpret_f16_u16(dh.val[k])), j + k, a, a_row, acc);
        }
    }
    for (int64_t b = nb4; b < nb; b++) { /* GGUF's blocks, four rows side by side */
        int8x16_t lo[4], hi[4];
        float d[4];
        for (int r = 0; r < 4; r++) {
            NEON_FN(row32)(GGML_TYPE_Q5_0, w + repack_x4_whole(r, b, nb, bs), &lo[r], &hi[r]);
            d[r] = NEON_FN(x4_d)(GGML_TYPE_Q5_0, w, r, b, nb);
        }
        for (int t = 0; t < NT; t++) {
            const int8x16x2_t av = vld1q_s8_x2(((const block_q8_0 *)(a + t * a_row) + b)->qs);
            int32x4_t v[4];
            for (int r = 0; r < 4; r++)
                v[r] = NEON_FN(dot32)(GGML_TYPE_Q5_0, lo[r], hi[r], av.val[0], av.val[1]);
            s[t] = vpaddq_s32(vpaddq_s32(v[0], v[1]), vpaddq_s32(v[2], v[3]));
        }
        NEON_FN(x5_step)(NT, s, vld1q_f32(d), b, a, a_row, acc);
    }
    NEON_FN(gm_store)(NT, acc, y, ys);
}

static void NEON_FN(gemm_q5_0x4)(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y,
                                 size_t ys, int nt)
{
    (void)w_row;
    switch (nt) {
    case 1: NEON_FN(x5_tile)(1, n, w, a, a_row, y, ys); break;
    case 2: NEON_FN(x5_tile)(2, n, w, a, a_row, y, ys); break;
    case 3: NEON_FN(x5_tile)(3, n, w, a, a_row, y, ys); break;
    default: NEON_FN(x5_tile)(4, n, w, a, a_row, y, ys); break;
    }
}

/* ================= Q8_0 x4 and Q4_0 x4s: the SDOT layouts ================= */

#if GEMM_SDOT
/*
 * Decode's GEMV (and the 2-4 token tiles) on the layouts made for SDOT by
 * element (repack.h): a tile of four block columns brings the four rows'
 * sixteen d in one LD4 (a vector per block, lanes = rows) and each block's
 * quants in one (Q4_0) or two (Q8_0) 64-byte loads, already gm_dot32's
 * eight vectors: word v of lane r is elements 4v..4v+3 of row r.  Q4_0's
 * bytes were XORed with 0x88 at repacking, so a shift left by four (low
 * nibbles: elements 4v..) and an AND with 0xF0 (high: 16 + 4v..) give 16
 * times the signed quants; their sums are exactly 16 times the reference's
 * and SCVTF with four fraction bits gives the float of the reference's sum
 * exactly (a power-of-two scale commutes with the rounding).  No offset
 * correction, no horizontal sums.  The float steps are the reference's in
 * the lanes: Q8_0 (float)sumi * (dx * dy), Q4_0 ((float)sumi * dx) * dy.
 * Past the tiles the blocks are GGUF's, four rows side by side, unpacked as
 * gemv4_32's.
 */
/*
 * The tiles' prep (dispatch.h), made once per matmul, also for one token:
 * the activations as the tiles read them with the fewest instructions, per
 * block b token t's 32 quants at 32 (nt b + t), then the tokens' d as
 * float, token t's at 32 nt nb + 4 (t nb + b) (four blocks one load).
 */
NEON_INLINE size_t NEON_FN(xs_dy_at)(const int NT, int64_t nb, int t, int64_t b)
{
    return 32 * (size_t)NT * (size_t)nb + 4 * ((size_t)t * (size_t)nb + (size_t)b);
}

static void NEON_FN(xs_prep)(int64_t n, const void *a, size_t a_row, int nt, void *prep)
{
    const int64_t nb = n / QK8_0;
    int8_t *p = prep;
    for (int t = 0; t < nt; t++)
        for (int64_t b = 0; b < nb; b++) {
            const block_q8_0 *yb = (const block_q8_0 *)((const char *)a + t * a_row) + b;
            vst1q_s8_x2(p + 32 * ((size_t)nt * (size_t)b + (size_t)t), vld1q_s8_x2(yb->qs));
            const float dy = neon_h2f(yb->d);
            memcpy(p + NEON_FN(xs_dy_at)(nt, nb, t, b), &dy, sizeof(dy));
        }
}

/* One block of NT tokens: av[t] is token t's 32 quants, dy[t] its scale. */
NEON_INLINE void NEON_FN(xs_step)(const int q8, const int NT, const int8x16_t wv[8], float32x4_t dx, const int fbits,
                                  const int8x16x2_t av[4], const float dy[4], float32x4_t acc[4])
{
    for (int t = 0; t < NT; t++) {
        const int32x4_t s = NEON_FN(gm_dot32)(wv, av[t].val[0], av[t].val[1], 0);
        const float32x4_t f = fbits ? vcvtq_n_f32_s32(s, 4) : vcvtq_f32_s32(s);
        if (q8)
            acc[t] = vaddq_f32(acc[t], vmulq_f32(f, vmulq_n_f32(dx, dy[t])));
        else
            acc[t] = vaddq_f32(acc[t], vmulq_n_f32(vmulq_f32(f, dx), dy[t]));
    }
}

/* P: the activations come from prep (xs_prep) instead of a. */
NEON_INLINE void NEON_FN(xs_tile)(const int x4, const int NT, const int P, int64_t n, const char *w, const char *a,
                                  size_t a_row, const int8_t *prep, float *y, size_t ys)
{
    const int q8 = x4 == INFER_TYPE_Q8_0_X4;
    const int base = q8 ? GGML_TYPE_Q8_0 : GGML_TYPE_Q4_0;
    const size_t bs = q8 ? sizeof(block_q8_0) : sizeof(block_q4_0);
    const int64_t nb = n / QK8_0, nb4 = nb / 4 * 4;
    const int8x16_t hi4 = vdupq_n_s8((int8_t)0xF0);
    float32x4_t acc[4] = {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)};
    const block_q8_0 *ya[4]; /* without prep: token t's block j */
    for (int t = 0; t < NT; t++)
        ya[t] = (const block_q8_0 *)(a + t * a_row);
    const int8_t *pq = prep;                                             /* with: block j's quants */
    const float *pd = P ? (const float *)(prep + NEON_FN(xs_dy_at)(NT, nb, 0, 0)) : NULL; /* and d */
    /* one pointer per stream, each load moving it on (post-indexed loads) */
    const int8_t *q = (const int8_t *)w; /* tile j / 4, then its blocks' quants */
    _Static_assert(sizeof(block_q4_0) * 16 == 32 + 4 * 64 && sizeof(block_q8_0) * 16 == 32 + 4 * 128,
                   "an SDOT layout's tile is its d, then its quants");
    for (int64_t j = 0; j < nb4; j += 4) {
        const uint16x4x4_t dh = vld4_u16((const uint16_t *)q); /* val[k] lane r: row r, block j + k */
        GM_NEXT(q, 32);
        float32x4_t dyv[4]; /* with prep, lane k: token t's d of block j + k */
        for (int t = 0; t < NT; t++)
            dyv[t] = P ? vld1q_f32(pd + (size_t)t * (size_t)nb + (size_t)j) : vdupq_n_f32(0.0f);
#define XS_STEP(k)                                                                                    \
    do {                                                                                              \
        int8x16_t wv[8];                                                                              \
        if (q8) {                                                                                     \
            const int8x16x4_t x0 = vld1q_s8_x4(q);                                                    \
            GM_NEXT(q, 64);                                                                           \
            const int8x16x4_t x1 = vld1q_s8_x4(q);                                                    \
            GM_NEXT(q, 64);                                                                           \
            for (int v = 0; v < 4; v++) {                                                             \
                wv[v] = x0.val[v];                                                                    \
                wv[4 + v] = x1.val[v];                                                                \
            }                                                                                         \
        } else {                                                                                      \
            const int8x16x4_t x = vld1q_s8_x4(q);                                                     \
            GM_NEXT(q, 64);                                                                           \
            for (int v = 0; v < 4; v++) {                                                             \
                wv[v] = vshlq_n_s8(x.val[v], 4);                                                      \
                wv[4 + v] = vandq_s8(x.val[v], hi4);                                                  \
            }                                                                                         \
        }                                                                                             \
        int8x16x2_t av[4];                                                                            \
        float dy[4];                                                                                  \
        for (int t = 0; t < NT; t++) {                                                                \
            av[t] = vld1q_s8_x2(P ? pq : ya[t][k].qs);                                                \
            GM_NEXT(pq, P ? 32 : 0);                                                                  \
            dy[t] = P ? vgetq_lane_f32(dyv[t], k) : neon_h2f(ya[t][k].d);                             \
        }                                                                                             \
        NEON_FN(xs_step)(q8, NT, wv, vcvt_f32_f16(vreinterpret_f16_u16(dh.val[k])), !q8, av, dy, acc); \
    } while (0)
        XS_STEP(0);
        XS_STEP(1);
        XS_STEP(2);
        XS_STEP(3);
#undef XS_STEP
        for (int t = 0; t < NT; t++)
            ya[t] += 4;
    }
    for (int64_t b = nb4; b < nb; b++) { /* GGUF's blocks, four rows side by side */
        int8x16_t lo[4], hi[4];
        float d[4];
        for (int r = 0; r < 4; r++) {
            NEON_FN(row32)(base, w + repack_x4_whole(r, b, nb, bs), &lo[r], &hi[r]);
            d[r] = NEON_FN(x4_d)(base, w, r, b, nb);
        }
        int8x16_t wv[8]; /* as gm_dot32 reads them: words of the four rows side by side */
        NEON_FN(gm_put32)((int8_t *)wv, lo, hi);
        int8x16x2_t av[4];
        float dy[4];
        for (int t = 0; t < NT; t++) {
            const block_q8_0 *yb = (const block_q8_0 *)(a + t * a_row) + b;
            av[t] = vld1q_s8_x2(P ? prep + 32 * (NT * b + t) : yb->qs);
            dy[t] = P ? pd[(size_t)t * (size_t)nb + (size_t)b] : neon_h2f(yb->d);
        }
        NEON_FN(xs_step)(q8, NT, wv, vld1q_f32(d), 0, av, dy, acc);
    }
    NEON_FN(gm_store)(NT, acc, y, ys);
}

#define NEON_XS_GEMM(T, X4)                                                                                  \
    static void NEON_FN(gemm_##T)(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, \
                                  size_t ys, int nt)                                                         \
    {                                                                                                        \
        (void)w_row; /* a group is contiguous */                                                             \
        switch (nt) {                                                                                        \
        case 1: NEON_FN(xs_tile)(X4, 1, 0, n, w, a, a_row, NULL, y, ys); break;                              \
        case 2: NEON_FN(xs_tile)(X4, 2, 0, n, w, a, a_row, NULL, y, ys); break;                              \
        case 3: NEON_FN(xs_tile)(X4, 3, 0, n, w, a, a_row, NULL, y, ys); break;                              \
        default: NEON_FN(xs_tile)(X4, 4, 0, n, w, a, a_row, NULL, y, ys); break;                             \
        }                                                                                                    \
    }                                                                                                        \
    static void NEON_FN(gemm_##T##p)(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row,    \
                                     const void *prep, float *y, size_t ys, int nt)                          \
    {                                                                                                        \
        (void)w_row;                                                                                         \
        switch (nt) {                                                                                        \
        case 1: NEON_FN(xs_tile)(X4, 1, 1, n, w, a, a_row, prep, y, ys); break;                              \
        case 2: NEON_FN(xs_tile)(X4, 2, 1, n, w, a, a_row, prep, y, ys); break;                              \
        case 3: NEON_FN(xs_tile)(X4, 3, 1, n, w, a, a_row, prep, y, ys); break;                              \
        default: NEON_FN(xs_tile)(X4, 4, 1, n, w, a, a_row, prep, y, ys); break;                             \
        }                                                                                                    \
    }
NEON_XS_GEMM(q8_0x4, INFER_TYPE_Q8_0_X4)
NEON_XS_GEMM(q4_0x4s, INFER_TYPE_Q4_0_X4S)
#endif

/* ============================== the driver ============================== */

/* Bytes per block of a group, and the packing and running of one group. */
NEON_INLINE size_t NEON_FN(gm_bytes)(const int type)
{
    return type == GGML_TYPE_Q4_K || type == INFER_TYPE_Q4_K_X4 ? GMK4_BYTES
           : type == GGML_TYPE_Q6_K || type == INFER_TYPE_Q6_K_X4 ? GMK6_BYTES
                                                               : GM32_BYTES;
}

NEON_INLINE void NEON_FN(gm_pack)(const int type, int64_t nb, const char *w, size_t w_row, int8_t *pk)
{
    if (type == GGML_TYPE_Q4_K)
        NEON_FN(gmk4_pack)(nb, w, w_row, pk);
    else if (type == INFER_TYPE_Q4_K_X4)
        NEON_FN(gmk4x4_pack)(nb, w, pk);
    else if (type == GGML_TYPE_Q6_K || type == INFER_TYPE_Q6_K_X4)
        NEON_FN(gmk6_pack)(type == INFER_TYPE_Q6_K_X4, nb, w, w_row, pk);
    else
        NEON_FN(gm32_pack)(type, nb, w, w_row, pk);
}

/* NT tokens (1-4, or 8 for the 32-element types: gm32_run) of a group packed
 * at pk, the tokens packed at pa by quads (gmk_pack_act for the K-quants,
 * gm32_pack_act for the others; qbytes apart); ny outputs per row
 * go to y. */
NEON_INLINE void NEON_FN(gm_run)(const int type, const int NT, int64_t nb, const int8_t *pk, const int8_t *pa,
                                 size_t qbytes, float *y, size_t ys, int ny)
{
    if (type == GGML_TYPE_Q4_K || type == INFER_TYPE_Q4_K_X4)
        NEON_FN(gmk4_run)(NT > 4 ? 4 : NT, nb, pk, pa, y, ys); /* (never called with 8) */
    else if (type == GGML_TYPE_Q6_K || type == INFER_TYPE_Q6_K_X4)
        NEON_FN(gmk6_run)(NT > 4 ? 4 : NT, nb, pk, pa, y, ys);
    else
        NEON_FN(gm32_run)(type, NT, nb, pk, pa, qbytes, y, ys, ny);
}

/* wu: NULL, or the fused gate/up form (gemm_many_glu_fn, dispatch.h): w
 * the gate rows, wu the up rows; each group of four gate rows and the same
 * four up rows are unpacked together and run on the same packed tokens,
 * into a few vectors on the stack, and only act(gate) * up is stored, with
 * silu4 / gelu4 as the table's silu / gelu (ops_neon.c) compute them. */
NEON_INLINE int NEON_FN(gm_many)(const int type, vec_dot_fn dot, int64_t n, const char *w, const char *wu,
                                 size_t w_row, int64_t n_rows, const char *a, size_t a_row, int64_t n_tok,
                                 float *y, size_t ys, enum glu_act act)
{
    const bool k_quant = type == GGML_TYPE_Q4_K || type == INFER_TYPE_Q4_K_X4 || type == GGML_TYPE_Q6_K ||
                         type == INFER_TYPE_Q6_K_X4;
    const int64_t nb = n / (k_quant ? QK_K : QK8_0);
    const size_t gbytes = (size_t)nb * NEON_FN(gm_bytes)(type);
    const size_t qbytes = (size_t)nb * (k_quant ? GMK_ABYTES : GM32_BYTES); /* a packed token quad */
    /* GM_CHUNK / 4 groups; the fused form uses two, gate and up */
    int8_t *pk = kernels_scratch(gbytes * (GM_CHUNK / 4) + qbytes * (GM_TOKS / 4));
    if (!pk)
        return -1;
    int8_t *pa = pk + gbytes * (GM_CHUNK / 4);
    const int64_t full = n_rows / 4 * 4;
    for (int64_t t0 = 0; t0 < n_tok; t0 += GM_TOKS) {
        const int64_t t1 = t0 + GM_TOKS < n_tok ? t0 + GM_TOKS : n_tok;
        for (int64_t t = t0; t < t1; t += 4) {
            const int nt = (int)(t1 - t < 4 ? t1 - t : 4);
            int8_t *pt = pa + (size_t)(t - t0) / 4 * qbytes;
            if (k_quant)
                NEON_FN(gmk_pack_act)(nb, a + (size_t)t * a_row, a_row, nt, pt);
            else
                NEON_FN(gm32_pack_act)(nb, a + (size_t)t * a_row, a_row, nt, pt);
        }
        for (int64_t r0 = 0; r0 < full; r0 += GM_CHUNK) {
            const int ng = (int)((full - r0 < GM_CHUNK ? full - r0 : GM_CHUNK) / 4);
            for (int g = 0; g < ng && !wu; g++)
                NEON_FN(gm_pack)(type, nb, w + (size_t)(r0 + 4 * g) * w_row, w_row, pk + (size_t)g * gbytes);
            for (int g = 0; g < ng; g++) {
                const size_t off = (size_t)(r0 + 4 * g) * w_row;
                if (wu) {
                    NEON_FN(gm_pack)(type, nb, w + off, w_row, pk);
                    NEON_FN(gm_pack)(type, nb, wu + off, w_row, pk + gbytes);
                }
                for (int64_t t = t0; t < t1;) {
                    const int8_t *pt = pa + (size_t)(t - t0) / 4 * qbytes;
                    float *yt = y + (size_t)t * ys + (size_t)(r0 + 4 * g);
                    const int nt = (int)(t1 - t < 4 || k_quant || !GEMM_SDOT /* (plain NEON spills with eight) */
                                             ? (t1 - t < 4 ? t1 - t : 4)
                                             : (t1 - t < 8 ? t1 - t : 8));
                    float gu[2][8 * 4]; /* the fused form's sums: [matrix][token][row] */
                    for (int m = 0; m < (wu ? 2 : 1); m++) {
                        const int8_t *gp = pk + (size_t)(wu ? m : g) * gbytes;
                        float *yo = wu ? gu[m] : yt;
                        const size_t yso = wu ? 4 : ys;
                        switch (nt) {
                        case 1: NEON_FN(gm_run)(type, 1, nb, gp, pt, qbytes, yo, yso, 1); break;
                        case 2: NEON_FN(gm_run)(type, 2, nb, gp, pt, qbytes, yo, yso, 2); break;
                        case 3: NEON_FN(gm_run)(type, 3, nb, gp, pt, qbytes, yo, yso, 3); break;
                        case 4: NEON_FN(gm_run)(type, 4, nb, gp, pt, qbytes, yo, yso, 4); break;
                        default:
                            if (!k_quant && GEMM_SDOT)
                                NEON_FN(gm_run)(type, 8, nb, gp, pt, qbytes, yo, yso, nt);
                            break;
                        }
                    }
                    for (int k = 0; k < nt && wu; k++) {
                        const float32x4_t gv = vld1q_f32(gu[0] + 4 * k), uv = vld1q_f32(gu[1] + 4 * k);
                        vst1q_f32(yt + (size_t)k * ys, vmulq_f32(act == GLU_GELU ? gelu4(gv) : silu4(gv), uv));
                    }
                    t += nt;
                }
            }
        }
    }
    for (int64_t r = full; r < n_rows; r++) /* the rows after the last group */
        for (int64_t t = 0; t < n_tok; t++) {
            const char *at = a + (size_t)t * a_row;
            float v = dot(n, w + (size_t)r * w_row, at);
            if (wu) { /* one lane of silu4 / gelu4 */
                const float32x4_t gv = vdupq_n_f32(v);
                v = vgetq_lane_f32(act == GLU_GELU ? gelu4(gv) : silu4(gv), 0) * dot(n, wu + (size_t)r * w_row, at);
            }
            y[(size_t)t * ys + (size_t)r] = v;
        }
    return 0;
}

#define NEON_GEMM_MANY(T, TYPE, DOT)                                                                         \
    static int NEON_FN(gemm_many_##T)(int64_t n, const void *w, size_t w_row, int64_t n_rows, const void *a,  \
                                      size_t a_row, int64_t n_tok, float *y, size_t ys)                       \
    {                                                                                                        \
        return NEON_FN(gm_many)(TYPE, NEON_FN(DOT), n, w, NULL, w_row, n_rows, a, a_row, n_tok, y, ys,       \
                                GLU_SILU);                                                                   \
    }                                                                                                        \
    /* no many_prep on these variants: prep is always NULL */                                                \
    static int NEON_FN(gemm_many_##T##_glu)(int64_t n, const void *wg, const void *wu, size_t w_row,         \
                                            int64_t n_rows, const void *a, size_t a_row, const void *prep,   \
                                            int64_t n_tok, float *y, size_t ys, enum glu_act act)            \
    {                                                                                                        \
        (void)prep;                                                                                          \
        return NEON_FN(gm_many)(TYPE, NEON_FN(DOT), n, wg, wu, w_row, n_rows, a, a_row, n_tok, y, ys, act);  \
    }
NEON_GEMM_MANY(q4_0, GGML_TYPE_Q4_0, vec_dot_q4_0_q8_0)
NEON_GEMM_MANY(q4_0x4, INFER_TYPE_Q4_0_X4, vec_dot_q4_0_q8_0)
NEON_GEMM_MANY(q5_0, GGML_TYPE_Q5_0, vec_dot_q5_0_q8_0)
NEON_GEMM_MANY(q5_0x4, INFER_TYPE_Q5_0_X4, vec_dot_q5_0_q8_0)
NEON_GEMM_MANY(q8_0, GGML_TYPE_Q8_0, vec_dot_q8_0_q8_0)
NEON_GEMM_MANY(iq4_nl, GGML_TYPE_IQ4_NL, vec_dot_iq4_nl_q8_0)
NEON_GEMM_MANY(iq4_nlx4, INFER_TYPE_IQ4_NL_X4, vec_dot_iq4_nl_q8_0)
#if GEMM_SDOT
NEON_GEMM_MANY(q8_0x4, INFER_TYPE_Q8_0_X4, vec_dot_q8_0_q8_0)
NEON_GEMM_MANY(q4_0x4s, INFER_TYPE_Q4_0_X4S, vec_dot_q4_0_q8_0)
#endif
NEON_GEMM_MANY(q4_K, GGML_TYPE_Q4_K, vec_dot_q4_K_q8_K)
NEON_GEMM_MANY(q4_Kx4, INFER_TYPE_Q4_K_X4, vec_dot_q4_K_q8_K)
NEON_GEMM_MANY(q6_K, GGML_TYPE_Q6_K, vec_dot_q6_K_q8_K)
NEON_GEMM_MANY(q6_Kx4, INFER_TYPE_Q6_K_X4, vec_dot_q6_K_q8_K)

/* Install the gemm_many kernels, from GM_MIN_TOK tokens on: the unpacking
 * of the weights is paid once per call, which 2-4 sequences decoding
 * together would not repay (the gemm tiles serve them). */
#define GM_MIN_TOK 8
#if GEMM_SDOT
/* The SDOT layouts' tiles read their activations from the prep, from one
 * token on (a GEMV's 1/4 of the rows' passes over the activations then
 * cost one load of a block's quants and one of four blocks' d). */
static void NEON_FN(xs_use_prep)(struct kernel_type_ops *o, gemm_prep_fn gemm_prep)
{
    o->act_prep = NEON_FN(xs_prep);
    o->gemm_prep = gemm_prep;
    o->prep_min_tok = 1;
}
#endif
static void NEON_FN(fill_gemm_many)(struct kernel_table *t)
{
    t->types[GGML_TYPE_Q4_0].gemm_many = NEON_FN(gemm_many_q4_0);
    t->types[GGML_TYPE_Q4_0].gemm_many_glu = NEON_FN(gemm_many_q4_0_glu);
    t->types[GGML_TYPE_Q5_0].gemm_many = NEON_FN(gemm_many_q5_0);
    t->types[GGML_TYPE_Q5_0].gemm_many_glu = NEON_FN(gemm_many_q5_0_glu);
    kernels_use_x4(t, GGML_TYPE_Q5_0, NEON_FN(gemm_q5_0x4)); /* the x86 variants' layout */
    t->types[INFER_TYPE_Q5_0_X4].gemm_many = NEON_FN(gemm_many_q5_0x4);
    t->types[INFER_TYPE_Q5_0_X4].gemm_many_glu = NEON_FN(gemm_many_q5_0x4_glu);
    /* Q4_0 weights repacked at load into an x4 layout (repack.h; the cache
     * file is per variant): with SDOT the one made for it (x4s), else the
     * x86 variants'; rows after the last group of four stay as they were,
     * so vec_dot is Q4_0's */
    kernels_use_x4(t, GGML_TYPE_Q4_0, NEON_FN(gemm_q4_0x4));
    t->types[INFER_TYPE_Q4_0_X4].gemm_many = NEON_FN(gemm_many_q4_0x4);
    t->types[INFER_TYPE_Q4_0_X4].gemm_many_glu = NEON_FN(gemm_many_q4_0x4_glu);
#if GEMM_SDOT /* (the x86 layout's tiles stay in the table, for the tests) */
    kernels_use_layout(t, INFER_TYPE_Q4_0_X4S, NEON_FN(gemm_q4_0x4s));
    t->types[INFER_TYPE_Q4_0_X4S].gemm_many = NEON_FN(gemm_many_q4_0x4s);
    t->types[INFER_TYPE_Q4_0_X4S].gemm_many_glu = NEON_FN(gemm_many_q4_0x4s_glu);
    NEON_FN(xs_use_prep)(&t->types[INFER_TYPE_Q4_0_X4S], NEON_FN(gemm_q4_0x4sp));
#endif
    /* IQ4_NL: Q4_0 x4's bytes, the nibbles through the codebook; many
     * tokens as Q8_0, on the codebook values */
    t->types[GGML_TYPE_IQ4_NL].gemm_many = NEON_FN(gemm_many_iq4_nl);
    t->types[GGML_TYPE_IQ4_NL].gemm_many_glu = NEON_FN(gemm_many_iq4_nl_glu);
    kernels_use_x4(t, GGML_TYPE_IQ4_NL, NEON_FN(gemm_iq4_nlx4));
    t->types[INFER_TYPE_IQ4_NL_X4].gemm_many = NEON_FN(gemm_many_iq4_nlx4);
    t->types[INFER_TYPE_IQ4_NL_X4].gemm_many_glu = NEON_FN(gemm_many_iq4_nlx4_glu);
    t->types[GGML_TYPE_Q8_0].gemm_many = NEON_FN(gemm_many_q8_0);
    t->types[GGML_TYPE_Q8_0].gemm_many_glu = NEON_FN(gemm_many_q8_0_glu);
#if GEMM_SDOT /* Q8_0 likewise (its x4 layout is for SDOT only) */
    kernels_use_x4(t, GGML_TYPE_Q8_0, NEON_FN(gemm_q8_0x4));
    t->types[INFER_TYPE_Q8_0_X4].gemm_many = NEON_FN(gemm_many_q8_0x4);
    t->types[INFER_TYPE_Q8_0_X4].gemm_many_glu = NEON_FN(gemm_many_q8_0x4_glu);
    NEON_FN(xs_use_prep)(&t->types[INFER_TYPE_Q8_0_X4], NEON_FN(gemm_q8_0x4p));
#endif
    t->types[GGML_TYPE_Q4_K].gemm_many = NEON_FN(gemm_many_q4_K);
    t->types[GGML_TYPE_Q4_K].gemm_many_glu = NEON_FN(gemm_many_q4_K_glu);
    /* Q4_K likewise (no tail: a tile is one super-block of four rows) */
    kernels_use_x4(t, GGML_TYPE_Q4_K, NEON_FN(gemm_q4_Kx4));
    t->types[INFER_TYPE_Q4_K_X4].gemm_many = NEON_FN(gemm_many_q4_Kx4);
    t->types[INFER_TYPE_Q4_K_X4].gemm_many_glu = NEON_FN(gemm_many_q4_Kx4_glu);
    t->types[GGML_TYPE_Q6_K].gemm_many = NEON_FN(gemm_many_q6_K);
    t->types[GGML_TYPE_Q6_K].gemm_many_glu = NEON_FN(gemm_many_q6_K_glu);
    /* Q6_K likewise (the x86 variants' layout) */
    kernels_use_x4(t, GGML_TYPE_Q6_K, NEON_FN(gemm_q6_Kx4));
    t->types[INFER_TYPE_Q6_K_X4].gemm_many = NEON_FN(gemm_many_q6_Kx4);
    t->types[INFER_TYPE_Q6_K_X4].gemm_many_glu = NEON_FN(gemm_many_q6_Kx4_glu);
    t->many_min_tok = GM_MIN_TOK;
}
