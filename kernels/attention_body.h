/*
 * attention_body.h - the causal attention kernel over F16 / Q8_0 K/V blocks
 * (attention.h), written once over a vector width: attention_avx2.c
 * includes it with 256-bit vectors and 8 accumulators, attention_avx512.c
 * with 512-bit vectors and 16 (AVX-512 has 32 registers), and
 * kernels/arm/attention_neon.c with 128-bit NEON vectors and 16.  The
 * including file defines atv (float vector), atd (double accumulator) and
 * the AT_* operations used below, then includes this file once.
 *
 * Batches of ATTN_F32_MIN_TOK+ tokens over F16 K/V first convert the blocks
 * they read to a float copy (attn_f32), and their items go KV head by KV head.
 * Work items are (token, up to ATTN_GROUP heads sharing a KV head): for one
 * token as many heads as still leave an item per thread, each computed the
 * same way whatever the thread count or grouping.  Per head, positions are taken in chunks of
 * ATTN_CHUNK with an online softmax (running max m, running sum l, the
 * accumulator rescaled by exp(m_old - m_new) when the max grows), so no
 * buffer grows with the context:
 *   scores  s_j = scale * q . k_j, several positions and heads at a time (each
 *           k_j converted once for the group's heads), summed horizontally
 *           together by a tree of pairwise adds;
 *   softmax e_j = exp(s_j - m) with sleef's expf (1 ulp), l summed in double;
 *   values  acc += e_j v_j, AT_NACC vectors (over the group's heads) in
 *           registers.
 * Contexts of at most ATTN_CHUNK positions follow the reference's steps
 * (max, exp, double sum, weighted sum, one scale); longer ones differ by the
 * rescaling's rounding.  The dot products use fma in AT_W lanes instead of
 * the reference's sequential float sum: results agree to ~1e-6 relative
 * (tests/test-kernels-simd.c).  Heads wider than ATTN_MAX_DIM fall back to
 * attention_ref.
 */
#include <stdbool.h>
#include <stdlib.h>

#include "dispatch.h"
#include "pool.h"

#define INLINE static inline __attribute__((always_inline))
#define UNROLL _Pragma("GCC unroll 16")

#define ATTN_CHUNK 256  /* positions per online-softmax step */
#define ATTN_MAX_DIM 1024

/* Bytes of a K/V row of head_dim elements: F16 (Q = 0), Q8_0 blocks (Q = 1)
 * or, in a batch's converted copy (attn_f32), floats (Q = 2). */
INLINE size_t kv_row_bytes(const int Q, int head_dim)
{
    return Q == 2 ? (size_t)head_dim * sizeof(float)
           : Q    ? (size_t)(head_dim / 32) * sizeof(block_q8_0)
                  : (size_t)head_dim * sizeof(uint16_t);
}

/* The row of position pos of KV head kvh, K (V = 0) or V (V = 1), its
 * elements F16, (Q = 1) Q8_0 blocks or (Q = 2) floats. */
INLINE const uint8_t *kv_row(const struct attn_kv *kv, const int32_t *blocks, const int V, const int Q, int kvh,
                             int64_t pos, int head_dim)
{
    const size_t hb = V && kv->head_bytes_v ? kv->head_bytes_v : kv->head_bytes;
    const size_t rb = kv_row_bytes(Q, head_dim);
    const uint8_t *blk = kv->base + (size_t)blocks[pos / kv->block_tokens] * kv->block_bytes;
    return blk + (V ? kv->v_off : kv->k_off) + (size_t)kvh * hb + (size_t)(pos % kv->block_tokens) * rb;
}

/* rows[i] = the row of position j0 + i (i < n) of KV head kvh: one
 * division per KV block instead of one per position and pass (kv_row's
 * divisions by block_tokens were several % of a prefill's attention). */
INLINE void kv_rows(const struct attn_kv *kv, const int32_t *blocks, const int V, const int Q, int kvh, int64_t j0,
                    int n, int head_dim, const uint8_t **rows)
{
    const size_t rb = kv_row_bytes(Q, head_dim);
    int64_t p = j0;
    for (int i = 0; i < n;) {
        const uint8_t *r = kv_row(kv, blocks, V, Q, kvh, p, head_dim);
        const int left = kv->block_tokens - (int)(p % kv->block_tokens);
        const int e = n - i < left ? n : i + left;
        for (; i < e; i++, p++, r += rb)
            rows[i] = r;
    }
}

/* Positions ahead whose K/V rows are prefetched when a call has few tokens
 * (decode; below ATTN_PF_MAX_TOK): a KV block holds only block_tokens (32)
 * rows of a head contiguously, so the hardware prefetchers start over at
 * every block and decode over a long context waited on memory at each.
 * Default model, tg128 @ d4096: +4.8%, @ d1024 +2.4%.  Batches find the rows
 * in cache (each is read by many tokens): there it cost 2-3% of pp512. */
#define ATTN_PF_POS 16
#define ATTN_PF_MAX_TOK 8

/* Prefetch the row of position pos (if it exists) of KV head kvh. */
INLINE void kv_prefetch(const struct attn_kv *kv, const int32_t *blocks, const int V, const int Q, int kvh,
                        int64_t pos, int64_t last, int head_dim)
{
    if (pos > last)
        return;
    const uint8_t *r = kv_row(kv, blocks, V, Q, kvh, pos, head_dim);
    const size_t rb = kv_row_bytes(Q, head_dim);
    for (size_t o = 0; o < rb; o += 64)
        __builtin_prefetch(r + o, 0, 3);
}

/* AT_W halves at p[d] as floats, zero past n (the head's last chunk). */
INLINE atv ldh(const uint16_t *p, int d, int n)
{
    return d + AT_W <= n ? AT_LOADH(p + d) : AT_LOADH_TAIL(p + d, n - d);
}

/* AT_W elements of a K/V row at d: F16, or (Q) q * d of a Q8_0 block (a
 * Q8_0 row's head_dim is a multiple of 32, so AT_W never straddle two). */
INLINE atv ldkv(const int Q, const uint8_t *row, int d, int n)
{
    if (Q == 2)
        return d + AT_W <= n ? AT_LOADF((const float *)row + d) : AT_LOADF_TAIL((const float *)row + d, n - d);
    if (!Q)
        return ldh((const uint16_t *)row, d, n);
    const block_q8_0 *b = (const block_q8_0 *)row + d / 32;
    uint16_t dh;
    memcpy(&dh, &b->d, 2);
    return AT_MUL(AT_LOADQ8(b->qs + d % 32), AT_SET1(AT_H2F(dh)));
}

/* ldkv where d + AT_W <= the head size (no tail test: the inner loops keep
 * the tests of ldkv out, which GCC did not hoist). */
INLINE atv ldkv_full(const int Q, const uint8_t *row, int d)
{
    if (Q == 2)
        return AT_LOADF((const float *)row + d);
    if (!Q)
        return AT_LOADH((const uint16_t *)row + d);
    const block_q8_0 *b = (const block_q8_0 *)row + d / 32;
    uint16_t dh;
    memcpy(&dh, &b->d, 2);
    return AT_MUL(AT_LOADQ8(b->qs + d % 32), AT_SET1(AT_H2F(dh)));
}

INLINE atv ldf(const float *p, int d, int n)
{
    return d + AT_W <= n ? AT_LOADF(p + d) : AT_LOADF_TAIL(p + d, n - d);
}

/* The query heads of one KV head are done together, up to ATTN_GROUP at a
 * time, so that each K and V row is loaded and converted once for all of
 * them.  Per head the operations are the same whatever G, so grouping (used
 * for batches) and single heads (decode) give the same bits. */
#define ATTN_GROUP 4

/* s[x ATTN_CHUNK + i] = scale * q_x . k_{j0 + i} for query rows x < NQ and
 * i < m, query row x at q + (x / G) qs + (x % G) head_dim (NQ / G tokens of
 * G heads each: one token, NQ = G, for attend; several for attend_tile);
 * AT_NACC / NQ positions at a time (AT_NACC accumulators).  Each score's
 * lanes, fma order and reduction tree are the same whatever NQ and the
 * position's slot (AT_REDUCE sums every vector the same way). */
INLINE void scores(const int NQ, const int G, const int KQ, float *s, const float *q, size_t qs,
                   const struct attn_kv *kv, const int32_t *blocks, const uint8_t *const *krow, int kvh, int64_t j0,
                   int m, int head_dim, float scale, int pf)
{
    const int P = AT_NACC / NQ;
    for (int i0 = 0; i0 < m; i0 += P) {
        const int np = m - i0 < P ? m - i0 : P;
        const uint8_t *k[AT_NACC];
        atv acc[AT_NACC][AT_NACC];
        UNROLL
        for (int p = 0; p < P; p++) {
            if (pf)
                kv_prefetch(kv, blocks, 0, KQ, kvh, j0 + i0 + p + ATTN_PF_POS, j0 + m - 1, head_dim);
            k[p] = krow[i0 + (p < np ? p : 0)];
            UNROLL
            for (int g = 0; g < NQ; g++)
                acc[g][p] = AT_ZERO();
        }
        int d = 0;
        for (; d + AT_W <= head_dim; d += AT_W) { /* whole vectors */
            atv kvv[AT_NACC];
            UNROLL
            for (int p = 0; p < P; p++)
                kvv[p] = ldkv_full(KQ, k[p], d);
            UNROLL
            for (int g = 0; g < NQ; g++) {
                const atv qv = AT_LOADF(q + (size_t)(g / G) * qs + (size_t)(g % G) * (size_t)head_dim + d);
                UNROLL
                for (int p = 0; p < P; p++)
                    acc[g][p] = AT_FMA(qv, kvv[p], acc[g][p]);
            }
        }
        if (d < head_dim) { /* the tail, in the same order */
            atv kvv[AT_NACC];
            UNROLL
            for (int p = 0; p < P; p++)
                kvv[p] = ldkv(KQ, k[p], d, head_dim);
            UNROLL
            for (int g = 0; g < NQ; g++) {
                const atv qv = ldf(q + (size_t)(g / G) * qs + (size_t)(g % G) * (size_t)head_dim, d, head_dim);
                UNROLL
                for (int p = 0; p < P; p++)
                    acc[g][p] = AT_FMA(qv, kvv[p], acc[g][p]);
            }
        }
        /* the NQ x P (<= AT_NACC) horizontal sums at once (AT_REDUCE: a tree
         * of pairwise adds across the vectors) */
        atv v[AT_NACC];
        UNROLL
        for (int x = 0; x < AT_NACC; x++)
            v[x] = x < NQ * P ? acc[x / P][x % P] : AT_ZERO();
        float sums[AT_NACC];
        AT_REDUCE(v, sums);
        UNROLL
        for (int g = 0; g < NQ; g++)
            UNROLL
            for (int p = 0; p < P; p++)
                if (p < np)
                    s[(size_t)g * ATTN_CHUNK + (size_t)(i0 + p)] = sums[g * P + p] * scale;
    }
}

/* acc_g[d] = acc_g[d] * f[g] + sum_i e_g[i] v_{j0 + i}[d] for rows g < G
 * (acc_g at acc + g as, e_g at e + g ATTN_CHUNK), AT_NACC * AT_W / G dims at
 * a time (AT_NACC accumulators).  Per lane: one multiply, then one fma per
 * position in order, whatever G and the split of the positions into calls
 * (a later call with f = 1 continues exactly: x * 1 = x). */
INLINE void values(const int G, const int VQ, float *acc, size_t as, const float *f, const float *e,
                   const struct attn_kv *kv, const int32_t *blocks, const uint8_t *const *vrow, int kvh, int64_t j0,
                   int m, int head_dim, int pf)
{
    const int C = AT_NACC / G; /* vectors of AT_W dims per head */
    for (int d0 = 0; d0 < head_dim; d0 += AT_W * C) {
        atv a[AT_NACC][AT_NACC];
        UNROLL
        for (int g = 0; g < G; g++)
            UNROLL
            for (int c = 0; c < C; c++)
                a[g][c] = d0 + AT_W * c < head_dim ? AT_MUL(ldf(acc + (size_t)g * as, d0 + AT_W * c, head_dim), AT_SET1(f[g]))
                                                   : AT_ZERO();
        const int full = d0 + AT_W * C <= head_dim; /* no tails: the same loop without tests */
        for (int i = 0; i < m; i++) {
            if (pf && d0 == 0) /* later passes find the rows in cache */
                kv_prefetch(kv, blocks, 1, VQ, kvh, j0 + i + ATTN_PF_POS, j0 + m - 1, head_dim);
            const uint8_t *v = vrow[i];
            atv vv[AT_NACC];
            if (full) {
                UNROLL
                for (int c = 0; c < C; c++)
                    vv[c] = ldkv_full(VQ, v, d0 + AT_W * c);
            } else {
                UNROLL
                for (int c = 0; c < C; c++)
                    vv[c] = d0 + AT_W * c < head_dim ? ldkv(VQ, v, d0 + AT_W * c, head_dim) : AT_ZERO();
            }
            UNROLL
            for (int g = 0; g < G; g++) {
                const atv w = AT_SET1(e[(size_t)g * ATTN_CHUNK + (size_t)i]);
                UNROLL
                for (int c = 0; c < C; c++)
                    a[g][c] = AT_FMA(w, vv[c], a[g][c]);
            }
        }
        UNROLL
        for (int g = 0; g < G; g++) {
            UNROLL
            for (int c = 0; c < C; c++) {
                const int d = d0 + AT_W * c;
                if (d + AT_W <= head_dim)
                    AT_STOREF(acc + (size_t)g * as + d, a[g][c]);
                else if (d < head_dim)
                    AT_STOREF_TAIL(acc + (size_t)g * as + d, a[g][c], head_dim - d);
            }
        }
    }
}

/* e = exp(s - m) in place for i < n (n <= ATTN_CHUNK), returning sum(e) in
 * double. */
static double exp_sum(float *s, int n, float m)
{
    const atv mv = AT_SET1(m);
    atd sum = AT_ZERO_D();
    for (int i = 0; i < n; i += AT_W) {
        atv x = i + AT_W <= n ? AT_LOADF(s + i) : AT_LOADF_TAIL(s + i, n - i);
        x = AT_EXP(AT_SUB(x, mv));
        if (i + AT_W > n) /* padding lanes must add nothing */
            x = AT_KEEP_FIRST(x, n - i);
        AT_STOREF(s + i, x);
        sum = AT_ADD_D(sum, x);
    }
    return AT_HSUM_D(sum);
}

/* max(m, s[0..n)) in vectors (a scalar maxss chain was ~30% of the attention
 * at head size 64); a max is exact, so the order does not matter. */
static float chunk_max(const float *s, int n, float m)
{
    atv mv = AT_SET1(m);
    int i = 0;
    for (; i + AT_W <= n; i += AT_W)
        mv = AT_MAX(mv, AT_LOADF(s + i));
    float r = AT_HMAX(mv);
    for (; i < n; i++)
        r = s[i] > r ? s[i] : r;
    return r;
}

/* One query row's step of the online softmax over a chunk of n scores s:
 * soft-capped when the model asks, then the running max *m, the factor *f
 * of the accumulator so far and the running sum *l updated (attend and
 * attend_tile, row by row: the same bits). */
INLINE void softmax_step(float *s, int n, float softcap, float *m, float *f, double *l)
{
    if (softcap > 0.0f) {
        const float inv_cap = 1.0f / softcap;
        for (int i = 0; i < n; i++)
            s[i] = tanhf(s[i] * inv_cap) * softcap;
    }
    const float mc = chunk_max(s, n, *m);
    /* the first chunk sets the max (factor 0 on an empty accumulator) */
    *f = *m == -INFINITY ? 0.0f : expf(*m - mc);
    *m = mc;
    *l = *l * (double)*f + exp_sum(s, n, mc);
}

/* o = acc / l, lane by lane as the scalar loop did. */
INLINE void attn_out_row(float *o, const float *acc, double l, int head_dim)
{
    const atv inv = AT_SET1((float)(1.0 / l));
    for (int d = 0; d < head_dim; d += AT_W) {
        const atv v = AT_MUL(ldf(acc, d, head_dim), inv);
        if (d + AT_W <= head_dim)
            AT_STOREF(o + d, v);
        else
            AT_STOREF_TAIL(o + d, v, head_dim - d);
    }
}

/* G query heads (q, out: G consecutive heads of head_dim) of one KV head,
 * over positions [first, pos]. */
INLINE void attend(const int G, const int KQ, const int VQ, float *out, const float *q, const struct attn_kv *kv,
                   const int32_t *blocks, int kvh, int64_t first, int64_t pos, int head_dim, float scale, int pf)
{
    float s[ATTN_GROUP][ATTN_CHUNK] __attribute__((aligned(64)));
    float acc[ATTN_GROUP][ATTN_MAX_DIM] __attribute__((aligned(64)));
    float m[ATTN_GROUP], f[ATTN_GROUP];
    double l[ATTN_GROUP];
    const uint8_t *krow[ATTN_CHUNK], *vrow[ATTN_CHUNK];
    for (int g = 0; g < G; g++) {
        memset(acc[g], 0, (size_t)head_dim * sizeof(float));
        m[g] = -INFINITY;
        l[g] = 0.0;
    }
    for (int64_t j0 = first; j0 <= pos; j0 += ATTN_CHUNK) {
        const int n = pos + 1 - j0 < ATTN_CHUNK ? (int)(pos + 1 - j0) : ATTN_CHUNK;
        kv_rows(kv, blocks, 0, KQ, kvh, j0, n, head_dim, krow);
        kv_rows(kv, blocks, 1, VQ, kvh, j0, n, head_dim, vrow);
        scores(G, G, KQ, s[0], q, 0, kv, blocks, krow, kvh, j0, n, head_dim, scale, pf);
        for (int g = 0; g < G; g++)
            softmax_step(s[g], n, kv->softcap, &m[g], &f[g], &l[g]);
        values(G, VQ, acc[0], ATTN_MAX_DIM, f, s[0], kv, blocks, vrow, kvh, j0, n, head_dim, pf);
    }
    for (int g = 0; g < G; g++)
        attn_out_row(out + (size_t)g * (size_t)head_dim, acc[g], l[g], head_dim);
}

/* A batch's consecutive tokens over the float copy (attn_f32) in tiles:
 * ATTN_TILE_ROWS query rows (TQ = ATTN_TILE_ROWS / G tokens of G heads)
 * share each K and V row they read, which one token at a time came from the
 * L2 (or the L3: a KV head's float rows of a 512-token prefill, 512 KB) once
 * per token.  Only for heads of at most ATTN_TILE_DIM.  AT_TILE_ROWS (the
 * including file's; default AT_NACC / 2): rows of a tile, at most AT_NACC;
 * with AT_NACC rows each step loads one K row vector per AT_NACC query
 * vectors (scores) or AT_NACC broadcasts (values), with AT_NACC / 2 half as
 * many loads per fma for twice the K/V traffic.  bench-kernels -T attn -s
 * 16x8x128 -n 512 -t 1 (Qwen3 0.6B), avx2 on Zen 3: 1.22x with 4 rows, 1.30x
 * with 8 against one token at a time. */
#ifdef AT_TILE_ROWS
#define ATTN_TILE_ROWS AT_TILE_ROWS
#else
#define ATTN_TILE_ROWS (AT_NACC / 2)
#endif
#define ATTN_TILE_DIM 256

/* TQ tokens at positions pos0 .. pos0 + TQ - 1 of one sequence (positions
 * from 0, no window; all in one chunk: pos0 / ATTN_CHUNK == (pos0 + TQ - 1)
 * / ATTN_CHUNK), G heads each of KV head kvh, the K/V rows floats (Q = 2);
 * token u's G heads at q + u qs and out + u qs.  In each chunk, the
 * positions every token sees (n[0], those of the first) are scored and
 * summed for all rows at once, the later tokens' few more positions after
 * them row by row: per (token, head) the same operations in the same order
 * as attend(G, 2, 2), so the same bits. */
INLINE void attend_tile(const int G, const int TQ, float *out, const float *q, size_t qs, const struct attn_kv *kv,
                        const int32_t *blocks, int kvh, int64_t pos0, int head_dim, float scale)
{
    const int NQ = G * TQ;
    float s[ATTN_TILE_ROWS][ATTN_CHUNK] __attribute__((aligned(64)));
    float acc[ATTN_TILE_ROWS][ATTN_TILE_DIM] __attribute__((aligned(64)));
    float m[ATTN_TILE_ROWS], f[ATTN_TILE_ROWS], one[ATTN_TILE_ROWS];
    double l[ATTN_TILE_ROWS];
    const uint8_t *krow[ATTN_CHUNK], *vrow[ATTN_CHUNK];
    for (int x = 0; x < NQ; x++) {
        memset(acc[x], 0, (size_t)head_dim * sizeof(float));
        m[x] = -INFINITY;
        l[x] = 0.0;
        one[x] = 1.0f;
    }
    const int64_t last = pos0 + TQ - 1;
    for (int64_t j0 = 0; j0 <= last; j0 += ATTN_CHUNK) {
        int n[ATTN_TILE_ROWS];
        for (int u = 0; u < TQ; u++)
            n[u] = pos0 + u + 1 - j0 < ATTN_CHUNK ? (int)(pos0 + u + 1 - j0) : ATTN_CHUNK;
        kv_rows(kv, blocks, 0, 2, kvh, j0, n[TQ - 1], head_dim, krow);
        kv_rows(kv, blocks, 1, 2, kvh, j0, n[TQ - 1], head_dim, vrow);
        scores(NQ, G, 2, s[0], q, qs, kv, blocks, krow, kvh, j0, n[0], head_dim, scale, 0);
        for (int u = 1; u < TQ; u++)
            if (n[u] > n[0])
                scores(G, G, 2, s[u * G] + n[0], q + (size_t)u * qs, 0, kv, blocks, krow + n[0], kvh, j0 + n[0],
                       n[u] - n[0], head_dim, scale, 0);
        for (int x = 0; x < NQ; x++)
            softmax_step(s[x], n[x / G], kv->softcap, &m[x], &f[x], &l[x]);
        values(NQ, 2, acc[0], ATTN_TILE_DIM, f, s[0], kv, blocks, vrow, kvh, j0, n[0], head_dim, 0);
        for (int u = 1; u < TQ; u++)
            if (n[u] > n[0])
                values(G, 2, acc[u * G], ATTN_TILE_DIM, one, s[u * G] + n[0], kv, blocks, vrow + n[0], kvh, j0 + n[0],
                       n[u] - n[0], head_dim, 0);
    }
    for (int x = 0; x < NQ; x++)
        attn_out_row(out + (size_t)(x / G) * qs + (size_t)(x % G) * (size_t)head_dim, acc[x], l[x], head_dim);
}

/* attend_tile for G heads and ATTN_TILE_ROWS / G tokens. */
static void attend_tile_heads(int G, float *out, const float *q, size_t qs, const struct attn_kv *kv,
                              const int32_t *blocks, int kvh, int64_t pos0, int head_dim, float scale)
{
    switch (G) {
    case 1: attend_tile(1, ATTN_TILE_ROWS, out, q, qs, kv, blocks, kvh, pos0, head_dim, scale); break;
    case 2: attend_tile(2, ATTN_TILE_ROWS / 2, out, q, qs, kv, blocks, kvh, pos0, head_dim, scale); break;
    default: attend_tile(4, ATTN_TILE_ROWS / 4, out, q, qs, kv, blocks, kvh, pos0, head_dim, scale); break;
    }
}

#define ATTEND_G(KQ, VQ)                                                                                      \
    switch (G) {                                                                                              \
    case 1: attend(1, KQ, VQ, out, q, kv, blocks, kvh, first, pos, head_dim, scale, pf); break;               \
    case 2: attend(2, KQ, VQ, out, q, kv, blocks, kvh, first, pos, head_dim, scale, pf); break;               \
    case 3: attend(3, KQ, VQ, out, q, kv, blocks, kvh, first, pos, head_dim, scale, pf); break;               \
    default: attend(4, KQ, VQ, out, q, kv, blocks, kvh, first, pos, head_dim, scale, pf); break;              \
    }

static void attend_heads(int G, float *out, const float *q, const struct attn_kv *kv, const int32_t *blocks, int kvh,
                         int64_t first, int64_t pos, int head_dim, float scale, int pf)
{
    if (kv->k_q8 == 2) { /* attn_f32's converted copy */
        ATTEND_G(2, 2)
    } else if (!kv->k_q8 && !kv->v_q8) {
        ATTEND_G(0, 0)
    } else if (kv->k_q8 && kv->v_q8) {
        ATTEND_G(1, 1)
    } else if (kv->k_q8) {
        ATTEND_G(1, 0)
    } else {
        ATTEND_G(0, 1)
    }
}
#undef ATTEND_G

/* The attention of a batch as pool items: item i is token i / (n_head_kv *
 * per_kv), heads h0 .. h0 + G - 1 of one KV head; with a converted copy
 * (attn_f32), token i % n_tok of item group i / n_tok, so that a thread's
 * run of items reads one KV head's rows (float rows of all heads of a 512-token
 * prefill of qwen3 0.6B, 4 MB, would not stay in a 2 MB L2). */
struct AT_FN(attn_items) {
    float *out;
    const float *q;
    const struct attn_kv *kv;
    int n_head, group, G, per_kv, head_dim;
    float scale;
    int window, pf;
    int64_t n_tok; /* > 0: items are KV-head major (all tokens of one KV head, then the next) */
    int tq;        /* > 1: KV-head major items of tq tokens each (attend_tile where they qualify) */
};

/* Item i of a tiled batch (tq > 1): tokens t0 .. t0 + tq - 1 (fewer at the
 * end), heads h0 .. h0 + G - 1 of KV head kvh: attend_tile when they are
 * consecutive positions of one sequence within one chunk, token by token
 * otherwise. */
static void AT_FN(attn_tile_run)(const struct AT_FN(attn_items) *a, int64_t i)
{
    const int64_t n_tiles = (a->n_tok + a->tq - 1) / a->tq;
    const int64_t t0 = (i % n_tiles) * a->tq, t1 = t0 + a->tq < a->n_tok ? t0 + a->tq : a->n_tok;
    const int it = (int)(i / n_tiles);
    const int kvh = it / a->per_kv, h0 = kvh * a->group + (it % a->per_kv) * a->G;
    const int g = a->group - (h0 - kvh * a->group) < a->G ? a->group - (h0 - kvh * a->group) : a->G;
    const size_t qs = (size_t)a->n_head * (size_t)a->head_dim;
    const int64_t pos0 = a->kv->pos[t0];
    bool tile = t1 - t0 == a->tq && g == a->G && pos0 / ATTN_CHUNK == (pos0 + a->tq - 1) / ATTN_CHUNK;
    for (int64_t t = t0 + 1; t < t1 && tile; t++)
        tile = a->kv->blocks[t] == a->kv->blocks[t0] && a->kv->pos[t] == pos0 + (t - t0);
    const size_t o = ((size_t)t0 * (size_t)a->n_head + (size_t)h0) * (size_t)a->head_dim;
    if (tile) {
        attend_tile_heads(g, a->out + o, a->q + o, qs, a->kv, a->kv->blocks[t0], kvh, pos0, a->head_dim, a->scale);
        return;
    }
    for (int64_t t = t0; t < t1; t++) {
        const int64_t pos = a->kv->pos[t];
        const size_t ot = o + (size_t)(t - t0) * qs;
        attend_heads(g, a->out + ot, a->q + ot, a->kv, a->kv->blocks[t], kvh, 0, pos, a->head_dim, a->scale, a->pf);
    }
}

static void AT_FN(attn_items_run)(void *ctx, int64_t i0, int64_t i1)
{
    const struct AT_FN(attn_items) *a = ctx;
    const int n_head_kv = a->n_head / a->group, n_items = n_head_kv * a->per_kv;
    for (int64_t i = i0; i < i1; i++) {
        if (a->tq > 1) {
            AT_FN(attn_tile_run)(a, i);
            continue;
        }
        const int64_t t = a->n_tok > 0 ? i % a->n_tok : i / n_items;
        const int it = a->n_tok > 0 ? (int)(i / a->n_tok) : (int)(i % n_items);
        const int kvh = it / a->per_kv, h0 = kvh * a->group + (it % a->per_kv) * a->G;
        const int g = a->group - (h0 - kvh * a->group) < a->G ? a->group - (h0 - kvh * a->group) : a->G;
        const int64_t pos = a->kv->pos[t];
        const int64_t first = a->window > 0 && pos - a->window + 1 > 0 ? pos - a->window + 1 : 0;
        const size_t o = ((size_t)t * (size_t)a->n_head + (size_t)h0) * (size_t)a->head_dim;
        attend_heads(g, a->out + o, a->q + o, a->kv, a->kv->blocks[t], kvh, first, pos, a->head_dim, a->scale, a->pf);
    }
}

/* F16 K/V of a batch converted to float once: every token of a 512-token
 * prefill reads most rows of its sequence, and converted each (vcvtph2ps)
 * once per (token, group of heads), ~15% of the attention, and more where
 * few query heads share a KV head (qwen3 0.6B: 2, so one conversion per two
 * FMAs).  F16 -> float is exact and the arithmetic per lane is unchanged,
 * so the results are the bits of the per-token path (decode).  Only for
 * batches of at least ATTN_F32_MIN_TOK tokens whose blocks' copies take at
 * most ATTN_F32_MAX_BYTES (the copy lives in the calling thread's
 * kernels_scratch); otherwise the rows are converted where they are read. */
#define ATTN_F32_MIN_TOK 8
#define ATTN_F32_MAX_BYTES ((size_t)64 << 20)

struct AT_FN(attn_conv) {
    const struct attn_kv *kv;
    const int32_t *ids; /* block u of the copy is the arena's block ids[u] */
    float *dst;
    int n_head_kv, head_dim;
};

static void AT_FN(attn_conv_run)(void *ctx, int64_t u0, int64_t u1)
{
    const struct AT_FN(attn_conv) *c = ctx;
    const struct attn_kv *kv = c->kv;
    const int bt = kv->block_tokens, hd = c->head_dim;
    for (int64_t u = u0; u < u1; u++) {
        const uint8_t *blk = kv->base + (size_t)c->ids[u] * kv->block_bytes;
        for (int V = 0; V < 2; V++) {
            const size_t hb = V && kv->head_bytes_v ? kv->head_bytes_v : kv->head_bytes;
            for (int h = 0; h < c->n_head_kv; h++) {
                const uint16_t *src = (const uint16_t *)(blk + (V ? kv->v_off : kv->k_off) + (size_t)h * hb);
                float *dst = c->dst + (((size_t)u * 2 + (size_t)V) * (size_t)c->n_head_kv + (size_t)h) * (size_t)bt * (size_t)hd;
                for (int r = 0; r < bt; r++)
                    for (int d = 0; d < hd; d += AT_W) {
                        const atv x = ldh(src + (size_t)r * (size_t)hd, d, hd);
                        if (d + AT_W <= hd)
                            AT_STOREF(dst + (size_t)r * (size_t)hd + d, x);
                        else
                            AT_STOREF_TAIL(dst + (size_t)r * (size_t)hd + d, x, hd - d);
                    }
            }
        }
    }
}

/* A float copy of the blocks the batch reads, and a view of it in *out
 * (k_q8 = v_q8 = 2) whose per-token block tables (*tabs, to be freed) point
 * into the copy; false (nothing to free) when the batch does not qualify. */
static bool AT_FN(attn_f32)(const struct attn_kv *kv, int64_t n_tok, int n_head_kv, int head_dim,
                            struct attn_kv *out, void **tabs)
{
    *tabs = NULL;
    if (kv->k_q8 || kv->v_q8 || n_tok < ATTN_F32_MIN_TOK || kv->block_tokens <= 0)
        return false;
    const int bt = kv->block_tokens;
    int32_t max_id = -1;
    int64_t n_ent = 0; /* entries of the remapped tables: one per run of tokens sharing a table */
    for (int64_t t = 0, e; t < n_tok; t = e) {
        int64_t nbm = 0;
        for (e = t; e < n_tok && kv->blocks[e] == kv->blocks[t]; e++) {
            const int64_t nb = kv->pos[e] / bt + 1;
            for (int64_t i = nbm; i < nb; i++) {
                if (kv->blocks[t][i] < 0)
                    return false;
                max_id = kv->blocks[t][i] > max_id ? kv->blocks[t][i] : max_id;
            }
            nbm = nb > nbm ? nb : nbm;
        }
        n_ent += nbm;
    }
    int32_t *map = malloc(((size_t)max_id + 1) * sizeof(int32_t));
    int32_t *ids = malloc(((size_t)max_id + 1) * sizeof(int32_t));
    if (!map || !ids) {
        free(map);
        free(ids);
        return false;
    }
    memset(map, 0xFF, ((size_t)max_id + 1) * sizeof(int32_t)); /* -1: not in the copy */
    int32_t n_u = 0;
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t i = 0; i <= kv->pos[t] / bt; i++)
            if (map[kv->blocks[t][i]] < 0) {
                map[kv->blocks[t][i]] = n_u;
                ids[n_u++] = kv->blocks[t][i];
            }
    const size_t blk_floats = 2 * (size_t)n_head_kv * (size_t)bt * (size_t)head_dim;
    float *dst = (size_t)n_u * blk_floats * sizeof(float) <= ATTN_F32_MAX_BYTES
                     ? kernels_scratch((size_t)n_u * blk_floats * sizeof(float))
                     : NULL;
    /* the tables: n_tok pointers, then the remapped entries */
    const int32_t **tp = dst ? malloc((size_t)n_tok * sizeof(*tp) + (size_t)n_ent * sizeof(int32_t)) : NULL;
    if (!tp) {
        free(map);
        free(ids);
        return false;
    }
    int32_t *ent = (int32_t *)(tp + n_tok);
    for (int64_t t = 0, e; t < n_tok; t = e) {
        int64_t nbm = 0;
        for (e = t; e < n_tok && kv->blocks[e] == kv->blocks[t]; e++) {
            const int64_t nb = kv->pos[e] / bt + 1;
            nbm = nb > nbm ? nb : nbm;
            tp[e] = ent;
        }
        for (int64_t i = 0; i < nbm; i++)
            ent[i] = map[kv->blocks[t][i]];
        ent += nbm;
    }
    struct AT_FN(attn_conv) c = {kv, ids, dst, n_head_kv, head_dim};
    pool_for(n_u, 1, AT_FN(attn_conv_run), &c);
    free(map);
    free(ids);
    *out = *kv;
    out->base = (const uint8_t *)dst;
    out->block_bytes = blk_floats * sizeof(float);
    out->k_off = 0;
    out->v_off = (size_t)n_head_kv * (size_t)bt * (size_t)head_dim * sizeof(float);
    out->head_bytes = (size_t)bt * (size_t)head_dim * sizeof(float);
    out->head_bytes_v = 0;
    out->k_q8 = out->v_q8 = 2;
    out->blocks = tp;
    *tabs = (void *)tp;
    return true;
}

/* Work items: (token, head) for a single token (decode: the heads give the
 * parallelism), (token, group of up to ATTN_GROUP heads of one KV head) for
 * batches. */
static void AT_FN(attention)(float *out, const float *q, int64_t n_tok, const struct attn_kv *kv, int n_head,
                           int n_head_kv, int head_dim, float scale, int window)
{
    if (head_dim > ATTN_MAX_DIM || head_dim <= 0 || ((kv->k_q8 || kv->v_q8) && head_dim % 32)) {
        attention_ref(out, q, n_tok, kv, n_head, n_head_kv, head_dim, scale, window);
        return;
    }
    const int group = n_head / n_head_kv;
    /* Batches: groups of up to ATTN_GROUP heads.  One token: as many heads
     * per item as still gives every thread an item (each item converts its
     * K/V rows once for its heads; Gemma 3 270M's four heads of one KV head
     * on two threads: two items of two heads, not four of one). */
    int G = group < ATTN_GROUP ? group : ATTN_GROUP;
    if (n_tok == 1) {
        const int nth = pool_threads();
        const int per_kv = (nth + n_head_kv - 1) / n_head_kv; /* items wanted per KV head */
        G = per_kv >= group ? 1 : (group + per_kv - 1) / per_kv;
        G = G < ATTN_GROUP ? G : ATTN_GROUP;
    }
    struct attn_kv f32;
    void *tabs;
    const bool conv = AT_FN(attn_f32)(kv, n_tok, n_head_kv, head_dim, &f32, &tabs);
    /* tiles of tokens: the float copy, no window, G dividing ATTN_TILE_ROWS */
    const int tq = conv && window <= 0 && head_dim <= ATTN_TILE_DIM && ATTN_TILE_ROWS % G == 0 ? ATTN_TILE_ROWS / G : 1;
    struct AT_FN(attn_items) it = {out, q, conv ? &f32 : kv, n_head, group, G, (group + G - 1) / G, head_dim, scale,
                                   window, n_tok < ATTN_PF_MAX_TOK, conv ? n_tok : 0, tq};
    const int64_t n_units = tq > 1 ? (n_tok + tq - 1) / tq : n_tok;
    pool_for(n_units * n_head_kv * it.per_kv, 1, AT_FN(attn_items_run), &it);
    free(tabs);
}

