/*
 * kv.c - the KV block arena and sequence block tables (see kv.h).
 */
#include "kv.h"

#include "../../kernels/quants.h"
#include "../../kernels/types.h"

#include <errno.h>
#include <string.h>
#include <sys/mman.h>

#define HUGE_2M (2u << 20)

const char *kv_page_mode_name(enum kv_page_mode m)
{
    switch (m) {
    case KV_PAGES_HUGETLB: return "hugetlb";
    case KV_PAGES_THP: return "thp";
    case KV_PAGES_NORMAL: return "normal";
    }
    return "?";
}

static bool thp_available(void)
{
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    if (!f)
        return false;
    char buf[128] = "";
    bool ok = fgets(buf, sizeof(buf), f) && (strstr(buf, "[always]") || strstr(buf, "[madvise]"));
    fclose(f);
    return ok;
}

size_t kv_row_bytes(uint32_t type, int head_dim)
{
    if (head_dim <= 0)
        return 0;
    if (type == 0 || type == GGML_TYPE_F16)
        return (size_t)head_dim * sizeof(uint16_t);
    if (type == GGML_TYPE_Q8_0 && head_dim % 32 == 0)
        return (size_t)(head_dim / 32) * sizeof(block_q8_0);
    return 0;
}

size_t kv_block_bytes(const struct kv_shape *s)
{
    const size_t rk = kv_row_bytes(s->type_k, s->head_dim), rv = kv_row_bytes(s->type_v, s->head_dim);
    if (!rk || !rv || s->n_layer <= 0 || s->n_head_kv <= 0 || s->block_tokens <= 0)
        return 0;
    return (size_t)s->n_layer * (size_t)s->n_head_kv * (size_t)s->block_tokens * (rk + rv);
}

infer_status kv_arena_init(struct kv_arena *a, const struct kv_shape *s, int32_t n_blocks)
{
    memset(a, 0, sizeof(*a));
    if (s->n_layer <= 0 || s->n_head_kv <= 0 || s->head_dim <= 0 || s->block_tokens <= 0 || n_blocks <= 0)
        return infer_error(INFER_ERR_INVALID, "bad KV arena shape");
    a->s = *s;
    a->s.type_k = s->type_k ? s->type_k : GGML_TYPE_F16;
    a->s.type_v = s->type_v ? s->type_v : GGML_TYPE_F16;
    a->row_k = kv_row_bytes(a->s.type_k, s->head_dim);
    a->row_v = kv_row_bytes(a->s.type_v, s->head_dim);
    if (!a->row_k || !a->row_v)
        return infer_error(INFER_ERR_INVALID, "KV cache type: only f16 and q8_0 (q8_0 needs a head size divisible "
                                              "by 32; this model's is %d)", s->head_dim);
    a->head_bytes = (size_t)s->block_tokens * a->row_k;
    a->head_bytes_v = (size_t)s->block_tokens * a->row_v;
    a->layer_bytes = (size_t)s->n_head_kv * (a->head_bytes + a->head_bytes_v);
    a->block_bytes = (size_t)s->n_layer * a->layer_bytes;
    uint64_t total;
    if (!ck_mul(a->block_bytes, (uint64_t)n_blocks, &total) || total > ((uint64_t)1 << 46))
        return infer_error(INFER_ERR_NOMEM, "KV arena of %d blocks is too large", n_blocks);
    a->map_bytes = ((size_t)total + HUGE_2M - 1) / HUGE_2M * HUGE_2M;
    /* Explicit huge pages are reserved at mmap time (no MAP_NORESERVE: with it
     * the map succeeds and the first write past the pool faults with SIGBUS). */
    void *p = mmap(NULL, a->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_HUGETLB,
                   -1, 0);
    a->pages = KV_PAGES_HUGETLB;
    if (p == MAP_FAILED) {
        p = mmap(NULL, a->map_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
            return infer_error(INFER_ERR_NOMEM, "cannot map a %zu-byte KV arena: %s", a->map_bytes, strerror(errno));
        a->pages = thp_available() && madvise(p, a->map_bytes, MADV_HUGEPAGE) == 0 ? KV_PAGES_THP : KV_PAGES_NORMAL;
    }
    a->base = p;
    a->n_blocks = n_blocks;
    a->refcnt = calloc((size_t)n_blocks, sizeof(int32_t));
    a->free_list = malloc((size_t)n_blocks * sizeof(int32_t));
    if (!a->refcnt || !a->free_list) {
        kv_arena_free(a);
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    }
    a->n_free = n_blocks;
    a->n_fresh = 0;
    return INFER_OK;
}

void kv_arena_free(struct kv_arena *a)
{
    if (a->base)
        munmap(a->base, a->map_bytes);
    free(a->refcnt);
    free(a->free_list);
    memset(a, 0, sizeof(*a));
}

int32_t kv_block_alloc(struct kv_arena *a)
{
    if (a->n_free == 0)
        return -1;
    int32_t stacked = kv_arena_n_stacked(a);
    int32_t b = stacked > 0 ? a->free_list[stacked - 1] : a->n_fresh++;
    a->n_free--;
    INFER_DCHECK(a->refcnt[b] == 0);
    a->refcnt[b] = 1;
    return b;
}

void kv_block_ref(struct kv_arena *a, int32_t b)
{
    INFER_DCHECK(b >= 0 && b < a->n_blocks && a->refcnt[b] > 0);
    a->refcnt[b]++;
}

void kv_block_unref(struct kv_arena *a, int32_t b)
{
    INFER_DCHECK(b >= 0 && b < a->n_blocks && a->refcnt[b] > 0);
    if (--a->refcnt[b] == 0) {
        a->free_list[kv_arena_n_stacked(a)] = b;
        a->n_free++;
    }
}

void kv_block_discard(struct kv_arena *a, int32_t b)
{
    INFER_DCHECK(b >= 0 && b < a->n_blocks && a->refcnt[b] == 0);
    if (a->pages == KV_PAGES_HUGETLB)
        return;
    const uintptr_t page = 4096;
    uintptr_t lo = (uintptr_t)kv_block_data(a, b), hi = lo + a->block_bytes;
    lo = (lo + page - 1) & ~(page - 1);
    hi &= ~(page - 1);
    if (hi > lo)
        madvise((void *)lo, hi - lo, MADV_DONTNEED);
}

/* Room in the block table for `need` blocks. */
static infer_status seq_grow(struct kv_seq *s, int64_t need)
{
    if (need > INT32_MAX / 2)
        return infer_error(INFER_ERR_FULL, "sequence too long");
    if (need <= s->cap)
        return INFER_OK;
    int32_t cap = s->cap ? s->cap : 8;
    while (cap < need)
        cap *= 2;
    int32_t *nb = realloc(s->blocks, (size_t)cap * sizeof(int32_t));
    if (!nb)
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    s->blocks = nb;
    s->cap = cap;
    return INFER_OK;
}

int32_t kv_seq_blocks_needed(const struct kv_seq *s, const struct kv_arena *a, int64_t n_tokens)
{
    int64_t bt = a->s.block_tokens;
    int64_t need = (n_tokens + bt - 1) / bt - s->n_blocks;
    if (need < 0)
        need = 0;
    int64_t first_written = s->n_tokens / bt;
    if (n_tokens > s->n_tokens && first_written < s->n_blocks && a->refcnt[s->blocks[first_written]] > 1)
        need++;
    return need > INT32_MAX ? INT32_MAX : (int32_t)need;
}

infer_status kv_seq_attach(struct kv_seq *s, struct kv_arena *a, int32_t b)
{
    INFER_DCHECK(s->n_tokens == (int64_t)s->n_blocks * a->s.block_tokens);
    infer_status st = seq_grow(s, (int64_t)s->n_blocks + 1);
    if (st)
        return st;
    kv_block_ref(a, b);
    s->blocks[s->n_blocks++] = b;
    s->n_tokens += a->s.block_tokens;
    return INFER_OK;
}

infer_status kv_seq_reserve(struct kv_seq *s, struct kv_arena *a, int64_t n_tokens)
{
    int64_t bt = a->s.block_tokens;
    int64_t need = (n_tokens + bt - 1) / bt;
    infer_status st = seq_grow(s, need);
    if (st)
        return st;
    if (n_tokens <= s->n_tokens)
        return INFER_OK;
    /* the block holding position n_tokens (the next write) must be private */
    int64_t first_written = s->n_tokens / bt;
    if (first_written < s->n_blocks && a->refcnt[s->blocks[first_written]] > 1) {
        int32_t b = kv_block_alloc(a);
        if (b < 0)
            return infer_error(INFER_ERR_FULL, "KV cache full: no free block to copy a shared block into");
        memcpy(a->base + (size_t)b * a->block_bytes, a->base + (size_t)s->blocks[first_written] * a->block_bytes,
               a->block_bytes);
        kv_block_unref(a, s->blocks[first_written]);
        s->blocks[first_written] = b;
    }
    int32_t have = s->n_blocks;
    while (s->n_blocks < need) {
        int32_t b = kv_block_alloc(a);
        if (b < 0) {
            while (s->n_blocks > have)
                kv_block_unref(a, s->blocks[--s->n_blocks]);
            return infer_error(INFER_ERR_FULL, "KV cache full: %lld tokens need %lld blocks, %d free",
                               (long long)n_tokens, (long long)need, a->n_free + (s->n_blocks - have));
        }
        s->blocks[s->n_blocks++] = b;
    }
    return INFER_OK;
}

void kv_seq_truncate(struct kv_seq *s, struct kv_arena *a, int64_t n_tokens)
{
    if (n_tokens < 0)
        n_tokens = 0;
    if (n_tokens > s->n_tokens)
        return;
    int64_t bt = a->s.block_tokens;
    int32_t keep = (int32_t)((n_tokens + bt - 1) / bt);
    while (s->n_blocks > keep)
        kv_block_unref(a, s->blocks[--s->n_blocks]);
    s->n_tokens = n_tokens;
}

void kv_seq_free(struct kv_seq *s, struct kv_arena *a)
{
    kv_seq_truncate(s, a, 0);
    free(s->blocks);
    memset(s, 0, sizeof(*s));
}
