/*
 * repack.h - interleaved ("x4") weight layouts for the decode GEMV, and the
 * internal type ids that name them.
 *
 * A Q4_0 or Q5_0 GEMV reads four rows at a time (one gemm tile, dispatch.h),
 * but in GGUF's layout the four rows' blocks lie w_row bytes apart, each
 * block carries its own scale (and Q5_0 its high bits) in front of its
 * quants, and the kernel spends more instructions gathering and reshaping
 * them than multiplying: from cache the avx512 Q5_0 GEMV runs at ~19 GB/s
 * per core, under this machine's ~30 GB/s of memory bandwidth.  The x4
 * layout stores the same bytes so that they arrive in the order the vector
 * code consumes them.
 *
 * A matrix of n_out rows of nb blocks (bs bytes each, row size w_row =
 * nb * bs) keeps its size and its groups: rows 4g .. 4g+3 still occupy bytes
 * [4g w_row, (4g+4) w_row).  Inside a group, block columns are taken four
 * at a time ("tiles"; nb4 = nb / 4 of them), tile j at 16 bs * j:
 *
 *   Q5_0 (352 bytes):  d[16]   f16 scales, lane 4r + k = row r, block 4j + k
 *                      hb[4][2] u64: hb[k][0] bit 16r + i = high bit i of
 *                               (row r, block 4j + k), hb[k][1] bit 16r + i
 *                               = its high bit 16 + i
 *                      qs[4][4][16] quants of block 4j + k, row r
 *   Q4_0 (288 bytes):  d[16], then qs[4][4][16] as above.
 *
 * so that one 512-bit load brings a block of all four rows, one 256-bit
 * load its sixteen scales, and each half's high bits are one mask.  The
 * nb % 4 block columns after the tiles keep GGUF's block format, four
 * blocks (rows 0-3) side by side.  Rows after the last full group (n_out %
 * 4) are not touched, so vec_dot still computes them from the original
 * offsets, exactly as matmul's tiling expects (full tiles with gemm at row
 * offsets that are multiples of GEMM_ROWS, the last rows with vec_dot).
 *
 * Q4_K (144-byte super-blocks of 256 elements) has no tail: tile j is
 * super-block j of the four rows, 576 bytes at 576 j:
 *
 *   d[4] f16, dmin[4] f16       row r at 2 r, 8 + 2 r
 *   sw[3][4] u32                the 12 scale bytes as three words, word i
 *                               of row r at 16 + 16 i + 4 r
 *   qs[4][4][32]                chunk c (sub-blocks 2c low nibbles, 2c+1
 *                               high) of row r at 64 + 128 c + 32 r
 *
 * so that the four rows' d and dmin are one 128-bit load, word i of their
 * scales one 128-bit load (the 6-bit unpacking runs on the four rows at
 * once) and chunk c of rows 0 | 1, 2 | 3 one 512-bit or two 256-bit loads.
 *
 * Q6_K (210-byte super-blocks) has no tail either: tile j is super-block
 * j of the four rows, 840 bytes at 840 j, cut into 16-byte pieces laid
 * out four rows wide, so that one 128-bit lane of a vector is one row:
 *
 *   d[4] f16                    row r at 2 r
 *   sc[4][16] i8                row r's scales at 8 + 16 r
 *   ql[8][4][16]                bytes 16 p .. 16 p + 15 of row r's ql at
 *                               72 + 64 p + 16 r
 *   qh[4][4][16]                bytes 16 q .. of row r's qh at
 *                               584 + 64 q + 16 r
 *
 * A 16-element sub-block is one piece of ql and one of qh, so a 512-bit
 * load (two 256-bit ones) brings sub-block s of all four rows, each in its
 * own 128-bit lane, where one int16 scale per lane applies to it.
 *
 * The layout is a permutation of the bytes: repack_x4_block() gives back
 * any original block, which is how the reference kernels, the prefill
 * kernels and the tests read it.
 */
#ifndef INFER_KERNELS_REPACK_H
#define INFER_KERNELS_REPACK_H

#include <stddef.h>
#include <stdint.h>

#include "types.h"

/* Internal type ids of the repacked layouts: never read from a file (the
 * GGUF parser rejects ids >= GGML_TYPE_COUNT).  Bump REPACK_LAYOUT_VERSION
 * whenever the byte order above changes: cached files carry it. */
enum {
    INFER_TYPE_Q4_0_X4 = GGML_TYPE_COUNT,
    INFER_TYPE_Q5_0_X4,
    INFER_TYPE_Q4_K_X4,
    INFER_TYPE_Q6_K_X4,
    INFER_TYPE_COUNT,
};
#define REPACK_LAYOUT_VERSION 4u /* 2: Q4_K x4 added (older builds keep their L1 files); 3: the
                                  * 3-D expert tensors too (an L2 file of a MoE model lacks them);
                                  * 4: Q6_K x4 */

/* Where the bytes of block b of row r (0-3) lie, as offsets from the start
 * of their group of four rows (nb blocks per row, bs bytes per block): the
 * one definition of the layout above, for repack.c and the kernels.  In a
 * tile (b < nb / 4 * 4): its scale, its high bits (half 0: elements 0-15,
 * 1: 16-31; Q5_0), its quants; past the tiles the whole block. */
static inline size_t repack_x4_tile(int64_t b, size_t bs) { return (size_t)(b / 4) * 16 * bs; }
static inline size_t repack_x4_d(int r, int64_t b, size_t bs)
{
    return repack_x4_tile(b, bs) + 2 * (4 * (size_t)r + (size_t)(b % 4));
}
static inline size_t repack_x4_qh(int r, int64_t b, size_t bs, int half)
{
    return repack_x4_tile(b, bs) + 32 + 16 * (size_t)(b % 4) + 8 * (size_t)half + 2 * (size_t)r;
}
static inline size_t repack_x4_qs(uint32_t type, int r, int64_t b, size_t bs)
{
    return repack_x4_tile(b, bs) + (type == GGML_TYPE_Q5_0 ? 96 : 32) + 64 * (size_t)(b % 4) + 16 * (size_t)r;
}
static inline size_t repack_x4_whole(int r, int64_t b, int64_t nb, size_t bs)
{
    const int64_t nb4 = nb / 4;
    return (size_t)nb4 * 16 * bs + (size_t)(4 * (b - 4 * nb4) + r) * bs;
}

/* Q4_K's tile (above): offsets from the start of super-block column j's
 * 576 bytes. */
#define REPACK_X4K_TILE 576
static inline size_t repack_x4k_d(int r) { return 2 * (size_t)r; }
static inline size_t repack_x4k_dmin(int r) { return 8 + 2 * (size_t)r; }
static inline size_t repack_x4k_sw(int r, int i) { return 16 + 16 * (size_t)i + 4 * (size_t)r; }
static inline size_t repack_x4k_qs(int r, int c) { return 64 + 128 * (size_t)c + 32 * (size_t)r; }

/* Q6_K's tile (above): offsets from the start of super-block column j's
 * 840 bytes; p < 8 (ql), q < 4 (qh) index 16-byte pieces of a row. */
#define REPACK_X6K_TILE 840
static inline size_t repack_x6k_d(int r) { return 2 * (size_t)r; }
static inline size_t repack_x6k_sc(int r) { return 8 + 16 * (size_t)r; }
static inline size_t repack_x6k_ql(int r, int p) { return 72 + 64 * (size_t)p + 16 * (size_t)r; }
static inline size_t repack_x6k_qh(int r, int q) { return 584 + 64 * (size_t)q + 16 * (size_t)r; }

/* The x4 type of a GGUF type (0 when it has none), and the GGUF type an x4
 * type was made from (0 for any other id). */
uint32_t repack_x4_of(uint32_t type);
uint32_t repack_base_of(uint32_t x4type);

/* Write the x4 layout of an (n_out, n_in) matrix of `type` (Q4_0, Q5_0, Q4_K
 * or Q6_K) from src to dst (same size, ggml_row_size(type, n_in) * n_out bytes;
 * the buffers must not overlap).  n_in must be a multiple of the type's
 * block size. */
void repack_x4(uint32_t type, const void *src, void *dst, int64_t n_in, int64_t n_out);

/* The original bytes of block b of row r (0 <= r < 4) of the group that
 * starts at `group` (nb blocks per row) into blk (one block of the base
 * type). */
void repack_x4_block(uint32_t type, const void *group, int64_t nb, int r, int64_t b, void *blk);

/* The four original rows of the group at `group` into dst (4 rows of w_row
 * bytes). */
void repack_x4_unpack_group(uint32_t type, const void *group, int64_t nb, void *dst);

#endif
