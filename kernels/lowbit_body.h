/*
 * lowbit_body.h - the Q2_K, Q3_K and IQ4_XS x Q8_K dot products and gemm
 * tiles, written once over a vector width: kernels/x86/lowbit_x86.h
 * supplies 32-byte vectors (avx2 in quants_avx2.c, avxvnni in
 * gemm_avxvnni.c) and kernels/x86/quants_avx512.c 64-byte ones, and
 * kernels/arm/quants_neon_body.h 16-byte vectors (neon and dotprod).
 *
 * A super-block of 256 elements is taken in QK_K / QV_W chunks of QV_W
 * elements.  Which elements a chunk holds is the includer's choice (the
 * order in which the quants unpack cheaply at its width); it loads each
 * token's activations in the same order (QV_ACTK, QV_ACTI), so the
 * products pair up.  Each row's block is unpacked once per tile (quants,
 * scale operands, the operand against the bsums, d, dmin) and dotted with
 * each token's Q8_K block:
 *   isum = sum_g s_g * sum_{i in g} q_i p_i   over the 16 groups of 16
 * with the group scales s_g (IQ4_XS: its eight sub-block scales, each for
 * two groups).  Q3_K's quants are used as q + 4 (0..7, unsigned, for the
 * unsigned-by-signed byte products of x86) and 4 * sum_g s_g bsums_g is
 * taken off again with one vector multiply-add against the bsums; IQ4_XS's
 * codebook may likewise be biased by QV_IQ4_BIAS (128 where vpdpbusd takes
 * the values whole) and BIAS * sum_g s_g bsums_g taken off; Q2_K's
 * minimums come from the bsums as Q4_K's do.  The integer lanes of four
 * (row, token) pairs are reduced together (four rows for one token, four
 * tokens for one row), as the Q4_K tiles do.  The integer sums are exact
 * in any order, and the float steps per block are the reference's
 * (quants.c) in its order, so every instance returns the reference's bits,
 * and gemm those of vec_dot.
 *
 * The includer includes quants.h and defines:
 *   qv, qacc, qscl      a vector of QV_W int8 lanes, the int32 accumulator,
 *                       the scale operand of a chunk (IQ4_XS: of a pair)
 *   qsc8, qcor          the 16 group scales as int8 lanes; the operand
 *                       against the 16 int16 bsums
 *   QV_W                16, 32 or 64
 *   QV_ZERO()           a zero qacc
 *   QV_CRUMBS(qs, c)    the 2-bit fields (0..3) of chunk c of a Q2_K block
 *   QV_Q3(qs, hm, c)    the quants + 4 (0..7) of chunk c of a Q3_K block
 *   QV_ACTK(qs, c)      the activations of chunk c in the order of those
 *   QV_IQ4(qs, c)       the codebook values (+ QV_IQ4_BIAS) of chunk c of
 *                       an IQ4_XS block; chunks 2p and 2p + 1 (pair p) hold
 *                       the same groups, so they share a scale operand
 *   QV_ACTI(qs, c)      the activations of chunk c in the order of those
 *   QV_IQ4_BIAS         0 or 128
 *   QV_SC_Q2(x, sc, m)  the scales (scales & 15) and minimums (>> 4)
 *   QV_SC_Q3(x)         a Q3_K block's sixteen scales minus 32
 *   QV_SC_IQ4(x)        an IQ4_XS block's sub-block scale j (minus 32) in
 *                       groups 2j and 2j + 1
 *   QV_SCALESK(sc, s)   s[c], the scale operands of Q2_K/Q3_K's chunks
 *   QV_SCALESI(sc, s)   s[p], those of IQ4_XS's pairs
 *   QV_COR(sc, k)       the operand k * sc_g (k a small constant)
 *   QV_BSUM(acc, bs, cor)  acc + lanes of sum_g bs_g cor_g
 *   QV_DOTK(acc, u, a, s)  acc + lanes of sum_g s_g sum u_i a_i, u in 0..7
 *   QV_DOTI(acc, lo, alo, hi, ahi, s)  the same over the pair of chunks
 *                       lo, hi of IQ4_XS values
 *   QV_HSUM4(v, out)    out[i] = the int32 sum of v[i]'s lanes, i < 4
 *   QV_H2F(h)           fp16 -> float (exact)
 *   QV_PREFETCH(p, w_row, bytes)  prefetch the block a few rows on
 * and gets lowbit_fill(table), which installs the kernels.
 */
#define LB_INLINE static inline __attribute__((always_inline))
#define LB_UNROLL _Pragma("GCC unroll 16")
#define LB_NC (QK_K / QV_W) /* chunks per super-block */

/* One row's super-block, unpacked. */
struct lb_block {
    qv q[LB_NC];   /* quants (Q3_K: + 4; IQ4_XS: + QV_IQ4_BIAS) */
    qscl s[LB_NC]; /* scale operand per chunk (IQ4_XS: per pair) */
    qcor c;        /* against the bsums: Q2_K m, Q3_K -4 sc, IQ4_XS -BIAS sc */
    float d, dmin;
};

LB_INLINE size_t lb_bytes(const int type)
{
    return type == GGML_TYPE_Q2_K ? sizeof(block_q2_K) : type == GGML_TYPE_Q3_K ? sizeof(block_q3_K)
                                                                               : sizeof(block_iq4_xs);
}

LB_INLINE void lb_load(const int type, struct lb_block *k, const uint8_t *blk)
{
    if (type == GGML_TYPE_Q2_K) {
        const block_q2_K *x = (const block_q2_K *)blk;
        qsc8 sc, m;
        QV_SC_Q2(x, sc, m);
        LB_UNROLL
        for (int c = 0; c < LB_NC; c++)
            k->q[c] = QV_CRUMBS(x->qs, c);
        QV_SCALESK(sc, k->s);
        k->c = QV_COR(m, 1);
        k->d = QV_H2F(x->d);
        k->dmin = QV_H2F(x->dmin);
    } else if (type == GGML_TYPE_Q3_K) {
        const block_q3_K *x = (const block_q3_K *)blk;
        const qsc8 sc = QV_SC_Q3(x);
        LB_UNROLL
        for (int c = 0; c < LB_NC; c++)
            k->q[c] = QV_Q3(x->qs, x->hmask, c);
        QV_SCALESK(sc, k->s);
        k->c = QV_COR(sc, -4);
        k->d = QV_H2F(x->d);
        k->dmin = 0.0f;
    } else {
        const block_iq4_xs *x = (const block_iq4_xs *)blk;
        const qsc8 sc = QV_SC_IQ4(x);
        LB_UNROLL
        for (int c = 0; c < LB_NC; c++)
            k->q[c] = QV_IQ4(x->qs, c);
        QV_SCALESI(sc, k->s);
        if (QV_IQ4_BIAS)
            k->c = QV_COR(sc, -QV_IQ4_BIAS);
        k->d = QV_H2F(x->d);
        k->dmin = 0.0f;
    }
}

/* isum lanes of one row's block against one token's (and Q2_K's summ lanes). */
LB_INLINE qacc lb_dot(const int type, const struct lb_block *k, const block_q8_K *y, qacc *summ)
{
    qacc acc = QV_ZERO();
    if (type == GGML_TYPE_IQ4_XS) {
        LB_UNROLL
        for (int p = 0; p < LB_NC / 2; p++)
            acc = QV_DOTI(acc, k->q[2 * p], QV_ACTI(y->qs, 2 * p), k->q[2 * p + 1], QV_ACTI(y->qs, 2 * p + 1),
                          k->s[p]);
        if (QV_IQ4_BIAS)
            acc = QV_BSUM(acc, y->bsums, k->c);
        return acc;
    }
    LB_UNROLL
    for (int c = 0; c < LB_NC; c++)
        acc = QV_DOTK(acc, k->q[c], QV_ACTK(y->qs, c), k->s[c]);
    if (type == GGML_TYPE_Q3_K)
        acc = QV_BSUM(acc, y->bsums, k->c);
    if (type == GGML_TYPE_Q2_K)
        *summ = QV_BSUM(QV_ZERO(), y->bsums, k->c);
    return acc;
}

/* NR (<= 4) rows x NT (<= 4) tokens: y[t * ys + r] = vec_dot(row r, token t). */
LB_INLINE void lb_tile(const int type, const int NR, const int NT, int64_t n, const uint8_t *w, size_t w_row,
                       const uint8_t *a, size_t a_row, float *y, size_t ys)
{
    const size_t bs = lb_bytes(type);
    float s[4][4] = {{0.0f}};
    for (int64_t b = 0; b < n / QK_K; b++) {
        const block_q8_K *yb[4];
        float dy[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        LB_UNROLL
        for (int t = 0; t < NT; t++) {
            yb[t] = (const block_q8_K *)(a + (size_t)t * a_row) + b;
            dy[t] = yb[t]->d;
        }
        if (NT == 1) { /* reduce over the rows */
            qacc v[4] = {QV_ZERO(), QV_ZERO(), QV_ZERO(), QV_ZERO()};
            qacc m[4] = {QV_ZERO(), QV_ZERO(), QV_ZERO(), QV_ZERO()};
            float dx[4] = {0.0f, 0.0f, 0.0f, 0.0f}, dm[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            LB_UNROLL
            for (int r = 0; r < NR; r++) {
                const uint8_t *blk = w + (size_t)r * w_row + (size_t)b * bs;
                QV_PREFETCH(blk, w_row, bs);
                struct lb_block k;
                lb_load(type, &k, blk);
                v[r] = lb_dot(type, &k, yb[0], &m[r]);
                dx[r] = k.d;
                dm[r] = k.dmin;
            }
            int32_t is[4], ms[4];
            QV_HSUM4(v, is);
            if (type == GGML_TYPE_Q2_K)
                QV_HSUM4(m, ms);
            LB_UNROLL
            for (int r = 0; r < NR; r++) {
                s[r][0] += (dx[r] * dy[0]) * (float)is[r];
                if (type == GGML_TYPE_Q2_K)
                    s[r][0] -= (dm[r] * dy[0]) * (float)ms[r];
            }
            continue;
        }
        LB_UNROLL
        for (int r = 0; r < NR; r++) { /* reduce over the tokens */
            const uint8_t *blk = w + (size_t)r * w_row + (size_t)b * bs;
            QV_PREFETCH(blk, w_row, bs);
            struct lb_block k;
            lb_load(type, &k, blk);
            qacc v[4] = {QV_ZERO(), QV_ZERO(), QV_ZERO(), QV_ZERO()};
            qacc m[4] = {QV_ZERO(), QV_ZERO(), QV_ZERO(), QV_ZERO()};
            LB_UNROLL
            for (int t = 0; t < NT; t++)
                v[t] = lb_dot(type, &k, yb[t], &m[t]);
            int32_t is[4], ms[4];
            QV_HSUM4(v, is);
            if (type == GGML_TYPE_Q2_K)
                QV_HSUM4(m, ms);
            LB_UNROLL
            for (int t = 0; t < NT; t++) {
                s[r][t] += (k.d * dy[t]) * (float)is[t];
                if (type == GGML_TYPE_Q2_K)
                    s[r][t] -= (k.dmin * dy[t]) * (float)ms[t];
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
