/*
 * dispatch.h - the kernel dispatch table, filled once at start-up.
 *
 * Each SIMD variant is compiled in its own translation unit with its own
 * flags.  kernels_init() picks the best variant the CPU supports (or the one
 * named by INFER_KERNELS) and fills `kern`; the engine calls kernels only
 * through it.  A variant starts from the reference table and overrides the
 * entries it accelerates, so every entry is always callable.
 *
 * `kern` is statically initialised to the reference table: calling a kernel
 * before kernels_init() is safe (it runs the scalar reference).  kernels_init()
 * must not run concurrently with kernel calls (call it at start-up).
 */
#ifndef INFER_KERNELS_DISPATCH_H
#define INFER_KERNELS_DISPATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cpu.h"
#include "quants.h"
#include "types.h"

/* Per-type kernels, indexed by ggml type id.  NULL entries: not supported. */
struct kernel_type_ops {
    to_float_fn to_float;     /* dequantize a row of this type */
    from_float_fn from_float; /* quantize a row into this type */
    vec_dot_fn vec_dot;       /* dot(row of this type, row of vec_dot_type) */
    uint32_t vec_dot_type;    /* activation format vec_dot expects */
};

struct kernel_table {
    const char *name; /* variant name: "ref", "avx2", "neon", ... */
    struct kernel_type_ops types[GGML_TYPE_COUNT];

    /* f32 ops (see ops.h for the contracts) */
    void (*rmsnorm)(float *out, const float *x, const float *w, int64_t n, float eps);
    void (*rope_norm)(float *x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos,
                      float freq_base, float freq_scale);
    void (*rope_neox)(float *x, int64_t n_heads, int64_t head_dim, int64_t n_rot, int64_t pos,
                      float freq_base, float freq_scale);
    void (*softmax)(float *x, int64_t n);
    void (*silu)(float *x, int64_t n);
    void (*gelu)(float *x, int64_t n);
    void (*gelu_ggml)(float *x, int64_t n);
    void (*vec_mul)(float *out, const float *a, const float *b, int64_t n);
    void (*vec_add)(float *out, const float *a, const float *b, int64_t n);
    void (*vec_scale)(float *x, int64_t n, float s);
    float (*vec_dot_f32)(const float *a, const float *b, int64_t n);
};

extern struct kernel_table kern;

/* Select the variant; idempotent.  Returns 0, or -1 if INFER_KERNELS names a
 * variant that is not built in or that this CPU cannot run (message in buf). */
int kernels_init(char *err, size_t n);
/* Space-separated names of the variants compiled into this binary. */
const char *kernels_built_in(void);
/* The scalar reference table (the specification; for tests). */
const struct kernel_table *kernels_ref(void);
/* True when `type` can be used as a matmul weight: it has both a dequantizer
 * and a dot product in the active table. */
bool kernels_type_supported(uint32_t type);

#endif
