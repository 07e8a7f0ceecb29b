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

/* Rotary position embedding, in place, on n_heads contiguous heads of
 * head_dim floats at position pos.  The first n_rot dims of each head rotate
 * (n_rot is clamped to head_dim and rounded down to even), the rest pass
 * through.  Pair k (k = 0 .. n_rot/2-1) turns by
 *     theta_k = freq_scale * pos * freq_base^(-2k/n_rot),
 * computed as ggml does: theta starts at (float)pos and is multiplied by
 * powf(freq_base, -2/n_rot) once per pair, in float.
 *   rope_norm: pairs (2k, 2k+1)            (llama / GGML_ROPE_TYPE_NORM)
 *   rope_neox: pairs (k, k + n_rot/2)      (qwen2, gemma3 / GGML_ROPE_TYPE_NEOX) */
void rope_norm(float *x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos, float freq_base,
               float freq_scale);
void rope_neox(float *x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos, float freq_base,
               float freq_scale);

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
void rope_norm_ref(float *x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos, float freq_base,
                   float freq_scale);
void rope_neox_ref(float *x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos, float freq_base,
                   float freq_scale);
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
