/*
 * test-kernels-simd.c - every kernel variant this CPU can run (dispatch.h:
 * avx512, avx2, neon, ...) against the scalar reference, on random data of
 * odd sizes with tails, for every weight type and every f32 op.  Variants
 * the CPU cannot run are skipped (cmocka skip()).
 *
 * What is compared, and the thresholds (see each check):
 *   quantizers     the activation quantizers must give the reference's bytes
 *                  (Q8_0, Q8_K: the dots are specified on those bytes).
 *   vec_dot        normalized error |got - ref| / sum_i |w_i a_i| (w, a as the
 *                  kernel sees them, dequantized) below a per-type bound:
 *                  integer types sum blocks exactly and then do the
 *                  reference's few float operations per block, so they are
 *                  held to bit equality where the variant claims it
 *                  (exact_int) and to 1e-6 otherwise; float types (F32, F16,
 *                  BF16) accumulate n/lanes float products per lane instead
 *                  of the reference's double sum: bound (n/8 + 16) * 2^-24.
 *   gemm           bit-identical to the same table's vec_dot for every
 *                  (row, token) and every nt (matmul mixes the two); the
 *                  same for gemm_many where a variant has one, and its
 *                  fused gate/up form gives silu or gelu (the table's) of
 *                  one vec_dot times the other.
 *   matmul         the variant's matmul (GEMV and GEMM paths, odd row
 *                  counts, n_tok 1..9 and either side of the type's
 *                  crossover into gemm_many, unaligned rows) within the vec_dot
 *                  bound of the reference matmul; each token's outputs equal
 *                  a single-token matmul's bits, and the thread count does
 *                  not matter.
 *   ops            as documented per op below (and attention, which the
 *                  dispatch table carries with the ops); silu and gelu
 *                  give an element the same bits alone as in a row.
 */
#include "test-common.h"

#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../kernels/dispatch.h"
#include "../kernels/matmul.h"
#include "../kernels/ops.h"
#include "../kernels/quants.h"
#include "check-argmax.h"

/* ------------------------------ helpers ------------------------------ */

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint64_t rng_u64(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static double rng_uniform(void) { return (double)(rng_u64() >> 11) * 0x1p-53; }

static float rng_gauss(void)
{
    double u1 = rng_uniform(), u2 = rng_uniform();
    if (u1 < 1e-300)
        u1 = 1e-300;
    return (float)(sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2));
}

/* n floats: gaussian groups of 32 with magnitudes over 10^3, a zero group,
 * an outlier and an exact tie of opposite signs (the Q8_K sign rule). */
static void fill_activations(float *x, int64_t n)
{
    float scale = 1.0f;
    for (int64_t i = 0; i < n; i++) {
        if (i % 32 == 0)
            scale = (float)pow(10.0, -2.0 + 3.0 * rng_uniform());
        x[i] = rng_gauss() * scale;
    }
    if (n >= 128)
        memset(x + 64, 0, 32 * sizeof(float));
    if (n >= 8) {
        x[n / 3] = 25.0f;
        x[n / 3 + 1] = -25.0f;
    }
}

static const char *tname(uint32_t type) { return ggml_type_traits_get(type)->name; }

static size_t row_bytes(uint32_t type, int64_t n)
{
    const size_t s = ggml_row_size(type, n);
    assert_true(s > 0);
    return s;
}

/* Random valid rows of a weight type: random bits everywhere (so Q8_0 gets
 * -128 and the K-quants every scale), finite fp16 scales. */
static void random_rows(uint32_t type, uint8_t *dst, int64_t n_rows, int64_t n)
{
    const struct ggml_type_traits *t = ggml_type_traits_get(type);
    const size_t rb = row_bytes(type, n);
    if (type == GGML_TYPE_F32 || type == GGML_TYPE_F16 || type == GGML_TYPE_BF16) {
        for (int64_t r = 0; r < n_rows; r++) {
            for (int64_t i = 0; i < n; i++) {
                const float v = rng_gauss() * 0.1f;
                uint8_t *p = dst + (size_t)r * rb;
                if (type == GGML_TYPE_F32) {
                    memcpy(p + 4 * i, &v, 4);
                } else {
                    const uint16_t h = type == GGML_TYPE_F16 ? fp32_to_fp16(v) : fp32_to_bf16(v);
                    memcpy(p + 2 * i, &h, 2);
                }
            }
        }
        return;
    }
    for (size_t i = 0; i < rb * (size_t)n_rows; i++)
        dst[i] = (uint8_t)rng_u64();
    int off[2] = {-1, -1};
    switch (type) {
    case GGML_TYPE_Q4_0: case GGML_TYPE_Q5_0: case GGML_TYPE_Q8_0: case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ4_XS:
        off[0] = 0; break;
    case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_1: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: off[0] = 0, off[1] = 2; break;
    case GGML_TYPE_Q6_K: off[0] = 208; break;
    case GGML_TYPE_Q2_K: off[0] = 80, off[1] = 82; break;
    case GGML_TYPE_Q3_K: off[0] = 108; break;
    default: fail_msg("random_rows: type %u", type);
    }
    const int64_t nb = n_rows * (n / t->block_size);
    for (int64_t b = 0; b < nb; b++) {
        for (int k = 0; k < 2; k++) {
            if (off[k] < 0)
                continue;
            const uint16_t h = fp32_to_fp16((float)((rng_uniform() * 2 - 1) * pow(10.0, -2.0 * rng_uniform())));
            memcpy(dst + (size_t)b * t->type_size + off[k], &h, 2);
        }
    }
}

/* An offset that leaves rows of a type only as aligned as its blocks need
 * (F32: 4 bytes, the others 2), so that kernels must use unaligned loads. */
static size_t misalign(uint32_t type) { return type == GGML_TYPE_F32 ? 4 : 2; }

static const uint32_t weight_types[] = {
    GGML_TYPE_F32,  GGML_TYPE_F16,  GGML_TYPE_BF16, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0,
    GGML_TYPE_Q5_1, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_Q2_K,
    GGML_TYPE_Q3_K, GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS,
};
#define N_WEIGHT_TYPES (sizeof(weight_types) / sizeof(weight_types[0]))

static bool is_float_type(uint32_t type)
{
    return type == GGML_TYPE_F32 || type == GGML_TYPE_F16 || type == GGML_TYPE_BF16;
}

/* Row lengths to try for a type: the minimum, odd multiples, model sizes. */
static int64_t lengths(uint32_t type, int64_t *out)
{
    const int64_t bs = ggml_type_traits_get(type)->block_size;
    if (bs == 1) {
        static const int64_t f[] = {1, 7, 8, 9, 37, 64, 257, 640};
        memcpy(out, f, sizeof(f));
        return 8;
    }
    if (bs == 32) {
        static const int64_t q[] = {32, 64, 96, 288, 640, 2048};
        memcpy(out, q, sizeof(q));
        return 6;
    }
    static const int64_t k[] = {256, 512, 768, 2560};
    memcpy(out, k, sizeof(k));
    return 4;
}

/* The table of variant i (state of each test), or skip() when this CPU
 * cannot run it. */
static const struct kernel_table *variant_table(void **state)
{
    static struct kernel_table tables[16];
    const size_t i = (size_t)(uintptr_t)*state;
    assert_true(i < 16);
    if (!kernels_variant_runs(i)) {
        print_message("variant %s: not supported by this CPU, skipped\n", kernels_variant_name(i));
        skip();
    }
    assert_int_equal(kernels_variant_fill(i, &tables[i]), 0);
    assert_string_equal(tables[i].name, kernels_variant_name(i));
    return &tables[i];
}

static const struct kernel_table *ref(void) { return kernels_ref(); }

/* Integer dots this implementation makes bit-exact with the reference
 * (integer block sums, then the reference's float steps in its order). */
static bool exact_int(const struct kernel_table *kt, uint32_t type)
{
    if (kt->types[type].vec_dot == ref()->types[type].vec_dot)
        return true;
    return !is_float_type(type);
}

/* ------------------------------ quantizers ------------------------------ */

static void test_quantizers(void **state)
{
    const struct kernel_table *kt = variant_table(state);
    static const uint32_t act[] = {GGML_TYPE_Q8_0, GGML_TYPE_Q8_1, GGML_TYPE_Q8_K, GGML_TYPE_F16, GGML_TYPE_BF16};
    for (size_t k = 0; k < sizeof(act) / sizeof(act[0]); k++) {
        const uint32_t at = act[k];
        const int64_t bs = ggml_type_traits_get(at)->block_size;
        for (int64_t nb = 1; nb <= 9; nb += 4) {
            const int64_t n = nb * (bs == 1 ? 37 : bs);
            float *x = malloc((size_t)n * sizeof(float));
            fill_activations(x, n);
            if (at == GGML_TYPE_Q8_0 && n >= 64) {
                /* a block with amax 127 (d = 1): x * id is x itself, so the
                 * roundf ties and their neighbours are exercised */
                for (int j = 0; j < 32; j++) {
                    const float v = (float)(j - 16) + 0.5f;
                    x[32 + j] = j % 3 == 0 ? v : j % 3 == 1 ? nextafterf(v, 0.0f) : nextafterf(v, 100.0f);
                }
                x[32] = 127.0f;
            }
            const size_t sz = row_bytes(at, n);
            uint8_t *a = malloc(sz), *b = malloc(sz);
            kt->types[at].from_float(x, a, n);
            ref()->types[at].from_float(x, b, n);
            if (memcmp(a, b, sz) != 0) {
                size_t i = 0;
                while (a[i] == b[i])
                    i++;
                fail_msg("%s: %s quantizer differs from the reference at byte %zu of %zu (n = %lld)", kt->name,
                         tname(at), i, sz, (long long)n);
            }
            free(x);
            free(a);
            free(b);
        }
    }
}

/* ------------------------------ dot products ------------------------------ */

/* The bound on |got - ref| / sum|w a| (see the header comment). */
static double dot_tolerance(const struct kernel_table *kt, uint32_t type, int64_t n)
{
    if (exact_int(kt, type))
        return 0.0;
    if (!is_float_type(type))
        return 1e-6;
    return ((double)n / 8 + 16) * 0x1p-24;
}

/* sum_i |w_i a_i| of the dequantized rows (the error scale). */
static double abs_dot(uint32_t type, const uint8_t *w, const uint8_t *a, int64_t n)
{
    const uint32_t at = ref()->types[type].vec_dot_type;
    float *wd = malloc((size_t)n * sizeof(float)), *ad = malloc((size_t)n * sizeof(float));
    ref()->types[type].to_float(w, wd, n);
    ref()->types[at].to_float(a, ad, n);
    double s = 0;
    for (int64_t i = 0; i < n; i++)
        s += fabs((double)wd[i] * ad[i]);
    free(wd);
    free(ad);
    return s;
}

static void test_vec_dot(void **state)
{
    const struct kernel_table *kt = variant_table(state);
    int64_t ns[16];
    for (size_t k = 0; k < N_WEIGHT_TYPES; k++) {
        const uint32_t type = weight_types[k];
        const uint32_t at = kt->types[type].vec_dot_type;
        assert_int_equal(at, ref()->types[type].vec_dot_type);
        assert_non_null(kt->types[type].vec_dot);
        double worst = 0;
        int64_t n_exact = 0, n_total = 0;
        const int64_t nl = lengths(type, ns);
        for (int64_t li = 0; li < nl; li++) {
            const int64_t n = ns[li];
            const size_t wrow = row_bytes(type, n), arow = row_bytes(at, n);
            /* rows only as aligned as their blocks */
            uint8_t *wbuf = malloc(3 * wrow + 4), *w = wbuf + misalign(type);
            uint8_t *a = malloc(arow);
            float *x = malloc((size_t)n * sizeof(float));
            random_rows(type, w, 3, n);
            fill_activations(x, n);
            ref()->types[at].from_float(x, a, n);
            for (int r = 0; r < 3; r++) {
                const uint8_t *wr = w + (size_t)r * wrow;
                const float got = kt->types[type].vec_dot(n, wr, a);
                const float want = ref()->types[type].vec_dot(n, wr, a);
                const double scale = abs_dot(type, wr, a, n);
                const double e = scale > 0 ? fabs((double)got - want) / scale : fabs((double)got - want);
                n_total++;
                n_exact += memcmp(&got, &want, 4) == 0;
                worst = fmax(worst, e);
                if (e > dot_tolerance(kt, type, n) || isnan(got) != isnan(want))
                    fail_msg("%s %s n=%lld row %d: %.9g, reference %.9g (normalized error %.3g > %.3g)", kt->name,
                             tname(type), (long long)n, r, (double)got, (double)want, e,
                             dot_tolerance(kt, type, n));
            }
            free(wbuf);
            free(a);
            free(x);
        }
        print_message("  %-7s %-5s vec_dot: max normalized error %.3g, %lld/%lld bit-identical to ref\n", kt->name,
                      tname(type), worst, (long long)n_exact, (long long)n_total);
    }
}

/* gemm gives vec_dot's bits for every (row, token) and nt = 1..GEMM_TOKS. */
static void test_gemm_tile(void **state)
{
    const struct kernel_table *kt = variant_table(state);
    int64_t ns[16];
    for (size_t k = 0; k < N_WEIGHT_TYPES; k++) {
        const uint32_t type = weight_types[k];
        const struct kernel_type_ops *ops = &kt->types[type];
        assert_non_null(ops->gemm);
        const uint32_t at = ops->vec_dot_type;
        const int64_t nl = lengths(type, ns);
        for (int64_t li = 0; li < nl; li += 2) {
            const int64_t n = ns[li];
            const size_t wrow = row_bytes(type, n), arow = row_bytes(at, n);
            /* activation rows apart by more than a row: only their blocks' alignment */
            const size_t astride = arow + (at == GGML_TYPE_F32 || at == GGML_TYPE_Q8_K ? 4 : 2);
            uint8_t *w = malloc(GEMM_ROWS * wrow), *a = malloc(GEMM_TOKS * astride);
            float *x = malloc((size_t)n * sizeof(float));
            random_rows(type, w, GEMM_ROWS, n);
            for (int t = 0; t < GEMM_TOKS; t++) {
                fill_activations(x, n);
                kt->types[at].from_float(x, a + (size_t)t * astride, n);
            }
            for (int nt = 1; nt <= GEMM_TOKS; nt++) {
                const size_t ys = 7;
                float y[7 * GEMM_TOKS];
                for (size_t i = 0; i < 7 * GEMM_TOKS; i++)
                    y[i] = -1234.5f;
                ops->gemm(n, w, wrow, a, astride, y, ys, nt);
                for (int t = 0; t < GEMM_TOKS; t++) {
                    for (size_t r = 0; r < ys; r++) {
                        const float got = y[(size_t)t * ys + r];
                        if (t >= nt || r >= GEMM_ROWS) { /* nothing else is written */
                            assert_true(got == -1234.5f);
                            continue;
                        }
                        const float want = ops->vec_dot(n, w + r * wrow, a + (size_t)t * astride);
                        if (memcmp(&got, &want, 4) != 0)
                            fail_msg("%s %s n=%lld nt=%d: gemm[%d][%zu] = %.9g, vec_dot %.9g", kt->name,
                                     tname(type), (long long)n, nt, t, r, (double)got, (double)want);
                    }
                }
            }
            free(w);
            free(a);
            free(x);
        }
    }
}

/* gemm_many of one type and shape against the same table's vec_dot, bit for
 * bit; outputs outside the rows stay untouched. */
static void check_many(const struct kernel_table *kt, uint32_t type, int64_t n, int64_t n_rows, int64_t n_tok)
{
    const struct kernel_type_ops *ops = &kt->types[type];
    const uint32_t at = ops->vec_dot_type;
    const size_t wrow = row_bytes(type, n), arow = row_bytes(at, n);
    uint8_t *wbuf = malloc(wrow * (size_t)n_rows + 4), *w = wbuf + misalign(type);
    uint8_t *a = malloc(arow * (size_t)n_tok);
    float *x = malloc((size_t)n * sizeof(float));
    const size_t ys = (size_t)n_rows + 3;
    float *y = malloc(ys * (size_t)n_tok * sizeof(float));
    random_rows(type, w, n_rows, n);
    for (int64_t t = 0; t < n_tok; t++) {
        fill_activations(x, n);
        kt->types[at].from_float(x, a + (size_t)t * arow, n);
    }
    /* gemm_many, then (where the type has it) gemm_many_prep on the
     * activations prepared group by group as matmul does */
    void *prep = NULL;
    const bool has_prep = ops->many_prep && ops->gemm_many_prep;
    if (has_prep) {
        assert_true(ops->many_prep_tok > 0 && ops->many_prep_bytes > 0);
        const size_t group = (size_t)(n / 32) * ops->many_prep_bytes;
        assert_int_equal(group % 64, 0);
        const int64_t groups = (n_tok + ops->many_prep_tok - 1) / ops->many_prep_tok;
        prep = aligned_alloc(64, group * (size_t)groups);
        for (int64_t g = 0; g < groups; g++) {
            const int64_t t = g * ops->many_prep_tok;
            const int nt = (int)(n_tok - t < ops->many_prep_tok ? n_tok - t : ops->many_prep_tok);
            ops->many_prep(n, a + (size_t)t * arow, arow, nt, (char *)prep + (size_t)g * group);
        }
    }
    for (int pass = 0; pass < (has_prep ? 2 : 1); pass++) {
        for (size_t i = 0; i < ys * (size_t)n_tok; i++)
            y[i] = -1234.5f;
        if (pass == 0)
            assert_int_equal(ops->gemm_many(n, w, wrow, n_rows, a, arow, n_tok, y, ys), 0);
        else
            assert_int_equal(ops->gemm_many_prep(n, w, wrow, n_rows, a, arow, prep, n_tok, y, ys), 0);
        for (int64_t t = 0; t < n_tok; t++) {
            for (size_t r = 0; r < ys; r++) {
                const float got = y[(size_t)t * ys + r];
                if (r >= (size_t)n_rows) {
                    assert_true(got == -1234.5f);
                    continue;
                }
                const float want = ops->vec_dot(n, w + r * wrow, a + (size_t)t * arow);
                if (memcmp(&got, &want, 4) != 0)
                    fail_msg("%s %s n=%lld rows=%lld toks=%lld: gemm_many%s[%lld][%zu] = %.9g, vec_dot %.9g",
                             kt->name, tname(type), (long long)n, (long long)n_rows, (long long)n_tok,
                             pass ? "_prep" : "", (long long)t, r, (double)got, (double)want);
            }
        }
    }
    /* the fused gate/up form (w the gate, w2 the up rows), with and without
     * the prep, SiLU and GELU epilogues: vec_dot's bits on each matrix,
     * then the table's silu or gelu of one element and the product */
    uint8_t *w2buf = ops->gemm_many_glu ? malloc(wrow * (size_t)n_rows + 4) : NULL;
    uint8_t *w2 = w2buf ? w2buf + misalign(type) : NULL;
    if (w2buf)
        random_rows(type, w2, n_rows, n);
    for (int pass = 0; w2buf && pass < (has_prep ? 4 : 2); pass++) {
        const enum glu_act act = pass % 2 ? GLU_GELU : GLU_SILU;
        for (size_t i = 0; i < ys * (size_t)n_tok; i++)
            y[i] = -1234.5f;
        assert_int_equal(ops->gemm_many_glu(n, w, w2, wrow, n_rows, a, arow, pass >= 2 ? prep : NULL, n_tok, y, ys, act),
                         0);
        for (int64_t t = 0; t < n_tok; t++)
            for (size_t r = 0; r < ys; r++) {
                const float got = y[(size_t)t * ys + r];
                if (r >= (size_t)n_rows) {
                    assert_true(got == -1234.5f);
                    continue;
                }
                float g = ops->vec_dot(n, w + r * wrow, a + (size_t)t * arow);
                (act == GLU_GELU ? kt->gelu : kt->silu)(&g, 1);
                const float want = g * ops->vec_dot(n, w2 + r * wrow, a + (size_t)t * arow);
                if (memcmp(&got, &want, 4) != 0)
                    fail_msg("%s %s n=%lld rows=%lld toks=%lld: gemm_many_glu (%s%s)[%lld][%zu] = %.9g, want %.9g",
                             kt->name, tname(type), (long long)n, (long long)n_rows, (long long)n_tok,
                             act == GLU_GELU ? "gelu" : "silu", pass >= 2 ? ", prep" : "", (long long)t, r,
                             (double)got, (double)want);
            }
    }
    free(w2buf);
    free(prep);
    free(wbuf);
    free(a);
    free(x);
    free(y);
}

/* gemm_many at the bounds of its integer sums, for the types whose weights
 * reach 8 bits: Q8_0's -128 and +-127, IQ4_NL's codebook ends -127 and 113,
 * against activations +-127 (the quantizer's range: avx2 multiplies |w| by
 * a sign(w), whose int16 pair sums reach 2 * 128 * 127), vec_dot's bits;
 * then also with one activation byte -128 (beyond that range: NaN inputs),
 * still vec_dot's bits, whatever those are. */
static void check_many_bounds(const struct kernel_table *kt, uint32_t type)
{
    const struct kernel_type_ops *ops = &kt->types[type];
    enum { N = 256, ROWS = 6, TOK = 17, YS = ROWS + 1 };
    const size_t rb = row_bytes(type, N), bs = rb / (N / 32), ab = row_bytes(GGML_TYPE_Q8_0, N);
    assert_int_equal(ops->vec_dot_type, GGML_TYPE_Q8_0);
    uint8_t *w = malloc(rb * ROWS), *a = malloc(ab * TOK);
    float *y = malloc(sizeof(float) * YS * TOK);
    const uint16_t one = fp32_to_fp16(1.0f);
    for (int r = 0; r < ROWS; r++)
        for (int b = 0; b < N / 32; b++) {
            uint8_t *x = w + (size_t)r * rb + (size_t)b * bs; /* d, then the quants */
            memcpy(x, &one, 2);
            if (type == GGML_TYPE_Q8_0) {
                for (int i = 0; i < 32; i++) /* all -128, all +127, then mixed */
                    x[2 + i] = (uint8_t)(r == 0 ? -128 : r == 1 ? 127 : r == 2 ? (i % 2 ? -128 : 127) : (int)(rng_u64() % 256) - 128);
            } else { /* IQ4_NL: nibble 0 is -127, 15 is 113 */
                for (int i = 0; i < 16; i++)
                    x[2 + i] = (uint8_t)(r == 0 ? 0x00 : r == 1 ? 0xFF : r == 2 ? (i % 2 ? 0x0F : 0xF0) : (int)(rng_u64() % 256));
            }
        }
    for (int t = 0; t < TOK; t++)
        for (int b = 0; b < N / 32; b++) {
            block_q8_0 *x = (block_q8_0 *)(a + (size_t)t * ab + (size_t)b * sizeof(block_q8_0));
            memcpy(&x->d, &one, 2);
            for (int i = 0; i < 32; i++) /* all -127, all +127, alternating, then random in range */
                x->qs[i] = (int8_t)(t == 0 ? -127 : t == 1 ? 127 : t == 2 ? (i % 2 ? -127 : 127) : (int)(rng_u64() % 255) - 127);
        }
    for (int bad = 0; bad < 2; bad++) {
        if (bad)
            ((block_q8_0 *)(a + 5 * ab + sizeof(block_q8_0)))->qs[7] = -128;
        for (int i = 0; i < YS * TOK; i++)
            y[i] = -1234.5f;
        assert_int_equal(ops->gemm_many(N, w, rb, ROWS, a, ab, TOK, y, YS), 0);
        for (int t = 0; t < TOK; t++)
            for (int r = 0; r < YS; r++) {
                const float got = y[t * YS + r];
                if (r >= ROWS) {
                    assert_true(got == -1234.5f);
                    continue;
                }
                const float want = ops->vec_dot(N, w + (size_t)r * rb, a + (size_t)t * ab);
                if (memcmp(&got, &want, 4) != 0)
                    fail_msg("%s %s bounds%s: gemm_many[%d][%d] = %.9g, vec_dot %.9g", kt->name, tname(type),
                             bad ? " (-128)" : "", t, r, (double)got, (double)want);
            }
    }
    free(w);
    free(a);
    free(y);
}

static void test_gemm_many_bounds(void **state)
{
    const struct kernel_table *kt = variant_table(state);
    static const uint32_t types[] = {GGML_TYPE_Q8_0, GGML_TYPE_IQ4_NL};
    int n = 0;
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (kt->types[types[i]].gemm_many) {
            check_many_bounds(kt, types[i]);
            n++;
        }
    if (n == 0)
        skip();
}

/* gemm_many (where a variant has it) gives vec_dot's bits for every row and
 * token, for odd row and token counts (partial tiles and token groups), and
 * for long rows against many tokens (kernels that sweep the activations in
 * passes of a few blocks, to keep them in the L2, cross pass boundaries),
 * and for many rows (avx512 runs them in blocks of tiles). */
static void test_gemm_many(void **state)
{
    const struct kernel_table *kt = variant_table(state);
    int64_t ns[16];
    int n_types = 0;
    for (size_t k = 0; k < N_WEIGHT_TYPES; k++) {
        const uint32_t type = weight_types[k];
        if (!kt->types[type].gemm_many)
            continue;
        n_types++;
        const int64_t nl = lengths(type, ns);
        static const int64_t rows[] = {1, 9, 17}, toks[] = {1, 16, 17, 33};
        for (int64_t li = 0; li < nl; li++)
            check_many(kt, type, ns[li], rows[li % 3], toks[li % 4]);
        const int64_t bs = ggml_type_traits_get(type)->block_size;
        check_many(kt, type, 8192 + bs, 33, 165);
        check_many(kt, type, 4096 + bs, 403, 165); /* more rows than one block of tiles, and passes */
    }
    print_message("  %s: gemm_many checked for %d types\n", kt->name, n_types);
}

/* -------------------------------- matmul -------------------------------- */

/* matmul with the variant's table installed as `kern` (restored after). */
static int matmul_with(const struct kernel_table *kt, float *y, const void *w, uint32_t type, const float *x,
                       int64_t n_in, int64_t n_out, int64_t n_tok)
{
    const struct kernel_table saved = kern;
    kern = *kt;
    const int st = matmul(y, w, type, x, n_in, n_out, n_tok);
    kern = saved;
    return st;
}

static void check_matmul(const struct kernel_table *kt, uint32_t type, int64_t n_in, int64_t n_out, int64_t n_tok,
                         double *worst)
{
    const size_t wrow = row_bytes(type, n_in);
    uint8_t *wbuf = malloc(wrow * (size_t)n_out + 4), *w = wbuf + misalign(type); /* rows barely aligned */
    float *x = malloc((size_t)(n_tok * n_in) * sizeof(float));
    float *y = malloc((size_t)(n_tok * n_out) * sizeof(float)), *yr = malloc((size_t)(n_tok * n_out) * sizeof(float));
    float *y1 = malloc((size_t)n_out * sizeof(float));
    random_rows(type, w, n_out, n_in);
    for (int64_t t = 0; t < n_tok; t++)
        fill_activations(x + t * n_in, n_in);
    assert_int_equal(matmul_with(kt, y, w, type, x, n_in, n_out, n_tok), INFER_OK);
    assert_int_equal(matmul_with(ref(), yr, w, type, x, n_in, n_out, n_tok), INFER_OK);

    const uint32_t at = ref()->types[type].vec_dot_type;
    uint8_t *a = malloc(row_bytes(at, n_in));
    for (int64_t t = 0; t < n_tok; t++) {
        ref()->types[at].from_float(x + t * n_in, a, n_in);
        /* the same token alone (GEMV path) gives the same bits */
        assert_int_equal(matmul_with(kt, y1, w, type, x + t * n_in, n_in, n_out, 1), INFER_OK);
        if (memcmp(y1, y + t * n_out, (size_t)n_out * sizeof(float)) != 0)
            fail_msg("%s %s %lldx%lld: token %lld of %lld differs from the single-token matmul", kt->name,
                     tname(type), (long long)n_out, (long long)n_in, (long long)t, (long long)n_tok);
        for (int64_t o = 0; o < n_out; o++) {
            const float got = y[t * n_out + o], want = yr[t * n_out + o];
            const double scale = abs_dot(type, w + (size_t)o * wrow, a, n_in);
            const double e = scale > 0 ? fabs((double)got - want) / scale : fabs((double)got - want);
            *worst = fmax(*worst, e);
            if (e > dot_tolerance(kt, type, n_in))
                fail_msg("%s matmul %s %lldx%lld n_tok %lld [%lld,%lld]: %.9g, reference %.9g (error %.3g)", kt->name,
                         tname(type), (long long)n_out, (long long)n_in, (long long)n_tok, (long long)t,
                         (long long)o, (double)got, (double)want, e);
        }
    }
    free(a);
    free(wbuf);
    free(x);
    free(y);
    free(yr);
    free(y1);
}

static void test_matmul(void **state)
{
    const struct kernel_table *kt = variant_table(state);
    static const int64_t rows[] = {1, 3, 17, 64};
    int64_t ns[16];
    for (size_t k = 0; k < N_WEIGHT_TYPES; k++) {
        const uint32_t type = weight_types[k];
        double worst = 0;
        const int64_t nl = lengths(type, ns);
        for (size_t ri = 0; ri < sizeof(rows) / sizeof(rows[0]); ri++) {
            /* n_tok 1..9: GEMV, partial and full tiles, more than one tile */
            for (int64_t nt = 1; nt <= 9; nt += (rows[ri] > 16 ? 4 : 1))
                check_matmul(kt, type, ns[(ri + (size_t)nt) % (size_t)nl], rows[ri], nt, &worst);
        }
        if (kt->types[type].gemm_many) { /* both sides of the type's crossover (kernels_many_min) */
            const int64_t mm = kernels_many_min(kt, type);
            check_matmul(kt, type, ns[1 % nl], 37, mm - 1, &worst);
            check_matmul(kt, type, ns[2 % nl], 37, mm, &worst);
        }
        check_matmul(kt, type, ns[0], 37, 70, &worst); /* two token blocks */
        check_matmul(kt, type, ns[0], 37, 530, &worst); /* gemm_many: two chunks of tokens (and of their prep) */
        print_message("  %-7s %-5s matmul: max normalized error vs ref %.3g\n", kt->name, tname(type), worst);
    }
}

/* The x4 layouts (repack.h), in every variant (those without x4 kernels
 * run the reference tile): repack_x4 is a permutation (Q3_K's: of the
 * bits) that repack_x4_block and repack_x4_unpack_group undo, leaving the last n_out %
 * 4 rows where they were; and a matmul on the repacked matrix gives, for
 * every path (GEMV, 2-4 token tiles, the GEMM blocks, gemm_many) and thread
 * count, exactly the bits of the same matmul on the original rows. */
static void test_repacked(void **state)
{
    const struct kernel_table *kt = variant_table(state);
    static const uint32_t layouts[] = {INFER_TYPE_Q4_0_X4, INFER_TYPE_Q5_0_X4,  INFER_TYPE_Q4_K_X4,
                                       INFER_TYPE_Q6_K_X4, INFER_TYPE_Q8_0_X4,  INFER_TYPE_Q4_0_X4S,
                                       INFER_TYPE_IQ4_NL_X4, INFER_TYPE_Q3_K_X4, INFER_TYPE_Q4_K_X4I};
    /* nb % 4 = 1, 3, 0, 2, 1, 0: with and without leftover block columns */
    static const int64_t n_ins[] = {32, 96, 128, 320, 672, 2048};
    static const int64_t n_outs[] = {1, 4, 7, 17, 64, 66};
    /* and the last two: both sides of the x4 type's crossover into gemm_many */
    int64_t n_toks[] = {1, 2, 3, 4, 5, 9, 16, 33, 0, 0};
    for (size_t k = 0; k < sizeof(layouts) / sizeof(layouts[0]); k++) {
        const uint32_t x4 = layouts[k], type = repack_base_of(x4);
        assert_true(type != 0);
        assert_true(repack_x4_of(type) == x4 || x4 == INFER_TYPE_Q4_0_X4S || x4 == INFER_TYPE_Q4_K_X4I);
        assert_int_equal(ggml_row_size(x4, 2560), ggml_row_size(type, 2560));
        const size_t bs = ggml_type_traits_get(type)->type_size;
        n_toks[8] = kernels_many_min(kt, x4) - 1;
        n_toks[9] = kernels_many_min(kt, x4);
        int n_checked = 0;
        for (size_t ii = 0; ii < sizeof(n_ins) / sizeof(n_ins[0]); ii++) {
            /* Q3_K, Q4_K, Q6_K: 8x the lengths, 1 .. 64 super-blocks (a tile is one) */
            const int64_t be = (int64_t)ggml_type_traits_get(type)->block_size;
            const int64_t n_in = n_ins[ii] * (be / 32), n_out = n_outs[ii], nb = n_in / be;
            const size_t wrow = row_bytes(type, n_in), wbytes = wrow * (size_t)n_out;
            uint8_t *w = malloc(wbytes), *wx = malloc(wbytes + 2), *back = malloc(4 * wrow);
            uint8_t *wxa = wx + 2; /* only as aligned as the blocks need */
            random_rows(type, w, n_out, n_in);
            repack_x4(x4, w, wxa, n_in, n_out);
            const int64_t full = n_out / 4 * 4;
            if (full > 0 && (nb >= 4 || be > 32))
                assert_true(memcmp(w, wxa, 4 * wrow) != 0); /* it does move bytes */
            if (n_out > full)
                assert_memory_equal(w + (size_t)full * wrow, wxa + (size_t)full * wrow, (size_t)(n_out - full) * wrow);
            for (int64_t g = 0; g < full; g += 4) {
                repack_x4_unpack_group(x4, wxa + (size_t)g * wrow, nb, back);
                assert_memory_equal(back, w + (size_t)g * wrow, 4 * wrow);
                uint8_t blk[256];
                const int r = (int)(g / 4 % 4);
                const int64_t b = (g / 4) % nb;
                repack_x4_block(x4, wxa + (size_t)g * wrow, nb, r, b, blk);
                assert_memory_equal(blk, w + (size_t)(g + r) * wrow + (size_t)b * bs, bs);
            }
            for (size_t ti = 0; ti < sizeof(n_toks) / sizeof(n_toks[0]); ti++) {
                const int64_t n_tok = n_toks[ti];
                float *x = malloc((size_t)(n_tok * n_in) * sizeof(float));
                float *y = malloc((size_t)(n_tok * n_out) * sizeof(float));
                float *yx = malloc((size_t)(n_tok * n_out) * sizeof(float));
                for (int64_t t = 0; t < n_tok; t++)
                    fill_activations(x + t * n_in, n_in);
                assert_int_equal(matmul_with(kt, y, w, type, x, n_in, n_out, n_tok), INFER_OK);
#ifdef _OPENMP
                const int saved = omp_get_max_threads();
                for (int th = 1; th <= 3; th += 2) {
                    omp_set_num_threads(th);
#endif
                    for (size_t i = 0; i < (size_t)(n_tok * n_out); i++)
                        yx[i] = -1234.5f;
                    assert_int_equal(matmul_with(kt, yx, wxa, x4, x, n_in, n_out, n_tok), INFER_OK);
                    for (int64_t i = 0; i < n_tok * n_out; i++)
                        if (memcmp(&y[i], &yx[i], 4) != 0)
                            fail_msg("%s %s x4 %lldx%lld n_tok %lld: [%lld,%lld] = %.9g, original layout %.9g",
                                     kt->name, tname(type), (long long)n_out, (long long)n_in, (long long)n_tok,
                                     (long long)(i / n_out), (long long)(i % n_out), (double)yx[i], (double)y[i]);
#ifdef _OPENMP
                }
                omp_set_num_threads(saved);
#endif
                n_checked++;
                free(x);
                free(y);
                free(yx);
            }
            free(w);
            free(wx);
            free(back);
        }
        print_message("  %-7s %s: %d repacked matmuls bit-identical to the original layout (x4 gemm from %s, "
                      "gemm_many %s %lld tokens)\n",
                      kt->name, tname(x4), n_checked, kt->types[x4].gemm == ref()->types[x4].gemm ? "ref" : kt->name,
                      kt->types[x4].gemm_many ? "from" : "none; would be from", (long long)n_toks[9]);
    }
}

/* The opt-in OpenBLAS path for float weights (matmul_use_blas): a batch
 * large enough to take it is the product of the float activations and the
 * dequantized weights to float rounding (sgemm sums in its own order; the
 * F16/BF16 tiles round the activations to the weight type first, so they
 * are not the yardstick), and a smaller batch keeps the tiles' bits. */
static void test_matmul_blas(void **state)
{
    (void)state;
    static const uint32_t types[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16};
    const int64_t n_in = 320, n_out = 301;
    for (size_t k = 0; k < 3; k++) {
        for (int64_t n_tok = 9; n_tok <= 200; n_tok += 191) {
            const size_t wrow = row_bytes(types[k], n_in);
            uint8_t *w = malloc(wrow * n_out);
            float *x = malloc((size_t)(n_tok * n_in) * sizeof(float));
            float *yb = malloc((size_t)(n_tok * n_out) * sizeof(float));
            float *yt = malloc((size_t)(n_tok * n_out) * sizeof(float));
            float *wf = malloc((size_t)n_in * sizeof(float));
            random_rows(types[k], w, n_out, n_in);
            for (int64_t i = 0; i < n_tok * n_in; i++)
                x[i] = rng_gauss();
            const bool was = matmul_use_blas(1);
            assert_int_equal(matmul(yb, w, types[k], x, n_in, n_out, n_tok), INFER_OK);
            matmul_use_blas(0);
            assert_int_equal(matmul(yt, w, types[k], x, n_in, n_out, n_tok), INFER_OK);
            matmul_use_blas(was);
            if (n_tok < 32) {
                assert_memory_equal(yb, yt, (size_t)(n_tok * n_out) * sizeof(float));
            } else {
                double worst = 0;
                for (int64_t o = 0; o < n_out; o++) {
                    dequantize_row(types[k], w + (size_t)o * wrow, wf, n_in);
                    for (int64_t t = 0; t < n_tok; t++) {
                        double scale = 0, exact = 0;
                        for (int64_t i = 0; i < n_in; i++) {
                            scale += fabs((double)wf[i] * x[t * n_in + i]);
                            exact += (double)wf[i] * x[t * n_in + i];
                        }
                        const double e = fabs((double)yb[t * n_out + o] - exact) / scale;
                        worst = fmax(worst, e);
                        if (e > 1e-6)
                            fail_msg("%s blas [%lld,%lld]: %.9g, exact %.9g (tiles %.9g)", tname(types[k]),
                                     (long long)t, (long long)o, (double)yb[t * n_out + o], exact,
                                     (double)yt[t * n_out + o]);
                    }
                }
                print_message("  %-5s matmul with OpenBLAS (%lld tokens): max normalized error vs the exact product "
                              "%.3g\n", tname(types[k]), (long long)n_tok, worst);
            }
            free(w);
            free(x);
            free(yb);
            free(yt);
            free(wf);
        }
    }
}

/* The result does not depend on the number of threads (GEMV and GEMM). */
static void test_matmul_threads(void **state)
{
    const struct kernel_table *kt = variant_table(state);
#ifdef _OPENMP
    static const uint32_t types[] = {GGML_TYPE_Q4_K, GGML_TYPE_Q8_0, GGML_TYPE_F16};
    for (size_t k = 0; k < 3; k++) {
        const int64_t n_in = 1024, n_out = 301;
        for (int64_t n_tok = 1; n_tok <= 9; n_tok += 8) {
            const size_t wrow = row_bytes(types[k], n_in);
            uint8_t *w = malloc(wrow * n_out);
            float *x = malloc((size_t)(n_tok * n_in) * sizeof(float));
            float *y1 = malloc((size_t)(n_tok * n_out) * sizeof(float));
            float *y2 = malloc((size_t)(n_tok * n_out) * sizeof(float));
            random_rows(types[k], w, n_out, n_in);
            for (int64_t i = 0; i < n_tok * n_in; i++)
                x[i] = rng_gauss();
            const int saved = omp_get_max_threads();
            omp_set_num_threads(1);
            assert_int_equal(matmul_with(kt, y1, w, types[k], x, n_in, n_out, n_tok), INFER_OK);
            omp_set_num_threads(3);
            assert_int_equal(matmul_with(kt, y2, w, types[k], x, n_in, n_out, n_tok), INFER_OK);
            omp_set_num_threads(saved);
            assert_memory_equal(y1, y2, (size_t)(n_tok * n_out) * sizeof(float));
            free(w);
            free(x);
            free(y1);
            free(y2);
        }
    }
#else
    (void)kt;
    skip();
#endif
}

/* --------------------------------- ops --------------------------------- */

static const int64_t op_sizes[] = {1, 7, 8, 9, 31, 256, 641, 2048};
#define N_OP_SIZES (sizeof(op_sizes) / sizeof(op_sizes[0]))

static void fill_op_input(float *x, int64_t n, float scale)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = rng_gauss() * scale;
}

/* |got - want| <= rel * |want| + abs, elementwise. */
/* row = act(x) over the whole row: each element's bits must be act's of
 * that element alone, wherever it sits (a vector's lanes or the tail).  The
 * fused gate/up kernels (gemm_many_glu) give the act of one element, the
 * unfused FFN (gate_rows) the act of whole rows; they must agree. */
static void check_act_alone(const char *what, const char *variant, void (*act)(float *, int64_t), const float *x,
                            const float *row, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        float v = x[i];
        act(&v, 1);
        if (memcmp(&v, &row[i], sizeof(v)) != 0)
            fail_msg("%s %s(%.9g) = %.9g alone, %.9g at %lld of %lld", variant, what, (double)x[i], (double)v,
                     (double)row[i], (long long)i, (long long)n);
    }
}

static void check_close(const char *what, const char *variant, int64_t n, const float *got, const float *want,
                        double rel, double abs_tol, const float *x)
{
    for (int64_t i = 0; i < n; i++) {
        const double d = fabs((double)got[i] - want[i]);
        if (!(d <= rel * fabs((double)want[i]) + abs_tol) && !(isnan(got[i]) && isnan(want[i])))
            fail_msg("%s %s n=%lld [%lld] (x=%.9g): %.9g, reference %.9g", variant, what, (long long)n, (long long)i,
                     x ? (double)x[i] : 0.0, (double)got[i], (double)want[i]);
    }
}

static void test_ops(void **state)
{
    const struct kernel_table *kt = variant_table(state);
    const struct kernel_table *rt = ref();
    for (size_t si = 0; si < N_OP_SIZES; si++) {
        const int64_t n = op_sizes[si];
        float *x = malloc((size_t)n * sizeof(float)), *w = malloc((size_t)n * sizeof(float));
        float *a = malloc((size_t)n * sizeof(float)), *b = malloc((size_t)n * sizeof(float));
        fill_op_input(x, n, 3.0f);
        fill_op_input(w, n, 1.0f);

        /* rmsnorm: the same float steps after a double sum of squares taken
         * in another order: the mean can differ in its last bit, so allow
         * 2^-22 relative (two roundings of a 2^-24 change in the scale) */
        kt->rmsnorm(a, x, w, n, 1e-6f);
        rt->rmsnorm(b, x, w, n, 1e-6f);
        check_close("rmsnorm", kt->name, n, a, b, 0x1p-22, 0, x);
        memcpy(a, x, (size_t)n * sizeof(float));
        kt->rmsnorm(a, a, NULL, n, 1e-5f); /* in place, no weight */
        rt->rmsnorm(b, x, NULL, n, 1e-5f);
        check_close("rmsnorm (in place)", kt->name, n, a, b, 0x1p-22, 0, x);

        if (si == 0)
            check_argmax(kt, rt);

        /* softmax: expf within 1 ulp on both sides, then a sum and a scale:
         * 8 ulp (4.8e-7) relative; a masked (-inf) entry gives exactly 0 */
        memcpy(a, x, (size_t)n * sizeof(float));
        a[n / 2] = -INFINITY;
        memcpy(b, a, (size_t)n * sizeof(float));
        kt->softmax(a, n);
        rt->softmax(b, n);
        check_close("softmax", kt->name, n, a, b, 4.8e-7, 1e-37, x);
        if (n > 1)
            assert_true(a[n / 2] == 0.0f);

        /* silu: one exp (1 ulp each side), an add and a divide: 4 ulp */
        memcpy(a, x, (size_t)n * sizeof(float));
        memcpy(b, x, (size_t)n * sizeof(float));
        kt->silu(a, n);
        rt->silu(b, n);
        check_close("silu", kt->name, n, a, b, 2.4e-7, 1e-37, x);
        check_act_alone("silu", kt->name, kt->silu, x, a, n);

        /* gelu: tanh within 1 ulp of 1 on both sides, so 1 + tanh may differ
         * by 2^-23 absolute, i.e. 0.5 |x| 2^-23 in the result */
        memcpy(a, x, (size_t)n * sizeof(float));
        memcpy(b, x, (size_t)n * sizeof(float));
        kt->gelu(a, n);
        rt->gelu(b, n);
        for (int64_t i = 0; i < n; i++)
            if (!(fabs((double)a[i] - b[i]) <= 3e-7 * fabs((double)b[i]) + fabs((double)x[i]) * 0x1p-23))
                fail_msg("%s gelu(%.9g) = %.9g, reference %.9g", kt->name, (double)x[i], (double)a[i], (double)b[i]);
        check_act_alone("gelu", kt->name, kt->gelu, x, a, n);

        /* gelu_ggml: fp16 results; a 1-ulp float difference before the final
         * rounding can move it by one fp16 ulp (2^-10 relative, 2^-24 among
         * subnormals), and for x << 0 the float formula's 1 + tanh differs
         * by 2^-23 as for gelu */
        memcpy(a, x, (size_t)n * sizeof(float));
        memcpy(b, x, (size_t)n * sizeof(float));
        a[0] = b[0] = -10.0f;
        if (n > 1)
            a[1] = b[1] = 11.5f;
        kt->gelu_ggml(a, n);
        rt->gelu_ggml(b, n);
        for (int64_t i = 0; i < n; i++)
            if (!(fabs((double)a[i] - b[i]) <= 0x1p-10 * fabs((double)b[i]) + fabs((double)x[i]) * 0x1p-22 + 0x1p-24))
                fail_msg("%s gelu_ggml(%.9g) = %.9g, reference %.9g", kt->name, (double)x[i], (double)a[i],
                         (double)b[i]);
        assert_true(a[0] == 0.0f);
        if (n > 1)
            assert_true(a[1] == 11.5f);

        /* element-wise vector ops: exact */
        kt->vec_mul(a, x, w, n);
        rt->vec_mul(b, x, w, n);
        assert_memory_equal(a, b, (size_t)n * sizeof(float));
        kt->vec_add(a, x, w, n);
        rt->vec_add(b, x, w, n);
        assert_memory_equal(a, b, (size_t)n * sizeof(float));
        memcpy(a, x, (size_t)n * sizeof(float));
        memcpy(b, x, (size_t)n * sizeof(float));
        kt->vec_scale(a, n, -0.37f);
        rt->vec_scale(b, n, -0.37f);
        assert_memory_equal(a, b, (size_t)n * sizeof(float));
        /* vec_dot_f32: float products summed in double in another order */
        double sa = 0;
        for (int64_t i = 0; i < n; i++)
            sa += fabs((double)x[i] * w[i]);
        const float d1 = kt->vec_dot_f32(x, w, n), d2 = rt->vec_dot_f32(x, w, n);
        assert_true(fabs((double)d1 - d2) <= 0x1p-24 * fabs((double)d2) + 1e-12 * sa);
        free(x);
        free(w);
        free(a);
        free(b);
    }
}

/* RoPE rotates by the angles of rope_angles with the same float
 * operations: bit-identical, for both pair orders, partial rotation and
 * odd head sizes; the angles include freq factors and YaRN. */
static void test_rope(void **state)
{
    const struct kernel_table *kt = variant_table(state);
    static const struct {
        int64_t n_heads, head_dim, n_rot;
    } shapes[] = {{1, 2, 2}, {3, 64, 64}, {4, 256, 256}, {2, 128, 64}, {2, 40, 30}, {5, 18, 18}};
    static const int64_t positions[] = {0, 1, 17, 4095};
    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]); s++) {
        const int64_t n = shapes[s].n_heads * shapes[s].head_dim;
        float *a = malloc((size_t)n * sizeof(float)), *b = malloc((size_t)n * sizeof(float));
        float cs[256], ff[128];
        for (int k = 0; k < 128; k++)
            ff[k] = 1.0f + (float)k / 4.0f;
        struct rope_params rp = {.n_rot = (int)shapes[s].n_rot, .freq_base = 10000.0f, .freq_scale = 0.5f,
                                 .freq_factors = s % 2 ? ff : NULL, .ext_factor = s % 3 == 2 ? 1.0f : 0.0f,
                                 .attn_factor = 1.0f, .corr_dims = {1.0f, 9.0f}};
        for (size_t p = 0; p < 4; p++) {
            rope_angles(cs, &rp, positions[p]);
            for (int neox = 0; neox < 2; neox++) {
                fill_op_input(a, n, 1.0f);
                memcpy(b, a, (size_t)n * sizeof(float));
                (neox ? kt->rope_neox : kt->rope_norm)(a, shapes[s].n_heads, shapes[s].head_dim, shapes[s].n_rot,
                                                      cs);
                (neox ? ref()->rope_neox : ref()->rope_norm)(b, shapes[s].n_heads, shapes[s].head_dim,
                                                            shapes[s].n_rot, cs);
                if (memcmp(a, b, (size_t)n * sizeof(float)) != 0)
                    fail_msg("%s rope_%s %lldx%lld rot %lld pos %lld differs from the reference", kt->name,
                             neox ? "neox" : "norm", (long long)shapes[s].n_heads, (long long)shapes[s].head_dim,
                             (long long)shapes[s].n_rot, (long long)positions[p]);
            }
        }
        free(a);
        free(b);
    }
}

/* One K or V row of head_dim random values: F16 gaussians, or Q8_0 blocks
 * (int8 values, scales around 1/64).  Returns the largest |value|. */
static float random_kv_row(uint8_t *row, int q8, int hd)
{
    float m = 0;
    if (!q8) {
        for (int d = 0; d < hd; d++) {
            const uint16_t h = fp32_to_fp16(rng_gauss());
            memcpy(row + 2 * d, &h, 2);
            m = fmaxf(m, fabsf(fp16_to_fp32(h)));
        }
        return m;
    }
    for (int b = 0; b < hd / 32; b++) {
        block_q8_0 blk;
        blk.d = fp32_to_fp16((0.5f + fabsf(rng_gauss())) / 64.0f);
        for (int k = 0; k < 32; k++) {
            blk.qs[k] = (int8_t)(int)fmaxf(-127.0f, fminf(127.0f, 48.0f * rng_gauss()));
            m = fmaxf(m, fabsf((float)blk.qs[k] * fp16_to_fp32(blk.d)));
        }
        memcpy(row + (size_t)b * sizeof(blk), &blk, sizeof(blk));
    }
    return m;
}

/* Attention over F16 or Q8_0 K/V blocks through a permuted block table, for
 * odd head sizes, grouped heads, a sliding window and contexts longer than
 * one chunk of the online softmax; a token alone must give its bits in the
 * batch.  The variant's dot products and exp differ from the reference's by
 * float rounding (~1e-7 relative in each score), which moves the softmax
 * weights by as much relative: the bound is 1e-5 * max |V| per output.
 * Q8_0 rows (K, V or both) are tried on the shapes whose head size allows. */
static void test_attention(void **state)
{
    const struct kernel_table *kt = variant_table(state);
    static const struct {
        int n_head, n_head_kv, head_dim, bt, window;
    } shapes[] = {{4, 1, 256, 32, 0}, {4, 2, 36, 5, 0}, {2, 2, 64, 7, 9}, {6, 3, 20, 3, 0}};
    /* Run 0, 9 tokens: batches of 8+ read a float copy of the blocks
     * (attention_body.h's attn_f32); the last four use a second block table
     * (another sequence), out of position order.  Run 1, 24 tokens: 19
     * consecutive positions 242..260 of one sequence (tiles of tokens,
     * attend_tile, one across the chunk boundary at 256), then positions 0..4
     * of another (a tile mixing both sequences goes token by token). */
    static const int64_t positions0[] = {0, 7, 255, 256, 600, 31, 32, 3, 599};
    enum { n_tok_max = 24 };
    const int n_blocks_seq = 700;
    for (size_t sk = 0; sk < 8 * sizeof(shapes) / sizeof(shapes[0]); sk++) {
        const size_t si = sk / 8;
        const int k_q8 = (int)(sk % 4) & 1, v_q8 = (int)(sk % 4) >> 1, run = (int)(sk % 8) / 4;
        const int n_tok = run ? 24 : 9, n_first = run ? 19 : 5; /* tokens of the first sequence */
        const int nh = shapes[si].n_head, nkv = shapes[si].n_head_kv, hd = shapes[si].head_dim, bt = shapes[si].bt;
        if ((k_q8 || v_q8) && hd % 32)
            continue;
        const int n_blocks = (n_blocks_seq + bt - 1) / bt;
        const size_t row_k = k_q8 ? (size_t)hd / 32 * sizeof(block_q8_0) : (size_t)hd * 2;
        const size_t row_v = v_q8 ? (size_t)hd / 32 * sizeof(block_q8_0) : (size_t)hd * 2;
        const size_t head_bytes = (size_t)bt * row_k, head_bytes_v = (size_t)bt * row_v;
        const size_t block_bytes = (size_t)nkv * (head_bytes + head_bytes_v);
        uint8_t *arena = malloc(block_bytes * (size_t)n_blocks);
        float vmax = 0;
        for (int b = 0; b < n_blocks; b++)
            for (int h = 0; h < nkv; h++)
                for (int r = 0; r < bt; r++) {
                    uint8_t *blk = arena + (size_t)b * block_bytes;
                    random_kv_row(blk + (size_t)h * head_bytes + (size_t)r * row_k, k_q8, hd);
                    vmax = fmaxf(vmax, random_kv_row(blk + (size_t)nkv * head_bytes + (size_t)h * head_bytes_v +
                                                         (size_t)r * row_v, v_q8, hd));
                }
        int32_t *table = malloc(2 * (size_t)n_blocks * sizeof(int32_t)), *table2 = table + n_blocks;
        for (int b = 0; b < n_blocks; b++) {
            table[b] = n_blocks - 1 - b;       /* blocks in reverse order */
            table2[b] = (b + n_blocks / 2) % n_blocks; /* another order: rotated by half */
        }
        const int32_t *tables[n_tok_max];
        int64_t pos[n_tok_max];
        for (int t = 0; t < n_tok; t++) {
            tables[t] = t < n_first ? table : table2;
            pos[t] = !run ? positions0[t] : t < n_first ? 242 + t : t - n_first;
        }
        struct attn_kv kv = {
            .base = arena, .block_bytes = block_bytes, .k_off = 0, .v_off = (size_t)nkv * head_bytes,
            .head_bytes = head_bytes, .head_bytes_v = head_bytes_v, .k_q8 = k_q8, .v_q8 = v_q8,
            .block_tokens = bt, .blocks = tables, .pos = pos,
            .softcap = si % 2 ? 1.5f : 0.0f, /* gemma2's soft-capped scores on two of the shapes */
        };
        const size_t nq = (size_t)n_tok * (size_t)nh * (size_t)hd;
        float *q = malloc(nq * sizeof(float)), *a = malloc(nq * sizeof(float)), *b = malloc(nq * sizeof(float));
        for (size_t i = 0; i < nq; i++)
            q[i] = rng_gauss();
        const float scale = 1.0f / sqrtf((float)hd);
        kt->attention(a, q, n_tok, &kv, nh, nkv, hd, scale, shapes[si].window);
        if (kv.softcap > 0.0f) { /* the cap changes the result (scores of ~N(0, 1) capped at 1.5) */
            struct attn_kv uncapped = kv;
            uncapped.softcap = 0.0f;
            ref()->attention(b, q, n_tok, &uncapped, nh, nkv, hd, scale, shapes[si].window);
            double d = 0;
            for (size_t i = 0; i < nq; i++)
                d = fmax(d, fabs((double)a[i] - b[i]));
            assert_true(d > 1e-3 * vmax);
        }
        ref()->attention(b, q, n_tok, &kv, nh, nkv, hd, scale, shapes[si].window);
        double worst = 0;
        for (size_t i = 0; i < nq; i++) {
            const double e = fabs((double)a[i] - b[i]);
            worst = fmax(worst, e / vmax);
            if (!(e <= 1e-5 * vmax))
                fail_msg("%s attention (heads %d/%d, dim %d, window %d, K %s, V %s) [%zu]: %.9g, reference %.9g",
                         kt->name, nh, nkv, hd, shapes[si].window, k_q8 ? "q8_0" : "f16", v_q8 ? "q8_0" : "f16", i,
                         (double)a[i], (double)b[i]);
        }
        /* each token alone (decode) gives the batch's bits, whatever the
         * thread count (which sets how many heads one decode item takes) */
        const int max_threads = omp_get_max_threads();
        for (int nth = 1; nth <= 4; nth++) {
            omp_set_num_threads(nth);
            for (int t = 0; t < n_tok; t++) {
                struct attn_kv one = kv;
                one.blocks = tables + t;
                one.pos = pos + t;
                const size_t off = (size_t)t * (size_t)nh * (size_t)hd;
                kt->attention(b, q + off, 1, &one, nh, nkv, hd, scale, shapes[si].window);
                if (memcmp(b, a + off, (size_t)nh * (size_t)hd * sizeof(float)) != 0)
                    fail_msg("%s attention (heads %d/%d, dim %d, %d threads): token %d alone differs from the batch",
                             kt->name, nh, nkv, hd, nth, t);
            }
        }
        omp_set_num_threads(max_threads);
        print_message("  %s attention heads %d/%d dim %d block %d window %d K %s V %s, %d tokens: max error / max|V| %.3g\n",
                      kt->name, nh, nkv, hd, bt, shapes[si].window, k_q8 ? "q8_0" : "f16", v_q8 ? "q8_0" : "f16",
                      n_tok, worst);
        free(arena);
        free(table);
        free(q);
        free(a);
        free(b);
    }
}

/* ------------------------------- dispatch ------------------------------- */

/* The variant list ends with ref, which runs everywhere; kernels_init
 * honours INFER_KERNELS and refuses unknown names; the report names the
 * selected variant and every weight type. */
static void test_dispatch(void **state)
{
    (void)state;
    const size_t nv = kernels_n_variants();
    assert_true(nv >= 1);
    assert_string_equal(kernels_variant_name(nv - 1), "ref");
    assert_true(kernels_variant_runs(nv - 1));
    assert_null(kernels_variant_name(nv));
    struct kernel_table t;
    assert_int_equal(kernels_variant_fill(nv, &t), -1);
    char err[256];
    const char *old = getenv("INFER_KERNELS");
    char *saved = old ? strdup(old) : NULL;
    setenv("INFER_KERNELS", "no-such-variant", 1);
    assert_int_equal(kernels_init(err, sizeof(err)), -1);
    assert_non_null(strstr(err, "no-such-variant"));
    for (size_t i = 0; i < nv; i++) {
        setenv("INFER_KERNELS", kernels_variant_name(i), 1);
        const int st = kernels_init(err, sizeof(err));
        assert_int_equal(st, kernels_variant_runs(i) ? 0 : -1);
        if (st == 0) {
            assert_string_equal(kern.name, kernels_variant_name(i));
            const char *rep = kernels_report();
            assert_non_null(strstr(rep, kernels_variant_name(i)));
            assert_non_null(strstr(rep, "Q4_K"));
        }
    }
    if (saved) {
        setenv("INFER_KERNELS", saved, 1);
        free(saved);
    } else {
        unsetenv("INFER_KERNELS");
    }
    assert_int_equal(kernels_init(err, sizeof(err)), 0);
    print_message("%s", kernels_report());
}

int main(void)
{
    struct CMUnitTest tests[2 + 16 * 11];
    size_t n = 0;
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_dispatch);
    tests[n++] = (struct CMUnitTest)cmocka_unit_test(test_matmul_blas);
    const size_t nv = kernels_n_variants();
    static char names[16][11][64];
    for (size_t v = 0; v < nv && v < 16; v++) {
        static const struct {
            const char *name;
            CMUnitTestFunction fn;
        } per[] = {
            {"quantizers", test_quantizers}, {"vec_dot", test_vec_dot},           {"gemm_tile", test_gemm_tile},
            {"matmul", test_matmul},         {"matmul_threads", test_matmul_threads}, {"ops", test_ops},
            {"rope", test_rope},             {"gemm_many", test_gemm_many},       {"attention", test_attention},
            {"repacked", test_repacked},     {"gemm_many_bounds", test_gemm_many_bounds},
        };
        for (size_t k = 0; k < sizeof per / sizeof per[0]; k++) {
            snprintf(names[v][k], sizeof(names[v][k]), "%s/%s", kernels_variant_name(v), per[k].name);
            tests[n++] = (struct CMUnitTest){names[v][k], per[k].fn, NULL, NULL, (void *)(uintptr_t)v};
        }
    }
    return _cmocka_run_group_tests("kernels-simd", tests, n, NULL, NULL);
}
