/*
 * matmul.h - the one entry point the forward pass uses for every weight
 * matrix, plus row dequantization for embedding lookups.
 *
 * A weight matrix is stored as in GGUF: ne[0] = n_in (contiguous), ne[1] =
 * n_out, i.e. n_out rows of n_in elements of type wtype, each row
 * ggml_row_size(wtype, n_in) bytes.  matmul converts every activation row once
 * to the weight type's vec_dot_type (Q8_0, Q8_1, Q8_K, F16, BF16 or F32; see
 * quants.h) and then computes each output as kern.types[wtype].vec_dot, rows
 * split across OpenMP's thread pool.
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
 *   matmul_q          as matmul, from converted activations xq.
 * Same error contract as matmul. */
size_t matmul_act_size(uint32_t wtype, int64_t n_in, int64_t n_tok);
int matmul_act_quantize(void *xq, uint32_t wtype, const float *x, int64_t n_in, int64_t n_tok);
int matmul_q(float *y, const void *w, uint32_t wtype, const void *xq, int64_t n_in, int64_t n_out, int64_t n_tok);

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
