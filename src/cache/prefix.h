/*
 * prefix.h - the prefix cache: a trie of full KV blocks keyed by a chained
 * 128-bit hash (DESIGN.md decisions 4-6).
 *
 * A node stands for one full block of a token sequence: block k of a prompt
 * holds the K/V of tokens [k*bt, (k+1)*bt) given everything before them.  Its
 * identity is (parent node, cache salt, its bt tokens); its hash is
 *
 *     h(node) = H(h(parent), tokens, model fingerprint, salt key)
 *     h(parent of a first block) = H(model fingerprint, salt key)   (the root)
 *
 * Nodes live in one hash table (chained buckets); a lookup compares the whole
 * identity, not just the hash, so a collision (forced in tests with
 * hash_bits) costs at most a miss, never someone else's K/V.
 *
 * The cache holds one reference on each node's arena block.  A block whose
 * count is 1 is held by the cache alone (unpinned); above 1 a running
 * sequence uses it (pinned).  Eviction takes unpinned leaves, least recently
 * used first (a node's tick is the last lookup or insert that passed through
 * it; ties go deepest first), so a parent always outlives its children.
 * Evicted nodes are written to the disk tier first when there is one.
 *
 * Not thread-safe: the engine drives it from one thread.
 */
#ifndef INFER_PREFIX_H
#define INFER_PREFIX_H

#include "kv.h"

struct prefix_hash {
    uint64_t lo, hi;
};

static inline bool prefix_hash_eq(struct prefix_hash a, struct prefix_hash b)
{
    return a.lo == b.lo && a.hi == b.hi;
}

struct prefix_node {
    struct prefix_hash h;
    int32_t parent;     /* node index, -1 for a first block */
    int32_t block;      /* arena block holding the K/V; -1 when the node is free */
    int32_t n_children;
    int32_t first_child, next_sibling; /* children list, -1 terminated */
    int32_t next;       /* next node in the bucket (live) or in the free list */
    int32_t depth;      /* block index in the sequence */
    int32_t salt;       /* interned salt id */
    uint64_t tick;      /* last use */
    bool on_disk;       /* the disk tier holds this block */
};

struct disk_tier;

struct prefix_cache {
    struct kv_arena *a;
    int bt;                   /* tokens per block */
    uint8_t fp[16];           /* model fingerprint */
    struct prefix_node *nodes; /* (cap); [0, hw) initialized, touched as used */
    int32_t *tokens;          /* (cap, bt) each node's tokens */
    int32_t cap, hw, n_live, free_head;
    int32_t *buckets;         /* (mask + 1) heads, stored + 1 (0: empty) so that calloc inits */
    uint32_t mask;
    int32_t *heap;            /* (cap) eviction scratch */
    uint64_t tick;
    char **salts;             /* interned salt strings; id 0 is "" */
    struct prefix_hash *salt_key; /* hash of each salt's bytes */
    int32_t n_salts, salts_cap;
    int hash_bits;            /* 128; fewer forces collisions (test hook) */
    bool discard_on_evict;    /* return evicted blocks' memory (kv_block_discard) */
    struct disk_tier *disk;   /* NULL without a cache directory */
    int64_t n_evicted;        /* cumulative */
};

/* A cache over arena a, with room for one node per arena block (so
 * inserting never fails for memory).  fp is the model fingerprint.
 * On error nothing is allocated. */
infer_status prefix_init(struct prefix_cache *c, struct kv_arena *a, const uint8_t fp[16]);
/* Drop every node (releasing its block) and free the cache.  The disk tier
 * is not written here (see prefix_save_all) nor closed. */
void prefix_free(struct prefix_cache *c);

/* Id of a salt string (interned; NULL is ""), or -1 when out of memory. */
int32_t prefix_salt_id(struct prefix_cache *c, const char *salt);
static inline const char *prefix_salt_name(const struct prefix_cache *c, int32_t id) { return c->salts[id]; }

struct prefix_hash prefix_root_hash(const struct prefix_cache *c, int32_t salt);
struct prefix_hash prefix_block_hash(const struct prefix_cache *c, struct prefix_hash parent, int32_t salt,
                                     const int32_t *tokens);

/* The node with exactly this identity, or -1. */
int32_t prefix_find(const struct prefix_cache *c, struct prefix_hash h, int32_t parent, int32_t salt,
                    const int32_t *tokens);

/* Walk the full blocks of tokens[0..n): chain[k] gets the node of block k
 * for the longest cached chain, at most max_blocks long; the nodes are
 * marked used.  Returns the chain length.  *last_hash (may be NULL) gets the
 * hash of the last matched node (the root hash when none), from which a
 * caller can continue in the disk tier. */
int32_t prefix_match(struct prefix_cache *c, int32_t salt, const int32_t *tokens, int64_t n, int32_t max_blocks,
                     int32_t *chain, struct prefix_hash *last_hash);

/* Partial reuse: among the children of `parent` (a live node), the one
 * whose tokens share the longest prefix with tokens[0..n) (n < bt), as
 * long as that prefix is at least one token.  *k gets its length.  The K/V
 * of those first k positions depend only on the tokens up to them, so a
 * sequence may attach the child's block, hold k of its rows, and copy it
 * before writing the rest (copy-on-write).  Returns the node (marked used)
 * or -1. */
int32_t prefix_partial(struct prefix_cache *c, int32_t parent, const int32_t *tokens, int64_t n, int32_t *k);

/* Register block `block` as the child of `parent` (-1: a first block) with
 * these tokens.  When a node with this identity exists it is returned
 * unchanged (its block may differ: the caller decides whether to share it);
 * otherwise a node is created and takes a reference on `block`.  Returns the
 * node, or -1 when parent is not a live node. */
int32_t prefix_insert(struct prefix_cache *c, int32_t parent, int32_t salt, const int32_t *tokens, int32_t block);

/* Evict unpinned leaves, least recently used first, until the arena has
 * want_free free blocks or nothing more is evictable.  Returns the number
 * of nodes evicted. */
int32_t prefix_evict(struct prefix_cache *c, int32_t want_free);

/* Nodes of the chain ending at `node`, root first, into chain (depth + 1
 * entries). */
void prefix_chain(const struct prefix_cache *c, int32_t node, int32_t *chain);
/* Write every live node not yet on disk to the disk tier (clean shutdown).
 * Returns the number written. */
int32_t prefix_save_all(struct prefix_cache *c);

/* Blocks held only by the cache (evictable or not). */
int32_t prefix_n_unpinned(const struct prefix_cache *c);

/* Check every invariant (hash table, child counts, reference counts against
 * the arena, free lists); on failure write the first broken one to why and
 * return false.  seq_refs (may be NULL) is, per block, the number of block
 * tables holding it, so the arena counts can be checked exactly. */
bool prefix_check(const struct prefix_cache *c, const int32_t *seq_refs, char *why, size_t why_len);

/* Model fingerprint: the first 16 bytes of sha256 over a version tag, the
 * file size, the GGUF header (metadata and tensor table: [0, data offset))
 * and the first and last MiB of tensor data.  Cheap (no pass over the
 * weights) and stable across runs; any change of metadata, tensor layout,
 * quantization or size changes it. */
void model_fingerprint(const infer_gguf *g, uint8_t fp[16]);

/* crc32c (Castagnoli), as used by the disk tier and the repacked-weight
 * cache: with SSE4.2's crc32 instruction where the CPU has it, else
 * crc32c_sw (slicing-by-8 tables; the same values, exposed for the tests). */
uint32_t crc32c(uint32_t crc, const void *data, size_t n);
uint32_t crc32c_sw(uint32_t crc, const void *data, size_t n);

/* ---- disk tier (cache_disk.c) ----
 *
 * Directory DIR/infer-kv-<fingerprint hex>/ holds one file per block, named
 * by the block's hash and depth, written to a temporary name and renamed.
 * A file is self-describing: a header (magic, version, model fingerprint,
 * KV shape and type, hash, parent hash, depth, salt, the whole token prefix
 * up to the end of the block, crc32c of the data, crc32c of the header) and
 * the block's K/V bytes.  The index is rebuilt at start from the headers; data is read
 * and checked (crc, and the token prefix against the request's) only on a
 * hit.  Files of another model, other shapes, truncated or failing a
 * checksum are ignored with a warning, never used. */
typedef void (*prefix_log_fn)(void *ctx, const char *msg);

infer_status disk_open(struct disk_tier **out, const char *dir, const uint8_t fp[16], const struct kv_arena *a,
                       uint64_t max_bytes, prefix_log_fn log, void *log_ctx);
void disk_close(struct disk_tier *d);
/* Index entry for the block with hash h at depth `depth` under salt, or -1. */
int32_t disk_find(const struct disk_tier *d, struct prefix_hash h, int32_t depth, const char *salt);
/* Partial reuse from disk (as prefix_partial): the entry at `depth` whose
 * parent hash is ph, under salt, whose block tokens share the longest
 * prefix (>= 1) with tokens[0..n), n < bt; *k gets its length.  -1 if none. */
int32_t disk_partial(const struct disk_tier *d, struct prefix_hash ph, int32_t depth, const char *salt,
                     const int32_t *tokens, int64_t n, int32_t *k);
/* The block's own tokens (bt) of entry e, as indexed. */
const int32_t *disk_block_tokens(const struct disk_tier *d, int32_t e);
/* Read entry e into dst (block_bytes), verifying header, salt, the first
 * n_verify tokens of the stored prefix against prefix[0..n_verify) ((depth
 * + 1) * bt for the whole block, fewer for a partial reuse) and the data
 * checksum.  On corruption the entry is dropped and its file deleted, with
 * a warning; a prefix mismatch (a hash collision) is only a miss.  Either
 * way an error is returned and dst may have been written. */
infer_status disk_read(struct disk_tier *d, int32_t e, const int32_t *prefix, int64_t n_verify, const char *salt,
                       void *dst);
/* Write a block (its whole token prefix given, ph its parent's hash) unless
 * an entry with this hash and depth exists.  Keeps the directory under
 * max_bytes by deleting the least recently used files. */
infer_status disk_write(struct disk_tier *d, struct prefix_hash h, struct prefix_hash ph, int32_t depth,
                        const char *salt, const int32_t *prefix, const void *data);

struct disk_stats {
    int64_t reads, writes;          /* blocks */
    uint64_t read_bytes, write_bytes;
    int64_t errors;                 /* files ignored: foreign, truncated, corrupt */
    int64_t write_errors;           /* blocks that could not be written (full disk, I/O error) */
    int64_t n_files;
    uint64_t bytes;                 /* on disk */
    uint64_t max_bytes;
};
void disk_get_stats(const struct disk_tier *d, struct disk_stats *out);
const char *disk_path(const struct disk_tier *d);

#endif
