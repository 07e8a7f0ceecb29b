/*
 * dispatch.h - the kernel dispatch table, filled once at start-up.
 *
 * Each SIMD variant is compiled in its own translation unit with its own
 * flags (kernels/x86/quants_avx2.c with -mavx2 -mfma -mf16c, ...).  kernels_init()
 * picks the best variant the CPU supports (or the one named by INFER_KERNELS)
 * and fills `kern`; the engine calls kernels only through it.  A variant
 * starts from the reference table (or from a lesser variant's table) and
 * overrides the entries it accelerates, so every entry is always callable.
 *
 * Variants are listed best first in dispatch.c as {name, runs_on(features),
 * fill(table)}; adding one (e.g. NEON) is one line there plus its fill
 * function declared below.
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

#include "attention.h"
#include "cpu.h"
#include "quants.h"
#include "repack.h"
#include "types.h"

/* Rows and tokens of one gemm tile (see gemm_fn). */
#define GEMM_ROWS 4
#define GEMM_TOKS 4

/*
 * A tile of a matrix product: for r < GEMM_ROWS and t < nt (1 <= nt <=
 * GEMM_TOKS),
 *     y[t * y_stride + r] = vec_dot(n, w + r * w_row, a + t * a_row)
 * where w points at GEMM_ROWS weight rows of w_row bytes and a at nt
 * activation rows of a_row bytes (in vec_dot_type).  Every implementation
 * must give, for each (r, t), exactly the bits of the vec_dot of the same
 * table: matmul computes full tiles with gemm and the leftover rows with
 * vec_dot, so results never depend on the tiling or the thread count.  The
 * gain is reuse: each weight block is loaded and unpacked once per tile
 * instead of once per token.  Rows need only the alignment of their blocks.
 */
typedef void (*gemm_fn)(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y,
                        size_t y_stride, int nt);

/*
 * Optional path for many tokens (prefill): all n_rows x n_tok outputs of a
 * range of rows,
 *     y[t * y_stride + r] = vec_dot(n, w + r * w_row, a + t * a_row)
 * for r < n_rows, t < n_tok, with exactly vec_dot's bits (as gemm_fn).  It
 * may reorganize the activations and the weights of the range into the
 * thread's kernels_scratch() memory (so that, e.g., vector lanes hold tokens
 * and no horizontal sums are needed).  matmul calls it from each thread with
 * that thread's rows and a chunk of tokens when n_tok >= kernels_many_min()
 * of the type (below: where the tiles of gemm, gemm_prep are slower).
 * Returns 0, or -1 when its scratch cannot be allocated (nothing written;
 * matmul then uses gemm).
 */
typedef int (*gemm_many_fn)(int64_t n, const void *w, size_t w_row, int64_t n_rows, const void *a, size_t a_row,
                            int64_t n_tok, float *y, size_t y_stride);
#define GEMM_MANY_MIN_TOK 16

/*
 * Optional companions of a gemm for 2 .. GEMM_TOKS tokens (several sequences
 * decoding together), where the tile's arithmetic, not the weight stream,
 * sets the pace: what every tile would otherwise recompute from the
 * activations for each group of GEMM_ROWS rows (e.g. the tokens' block sums
 * times the weights' offset, their scales as floats) is made once per
 * matmul.  act_prep(n, a, a_row, nt, prep) writes up to GEMM_PREP_BLOCK bytes per
 * 32 elements of n for the nt (<= GEMM_TOKS) activation rows at a, in a
 * format private to the variant; gemm_prep is then gemm_fn with that prep
 * added, under gemm_fn's contract (vec_dot's bits).  matmul uses them for
 * prep_min_tok (2 when 0) .. kernels_many_min() - 1 tokens (above
 * GEMM_TOKS in groups of GEMM_TOKS, each tile reading its group's prep),
 * and only when the table has both.
 */
#define GEMM_PREP_BLOCK 160
typedef void (*act_prep_fn)(int64_t n, const void *a, size_t a_row, int nt, void *prep);
typedef void (*gemm_prep_fn)(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, const void *prep,
                             float *y, size_t y_stride, int nt);

/*
 * Optional prepared form of gemm_many (prefill): the activations are
 * reorganized for the tiles (e.g. transposed so that vector lanes hold
 * tokens) once per matmul instead of once per call, i.e. once per row range
 * a thread takes, and every thread and row range reads that one copy.  As
 * with act_prep above, the prep comes in groups of tokens:
 * many_prep(n, a, a_row, nt, prep) writes the prep of nt (1 ..
 * many_prep_tok) activation rows at a, many_prep_bytes bytes per 32
 * elements of n, into prep (64-byte aligned; a group holds
 * (n / 32) * many_prep_bytes bytes, also a multiple of 64).  Then
 * gemm_many_prep is gemm_many with `prep` pointing at the groups of its
 * tokens, one after another (its first token starts a group), under
 * gemm_many's contract (vec_dot's bits; -1 when its own scratch cannot be
 * had).  matmul uses it, when the type has all four fields, in place of
 * gemm_many.
 */
typedef int (*gemm_many_prep_fn)(int64_t n, const void *w, size_t w_row, int64_t n_rows, const void *a,
                                 size_t a_row, const void *prep, int64_t n_tok, float *y, size_t y_stride);

/*
 * Optional fused gate/up form of gemm_many (the gated FFN of a dense layer,
 * src/model/forward.c, or of an expert, src/model/moe.c): two matrices of
 * the same type and shape, gate rows at wg and up rows at wu, over the same
 * activations, and
 *     y[t * y_stride + r] = act(g) * u,  g = vec_dot(n, wg + r * w_row, a + t * a_row),
 *                                        u = vec_dot(n, wu + r * w_row, a + t * a_row)
 * with act ops.h's silu (x / (1 + exp(-x))) or gelu (tanh form) as the
 * same table gives them, and one float product: the bits of gemm_many on
 * each matrix, then silu or gelu and vec_mul.  Both matrices' tiles pass
 * over the activations together and only the product is stored.  prep:
 * NULL, or (a type with many_prep) the prepared activations of the call's
 * tokens as for gemm_many_prep.  Same calling rules and return as
 * gemm_many.
 */
enum glu_act { GLU_SILU, GLU_GELU };
typedef int (*gemm_many_glu_fn)(int64_t n, const void *wg, const void *wu, size_t w_row, int64_t n_rows,
                                const void *a, size_t a_row, const void *prep, int64_t n_tok, float *y,
                                size_t y_stride, enum glu_act act);

/* Per-type kernels, indexed by ggml type id.  NULL entries: not supported. */
struct kernel_type_ops {
    to_float_fn to_float;     /* dequantize a row of this type */
    from_float_fn from_float; /* quantize a row into this type */
    vec_dot_fn vec_dot;       /* dot(row of this type, row of vec_dot_type) */
    gemm_fn gemm;             /* tile of vec_dots (NULL when vec_dot is) */
    gemm_many_fn gemm_many;   /* optional: many tokens at once (NULL: use gemm) */
    gemm_many_glu_fn gemm_many_glu; /* optional: gemm_many of gate and up, act(gate) * up */
    act_prep_fn act_prep;     /* optional, with gemm_prep: 2-4 token tiles on */
    gemm_prep_fn gemm_prep;   /* activation data made once per matmul */
    act_prep_fn many_prep;    /* optional, with gemm_many_prep: gemm_many on */
    gemm_many_prep_fn gemm_many_prep; /* activations prepared once per matmul */
    uint8_t prep_min_tok;     /* fewest tokens for act_prep (0: 2) */
    uint8_t many_min_tok;     /* fewest tokens for gemm_many (0: the table's;
                               * see kernels_many_min) */
    uint16_t many_prep_tok;   /* tokens per group of many_prep */
    uint16_t many_prep_bytes; /* its bytes per 32 elements per group */
    uint32_t vec_dot_type;    /* activation format vec_dot expects */
    uint32_t repack_type;     /* 0, or the x4 layout (repack.h) this variant's
                               * gemm runs faster on: the loader repacks
                               * weights of this type into it */
};

struct kernel_table {
    const char *name; /* variant name: "ref", "avx2", "neon", ... */
    struct kernel_type_ops types[INFER_TYPE_COUNT];
    int many_min_tok; /* fewest tokens for gemm_many of a type without its
                       * own (0: GEMM_MANY_MIN_TOK) */

    /* f32 ops (see ops.h for the contracts) */
    void (*rmsnorm)(float *out, const float *x, const float *w, int64_t n, float eps);
    void (*rope_norm)(float *x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float *cs);
    void (*rope_neox)(float *x, int64_t n_heads, int64_t head_dim, int64_t n_rot, const float *cs);
    void (*softmax)(float *x, int64_t n);
    void (*silu)(float *x, int64_t n);
    void (*gelu)(float *x, int64_t n);
    void (*gelu_ggml)(float *x, int64_t n);
    void (*vec_mul)(float *out, const float *a, const float *b, int64_t n);
    void (*vec_add)(float *out, const float *a, const float *b, int64_t n);
    void (*vec_scale)(float *x, int64_t n, float s);
    float (*vec_dot_f32)(const float *a, const float *b, int64_t n);
    int64_t (*argmax)(const float *x, int64_t n);
    /* causal attention over F16 K/V blocks (contract: attention_ref in
     * attention.h) */
    void (*attention)(float *out, const float *q, int64_t n_tok, const struct attn_kv *kv, int n_head,
                      int n_head_kv, int head_dim, float scale, int window);
};

extern struct kernel_table kern;

/*
 * The batch from which matmul gives weights of `type` to gemm_many (when
 * the type has one) rather than to the gemm tiles: the type's many_min_tok,
 * else the table's, else GEMM_MANY_MIN_TOK.  A crossover is a property of
 * one variant's pair of kernels for one type (the repacked x4 types' 4-token
 * tiles stay ahead of the transposing gemm_many far longer than the plain
 * types' tiles do), so a variant sets it per type where it has measured it;
 * a variant that replaces the kernels of a lesser one it builds on calls
 * kernels_many_min_reset() unless it measures its own.
 */
static inline int64_t kernels_many_min(const struct kernel_table *t, uint32_t type)
{
    if (type < INFER_TYPE_COUNT && t->types[type].many_min_tok > 0)
        return t->types[type].many_min_tok;
    return t->many_min_tok > 0 ? t->many_min_tok : GEMM_MANY_MIN_TOK;
}

/* Forget the per-type crossovers (many_min_tok) of every type: the table's
 * many_min_tok holds for all of them again. */
static inline void kernels_many_min_reset(struct kernel_table *t)
{
    for (uint32_t i = 0; i < INFER_TYPE_COUNT; i++)
        t->types[i].many_min_tok = 0;
}

/* A variant's measured crossovers: the table's for every type not listed
 * (min_tok), and each listed type's own. */
struct kernel_many_min {
    uint32_t type;
    uint8_t min_tok;
};
static inline void kernels_many_min_set(struct kernel_table *t, int table_min, const struct kernel_many_min *list,
                                        size_t n)
{
    kernels_many_min_reset(t);
    t->many_min_tok = table_min;
    for (size_t i = 0; i < n; i++)
        t->types[list[i].type].many_min_tok = list[i].min_tok;
}

/* A variant's gemm tile for layout x4 (repack.h) of its base type: the
 * loader then repacks the base type's weights into it, and the rows after
 * a matrix's last group of four (kept as stored) use the base type's
 * vec_dot, which must already be in the table. */
static inline void kernels_use_layout(struct kernel_table *t, uint32_t x4, gemm_fn gemm)
{
    const uint32_t base = repack_base_of(x4);
    t->types[base].repack_type = x4;
    t->types[x4].vec_dot = t->types[base].vec_dot;
    t->types[x4].gemm = gemm;
    t->types[x4].act_prep = NULL; /* a lesser variant's would go with its own gemm */
    t->types[x4].gemm_prep = NULL;
    t->types[x4].prep_min_tok = 0;
}

/* The same for base's x4 layout (repack_x4_of). */
static inline void kernels_use_x4(struct kernel_table *t, uint32_t base, gemm_fn gemm)
{
    kernels_use_layout(t, repack_x4_of(base), gemm);
}

/* The same with the 2-4 token pair (act_prep, gemm_prep) of the x4 type. */
static inline void kernels_use_x4_prep(struct kernel_table *t, uint32_t base, gemm_fn gemm, act_prep_fn prep,
                                       gemm_prep_fn gemm_prep)
{
    kernels_use_x4(t, base, gemm);
    t->types[repack_x4_of(base)].act_prep = prep;
    t->types[repack_x4_of(base)].gemm_prep = gemm_prep;
}

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

/* The built-in variants, best first (index 0 .. kernels_n_variants()-1):
 * name, and whether this CPU can run it.  kernels_variant_fill() writes the
 * complete table of a runnable variant into *t (nothing else changes) and
 * returns 0, or returns -1 for an index out of range or a variant this CPU
 * cannot run (its fill function may itself use the variant's instructions).
 * Tests use it to compare every runnable variant against the reference. */
size_t kernels_n_variants(void);
const char *kernels_variant_name(size_t i);
bool kernels_variant_runs(size_t i);
int kernels_variant_fill(size_t i, struct kernel_table *t);

/* Per-thread scratch memory for kernels (gemm_many): at least `bytes`,
 * 64-byte aligned, kept between calls (so that repeated matmuls do not fault
 * in fresh pages) and freed when the thread exits.  One user at a time per
 * thread; contents are not preserved.  NULL if it cannot grow (the previous
 * buffer is kept). */
void *kernels_scratch(size_t bytes);

/* Multi-line report of the active variant: the detected choice, and for every
 * supported type its activation format and which variant supplies its
 * vec_dot, gemm, gemm_many ("-": none; with kernels_many_min) and
 * activation quantizer, then the same for the f32 ops.
 * Calls kernels_init() first.  Static buffer; not thread-safe. */
const char *kernels_report(void);

/* Fill functions of the SIMD variants, each in its own translation unit
 * compiled with that variant's flags.  They expect *t to hold the reference
 * table (a variant may build on a lesser one by calling its fill first). */
#if defined(__x86_64__)
void kernels_fill_avx2(struct kernel_table *t);    /* kernels/x86/quants_avx2.c */
void kernels_fill_avxvnni(struct kernel_table *t); /* kernels/x86/gemm_avxvnni.c */
void kernels_fill_avx512(struct kernel_table *t); /* kernels/x86/quants_avx512.c */
/* The avx2 and avx512 attention (kernels/x86/attention_avx2.c,
 * attention_avx512.c; one body, attention_body.h). */
void kernels_fill_attention_avx2(struct kernel_table *t);
void kernels_fill_attention_avx512(struct kernel_table *t);
/* The gemm_many kernels of avx2 (kernels/x86/gemm_avx2.c) and avx512
 * (kernels/x86/gemm_avx512.c), called by those variants' fills. */
void kernels_fill_gemm_avx2(struct kernel_table *t);
void kernels_fill_gemm_avx512(struct kernel_table *t);
/* f32 ops of the variants (kernels/x86/ops_*.c), called by the fills above. */
void kernels_fill_ops_avx2(struct kernel_table *t);
void kernels_fill_ops_avx512(struct kernel_table *t);
#endif

#endif
