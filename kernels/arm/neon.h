/*
 * neon.h - the aarch64 kernel variants and what they share.
 *
 * Three variants fill the dispatch table (dispatch.h) on aarch64:
 *   "neon"     baseline ARMv8-A Advanced SIMD (Raspberry Pi 4, Cortex-A72):
 *              int8 dot products with SMULL/SMLAL + SADALP;
 *   "dotprod"  ARMv8.2-A with SDOT (Raspberry Pi 5, Cortex-A76), compiled
 *              with its own target flags in quants_dotprod.c and chosen only
 *              when getauxval(AT_HWCAP) reports ASIMDDP;
 *   "i8mm"     dotprod plus SMMLA gemm tiles (quants_i8mm.c) for CPUs that
 *              also report I8MM (Neoverse V1/N2, Cortex-A710 and later).
 * The integer dots and gemm tiles of neon and dotprod are one source,
 * quants_neon_body.h, included once per variant with its own int8 dot
 * primitives; the kernels that need no dot-product instruction (activation
 * quantizers, F16/BF16/F32 dots in quants_neon.c, f32 ops in ops_neon.c)
 * are shared by all three tables.  Every gemm tile gives exactly the bits of
 * its table's vec_dot (dispatch.h).
 *
 * Every kernel keeps the contract of its scalar reference in quants.h.  The
 * quantized dots compute each block's integer sum exactly and then do the
 * reference's float operations in the reference's order, so they return the
 * very bits of the reference; the quantizers are bit-exact too.  The float
 * dots (F32/F16/BF16) round each product to float and sum in double, as the
 * reference, in another order: the double sums differ by ~1e-16 of
 * sum |w a|, so the float results agree but for a last-bit rounding now and
 * then.
 */
#ifndef INFER_KERNELS_ARM_NEON_H
#define INFER_KERNELS_ARM_NEON_H

#include <stdint.h>

#include "../dispatch.h"

/* Fill t: the reference table with the variant's kernels on top. */
void kernels_fill_neon(struct kernel_table *t);
void kernels_fill_dotprod(struct kernel_table *t);
void kernels_fill_i8mm(struct kernel_table *t); /* dotprod + SMMLA gemm tiles (quants_i8mm.c) */
/* The reference table with the kernels all variants share (below). */
void kernels_fill_neon_common(struct kernel_table *t);
/* The f32 ops (ops_neon.c) and the attention (attention_neon.c), called by
 * kernels_fill_neon_common. */
void kernels_fill_ops_neon(struct kernel_table *t);
void kernels_fill_attention_neon(struct kernel_table *t);

/* Shared by all variants (baseline NEON instructions only). */
void quantize_row_q8_0_neon(const float *src, void *dst, int64_t n);
void quantize_row_q8_1_neon(const float *src, void *dst, int64_t n);
void quantize_row_q8_K_neon(const float *src, void *dst, int64_t n);
float vec_dot_f32_f32_neon(int64_t n, const void *w, const void *a);
float vec_dot_f16_f16_neon(int64_t n, const void *w, const void *a);
float vec_dot_bf16_bf16_neon(int64_t n, const void *w, const void *a);
void dequantize_row_f16_neon(const void *src, float *dst, int64_t n);
void quantize_row_f16_neon(const float *src, void *dst, int64_t n);

#endif
