/*
 * forward.h - the transformer forward pass (see forward.c).
 */
#ifndef INFER_FORWARD_H
#define INFER_FORWARD_H

#include "cache/kv.h"
#include "model.h"

/* Activations for up to n_batch tokens at once. */
struct run_state {
    int n_batch;
    float *x;      /* (n_batch, n_embd) residual stream */
    float *xb;     /* (n_batch, n_embd) normalised input of a sub-layer */
    float *xb2;    /* (n_batch, n_embd) output of a sub-layer */
    float *q;      /* (n_batch, n_head * head_dim) */
    float *k, *v;  /* (n_batch, n_head_kv * head_dim) */
    float *att;    /* (n_batch, n_head * head_dim) attention output */
    float *hb;     /* (n_batch, n_ff) gate, then activation */
    float *hb2;    /* (n_batch, n_ff) up */
    const int32_t **blocks; /* (n_batch) per-token block tables for attention */
    float *rope_cs;         /* (2, n_batch, n_rot) RoPE angles of each token, global then
                             * sliding-window layers (rope_angles) */
    const float *rope_factors; /* frequency factors for this context (model_rope_factors) */
    uint64_t *expert_counts;   /* (n_layer, n_expert) tokens routed to each expert so far, or NULL */
};

/* Activations for n_batch tokens of a context of up to n_ctx tokens (which
 * picks LongRoPE's factors). */
infer_status run_state_init(struct run_state *s, const struct infer_model *m, int n_batch, int64_t n_ctx);
void run_state_free(struct run_state *s);

/* A batch of tokens from one or several sequences: token i is at position
 * pos[i] of sequence seq[i], whose blocks must already cover pos[i]
 * (kv_seq_reserve).  Logits are computed for the tokens with want_logits[i]
 * set, in batch order. */
struct batch {
    int64_t n;
    const int32_t *tokens;
    struct kv_seq *const *seq;
    const int64_t *pos;
    const bool *want_logits;
};

/* Run a batch (n <= s->n_batch).  K/V of every token is stored in its
 * sequence's blocks; sequence lengths are the caller's to update. */
infer_status forward_batch(const struct infer_model *m, struct run_state *s, struct kv_arena *a,
                           const struct batch *b, float *logits);

/*
 * Run tokens[0..n_tok) at positions seq->n_tokens ... through the model,
 * storing their keys and values in the sequence's blocks.  n_tok must not
 * exceed s->n_batch.  Logits go to `logits`: (n_tok, n_vocab) when
 * all_logits, else (n_vocab) for the last token only.
 * On error the sequence keeps its previous length.
 */
infer_status forward(const struct infer_model *m, struct run_state *s, struct kv_arena *a, struct kv_seq *seq,
                     const int32_t *tokens, int64_t n_tok, bool all_logits, float *logits);

#endif
