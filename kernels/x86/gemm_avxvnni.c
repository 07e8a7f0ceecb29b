/*
 * gemm_avxvnni.c - the "avxvnni" variant: the avx2 variant plus a
 * many-token matmul (gemm_many) on AVX-VNNI's 256-bit vpdpbusd, for Q4_0,
 * Q5_0, Q8_0, Q4_K, Q5_K and Q6_K (gemm_lt8_body.h).  For CPUs with AVX-VNNI
 * but no AVX-512: Alder Lake and later, Intel N100/N150 (Gracemont).
 * Compiled with the avx2 flags plus -mavxvnni.
 */
#define GEMM_VNNI 1
#include "gemm_lt8_body.h"

void kernels_fill_avxvnni(struct kernel_table *t)
{
    kernels_fill_avx2(t);
    fill_many(t);
}
