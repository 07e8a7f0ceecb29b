/*
 * gemmk_x4_body.h - the 1-4 token Q4_K x4 tile (repack.h's layout), one
 * body for every x86 vector width: included by gemmk_avx2.h (avx2 and
 * avxvnni, 256-bit kdot) and quants_avx512.c (512-bit kdot), after the
 * includer's K-quant tile (gemmK) whose arithmetic it reuses on one stream
 * of tiles: same lanes, same integer sums, same float steps (kfma), so the
 * bits are gemmK's and the reference's.
 *
 * The includer defines, for its width:
 *   struct kblock, kdot(type, k, yb, &m), kfma(...), reduce4(m0..m3) (the
 *     minimum sums, 256-bit in every variant), store_rows, store_rows_tokens;
 *   kblock_x4(k, s16, q0): row r's kblock from x4k_scales' s16[r] and the
 *     row's first chunk q0 (the others 128 bytes apart);
 *   GKX_VEC, GKX_ZERO(), GKX_REDUCE4(v0, v1, v2, v3): kdot's result type, its
 *     zero, and the reduction of four of them to one int32 each;
 *   optionally GKX_TOKENS(NT, n, w, a, a_row, y, ys): its own 2-4 token tile.
 */
#ifndef INFER_GEMMK_X4_BODY_H
#define INFER_GEMMK_X4_BODY_H

#ifndef GKX_TOKENS_MIN
#define GKX_TOKENS_MIN 2
#endif

/* 1-4 tokens against a group of four Q4_K rows in the x4 layout: the
 * scales of the four rows unpacked together (x4k_scales), d and dmin four
 * at a time. */
INLINE void gemmK_x4(const int NT, int64_t n, const uint8_t *w, const uint8_t *a, size_t a_row, float *y, size_t ys)
{
#ifdef GKX_TOKENS
    if (NT >= GKX_TOKENS_MIN) {
        GKX_TOKENS(NT, n, w, a, a_row, y, ys);
        return;
    }
#endif
    const int type = GGML_TYPE_Q4_K;
    const int64_t nb = n / QK_K;
    const GKX_VEC zero = GKX_ZERO();
    const __m256i zero8 = _mm256_setzero_si256();
    __m128 acc[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};
    for (int64_t b = 0; b < nb; b++) {
        const uint8_t *tile = w + (size_t)b * REPACK_X4K_TILE;
        prefetch_tile(tile, REPACK_X4K_TILE);
        __m256i s16[4];
        __m128 d, dmin;
        x4k_scales(tile, s16, &d, &dmin);
        const block_q8_K *yb[4];
        float dy[4];
        k_tokens(NT, a, a_row, b, yb, dy);
        if (NT == 1) { /* lanes are rows */
            GKX_VEC v[4];
            __m256i m[4];
            UNROLL
            for (int r = 0; r < 4; r++) {
                struct kblock k;
                kblock_x4(&k, s16[r], tile + repack_x4k_qs(r, 0));
                v[r] = kdot(type, &k, yb[0], &m[r]);
            }
            acc[0] = kfma(type, acc[0], d, dmin, _mm_set1_ps(dy[0]), GKX_REDUCE4(v[0], v[1], v[2], v[3]),
                          reduce4(m[0], m[1], m[2], m[3]));
            continue;
        }
        float df[4], dmf[4];
        _mm_storeu_ps(df, d);
        _mm_storeu_ps(dmf, dmin);
        const __m128 dyv = _mm_loadu_ps(dy);
        UNROLL
        for (int r = 0; r < 4; r++) { /* lanes are tokens */
            struct kblock k;
            kblock_x4(&k, s16[r], tile + repack_x4k_qs(r, 0));
            GKX_VEC v[4] = {zero, zero, zero, zero};
            __m256i m[4] = {zero8, zero8, zero8, zero8};
            UNROLL
            for (int t = 0; t < NT; t++)
                v[t] = kdot(type, &k, yb[t], &m[t]);
            acc[r] = kfma(type, acc[r], _mm_set1_ps(df[r]), _mm_set1_ps(dmf[r]), dyv,
                          GKX_REDUCE4(v[0], v[1], v[2], v[3]), reduce4(m[0], m[1], m[2], m[3]));
        }
    }
    if (NT == 1) {
        store_rows(y, acc[0], 4);
        return;
    }
    store_rows_tokens(y, ys, acc, 4, NT);
}

/* The gemm of Q4_K x4 (1-4 tokens). */
DEFINE_GEMM_GROUP(gemm_q4_Kx4, gemmK_x4)

#endif
