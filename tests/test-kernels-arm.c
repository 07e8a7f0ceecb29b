/*
 * test-kernels-arm.c - the aarch64 kernel variants ("neon", "dotprod",
 * "i8mm", kernels/arm/) against the scalar reference, one group of tests per
 * variant, each skipped when the CPU (or qemu's -cpu) lacks its instructions.
 *
 * What the variants promise (kernels/arm/neon.h), and what is checked:
 *   quantized dots      the reference's bits, on random blocks of any bits
 *                       (fp16 scales finite), odd block counts, activations
 *                       from the reference quantizer and raw ones with -128;
 *   gemm tiles          the bits of the variant's vec_dot, for every output
 *                       of 1..GEMM_TOKS tokens, nothing written outside;
 *   gemm_many           the reference's bits on odd row and token counts
 *                       and at the int16 extremes (test_gemm_many);
 *   activation and F16  the reference's bytes, including rounding ties, zero
 *   quantizers          blocks and Q8_K's first-of-+-max sign rule;
 *   F16 dequantization  bit-exact over every non-NaN half;
 *   float dots          within a float rounding of the reference (its double
 *                       sum in another order) on lengths 0..300 (vector
 *                       bodies and scalar tails);
 *   f32 ops             vec_mul/add/scale bit-exact; rmsnorm within an ulp;
 *                       softmax, silu, gelu (sleef's exp/tanh) within 1e-6
 *                       relative (gelu: plus 1e-6 absolute); gelu_ggml equal,
 *                       or one fp16 step (or 1e-6) off, rarely.
 * Built on aarch64 only; contrib/cross-check.sh runs it under qemu-aarch64 as
 * cortex-a72 (neon runs, the others skip), cortex-a76 (neon, dotprod) and
 * max (all three).
 */
#include "test-common.h"

#include <math.h>

#include "../kernels/arm/neon.h"
#include "../kernels/cpu.h"
#include "../kernels/dispatch.h"
#include "../kernels/ops.h"
#include "../kernels/quants.h"
#include "../kernels/repack.h"
#include "check-argmax.h"
#include "check-crc32c.h"

static uint64_t rng_state = 0x2545f4914f6cdd1dull;

static uint64_t rng_u64(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* uniform in [-1, 1) */
static float rng_sym(void) { return (float)((double)(rng_u64() >> 11) * 0x1p-52 - 1.0); }

struct variant {
    const char *name;
    void (*fill)(struct kernel_table *t);
    bool (*runs)(const struct cpu_features *f);
    struct kernel_table table;
};

static bool runs_neon(const struct cpu_features *f) { return f->neon; }
static bool runs_dotprod(const struct cpu_features *f) { return f->neon && f->dotprod; }
static bool runs_i8mm(const struct cpu_features *f) { return f->neon && f->dotprod && f->i8mm; }

static struct variant v_neon = {"neon", kernels_fill_neon, runs_neon, {0}};
static struct variant v_dotprod = {"dotprod", kernels_fill_dotprod, runs_dotprod, {0}};
static struct variant v_i8mm = {"i8mm", kernels_fill_i8mm, runs_i8mm, {0}};

/* Group-free setup per test: skip when the CPU cannot run the variant. */
static const struct kernel_table *variant_table(void **state)
{
    struct variant *v = *state;
    if (!v->runs(cpu_features_get())) {
        printf("  %s: this CPU lacks the instructions (skipped)\n", v->name);
        skip();
    }
    v->fill(&v->table);
    return &v->table;
}

static const struct kernel_table *ref(void) { return kernels_ref(); }
static const char *tname(uint32_t type) { return ggml_type_traits_get(type)->name; }

/* Offsets of the fp16 fields of a block (scales, minimums, Q8_1 sums). */
static int half_fields(uint32_t type, int off[2])
{
    off[0] = off[1] = -1;
    switch (type) {
    case GGML_TYPE_Q4_0: case GGML_TYPE_Q5_0: case GGML_TYPE_Q8_0: case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ4_XS:
        off[0] = 0; return 1;
    case GGML_TYPE_Q2_K: off[0] = 80, off[1] = 82; return 2;
    case GGML_TYPE_Q3_K: off[0] = 108; return 1;
    case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_1: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K: case GGML_TYPE_Q8_1:
        off[0] = 0, off[1] = 2; return 2;
    case GGML_TYPE_Q6_K: off[0] = 208; return 1;
    default: return 0;
    }
}

/* n elements of random blocks: every byte random, then finite fp16 fields
 * spanning 1e-3..1 (and now and then 0 or a subnormal). */
static void random_blocks(uint32_t type, void *dst, int64_t n)
{
    const struct ggml_type_traits *t = ggml_type_traits_get(type);
    uint8_t *p = dst;
    for (size_t i = 0; i < ggml_row_size(type, n); i++)
        p[i] = (uint8_t)rng_u64();
    int off[2];
    half_fields(type, off);
    for (int64_t b = 0; b < n / t->block_size; b++) {
        for (int k = 0; k < 2 && off[k] >= 0; k++) {
            const uint64_t r = rng_u64() % 16;
            float v = rng_sym() * powf(10.0f, -3.0f * (float)(rng_u64() % 1000) / 1000.0f);
            if (r == 0)
                v = 0.0f;
            else if (r == 1)
                v = 3e-6f; /* fp16 subnormal */
            const uint16_t h = fp32_to_fp16(v);
            memcpy(p + b * t->type_size + off[k], &h, 2);
        }
    }
}

/* n floats in blocks of 32 whose magnitudes vary by 10^4, with a zero block. */
static void random_floats(float *x, int64_t n)
{
    for (int64_t b = 0; b * 32 < n; b++) {
        const float scale = powf(10.0f, -2.0f + 4.0f * (float)(rng_u64() % 1000) / 1000.0f);
        for (int64_t j = b * 32; j < n && j < b * 32 + 32; j++)
            x[j] = rng_sym() * scale;
    }
    if (n >= 96)
        memset(x + 64, 0, 32 * sizeof(float));
}

/* -------------------------- quantized dots -------------------------- */

static const uint32_t quant_types[] = {
    GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0, GGML_TYPE_Q5_1,
    GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K,
    GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS,
};
#define N_QUANT_TYPES (sizeof(quant_types) / sizeof(quant_types[0]))

/* One comparison: the variant's dot must return the reference's bits. */
static void check_dot(const struct kernel_table *t, uint32_t type, const void *w, const void *a, int64_t n,
                      const char *what)
{
    const float want = ref()->types[type].vec_dot(n, w, a);
    const float got = t->types[type].vec_dot(n, w, a);
    if (memcmp(&want, &got, sizeof(float)) != 0)
        fail_msg("%s %s x %s, n = %lld (%s): %.9g, reference %.9g", t->name, tname(type),
                 tname(t->types[type].vec_dot_type), (long long)n, what, (double)got, (double)want);
}

/* gemm over GEMM_ROWS weight rows and nt = 1..GEMM_TOKS activation rows must
 * give, output by output, the bits of the same table's vec_dot (dispatch.h),
 * and write nothing else (the output stride is larger than GEMM_ROWS). */
static void check_gemm(const struct kernel_table *t, uint32_t type, const uint8_t *w, size_t w_row,
                       const uint8_t *a, size_t a_row, int64_t n)
{
    enum { YS = GEMM_ROWS + 3 };
    float y[GEMM_TOKS * YS];
    for (int nt = 1; nt <= GEMM_TOKS; nt++) {
        for (int i = 0; i < GEMM_TOKS * YS; i++)
            y[i] = -1234.5f;
        t->types[type].gemm(n, w, w_row, a, a_row, y, YS, nt);
        for (int k = 0; k < GEMM_TOKS; k++) {
            for (int r = 0; r < YS; r++) {
                const float got = y[k * YS + r];
                if (k >= nt || r >= GEMM_ROWS) {
                    if (got != -1234.5f)
                        fail_msg("%s gemm %s nt = %d wrote outside its tile", t->name, tname(type), nt);
                    continue;
                }
                const float want = t->types[type].vec_dot(n, w + r * w_row, a + k * a_row);
                if (memcmp(&got, &want, sizeof(float)) != 0)
                    fail_msg("%s gemm %s n = %lld nt = %d [%d,%d]: %.9g, vec_dot %.9g", t->name, tname(type),
                             (long long)n, nt, r, k, (double)got, (double)want);
            }
        }
    }
}

static void test_quant_dots(void **state)
{
    const struct kernel_table *t = variant_table(state);
    static const int n_blocks[] = {1, 2, 3, 7, 13};
    for (size_t k = 0; k < N_QUANT_TYPES; k++) {
        const uint32_t type = quant_types[k], at = ref()->types[type].vec_dot_type;
        assert_int_equal(t->types[type].vec_dot_type, at);
        const int64_t bs = ggml_type_traits_get(type)->block_size;
        for (size_t s = 0; s < sizeof(n_blocks) / sizeof(n_blocks[0]); s++) {
            const int64_t n = bs * n_blocks[s];
            const size_t w_row = ggml_row_size(type, n), a_row = ggml_row_size(at, n);
            uint8_t *w = malloc(GEMM_ROWS * w_row), *a = malloc(GEMM_TOKS * a_row);
            float *x = malloc(n * sizeof(float));
            for (int rep = 0; rep < 4; rep++) {
                random_blocks(type, w, GEMM_ROWS * n);
                for (int k2 = 0; k2 < GEMM_TOKS; k2++) {
                    random_floats(x, n);
                    ref()->types[at].from_float(x, a + k2 * a_row, n);
                    check_dot(t, type, w + (k2 % GEMM_ROWS) * w_row, a + k2 * a_row, n, "quantized activations");
                }
                check_gemm(t, type, w, w_row, a, a_row, n);
                if (at != GGML_TYPE_Q8_K) { /* raw Q8_0/Q8_1 blocks: any int8, -128 included */
                    random_blocks(at, a, GEMM_TOKS * n);
                    for (int k2 = 0; k2 < GEMM_TOKS; k2++)
                        check_dot(t, type, w, a + k2 * a_row, n, "random activation blocks");
                    check_gemm(t, type, w, w_row, a, a_row, n);
                }
            }
            free(w);
            free(a);
            free(x);
        }
    }
}

/* The largest products: every weight and activation at its extreme, where
 * an int16 partial sum would overflow if a kernel paired products wrongly. */
static void test_quant_dots_extremes(void **state)
{
    const struct kernel_table *t = variant_table(state);
    block_q8_0 w8[4], a8[4];
    for (int b = 0; b < 4; b++) {
        w8[b].d = a8[b].d = fp32_to_fp16(1.0f);
        memset(w8[b].qs, 0x80, sizeof(w8[b].qs)); /* -128 */
        memset(a8[b].qs, b & 1 ? 0x80 : 0x7f, sizeof(a8[b].qs));
    }
    check_dot(t, GGML_TYPE_Q8_0, w8, a8, 4 * QK8_0, "Q8_0 extremes");
    /* 2 blocks of 32 * -128 * 127 and 2 of 32 * -128 * -128: 2 * 32 * 128 */
    const float got8 = t->types[GGML_TYPE_Q8_0].vec_dot(4 * QK8_0, w8, a8);
    if (got8 != 8192.0f)
        fail_msg("%s Q8_0 extremes: %.9g, want 8192", t->name, (double)got8);

    /* K-quants against all -127 / all +127 activations, weights of all ones
     * bits (largest quants and scales) */
    block_q8_K ak[2];
    for (int b = 0; b < 2; b++) {
        ak[b].d = 1.0f;
        memset(ak[b].qs, b ? 0x81 : 0x7f, sizeof(ak[b].qs));
        for (int g = 0; g < QK_K / 16; g++)
            ak[b].bsums[g] = (int16_t)(16 * ak[b].qs[0]);
    }
    static const uint32_t kt[] = {GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K,
                                  GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_IQ4_XS};
    for (size_t k = 0; k < sizeof(kt) / sizeof(kt[0]); k++) {
        uint8_t w[2 * 210 + 64] __attribute__((aligned(16)));
        memset(w, 0xff, sizeof(w));
        const size_t ts = ggml_type_traits_get(kt[k])->type_size;
        int off[2];
        half_fields(kt[k], off);
        for (int b = 0; b < 2; b++)
            for (int f = 0; f < 2 && off[f] >= 0; f++)
                memcpy(w + b * ts + off[f], &(uint16_t){0x3c00}, 2); /* 1.0 */
        check_dot(t, kt[k], w, ak, 2 * QK_K, "extremes");
    }
}

/* -------------------------- quantizers -------------------------- */

static void check_quantize(const struct kernel_table *t, uint32_t type, const float *x, int64_t n, const char *what)
{
    const size_t sz = ggml_row_size(type, n);
    uint8_t *want = malloc(sz), *got = malloc(sz);
    memset(want, 0xa5, sz);
    memset(got, 0x5a, sz);
    ref()->types[type].from_float(x, want, n);
    t->types[type].from_float(x, got, n);
    if (memcmp(want, got, sz) != 0) {
        size_t i = 0;
        while (want[i] == got[i])
            i++;
        fail_msg("%s quantize %s, n = %lld (%s): byte %zu is %u, reference %u", t->name, tname(type),
                 (long long)n, what, i, got[i], want[i]);
    }
    free(want);
    free(got);
}

static void test_quantizers(void **state)
{
    const struct kernel_table *t = variant_table(state);
    static const uint32_t types[] = {GGML_TYPE_Q8_0, GGML_TYPE_Q8_1, GGML_TYPE_Q8_K, GGML_TYPE_F16};
    const int64_t n = 3 * QK_K;
    float *x = malloc(n * sizeof(float));
    for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
        const uint32_t type = types[k];
        const int64_t bs = ggml_type_traits_get(type)->block_size;
        for (int rep = 0; rep < 10; rep++) {
            random_floats(x, n);
            check_quantize(t, type, x, n, "random");
        }
        /* rounding ties: with a block maximum of 127 (Q8_K: -127 maps to
         * -127 exactly too), d = 1 and every k + 0.5 is a tie */
        for (int64_t i = 0; i < n; i++)
            x[i] = (float)((int)(rng_u64() % 254) - 127) + 0.5f;
        for (int64_t b = 0; b < n; b += 32)
            x[b + 5] = 127.0f;
        check_quantize(t, type, x, n, "ties");
        /* zeros, and a block with a single tiny value */
        memset(x, 0, n * sizeof(float));
        x[n - 1] = 1e-30f;
        check_quantize(t, type, x, n, "zeros");
        /* +-max ties: the first of them sets Q8_K's sign */
        for (int order = 0; order < 2; order++) {
            random_floats(x, n);
            for (int64_t b = 0; b < n; b += QK_K) {
                x[b + 17] = order ? 50.0f : -50.0f;
                x[b + 200] = order ? -50.0f : 50.0f;
            }
            check_quantize(t, type, x, n, order ? "+max first" : "-max first");
        }
        check_quantize(t, type, x, bs, "one block");
        if (type == GGML_TYPE_F16) /* lengths with scalar tails */
            for (int64_t m = 1; m < 40; m++)
                check_quantize(t, type, x, m, "tail");
    }
    free(x);
}

/* fp16 -> fp32 over every half except NaNs. */
static void test_f16_dequant(void **state)
{
    const struct kernel_table *t = variant_table(state);
    uint16_t *h = malloc(65536 * sizeof(uint16_t));
    float *want = malloc(65536 * sizeof(float)), *got = malloc(65536 * sizeof(float));
    int64_t n = 0;
    for (uint32_t i = 0; i < 65536; i++)
        if ((i & 0x7c00) != 0x7c00 || (i & 0x3ff) == 0)
            h[n++] = (uint16_t)i;
    ref()->types[GGML_TYPE_F16].to_float(h, want, n);
    t->types[GGML_TYPE_F16].to_float(h, got, n);
    assert_memory_equal(want, got, n * sizeof(float));
    t->types[GGML_TYPE_F16].to_float(h + 1, got, 13); /* tail only */
    assert_memory_equal(want + 1, got, 13 * sizeof(float));
    free(h);
    free(want);
    free(got);
}

/* -------------------------- float dots -------------------------- */

static void test_float_dots(void **state)
{
    const struct kernel_table *t = variant_table(state);
    static const uint32_t types[] = {GGML_TYPE_F32, GGML_TYPE_F16, GGML_TYPE_BF16};
    const int64_t n_max = 300;
    float *x = malloc(n_max * sizeof(float)), *y = malloc(n_max * sizeof(float));
    float *xd = malloc(n_max * sizeof(float)), *yd = malloc(n_max * sizeof(float));
    void *w = malloc(n_max * 4), *a = malloc(n_max * 4);
    double worst[4] = {0};
    for (int64_t n = 0; n <= n_max; n += 1 + n / 16) {
        random_floats(x, n);
        random_floats(y, n);
        for (size_t k = 0; k < 3; k++) {
            const uint32_t type = types[k];
            ref()->types[type].from_float(x, w, n);
            ref()->types[type].from_float(y, a, n);
            ref()->types[type].to_float(w, xd, n);
            ref()->types[type].to_float(a, yd, n);
            double mag = 0;
            for (int64_t i = 0; i < n; i++)
                mag += fabs((double)xd[i] * yd[i]);
            if (n % 4 == 1) /* rows of n elements, GEMM_ROWS of them from x, GEMM_TOKS from y */
                check_gemm(t, type, w, 0, a, 0, n);
            const float want = ref()->types[type].vec_dot(n, w, a), got = t->types[type].vec_dot(n, w, a);
            const double e = mag > 0 ? fabs((double)got - want) / mag : fabs(got);
            worst[k] = fmax(worst[k], e);
            /* the reference's double sum in another order, then one float rounding */
            if (fabs((double)got - want) > 0x1p-24 * fabs((double)want) + 1e-12 * mag)
                fail_msg("%s vec_dot %s n = %lld: %.9g, reference %.9g", t->name, tname(type), (long long)n,
                         (double)got, (double)want);
        }
        double mag = 0;
        for (int64_t i = 0; i < n; i++)
            mag += fabs((double)x[i] * y[i]);
        const float want = ref()->vec_dot_f32(x, y, n), got = t->vec_dot_f32(x, y, n);
        const double e = mag > 0 ? fabs((double)got - want) / mag : fabs(got);
        worst[3] = fmax(worst[3], e);
        if (fabs((double)got - want) > 0x1p-24 * fabs((double)want) + 1e-12 * mag)
            fail_msg("%s vec_dot_f32 n = %lld: %.9g, reference %.9g", t->name, (long long)n, (double)got,
                     (double)want);
    }
    printf("  %s float dots, max |got - ref| / sum|w a|: F32 %.2g F16 %.2g BF16 %.2g vec_dot_f32 %.2g\n",
           t->name, worst[0], worst[1], worst[2], worst[3]);
    free(x);
    free(y);
    free(xd);
    free(yd);
    free(w);
    free(a);
}

/* -------------------------- f32 ops -------------------------- */

/* max |got - want| / (|want| + floor) over n values */
static double rel_err(const float *got, const float *want, int64_t n, double floor)
{
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        if (isnan(got[i]) != isnan(want[i]))
            return INFINITY;
        if (!isnan(got[i]) && got[i] != want[i])
            worst = fmax(worst, fabs((double)got[i] - want[i]) / (fabs((double)want[i]) + floor));
    }
    return worst;
}

static void test_ops(void **state)
{
    const struct kernel_table *t = variant_table(state);
    const struct kernel_table *r = ref();
    enum { N = 4099 };
    static float x[N], w[N], a[N], b[N];
    static const int64_t sizes[] = {0, 1, 3, 4, 7, 17, 64, 641, 2048, N};
    double e_rms = 0, e_soft = 0, e_silu = 0, e_gelu = 0;
    int64_t gg_diff = 0, gg_total = 0;
    check_argmax(t, r);
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        const int64_t n = sizes[k];
        for (int64_t i = 0; i < n; i++) {
            x[i] = rng_sym() * 8.0f;
            w[i] = 1.0f + rng_sym() * 0.5f;
        }
        /* vec helpers: the reference's bits */
        t->vec_mul(a, x, w, n);
        r->vec_mul(b, x, w, n);
        assert_memory_equal(a, b, n * sizeof(float));
        t->vec_add(a, x, w, n);
        r->vec_add(b, x, w, n);
        assert_memory_equal(a, b, n * sizeof(float));
        memcpy(a, x, n * sizeof(float));
        memcpy(b, x, n * sizeof(float));
        t->vec_scale(a, n, -0.37f);
        r->vec_scale(b, n, -0.37f);
        assert_memory_equal(a, b, n * sizeof(float));
        /* rmsnorm, with and without weights, and in place */
        for (int wi = 0; wi < 2; wi++) {
            t->rmsnorm(a, x, wi ? w : NULL, n, 1e-6f);
            r->rmsnorm(b, x, wi ? w : NULL, n, 1e-6f);
            e_rms = fmax(e_rms, rel_err(a, b, n, 0));
        }
        memcpy(b, x, n * sizeof(float));
        t->rmsnorm(b, b, w, n, 1e-6f);
        t->rmsnorm(a, x, w, n, 1e-6f);
        assert_memory_equal(a, b, n * sizeof(float));
        /* softmax, with a masked position */
        memcpy(a, x, n * sizeof(float));
        if (n > 2)
            a[n / 2] = -INFINITY;
        memcpy(b, a, n * sizeof(float));
        t->softmax(a, n);
        r->softmax(b, n);
        e_soft = fmax(e_soft, rel_err(a, b, n, 1e-30));
        if (n > 2)
            assert_true(a[n / 2] == 0.0f);
        /* activations over -20..20 */
        for (int64_t i = 0; i < n; i++)
            x[i] = rng_sym() * 20.0f;
        if (n > 5)
            x[0] = 0.0f, x[1] = -10.0f, x[2] = 10.0f, x[3] = 9.999f, x[4] = -9.999f;
        memcpy(a, x, n * sizeof(float));
        memcpy(b, x, n * sizeof(float));
        t->silu(a, n);
        r->silu(b, n);
        e_silu = fmax(e_silu, rel_err(a, b, n, 1e-30));
        memcpy(a, x, n * sizeof(float));
        memcpy(b, x, n * sizeof(float));
        t->gelu(a, n);
        r->gelu(b, n);
        for (int64_t i = 0; i < n; i++) /* 1 + tanh cancels for x << 0: absolute 1e-6 */
            e_gelu = fmax(e_gelu, fabs((double)a[i] - b[i]) / (1e-6 * fabs((double)b[i]) + 1e-6));
        memcpy(a, x, n * sizeof(float));
        memcpy(b, x, n * sizeof(float));
        t->gelu_ggml(a, n);
        r->gelu_ggml(b, n);
        for (int64_t i = 0; i < n; i++) {
            gg_total++;
            if (a[i] == b[i])
                continue;
            gg_diff++;
            /* tanh's last-ulp difference may move the fp16 rounding by one
             * step, or for x < -4 (where 1 + tanh cancels) by 1e-6 */
            const uint16_t ha = fp32_to_fp16(a[i]), hb = fp32_to_fp16(b[i]);
            const bool step = abs((int)ha - (int)hb) == 1 || fabsf(a[i] - b[i]) <= 1e-6f;
            if (!step || fp16_to_fp32(ha) != a[i])
                fail_msg("%s gelu_ggml(%.9g) = %.9g, reference %.9g", t->name, (double)x[i], (double)a[i],
                         (double)b[i]);
        }
    }
    printf("  %s ops, max relative difference from the reference: rmsnorm %.2g softmax %.2g silu %.2g "
           "gelu %.2g (of the bound 1e-6 |ref| + 1e-6); gelu_ggml %lld of %lld one fp16 step off\n",
           t->name, e_rms, e_soft, e_silu, e_gelu, (long long)gg_diff, (long long)gg_total);
    assert_true(e_rms <= 0x1p-22);  /* the double sum's order: an ulp at most */
    assert_true(e_soft <= 1e-6);    /* sleef's expf: <= 1 ulp, then normalized */
    assert_true(e_silu <= 1e-6);
    assert_true(e_gelu <= 1.0);
    assert_true(gg_diff * 100 <= gg_total); /* rare */
}

/* ------------------------------ gemm_many ------------------------------ */

/* gemm_many of rows x toks against the reference's vec_dot, bit for bit,
 * and nothing written outside the rows x toks outputs (stride rows + 3). */
static void check_many(const struct kernel_table *t, uint32_t type, const uint8_t *w, size_t w_row, int64_t rows,
                       const uint8_t *a, size_t a_row, int64_t toks, int64_t n, const char *what)
{
    const size_t ys = (size_t)rows + 3;
    float *y = malloc((size_t)toks * ys * sizeof(float));
    for (size_t i = 0; i < (size_t)toks * ys; i++)
        y[i] = -1234.5f;
    assert_int_equal(t->types[type].gemm_many(n, w, w_row, rows, a, a_row, toks, y, ys), 0);
    for (int64_t k = 0; k < toks; k++) {
        for (size_t r = 0; r < ys; r++) {
            const float got = y[(size_t)k * ys + r];
            if (r >= (size_t)rows) {
                if (got != -1234.5f)
                    fail_msg("%s gemm_many %s rows = %lld toks = %lld wrote outside", t->name, tname(type),
                             (long long)rows, (long long)toks);
                continue;
            }
            const float want = ref()->types[type].vec_dot(n, w + r * w_row, a + (size_t)k * a_row);
            if (memcmp(&got, &want, sizeof(float)) != 0)
                fail_msg("%s gemm_many %s (%s) n = %lld rows = %lld toks = %lld [%zu,%lld]: %.9g, reference %.9g",
                         t->name, tname(type), what, (long long)n, (long long)rows, (long long)toks, r,
                         (long long)k, (double)got, (double)want);
        }
    }
    free(y);
}

/* The many-token kernels (gemm_neon_body.h) on odd sizes: row counts that
 * end inside a group of 4 and cross the 16-row chunks, token counts that
 * end inside a group of 4 and cross the 64-token passes, 1..13 blocks; on
 * quantized and raw activations (-128 included), and on the extremes where
 * an int16 partial sum would overflow if a lane held too many products. */
static void test_gemm_many(void **state)
{
    const struct kernel_table *t = variant_table(state);
    static const int64_t n_blocks[] = {1, 3, 13}, n_rows[] = {1, 4, 7, 16, 21, 37}, n_toks[] = {1, 3, 4, 5, 16, 19, 35, 67};
    int n_types = 0;
    for (size_t k = 0; k < N_QUANT_TYPES; k++) {
        const uint32_t type = quant_types[k], at = ref()->types[type].vec_dot_type;
        if (!t->types[type].gemm_many)
            continue;
        n_types++;
        const int64_t bs = ggml_type_traits_get(type)->block_size;
        for (size_t s = 0; s < sizeof(n_blocks) / sizeof(n_blocks[0]); s++) {
            const int64_t n = bs * n_blocks[s], max_rows = 37, max_toks = 67;
            const size_t w_row = ggml_row_size(type, n), a_row = ggml_row_size(at, n);
            uint8_t *w = malloc(max_rows * w_row), *a = malloc(max_toks * a_row);
            float *x = malloc(n * sizeof(float));
            random_blocks(type, w, max_rows * n);
            for (int64_t k2 = 0; k2 < max_toks; k2++) {
                random_floats(x, n);
                ref()->types[at].from_float(x, a + k2 * a_row, n);
            }
            for (size_t i = 0; i < sizeof(n_rows) / sizeof(n_rows[0]); i++)
                for (size_t j = 0; j < sizeof(n_toks) / sizeof(n_toks[0]); j++)
                    check_many(t, type, w, w_row, n_rows[i], a, a_row, n_toks[j], n, "quantized activations");
            if (at != GGML_TYPE_Q8_K) {
                random_blocks(at, a, max_toks * n);
                check_many(t, type, w, w_row, 21, a, a_row, 19, n, "random activation blocks");
            }
            /* extremes: every quant at its most negative (Q4_0 nibble 0 = -8,
             * Q5_0 0 = -16, Q8_0 -128, Q6_K 0 = -32, IQ4_NL nibble 0 = -127)
             * or largest (Q4_K 15, scales 63),
             * every activation -128 (bsums to match), scales 1.0 */
            memset(w, type == GGML_TYPE_Q4_K ? 0xff : type == GGML_TYPE_Q8_0 ? 0x80 : 0x00, max_rows * w_row);
            int off[2];
            half_fields(type, off);
            const size_t ts = ggml_type_traits_get(type)->type_size;
            for (int64_t b = 0; b < max_rows * n / bs; b++) {
                for (int f = 0; f < 2 && off[f] >= 0; f++)
                    memcpy(w + b * ts + off[f], &(uint16_t){0x3c00}, 2);
                if (type == GGML_TYPE_Q6_K)
                    memset(w + b * ts + offsetof(block_q6_K, scales), 127, QK_K / 16);
            }
            for (int64_t b = 0; b < max_toks * n / bs; b++) {
                if (at == GGML_TYPE_Q8_K) {
                    block_q8_K *yb = (block_q8_K *)a + b;
                    yb->d = 1.0f;
                    memset(yb->qs, 0x80, sizeof(yb->qs));
                    for (int g = 0; g < QK_K / 16; g++)
                        yb->bsums[g] = 16 * -128;
                } else {
                    block_q8_0 *yb = (block_q8_0 *)a + b;
                    yb->d = 0x3c00;
                    memset(yb->qs, 0x80, sizeof(yb->qs));
                }
            }
            check_many(t, type, w, w_row, 21, a, a_row, 19, n, "extremes");
            free(w);
            free(a);
            free(x);
        }
    }
    printf("  %s: gemm_many checked for %d types\n", t->name, n_types);
    assert_true(n_types >= 6); /* Q4_0, Q5_0, Q8_0, IQ4_NL, Q4_K, Q6_K */
}

/* The x4 tiles (repack.h) of the variant: four rows repacked, the gemm of
 * the x4 type for 1..GEMM_TOKS tokens must give the bits of the reference's
 * vec_dot on the original rows (1, 3, 13 blocks: Q4_0 tiles with and
 * without leftover blocks), on random blocks and at the extremes (quants
 * and scales at their largest, activations -128); and gemm_many of the x4
 * type on 21 rows (five groups and one row as stored) and 19 tokens. */
static void test_x4(void **state)
{
    const struct kernel_table *t = variant_table(state);
    static const int64_t n_blocks[] = {1, 3, 13};
    int n_types = 0;
    for (size_t k = 0; k < N_QUANT_TYPES; k++) {
        const uint32_t type = quant_types[k], x4 = t->types[type].repack_type, at = ref()->types[type].vec_dot_type;
        if (!x4)
            continue;
        n_types++;
        assert_int_equal(repack_base_of(x4), type);
        const int64_t bs = ggml_type_traits_get(type)->block_size;
        for (size_t s = 0; s < sizeof(n_blocks) / sizeof(n_blocks[0]); s++) {
            const int64_t n = bs * n_blocks[s], rows = 21, toks = 19;
            const size_t w_row = ggml_row_size(type, n), a_row = ggml_row_size(at, n);
            uint8_t *w = malloc(rows * w_row), *wx = malloc(rows * w_row), *a = malloc(toks * a_row);
            float *x = malloc(n * sizeof(float));
            for (int pass = 0; pass < 2; pass++) {
                if (pass == 0) {
                    random_blocks(type, w, rows * n);
                    for (int64_t k2 = 0; k2 < toks; k2++) {
                        random_floats(x, n);
                        ref()->types[at].from_float(x, a + k2 * a_row, n);
                    }
                } else { /* quants and scales at their largest, activations -128 */
                    memset(w, 0xff, rows * w_row);
                    int off[2];
                    half_fields(type, off);
                    const size_t ts = ggml_type_traits_get(type)->type_size;
                    for (int64_t b = 0; b < rows * n / bs; b++)
                        for (int f = 0; f < 2 && off[f] >= 0; f++)
                            memcpy(w + b * ts + off[f], &(uint16_t){0x3c00}, 2);
                    for (int64_t b = 0; b < toks * n / bs; b++) {
                        if (at == GGML_TYPE_Q8_K) {
                            block_q8_K *yb = (block_q8_K *)a + b;
                            yb->d = 1.0f;
                            memset(yb->qs, 0x80, sizeof(yb->qs));
                            for (int g = 0; g < QK_K / 16; g++)
                                yb->bsums[g] = 16 * -128;
                        } else {
                            block_q8_0 *yb = (block_q8_0 *)a + b;
                            yb->d = 0x3c00;
                            memset(yb->qs, 0x80, sizeof(yb->qs));
                        }
                    }
                }
                repack_x4(x4, w, wx, n, rows);
                enum { YS = GEMM_ROWS + 3 };
                float y[GEMM_TOKS * YS];
                for (int64_t g = 0; g + 4 <= rows; g += 4) {
                    for (int nt = 1; nt <= GEMM_TOKS; nt++) {
                        for (int i = 0; i < GEMM_TOKS * YS; i++)
                            y[i] = -1234.5f;
                        t->types[x4].gemm(n, wx + g * w_row, w_row, a + g % 8 * a_row, a_row, y, YS, nt);
                        for (int k2 = 0; k2 < GEMM_TOKS; k2++)
                            for (int r = 0; r < YS; r++) {
                                const float got = y[k2 * YS + r];
                                if (k2 >= nt || r >= GEMM_ROWS) {
                                    if (got != -1234.5f)
                                        fail_msg("%s gemm %s nt = %d wrote outside its tile", t->name, tname(x4), nt);
                                    continue;
                                }
                                const float want =
                                    ref()->types[type].vec_dot(n, w + (g + r) * w_row, a + (g % 8 + k2) * a_row);
                                if (memcmp(&got, &want, sizeof(float)) != 0)
                                    fail_msg("%s gemm %s n = %lld nt = %d rows %lld+%d token %d (%s): %.9g, reference %.9g",
                                             t->name, tname(x4), (long long)n, nt, (long long)g, r, k2,
                                             pass ? "extremes" : "random", (double)got, (double)want);
                            }
                    }
                }
                if (t->types[x4].gemm_many) {
                    const size_t ys = (size_t)rows + 3;
                    float *ym = malloc((size_t)toks * ys * sizeof(float));
                    assert_int_equal(t->types[x4].gemm_many(n, wx, w_row, rows, a, a_row, toks, ym, ys), 0);
                    for (int64_t k2 = 0; k2 < toks; k2++)
                        for (int64_t r = 0; r < rows; r++) {
                            const float got = ym[(size_t)k2 * ys + (size_t)r];
                            const float want = ref()->types[type].vec_dot(n, w + r * w_row, a + k2 * a_row);
                            if (memcmp(&got, &want, sizeof(float)) != 0)
                                fail_msg("%s gemm_many %s n = %lld [%lld,%lld] (%s): %.9g, reference %.9g", t->name,
                                         tname(x4), (long long)n, (long long)r, (long long)k2,
                                         pass ? "extremes" : "random", (double)got, (double)want);
                        }
                    free(ym);
                }
            }
            free(w);
            free(wx);
            free(a);
            free(x);
        }
    }
    printf("  %s: x4 tiles checked for %d types\n", t->name, n_types);
}

/* Every entry the reference has, the variant has, with the same formats. */
static void test_table(void **state)
{
    const struct kernel_table *t = variant_table(state);
    struct variant *v = *state;
    assert_string_equal(t->name, v->name);
    for (uint32_t type = 0; type < GGML_TYPE_COUNT; type++) {
        const struct kernel_type_ops *r = &ref()->types[type], *o = &t->types[type];
        assert_true(!r->to_float == !o->to_float);
        assert_true(!r->from_float == !o->from_float);
        assert_true(!r->vec_dot == !o->vec_dot);
        assert_true(!r->gemm == !o->gemm);
        assert_int_equal(r->vec_dot_type, o->vec_dot_type);
    }
    assert_non_null(t->rmsnorm);
    assert_non_null(t->softmax);
    assert_non_null(t->vec_dot_f32);
}

/* crc32c with the CRC32C instructions where the CPU has them (the
 * repacked-weight cache checks its whole file with it at every load) */
static void test_crc32c(void **state)
{
    (void)state;
    printf("  crc32c: %s\n", cpu_features_get()->crc32 ? "CRC32C instructions" : "tables");
    check_crc32c();
}

#define VARIANT_TESTS(v)                                                            \
    cmocka_unit_test_prestate(test_table, &(v)), cmocka_unit_test_prestate(test_quant_dots, &(v)), \
        cmocka_unit_test_prestate(test_quant_dots_extremes, &(v)),                 \
        cmocka_unit_test_prestate(test_quantizers, &(v)), cmocka_unit_test_prestate(test_f16_dequant, &(v)), \
        cmocka_unit_test_prestate(test_float_dots, &(v)), cmocka_unit_test_prestate(test_ops, &(v)), \
        cmocka_unit_test_prestate(test_gemm_many, &(v)), cmocka_unit_test_prestate(test_x4, &(v))

int main(void)
{
    char feats[256];
    cpu_features_format(cpu_features_get(), feats, sizeof(feats));
    printf("cpu features: %s\n", feats[0] ? feats : "(none)");
    const struct CMUnitTest tests[] = {VARIANT_TESTS(v_neon), VARIANT_TESTS(v_dotprod), VARIANT_TESTS(v_i8mm),
                                       cmocka_unit_test(test_crc32c)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
