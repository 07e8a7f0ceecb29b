/*
 * ops.h - f32 element-wise and row ops of the forward pass: RMSNorm, RoPE
 * (llama and NEOX pair orders), softmax, SiLU, GELU and small vector helpers.
 *
 * The plain names (rmsnorm, rope_norm, ...) call through the dispatch table
 * (`kern`, dispatch.h), so SIMD variants replace them transparently; the
 * *_ref functions are the scalar reference, written to reproduce ggml-cpu's
 * float arithmetic (ops.cpp / vec.h) so that results stay close to llama.cpp.
 * None of them allocate or fail; n <= 0 is a no-op.  In-place use (out == x)
 * is allowed wherever an output and an input have the same shape.
 */
#ifndef INFER_KERNELS_OPS_H
#define INFER_KERNELS_OPS_H

#include <stdint.h>

/* out[i] = x[i] / sqrt(mean(x^2) + eps) * w[i]   (w may be NULL: no weight).
 * As ggml: sum of float squares accumulated in double, mean rounded to float,
 * scale = 1/sqrtf(mean + eps), then (x * scale) * w. */
void rmsnorm(float *out, const float *x, const float *w, int64_t n, float eps);
/* LayerNorm (BERT): out = (x - mean) / sqrt(var + eps) * w + b, w and b may
 * be NULL; as ggml's norm then mul and add (means and variance summed in
 * double).  Scalar only: it runs on the few hundred rows of an embedding
 * batch, not in the decoder's hot path. */
void layernorm(float *out, const float *x, const float *w, const float *b, int64_t n, float eps);

/* Rotary position embedding, in two steps: the angles of a position
 * (rope_angles, once per token and layer kind), then the rotation of each
 * head (rope_norm / rope_neox, the dispatched kernels).
 *
 * rope_angles: for the n_rot/2 pairs k, as ggml_rope_cache_init and
 * rope_yarn compute them, in float:
 *     theta_k = pos * freq_base^(-2k/n_rot) / freq_factors[k]
 *               (theta starts at (float)pos and is multiplied by
 *               powf(freq_base, -2/n_rot) once per pair; factors are 1 when NULL:
 *               Llama 3's rope_freqs, Phi-3's LongRoPE short/long factors)
 *     t_k     = freq_scale * theta_k                       (linear / YaRN scaling)
 *     YaRN (ext_factor != 0): r = (1 - clamp((k - lo) / max(0.001, hi - lo), 0, 1)) * ext_factor,
 *               t_k = t_k (1 - r) + theta_k r, and mscale = attn_factor * (1 + 0.1 ln(1/freq_scale))
 *     cs[2k] = cos(t_k) * mscale, cs[2k+1] = sin(t_k) * mscale   (mscale = attn_factor without YaRN)
 * with (lo, hi) = corr_dims from rope_yarn_corr_dims.
 *
 * rope_norm / rope_neox: in place on n_heads contiguous heads of head_dim
 * floats; the first n_rot dims of each head rotate (n_rot even, <= head_dim),
 * the rest pass through:
 *     (x0, x1) = (x0 c - x1 s, x0 s + x1 c)      c, s = cs[2k], cs[2k+1]
 *   rope_norm: pairs (2k, 2k+1)            (llama / GGML_ROPE_TYPE_NORM)
 *   rope_neox: pairs (k, k + n_rot/2)      (qwen2, gemma3, phi3 / GGML_ROPE_TYPE_NEOX) */
struct rope_params {
    int n_rot;                 /* rotated dims per head, even */
    float freq_base;           /* rope.freq_base */
    float freq_scale;          /* 1 / rope.scaling.factor (linear, YaRN), else 1 */
    const float *freq_factors; /* n_rot/2 divisors of theta_k, or NULL */
    float ext_factor;          /* YaRN extrapolation mix, 0 = off */
    float attn_factor;         /* magnitude of cos and sin */
    float corr_dims[2];        /* YaRN ramp ends (pair indices) */
};
/* ggml_rope_yarn_corr_dims: the pairs whose wavelength crosses beta_fast and
 * beta_slow rotations over n_ctx_orig positions, floored/ceiled and clamped
 * to [0, n_rot - 1]. */
void rope_yarn_corr_dims(int n_rot, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow,
                         float dims[2]);
/* cs (n_rot floats) = the angles of position pos (see above). */
void rope_angles(float *cs, const struct rope_params *p, int64_t pos);
void rope_norm(float *x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float *cs);
void rope_neox(float *x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float *cs);

/* x = exp(x - max) / sum, in place (sum accumulated in double, as ggml). */
void softmax(float *x, int64_t n);
/* x = x / (1 + exp(-x)), in place. */
void silu(float *x, int64_t n);
/* GELU, tanh approximation, evaluated exactly in float:
 *     x = 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
void gelu(float *x, int64_t n);
/* GELU as ggml-cpu evaluates it by default (GGML_GELU_FP16): x <= -10 -> 0,
 * x >= 10 -> x, otherwise the input is rounded to fp16, the formula above is
 * applied, and the result is rounded to fp16 (ggml reads it from a 64K-entry
 * fp16 table built that way).  Differs from gelu() by up to ~2^-11 relative;
 * use it when matching llama.cpp's logits matters more than accuracy. */
void gelu_ggml(float *x, int64_t n);

/* out = a * b, out = a + b (element-wise), x *= s, and the dot product of
 * two float vectors (products in float, sum in double). */
void vec_mul(float *out, const float *a, const float *b, int64_t n);
void vec_add(float *out, const float *a, const float *b, int64_t n);
void vec_scale(float *x, int64_t n, float s);
float vec_dot_f32(const float *a, const float *b, int64_t n);
/* Index of the first largest element (greedy sampling): NaNs are passed
 * over, except that a NaN x[0] gives 0; 0 when n <= 0. */
int64_t argmax(const float *x, int64_t n);

/* Scalar references (the table's "ref" entries). */
void rmsnorm_ref(float *out, const float *x, const float *w, int64_t n, float eps);
void rope_norm_ref(float *x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float *cs);
void rope_neox_ref(float *x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float *cs);
void softmax_ref(float *x, int64_t n);
void silu_ref(float *x, int64_t n);
void gelu_ref(float *x, int64_t n);
void gelu_ggml_ref(float *x, int64_t n);
void vec_mul_ref(float *out, const float *a, const float *b, int64_t n);
void vec_add_ref(float *out, const float *a, const float *b, int64_t n);
void vec_scale_ref(float *x, int64_t n, float s);
float vec_dot_f32_ref(const float *a, const float *b, int64_t n);
int64_t argmax_ref(const float *x, int64_t n);

#endif
