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
 * are grouped by expert; each expert with tokens runs its matrices over the
 * converted rows of all its tokens at once, so its weights are read once
 * per batch, not once per token (a merged ffn_gate_up_exps is one matrix of
 * 2 n_ff_exp rows).  The work after the router is two pool loops, whose
 * items are described below; the second runs the down projections and the
 * weighted sum in one: a token's output is the sum of its pairs' down
 * outputs times their weights over its experts in ascending index order,
 * whatever the batch (llama.cpp adds in slot order: a rounding difference
 * only).  Each matmul gives the bits of single-token
 * vec_dot (matmul.h), so a token's output does not depend on the tokens
 * batched with it.
 */
#include "moe.h"

#include "../../kernels/matmul.h"
#include "../../kernels/ops.h"
#include "../../kernels/pool.h"
#include "../../kernels/quants.h"
#include "../../kernels/types.h"

#include <math.h>
#include <stdatomic.h>
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

/*
 * The fused expert FFN: two pool loops (kernels/pool.h) after the router,
 *
 *   up items (expert e, rows [r0, r1) of its F, a chunk of its pairs): the
 *     gate rows and the up rows of the range over the chunk's activation
 *     rows, then h = silu(gate) * up on the range and its conversion into
 *     the down projection's activation type.  For many tokens (gemm_many)
 *     and one type, gate and up run as one kernel (matmul_q_rows_glu: their
 *     tiles share each pass over the transposed activations, which are
 *     transposed once, and only h is stored; ~4-8% less CPU for the experts
 *     of the qwen3moe bench file); otherwise two matmuls into hg and hu.
 *     r0 and r1 are multiples of that type's block (and of 16), so each
 *     block of h is converted whole, with the bits a conversion of the full
 *     row gives (conversions work per block).
 *   down items (rows [r0, r1) of D, every token): the down projection fused
 *     with the weighted sum.  Each active expert in ascending index order
 *     runs rows [r0, r1) of its down matrix over its pairs (in chunks of at
 *     most MOE_CHUNK) into the item's own scratch, and each pair's outputs,
 *     times its weight, go straight into its token's rows of out, added in
 *     that order: the down outputs are never stored for the whole batch
 *     (they were 16 MB written and read again per layer for a 512-token
 *     batch of the qwen3moe bench file), and out's rows of an item are
 *     written by that item alone.
 *
 * Decode (one token, 8 of 64 experts) is 2 loops a layer, not one per
 * matrix: up items are whole matrices, down items a share of D's rows over
 * each of the token's experts.  Prefill up items hold whole experts' rows
 * over up to MOE_CHUNK of their tokens, so each expert's weights are read
 * once per chunk; its down rows are read once per item, over all its pairs.
 * There is one down item per taking-part thread (their work is even: the
 * same rows of every expert): more, shorter runs over each matrix start
 * with more misses the tiles' prefetching has not covered (contrib/bench/
 * moe-ab on the qwen3moe bench file, 2 threads: 4 items a thread 2-9%
 * slower than the unfused loops at 1-16 tokens, 1 a thread level or faster
 * at 1-512 tokens).
 */
#define MOE_CHUNK 256
/* pool items per taking-part thread each loop aims at */
#define MOE_ITEMS_PER_THREAD 4

struct moe_item {
    int32_t e;
    int32_t r0, r1;
    int64_t p0, p1;
};

struct moe_run {
    const struct layer_weights *l;
    int64_t D, F, FG;
    bool merged, one_tok;
    uint32_t tg, tu, td;
    const int32_t *ltok;
    const float *lw;
    const char *xg, *xu; /* activation row of pair p: xg + p * row_g (one_tok: every pair's is row 0) */
    size_t row_g, row_u, row_d;
    size_t wrow_g;      /* bytes of a gate weight row (merged: up row F follows gate row F - 1) */
    float *hg, *hu, *h; /* gate (and merged up) outputs, FG a pair; up outputs; h, F a pair */
    char *hq;           /* h converted for the down projection, row_d a pair */
    float *out;
    int64_t n_tok;
    from_float_fn qd;
    int64_t qd_blk;     /* elements per block of the down activation type */
    size_t qd_bytes;    /* bytes per such block */
    const struct moe_item *items; /* up items */
    int64_t n_items;
    int64_t rd;         /* rows of D a down item (the last one: the rest) */
    float *ys;          /* the down items' scratch, ys_item floats each */
    size_t ys_item;
    const int64_t *off; /* pairs of expert e: [off[e], off[e + 1]) */
    const int32_t *act; /* the experts with pairs, ascending index */
    int n_act;
    const int64_t *tpair; /* token t's pairs, ascending expert: tpair[t * K + k] */
    int K;
    _Atomic int err;
};

static void moe_fail(struct moe_run *r, int st)
{
    int zero = 0;
    atomic_compare_exchange_strong(&r->err, &zero, st);
}

static void moe_up_run(void *ctx, int64_t i0, int64_t i1)
{
    struct moe_run *r = ctx;
    const int64_t F = r->F, FG = r->FG;
    for (int64_t i = i0; i < i1; i++) {
        const struct moe_item *it = &r->items[i];
        const int64_t n = it->p1 - it->p0, len = it->r1 - it->r0;
        const size_t ag = r->one_tok ? 0 : (size_t)it->p0 * r->row_g, au = r->one_tok ? 0 : (size_t)it->p0 * r->row_u;
        const struct mat wg = mat_expert(&r->l->ffn_gate_exps, it->e);
        const struct mat wu_m = mat_expert(&r->l->ffn_up_exps, it->e);
        const struct matmul_q_job jg = {r->hg + it->p0 * FG, wg.data, r->tg, r->xg + ag, r->D, FG, n};
        bool fused = false; /* gate and up in one pass, h written by it (many tokens, one type) */
        int st = 0;
        if (!r->one_tok && (r->merged || r->tg == r->tu)) {
            const void *wu = r->merged ? (const char *)wg.data + (size_t)F * r->wrow_g : wu_m.data;
            st = matmul_q_rows_glu(&jg, wu, r->h + it->p0 * F + it->r0, (size_t)F, it->r0, it->r1, &fused);
        }
        if (!st && !fused) {
            st = matmul_q_rows(&jg, it->r0, it->r1);
            if (!st && r->merged)
                st = matmul_q_rows(&jg, F + it->r0, F + it->r1);
            else if (!st) {
                const struct matmul_q_job ju = {r->hu + it->p0 * F, wu_m.data, r->tu, r->xu + au, r->D, F, n};
                st = matmul_q_rows(&ju, it->r0, it->r1);
            }
        }
        if (st) {
            moe_fail(r, st);
            return;
        }
        for (int64_t p = it->p0; p < it->p1 && fused; p++)
            r->qd(r->h + p * F + it->r0, r->hq + (size_t)p * r->row_d + (size_t)(it->r0 / r->qd_blk) * r->qd_bytes,
                  len);
        for (int64_t p = it->p0; p < it->p1 && !fused; p++) {
            const float *g = r->hg + p * FG + it->r0;
            const float *u = (r->merged ? r->hg + p * FG + F : r->hu + p * F) + it->r0;
            float *h = r->h + p * F + it->r0; /* hg itself when not merged */
            if (h != g)
                memcpy(h, g, (size_t)len * sizeof(float));
            silu(h, len);
            vec_mul(h, h, u, len);
            r->qd(h, r->hq + (size_t)p * r->row_d + (size_t)(it->r0 / r->qd_blk) * r->qd_bytes, len);
        }
    }
}

/* The first MOE_PF_HEAD bytes of a weight matrix towards the caches.  The
 * decode kernels prefetch their weight stream ~8 KB ahead, so a matrix's
 * first 8 KB, met cold at its start, are misses; one token's experts start
 * 24 runs a layer. */
#define MOE_PF_HEAD 8192
static void prefetch_head(const void *p)
{
    for (size_t o = 0; o < MOE_PF_HEAD; o += 64)
        __builtin_prefetch((const char *)p + o, 0, 3);
}

/* Up items, in decode (whole matrices) with the head of the up matrix
 * fetched before the gate runs and the next item's gate head after. */
static void moe_up_items_run(void *ctx, int64_t i0, int64_t i1)
{
    struct moe_run *r = ctx;
    for (int64_t i = i0; i < i1 && !atomic_load(&r->err); i++) {
        const int e = r->items[i].e;
        if (r->one_tok) {
            const char *wg = mat_expert(&r->l->ffn_gate_exps, e).data;
            prefetch_head(r->merged ? wg + (size_t)r->F * r->wrow_g : mat_expert(&r->l->ffn_up_exps, e).data);
        }
        moe_up_run(ctx, i, i + 1);
        if (r->one_tok && i + 1 < r->n_items)
            prefetch_head(mat_expert(&r->l->ffn_gate_exps, r->items[i + 1].e).data);
    }
}

/* o[i] = (first ? 0 : o[i]) + y[i] * w, product and sum each rounded (the
 * build has no FMA contraction): the bits of a memset to 0 then adds.  In
 * runs of 16, which the compiler vectorizes at -O2 (the plain loop stayed
 * scalar, ~5% of the experts' CPU time in a 512-token batch). */
static void add_scaled(float *restrict o, const float *restrict y, float w, int64_t n, bool first)
{
    int64_t i = 0;
    if (first) {
        for (; i + 16 <= n; i += 16)
            for (int j = 0; j < 16; j++)
                o[i + j] = 0.0f + y[i + j] * w;
        for (; i < n; i++)
            o[i] = 0.0f + y[i] * w;
        return;
    }
    for (; i + 16 <= n; i += 16)
        for (int j = 0; j < 16; j++)
            o[i + j] += y[i + j] * w;
    for (; i < n; i++)
        o[i] += y[i] * w;
}

/* Down items: rows [r0, r1) of every expert's down matrix over its pairs,
 * each pair's outputs times its weight added into its token's rows of out
 * (the first of a token's pairs, in ascending expert order, over 0). */
static void moe_down_sum_run(void *ctx, int64_t i0, int64_t i1)
{
    struct moe_run *r = ctx;
    const int64_t D = r->D;
    for (int64_t i = i0; i < i1 && !atomic_load(&r->err); i++) {
        const int64_t r0 = i * r->rd, r1 = r0 + r->rd < D ? r0 + r->rd : D, len = r1 - r0;
        float *sc = r->ys + (size_t)i * r->ys_item;
        if (r->K == 0)
            for (int64_t t = 0; t < r->n_tok; t++)
                memset(r->out + t * D + r0, 0, (size_t)len * sizeof(float));
        for (int a = 0; a < r->n_act; a++) {
            const int e = r->act[a];
            const struct mat wd = mat_expert(&r->l->ffn_down_exps, e);
            if (r->one_tok && a + 1 < r->n_act) /* the next expert's rows, met cold */
                prefetch_head((const char *)mat_expert(&r->l->ffn_down_exps, r->act[a + 1]).data +
                              (size_t)r0 * ggml_row_size(r->td, r->F));
            const int64_t n = r->off[e + 1] - r->off[e], nc = (n + MOE_CHUNK - 1) / MOE_CHUNK;
            for (int64_t ch = 0; ch < nc; ch++) { /* chunks of even size, as the up items' */
                const int64_t p0 = r->off[e] + n * ch / nc, p1 = r->off[e] + n * (ch + 1) / nc;
                const struct matmul_q_job jd = {NULL, wd.data, r->td, r->hq + (size_t)p0 * r->row_d, r->F, D, p1 - p0};
                const int st = matmul_q_rows_to(&jd, r0, r1, sc, (size_t)len);
                if (st) {
                    moe_fail(r, st);
                    return;
                }
                for (int64_t p = p0; p < p1; p++) {
                    const int64_t t = r->ltok[p];
                    add_scaled(r->out + t * D + r0, sc + (p - p0) * len, r->lw[p], len, r->tpair[t * r->K] == p);
                }
            }
        }
    }
}

static int64_t round_up(int64_t v, int64_t u) { return (v + u - 1) / u * u; }

static int64_t gcd64(int64_t a, int64_t b)
{
    while (b) {
        const int64_t t = a % b;
        a = b;
        b = t;
    }
    return a;
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
    const bool one_tok = n_tok == 1; /* every pair reads the token's row: nothing to gather */
    infer_status st = INFER_OK;
    if (!row_g || !row_u || !row_d)
        return infer_error(INFER_ERR_UNSUPPORTED, "expert tensors of types %s/%s/%s: no matmul",
                           ggml_type_traits_get(tg)->name, ggml_type_traits_get(tu)->name,
                           ggml_type_traits_get(td)->name);
    if (n_tok <= 0)
        return INFER_OK;
    const uint32_t adt = kern.types[td].vec_dot_type;
    const struct ggml_type_traits *adtt = ggml_type_traits_get(adt);
    const int nth = pool_threads();

    /* (token, slot) pairs are numbered in expert order: pair p = off[e] + j.
     * The large buffers are carved from one block of matmul_act_alloc's
     * per-thread cache, which keeps it for the next layer: a fresh malloc
     * per layer (~47 MB for a 512-token batch of the qwen3moe bench file)
     * was mmap'd anew each time, and zero-filling its pages on first touch,
     * inside the expert kernels' writes, took ~8% of a prefill (perf). */
    float *logits = malloc(nt * (size_t)E * sizeof(float));
    int32_t *sel = malloc(nk * sizeof(int32_t));
    float *wts = malloc(nk * sizeof(float));
    int64_t *off = calloc((size_t)E + 1, sizeof(int64_t));
    int64_t *fill = calloc((size_t)E, sizeof(int64_t));
    int32_t *ltok = malloc(nk * sizeof(int32_t)); /* pair -> token */
    float *lw = malloc(nk * sizeof(float));       /* pair -> routing weight */
    int32_t *act = malloc((size_t)E * sizeof(int32_t));
    int32_t *asc = malloc((size_t)E * sizeof(int32_t)); /* the same, ascending index */
    /* the block: x converted for gate (and up); for up when it needs its
     * own rows; converted rows of every pair (gate, up); hg, hu, hq; the
     * down items' scratch (its size is known after the routing) */
    size_t ws_len[8] = {nt * row_g,
                        two_act ? nt * row_u : 0,
                        one_tok ? 0 : nk * row_g,
                        two_act && !one_tok ? nk * row_u : 0,
                        nk * (size_t)FG * sizeof(float),
                        nk * (size_t)F * sizeof(float),
                        nk * row_d,
                        0};
    /* the down items: rows of D in units of 16 (x4 layouts interleave up
     * to 16 rows), MOE_ITEMS_PER_THREAD a thread; their scratch holds a
     * chunk of pairs (at most MOE_CHUNK, and no more than an expert can
     * have) times the item's rows */
    const int64_t n_dwant = nth;
    int64_t rd = round_up((D + n_dwant - 1) / n_dwant, 16);
    rd = rd < D ? rd : D;
    const int64_t n_ditems = (D + rd - 1) / rd;
    const size_t ys_item = (size_t)rd * (nt < MOE_CHUNK ? nt : MOE_CHUNK);
    ws_len[7] = (size_t)n_ditems * ys_item * sizeof(float);
    size_t ws_off[8], ws_bytes = 0;
    for (int i = 0; i < 8; i++) {
        ws_off[i] = ws_bytes;
        ws_bytes += (ws_len[i] + 63) & ~(size_t)63;
    }
    const size_t ws_alloc = ws_bytes + 64;
    char *ws_raw = matmul_act_alloc(ws_alloc);
    char *ws = ws_raw ? ws_raw + (64 - (uintptr_t)ws_raw % 64) % 64 : NULL;
    void *xq_g = ws ? ws + ws_off[0] : NULL;
    void *xq_u = !ws ? NULL : two_act ? ws + ws_off[1] : xq_g;
    void *xg = !ws ? NULL : one_tok ? xq_g : ws + ws_off[2]; /* converted rows of every pair */
    void *xu = !ws ? NULL : two_act && !one_tok ? ws + ws_off[3] : two_act ? xq_u : xg;
    float *hg = ws ? (float *)(ws + ws_off[4]) : NULL;
    float *hu = ws ? (float *)(ws + ws_off[5]) : NULL;
    void *hq = ws ? ws + ws_off[6] : NULL;
    float *ys = ws ? (float *)(ws + ws_off[7]) : NULL;
    struct moe_item *items = NULL;
    int64_t *tpair = NULL;
    int32_t *tfill = calloc(nt, sizeof(int32_t)); /* pairs of each token so far */
    if (!logits || !sel || !wts || !off || !fill || !ltok || !lw || !act || !xq_g || !xq_u || !xg || !xu || !hg ||
        !hu || !hq || !ys || !asc || !tfill || !adtt || !kern.types[adt].from_float) {
        st = infer_error(INFER_ERR_NOMEM, "out of memory for the experts of %lld tokens", (long long)n_tok);
        goto done;
    }

    /* the three matrices' types and shapes, once here (an error inside the
     * pool loops could only stop them) */
    {
        const struct matmul_q_job jg = {hg, l->ffn_gate_exps.m.data, tg, xg, D, FG, n_tok};
        const struct matmul_q_job ju = {hu, l->ffn_up_exps.m.data, tu, xu, D, F, n_tok};
        const struct matmul_q_job jd = {ys, l->ffn_down_exps.m.data, td, hq, F, D, n_tok};
        if (matmul_q_rows(&jg, 0, 0) || (!merged && matmul_q_rows(&ju, 0, 0)) || matmul_q_rows(&jd, 0, 0)) {
            st = INFER_ERR_UNSUPPORTED; /* matmul left the message */
            goto done;
        }
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
    /* the experts with pairs, most pairs first (ties: lower index), so the
     * pool hands out the longest items first and the last ones to finish
     * are short (pair numbering and the sums do not depend on this order) */
    int n_act = 0;
    for (int e = 0; e < E; e++)
        if (off[e + 1] > off[e])
            act[n_act++] = e;
    memcpy(asc, act, (size_t)n_act * sizeof(int32_t));
    for (int a = 1; a < n_act; a++) { /* insertion sort: n_act <= n_expert, mostly few */
        const int e = act[a];
        int j = a;
        for (; j > 0 && off[act[j - 1] + 1] - off[act[j - 1]] < off[e + 1] - off[e]; j--)
            act[j] = act[j - 1];
        act[j] = e;
    }

    /* the activations, converted once for all experts, then each pair's row */
    if (matmul_act_quantize(xq_g, tg, x, D, n_tok) || (two_act && matmul_act_quantize(xq_u, tu, x, D, n_tok))) {
        st = INFER_ERR_UNSUPPORTED;
        goto done;
    }
    if (!one_tok)
        for (size_t p = 0; p < nk; p++) {
            memcpy((char *)xg + p * row_g, (const char *)xq_g + (size_t)ltok[p] * row_g, row_g);
            if (two_act)
                memcpy((char *)xu + p * row_u, (const char *)xq_u + (size_t)ltok[p] * row_u, row_u);
        }

    /* up items: rows of F in units of u (a whole number of the down
     * activation's blocks, and of 16 rows), pairs in chunks of at most
     * MOE_CHUNK, rows split (halving) only until there are
     * MOE_ITEMS_PER_THREAD items a thread: a run over a matrix's rows
     * starts with misses the tiles' prefetching has not covered, so in
     * decode fewer, longer runs are cheaper. */
    int64_t n_chunks = 0;
    for (int a = 0; a < n_act; a++) {
        const int64_t n = off[act[a] + 1] - off[act[a]];
        n_chunks += (n + MOE_CHUNK - 1) / MOE_CHUNK;
    }
    const int64_t blk = adtt->block_size, unit = blk / gcd64(blk, 16) * 16;
    int64_t rb = round_up(F, unit);
    while (rb > unit && n_chunks * ((F + rb - 1) / rb) < (int64_t)nth * MOE_ITEMS_PER_THREAD)
        rb = round_up(rb / 2, unit);
    const int64_t n_items = n_chunks * ((F + rb - 1) / rb);
    items = malloc((size_t)n_items * sizeof(*items));
    tpair = malloc(nk * sizeof(*tpair));
    if (!items || !tpair) {
        st = infer_error(INFER_ERR_NOMEM, "out of memory for the experts of %lld tokens", (long long)n_tok);
        goto done;
    }
    int64_t ni = 0;
    for (int a = 0; a < n_act; a++) {
        const int e = act[a];
        const int64_t n = off[e + 1] - off[e], nc = (n + MOE_CHUNK - 1) / MOE_CHUNK;
        for (int64_t ch = 0; ch < nc; ch++) { /* chunks of even size */
            const int64_t p0 = off[e] + n * ch / nc, p1 = off[e] + n * (ch + 1) / nc;
            for (int64_t r0 = 0; r0 < F; r0 += rb)
                items[ni++] = (struct moe_item){e, (int32_t)r0, (int32_t)(r0 + rb < F ? r0 + rb : F), p0, p1};
        }
    }
    /* each token's pairs in ascending expert order (pairs are numbered so) */
    for (size_t p = 0, t; p < nk; p++) {
        t = (size_t)ltok[p];
        tpair[t * (size_t)K + (size_t)tfill[t]++] = (int64_t)p;
    }
    struct moe_run r = {
        .l = l, .D = D, .F = F, .FG = FG, .merged = merged, .one_tok = one_tok, .tg = tg, .tu = tu, .td = td,
        .ltok = ltok, .lw = lw, .xg = xg, .xu = xu, .row_g = row_g, .row_u = row_u, .row_d = row_d,
        .wrow_g = ggml_row_size(tg, D), .hg = hg,
        .hu = hu, .h = merged ? hu : hg, .hq = hq, .out = out, .n_tok = n_tok,
        .qd = kern.types[adt].from_float, .qd_blk = blk, .qd_bytes = adtt->type_size, .items = items,
        .n_items = n_items, .rd = rd, .ys = ys, .ys_item = ys_item, .off = off, .act = asc, .n_act = n_act,
        .tpair = tpair, .K = K,
    };
    atomic_init(&r.err, 0);
    pool_for(n_items, 1, moe_up_items_run, &r);
    if (!atomic_load(&r.err))
        pool_for(n_ditems, 1, moe_down_sum_run, &r);
    if (atomic_load(&r.err)) {
        st = INFER_ERR_UNSUPPORTED; /* matmul left the message */
        goto done;
    }
    if (c->n_ff_shexp > 0)
        st = shared_expert(c, l, x, n_tok, out);
done:
    matmul_act_release(ws_raw, ws_alloc);
    free(logits);
    free(sel);
    free(wts);
    free(off);
    free(fill);
    free(ltok);
    free(lw);
    free(act);
    free(asc);
    free(items);
    free(tpair);
    free(tfill);
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
