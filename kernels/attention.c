/*
 * attention.c - scalar reference attention (see attention.h): scores, a
 * max-subtracted softmax, and the weighted sum of values, one (token, head)
 * pair per thread-pool item.
 */
#include "attention.h"

#include "pool.h"
#include "quants.h"
#include "types.h"

#include <math.h>
#include <stdlib.h>

/* The row of position pos of KV head kvh (K: v = 0, V: v = 1). */
static inline const uint8_t *row_at(const struct attn_kv *kv, const int32_t *blocks, int v, int kvh, int64_t pos,
                                    int head_dim)
{
    const int q8 = v ? kv->v_q8 : kv->k_q8;
    const size_t hb = v && kv->head_bytes_v ? kv->head_bytes_v : kv->head_bytes;
    const size_t rb = q8 ? (size_t)(head_dim / 32) * sizeof(block_q8_0) : (size_t)head_dim * sizeof(uint16_t);
    const uint8_t *blk = kv->base + (size_t)blocks[pos / kv->block_tokens] * kv->block_bytes;
    return blk + (v ? kv->v_off : kv->k_off) + (size_t)kvh * hb + (size_t)(pos % kv->block_tokens) * rb;
}

/* Element d of a row: an F16 value, or q * d of its Q8_0 block. */
static inline float row_val(const uint8_t *row, int q8, int d)
{
    if (!q8)
        return fp16_to_fp32(((const uint16_t *)row)[d]);
    const block_q8_0 *b = (const block_q8_0 *)row + d / 32;
    return (float)b->qs[d % 32] * fp16_to_fp32(b->d);
}

/* The reference attention as pool items: item i is (token i / n_head, head i % n_head). */
struct ref_items {
    float *out;
    const float *q;
    const struct attn_kv *kv;
    int n_head, group, head_dim, window;
    int64_t n_ctx;
    float scale;
};

static void ref_items_run(void *ctx, int64_t i0, int64_t i1)
{
    const struct ref_items *a = ctx;
    const struct attn_kv *kv = a->kv;
    const int head_dim = a->head_dim, n_head = a->n_head;
    float *scores = malloc((size_t)a->n_ctx * sizeof(float));
    float *acc = malloc((size_t)head_dim * sizeof(float));
    for (int64_t i = i0; i < i1; i++) {
        const int64_t t = i / n_head;
        const int h = (int)(i % n_head);
        float *o = a->out + (size_t)t * n_head * head_dim + (size_t)h * head_dim;
        if (!scores || !acc) { /* no memory: a zero row rather than a crash */
            for (int d = 0; d < head_dim; d++)
                o[d] = 0.0f;
            continue;
        }
        const int64_t pos = kv->pos[t];
        const int32_t *blocks = kv->blocks[t];
        const int kvh = h / a->group;
        const float *qh = a->q + (size_t)t * n_head * head_dim + (size_t)h * head_dim;
        int64_t first = a->window > 0 && pos - a->window + 1 > 0 ? pos - a->window + 1 : 0;
        float max = -INFINITY;
        for (int64_t j = first; j <= pos; j++) {
            const uint8_t *k = row_at(kv, blocks, 0, kvh, j, head_dim);
            float s = 0.0f;
            for (int d = 0; d < head_dim; d++)
                s += qh[d] * row_val(k, kv->k_q8, d);
            s *= a->scale;
            if (kv->softcap > 0.0f)
                s = tanhf(s * (1.0f / kv->softcap)) * kv->softcap;
            scores[j] = s;
            if (s > max)
                max = s;
        }
        double sum = 0.0;
        for (int64_t j = first; j <= pos; j++) {
            scores[j] = expf(scores[j] - max);
            sum += scores[j];
        }
        for (int d = 0; d < head_dim; d++)
            acc[d] = 0.0f;
        for (int64_t j = first; j <= pos; j++) {
            const uint8_t *v = row_at(kv, blocks, 1, kvh, j, head_dim);
            const float w = scores[j];
            for (int d = 0; d < head_dim; d++)
                acc[d] += w * row_val(v, kv->v_q8, d);
        }
        const float inv = (float)(1.0 / sum);
        for (int d = 0; d < head_dim; d++)
            o[d] = acc[d] * inv;
    }
    free(scores);
    free(acc);
}

void attention_ref(float *out, const float *q, int64_t n_tok, const struct attn_kv *kv, int n_head, int n_head_kv,
                   int head_dim, float scale, int window)
{
    int64_t n_ctx = 1;
    for (int64_t t = 0; t < n_tok; t++)
        if (kv->pos[t] + 1 > n_ctx)
            n_ctx = kv->pos[t] + 1;
    struct ref_items it = {out, q, kv, n_head, n_head / n_head_kv, head_dim, window, n_ctx, scale};
    pool_for(n_tok * n_head, 1, ref_items_run, &it);
}
