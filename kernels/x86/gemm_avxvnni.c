/*
 * gemm_avxvnni.c - the "avxvnni" variant: the avx2 variant plus a
 * many-token matmul (gemm_many) on AVX-VNNI's 256-bit vpdpbusd, for Q4_0,
 * Q5_0, Q8_0, Q4_K, Q5_K and Q6_K (gemm_lt8_body.h), and a one-token GEMV for
 * Q4_0 / Q5_0 (gemv_x4_avx2.h).  For CPUs with AVX-VNNI
 * but no AVX-512: Alder Lake and later, Intel N100/N150 (Gracemont).
 * Compiled with the avx2 flags plus -mavxvnni.
 */
#define GEMM_VNNI 1
#include "gemm_lt8_body.h"

/* One token, Q4_0 / Q5_0: gemv_x4_avx2.h's four-row GEMV with vpdpbusd
 * taking the bytes whole (two instructions per two rows and block where
 * avx2 needs four); more tokens: the avx2 tiles. */
#define X4_DOT(lo, a0, hi, a1) _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), lo, a0), hi, a1)
#include "gemv_x4_avx2.h"

static gemm_fn avx2_gemm_q4_0, avx2_gemm_q5_0;

static void gemm_q4_0(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, int nt)
{
    if (nt == 1)
        gemv32_x4(GGML_TYPE_Q4_0, n, w, w_row, a, y);
    else
        avx2_gemm_q4_0(n, w, w_row, a, a_row, y, ys, nt);
}

static void gemm_q5_0(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, int nt)
{
    if (nt == 1)
        gemv32_x4(GGML_TYPE_Q5_0, n, w, w_row, a, y);
    else
        avx2_gemm_q5_0(n, w, w_row, a, a_row, y, ys, nt);
}

void kernels_fill_avxvnni(struct kernel_table *t)
{
    kernels_fill_avx2(t);
    fill_many(t);
    avx2_gemm_q4_0 = t->types[GGML_TYPE_Q4_0].gemm;
    avx2_gemm_q5_0 = t->types[GGML_TYPE_Q5_0].gemm;
    t->types[GGML_TYPE_Q4_0].gemm = gemm_q4_0;
    t->types[GGML_TYPE_Q5_0].gemm = gemm_q5_0;
}
