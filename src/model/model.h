/*
 * model.h - a transformer model bound to the tensors of a mapped GGUF file.
 *
 * Structs are split by lifetime (as in llama2.c): model_config is the
 * immutable shape read from metadata, model_weights are read-only views into
 * the map (never copied), and the per-call activations live in forward.c.
 */
#ifndef INFER_MODEL_H
#define INFER_MODEL_H

#include "gguf.h"

#include "../../kernels/ops.h"

/* The families infer runs; what differs between them is data, read by the one
 * forward pass (model.c has the table of per-family flags). */
enum model_arch {
    ARCH_LLAMA,    /* Llama 2/3 (rope_freqs), TinyLlama, Mistral, SmolLM 1/2, DeepSeek-R1 llama distills */
    ARCH_QWEN2,    /* as llama + Q/K/V biases, NEOX RoPE */
    ARCH_GEMMA3,   /* Q/K norms, post-norms, GELU, local/global attention */
    ARCH_QWEN3,    /* per-head Q/K RMSNorm before RoPE, NEOX RoPE */
    ARCH_PHI3,     /* fused QKV and gate/up, partial rotary, LongRoPE, NEOX */
    ARCH_GEMMA2,   /* soft-capped attention and logits, post-norms, alternate sliding window */
    ARCH_GRANITE,  /* embedding, residual, attention and logit multipliers */
    ARCH_SMOLLM3,  /* llama without RoPE on every 4th layer */
    ARCH_MISTRAL3, /* llama + YaRN and the attention temperature of long positions */
    /* mixture of experts: the FFN of every layer is a routed set of experts */
    ARCH_QWEN2MOE,   /* qwen2 attention, top-k unnormalised, shared expert gated by a sigmoid */
    ARCH_QWEN3MOE,   /* qwen3 attention, top-k renormalised */
    ARCH_OLMOE,      /* Q/K RMSNorm over the whole projection, top-k unnormalised */
    ARCH_GRANITEMOE, /* granite multipliers, top-k renormalised, optional ungated shared expert */
};

enum ffn_act { FFN_SILU, FFN_GELU };

struct model_config {
    enum model_arch arch;
    int n_vocab;
    int n_embd;     /* residual stream width */
    int n_layer;
    int n_head;     /* query heads */
    int n_head_kv;  /* key/value heads (grouped-query attention) */
    int head_dim;   /* per head, keys and values alike */
    int n_ff;       /* feed-forward hidden width */
    int n_ctx_train;
    int n_rot;      /* rotary dimensions per head (the rest pass through) */
    bool rope_neox; /* rotate (i, i+n_rot/2) instead of (2i, 2i+1) */
    /* RoPE of global and of sliding-window layers; freq_factors are set per
     * forward pass (rope_freqs, or LongRoPE's short/long factors) */
    struct rope_params rope, rope_swa;
    int n_ctx_orig;   /* rope.scaling.original_context_length (YaRN, LongRoPE) */
    bool rope_none;   /* no RoPE in any layer (granite rope.scaling.finetuned = false) */
    int nope_every;   /* > 0: layer il has no RoPE iff (il + 1) % nope_every == 0 (smollm3) */
    int n_swa;        /* sliding window in tokens, 0 = none */
    int swa_pattern;  /* layer il is local iff il % pattern < pattern - 1 (0: all global) */
    float rms_eps;
    float attn_scale; /* applied to q·k */
    float attn_softcap;  /* > 0: scores s -> cap * tanh(s / cap) (gemma2) */
    float final_softcap; /* > 0: logits likewise (gemma2, gemma3 when set) */
    float attn_temp_scale; /* mistral3: q *= 1 + temp_scale * ln(floor(pos / n_ctx_orig) + 1) */
    float embd_mult;  /* embeddings multiplied by it (gemma: sqrt(n_embd), granite); 0 = not */
    float residual_mult; /* sub-layer outputs multiplied by it before the residual add (granite); 0 = not */
    float logit_mult;    /* logits multiplied by it (granite: 1 / logit_scale); 0 = not */
    bool qk_norm;     /* RMSNorm on q and k per head before RoPE (gemma3, qwen3) */
    bool post_norms;  /* RMSNorm on the attention and FFN outputs (gemma2, gemma3) */
    bool qk_norm_full; /* q_norm/k_norm span the whole projection, not one head (olmoe) */
    enum ffn_act act;
    /* mixture of experts (n_expert == 0: a dense FFN) */
    int n_expert;      /* experts per layer (expert_count) */
    int n_expert_used; /* experts each token is routed to (expert_used_count), 1..n_expert */
    int n_ff_exp;      /* hidden width of one expert */
    int n_ff_shexp;    /* hidden width of the shared expert, 0: none */
    bool moe_norm_w;   /* the top-k probabilities are renormalised to sum to 1 */
    bool shexp_gated;  /* the shared expert is scaled by sigmoid(x . gate_inp_shexp) (qwen2moe) */
};

/* A weight matrix: n_out rows of n_in elements of `type`, inside the map. */
struct mat {
    const void *data;
    uint32_t type;
    int64_t n_in, n_out;
};

/* n_expert matrices of one shape stored in one 3-D tensor (ne = n_in,
 * rows, n_expert): expert e's matrix is m with data advanced by e * stride
 * bytes.  A merged ffn_gate_up_exps is bound as two of these over the same
 * bytes (gate rows first in each expert, then up rows). */
struct mat_exps {
    struct mat m;  /* expert 0 */
    size_t stride; /* bytes from one expert's matrix to the next */
};

static inline struct mat mat_expert(const struct mat_exps *x, int e)
{
    struct mat m = x->m;
    m.data = (const uint8_t *)x->m.data + (size_t)e * x->stride;
    return m;
}

/* Fused tensors (attn_qkv: Q, K, V rows; phi3's ffn_up: gate, then up rows)
 * are bound as row ranges of the one tensor, so wq, wk, wv, ffn_gate and
 * ffn_up always exist and nothing is copied. */
struct layer_weights {
    const float *attn_norm;         /* (n_embd) */
    struct mat wq;                  /* (n_embd) -> (n_head * head_dim) */
    struct mat wk, wv;              /* (n_embd) -> (n_head_kv * head_dim) */
    struct mat wo;                  /* (n_head * head_dim) -> (n_embd) */
    const float *bq, *bk, *bv;      /* Q/K/V biases (qwen2; optional elsewhere), else NULL */
    const float *q_norm, *k_norm;   /* (head_dim), gemma3, qwen3 */
    const float *post_attn_norm;    /* (n_embd), gemma3 */
    const float *ffn_norm;          /* (n_embd) */
    struct mat ffn_gate, ffn_up;    /* (n_embd) -> (n_ff) */
    struct mat ffn_down;            /* (n_ff) -> (n_embd) */
    const float *post_ffn_norm;     /* (n_embd), gemma3 */
    /* mixture of experts (model_config.n_expert > 0; ffn_gate/up/down then unbound) */
    struct mat ffn_gate_inp;        /* router (n_embd) -> (n_expert) */
    struct mat_exps ffn_gate_exps;  /* per expert (n_embd) -> (n_ff_exp) */
    struct mat_exps ffn_up_exps;    /* per expert (n_embd) -> (n_ff_exp) */
    struct mat_exps ffn_down_exps;  /* per expert (n_ff_exp) -> (n_embd) */
    bool gate_up_merged;            /* gate and up exps are halves of one ffn_gate_up_exps */
    struct mat ffn_gate_shexp, ffn_up_shexp; /* shared expert (n_embd) -> (n_ff_shexp) */
    struct mat ffn_down_shexp;      /* (n_ff_shexp) -> (n_embd) */
    struct mat ffn_gate_inp_shexp;  /* (n_embd) -> (1), qwen2moe's shared-expert gate */
};

struct model_weights {
    struct mat tok_embd;     /* (n_vocab rows of n_embd) */
    const float *output_norm; /* (n_embd) */
    struct mat output;       /* (n_embd) -> (n_vocab); tok_embd when tied */
    const float *rope_freqs; /* (n_rot/2) Llama 3 frequency divisors, or NULL */
    const float *rope_short, *rope_long; /* (n_rot/2) LongRoPE factors (phi3), or NULL */
    struct layer_weights *layers;
};

struct tokenizer;

/* Weights repacked at load (repack_cache.c; infer_repack_info in infer.h). */
struct repack_state {
    const char *state;
    int n_tensors;
    uint64_t bytes;
    double seconds, hash_seconds, repack_seconds;
    char path[1024];
    char note[256];
    char summary[2048];
    void *map; /* the cache file's read-only map, or NULL */
    size_t map_size;
    bool huge;      /* the map is advised MADV_HUGEPAGE */
    char pages[160]; /* for the summary: the share it maps with 2 MiB pages, or "" */
};

struct infer_model {
    infer_gguf *gguf;
    struct model_config c;
    struct model_weights w;
    struct tokenizer *tok;
    int32_t extra_eog[16]; /* end-of-generation tokens added by the caller (chat markers) */
    int n_extra_eog;
    float **owned;   /* 1-D tensors converted to f32 (norms stored in another type) */
    int n_owned;
    double load_seconds;
    struct repack_state repack;
    struct gvocab *gvocab; /* token texts as a trie for constrained sampling, built on first use */
};

/* Point the weights the active kernels run faster in a repacked layout at
 * the cache file (repack_cache.c), creating it when missing or stale.  Never
 * fails: on any problem the GGUF layout stays and m->repack.note says why. */
void model_repack(struct infer_model *m, const infer_model_params *p);
void model_repack_release(struct infer_model *m);

/* The model a session evaluates against (session.c). */
const struct infer_model *s_model(const infer_session *s);

/* Does layer il rotate q and k? */
static inline bool model_layer_has_rope(const struct model_config *c, int il)
{
    return !c->rope_none && !(c->nope_every > 0 && (il + 1) % c->nope_every == 0);
}

/* Is layer il a sliding-window (local) attention layer? */
static inline bool model_layer_is_swa(const struct model_config *c, int il)
{
    return c->n_swa > 0 && c->swa_pattern > 0 && il % c->swa_pattern < c->swa_pattern - 1;
}

/* The frequency factors of a context of n_ctx tokens, as llama.cpp's
 * get_rope_factors: rope_freqs when present, else LongRoPE's long factors
 * when n_ctx exceeds the original context, else the short ones (or NULL). */
static inline const float *model_rope_factors(const struct infer_model *m, int64_t n_ctx)
{
    if (m->w.rope_freqs)
        return m->w.rope_freqs;
    return n_ctx > m->c.n_ctx_orig ? m->w.rope_long : m->w.rope_short;
}

/* Bind config and weights from an open GGUF (the model does not take
 * ownership of g on failure).  Errors name the missing key or tensor. */
infer_status model_bind(struct infer_model *m, infer_gguf *g);

/* The integer metadata key `key` into *out: dflt when it is absent (an
 * error when `required`), an error naming the key when it is not a single
 * integer in [lo, hi]. */
infer_status model_get_int(const infer_gguf *g, const char *key, int64_t dflt, bool required, int64_t lo,
                           int64_t hi, int *out);
void model_unbind(struct infer_model *m);

/* Bind the matrix `name` mapping n_in -> n_out (ne = (n_in, n_out)), checking
 * its shape and that the kernels support its type; a missing tensor is an
 * error only when required (then out->data is NULL).  Also used by the
 * encoder (encoder.c). */
infer_status model_bind_mat(const infer_gguf *g, const char *name, int64_t n_in, int64_t n_out, bool required,
                            struct mat *out);

#endif
