/*
 * matmul.c - weight-matrix times activations through the dispatch table
 * (see matmul.h), and row dequantization.
 *
 * Work split: activation rows are converted once (in parallel over tokens),
 * then output rows are cut into chunks of MATMUL_CHUNK rows; each OpenMP
 * thread takes whole chunks and, for each token, dots every row of its chunk
 * with that token's activations, so a chunk of weights stays in cache while
 * it is reused across the batch.  Each output is written by exactly one
 * thread and computed the same way whatever the thread count, so results do
 * not depend on it.
 */
#include "matmul.h"

#include <stdlib.h>
#include <string.h>

#include "common.h"

#define MATMUL_CHUNK 16 /* output rows per unit of work */
/* Below this many multiply-adds, threads cost more than they save. */
#define MATMUL_PARALLEL_MIN 32768.0

static const char *type_name(uint32_t type)
{
    const struct ggml_type_traits *t = ggml_type_traits_get(type);
    return t ? t->name : "(unknown)";
}

/* Alignment a pointer to blocks of `type` needs: F32 rows hold floats, every
 * other supported type holds ggml_half fields (Q8_K, with a float, is only
 * ever produced here). */
static size_t type_align(uint32_t type)
{
    return type == GGML_TYPE_F32 || type == GGML_TYPE_Q8_K ? 4 : 2;
}

/* Validate a matmul and find its activation format and row sizes. */
static int matmul_check(uint32_t wtype, int64_t n_in, int64_t n_out, int64_t n_tok, const void *w,
                        uint32_t *act_type, size_t *w_row, size_t *act_row)
{
    if (wtype >= GGML_TYPE_COUNT || !kern.types[wtype].vec_dot || !ggml_type_traits_get(wtype))
        return infer_error(INFER_ERR_UNSUPPORTED, "unsupported tensor type %s for matmul", type_name(wtype));
    const uint32_t at = kern.types[wtype].vec_dot_type;
    const struct ggml_type_traits *wt = ggml_type_traits_get(wtype), *ta = ggml_type_traits_get(at);
    if (!ta || !kern.types[at].from_float)
        return infer_error(INFER_ERR_UNSUPPORTED, "unsupported tensor type %s for matmul", type_name(wtype));
    if (n_in <= 0 || n_out < 0 || n_tok < 0)
        return infer_error(INFER_ERR_INVALID, "matmul: bad shape n_in=%lld n_out=%lld n_tok=%lld", (long long)n_in,
                           (long long)n_out, (long long)n_tok);
    if (n_in % wt->block_size != 0 || n_in % ta->block_size != 0)
        return infer_error(INFER_ERR_INVALID, "matmul: row length %lld is not a multiple of the %s block size %u",
                           (long long)n_in, wt->name, wt->block_size > ta->block_size ? wt->block_size
                                                                                        : ta->block_size);
    if (w && (uintptr_t)w % type_align(wtype) != 0)
        return infer_error(INFER_ERR_INVALID, "matmul: %s weights at a misaligned address", wt->name);
    *act_type = at;
    *w_row = ggml_row_size(wtype, n_in);
    *act_row = ggml_row_size(at, n_in);
    return INFER_OK;
}

size_t matmul_act_size(uint32_t wtype, int64_t n_in, int64_t n_tok)
{
    uint32_t at;
    size_t w_row, act_row;
    uint64_t total;
    if (n_tok < 0 || matmul_check(wtype, n_in, 0, n_tok, NULL, &at, &w_row, &act_row) != INFER_OK)
        return 0;
    if (!ck_mul(act_row, (uint64_t)n_tok, &total) || total > SIZE_MAX)
        return 0;
    return (size_t)total;
}

int matmul_act_quantize(void *xq, uint32_t wtype, const float *x, int64_t n_in, int64_t n_tok)
{
    uint32_t at;
    size_t w_row, act_row;
    int st = matmul_check(wtype, n_in, 0, n_tok, NULL, &at, &w_row, &act_row);
    if (st)
        return st;
    if (n_tok == 0)
        return INFER_OK;
    if (!xq || !x)
        return infer_error(INFER_ERR_INVALID, "matmul: NULL activations");
    if ((uintptr_t)xq % type_align(at) != 0)
        return infer_error(INFER_ERR_INVALID, "matmul: misaligned activation buffer");
    const from_float_fn quantize = kern.types[at].from_float;
#pragma omp parallel for schedule(static) if (n_tok > 1)
    for (int64_t t = 0; t < n_tok; t++)
        quantize(x + t * n_in, (char *)xq + (size_t)t * act_row, n_in);
    return INFER_OK;
}

int matmul_q(float *y, const void *w, uint32_t wtype, const void *xq, int64_t n_in, int64_t n_out, int64_t n_tok)
{
    uint32_t at;
    size_t w_row, act_row;
    int st = matmul_check(wtype, n_in, n_out, n_tok, w, &at, &w_row, &act_row);
    if (st)
        return st;
    if (n_out == 0 || n_tok == 0)
        return INFER_OK;
    if (!y || !w || !xq)
        return infer_error(INFER_ERR_INVALID, "matmul: NULL argument");

    const vec_dot_fn dot = kern.types[wtype].vec_dot;
    const char *wb = w, *ab = xq;
    const int64_t n_chunks = (n_out + MATMUL_CHUNK - 1) / MATMUL_CHUNK;
    const double work = (double)n_in * (double)n_out * (double)n_tok;
#pragma omp parallel for schedule(static) if (n_chunks > 1 && work >= MATMUL_PARALLEL_MIN)
    for (int64_t c = 0; c < n_chunks; c++) {
        const int64_t o0 = c * MATMUL_CHUNK;
        const int64_t o1 = o0 + MATMUL_CHUNK < n_out ? o0 + MATMUL_CHUNK : n_out;
        for (int64_t t = 0; t < n_tok; t++) {
            const char *a = ab + (size_t)t * act_row;
            float *yt = y + t * n_out;
            for (int64_t o = o0; o < o1; o++)
                yt[o] = dot(n_in, wb + (size_t)o * w_row, a);
        }
    }
    return INFER_OK;
}

int matmul(float *y, const void *w, uint32_t wtype, const float *x, int64_t n_in, int64_t n_out, int64_t n_tok)
{
    uint32_t at;
    size_t w_row, act_row;
    int st = matmul_check(wtype, n_in, n_out, n_tok, w, &at, &w_row, &act_row);
    if (st)
        return st;
    if (n_out == 0 || n_tok == 0)
        return INFER_OK;
    if (!y || !w || !x)
        return infer_error(INFER_ERR_INVALID, "matmul: NULL argument");
    if (at == GGML_TYPE_F32) /* F32 weights dot the activations as they are */
        return matmul_q(y, w, wtype, x, n_in, n_out, n_tok);

    const size_t size = matmul_act_size(wtype, n_in, n_tok);
    if (size == 0)
        return infer_error(INFER_ERR_INVALID, "matmul: %lld activation rows of %lld are too large",
                           (long long)n_tok, (long long)n_in);
    void *xq = malloc(size); /* malloc aligns for every block type */
    if (!xq)
        return infer_error(INFER_ERR_NOMEM, "matmul: out of memory for %zu bytes of activations", size);
    st = matmul_act_quantize(xq, wtype, x, n_in, n_tok);
    if (!st)
        st = matmul_q(y, w, wtype, xq, n_in, n_out, n_tok);
    free(xq);
    return st;
}

/* Validate a dequantization of n elements of `type` at src. */
static int dequant_check(uint32_t type, const void *src, const float *dst, int64_t n, to_float_fn *fn)
{
    const struct ggml_type_traits *t = ggml_type_traits_get(type);
    if (!t || !kern.types[type].to_float)
        return infer_error(INFER_ERR_UNSUPPORTED, "unsupported tensor type %s", type_name(type));
    if (n < 0 || n % t->block_size != 0)
        return infer_error(INFER_ERR_INVALID, "row length %lld is not a multiple of the %s block size %u",
                           (long long)n, t->name, t->block_size);
    if ((n > 0 && (!src || !dst)) || (uintptr_t)src % type_align(type) != 0)
        return infer_error(INFER_ERR_INVALID, "dequantize: NULL or misaligned %s data", t->name);
    *fn = kern.types[type].to_float;
    return INFER_OK;
}

int dequantize_row(uint32_t type, const void *src, float *dst, int64_t n)
{
    to_float_fn fn;
    int st = dequant_check(type, src, dst, n, &fn);
    if (st)
        return st;
    if (n > 0)
        fn(src, dst, n);
    return INFER_OK;
}

int get_rows(float *dst, const void *w, uint32_t type, int64_t n_cols, int64_t n_rows, const int32_t *ids,
             int64_t n_ids)
{
    to_float_fn fn;
    int st = dequant_check(type, w, dst, n_cols, &fn);
    if (st)
        return st;
    if (n_ids < 0 || (n_ids > 0 && !ids))
        return infer_error(INFER_ERR_INVALID, "get_rows: bad id list");
    for (int64_t k = 0; k < n_ids; k++)
        if (ids[k] < 0 || ids[k] >= n_rows)
            return infer_error(INFER_ERR_INVALID, "get_rows: row %d is outside 0..%lld", ids[k],
                               (long long)n_rows - 1);
    const size_t row = ggml_row_size(type, n_cols);
    for (int64_t k = 0; k < n_ids && n_cols > 0; k++)
        fn((const char *)w + (size_t)ids[k] * row, dst + k * n_cols, n_cols);
    return INFER_OK;
}
