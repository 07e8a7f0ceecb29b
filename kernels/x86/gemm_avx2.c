/*
 * gemm_avx2.c - the many-token matmul (gemm_many) of the "avx2" variant:
 * lanes are tokens, products by vpmaddubsw (gemm_lt8_body.h), for Q4_0,
 * Q5_0, Q8_0 and IQ4_NL (|w| times a sign(w)), Q4_K, Q5_K, Q6_K, Q2_K, Q3_K and IQ4_XS.  Compiled with
 * the avx2 variant's flags.
 */
#define GEMM_VNNI 0
#include "gemm_lt8_body.h"

/* The crossovers (kernels_many_min, dispatch.h): the token count from
 * which gemm_many beats the tiles on both 8192x2048 and 2048x8192, from
 * bench-kernels -t 1 -c -b -G -n 4..48 with matmul forced onto either path
 * (one thread, CPU time, Zen 3).  gemm_many costs about the same for any
 * token count inside one group of 8 lanes (unpacking the weights dominates
 * below ~32 tokens), the tiles a fixed amount per token; so the plain
 * K-quants and Q8_0 cross at 12-13 tokens, Q6_K and IQ4_XS at ~20, and the
 * Q4_K and Q6_K x4 layouts, whose 4-token tiles reach 72 GMAC/s, at ~38
 * (Q4_K x4 at 8 tokens: 1.9 ms on tiles, 4.4 ms in gemm_many; at 64
 * gemm_many is 1.2x faster), Q3_K x4 (tiles 71 GMAC/s) between 40 and 48
 * (8192x2048: many/tiles 0.96x at 40, 1.03x at 48).  Just past a group
 * boundary the tiles can lead again by up to ~10% (Q4_0 x4 at 17-18
 * tokens); one threshold per type is the simple rule.  IQ4_NL (measured
 * on a Zen 5 with -v avx2 against the tiles: many/tiles 0.98-1.02x at 8,
 * 1.10x at 12) and its x4 layout (0.84-0.92x at 12, 1.18-1.22x at 16). */
static const struct kernel_many_min many_min[] = {
    {GGML_TYPE_Q4_0, 5},       {GGML_TYPE_Q5_0, 5},       {GGML_TYPE_Q8_0, 13},
    {GGML_TYPE_Q4_K, 13},      {GGML_TYPE_Q5_K, 12},      {GGML_TYPE_Q6_K, 20},
    {GGML_TYPE_Q2_K, 13},      {GGML_TYPE_Q3_K, 13},      {GGML_TYPE_IQ4_XS, 20},
    {INFER_TYPE_Q4_0_X4, 14},  {INFER_TYPE_Q5_0_X4, 13},  {INFER_TYPE_Q4_K_X4, 38},
    {INFER_TYPE_Q6_K_X4, 38},  {INFER_TYPE_Q3_K_X4, 44},  {GGML_TYPE_IQ4_NL, 12},
    {INFER_TYPE_IQ4_NL_X4, 16}, {INFER_TYPE_Q4_K_X4I, 38},
};

void kernels_fill_gemm_avx2(struct kernel_table *t)
{
    fill_many(t);
    kernels_many_min_set(t, 6, many_min, sizeof(many_min) / sizeof(many_min[0])); /* 6: types not measured */
}
