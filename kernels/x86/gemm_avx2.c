/*
 * gemm_avx2.c - the many-token matmul (gemm_many) of the "avx2" variant:
 * lanes are tokens, products by vpmaddubsw (gemm_lt8_body.h), for Q4_0,
 * Q5_0, Q8_0 (|w| times a sign(w)), Q4_K, Q5_K, Q6_K, Q2_K and Q3_K.  Compiled with
 * the avx2 variant's flags.
 */
#define GEMM_VNNI 0
#include "gemm_lt8_body.h"

/* Measured (contrib/bench): with 8 lanes, gemm_many overtakes the gemm
 * tiles from about 6 tokens. */
void kernels_fill_gemm_avx2(struct kernel_table *t)
{
    fill_many(t);
    t->many_min_tok = 6;
}
