/*
 * dispatch.c - choose the kernel variant once, from the CPU features.
 *
 * The reference table lists every supported type and op; a SIMD variant's
 * fill function copies it and overrides what it accelerates.  `kern` starts
 * out as the reference table, so kernels work before kernels_init().
 */
#include "dispatch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ops.h"
#if defined(__aarch64__)
#include "arm/neon.h"
#endif

#define TYPE_OPS(T, to, from, dot, dot_type) \
    [GGML_TYPE_##T] = {.to_float = (to), .from_float = (from), .vec_dot = (dot), .vec_dot_type = GGML_TYPE_##dot_type}

/* Q8_1 and Q8_K are activation formats only: no vec_dot of their own. */
#define REF_TABLE_INIT                                                                                          \
    {                                                                                                           \
        .name = "ref",                                                                                          \
        .types =                                                                                                \
            {                                                                                                   \
                TYPE_OPS(F32, dequantize_row_f32_ref, quantize_row_f32_ref, vec_dot_f32_f32_ref, F32),          \
                TYPE_OPS(F16, dequantize_row_f16_ref, quantize_row_f16_ref, vec_dot_f16_f16_ref, F16),          \
                TYPE_OPS(BF16, dequantize_row_bf16_ref, quantize_row_bf16_ref, vec_dot_bf16_bf16_ref, BF16),    \
                TYPE_OPS(Q4_0, dequantize_row_q4_0_ref, quantize_row_q4_0_ref, vec_dot_q4_0_q8_0_ref, Q8_0),    \
                TYPE_OPS(Q4_1, dequantize_row_q4_1_ref, quantize_row_q4_1_ref, vec_dot_q4_1_q8_1_ref, Q8_1),    \
                TYPE_OPS(Q5_0, dequantize_row_q5_0_ref, quantize_row_q5_0_ref, vec_dot_q5_0_q8_0_ref, Q8_0),    \
                TYPE_OPS(Q5_1, dequantize_row_q5_1_ref, quantize_row_q5_1_ref, vec_dot_q5_1_q8_1_ref, Q8_1),    \
                TYPE_OPS(Q8_0, dequantize_row_q8_0_ref, quantize_row_q8_0_ref, vec_dot_q8_0_q8_0_ref, Q8_0),    \
                TYPE_OPS(Q8_1, dequantize_row_q8_1_ref, quantize_row_q8_1_ref, NULL, Q8_1),                     \
                TYPE_OPS(Q4_K, dequantize_row_q4_K_ref, NULL, vec_dot_q4_K_q8_K_ref, Q8_K),                     \
                TYPE_OPS(Q5_K, dequantize_row_q5_K_ref, NULL, vec_dot_q5_K_q8_K_ref, Q8_K),                     \
                TYPE_OPS(Q6_K, dequantize_row_q6_K_ref, NULL, vec_dot_q6_K_q8_K_ref, Q8_K),                     \
                TYPE_OPS(Q8_K, dequantize_row_q8_K_ref, quantize_row_q8_K_ref, NULL, Q8_K),                     \
            },                                                                                                  \
        .rmsnorm = rmsnorm_ref, .rope_norm = rope_norm_ref, .rope_neox = rope_neox_ref, .softmax = softmax_ref, \
        .silu = silu_ref, .gelu = gelu_ref, .gelu_ggml = gelu_ggml_ref, .vec_mul = vec_mul_ref,                 \
        .vec_add = vec_add_ref, .vec_scale = vec_scale_ref, .vec_dot_f32 = vec_dot_f32_ref,                     \
    }

static const struct kernel_table ref_table = REF_TABLE_INIT;
struct kernel_table kern = REF_TABLE_INIT;

const struct kernel_table *kernels_ref(void) { return &ref_table; }

bool kernels_type_supported(uint32_t type)
{
    return type < GGML_TYPE_COUNT && kern.types[type].to_float != NULL && kern.types[type].vec_dot != NULL;
}

struct variant {
    const char *name;
    bool (*runs_on)(const struct cpu_features *f);
    void (*fill)(struct kernel_table *t);
};

static bool always(const struct cpu_features *f) { (void)f; return true; }
static void fill_ref(struct kernel_table *t) { *t = ref_table; }
#if defined(__aarch64__)
static bool runs_neon(const struct cpu_features *f) { return f->neon; }
static bool runs_dotprod(const struct cpu_features *f) { return f->neon && f->dotprod; }
#endif

/* Install a variant; re-selecting the active one writes nothing, so a second
 * kernels_init() does not race with kernels running on other threads. */
static void select_variant(const struct variant *v)
{
    if (strcmp(kern.name, v->name) != 0)
        v->fill(&kern);
}

/* Best first. */
static const struct variant variants[] = {
#if defined(__aarch64__)
    {"dotprod", runs_dotprod, kernels_fill_dotprod},
    {"neon", runs_neon, kernels_fill_neon},
#endif
    {"ref", always, fill_ref},
};
#define N_VARIANTS (sizeof(variants) / sizeof(variants[0]))

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
    const struct cpu_features *f = cpu_features_get();
    const char *want = getenv("INFER_KERNELS");
    if (want && *want) {
        for (size_t i = 0; i < N_VARIANTS; i++) {
            if (strcmp(variants[i].name, want) != 0)
                continue;
            if (!variants[i].runs_on(f)) {
                snprintf(err, n, "INFER_KERNELS=%s: this CPU lacks the instructions it needs", want);
                return -1;
            }
            select_variant(&variants[i]);
            return 0;
        }
        snprintf(err, n, "INFER_KERNELS=%s: no such variant (built in: %s)", want, kernels_built_in());
        return -1;
    }
    for (size_t i = 0; i < N_VARIANTS; i++) {
        if (variants[i].runs_on(f)) {
            select_variant(&variants[i]);
            break;
        }
    }
    return 0;
}
