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

enum model_arch {
    ARCH_LLAMA,  /* Llama 2/3, TinyLlama, Mistral, SmolLM */
    ARCH_QWEN2,  /* as llama + Q/K/V biases, NEOX RoPE */
    ARCH_GEMMA3, /* Q/K norms, post-norms, GELU, local/global attention */
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
    int n_rot;      /* rotary dimensions per head */
    bool rope_neox; /* rotate (i, i+n_rot/2) instead of (2i, 2i+1) */
    float rope_base, rope_scale;         /* global layers */
    float rope_base_swa, rope_scale_swa; /* sliding-window layers */
    int n_swa;        /* sliding window in tokens, 0 = none */
    int swa_pattern;  /* layer il is local iff il % pattern < pattern - 1 (0: all global) */
    float rms_eps;
    float attn_scale; /* applied to q·k */
    bool embd_scale;  /* multiply embeddings by sqrt(n_embd) (gemma) */
    bool qk_norm;     /* RMSNorm on q and k per head before RoPE (gemma3) */
    bool post_norms;  /* RMSNorm on the attention and FFN outputs (gemma3) */
    enum ffn_act act;
};

/* A weight matrix: n_out rows of n_in elements of `type`, inside the map. */
struct mat {
    const void *data;
    uint32_t type;
    int64_t n_in, n_out;
};

struct layer_weights {
    const float *attn_norm;         /* (n_embd) */
    struct mat wq;                  /* (n_embd) -> (n_head * head_dim) */
    struct mat wk, wv;              /* (n_embd) -> (n_head_kv * head_dim) */
    struct mat wo;                  /* (n_head * head_dim) -> (n_embd) */
    const float *bq, *bk, *bv;      /* qwen2 biases, else NULL */
    const float *q_norm, *k_norm;   /* (head_dim), gemma3 */
    const float *post_attn_norm;    /* (n_embd), gemma3 */
    const float *ffn_norm;          /* (n_embd) */
    struct mat ffn_gate, ffn_up;    /* (n_embd) -> (n_ff) */
    struct mat ffn_down;            /* (n_ff) -> (n_embd) */
    const float *post_ffn_norm;     /* (n_embd), gemma3 */
};

struct model_weights {
    struct mat tok_embd;     /* (n_vocab rows of n_embd) */
    const float *output_norm; /* (n_embd) */
    struct mat output;       /* (n_embd) -> (n_vocab); tok_embd when tied */
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
    char summary[1536];
    void *map; /* the cache file's read-only map, or NULL */
    size_t map_size;
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
};

/* Point the weights the active kernels run faster in a repacked layout at
 * the cache file (repack_cache.c), creating it when missing or stale.  Never
 * fails: on any problem the GGUF layout stays and m->repack.note says why. */
void model_repack(struct infer_model *m, const infer_model_params *p);
void model_repack_release(struct infer_model *m);

/* The model a session evaluates against (session.c). */
const struct infer_model *s_model(const infer_session *s);

/* Is layer il a sliding-window (local) attention layer? */
static inline bool model_layer_is_swa(const struct model_config *c, int il)
{
    return c->n_swa > 0 && c->swa_pattern > 0 && il % c->swa_pattern < c->swa_pattern - 1;
}

/* Bind config and weights from an open GGUF (the model does not take
 * ownership of g on failure).  Errors name the missing key or tensor. */
infer_status model_bind(struct infer_model *m, infer_gguf *g);
void model_unbind(struct infer_model *m);

#endif
