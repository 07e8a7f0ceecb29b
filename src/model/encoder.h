/*
 * encoder.h - the BERT encoder (`general.architecture = bert`): sentence
 * embeddings for all-MiniLM, bge and their kind (see encoder.c).
 *
 * Kept apart from the decoder (model.h, forward.c): no KV cache, no RoPE,
 * LayerNorm instead of RMSNorm, post-norm blocks, bidirectional attention
 * over one input at a time, and a pooled vector instead of logits.  Same
 * lifetimes as the decoder: encoder_config is the shape read from metadata,
 * encoder_weights are views into the read-only map, activations are
 * allocated per call (encoder_forward is safe to call from several threads).
 */
#ifndef INFER_ENCODER_H
#define INFER_ENCODER_H

#include "model.h"

/* bert.pooling_type values (llama.cpp's enum llama_pooling_type) */
enum encoder_pooling { POOL_NONE = 0, POOL_MEAN = 1, POOL_CLS = 2, POOL_LAST = 3, POOL_RANK = 4 };

struct encoder_config {
    int n_vocab;
    int n_embd;        /* hidden width; the embedding has this many floats */
    int n_layer;
    int n_head;
    int head_dim;      /* n_embd / n_head */
    int n_ff;
    int n_ctx_train;   /* rows of position_embd: the most tokens one input may have */
    int n_token_types;
    float norm_eps;    /* attention.layer_norm_epsilon */
    enum encoder_pooling pooling;
};

struct encoder_layer {
    struct mat wq, wk, wv;   /* (n_embd) -> (n_embd) */
    const float *bq, *bk, *bv; /* (n_embd) */
    struct mat wo;           /* (n_embd) -> (n_embd) */
    const float *bo;         /* (n_embd), optional */
    const float *attn_out_norm, *attn_out_norm_b;     /* (n_embd) LayerNorm after attention */
    struct mat ffn_up;       /* (n_embd) -> (n_ff) */
    const float *ffn_up_b;   /* (n_ff), optional */
    struct mat ffn_down;     /* (n_ff) -> (n_embd) */
    const float *ffn_down_b; /* (n_embd), optional */
    const float *out_norm, *out_norm_b;               /* (n_embd) LayerNorm after the FFN */
};

struct encoder_weights {
    struct mat tok_embd;      /* (n_vocab rows of n_embd) */
    struct mat pos_embd;      /* (n_ctx_train rows of n_embd) */
    const float *type0;       /* (n_embd) row 0 of token_types (sequence A), or NULL */
    const float *embd_norm, *embd_norm_b; /* (n_embd) */
    struct encoder_layer *layers;
};

struct encoder {
    struct encoder_config c;
    struct encoder_weights w;
};

/* Read the config and bind the weights of an open `bert` GGUF.  Errors name
 * the key or tensor that is missing, out of range or of the wrong shape; on
 * error nothing needs freeing but encoder_unbind is harmless. */
infer_status encoder_bind(struct encoder *e, const infer_gguf *g);
void encoder_unbind(struct encoder *e);

/* Embed n_seq inputs in one batch: sequence i is tokens[off_i .. off_i +
 * n_tokens[i]) (off_i the sum of the lengths before it), each 1 ..
 * n_ctx_train tokens ([CLS] ... [SEP] already in place).  out gets n_seq rows
 * of n_embd floats: the pooled hidden state, L2-normalised when normalize.
 * Errors: INFER_ERR_INVALID for a bad length or token id, INFER_ERR_NOMEM. */
infer_status encoder_forward(const struct encoder *e, const int32_t *tokens, const int32_t *n_tokens, int n_seq,
                             bool normalize, float *out);

#endif
