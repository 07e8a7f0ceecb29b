/*
 * moe.c - the mixture-of-experts FFN (qwen2moe, qwen3moe, olmoe, granitemoe),
 * as llama.cpp's build_moe_ffn (src/llama-graph.cpp) defines it:
 *
 *   p = softmax(x Wrouter)                       (n_expert probabilities)
 *   S = the n_expert_used largest p (descending; ties: lower index first)
 *   w_e = p_e, or p_e / max(sum_S p, 2^-14) with moe_norm_w (qwen3moe, granitemoe)
 *   out = sum_{e in S} w_e * ((silu(x Wgate_e) * (x Wup_e)) Wdown_e)
 *       + shared expert: (silu(x Wgate_sh) * (x Wup_sh)) Wdown_sh, times
 *         sigmoid(x . w_gate_inp_shexp) for qwen2moe
 *
 * The grouped path (llama.cpp's mul_mat_id): the activations are converted
 * to the experts' activation type once per layer; the (token, slot) pairs
 * are grouped by expert; each expert with tokens runs its gate and up
 * projections over the converted rows of all its tokens at once, so its
 * weights are read once per batch, not once per token (a merged
 * ffn_gate_up_exps is one pass over 2 n_ff_exp rows).  The gate/up matrices
 * of all active experts run in one parallel region (matmul_q_batch), the
 * down matrices in a second: in decode a region per matrix would cost about
 * as much as the matrix.  The down outputs, scaled by each pair's weight,
 * are then added into the tokens' output rows.  Experts are visited in index order, so a token's sum is
 * always over its experts in ascending index order, whatever the batch (llama.cpp
 * adds in slot order: a rounding difference only).  Each matmul gives the
 * bits of single-token vec_dot (matmul.h), so a token's output does not
 * depend on the tokens batched with it.
 */
#include "moe.h"

#include "../../kernels/matmul.h"
#include "../../kernels/ops.h"
#include "../../kernels/types.h"

#include <math.h>
#include <string.h>

void moe_route(const struct model_config *c, const float *logits, int32_t *sel, float *weights)
{
    const int E = c->n_expert, K = c->n_expert_used;
    float p[1024]; /* n_expert <= 1024 (model.c) */
    /* ggml's soft_max: exp(l - max), summed in double, scaled by 1 / sum */
    memcpy(p, logits, (size_t)E * sizeof(*p));
    softmax_ref(p, E);
    /* top-k by selection: the strictly larger wins, so ties keep the lower
     * index first (libstdc++'s std::sort in ggml's argsort is an insertion
     * sort, stable, for up to 16 experts; beyond, llama.cpp's order of
     * exactly equal probabilities is unspecified) */
    uint8_t taken[1024] = {0};
    for (int k = 0; k < K; k++) {
        int best = -1;
        for (int e = 0; e < E; e++)
            if (!taken[e] && (best < 0 || p[e] > p[best] || (isnan(p[best]) && !isnan(p[e]))))
                best = e;
        taken[best] = 1;
        sel[k] = best;
        weights[k] = p[best];
    }
    if (c->moe_norm_w) {
        double s = 0.0;
        for (int k = 0; k < K; k++)
            s += (double)weights[k];
        float fs = (float)s;
        if (!(fs >= 6.103515625e-5f))
            fs = 6.103515625e-5f; /* llama.cpp clamps to the smallest normal F16 */
        for (int k = 0; k < K; k++)
            weights[k] /= fs;
    }
}

/* qwen2moe's sigmoid, computed as llama.cpp's graph does: silu(g) / g */
static float shexp_gate(float g)
{
    if (g == 0.0f)
        return 0.5f;
    return (g / (1.0f + expf(-g))) / g;
}

/* out[t] += gate(t) * sharedexpert(x[t]) for all tokens. */
static infer_status shared_expert(const struct model_config *c, const struct layer_weights *l, const float *x,
                                  int64_t n_tok, float *out)
{
    const int64_t D = c->n_embd, S = c->n_ff_shexp;
    float *h = malloc((size_t)n_tok * (size_t)S * sizeof(float));
    float *u = malloc((size_t)n_tok * (size_t)S * sizeof(float));
    float *y = malloc((size_t)n_tok * (size_t)D * sizeof(float));
    float *g = malloc((size_t)n_tok * sizeof(float));
    infer_status st = INFER_OK;
    if (!h || !u || !y || !g) {
        st = infer_error(INFER_ERR_NOMEM, "out of memory for the shared expert of %lld tokens", (long long)n_tok);
        goto done;
    }
    if (matmul(h, l->ffn_gate_shexp.data, l->ffn_gate_shexp.type, x, D, S, n_tok) ||
        matmul(u, l->ffn_up_shexp.data, l->ffn_up_shexp.type, x, D, S, n_tok)) {
        st = INFER_ERR_UNSUPPORTED; /* matmul left the message */
        goto done;
    }
    for (int64_t t = 0; t < n_tok; t++) {
        silu(h + t * S, S);
        vec_mul(h + t * S, h + t * S, u + t * S, S);
    }
    if (matmul(y, l->ffn_down_shexp.data, l->ffn_down_shexp.type, h, S, D, n_tok) ||
        (c->shexp_gated && matmul(g, l->ffn_gate_inp_shexp.data, l->ffn_gate_inp_shexp.type, x, D, 1, n_tok))) {
        st = INFER_ERR_UNSUPPORTED;
        goto done;
    }
    for (int64_t t = 0; t < n_tok; t++) {
        const float f = c->shexp_gated ? shexp_gate(g[t]) : 1.0f;
        for (int64_t i = 0; i < D; i++)
            out[t * D + i] += y[t * D + i] * f;
    }
done:
    free(h);
    free(u);
    free(y);
    free(g);
    return st;
}

/* h[j] = silu(g[j]) * u[j] for n rows of F, g and u rows gs/us floats apart
 * (h may be g, not u) */
static void swiglu_rows(float *h, const float *g, const float *u, int64_t n, int64_t F, int64_t gs, int64_t us)
{
    for (int64_t j = 0; j < n; j++) {
        if (h + j * F != g + j * gs)
            memcpy(h + j * F, g + j * gs, (size_t)F * sizeof(float));
        silu(h + j * F, F);
        vec_mul(h + j * F, h + j * F, u + j * us, F);
    }
}

infer_status moe_ffn(const struct model_config *c, const struct layer_weights *l, const float *x, int64_t n_tok,
                     float *out, uint64_t *counts)
{
    const int E = c->n_expert, K = c->n_expert_used;
    const int64_t D = c->n_embd, F = c->n_ff_exp;
    const uint32_t tg = l->ffn_gate_exps.m.type, tu = l->ffn_up_exps.m.type, td = l->ffn_down_exps.m.type;
    const bool merged = l->gate_up_merged;
    const int64_t FG = merged ? 2 * F : F; /* gate output row: gate (and up) of one pair */
    const uint32_t ag = kern.types[tg].vec_dot_type, au = kern.types[tu].vec_dot_type;
    const bool two_act = !merged && ag != au; /* up needs its own activation rows */
    const size_t row_g = matmul_act_size(tg, D, 1), row_u = matmul_act_size(tu, D, 1);
    const size_t row_d = matmul_act_size(td, F, 1);
    const size_t nt = (size_t)n_tok, nk = nt * (size_t)K;
    infer_status st = INFER_OK;
    if (!row_g || !row_u || !row_d)
        return infer_error(INFER_ERR_UNSUPPORTED, "expert tensors of types %s/%s/%s: no matmul",
                           ggml_type_traits_get(tg)->name, ggml_type_traits_get(tu)->name,
                           ggml_type_traits_get(td)->name);

    /* (token, slot) pairs are numbered in expert order: pair p = off[e] + j */
    float *logits = malloc(nt * (size_t)E * sizeof(float));
    int32_t *sel = malloc(nk * sizeof(int32_t));
    float *wts = malloc(nk * sizeof(float));
    int64_t *off = calloc((size_t)E + 1, sizeof(int64_t));
    int64_t *fill = calloc((size_t)E, sizeof(int64_t));
    int32_t *ltok = malloc(nk * sizeof(int32_t)); /* pair -> token */
    float *lw = malloc(nk * sizeof(float));       /* pair -> routing weight */
    void *xq_g = malloc(nt * row_g);              /* x converted for gate (and up) */
    void *xq_u = two_act ? malloc(nt * row_u) : xq_g;
    void *xg = malloc(nk * row_g);                /* converted rows of every pair */
    void *xu = two_act ? malloc(nk * row_u) : xg;
    float *hg = malloc(nk * (size_t)FG * sizeof(float));
    float *hu = malloc(nk * (size_t)F * sizeof(float));
    void *hq = malloc(nk * row_d);
    float *yd = malloc(nk * (size_t)D * sizeof(float));
    struct matmul_q_job *jobs = malloc(2 * (size_t)E * sizeof(*jobs));
    if (!logits || !sel || !wts || !off || !fill || !ltok || !lw || !xq_g || !xq_u || !xg || !xu || !hg || !hu ||
        !hq || !yd || !jobs) {
        st = infer_error(INFER_ERR_NOMEM, "out of memory for the experts of %lld tokens", (long long)n_tok);
        goto done;
    }

    /* route every token */
    if (matmul(logits, l->ffn_gate_inp.data, l->ffn_gate_inp.type, x, D, E, n_tok)) {
        st = INFER_ERR_UNSUPPORTED; /* matmul left the message */
        goto done;
    }
    for (int64_t t = 0; t < n_tok; t++)
        moe_route(c, logits + t * E, sel + t * K, wts + t * K);

    /* group the pairs by expert, tokens in batch order within an expert */
    for (size_t i = 0; i < nk; i++)
        off[sel[i] + 1]++;
    for (int e = 0; e < E; e++)
        off[e + 1] += off[e];
    for (size_t i = 0; i < nk; i++) {
        const int e = sel[i];
        const int64_t p = off[e] + fill[e]++;
        ltok[p] = (int32_t)(i / (size_t)K);
        lw[p] = wts[i];
    }
    if (counts)
        for (int e = 0; e < E; e++)
            counts[e] += (uint64_t)(off[e + 1] - off[e]);

    /* the activations, converted once for all experts, then each pair's row */
    if (matmul_act_quantize(xq_g, tg, x, D, n_tok) || (two_act && matmul_act_quantize(xq_u, tu, x, D, n_tok))) {
        st = INFER_ERR_UNSUPPORTED;
        goto done;
    }
    for (size_t p = 0; p < nk; p++) {
        memcpy((char *)xg + p * row_g, (const char *)xq_g + (size_t)ltok[p] * row_g, row_g);
        if (two_act)
            memcpy((char *)xu + p * row_u, (const char *)xq_u + (size_t)ltok[p] * row_u, row_u);
    }

    /* gate and up of every expert with tokens, in one parallel pass: each
     * expert's rows run over all of its tokens (a merged gate_up tensor is
     * one matrix of 2F rows: gate then up in each output row) */
    int n_jobs = 0;
    for (int e = 0; e < E; e++) {
        const int64_t n = off[e + 1] - off[e];
        if (n == 0)
            continue;
        const struct mat wg = mat_expert(&l->ffn_gate_exps, e), wu = mat_expert(&l->ffn_up_exps, e);
        jobs[n_jobs++] = (struct matmul_q_job){hg + off[e] * FG, wg.data, tg, (const char *)xg + off[e] * row_g,
                                               D, FG, n};
        if (!merged)
            jobs[n_jobs++] = (struct matmul_q_job){hu + off[e] * F, wu.data, tu, (const char *)xu + off[e] * row_u,
                                                   D, F, n};
    }
    if (matmul_q_batch(jobs, n_jobs)) {
        st = INFER_ERR_UNSUPPORTED;
        goto done;
    }
    /* h = silu(gate) * up for every pair, into hu (merged) or hg */
    float *h = merged ? hu : hg;
    swiglu_rows(h, hg, merged ? hg + F : hu, (int64_t)nk, F, FG, merged ? FG : F);

    /* down of every expert with tokens, in one parallel pass */
    if (matmul_act_quantize(hq, td, h, F, (int64_t)nk)) {
        st = INFER_ERR_UNSUPPORTED;
        goto done;
    }
    n_jobs = 0;
    for (int e = 0; e < E; e++) {
        const int64_t n = off[e + 1] - off[e];
        if (n == 0)
            continue;
        const struct mat wd = mat_expert(&l->ffn_down_exps, e);
        jobs[n_jobs++] = (struct matmul_q_job){yd + off[e] * D, wd.data, td, (const char *)hq + off[e] * row_d,
                                               F, D, n};
    }
    if (matmul_q_batch(jobs, n_jobs)) {
        st = INFER_ERR_UNSUPPORTED;
        goto done;
    }
    /* each pair's weighted share into its token's row, experts in index order */
    memset(out, 0, nt * (size_t)D * sizeof(float));
    for (size_t p = 0; p < nk; p++) {
        float *o = out + (size_t)ltok[p] * (size_t)D;
        const float *y = yd + p * (size_t)D;
        const float w = lw[p];
        for (int64_t i = 0; i < D; i++)
            o[i] += y[i] * w;
    }
    if (c->n_ff_shexp > 0)
        st = shared_expert(c, l, x, n_tok, out);
done:
    free(logits);
    free(sel);
    free(wts);
    free(off);
    free(fill);
    free(ltok);
    free(lw);
    if (xq_u != xq_g)
        free(xq_u);
    free(xq_g);
    if (xu != xg)
        free(xu);
    free(xg);
    free(hg);
    free(hu);
    free(hq);
    free(yd);
    free(jobs);
    return st;
}

infer_status moe_ffn_ref(const struct model_config *c, const struct layer_weights *l, const float *x, int64_t n_tok,
                         float *out)
{
    const int E = c->n_expert, K = c->n_expert_used;
    const int64_t D = c->n_embd, F = c->n_ff_exp;
    float *logits = malloc((size_t)E * sizeof(float));
    float *g = malloc((size_t)F * sizeof(float)), *u = malloc((size_t)F * sizeof(float));
    float *y = malloc((size_t)D * sizeof(float));
    int32_t sel[1024];
    float wts[1024];
    infer_status st = INFER_OK;
    if (!logits || !g || !u || !y) {
        st = infer_error(INFER_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int64_t t = 0; t < n_tok && !st; t++) {
        const float *xt = x + t * D;
        float *o = out + t * D;
        memset(o, 0, (size_t)D * sizeof(float));
        if (matmul(logits, l->ffn_gate_inp.data, l->ffn_gate_inp.type, xt, D, E, 1)) {
            st = INFER_ERR_UNSUPPORTED;
            break;
        }
        moe_route(c, logits, sel, wts);
        for (int e = 0; e < E && !st; e++) /* the token's experts in index order */
            for (int k = 0; k < K; k++) {
                if (sel[k] != e)
                    continue;
                const struct mat wg = mat_expert(&l->ffn_gate_exps, e), wu = mat_expert(&l->ffn_up_exps, e);
                const struct mat wd = mat_expert(&l->ffn_down_exps, e);
                if (matmul(g, wg.data, wg.type, xt, D, F, 1) || matmul(u, wu.data, wu.type, xt, D, F, 1)) {
                    st = INFER_ERR_UNSUPPORTED;
                    break;
                }
                silu(g, F);
                vec_mul(g, g, u, F);
                if (matmul(y, wd.data, wd.type, g, F, D, 1)) {
                    st = INFER_ERR_UNSUPPORTED;
                    break;
                }
                for (int64_t i = 0; i < D; i++)
                    o[i] += y[i] * wts[k];
            }
        if (!st && c->n_ff_shexp > 0)
            st = shared_expert(c, l, xt, 1, o);
    }
done:
    free(logits);
    free(g);
    free(u);
    free(y);
    return st;
}
