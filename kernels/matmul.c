/*
 * matmul.c - weight-matrix times activations through the dispatch table
 * (see matmul.h), the reference gemm tiles, and row dequantization.
 *
 * Work split (rows are cut by (ith, nth) inside one OpenMP parallel region;
 * OpenMP keeps its thread pool, so nothing is created per call):
 *   GEMV, n_tok <= GEMM_TOKS (one token, or a few sequences decoding
 *     together): the GEMM_ROWS-row tiles are divided into runs, a few per
 *     thread; each weight byte is read once.  From 2 tokens (or the type's
 *     prep_min_tok), a type with act_prep/gemm_prep (dispatch.h) has each
 *     group of GEMM_TOKS tokens' prep made once here and its tiles read it
 *     (mm_prep).
 *   many tokens (n_tok >= kernels_many_min(), dispatch.h: the variant's
 *     crossover for the type; avx2's Q4_K x4 tiles stay ahead of its
 *     gemm_many up to ~40 tokens, plain Q4_K's up to ~13) and a gemm_many
 *     kernel: each thread passes its contiguous range of rows, with the
 *     tokens in chunks of MATMUL_MANY_TOK, to gemm_many (which reorganizes
 *     both operands for the vector units, see dispatch.h); if it cannot,
 *     the GEMM path below.
 *     A type with many_prep (dispatch.h) has its activations reorganized
 *     once per chunk of tokens, by all threads before the rows start, and
 *     every row range reads that one copy (gemm_many_prep).  matmul_glu
 *     runs the same items over a gate and an up matrix with
 *     gemm_many_glu, which writes act(gate) * up.
 *   GEMM, other batches (GEMM_TOKS < n_tok < the crossover, or no
 *     gemm_many): rows are grouped into blocks of about MATMUL_BLOCK_BYTES
 *     of weights (a whole number of tiles), tokens into blocks of
 *     MATMUL_TOK_BLOCK; a unit of work is one (row block, token block) pair,
 *     units are numbered row-block-major and each thread takes a contiguous
 *     range.  Inside a unit, tiles of GEMM_TOKS tokens sweep the row block,
 *     which stays in L1/L2 while the activations stream past it; with
 *     act_prep/gemm_prep each tile reads its group's prep, made once.
 * gemm and vec_dot give the same bits (dispatch.h), and each output is
 * written by exactly one thread, so results do not depend on the thread
 * count, the blocking or the batch size.
 */
#include "matmul.h"
#include "pool.h"

#include <cblas.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#include "util/common.h"

/* Below this many multiply-adds, threads cost more than they save. */
#define MATMUL_PARALLEL_MIN 32768.0
/* Weight bytes per row block of the GEMM path: most of a 48 KB L1. */
#define MATMUL_BLOCK_BYTES (24 * 1024)
/* Tokens per unit of work of the GEMM path (a multiple of GEMM_TOKS). */
#define MATMUL_TOK_BLOCK 64
/* OpenBLAS for float weights (F32, F16, BF16), opt-in (INFER_BLAS=1 or
 * matmul_use_blas): batches of at least MATMUL_BLAS_F32_TOK (F32) or
 * MATMUL_BLAS_F16_TOK (F16, BF16: rows converted to float in chunks of
 * about MATMUL_BLAS_CHUNK bytes first) tokens go to cblas_sgemm.  Measured
 * on the avx512 build machine, 2 threads, 1024x1024 (bench-kernels -T
 * f32,f16 -n N with and without INFER_BLAS=1): the tiles give F32 62-77 and
 * F16 ~79 GMAC/s at any batch; sgemm F32 104 at 64 tokens and 140 at 512,
 * F16 38 at 64 (the conversion dominates) and 109 at 512.  It is off by
 * default because sgemm sums in its own order: a batch would no longer give
 * the bits of the same tokens one at a time, which the prefix cache relies
 * on (a reused prefix gives exactly the logits of a recomputed one). */
#define MATMUL_BLAS_F32_TOK 32
#define MATMUL_BLAS_F16_TOK 128
#define MATMUL_BLAS_CHUNK (4u << 20)

/* gemm_many: rows are split in multiples of this; tokens go in chunks of
 * at most MATMUL_MANY_TOK (bounding its scratch and keeping it in L2). */
#define MATMUL_MANY_ROWS 16
#define MATMUL_MANY_TOK 512

/* ------------------------- reference gemm tiles ------------------------- */

#define GEMM_REF(T, DOT)                                                                                        \
    void gemm_##T##_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y,          \
                        size_t ys, int nt)                                                                      \
    {                                                                                                           \
        for (int t = 0; t < nt; t++)                                                                            \
            for (int r = 0; r < GEMM_ROWS; r++)                                                                 \
                y[(size_t)t * ys + (size_t)r] = DOT(n, (const char *)w + (size_t)r * w_row,                     \
                                                    (const char *)a + (size_t)t * a_row);                       \
    }

GEMM_REF(f32, vec_dot_f32_f32_ref)
GEMM_REF(f16, vec_dot_f16_f16_ref)
GEMM_REF(bf16, vec_dot_bf16_bf16_ref)
GEMM_REF(q4_0, vec_dot_q4_0_q8_0_ref)
GEMM_REF(q4_1, vec_dot_q4_1_q8_1_ref)
GEMM_REF(q5_0, vec_dot_q5_0_q8_0_ref)
GEMM_REF(q5_1, vec_dot_q5_1_q8_1_ref)
GEMM_REF(q8_0, vec_dot_q8_0_q8_0_ref)
GEMM_REF(q4_K, vec_dot_q4_K_q8_K_ref)
GEMM_REF(q5_K, vec_dot_q5_K_q8_K_ref)
GEMM_REF(q6_K, vec_dot_q6_K_q8_K_ref)
GEMM_REF(iq4_nl, vec_dot_iq4_nl_q8_0_ref)
GEMM_REF(q2_K, vec_dot_q2_K_q8_K_ref)
GEMM_REF(q3_K, vec_dot_q3_K_q8_K_ref)
GEMM_REF(iq4_xs, vec_dot_iq4_xs_q8_K_ref)

/* A group of four rows in the x4 layout, one block at a time: the reference
 * vec_dot of a single block is exactly that block's term (0 + term), and
 * adding the terms in block order is what vec_dot does, so the bits are the
 * reference's on the original rows. */
static void gemm_x4_ref(uint32_t x4, vec_dot_fn dot, int64_t n, const void *w, const void *a, size_t a_row,
                        float *y, size_t ys, int nt)
{
    const int64_t nb = n / 32;
    for (int t = 0; t < nt; t++)
        for (int r = 0; r < GEMM_ROWS; r++) {
            float sum = 0.0f;
            for (int64_t b = 0; b < nb; b++) {
                block_q8_0 blk; /* the largest of the blocks */
                repack_x4_block(x4, w, nb, r, b, &blk);
                sum += dot(32, &blk, (const char *)a + (size_t)t * a_row + (size_t)b * sizeof(block_q8_0));
            }
            y[(size_t)t * ys + (size_t)r] = sum;
        }
}

void gemm_q4_0x4_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, int nt)
{
    (void)w_row;
    gemm_x4_ref(INFER_TYPE_Q4_0_X4, vec_dot_q4_0_q8_0_ref, n, w, a, a_row, y, ys, nt);
}

void gemm_q4_0x4s_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys,
                      int nt)
{
    (void)w_row;
    gemm_x4_ref(INFER_TYPE_Q4_0_X4S, vec_dot_q4_0_q8_0_ref, n, w, a, a_row, y, ys, nt);
}

void gemm_q8_0x4_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, int nt)
{
    (void)w_row;
    gemm_x4_ref(INFER_TYPE_Q8_0_X4, vec_dot_q8_0_q8_0_ref, n, w, a, a_row, y, ys, nt);
}

void gemm_iq4_nlx4_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys,
                       int nt)
{
    (void)w_row;
    gemm_x4_ref(INFER_TYPE_IQ4_NL_X4, vec_dot_iq4_nl_q8_0_ref, n, w, a, a_row, y, ys, nt);
}

void gemm_q5_0x4_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, int nt)
{
    (void)w_row;
    gemm_x4_ref(INFER_TYPE_Q5_0_X4, vec_dot_q5_0_q8_0_ref, n, w, a, a_row, y, ys, nt);
}

/* Q3_K, Q4_K, Q6_K: the super-block's float steps (Q4_K: two) and their order
 * are vec_dot's, so the row is put back whole (into the thread's kernel
 * scratch) and given to vec_dot; all NaN if the scratch cannot be had. */
static void gemm_xk_ref(uint32_t x4, vec_dot_fn dot, int64_t n, const void *w, size_t w_row, const void *a,
                        size_t a_row, float *y, size_t ys, int nt)
{
    const int64_t nb = n / QK_K;
    const size_t bs = ggml_row_size(repack_base_of(x4), QK_K);
    uint8_t *row = kernels_scratch(w_row);
    for (int r = 0; r < GEMM_ROWS; r++) {
        if (row)
            for (int64_t b = 0; b < nb; b++)
                repack_x4_block(x4, w, nb, r, b, row + (size_t)b * bs);
        for (int t = 0; t < nt; t++)
            y[(size_t)t * ys + (size_t)r] = row ? dot(n, row, (const char *)a + (size_t)t * a_row) : NAN;
    }
}

void gemm_q4_Kx4_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, int nt)
{
    gemm_xk_ref(INFER_TYPE_Q4_K_X4, vec_dot_q4_K_q8_K_ref, n, w, w_row, a, a_row, y, ys, nt);
}

void gemm_q4_Kx4i_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys,
                      int nt)
{
    gemm_xk_ref(INFER_TYPE_Q4_K_X4I, vec_dot_q4_K_q8_K_ref, n, w, w_row, a, a_row, y, ys, nt);
}

void gemm_q6_Kx4_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, int nt)
{
    gemm_xk_ref(INFER_TYPE_Q6_K_X4, vec_dot_q6_K_q8_K_ref, n, w, w_row, a, a_row, y, ys, nt);
}

void gemm_q3_Kx4_ref(int64_t n, const void *w, size_t w_row, const void *a, size_t a_row, float *y, size_t ys, int nt)
{
    gemm_xk_ref(INFER_TYPE_Q3_K_X4, vec_dot_q3_K_q8_K_ref, n, w, w_row, a, a_row, y, ys, nt);
}

/* ------------------------------- matmul ------------------------------- */

static const char *type_name(uint32_t type)
{
    const struct ggml_type_traits *t = ggml_type_traits_get(type);
    return t ? t->name : "(unknown)";
}

/* Alignment a pointer to blocks of `type` needs: F32 rows hold floats, every
 * other supported type holds ggml_half fields (Q8_K, with a float, is only
 * ever produced here). */
static size_t type_align(uint32_t type)
{
    return type == GGML_TYPE_F32 || type == GGML_TYPE_Q8_K ? 4 : 2;
}

/* Validate a matmul and find its activation format and row sizes. */
static int matmul_check(uint32_t wtype, int64_t n_in, int64_t n_out, int64_t n_tok, const void *w,
                        uint32_t *act_type, size_t *w_row, size_t *act_row)
{
    if (wtype >= INFER_TYPE_COUNT || !kern.types[wtype].vec_dot || !kern.types[wtype].gemm ||
        !ggml_type_traits_get(wtype))
        return infer_error(INFER_ERR_UNSUPPORTED, "unsupported tensor type %s for matmul", type_name(wtype));
    const uint32_t at = kern.types[wtype].vec_dot_type;
    const struct ggml_type_traits *wt = ggml_type_traits_get(wtype), *ta = ggml_type_traits_get(at);
    if (!ta || !kern.types[at].from_float)
        return infer_error(INFER_ERR_UNSUPPORTED, "unsupported tensor type %s for matmul", type_name(wtype));
    if (n_in <= 0 || n_out < 0 || n_tok < 0)
        return infer_error(INFER_ERR_INVALID, "matmul: bad shape n_in=%lld n_out=%lld n_tok=%lld", (long long)n_in,
                           (long long)n_out, (long long)n_tok);
    if (n_in % wt->block_size != 0 || n_in % ta->block_size != 0)
        return infer_error(INFER_ERR_INVALID, "matmul: row length %lld is not a multiple of the %s block size %u",
                           (long long)n_in, wt->name, wt->block_size > ta->block_size ? wt->block_size
                                                                                        : ta->block_size);
    if (w && (uintptr_t)w % type_align(wtype) != 0)
        return infer_error(INFER_ERR_INVALID, "matmul: %s weights at a misaligned address", wt->name);
    *act_type = at;
    *w_row = ggml_row_size(wtype, n_in);
    *act_row = ggml_row_size(at, n_in);
    return INFER_OK;
}

size_t matmul_act_size(uint32_t wtype, int64_t n_in, int64_t n_tok)
{
    uint32_t at;
    size_t w_row, act_row;
    uint64_t total;
    if (n_tok < 0 || matmul_check(wtype, n_in, 0, n_tok, NULL, &at, &w_row, &act_row) != INFER_OK)
        return 0;
    if (!ck_mul(act_row, (uint64_t)n_tok, &total) || total > SIZE_MAX)
        return 0;
    return (size_t)total;
}

/* ------------------------- activation buffers ------------------------- */

#define ACT_KEEP 2 /* released buffers a thread keeps */

struct act_cache {
    void *p[ACT_KEEP];
    size_t size[ACT_KEEP];
    /* kept buffers handed out and not yet back, with their real sizes: a
     * caller releases with the size it asked for, which may be smaller, and
     * keeping that smaller size would have the next larger request malloc
     * (and page-fault) a fresh block while this one sits unused */
    void *lent[ACT_KEEP];
    size_t lent_size[ACT_KEEP];
};

static pthread_key_t act_key;
static pthread_once_t act_once = PTHREAD_ONCE_INIT;
static int act_key_ok;

static void act_cache_free(void *v)
{
    struct act_cache *c = v;
    for (int i = 0; i < ACT_KEEP; i++)
        free(c->p[i]);
    free(c);
}

static void act_key_init(void) { act_key_ok = pthread_key_create(&act_key, act_cache_free) == 0; }

static struct act_cache *act_cache_get(void)
{
    pthread_once(&act_once, act_key_init);
    if (!act_key_ok)
        return NULL;
    struct act_cache *c = pthread_getspecific(act_key);
    if (!c) {
        c = calloc(1, sizeof(*c));
        if (c && pthread_setspecific(act_key, c) != 0) {
            free(c);
            c = NULL;
        }
    }
    return c;
}

void *matmul_act_alloc(size_t bytes)
{
    struct act_cache *c = act_cache_get();
    if (c) {
        int best = -1; /* the smallest kept buffer that is large enough */
        for (int i = 0; i < ACT_KEEP; i++)
            if (c->p[i] && c->size[i] >= bytes && (best < 0 || c->size[i] < c->size[best]))
                best = i;
        if (best >= 0) {
            void *p = c->p[best];
            for (int i = 0; i < ACT_KEEP; i++)
                if (!c->lent[i]) {
                    c->lent[i] = p;
                    c->lent_size[i] = c->size[best];
                    break;
                }
            c->p[best] = NULL;
            return p;
        }
    }
    void *p = malloc(bytes ? bytes : 1);
    for (int i = 0; c && p && i < ACT_KEEP; i++)
        if (c->lent[i] == p) /* a stale record (its buffer went back on another thread) */
            c->lent[i] = NULL;
    return p;
}

void matmul_act_release(void *p, size_t bytes)
{
    struct act_cache *c = p ? act_cache_get() : NULL;
    if (!c) {
        free(p);
        return;
    }
    for (int i = 0; i < ACT_KEEP; i++)
        if (c->lent[i] == p) {
            if (c->lent_size[i] > bytes)
                bytes = c->lent_size[i];
            c->lent[i] = NULL;
        }
    int slot = 0; /* an empty slot, else the smallest kept buffer if smaller than p */
    for (int i = 0; i < ACT_KEEP; i++)
        if (!c->p[i] || (c->p[slot] && c->size[i] < c->size[slot]))
            slot = i;
    if (c->p[slot] && c->size[slot] >= bytes) {
        free(p);
        return;
    }
    free(c->p[slot]);
    c->p[slot] = p;
    c->size[slot] = bytes;
}

/* Quantize activation rows, a chunk of rows per pool item. */
struct act_rows {
    from_float_fn quantize;
    const float *x;
    void *xq;
    int64_t n_in;
    size_t act_row;
};

static void act_rows_run(void *ctx, int64_t t0, int64_t t1)
{
    const struct act_rows *r = ctx;
    for (int64_t t = t0; t < t1; t++)
        r->quantize(r->x + t * r->n_in, (char *)r->xq + (size_t)t * r->act_row, r->n_in);
}

int matmul_act_quantize(void *xq, uint32_t wtype, const float *x, int64_t n_in, int64_t n_tok)
{
    uint32_t at;
    size_t w_row, act_row;
    int st = matmul_check(wtype, n_in, 0, n_tok, NULL, &at, &w_row, &act_row);
    if (st)
        return st;
    if (n_tok == 0)
        return INFER_OK;
    if (!xq || !x)
        return infer_error(INFER_ERR_INVALID, "matmul: NULL activations");
    if ((uintptr_t)xq % type_align(at) != 0)
        return infer_error(INFER_ERR_INVALID, "matmul: misaligned activation buffer");
    struct act_rows r = {kern.types[at].from_float, x, xq, n_in, act_row};
    pool_for(n_tok, pool_grain(n_tok, 4, 1), act_rows_run, &r);
    return INFER_OK;
}

/* Everything one matmul_q needs, shared by the threads. */
struct mm {
    const char *w, *a;
    float *y;
    int64_t n_in, n_out, n_tok;
    size_t w_row, a_row;
    vec_dot_fn dot;
    gemm_fn gemm;
    gemm_many_fn many;
    gemm_many_glu_fn glu;   /* with many: the fused gate/up form, w the gate */
    const char *wu;         /* rows and wu the up rows (matmul_glu), */
    enum glu_act act;       /* y the products */
    gemm_prep_fn gemm_prep; /* with prep: the prepared tiles (dispatch.h), */
    gemm_many_prep_fn many_prep; /* or the prepared gemm_many */
    const char *prep;       /* act_prep (many_prep) of each group of */
    int64_t prep_tok;       /* prep_tok tokens, */
    size_t prep_group;      /* prep_group bytes apart */
};

/* Outputs of rows [o0, o1) for tokens [t0, t1): full tiles with gemm, the
 * rows after the last full tile with vec_dot. */
static void mm_rows(const struct mm *m, int64_t o0, int64_t o1, int64_t t0, int64_t t1)
{
    const int64_t o_tiles = o0 + (o1 - o0) / GEMM_ROWS * GEMM_ROWS;
    for (int64_t t = t0; t < t1; t += GEMM_TOKS) {
        const int nt = (int)(t1 - t < GEMM_TOKS ? t1 - t : GEMM_TOKS);
        const char *a = m->a + (size_t)t * m->a_row;
        float *y = m->y + t * m->n_out;
        if (m->gemm_prep) {
            const char *p = m->prep + (size_t)(t / GEMM_TOKS) * m->prep_group; /* t0: a multiple of GEMM_TOKS */
            for (int64_t o = o0; o < o_tiles; o += GEMM_ROWS)
                m->gemm_prep(m->n_in, m->w + (size_t)o * m->w_row, m->w_row, a, m->a_row, p, y + o,
                             (size_t)m->n_out, nt);
        } else
            for (int64_t o = o0; o < o_tiles; o += GEMM_ROWS)
                m->gemm(m->n_in, m->w + (size_t)o * m->w_row, m->w_row, a, m->a_row, y + o, (size_t)m->n_out, nt);
        for (int64_t o = o_tiles; o < o1; o++)
            for (int k = 0; k < nt; k++)
                y[k * m->n_out + o] = m->dot(m->n_in, m->w + (size_t)o * m->w_row, a + (size_t)k * m->a_row);
    }
}

/* matmul_glu's outputs of rows [o0, o1) for tokens [t0, t1) when its
 * kernel cannot get its scratch: each from the two vec_dots, then the
 * table's silu or gelu of one element and the product (their bits). */
static void mm_glu_rows(const struct mm *m, int64_t o0, int64_t o1, int64_t t0, int64_t t1)
{
    void (*const act)(float *, int64_t) = m->act == GLU_GELU ? kern.gelu : kern.silu;
    for (int64_t t = t0; t < t1; t++)
        for (int64_t o = o0; o < o1; o++) {
            const char *a = m->a + (size_t)t * m->a_row;
            float g = m->dot(m->n_in, m->w + (size_t)o * m->w_row, a);
            act(&g, 1);
            m->y[t * m->n_out + o] = g * m->dot(m->n_in, m->wu + (size_t)o * m->w_row, a);
        }
}

/* The work of one matmul as items for the thread pool, each writing its own
 * outputs: with gemm_many, (row group, token chunk) pairs; for one token,
 * whole GEMM_ROWS tiles; otherwise (row block, token block) units sized so
 * that a unit's weights stay in the L2 while its tokens pass. */
struct mm_items {
    const struct mm *m;
    int64_t rows;   /* rows per item (a multiple of GEMM_ROWS) */
    int64_t n_tb;   /* token blocks per row block */
    int64_t toks;   /* tokens per token block */
};

static void mm_items_run(void *ctx, int64_t i0, int64_t i1)
{
    const struct mm_items *it = ctx;
    const struct mm *m = it->m;
    for (int64_t u = i0; u < i1; u++) {
        const int64_t o0 = u / it->n_tb * it->rows, t0 = u % it->n_tb * it->toks;
        const int64_t o1 = o0 + it->rows < m->n_out ? o0 + it->rows : m->n_out;
        const int64_t t1 = t0 + it->toks < m->n_tok ? t0 + it->toks : m->n_tok;
        const char *w = m->w + (size_t)o0 * m->w_row, *a = m->a + (size_t)t0 * m->a_row;
        float *y = m->y + t0 * m->n_out + o0;
        int done = -1;
        if (m->glu) {
            if (m->glu(m->n_in, w, m->wu + (size_t)o0 * m->w_row, m->w_row, o1 - o0, a, m->a_row,
                       m->many_prep ? m->prep + (size_t)(t0 / m->prep_tok) * m->prep_group : NULL, t1 - t0, y,
                       (size_t)m->n_out, m->act) != 0)
                mm_glu_rows(m, o0, o1, t0, t1);
            continue;
        }
        if (m->many_prep) /* t0: a multiple of MATMUL_MANY_TOK, so of prep_tok */
            done = m->many_prep(m->n_in, w, m->w_row, o1 - o0, a, m->a_row,
                                m->prep + (size_t)(t0 / m->prep_tok) * m->prep_group, t1 - t0, y, (size_t)m->n_out);
        else if (m->many)
            done = m->many(m->n_in, w, m->w_row, o1 - o0, a, m->a_row, t1 - t0, y, (size_t)m->n_out);
        if (done != 0)
            mm_rows(m, o0, o1, t0, t1);
    }
}

/* Items per taking-part thread: enough that a thread which is not running
 * holds back only a small share of the matmul. */
#define MM_ITEMS_PER_THREAD 8

/* How one matmul splits into items for nth threads; returns the item count. */
static int64_t mm_plan(const struct mm *m, int nth, struct mm_items *it)
{
    *it = (struct mm_items){.m = m, .n_tb = 1, .toks = m->n_tok};
    if (m->many) { /* row groups of whole MATMUL_MANY_ROWS units, tokens in chunks */
        const int64_t n_units = (m->n_out + MATMUL_MANY_ROWS - 1) / MATMUL_MANY_ROWS;
        int64_t groups = (int64_t)nth * (nth > 1 ? MM_ITEMS_PER_THREAD / 2 : 1);
        groups = groups < n_units ? groups : n_units;
        it->rows = (n_units + groups - 1) / groups * MATMUL_MANY_ROWS;
        it->toks = MATMUL_MANY_TOK;
    } else if (m->n_tok <= GEMM_TOKS) { /* GEMV, or one tile of tokens: runs of whole tiles */
        const int64_t n_tiles = (m->n_out + GEMM_ROWS - 1) / GEMM_ROWS;
        int64_t runs = (int64_t)nth * (nth > 1 ? MM_ITEMS_PER_THREAD / 2 : 1); /* a claim costs a cache-line trip */
        runs = runs < n_tiles ? runs : n_tiles;
        it->rows = (n_tiles + runs - 1) / runs * GEMM_ROWS;
    } else {
        int64_t rb = MATMUL_BLOCK_BYTES / (int64_t)m->w_row / GEMM_ROWS * GEMM_ROWS;
        it->rows = rb < GEMM_ROWS ? GEMM_ROWS : rb;
        it->toks = MATMUL_TOK_BLOCK;
    }
    it->n_tb = (m->n_tok + it->toks - 1) / it->toks;
    return (m->n_out + it->rows - 1) / it->rows * it->n_tb;
}

static void mm_run(const struct mm *m, bool parallel)
{
    struct mm_items it;
    const int64_t n_items = mm_plan(m, parallel ? pool_threads() : 1, &it);
    if (parallel) /* also with one thread taking part: the pool may try a second again */
        pool_for(n_items, 1, mm_items_run, &it);
    else
        mm_items_run(&it, 0, n_items);
}

/* A prep pass over groups of tokens, group after group (pool items). */
struct mm_prep_run {
    const struct mm *m;
    act_prep_fn fn;
    char *p;
};

static void mm_prep_run(void *ctx, int64_t g0, int64_t g1)
{
    const struct mm_prep_run *r = ctx;
    const struct mm *m = r->m;
    for (int64_t g = g0; g < g1; g++) {
        const int64_t t = g * m->prep_tok, nt = m->n_tok - t < m->prep_tok ? m->n_tok - t : m->prep_tok;
        r->fn(m->n_in, m->a + (size_t)t * m->a_row, m->a_row, (int)nt, r->p + (size_t)g * m->prep_group);
    }
}

/* The prep (dispatch.h) of each group of tokens of m, when its type has a
 * pair for the batch: act_prep/gemm_prep (groups of GEMM_TOKS) for
 * prep_min_tok (2 when 0) .. many_min - 1 tokens, many_prep/gemm_many_prep (groups of many_prep_tok)
 * in place of gemm_many.  Into a buffer of *bytes from matmul_act_alloc,
 * returned (NULL: none, plain gemm or gemm_many); the groups start at the
 * first 64-byte boundary in it.  Made by the pool when `parallel`. */
static void *mm_prep(struct mm *m, uint32_t wtype, int64_t many_min, bool parallel, size_t *bytes)
{
    const struct kernel_type_ops *o = &kern.types[wtype];
    act_prep_fn fn;
    size_t block;
    if (m->many && o->many_prep && o->gemm_many_prep && o->many_prep_tok > 0 && o->many_prep_bytes > 0 &&
        MATMUL_MANY_TOK % o->many_prep_tok == 0 && m->n_in % 32 == 0) {
        fn = o->many_prep;
        m->prep_tok = o->many_prep_tok;
        block = o->many_prep_bytes;
    } else if (o->act_prep && o->gemm_prep && m->n_tok >= (o->prep_min_tok ? o->prep_min_tok : 2) &&
               m->n_tok < many_min && m->n_in % 32 == 0) {
        fn = o->act_prep;
        m->prep_tok = GEMM_TOKS;
        block = GEMM_PREP_BLOCK;
    } else
        return NULL;
    const size_t group = (size_t)(m->n_in / 32) * block;
    const int64_t groups = (m->n_tok + m->prep_tok - 1) / m->prep_tok;
    *bytes = group * (size_t)groups + 64;
    char *p = matmul_act_alloc(*bytes);
    if (!p)
        return NULL;
    m->prep_group = group;
    struct mm_prep_run r = {m, fn, p + (64 - (uintptr_t)p % 64) % 64};
    if (parallel && groups > 1)
        pool_for(groups, 1, mm_prep_run, &r);
    else
        mm_prep_run(&r, 0, groups);
    m->prep = r.p;
    if (fn == o->many_prep)
        m->many_prep = o->gemm_many_prep;
    else
        m->gemm_prep = o->gemm_prep;
    return p;
}

/* matmul_q's passes over chunks of tokens, checked arguments; wu and glu
 * (with many tokens) for matmul_glu. */
static void mm_q_run(float *y, const void *w, const void *wu, gemm_many_glu_fn glu, enum glu_act act,
                     uint32_t wtype, const void *xq, int64_t n_in, int64_t n_out, int64_t n_tok, size_t w_row,
                     size_t act_row)
{
    const int64_t many_min = kernels_many_min(&kern, wtype);
    const bool many = n_tok >= many_min && kern.types[wtype].gemm_many;
    /* gemm_many: chunks of MATMUL_MANY_TOK tokens, each prepared (when the
     * type has many_prep) and then run, so the prep stays a chunk's size */
    const int64_t chunk = many && kern.types[wtype].many_prep ? MATMUL_MANY_TOK : n_tok;
    for (int64_t t0 = 0; t0 < n_tok; t0 += chunk) {
        const int64_t nt = n_tok - t0 < chunk ? n_tok - t0 : chunk;
        struct mm m = {
            .w = w, .a = (const char *)xq + (size_t)t0 * act_row, .y = y + t0 * n_out, .n_in = n_in,
            .n_out = n_out, .n_tok = nt, .w_row = w_row, .a_row = act_row, .dot = kern.types[wtype].vec_dot,
            .gemm = kern.types[wtype].gemm, .many = many ? kern.types[wtype].gemm_many : NULL,
            .glu = many ? glu : NULL, .wu = wu, .act = act,
        };
        const double work = (double)n_in * (double)n_out * (double)nt * (glu ? 2.0 : 1.0);
        const bool parallel = work >= MATMUL_PARALLEL_MIN && n_out > GEMM_ROWS;
        size_t prep_bytes = 0;
        void *prep = mm_prep(&m, wtype, many_min, parallel, &prep_bytes);
        mm_run(&m, parallel);
        if (prep)
            matmul_act_release(prep, prep_bytes);
    }
}

/* mm_q_run on the activations x quantized to wtype's activation type in a
 * buffer of this call (checked arguments): matmul's and matmul_glu's path. */
static int mm_quantized(float *y, const void *w, const void *wu, gemm_many_glu_fn glu, enum glu_act act,
                        uint32_t wtype, const float *x, int64_t n_in, int64_t n_out, int64_t n_tok, size_t w_row,
                        size_t act_row)
{
    const size_t size = matmul_act_size(wtype, n_in, n_tok);
    if (size == 0)
        return infer_error(INFER_ERR_INVALID, "matmul: %lld activation rows of %lld are too large",
                           (long long)n_tok, (long long)n_in);
    void *xq = matmul_act_alloc(size); /* malloc's alignment suits every block type */
    if (!xq)
        return infer_error(INFER_ERR_NOMEM, "matmul: out of memory for %zu bytes of activations", size);
    const int st = matmul_act_quantize(xq, wtype, x, n_in, n_tok);
    if (!st)
        mm_q_run(y, w, wu, glu, act, wtype, xq, n_in, n_out, n_tok, w_row, act_row);
    matmul_act_release(xq, size);
    return st;
}

int matmul_q(float *y, const void *w, uint32_t wtype, const void *xq, int64_t n_in, int64_t n_out, int64_t n_tok)
{
    uint32_t at;
    size_t w_row, act_row;
    int st = matmul_check(wtype, n_in, n_out, n_tok, w, &at, &w_row, &act_row);
    if (st)
        return st;
    if (n_out == 0 || n_tok == 0)
        return INFER_OK;
    if (!y || !w || !xq)
        return infer_error(INFER_ERR_INVALID, "matmul: NULL argument");
    mm_q_run(y, w, NULL, NULL, GLU_SILU, wtype, xq, n_in, n_out, n_tok, w_row, act_row);
    return INFER_OK;
}

/* 0: matmul_glu and matmul_q_rows_glu decline (matmul_use_glu). */
static int glu_on = 1;

bool matmul_use_glu(int on)
{
    const bool was = glu_on > 0;
    glu_on = on > 0;
    return was;
}

/* The fused kernel for wtype at n_tok tokens, or NULL. */
static gemm_many_glu_fn glu_kernel(uint32_t wtype, int64_t n_tok)
{
    if (!glu_on || wtype >= INFER_TYPE_COUNT || n_tok < kernels_many_min(&kern, wtype) ||
        !kern.types[wtype].gemm_many)
        return NULL;
    return kern.types[wtype].gemm_many_glu;
}

int matmul_glu(float *h, const void *wg, const void *wu, uint32_t wtype, const float *x, int64_t n_in, int64_t n_out,
               int64_t n_tok, enum glu_act act, bool *done)
{
    uint32_t at;
    size_t w_row, act_row;
    *done = false;
    int st = matmul_check(wtype, n_in, n_out, n_tok, wg, &at, &w_row, &act_row);
    if (st)
        return st;
    const gemm_many_glu_fn glu = glu_kernel(wtype, n_tok);
    if (!glu || n_out == 0)
        return INFER_OK;
    if (!h || !wg || !wu || !x)
        return infer_error(INFER_ERR_INVALID, "matmul: NULL argument");
    if ((uintptr_t)wu % type_align(wtype) != 0)
        return infer_error(INFER_ERR_INVALID, "matmul: weights at a misaligned address");
    st = mm_quantized(h, wg, wu, glu, act, wtype, x, n_in, n_out, n_tok, w_row, act_row);
    *done = st == INFER_OK;
    return st;
}

/* matmul_check of a job, and its row range [o0, o1) inside [0, n_out]. */
static int rows_check(const struct matmul_q_job *j, int64_t o0, int64_t o1, size_t *w_row, size_t *act_row)
{
    uint32_t at;
    const int st = matmul_check(j->wtype, j->n_in, j->n_out, j->n_tok, j->w, &at, w_row, act_row);
    if (st)
        return st;
    if (o0 < 0 || o1 > j->n_out || o0 > o1)
        return infer_error(INFER_ERR_INVALID, "matmul: rows [%lld, %lld) outside [0, %lld)", (long long)o0,
                           (long long)o1, (long long)j->n_out);
    return INFER_OK;
}

/* The struct mm of a checked job (row sizes from rows_check), with
 * gemm_many from the type's crossover on. */
static struct mm mm_of_job(const struct matmul_q_job *j, size_t w_row, size_t act_row)
{
    return (struct mm){
        .w = j->w, .a = j->xq, .y = j->y, .n_in = j->n_in, .n_out = j->n_out, .n_tok = j->n_tok, .w_row = w_row,
        .a_row = act_row, .dot = kern.types[j->wtype].vec_dot, .gemm = kern.types[j->wtype].gemm,
        .many = j->n_tok >= kernels_many_min(&kern, j->wtype) ? kern.types[j->wtype].gemm_many : NULL,
    };
}

/* Rows [o0, o1) of a checked job (row sizes from rows_check) into
 * y[t * ys + o - o0]: the range as a matrix of its own, its first row at w
 * and its outputs ys apart (mm_rows and gemm_many use n_out only as the
 * stride), so the tiles start at the same rows and give the same bits. */
static void rows_to(const struct matmul_q_job *j, int64_t o0, int64_t o1, float *y, size_t ys, size_t w_row,
                    size_t act_row)
{
    struct mm m = mm_of_job(j, w_row, act_row);
    const int64_t n = o1 - o0;
    m.w += (size_t)o0 * w_row;
    m.y = y;
    m.n_out = (int64_t)ys;
    if (m.n_tok == 1) { /* GEMV: one sweep */
        mm_rows(&m, 0, n, 0, 1);
        return;
    }
    if (m.many) {
        for (int64_t t0 = 0; t0 < m.n_tok; t0 += MATMUL_MANY_TOK) {
            const int64_t t1 = t0 + MATMUL_MANY_TOK < m.n_tok ? t0 + MATMUL_MANY_TOK : m.n_tok;
            if (m.many(m.n_in, m.w, w_row, n, m.a + (size_t)t0 * act_row, act_row, t1 - t0, m.y + t0 * m.n_out,
                       (size_t)m.n_out) != 0)
                mm_rows(&m, 0, n, t0, t1);
        }
        return;
    }
    int64_t rb = MATMUL_BLOCK_BYTES / (int64_t)w_row / GEMM_ROWS * GEMM_ROWS;
    rb = rb < GEMM_ROWS ? GEMM_ROWS : rb;
    for (int64_t r = 0; r < n; r += rb) /* a row block in the L1, the tokens past it */
        mm_rows(&m, r, r + rb < n ? r + rb : n, 0, m.n_tok);
}

int matmul_q_rows(const struct matmul_q_job *j, int64_t o0, int64_t o1)
{
    size_t w_row, act_row;
    const int st = rows_check(j, o0, o1, &w_row, &act_row);
    if (st || o0 == o1 || j->n_tok == 0)
        return st;
    if (!j->y || !j->w || !j->xq)
        return infer_error(INFER_ERR_INVALID, "matmul: NULL argument");
    rows_to(j, o0, o1, j->y + o0, (size_t)j->n_out, w_row, act_row);
    return INFER_OK;
}

int matmul_q_rows_to(const struct matmul_q_job *j, int64_t o0, int64_t o1, float *y, size_t ys)
{
    size_t w_row, act_row;
    const int st = rows_check(j, o0, o1, &w_row, &act_row);
    if (st || o0 == o1 || j->n_tok == 0)
        return st;
    if (!y || !j->w || !j->xq)
        return infer_error(INFER_ERR_INVALID, "matmul: NULL argument");
    if (ys < (size_t)(o1 - o0))
        return infer_error(INFER_ERR_INVALID, "matmul: output stride %zu below the %lld rows", ys,
                           (long long)(o1 - o0));
    rows_to(j, o0, o1, y, ys, w_row, act_row);
    return INFER_OK;
}

int matmul_q_rows_glu(const struct matmul_q_job *j, const void *wu, float *h, size_t hs, int64_t o0, int64_t o1,
                      bool *done)
{
    size_t w_row, act_row;
    *done = false;
    const int st = rows_check(j, o0, o1, &w_row, &act_row);
    if (st)
        return st;
    const gemm_many_glu_fn glu = glu_kernel(j->wtype, j->n_tok);
    if (!glu)
        return INFER_OK;
    if (!h || !wu || !j->w || !j->xq)
        return infer_error(INFER_ERR_INVALID, "matmul: NULL argument");
    const char *wg = (const char *)j->w + (size_t)o0 * w_row, *wup = (const char *)wu + (size_t)o0 * w_row;
    for (int64_t t0 = 0; t0 < j->n_tok; t0 += MATMUL_MANY_TOK) {
        const int64_t t1 = t0 + MATMUL_MANY_TOK < j->n_tok ? t0 + MATMUL_MANY_TOK : j->n_tok;
        /* a chunk that fails leaves its outputs unwritten: only the first can */
        if (glu(j->n_in, wg, wup, w_row, o1 - o0, (const char *)j->xq + (size_t)t0 * act_row, act_row, NULL, t1 - t0,
                h + (size_t)t0 * hs, hs, GLU_SILU) != 0)
            return INFER_OK;
        *done = t1 == j->n_tok;
    }
    return INFER_OK;
}

/* -1: not decided yet (INFER_BLAS is read on first use), 0 off, 1 on. */
static int blas_on = -1;

bool matmul_use_blas(int on)
{
    const bool was = blas_on > 0;
    blas_on = on > 0;
    return was;
}

/* The token count from which weights of this type use OpenBLAS (0: never). */
static int64_t blas_min_tok(uint32_t wtype)
{
    if (blas_on < 0) {
        const char *e = getenv("INFER_BLAS");
        blas_on = e && *e && strcmp(e, "0") != 0;
    }
    if (!blas_on)
        return 0;
    return wtype == GGML_TYPE_F32 ? MATMUL_BLAS_F32_TOK
           : wtype == GGML_TYPE_F16 || wtype == GGML_TYPE_BF16 ? MATMUL_BLAS_F16_TOK
                                                               : 0;
}

/* Rows [o0, o1) of y = x W^T by single-threaded cblas_sgemm calls, F16/BF16
 * rows converted to float a chunk at a time in this thread's scratch.
 * Returns -1 when the scratch cannot be had (nothing written). */
static int blas_rows(float *y, const void *w, uint32_t wtype, const float *x, int64_t n_in, int64_t n_out,
                     int64_t n_tok, size_t w_row, int64_t o0, int64_t o1)
{
    if (o0 >= o1)
        return 0;
    if (wtype == GGML_TYPE_F32) {
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n_tok, (int)(o1 - o0), (int)n_in, 1.0f, x,
                    (int)n_in, (const float *)w + o0 * n_in, (int)n_in, 0.0f, y + o0, (int)n_out);
        return 0;
    }
    int64_t rows = (int64_t)(MATMUL_BLAS_CHUNK / ((size_t)n_in * sizeof(float)));
    rows = rows < 16 ? 16 : rows > o1 - o0 ? o1 - o0 : rows;
    float *buf = kernels_scratch((size_t)rows * (size_t)n_in * sizeof(float));
    if (!buf)
        return -1;
    const to_float_fn conv = kern.types[wtype].to_float;
    for (int64_t c = o0; c < o1; c += rows) {
        const int64_t r = o1 - c < rows ? o1 - c : rows;
        for (int64_t i = 0; i < r; i++)
            conv((const char *)w + (size_t)(c + i) * w_row, buf + i * n_in, n_in);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)n_tok, (int)r, (int)n_in, 1.0f, x, (int)n_in, buf,
                    (int)n_in, 0.0f, y + c, (int)n_out);
    }
    return 0;
}

/* y = x W^T with OpenBLAS.  Its own thread pool would fight the OpenMP
 * threads still spinning after the previous region (4 busy threads on 2
 * cores measured slower than the tiles), so each OpenMP thread instead runs
 * a single-threaded sgemm on its share of the rows. */
static int matmul_blas(float *y, const void *w, uint32_t wtype, const float *x, int64_t n_in, int64_t n_out,
                       int64_t n_tok, size_t w_row)
{
    static int blas_threads_set;
    if (!blas_threads_set) {
        openblas_set_num_threads(1);
        blas_threads_set = 1;
    }
    int failed = 0;
#ifdef _OPENMP
#pragma omp parallel reduction(| : failed)
    {
        const int ith = omp_get_thread_num(), nth = omp_get_num_threads();
        const int64_t o0 = n_out * ith / nth, o1 = n_out * (ith + 1) / nth;
        failed |= blas_rows(y, w, wtype, x, n_in, n_out, n_tok, w_row, o0, o1) != 0;
    }
#else
    failed = blas_rows(y, w, wtype, x, n_in, n_out, n_tok, w_row, 0, n_out) != 0;
#endif
    if (failed)
        return infer_error(INFER_ERR_NOMEM, "matmul: no memory to convert weight rows to float");
    return INFER_OK;
}

int matmul(float *y, const void *w, uint32_t wtype, const float *x, int64_t n_in, int64_t n_out, int64_t n_tok)
{
    uint32_t at;
    size_t w_row, act_row;
    int st = matmul_check(wtype, n_in, n_out, n_tok, w, &at, &w_row, &act_row);
    if (st)
        return st;
    if (n_out == 0 || n_tok == 0)
        return INFER_OK;
    if (!y || !w || !x)
        return infer_error(INFER_ERR_INVALID, "matmul: NULL argument");
    const int64_t blas_min = blas_min_tok(wtype);
    if (blas_min > 0 && n_tok >= blas_min && n_in <= INT32_MAX && n_out <= INT32_MAX && n_tok <= INT32_MAX && kern.types[wtype].to_float
#ifdef _OPENMP
        && !omp_in_parallel()
#endif
    )
        return matmul_blas(y, w, wtype, x, n_in, n_out, n_tok, w_row);
    if (at == GGML_TYPE_F32) /* F32 weights dot the activations as they are */
        return matmul_q(y, w, wtype, x, n_in, n_out, n_tok);
    return mm_quantized(y, w, NULL, NULL, GLU_SILU, wtype, x, n_in, n_out, n_tok, w_row, act_row);
}

/* Validate a dequantization of n elements of `type` at src. */
static int dequant_check(uint32_t type, const void *src, const float *dst, int64_t n, to_float_fn *fn)
{
    const struct ggml_type_traits *t = ggml_type_traits_get(type);
    if (!t || !kern.types[type].to_float)
        return infer_error(INFER_ERR_UNSUPPORTED, "unsupported tensor type %s", type_name(type));
    if (n < 0 || n % t->block_size != 0)
        return infer_error(INFER_ERR_INVALID, "row length %lld is not a multiple of the %s block size %u",
                           (long long)n, t->name, t->block_size);
    if ((n > 0 && (!src || !dst)) || (uintptr_t)src % type_align(type) != 0)
        return infer_error(INFER_ERR_INVALID, "dequantize: NULL or misaligned %s data", t->name);
    *fn = kern.types[type].to_float;
    return INFER_OK;
}

int dequantize_row(uint32_t type, const void *src, float *dst, int64_t n)
{
    to_float_fn fn;
    int st = dequant_check(type, src, dst, n, &fn);
    if (st)
        return st;
    if (n > 0)
        fn(src, dst, n);
    return INFER_OK;
}

int get_rows(float *dst, const void *w, uint32_t type, int64_t n_cols, int64_t n_rows, const int32_t *ids,
             int64_t n_ids)
{
    to_float_fn fn;
    int st = dequant_check(type, w, dst, n_cols, &fn);
    if (st)
        return st;
    if (n_ids < 0 || (n_ids > 0 && !ids))
        return infer_error(INFER_ERR_INVALID, "get_rows: bad id list");
    for (int64_t k = 0; k < n_ids; k++)
        if (ids[k] < 0 || ids[k] >= n_rows)
            return infer_error(INFER_ERR_INVALID, "get_rows: row %d is outside 0..%lld", ids[k],
                               (long long)n_rows - 1);
    const size_t row = ggml_row_size(type, n_cols);
    for (int64_t k = 0; k < n_ids && n_cols > 0; k++)
        fn((const char *)w + (size_t)ids[k] * row, dst + k * n_cols, n_cols);
    return INFER_OK;
}

/* matmul_q_jobs' one loop: the items of each job's plan, job after job. */
struct mm_jobs {
    struct mm_items it[MATMUL_JOBS_MAX];
    int64_t first[MATMUL_JOBS_MAX + 1]; /* job k's items are [first[k], first[k + 1]) */
    int n;
};

static void mm_jobs_run(void *ctx, int64_t i0, int64_t i1)
{
    const struct mm_jobs *r = ctx;
    int k = 0;
    for (int64_t i = i0; i < i1; i++) {
        while (i >= r->first[k + 1])
            k++;
        mm_items_run((void *)&r->it[k], i - r->first[k], i - r->first[k] + 1);
    }
}

int matmul_q_jobs(const struct matmul_q_job *jobs, int n)
{
    if (n < 0 || n > MATMUL_JOBS_MAX)
        return infer_error(INFER_ERR_INVALID, "matmul: %d jobs (at most %d)", n, MATMUL_JOBS_MAX);
    struct mm m[MATMUL_JOBS_MAX];
    void *prep[MATMUL_JOBS_MAX] = {NULL};
    size_t prep_bytes[MATMUL_JOBS_MAX] = {0}, w_row[MATMUL_JOBS_MAX], act_row[MATMUL_JOBS_MAX];
    struct mm_jobs r = {.n = 0};
    double work = 0.0;
    for (int k = 0; k < n; k++) {
        const struct matmul_q_job *j = &jobs[k];
        const int st = rows_check(j, 0, j->n_out, &w_row[k], &act_row[k]);
        if (st)
            return st;
        if (j->n_out > 0 && j->n_tok > 0 && (!j->y || !j->w || !j->xq))
            return infer_error(INFER_ERR_INVALID, "matmul: NULL argument");
    }
    for (int k = 0; k < n; k++) {
        const struct matmul_q_job *j = &jobs[k];
        if (j->n_out == 0 || j->n_tok == 0)
            continue;
        const struct mm mj = mm_of_job(j, w_row[k], act_row[k]);
        if (j->n_tok > GEMM_TOKS || mj.many) {
            /* a batch: its own loops, as matmul_q runs it */
            mm_q_run(j->y, j->w, NULL, NULL, GLU_SILU, j->wtype, j->xq, j->n_in, j->n_out, j->n_tok, w_row[k],
                     act_row[k]);
            continue;
        }
        const int i = r.n++;
        m[i] = mj;
        prep[i] = mm_prep(&m[i], j->wtype, kernels_many_min(&kern, j->wtype), false, &prep_bytes[i]); /* one group */
        work += (double)j->n_in * (double)j->n_out * (double)j->n_tok;
    }
    /* each job planned as mm_run plans it, so every output has mm_q_run's
     * bits; the loop over all of them has one wait for the last thread, not one per job */
    const bool parallel = work >= MATMUL_PARALLEL_MIN;
    const int nth = parallel ? pool_threads() : 1;
    r.first[0] = 0;
    for (int i = 0; i < r.n; i++)
        r.first[i + 1] = r.first[i] + mm_plan(&m[i], m[i].n_out > GEMM_ROWS ? nth : 1, &r.it[i]);
    if (r.n > 0 && parallel) /* also with one thread taking part: the pool may try a second again */
        pool_for(r.first[r.n], 1, mm_jobs_run, &r);
    else if (r.n > 0)
        mm_jobs_run(&r, 0, r.first[r.n]);
    for (int i = 0; i < r.n; i++)
        if (prep[i])
            matmul_act_release(prep[i], prep_bytes[i]);
    return INFER_OK;
}
