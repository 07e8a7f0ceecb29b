/*
 * kv.h - KV state in fixed-size blocks carved from one arena (DESIGN.md
 * decision 4).
 *
 * A block holds `block_tokens` consecutive positions of keys and values for
 * every layer, as F16 (or Q8_0: one row of head_dim / 32 blocks of 34
 * bytes per position; K and V choose separately).  Inside a block the
 * layout is
 *
 *     for each layer: K[n_head_kv][block_tokens][k row], then V likewise
 *
 * so one head's keys for a block are contiguous (what attention streams over).
 * A sequence is a block table: position p lives in block blocks[p / bt] at
 * row p % bt.  Blocks are reference counted so that the prefix cache can
 * attach one physical block to many sequences: a block's count is the number
 * of block tables holding it plus one while the prefix cache (prefix.h)
 * keeps it.  The arena knows nothing of the cache; budgets and eviction are
 * the engine's (engine.c).
 *
 * The arena is reserved once, lazily committed (MAP_NORESERVE for normal and
 * transparent huge pages), so a large capacity costs address space, not
 * memory, until blocks are first written.
 */
#ifndef INFER_KV_H
#define INFER_KV_H

#include "util/common.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum kv_page_mode { KV_PAGES_HUGETLB, KV_PAGES_THP, KV_PAGES_NORMAL };

struct kv_shape {
    int n_layer;
    int n_head_kv;
    int head_dim;
    int block_tokens;
    uint32_t type_k, type_v; /* GGML_TYPE_F16 (also when 0) or GGML_TYPE_Q8_0 */
};

/* Bytes of one position's row of one head for a KV element type (F16 or
 * Q8_0; 0 for anything else, or a head_dim Q8_0 cannot split). */
size_t kv_row_bytes(uint32_t type, int head_dim);
/* Bytes of one block of this shape (0 when the shape is invalid). */
size_t kv_block_bytes(const struct kv_shape *s);

struct kv_arena {
    struct kv_shape s;
    size_t row_k, row_v; /* one position of one head: kv_row_bytes() */
    size_t head_bytes;   /* one head of K in a block: bt * row_k */
    size_t head_bytes_v; /* one head of V in a block: bt * row_v */
    size_t layer_bytes;  /* K and V of one layer in a block */
    size_t block_bytes;
    int32_t n_blocks;
    uint8_t *base;
    size_t map_bytes;
    enum kv_page_mode pages;
    int32_t *refcnt;     /* per block; 0 = free */
    int32_t *free_list;  /* stack of freed block ids (n_free - (n_blocks - n_fresh) of them) */
    int32_t n_free;      /* free blocks: the stack plus the never-used [n_fresh, n_blocks) */
    int32_t n_fresh;     /* blocks [0, n_fresh) have been handed out at least once */
};

/* Reserve an arena of n_blocks blocks.  Memory is committed lazily by the
 * kernel as blocks are first written, and the bookkeeping arrays are only
 * touched as blocks are first used, so a large capacity is cheap.  Blocks
 * are handed out from the front; freed blocks are reused first (warm). */
infer_status kv_arena_init(struct kv_arena *a, const struct kv_shape *s, int32_t n_blocks);
void kv_arena_free(struct kv_arena *a);
const char *kv_page_mode_name(enum kv_page_mode m);

/* A free block with refcount 1, or -1 when the arena is full. */
int32_t kv_block_alloc(struct kv_arena *a);
void kv_block_ref(struct kv_arena *a, int32_t b);
void kv_block_unref(struct kv_arena *a, int32_t b);
/* Give the memory of a free block back to the kernel (madvise DONTNEED of
 * the whole pages inside it; a no-op for explicit huge pages).  Its contents
 * become zeros.  Used when eviction is meant to lower the resident size. */
void kv_block_discard(struct kv_arena *a, int32_t b);
/* Number of freed blocks on the stack (the rest of the free ones are fresh). */
static inline int32_t kv_arena_n_stacked(const struct kv_arena *a) { return a->n_free - (a->n_blocks - a->n_fresh); }
/* Blocks in use (refcount > 0). */
static inline int32_t kv_arena_n_used(const struct kv_arena *a) { return a->n_blocks - a->n_free; }
static inline uint8_t *kv_block_data(const struct kv_arena *a, int32_t b)
{
    return a->base + (size_t)b * a->block_bytes;
}

/* K (or V) rows of one head of one layer in block b: [block_tokens][row]
 * (head_dim F16 values; cast to bytes for Q8_0 rows). */
static inline uint16_t *kv_k(const struct kv_arena *a, int32_t b, int layer, int head)
{
    return (uint16_t *)(a->base + (size_t)b * a->block_bytes + (size_t)layer * a->layer_bytes +
                        (size_t)head * a->head_bytes);
}

static inline uint16_t *kv_v(const struct kv_arena *a, int32_t b, int layer, int head)
{
    return (uint16_t *)(a->base + (size_t)b * a->block_bytes + (size_t)layer * a->layer_bytes +
                        (size_t)a->s.n_head_kv * a->head_bytes + (size_t)head * a->head_bytes_v);
}

/* A sequence: its block table and how many positions hold valid K/V. */
struct kv_seq {
    int32_t *blocks;
    int32_t n_blocks;
    int32_t cap;
    int64_t n_tokens;
};

/* Free blocks kv_seq_reserve(s, a, n_tokens) would take: new blocks, plus
 * one when the block of the next write is shared (copy-on-write). */
int32_t kv_seq_blocks_needed(const struct kv_seq *s, const struct kv_arena *a, int64_t n_tokens);
/* Append block b (its reference is taken here) after the sequence's last
 * block, which must be full: s->n_tokens == s->n_blocks * block_tokens.  The
 * sequence then holds n_tokens + block_tokens positions.  INFER_ERR_NOMEM
 * leaves everything unchanged. */
infer_status kv_seq_attach(struct kv_seq *s, struct kv_arena *a, int32_t b);
/* Make room for positions [0, n_tokens): allocate blocks as needed.  A block
 * shared with another sequence (refcount > 1) that would be written is
 * copied first.  On error (arena full) nothing already stored is changed. */
infer_status kv_seq_reserve(struct kv_seq *s, struct kv_arena *a, int64_t n_tokens);
/* Forget positions >= n_tokens, releasing blocks no longer needed. */
void kv_seq_truncate(struct kv_seq *s, struct kv_arena *a, int64_t n_tokens);
void kv_seq_free(struct kv_seq *s, struct kv_arena *a);

#endif
