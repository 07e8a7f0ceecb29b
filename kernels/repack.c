/*
 * repack.c - the x4 layout (see repack.h): where each byte of a block goes,
 * used in both directions, so packing and unpacking cannot disagree.
 */
#include "repack.h"

#include <string.h>

#include "quants.h"

uint32_t repack_x4_of(uint32_t type)
{
    return type == GGML_TYPE_Q4_0 ? INFER_TYPE_Q4_0_X4 : type == GGML_TYPE_Q5_0 ? INFER_TYPE_Q5_0_X4 : 0;
}

uint32_t repack_base_of(uint32_t x4type)
{
    return x4type == INFER_TYPE_Q4_0_X4 ? GGML_TYPE_Q4_0 : x4type == INFER_TYPE_Q5_0_X4 ? GGML_TYPE_Q5_0 : 0;
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
    const size_t bs = type == GGML_TYPE_Q5_0 ? sizeof(block_q5_0) : sizeof(block_q4_0);
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

/* Copy one block between its original bytes `blk` and the group: to the
 * group when `pack`, else back. */
static void x4_copy(uint32_t type, uint8_t *group, int64_t nb, int r, int64_t b, uint8_t *blk, int pack)
{
    const size_t bs = type == GGML_TYPE_Q5_0 ? sizeof(block_q5_0) : sizeof(block_q4_0);
    const struct x4_place p = x4_place(type, nb, r, b);
#define MOVE(at, off, len) (pack ? memcpy(group + (at), blk + (off), (len)) : memcpy(blk + (off), group + (at), (len)))
    if (p.whole >= 0) {
        MOVE((size_t)p.whole, 0, bs);
        return;
    }
    MOVE(p.d, 0, 2);
    if (type == GGML_TYPE_Q5_0) {
        MOVE(p.qh_lo, offsetof(block_q5_0, qh), 2);
        MOVE(p.qh_hi, offsetof(block_q5_0, qh) + 2, 2);
        MOVE(p.qs, offsetof(block_q5_0, qs), 16);
    } else {
        MOVE(p.qs, offsetof(block_q4_0, qs), 16);
    }
#undef MOVE
}

void repack_x4(uint32_t type, const void *src, void *dst, int64_t n_in, int64_t n_out)
{
    const int64_t nb = n_in / 32;
    const size_t w_row = ggml_row_size(type, n_in), bs = w_row / (size_t)(nb ? nb : 1);
    const uint8_t *s = src;
    uint8_t *d = dst;
    const int64_t full = n_out / 4 * 4;
    for (int64_t g = 0; g < full; g += 4) {
        uint8_t *group = d + (size_t)g * w_row;
        for (int r = 0; r < 4; r++)
            for (int64_t b = 0; b < nb; b++)
                x4_copy(type, group, nb, r, b, (uint8_t *)(s + (size_t)(g + r) * w_row + (size_t)b * bs), 1);
    }
    if (n_out > full)
        memcpy(d + (size_t)full * w_row, s + (size_t)full * w_row, (size_t)(n_out - full) * w_row);
}

void repack_x4_block(uint32_t type, const void *group, int64_t nb, int r, int64_t b, void *blk)
{
    x4_copy(type, (uint8_t *)group, nb, r, b, blk, 0);
}

void repack_x4_unpack_group(uint32_t type, const void *group, int64_t nb, void *dst)
{
    const size_t bs = type == GGML_TYPE_Q5_0 ? sizeof(block_q5_0) : sizeof(block_q4_0);
    for (int r = 0; r < 4; r++)
        for (int64_t b = 0; b < nb; b++)
            repack_x4_block(type, group, nb, r, b, (uint8_t *)dst + ((size_t)r * (size_t)nb + (size_t)b) * bs);
}
