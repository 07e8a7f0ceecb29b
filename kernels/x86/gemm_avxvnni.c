/*
 * gemm_avxvnni.c - the "avxvnni" variant: the avx2 variant plus a
 * many-token matmul (gemm_many) on AVX-VNNI's 256-bit vpdpbusd, for Q4_0,
 * Q5_0, Q8_0, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K and IQ4_XS (gemm_lt8_body.h), a one-token GEMV for
 * Q4_0 / Q5_0 (gemv_x4_avx2.h) and the 1-4 token K-quant tiles
 * (gemmk_avx2.h), all on vpdpbusd / vpdpwssd.  For CPUs with AVX-VNNI
 * but no AVX-512: Alder Lake and later, Intel N100/N150 (Gracemont).
 * Compiled with the avx2 flags plus -mavxvnni.
 */
#define GEMM_VNNI 1
#include "gemm_lt8_body.h"

/* One token, Q4_0 / Q5_0: gemv_x4_avx2.h's four-row GEMV with vpdpbusd
 * taking the bytes whole (two instructions per two rows and block where
 * avx2 needs four); more tokens: the avx2 tiles. */
#define X4_DOT(lo, a0, hi, a1) _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), lo, a0), hi, a1)
#define X4_IQ4NL_UNSIGNED 1 /* IQ4_NL x4: codebook + 128 whole, as Q4_0 (avx2: the abs/sign trick) */
#include "gemv_x4_avx2.h"
DEFINE_GEMM_X4P(gemm_q4_0x4, GGML_TYPE_Q4_0)
DEFINE_GEMM_X4P(gemm_q5_0x4, GGML_TYPE_Q5_0)
DEFINE_GEMM_X4Q(gemm_q4_0x4q, prep_q4_0x4, GGML_TYPE_Q4_0)
DEFINE_GEMM_X4Q(gemm_q5_0x4q, prep_q5_0x4, GGML_TYPE_Q5_0)
DEFINE_GEMM_X4P(gemm_iq4_nlx4, GGML_TYPE_IQ4_NL)
DEFINE_GEMM_X4Q(gemm_iq4_nlx4q, prep_iq4_nlx4, GGML_TYPE_IQ4_NL)

/* Q4_0 / Q5_0 / Q8_0, 1-4 tokens: gemm32_avx2.h's tiles with the weights
 * unsigned (w + K) on vpdpbusd, K times the token's four-byte sums taken
 * off in the accumulator's start value: one instruction per row and token
 * where avx2 needs three. */
struct w32 {
    __m256i u;
};
INLINE __m256i koff_vec(const int type)
{
    return _mm256_set1_epi8((char)(type == GGML_TYPE_Q4_0 ? 8 : type == GGML_TYPE_Q5_0 ? 16 : 128));
}
#define W32_PREP(type, blk, wp) ((wp)->u = w32_unsigned(type, blk))
#define W32_CORR(type, a)                                                                                     \
    _mm256_sub_epi32(_mm256_setzero_si256(), _mm256_dpbusd_avx_epi32(_mm256_setzero_si256(), koff_vec(type), a))
#define W32_DOT(wp, a, corr) _mm256_dpbusd_avx_epi32(corr, (wp)->u, a)
#include "gemm32_avx2.h"

/* 1-4 tokens against a group of four Q8_0 rows in the x4 SDOT order
 * (repack.h), as quants_avx512.c's gemm8_x4s on 256 bits: a 32-byte load
 * holds dwords 4v + r (r < 4) of two v, the token's block (+ 128, unsigned)
 * goes to them by one vpermd each, the four vpdpbusd of a block start from
 * minus 128 times the weights' four-byte sums (once per block for all
 * tokens), the two 128-bit halves added give rows 0-3 of the block, and the
 * float steps are gemm32's, block after block: vec_dot's bits.  One weight
 * stream per group where the GGUF layout's GEMV reads four rows. */
INLINE void gemm8_x4s(const int NT, int64_t n, const uint8_t *w, const uint8_t *a, size_t a_row, float *y,
                      size_t ys)
{
    const int64_t nb = n / 32, nb4 = nb / 4;
    const size_t bs = sizeof(block_q8_0), tb = 16 * bs;
    const __m256i zero = _mm256_setzero_si256(), K = _mm256_set1_epi8((char)0x80);
    __m128 acc[4] = {_mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps(), _mm_setzero_ps()};
    for (int64_t j = 0; j < nb4; j++) {
        const uint8_t *tile = w + (size_t)j * tb;
        prefetch_tile(tile, tb);
        UNROLL
        for (int k = 0; k < 4; k++) {
            __m256i wv[4];
            __m256i c = zero;
            UNROLL
            for (int i = 0; i < 4; i++) { /* elements 8i .. 8i + 7 of the four rows */
                wv[i] = _mm256_loadu_si256((const __m256i *)(tile + repack_x4s_q(0, k, bs, 32, 8 * i)));
                c = _mm256_dpbusd_avx_epi32(c, K, wv[i]);
            }
            c = _mm256_sub_epi32(zero, c);
            const __m128 dx = h2f4(ld16(tile + repack_x4_d(0, k, bs)), ld16(tile + repack_x4_d(1, k, bs)),
                                   ld16(tile + repack_x4_d(2, k, bs)), ld16(tile + repack_x4_d(3, k, bs)));
            UNROLL
            for (int t = 0; t < NT; t++) {
                const block_q8_0 *ab = (const block_q8_0 *)(a + (size_t)t * a_row) + 4 * j + k;
                const __m256i au = _mm256_xor_si256(_mm256_loadu_si256((const __m256i *)ab->qs), K);
                __m256i s = c;
                UNROLL
                for (int i = 0; i < 4; i++)
                    s = _mm256_dpbusd_avx_epi32(
                        s, _mm256_permutevar8x32_epi32(au, _mm256_setr_epi32(2 * i, 2 * i, 2 * i, 2 * i, 2 * i + 1,
                                                                             2 * i + 1, 2 * i + 1, 2 * i + 1)),
                        wv[i]);
                const __m128i s4 = _mm_add_epi32(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
                acc[t] = fma32(GGML_TYPE_Q8_0, acc[t], s4, dx, _mm_set1_ps(h2f(ld16(&ab->d))));
            }
        }
    }
    for (int64_t b = 4 * nb4; b < nb; b++) { /* GGUF's blocks, rows 0-3 side by side */
        const uint8_t *col = w + repack_x4_whole(0, b, nb, bs);
        UNROLL
        for (int t = 0; t < NT; t++)
            acc[t] = gemv32_block(GGML_TYPE_Q8_0, 4, 0, col, bs, a + (size_t)t * a_row + (size_t)b * bs, 0, acc[t]);
    }
    UNROLL
    for (int t = 0; t < NT; t++)
        _mm_storeu_ps(y + (size_t)t * ys, acc[t]);
}

DEFINE_GEMM_GROUP(gemm_q8_0x4, gemm8_x4s)

/* gemm (1-4 tokens; ONE: the one-token call) and vec_dot of a type from a
 * tile function CORE(type, rows, tokens, ...). */
#define DEFINE_TILES(NAME, TYPE, CORE, ONE)                                                                   \
    static void NAME(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, \
                     int nt)                                                                                  \
    {                                                                                                         \
        switch (nt) {                                                                                         \
        case 1: ONE; break;                                                                                   \
        case 2: CORE(TYPE, 4, 2, n, w, w_row, a, a_row, y, ys); break;                                        \
        case 3: CORE(TYPE, 4, 3, n, w, w_row, a, a_row, y, ys); break;                                        \
        default: CORE(TYPE, 4, 4, n, w, w_row, a, a_row, y, ys); break;                                       \
        }                                                                                                     \
    }                                                                                                         \
    static float NAME##_dot(int64_t n, const void *w, const void *a)                                          \
    {                                                                                                         \
        float y;                                                                                              \
        CORE(TYPE, 1, 1, n, w, 0, a, 0, &y, 1);                                                               \
        return y;                                                                                             \
    }
DEFINE_TILES(gemm_q4_0, GGML_TYPE_Q4_0, gemm32, gemv32_x4(GGML_TYPE_Q4_0, n, w, w_row, a, y))
DEFINE_TILES(gemm_q5_0, GGML_TYPE_Q5_0, gemm32, gemv32_x4(GGML_TYPE_Q5_0, n, w, w_row, a, y))
DEFINE_TILES(gemm_q8_0, GGML_TYPE_Q8_0, gemm32, gemm32(GGML_TYPE_Q8_0, 4, 1, n, w, w_row, a, a_row, y, ys))
DEFINE_TILES(gemm_iq4_nl, GGML_TYPE_IQ4_NL, gemm32, gemm32(GGML_TYPE_IQ4_NL, 4, 1, n, w, w_row, a, a_row, y, ys))

/* K-quants: gemmk_avx2.h's tiles with vpdpwssd applying the sub-block
 * scales and accumulating in one instruction. */
#define K_MADD_ACC(acc, p, s) _mm256_dpwssd_avx_epi32(acc, p, s)
#define K_TOK_VNNI 1
#include "gemmk_avx2.h"
#define Q6X_W 256
#define Q6X_NACC 2 /* vpdpwssd chains: latency, not throughput, would bound one token */
#define Q6X_SPLIT 3 /* 2 tokens: both row pairs per pass, enough vpdpwssd chains */
/* 2-4 tokens: rows in 64-bit lanes (gemm6_x4t), as avx2: `bench-kernels -t 1
 * -c -b -r 41 -n N -s 8192x2048 -T q6_kx4 -v avxvnni -A` (the lanes-are-rows
 * tile before), Zen 5: 1.02x at two tokens, 1.05-1.06x at four; one token
 * level (1.00-1.01x, also with two accumulator chains), so it stays there */
#define Q6X_QWORDS
#include "gemm_q6kx4_body.h"

/* Q2_K, Q3_K, IQ4_XS: lowbit_x86.h on vpdpwssd / vpdpbusd. */
#define LB_WIDTH 256
#define LB_VNNI 1
#include "lowbit_x86.h"

#define K_ONE(T) gemmK(T, 4, 1, n, w, w_row, a, a_row, y, ys)
DEFINE_TILES(gemm_q4_K, GGML_TYPE_Q4_K, gemmK, K_ONE(GGML_TYPE_Q4_K))
DEFINE_TILES(gemm_q5_K, GGML_TYPE_Q5_K, gemmK, K_ONE(GGML_TYPE_Q5_K))
DEFINE_TILES(gemm_q6_K, GGML_TYPE_Q6_K, gemmK, K_ONE(GGML_TYPE_Q6_K))

/* The crossovers (kernels_many_min, dispatch.h), measured as avx2's (see
 * gemm_avx2.c) on a Zen 5 with -v avxvnni: the first token count from which
 * gemm_many, against this variant's tiles, is ahead on 8192x2048 and
 * 2048x8192 together (geometric mean of the two ratios), lowered where
 * prompts through infer bench -t 1 wanted (the hot single matrices favour
 * the tiles; see gemm_avx512.c).  VNNI makes this variant's tiles faster
 * than avx2's, so most types cross later than there (8-token prompts on the
 * 1B Q4_K_M and Q4_0 files 1.55-1.89x against 6 for all); IQ4_NL, whose
 * plain tiles look the codebook up per token, at 6 already (1.09x), and the
 * x4 layouts' 4-token tiles latest. */
static const struct kernel_many_min many_min[] = {
    {GGML_TYPE_Q4_0, 12},      {GGML_TYPE_Q5_0, 12},      {GGML_TYPE_Q8_0, 16},      {GGML_TYPE_Q4_K, 24},
    {GGML_TYPE_Q5_K, 16},      {GGML_TYPE_Q6_K, 24},      {GGML_TYPE_Q2_K, 20},      {GGML_TYPE_Q3_K, 20},
    {GGML_TYPE_IQ4_XS, 16},    {GGML_TYPE_IQ4_NL, 6},     {INFER_TYPE_Q4_0_X4, 24},  {INFER_TYPE_Q5_0_X4, 16},
    {INFER_TYPE_Q4_K_X4, 40},  {INFER_TYPE_Q6_K_X4, 40},  {INFER_TYPE_IQ4_NL_X4, 12}, {INFER_TYPE_Q3_K_X4, 48},
    {INFER_TYPE_Q8_0_X4, 16},  {INFER_TYPE_Q4_K_X4I, 40},
};

void kernels_fill_avxvnni(struct kernel_table *t)
{
    kernels_fill_avx2(t);
    fill_many(t);
    kernels_many_min_set(t, 6, many_min, sizeof(many_min) / sizeof(many_min[0]));
    t->types[GGML_TYPE_Q4_0].gemm = gemm_q4_0;
    t->types[GGML_TYPE_Q4_0].vec_dot = gemm_q4_0_dot;
    t->types[GGML_TYPE_Q5_0].gemm = gemm_q5_0;
    t->types[GGML_TYPE_Q5_0].vec_dot = gemm_q5_0_dot;
    t->types[GGML_TYPE_Q8_0].gemm = gemm_q8_0;
    t->types[GGML_TYPE_Q8_0].vec_dot = gemm_q8_0_dot;
    t->types[GGML_TYPE_IQ4_NL].gemm = gemm_iq4_nl;
    t->types[GGML_TYPE_IQ4_NL].vec_dot = gemm_iq4_nl_dot;
    t->types[GGML_TYPE_Q4_K].gemm = gemm_q4_K;
    t->types[GGML_TYPE_Q4_K].vec_dot = gemm_q4_K_dot;
    t->types[GGML_TYPE_Q5_K].gemm = gemm_q5_K;
    t->types[GGML_TYPE_Q5_K].vec_dot = gemm_q5_K_dot;
    t->types[GGML_TYPE_Q6_K].gemm = gemm_q6_K;
    t->types[GGML_TYPE_Q6_K].vec_dot = gemm_q6_K_dot;
    lowbit_fill(t);
    kernels_use_x4_prep(t, GGML_TYPE_Q4_0, gemm_q4_0x4, prep_q4_0x4, gemm_q4_0x4q);
    kernels_use_x4_prep(t, GGML_TYPE_Q5_0, gemm_q5_0x4, prep_q5_0x4, gemm_q5_0x4q);
    kernels_use_x4_prep(t, GGML_TYPE_IQ4_NL, gemm_iq4_nlx4, prep_iq4_nlx4, gemm_iq4_nlx4q);
    kernels_use_layout(t, INFER_TYPE_Q4_K_X4I, gemm_q4_Kx4i); /* Q4_K x4's quants by eight bytes */
    kernels_use_x4(t, GGML_TYPE_Q6_K, gemm_q6_Kx4);
    kernels_use_x4(t, GGML_TYPE_Q8_0, gemm_q8_0x4); /* the SDOT order (Q8_0 x4 of repack.h) */
    /* IQ4_NL x4 (above: vpdpbusd on codebook + 128) and Q3_K x4 (avx2's,
     * inherited) are repacked: on a Zen 5 avx2's x4 tiles alone beat this
     * variant's on the weights as stored (bench-kernels -t 1 -c -b -r 15 -n
     * 1|4 -s 8192x2048: IQ4_NL 32.3 -> 42.9 GMAC/s one token, 46.8 -> 65.6
     * four; Q3_K 30.0 -> 55.9, 50.0 -> 94.0); gemm_many on them is this
     * file's (VNNI). */
}
