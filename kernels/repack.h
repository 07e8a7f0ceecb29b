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
 *   IQ4_NL (288 bytes): Q4_0's tile byte for byte.  An IQ4_NL block (f16 d,
 *                      16 bytes of nibbles: element i low in byte i, 16 + i
 *                      high) has Q4_0's byte structure; only the nibble's
 *                      value differs (the signed codebook kvalues_iq4nl,
 *                      -127 .. 113, where Q4_0 has n - 8), which the
 *                      kernels look up after the same loads.
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
 * Q4_K x4i (avx2, avxvnni) is Q4_K x4 with each chunk's quants interleaved
 * by eight bytes: bytes 8i .. 8i + 7 of chunk c of row r at 64 + 128 c +
 * 32 i + 8 r, so that one 256-bit load is eight bytes of each of the four
 * rows, one row per 64-bit lane (the vector their 2-4 token and one-token
 * tiles multiply by a token's eight activation bytes broadcast), where
 * Q4_K x4 takes two unpacks and a lane permute per vector to get there.
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
 * Q3_K (110-byte super-blocks, avx2 only) has no tail: tile j is
 * super-block j of the four rows, 440 bytes at 440 j:
 *
 *   d[4] f16                    row r at 2 r
 *   sl[4][8]                    row r's scales[0..7] (the low nibbles) at
 *                               8 + 8 r
 *   sh[4][4]                    row r's scales[8..11] (the top bits) at
 *                               40 + 4 r
 *   q[4][3][4][8]               the quants, re-coded (below): byte e of
 *                               row r of vector v (A, B, C) of quarter T at
 *                               56 + 96 T + 32 v + 8 r + e
 *
 * The quants are stored as u = q + 4 (0..7: the low two bits from qs, bit
 * 2 the hmask bit), not in GGUF's planes.  Quarter T holds elements 64 T ..
 * 64 T + 63 of each row as eight octets k (elements 64 T + 8 k + e, e < 8),
 * octet k's u in byte e of row r's eight bytes of A, B, C: k = 0, 1 in A's
 * bits 0-2, 4-6; k = 2, 3 in B's; k = 4, 5 in C's; k = 6 in bit 3 of A, B
 * and C (u's bits 0, 1, 2), k = 7 in their bit 7.  So a 256-bit load is
 * eight elements of each of the four rows, one row per 64-bit lane, and
 * six of a quarter's eight octets come out with one AND (and a shift) each.
 * This one is a bijection of the bits, not of the bytes.
 *
 * Two layouts serve SDOT by element (aarch64 dotprod, i8mm: one SDOT adds
 * four products of each of four rows into the row's lane), whose operand
 * holds the same four elements of four rows side by side.  Their tiles are
 * Q4_0's (four block columns, the nb % 4 after them GGUF's blocks, four rows
 * side by side), with the quants as words of four bytes:
 *
 *   Q8_0 x4 (544 bytes):   d[16] as Q4_0's, then qs[4][8][4][4]: byte m of
 *                          word v of row r of block 4j + k (its elements
 *                          4v + m) at 32 + 128 k + 16 v + 4 r + m
 *   Q4_0 x4s (288 bytes):  d[16] as Q4_0's, then qs[4][4][4][4]: quant byte
 *                          4v + m of row r of block 4j + k (elements 4v + m
 *                          in its low nibble, 16 + 4v + m in its high one)
 *                          at 32 + 64 k + 16 v + 4 r + m, XORed with 0x88
 *
 * so that a 64-byte load brings four SDOT operands (Q8_0: elements 0-15 or
 * 16-31 of four rows; Q4_0: all 32, low and high nibbles).  The XOR flips
 * the top bit of each nibble, n ^ 8 = n - 8 + 16 [n < 8]: in the top four
 * bits of an int8 that is 16 (n - 8), so a shift left by four (low nibble)
 * or an AND with 0xF0 (high) gives sixteen times the signed quant, which
 * SDOT takes as it is (the sums are exactly 16 times the reference's, and a
 * fixed-point conversion with four fraction bits gives back the float of
 * the reference's sum).  avx512 and avxvnni use Q8_0 x4 as well: vpdpbusd
 * adds four products per dword just as SDOT does, so a vector of it is
 * dwords (elements 4v .. 4v + 3, row r) against the token's dword v
 * repeated four times (one vpermd), and a group is one weight stream.
 *
 * Each layout but Q3_K's is a permutation of the bytes (Q4_0 x4s: of the bytes XORed):
 * repack_x4_block() gives back any original block, which is how the
 * reference kernels, the prefill kernels and the tests read it.
 */
#ifndef INFER_KERNELS_REPACK_H
#define INFER_KERNELS_REPACK_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "types.h"

/* Internal type ids of the repacked layouts: never read from a file (the
 * GGUF parser rejects ids >= GGML_TYPE_COUNT).  Bump REPACK_LAYOUT_VERSION
 * whenever the byte order above changes: cached files carry it. */
enum {
    INFER_TYPE_Q4_0_X4 = GGML_TYPE_COUNT,
    INFER_TYPE_Q5_0_X4,
    INFER_TYPE_Q4_K_X4,
    INFER_TYPE_Q6_K_X4,
    INFER_TYPE_Q8_0_X4,
    INFER_TYPE_Q4_0_X4S,
    INFER_TYPE_IQ4_NL_X4,
    INFER_TYPE_Q3_K_X4,
    INFER_TYPE_Q4_K_X4I,
    INFER_TYPE_COUNT,
};
#define REPACK_LAYOUT_VERSION 9u /* 2: Q4_K x4 added (older builds keep their L1 files); 3: the
                                  * 3-D expert tensors too (an L2 file of a MoE model lacks them);
                                  * 4: Q6_K x4; 5: Q8_0 x4, Q4_0 x4s; 6: IQ4_NL x4; 7: Q3_K x4;
                                  * 8: Q8_0 x4 on avx512 and avxvnni too (their L7 files lack it);
                                  * 9: Q4_K x4i on avx2 and avxvnni (their L8 files hold Q4_K x4) */

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
/* Byte i of the quants of block b of row r in a tile of the SDOT layouts
 * (Q8_0 x4, Q4_0 x4s; qb quant bytes per block: 32, 16). */
static inline size_t repack_x4s_q(int r, int64_t b, size_t bs, size_t qb, int i)
{
    return repack_x4_tile(b, bs) + 32 + 4 * qb * (size_t)(b % 4) + 16 * (size_t)(i / 4) + 4 * (size_t)r +
           (size_t)(i % 4);
}
/* The 32 quant bytes of block b of row r of a Q8_0 x4 group (in a tile), in
 * element order: eight words of four (34: a Q8_0 block's bytes). */
static inline void repack_x8_qs(const uint8_t *group, int r, int64_t b, uint8_t qs[32])
{
    for (int v = 0; v < 8; v++)
        memcpy(qs + 4 * v, group + repack_x4s_q(r, b, 34, 32, 4 * v), 4);
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
/* Q4_K x4i: bytes 8i .. 8i + 7 of chunk c of row r (the rest as Q4_K x4). */
static inline size_t repack_x4ki_qs(int r, int c, int i) { return 64 + 128 * (size_t)c + 32 * (size_t)i + 8 * (size_t)r; }

/* Q6_K's tile (above): offsets from the start of super-block column j's
 * 840 bytes; p < 8 (ql), q < 4 (qh) index 16-byte pieces of a row. */
#define REPACK_X6K_TILE 840
static inline size_t repack_x6k_d(int r) { return 2 * (size_t)r; }
static inline size_t repack_x6k_sc(int r) { return 8 + 16 * (size_t)r; }
static inline size_t repack_x6k_ql(int r, int p) { return 72 + 64 * (size_t)p + 16 * (size_t)r; }
static inline size_t repack_x6k_qh(int r, int q) { return 584 + 64 * (size_t)q + 16 * (size_t)r; }

/* Q3_K's tile (above): offsets from the start of super-block column j's
 * 440 bytes; T < 4 a quarter, v < 3 its vector A, B, C. */
#define REPACK_X3K_TILE 440
static inline size_t repack_x3k_d(int r) { return 2 * (size_t)r; }
static inline size_t repack_x3k_sl(int r) { return 8 + 8 * (size_t)r; }
static inline size_t repack_x3k_sh(int r) { return 40 + 4 * (size_t)r; }
static inline size_t repack_x3k_q(int r, int T, int v) { return 56 + 96 * (size_t)T + 32 * (size_t)v + 8 * (size_t)r; }

/* The x4 type of a GGUF type (0 when it has none; Q4_0's is the x86
 * variants' Q4_0 x4, Q4_0 x4s is another layout of it), and the GGUF type
 * an x4 type was made from (0 for any other id). */
uint32_t repack_x4_of(uint32_t type);
uint32_t repack_base_of(uint32_t x4type);

/* Write layout x4 (an x4 type) of an (n_out, n_in) matrix of its base type
 * from src to dst (same size, ggml_row_size(base, n_in) * n_out bytes; the
 * buffers must not overlap).  n_in must be a multiple of the base type's
 * block size. */
void repack_x4(uint32_t x4, const void *src, void *dst, int64_t n_in, int64_t n_out);

/* The original bytes of block b of row r (0 <= r < 4) of the group of
 * layout x4 that starts at `group` (nb blocks per row) into blk (one block
 * of the base type). */
void repack_x4_block(uint32_t x4, const void *group, int64_t nb, int r, int64_t b, void *blk);

/* The four original rows of the group at `group` into dst (4 rows of w_row
 * bytes). */
void repack_x4_unpack_group(uint32_t x4, const void *group, int64_t nb, void *dst);

#endif
