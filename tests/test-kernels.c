/*
 * test-kernels.c - the scalar reference kernels: dequantization against
 * golden data from gguf-py (tests/data/kernels, made by
 * contrib/kernels-golden.py), quantizers, dot products, fp16/bf16
 * conversions, the f32 ops against double-precision formulas, and matmul.
 *
 * Error measures (printed; the figures quoted in reviews come from here):
 *   kernel error   |dot - sum(deq(w) * deq(a))| / sum|deq(w) * deq(a)|, with
 *                  the activations as the kernel saw them: only float
 *                  rounding inside the kernel remains, so it must be tiny.
 *   total error    |dot - sum(deq(w) * x)| / (||deq(w)|| ||x||), against the
 *                  float activations: dominated by activation quantization.
 *                  By Cauchy-Schwarz it is at most ||deq(a) - x|| / ||x||,
 *                  the relative error of the activation format (bounds per
 *                  type in act_tolerance()).
 */
#include "test-common.h"

#include <math.h>
#include <pthread.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "../kernels/dispatch.h"
#include "../kernels/matmul.h"
#include "../kernels/ops.h"
#include "../kernels/pool.h"
#include "../kernels/quants.h"
#include "model/gguf.h"

/* ------------------------------ helpers ------------------------------ */

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

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

/* n floats: gaussian blocks of 32 with magnitudes varying by 10^3, one
 * outlier, and (when n >= 128) one all-zero block. */
static void fill_activations(float *x, int64_t n)
{
    for (int64_t b = 0; b < n / 32; b++) {
        const float scale = (float)pow(10.0, -2.0 + 3.0 * rng_uniform());
        for (int j = 0; j < 32; j++)
            x[b * 32 + j] = rng_gauss() * scale;
    }
    if (n >= 128)
        memset(x + 64, 0, 32 * sizeof(float));
    x[n / 3] = 25.0f;
}

static const char *data_path(const char *name, const char *ext)
{
    static char buf[4096];
    snprintf(buf, sizeof(buf), "%s/tests/data/kernels/%s.%s", test_srcdir(), name, ext);
    return buf;
}

static void *load(const char *name, const char *ext, size_t *len)
{
    char *p = test_read_file(data_path(name, ext), len);
    if (!p)
        fail_msg("cannot read %s", data_path(name, ext));
    return p;
}

static const struct kernel_type_ops *ref_ops(uint32_t type) { return &kernels_ref()->types[type]; }

/* Bytes of n elements of type (asserting it is a whole number of blocks). */
static size_t row_bytes(uint32_t type, int64_t n)
{
    size_t s = ggml_row_size(type, n);
    assert_true(s > 0);
    return s;
}

/* Random but valid blocks of a weight type: any bits, finite fp16 scales. */
static void random_blocks(uint32_t type, void *dst, int64_t n)
{
    const struct ggml_type_traits *t = ggml_type_traits_get(type);
    uint8_t *p = dst;
    const int64_t nb = n / t->block_size;
    for (size_t i = 0; i < (size_t)nb * t->type_size; i++)
        p[i] = (uint8_t)rng_u64();
    int half_off[2] = {-1, -1};
    switch (type) {
    case GGML_TYPE_Q4_0: case GGML_TYPE_Q5_0: case GGML_TYPE_Q8_0: case GGML_TYPE_IQ4_NL: case GGML_TYPE_IQ4_XS:
        half_off[0] = 0; break;
    case GGML_TYPE_Q4_1: case GGML_TYPE_Q5_1: case GGML_TYPE_Q4_K: case GGML_TYPE_Q5_K:
        half_off[0] = 0, half_off[1] = 2; break;
    case GGML_TYPE_Q6_K: half_off[0] = 208; break;
    case GGML_TYPE_Q2_K: half_off[0] = 80, half_off[1] = 82; break;
    case GGML_TYPE_Q3_K: half_off[0] = 108; break;
    default: fail_msg("random_blocks: type %u", type);
    }
    for (int64_t b = 0; b < nb; b++) {
        for (int k = 0; k < 2; k++) {
            if (half_off[k] < 0)
                continue;
            const float v = (float)((rng_uniform() * 2 - 1) * pow(10.0, -3.0 * rng_uniform()));
            const uint16_t h = fp32_to_fp16(v);
            memcpy(p + b * t->type_size + half_off[k], &h, 2);
        }
    }
}

/* n elements of a weight type: quantized gaussian data where a quantizer
 * exists, random valid blocks for the K-quants. */
static void make_weights(uint32_t type, void *dst, int64_t n_rows, int64_t n_in)
{
    const size_t rb = row_bytes(type, n_in);
    float *tmp = malloc((size_t)n_in * sizeof(float));
    for (int64_t r = 0; r < n_rows; r++) {
        void *row = (char *)dst + (size_t)r * rb;
        if (ref_ops(type)->from_float) {
            for (int64_t i = 0; i < n_in; i++)
                tmp[i] = rng_gauss() * 0.05f;
            ref_ops(type)->from_float(tmp, row, n_in);
        } else {
            random_blocks(type, row, n_in);
        }
    }
    free(tmp);
}

/* Relative error bound of converting activations to `type` (see the header
 * comment): Q8 formats round each element to within d/2, d = amax/127 of its
 * block (Q8_0/Q8_1 store d as fp16: +2^-11 relative), so ||deq(a) - x|| <=
 * sqrt(n) * max_block_amax / 254.  Our activations have block magnitudes
 * varying 1000-fold plus an outlier, so the largest block dominates: the
 * bound over ||x|| is about amax/(254 * rms of the largest blocks) ~ 0.02.
 * F16 and BF16 round to 11 and 8 significant bits; F32 is exact. */
static double act_tolerance(uint32_t act_type)
{
    switch (act_type) {
    case GGML_TYPE_Q8_0: case GGML_TYPE_Q8_1: case GGML_TYPE_Q8_K: return 0.02;
    case GGML_TYPE_F16: return 0x1p-11;
    case GGML_TYPE_BF16: return 0x1p-8;
    default: return 1e-6;
    }
}

static const uint32_t weight_types[] = {
    GGML_TYPE_F32,  GGML_TYPE_F16,  GGML_TYPE_BF16, GGML_TYPE_Q4_0, GGML_TYPE_Q4_1, GGML_TYPE_Q5_0,
    GGML_TYPE_Q5_1, GGML_TYPE_Q8_0, GGML_TYPE_Q4_K, GGML_TYPE_Q5_K, GGML_TYPE_Q6_K, GGML_TYPE_Q2_K,
    GGML_TYPE_Q3_K, GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS,
};
#define N_WEIGHT_TYPES (sizeof(weight_types) / sizeof(weight_types[0]))

static const char *tname(uint32_t type) { return ggml_type_traits_get(type)->name; }

/* ------------------------ (a) golden dequantization ------------------------ */

struct golden {
    const char *name;
    uint32_t type;
};

static const struct golden goldens[] = {
    {"f16", GGML_TYPE_F16},          {"bf16", GGML_TYPE_BF16},        {"q4_0", GGML_TYPE_Q4_0},
    {"q4_1", GGML_TYPE_Q4_1},        {"q5_0", GGML_TYPE_Q5_0},        {"q5_1", GGML_TYPE_Q5_1},
    {"q8_0", GGML_TYPE_Q8_0},        {"q4_0-rand", GGML_TYPE_Q4_0},   {"q4_1-rand", GGML_TYPE_Q4_1},
    {"q5_0-rand", GGML_TYPE_Q5_0},   {"q5_1-rand", GGML_TYPE_Q5_1},   {"q8_0-rand", GGML_TYPE_Q8_0},
    {"q4_k-rand", GGML_TYPE_Q4_K},   {"q5_k-rand", GGML_TYPE_Q5_K},   {"q6_k-rand", GGML_TYPE_Q6_K},
    {"q4_k-model", GGML_TYPE_Q4_K},  {"q6_k-model", GGML_TYPE_Q6_K},  {"q5_0-model", GGML_TYPE_Q5_0},
    {"q8_0-model", GGML_TYPE_Q8_0},  {"q2_k-rand", GGML_TYPE_Q2_K},   {"q3_k-rand", GGML_TYPE_Q3_K},
    {"iq4_nl-rand", GGML_TYPE_IQ4_NL}, {"iq4_xs-rand", GGML_TYPE_IQ4_XS},
};

/* Dequantization is bit-exact with gguf-py: both do the same float
 * operations (one multiply, or multiply then add/subtract) in the same order. */
static void test_golden_dequant(void **state)
{
    (void)state;
    for (size_t g = 0; g < sizeof(goldens) / sizeof(goldens[0]); g++) {
        size_t qlen, flen;
        void *q = load(goldens[g].name, "q", &qlen);
        float *want = load(goldens[g].name, "f32", &flen);
        const int64_t n = (int64_t)(flen / sizeof(float));
        assert_int_equal(row_bytes(goldens[g].type, n), qlen);
        float *got = malloc(flen), *got2 = malloc(flen);
        ref_ops(goldens[g].type)->to_float(q, got, n);
        assert_int_equal(dequantize_row(goldens[g].type, q, got2, n), INFER_OK);
        int64_t bad = 0;
        for (int64_t i = 0; i < n; i++) {
            if (memcmp(&got[i], &want[i], 4) != 0 || memcmp(&got2[i], &want[i], 4) != 0) {
                if (bad++ < 3)
                    print_error("%s[%lld]: got %.9g, gguf-py %.9g\n", goldens[g].name, (long long)i,
                                (double)got[i], (double)want[i]);
            }
        }
        if (bad)
            fail_msg("%s: %lld of %lld values differ from gguf-py", goldens[g].name, (long long)bad, (long long)n);
        free(got);
        free(got2);
        free(q);
        free(want);
    }
}

/* ---------------- (c) quantizers: golden and round-trip bounds ---------------- */

/* ggml's reference quantizers are deterministic and gguf-py reproduces them:
 * our quantize_row_*_ref must give the same bytes. */
static void test_golden_quantize(void **state)
{
    (void)state;
    static const struct golden q[] = {
        {"q4_0", GGML_TYPE_Q4_0}, {"q4_1", GGML_TYPE_Q4_1}, {"q5_0", GGML_TYPE_Q5_0}, {"q5_1", GGML_TYPE_Q5_1},
        {"q8_0", GGML_TYPE_Q8_0}, {"f16", GGML_TYPE_F16},   {"bf16", GGML_TYPE_BF16},
    };
    size_t xlen;
    float *x = load("input", "f32", &xlen);
    const int64_t n = (int64_t)(xlen / sizeof(float));
    for (size_t k = 0; k < sizeof(q) / sizeof(q[0]); k++) {
        size_t wlen;
        uint8_t *want = load(q[k].name, "q", &wlen);
        assert_int_equal(row_bytes(q[k].type, n), wlen);
        uint8_t *got = malloc(wlen);
        ref_ops(q[k].type)->from_float(x, got, n);
        if (memcmp(got, want, wlen) != 0) {
            size_t i = 0;
            while (got[i] == want[i])
                i++;
            fail_msg("%s: quantized bytes differ from gguf-py from byte %zu", q[k].name, i);
        }
        free(got);
        free(want);
    }
    free(x);
}

static void test_q8_round_trip(void **state)
{
    (void)state;
    const int64_t n = 4 * QK_K;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float));
    fill_activations(x, n);
    x[300] = -40.0f; /* a negative extreme: Q8_K maps it to -127 */

    block_q8_0 q0[4 * QK_K / QK8_0];
    quantize_row_q8_0_ref(x, q0, n);
    dequantize_row_q8_0_ref(q0, y, n);
    double worst0 = 0;
    for (int64_t b = 0; b < n / QK8_0; b++) {
        float amax = 0;
        for (int j = 0; j < QK8_0; j++)
            amax = fmaxf(amax, fabsf(x[b * QK8_0 + j]));
        /* half a step, plus the fp16 rounding of d times the largest |q| */
        const double bound = amax / 127.0 * (0.5 + 127 * 0x1p-11) + 1e-30;
        for (int j = 0; j < QK8_0; j++) {
            const double e = fabs((double)y[b * QK8_0 + j] - x[b * QK8_0 + j]);
            assert_true(e <= bound);
            if (amax > 0)
                worst0 = fmax(worst0, e / (amax / 127.0));
        }
    }

    block_q8_K qk[4];
    quantize_row_q8_K_ref(x, qk, n);
    dequantize_row_q8_K_ref(qk, y, n);
    double worstk = 0;
    for (int b = 0; b < 4; b++) {
        float amax = 0;
        for (int j = 0; j < QK_K; j++)
            amax = fmaxf(amax, fabsf(x[b * QK_K + j]));
        int hit = 0;
        for (int j = 0; j < QK_K; j++) {
            const double e = fabs((double)y[b * QK_K + j] - x[b * QK_K + j]);
            assert_true(e <= amax / 127.0 * (0.5 + 1e-5));
            worstk = fmax(worstk, e / (amax / 127.0));
            hit |= fabsf(x[b * QK_K + j]) == amax && abs(qk[b].qs[j]) == 127;
        }
        assert_true(hit); /* the extreme value maps to +-127 */
        for (int g = 0; g < QK_K / 16; g++) {
            int s = 0;
            for (int j = 0; j < 16; j++)
                s += qk[b].qs[g * 16 + j];
            assert_int_equal(qk[b].bsums[g], s);
        }
    }
    assert_int_equal(qk[1].qs[300 - QK_K], -127);
    assert_true(qk[1].d > 0);

    /* Q8_1: s = d * sum(q), rounded to fp16 */
    block_q8_1 q1[4 * QK_K / QK8_1];
    quantize_row_q8_1_ref(x, q1, n);
    for (int64_t b = 0; b < n / QK8_1; b++) {
        int s = 0;
        float amax = 0;
        for (int j = 0; j < QK8_1; j++) {
            s += q1[b].qs[j];
            amax = fmaxf(amax, fabsf(x[b * QK8_1 + j]));
            assert_int_equal(q1[b].qs[j], q0[b].qs[j]);
        }
        assert_int_equal(q1[b].d, q0[b].d);
        assert_int_equal(q1[b].s, fp32_to_fp16((float)s * (amax / 127))); /* d before fp16 rounding */
    }

    /* all-zero input: zero blocks, no NaN */
    memset(x, 0, n * sizeof(float));
    quantize_row_q8_K_ref(x, qk, n);
    dequantize_row_q8_K_ref(qk, y, n);
    quantize_row_q8_0_ref(x, q0, n);
    for (int64_t i = 0; i < n; i++)
        assert_true(y[i] == 0.0f && q0[i / 32].qs[i % 32] == 0);
    printf("  q8 round trip: max error / step  Q8_0 %.4f  Q8_K %.4f (bound 0.5 + fp16 d)\n", worst0, worstk);
    free(x);
    free(y);
}

/* ---------------------------- (b) dot products ---------------------------- */

struct dot_err {
    double kernel, total;
};

/* Measure one weight type over n_rows rows of n_in. */
static struct dot_err dot_errors(const struct kernel_table *kt, uint32_t type, int64_t n_rows, int64_t n_in)
{
    const struct kernel_type_ops *ops = &kt->types[type];
    const uint32_t at = ops->vec_dot_type;
    const size_t wrow = row_bytes(type, n_in), arow = row_bytes(at, n_in);
    uint8_t *w = malloc(wrow * n_rows), *a = malloc(arow);
    float *x = malloc(n_in * sizeof(float)), *xd = malloc(n_in * sizeof(float)), *wd = malloc(n_in * sizeof(float));
    make_weights(type, w, n_rows, n_in);
    fill_activations(x, n_in);
    kt->types[at].from_float(x, a, n_in);
    kt->types[at].to_float(a, xd, n_in);
    struct dot_err e = {0, 0};
    for (int64_t r = 0; r < n_rows; r++) {
        ops->to_float(w + r * wrow, wd, n_in);
        double exact_q = 0, abs_q = 0, exact = 0, ww = 0, xx = 0;
        for (int64_t i = 0; i < n_in; i++) {
            double wi = wd[i];
            if (at == GGML_TYPE_Q8_1) {
                /* Q4_1/Q5_1 x Q8_1: the minimum m multiplies the block's
                 * stored sum s (fp16 of d * sum q), not sum(d * q) */
                const uint8_t *blk = w + r * wrow + (size_t)(i / 32) * ggml_type_traits_get(type)->type_size;
                const block_q8_1 *ab = (const block_q8_1 *)a + i / 32;
                const float m = fp16_to_fp32((uint16_t)(blk[2] | blk[3] << 8));
                wi -= m;
                if (i % 32 == 0)
                    exact_q += (double)m * fp16_to_fp32(ab->s);
            }
            exact_q += wi * xd[i];
            abs_q += fabs((double)wd[i] * xd[i]);
            exact += (double)wd[i] * x[i];
            ww += (double)wd[i] * wd[i];
            xx += (double)x[i] * x[i];
        }
        const float got = ops->vec_dot(n_in, w + r * wrow, a);
        assert_false(isnan(got));
        if (abs_q > 0)
            e.kernel = fmax(e.kernel, fabs(got - exact_q) / abs_q);
        if (ww > 0)
            e.total = fmax(e.total, fabs(got - exact) / sqrt(ww * xx));
    }
    free(w);
    free(a);
    free(x);
    free(xd);
    free(wd);
    return e;
}

/* The kernel error threshold: float rounding of a few operations per block
 * (the integer sums are exact); products of fp16/bf16 values are exact in
 * float, so 1e-5 relative to sum|w a| leaves a wide margin while a wrong
 * nibble, bit or scale gives errors of order 1. */
#define KERNEL_TOL 1e-5

static void test_vec_dot(void **state)
{
    (void)state;
    const struct kernel_table *kt = kernels_ref();
    printf("  %-5s %-5s %12s %12s %10s\n", "type", "act", "kernel err", "total err", "bound");
    for (size_t k = 0; k < N_WEIGHT_TYPES; k++) {
        const uint32_t type = weight_types[k];
        assert_non_null(kt->types[type].vec_dot);
        struct dot_err e1 = dot_errors(kt, type, 7, 256);
        struct dot_err e2 = dot_errors(kt, type, 5, 5 * 256);
        const double ek = fmax(e1.kernel, e2.kernel), et = fmax(e1.total, e2.total);
        const uint32_t at = kt->types[type].vec_dot_type;
        printf("  %-5s %-5s %12.3g %12.3g %10.3g\n", tname(type), tname(at), ek, et, act_tolerance(at));
        if (ek > KERNEL_TOL)
            fail_msg("%s: vec_dot differs from the dequantized dot by %g (relative)", tname(type), ek);
        if (et > act_tolerance(at))
            fail_msg("%s: vec_dot error %g against float activations exceeds %g", tname(type), et,
                     act_tolerance(at));
    }
}

/* The pairing of weight types with activation formats is ggml's. */
static void test_vec_dot_types(void **state)
{
    (void)state;
    const struct kernel_table *kt = kernels_ref();
    assert_string_equal(kt->name, "ref");
    assert_int_equal(kt->types[GGML_TYPE_Q4_0].vec_dot_type, GGML_TYPE_Q8_0);
    assert_int_equal(kt->types[GGML_TYPE_Q5_0].vec_dot_type, GGML_TYPE_Q8_0);
    assert_int_equal(kt->types[GGML_TYPE_Q8_0].vec_dot_type, GGML_TYPE_Q8_0);
    assert_int_equal(kt->types[GGML_TYPE_Q4_1].vec_dot_type, GGML_TYPE_Q8_1);
    assert_int_equal(kt->types[GGML_TYPE_Q5_1].vec_dot_type, GGML_TYPE_Q8_1);
    assert_int_equal(kt->types[GGML_TYPE_Q4_K].vec_dot_type, GGML_TYPE_Q8_K);
    assert_int_equal(kt->types[GGML_TYPE_Q5_K].vec_dot_type, GGML_TYPE_Q8_K);
    assert_int_equal(kt->types[GGML_TYPE_Q6_K].vec_dot_type, GGML_TYPE_Q8_K);
    assert_int_equal(kt->types[GGML_TYPE_Q2_K].vec_dot_type, GGML_TYPE_Q8_K);
    assert_int_equal(kt->types[GGML_TYPE_Q3_K].vec_dot_type, GGML_TYPE_Q8_K);
    assert_int_equal(kt->types[GGML_TYPE_IQ4_XS].vec_dot_type, GGML_TYPE_Q8_K);
    assert_int_equal(kt->types[GGML_TYPE_IQ4_NL].vec_dot_type, GGML_TYPE_Q8_0);
    assert_int_equal(kt->types[GGML_TYPE_F16].vec_dot_type, GGML_TYPE_F16);
    assert_int_equal(kt->types[GGML_TYPE_BF16].vec_dot_type, GGML_TYPE_BF16);
    assert_int_equal(kt->types[GGML_TYPE_F32].vec_dot_type, GGML_TYPE_F32);
    /* every type of the default model, and no more than the table lists */
    static const uint32_t model_types[] = {GGML_TYPE_F32, GGML_TYPE_Q8_0, GGML_TYPE_Q5_0, GGML_TYPE_Q4_K,
                                           GGML_TYPE_Q6_K};
    for (size_t i = 0; i < 5; i++)
        assert_true(kernels_type_supported(model_types[i]));
    /* and the types of Q2_K, Q3_K_M and IQ4_XS/IQ4_NL files */
    static const uint32_t low_bit_types[] = {GGML_TYPE_Q2_K, GGML_TYPE_Q3_K, GGML_TYPE_IQ4_NL, GGML_TYPE_IQ4_XS};
    for (size_t i = 0; i < 4; i++)
        assert_true(kernels_type_supported(low_bit_types[i]));
    assert_false(kernels_type_supported(GGML_TYPE_IQ2_XXS));
    assert_false(kernels_type_supported(GGML_TYPE_Q8_K)); /* activation format only */
    assert_false(kernels_type_supported(4));              /* retired id */
    assert_false(kernels_type_supported(1000));
}

/* --------------------------- (d) fp16 / bf16 --------------------------- */

static double half_value(uint16_t h)
{
    const int sign = h >> 15, exp = (h >> 10) & 0x1f, mant = h & 0x3ff;
    double v;
    if (exp == 0)
        v = ldexp(mant, -24);
    else if (exp == 31)
        v = mant ? NAN : INFINITY;
    else
        v = ldexp(1024 + mant, exp - 25);
    return sign ? -v : v;
}

static double bf16_value(uint16_t h)
{
    const int sign = h >> 15, exp = (h >> 7) & 0xff, mant = h & 0x7f;
    double v;
    if (exp == 0)
        v = ldexp(mant, -133);
    else if (exp == 255)
        v = mant ? NAN : INFINITY;
    else
        v = ldexp(128 + mant, exp - 134);
    return sign ? -v : v;
}

static void test_half_exhaustive(void **state)
{
    (void)state;
    for (uint32_t i = 0; i < 65536; i++) {
        const uint16_t h = (uint16_t)i;
        const double want = half_value(h), wantb = bf16_value(h);
        const float f = fp16_to_fp32(h), fb = bf16_to_fp32(h);
        const float ff = half_to_float(h); /* the kernels' branchless twin */
        if (isnan(want))
            assert_true(isnan(ff));
        else
            assert_memory_equal(&ff, &f, 4);
        if (isnan(want)) {
            assert_true(isnan(f));
            assert_true(isnan(fp16_to_fp32(fp32_to_fp16(f))));
        } else {
            assert_true((double)f == want);
            assert_true(!signbit(f) == !signbit(want));
            assert_int_equal(fp32_to_fp16(f), h);
        }
        if (isnan(wantb)) {
            assert_true(isnan(fb));
            assert_true(isnan(bf16_to_fp32(fp32_to_bf16(fb))));
        } else {
            assert_true((double)fb == wantb);
            assert_int_equal(fp32_to_bf16(fb), h);
        }
    }
}

static float bits_f(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Is h the correctly rounded (nearest, ties to even) half of f? */
static bool half_is_nearest(float f, uint16_t h)
{
    const double x = f, v = half_value(h);
    if (fabs(x) >= 65520.0)
        return isinf(v) && signbit(v) == signbit(x);
    const double err = fabs(v - x);
    for (int d = -1; d <= 1; d += 2) {
        const uint16_t nb = (uint16_t)((h & 0x7fff) + d) | (h & 0x8000);
        if ((h & 0x7fff) == 0 && d < 0)
            continue;
        const double vn = half_value(nb);
        if (isinf(vn) || isnan(vn))
            continue;
        const double en = fabs(vn - x);
        if (en < err || (en == err && (h & 1)))
            return false;
    }
    return true;
}

static void test_half_rounding(void **state)
{
    (void)state;
    struct {
        float f;
        uint16_t h;
    } cases[] = {
        {1.0f + 0x1p-11f, 0x3c00},            /* tie -> even (down) */
        {1.0f + 3 * 0x1p-11f, 0x3c02},        /* tie -> even (up) */
        {1.0f + 0x1p-11f + 0x1p-20f, 0x3c01}, /* just above the tie */
        {65504.0f, 0x7bff},                   /* largest half */
        {65519.99f, 0x7bff},                  /* below the overflow tie */
        {65520.0f, 0x7c00},                   /* tie at the top rounds to inf */
        {1e9f, 0x7c00},
        {-1e9f, 0xfc00},
        {0x1p-24f, 0x0001},                   /* smallest subnormal */
        {0x1p-25f, 0x0000},                   /* tie -> even (zero) */
        {0x1p-25f * 1.0001f, 0x0001},
        {3 * 0x1p-25f, 0x0002},               /* tie -> even */
        {0x1p-14f - 0x1p-25f, 0x0400},        /* tie at the subnormal top -> smallest normal */
        {-0.0f, 0x8000},
        {0x1p-30f, 0x0000},
        {-2.0f, 0xc000},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        if (fp32_to_fp16(cases[i].f) != cases[i].h)
            fail_msg("fp32_to_fp16(%a) = 0x%04x, want 0x%04x", (double)cases[i].f, fp32_to_fp16(cases[i].f),
                     cases[i].h);
    }
    assert_true(isinf(fp16_to_fp32(fp32_to_fp16(INFINITY))));
    assert_true(isnan(fp16_to_fp32(fp32_to_fp16(NAN))));
    /* bf16: ties to even on the 16 dropped bits */
    assert_int_equal(fp32_to_bf16(bits_f(0x3f808000)), 0x3f80);
    assert_int_equal(fp32_to_bf16(bits_f(0x3f818000)), 0x3f82);
    assert_int_equal(fp32_to_bf16(bits_f(0x3f808001)), 0x3f81);
    /* random floats over the half range: the result is the nearest half */
    for (int i = 0; i < 200000; i++) {
        const uint32_t u = (uint32_t)rng_u64();
        const uint32_t e = 0x30000000u + (uint32_t)(rng_u64() % (0x48000000u - 0x30000000u)); /* 2^-31 .. 2^17 */
        const float f = bits_f((u & 0x807fffffu) | (e & 0x7f800000u));
        const uint16_t h = fp32_to_fp16(f);
        if (!half_is_nearest(f, h))
            fail_msg("fp32_to_fp16(%a) = 0x%04x is not the nearest half", (double)f, h);
    }
}

/* ------------------------------ (e) ops ------------------------------ */

static void test_rmsnorm(void **state)
{
    (void)state;
    const int64_t n = 641;
    float x[641], w[641], out[641], out2[641];
    for (int64_t i = 0; i < n; i++) {
        x[i] = rng_gauss() * 3.0f + 0.5f;
        w[i] = 1.0f + rng_gauss() * 0.2f;
    }
    const float eps = 1e-6f;
    double ss = 0;
    for (int64_t i = 0; i < n; i++)
        ss += (double)x[i] * x[i];
    const double scale = 1.0 / sqrt(ss / n + eps);
    rmsnorm(out, x, w, n, eps);
    rmsnorm_ref(out2, x, NULL, n, eps);
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        const double want = x[i] * scale * w[i];
        worst = fmax(worst, fabs(out[i] - want) / fabs(want));
        assert_true(fabs(out2[i] - x[i] * scale) <= 5e-7 * fabs(x[i] * scale));
    }
    assert_true(worst < 5e-7); /* six float roundings, each <= 2^-24 (some halved by sqrt) */
    memcpy(out2, x, sizeof(x)); /* in place */
    rmsnorm(out2, out2, w, n, eps);
    assert_memory_equal(out2, out, sizeof(out));
    /* all zero: eps keeps it finite */
    memset(x, 0, sizeof(x));
    rmsnorm(out, x, NULL, n, 1e-5f);
    for (int64_t i = 0; i < n; i++)
        assert_true(out[i] == 0.0f);
    printf("  rmsnorm: max relative error %.3g\n", worst);
}

/* RoPE against the formula in double.  Our angles follow ggml: theta_k is
 * built by k float multiplications, each off by <= 2^-24 relative, plus
 * powf's error, so the angle error grows like theta_k * (k + 2) * 2^-23;
 * the tolerance allows exactly that (and 1e-6 for cos/sin and the rotation).
 * With freq factors (Llama 3 rope_freqs, LongRoPE), theta_k is divided by
 * factor k; with YaRN the angle is the ramp's mix of the scaled and the
 * unscaled one and cos/sin are scaled by attn_factor (1 + 0.1 ln(1/scale)). */
static double rope_check(bool neox, int64_t n_heads, int64_t head_dim, int n_rot, int64_t pos, float base,
                         float fscale, const float *factors, bool yarn)
{
    const int64_t n = n_heads * head_dim;
    float *x = malloc(n * sizeof(float)), *y = malloc(n * sizeof(float)), *cs = malloc(n_rot * sizeof(float));
    for (int64_t i = 0; i < n; i++)
        x[i] = rng_gauss();
    memcpy(y, x, n * sizeof(float));
    struct rope_params rp = {.n_rot = n_rot, .freq_base = base, .freq_scale = fscale, .freq_factors = factors,
                             .ext_factor = yarn ? 1.0f : 0.0f, .attn_factor = yarn ? 0.9f : 1.0f};
    if (yarn)
        rope_yarn_corr_dims(n_rot, 256, base, 32.0f, 1.0f, rp.corr_dims);
    rope_angles(cs, &rp, pos);
    (neox ? rope_neox : rope_norm)(y, n_heads, head_dim, n_rot, cs);
    double worst = 0;
    for (int64_t h = 0; h < n_heads; h++) {
        const float *xh = x + h * head_dim, *yh = y + h * head_dim;
        for (int64_t k = 0; k < n_rot / 2; k++) {
            const int64_t a = neox ? k : 2 * k, b = neox ? k + n_rot / 2 : 2 * k + 1;
            const double ext = (double)pos * pow(base, -2.0 * k / (double)n_rot) / (factors ? factors[k] : 1.0);
            double theta = ext * fscale, mscale = rp.attn_factor;
            if (yarn) {
                const double r = 1.0 - fmin(1.0, fmax(0.0, (k - rp.corr_dims[0]) /
                                                              fmax(0.001, rp.corr_dims[1] - rp.corr_dims[0])));
                theta = theta * (1.0 - r) + ext * r;
                mscale *= 1.0 + 0.1 * log(1.0 / fscale);
            }
            const double c = cos(theta) * mscale, s = sin(theta) * mscale;
            const double wa = xh[a] * c - xh[b] * s, wb = xh[a] * s + xh[b] * c;
            const double mag = fabs(xh[a]) + fabs(xh[b]);
            const double tol = mag * mscale * (ext * (k + 2) * 0x1p-23 + 1e-6);
            const double e = fmax(fabs(yh[a] - wa), fabs(yh[b] - wb));
            if (e > tol)
                fail_msg("rope_%s pos %lld pair %lld%s%s: error %g > %g", neox ? "neox" : "norm", (long long)pos,
                         (long long)k, factors ? " (freq factors)" : "", yarn ? " (yarn)" : "", e, tol);
            worst = fmax(worst, e / mag);
        }
        for (int64_t i = n_rot; i < head_dim; i++) /* past n_rot: untouched */
            assert_true(yh[i] == xh[i]);
    }
    free(x);
    free(y);
    free(cs);
    return worst;
}

static void test_rope(void **state)
{
    (void)state;
    double worst = 0;
    /* Llama 3's rope_freqs: 1 for the fast pairs, up to 32 for the slow */
    float ff[64];
    for (int k = 0; k < 64; k++)
        ff[k] = k < 20 ? 1.0f : k > 40 ? 32.0f : 1.0f + 31.0f * (float)(k - 20) / 20.0f;
    static const int64_t positions[] = {0, 1, 7, 100, 1000, 4095};
    for (size_t p = 0; p < sizeof(positions) / sizeof(positions[0]); p++) {
        for (int neox = 0; neox < 2; neox++) {
            worst = fmax(worst, rope_check(neox, 3, 64, 64, positions[p], 10000.0f, 1.0f, NULL, false));
            worst = fmax(worst, rope_check(neox, 2, 256, 256, positions[p], 1000000.0f, 1.0f, NULL, false));
            worst = fmax(worst, rope_check(neox, 2, 128, 64, positions[p], 10000.0f, 0.25f, NULL, false)); /* partial */
            worst = fmax(worst, rope_check(neox, 2, 128, 128, positions[p], 500000.0f, 1.0f, ff, false));
            worst = fmax(worst, rope_check(neox, 2, 128, 96, positions[p], 10000.0f, 0.25f, ff, true));
            worst = fmax(worst, rope_check(neox, 1, 64, 64, positions[p], 1000000.0f, 0.125f, NULL, true));
        }
    }
    /* YaRN's ramp ends, against ggml_rope_yarn_corr_dims in double:
     * 128 dims, 4096 positions, base 1e4: 20.94 -> 20, 45.03 -> 46 */
    float dims[2];
    rope_yarn_corr_dims(128, 4096, 10000.0f, 32.0f, 1.0f, dims);
    assert_true(dims[0] == 20.0f && dims[1] == 46.0f);
    rope_yarn_corr_dims(64, 2048, 1e6f, 32.0f, 1.0f, dims); /* 5.38 -> 5, 13.40 -> 14 */
    assert_true(dims[0] == 5.0f && dims[1] == 14.0f);
    rope_yarn_corr_dims(16, 1 << 20, 10.0f, 32.0f, 1.0f, dims); /* clamped to n_rot - 1 */
    assert_true(dims[1] == 15.0f);
    /* factors of 1 give exactly the plain angles */
    float ones[64], c1[128], c2[128];
    for (int k = 0; k < 64; k++)
        ones[k] = 1.0f;
    struct rope_params rp = {.n_rot = 128, .freq_base = 10000.0f, .freq_scale = 1.0f, .attn_factor = 1.0f};
    rope_angles(c1, &rp, 1234);
    rp.freq_factors = ones;
    rope_angles(c2, &rp, 1234);
    assert_memory_equal(c1, c2, sizeof(c1));
    /* pos 0 is the identity; the two orders differ elsewhere, and agree once
     * the neox pairs (k, k+n/2) are laid out as (2k, 2k+1) */
    rp.freq_factors = NULL;
    float a[128], b[128], c[128], pa[128], cs0[128], cs5[128];
    rope_angles(cs0, &rp, 0);
    rope_angles(cs5, &rp, 5);
    for (int i = 0; i < 128; i++)
        a[i] = rng_gauss();
    memcpy(b, a, sizeof(a));
    rope_neox(b, 1, 128, 128, cs0);
    assert_memory_equal(a, b, sizeof(a));
    memcpy(b, a, sizeof(a));
    memcpy(c, a, sizeof(a));
    rope_neox(b, 1, 128, 128, cs5);
    rope_norm(c, 1, 128, 128, cs5);
    double diff = 0;
    for (int i = 0; i < 128; i++)
        diff = fmax(diff, fabs(b[i] - c[i]));
    assert_true(diff > 0.1);
    for (int k = 0; k < 64; k++) {
        pa[2 * k] = a[k];
        pa[2 * k + 1] = a[k + 64];
    }
    rope_norm(pa, 1, 128, 128, cs5);
    for (int k = 0; k < 64; k++) {
        assert_true(pa[2 * k] == b[k]);
        assert_true(pa[2 * k + 1] == b[k + 64]);
    }
    printf("  rope: max error / |pair| %.3g (pos up to 4095; freq factors, YaRN)\n", worst);
}

static void test_softmax(void **state)
{
    (void)state;
    float x[37];
    double want[37], sum = 0, mx = -INFINITY;
    for (int i = 0; i < 37; i++) {
        x[i] = rng_gauss() * 5.0f + 1000.0f; /* large: needs the max subtracted */
        mx = fmax(mx, x[i]);
    }
    x[3] = -INFINITY; /* a masked position */
    for (int i = 0; i < 37; i++)
        sum += want[i] = exp((double)x[i] - mx);
    softmax(x, 37);
    double worst = 0, total = 0;
    for (int i = 0; i < 37; i++) {
        want[i] /= sum;
        assert_false(isnan(x[i]));
        worst = fmax(worst, fabs(x[i] - want[i]) / (want[i] + 1e-30));
        total += x[i];
    }
    assert_true(x[3] == 0.0f);
    assert_true(worst < 1e-5); /* expf's error carried into a normalized float */
    assert_true(fabs(total - 1.0) < 1e-5);
    float two[2] = {1000.0f, 999.0f};
    softmax(two, 2);
    assert_true(fabs(two[0] - 1.0 / (1.0 + exp(-1.0))) < 1e-6);
    printf("  softmax: max relative error %.3g\n", worst);
}

static double gelu_double(double x) { return 0.5 * x * (1.0 + tanh(sqrt(2.0 / M_PI) * (x + 0.044715 * x * x * x))); }

static void test_activations(void **state)
{
    (void)state;
    enum { N = 4001 };
    static float x[N], s[N], g[N], gg[N];
    for (int i = 0; i < N; i++)
        x[i] = -12.0f + 24.0f * (float)i / (N - 1);
    x[2000] = 0.0f;
    memcpy(s, x, sizeof(x));
    memcpy(g, x, sizeof(x));
    memcpy(gg, x, sizeof(x));
    silu(s, N);
    gelu(g, N);
    gelu_ggml(gg, N);
    double ws = 0, wg = 0, wgg = 0;
    for (int i = 0; i < N; i++) {
        const double xs = x[i], es = xs / (1.0 + exp(-xs)), eg = gelu_double(xs);
        ws = fmax(ws, fabs(s[i] - es) / (fabs(es) + 1e-30));
        assert_true(fabs(s[i] - es) <= 1e-6 * fabs(es) + 1e-37);
        /* the float formula cancels in 1 + tanh for x << 0: absolute 1e-6 */
        wg = fmax(wg, fabs(g[i] - eg));
        assert_true(fabs(g[i] - eg) <= 1e-6 * fabs(eg) + 1e-6);
        /* ggml's fp16 path: input and output rounded to 11 bits (gelu' < 1.13) */
        const double tol = 1.13 * fabs(xs) * 0x1p-11 + fabs(eg) * 0x1p-11 + 0x1p-24 + 1e-6 * fabs(eg);
        wgg = fmax(wgg, fabs(gg[i] - eg));
        if (fabs(gg[i] - eg) > tol)
            fail_msg("gelu_ggml(%g) = %.9g, formula %.9g", xs, (double)gg[i], eg);
        if (x[i] <= -10.0f)
            assert_true(gg[i] == 0.0f);
        if (x[i] >= 10.0f)
            assert_true(gg[i] == x[i]);
        else if (x[i] > -10.0f) /* an fp16 value */
            assert_true(fp16_to_fp32(fp32_to_fp16(gg[i])) == gg[i]);
    }
    assert_true(s[2000] == 0.0f && g[2000] == 0.0f && gg[2000] == 0.0f);
    printf("  silu max rel error %.3g, gelu max abs error %.3g, gelu_ggml max abs error %.3g\n", ws, wg, wgg);
}

static void test_vec_helpers(void **state)
{
    (void)state;
    float a[9], b[9], o[9];
    double dot = 0;
    for (int i = 0; i < 9; i++) {
        a[i] = (float)i - 3.5f;
        b[i] = 0.5f * (float)i;
        dot += (double)a[i] * b[i];
    }
    vec_mul(o, a, b, 9);
    for (int i = 0; i < 9; i++)
        assert_true(o[i] == a[i] * b[i]);
    vec_add(o, a, b, 9);
    for (int i = 0; i < 9; i++)
        assert_true(o[i] == a[i] + b[i]);
    memcpy(o, a, sizeof(a));
    vec_scale(o, 9, -2.0f);
    for (int i = 0; i < 9; i++)
        assert_true(o[i] == -2.0f * a[i]);
    assert_true(vec_dot_f32(a, b, 9) == (float)dot);
}

/* ------------------------------ (f) matmul ------------------------------ */

/* matmul against a double loop over dequantized weights; with the reference
 * table active, also bit-identical to per-element vec_dot calls (the split
 * over threads and chunks must not change any result). */
static void check_matmul(uint32_t type, int64_t n_in, int64_t n_out, int64_t n_tok, double *worst)
{
    const size_t wrow = row_bytes(type, n_in);
    uint8_t *w = malloc(wrow * n_out);
    float *x = malloc(n_tok * n_in * sizeof(float)), *y = malloc(n_tok * n_out * sizeof(float));
    float *wd = malloc(n_out * n_in * sizeof(float));
    make_weights(type, w, n_out, n_in);
    for (int64_t t = 0; t < n_tok; t++)
        fill_activations(x + t * n_in, n_in);
    for (int64_t o = 0; o < n_out; o++)
        ref_ops(type)->to_float(w + o * wrow, wd + o * n_in, n_in);

    assert_int_equal(matmul(y, w, type, x, n_in, n_out, n_tok), INFER_OK);

    const struct kernel_type_ops *ops = ref_ops(type);
    const uint32_t at = ops->vec_dot_type;
    uint8_t *a = malloc(row_bytes(at, n_in));
    const bool exact = strcmp(kern.name, "ref") == 0;
    for (int64_t t = 0; t < n_tok; t++) {
        const float *xt = x + t * n_in;
        ref_ops(at)->from_float(xt, a, n_in);
        double xx = 0;
        for (int64_t i = 0; i < n_in; i++)
            xx += (double)xt[i] * xt[i];
        for (int64_t o = 0; o < n_out; o++) {
            double s = 0, ww = 0;
            for (int64_t i = 0; i < n_in; i++) {
                s += (double)wd[o * n_in + i] * xt[i];
                ww += (double)wd[o * n_in + i] * wd[o * n_in + i];
            }
            const float got = y[t * n_out + o];
            const double e = ww > 0 ? fabs(got - s) / sqrt(ww * xx) : fabs(got);
            *worst = fmax(*worst, e);
            if (e > act_tolerance(at))
                fail_msg("matmul %s [%lld,%lld]: %g vs %g (normalized error %g)", tname(type), (long long)t,
                         (long long)o, (double)got, s, e);
            if (exact && got != ops->vec_dot(n_in, w + o * wrow, a))
                fail_msg("matmul %s [%lld,%lld] differs from vec_dot", tname(type), (long long)t, (long long)o);
        }
    }
    free(a);
    free(w);
    free(x);
    free(y);
    free(wd);
}

static void test_matmul(void **state)
{
    (void)state;
    static const int64_t toks[] = {1, 3, 8};
    printf("  matmul max normalized error:");
    for (size_t k = 0; k < N_WEIGHT_TYPES; k++) {
        double worst = 0;
        for (size_t t = 0; t < 3; t++)
            check_matmul(weight_types[k], 512, 37, toks[t], &worst);
        check_matmul(weight_types[k], 256, 1, 2, &worst);
        printf(" %s %.2g", tname(weight_types[k]), worst);
    }
    printf("\n");
}

/* The result must not depend on the number of threads. */
static void test_matmul_threads(void **state)
{
    (void)state;
#ifdef _OPENMP
    const int64_t n_in = 1024, n_out = 301, n_tok = 5;
    const size_t wrow = row_bytes(GGML_TYPE_Q4_K, n_in);
    uint8_t *w = malloc(wrow * n_out);
    float *x = malloc(n_tok * n_in * sizeof(float));
    float *y1 = malloc(n_tok * n_out * sizeof(float)), *y2 = malloc(n_tok * n_out * sizeof(float));
    make_weights(GGML_TYPE_Q4_K, w, n_out, n_in);
    for (int64_t i = 0; i < n_tok * n_in; i++)
        x[i] = rng_gauss();
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    assert_int_equal(matmul(y1, w, GGML_TYPE_Q4_K, x, n_in, n_out, n_tok), INFER_OK);
    omp_set_num_threads(3);
    assert_int_equal(matmul(y2, w, GGML_TYPE_Q4_K, x, n_in, n_out, n_tok), INFER_OK);
    omp_set_num_threads(saved);
    assert_memory_equal(y1, y2, n_tok * n_out * sizeof(float));
    free(w);
    free(x);
    free(y1);
    free(y2);
#else
    skip();
#endif
}

/* matmul_q_jobs (the Q, K and V projections of decode as one pool loop):
 * each job's outputs are matmul_q's, bit for bit, for any token count and
 * thread count, with jobs of different types and shapes (one with fewer rows
 * than a tile); an invalid job fails the call before anything is written. */
static void test_matmul_jobs(void **state)
{
    (void)state;
    enum { NJ = 4, N_IN = 1024, MAXT = 40 };
    static const uint32_t types[NJ] = {GGML_TYPE_Q4_K, GGML_TYPE_Q6_K, GGML_TYPE_Q4_K, GGML_TYPE_Q4_K};
    static const int64_t outs[NJ] = {301, 64, 3, 128};
    uint8_t *w[NJ];
    float *y[NJ], *ref[NJ];
    float *x = malloc(MAXT * N_IN * sizeof(float));
    for (int64_t i = 0; i < MAXT * N_IN; i++)
        x[i] = rng_gauss();
    for (int k = 0; k < NJ; k++) {
        w[k] = malloc(row_bytes(types[k], N_IN) * (size_t)outs[k]);
        make_weights(types[k], w[k], outs[k], N_IN);
        y[k] = malloc(MAXT * outs[k] * sizeof(float));
        ref[k] = malloc(MAXT * outs[k] * sizeof(float));
    }
    const size_t xq_size = matmul_act_size(GGML_TYPE_Q4_K, N_IN, MAXT); /* Q6_K's activation type too */
    void *xq = malloc(xq_size);
    static const int64_t toks[] = {1, 2, 4, 5, MAXT};
    static const int threads[] = {1, 2, 3};
    const int saved = pool_max_threads();
    for (size_t ti = 0; ti < sizeof(toks) / sizeof(toks[0]); ti++) {
        const int64_t nt = toks[ti];
        assert_int_equal(matmul_act_quantize(xq, GGML_TYPE_Q4_K, x, N_IN, nt), INFER_OK);
        struct matmul_q_job jobs[NJ];
        for (int k = 0; k < NJ; k++) {
            assert_int_equal(matmul_q(ref[k], w[k], types[k], xq, N_IN, outs[k], nt), INFER_OK);
            jobs[k] = (struct matmul_q_job){y[k], w[k], types[k], xq, N_IN, outs[k], nt};
        }
        for (size_t hi = 0; hi < sizeof(threads) / sizeof(threads[0]); hi++) {
            pool_set_threads(threads[hi]);
            for (int k = 0; k < NJ; k++)
                memset(y[k], 0xff, (size_t)(nt * outs[k]) * sizeof(float));
            assert_int_equal(matmul_q_jobs(jobs, NJ), INFER_OK);
            for (int k = 0; k < NJ; k++)
                assert_memory_equal(y[k], ref[k], (size_t)(nt * outs[k]) * sizeof(float));
        }
        /* matmul_q_rows_to: a row range (from a tile boundary, ending past
         * the last full tile) into a compact buffer ys apart, as the expert
         * FFN's down items use it: the same bits, nothing written past a
         * token's rows */
        for (int k = 0; k < NJ; k++) {
            const int64_t o0 = outs[k] > 32 ? 16 : 0, o1 = outs[k] > 32 ? outs[k] - 5 : outs[k], len = o1 - o0;
            const size_t ys = (size_t)len + 3;
            float *c = malloc((size_t)nt * ys * sizeof(float));
            memset(c, 0xff, (size_t)nt * ys * sizeof(float));
            jobs[k].y = NULL; /* not used */
            assert_int_equal(matmul_q_rows_to(&jobs[k], o0, o1, c, ys), INFER_OK);
            for (int64_t t = 0; t < nt; t++) {
                assert_memory_equal(c + t * (int64_t)ys, ref[k] + t * outs[k] + o0, (size_t)len * sizeof(float));
                for (size_t i = (size_t)len; i < ys; i++)
                    assert_true(isnan(c[t * (int64_t)ys + (int64_t)i]));
            }
            assert_int_equal(matmul_q_rows_to(&jobs[k], o0, o1, c, (size_t)len - 1), INFER_ERR_INVALID);
            assert_int_equal(matmul_q_rows_to(&jobs[k], o0, outs[k] + 1, c, ys), INFER_ERR_INVALID);
            jobs[k].y = y[k];
            free(c);
        }
    }
    pool_set_threads(saved);
    /* errors: a bad job anywhere stops the call before any job runs */
    struct matmul_q_job jobs[NJ];
    for (int k = 0; k < NJ; k++) {
        jobs[k] = (struct matmul_q_job){y[k], w[k], types[k], xq, N_IN, outs[k], 1};
        memset(y[k], 0, (size_t)outs[k] * sizeof(float));
    }
    jobs[2].wtype = GGML_TYPE_IQ2_XXS;
    assert_int_equal(matmul_q_jobs(jobs, NJ), INFER_ERR_UNSUPPORTED);
    jobs[2].wtype = types[2];
    jobs[3].xq = NULL;
    assert_int_equal(matmul_q_jobs(jobs, NJ), INFER_ERR_INVALID);
    for (int k = 0; k < NJ; k++)
        for (int64_t o = 0; o < outs[k]; o++)
            assert_true(y[k][o] == 0.0f);
    assert_int_equal(matmul_q_jobs(jobs, MATMUL_JOBS_MAX + 1), INFER_ERR_INVALID);
    assert_int_equal(matmul_q_jobs(jobs, 0), INFER_OK);
    free(xq);
    free(x);
    for (int k = 0; k < NJ; k++) {
        free(w[k]);
        free(y[k]);
        free(ref[k]);
    }
}

static void test_matmul_errors(void **state)
{
    (void)state;
    uint8_t w[2 * 210 + 8] __attribute__((aligned(8))) = {0};
    float x[512] = {0}, y[4];
    assert_int_equal(matmul(y, w, GGML_TYPE_IQ2_XXS, x, 256, 1, 1), INFER_ERR_UNSUPPORTED);
    assert_non_null(strstr(infer_last_error(), "unsupported tensor type"));
    assert_non_null(strstr(infer_last_error(), "IQ2_XXS"));
    assert_int_equal(matmul(y, w, 4, x, 256, 1, 1), INFER_ERR_UNSUPPORTED);
    assert_non_null(strstr(infer_last_error(), "unsupported tensor type"));
    assert_int_equal(matmul(y, w, 100000, x, 256, 1, 1), INFER_ERR_UNSUPPORTED);
    assert_int_equal(matmul(y, w, GGML_TYPE_Q8_K, x, 256, 1, 1), INFER_ERR_UNSUPPORTED);
    assert_int_equal(matmul(y, w, GGML_TYPE_Q6_K, x, 128, 1, 1), INFER_ERR_INVALID);
    assert_int_equal(matmul(y, w, GGML_TYPE_Q8_0, x, 48, 1, 1), INFER_ERR_INVALID);
    assert_int_equal(matmul(y, w, GGML_TYPE_Q8_0, x, 0, 1, 1), INFER_ERR_INVALID);
    assert_int_equal(matmul(y, w + 1, GGML_TYPE_Q8_0, x, 32, 1, 1), INFER_ERR_INVALID); /* misaligned */
    assert_int_equal(matmul(y, NULL, GGML_TYPE_Q8_0, x, 32, 1, 1), INFER_ERR_INVALID);
    assert_int_equal(matmul(y, w, GGML_TYPE_Q8_0, x, 32, 0, 1), INFER_OK); /* empty */
    assert_int_equal(matmul(y, w, GGML_TYPE_Q6_K, x, 256, 2, 1), INFER_OK); /* zero weights */
    assert_true(y[0] == 0.0f && y[1] == 0.0f);

    /* matmul_glu reports the same errors with their status (forward passes it on) */
    bool done = true;
    float h[32];
    assert_int_equal(matmul_glu(h, w, w, GGML_TYPE_IQ2_XXS, x, 256, 1, 16, GLU_SILU, &done), INFER_ERR_UNSUPPORTED);
    assert_false(done);
    assert_int_equal(matmul_glu(h, w, w, GGML_TYPE_Q8_0, x, 48, 1, 16, GLU_SILU, &done), INFER_ERR_INVALID);
    assert_int_equal(matmul_glu(h, w, w, GGML_TYPE_Q8_0, x, 32, 2, 16, GLU_SILU, &done), INFER_OK);
    if (done) { /* this variant has the fused kernel: its arguments are checked too */
        assert_int_equal(matmul_glu(h, w, w + 1, GGML_TYPE_Q8_0, x, 32, 2, 16, GLU_SILU, &done), INFER_ERR_INVALID);
        assert_false(done);
        assert_int_equal(matmul_glu(h, w, w, GGML_TYPE_Q8_0, NULL, 32, 2, 16, GLU_SILU, &done), INFER_ERR_INVALID);
        assert_false(done);
        for (int i = 0; i < 32; i++) /* zero weights: silu(0) * 0 */
            assert_true(h[i] == 0.0f);
    }

    float d[256];
    assert_int_equal(dequantize_row(GGML_TYPE_IQ2_XXS, w, d, 256), INFER_ERR_UNSUPPORTED);
    assert_non_null(strstr(infer_last_error(), "unsupported tensor type IQ2_XXS"));
    assert_int_equal(dequantize_row(GGML_TYPE_Q4_K, w, d, 100), INFER_ERR_INVALID);
    assert_int_equal(dequantize_row(GGML_TYPE_Q6_K, w, d, 256), INFER_OK);

    /* get_rows: an embedding table of 3 rows of 32 Q8_0 values */
    block_q8_0 emb[3];
    for (int r = 0; r < 3; r++) {
        emb[r].d = fp32_to_fp16(1.0f);
        for (int j = 0; j < 32; j++)
            emb[r].qs[j] = (int8_t)(r * 10 + j);
    }
    const int32_t ids[2] = {2, 0};
    float out[64];
    assert_int_equal(get_rows(out, emb, GGML_TYPE_Q8_0, 32, 3, ids, 2), INFER_OK);
    assert_true(out[0] == 20.0f && out[31] == 51.0f && out[32] == 0.0f && out[63] == 31.0f);
    const int32_t bad[1] = {3};
    assert_int_equal(get_rows(out, emb, GGML_TYPE_Q8_0, 32, 3, bad, 1), INFER_ERR_INVALID);

    /* the split form gives the same result as matmul */
    float xs[64], ya[3], yb[3];
    for (int i = 0; i < 64; i++)
        xs[i] = rng_gauss();
    size_t sz = matmul_act_size(GGML_TYPE_Q8_0, 32, 2);
    assert_int_equal(sz, 2 * sizeof(block_q8_0));
    assert_int_equal(matmul_act_size(GGML_TYPE_IQ2_XXS, 256, 1), 0);
    assert_int_equal(matmul_act_size(GGML_TYPE_Q2_K, 256, 1), sizeof(block_q8_K));
    void *xq = malloc(sz);
    assert_int_equal(matmul_act_quantize(xq, GGML_TYPE_Q8_0, xs, 32, 2), INFER_OK);
    assert_int_equal(matmul_q(ya, emb, GGML_TYPE_Q8_0, xq, 32, 1, 2), INFER_OK);
    assert_int_equal(matmul(yb, emb, GGML_TYPE_Q8_0, xs, 32, 1, 2), INFER_OK);
    assert_memory_equal(ya, yb, 2 * sizeof(float));
    free(xq);
}

/* The per-thread activation buffers: a kept buffer lent for a smaller
 * request and given back under that smaller size is still known by its real
 * size, so the next large request reuses it instead of allocating afresh.
 * Run on a thread of its own, whose cache starts empty (the test thread's
 * holds the earlier tests' buffers); cmocka asserts on the test thread. */
struct act_trace {
    char *p[5];
};

static void *act_buffers_run(void *arg)
{
    struct act_trace *t = arg;
    const size_t big = 1 << 20, small = 1 << 10;
    t->p[0] = matmul_act_alloc(big);
    if (t->p[0])
        memset(t->p[0], 1, big);
    matmul_act_release(t->p[0], big);
    t->p[1] = matmul_act_alloc(small); /* the kept buffer serves the small request */
    matmul_act_release(t->p[1], small);
    t->p[2] = matmul_act_alloc(big); /* and, known as 1 MiB, the large one again */
    if (t->p[2])
        memset(t->p[2], 2, big);
    matmul_act_release(t->p[2], big);
    /* a fresh buffer keeps the size it was given back with */
    t->p[3] = matmul_act_alloc(2 * big);
    matmul_act_release(t->p[3], 2 * big);
    t->p[4] = matmul_act_alloc(2 * big);
    matmul_act_release(t->p[4], 2 * big);
    return NULL;
}

static void test_act_buffers(void **state)
{
    (void)state;
    struct act_trace t = {{NULL}};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, act_buffers_run, &t), 0);
    assert_int_equal(pthread_join(th, NULL), 0);
    assert_non_null(t.p[0]);
    assert_ptr_equal(t.p[1], t.p[0]);
    assert_ptr_equal(t.p[2], t.p[0]);
    assert_non_null(t.p[3]);
    assert_ptr_not_equal(t.p[3], t.p[0]);
    assert_ptr_equal(t.p[4], t.p[3]);
}

/* Kernels work before kernels_init() (kern starts as the reference table),
 * and kernels_init() keeps every entry filled. */
static void test_dispatch(void **state)
{
    (void)state;
    /* before kernels_init(): the reference kernels answer */
    assert_string_equal(kern.name, "ref");
    block_q8_0 w = {.d = 0x3c00 /* 1.0 */};
    float x[32], y = -1.0f, n[32];
    for (int i = 0; i < 32; i++) {
        w.qs[i] = (int8_t)(i - 16);
        x[i] = 127.0f; /* quantizes exactly: d = 1, q = 127 */
    }
    assert_int_equal(matmul(&y, &w, GGML_TYPE_Q8_0, x, 32, 1, 1), INFER_OK);
    assert_true(y == -16.0f * 127.0f); /* 127 * sum of -16 .. 15 */
    rmsnorm(n, x, NULL, 32, 0.0f);
    assert_true(n[5] == 1.0f);
    char err[256];
    assert_int_equal(kernels_init(err, sizeof(err)), 0);
    for (size_t k = 0; k < N_WEIGHT_TYPES; k++) {
        const struct kernel_type_ops *o = &kern.types[weight_types[k]];
        assert_non_null(o->to_float);
        assert_non_null(o->vec_dot);
        assert_non_null(kern.types[o->vec_dot_type].from_float);
    }
    assert_non_null(kern.rope_neox);
    assert_non_null(kern.gelu_ggml);
    assert_non_null(kern.vec_dot_f32);
}

/* ------------------------- the default model ------------------------- */

/* matmul on real weight matrices of the default model (skipped without it). */
static void test_model_matmul(void **state)
{
    (void)state;
    const char *path = test_default_model();
    if (!path)
        skip();
    infer_gguf *g;
    assert_int_equal(infer_gguf_open(&g, path, 0), INFER_OK);
    static const char *names[] = {"blk.0.attn_q.weight", "blk.0.attn_v.weight", "blk.0.attn_output.weight",
                                  "blk.0.ffn_down.weight"};
    printf("  default model:");
    for (size_t k = 0; k < 4; k++) {
        const struct gguf_tensor *t = gguf_get_tensor(g, names[k]);
        assert_non_null(t);
        assert_true(kernels_type_supported(t->type));
        const int64_t n_in = t->ne[0], n_out = t->ne[1], n_tok = 2;
        float *wd = malloc(n_in * n_out * sizeof(float)), *x = malloc(n_tok * n_in * sizeof(float));
        float *y = malloc(n_tok * n_out * sizeof(float));
        for (int64_t o = 0; o < n_out; o++)
            assert_int_equal(dequantize_row(t->type, (const char *)t->data + o * ggml_row_size(t->type, n_in),
                                            wd + o * n_in, n_in),
                             INFER_OK);
        for (int64_t i = 0; i < n_tok * n_in; i++)
            x[i] = rng_gauss();
        assert_int_equal(matmul(y, t->data, t->type, x, n_in, n_out, n_tok), INFER_OK);
        double worst = 0;
        for (int64_t tk = 0; tk < n_tok; tk++) {
            double xx = 0;
            for (int64_t i = 0; i < n_in; i++)
                xx += (double)x[tk * n_in + i] * x[tk * n_in + i];
            for (int64_t o = 0; o < n_out; o++) {
                double s = 0, ww = 0;
                for (int64_t i = 0; i < n_in; i++) {
                    s += (double)wd[o * n_in + i] * x[tk * n_in + i];
                    ww += (double)wd[o * n_in + i] * wd[o * n_in + i];
                }
                worst = fmax(worst, fabs(y[tk * n_out + o] - s) / sqrt(ww * xx));
            }
        }
        const uint32_t at = kern.types[t->type].vec_dot_type;
        printf(" %s(%s) %.2g", names[k] + 6, tname(t->type), worst);
        assert_true(worst <= act_tolerance(at));
        free(wd);
        free(x);
        free(y);
    }
    printf("\n");

    /* embedding lookup on token_embd (Q8_0): the last row, and one past it */
    const struct gguf_tensor *e = gguf_get_tensor(g, "token_embd.weight");
    assert_non_null(e);
    const int64_t n_embd = e->ne[0], n_vocab = e->ne[1];
    int32_t ids[2] = {0, (int32_t)(n_vocab - 1)};
    float *rows = malloc(2 * n_embd * sizeof(float)), *last = malloc(n_embd * sizeof(float));
    assert_int_equal(get_rows(rows, e->data, e->type, n_embd, n_vocab, ids, 2), INFER_OK);
    assert_int_equal(dequantize_row(e->type, (const char *)e->data + (n_vocab - 1) * ggml_row_size(e->type, n_embd),
                                    last, n_embd),
                     INFER_OK);
    assert_memory_equal(rows + n_embd, last, n_embd * sizeof(float));
    ids[1] = (int32_t)n_vocab;
    assert_int_equal(get_rows(rows, e->data, e->type, n_embd, n_vocab, ids, 2), INFER_ERR_INVALID);
    free(rows);
    free(last);
    infer_gguf_close(g);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_dispatch),
        cmocka_unit_test(test_golden_dequant),
        cmocka_unit_test(test_golden_quantize),
        cmocka_unit_test(test_q8_round_trip),
        cmocka_unit_test(test_vec_dot_types),
        cmocka_unit_test(test_vec_dot),
        cmocka_unit_test(test_half_exhaustive),
        cmocka_unit_test(test_half_rounding),
        cmocka_unit_test(test_rmsnorm),
        cmocka_unit_test(test_rope),
        cmocka_unit_test(test_softmax),
        cmocka_unit_test(test_activations),
        cmocka_unit_test(test_vec_helpers),
        cmocka_unit_test(test_matmul),
        cmocka_unit_test(test_matmul_threads),
        cmocka_unit_test(test_matmul_jobs),
        cmocka_unit_test(test_matmul_errors),
        cmocka_unit_test(test_act_buffers),
        cmocka_unit_test(test_model_matmul),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
