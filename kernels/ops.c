/*
 * ops.c - scalar reference f32 ops (see ops.h) and the dispatching entry
 * points that call the active kernel table.
 *
 * The references mirror ggml-cpu's arithmetic: rms_norm's double sum and
 * float scale (ops.cpp), the RoPE cache built by repeated float
 * multiplication (ggml_rope_cache_init / rope_yarn with ext_factor 0 and
 * mscale 1), soft_max's double sum, and the GELU/SiLU formulas of vec.h.
 */
#include "ops.h"

#include <math.h>
#include <stdbool.h>

#include "dispatch.h"
#include "types.h"

/* The references round after every operation (as ggml's C code compiled
 * without contraction): no fused multiply-adds.  GCC's -std=c11 already
 * implies -ffp-contract=off; clang needs the pragma. */
#ifdef __clang__
#pragma STDC FP_CONTRACT OFF
#endif

/* ---------------------------- RMSNorm ---------------------------- */

void rmsnorm_ref(float *out, const float *x, const float *w, int64_t n, float eps)
{
    if (n <= 0)
        return;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(x[i] * x[i]);
    const float mean = (float)(sum / (double)n);
    const float scale = 1.0f / sqrtf(mean + eps);
    if (w) {
        for (int64_t i = 0; i < n; i++)
            out[i] = x[i] * scale * w[i];
    } else {
        for (int64_t i = 0; i < n; i++)
            out[i] = x[i] * scale;
    }
}

void layernorm(float *out, const float *x, const float *w, const float *b, int64_t n, float eps)
{
    if (n <= 0)
        return;
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)x[i];
    const float mean = (float)(sum / (double)n);
    double sum2 = 0.0;
    for (int64_t i = 0; i < n; i++) {
        const float v = x[i] - mean;
        out[i] = v;
        sum2 += (double)(v * v);
    }
    const float scale = 1.0f / sqrtf((float)(sum2 / (double)n) + eps);
    for (int64_t i = 0; i < n; i++) {
        float y = out[i] * scale;
        if (w)
            y *= w[i];
        if (b)
            y += b[i];
        out[i] = y;
    }
}

/* ------------------------------ RoPE ------------------------------ */

static float yarn_corr_dim(int n_rot, int n_ctx_orig, float n_turns, float base)
{
    return (float)n_rot * logf((float)n_ctx_orig / (n_turns * 2.0f * (float)M_PI)) / (2.0f * logf(base));
}

void rope_yarn_corr_dims(int n_rot, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow,
                         float dims[2])
{
    const float start = floorf(yarn_corr_dim(n_rot, n_ctx_orig, beta_fast, freq_base));
    const float end = ceilf(yarn_corr_dim(n_rot, n_ctx_orig, beta_slow, freq_base));
    dims[0] = start > 0.0f ? start : 0.0f;
    dims[1] = end < (float)(n_rot - 1) ? end : (float)(n_rot - 1);
}

void rope_angles(float *cs, const struct rope_params *p, int64_t pos)
{
    const float theta_scale = powf(p->freq_base, -2.0f / (float)p->n_rot);
    float theta = (float)pos;
    for (int i0 = 0; i0 < p->n_rot; i0 += 2) {
        const float ff = p->freq_factors ? p->freq_factors[i0 / 2] : 1.0f;
        const float extrap = theta / ff;
        float t = p->freq_scale * extrap, mscale = p->attn_factor;
        if (p->ext_factor != 0.0f) {
            const float y = (float)(i0 / 2 - p->corr_dims[0]) / fmaxf(0.001f, p->corr_dims[1] - p->corr_dims[0]);
            const float ramp = (1.0f - fminf(1.0f, fmaxf(0.0f, y))) * p->ext_factor;
            t = t * (1.0f - ramp) + extrap * ramp;
            mscale *= 1.0f + 0.1f * logf(1.0f / p->freq_scale);
        }
        cs[i0] = cosf(t) * mscale;
        cs[i0 + 1] = sinf(t) * mscale;
        theta *= theta_scale;
    }
}

/* Pair k rotates elements (ia, ib) of each head by the angle in cs[2k..2k+1]. */
static void rope_apply(float *x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float *cs, bool neox)
{
    if (n_heads <= 0 || head_dim <= 0 || n_rot <= 0 || n_rot > head_dim)
        return;
    for (int64_t i0 = 0; i0 < n_rot; i0 += 2) {
        const float c = cs[i0], s = cs[i0 + 1];
        const int64_t ia = neox ? i0 / 2 : i0;
        const int64_t ib = neox ? i0 / 2 + n_rot / 2 : i0 + 1;
        for (int64_t h = 0; h < n_heads; h++) {
            float *xh = x + h * head_dim;
            const float x0 = xh[ia], x1 = xh[ib];
            xh[ia] = x0 * c - x1 * s;
            xh[ib] = x0 * s + x1 * c;
        }
    }
}

void rope_norm_ref(float *x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float *cs)
{
    rope_apply(x, n_heads, head_dim, n_rot, cs, false);
}

void rope_neox_ref(float *x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float *cs)
{
    rope_apply(x, n_heads, head_dim, n_rot, cs, true);
}

/* ------------------------ softmax, activations ------------------------ */

void softmax_ref(float *x, int64_t n)
{
    if (n <= 0)
        return;
    float max = -INFINITY;
    for (int64_t i = 0; i < n; i++)
        max = fmaxf(max, x[i]);
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++) {
        x[i] = expf(x[i] - max);
        sum += (double)x[i];
    }
    const float inv = (float)(1.0 / sum);
    for (int64_t i = 0; i < n; i++)
        x[i] *= inv;
}

void silu_ref(float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = x[i] / (1.0f + expf(-x[i]));
}

#define GELU_COEF_A 0.044715f
#define SQRT_2_OVER_PI 0.79788456080286535587989211986876f

static inline float gelu_f32(float x)
{
    return 0.5f * x * (1.0f + tanhf(SQRT_2_OVER_PI * x * (1.0f + GELU_COEF_A * x * x)));
}

void gelu_ref(float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = gelu_f32(x[i]);
}

/*
 * ggml-cpu (vec.h) defines GGML_GELU_FP16: ggml_vec_gelu_f32 and
 * ggml_vec_geglu_f32 return 0 for x <= -10, x for x >= 10, and otherwise
 * table[fp16(x)] where table[h] = fp16(gelu_f32(fp32(h))).  Computing the
 * entry directly gives the same bits without the 128 KB table.
 */
void gelu_ggml_ref(float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        const float v = x[i];
        if (v <= -10.0f)
            x[i] = 0.0f;
        else if (v >= 10.0f)
            x[i] = v;
        else
            x[i] = fp16_to_fp32(fp32_to_fp16(gelu_f32(fp16_to_fp32(fp32_to_fp16(v)))));
    }
}

/* ---------------------------- vectors ---------------------------- */

void vec_mul_ref(float *out, const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = a[i] * b[i];
}

void vec_add_ref(float *out, const float *a, const float *b, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        out[i] = a[i] + b[i];
}

void vec_scale_ref(float *x, int64_t n, float s)
{
    for (int64_t i = 0; i < n; i++)
        x[i] *= s;
}

float vec_dot_f32_ref(const float *a, const float *b, int64_t n)
{
    double sum = 0.0;
    for (int64_t i = 0; i < n; i++)
        sum += (double)(a[i] * b[i]);
    return (float)sum;
}

/* ------------------- entry points (active variant) ------------------- */

void rmsnorm(float *out, const float *x, const float *w, int64_t n, float eps)
{
    kern.rmsnorm(out, x, w, n, eps);
}

void rope_norm(float *x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float *cs)
{
    kern.rope_norm(x, n_heads, head_dim, n_rot, cs);
}

void rope_neox(float *x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float *cs)
{
    kern.rope_neox(x, n_heads, head_dim, n_rot, cs);
}

void softmax(float *x, int64_t n) { kern.softmax(x, n); }
void silu(float *x, int64_t n) { kern.silu(x, n); }
void gelu(float *x, int64_t n) { kern.gelu(x, n); }
void gelu_ggml(float *x, int64_t n) { kern.gelu_ggml(x, n); }
void vec_mul(float *out, const float *a, const float *b, int64_t n) { kern.vec_mul(out, a, b, n); }
void vec_add(float *out, const float *a, const float *b, int64_t n) { kern.vec_add(out, a, b, n); }
void vec_scale(float *x, int64_t n, float s) { kern.vec_scale(x, n, s); }
float vec_dot_f32(const float *a, const float *b, int64_t n) { return kern.vec_dot_f32(a, b, n); }
int64_t argmax(const float *x, int64_t n) { return kern.argmax(x, n); }

int64_t argmax_ref(const float *x, int64_t n)
{
    int64_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}
