/*
 * prefix.c - the prefix trie over KV blocks (see prefix.h): the chained
 * 128-bit block hash, the node table, lookups, registration, LRU-leaf
 * eviction, the model fingerprint and crc32c.
 */
#include "prefix.h"

#include "model/gguf.h"
#include "../../kernels/cpu.h"

#include <string.h>

/* ---- hashing ----
 *
 * A 128-bit hash in the shape of MurmurHash3 x64-128: two 64-bit lanes that
 * absorb 128 bits per round with multiply-rotate mixing and cross-feed each
 * other, then a final avalanche.  Inputs are fixed-layout words, so no
 * byte-order or tail handling is needed beyond the explicit length. */

#define HC1 0x87c37b91114253d5ull
#define HC2 0x4cf5ad432745937full

struct hasher {
    uint64_t h1, h2, len;
};

static inline uint64_t rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }

static inline uint64_t fmix64(uint64_t k)
{
    k ^= k >> 33;
    k *= 0xff51afd7ed558ccdull;
    k ^= k >> 33;
    k *= 0xc4ceb9fe1a85ec53ull;
    k ^= k >> 33;
    return k;
}

static void hasher_init(struct hasher *s, uint64_t seed)
{
    s->h1 = seed ^ 0x243f6a8885a308d3ull;
    s->h2 = seed ^ 0x13198a2e03707344ull;
    s->len = 0;
}

static void hasher_add(struct hasher *s, uint64_t k1, uint64_t k2)
{
    k1 *= HC1;
    k1 = rotl64(k1, 31);
    k1 *= HC2;
    s->h1 ^= k1;
    s->h1 = rotl64(s->h1, 27);
    s->h1 += s->h2;
    s->h1 = s->h1 * 5 + 0x52dce729;
    k2 *= HC2;
    k2 = rotl64(k2, 33);
    k2 *= HC1;
    s->h2 ^= k2;
    s->h2 = rotl64(s->h2, 31);
    s->h2 += s->h1;
    s->h2 = s->h2 * 5 + 0x38495ab5;
    s->len += 16;
}

static struct prefix_hash hasher_final(struct hasher *s)
{
    uint64_t h1 = s->h1 ^ s->len, h2 = s->h2 ^ s->len;
    h1 += h2;
    h2 += h1;
    h1 = fmix64(h1);
    h2 = fmix64(h2);
    h1 += h2;
    h2 += h1;
    return (struct prefix_hash){h1, h2};
}

static void hasher_add_bytes(struct hasher *s, const void *data, size_t n)
{
    const uint8_t *p = data;
    const uint64_t total = n;
    while (n > 0) {
        uint8_t w[16] = {0};
        size_t k = n < 16 ? n : 16;
        memcpy(w, p, k);
        uint64_t a = 0, b = 0;
        for (int i = 0; i < 8; i++) {
            a |= (uint64_t)w[i] << (8 * i);
            b |= (uint64_t)w[8 + i] << (8 * i);
        }
        hasher_add(s, a, b);
        p += k;
        n -= k;
    }
    hasher_add(s, total, 0x5a17);
}

static uint64_t fp_word(const uint8_t fp[16], int i)
{
    uint64_t v = 0;
    for (int b = 0; b < 8; b++)
        v |= (uint64_t)fp[8 * i + b] << (8 * b);
    return v;
}

/* The test hook: keep only the low hash_bits bits. */
static struct prefix_hash hash_mask(const struct prefix_cache *c, struct prefix_hash h)
{
    int bits = c->hash_bits;
    if (bits >= 128)
        return h;
    if (bits <= 64) {
        h.hi = 0;
        h.lo = bits <= 0 ? 0 : bits == 64 ? h.lo : h.lo & ((1ull << bits) - 1);
    } else if (bits < 128) {
        h.hi &= (1ull << (bits - 64)) - 1;
    }
    return h;
}

struct prefix_hash prefix_root_hash(const struct prefix_cache *c, int32_t salt)
{
    struct hasher s;
    hasher_init(&s, 0x726f6f74ull); /* "root" */
    hasher_add(&s, fp_word(c->fp, 0), fp_word(c->fp, 1));
    hasher_add(&s, c->salt_key[salt].lo, c->salt_key[salt].hi);
    hasher_add(&s, (uint64_t)c->bt, 1);
    return hash_mask(c, hasher_final(&s));
}

struct prefix_hash prefix_block_hash(const struct prefix_cache *c, struct prefix_hash parent, int32_t salt,
                                     const int32_t *tokens)
{
    struct hasher s;
    hasher_init(&s, 0x626c6f636bull); /* "block" */
    hasher_add(&s, parent.lo, parent.hi);
    hasher_add(&s, fp_word(c->fp, 0), fp_word(c->fp, 1));
    hasher_add(&s, c->salt_key[salt].lo, c->salt_key[salt].hi);
    int i = 0;
    for (; i + 4 <= c->bt; i += 4)
        hasher_add(&s, (uint64_t)(uint32_t)tokens[i] | (uint64_t)(uint32_t)tokens[i + 1] << 32,
                   (uint64_t)(uint32_t)tokens[i + 2] | (uint64_t)(uint32_t)tokens[i + 3] << 32);
    for (; i < c->bt; i++)
        hasher_add(&s, (uint64_t)(uint32_t)tokens[i], (uint64_t)i);
    return hash_mask(c, hasher_final(&s));
}

/* ---- the node table ---- */

infer_status prefix_init(struct prefix_cache *c, struct kv_arena *a, const uint8_t fp[16])
{
    memset(c, 0, sizeof(*c));
    c->a = a;
    c->bt = a->s.block_tokens;
    memcpy(c->fp, fp, 16);
    c->cap = a->n_blocks;
    c->hash_bits = 128;
    uint32_t nb = 16;
    while (nb < (uint32_t)c->cap && nb < (1u << 30))
        nb <<= 1;
    c->mask = nb - 1;
    /* sized for one node per block but touched only as nodes are used (large
     * allocations come from the kernel as untouched zero pages) */
    c->nodes = malloc((size_t)c->cap * sizeof(*c->nodes));
    c->tokens = malloc((size_t)c->cap * (size_t)c->bt * sizeof(int32_t));
    c->heap = malloc((size_t)c->cap * sizeof(int32_t));
    c->buckets = calloc((size_t)nb, sizeof(int32_t));
    if (!c->nodes || !c->tokens || !c->heap || !c->buckets || prefix_salt_id(c, "") != 0) {
        prefix_free(c);
        return infer_error(INFER_ERR_NOMEM, "out of memory for a prefix cache of %d blocks", a->n_blocks);
    }
    c->free_head = -1;
    c->hw = 0;
    return INFER_OK;
}

void prefix_free(struct prefix_cache *c)
{
    if (c->nodes && c->a)
        for (int32_t i = 0; i < c->hw; i++)
            if (c->nodes[i].block >= 0)
                kv_block_unref(c->a, c->nodes[i].block);
    for (int32_t i = 0; i < c->n_salts; i++)
        free(c->salts[i]);
    free(c->salts);
    free(c->salt_key);
    free(c->nodes);
    free(c->tokens);
    free(c->heap);
    free(c->buckets);
    memset(c, 0, sizeof(*c));
}

int32_t prefix_salt_id(struct prefix_cache *c, const char *salt)
{
    if (!salt)
        salt = "";
    for (int32_t i = 0; i < c->n_salts; i++)
        if (!strcmp(c->salts[i], salt))
            return i;
    if (c->n_salts == c->salts_cap) {
        int32_t cap = c->salts_cap ? c->salts_cap * 2 : 8;
        char **ns = realloc(c->salts, (size_t)cap * sizeof(*ns));
        if (!ns)
            return -1;
        c->salts = ns;
        struct prefix_hash *nk = realloc(c->salt_key, (size_t)cap * sizeof(*nk));
        if (!nk)
            return -1;
        c->salt_key = nk;
        c->salts_cap = cap;
    }
    char *dup = strdup(salt);
    if (!dup)
        return -1;
    struct hasher s;
    hasher_init(&s, 0x73616c74ull); /* "salt" */
    hasher_add_bytes(&s, salt, strlen(salt));
    c->salt_key[c->n_salts] = hasher_final(&s);
    c->salts[c->n_salts] = dup;
    return c->n_salts++;
}

static inline const int32_t *node_tokens(const struct prefix_cache *c, int32_t i)
{
    return c->tokens + (size_t)i * c->bt;
}

int32_t prefix_find(const struct prefix_cache *c, struct prefix_hash h, int32_t parent, int32_t salt,
                    const int32_t *tokens)
{
    for (int32_t i = c->buckets[h.lo & c->mask] - 1; i >= 0; i = c->nodes[i].next) {
        const struct prefix_node *n = &c->nodes[i];
        if (prefix_hash_eq(n->h, h) && n->parent == parent && n->salt == salt &&
            !memcmp(node_tokens(c, i), tokens, (size_t)c->bt * sizeof(int32_t)))
            return i;
    }
    return -1;
}

int32_t prefix_match(struct prefix_cache *c, int32_t salt, const int32_t *tokens, int64_t n, int32_t max_blocks,
                     int32_t *chain, struct prefix_hash *last_hash)
{
    struct prefix_hash h = prefix_root_hash(c, salt);
    int32_t parent = -1, k = 0;
    c->tick++;
    while (k < max_blocks && (int64_t)(k + 1) * c->bt <= n) {
        const int32_t *t = tokens + (int64_t)k * c->bt;
        struct prefix_hash hk = prefix_block_hash(c, h, salt, t);
        int32_t node = prefix_find(c, hk, parent, salt, t);
        if (node < 0)
            break;
        c->nodes[node].tick = c->tick;
        chain[k++] = node;
        parent = node;
        h = hk;
    }
    if (last_hash)
        *last_hash = h;
    return k;
}

int32_t prefix_partial(struct prefix_cache *c, int32_t parent, const int32_t *tokens, int64_t n, int32_t *k)
{
    *k = 0;
    if (parent < 0 || parent >= c->hw || c->nodes[parent].block < 0)
        return -1;
    if (n > c->bt - 1)
        n = c->bt - 1;
    int32_t best = -1;
    for (int32_t i = c->nodes[parent].first_child; i >= 0; i = c->nodes[i].next_sibling) {
        const int32_t *t = node_tokens(c, i);
        int32_t j = 0;
        while (j < n && t[j] == tokens[j])
            j++;
        if (j > *k || (j == *k && j > 0 && best >= 0 && c->nodes[i].tick > c->nodes[best].tick)) {
            *k = j;
            best = i;
        }
    }
    if (best >= 0)
        c->nodes[best].tick = ++c->tick;
    return best;
}

int32_t prefix_insert(struct prefix_cache *c, int32_t parent, int32_t salt, const int32_t *tokens, int32_t block)
{
    if (parent >= c->hw || (parent >= 0 && c->nodes[parent].block < 0) || salt < 0 || salt >= c->n_salts)
        return -1;
    struct prefix_hash ph = parent >= 0 ? c->nodes[parent].h : prefix_root_hash(c, salt);
    struct prefix_hash h = prefix_block_hash(c, ph, salt, tokens);
    int32_t node = prefix_find(c, h, parent, salt, tokens);
    c->tick++;
    if (node >= 0) {
        c->nodes[node].tick = c->tick;
        return node;
    }
    /* each live node holds a distinct block and `block` is held by the caller
     * but by no node, so a free node exists */
    INFER_DCHECK(c->free_head >= 0 || c->hw < c->cap);
    if (c->free_head >= 0) {
        node = c->free_head;
        c->free_head = c->nodes[node].next;
    } else if (c->hw < c->cap) {
        node = c->hw++;
    } else {
        return -1;
    }
    struct prefix_node *n = &c->nodes[node];
    n->h = h;
    n->parent = parent;
    n->block = block;
    n->n_children = 0;
    n->first_child = -1;
    n->depth = parent >= 0 ? c->nodes[parent].depth + 1 : 0;
    n->salt = salt;
    n->tick = c->tick;
    n->on_disk = false;
    memcpy(c->tokens + (size_t)node * c->bt, tokens, (size_t)c->bt * sizeof(int32_t));
    uint32_t bi = (uint32_t)(h.lo & c->mask);
    n->next = c->buckets[bi] - 1;
    c->buckets[bi] = node + 1;
    n->next_sibling = -1;
    if (parent >= 0) {
        n->next_sibling = c->nodes[parent].first_child;
        c->nodes[parent].first_child = node;
        c->nodes[parent].n_children++;
    }
    kv_block_ref(c->a, block);
    c->n_live++;
    return node;
}

void prefix_chain(const struct prefix_cache *c, int32_t node, int32_t *chain)
{
    for (int32_t i = node; i >= 0; i = c->nodes[i].parent)
        chain[c->nodes[i].depth] = i;
}

/* The whole token prefix of a node into out ((depth + 1) * bt tokens). */
static void node_prefix(const struct prefix_cache *c, int32_t node, int32_t *out)
{
    for (int32_t i = node; i >= 0; i = c->nodes[i].parent)
        memcpy(out + (size_t)c->nodes[i].depth * c->bt, node_tokens(c, i), (size_t)c->bt * sizeof(int32_t));
}

/* Write a node to the disk tier (best effort: a failure only costs a miss). */
static bool node_save(struct prefix_cache *c, int32_t node, int32_t **buf, size_t *buf_cap)
{
    struct prefix_node *n = &c->nodes[node];
    if (!c->disk || n->on_disk)
        return false;
    size_t need = (size_t)(n->depth + 1) * c->bt;
    if (need > *buf_cap) {
        int32_t *nb = realloc(*buf, need * sizeof(int32_t));
        if (!nb)
            return false;
        *buf = nb;
        *buf_cap = need;
    }
    node_prefix(c, node, *buf);
    struct prefix_hash ph = n->parent >= 0 ? c->nodes[n->parent].h : prefix_root_hash(c, n->salt);
    if (disk_write(c->disk, n->h, ph, n->depth, c->salts[n->salt], *buf, kv_block_data(c->a, n->block)) != INFER_OK)
        return false;
    n->on_disk = true;
    return true;
}

int32_t prefix_save_all(struct prefix_cache *c)
{
    int32_t *buf = NULL, n = 0;
    size_t cap = 0;
    for (int32_t i = 0; i < c->hw; i++)
        if (c->nodes[i].block >= 0 && node_save(c, i, &buf, &cap))
            n++;
    free(buf);
    return n;
}

static void node_unlink(struct prefix_cache *c, int32_t node)
{
    struct prefix_node *n = &c->nodes[node];
    uint32_t bi = (uint32_t)(n->h.lo & c->mask);
    if (c->buckets[bi] - 1 == node) {
        c->buckets[bi] = n->next + 1;
    } else {
        int32_t p = c->buckets[bi] - 1;
        while (c->nodes[p].next != node)
            p = c->nodes[p].next;
        c->nodes[p].next = n->next;
    }
    if (n->parent >= 0) {
        struct prefix_node *p = &c->nodes[n->parent];
        if (p->first_child == node) {
            p->first_child = n->next_sibling;
        } else {
            int32_t q = p->first_child;
            while (c->nodes[q].next_sibling != node)
                q = c->nodes[q].next_sibling;
            c->nodes[q].next_sibling = n->next_sibling;
        }
        p->n_children--;
    }
    int32_t b = n->block;
    n->block = -1;
    n->next = c->free_head;
    c->free_head = node;
    c->n_live--;
    kv_block_unref(c->a, b);
    if (c->discard_on_evict && c->a->refcnt[b] == 0)
        kv_block_discard(c->a, b);
}

/* Eviction order: older tick first, then deeper first. */
static inline bool evict_before(const struct prefix_cache *c, int32_t x, int32_t y)
{
    const struct prefix_node *a = &c->nodes[x], *b = &c->nodes[y];
    return a->tick != b->tick ? a->tick < b->tick : a->depth > b->depth;
}

static void heap_push(struct prefix_cache *c, int32_t *n, int32_t v)
{
    int32_t i = (*n)++;
    while (i > 0) {
        int32_t p = (i - 1) / 2;
        if (!evict_before(c, v, c->heap[p]))
            break;
        c->heap[i] = c->heap[p];
        i = p;
    }
    c->heap[i] = v;
}

static int32_t heap_pop(struct prefix_cache *c, int32_t *n)
{
    int32_t top = c->heap[0], v = c->heap[--(*n)], i = 0;
    for (;;) {
        int32_t l = 2 * i + 1, r = l + 1, m = i;
        int32_t best = v;
        if (l < *n && evict_before(c, c->heap[l], best))
            m = l, best = c->heap[l];
        if (r < *n && evict_before(c, c->heap[r], best))
            m = r;
        if (m == i)
            break;
        c->heap[i] = c->heap[m];
        i = m;
    }
    if (*n > 0)
        c->heap[i] = v;
    return top;
}

static inline bool evictable(const struct prefix_cache *c, int32_t i)
{
    const struct prefix_node *n = &c->nodes[i];
    return n->block >= 0 && n->n_children == 0 && c->a->refcnt[n->block] == 1;
}

int32_t prefix_evict(struct prefix_cache *c, int32_t want_free)
{
    if (c->a->n_free >= want_free)
        return 0;
    int32_t hn = 0, evicted = 0;
    for (int32_t i = 0; i < c->hw; i++)
        if (evictable(c, i))
            heap_push(c, &hn, i);
    int32_t *buf = NULL;
    size_t buf_cap = 0;
    while (hn > 0 && c->a->n_free < want_free) {
        int32_t node = heap_pop(c, &hn);
        int32_t parent = c->nodes[node].parent;
        node_save(c, node, &buf, &buf_cap);
        node_unlink(c, node);
        evicted++;
        if (parent >= 0 && evictable(c, parent))
            heap_push(c, &hn, parent);
    }
    free(buf);
    c->n_evicted += evicted;
    return evicted;
}

int32_t prefix_n_unpinned(const struct prefix_cache *c)
{
    int32_t n = 0;
    for (int32_t i = 0; i < c->hw; i++)
        if (c->nodes[i].block >= 0 && c->a->refcnt[c->nodes[i].block] == 1)
            n++;
    return n;
}

#define CHECK(cond, ...)                                                                                      \
    do {                                                                                                      \
        if (!(cond)) {                                                                                        \
            snprintf(why, why_len, __VA_ARGS__);                                                              \
            ok = false;                                                                                       \
            goto out;                                                                                         \
        }                                                                                                     \
    } while (0)

bool prefix_check(const struct prefix_cache *c, const int32_t *seq_refs, char *why, size_t why_len)
{
    const struct kv_arena *a = c->a;
    bool ok = true;
    int32_t *holder = malloc((size_t)a->n_blocks * sizeof(int32_t));
    int32_t *children = calloc((size_t)c->cap, sizeof(int32_t));
    uint8_t *seen = calloc((size_t)(c->cap > a->n_blocks ? c->cap : a->n_blocks), 1);
    CHECK(holder && children && seen, "out of memory");
    for (int32_t b = 0; b < a->n_blocks; b++)
        holder[b] = -1;
    int32_t live = 0;
    CHECK(c->hw >= 0 && c->hw <= c->cap, "node high-water mark %d of %d", c->hw, c->cap);
    for (int32_t i = 0; i < c->hw; i++) {
        const struct prefix_node *n = &c->nodes[i];
        if (n->block < 0)
            continue;
        live++;
        CHECK(n->block < a->n_blocks, "node %d: block %d out of range", i, n->block);
        CHECK(holder[n->block] < 0, "block %d held by nodes %d and %d", n->block, holder[n->block], i);
        holder[n->block] = i;
        CHECK(a->refcnt[n->block] >= 1, "node %d: block %d has refcount %d", i, n->block, a->refcnt[n->block]);
        CHECK(n->salt >= 0 && n->salt < c->n_salts, "node %d: bad salt %d", i, n->salt);
        if (n->parent >= 0) {
            const struct prefix_node *p = &c->nodes[n->parent];
            CHECK(p->block >= 0, "node %d: parent %d is not live", i, n->parent);
            CHECK(n->depth == p->depth + 1, "node %d: depth %d under parent depth %d", i, n->depth, p->depth);
            CHECK(p->salt == n->salt, "node %d: salt differs from its parent's", i);
            children[n->parent]++;
        } else {
            CHECK(n->depth == 0, "node %d: root child at depth %d", i, n->depth);
        }
        struct prefix_hash ph = n->parent >= 0 ? c->nodes[n->parent].h : prefix_root_hash(c, n->salt);
        CHECK(prefix_hash_eq(n->h, prefix_block_hash(c, ph, n->salt, node_tokens(c, i))), "node %d: stale hash", i);
        CHECK(prefix_find(c, n->h, n->parent, n->salt, node_tokens(c, i)) == i, "node %d: not found by lookup", i);
    }
    CHECK(live == c->n_live, "%d live nodes, counter says %d", live, c->n_live);
    for (int32_t i = 0; i < c->hw; i++) {
        if (c->nodes[i].block < 0)
            continue;
        CHECK(children[i] == c->nodes[i].n_children, "node %d: %d children, counter says %d", i, children[i],
              c->nodes[i].n_children);
        int32_t listed = 0;
        for (int32_t k = c->nodes[i].first_child; k >= 0; k = c->nodes[k].next_sibling) {
            CHECK(k < c->hw && c->nodes[k].block >= 0 && c->nodes[k].parent == i, "node %d: bad child %d", i, k);
            CHECK(++listed <= children[i], "node %d: children list too long", i);
        }
        CHECK(listed == children[i], "node %d: %d children listed, %d exist", i, listed, children[i]);
    }
    /* bucket chains hold exactly the live nodes, each in its own bucket */
    int32_t in_buckets = 0;
    for (uint32_t bi = 0; bi <= c->mask; bi++)
        for (int32_t i = c->buckets[bi] - 1; i >= 0; i = c->nodes[i].next) {
            CHECK(i < c->hw && c->nodes[i].block >= 0, "bucket %u holds a free node %d", bi, i);
            CHECK((c->nodes[i].h.lo & c->mask) == bi, "node %d in the wrong bucket", i);
            CHECK(++in_buckets <= c->n_live, "bucket chains loop");
        }
    CHECK(in_buckets == c->n_live, "%d nodes in buckets, %d live", in_buckets, c->n_live);
    int32_t free_nodes = 0;
    for (int32_t i = c->free_head; i >= 0; i = c->nodes[i].next) {
        CHECK(c->nodes[i].block < 0, "free list holds live node %d", i);
        CHECK(i < c->hw && ++free_nodes <= c->hw - c->n_live, "node free list too long or out of range");
    }
    CHECK(free_nodes == c->hw - c->n_live, "node free list has %d, expected %d", free_nodes, c->hw - c->n_live);
    /* arena: free list = blocks with refcount 0; counts match holders */
    memset(seen, 0, (size_t)(c->cap > a->n_blocks ? c->cap : a->n_blocks));
    CHECK(a->n_fresh >= 0 && a->n_fresh <= a->n_blocks && kv_arena_n_stacked(a) >= 0 &&
              kv_arena_n_stacked(a) <= a->n_fresh,
          "arena counts: %d free, %d fresh of %d", a->n_free, a->n_fresh, a->n_blocks);
    for (int32_t k = 0; k < kv_arena_n_stacked(a); k++) {
        int32_t b = a->free_list[k];
        CHECK(b >= 0 && b < a->n_fresh && !seen[b], "arena free list: bad or repeated block %d", b);
        seen[b] = 1;
        CHECK(a->refcnt[b] == 0, "free block %d has refcount %d", b, a->refcnt[b]);
    }
    for (int32_t b = a->n_fresh; b < a->n_blocks; b++) {
        CHECK(a->refcnt[b] == 0, "fresh block %d has refcount %d", b, a->refcnt[b]);
        seen[b] = 1;
    }
    for (int32_t b = 0; b < a->n_blocks; b++) {
        CHECK(seen[b] || a->refcnt[b] > 0, "block %d has refcount 0 but is not free", b);
        if (seq_refs)
            CHECK(a->refcnt[b] == seq_refs[b] + (holder[b] >= 0), "block %d: refcount %d, expected %d + %d", b,
                  a->refcnt[b], seq_refs[b], holder[b] >= 0);
    }
out:
    free(holder);
    free(children);
    free(seen);
    return ok;
}

/* ---- model fingerprint ---- */

void model_fingerprint(const infer_gguf *g, uint8_t fp[16])
{
    sha256_ctx s;
    sha256_init(&s);
    static const char tag[] = "infer-model-fingerprint-v1";
    sha256_update(&s, tag, sizeof(tag));
    uint64_t size = g->size, off = infer_gguf_data_offset(g);
    if (off > size)
        off = size;
    sha256_update(&s, &size, sizeof(size));
    sha256_update(&s, g->base, (size_t)off);
    const uint64_t mib = 1 << 20;
    uint64_t data = size - off;
    uint64_t head = data < mib ? data : mib;
    sha256_update(&s, g->base + off, (size_t)head);
    if (data > head) {
        uint64_t tail = data - head < mib ? data - head : mib;
        sha256_update(&s, g->base + size - tail, (size_t)tail);
    }
    uint8_t out[32];
    sha256_final(&s, out);
    memcpy(fp, out, 16);
}

/* ---- crc32c: slicing-by-8 over tables built on first use ---- */

static uint32_t crc_tab[8][256];
static int crc_ready;

static void crc_init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
        crc_tab[0][i] = c;
    }
    for (uint32_t i = 0; i < 256; i++)
        for (int t = 1; t < 8; t++)
            crc_tab[t][i] = (crc_tab[t - 1][i] >> 8) ^ crc_tab[0][crc_tab[t - 1][i] & 0xff];
    __atomic_store_n(&crc_ready, 1, __ATOMIC_RELEASE);
}

#if defined(__x86_64__)
#include <nmmintrin.h>
/* SSE4.2's crc32 instruction computes the same Castagnoli CRC: ~8 bytes per
 * 3 cycles in one dependency chain, several times the table loop (the
 * repacked-weight cache checks its whole file at every load with it). */
__attribute__((target("sse4.2"))) static uint32_t crc32c_sse42(uint32_t crc, const uint8_t *p, size_t n)
{
    uint64_t c = ~crc;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = _mm_crc32_u64(c, v);
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = _mm_crc32_u8(c32, *p++);
    return ~c32;
}
#elif defined(__aarch64__)
#include <arm_acle.h>
/* ARMv8's CRC32C instructions (Cortex-A72 and A76 have them; the kernel
 * says so in HWCAP_CRC32): 8 bytes per instruction against the table
 * loop's ~1 byte per cycle, at every load of a Pi's repacked-weight cache. */
__attribute__((target("+crc"))) static uint32_t crc32c_armv8(uint32_t crc, const uint8_t *p, size_t n)
{
    uint32_t c = ~crc;
    for (; n >= 8; p += 8, n -= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __crc32cd(c, v);
    }
    while (n--)
        c = __crc32cb(c, *p++);
    return ~c;
}
#endif

uint32_t crc32c(uint32_t crc, const void *data, size_t n)
{
#if defined(__x86_64__)
    if (__builtin_cpu_supports("sse4.2"))
        return crc32c_sse42(crc, data, n);
#elif defined(__aarch64__)
    if (cpu_features_get()->crc32)
        return crc32c_armv8(crc, data, n);
#endif
    return crc32c_sw(crc, data, n);
}

uint32_t crc32c_sw(uint32_t crc, const void *data, size_t n)
{
    if (!__atomic_load_n(&crc_ready, __ATOMIC_ACQUIRE))
        crc_init(); /* idempotent: racing threads write the same tables */
    const uint8_t *p = data;
    crc = ~crc;
    while (n >= 8) {
        uint32_t lo = crc ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
        uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
        crc = crc_tab[7][lo & 0xff] ^ crc_tab[6][(lo >> 8) & 0xff] ^ crc_tab[5][(lo >> 16) & 0xff] ^
              crc_tab[4][lo >> 24] ^ crc_tab[3][hi & 0xff] ^ crc_tab[2][(hi >> 8) & 0xff] ^
              crc_tab[1][(hi >> 16) & 0xff] ^ crc_tab[0][hi >> 24];
        p += 8;
        n -= 8;
    }
    while (n--)
        crc = (crc >> 8) ^ crc_tab[0][(crc ^ *p++) & 0xff];
    return ~crc;
}
