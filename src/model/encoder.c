/*
 * encoder.c - the BERT encoder pass, as llama.cpp runs `bert` (its
 * src/models/bert.cpp and the no-cache attention and pooling of
 * llama-graph.cpp).  For the tokens of one input, x the hidden state:
 *
 *   x = tok_embd[token] + token_types[0] + position_embd[pos]    pos = 0, 1, ...
 *   x = LayerNorm(x) * embd_norm + embd_norm_b
 *   for each layer (post-norm):
 *     q, k, v = x Wq + bq, x Wk + bk, x Wv + bv
 *     a = softmax(q k^T / sqrt(head_dim)) v       per head, every token sees every
 *                                                 token of its own input (no mask)
 *     x = LayerNorm(x + a Wo + bo) * attn_out_norm + attn_out_norm_b
 *     f = GELU(x Wup + bup) Wdown + bdown         (ggml's GELU: tanh form, FP16 table)
 *     x = LayerNorm(x + f) * out_norm + out_norm_b
 *   e = mean of x over the input's tokens ([CLS] and [SEP] included) | x of [CLS] |
 *       x of the last token, as bert.pooling_type says
 *   e = e / |e|                                  (sentence-transformers' Normalize)
 *
 * Several inputs run as one batch: their tokens are concatenated, so every
 * projection reads each weight once for the whole batch, and attention and
 * pooling stay inside each input.  Matrices run on the shared kernels
 * (matmul: F32, F16, Q8_0 and the other types they support).
 *
 * References: BERT (Devlin et al. 2019), Sentence-BERT (Reimers & Gurevych
 * 2019), Layer Normalization (Ba et al. 2016).
 */
#include "encoder.h"

#include "../../kernels/matmul.h"
#include "../../kernels/ops.h"
#include "../../kernels/types.h"

#include <math.h>
#include <string.h>

/* ---- metadata ---- */

static infer_status read_config(struct encoder_config *c, const infer_gguf *g)
{
    const char *arch = infer_gguf_get_str(g, "general.architecture", NULL);
    if (!arch)
        return infer_error(INFER_ERR_FORMAT, "missing metadata key 'general.architecture'");
    if (strcmp(arch, "bert"))
        return infer_error(INFER_ERR_UNSUPPORTED, "'%.40s' is not an embedding model (supported: bert)", arch);
    memset(c, 0, sizeof(*c));
    infer_status st;
    int pooling;
    if ((st = model_get_int(g, "bert.embedding_length", 0, true, 1, 1 << 16, &c->n_embd)) ||
        (st = model_get_int(g, "bert.block_count", 0, true, 1, 1024, &c->n_layer)) ||
        (st = model_get_int(g, "bert.feed_forward_length", 0, true, 1, 1 << 18, &c->n_ff)) ||
        (st = model_get_int(g, "bert.attention.head_count", 0, true, 1, 1024, &c->n_head)) ||
        (st = model_get_int(g, "bert.context_length", 512, false, 1, 1 << 16, &c->n_ctx_train)) ||
        (st = model_get_int(g, "tokenizer.ggml.token_type_count", 0, true, 1, 1 << 16, &c->n_token_types)) ||
        (st = model_get_int(g, "bert.pooling_type", POOL_MEAN, false, 0, 4, &pooling)))
        return st;
    if (c->n_embd % c->n_head)
        return infer_error(INFER_ERR_FORMAT, "embedding length %d is not a multiple of %d heads", c->n_embd,
                           c->n_head);
    c->head_dim = c->n_embd / c->n_head;
    int head_count_kv;
    if ((st = model_get_int(g, "bert.attention.head_count_kv", c->n_head, false, 1, 1024, &head_count_kv)))
        return st;
    if (head_count_kv != c->n_head)
        return infer_error(INFER_ERR_UNSUPPORTED, "bert.attention.head_count_kv = %d: grouped-query BERT is not "
                                                  "supported", head_count_kv);
    if (infer_gguf_get_bool(g, "bert.attention.causal", false))
        return infer_error(INFER_ERR_UNSUPPORTED, "bert.attention.causal = true is not supported");
    if (pooling == POOL_NONE || pooling == POOL_RANK)
        return infer_error(INFER_ERR_UNSUPPORTED,
                           "bert.pooling_type = %d (%s) is not supported: one vector per input needs mean (1), "
                           "cls (2) or last (3)",
                           pooling, pooling ? "rank" : "none");
    c->pooling = (enum encoder_pooling)pooling;
    double eps = infer_gguf_get_float(g, "bert.attention.layer_norm_epsilon", -1.0);
    if (!(eps > 0.0 && eps < 1.0))
        return infer_error(INFER_ERR_FORMAT, "metadata key 'bert.attention.layer_norm_epsilon' is missing or not in "
                                             "(0, 1)");
    c->norm_eps = (float)eps;
    return INFER_OK;
}

/* ---- tensors ---- */

/* An F32 vector of n elements (the converter writes norms and biases F32). */
static infer_status bind_f32(const infer_gguf *g, const char *name, int64_t n, bool required, const float **out)
{
    *out = NULL;
    const struct gguf_tensor *t = gguf_get_tensor(g, name);
    if (!t)
        return required ? infer_error(INFER_ERR_FORMAT, "missing tensor '%s'", name) : INFER_OK;
    if (t->ne[0] != n || t->ne[1] != 1 || t->ne[2] != 1 || t->ne[3] != 1)
        return infer_error(INFER_ERR_FORMAT, "tensor '%s' has %lld x %lld elements, expected %lld", name,
                           (long long)t->ne[0], (long long)t->ne[1], (long long)n);
    if (t->type != GGML_TYPE_F32 || (uintptr_t)t->data % sizeof(float))
        return infer_error(INFER_ERR_UNSUPPORTED, "tensor '%s' must be F32", name);
    *out = t->data;
    return INFER_OK;
}

static infer_status bind_layer(struct encoder *e, const infer_gguf *g, int il)
{
    const struct encoder_config *c = &e->c;
    struct encoder_layer *l = &e->w.layers[il];
    const int64_t d = c->n_embd, f = c->n_ff;
    struct {
        const char *name;
        int64_t n_in, n_out;
        struct mat *m;
        const float **b;
        bool bias_required;
    } mats[] = {
        {"attn_q", d, d, &l->wq, &l->bq, true},          {"attn_k", d, d, &l->wk, &l->bk, true},
        {"attn_v", d, d, &l->wv, &l->bv, true},          {"attn_output", d, d, &l->wo, &l->bo, false},
        {"ffn_up", d, f, &l->ffn_up, &l->ffn_up_b, false}, {"ffn_down", f, d, &l->ffn_down, &l->ffn_down_b, false},
    };
    char name[96];
    infer_status st;
    for (size_t i = 0; i < sizeof(mats) / sizeof(mats[0]); i++) {
        snprintf(name, sizeof(name), "blk.%d.%s.weight", il, mats[i].name);
        if ((st = model_bind_mat(g, name, mats[i].n_in, mats[i].n_out, true, mats[i].m)))
            return st;
        snprintf(name, sizeof(name), "blk.%d.%s.bias", il, mats[i].name);
        if ((st = bind_f32(g, name, mats[i].n_out, mats[i].bias_required, mats[i].b)))
            return st;
    }
    struct {
        const char *name;
        const float **w, **b;
    } norms[] = {{"attn_output_norm", &l->attn_out_norm, &l->attn_out_norm_b},
                 {"layer_output_norm", &l->out_norm, &l->out_norm_b}};
    for (size_t i = 0; i < 2; i++) {
        snprintf(name, sizeof(name), "blk.%d.%s.weight", il, norms[i].name);
        if ((st = bind_f32(g, name, d, true, norms[i].w)))
            return st;
        snprintf(name, sizeof(name), "blk.%d.%s.bias", il, norms[i].name);
        if ((st = bind_f32(g, name, d, true, norms[i].b)))
            return st;
    }
    return INFER_OK;
}

infer_status encoder_bind(struct encoder *e, const infer_gguf *g)
{
    memset(e, 0, sizeof(*e));
    infer_status st = read_config(&e->c, g);
    if (st)
        return st;
    struct encoder_config *c = &e->c;
    const struct gguf_tensor *emb = gguf_get_tensor(g, "token_embd.weight");
    if (!emb)
        return infer_error(INFER_ERR_FORMAT, "missing tensor 'token_embd.weight'");
    if (emb->ne[1] < 1 || emb->ne[1] > (1 << 24))
        return infer_error(INFER_ERR_FORMAT, "tensor 'token_embd.weight' has an absurd vocabulary size %lld",
                           (long long)emb->ne[1]);
    c->n_vocab = (int)emb->ne[1];
    struct mat types;
    if ((st = model_bind_mat(g, "token_embd.weight", c->n_embd, c->n_vocab, true, &e->w.tok_embd)) ||
        (st = model_bind_mat(g, "position_embd.weight", c->n_embd, c->n_ctx_train, true, &e->w.pos_embd)) ||
        (st = model_bind_mat(g, "token_types.weight", c->n_embd, c->n_token_types, false, &types)) ||
        (st = bind_f32(g, "token_embd_norm.weight", c->n_embd, true, &e->w.embd_norm)) ||
        (st = bind_f32(g, "token_embd_norm.bias", c->n_embd, true, &e->w.embd_norm_b)))
        return st;
    if (types.data) {
        if (types.type != GGML_TYPE_F32 || (uintptr_t)types.data % sizeof(float))
            return infer_error(INFER_ERR_UNSUPPORTED, "tensor 'token_types.weight' must be F32");
        e->w.type0 = types.data;
    }
    e->w.layers = calloc((size_t)c->n_layer, sizeof(*e->w.layers));
    if (!e->w.layers)
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    for (int il = 0; il < c->n_layer; il++)
        if ((st = bind_layer(e, g, il)))
            return st;
    return INFER_OK;
}

void encoder_unbind(struct encoder *e)
{
    free(e->w.layers);
    e->w.layers = NULL;
}

/* ---- forward ---- */

/* y (n_tok, n_out) = x W (+ b per row) */
static infer_status proj(float *y, const struct mat *w, const float *b, const float *x, int64_t n_tok)
{
    infer_status st = matmul(y, w->data, w->type, x, w->n_in, w->n_out, n_tok);
    if (st || !b)
        return st;
    for (int64_t t = 0; t < n_tok; t++)
        vec_add(y + t * w->n_out, y + t * w->n_out, b, w->n_out);
    return INFER_OK;
}

/* x = LayerNorm(x [+ r]) * w + b, row by row */
static void add_norm(float *x, const float *r, const float *w, const float *b, int64_t n_tok, int64_t n, float eps)
{
#pragma omp parallel for schedule(static) if (n_tok >= 16)
    for (int64_t t = 0; t < n_tok; t++) {
        float *row = x + t * n;
        if (r)
            vec_add(row, row, r + t * n, n);
        layernorm(row, row, w, b, n, eps);
    }
}

/* Bidirectional attention inside each input: out (n_tok, n_embd). */
static infer_status attend(const struct encoder_config *c, const float *q, const float *k, const float *v,
                           const int32_t *n_tokens, int n_seq, int64_t n_tok, float *out)
{
    const int d = c->n_embd, hd = c->head_dim, nh = c->n_head;
    const float scale = 1.0f / sqrtf((float)hd);
    int max_len = 0;
    for (int s = 0; s < n_seq; s++)
        if (n_tokens[s] > max_len)
            max_len = n_tokens[s];
    int32_t *seq_of = malloc((size_t)n_tok * sizeof(*seq_of)), *start = malloc((size_t)n_seq * sizeof(*start));
    if (!seq_of || !start) {
        free(seq_of);
        free(start);
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    }
    for (int s = 0, t0 = 0; s < n_seq; t0 += n_tokens[s], s++) {
        start[s] = t0;
        for (int i = 0; i < n_tokens[s]; i++)
            seq_of[t0 + i] = s;
    }
    bool oom = false;
#pragma omp parallel
    {
        float *p = malloc((size_t)max_len * sizeof(float));
        if (!p) {
#pragma omp atomic write
            oom = true;
        }
#pragma omp for schedule(static)
        for (int64_t th = 0; th < n_tok * nh; th++) {
            if (!p)
                continue;
            const int64_t t = th / nh;
            const int h = (int)(th % nh);
            const int s = seq_of[t], len = n_tokens[s];
            const float *qt = q + t * d + h * hd;
            const float *k0 = k + (int64_t)start[s] * d + h * hd, *v0 = v + (int64_t)start[s] * d + h * hd;
            for (int j = 0; j < len; j++)
                p[j] = scale * vec_dot_f32(qt, k0 + (int64_t)j * d, hd);
            softmax(p, len);
            float *o = out + t * d + h * hd;
            memset(o, 0, (size_t)hd * sizeof(float));
            for (int j = 0; j < len; j++) {
                const float *vj = v0 + (int64_t)j * d;
                for (int i = 0; i < hd; i++)
                    o[i] += p[j] * vj[i];
            }
        }
        free(p);
    }
    free(seq_of);
    free(start);
    return oom ? infer_error(INFER_ERR_NOMEM, "out of memory") : INFER_OK;
}

infer_status encoder_forward(const struct encoder *e, const int32_t *tokens, const int32_t *n_tokens, int n_seq,
                             bool normalize, float *out)
{
    const struct encoder_config *c = &e->c;
    const int64_t d = c->n_embd;
    int64_t n_tok = 0;
    if (n_seq <= 0)
        return infer_error(INFER_ERR_INVALID, "embed: no inputs");
    for (int s = 0; s < n_seq; s++) {
        if (n_tokens[s] < 1 || n_tokens[s] > c->n_ctx_train)
            return infer_error(INFER_ERR_INVALID, "embed: input %d has %d tokens (1 .. %d allowed)", s, n_tokens[s],
                               c->n_ctx_train);
        n_tok += n_tokens[s];
    }
    float *x = malloc((size_t)(n_tok * d) * sizeof(float));
    float *q = malloc((size_t)(n_tok * d) * sizeof(float));
    float *k = malloc((size_t)(n_tok * d) * sizeof(float));
    float *v = malloc((size_t)(n_tok * d) * sizeof(float));
    float *a = malloc((size_t)(n_tok * d) * sizeof(float));
    float *h = malloc((size_t)(n_tok * c->n_ff) * sizeof(float));
    int32_t *pos = malloc((size_t)n_tok * sizeof(*pos));
    infer_status st = INFER_OK;
    if (!x || !q || !k || !v || !a || !h || !pos) {
        st = infer_error(INFER_ERR_NOMEM, "embed: out of memory for %lld tokens", (long long)n_tok);
        goto done;
    }

    /* embeddings: token + type 0 + position, then LayerNorm */
    for (int s = 0, t = 0; s < n_seq; s++)
        for (int i = 0; i < n_tokens[s]; i++)
            pos[t++] = i;
    if ((st = get_rows(x, e->w.tok_embd.data, e->w.tok_embd.type, d, c->n_vocab, tokens, n_tok)) ||
        (st = get_rows(q, e->w.pos_embd.data, e->w.pos_embd.type, d, c->n_ctx_train, pos, n_tok)))
        goto done;
    for (int64_t t = 0; t < n_tok; t++) {
        if (e->w.type0)
            vec_add(x + t * d, x + t * d, e->w.type0, d);
        vec_add(x + t * d, q + t * d, x + t * d, d);
    }
    add_norm(x, NULL, e->w.embd_norm, e->w.embd_norm_b, n_tok, d, c->norm_eps);

    for (int il = 0; il < c->n_layer; il++) {
        const struct encoder_layer *l = &e->w.layers[il];
        if ((st = proj(q, &l->wq, l->bq, x, n_tok)) || (st = proj(k, &l->wk, l->bk, x, n_tok)) ||
            (st = proj(v, &l->wv, l->bv, x, n_tok)) || (st = attend(c, q, k, v, n_tokens, n_seq, n_tok, a)) ||
            (st = proj(q, &l->wo, l->bo, a, n_tok)))
            goto done;
        add_norm(x, q, l->attn_out_norm, l->attn_out_norm_b, n_tok, d, c->norm_eps);
        if ((st = proj(h, &l->ffn_up, l->ffn_up_b, x, n_tok)))
            goto done;
        gelu_ggml(h, n_tok * c->n_ff);
        if ((st = proj(q, &l->ffn_down, l->ffn_down_b, h, n_tok)))
            goto done;
        add_norm(x, q, l->out_norm, l->out_norm_b, n_tok, d, c->norm_eps);
    }

    /* pooling and L2 normalisation */
    for (int s = 0, t0 = 0; s < n_seq; t0 += n_tokens[s], s++) {
        float *o = out + (int64_t)s * d;
        const int len = n_tokens[s];
        if (c->pooling == POOL_MEAN) {
            memset(o, 0, (size_t)d * sizeof(float));
            for (int i = 0; i < len; i++)
                vec_add(o, o, x + (int64_t)(t0 + i) * d, d);
            vec_scale(o, d, 1.0f / (float)len);
        } else {
            memcpy(o, x + (int64_t)(c->pooling == POOL_CLS ? t0 : t0 + len - 1) * d, (size_t)d * sizeof(float));
        }
        if (normalize) {
            double sum = 0.0;
            for (int64_t i = 0; i < d; i++)
                sum += (double)o[i] * o[i];
            if (sum > 0.0)
                vec_scale(o, d, (float)(1.0 / sqrt(sum)));
        }
    }
done:
    free(x);
    free(q);
    free(k);
    free(v);
    free(a);
    free(h);
    free(pos);
    return st;
}
