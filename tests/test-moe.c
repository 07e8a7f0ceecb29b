/*
 * test-moe.c - the mixture-of-experts FFN (src/model/moe.c).
 *
 * The grouped path (activations converted once, tokens grouped by expert,
 * each expert's matmuls over all its tokens, weighted shares added into the
 * output rows) must give exactly the bits of the token-at-a-time reference
 * path (moe_ffn_ref), whatever the expert types, with an expert that gets no
 * token and one that gets every token, with a merged gate_up tensor, and
 * with a shared expert; and both must be the math of llama.cpp's
 * build_moe_ffn, checked against a double-precision evaluation of the
 * dequantized weights.  kernels-variants.sh runs this program once per
 * kernel variant the CPU has (INFER_KERNELS), so every SIMD tile the
 * grouped path reaches is checked against the reference math.
 */
#include "test-common.h"

#include <math.h>
#include <string.h>

#include "../kernels/dispatch.h"
#include "../kernels/matmul.h"
#include "../kernels/pool.h"
#include "../kernels/quants.h"
#include "../kernels/repack.h"
#include "../kernels/types.h"
#include "model/moe.h"

enum { D = 256, F = 256, E = 6, K = 2, S = 256, NTOK = 37 };

static uint64_t rng_state = 12345;
static float frand(void) /* uniform in [-1, 1) */
{
    rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng_state >> 40) & 0xffffff) / (float)(1 << 23) - 1.0f;
}

/* A row of random bytes in blocks of bsize bytes, each block's f16 scale
 * (d) at d_off. */
static void random_blocks(uint8_t *dst, size_t row, size_t bsize, size_t d_off, float d)
{
    for (size_t b = 0; b < row; b++) {
        rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull;
        dst[b] = (uint8_t)(rng_state >> 56);
    }
    const uint16_t dh = fp32_to_fp16(d);
    for (size_t b = 0; b < row; b += bsize)
        memcpy(dst + b + d_off, &dh, 2);
}

/* n_rows rows of D floats (scaled by g) encoded in `type` (F32, Q8_0, Q4_0:
 * the reference quantizers; Q4_K: random blocks with small scales). */
static void *make_rows(uint32_t type, int64_t n_rows, int64_t n_in, float g)
{
    const size_t row = ggml_row_size(type, n_in);
    uint8_t *w = malloc(row * (size_t)n_rows);
    float *f = malloc((size_t)n_in * sizeof(float));
    assert_non_null(w);
    assert_non_null(f);
    for (int64_t r = 0; r < n_rows; r++) {
        uint8_t *dst = w + (size_t)r * row;
        for (int64_t i = 0; i < n_in; i++)
            f[i] = frand() * g;
        if (type == GGML_TYPE_F32)
            memcpy(dst, f, (size_t)n_in * sizeof(float));
        else if (type == GGML_TYPE_Q8_0)
            quantize_row_q8_0_ref(f, dst, n_in);
        else if (type == GGML_TYPE_Q4_0)
            quantize_row_q4_0_ref(f, dst, n_in);
        else if (type == GGML_TYPE_Q6_K) /* random ql, qh, scales; d (f16) last in each 210 bytes */
            random_blocks(dst, row, 210, 208, 0.0005f * g);
        else if (type == GGML_TYPE_IQ4_NL) /* random nibbles; d (f16) first in each 18 bytes */
            random_blocks(dst, row, 18, 0, 0.001f * g);
        else if (type == GGML_TYPE_Q3_K) /* random hmask, qs, scales; d (f16) last in each 110 bytes */
            random_blocks(dst, row, 110, 108, 0.001f * g);
        else { /* Q4_K: d, dmin (f16), 12 scale bytes, 128 nibble bytes per 256 */
            assert_int_equal(type, GGML_TYPE_Q4_K);
            random_blocks(dst, row, 144, 0, 0.02f * g);
            const uint16_t dm = fp32_to_fp16(0.01f * g);
            for (size_t b = 0; b < row; b += 144)
                memcpy(dst + b + 2, &dm, 2);
        }
    }
    free(f);
    return w;
}

static struct mat mat_of(const void *data, uint32_t type, int64_t n_in, int64_t n_out)
{
    return (struct mat){.data = data, .type = type, .n_in = n_in, .n_out = n_out};
}

struct moe_case {
    struct model_config c;
    struct layer_weights l;
    void *bufs[12];
    int n_bufs;
};

static void *keep(struct moe_case *mc, void *p)
{
    mc->bufs[mc->n_bufs++] = p;
    return p;
}

/* Router: x[0] is set to 1 in every token (see make_x), and row 0 reads it
 * with +40 (expert 0 wins every token), row E-1 with -40 (never chosen);
 * the rest is random.  Experts of types tg, tu, td; merged: one gate_up
 * buffer, gate rows first in each expert. */
static void case_init(struct moe_case *mc, uint32_t tg, uint32_t tu, uint32_t td, bool merged, int shexp,
                      bool norm_w)
{
    memset(mc, 0, sizeof(*mc));
    struct model_config *c = &mc->c;
    c->n_embd = D;
    c->n_expert = E;
    c->n_expert_used = K;
    c->n_ff_exp = F;
    c->moe_norm_w = norm_w;
    c->n_ff_shexp = shexp ? S : 0;
    c->shexp_gated = shexp == 2;
    struct layer_weights *l = &mc->l;
    float *router = keep(mc, make_rows(GGML_TYPE_F32, E, D, 0.2f));
    router[0] = 40.0f;
    router[(E - 1) * D] = -40.0f;
    l->ffn_gate_inp = mat_of(router, GGML_TYPE_F32, D, E);
    const size_t rg = ggml_row_size(tg, D), ru = ggml_row_size(tu, D);
    if (merged) {
        assert_int_equal(tg, tu);
        uint8_t *gu = keep(mc, make_rows(tg, (int64_t)E * 2 * F, D, 0.1f));
        l->gate_up_merged = true;
        l->ffn_gate_exps = (struct mat_exps){mat_of(gu, tg, D, F), rg * 2 * F};
        l->ffn_up_exps = (struct mat_exps){mat_of(gu + rg * F, tu, D, F), rg * 2 * F};
    } else {
        l->ffn_gate_exps = (struct mat_exps){mat_of(keep(mc, make_rows(tg, (int64_t)E * F, D, 0.1f)), tg, D, F),
                                             rg * F};
        l->ffn_up_exps = (struct mat_exps){mat_of(keep(mc, make_rows(tu, (int64_t)E * F, D, 0.1f)), tu, D, F),
                                           ru * F};
    }
    l->ffn_down_exps = (struct mat_exps){mat_of(keep(mc, make_rows(td, (int64_t)E * D, F, 0.1f)), td, F, D),
                                         ggml_row_size(td, F) * D};
    if (shexp) {
        l->ffn_gate_shexp = mat_of(keep(mc, make_rows(GGML_TYPE_Q8_0, S, D, 0.1f)), GGML_TYPE_Q8_0, D, S);
        l->ffn_up_shexp = mat_of(keep(mc, make_rows(GGML_TYPE_Q8_0, S, D, 0.1f)), GGML_TYPE_Q8_0, D, S);
        l->ffn_down_shexp = mat_of(keep(mc, make_rows(GGML_TYPE_Q8_0, D, S, 0.1f)), GGML_TYPE_Q8_0, S, D);
        l->ffn_gate_inp_shexp = mat_of(keep(mc, make_rows(GGML_TYPE_F32, 1, D, 0.2f)), GGML_TYPE_F32, D, 1);
    }
}

static void case_free(struct moe_case *mc)
{
    for (int i = 0; i < mc->n_bufs; i++)
        free(mc->bufs[i]);
}

static float *make_x(int64_t n)
{
    float *x = malloc((size_t)n * D * sizeof(float));
    assert_non_null(x);
    for (int64_t i = 0; i < n * D; i++)
        x[i] = frand();
    for (int64_t t = 0; t < n; t++)
        x[t * D] = 1.0f;
    return x;
}

/* dequantized row r of a matrix */
static void deq(const struct mat *m, int64_t r, float *out)
{
    const uint8_t *p = (const uint8_t *)m->data + (size_t)r * ggml_row_size(m->type, m->n_in);
    assert_int_equal(dequantize_row(m->type, p, out, m->n_in), 0);
}

static double dot_row(const struct mat *m, int64_t r, const float *x, float *tmp)
{
    deq(m, r, tmp);
    double s = 0;
    for (int64_t i = 0; i < m->n_in; i++)
        s += (double)tmp[i] * x[i];
    return s;
}

static double silu_d(double v) { return v / (1.0 + exp(-v)); }

/* build_moe_ffn in double from the dequantized weights, one token. */
static void moe_double(const struct moe_case *mc, const float *x, double *out)
{
    const struct model_config *c = &mc->c;
    const struct layer_weights *l = &mc->l;
    float tmp[1024], h[1024];
    double p[E], sum = 0, mx = -1e300;
    for (int e = 0; e < E; e++) {
        p[e] = dot_row(&l->ffn_gate_inp, e, x, tmp);
        mx = p[e] > mx ? p[e] : mx;
    }
    for (int e = 0; e < E; e++)
        sum += p[e] = exp(p[e] - mx);
    int sel[K];
    double w[K], wsum = 0;
    bool used[E] = {false};
    for (int k = 0; k < K; k++) {
        int b = -1;
        for (int e = 0; e < E; e++)
            if (!used[e] && (b < 0 || p[e] > p[b]))
                b = e;
        used[b] = true;
        sel[k] = b;
        wsum += w[k] = p[b] / sum;
    }
    memset(out, 0, D * sizeof(double));
    for (int k = 0; k < K; k++) {
        const struct mat wg = mat_expert(&l->ffn_gate_exps, sel[k]), wu = mat_expert(&l->ffn_up_exps, sel[k]);
        const struct mat wd = mat_expert(&l->ffn_down_exps, sel[k]);
        for (int i = 0; i < F; i++)
            h[i] = (float)(silu_d(dot_row(&wg, i, x, tmp)) * dot_row(&wu, i, x, tmp));
        for (int o = 0; o < D; o++)
            out[o] += (c->moe_norm_w ? w[k] / wsum : w[k]) * dot_row(&wd, o, h, tmp);
    }
    if (c->n_ff_shexp) {
        for (int i = 0; i < S; i++)
            h[i] = (float)(silu_d(dot_row(&l->ffn_gate_shexp, i, x, tmp)) * dot_row(&l->ffn_up_shexp, i, x, tmp));
        const double g = c->shexp_gated ? 1.0 / (1.0 + exp(-dot_row(&l->ffn_gate_inp_shexp, 0, x, tmp))) : 1.0;
        for (int o = 0; o < D; o++)
            out[o] += g * dot_row(&l->ffn_down_shexp, o, h, tmp);
    }
}

/* grouped == reference bit for bit; both close to the double evaluation;
 * expert 0 got every token, expert E-1 none. */
static void check_case(struct moe_case *mc, const char *what, double tol)
{
    float *x = make_x(NTOK);
    float *y = malloc(NTOK * D * sizeof(float)), *yr = malloc(NTOK * D * sizeof(float));
    float *y1 = malloc(D * sizeof(float));
    uint64_t counts[E] = {0};
    assert_int_equal(moe_ffn(&mc->c, &mc->l, x, NTOK, y, counts), INFER_OK);
    assert_int_equal(moe_ffn_ref(&mc->c, &mc->l, x, NTOK, yr), INFER_OK);
    if (memcmp(y, yr, NTOK * D * sizeof(float)) != 0)
        fail_msg("%s: the grouped path differs from the token-at-a-time reference", what);
    /* one token alone: the bits it has in the batch */
    assert_int_equal(moe_ffn(&mc->c, &mc->l, x + 17 * D, 1, y1, NULL), INFER_OK);
    assert_memory_equal(y1, y + 17 * D, D * sizeof(float));
    assert_int_equal(counts[0], NTOK);
    assert_int_equal(counts[E - 1], 0);
    uint64_t total = 0;
    for (int e = 0; e < E; e++)
        total += counts[e];
    assert_int_equal(total, (uint64_t)NTOK * K);
    double num = 0, den = 0;
    double ref[D];
    for (int t = 0; t < NTOK; t += 6) {
        moe_double(mc, x + t * D, ref);
        for (int o = 0; o < D; o++) {
            num += (y[t * D + o] - ref[o]) * (y[t * D + o] - ref[o]);
            den += ref[o] * ref[o];
        }
    }
    const double rel = sqrt(num / den);
    print_message("%-44s %-8s relative L2 error vs double %.2e\n", what, kern.name, rel);
    if (!(rel < tol))
        fail_msg("%s: relative error %.3g against the double evaluation (tolerance %.3g)", what, rel, tol);
    free(x);
    free(y);
    free(yr);
    free(y1);
}

static void test_types(void **state)
{
    (void)state;
    static const struct {
        uint32_t g, u, d;
        double tol;
        const char *name;
    } cases[] = {
        {GGML_TYPE_F32, GGML_TYPE_F32, GGML_TYPE_F32, 1e-5, "f32 experts"},
        {GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, 0.02, "q8_0 experts"},
        {GGML_TYPE_Q4_K, GGML_TYPE_Q4_K, GGML_TYPE_Q8_0, 0.03, "q4_K gate/up, q8_0 down"},
        {GGML_TYPE_Q4_K, GGML_TYPE_Q4_0, GGML_TYPE_Q4_0, 0.03, "q4_K gate, q4_0 up/down (two act types)"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        for (int norm = 0; norm < 2; norm++) {
            struct moe_case mc;
            case_init(&mc, cases[i].g, cases[i].u, cases[i].d, false, 0, norm);
            char what[96];
            snprintf(what, sizeof(what), "%s%s", cases[i].name, norm ? ", renormalised" : "");
            check_case(&mc, what, cases[i].tol);
            case_free(&mc);
        }
    }
}

/* A merged ffn_gate_up_exps (one pass over 2F rows) gives the bits of the
 * same rows as two tensors. */
static void test_merged(void **state)
{
    (void)state;
    struct moe_case mc;
    case_init(&mc, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, true, 0, true);
    check_case(&mc, "merged gate_up q8_0", 0.02);
    float *x = make_x(NTOK);
    float *ym = malloc(NTOK * D * sizeof(float)), *ys = malloc(NTOK * D * sizeof(float));
    assert_int_equal(moe_ffn(&mc.c, &mc.l, x, NTOK, ym, NULL), INFER_OK);
    mc.l.gate_up_merged = false; /* the same bytes read as two strided tensors */
    assert_int_equal(moe_ffn(&mc.c, &mc.l, x, NTOK, ys, NULL), INFER_OK);
    assert_memory_equal(ym, ys, NTOK * D * sizeof(float));
    free(x);
    free(ym);
    free(ys);
    case_free(&mc);
}

static void test_shared_expert(void **state)
{
    (void)state;
    for (int kind = 1; kind <= 2; kind++) {
        struct moe_case mc;
        case_init(&mc, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, false, kind, kind == 1);
        check_case(&mc, kind == 2 ? "sigmoid-gated shared expert (qwen2moe)" : "shared expert (granitemoe)", 0.02);
        case_free(&mc);
    }
}

/* Ties go to the lower index; renormalised weights sum to 1. */
static void test_route(void **state)
{
    (void)state;
    struct model_config c = {.n_expert = 8, .n_expert_used = 3};
    float logits[8] = {0.5f, 1.0f, 1.0f, 0.0f, 1.0f, -2.0f, 1.0f, 0.5f};
    int32_t sel[3];
    float w[3];
    moe_route(&c, logits, sel, w);
    assert_int_equal(sel[0], 1);
    assert_int_equal(sel[1], 2);
    assert_int_equal(sel[2], 4);
    assert_true(w[0] == w[1] && w[1] == w[2] && w[0] < 0.5f);
    c.moe_norm_w = true;
    moe_route(&c, logits, sel, w);
    assert_true(fabsf(w[0] + w[1] + w[2] - 1.0f) < 1e-6f);
    float flat[8] = {0};
    moe_route(&c, flat, sel, w);
    assert_int_equal(sel[0], 0);
    assert_int_equal(sel[1], 1);
    assert_int_equal(sel[2], 2);
}

/*
 * The fused loops' item plan at odd sizes: n_embd d, n_ff_exp f (not a
 * power of two: the last row item is shorter), n_expert e of which k used,
 * ntok tokens (more than MOE_CHUNK, 256: the expert that takes every token
 * is split into chunks of pairs; enough tokens per expert for the
 * many-token kernels), on one and on two threads (other item splits: more
 * row blocks when there are few experts with tokens).  Every result must be
 * the reference's bits, and a token alone those it has in the batch.
 */
/* The x4 layout of `type` the loader would use: the table's, else its
 * default one (0: none). */
static uint32_t layout_of(uint32_t type)
{
    return kern.types[type].repack_type ? kern.types[type].repack_type : repack_x4_of(type);
}

/* A 3-D expert tensor of n_expert * rows_e rows in the x4 layout, as the
 * loader repacks it (repack_cache.c: one matrix of all the experts' rows),
 * in a new buffer; NULL when `type` has no x4 layout. */
static void *x4_of(const void *w, uint32_t type, int64_t n_in, int64_t rows)
{
    if (!layout_of(type))
        return NULL;
    const size_t bytes = ggml_row_size(type, n_in) * (size_t)rows;
    void *dst = malloc(bytes);
    assert_non_null(dst);
    repack_x4(layout_of(type), w, dst, n_in, rows);
    return dst;
}

/* The expert FFN with the expert tensors repacked (x4, whichever of them
 * has the layout) gives the bits yr of the same weights as stored: tokens
 * [0, ntok) on 1 and 2 threads, and some tokens alone. */
static void check_x4(const struct model_config *c, const struct layer_weights *l0, const void *gu, const void *dn,
                     const float *x, int64_t ntok, const float *yr, const char *what)
{
    const int64_t d = c->n_embd, f = c->n_ff_exp, e = c->n_expert;
    struct layer_weights l = *l0;
    const uint32_t tgu = l.ffn_gate_exps.m.type, td = l.ffn_down_exps.m.type;
    uint32_t xgu = layout_of(tgu), xd = layout_of(td);
    xgu = xgu && kern.types[xgu].gemm ? xgu : 0; /* this table's x4 tiles (the reference ones where it has none) */
    xd = xd && kern.types[xd].gemm ? xd : 0;
    if (!xgu && !xd)
        return;
    const size_t rg = ggml_row_size(tgu, d);
    /* gate and up: one merged tensor (2f rows an expert), or two of f rows */
    uint8_t *gu4 = xgu ? x4_of(gu, tgu, d, (int64_t)e * 2 * f) : NULL;
    uint8_t *dn4 = xd ? x4_of(dn, td, f, (int64_t)e * d) : NULL;
    if (gu4 && l.gate_up_merged) {
        l.ffn_gate_exps.m.data = gu4;
        l.ffn_up_exps.m.data = gu4 + rg * (size_t)f;
    } else if (gu4) { /* the gate tensor, then the up tensor, each repacked alone */
        free(gu4);
        gu4 = malloc(rg * (size_t)(2 * f * e));
        assert_non_null(gu4);
        repack_x4(xgu, gu, gu4, d, f * e);
        repack_x4(xgu, (const uint8_t *)gu + rg * (size_t)(f * e), gu4 + rg * (size_t)(f * e), d, f * e);
        l.ffn_gate_exps.m.data = gu4;
        l.ffn_up_exps.m.data = gu4 + rg * (size_t)(f * e);
    }
    if (gu4)
        l.ffn_gate_exps.m.type = l.ffn_up_exps.m.type = xgu;
    if (dn4) {
        l.ffn_down_exps.m.data = dn4;
        l.ffn_down_exps.m.type = xd;
    }
    float *y = malloc((size_t)(ntok * d) * sizeof(float));
    assert_non_null(y);
    const int before = pool_max_threads();
    for (int th = 1; th <= 2; th++) {
        pool_set_threads(th);
        assert_int_equal(moe_ffn(c, &l, x, ntok, y, NULL), INFER_OK);
        if (memcmp(y, yr, (size_t)(ntok * d) * sizeof(float)) != 0)
            fail_msg("%s, experts repacked: %d threads differ from the reference", what, th);
        for (int64_t t = 0; t < ntok; t += ntok / 3) {
            assert_int_equal(moe_ffn(c, &l, x + t * d, 1, y, NULL), INFER_OK);
            if (memcmp(y, yr + t * d, (size_t)d * sizeof(float)) != 0)
                fail_msg("%s, experts repacked: token %lld alone on %d threads differs", what, (long long)t, th);
        }
    }
    pool_set_threads(before);
    print_message("%-60s %-8s repacked experts (%s%s%s): bit-identical\n", what, kern.name,
                  gu4 ? ggml_type_traits_get(xgu)->name : "", gu4 && dn4 ? ", " : "",
                  dn4 ? ggml_type_traits_get(xd)->name : "");
    free(y);
    free(gu4);
    free(dn4);
}

static void fused_case(uint32_t tgu, uint32_t td, int64_t d, int64_t f, int e, int k, int64_t ntok, bool merged)
{
    struct model_config c = {.n_embd = d, .n_expert = e, .n_expert_used = k, .n_ff_exp = f, .moe_norm_w = true};
    struct layer_weights l;
    memset(&l, 0, sizeof(l));
    /* expert 0 takes every token and expert e-1 none, by margins (2 against
     * logits within ~0.1 of 0) that still leave the weights comparable, so
     * the order of a token's sum shows in its bits */
    float *router = make_rows(GGML_TYPE_F32, e, d, 0.02f);
    router[0] = 2.0f;
    router[(size_t)(e - 1) * (size_t)d] = -2.0f;
    l.ffn_gate_inp = mat_of(router, GGML_TYPE_F32, d, e);
    const size_t rg = ggml_row_size(tgu, d);
    uint8_t *gu = make_rows(tgu, (int64_t)e * 2 * f, d, 0.1f);
    l.gate_up_merged = merged;
    l.ffn_gate_exps = (struct mat_exps){mat_of(gu, tgu, d, f), merged ? rg * 2 * (size_t)f : rg * (size_t)f};
    l.ffn_up_exps = (struct mat_exps){mat_of(merged ? gu + rg * (size_t)f : gu + rg * (size_t)f * (size_t)e, tgu, d,
                                             f),
                                      merged ? rg * 2 * (size_t)f : rg * (size_t)f};
    void *dn = make_rows(td, (int64_t)e * d, f, 0.1f);
    l.ffn_down_exps = (struct mat_exps){mat_of(dn, td, f, d), ggml_row_size(td, f) * (size_t)d};
    float *x = malloc((size_t)(ntok * d) * sizeof(float));
    float *y = malloc((size_t)(ntok * d) * sizeof(float)), *yr = malloc((size_t)(ntok * d) * sizeof(float));
    float *y2 = malloc((size_t)(ntok * d) * sizeof(float)), *y1 = malloc((size_t)d * sizeof(float));
    uint64_t *counts = calloc((size_t)e, sizeof(uint64_t));
    assert_non_null(x);
    assert_non_null(y);
    assert_non_null(yr);
    assert_non_null(y2);
    assert_non_null(y1);
    assert_non_null(counts);
    for (int64_t i = 0; i < ntok * d; i++)
        x[i] = frand();
    for (int64_t t = 0; t < ntok; t++)
        x[t * d] = 1.0f;
    const int before = pool_max_threads();
    assert_int_equal(moe_ffn_ref(&c, &l, x, ntok, yr), INFER_OK);
    pool_set_threads(1);
    assert_int_equal(moe_ffn(&c, &l, x, ntok, y, counts), INFER_OK);
    pool_set_threads(2);
    assert_int_equal(moe_ffn(&c, &l, x, ntok, y2, NULL), INFER_OK);
    char what[128];
    snprintf(what, sizeof(what), "%s/%s d %lld f %lld, %d of %d experts, %lld tokens%s", ggml_type_traits_get(tgu)->name,
             ggml_type_traits_get(td)->name, (long long)d, (long long)f, k, e, (long long)ntok, merged ? ", merged" : "");
    if (memcmp(y, yr, (size_t)(ntok * d) * sizeof(float)) != 0)
        fail_msg("%s: one thread differs from the reference", what);
    if (memcmp(y2, yr, (size_t)(ntok * d) * sizeof(float)) != 0)
        fail_msg("%s: two threads differ from the reference", what);
    for (int64_t t = 0; t < ntok; t += ntok / 3) { /* decode: one token, whole-matrix items, 1 and 2 threads */
        for (int th = 1; th <= 2; th++) {
            pool_set_threads(th);
            assert_int_equal(moe_ffn(&c, &l, x + t * d, 1, y1, NULL), INFER_OK);
            if (memcmp(y1, yr + t * d, (size_t)d * sizeof(float)) != 0)
                fail_msg("%s: token %lld alone on %d threads differs from the batch", what, (long long)t, th);
        }
    }
    pool_set_threads(before);
    assert_int_equal(counts[0], (uint64_t)ntok);
    assert_int_equal(counts[e - 1], 0);
    print_message("%-60s %-8s bit-identical to the reference\n", what, kern.name);
    check_x4(&c, &l, gu, dn, x, ntok, yr, what);
    free(router);
    free(gu);
    free(dn);
    free(x);
    free(y);
    free(yr);
    free(y2);
    free(y1);
    free(counts);
}

static void test_fused_shapes(void **state)
{
    (void)state;
    fused_case(GGML_TYPE_Q8_0, GGML_TYPE_Q8_0, 160, 352, 7, 3, 300, false);  /* row items of 32s */
    fused_case(GGML_TYPE_Q4_K, GGML_TYPE_Q4_K, 256, 768, 16, 2, 300, false); /* Q8_K blocks: items of 256s */
    fused_case(GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, 256, 768, 3, 2, 40, true);    /* few experts: split rows */
    fused_case(GGML_TYPE_F32, GGML_TYPE_F32, 48, 40, 5, 2, 33, false);       /* float: items of 16 rows */
    fused_case(GGML_TYPE_F32, GGML_TYPE_F32, 56, 40, 5, 3, 33, false);       /* a sum's tail: d % 16 == 8 */
    fused_case(GGML_TYPE_Q4_K, GGML_TYPE_Q4_K, 256, 512, 4, 2, 70, true);    /* x4: merged, down of 256 */
    fused_case(GGML_TYPE_Q4_0, GGML_TYPE_Q4_0, 160, 96, 5, 2, 40, false);   /* x4 Q4_0: tails of 5 blocks */
    fused_case(GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_NL, 160, 96, 5, 2, 40, false); /* x4 IQ4_NL: the same */
    fused_case(GGML_TYPE_Q3_K, GGML_TYPE_Q6_K, 256, 512, 4, 2, 70, true);    /* x4 Q3_K (avx2's), as in Q3_K_M */
}

int main(void)
{
    char err[256];
    if (kernels_init(err, sizeof(err)) != 0) {
        fprintf(stderr, "kernels: %s\n", err);
        return 1;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_route),
        cmocka_unit_test(test_types),
        cmocka_unit_test(test_merged),
        cmocka_unit_test(test_shared_expert),
        cmocka_unit_test(test_fused_shapes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
