/*
 * gemm_pass.h - how the many-token kernels (gemm_avx512.c, gemm_lt8_body.h)
 * sweep the transposed activations: in passes over a chunk of blocks of
 * every token group, shared by a block of row tiles whose float
 * accumulators wait in scratch (F) between passes.  For long rows (ffn_down:
 * 8192) the activations of 512 tokens are ~5 MB; a pass of ACT_PASS_BYTES
 * stays in the L2 (2 MB per core on the build machine) while every tile of
 * the block uses it, so they come from the L3 once per block of tiles.
 * Blocks are still added in order for each (row, token): the float steps are
 * the reference's whatever the pass boundaries.
 *
 * The includer defines LT (tokens per vector), LR (rows per tile),
 * store_tile(y, ys, f, nr, nt) and, for its vector width,
 *   GP_VEC            the float vector type,
 *   GP_ZERO()         a zero vector,
 *   GP_LOAD(p)        an aligned load,
 *   GP_STORE(p, v)    an aligned store.
 */
#ifndef INFER_GEMM_PASS_H
#define INFER_GEMM_PASS_H

/* Bytes of activations per pass, and of float accumulators per block of
 * tiles. */
#define ACT_PASS_BYTES (512u * 1024u)
#define F_BLOCK_BYTES (256u * 1024u)

/* Blocks per pass for ng token groups of act_size bytes per block. */
static int64_t pass_blocks(int64_t nb, int64_t ng, size_t act_size)
{
    const int64_t kc = (int64_t)(ACT_PASS_BYTES / ((size_t)ng * act_size));
    return kc < 1 ? 1 : kc > nb ? nb : kc;
}

/* Tiles per block when one tile's accumulators are f_tile floats. */
static int64_t block_tiles(size_t f_tile, int64_t n_tiles)
{
    const int64_t rb = (int64_t)(F_BLOCK_BYTES / (f_tile * sizeof(float)));
    return rb < 1 ? 1 : rb > n_tiles ? n_tiles : rb;
}

/* The float accumulators of token group g of a tile: zero at the first pass,
 * else where the previous pass left them in F (row r at F + LT (g LR + r)). */
INLINE void facc_load(GP_VEC *facc, const float *F, int64_t g, bool first)
{
    UNROLL
    for (int r = 0; r < LR; r++)
        facc[r] = first ? GP_ZERO() : GP_LOAD(F + (size_t)(g * LR + r) * LT);
}

/* After a pass: into F, or out to y after the last one (rows r < nr, the
 * tokens of group g that exist). */
INLINE void facc_done(const GP_VEC *facc, float *F, int64_t g, bool last, int64_t n_tok, int nr, float *y,
                      size_t ys)
{
    if (!last) {
        UNROLL
        for (int r = 0; r < LR; r++)
            GP_STORE(F + (size_t)(g * LR + r) * LT, facc[r]);
        return;
    }
    const int nt = n_tok - g * LT < LT ? (int)(n_tok - g * LT) : LT;
    store_tile(y + (size_t)(g * LT) * ys, ys, facc, nr, nt);
}

#endif
