/*
 * repack.c - the x4 layout (see repack.h): where each byte of a block goes,
 * used in both directions, so packing and unpacking cannot disagree.
 */
#include "repack.h"

#include <string.h>

#include "quants.h"

_Static_assert(sizeof(block_iq4_nl) == sizeof(block_q4_0) && offsetof(block_iq4_nl, qs) == offsetof(block_q4_0, qs),
               "IQ4_NL x4 is Q4_0 x4's byte order");
_Static_assert(REPACK_X6K_TILE == 4 * sizeof(block_q6_K) && REPACK_X4K_TILE == 4 * sizeof(block_q4_K) &&
                   REPACK_X3K_TILE == 4 * sizeof(block_q3_K),
               "an x4 tile is four super-blocks");

uint32_t repack_x4_of(uint32_t type)
{
    switch (type) {
    case GGML_TYPE_Q4_0: return INFER_TYPE_Q4_0_X4;
    case GGML_TYPE_Q5_0: return INFER_TYPE_Q5_0_X4;
    case GGML_TYPE_Q4_K: return INFER_TYPE_Q4_K_X4;
    case GGML_TYPE_Q6_K: return INFER_TYPE_Q6_K_X4;
    case GGML_TYPE_Q8_0: return INFER_TYPE_Q8_0_X4;
    case GGML_TYPE_IQ4_NL: return INFER_TYPE_IQ4_NL_X4;
    case GGML_TYPE_Q3_K: return INFER_TYPE_Q3_K_X4;
    default: return 0;
    }
}

uint32_t repack_base_of(uint32_t x4type)
{
    switch (x4type) {
    case INFER_TYPE_Q4_0_X4: return GGML_TYPE_Q4_0;
    case INFER_TYPE_Q5_0_X4: return GGML_TYPE_Q5_0;
    case INFER_TYPE_Q4_K_X4: return GGML_TYPE_Q4_K;
    case INFER_TYPE_Q6_K_X4: return GGML_TYPE_Q6_K;
    case INFER_TYPE_Q8_0_X4: return GGML_TYPE_Q8_0;
    case INFER_TYPE_Q4_0_X4S: return GGML_TYPE_Q4_0;
    case INFER_TYPE_IQ4_NL_X4: return GGML_TYPE_IQ4_NL;
    case INFER_TYPE_Q3_K_X4: return GGML_TYPE_Q3_K;
    case INFER_TYPE_Q4_K_X4I: return GGML_TYPE_Q4_K;
    default: return 0;
    }
}

/* Block size in bytes and elements of a base type. */
static size_t x4_bs(uint32_t type)
{
    switch (type) {
    case GGML_TYPE_Q4_K: return sizeof(block_q4_K);
    case GGML_TYPE_Q6_K: return sizeof(block_q6_K);
    case GGML_TYPE_Q3_K: return sizeof(block_q3_K);
    case GGML_TYPE_Q5_0: return sizeof(block_q5_0);
    case GGML_TYPE_Q8_0: return sizeof(block_q8_0);
    case GGML_TYPE_IQ4_NL: return sizeof(block_iq4_nl);
    default: return sizeof(block_q4_0);
    }
}
static int64_t x4_be(uint32_t type)
{
    return type == GGML_TYPE_Q4_K || type == GGML_TYPE_Q6_K || type == GGML_TYPE_Q3_K ? QK_K : 32;
}

/* Where the parts of block b of row r live, as offsets from the group:
 * whole >= 0 for a tail column (the block as is), else the scale, the two
 * halves of Q5_0's high bits, and the 16 quant bytes. */
struct x4_place {
    int64_t whole;
    size_t d, qh_lo, qh_hi, qs;
};

static struct x4_place x4_place(uint32_t type, int64_t nb, int r, int64_t b)
{
    const size_t bs = x4_bs(type);
    struct x4_place p = {.whole = -1};
    if (b >= nb / 4 * 4) {
        p.whole = (int64_t)repack_x4_whole(r, b, nb, bs);
        return p;
    }
    p.d = repack_x4_d(r, b, bs);
    p.qh_lo = repack_x4_qh(r, b, bs, 0);
    p.qh_hi = repack_x4_qh(r, b, bs, 1);
    p.qs = repack_x4_qs(type, r, b, bs);
    return p;
}

/* Q3_K x4 (repack.h): super-block b of row r between GGUF's block and its
 * tile, the quants re-coded: u = q + 4 of element i is bits 0-1 of
 * qs[32 (i / 128) + i % 32] at 2 ((i / 32) % 4) and bit 2 of hmask[i % 32]
 * at 4 (i / 128) + (i / 32) % 4 in GGUF's block; in the tile, octet k of
 * quarter T (i = 64 T + 8 k + e) is in byte e of row r's A, B, C as
 * repack.h says. */
static void x3k_copy(uint8_t *group, int r, int64_t b, uint8_t *blk, int pack)
{
    uint8_t *t = group + (size_t)b * REPACK_X3K_TILE;
    block_q3_K *x = (block_q3_K *)blk;
    if (pack) {
        memcpy(t + repack_x3k_d(r), &x->d, 2);
        memcpy(t + repack_x3k_sl(r), x->scales, 8);
        memcpy(t + repack_x3k_sh(r), x->scales + 8, 4);
        for (int T = 0; T < 4; T++)
            for (int v = 0; v < 3; v++)
                memset(t + repack_x3k_q(r, T, v), 0, 8);
    } else {
        memcpy(&x->d, t + repack_x3k_d(r), 2);
        memcpy(x->scales, t + repack_x3k_sl(r), 8);
        memcpy(x->scales + 8, t + repack_x3k_sh(r), 4);
        memset(x->qs, 0, sizeof(x->qs));
        memset(x->hmask, 0, sizeof(x->hmask));
    }
    for (int i = 0; i < QK_K; i++) {
        const int T = i / 64, k = (i / 8) % 8, e = i % 8;
        const int qi = 32 * (i / 128) + i % 32, qsh = 2 * ((i / 32) % 4), hsh = 4 * (i / 128) + (i / 32) % 4;
        uint8_t *A = t + repack_x3k_q(r, T, 0) + e, *B = t + repack_x3k_q(r, T, 1) + e,
                *C = t + repack_x3k_q(r, T, 2) + e;
        if (pack) {
            const int u = ((x->qs[qi] >> qsh) & 3) | (((x->hmask[i % 32] >> hsh) & 1) << 2);
            if (k < 6) {
                uint8_t *p = k < 2 ? A : k < 4 ? B : C;
                *p |= (uint8_t)(u << (4 * (k % 2)));
            } else {
                const int s = k == 6 ? 3 : 7;
                *A |= (uint8_t)((u & 1) << s);
                *B |= (uint8_t)(((u >> 1) & 1) << s);
                *C |= (uint8_t)(((u >> 2) & 1) << s);
            }
        } else {
            int u;
            if (k < 6) {
                const uint8_t *p = k < 2 ? A : k < 4 ? B : C;
                u = (*p >> (4 * (k % 2))) & 7;
            } else {
                const int s = k == 6 ? 3 : 7;
                u = ((*A >> s) & 1) | (((*B >> s) & 1) << 1) | (((*C >> s) & 1) << 2);
            }
            x->qs[qi] |= (uint8_t)((u & 3) << qsh);
            x->hmask[i % 32] |= (uint8_t)((u >> 2) << hsh);
        }
    }
}

/* Copy one block between its original bytes `blk` and the group of layout
 * x4: to the group when `pack`, else back. */
static void x4_copy(uint32_t x4, uint8_t *group, int64_t nb, int r, int64_t b, uint8_t *blk, int pack)
{
    const uint32_t type = repack_base_of(x4);
#define MOVE(at, off, len) (pack ? memcpy(group + (at), blk + (off), (len)) : memcpy(blk + (off), group + (at), (len)))
    if (type == GGML_TYPE_Q4_K) {
        const size_t t = (size_t)b * REPACK_X4K_TILE;
        MOVE(t + repack_x4k_d(r), offsetof(block_q4_K, d), 2);
        MOVE(t + repack_x4k_dmin(r), offsetof(block_q4_K, dmin), 2);
        for (int i = 0; i < 3; i++)
            MOVE(t + repack_x4k_sw(r, i), offsetof(block_q4_K, scales) + 4 * (size_t)i, 4);
        for (int c = 0; c < 4; c++)
            for (int i = 0; i < 4; i++) /* x4i: in eight-byte pieces */
                MOVE(x4 == INFER_TYPE_Q4_K_X4I ? t + repack_x4ki_qs(r, c, i) : t + repack_x4k_qs(r, c) + 8 * (size_t)i,
                     offsetof(block_q4_K, qs) + 32 * (size_t)c + 8 * (size_t)i, 8);
        return;
    }
    if (type == GGML_TYPE_Q3_K) {
        x3k_copy(group, r, b, blk, pack);
        return;
    }
    if (type == GGML_TYPE_Q6_K) {
        const size_t t = (size_t)b * REPACK_X6K_TILE;
        MOVE(t + repack_x6k_d(r), offsetof(block_q6_K, d), 2);
        MOVE(t + repack_x6k_sc(r), offsetof(block_q6_K, scales), 16);
        for (int p = 0; p < 8; p++)
            MOVE(t + repack_x6k_ql(r, p), offsetof(block_q6_K, ql) + 16 * (size_t)p, 16);
        for (int q = 0; q < 4; q++)
            MOVE(t + repack_x6k_qh(r, q), offsetof(block_q6_K, qh) + 16 * (size_t)q, 16);
        return;
    }
    const size_t bs = x4_bs(type);
    const struct x4_place p = x4_place(type, nb, r, b);
    if (p.whole >= 0) {
        MOVE((size_t)p.whole, 0, bs);
        return;
    }
    MOVE(p.d, 0, 2);
    if (x4 == INFER_TYPE_Q8_0_X4 || x4 == INFER_TYPE_Q4_0_X4S) { /* words of four bytes; Q4_0 XORed with 0x88 */
        const size_t qb = bs - sizeof(ggml_half);
        const uint8_t flip = x4 == INFER_TYPE_Q4_0_X4S ? 0x88 : 0;
        for (int i = 0; i < (int)qb; i++) {
            uint8_t *q = group + repack_x4s_q(r, b, bs, qb, i);
            if (pack)
                *q = blk[sizeof(ggml_half) + (size_t)i] ^ flip;
            else
                blk[sizeof(ggml_half) + (size_t)i] = *q ^ flip;
        }
    } else if (type == GGML_TYPE_Q5_0) {
        MOVE(p.qh_lo, offsetof(block_q5_0, qh), 2);
        MOVE(p.qh_hi, offsetof(block_q5_0, qh) + 2, 2);
        MOVE(p.qs, offsetof(block_q5_0, qs), 16);
    } else { /* Q4_0, IQ4_NL: the same bytes */
        MOVE(p.qs, offsetof(block_q4_0, qs), 16);
    }
#undef MOVE
}

void repack_x4(uint32_t x4, const void *src, void *dst, int64_t n_in, int64_t n_out)
{
    const uint32_t type = repack_base_of(x4);
    const int64_t nb = n_in / x4_be(type);
    const size_t w_row = ggml_row_size(type, n_in), bs = x4_bs(type);
    const uint8_t *s = src;
    uint8_t *d = dst;
    const int64_t full = n_out / 4 * 4;
    for (int64_t g = 0; g < full; g += 4) {
        uint8_t *group = d + (size_t)g * w_row;
        for (int r = 0; r < 4; r++)
            for (int64_t b = 0; b < nb; b++)
                x4_copy(x4, group, nb, r, b, (uint8_t *)(s + (size_t)(g + r) * w_row + (size_t)b * bs), 1);
    }
    if (n_out > full)
        memcpy(d + (size_t)full * w_row, s + (size_t)full * w_row, (size_t)(n_out - full) * w_row);
}

void repack_x4_block(uint32_t x4, const void *group, int64_t nb, int r, int64_t b, void *blk)
{
    x4_copy(x4, (uint8_t *)group, nb, r, b, blk, 0);
}

void repack_x4_unpack_group(uint32_t x4, const void *group, int64_t nb, void *dst)
{
    const size_t bs = x4_bs(repack_base_of(x4));
    for (int r = 0; r < 4; r++)
        for (int64_t b = 0; b < nb; b++)
            repack_x4_block(x4, group, nb, r, b, (uint8_t *)dst + ((size_t)r * (size_t)nb + (size_t)b) * bs);
}
