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

static const char *arch_names[] = {[ARCH_LLAMA] = "llama", [ARCH_QWEN2] = "qwen2", [ARCH_GEMMA3] = "gemma3"};

/* ---- metadata ---- */

struct hp_reader {
    const infer_gguf *g;
    const char *arch;
};

static infer_status hp_int(const struct hp_reader *r, const char *suffix, int64_t dflt, bool required,
                           int64_t lo, int64_t hi, int *out)
{
    char key[160];
    snprintf(key, sizeof(key), "%s.%s", r->arch, suffix);
    const struct gguf_kv *kv = gguf_get_kv(r->g, key);
    if (!kv) {
        if (required)
            return infer_error(INFER_ERR_FORMAT, "missing model metadata key '%s'", key);
        *out = (int)dflt;
        return INFER_OK;
    }
    int64_t v = infer_gguf_get_int(r->g, key, INT64_MIN);
    if (v == INT64_MIN)
        return infer_error(INFER_ERR_FORMAT, "metadata key '%s' must be a single integer", key);
    if (v < lo || v > hi)
        return infer_error(INFER_ERR_FORMAT, "metadata key '%s' = %lld is out of range [%lld, %lld]", key,
                           (long long)v, (long long)lo, (long long)hi);
    *out = (int)v;
    return INFER_OK;
}

static float hp_float(const struct hp_reader *r, const char *suffix, double dflt)
{
    char key[160];
    snprintf(key, sizeof(key), "%s.%s", r->arch, suffix);
    return (float)infer_gguf_get_float(r->g, key, dflt);
}

static infer_status read_config(struct model_config *c, const infer_gguf *g)
{
    const char *arch = infer_gguf_get_str(g, "general.architecture", NULL);
    if (!arch)
        return infer_error(INFER_ERR_FORMAT, "missing metadata key 'general.architecture'");
    int a = -1;
    for (int i = 0; i < (int)(sizeof(arch_names) / sizeof(arch_names[0])); i++)
        if (!strcmp(arch, arch_names[i]))
            a = i;
    if (a < 0)
        return infer_error(INFER_ERR_UNSUPPORTED,
                           "unsupported model architecture '%s' (supported: llama, qwen2, gemma3)", arch);
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
    c->rope_base = hp_float(&r, "rope.freq_base", 10000.0);
    c->rope_scale = 1.0f;
    char key[160];
    snprintf(key, sizeof(key), "%s.rope.scaling.type", arch);
    const char *scaling = infer_gguf_get_str(g, key, "none");
    float factor = hp_float(&r, "rope.scaling.factor", 0.0);
    if (!strcmp(scaling, "linear") && factor > 0.0f) {
        c->rope_scale = 1.0f / factor;
    } else if (strcmp(scaling, "none") != 0 && strcmp(scaling, "linear") != 0) {
        return infer_error(INFER_ERR_UNSUPPORTED, "RoPE scaling type '%s' is not supported yet", scaling);
    }
    if (!(c->rope_base > 0.0f))
        return infer_error(INFER_ERR_FORMAT, "bad rope.freq_base");
    c->rope_base_swa = c->rope_base;
    c->rope_scale_swa = c->rope_scale;
    c->attn_scale = 1.0f / sqrtf((float)c->head_dim);
    c->act = FFN_SILU;

    switch (c->arch) {
    case ARCH_LLAMA:
        c->rope_neox = false;
        break;
    case ARCH_QWEN2:
        c->rope_neox = true;
        break;
    case ARCH_GEMMA3:
        /* As llama.cpp: every 6th layer is global, the others look at a window
         * of n_swa tokens with their own RoPE base of 10000, unscaled. */
        c->rope_neox = true;
        c->embd_scale = true;
        c->qk_norm = true;
        c->post_norms = true;
        c->act = FFN_GELU;
        c->swa_pattern = 6;
        c->rope_base_swa = 10000.0f;
        c->rope_scale_swa = 1.0f;
        if ((st = hp_int(&r, "attention.sliding_window", 0, true, 1, 1 << 24, &c->n_swa)))
            return st;
        /* Gemma 3 27B scales by the model width per head, the others by head_dim */
        if (c->n_layer == 62)
            c->attn_scale = 1.0f / sqrtf((float)(c->n_embd / c->n_head));
        break;
    }
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

static infer_status bind_layer(struct infer_model *m, int il)
{
    const struct model_config *c = &m->c;
    struct layer_weights *l = &m->w.layers[il];
    const infer_gguf *g = m->gguf;
    int64_t q_dim = (int64_t)c->n_head * c->head_dim, kv_dim = (int64_t)c->n_head_kv * c->head_dim;
    bool biases = c->arch == ARCH_QWEN2;
    char n[20][96];
    const char *suffix[20] = {"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate",
                              "ffn_up", "ffn_down", "attn_q_norm", "attn_k_norm", "post_attention_norm",
                              "post_ffw_norm", "attn_q", "attn_k", "attn_v"};
    for (int i = 0; i < 16; i++)
        snprintf(n[i], sizeof(n[i]), "blk.%d.%s.%s", il, suffix[i], i < 13 ? "weight" : "bias");
    infer_status st;
    if ((st = bind_vec(m, n[0], c->n_embd, true, &l->attn_norm)) ||
        (st = bind_mat(g, n[1], c->n_embd, q_dim, true, &l->wq)) ||
        (st = bind_mat(g, n[2], c->n_embd, kv_dim, true, &l->wk)) ||
        (st = bind_mat(g, n[3], c->n_embd, kv_dim, true, &l->wv)) ||
        (st = bind_mat(g, n[4], q_dim, c->n_embd, true, &l->wo)) ||
        (st = bind_vec(m, n[5], c->n_embd, true, &l->ffn_norm)) ||
        (st = bind_mat(g, n[6], c->n_embd, c->n_ff, true, &l->ffn_gate)) ||
        (st = bind_mat(g, n[7], c->n_embd, c->n_ff, true, &l->ffn_up)) ||
        (st = bind_mat(g, n[8], c->n_ff, c->n_embd, true, &l->ffn_down)))
        return st;
    if (c->qk_norm && ((st = bind_vec(m, n[9], c->head_dim, true, &l->q_norm)) ||
                       (st = bind_vec(m, n[10], c->head_dim, true, &l->k_norm))))
        return st;
    if (c->post_norms && ((st = bind_vec(m, n[11], c->n_embd, true, &l->post_attn_norm)) ||
                          (st = bind_vec(m, n[12], c->n_embd, true, &l->post_ffn_norm))))
        return st;
    /* biases: required for qwen2, honoured when present for llama */
    if ((st = bind_vec(m, n[13], q_dim, biases, &l->bq)) || (st = bind_vec(m, n[14], kv_dim, biases, &l->bk)) ||
        (st = bind_vec(m, n[15], kv_dim, biases, &l->bv)))
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
    if ((st = bind_mat(g, "output.weight", c->n_embd, c->n_vocab, false, &m->w.output)))
        return st;
    if (!m->w.output.data)
        m->w.output = m->w.tok_embd; /* tied embeddings */
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
