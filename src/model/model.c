/*
 * model.c - read a model's hyper-parameters from GGUF metadata and bind its
 * weight tensors, checking every shape and type before the forward pass may
 * touch them.  Weights stay in the read-only map (DESIGN.md decision 3).
 */
#include "model.h"

#include "../../kernels/dispatch.h"
#include "../../kernels/matmul.h"
#include "../../kernels/types.h"

#include <math.h>
#include <string.h>

/* What differs between the families, as llama.cpp's src/models/<arch>.cpp
 * defines them.  One row each; the forward pass reads only model_config. */
static const struct arch_row {
    const char *name;
    bool neox;          /* NEOX pair order */
    bool qkv_bias;      /* Q/K/V biases required (optional for every family) */
    bool qk_norm;       /* per-head Q/K RMSNorm (attn_q_norm, attn_k_norm) */
    bool post_norms;    /* post_attention_norm, post_ffw_norm */
    bool gemma_embd;    /* embeddings * sqrt(n_embd) */
    bool gelu;          /* GELU-gated FFN instead of SiLU */
    int swa_pattern;    /* alternate sliding-window layers (0: none) */
    bool softcaps;      /* attention and final logit soft-caps (gemma2) */
    bool multipliers;   /* embedding/residual/attention/logit scales (granite) */
    int nope_every;     /* no RoPE on every n-th layer (smollm3) */
    bool mistral3;      /* YaRN beta keys, log multiplier, attention temperature */
    bool tied;          /* the output projection is always token_embd (gemma2) */
    bool qk_norm_full;  /* Q/K RMSNorm over the whole projection (olmoe) */
    /* mixture of experts (build_moe_ffn in llama.cpp's llama-graph.cpp) */
    bool moe;           /* every layer's FFN is routed experts */
    bool moe_norm_w;    /* top-k weights renormalised (qwen3moe, granitemoe: norm_w = true) */
    bool ff_exp_key;    /* expert width from expert_feed_forward_length, default n_ff / used
                         * (qwen2moe, qwen3moe); else feed_forward_length (olmoe, granitemoe) */
    enum { SHEXP_NONE, SHEXP_GATED, SHEXP_OPTIONAL } shexp; /* shared expert: qwen2moe always,
                         * sigmoid-gated, width expert_shared_feed_forward_length (default n_ff);
                         * granitemoe when that key is > 0, ungated */
} arch_rows[] = {
    [ARCH_LLAMA] = {"llama"},
    [ARCH_QWEN2] = {"qwen2", .neox = true, .qkv_bias = true},
    [ARCH_GEMMA3] = {"gemma3", .neox = true, .qk_norm = true, .post_norms = true, .gemma_embd = true, .gelu = true,
                     .swa_pattern = 6},
    [ARCH_QWEN3] = {"qwen3", .neox = true, .qk_norm = true},
    [ARCH_PHI3] = {"phi3", .neox = true},
    [ARCH_GEMMA2] = {"gemma2", .neox = true, .post_norms = true, .gemma_embd = true, .gelu = true, .swa_pattern = 2,
                     .softcaps = true, .tied = true},
    [ARCH_GRANITE] = {"granite", .multipliers = true},
    [ARCH_SMOLLM3] = {"smollm3", .nope_every = 4},
    [ARCH_MISTRAL3] = {"mistral3", .mistral3 = true},
    [ARCH_QWEN2MOE] = {"qwen2moe", .neox = true, .moe = true, .ff_exp_key = true, .shexp = SHEXP_GATED},
    [ARCH_QWEN3MOE] = {"qwen3moe", .neox = true, .qk_norm = true, .moe = true, .moe_norm_w = true, .ff_exp_key = true},
    [ARCH_OLMOE] = {"olmoe", .neox = true, .qk_norm_full = true, .moe = true},
    [ARCH_GRANITEMOE] = {"granitemoe", .multipliers = true, .moe = true, .moe_norm_w = true,
                         .shexp = SHEXP_OPTIONAL},
};
#define N_ARCH ((int)(sizeof(arch_rows) / sizeof(arch_rows[0])))

/* ---- metadata ---- */

struct hp_reader {
    const infer_gguf *g;
    const char *arch;
};

infer_status model_get_int(const infer_gguf *g, const char *key, int64_t dflt, bool required, int64_t lo,
                           int64_t hi, int *out)
{
    if (!gguf_get_kv(g, key)) {
        if (required)
            return infer_error(INFER_ERR_FORMAT, "missing model metadata key '%s'", key);
        *out = (int)dflt;
        return INFER_OK;
    }
    int64_t v = infer_gguf_get_int(g, key, INT64_MIN);
    if (v == INT64_MIN)
        return infer_error(INFER_ERR_FORMAT, "metadata key '%s' must be a single integer", key);
    if (v < lo || v > hi)
        return infer_error(INFER_ERR_FORMAT, "metadata key '%s' = %lld is out of range [%lld, %lld]", key,
                           (long long)v, (long long)lo, (long long)hi);
    *out = (int)v;
    return INFER_OK;
}

static infer_status hp_int(const struct hp_reader *r, const char *suffix, int64_t dflt, bool required,
                           int64_t lo, int64_t hi, int *out)
{
    char key[160];
    snprintf(key, sizeof(key), "%s.%s", r->arch, suffix);
    return model_get_int(r->g, key, dflt, required, lo, hi, out);
}

static float hp_float(const struct hp_reader *r, const char *suffix, double dflt)
{
    char key[160];
    snprintf(key, sizeof(key), "%s.%s", r->arch, suffix);
    return (float)infer_gguf_get_float(r->g, key, dflt);
}

/* A float key that, when present, must be a finite number in (lo, hi). */
static infer_status hp_float_in(const struct hp_reader *r, const char *suffix, double dflt, double lo, double hi,
                                float *out)
{
    char key[160];
    snprintf(key, sizeof(key), "%s.%s", r->arch, suffix);
    const double v = infer_gguf_get_float(r->g, key, dflt);
    if (!(v > lo && v < hi))
        return infer_error(INFER_ERR_FORMAT, "metadata key '%s' = %g is out of range (%g, %g)", key, v, lo, hi);
    *out = (float)v;
    return INFER_OK;
}

static bool hp_has(const struct hp_reader *r, const char *suffix)
{
    char key[160];
    snprintf(key, sizeof(key), "%s.%s", r->arch, suffix);
    return gguf_get_kv(r->g, key) != NULL;
}

/* The expert counts and widths, as llama.cpp's loader reads them
 * (llama-model.cpp load_hparams, src/models/<arch>.cpp load_arch_hparams).
 * Every count is checked here so that no tensor shape is computed from a
 * hostile value: 1 <= expert_used_count <= expert_count <= 1024 (llama.cpp's
 * LLAMA_MAX_EXPERTS). */
static infer_status read_moe(struct model_config *c, const struct hp_reader *r, const struct arch_row *row)
{
    infer_status st;
    const int64_t BIG = 1 << 20;
    if ((st = hp_int(r, "expert_count", 0, true, 1, 1024, &c->n_expert)) ||
        (st = hp_int(r, "expert_used_count", 0, true, 1, c->n_expert, &c->n_expert_used)))
        return st;
    c->n_ff_exp = c->n_ff;
    if (row->ff_exp_key) {
        const int dflt = c->n_ff / c->n_expert_used;
        if ((st = hp_int(r, "expert_feed_forward_length", dflt, dflt < 1, 1, BIG, &c->n_ff_exp)))
            return st;
    }
    if (row->shexp == SHEXP_GATED &&
        (st = hp_int(r, "expert_shared_feed_forward_length", c->n_ff, false, 1, BIG, &c->n_ff_shexp)))
        return st;
    if (row->shexp == SHEXP_OPTIONAL &&
        (st = hp_int(r, "expert_shared_feed_forward_length", 0, false, 0, BIG, &c->n_ff_shexp)))
        return st;
    c->shexp_gated = row->shexp == SHEXP_GATED;
    c->moe_norm_w = row->moe_norm_w;
    return INFER_OK;
}

/* RoPE scaling as llama.cpp's loader and context set it up (llama-model.cpp
 * load_hparams, llama-context.cpp): type none | linear (the default) |
 * yarn | longrope; freq_scale = 1 / rope.scaling.factor (1 without it or for
 * none); YaRN: ext_factor 1, beta_fast 32 and beta_slow 1 (mistral3 reads
 * both, and a log multiplier), and the magnitude correction, whose net
 * effect after rope_angles' own factor is mscale = attn_factor * get_mscale. */
static infer_status read_rope(struct model_config *c, const struct hp_reader *r, const struct arch_row *row)
{
    infer_status st;
    if ((st = hp_float_in(r, "rope.freq_base", 10000.0, 0.0, 1e30, &c->rope.freq_base)))
        return st;
    char key[160];
    snprintf(key, sizeof(key), "%s.rope.scaling.type", r->arch);
    const char *type = infer_gguf_get_str(r->g, key, "linear");
    const bool yarn = !strcmp(type, "yarn");
    if (strcmp(type, "none") && strcmp(type, "linear") && !yarn && strcmp(type, "longrope"))
        return infer_error(INFER_ERR_UNSUPPORTED,
                           "metadata key '%s' = '%s': unknown RoPE scaling type (supported: none, linear, yarn, "
                           "longrope)",
                           key, type);
    float factor = hp_float(r, "rope.scaling.factor", 0.0);
    if (factor == 0.0f)
        factor = hp_float(r, "rope.scale_linear", 0.0);
    if (!(factor >= 0.0f && factor < 1e6f))
        return infer_error(INFER_ERR_FORMAT, "metadata key '%s.rope.scaling.factor' = %g is out of range", r->arch,
                           (double)factor);
    c->rope.freq_scale = factor == 0.0f || !strcmp(type, "none") ? 1.0f : 1.0f / factor;
    if ((st = hp_int(r, "rope.scaling.original_context_length", c->n_ctx_train, false, 1, 1 << 24, &c->n_ctx_orig)))
        return st;
    float rope_attn_factor, beta_fast = 32.0f, beta_slow = 1.0f, log_mul = 0.0f;
    if ((st = hp_float_in(r, "rope.scaling.attn_factor", 1.0, 0.0, 1e6, &rope_attn_factor)))
        return st;
    if (row->mistral3 &&
        ((st = hp_float_in(r, "rope.scaling.yarn_beta_fast", 32.0, 0.0, 1e6, &beta_fast)) ||
         (st = hp_float_in(r, "rope.scaling.yarn_beta_slow", 1.0, 0.0, 1e6, &beta_slow)) ||
         (st = hp_float_in(r, "rope.scaling.yarn_log_multiplier", 0.0, -1e6, 1e6, &log_mul))))
        return st;
    c->rope.ext_factor = yarn ? 1.0f : 0.0f;
    c->rope.attn_factor = 1.0f;
    if (yarn) {
        const float f = 1.0f / c->rope.freq_scale;
        /* llama-context.cpp's get_mscale(scale, m) = scale <= 1 ? 1 : 0.1 m ln(scale) + 1 */
#define MSCALE(sc, m) ((sc) <= 1.0f ? 1.0f : (0.1f * (m)*logf(sc) + 1.0f))
        c->rope.attn_factor = log_mul != 0.0f ? MSCALE(f, 1.0f) / MSCALE(f, log_mul) : MSCALE(f, 1.0f);
#undef MSCALE
        c->rope.attn_factor *= 1.0f / (1.0f + 0.1f * logf(f));
    }
    c->rope.attn_factor *= rope_attn_factor;
    c->rope.n_rot = c->n_rot;
    rope_yarn_corr_dims(c->n_rot, c->n_ctx_orig, c->rope.freq_base, beta_fast, beta_slow, c->rope.corr_dims);
    /* sliding-window layers: their own base (gemma3 default 10000, unscaled;
     * gemma2 the global base and scale), the same YaRN settings */
    c->rope_swa = c->rope;
    if (c->arch == ARCH_GEMMA3) {
        if ((st = hp_float_in(r, "rope.freq_base_swa", 10000.0, 0.0, 1e30, &c->rope_swa.freq_base)))
            return st;
        c->rope_swa.freq_scale = 1.0f;
    } else if ((st = hp_float_in(r, "rope.freq_base_swa", c->rope.freq_base, 0.0, 1e30, &c->rope_swa.freq_base))) {
        return st;
    }
    rope_yarn_corr_dims(c->n_rot, c->n_ctx_orig, c->rope_swa.freq_base, beta_fast, beta_slow, c->rope_swa.corr_dims);
    return INFER_OK;
}

static infer_status read_config(struct model_config *c, const infer_gguf *g)
{
    const char *arch = infer_gguf_get_str(g, "general.architecture", NULL);
    if (!arch)
        return infer_error(INFER_ERR_FORMAT, "missing metadata key 'general.architecture'");
    int a = -1;
    for (int i = 0; i < N_ARCH; i++)
        if (!strcmp(arch, arch_rows[i].name))
            a = i;
    if (a < 0)
        return infer_error(INFER_ERR_UNSUPPORTED,
                           "unsupported model architecture '%s' (supported: llama, qwen2, qwen3, gemma2, gemma3, phi3, "
                           "granite, smollm3, mistral3, qwen2moe, qwen3moe, olmoe, granitemoe)",
                           arch);
    const struct arch_row *row = &arch_rows[a];
    memset(c, 0, sizeof(*c));
    c->arch = (enum model_arch)a;
    struct hp_reader r = {g, arch};
    infer_status st;
    const int64_t BIG = 1 << 20;
    if ((st = hp_int(&r, "embedding_length", 0, true, 1, BIG, &c->n_embd)) ||
        (st = hp_int(&r, "block_count", 0, true, 1, 4096, &c->n_layer)) ||
        (st = hp_int(&r, "feed_forward_length", 0, true, 1, BIG, &c->n_ff)) ||
        (st = hp_int(&r, "attention.head_count", 0, true, 1, 4096, &c->n_head)) ||
        (st = hp_int(&r, "attention.head_count_kv", c->n_head, false, 1, c->n_head, &c->n_head_kv)) ||
        (st = hp_int(&r, "context_length", 2048, false, 1, 1 << 24, &c->n_ctx_train)))
        return st;
    if (c->n_head % c->n_head_kv != 0)
        return infer_error(INFER_ERR_FORMAT, "%d query heads are not a multiple of %d key/value heads", c->n_head,
                           c->n_head_kv);
    int dflt_head_dim = c->n_embd / c->n_head;
    int head_dim_v;
    if ((st = hp_int(&r, "attention.key_length", dflt_head_dim, false, 1, 65536, &c->head_dim)) ||
        (st = hp_int(&r, "attention.value_length", c->head_dim, false, 1, 65536, &head_dim_v)))
        return st;
    if (head_dim_v != c->head_dim)
        return infer_error(INFER_ERR_UNSUPPORTED, "key length %d != value length %d is not supported", c->head_dim,
                           head_dim_v);
    if ((st = hp_int(&r, "rope.dimension_count", c->head_dim, false, 2, c->head_dim, &c->n_rot)))
        return st;
    if (c->n_rot % 2)
        return infer_error(INFER_ERR_FORMAT, "rope.dimension_count %d is odd", c->n_rot);
    c->rms_eps = hp_float(&r, "attention.layer_norm_rms_epsilon", 1e-5);
    if (!(c->rms_eps > 0.0f && c->rms_eps < 1.0f))
        return infer_error(INFER_ERR_FORMAT, "bad layer_norm_rms_epsilon");
    if ((st = read_rope(c, &r, row)))
        return st;
    c->attn_scale = 1.0f / sqrtf((float)c->head_dim);
    c->rope_neox = row->neox;
    c->qk_norm = row->qk_norm;
    c->post_norms = row->post_norms;
    c->act = row->gelu ? FFN_GELU : FFN_SILU;
    c->nope_every = row->nope_every;
    if (row->gemma_embd)
        c->embd_mult = sqrtf((float)c->n_embd);
    if (row->swa_pattern) {
        /* gemma3: every 6th layer is global, gemma2 every 2nd (llama.cpp's
         * set_swa_pattern: layer il is local iff il % n < n - 1); the window
         * is required for gemma3, 4096 by default for gemma2 */
        c->swa_pattern = row->swa_pattern;
        if ((st = hp_int(&r, "attention.sliding_window_pattern", row->swa_pattern, false, 1, 4096, &c->swa_pattern)) ||
            (st = hp_int(&r, "attention.sliding_window", 4096, c->arch == ARCH_GEMMA3, 1, 1 << 24, &c->n_swa)))
            return st;
        /* Gemma 2 27B / Gemma 3 27B scale by the model width per head */
        if ((c->arch == ARCH_GEMMA2 && c->n_layer == 46) || (c->arch == ARCH_GEMMA3 && c->n_layer == 62))
            c->attn_scale = 1.0f / sqrtf((float)(c->n_embd / c->n_head));
    }
    if (row->softcaps && ((st = hp_float_in(&r, "attn_logit_softcapping", 50.0, 0.0, 1e6, &c->attn_softcap)) ||
                          (st = hp_float_in(&r, "final_logit_softcapping", 30.0, 0.0, 1e6, &c->final_softcap))))
        return st;
    if (c->arch == ARCH_GEMMA3 && (st = hp_float_in(&r, "final_logit_softcapping", 0.0, -1.0, 1e6, &c->final_softcap)))
        return st;
    if (row->multipliers) {
        float logit_scale, attn;
        if (!hp_has(&r, "logit_scale"))
            return infer_error(INFER_ERR_FORMAT, "missing model metadata key '%s.logit_scale'", arch);
        if ((st = hp_float_in(&r, "logit_scale", 1.0, 0.0, 1e6, &logit_scale)) ||
            (st = hp_float_in(&r, "residual_scale", 0.0, -1.0, 1e6, &c->residual_mult)) ||
            (st = hp_float_in(&r, "embedding_scale", 0.0, -1.0, 1e6, &c->embd_mult)) ||
            (st = hp_float_in(&r, "attention.scale", 0.0, -1.0, 1e6, &attn)))
            return st;
        c->logit_mult = 1.0f / logit_scale;
        if (attn != 0.0f)
            c->attn_scale = attn;
        char key[160];
        /* granite switches RoPE off with rope.scaling.finetuned = false;
         * llama.cpp's granitemoe does not read the key */
        snprintf(key, sizeof(key), "%s.rope.scaling.finetuned", arch);
        c->rope_none = c->arch == ARCH_GRANITE && !infer_gguf_get_bool(g, key, true);
    }
    if (row->mistral3 &&
        (st = hp_float_in(&r, "attention.temperature_scale", 0.0, -1e6, 1e6, &c->attn_temp_scale)))
        return st;
    c->qk_norm_full = row->qk_norm_full;
    if (row->moe)
        return read_moe(c, &r, row);
    return INFER_OK;
}

/* ---- tensors ---- */

static infer_status find_tensor(const infer_gguf *g, const char *name, bool required, const struct gguf_tensor **out)
{
    *out = gguf_get_tensor(g, name);
    if (!*out && required)
        return infer_error(INFER_ERR_FORMAT, "missing tensor '%s'", name);
    if (*out && ((*out)->type >= GGML_TYPE_COUNT || !ggml_type_traits_get((*out)->type)))
        return infer_error(INFER_ERR_UNSUPPORTED, "tensor '%s' has unknown type id %u", name, (*out)->type);
    return INFER_OK;
}

/* A matrix mapping n_in -> n_out, stored as ne = (n_in, n_out). */
static infer_status bind_mat(const infer_gguf *g, const char *name, int64_t n_in, int64_t n_out, bool required,
                             struct mat *out)
{
    const struct gguf_tensor *t;
    memset(out, 0, sizeof(*out));
    infer_status st = find_tensor(g, name, required, &t);
    if (st || !t)
        return st;
    if (t->ne[0] != n_in || t->ne[1] != n_out || t->ne[2] != 1 || t->ne[3] != 1)
        return infer_error(INFER_ERR_FORMAT, "tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld]",
                           name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                           (long long)t->ne[3], (long long)n_in, (long long)n_out);
    if (!kernels_type_supported(t->type))
        return infer_error(INFER_ERR_UNSUPPORTED, "tensor '%s': unsupported tensor type %s", name,
                           ggml_type_traits_get(t->type)->name);
    out->data = t->data;
    out->type = t->type;
    out->n_in = n_in;
    out->n_out = n_out;
    return INFER_OK;
}

/* A vector of n floats: points into the map when stored as aligned F32,
 * otherwise converted once into memory owned by the model (norm weights are
 * a few KB; this is not the bulk weights DESIGN.md keeps in the map). */
static infer_status bind_vec(struct infer_model *m, const char *name, int64_t n, bool required, const float **out)
{
    const struct gguf_tensor *t;
    *out = NULL;
    infer_status st = find_tensor(m->gguf, name, required, &t);
    if (st || !t)
        return st;
    if (t->ne[0] != n || t->ne[1] != 1 || t->ne[2] != 1 || t->ne[3] != 1)
        return infer_error(INFER_ERR_FORMAT, "tensor '%s' has %lld x %lld elements, expected %lld", name,
                           (long long)t->ne[0], (long long)t->ne[1], (long long)n);
    if (t->type == GGML_TYPE_F32 && ((uintptr_t)t->data % sizeof(float)) == 0) {
        *out = t->data;
        return INFER_OK;
    }
    float *buf = malloc((size_t)n * sizeof(float));
    float **owned = realloc(m->owned, (size_t)(m->n_owned + 1) * sizeof(*owned));
    if (!buf || !owned) {
        free(buf);
        if (owned)
            m->owned = owned;
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    }
    m->owned = owned;
    m->owned[m->n_owned++] = buf;
    if (dequantize_row(t->type, t->data, buf, n) != 0)
        return infer_error_prefix(INFER_ERR_UNSUPPORTED, "tensor '%s'", name);
    *out = buf;
    return INFER_OK;
}

/* Rows [r0, r0 + n) of a bound matrix, as a matrix of its own (a part of a
 * fused tensor: the rows of a row-major matrix are contiguous). */
static struct mat mat_rows(const struct mat *w, int64_t r0, int64_t n)
{
    struct mat m = *w;
    m.data = (const uint8_t *)w->data + (size_t)r0 * ggml_row_size(w->type, w->n_in);
    m.n_out = n;
    return m;
}

/* Q, K and V: three tensors, or attn_qkv (rows Q, then K, then V) with an
 * optional attn_qkv.bias, as llama.cpp's create_tensor_qkv accepts for every
 * family; separate biases are optional everywhere, required for qwen2. */
static infer_status bind_qkv(struct infer_model *m, int il, bool bias_required)
{
    const struct model_config *c = &m->c;
    struct layer_weights *l = &m->w.layers[il];
    const int64_t q_dim = (int64_t)c->n_head * c->head_dim, kv_dim = (int64_t)c->n_head_kv * c->head_dim;
    char name[96];
    infer_status st;
    struct mat qkv;
    snprintf(name, sizeof(name), "blk.%d.attn_qkv.weight", il);
    if ((st = bind_mat(m->gguf, name, c->n_embd, q_dim + 2 * kv_dim, false, &qkv)))
        return st;
    if (qkv.data) {
        l->wq = mat_rows(&qkv, 0, q_dim);
        l->wk = mat_rows(&qkv, q_dim, kv_dim);
        l->wv = mat_rows(&qkv, q_dim + kv_dim, kv_dim);
        const float *b;
        snprintf(name, sizeof(name), "blk.%d.attn_qkv.bias", il);
        if ((st = bind_vec(m, name, q_dim + 2 * kv_dim, false, &b)))
            return st;
        if (b) {
            l->bq = b;
            l->bk = b + q_dim;
            l->bv = b + q_dim + kv_dim;
            return INFER_OK;
        }
    } else {
        const char *const w[3] = {"attn_q", "attn_k", "attn_v"};
        struct mat *const out[3] = {&l->wq, &l->wk, &l->wv};
        for (int i = 0; i < 3; i++) {
            snprintf(name, sizeof(name), "blk.%d.%s.weight", il, w[i]);
            if ((st = bind_mat(m->gguf, name, c->n_embd, i ? kv_dim : q_dim, true, out[i])))
                return st;
        }
    }
    const char *const bn[3] = {"attn_q", "attn_k", "attn_v"};
    const float **const bout[3] = {&l->bq, &l->bk, &l->bv};
    for (int i = 0; i < 3; i++) {
        snprintf(name, sizeof(name), "blk.%d.%s.bias", il, bn[i]);
        if ((st = bind_vec(m, name, i ? kv_dim : q_dim, bias_required, bout[i])))
            return st;
    }
    return INFER_OK;
}

/* The gate and up projections: ffn_gate and ffn_up, or (phi3) one ffn_up of
 * 2 n_ff rows, the gate's first (ggml_swiglu's halves). */
static infer_status bind_gate_up(struct infer_model *m, int il)
{
    const struct model_config *c = &m->c;
    struct layer_weights *l = &m->w.layers[il];
    char gate[96], upn[96];
    snprintf(gate, sizeof(gate), "blk.%d.ffn_gate.weight", il);
    snprintf(upn, sizeof(upn), "blk.%d.ffn_up.weight", il);
    infer_status st;
    if (c->arch == ARCH_PHI3 && !gguf_get_tensor(m->gguf, gate)) {
        struct mat up;
        if ((st = bind_mat(m->gguf, upn, c->n_embd, 2 * (int64_t)c->n_ff, true, &up)))
            return st;
        l->ffn_gate = mat_rows(&up, 0, c->n_ff);
        l->ffn_up = mat_rows(&up, c->n_ff, c->n_ff);
        return INFER_OK;
    }
    if ((st = bind_mat(m->gguf, gate, c->n_embd, c->n_ff, true, &l->ffn_gate)) ||
        (st = bind_mat(m->gguf, upn, c->n_embd, c->n_ff, true, &l->ffn_up)))
        return st;
    return INFER_OK;
}

/* n_expert matrices n_in -> n_out in one 3-D tensor, ne = (n_in, n_out,
 * n_expert).  gguf.c has checked that all n_in * n_out * n_expert elements
 * lie inside the file, so every expert's rows can be read. */
static infer_status bind_exps(const infer_gguf *g, const char *name, int64_t n_in, int64_t n_out, int64_t n_expert,
                              bool required, struct mat_exps *out)
{
    const struct gguf_tensor *t;
    memset(out, 0, sizeof(*out));
    infer_status st = find_tensor(g, name, required, &t);
    if (st || !t)
        return st;
    if (t->ne[0] != n_in || t->ne[1] != n_out || t->ne[2] != n_expert || t->ne[3] != 1)
        return infer_error(INFER_ERR_FORMAT,
                           "tensor '%s' has shape [%lld, %lld, %lld, %lld], expected [%lld, %lld, %lld] "
                           "(expert_count %lld)",
                           name, (long long)t->ne[0], (long long)t->ne[1], (long long)t->ne[2],
                           (long long)t->ne[3], (long long)n_in, (long long)n_out, (long long)n_expert,
                           (long long)n_expert);
    if (!kernels_type_supported(t->type))
        return infer_error(INFER_ERR_UNSUPPORTED, "tensor '%s': unsupported tensor type %s", name,
                           ggml_type_traits_get(t->type)->name);
    out->m.data = t->data;
    out->m.type = t->type;
    out->m.n_in = n_in;
    out->m.n_out = n_out;
    out->stride = ggml_row_size(t->type, n_in) * (size_t)n_out;
    return INFER_OK;
}

/* A mixture-of-experts FFN: the router, the experts' gate and up (two 3-D
 * tensors or one ffn_gate_up_exps, gate rows first in each expert, as
 * llama.cpp's create_tensor_gate_up_exps), their down projections, and the
 * shared expert where the family has one. */
static infer_status bind_moe(struct infer_model *m, int il)
{
    const struct model_config *c = &m->c;
    struct layer_weights *l = &m->w.layers[il];
    const infer_gguf *g = m->gguf;
    const int64_t E = c->n_expert, F = c->n_ff_exp, D = c->n_embd;
    char name[96];
    infer_status st;
    snprintf(name, sizeof(name), "blk.%d.ffn_gate_inp.weight", il);
    if ((st = bind_mat(g, name, D, E, true, &l->ffn_gate_inp)))
        return st;
    struct mat_exps gu;
    snprintf(name, sizeof(name), "blk.%d.ffn_gate_up_exps.weight", il);
    if ((st = bind_exps(g, name, D, 2 * F, E, false, &gu)))
        return st;
    if (gu.m.data) {
        l->gate_up_merged = true;
        l->ffn_gate_exps = gu;
        l->ffn_gate_exps.m.n_out = F;
        l->ffn_up_exps = l->ffn_gate_exps;
        l->ffn_up_exps.m.data = (const uint8_t *)gu.m.data + ggml_row_size(gu.m.type, D) * (size_t)F;
    } else {
        snprintf(name, sizeof(name), "blk.%d.ffn_gate_exps.weight", il);
        if ((st = bind_exps(g, name, D, F, E, true, &l->ffn_gate_exps)))
            return st;
        snprintf(name, sizeof(name), "blk.%d.ffn_up_exps.weight", il);
        if ((st = bind_exps(g, name, D, F, E, true, &l->ffn_up_exps)))
            return st;
    }
    snprintf(name, sizeof(name), "blk.%d.ffn_down_exps.weight", il);
    if ((st = bind_exps(g, name, F, D, E, true, &l->ffn_down_exps)))
        return st;
    if (c->n_ff_shexp > 0) {
        const int64_t S = c->n_ff_shexp;
        const char *const sn[3] = {"ffn_gate_shexp", "ffn_up_shexp", "ffn_down_shexp"};
        struct mat *const out[3] = {&l->ffn_gate_shexp, &l->ffn_up_shexp, &l->ffn_down_shexp};
        for (int i = 0; i < 3; i++) {
            snprintf(name, sizeof(name), "blk.%d.%s.weight", il, sn[i]);
            if ((st = bind_mat(g, name, i < 2 ? D : S, i < 2 ? S : D, true, out[i])))
                return st;
        }
        snprintf(name, sizeof(name), "blk.%d.ffn_gate_inp_shexp.weight", il);
        if (c->shexp_gated && (st = bind_mat(g, name, D, 1, true, &l->ffn_gate_inp_shexp)))
            return st;
    }
    return INFER_OK;
}

static infer_status bind_layer(struct infer_model *m, int il)
{
    const struct model_config *c = &m->c;
    struct layer_weights *l = &m->w.layers[il];
    const infer_gguf *g = m->gguf;
    int64_t q_dim = (int64_t)c->n_head * c->head_dim;
    char n[8][96];
    const char *suffix[8] = {"attn_norm",   "attn_output", "ffn_norm",           "ffn_down",     "attn_q_norm",
                             "attn_k_norm", "post_attention_norm", "post_ffw_norm"};
    for (int i = 0; i < 8; i++)
        snprintf(n[i], sizeof(n[i]), "blk.%d.%s.weight", il, suffix[i]);
    infer_status st;
    if ((st = bind_vec(m, n[0], c->n_embd, true, &l->attn_norm)) ||
        (st = bind_qkv(m, il, arch_rows[c->arch].qkv_bias)) ||
        (st = bind_mat(g, n[1], q_dim, c->n_embd, true, &l->wo)) ||
        (st = bind_vec(m, n[2], c->n_embd, true, &l->ffn_norm)))
        return st;
    if (c->n_expert > 0) {
        if ((st = bind_moe(m, il)))
            return st;
    } else if ((st = bind_gate_up(m, il)) || (st = bind_mat(g, n[3], c->n_ff, c->n_embd, true, &l->ffn_down))) {
        return st;
    }
    if (c->qk_norm && ((st = bind_vec(m, n[4], c->head_dim, true, &l->q_norm)) ||
                       (st = bind_vec(m, n[5], c->head_dim, true, &l->k_norm))))
        return st;
    if (c->qk_norm_full && ((st = bind_vec(m, n[4], q_dim, true, &l->q_norm)) ||
                            (st = bind_vec(m, n[5], (int64_t)c->n_head_kv * c->head_dim, true, &l->k_norm))))
        return st;
    if (c->post_norms && ((st = bind_vec(m, n[6], c->n_embd, true, &l->post_attn_norm)) ||
                          (st = bind_vec(m, n[7], c->n_embd, true, &l->post_ffn_norm))))
        return st;
    return INFER_OK;
}

infer_status model_bind(struct infer_model *m, infer_gguf *g)
{
    m->gguf = g;
    infer_status st = read_config(&m->c, g);
    if (st)
        return st;
    struct model_config *c = &m->c;
    const struct gguf_tensor *emb;
    if ((st = find_tensor(g, "token_embd.weight", true, &emb)))
        return st;
    if (emb->ne[1] < 1 || emb->ne[1] > (1 << 24))
        return infer_error(INFER_ERR_FORMAT, "tensor 'token_embd.weight' has an absurd vocabulary size %lld",
                           (long long)emb->ne[1]);
    c->n_vocab = (int)emb->ne[1];
    if ((st = bind_mat(g, "token_embd.weight", c->n_embd, c->n_vocab, true, &m->w.tok_embd)))
        return st;
    if ((st = bind_vec(m, "output_norm.weight", c->n_embd, true, &m->w.output_norm)))
        return st;
    if (!arch_rows[c->arch].tied && (st = bind_mat(g, "output.weight", c->n_embd, c->n_vocab, false, &m->w.output)))
        return st;
    if (!m->w.output.data)
        m->w.output = m->w.tok_embd; /* tied embeddings */
    /* RoPE frequency factors (n_rot/2 each, all optional): Llama 3's
     * rope_freqs, Phi-3's LongRoPE short/long factors */
    if ((st = bind_vec(m, "rope_freqs.weight", c->n_rot / 2, false, &m->w.rope_freqs)) ||
        (st = bind_vec(m, "rope_factors_short.weight", c->n_rot / 2, false, &m->w.rope_short)) ||
        (st = bind_vec(m, "rope_factors_long.weight", c->n_rot / 2, false, &m->w.rope_long)))
        return st;
    for (int i = 0; i < c->n_rot / 2; i++) {
        const float *const f[3] = {m->w.rope_freqs, m->w.rope_short, m->w.rope_long};
        for (int k = 0; k < 3; k++)
            if (f[k] && !(f[k][i] > 0.0f && f[k][i] < 1e30f))
                return infer_error(INFER_ERR_FORMAT, "RoPE frequency factor %d is %g: must be positive and finite", i,
                                   (double)f[k][i]);
    }
    m->w.layers = calloc((size_t)c->n_layer, sizeof(*m->w.layers));
    if (!m->w.layers)
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    for (int il = 0; il < c->n_layer; il++)
        if ((st = bind_layer(m, il)))
            return st;
    return INFER_OK;
}

void model_unbind(struct infer_model *m)
{
    for (int i = 0; i < m->n_owned; i++)
        free(m->owned[i]);
    free(m->owned);
    free(m->w.layers);
    m->owned = NULL;
    m->n_owned = 0;
    m->w.layers = NULL;
}

infer_status model_bind_mat(const infer_gguf *g, const char *name, int64_t n_in, int64_t n_out, bool required,
                            struct mat *out)
{
    return bind_mat(g, name, n_in, n_out, required, out);
}
