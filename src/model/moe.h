/*
 * moe.h - the mixture-of-experts feed-forward of one layer (see moe.c).
 */
#ifndef INFER_MOE_H
#define INFER_MOE_H

#include "model.h"

/*
 * out (n_tok, n_embd) = the routed experts of layer l applied to the
 * normalised FFN input x (n_tok, n_embd), plus the shared expert where the
 * family has one.  counts, when not NULL, has n_expert entries and each
 * (token, slot) adds 1 to its expert's.  The result of a token does not
 * depend on the other tokens of the batch, bit for bit (the prefix cache
 * relies on it).  Errors: those of matmul (message set), INFER_ERR_NOMEM.
 */
infer_status moe_ffn(const struct model_config *c, const struct layer_weights *l, const float *x, int64_t n_tok,
                     float *out, uint64_t *counts);

/* The same, one token and one expert at a time through matmul (the
 * specification moe_ffn's grouped path is tested against; same bits). */
infer_status moe_ffn_ref(const struct model_config *c, const struct layer_weights *l, const float *x, int64_t n_tok,
                         float *out);

/* The router of one token: the n_expert_used experts with the highest
 * softmax probability of logits (n_expert), in descending order (ties:
 * lower index first), and their weights (renormalised when c->moe_norm_w),
 * as llama.cpp's build_moe_ffn. */
void moe_route(const struct model_config *c, const float *logits, int32_t *sel, float *weights);

#endif
