/*
 * forward.c - the decoder forward pass of every family model.c binds.
 *
 * One function, top to bottom, for a batch of tokens (prefill) or one token
 * (decode).  With x the residual stream of each token:
 *
 *   x = embed(token) * embd_mult             (gemma: sqrt(n_embd); granite: embedding_scale)
 *   for each layer:
 *     h = rmsnorm(x) * attn_norm
 *     q, k, v = h Wq (+bq), h Wk (+bk), h Wv (+bv)   (Wq/Wk/Wv may be rows of one attn_qkv)
 *     qk_norm (gemma3, qwen3): q, k = rmsnorm(q) * q_norm, rmsnorm(k) * k_norm    per head
 *     q, k = rope(q, pos), rope(k, pos)        llama pairs (2i, 2i+1), NEOX (i, i+n_rot/2);
 *                                              first n_rot dims; angles from rope_angles
 *                                              (freq factors, linear/YaRN scaling); skipped on
 *                                              NoPE layers (smollm3)
 *     mistral3: q *= 1 + temp_scale * ln(floor(pos / n_ctx_orig) + 1)
 *     store k, v at pos in the sequence's KV blocks
 *     s = q k^T * scale (gemma2: s = cap tanh(s / cap))
 *     a = softmax(s + causal/sliding-window mask) v     per head, GQA
 *     o = a Wo                                 (post_norms: rmsnorm(o) * post_attention_norm)
 *     x = x + o * residual_mult                (granite)
 *     h = rmsnorm(x) * ffn_norm
 *     f = (act(h Wgate) * (h Wup)) Wdown       act = SiLU, or GELU (gemma); phi3's gate and up
 *                                              are the two halves of one ffn_up
 *                                              (post_norms: rmsnorm(f) * post_ffw_norm)
 *     x = x + f * residual_mult
 *     mixture of experts (qwen2moe, qwen3moe, olmoe, granitemoe): f is instead the weighted
 *       sum of the top-k routed experts' FFNs plus a shared expert (moe.c); olmoe's
 *       q_norm/k_norm span the whole projection
 *   logits = (rmsnorm(x) * output_norm) Wout   (Wout = token embedding when tied)
 *   logits *= logit_mult (granite); logits = cap tanh(logits / cap) (gemma2)
 *
 * References: "Attention Is All You Need" (Vaswani et al. 2017), RMSNorm
 * (Zhang & Sennrich 2019), RoPE (Su et al. 2021), GQA (Ainslie et al. 2023),
 * GLU variants (Shazeer 2020), Gemma 2 and Gemma 3 technical reports (2024,
 * 2025), YaRN (Peng et al. 2023), Phi-3 technical report (LongRoPE, 2024).
 */
#include "forward.h"
#include "moe.h"

#include "../../kernels/attention.h"
#include "../../kernels/matmul.h"
#include "../../kernels/ops.h"
#include "../../kernels/pool.h"
#include "../../kernels/types.h"

#include <math.h>
#include <string.h>

infer_status run_state_init(struct run_state *s, const struct infer_model *m, int n_batch, int64_t n_ctx)
{
    const struct model_config *c = &m->c;
    memset(s, 0, sizeof(*s));
    size_t nb = (size_t)n_batch;
    size_t q_dim = (size_t)c->n_head * c->head_dim, kv_dim = (size_t)c->n_head_kv * c->head_dim;
    s->n_batch = n_batch;
    s->x = malloc(nb * c->n_embd * sizeof(float));
    s->xb = malloc(nb * c->n_embd * sizeof(float));
    s->xb2 = malloc(nb * c->n_embd * sizeof(float));
    s->q = malloc(nb * q_dim * sizeof(float));
    s->k = malloc(nb * kv_dim * sizeof(float));
    s->v = malloc(nb * kv_dim * sizeof(float));
    s->att = malloc(nb * q_dim * sizeof(float));
    s->hb = malloc(nb * c->n_ff * sizeof(float));
    s->hb2 = malloc(nb * c->n_ff * sizeof(float));
    s->blocks = malloc(nb * sizeof(*s->blocks));
    s->rope_cs = malloc(2 * nb * (size_t)c->n_rot * sizeof(float));
    s->rope_factors = model_rope_factors(m, n_ctx);
    if (c->n_expert > 0 &&
        !(s->expert_counts = calloc((size_t)c->n_layer * (size_t)c->n_expert, sizeof(*s->expert_counts)))) {
        run_state_free(s);
        return infer_error(INFER_ERR_NOMEM, "out of memory for expert counts");
    }
    if (!s->blocks || !s->rope_cs || !s->xb || !s->xb2 || !s->q || !s->k || !s->v || !s->att || !s->hb || !s->hb2) {
        run_state_free(s);
        return infer_error(INFER_ERR_NOMEM, "out of memory for activations of %d tokens", n_batch);
    }
    return INFER_OK;
}

void run_state_free(struct run_state *s)
{
    free(s->x);
    free(s->xb);
    free(s->xb2);
    free(s->q);
    free(s->k);
    free(s->v);
    free(s->att);
    free(s->hb);
    free(s->hb2);
    free(s->blocks);
    free(s->rope_cs);
    free(s->expert_counts);
    memset(s, 0, sizeof(*s));
}

/* INFER_PROFILE=1: wall time of each part of the forward pass, summed over
 * the process and printed to stderr at exit, to see where decode or prefill
 * time goes on a given machine.  Off, it costs one test per part. */
enum { PR_QKV, PR_ATTN, PR_WO, PR_FFN_UP, PR_ACT, PR_FFN_DOWN, PR_MOE, PR_OUT, PR_OTHER, PR_N };
static struct {
    int on; /* -1: not read yet */
    double t[PR_N];
    long passes, tokens;
} prof = {.on = -1};

static void prof_report(void)
{
    static const char *const names[PR_N] = {
        "Q/K/V projections", "attention (q/k norms, RoPE, KV store, attention)", "attention output projection",
        "FFN gate/up projections", "FFN activation", "FFN down projection",
        "experts (router, grouped expert matmuls, shared expert)", "output norm + vocabulary projection",
        "norms, residual adds, embeddings"};
    double total = 0;
    for (int i = 0; i < PR_N; i++)
        total += prof.t[i];
    if (prof.passes == 0 || total <= 0)
        return;
    fprintf(stderr, "profile: %ld forward passes, %ld tokens, %.3f s\n", prof.passes, prof.tokens, total);
    for (int i = 0; i < PR_N; i++)
        fprintf(stderr, "  %-50s %9.3f ms/pass %5.1f%%\n", names[i], 1e3 * prof.t[i] / (double)prof.passes,
                100 * prof.t[i] / total);
}

static bool prof_start(int64_t n_tok, double *t)
{
    if (prof.on < 0) {
        const char *e = getenv("INFER_PROFILE");
        prof.on = e && *e && strcmp(e, "0") != 0;
        if (prof.on)
            atexit(prof_report);
    }
    if (!prof.on)
        return false;
    prof.passes++;
    prof.tokens += n_tok;
    *t = infer_now();
    return true;
}

/* Charge the time since *t to part k. */
static inline void prof_mark(bool on, double *t, int k)
{
    if (!on)
        return;
    const double now = infer_now();
    prof.t[k] += now - *t;
    *t = now;
}

/* Rows from which element-wise work is split over the threads.  It is
 * always done one row at a time, exactly as for a single token, so a token's
 * bits do not depend on the batch around it. */
#define PAR_ROWS 16

/* A row-by-row operation over n_tok rows, spread over the thread pool from
 * PAR_ROWS rows on: op(l, t) does row t with the loop's arguments. */
struct row_loop {
    void (*op)(const struct row_loop *l, int64_t t);
    float *x, *z;
    const float *y, *w;
    int64_t n;
    float f;
    bool flag;
    const void *arg, *arg2; /* anything else the op needs */
};

static void row_loop_run(void *ctx, int64_t t0, int64_t t1)
{
    const struct row_loop *l = ctx;
    for (int64_t t = t0; t < t1; t++)
        l->op(l, t);
}

static void rows_for(const struct row_loop *l, int64_t n_tok)
{
    if (n_tok >= PAR_ROWS)
        pool_for(n_tok, pool_grain(n_tok, 4, 1), row_loop_run, (void *)l);
    else
        row_loop_run((void *)l, 0, n_tok);
}

static void rmsnorm_row(const struct row_loop *l, int64_t t)
{
    rmsnorm(l->x + t * l->n, l->y + t * l->n, l->w, l->n, l->f);
}

/* out[t] = rmsnorm(in[t]) * w for each of n_tok rows of n elements */
static void rmsnorm_rows(float *out, const float *in, const float *w, int64_t n_tok, int64_t n, float eps)
{
    rows_for(&(struct row_loop){.op = rmsnorm_row, .x = out, .y = in, .w = w, .n = n, .f = eps}, n_tok);
}

static void add_row(const struct row_loop *l, int64_t t)
{
    vec_add(l->x + t * l->n, l->x + t * l->n, l->y + t * l->n, l->n);
}

/* x[t] += y[t] (residual), row by row */
static void add_rows(float *x, const float *y, int64_t n_tok, int64_t n)
{
    rows_for(&(struct row_loop){.op = add_row, .x = x, .y = y, .n = n}, n_tok);
}

static void gate_row(const struct row_loop *l, int64_t t)
{
    float *h = l->x + t * l->n;
    if (l->flag)
        gelu(h, l->n);
    else
        silu(h, l->n);
    vec_mul(h, h, l->y + t * l->n, l->n);
}

/* h[t] = act(h[t]) * u[t], row by row (gated feed-forward) */
static void gate_rows(float *h, const float *u, int64_t n_tok, int64_t n, bool use_gelu)
{
    rows_for(&(struct row_loop){.op = gate_row, .x = h, .y = u, .n = n, .flag = use_gelu}, n_tok);
}

static void scale_row(const struct row_loop *l, int64_t t) { vec_scale(l->x + t * l->n, l->n, l->f); }

/* x[t] *= f row by row (f == 0: no multiplier) */
static void scale_rows(float *x, float f, int64_t n_tok, int64_t n)
{
    if (f == 0.0f)
        return;
    rows_for(&(struct row_loop){.op = scale_row, .x = x, .n = n, .f = f}, n_tok);
}

/* x += post-norm(y) * residual_mult: a sub-layer's output joins the residual
 * stream (post_norm NULL: none; residual_mult 0: none).  y is overwritten. */
static void residual_add(const struct model_config *c, float *x, float *y, const float *post_norm, int64_t n_tok)
{
    if (post_norm)
        rmsnorm_rows(y, y, post_norm, n_tok, c->n_embd, c->rms_eps);
    scale_rows(y, c->residual_mult, n_tok, c->n_embd);
    add_rows(x, y, n_tok, c->n_embd);
}

static void rope_angles_row(const struct row_loop *l, int64_t t)
{
    rope_angles(l->x + t * l->n, l->arg, ((const struct batch *)l->arg2)->pos[t]);
}

/* The RoPE angles of every token of the batch, once per pass for each layer
 * kind: global layers at s->rope_cs, sliding-window layers n_tok * n_rot
 * floats further (they may have their own base and scale). */
static void rope_angles_rows(struct run_state *s, const struct model_config *c, const struct batch *b)
{
    if (c->rope_none)
        return;
    const int kinds = c->n_swa > 0 && c->swa_pattern > 0 ? 2 : 1;
    for (int kind = 0; kind < kinds; kind++) {
        struct rope_params rp = kind ? c->rope_swa : c->rope;
        rp.freq_factors = s->rope_factors;
        float *cs = s->rope_cs + (size_t)kind * (size_t)b->n * (size_t)c->n_rot;
        rows_for(&(struct row_loop){.op = rope_angles_row, .x = cs, .n = c->n_rot, .arg = &rp, .arg2 = b},
                 b->n);
    }
}

static void add_bias(float *y, const float *b, int64_t n_tok, int64_t n)
{
    if (!b)
        return;
    for (int64_t t = 0; t < n_tok; t++)
        for (int64_t i = 0; i < n; i++)
            y[t * n + i] += b[i];
}

/* y (n_tok, w->n_out) = x (n_tok, w->n_in) W^T */
static infer_status mat_mul(float *y, const struct mat *w, const float *x, int64_t n_tok)
{
    return (infer_status)matmul(y, w->data, w->type, x, w->n_in, w->n_out, n_tok); /* matmul left the message */
}

/* y_k = x W_k^T for n matrices of the same input (Q, K, V; gate, up): the
 * activations are quantized once for the matrices of the first quantized
 * one's activation type (3.6% of a Q4_K_M prefill went to quantize_q8_K),
 * and those run as one matmul_q_jobs (in decode one pool loop, not one per
 * matrix).  Float weights, and matrices of another activation type, go
 * through mat_mul (their own paths).  Results are mat_mul's, bit for bit. */
static infer_status mat_mul_same_input(const float *x, int64_t n_tok, int n, float *const *ys,
                                       const struct mat *const *ws)
{
    struct matmul_q_job jobs[MATMUL_JOBS_MAX];
    int n_jobs = 0;
    void *xq = NULL;
    size_t xq_size = 0;
    uint32_t xq_type = 0; /* activation type held in xq (0: none) */
    infer_status st = INFER_OK;
    for (int k = 0; k < n && !st; k++) {
        const struct mat *w = ws[k];
        const uint32_t at = kern.types[w->type].vec_dot_type;
        if (w->type == GGML_TYPE_F32 || w->type == GGML_TYPE_F16 || w->type == GGML_TYPE_BF16 ||
            at == GGML_TYPE_F32 || n_tok == 0 || (xq && at != xq_type) || n_jobs == MATMUL_JOBS_MAX) {
            st = mat_mul(ys[k], w, x, n_tok);
            continue;
        }
        if (!xq) {
            xq_size = matmul_act_size(w->type, w->n_in, n_tok);
            xq = xq_size ? matmul_act_alloc(xq_size) : NULL;
            xq_type = at;
            if (!xq)
                return infer_error(INFER_ERR_NOMEM, "out of memory for %lld activation rows", (long long)n_tok);
            if (matmul_act_quantize(xq, w->type, x, w->n_in, n_tok) != 0)
                st = INFER_ERR_UNSUPPORTED; /* matmul left the message */
        }
        jobs[n_jobs++] = (struct matmul_q_job){ys[k], w->data, w->type, xq, w->n_in, w->n_out, n_tok};
    }
    if (!st && n_jobs > 0 && matmul_q_jobs(jobs, n_jobs) != 0)
        st = INFER_ERR_UNSUPPORTED; /* matmul left the message */
    matmul_act_release(xq, xq_size);
    return st;
}

/* h = act(x Wgate) * (x Wup), (n_tok, n_ff), act SiLU or GELU; u: scratch
 * of h's size.  For many tokens and one type, gate and up run as one kernel
 * (matmul_glu: their tiles share each pass over the activations and only h
 * is stored); otherwise two matrices of the same input into h and u, then
 * gate_rows.  The same bits either way (test-forward compares the two). */
static infer_status ffn_gate_up(float *h, float *u, const struct layer_weights *l, const float *x, int64_t n_tok,
                                bool use_gelu, bool pon, double *pt)
{
    const struct mat *g = &l->ffn_gate, *up = &l->ffn_up;
    bool fused = false;
    if (g->type == up->type && g->n_in == up->n_in && g->n_out == up->n_out) {
        const int st = matmul_glu(h, g->data, up->data, g->type, x, g->n_in, g->n_out, n_tok,
                                  use_gelu ? GLU_GELU : GLU_SILU, &fused);
        if (st)
            return (infer_status)st; /* matmul left the message */
    }
    if (!fused) {
        infer_status st = mat_mul_same_input(x, n_tok, 2, (float *const[]){h, u}, (const struct mat *const[]){g, up});
        if (st)
            return st;
    }
    prof_mark(pon, pt, PR_FFN_UP);
    if (!fused)
        gate_rows(h, u, n_tok, g->n_out, use_gelu);
    prof_mark(pon, pt, PR_ACT);
    return INFER_OK;
}

/* One head's row of K or V in the cache's element type. */
static void store_row(uint8_t *dst, uint32_t type, const float *src, int head_dim)
{
    if (type == GGML_TYPE_Q8_0) {
        quantize_row_q8_0_ref(src, dst, head_dim);
        return;
    }
    kern.types[GGML_TYPE_F16].from_float(src, dst, head_dim); /* fp32_to_fp16's bits, vectorized */
}

/* Rotate token t's queries (l->x) and keys (l->z) by its
 * angles in l->w; l->arg is the model config. */
static void rope_row(const struct row_loop *l, int64_t t)
{
    const struct model_config *c = l->arg;
    const float *ct = l->w + t * c->n_rot;
    float *q = l->x + t * (int64_t)c->n_head * c->head_dim, *k = l->z + t * (int64_t)c->n_head_kv * c->head_dim;
    if (c->rope_neox) {
        rope_neox(q, c->n_head, c->head_dim, c->n_rot, ct);
        rope_neox(k, c->n_head_kv, c->head_dim, c->n_rot, ct);
    } else {
        rope_norm(q, c->n_head, c->head_dim, c->n_rot, ct);
        rope_norm(k, c->n_head_kv, c->head_dim, c->n_rot, ct);
    }
}

/* Store the batch's new keys and values (F16 or Q8_0) at their sequences' positions. */
struct kv_store_args {
    struct kv_arena *a;
    const struct batch *batch;
    int il, n_head_kv, head_dim;
    const float *k, *v;
};

static void kv_store_row(const struct row_loop *l, int64_t t) /* each token writes its own rows */
{
    const struct kv_store_args *s = l->arg;
    struct kv_arena *a = s->a;
    const int bt = a->s.block_tokens;
    const int64_t pos = s->batch->pos[t];
    const int32_t b = s->batch->seq[t]->blocks[pos / bt];
    for (int h = 0; h < s->n_head_kv; h++) {
        uint8_t *kd = (uint8_t *)kv_k(a, b, s->il, h) + (size_t)(pos % bt) * a->row_k;
        uint8_t *vd = (uint8_t *)kv_v(a, b, s->il, h) + (size_t)(pos % bt) * a->row_v;
        const float *ks = s->k + ((size_t)t * s->n_head_kv + h) * s->head_dim;
        const float *vs = s->v + ((size_t)t * s->n_head_kv + h) * s->head_dim;
        store_row(kd, a->s.type_k, ks, s->head_dim);
        store_row(vd, a->s.type_v, vs, s->head_dim);
    }
}

static void kv_store(struct kv_arena *a, const struct batch *batch, int il, const float *k, const float *v,
                     int n_head_kv, int head_dim)
{
    const struct kv_store_args args = {a, batch, il, n_head_kv, head_dim, k, v};
    rows_for(&(struct row_loop){.op = kv_store_row, .arg = &args}, batch->n);
}

/* Each layer is a like-sized piece of work for the thread pool's trials of
 * its thread count (kernels/pool.h): reported one by one, they decide within
 * one long prefill step too. */
static void layer_done(int64_t n_tok, double *t_layer)
{
    const double t_end = infer_now();
    pool_step(n_tok, t_end - *t_layer);
    *t_layer = t_end;
}

infer_status forward_batch(const struct infer_model *m, struct run_state *s, struct kv_arena *a,
                           const struct batch *b, float *logits)
{
    const struct model_config *c = &m->c;
    const struct model_weights *w = &m->w;
    const int64_t n_tok = b->n;
    const int64_t n_embd = c->n_embd, head_dim = c->head_dim;
    const int64_t q_dim = (int64_t)c->n_head * head_dim, kv_dim = (int64_t)c->n_head_kv * head_dim;
    infer_status st;
    double pt = 0;
    const bool pon = prof_start(n_tok, &pt);

    if (n_tok <= 0 || n_tok > s->n_batch)
        return infer_error(INFER_ERR_INVALID, "forward: %lld tokens for a batch of %d", (long long)n_tok, s->n_batch);
    for (int64_t t = 0; t < n_tok; t++) {
        if (b->tokens[t] < 0 || b->tokens[t] >= c->n_vocab)
            return infer_error(INFER_ERR_INVALID, "token id %d is outside the vocabulary (0..%d)", b->tokens[t],
                               c->n_vocab - 1);
        if (b->pos[t] < 0 || b->pos[t] >= (int64_t)b->seq[t]->n_blocks * a->s.block_tokens)
            return infer_error(INFER_ERR_INVALID, "forward: position %lld has no KV block", (long long)b->pos[t]);
        s->blocks[t] = b->seq[t]->blocks;
    }

    /* token embeddings */
    const size_t emb_row = ggml_row_size(w->tok_embd.type, n_embd);
    for (int64_t t = 0; t < n_tok; t++) {
        float *xt = s->x + t * n_embd;
        dequantize_row(w->tok_embd.type, (const uint8_t *)w->tok_embd.data + (size_t)b->tokens[t] * emb_row, xt,
                       n_embd);
        if (c->embd_mult != 0.0f)
            for (int64_t i = 0; i < n_embd; i++)
                xt[i] *= c->embd_mult;
    }

    rope_angles_rows(s, c, b);

    double t_layer = infer_now();
    for (int il = 0; il < c->n_layer; il++) {
        const struct layer_weights *l = &w->layers[il];
        const bool swa = model_layer_is_swa(c, il);

        /* attention */
        rmsnorm_rows(s->xb, s->x, l->attn_norm, n_tok, n_embd, c->rms_eps);
        prof_mark(pon, &pt, PR_OTHER);
        if ((st = mat_mul_same_input(s->xb, n_tok, 3, (float *const[]){s->q, s->k, s->v},
                                     (const struct mat *const[]){&l->wq, &l->wk, &l->wv})))
            return st;
        prof_mark(pon, &pt, PR_QKV);
        add_bias(s->q, l->bq, n_tok, q_dim);
        add_bias(s->k, l->bk, n_tok, kv_dim);
        add_bias(s->v, l->bv, n_tok, kv_dim);
        if (c->qk_norm) {
            rmsnorm_rows(s->q, s->q, l->q_norm, n_tok * c->n_head, head_dim, c->rms_eps);
            rmsnorm_rows(s->k, s->k, l->k_norm, n_tok * c->n_head_kv, head_dim, c->rms_eps);
        } else if (c->qk_norm_full) {
            rmsnorm_rows(s->q, s->q, l->q_norm, n_tok, q_dim, c->rms_eps);
            rmsnorm_rows(s->k, s->k, l->k_norm, n_tok, kv_dim, c->rms_eps);
        }
        if (model_layer_has_rope(c, il)) {
            const float *cs = s->rope_cs + (swa ? n_tok * c->n_rot : 0);
            rows_for(&(struct row_loop){.op = rope_row, .x = s->q, .w = cs, .arg = c, .z = s->k}, n_tok);
        }
        if (c->attn_temp_scale != 0.0f)
            for (int64_t t = 0; t < n_tok; t++) {
                /* llama.cpp: log(floor(pos / n) + 1.0) in double, rounded to float */
                const double f = floor((double)((float)b->pos[t] / (float)c->n_ctx_orig)) + 1.0;
                const float temp = (float)(log(f) * (double)c->attn_temp_scale + 1.0);
                vec_scale(s->q + t * q_dim, q_dim, temp);
            }
        kv_store(a, b, il, s->k, s->v, c->n_head_kv, (int)head_dim);
        struct attn_kv view = {
            .base = a->base,
            .block_bytes = a->block_bytes,
            .k_off = (size_t)il * a->layer_bytes,
            .v_off = (size_t)il * a->layer_bytes + (size_t)c->n_head_kv * a->head_bytes,
            .head_bytes = a->head_bytes,
            .head_bytes_v = a->head_bytes_v,
            .k_q8 = a->s.type_k == GGML_TYPE_Q8_0,
            .v_q8 = a->s.type_v == GGML_TYPE_Q8_0,
            .block_tokens = a->s.block_tokens,
            .blocks = s->blocks,
            .pos = b->pos,
            .softcap = c->attn_softcap,
        };
        kern.attention(s->att, s->q, n_tok, &view, c->n_head, c->n_head_kv, (int)head_dim, c->attn_scale,
                      swa ? c->n_swa : 0);
        prof_mark(pon, &pt, PR_ATTN);
        if ((st = mat_mul(s->xb2, &l->wo, s->att, n_tok)))
            return st;
        prof_mark(pon, &pt, PR_WO);
        residual_add(c, s->x, s->xb2, l->post_attn_norm, n_tok);

        /* feed-forward */
        rmsnorm_rows(s->xb, s->x, l->ffn_norm, n_tok, n_embd, c->rms_eps);
        prof_mark(pon, &pt, PR_OTHER);
        if (c->n_expert > 0) {
            if ((st = moe_ffn(c, l, s->xb, n_tok, s->xb2, s->expert_counts + (size_t)il * c->n_expert)))
                return st;
            prof_mark(pon, &pt, PR_MOE);
            residual_add(c, s->x, s->xb2, l->post_ffn_norm, n_tok);
            prof_mark(pon, &pt, PR_OTHER);
            layer_done(n_tok, &t_layer);
            continue;
        }
        if ((st = ffn_gate_up(s->hb, s->hb2, l, s->xb, n_tok, c->act == FFN_GELU, pon, &pt)))
            return st;
        if ((st = mat_mul(s->xb2, &l->ffn_down, s->hb, n_tok)))
            return st;
        prof_mark(pon, &pt, PR_FFN_DOWN);
        residual_add(c, s->x, s->xb2, l->post_ffn_norm, n_tok);
        prof_mark(pon, &pt, PR_OTHER);
        layer_done(n_tok, &t_layer);
    }

    /* output: final norm of the rows that want logits, then the vocabulary projection */
    int64_t n_out = 0;
    for (int64_t t = 0; t < n_tok; t++)
        if (b->want_logits[t])
            rmsnorm(s->xb + n_out++ * n_embd, s->x + t * n_embd, w->output_norm, n_embd, c->rms_eps);
    if (n_out > 0 && (st = mat_mul(logits, &w->output, s->xb, n_out)))
        return st;
    const int64_t n_logits = n_out * c->n_vocab;
    if (c->logit_mult != 0.0f)
        vec_scale(logits, n_logits, c->logit_mult);
    if (c->final_softcap > 0.0f) {
        const float cap = c->final_softcap, inv = 1.0f / c->final_softcap;
        for (int64_t i = 0; i < n_logits; i++)
            logits[i] = tanhf(logits[i] * inv) * cap;
    }
    prof_mark(pon, &pt, PR_OUT);
    return INFER_OK;
}

infer_status forward(const struct infer_model *m, struct run_state *s, struct kv_arena *a, struct kv_seq *seq,
                     const int32_t *tokens, int64_t n_tok, bool all_logits, float *logits)
{
    if (n_tok <= 0 || n_tok > s->n_batch)
        return infer_error(INFER_ERR_INVALID, "forward: %lld tokens for a batch of %d", (long long)n_tok, s->n_batch);
    const int64_t pos0 = seq->n_tokens;
    infer_status st = kv_seq_reserve(seq, a, pos0 + n_tok);
    if (st)
        return st;
    struct kv_seq **seqs = malloc((size_t)n_tok * sizeof(*seqs));
    int64_t *pos = malloc((size_t)n_tok * sizeof(*pos));
    bool *want = malloc((size_t)n_tok * sizeof(*want));
    if (!seqs || !pos || !want) {
        st = infer_error(INFER_ERR_NOMEM, "out of memory");
    } else {
        for (int64_t t = 0; t < n_tok; t++) {
            seqs[t] = seq;
            pos[t] = pos0 + t;
            want[t] = all_logits || t == n_tok - 1;
        }
        struct batch b = {n_tok, tokens, seqs, pos, want};
        st = forward_batch(m, s, a, &b, logits);
        if (st == INFER_OK)
            seq->n_tokens = pos0 + n_tok;
    }
    free(seqs);
    free(pos);
    free(want);
    return st;
}
