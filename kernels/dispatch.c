/*
 * dispatch.c - choose the kernel variant once, from the CPU features, and
 * describe the choice (`infer cpu`).
 *
 * The reference table lists every supported type and op; a SIMD variant's
 * fill function starts from it and overrides what it accelerates.  `kern`
 * starts out as the reference table, so kernels work before kernels_init().
 */
#include "dispatch.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "matmul.h"
#include "ops.h"
#if defined(__aarch64__)
#include "arm/neon.h"
#endif

#include "infer.h"

#define TYPE_OPS(T, to, from, dot, gemm_, dot_type)                                                       \
    [GGML_TYPE_##T] = {.to_float = (to), .from_float = (from), .vec_dot = (dot), .gemm = (gemm_),        \
                       .vec_dot_type = GGML_TYPE_##dot_type}

/* Q8_1 and Q8_K are activation formats only: no vec_dot of their own. */
#define REF_TABLE_INIT                                                                                          \
    {                                                                                                           \
        .name = "ref",                                                                                          \
        .types =                                                                                                \
            {                                                                                                   \
                TYPE_OPS(F32, dequantize_row_f32_ref, quantize_row_f32_ref, vec_dot_f32_f32_ref, gemm_f32_ref,  \
                         F32),                                                                                  \
                TYPE_OPS(F16, dequantize_row_f16_ref, quantize_row_f16_ref, vec_dot_f16_f16_ref, gemm_f16_ref,  \
                         F16),                                                                                  \
                TYPE_OPS(BF16, dequantize_row_bf16_ref, quantize_row_bf16_ref, vec_dot_bf16_bf16_ref,           \
                         gemm_bf16_ref, BF16),                                                                  \
                TYPE_OPS(Q4_0, dequantize_row_q4_0_ref, quantize_row_q4_0_ref, vec_dot_q4_0_q8_0_ref,           \
                         gemm_q4_0_ref, Q8_0),                                                                  \
                TYPE_OPS(Q4_1, dequantize_row_q4_1_ref, quantize_row_q4_1_ref, vec_dot_q4_1_q8_1_ref,           \
                         gemm_q4_1_ref, Q8_1),                                                                  \
                TYPE_OPS(Q5_0, dequantize_row_q5_0_ref, quantize_row_q5_0_ref, vec_dot_q5_0_q8_0_ref,           \
                         gemm_q5_0_ref, Q8_0),                                                                  \
                TYPE_OPS(Q5_1, dequantize_row_q5_1_ref, quantize_row_q5_1_ref, vec_dot_q5_1_q8_1_ref,           \
                         gemm_q5_1_ref, Q8_1),                                                                  \
                TYPE_OPS(Q8_0, dequantize_row_q8_0_ref, quantize_row_q8_0_ref, vec_dot_q8_0_q8_0_ref,           \
                         gemm_q8_0_ref, Q8_0),                                                                  \
                TYPE_OPS(Q8_1, dequantize_row_q8_1_ref, quantize_row_q8_1_ref, NULL, NULL, Q8_1),               \
                TYPE_OPS(IQ4_NL, dequantize_row_iq4_nl_ref, NULL, vec_dot_iq4_nl_q8_0_ref, gemm_iq4_nl_ref,    \
                         Q8_0),                                                                                 \
                TYPE_OPS(Q2_K, dequantize_row_q2_K_ref, NULL, vec_dot_q2_K_q8_K_ref, gemm_q2_K_ref, Q8_K),      \
                TYPE_OPS(Q3_K, dequantize_row_q3_K_ref, NULL, vec_dot_q3_K_q8_K_ref, gemm_q3_K_ref, Q8_K),      \
                TYPE_OPS(IQ4_XS, dequantize_row_iq4_xs_ref, NULL, vec_dot_iq4_xs_q8_K_ref, gemm_iq4_xs_ref,    \
                         Q8_K),                                                                                 \
                TYPE_OPS(Q4_K, dequantize_row_q4_K_ref, NULL, vec_dot_q4_K_q8_K_ref, gemm_q4_K_ref, Q8_K),      \
                TYPE_OPS(Q5_K, dequantize_row_q5_K_ref, NULL, vec_dot_q5_K_q8_K_ref, gemm_q5_K_ref, Q8_K),      \
                TYPE_OPS(Q6_K, dequantize_row_q6_K_ref, NULL, vec_dot_q6_K_q8_K_ref, gemm_q6_K_ref, Q8_K),      \
                TYPE_OPS(Q8_K, dequantize_row_q8_K_ref, quantize_row_q8_K_ref, NULL, NULL, Q8_K),               \
                [INFER_TYPE_Q4_0_X4] = {.vec_dot = vec_dot_q4_0_q8_0_ref, .gemm = gemm_q4_0x4_ref,               \
                                        .vec_dot_type = GGML_TYPE_Q8_0},                                         \
                [INFER_TYPE_Q5_0_X4] = {.vec_dot = vec_dot_q5_0_q8_0_ref, .gemm = gemm_q5_0x4_ref,               \
                                        .vec_dot_type = GGML_TYPE_Q8_0},                                         \
                [INFER_TYPE_Q4_K_X4] = {.vec_dot = vec_dot_q4_K_q8_K_ref, .gemm = gemm_q4_Kx4_ref,               \
                                        .vec_dot_type = GGML_TYPE_Q8_K},                                         \
                [INFER_TYPE_Q6_K_X4] = {.vec_dot = vec_dot_q6_K_q8_K_ref, .gemm = gemm_q6_Kx4_ref,               \
                                        .vec_dot_type = GGML_TYPE_Q8_K},                                         \
                [INFER_TYPE_Q8_0_X4] = {.vec_dot = vec_dot_q8_0_q8_0_ref, .gemm = gemm_q8_0x4_ref,               \
                                        .vec_dot_type = GGML_TYPE_Q8_0},                                         \
                [INFER_TYPE_Q4_0_X4S] = {.vec_dot = vec_dot_q4_0_q8_0_ref, .gemm = gemm_q4_0x4s_ref,             \
                                         .vec_dot_type = GGML_TYPE_Q8_0},                                        \
                [INFER_TYPE_IQ4_NL_X4] = {.vec_dot = vec_dot_iq4_nl_q8_0_ref, .gemm = gemm_iq4_nlx4_ref,         \
                                          .vec_dot_type = GGML_TYPE_Q8_0},                                       \
                [INFER_TYPE_Q3_K_X4] = {.vec_dot = vec_dot_q3_K_q8_K_ref, .gemm = gemm_q3_Kx4_ref,               \
                                        .vec_dot_type = GGML_TYPE_Q8_K},                                         \
                [INFER_TYPE_Q4_K_X4I] = {.vec_dot = vec_dot_q4_K_q8_K_ref, .gemm = gemm_q4_Kx4i_ref,             \
                                         .vec_dot_type = GGML_TYPE_Q8_K},                                        \
            },                                                                                                  \
        .rmsnorm = rmsnorm_ref, .rope_norm = rope_norm_ref, .rope_neox = rope_neox_ref, .softmax = softmax_ref, \
        .silu = silu_ref, .gelu = gelu_ref, .gelu_ggml = gelu_ggml_ref, .vec_mul = vec_mul_ref,                 \
        .vec_add = vec_add_ref, .vec_scale = vec_scale_ref, .vec_dot_f32 = vec_dot_f32_ref,                     \
        .argmax = argmax_ref,                                                                                   \
        .attention = attention_ref,                                                                             \
    }

static const struct kernel_table ref_table = REF_TABLE_INIT;
struct kernel_table kern = REF_TABLE_INIT;

const struct kernel_table *kernels_ref(void) { return &ref_table; }

bool kernels_type_supported(uint32_t type)
{
    return type < GGML_TYPE_COUNT && kern.types[type].to_float != NULL && kern.types[type].vec_dot != NULL;
}

/* ------------------------------ variants ------------------------------ */

struct variant {
    const char *name;
    bool (*runs_on)(const struct cpu_features *f);
    void (*fill)(struct kernel_table *t); /* *t holds the reference table on entry */
};

static bool always(const struct cpu_features *f) { (void)f; return true; }
static void fill_ref(struct kernel_table *t) { (void)t; }

#if defined(__x86_64__)
/* AVX2 + FMA + F16C: Haswell and later, Zen, Intel N100/N150 (Gracemont). */
static bool has_avx2(const struct cpu_features *f) { return f->avx2 && f->fma && f->f16c; }
/* AVX2 plus AVX-VNNI (Alder Lake and later, Intel N100/N150). */
static bool has_avxvnni(const struct cpu_features *f) { return has_avx2(f) && f->avxvnni; }
/* AVX-512 F/BW/VL with VNNI (Cascade Lake, Ice Lake, Sapphire Rapids, Zen 4);
 * BF16 instructions are used only where the CPU also has them. */
static bool has_avx512(const struct cpu_features *f)
{
    return has_avx2(f) && f->avx512f && f->avx512bw && f->avx512vl && f->avx512vnni;
}
#endif

#if defined(__aarch64__)
/* Advanced SIMD (every ARMv8-A Linux CPU: Cortex-A72, Pi 4); SDOT (Cortex-A76, Pi 5). */
static bool has_neon(const struct cpu_features *f) { return f->neon; }
static bool has_dotprod(const struct cpu_features *f) { return f->neon && f->dotprod; }
static bool has_i8mm(const struct cpu_features *f) { return has_dotprod(f) && f->i8mm; }
#endif

/* Best first; the last entry runs everywhere. */
static const struct variant variants[] = {
#if defined(__x86_64__)
    {"avx512", has_avx512, kernels_fill_avx512},
    {"avxvnni", has_avxvnni, kernels_fill_avxvnni},
    {"avx2", has_avx2, kernels_fill_avx2},
#endif
#if defined(__aarch64__)
    {"i8mm", has_i8mm, kernels_fill_i8mm},
    {"dotprod", has_dotprod, kernels_fill_dotprod},
    {"neon", has_neon, kernels_fill_neon},
#endif
    {"ref", always, fill_ref},
};
#define N_VARIANTS (sizeof(variants) / sizeof(variants[0]))

size_t kernels_n_variants(void) { return N_VARIANTS; }

const char *kernels_variant_name(size_t i) { return i < N_VARIANTS ? variants[i].name : NULL; }

bool kernels_variant_runs(size_t i) { return i < N_VARIANTS && variants[i].runs_on(cpu_features_get()); }

int kernels_variant_fill(size_t i, struct kernel_table *t)
{
    if (!kernels_variant_runs(i))
        return -1;
    struct kernel_table tmp = ref_table;
    variants[i].fill(&tmp);
    tmp.name = variants[i].name;
    *t = tmp;
    return 0;
}

/* Install a variant; re-selecting the active one writes nothing, so a second
 * kernels_init() does not race with kernels running on other threads. */
static void select_variant(size_t i)
{
    if (strcmp(kern.name, variants[i].name) != 0)
        kernels_variant_fill(i, &kern);
}

const char *kernels_built_in(void)
{
    static char buf[256];
    if (!buf[0]) {
        size_t o = 0;
        for (size_t i = 0; i < N_VARIANTS && o < sizeof(buf); i++)
            o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%s", i ? " " : "", variants[i].name);
    }
    return buf;
}

int kernels_init(char *err, size_t n)
{
    const char *want = getenv("INFER_KERNELS");
    if (want && *want) {
        for (size_t i = 0; i < N_VARIANTS; i++) {
            if (strcmp(variants[i].name, want) != 0)
                continue;
            if (!kernels_variant_runs(i)) {
                snprintf(err, n, "INFER_KERNELS=%s: this CPU lacks the instructions it needs", want);
                return -1;
            }
            select_variant(i);
            return 0;
        }
        snprintf(err, n, "INFER_KERNELS=%s: no such variant (built in: %s)", want, kernels_built_in());
        return -1;
    }
    for (size_t i = 0; i < N_VARIANTS; i++) {
        if (kernels_variant_runs(i)) {
            select_variant(i);
            break;
        }
    }
    return 0;
}

/* ------------------------------- scratch ------------------------------- */

struct scratch {
    void *p;
    size_t size;
};

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static int scratch_key_ok;

static void scratch_free(void *v)
{
    struct scratch *s = v;
    free(s->p);
    free(s);
}

static void scratch_init(void) { scratch_key_ok = pthread_key_create(&scratch_key, scratch_free) == 0; }

void *kernels_scratch(size_t bytes)
{
    pthread_once(&scratch_once, scratch_init);
    if (!scratch_key_ok)
        return NULL;
    struct scratch *s = pthread_getspecific(scratch_key);
    if (!s) {
        s = calloc(1, sizeof(*s));
        if (!s || pthread_setspecific(scratch_key, s) != 0) {
            free(s);
            return NULL;
        }
    }
    if (bytes > s->size) {
        const size_t n = (bytes + 63) & ~(size_t)63; /* aligned_alloc wants a multiple of 64 */
        void *p = aligned_alloc(64, n);
        if (!p)
            return NULL;
        free(s->p);
        s->p = p;
        s->size = n;
    }
    return s->p;
}

/* ------------------------------- report ------------------------------- */

/* Which variant a function pointer of the active table comes from: the least
 * runnable variant whose table holds the same pointer (variants inherit the
 * entries they do not override).  `off` is the entry's offset in the table. */
static const char *origin(const struct kernel_table *tables, const bool *have, size_t off)
{
    const char *name = "?";
    void *p, *q;
    memcpy(&p, (const char *)&kern + off, sizeof(p));
    if (!p)
        return "-";
    for (size_t i = N_VARIANTS; i-- > 0;) {
        if (!have[i])
            continue;
        memcpy(&q, (const char *)&tables[i] + off, sizeof(q));
        if (q == p)
            return tables[i].name;
    }
    return name;
}

const char *kernels_report(void)
{
    static char buf[4096];
    static struct kernel_table tables[N_VARIANTS];
    bool have[N_VARIANTS];
    char err[256] = "";
    size_t o = 0;
#define OUT(...)                                                                                           \
    do {                                                                                                   \
        if (o < sizeof(buf))                                                                               \
            o += (size_t)snprintf(buf + o, sizeof(buf) - o, __VA_ARGS__);                                  \
    } while (0)

    const int st = kernels_init(err, sizeof(err));
    for (size_t i = 0; i < N_VARIANTS; i++)
        have[i] = kernels_variant_fill(i, &tables[i]) == 0;
    const char *forced = getenv("INFER_KERNELS");
    OUT("kernel variant: %s (%s)\n", kern.name,
        st ? err : forced && *forced ? "forced by INFER_KERNELS" : "best this CPU runs");
    OUT("runnable here:");
    for (size_t i = 0; i < N_VARIANTS; i++)
        if (have[i])
            OUT(" %s", variants[i].name);
    OUT("\n%-6s %-6s %-8s %-8s %-14s %s\n", "type", "act", "vec_dot", "gemm", "gemm_many from", "act quantizer");
    for (uint32_t t = 0; t < INFER_TYPE_COUNT; t++) {
        const struct kernel_type_ops *ops = &kern.types[t];
        if (!ops->vec_dot || !ggml_type_traits_get(t))
            continue;
        if (t >= GGML_TYPE_COUNT && kern.types[repack_base_of(t)].repack_type != t)
            continue; /* a repacked layout this variant does not use */
        const size_t base = (size_t)((const char *)ops - (const char *)&kern);
        const uint32_t at = ops->vec_dot_type;
        const size_t abase = (size_t)((const char *)&kern.types[at] - (const char *)&kern);
        char many[32] = "-"; /* its kernel's origin and the tokens from which matmul takes it */
        if (ops->gemm_many)
            snprintf(many, sizeof(many), "%s %lld", origin(tables, have, base + offsetof(struct kernel_type_ops, gemm_many)),
                     (long long)kernels_many_min(&kern, t));
        OUT("%-6s %-6s %-8s %-8s %-14s %s\n", ggml_type_traits_get(t)->name, ggml_type_traits_get(at)->name,
            origin(tables, have, base + offsetof(struct kernel_type_ops, vec_dot)),
            origin(tables, have, base + offsetof(struct kernel_type_ops, gemm)), many,
            origin(tables, have, abase + offsetof(struct kernel_type_ops, from_float)));
    }
    OUT("repacked at load, into the cache file (--no-repack, INFER_REPACK_DIR):");
    int n_repack = 0;
    for (uint32_t t = 0; t < GGML_TYPE_COUNT; t++)
        if (kern.types[t].repack_type)
            OUT("%s %s -> %s", n_repack++ ? "," : "", ggml_type_traits_get(t)->name,
                ggml_type_traits_get(kern.types[t].repack_type)->name);
    OUT("%s\n", n_repack ? "" : " none");
#define OP(f) {#f, offsetof(struct kernel_table, f)}
    static const struct {
        const char *name;
        size_t off;
    } ops[] = {
        OP(rmsnorm), OP(rope_norm), OP(rope_neox), OP(softmax), OP(argmax),   OP(silu),        OP(gelu),
        OP(gelu_ggml), OP(vec_mul), OP(vec_add), OP(vec_scale), OP(vec_dot_f32), OP(attention),
    };
#undef OP
    OUT("ops:");
    for (size_t i = 0; i < sizeof(ops) / sizeof(ops[0]); i++)
        OUT("%s %s=%s", i && i % 6 == 0 ? "\n    " : "", ops[i].name, origin(tables, have, ops[i].off));
    OUT("\n");
#undef OUT
    return buf;
}

const char *infer_kernel_report(void) { return kernels_report(); }
