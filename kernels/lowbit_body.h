/*
 * lowbit_body.h - the Q2_K, Q3_K and IQ4_XS x Q8_K dot products and gemm
 * tiles, written once over a vector width: kernels/x86/quants_avx2.c
 * includes it with 32-byte vectors (avx2, and through its table avxvnni),
 * kernels/x86/quants_avx512.c with 64-byte vectors, and
 * kernels/arm/quants_neon_body.h with 16-byte vectors (neon and dotprod).
 *
 * A super-block of 256 elements is taken in QK_K / QV_W chunks of QV_W
 * consecutive elements.  Each row's block is unpacked once per tile (the
 * quants of every chunk, the per-chunk scale operand, d and dmin) and
 * dotted with each token's Q8_K block:
 *   isum = sum_g s_g * sum_{i in g} q_i p_i   over the 16 groups of 16
 * with the group scales s_g (IQ4_XS: its eight sub-block scales, each for
 * two groups).  Q3_K's quants are used as q + 4 (0..7, unsigned, for the
 * unsigned-by-signed byte products of x86) and 4 * sum_g s_g bsums_g is
 * taken off again; Q2_K's minimums come from the bsums as Q4_K's do.  The
 * integer sums are exact in any order, and the float steps per block are
 * the reference's (quants.c) in its order, so every instance returns the
 * reference's bits, and gemm those of vec_dot.
 *
 * The includer includes quants.h and defines:
 *   qv, qacc, qscl      a vector of QV_W int8 lanes, the int32 accumulator
 *                       vector, the scale operand of one chunk
 *   QV_W                16, 32 or 64
 *   QV_ZERO()           a zero qacc
 *   QV_LOAD(p)          QV_W bytes at p
 *   QV_CRUMBS(qs, c)    the 2-bit fields (0..3) of chunk c of a Q2_K/Q3_K
 *                       block with quants qs
 *   QV_HBIT4(hm, c)     4 where the Q3_K hmask bit of the element is set
 *   QV_IQ4(qs, c)       the codebook values of chunk c of an IQ4_XS block
 *   QV_OR(a, b)
 *   QV_SCALES(sc, s)    the scale operands s[c] of every chunk from sc[16]
 *                       (int8, one per group of 16)
 *   QV_DOTU(acc, u, a, s)  acc + the lanes of sum_g s_g sum u_i a_i, for
 *                       weights u in 0..7 and activations a in -127..127
 *   QV_DOTS(acc, q, a, s)  the same for weights q in -127..127
 *   QV_HSUM(acc)        the int32 sum of acc's lanes
 *   QV_H2F(h)           fp16 -> float (exact)
 *   QV_PREFETCH(p, w_row, bytes)  prefetch the block a few rows on
 * and gets lowbit_fill(table), which installs the kernels.
 */
#define LB_INLINE static inline __attribute__((always_inline))
#define LB_UNROLL _Pragma("GCC unroll 16")
#define LB_NC (QK_K / QV_W) /* chunks per super-block */

/* One row's super-block, unpacked. */
struct lb_block {
    qv q[LB_NC];        /* quants (Q3_K: + 4) */
    qscl s[LB_NC];      /* scale operand per chunk */
    int8_t sc[16];      /* group scales */
    int8_t m[16];       /* Q2_K: group minimums */
    float d, dmin;
};

LB_INLINE size_t lb_bytes(const int type)
{
    return type == GGML_TYPE_Q2_K ? sizeof(block_q2_K) : type == GGML_TYPE_Q3_K ? sizeof(block_q3_K)
                                                                               : sizeof(block_iq4_xs);
}

/* Q3_K's scales minus 32 (q3_K_scales in quants.h), four per 32-bit word
 * as bytes: this file is for little-endian hosts (x86-64, aarch64). */
LB_INLINE void lb_q3_scales(const uint8_t *scales, int8_t sc[16])
{
    uint32_t a[3], w[4];
    memcpy(a, scales, 12);
    const uint32_t m4 = 0x0f0f0f0fu, m2 = 0x03030303u;
    w[0] = (a[0] & m4) | (a[2] & m2) << 4;
    w[1] = (a[1] & m4) | ((a[2] >> 2) & m2) << 4;
    w[2] = ((a[0] >> 4) & m4) | ((a[2] >> 4) & m2) << 4;
    w[3] = ((a[1] >> 4) & m4) | ((a[2] >> 6) & m2) << 4;
    memcpy(sc, w, 16);
    for (int j = 0; j < 16; j++)
        sc[j] = (int8_t)(sc[j] - 32);
}

LB_INLINE void lb_load(const int type, struct lb_block *k, const uint8_t *blk)
{
    if (type == GGML_TYPE_Q2_K) {
        const block_q2_K *x = (const block_q2_K *)blk;
        for (int g = 0; g < 16; g++) {
            k->sc[g] = (int8_t)(x->scales[g] & 0xF);
            k->m[g] = (int8_t)(x->scales[g] >> 4);
        }
        LB_UNROLL
        for (int c = 0; c < LB_NC; c++)
            k->q[c] = QV_CRUMBS(x->qs, c);
        k->d = QV_H2F(x->d);
        k->dmin = QV_H2F(x->dmin);
    } else if (type == GGML_TYPE_Q3_K) {
        const block_q3_K *x = (const block_q3_K *)blk;
        lb_q3_scales(x->scales, k->sc);
        LB_UNROLL
        for (int c = 0; c < LB_NC; c++)
            k->q[c] = QV_OR(QV_CRUMBS(x->qs, c), QV_HBIT4(x->hmask, c));
        k->d = QV_H2F(x->d);
        k->dmin = 0.0f;
    } else { /* sub-block j's scale (iq4_xs_scale) for groups 2j, 2j+1 */
        const block_iq4_xs *x = (const block_iq4_xs *)blk;
        const uint32_t h = x->scales_h;
        LB_UNROLL
        for (int j = 0; j < QK_K / 32; j++)
            k->sc[2 * j] = k->sc[2 * j + 1] =
                (int8_t)((((x->scales_l[j / 2] >> (4 * (j % 2))) & 0xF) | ((h >> (2 * j)) & 3) << 4) - 32);
        LB_UNROLL
        for (int c = 0; c < LB_NC; c++)
            k->q[c] = QV_IQ4(x->qs, c);
        k->d = QV_H2F(x->d);
        k->dmin = 0.0f;
    }
    QV_SCALES(k->sc, k->s);
}

/* sum_g bsums_g * v_g */
LB_INLINE int lb_bsum_dot(const int16_t *bsums, const int8_t *v)
{
    int s = 0;
    for (int g = 0; g < 16; g++)
        s += bsums[g] * v[g];
    return s;
}

/* isum of one row's block against one token's (and Q2_K's summ). */
LB_INLINE int lb_isum(const int type, const struct lb_block *k, const block_q8_K *y, int *summ)
{
    qacc acc = QV_ZERO();
    LB_UNROLL
    for (int c = 0; c < LB_NC; c++) {
        const qv a = QV_LOAD(y->qs + c * QV_W);
        if (type == GGML_TYPE_IQ4_XS)
            acc = QV_DOTS(acc, k->q[c], a, k->s[c]);
        else
            acc = QV_DOTU(acc, k->q[c], a, k->s[c]);
    }
    int isum = QV_HSUM(acc);
    if (type == GGML_TYPE_Q3_K)
        isum -= 4 * lb_bsum_dot(y->bsums, k->sc);
    if (type == GGML_TYPE_Q2_K)
        *summ = lb_bsum_dot(y->bsums, k->m);
    return isum;
}

/* NR (<= 4) rows x NT (<= 4) tokens: y[t * ys + r] = vec_dot(row r, token t). */
LB_INLINE void lb_tile(const int type, const int NR, const int NT, int64_t n, const uint8_t *w, size_t w_row,
                       const uint8_t *a, size_t a_row, float *y, size_t ys)
{
    const size_t bs = lb_bytes(type);
    float s[4][4] = {{0.0f}};
    for (int64_t b = 0; b < n / QK_K; b++) {
        LB_UNROLL
        for (int r = 0; r < NR; r++) {
            const uint8_t *blk = w + (size_t)r * w_row + (size_t)b * bs;
            QV_PREFETCH(blk, w_row, bs);
            struct lb_block k;
            lb_load(type, &k, blk);
            LB_UNROLL
            for (int t = 0; t < NT; t++) {
                const block_q8_K *yb = (const block_q8_K *)(a + (size_t)t * a_row) + b;
                int summ = 0;
                const int isum = lb_isum(type, &k, yb, &summ);
                s[r][t] += (k.d * yb->d) * (float)isum;
                if (type == GGML_TYPE_Q2_K)
                    s[r][t] -= (k.dmin * yb->d) * (float)summ;
            }
        }
    }
    LB_UNROLL
    for (int r = 0; r < NR; r++)
        LB_UNROLL
        for (int t = 0; t < NT; t++)
            y[(size_t)t * ys + (size_t)r] = s[r][t];
}

#define LB_DEFINE(T, TYPE)                                                                                    \
    static float lb_vec_dot_##T(int64_t n, const void *w, const void *a)                                      \
    {                                                                                                         \
        float y;                                                                                              \
        lb_tile(TYPE, 1, 1, n, w, 0, a, 0, &y, 1);                                                            \
        return y;                                                                                             \
    }                                                                                                         \
    static void lb_gemm_##T(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y,    \
                            size_t ys, int nt)                                                                \
    {                                                                                                         \
        switch (nt) {                                                                                         \
        case 1: lb_tile(TYPE, 4, 1, n, w, w_row, a, a_row, y, ys); break;                                     \
        case 2: lb_tile(TYPE, 4, 2, n, w, w_row, a, a_row, y, ys); break;                                     \
        case 3: lb_tile(TYPE, 4, 3, n, w, w_row, a, a_row, y, ys); break;                                     \
        default: lb_tile(TYPE, 4, 4, n, w, w_row, a, a_row, y, ys); break;                                    \
        }                                                                                                     \
    }
LB_DEFINE(q2_K, GGML_TYPE_Q2_K)
LB_DEFINE(q3_K, GGML_TYPE_Q3_K)
LB_DEFINE(iq4_xs, GGML_TYPE_IQ4_XS)
#undef LB_DEFINE

static void lowbit_fill(struct kernel_table *t)
{
    t->types[GGML_TYPE_Q2_K].vec_dot = lb_vec_dot_q2_K;
    t->types[GGML_TYPE_Q2_K].gemm = lb_gemm_q2_K;
    t->types[GGML_TYPE_Q3_K].vec_dot = lb_vec_dot_q3_K;
    t->types[GGML_TYPE_Q3_K].gemm = lb_gemm_q3_K;
    t->types[GGML_TYPE_IQ4_XS].vec_dot = lb_vec_dot_iq4_xs;
    t->types[GGML_TYPE_IQ4_XS].gemm = lb_gemm_iq4_xs;
}
