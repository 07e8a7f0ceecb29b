/*
 * kernels.c - micro-benchmark of the matmul kernels, per variant and type
 * (built as contrib/bench/bench-kernels; not a test).
 *
 * Method (printed with the figures):
 *   GEMV   one token, n_out x n_in weights, the decode case (K-quants,
 *          whose rows are multiples of 256, take 2048x640 as 640x2048).  "hot": the same
 *          matrix every call (it may sit in L2/L3); "cold": calls rotate over
 *          copies of the matrix totalling at least -m MiB, so weights come
 *          from memory as in decode of a model larger than the caches.
 *          GB/s = weight bytes / time.
 *   GEMM   -n tokens (default 512) against the same matrix, the prefill case.
 *          GMAC/s = n_in * n_out * n_tok / time.
 *   Times are medians (-b: minimums) of -r repetitions (after one warm-up call) with the
 *   OpenMP thread count of the run (-t, default OMP_NUM_THREADS or all
 *   cores).  Activation quantization is included (it is part of matmul).
 *   "read" is a plain OpenMP sum over the cold buffer: the machine's read
 *   bandwidth, the ceiling for cold GEMV.  -H puts the cold set in 2 MiB
 *   transparent huge pages (as infer maps weights the page cache holds in 2 MiB
 *   folios); without it the set has the kernel's default pages.  With -c, times are CPU seconds of
 *   the process instead of wall time (divide by the thread count; useful on a
 *   shared, oversubscribed machine, meaningful with -t 1).
 *
 *   attention  (-T attn) Gemma 3 270M's shape (-s HEADSxKVxDIM another), decode
 *          at position 1023 and prefill of -n tokens, per variant (-A: against
 *          the other build, outputs compared).
 *
 * Usage: bench-kernels [-t threads] [-r reps] [-n n_tok] [-m MiB]
 *                      [-v variant,...] [-T type,...] [-q (quick: small shapes)]
 *                      [-c (CPU time instead of wall time)] [-s NOUTxNIN (one shape)]
 *                      [-H (cold set in huge pages)] [-b (best of -r, not median)]
 *                      [-G (GEMM only: no GEMV, no read-bandwidth probe)]
 *                      [-A LIB (A/B: GEMM of this build against another libinfer.so)]
 *                      [-P (the int8 dot-product peak of one core, per x86 variant)]
 *
 * -A: a second build of the library (e.g. a copy of the previous commit's
 * build/.libs/libinfer.so.0.0.0) is loaded with dlopen and its matmul timed
 * in alternation with this build's, call by call, on the same weights and
 * activations, for one variant (-v): on a shared machine both see the same
 * disturbances, so their ratio is steadier than two separate runs.
 */
#include <dlfcn.h>
#include <inttypes.h>
#include <math.h>
#include <sys/mman.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "infer.h"

#include "../../kernels/dispatch.h"
#include "../../kernels/matmul.h"
#include "../../kernels/quants.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* CPU seconds of the whole process (all threads). */
static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int use_cpu_time;
/* -b: the fastest repetition instead of the median (on a shared machine the
 * least disturbed one; with -c and -t 1 the figure for kernel work). */
static int use_best;

static uint64_t rng = 0x853c49e6748fea9bull;
static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Random valid rows: random bytes, then finite fp16 scales / float values. */
static void fill_weights(uint32_t type, uint8_t *w, int64_t n_rows, int64_t n_in)
{
    const struct ggml_type_traits *t = ggml_type_traits_get(type);
    const size_t bytes = ggml_row_size(type, n_in) * (size_t)n_rows;
    for (size_t i = 0; i + 8 <= bytes; i += 8) {
        const uint64_t v = next();
        memcpy(w + i, &v, 8);
    }
    const int64_t n_el = n_rows * n_in;
    if (type == GGML_TYPE_F32) {
        for (int64_t i = 0; i < n_el; i++)
            ((float *)w)[i] = (float)((int)(next() % 2001) - 1000) * 1e-4f;
        return;
    }
    if (type == GGML_TYPE_F16 || type == GGML_TYPE_BF16) {
        for (int64_t i = 0; i < n_el; i++) {
            const float v = (float)((int)(next() % 2001) - 1000) * 1e-4f;
            ((uint16_t *)w)[i] = type == GGML_TYPE_F16 ? fp32_to_fp16(v) : fp32_to_bf16(v);
        }
        return;
    }
    int off[2] = {-1, -1};
    switch (type) {
    case GGML_TYPE_Q4_0: case GGML_TYPE_Q5_0: case GGML_TYPE_Q8_0: case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ4_XS:
        off[0] = 0; break;
    case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_1: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: off[0] = 0, off[1] = 2; break;
    case GGML_TYPE_Q6_K: off[0] = 208; break;
    case GGML_TYPE_Q2_K: off[0] = 80, off[1] = 82; break;
    case GGML_TYPE_Q3_K: off[0] = 108; break;
    default: break;
    }
    const int64_t nb = n_el / t->block_size;
    const uint16_t h = fp32_to_fp16(0.01f);
    for (int64_t b = 0; b < nb; b++)
        for (int k = 0; k < 2; k++)
            if (off[k] >= 0)
                memcpy(w + (size_t)b * t->type_size + off[k], &h, 2);
}

struct shape {
    int64_t n_out, n_in;
};

/* A K-quant row must be whole super-blocks: 2048x640 becomes 640x2048. */
static struct shape fit(uint32_t type, struct shape s)
{
    if (s.n_in % ggml_type_traits_get(type)->block_size != 0) {
        const int64_t t = s.n_in;
        s.n_in = s.n_out;
        s.n_out = t;
    }
    return s;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    if (use_best)
        return v[0];
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

struct opts {
    int reps, n_tok, quick, gemm_only;
    const char *other;
    size_t cold_bytes;
    int huge;
    const char *variants, *types, *shape;
};

static int listed(const char *list, const char *name)
{
    if (!list)
        return 1;
    const size_t n = strlen(name);
    for (const char *p = list; *p;) {
        const char *e = strchr(p, ',');
        const size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncasecmp(p, name, n) == 0)
            return 1;
        if (!e)
            break;
        p = e + 1;
    }
    return 0;
}

/* fill_weights, for the x4 layouts too (random rows of the base type,
 * repacked). */
static void fill_matrix(uint32_t type, uint8_t *w, int64_t n_rows, int64_t n_in)
{
    const uint32_t base = repack_base_of(type);
    if (!base) {
        fill_weights(type, w, n_rows, n_in);
        return;
    }
    uint8_t *tmp = malloc(ggml_row_size(base, n_in) * (size_t)n_rows);
    if (!tmp) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    fill_weights(base, tmp, n_rows, n_in);
    repack_x4(type, tmp, w, n_in, n_rows);
    free(tmp);
}

/* The other build of -A: its matmul, set up for the variant and thread
 * count of this run. */
typedef int (*matmul_fn)(float *y, const void *w, uint32_t wtype, const float *x, int64_t n_in, int64_t n_out,
                         int64_t n_tok);
static matmul_fn other_matmul;

static int load_other(const char *path, const char *variant, int n_threads)
{
    /* DEEPBIND: its own calls bind to its own symbols, not to the copies
     * of this build that the program already has in the global scope */
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!h) {
        fprintf(stderr, "-A %s: %s\n", path, dlerror());
        return -1;
    }
    int (*init)(char *, size_t) = (int (*)(char *, size_t))dlsym(h, "kernels_init");
    int (*threads)(int) = (int (*)(int))dlsym(h, "pool_set_threads");
    other_matmul = (matmul_fn)dlsym(h, "matmul");
    char err[256] = "";
    if (!init || !threads || !other_matmul || setenv("INFER_KERNELS", variant, 1) != 0 ||
        init(err, sizeof(err)) != 0 || threads(n_threads) < 0) {
        fprintf(stderr, "-A %s: cannot set it up for %s %s\n", path, variant, err);
        return -1;
    }
    return 0;
}

/* Median (-b: best) seconds of this build's and the other build's matmul,
 * calls alternated. */
static void time_ab(uint32_t type, const uint8_t *w, const float *x, float *y, int64_t n_in, int64_t n_out,
                    int64_t n_tok, int reps, double *self, double *other)
{
    double t[2][64];
    if (reps > 64)
        reps = 64;
    if (matmul(y, w, type, x, n_in, n_out, n_tok) != 0 || other_matmul(y, w, type, x, n_in, n_out, n_tok) != 0) {
        fprintf(stderr, "matmul failed\n");
        exit(1);
    }
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < 2; k++) {
            const double t0 = use_cpu_time ? cpu_now() : now();
            (k ? other_matmul : matmul)(y, w, type, x, n_in, n_out, n_tok);
            t[k][r] = (use_cpu_time ? cpu_now() : now()) - t0;
        }
    *self = median(t[0], reps);
    *other = median(t[1], reps);
}

/* Median seconds of one matmul over `copies` rotating weight copies. */
static double time_matmul(uint32_t type, uint8_t *w, size_t mat_bytes, int copies, const float *x, float *y,
                          int64_t n_in, int64_t n_out, int64_t n_tok, int reps)
{
    double t[64];
    if (reps > 64)
        reps = 64;
    if (matmul(y, w, type, x, n_in, n_out, n_tok) != 0) { /* warm-up */
        fprintf(stderr, "matmul failed: %s\n", infer_last_error());
        exit(1);
    }
    for (int r = 0; r < reps; r++) {
        const uint8_t *wr = w + (size_t)((r + 1) % copies) * mat_bytes;
        const double t0 = use_cpu_time ? cpu_now() : now();
        matmul(y, wr, type, x, n_in, n_out, n_tok);
        t[r] = (use_cpu_time ? cpu_now() : now()) - t0;
    }
    return median(t, reps);
}

static double read_bandwidth(const uint8_t *buf, size_t bytes, int reps)
{
    double t[64], best;
    uint64_t sink = 0;
    if (reps > 64)
        reps = 64;
    for (int r = 0; r < reps; r++) {
        const double t0 = now();
        uint64_t s = 0;
        const uint64_t *p = (const uint64_t *)buf;
        const int64_t n = (int64_t)(bytes / 8);
#pragma omp parallel for reduction(+ : s) schedule(static)
        for (int64_t i = 0; i < n; i++)
            s += p[i];
        t[r] = now() - t0;
        sink += s;
    }
    best = median(t, reps);
    if (sink == 42)
        printf("(sink)\n");
    return (double)bytes / best / 1e9;
}

/* The other build's kernel table for a variant (-A), for its attention. */
static int other_variant_fill(const char *path, const char *variant, struct kernel_table *t)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    size_t (*n_var)(void) = h ? (size_t (*)(void))dlsym(h, "kernels_n_variants") : NULL;
    const char *(*name)(size_t) = h ? (const char *(*)(size_t))dlsym(h, "kernels_variant_name") : NULL;
    int (*fill)(size_t, struct kernel_table *) = h ? (int (*)(size_t, struct kernel_table *))dlsym(h, "kernels_variant_fill") : NULL;
    if (!n_var || !name || !fill)
        return -1;
    for (size_t v = 0; v < n_var(); v++)
        if (!strcmp(name(v), variant))
            return fill(v, t);
    return -1;
}

/* Attention over F16 K/V blocks (Gemma 3 270M shape: 4 query heads, 1 KV
 * head of 256; -s HEADSxKVxDIM another, e.g. 16x8x128 for Qwen3 0.6B): decode
 * (one token at position 1023) and prefill (-n tokens at positions 0..n-1),
 * per variant.  "-T attn" selects it alone.  With -A, the other build's
 * attention is timed in alternation and its outputs compared bit for bit. */
static void bench_attention(const struct opts *o)
{
    int nh = 4, nkv = 1, hd = 256;
    int sh[3];
    if (o->shape && sscanf(o->shape, "%dx%dx%d", &sh[0], &sh[1], &sh[2]) == 3 && sh[0] > 0 && sh[1] > 0 &&
        sh[0] % sh[1] == 0 && sh[2] > 0) {
        nh = sh[0];
        nkv = sh[1];
        hd = sh[2];
    }
    const int bt = 32, n_ctx = 1024 > o->n_tok ? 1024 : o->n_tok;
    const int n_blocks = (n_ctx + bt - 1) / bt;
    const size_t head_bytes = (size_t)bt * hd * 2, block_bytes = 2 * (size_t)nkv * head_bytes;
    uint8_t *arena = malloc(block_bytes * (size_t)n_blocks);
    int32_t *table = malloc((size_t)n_blocks * sizeof(int32_t));
    const int64_t n_tok = o->n_tok;
    const int32_t **tables = malloc((size_t)n_tok * sizeof(*tables));
    int64_t *pos = malloc((size_t)n_tok * sizeof(int64_t));
    float *q = malloc((size_t)n_tok * nh * hd * sizeof(float)), *out = malloc((size_t)n_tok * nh * hd * sizeof(float));
    float *out2 = malloc((size_t)n_tok * nh * hd * sizeof(float));
    if (!arena || !table || !tables || !pos || !q || !out || !out2) {
        fprintf(stderr, "out of memory for the attention benchmark\n");
        exit(1);
    }
    for (size_t i = 0; i < block_bytes * (size_t)n_blocks / 2; i++)
        ((uint16_t *)arena)[i] = fp32_to_fp16((float)((int)(next() % 2001) - 1000) * 1e-3f);
    for (int b = 0; b < n_blocks; b++)
        table[b] = b;
    for (int64_t i = 0; i < n_tok * nh * hd; i++)
        q[i] = (float)((int)(next() % 2001) - 1000) * 1e-3f;
    struct attn_kv kv = {
        .base = arena, .block_bytes = block_bytes, .k_off = 0, .v_off = (size_t)nkv * head_bytes,
        .head_bytes = head_bytes, .block_tokens = bt, .blocks = tables, .pos = pos,
    };
    printf("\nattention, %d heads / %d KV heads of %d, F16 K/V in blocks of %d:\n", nh, nkv, hd, bt);
    for (size_t v = 0; v < kernels_n_variants(); v++) {
        struct kernel_table t;
        if (!listed(o->variants, kernels_variant_name(v)) || kernels_variant_fill(v, &t) != 0)
            continue;
        struct kernel_table ot;
        const bool ab = o->other && other_variant_fill(o->other, t.name, &ot) == 0 && ot.attention;
        for (int mode = 0; mode < 2; mode++) {
            const int64_t nt = mode == 0 ? 1 : n_tok;
            for (int64_t i = 0; i < nt; i++) {
                tables[i] = table;
                pos[i] = mode == 0 ? 1023 : i;
            }
            double tm[2][64];
            const int reps = o->reps < 64 ? o->reps : 64;
            t.attention(out, q, nt, &kv, nh, nkv, hd, 0.0625f, 0);
            if (ab)
                ot.attention(out2, q, nt, &kv, nh, nkv, hd, 0.0625f, 0);
            for (int r = 0; r < reps; r++)
                for (int w = 0; w < (ab ? 2 : 1); w++) {
                    const double t0 = use_cpu_time ? cpu_now() : now();
                    (w ? ot : t).attention(w ? out2 : out, q, nt, &kv, nh, nkv, hd, 0.0625f, 0);
                    tm[w][r] = (use_cpu_time ? cpu_now() : now()) - t0;
                }
            printf("%-7s %-8s %5lld tokens %10.3f ms", t.name, mode == 0 ? "decode" : "prefill", (long long)nt,
                   median(tm[0], reps) * 1e3);
            if (ab)
                printf("  (-A: %.3f ms, this/-A %.2fx; outputs %s)", median(tm[1], reps) * 1e3,
                       median(tm[1], reps) / median(tm[0], reps),
                       memcmp(out, out2, (size_t)nt * nh * hd * sizeof(float)) ? "DIFFER" : "bit-identical");
            printf("\n");
        }
    }
    free(arena);
    free(table);
    free(tables);
    free(pos);
    free(q);
    free(out);
    free(out2);
}

/* ---------------- -P: the int8 multiply-add peak of this core ---------------- */
/* Independent chains of the int8 dot-product instruction each x86 variant's
 * tiles are built on, timed in CPU seconds of one thread: the ceiling the
 * GEMM figures are compared with (README, issue 19).  NCH chains hide the
 * instruction's latency; the result is summed so nothing is optimised away. */
#if defined(__x86_64__)
#include <immintrin.h>
#define NCH 12
#define PEAK_BODY(VEC, SET1, STEP, ADD, STORE, LANES)                                                         \
    VEC acc[NCH];                                                                                             \
    const VEC a = SET1(0x01020304), b = SET1(0x05060708);                                                     \
    _Pragma("GCC unroll 16") for (int c = 0; c < NCH; c++) acc[c] = SET1(c);                                 \
    for (long i = 0; i < iters; i++) {                                                                        \
        _Pragma("GCC unroll 16") for (int c = 0; c < NCH; c++) acc[c] = STEP(acc[c], a, b);                   \
    }                                                                                                         \
    VEC t = acc[0];                                                                                           \
    _Pragma("GCC unroll 16") for (int c = 1; c < NCH; c++) t = ADD(t, acc[c]);                                \
    int32_t out[LANES];                                                                                       \
    STORE((void *)out, t);                                                                                    \
    return out[0];

__attribute__((target("avx512f,avx512vnni"))) static int32_t peak_avx512(long iters)
{
    PEAK_BODY(__m512i, _mm512_set1_epi32, _mm512_dpbusd_epi32, _mm512_add_epi32, _mm512_storeu_si512, 16)
}
__attribute__((target("avx2,avxvnni"))) static int32_t peak_avxvnni(long iters)
{
    PEAK_BODY(__m256i, _mm256_set1_epi32, _mm256_dpbusd_avx_epi32, _mm256_add_epi32, _mm256_storeu_si256, 8)
}
/* avx2 has no int8 dot product: the exact step of a signed 8-bit x 8-bit
 * block (Q8_0's, 32 multiply-adds): |w| (vpabsb, once per weight vector),
 * the activations with w's signs (vpsignb), u8 x s8 pairs to int16
 * (vpmaddubsw), pairs of those to int32 (vpmaddwd by ones), accumulated
 * (vpaddd).  The weights come from a small table in L1 (a different vector
 * each step, as in a tile), since with constant operands the compiler
 * hoists the multiplies out of the loop and only the additions are timed
 * (what this figure measured before the fifteenth session).  The 4-bit
 * tiles sum in int16 before widening and can pass this rate. */
__attribute__((target("avx2"))) static int32_t peak_avx2(long iters)
{
    static __m256i wt[64];
    for (int i = 0; i < 64; i++)
        wt[i] = _mm256_set1_epi8((char)(i * 7 - 100));
    const __m256i ones = _mm256_set1_epi16(1);
    __m256i a[4], acc[8];
    for (int t = 0; t < 4; t++)
        a[t] = _mm256_set1_epi8((char)(5 + 11 * t));
    for (int c = 0; c < 8; c++)
        acc[c] = _mm256_setzero_si256();
    for (long i = 0; i < iters; i++) {
        const __m256i *wp = wt + (i & 15) * 4;
        _Pragma("GCC unroll 2") for (int r = 0; r < 2; r++) {
            __m256i w;
            memcpy(&w, &wp[r], sizeof(w));
            const __m256i wa = _mm256_abs_epi8(w);
            _Pragma("GCC unroll 4") for (int t = 0; t < 4; t++) acc[4 * r + t] =
                _mm256_add_epi32(acc[4 * r + t], _mm256_madd_epi16(_mm256_maddubs_epi16(wa, _mm256_sign_epi8(a[t], w)), ones));
        }
    }
    __m256i t = acc[0];
    for (int c = 1; c < 8; c++)
        t = _mm256_add_epi32(t, acc[c]);
    return _mm256_extract_epi32(t, 0);
}

static void peak_run(const char *name, int32_t (*fn)(long), double macs_per_step, int steps_per_iter)
{
    const long iters = 20000000;
    double best = 1e30;
    int32_t sink = 0;
    for (int r = 0; r < 5; r++) {
        const double t0 = cpu_now();
        sink += fn(iters);
        const double dt = cpu_now() - t0;
        if (dt < best)
            best = dt;
    }
    const double steps = (double)iters * steps_per_iter;
    printf("%-8s %6.2f G steps/s x %3.0f MACs = %6.1f GMAC/s per core (best of 5, CPU time; %d)\n", name,
           steps / best * 1e-9, macs_per_step, steps * macs_per_step / best * 1e-9, (int)(sink & 1));
}

static int peak(void)
{
    printf("int8 dot-product peak of one core: %d independent chains, one thread\n", NCH);
    if (__builtin_cpu_supports("avx512vnni"))
        peak_run("avx512", peak_avx512, 64, NCH);
    if (__builtin_cpu_supports("avxvnni"))
        peak_run("avxvnni", peak_avxvnni, 32, NCH);
    if (__builtin_cpu_supports("avx2"))
        peak_run("avx2", peak_avx2, 32, 8);
    printf("(a step: one vpdpbusd (avx512, avxvnni); avx2: vpsignb, vpmaddubsw, vpmaddwd, vpaddd and a share of a\n"
           " vpabsb, the exact signed 8-bit block step, weights from L1)\n");
    return 0;
}
#else
static int peak(void)
{
    fprintf(stderr, "-P: x86-64 only\n");
    return 2;
}
#endif

int main(int argc, char **argv)
{
    struct opts o = {.reps = 7, .n_tok = 512, .quick = 0, .cold_bytes = (size_t)512 << 20};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "-t") && v) {
#ifdef _OPENMP
            omp_set_num_threads(atoi(v));
#endif
            i++;
        } else if (!strcmp(a, "-r") && v) {
            o.reps = atoi(v), i++;
        } else if (!strcmp(a, "-n") && v) {
            o.n_tok = atoi(v), i++;
        } else if (!strcmp(a, "-m") && v) {
            o.cold_bytes = (size_t)atol(v) << 20, i++;
        } else if (!strcmp(a, "-v") && v) {
            o.variants = v, i++;
        } else if (!strcmp(a, "-T") && v) {
            o.types = v, i++;
        } else if (!strcmp(a, "-q")) {
            o.quick = 1;
        } else if (!strcmp(a, "-c")) {
            use_cpu_time = 1;
        } else if (!strcmp(a, "-b")) {
            use_best = 1;
        } else if (!strcmp(a, "-A") && v) {
            o.other = v, i++;
        } else if (!strcmp(a, "-G")) {
            o.gemm_only = 1;
        } else if (!strcmp(a, "-P")) {
            return peak();
        } else if (!strcmp(a, "-H")) {
            o.huge = 1;
        } else if (!strcmp(a, "-s") && v) {
            o.shape = v, i++;
        } else {
            fprintf(stderr,
                    "usage: %s [-t threads] [-r reps] [-n n_tok] [-m MiB] [-v variants] [-T types] [-q] [-c]"
                    " [-s NOUTxNIN] [-H] [-b] [-G] [-A LIB] [-P]\n",
                    argv[0]);
            return 2;
        }
    }
    if (o.reps < 1)
        o.reps = 1;
    int n_threads = 1;
#ifdef _OPENMP
    n_threads = omp_get_max_threads();
#endif
    if (o.other && (!o.variants || strchr(o.variants, ',') || load_other(o.other, o.variants, n_threads) != 0)) {
        fprintf(stderr, "-A needs one variant (-v) and a loadable libinfer\n");
        return 2;
    }
    char feats[256];
    cpu_features_format(cpu_features_get(), feats, sizeof(feats));
    printf("bench-kernels: %d threads, %s of %d, GEMM n_tok %d, cold set %zu MiB, %s time\n", n_threads,
           use_best ? "best" : "median", o.reps,
           o.n_tok, o.cold_bytes >> 20, use_cpu_time ? "process CPU" : "wall");
    printf("cpu features: %s\n", feats);
    printf("GEMV GB/s = weight bytes / time (hot: one matrix, cold: rotating copies); "
           "GEMM GMAC/s = n_in*n_out*n_tok / time; activation quantization included\n");

    static const uint32_t types[] = {GGML_TYPE_Q4_0,     GGML_TYPE_Q8_0,     GGML_TYPE_Q5_0,      GGML_TYPE_Q4_K,
                                     GGML_TYPE_Q5_K,     GGML_TYPE_Q6_K,     GGML_TYPE_F16,       GGML_TYPE_BF16,
                                     GGML_TYPE_F32,      INFER_TYPE_Q4_0_X4, INFER_TYPE_Q5_0_X4,  INFER_TYPE_Q4_K_X4,
                                     INFER_TYPE_Q6_K_X4, INFER_TYPE_Q8_0_X4, INFER_TYPE_Q4_0_X4S, GGML_TYPE_Q2_K,
                                     GGML_TYPE_Q3_K,     GGML_TYPE_IQ4_NL,   GGML_TYPE_IQ4_XS, INFER_TYPE_IQ4_NL_X4,
                                     INFER_TYPE_Q3_K_X4, INFER_TYPE_Q4_K_X4I};
    static const struct shape gemv_full[] = {{2048, 640}, {4096, 4096}}, gemv_quick[] = {{2048, 640}};
    static const struct shape gemm_full[] = {{2048, 640}, {4096, 4096}}, gemm_quick[] = {{2048, 640}};
    const struct shape *gv = o.quick ? gemv_quick : gemv_full, *gm = o.quick ? gemm_quick : gemm_full;
    int n_gv = o.quick ? 1 : 2, n_gm = o.quick ? 1 : 2;
    struct shape custom = {0, 0};
    if (o.shape && sscanf(o.shape, "%" SCNd64 "x%" SCNd64, &custom.n_out, &custom.n_in) == 2 && custom.n_out > 0 &&
        custom.n_in > 0) {
        gv = gm = &custom;
        n_gv = n_gm = 1;
    }

    const size_t H = (size_t)2 << 20, map_bytes = (o.cold_bytes + 64 + H - 1) / H * H + H;
    uint8_t *map = mmap(NULL, map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    uint8_t *cold = map == MAP_FAILED ? NULL : (uint8_t *)(((uintptr_t)map + H - 1) & ~(uintptr_t)(H - 1));
    if (cold)
        madvise(cold, map_bytes - H, o.huge ? MADV_HUGEPAGE : MADV_NOHUGEPAGE);
    if (!cold) {
        fprintf(stderr, "out of memory for the cold set\n");
        return 1;
    }
    memset(cold, 1, o.cold_bytes);
    if (!o.gemm_only)
        printf("read bandwidth (plain sum over %zu MiB, %s pages): %.1f GB/s\n\n", o.cold_bytes >> 20,
           o.huge ? "2 MiB" : "default", read_bandwidth(cold, o.cold_bytes, o.reps));
    printf("%-7s %-6s %-5s %-11s %-5s %10s %9s %9s\n", "variant", "type", "op", "n_out x n_in", "set", "time ms",
           "GB/s", "GMAC/s");

    int64_t max_in = 4096, max_out = 4096;
    if (custom.n_in > max_in)
        max_in = custom.n_in;
    if (custom.n_out > max_out)
        max_out = custom.n_out;
    float *x = malloc((size_t)o.n_tok * (size_t)max_in * sizeof(float));
    float *y = malloc((size_t)o.n_tok * (size_t)max_out * sizeof(float));
    if (!x || !y) {
        fprintf(stderr, "out of memory for activations\n");
        return 1;
    }
    for (int64_t i = 0; i < (int64_t)o.n_tok * max_in; i++)
        x[i] = (float)((int)(next() % 2001) - 1000) * 1e-3f;

    for (size_t v = 0; v < kernels_n_variants(); v++) {
        struct kernel_table t;
        if (!listed(o.variants, kernels_variant_name(v)) || kernels_variant_fill(v, &t) != 0)
            continue;
        kern = t;
        for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
            const uint32_t type = types[k];
            const char *tn = ggml_type_traits_get(type)->name;
            if (!listed(o.types, tn))
                continue;
            /* a repacked layout only where the variant has kernels for it */
            if (repack_base_of(type) && t.types[repack_base_of(type)].repack_type != type)
                continue;
            for (int s0 = 0; s0 < (o.gemm_only ? 0 : n_gv); s0++) {
                const struct shape sh = fit(type, gv[s0]), *gvs = &sh;
                const int s = 0;
                const size_t mb = ggml_row_size(type, gvs[s].n_in) * (size_t)gvs[s].n_out;
                int copies = (int)(o.cold_bytes / mb);
                if (copies < 1)
                    copies = 1;
                fill_matrix(type, cold, gvs[s].n_out, gvs[s].n_in);
                for (int c = 1; c < copies; c++)
                    memcpy(cold + (size_t)c * mb, cold, mb);
                const double th = time_matmul(type, cold, mb, 1, x, y, gvs[s].n_in, gvs[s].n_out, 1, o.reps * 3);
                const double tc = time_matmul(type, cold, mb, copies, x, y, gvs[s].n_in, gvs[s].n_out, 1, o.reps * 3);
                const double macs = (double)gvs[s].n_in * gvs[s].n_out;
                printf("%-7s %-6s %-5s %5lldx%-5lld %-5s %10.4f %9.2f %9.2f\n", t.name, tn, "gemv",
                       (long long)gvs[s].n_out, (long long)gvs[s].n_in, "hot", th * 1e3, mb / th / 1e9,
                       macs / th / 1e9);
                printf("%-7s %-6s %-5s %5lldx%-5lld %-5s %10.4f %9.2f %9.2f\n", t.name, tn, "gemv",
                       (long long)gvs[s].n_out, (long long)gvs[s].n_in, "cold", tc * 1e3, mb / tc / 1e9,
                       macs / tc / 1e9);
            }
            for (int s0 = 0; s0 < n_gm; s0++) {
                const struct shape sh = fit(type, gm[s0]), *gms = &sh;
                const int s = 0;
                const size_t mb = ggml_row_size(type, gms[s].n_in) * (size_t)gms[s].n_out;
                fill_matrix(type, cold, gms[s].n_out, gms[s].n_in);
                const double macs = (double)gms[s].n_in * gms[s].n_out * o.n_tok;
                /* the reference is slow: one timed call for big products */
                const int reps = strcmp(t.name, "ref") == 0 && macs > 2e9 ? 1 : o.reps;
                if (o.other) {
                    double ts, to;
                    time_ab(type, cold, x, y, gms[s].n_in, gms[s].n_out, o.n_tok, reps, &ts, &to);
                    printf("%-7s %-6s %-5s %5lldx%-5lld %-5s %10.3f %9.2f %9.2f  (-A: %.2f GMAC/s, this/-A %.2fx)\n",
                           t.name, tn, "gemm", (long long)gms[s].n_out, (long long)gms[s].n_in, "hot", ts * 1e3,
                           mb / ts / 1e9, macs / ts / 1e9, macs / to / 1e9, to / ts);
                    continue;
                }
                const double tm = time_matmul(type, cold, mb, 1, x, y, gms[s].n_in, gms[s].n_out, o.n_tok, reps);
                printf("%-7s %-6s %-5s %5lldx%-5lld %-5s %10.3f %9.2f %9.2f\n", t.name, tn, "gemm",
                       (long long)gms[s].n_out, (long long)gms[s].n_in, "hot", tm * 1e3, mb / tm / 1e9,
                       macs / tm / 1e9);
            }
            fflush(stdout);
        }
    }
    if (listed(o.types, "attn"))
        bench_attention(&o);
    munmap(map, map_bytes);
    free(x);
    free(y);
    return 0;
}
