/*
 * quants_i8mm.c - the aarch64 variant "i8mm": the dotprod variant plus gemm
 * tiles built on SMMLA (ARMv8.6-A int8 matrix multiply; Neoverse V1/N2,
 * Cortex-A710 and later -- not the Raspberry Pi 5's Cortex-A76), for the
 * types of Q4_0, Q8_0 and Q4_K_M files (Q4_0, Q8_0, Q4_K, Q6_K).
 *
 * SMMLA multiplies a 2x8 int8 matrix by an 8x2 one into the four int32
 * lanes [r0.t0, r0.t1, r1.t0, r1.t1].  A tile of GEMM_ROWS = 4 weight rows by
 * GEMM_TOKS = 4 activation rows is 2 x 2 such pairs: 8 consecutive elements
 * of two rows are interleaved into one vector (vzip of 64-bit halves), for
 * the weights and for the activations alike.  The integer sums are exact, and
 * the per-block float steps are the reference's, done lane by lane on the
 * four (row, token) sums of a pair -- so every output has exactly the bits of
 * vec_dot (which stays dotprod's), as dispatch.h requires.  A short tile
 * (nt < 4) repeats its last token and drops the extra outputs.
 *
 * Compiled for armv8.2-a+dotprod+i8mm (the pragma below): dispatch.c selects
 * it only when getauxval reports ASIMDDP and I8MM.
 */
#if defined(__aarch64__)

#pragma GCC target("arch=armv8.2-a+dotprod+i8mm")

#include "neon.h"

#include <arm_neon.h>
#include <string.h>

static inline float h2f(ggml_half h)
{
    __fp16 v;
    memcpy(&v, &h, sizeof(v));
    return (float)v;
}

/* [a[0..7], b[0..7]] and [a[8..15], b[8..15]]: 8 elements of two rows. */
static inline int8x16_t zip_lo(int8x16_t a, int8x16_t b)
{
    return vreinterpretq_s8_s64(vzip1q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}
static inline int8x16_t zip_hi(int8x16_t a, int8x16_t b)
{
    return vreinterpretq_s8_s64(vzip2q_s64(vreinterpretq_s64_s8(a), vreinterpretq_s64_s8(b)));
}

/* Per-lane factors of a (row pair, token pair) result: rows repeat in
 * pairs [x0, x0, x1, x1], tokens alternate [y0, y1, y0, y1]. */
static inline float32x4_t rows_f(float x0, float x1) { return (float32x4_t){x0, x0, x1, x1}; }
static inline float32x4_t toks_f(float y0, float y1) { return (float32x4_t){y0, y1, y0, y1}; }
static inline int32x4_t rows_i(int32_t x0, int32_t x1) { return (int32x4_t){x0, x0, x1, x1}; }

/* The tile's activation rows, the last one repeated up to GEMM_TOKS. */
static inline void token_rows(const void *a, size_t a_row, int nt, const char *tp[GEMM_TOKS])
{
    for (int k = 0; k < GEMM_TOKS; k++)
        tp[k] = (const char *)a + (size_t)(k < nt ? k : nt - 1) * a_row;
}

/* Write the (row pair rp, token pair tq) sums s[rp][tq] to y. */
static inline void store_tile(float32x4_t s[2][2], float *y, size_t ys, int nt)
{
    float v[2][2][4];
    memcpy(v, s, sizeof(v));
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < GEMM_ROWS; r++)
            y[(size_t)t * ys + (size_t)r] = v[r / 2][t / 2][2 * (r & 1) + (t & 1)];
}

_Static_assert(GEMM_ROWS == 4 && GEMM_TOKS == 4, "the i8mm tiles are 2 x 2 pairs of rows and tokens");

/* ============================ Q4_0 / Q8_0 ============================ */

/* The 32 quants of a block as four 8-element chunks paired over two rows
 * (w[0..1] / a[0..1] hold elements 0..15 and 16..31 of the two rows). */
static inline void pair_chunks(const int8x16_t lo0, const int8x16_t hi0, const int8x16_t lo1, const int8x16_t hi1,
                               int8x16_t out[4])
{
    out[0] = zip_lo(lo0, lo1);
    out[1] = zip_hi(lo0, lo1);
    out[2] = zip_lo(hi0, hi1);
    out[3] = zip_hi(hi0, hi1);
}

/* Activation chunks and scales of one block of a token pair (Q8_0). */
static inline void q8_0_tokens(const char *tp[GEMM_TOKS], int64_t b, int8x16_t av[2][4], float32x4_t dy[2])
{
    for (int tq = 0; tq < 2; tq++) {
        const block_q8_0 *y0 = (const block_q8_0 *)tp[2 * tq] + b, *y1 = (const block_q8_0 *)tp[2 * tq + 1] + b;
        pair_chunks(vld1q_s8(y0->qs), vld1q_s8(y0->qs + 16), vld1q_s8(y1->qs), vld1q_s8(y1->qs + 16), av[tq]);
        dy[tq] = toks_f(h2f(y0->d), h2f(y1->d));
    }
}

static inline int32x4_t mmla4(const int8x16_t w[4], const int8x16_t a[4])
{
    int32x4_t acc = vmmlaq_s32(vdupq_n_s32(0), w[0], a[0]);
    acc = vmmlaq_s32(acc, w[1], a[1]);
    acc = vmmlaq_s32(acc, w[2], a[2]);
    return vmmlaq_s32(acc, w[3], a[3]);
}

/* s += (float)isum * dx * dy, as vec_dot_q4_0_q8_0_ref */
static void gemm_q4_0_i8mm(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y,
                           size_t ys, int nt)
{
    const char *tp[GEMM_TOKS];
    token_rows(a, a_row, nt, tp);
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    const int8x16_t s8 = vdupq_n_s8(8);
    float32x4_t s[2][2] = {{vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}, {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}};
    for (int64_t b = 0; b < n / QK8_0; b++) {
        int8x16_t av[2][4];
        float32x4_t dy[2];
        q8_0_tokens(tp, b, av, dy);
        for (int rp = 0; rp < 2; rp++) {
            const block_q4_0 *x0 = (const block_q4_0 *)((const char *)w + (size_t)(2 * rp) * w_row) + b;
            const block_q4_0 *x1 = (const block_q4_0 *)((const char *)w + (size_t)(2 * rp + 1) * w_row) + b;
            const uint8x16_t q0 = vld1q_u8(x0->qs), q1 = vld1q_u8(x1->qs);
            int8x16_t wv[4];
            pair_chunks(vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q0, m4)), s8),
                        vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q0, 4)), s8),
                        vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q1, m4)), s8),
                        vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q1, 4)), s8), wv);
            const float32x4_t dx = rows_f(h2f(x0->d), h2f(x1->d));
            for (int tq = 0; tq < 2; tq++) {
                const float32x4_t f = vmulq_f32(vmulq_f32(vcvtq_f32_s32(mmla4(wv, av[tq])), dx), dy[tq]);
                s[rp][tq] = vaddq_f32(s[rp][tq], f);
            }
        }
    }
    store_tile(s, y, ys, nt);
}

/* s += (float)isum * (dx * dy), as vec_dot_q8_0_q8_0_ref */
static void gemm_q8_0_i8mm(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y,
                           size_t ys, int nt)
{
    const char *tp[GEMM_TOKS];
    token_rows(a, a_row, nt, tp);
    float32x4_t s[2][2] = {{vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}, {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}};
    for (int64_t b = 0; b < n / QK8_0; b++) {
        int8x16_t av[2][4];
        float32x4_t dy[2];
        q8_0_tokens(tp, b, av, dy);
        for (int rp = 0; rp < 2; rp++) {
            const block_q8_0 *x0 = (const block_q8_0 *)((const char *)w + (size_t)(2 * rp) * w_row) + b;
            const block_q8_0 *x1 = (const block_q8_0 *)((const char *)w + (size_t)(2 * rp + 1) * w_row) + b;
            int8x16_t wv[4];
            pair_chunks(vld1q_s8(x0->qs), vld1q_s8(x0->qs + 16), vld1q_s8(x1->qs), vld1q_s8(x1->qs + 16), wv);
            const float32x4_t dx = rows_f(h2f(x0->d), h2f(x1->d));
            for (int tq = 0; tq < 2; tq++) {
                const float32x4_t f = vmulq_f32(vcvtq_f32_s32(mmla4(wv, av[tq])), vmulq_f32(dx, dy[tq]));
                s[rp][tq] = vaddq_f32(s[rp][tq], f);
            }
        }
    }
    store_tile(s, y, ys, nt);
}

/* ================================ Q4_K ================================ */

/* As vec_dot_q4_K_q8_K_ref per (row, token):
 *     s += (d * yd) * (float)isum;  s -= (dmin * yd) * (float)summ
 * with isum = sum_j sc[j] (q . p over sub-block j), summ = sum_j m[j] bsum32[j]. */
static void gemm_q4_K_i8mm(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y,
                           size_t ys, int nt)
{
    const char *tp[GEMM_TOKS];
    token_rows(a, a_row, nt, tp);
    const uint8x16_t m4 = vdupq_n_u8(0x0F);
    float32x4_t s[2][2] = {{vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}, {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}};
    for (int64_t b = 0; b < n / QK_K; b++) {
        const block_q4_K *x[GEMM_ROWS];
        const block_q8_K *yk[GEMM_TOKS];
        uint8_t sc[GEMM_ROWS][8], m[GEMM_ROWS][8];
        for (int r = 0; r < GEMM_ROWS; r++) {
            x[r] = (const block_q4_K *)((const char *)w + (size_t)r * w_row) + b;
            uint32_t wd[3];
            memcpy(wd, x[r]->scales, sizeof(wd));
            const uint32_t sc03 = wd[0] & 0x3f3f3f3fu, m03 = wd[1] & 0x3f3f3f3fu;
            const uint32_t sc47 = (wd[2] & 0x0f0f0f0fu) | ((wd[0] >> 6) & 0x03030303u) << 4;
            const uint32_t m47 = ((wd[2] >> 4) & 0x0f0f0f0fu) | ((wd[1] >> 6) & 0x03030303u) << 4;
            memcpy(sc[r], &sc03, 4);
            memcpy(sc[r] + 4, &sc47, 4);
            memcpy(m[r], &m03, 4);
            memcpy(m[r] + 4, &m47, 4);
        }
        for (int k = 0; k < GEMM_TOKS; k++)
            yk[k] = (const block_q8_K *)tp[k] + b;

        int32x4_t isum[2][2] = {{vdupq_n_s32(0), vdupq_n_s32(0)}, {vdupq_n_s32(0), vdupq_n_s32(0)}};
        for (int c = 0; c < 4; c++) {     /* 64 elements: sub-blocks 2c (low nibbles), 2c+1 (high) */
            for (int h = 0; h < 2; h++) { /* sub-block j = 2c + h */
                const int j = 2 * c + h;
                int8x16_t av[2][4];
                for (int tq = 0; tq < 2; tq++) {
                    const int8_t *p0 = yk[2 * tq]->qs + 32 * j, *p1 = yk[2 * tq + 1]->qs + 32 * j;
                    pair_chunks(vld1q_s8(p0), vld1q_s8(p0 + 16), vld1q_s8(p1), vld1q_s8(p1 + 16), av[tq]);
                }
                for (int rp = 0; rp < 2; rp++) {
                    const uint8_t *q0 = x[2 * rp]->qs + 32 * c, *q1 = x[2 * rp + 1]->qs + 32 * c;
                    const uint8x16_t a0 = vld1q_u8(q0), b0 = vld1q_u8(q0 + 16);
                    const uint8x16_t a1 = vld1q_u8(q1), b1 = vld1q_u8(q1 + 16);
                    int8x16_t wv[4];
                    if (h == 0)
                        pair_chunks(vreinterpretq_s8_u8(vandq_u8(a0, m4)), vreinterpretq_s8_u8(vandq_u8(b0, m4)),
                                    vreinterpretq_s8_u8(vandq_u8(a1, m4)), vreinterpretq_s8_u8(vandq_u8(b1, m4)), wv);
                    else
                        pair_chunks(vreinterpretq_s8_u8(vshrq_n_u8(a0, 4)), vreinterpretq_s8_u8(vshrq_n_u8(b0, 4)),
                                    vreinterpretq_s8_u8(vshrq_n_u8(a1, 4)), vreinterpretq_s8_u8(vshrq_n_u8(b1, 4)),
                                    wv);
                    const int32x4_t scv = rows_i(sc[2 * rp][j], sc[2 * rp + 1][j]);
                    for (int tq = 0; tq < 2; tq++)
                        isum[rp][tq] = vmlaq_s32(isum[rp][tq], mmla4(wv, av[tq]), scv);
                }
            }
        }
        /* summ per (row, token) from the 32-element activation sums */
        int16x8_t bs[GEMM_TOKS];
        for (int k = 0; k < GEMM_TOKS; k++)
            bs[k] = vpaddq_s16(vld1q_s16(yk[k]->bsums), vld1q_s16(yk[k]->bsums + 8));
        int32_t summ[GEMM_ROWS][GEMM_TOKS];
        for (int r = 0; r < GEMM_ROWS; r++) {
            const int16x8_t mm = vreinterpretq_s16_u16(vmovl_u8(vld1_u8(m[r])));
            for (int k = 0; k < GEMM_TOKS; k++)
                summ[r][k] = vaddvq_s32(vmlal_high_s16(vmull_s16(vget_low_s16(bs[k]), vget_low_s16(mm)), bs[k], mm));
        }
        for (int rp = 0; rp < 2; rp++) {
            const float32x4_t d = rows_f(h2f(x[2 * rp]->d), h2f(x[2 * rp + 1]->d));
            const float32x4_t dmin = rows_f(h2f(x[2 * rp]->dmin), h2f(x[2 * rp + 1]->dmin));
            for (int tq = 0; tq < 2; tq++) {
                const float32x4_t yd = toks_f(yk[2 * tq]->d, yk[2 * tq + 1]->d);
                const int32x4_t sm = {summ[2 * rp][2 * tq], summ[2 * rp][2 * tq + 1], summ[2 * rp + 1][2 * tq],
                                      summ[2 * rp + 1][2 * tq + 1]};
                s[rp][tq] = vaddq_f32(s[rp][tq], vmulq_f32(vmulq_f32(d, yd), vcvtq_f32_s32(isum[rp][tq])));
                s[rp][tq] = vsubq_f32(s[rp][tq], vmulq_f32(vmulq_f32(dmin, yd), vcvtq_f32_s32(sm)));
            }
        }
    }
    store_tile(s, y, ys, nt);
}

/* ================================ Q6_K ================================ */

/* Unsigned quants (0..63) with the offset of 32 taken back through the
 * activation sums, as quants_neon_body.h; elements 128h + 32k + l of a row
 * (l < 32) form the groups 8h + 2k (l < 16) and 8h + 2k + 1. */
static void gemm_q6_K_i8mm(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y,
                           size_t ys, int nt)
{
    const char *tp[GEMM_TOKS];
    token_rows(a, a_row, nt, tp);
    const uint8x16_t m4 = vdupq_n_u8(0x0F), m3 = vdupq_n_u8(0x03);
    float32x4_t s[2][2] = {{vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}, {vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}};
    for (int64_t b = 0; b < n / QK_K; b++) {
        const block_q6_K *x[GEMM_ROWS];
        const block_q8_K *yk[GEMM_TOKS];
        for (int r = 0; r < GEMM_ROWS; r++)
            x[r] = (const block_q6_K *)((const char *)w + (size_t)r * w_row) + b;
        for (int k = 0; k < GEMM_TOKS; k++)
            yk[k] = (const block_q8_K *)tp[k] + b;

        int32x4_t isum[2][2] = {{vdupq_n_s32(0), vdupq_n_s32(0)}, {vdupq_n_s32(0), vdupq_n_s32(0)}};
        for (int h = 0; h < 2; h++) {
            for (int k = 0; k < 4; k++) {
                const int g = 8 * h + 2 * k; /* groups g (l < 16) and g + 1 */
                int8x16_t av[2][4];          /* [tq]: group g chunks 0,1, group g+1 chunks 2,3 */
                for (int tq = 0; tq < 2; tq++) {
                    const int8_t *p0 = yk[2 * tq]->qs + 16 * g, *p1 = yk[2 * tq + 1]->qs + 16 * g;
                    pair_chunks(vld1q_s8(p0), vld1q_s8(p0 + 16), vld1q_s8(p1), vld1q_s8(p1 + 16), av[tq]);
                }
                for (int rp = 0; rp < 2; rp++) {
                    int8x16_t v[2][2]; /* [row of the pair][l < 16, l >= 16] */
                    for (int e = 0; e < 2; e++) {
                        const block_q6_K *xr = x[2 * rp + e];
                        const uint8_t *ql = xr->ql + 64 * h + 32 * (k & 1), *qh = xr->qh + 32 * h;
                        for (int half = 0; half < 2; half++) {
                            const uint8x16_t l = vld1q_u8(ql + 16 * half), hb = vld1q_u8(qh + 16 * half);
                            const uint8x16_t lo4 = k < 2 ? vandq_u8(l, m4) : vshrq_n_u8(l, 4);
                            uint8x16_t top;
                            switch (k) { /* bits 2k, 2k+1 of qh, moved to bits 4, 5 */
                            case 0: top = vshlq_n_u8(vandq_u8(hb, m3), 4); break;
                            case 1: top = vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 2), m3), 4); break;
                            case 2: top = vshlq_n_u8(vandq_u8(vshrq_n_u8(hb, 4), m3), 4); break;
                            default: top = vshlq_n_u8(vshrq_n_u8(hb, 6), 4); break;
                            }
                            v[e][half] = vreinterpretq_s8_u8(vorrq_u8(lo4, top));
                        }
                    }
                    int8x16_t wv[4];
                    pair_chunks(v[0][0], v[0][1], v[1][0], v[1][1], wv);
                    const int32x4_t sc0 = rows_i(x[2 * rp]->scales[g], x[2 * rp + 1]->scales[g]);
                    const int32x4_t sc1 = rows_i(x[2 * rp]->scales[g + 1], x[2 * rp + 1]->scales[g + 1]);
                    for (int tq = 0; tq < 2; tq++) {
                        int32x4_t d0 = vmmlaq_s32(vdupq_n_s32(0), wv[0], av[tq][0]);
                        d0 = vmmlaq_s32(d0, wv[1], av[tq][1]);
                        int32x4_t d1 = vmmlaq_s32(vdupq_n_s32(0), wv[2], av[tq][2]);
                        d1 = vmmlaq_s32(d1, wv[3], av[tq][3]);
                        isum[rp][tq] = vmlaq_s32(vmlaq_s32(isum[rp][tq], d0, sc0), d1, sc1);
                    }
                }
            }
        }
        /* 32 * sum_g sc[g] * bsums[g] per (row, token) */
        int32_t corr[GEMM_ROWS][GEMM_TOKS];
        for (int r = 0; r < GEMM_ROWS; r++) {
            const int8x16_t scv = vld1q_s8(x[r]->scales);
            const int16x8_t s0 = vmovl_s8(vget_low_s8(scv)), s1 = vmovl_high_s8(scv);
            for (int k = 0; k < GEMM_TOKS; k++) {
                const int16x8_t b0 = vld1q_s16(yk[k]->bsums), b1 = vld1q_s16(yk[k]->bsums + 8);
                int32x4_t c = vmull_s16(vget_low_s16(s0), vget_low_s16(b0));
                c = vmlal_high_s16(c, s0, b0);
                c = vmlal_s16(c, vget_low_s16(s1), vget_low_s16(b1));
                c = vmlal_high_s16(c, s1, b1);
                corr[r][k] = 32 * vaddvq_s32(c);
            }
        }
        for (int rp = 0; rp < 2; rp++) {
            const float32x4_t d = rows_f(h2f(x[2 * rp]->d), h2f(x[2 * rp + 1]->d));
            for (int tq = 0; tq < 2; tq++) {
                const float32x4_t yd = toks_f(yk[2 * tq]->d, yk[2 * tq + 1]->d);
                const int32x4_t cv = {corr[2 * rp][2 * tq], corr[2 * rp][2 * tq + 1], corr[2 * rp + 1][2 * tq],
                                      corr[2 * rp + 1][2 * tq + 1]};
                const float32x4_t fi = vcvtq_f32_s32(vsubq_s32(isum[rp][tq], cv));
                s[rp][tq] = vaddq_f32(s[rp][tq], vmulq_f32(vmulq_f32(d, yd), fi));
            }
        }
    }
    store_tile(s, y, ys, nt);
}

void kernels_fill_i8mm(struct kernel_table *t)
{
    kernels_fill_dotprod(t);
    t->types[GGML_TYPE_Q4_0].gemm = gemm_q4_0_i8mm;
    t->types[GGML_TYPE_Q8_0].gemm = gemm_q8_0_i8mm;
    t->types[GGML_TYPE_Q4_K].gemm = gemm_q4_K_i8mm;
    t->types[GGML_TYPE_Q6_K].gemm = gemm_q6_K_i8mm;
    t->name = "i8mm";
}

#else
typedef int quants_i8mm_empty; /* ISO C wants a declaration in every file */
#endif
