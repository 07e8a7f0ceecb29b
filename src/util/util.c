/*
 * util.c - clocks, CPU counts and SHA-256 (FIPS 180-4), used for model
 * fingerprints and download verification.
 */
#include "common.h"

#include <string.h>
#include <time.h>
#include <unistd.h>

double infer_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int infer_n_cpus(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

/* Physical cores: distinct (physical id, core id) pairs in /proc/cpuinfo,
 * falling back to the online CPU count (e.g. on ARM, where every CPU is a core). */
int infer_n_physical_cores(void)
{
    FILE *f = fopen("/proc/cpuinfo", "r");
    if (!f)
        return infer_n_cpus();
    char line[256];
    int phys = -1, n = 0;
    int seen[1024][2];
    while (fgets(line, sizeof(line), f)) {
        int v;
        if (sscanf(line, "physical id : %d", &v) == 1) {
            phys = v;
        } else if (sscanf(line, "core id : %d", &v) == 1) {
            int dup = 0;
            for (int i = 0; i < n; i++)
                if (seen[i][0] == phys && seen[i][1] == v)
                    dup = 1;
            if (!dup && n < 1024) {
                seen[n][0] = phys;
                seen[n][1] = v;
                n++;
            }
        }
    }
    fclose(f);
    return n > 0 ? n : infer_n_cpus();
}

/* ---- SHA-256 ---- */

static const uint32_t K256[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2,
};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void sha256_block(sha256_ctx *c, const uint8_t *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = c->state[0], b = c->state[1], cc = c->state[2], d = c->state[3];
    uint32_t e = c->state[4], f = c->state[5], g = c->state[6], h = c->state[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = h + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K256[i] + w[i];
        uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & cc) ^ (b & cc));
        h = g;
        g = f;
        f = e;
        e = d + t1;
        d = cc;
        cc = b;
        b = a;
        a = t1 + t2;
    }
    c->state[0] += a;
    c->state[1] += b;
    c->state[2] += cc;
    c->state[3] += d;
    c->state[4] += e;
    c->state[5] += f;
    c->state[6] += g;
    c->state[7] += h;
}

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>

/* CPUID leaf 7: EBX bit 29 = SHA extensions. */
static bool cpu_has_sha(void)
{
    static int has = -1;
    if (has < 0) {
        unsigned a, b, c, d;
        has = __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b >> 29 & 1) && __builtin_cpu_supports("sse4.1");
    }
    return has;
}
/* The same compression with the SHA extensions (Goldmont and later Atoms
 * such as the N100, Ice Lake and later cores, Zen): sha256rnds2 does two
 * rounds on the state held as (A, B, E, F) and (C, D, G, H), sha256msg1 and
 * sha256msg2 the two halves of the message schedule
 *     W[t] = s1(W[t-2]) + W[t-7] + s0(W[t-15]) + W[t-16],
 * four words per vector.  ~5x the portable loop: hashing a model for the
 * repacked-weight cache key is a pass over the whole file. */
__attribute__((target("sha,sse4.1"))) static void sha256_blocks_ni(uint32_t state[8], const uint8_t *p, size_t nblk)
{
    const __m128i bswap = _mm_set_epi8(12, 13, 14, 15, 8, 9, 10, 11, 4, 5, 6, 7, 0, 1, 2, 3);
    const __m128i dcba = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)state), 0xB1); /* b a d c */
    const __m128i hgfe = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)(state + 4)), 0x1B);
    __m128i abef = _mm_alignr_epi8(dcba, hgfe, 8);
    __m128i cdgh = _mm_blend_epi16(hgfe, dcba, 0xF0);
    for (; nblk > 0; nblk--, p += 64) {
        const __m128i abef0 = abef, cdgh0 = cdgh;
        __m128i m[4];
        for (int j = 0; j < 16; j++) {
            if (j < 4) {
                m[j] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * j)), bswap);
            } else { /* W[4j..4j+3] from the four vectors before (slot j % 4 holds W[4j-16..]) */
                __m128i x = _mm_sha256msg1_epu32(m[j % 4], m[(j + 1) % 4]);
                x = _mm_add_epi32(x, _mm_alignr_epi8(m[(j + 3) % 4], m[(j + 2) % 4], 4));
                m[j % 4] = _mm_sha256msg2_epu32(x, m[(j + 3) % 4]);
            }
            const __m128i k = _mm_loadu_si128((const __m128i *)(K256 + 4 * j));
            const __m128i wk = _mm_add_epi32(m[j % 4], k);
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);
            abef = _mm_sha256rnds2_epu32(abef, cdgh, _mm_shuffle_epi32(wk, 0x0E));
        }
        abef = _mm_add_epi32(abef, abef0);
        cdgh = _mm_add_epi32(cdgh, cdgh0);
    }
    const __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
    const __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128((__m128i *)state, _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128((__m128i *)(state + 4), _mm_alignr_epi8(dchg, feba, 8));
}
#endif

static bool sha256_portable_only;

bool sha256_use_portable(bool on)
{
    const bool was = sha256_portable_only;
    sha256_portable_only = on;
    return was;
}

/* nblk 64-byte blocks into the state. */
static void sha256_blocks(sha256_ctx *c, const uint8_t *p, size_t nblk)
{
#if defined(__x86_64__)
    if (!sha256_portable_only && cpu_has_sha()) {
        sha256_blocks_ni(c->state, p, nblk);
        return;
    }
#endif
    for (; nblk > 0; nblk--, p += 64)
        sha256_block(c, p);
}

void sha256_init(sha256_ctx *c)
{
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(c->state, iv, sizeof(iv));
    c->bitlen = 0;
    c->buflen = 0;
}

void sha256_update(sha256_ctx *c, const void *data, size_t n)
{
    const uint8_t *p = data;
    c->bitlen += (uint64_t)n * 8;
    if (c->buflen) {
        size_t take = 64 - c->buflen < n ? 64 - c->buflen : n;
        memcpy(c->buf + c->buflen, p, take);
        c->buflen += (uint32_t)take;
        p += take;
        n -= take;
        if (c->buflen == 64) {
            sha256_blocks(c, c->buf, 1);
            c->buflen = 0;
        }
    }
    sha256_blocks(c, p, n / 64);
    p += n / 64 * 64;
    n %= 64;
    memcpy(c->buf, p, n);
    c->buflen += (uint32_t)n;
}

void sha256_final(sha256_ctx *c, uint8_t out[32])
{
    uint64_t bitlen = c->bitlen;
    uint8_t pad = 0x80;
    sha256_update(c, &pad, 1);
    uint8_t zero = 0;
    while (c->buflen != 56)
        sha256_update(c, &zero, 1);
    uint8_t len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (uint8_t)(bitlen >> (56 - 8 * i));
    sha256_update(c, len, 8);
    for (int i = 0; i < 8; i++) {
        out[4 * i] = (uint8_t)(c->state[i] >> 24);
        out[4 * i + 1] = (uint8_t)(c->state[i] >> 16);
        out[4 * i + 2] = (uint8_t)(c->state[i] >> 8);
        out[4 * i + 3] = (uint8_t)c->state[i];
    }
}
