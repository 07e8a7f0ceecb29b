/*
 * x86_util.h - the small helpers every x86 kernel file uses: inlining and
 * unrolling, unaligned 16/32-bit loads, F16 -> float, byte sums and the
 * block sizes of the quant types.  Each kernel file is compiled with its
 * own variant's flags and includes this once; these need AVX2 and F16C,
 * which every x86 variant has.
 */
#ifndef INFER_X86_UTIL_H
#define INFER_X86_UTIL_H

#include <immintrin.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "../quants.h"

#define INLINE static inline __attribute__((always_inline))
/* Fully unroll the short constant loops (rows, tokens, chunks), so that
 * their vector arrays live in registers. */
#define UNROLL _Pragma("GCC unroll 16")

INLINE float h2f(ggml_half h) { return _cvtsh_ss(h); }

INLINE uint16_t ld16(const void *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

INLINE uint32_t ld32(const void *p)
{
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

/* Sum of the 32 unsigned bytes of v. */
INLINE int sum_u8(__m256i v)
{
    const __m256i s = _mm256_sad_epu8(v, _mm256_setzero_si256());
    const __m128i h = _mm_add_epi64(_mm256_castsi256_si128(s), _mm256_extracti128_si256(s, 1));
    return (int)(_mm_cvtsi128_si64(h) + _mm_extract_epi64(h, 1));
}

/* Bytes of a block of the 32-element types (Q4_0, Q5_0, Q8_0) and of the
 * K-quants' super-blocks (Q4_K, Q5_K, Q6_K). */
INLINE size_t bbytes32(const int type)
{
    return type == GGML_TYPE_Q4_0 ? sizeof(block_q4_0) : type == GGML_TYPE_Q5_0 ? sizeof(block_q5_0)
                                                                               : sizeof(block_q8_0);
}

INLINE size_t kbytes(const int type)
{
    return type == GGML_TYPE_Q4_K ? sizeof(block_q4_K) : type == GGML_TYPE_Q5_K ? sizeof(block_q5_K)
                                                                               : sizeof(block_q6_K);
}

#endif
