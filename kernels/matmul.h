/*
 * matmul.h - the one entry point the forward pass uses for every weight
 * matrix, plus row dequantization for embedding lookups.
 *
 * A weight matrix is stored as in GGUF: ne[0] = n_in (contiguous), ne[1] =
 * n_out, i.e. n_out rows of n_in elements of type wtype, each row
 * ggml_row_size(wtype, n_in) bytes.  matmul converts every activation row once
 * to the weight type's vec_dot_type (Q8_0, Q8_1, Q8_K, F16, BF16 or F32; see
 * quants.h) and then computes the outputs with kern.types[wtype].gemm in
 * tiles of GEMM_ROWS rows x up to GEMM_TOKS tokens (vec_dot for the last
 * rows), rows split across OpenMP's thread pool.  One token (decode) is a
 * GEMV: each thread streams one contiguous range of rows once.  Several
 * tokens (prefill) are a GEMM: blocks of rows small enough to stay in cache
 * are swept by tiles of tokens, so each weight block is read from memory once
 * per block of tokens and unpacked once per tile; from the type's crossover
 * on (kernels_many_min, dispatch.h), types with a gemm_many kernel use it instead
 * (weights unpacked once per call, vector lanes holding tokens).  Every
 * output has the bits of the active table's vec_dot, whatever the path,
 * thread count or batch size.
 *
 * Functions return 0 (INFER_OK) or an infer_status with the message set
 * (infer_error); on error the outputs are left unspecified but nothing is
 * read or written out of bounds.
 */
#ifndef INFER_KERNELS_MATMUL_H
#define INFER_KERNELS_MATMUL_H

#include <stddef.h>
#include <stdint.h>

#include "dispatch.h"

/* y[t*n_out + o] = sum_i W[o][i] * x[t*n_in + i]  for t < n_tok, o < n_out.
 *   y: (n_tok, n_out) floats; x: (n_tok, n_in) floats; w: (n_out, n_in) of wtype.
 * Errors: INFER_ERR_UNSUPPORTED ("unsupported tensor type X for matmul") for a
 * type without a dot product; INFER_ERR_INVALID for NULL pointers, negative
 * sizes, n_in not a multiple of the block size, or w misaligned for its
 * blocks; INFER_ERR_NOMEM if the activation scratch cannot be allocated.
 * n_out == 0 or n_tok == 0 is a no-op. */
int matmul(float *y, const void *w, uint32_t wtype, const float *x, int64_t n_in, int64_t n_out, int64_t n_tok);

/* Split form, to quantize activations once for several matrices of types
 * sharing a vec_dot_type (e.g. Q, K, V projections of the same input):
 *   matmul_act_size   bytes of n_tok converted rows (0 if wtype is
 *                     unsupported or n_in is invalid for it);
 *   matmul_act_quantize  convert x (n_tok, n_in) into xq (that many bytes);
 *   matmul_q          as matmul, from converted activations xq, which must
 *                     come from matmul_act_quantize (the SIMD kernels rely
 *                     on its Q8 values lying in [-127, 127]).
 * Same error contract as matmul. */
size_t matmul_act_size(uint32_t wtype, int64_t n_in, int64_t n_tok);
int matmul_act_quantize(void *xq, uint32_t wtype, const float *x, int64_t n_in, int64_t n_tok);
int matmul_q(float *y, const void *w, uint32_t wtype, const void *xq, int64_t n_in, int64_t n_out, int64_t n_tok);

/* A buffer of at least `bytes` for matmul_act_quantize (malloc's alignment),
 * NULL when out of memory; give it back with matmul_act_release(p, bytes).
 * The calling thread keeps the last two released buffers for its next
 * requests: a 512-token prefill converts its activations ~7 times a layer,
 * up to ~5 MB each, and malloc served each from fresh zero-filled pages
 * (~20,000 page faults per 512-token pass of a 0.6B model, ~5% of its CPU
 * time).  Nested requests get distinct buffers. */
void *matmul_act_alloc(size_t bytes);
void matmul_act_release(void *p, size_t bytes);

/* The first half of a gated FFN in one pass, for many tokens:
 *     h[t*n_out + o] = act(sum_i Wg[o][i] x[t*n_in + i]) * sum_i Wu[o][i] x[t*n_in + i]
 * with gate and up matrices wg and wu of one type and shape, act silu or
 * gelu (ops.h), through the type's gemm_many_glu (dispatch.h): the bits of
 * two matmuls, then silu or gelu and vec_mul, without storing the two
 * products.  *done is false, and nothing is written, when the active table
 * has no fused kernel for the type, n_tok is below its many-token count, or
 * fusion is off (matmul_use_glu): the caller then runs the two matrices.
 * Same error contract as matmul. */
int matmul_glu(float *h, const void *wg, const void *wu, uint32_t wtype, const float *x, int64_t n_in, int64_t n_out,
               int64_t n_tok, enum glu_act act, bool *done);

/* The fused gate/up kernels (matmul_glu, matmul_q_rows_glu) on (on > 0,
 * the default) or off, returning the previous setting: off, they decline
 * and their callers run the two matrices, which gives the same bits (the
 * tests compare the two).  Not thread-safe: set it before matmuls run. */
bool matmul_use_glu(int on);

/* One matmul_q as a job for matmul_q_rows. */
struct matmul_q_job {
    float *y;
    const void *w;
    uint32_t wtype;
    const void *xq; /* from matmul_act_quantize for wtype */
    int64_t n_in, n_out, n_tok;
};
/* Output rows [o0, o1) of one job, all its tokens, in the calling thread:
 * for callers that split the work into their own pool items (the fused
 * expert FFN, src/model/moe.c), where one item runs pieces of several
 * matrices.  The kernels are matmul_q's (gemm_many for many tokens, in
 * chunks of tokens; otherwise row blocks that stay in the L1 while tiles of
 * tokens pass), so every output has the bits matmul_q gives it.  Same
 * error contract as matmul (also for a row range outside [0, n_out]). */
int matmul_q_rows(const struct matmul_q_job *job, int64_t o0, int64_t o1);
/* The same into y[t * ys + o - o0] (the range's first row at y, outputs
 * of a token ys >= o1 - o0 apart; job->y is not used), e.g. a compact
 * scratch that one item fills and reads back (the expert FFN's weighted
 * sums).  Same bits as matmul_q_rows, same error contract. */
int matmul_q_rows_to(const struct matmul_q_job *job, int64_t o0, int64_t o1, float *y, size_t ys);

/* Up to MATMUL_JOBS_MAX matmul_q jobs (e.g. the Q, K and V projections of
 * one input), with the bits matmul_q gives each.  For up to GEMM_TOKS tokens
 * (decode) their work is one pool loop: one wait for the slowest thread a
 * call instead of one a matrix (in decode of a small model, two of a layer's
 * seven loops).  Batches of more tokens run job after job as matmul_q.  Same
 * error contract as matmul; nothing is computed when any job is invalid. */
#define MATMUL_JOBS_MAX 8
int matmul_q_jobs(const struct matmul_q_job *jobs, int n);

/* The fused SwiGLU of two jobs' rows [o0, o1): gate is `gate` (its y is not
 * used), up the matrix at wu of the same type, row size and activations,
 *     h[t * hs + r - o0] = silu(gate(t, r)) * up(t, r)
 * in one pass (gemm_many_glu, dispatch.h), with the bits of matmul_q_rows
 * on each, then silu and vec_mul (ops.h).  *done is false, and nothing is
 * written, when the active table has no fused kernel for the type at this
 * many tokens, fusion is off (matmul_use_glu) or the kernel could not get
 * its scratch: the caller then runs the two matrices.  Same error contract
 * as matmul_q_rows. */
int matmul_q_rows_glu(const struct matmul_q_job *gate, const void *wu, float *h, size_t hs, int64_t o0, int64_t o1,
                      bool *done);

/* OpenBLAS for batches of float (F32, F16, BF16) weights: on (on > 0) or
 * off, returning the previous setting.  Off unless INFER_BLAS is set to
 * something other than 0: faster prefill for float models, but batches then
 * lose the single-token bits (see matmul.c).  Not thread-safe: set it
 * before matmuls run. */
bool matmul_use_blas(int on);

/* The reference gemm tiles (dispatch.h, gemm_fn): loops over the reference
 * vec_dot of each type, the specification of every SIMD gemm. */
void gemm_f32_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, int nt);
void gemm_f16_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, int nt);
void gemm_bf16_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, int nt);
void gemm_q4_0_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, int nt);
void gemm_q4_1_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, int nt);
void gemm_q5_0_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, int nt);
void gemm_q5_1_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, int nt);
void gemm_q8_0_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, int nt);
void gemm_q4_K_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, int nt);
void gemm_q5_K_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, int nt);
void gemm_q6_K_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, int nt);
void gemm_iq4_nl_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys,
                     int nt);
void gemm_q2_K_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, int nt);
void gemm_q3_K_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, int nt);
void gemm_iq4_xs_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys,
                     int nt);
/* The x4 layouts (repack.h): w is a group of four rows. */
void gemm_q4_0x4_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, int nt);
void gemm_q4_Kx4_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, int nt);
void gemm_q4_Kx4i_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys,
                      int nt);
void gemm_q6_Kx4_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, int nt);
void gemm_q3_Kx4_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, int nt);
void gemm_q5_0x4_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys,
                     int nt);
void gemm_q8_0x4_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, int nt);
void gemm_q4_0x4s_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys,
                      int nt);
void gemm_iq4_nlx4_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys,
                       int nt);

/* Dequantize one row of n elements of `type` into dst (n floats).
 * Errors: INFER_ERR_UNSUPPORTED ("unsupported tensor type X") when the type
 * has no dequantizer; INFER_ERR_INVALID for n not a multiple of the block
 * size, NULL pointers or misaligned src. */
int dequantize_row(uint32_t type, const void *src, float *dst, int64_t n);

/* Embedding lookup: dst[k*n_cols ..] = row ids[k] of the (n_rows, n_cols)
 * matrix w of `type`, for k < n_ids.  Errors as dequantize_row, plus
 * INFER_ERR_INVALID for an id outside 0 .. n_rows-1 (nothing is read). */
int get_rows(float *dst, const void *w, uint32_t type, int64_t n_cols, int64_t n_rows, const int32_t *ids,
             int64_t n_ids);

#endif
