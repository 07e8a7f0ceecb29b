/*
 * attention.h - causal multi-head attention over K/V stored in blocks.
 *
 * K and V are read through a block table (src/cache/kv.h layout): position p of a
 * sequence is row p % bt of block blocks[p / bt]; inside a block each KV head
 * of each layer is a contiguous [bt][row] array, a row being head_dim F16
 * values or head_dim / 32 Q8_0 blocks (k_q8, v_q8), whose values are read
 * as (float)q * d.
 */
#ifndef INFER_KERNELS_ATTENTION_H
#define INFER_KERNELS_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

/* One layer's K/V for a batch of tokens that may belong to different
 * sequences: token t reads the block table blocks[t] up to position pos[t];
 * and the layer's score soft-cap. */
struct attn_kv {
    const uint8_t *base;           /* arena base */
    size_t block_bytes;            /* stride between blocks */
    size_t k_off, v_off;           /* this layer's K and V (head 0) inside a block */
    size_t head_bytes;             /* stride between K heads inside a block */
    size_t head_bytes_v;           /* stride between V heads (0: head_bytes) */
    int k_q8, v_q8;                /* rows are Q8_0 blocks instead of F16 */
    int block_tokens;
    const int32_t *const *blocks;  /* per token: its sequence's block table */
    const int64_t *pos;            /* per token: its position */
    float softcap;                 /* > 0: scores s become softcap * tanh(s / softcap) (gemma2) */
};

/*
 * out[t][h*head_dim + d] = sum_j softmax_j(s_j) V[j][h/g][d],  s_j = scale * q[t][h] . K[j][h/g]
 * (s_j = softcap * tanhf(s_j * (1 / softcap)) when kv->softcap > 0)
 * for t < n_tok, over positions j <= pos[t] of token t's sequence, and
 * j > pos[t] - window when window > 0 (sliding-window layers).  g is the
 * number of query heads per KV head.  K/V up to pos[t] must already be
 * stored.
 */
void attention_ref(float *out, const float *q, int64_t n_tok, const struct attn_kv *kv, int n_head, int n_head_kv,
                   int head_dim, float scale, int window);

#endif
