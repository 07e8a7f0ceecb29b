/*
 * test-prefix.c - the prefix cache, the engine and its batched step.
 *
 * Unit tests of the trie over a bare arena (hashing, lookup, reference
 * counts, copy-on-write, eviction order, salts, forced hash collisions, a
 * randomized run checking every invariant after each operation), then
 * engine tests over tiny models written by the test itself (a llama and a
 * gemma3 with sliding-window layers, F32 weights): outputs with and without
 * the cache are identical for prefixes ending inside a block and on a
 * boundary, three sessions stepped together produce what each produces
 * alone, watermarks and a fully pinned arena behave, and the disk tier
 * survives a restart while truncated, corrupted and foreign files are
 * ignored with a warning.
 */
#include "test-common.h"

#include "engine/engine.h"
#include "check-crc32c.h"

#include <dirent.h>
#include <math.h>
#include <sys/stat.h>
#include <unistd.h>

/* ------------------------------------------------------- tiny models */

struct gw {
    uint8_t *p;
    size_t len, cap;
};

static void gw_raw(struct gw *w, const void *d, size_t n)
{
    if (w->len + n > w->cap) {
        size_t cap = w->cap ? w->cap : 4096;
        while (cap < w->len + n)
            cap *= 2;
        w->p = realloc(w->p, cap);
        assert_non_null(w->p);
        w->cap = cap;
    }
    memcpy(w->p + w->len, d, n);
    w->len += n;
}

static void gw_u32(struct gw *w, uint32_t v) { gw_raw(w, &v, 4); }
static void gw_u64(struct gw *w, uint64_t v) { gw_raw(w, &v, 8); }
static void gw_str(struct gw *w, const char *s)
{
    gw_u64(w, strlen(s));
    gw_raw(w, s, strlen(s));
}
static void kv_u32(struct gw *w, const char *k, uint32_t v)
{
    gw_str(w, k);
    gw_u32(w, 4);
    gw_u32(w, v);
}
static void kv_f32(struct gw *w, const char *k, float v)
{
    gw_str(w, k);
    gw_u32(w, 6);
    gw_raw(w, &v, 4);
}
static void kv_str(struct gw *w, const char *k, const char *v)
{
    gw_str(w, k);
    gw_u32(w, 8);
    gw_str(w, v);
}

struct tiny {
    const char *arch;
    int dim, layers, heads, kv_heads, head_dim, ff, vocab, swa;
    uint32_t seed;
};

struct tensor {
    char name[64];
    int64_t ne[2];
    int nd;
    float scale; /* 0: norm weights around 1 */
};

static uint32_t lcg(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

/* Random weights in [-scale, scale]; norms in [0.9, 1.1]. */
static void write_tiny(const char *path, const struct tiny *t)
{
    struct tensor ts[128];
    int n = 0;
    const int q_dim = t->heads * t->head_dim, kv_dim = t->kv_heads * t->head_dim;
    bool gemma = !strcmp(t->arch, "gemma3");
#define T1(nm, a) (ts[n] = (struct tensor){"", {a, 1}, 1, 0.0f}, snprintf(ts[n].name, 64, "%s", nm), n++)
#define T2(nm, a, b, sc) (ts[n] = (struct tensor){"", {a, b}, 2, sc}, snprintf(ts[n].name, 64, "%s", nm), n++)
    T2("token_embd.weight", t->dim, t->vocab, 1.0f);
    T1("output_norm.weight", t->dim);
    T2("output.weight", t->dim, t->vocab, 0.5f);
    for (int l = 0; l < t->layers; l++) {
        char nm[64];
#define L(sfx) (snprintf(nm, sizeof(nm), "blk.%d.%s.weight", l, sfx), nm)
        T1(L("attn_norm"), t->dim);
        T2(L("attn_q"), t->dim, q_dim, 0.4f);
        T2(L("attn_k"), t->dim, kv_dim, 0.4f);
        T2(L("attn_v"), t->dim, kv_dim, 0.4f);
        T2(L("attn_output"), q_dim, t->dim, 0.3f);
        T1(L("ffn_norm"), t->dim);
        T2(L("ffn_gate"), t->dim, t->ff, 0.3f);
        T2(L("ffn_up"), t->dim, t->ff, 0.3f);
        T2(L("ffn_down"), t->ff, t->dim, 0.2f);
        if (gemma) {
            T1(L("attn_q_norm"), t->head_dim);
            T1(L("attn_k_norm"), t->head_dim);
            T1(L("post_attention_norm"), t->dim);
            T1(L("post_ffw_norm"), t->dim);
        }
#undef L
    }
#undef T1
#undef T2
    struct gw w = {0};
    gw_raw(&w, "GGUF", 4);
    gw_u32(&w, 3);
    gw_u64(&w, (uint64_t)n);
    int n_kv = 11 + (gemma ? 2 : 0) + 5;
    gw_u64(&w, (uint64_t)n_kv);
    char k[128];
    kv_str(&w, "general.architecture", t->arch);
#define K(sfx) (snprintf(k, sizeof(k), "%s.%s", t->arch, sfx), k)
    kv_u32(&w, K("embedding_length"), (uint32_t)t->dim);
    kv_u32(&w, K("block_count"), (uint32_t)t->layers);
    kv_u32(&w, K("feed_forward_length"), (uint32_t)t->ff);
    kv_u32(&w, K("attention.head_count"), (uint32_t)t->heads);
    kv_u32(&w, K("attention.head_count_kv"), (uint32_t)t->kv_heads);
    kv_u32(&w, K("context_length"), 1024);
    kv_f32(&w, K("attention.layer_norm_rms_epsilon"), 1e-5f);
    kv_f32(&w, K("rope.freq_base"), 10000.0f);
    kv_u32(&w, K("attention.key_length"), (uint32_t)t->head_dim);
    kv_u32(&w, K("attention.value_length"), (uint32_t)t->head_dim);
    if (gemma) {
        kv_u32(&w, K("attention.sliding_window"), (uint32_t)t->swa);
        kv_u32(&w, K("rope.dimension_count"), (uint32_t)t->head_dim);
    }
#undef K
    kv_str(&w, "tokenizer.ggml.model", "llama");
    gw_str(&w, "tokenizer.ggml.tokens");
    gw_u32(&w, 9);
    gw_u32(&w, 8);
    gw_u64(&w, (uint64_t)t->vocab);
    for (int i = 0; i < t->vocab; i++) {
        char tok[16];
        snprintf(tok, sizeof(tok), i == 0 ? "<unk>" : i == 1 ? "<s>" : i == 2 ? "</s>" : "w%d", i);
        gw_str(&w, tok);
    }
    gw_str(&w, "tokenizer.ggml.token_type");
    gw_u32(&w, 9);
    gw_u32(&w, 5);
    gw_u64(&w, (uint64_t)t->vocab);
    for (int i = 0; i < t->vocab; i++)
        gw_u32(&w, i == 0 ? 2 : i < 3 ? 3 : 1);
    kv_u32(&w, "tokenizer.ggml.bos_token_id", 1);
    kv_u32(&w, "tokenizer.ggml.eos_token_id", 2);
    /* tensor table */
    uint64_t off = 0;
    for (int i = 0; i < n; i++) {
        gw_str(&w, ts[i].name);
        gw_u32(&w, (uint32_t)ts[i].nd);
        for (int d = 0; d < ts[i].nd; d++)
            gw_u64(&w, (uint64_t)ts[i].ne[d]);
        gw_u32(&w, 0); /* F32 */
        gw_u64(&w, off);
        off += (uint64_t)(ts[i].ne[0] * ts[i].ne[1]) * 4;
        off = (off + 31) / 32 * 32;
    }
    while (w.len % 32)
        gw_raw(&w, "", 1);
    uint32_t seed = t->seed;
    for (int i = 0; i < n; i++) {
        int64_t cnt = ts[i].ne[0] * ts[i].ne[1];
        for (int64_t j = 0; j < cnt; j++) {
            float u = (float)lcg(&seed) / 16777216.0f * 2.0f - 1.0f;
            float v = ts[i].scale > 0 ? u * ts[i].scale : 1.0f + 0.1f * u;
            gw_raw(&w, &v, 4);
        }
        while (w.len % 32)
            gw_raw(&w, "", 1);
    }
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(w.p, 1, w.len, f), w.len);
    fclose(f);
    free(w.p);
}

static char tmpdir[256];
static char llama_path[512], gemma_path[512];
static infer_model *llama, *gemma;

static int group_setup(void **state)
{
    (void)state;
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/test-prefix-XXXXXX");
    if (!mkdtemp(tmpdir))
        return -1;
    snprintf(llama_path, sizeof(llama_path), "%s/llama.gguf", tmpdir);
    snprintf(gemma_path, sizeof(gemma_path), "%s/gemma3.gguf", tmpdir);
    struct tiny tl = {"llama", 64, 2, 4, 2, 16, 128, 200, 0, 7};
    struct tiny tg = {"gemma3", 64, 6, 4, 2, 16, 128, 200, 8, 9};
    write_tiny(llama_path, &tl);
    write_tiny(gemma_path, &tg);
    if (infer_model_load(&llama, llama_path, NULL) != INFER_OK ||
        infer_model_load(&gemma, gemma_path, NULL) != INFER_OK) {
        fprintf(stderr, "tiny model: %s\n", infer_last_error());
        return -1;
    }
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    infer_model_free(llama);
    infer_model_free(gemma);
    char cmd[600];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", tmpdir);
    return system(cmd) == 0 ? 0 : -1;
}

/* ------------------------------------------------- trie over a bare arena */

#define BT 4

static void arena_small(struct kv_arena *a, int32_t n_blocks)
{
    struct kv_shape s = {.n_layer = 1, .n_head_kv = 1, .head_dim = 2, .block_tokens = BT};
    assert_int_equal(kv_arena_init(a, &s, n_blocks), INFER_OK);
}

static const uint8_t fp_a[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};

/* Register a chain for tokens[0 .. nb*BT): returns the last node.  Each
 * block's first K value is stamped with a tag so tests can tell blocks apart. */
static int32_t insert_chain(struct prefix_cache *c, int32_t salt, const int32_t *tokens, int nb, int32_t *nodes)
{
    int32_t parent = -1;
    for (int k = 0; k < nb; k++) {
        int32_t b = kv_block_alloc(c->a);
        assert_true(b >= 0);
        kv_k(c->a, b, 0, 0)[0] = (uint16_t)(tokens[k * BT] * 31 + k);
        int32_t node = prefix_insert(c, parent, salt, tokens + k * BT, b);
        assert_true(node >= 0);
        kv_block_unref(c->a, b); /* the cache holds it alone */
        if (nodes)
            nodes[k] = node;
        parent = node;
    }
    return parent;
}

static void check(const struct prefix_cache *c, const int32_t *seq_refs)
{
    char why[256];
    if (!prefix_check(c, seq_refs, why, sizeof(why)))
        fail_msg("invariant broken: %s", why);
}

static void test_trie_basic(void **state)
{
    (void)state;
    struct kv_arena a;
    struct prefix_cache c;
    arena_small(&a, 32);
    assert_int_equal(prefix_init(&c, &a, fp_a), INFER_OK);
    int32_t t1[16], t2[16];
    for (int i = 0; i < 16; i++)
        t1[i] = t2[i] = 100 + i;
    t2[9] = 7; /* diverges inside block 2 */
    int32_t n1[4], n2[4], chain[8];
    insert_chain(&c, 0, t1, 4, n1);
    check(&c, NULL);
    assert_int_equal(c.n_live, 4);
    /* a second chain sharing two blocks: the shared nodes are found, not duplicated */
    for (int k = 0; k < 2; k++)
        assert_int_equal(prefix_find(&c, prefix_block_hash(&c, k ? c.nodes[n1[0]].h : prefix_root_hash(&c, 0), 0,
                                                           t2 + k * BT),
                                     k ? n1[0] : -1, 0, t2 + k * BT),
                         n1[k]);
    int32_t b = kv_block_alloc(&a);
    assert_int_equal(prefix_insert(&c, n1[1], 0, t2 + 2 * BT, b), prefix_insert(&c, n1[1], 0, t2 + 2 * BT, b));
    kv_block_unref(&a, b);
    n2[2] = prefix_find(&c, prefix_block_hash(&c, c.nodes[n1[1]].h, 0, t2 + 8), n1[1], 0, t2 + 8);
    assert_true(n2[2] >= 0 && n2[2] != n1[2]);
    assert_int_equal(c.nodes[n1[1]].n_children, 2);
    check(&c, NULL);
    /* matching: whole chain, a prefix ending inside a block, a divergent prompt */
    assert_int_equal(prefix_match(&c, 0, t1, 16, 4, chain, NULL), 4);
    assert_memory_equal(chain, n1, sizeof(n1));
    assert_int_equal(prefix_match(&c, 0, t1, 15, 4, chain, NULL), 3);
    assert_int_equal(prefix_match(&c, 0, t2, 16, 4, chain, NULL), 3);
    assert_int_equal(chain[2], n2[2]);
    int32_t t3[16];
    memcpy(t3, t1, sizeof(t3));
    t3[0] = 5;
    assert_int_equal(prefix_match(&c, 0, t3, 16, 4, chain, NULL), 0);
    /* the hash chains: equal prefixes hash equal, any change changes it */
    struct prefix_hash r = prefix_root_hash(&c, 0);
    assert_true(prefix_hash_eq(prefix_block_hash(&c, r, 0, t1), c.nodes[n1[0]].h));
    assert_false(prefix_hash_eq(prefix_block_hash(&c, r, 0, t3), c.nodes[n1[0]].h));
    assert_false(prefix_hash_eq(c.nodes[n1[2]].h, c.nodes[n2[2]].h));
    struct prefix_cache c2;
    uint8_t fp_b[16];
    memcpy(fp_b, fp_a, 16);
    fp_b[15] ^= 1;
    struct kv_arena a2;
    arena_small(&a2, 4);
    assert_int_equal(prefix_init(&c2, &a2, fp_b), INFER_OK);
    assert_false(prefix_hash_eq(prefix_root_hash(&c2, 0), r)); /* another model, another chain */
    prefix_free(&c2);
    kv_arena_free(&a2);
    prefix_free(&c);
    assert_int_equal(a.n_free, a.n_blocks); /* every block went back */
    kv_arena_free(&a);
}

static void test_salt_isolation(void **state)
{
    (void)state;
    struct kv_arena a;
    struct prefix_cache c;
    arena_small(&a, 16);
    assert_int_equal(prefix_init(&c, &a, fp_a), INFER_OK);
    int32_t s1 = prefix_salt_id(&c, "tenant-a"), s2 = prefix_salt_id(&c, "tenant-b");
    assert_true(s1 > 0 && s2 > 0 && s1 != s2);
    assert_int_equal(prefix_salt_id(&c, "tenant-a"), s1);
    assert_int_equal(prefix_salt_id(&c, NULL), 0);
    int32_t t[8] = {1, 2, 3, 4, 5, 6, 7, 8}, chain[2];
    insert_chain(&c, s1, t, 2, NULL);
    assert_int_equal(prefix_match(&c, s1, t, 8, 2, chain, NULL), 2);
    assert_int_equal(prefix_match(&c, s2, t, 8, 2, chain, NULL), 0);
    assert_int_equal(prefix_match(&c, 0, t, 8, 2, chain, NULL), 0);
    /* even with every hash forced equal, salts stay apart */
    c.hash_bits = 0;
    prefix_free(&c);
    assert_int_equal(prefix_init(&c, &a, fp_a), INFER_OK);
    c.hash_bits = 0;
    s1 = prefix_salt_id(&c, "tenant-a");
    s2 = prefix_salt_id(&c, "tenant-b");
    insert_chain(&c, s1, t, 2, NULL);
    assert_int_equal(prefix_match(&c, s2, t, 8, 2, chain, NULL), 0);
    assert_int_equal(prefix_match(&c, s1, t, 8, 2, chain, NULL), 2);
    check(&c, NULL);
    prefix_free(&c);
    kv_arena_free(&a);
}

static void test_forced_collisions(void **state)
{
    (void)state;
    struct kv_arena a;
    struct prefix_cache c;
    arena_small(&a, 64);
    assert_int_equal(prefix_init(&c, &a, fp_a), INFER_OK);
    c.hash_bits = 0; /* every block hashes to 0: one bucket, equal hashes */
    int32_t toks[6][12];
    int32_t last[6][3];
    for (int p = 0; p < 6; p++) {
        for (int i = 0; i < 12; i++)
            toks[p][i] = (p % 2 == 0 && i < 4) ? 9 : p * 100 + i; /* even prompts share block 0 */
        insert_chain(&c, 0, toks[p], 3, last[p]);
    }
    check(&c, NULL);
    assert_int_equal(c.n_live, 6 * 3 - 2);
    for (int p = 0; p < 6; p++) {
        int32_t chain[3];
        assert_int_equal(prefix_match(&c, 0, toks[p], 12, 3, chain, NULL), 3);
        for (int k = 0; k < 3; k++) {
            /* the node found holds exactly this prompt's tokens and block */
            assert_memory_equal(c.tokens + (size_t)chain[k] * BT, toks[p] + k * BT, BT * sizeof(int32_t));
            assert_int_equal(chain[k], last[p][k]);
            assert_int_equal(kv_k(&a, c.nodes[chain[k]].block, 0, 0)[0], (uint16_t)(toks[p][k * BT] * 31 + k));
        }
        /* a prompt that differs only in the last token of block 1: a miss there */
        int32_t q[12];
        memcpy(q, toks[p], sizeof(q));
        q[7] = -5;
        assert_int_equal(prefix_match(&c, 0, q, 12, 3, chain, NULL), 1);
    }
    prefix_free(&c);
    kv_arena_free(&a);
}

static void test_copy_on_write(void **state)
{
    (void)state;
    struct kv_arena a;
    arena_small(&a, 8);
    struct kv_seq s1 = {0}, s2 = {0};
    assert_int_equal(kv_seq_reserve(&s1, &a, 6), INFER_OK); /* blocks 0 and 1, the second partly filled */
    s1.n_tokens = 6;
    for (int p = 0; p < 6; p++)
        kv_k(&a, s1.blocks[p / BT], 0, 0)[(p % BT) * 2] = (uint16_t)(1000 + p);
    /* s2 shares both blocks, then writes position 5 (inside the shared block) */
    s2.n_tokens = 0;
    assert_int_equal(kv_seq_attach(&s2, &a, s1.blocks[0]), INFER_OK);
    assert_int_equal(kv_seq_attach(&s2, &a, s1.blocks[1]), INFER_OK);
    kv_seq_truncate(&s2, &a, 5);
    assert_int_equal(a.refcnt[s1.blocks[1]], 2);
    assert_int_equal(kv_seq_blocks_needed(&s2, &a, 6), 1);
    assert_int_equal(kv_seq_reserve(&s2, &a, 6), INFER_OK);
    assert_int_not_equal(s2.blocks[1], s1.blocks[1]);          /* copied */
    assert_int_equal(s2.blocks[0], s1.blocks[0]);              /* the full block still shared */
    assert_int_equal(a.refcnt[s1.blocks[1]], 1);
    assert_int_equal(kv_k(&a, s2.blocks[1], 0, 0)[0], 1004);   /* with the valid rows */
    kv_k(&a, s2.blocks[1], 0, 0)[2] = 7;                       /* s2 writes position 5 */
    assert_int_equal(kv_k(&a, s1.blocks[1], 0, 0)[2], 1005);   /* s1 unchanged */
    /* a private block is written in place */
    assert_int_equal(kv_seq_blocks_needed(&s1, &a, 7), 0);
    /* full arena: reserve fails and changes nothing */
    int32_t used = kv_arena_n_used(&a);
    assert_int_equal(kv_seq_reserve(&s1, &a, 4 * 100), INFER_ERR_FULL);
    assert_int_equal(kv_arena_n_used(&a), used);
    assert_int_equal(s1.n_blocks, 2);
    kv_seq_free(&s1, &a);
    kv_seq_free(&s2, &a);
    assert_int_equal(a.n_free, a.n_blocks);
    kv_arena_free(&a);
}

static void test_eviction_order(void **state)
{
    (void)state;
    struct kv_arena a;
    struct prefix_cache c;
    arena_small(&a, 12);
    assert_int_equal(prefix_init(&c, &a, fp_a), INFER_OK);
    int32_t A[12], B[12], C[8], na[3], nb[3], nc[2], chain[3];
    for (int i = 0; i < 12; i++) {
        A[i] = i;
        B[i] = i < 4 ? i : 50 + i; /* B shares block 0 with A */
    }
    for (int i = 0; i < 8; i++)
        C[i] = 200 + i;
    insert_chain(&c, 0, A, 3, na);
    insert_chain(&c, 0, B, 3, nb); /* re-uses A's block 0 */
    insert_chain(&c, 0, C, 2, nc);
    assert_int_equal(nb[0], na[0]);
    assert_int_equal(c.n_live, 7);
    /* use order: A (oldest), C, then B */
    prefix_match(&c, 0, A, 12, 3, chain, NULL);
    prefix_match(&c, 0, C, 8, 2, chain, NULL);
    prefix_match(&c, 0, B, 12, 3, chain, NULL);
    /* pin C's leaf as a running sequence would */
    struct kv_seq s = {0};
    assert_int_equal(kv_seq_attach(&s, &a, c.nodes[nc[0]].block), INFER_OK);
    assert_int_equal(kv_seq_attach(&s, &a, c.nodes[nc[1]].block), INFER_OK);
    int32_t free0 = a.n_free;
    /* one block: A's leaf goes first (oldest leaf) */
    assert_int_equal(prefix_evict(&c, free0 + 1), 1);
    assert_int_equal(c.nodes[na[2]].block, -1);
    /* two more: A's middle block (now a leaf, oldest), then B's leaf, never
     * the shared root block (B's middle still depends on it) */
    assert_int_equal(prefix_evict(&c, free0 + 3), 2);
    assert_int_equal(c.nodes[na[1]].block, -1);
    assert_int_equal(c.nodes[nb[2]].block, -1);
    assert_true(c.nodes[na[0]].block >= 0);
    check(&c, NULL);
    /* everything evictable: C is pinned and stays */
    prefix_evict(&c, a.n_blocks);
    assert_int_equal(c.n_live, 2);
    assert_true(c.nodes[nc[0]].block >= 0 && c.nodes[nc[1]].block >= 0);
    kv_seq_free(&s, &a);
    assert_int_equal(prefix_evict(&c, a.n_blocks), 2); /* unpinned now: leaf, then parent */
    assert_int_equal(c.n_live, 0);
    assert_int_equal(a.n_free, a.n_blocks);
    assert_int_equal(c.n_evicted, 7);
    prefix_free(&c);
    kv_arena_free(&a);
}

/* Thousands of random inserts, lookups with pinning, releases and
 * evictions; every invariant (and exact reference counts) after each.
 * Run with full hashes and with 3-bit hashes (collisions all the time). */
static void random_ops(int hash_bits, uint32_t rng)
{
    enum { N_BLOCKS = 48, N_SEQ = 5, MAX_NB = 6, OPS = 2500 };
    struct kv_arena a;
    struct prefix_cache c;
    arena_small(&a, N_BLOCKS);
    assert_int_equal(prefix_init(&c, &a, fp_a), INFER_OK);
    c.hash_bits = hash_bits;
    int32_t salts[2] = {0, prefix_salt_id(&c, "x")};
    struct kv_seq seqs[N_SEQ];
    memset(seqs, 0, sizeof(seqs));
    int32_t refs[N_BLOCKS];
    int64_t hits = 0, evicted = 0;
    for (int op = 0; op < OPS; op++) {
        /* prompts from a tiny alphabet so that prefixes are shared often */
        int32_t toks[MAX_NB * BT];
        int nb = 1 + (int)(lcg(&rng) % MAX_NB);
        for (int i = 0; i < nb * BT; i++)
            toks[i] = (int32_t)(lcg(&rng) % (i < 8 ? 2 : 3));
        int32_t salt = salts[lcg(&rng) % 2];
        int kind = (int)(lcg(&rng) % 10);
        if (kind < 4) {
            /* insert a chain, reusing what exists (blocks only for new nodes) */
            int32_t chain[MAX_NB];
            int32_t m = prefix_match(&c, salt, toks, nb * BT, nb, chain, NULL);
            int32_t parent = m ? chain[m - 1] : -1;
            for (int k = m; k < nb; k++) {
                if (a.n_free == 0) {
                    /* the chain being extended is pinned meanwhile, as a sequence's is */
                    if (parent >= 0)
                        kv_block_ref(&a, c.nodes[parent].block);
                    int32_t got = prefix_evict(&c, 1);
                    if (parent >= 0)
                        kv_block_unref(&a, c.nodes[parent].block);
                    evicted += got;
                    if (!got)
                        break;
                }
                int32_t b = kv_block_alloc(&a);
                int32_t node = prefix_insert(&c, parent, salt, toks + k * BT, b);
                assert_true(node >= 0);
                assert_int_equal(c.nodes[node].block, b);
                kv_block_unref(&a, b);
                parent = node;
            }
        } else if (kind < 7) {
            /* a sequence attaches the longest chain (pins it) */
            struct kv_seq *s = &seqs[lcg(&rng) % N_SEQ];
            kv_seq_free(s, &a);
            int32_t chain[MAX_NB];
            int32_t m = prefix_match(&c, salt, toks, nb * BT, nb, chain, NULL);
            hits += m;
            for (int k = 0; k < m; k++) {
                assert_memory_equal(c.tokens + (size_t)chain[k] * BT, toks + k * BT, BT * sizeof(int32_t));
                assert_int_equal(c.nodes[chain[k]].salt, salt);
                assert_int_equal(c.nodes[chain[k]].depth, k);
                assert_int_equal(kv_seq_attach(s, &a, c.nodes[chain[k]].block), INFER_OK);
            }
        } else if (kind < 9) {
            kv_seq_free(&seqs[lcg(&rng) % N_SEQ], &a);
        } else {
            int32_t before = c.n_live;
            int32_t got = prefix_evict(&c, a.n_free + 1 + (int32_t)(lcg(&rng) % 8));
            assert_int_equal(c.n_live, before - got);
            evicted += got;
        }
        memset(refs, 0, sizeof(refs));
        for (int i = 0; i < N_SEQ; i++)
            for (int k = 0; k < seqs[i].n_blocks; k++)
                refs[seqs[i].blocks[k]]++;
        check(&c, refs);
        /* pinned blocks are exactly those a sequence holds */
        for (int32_t i = 0; i < c.hw; i++)
            if (c.nodes[i].block >= 0)
                assert_int_equal(a.refcnt[c.nodes[i].block] > 1, refs[c.nodes[i].block] > 0);
    }
    print_message("random ops, %d-bit hashes: %lld blocks hit, %lld evicted\n", hash_bits, (long long)hits,
                  (long long)evicted);
    assert_true(hits > 100 && evicted > 100);
    for (int i = 0; i < N_SEQ; i++)
        kv_seq_free(&seqs[i], &a);
    prefix_evict(&c, a.n_blocks);
    assert_int_equal(c.n_live, 0);
    prefix_free(&c);
    assert_int_equal(a.n_free, a.n_blocks);
    kv_arena_free(&a);
}

static void test_random_ops(void **state)
{
    (void)state;
    random_ops(128, 12345);
    random_ops(3, 54321);
}

/* ------------------------------------------------------------ engines */

static char warnings[8192];

static void capture(void *ctx, const char *msg)
{
    (void)ctx;
    size_t n = strlen(warnings);
    snprintf(warnings + n, sizeof(warnings) - n, "%s\n", msg);
}

static infer_engine *engine(infer_model *m, int kv_block, int n_batch, uint64_t high_blocks, const char *dir,
                            bool no_cache)
{
    infer_engine_params p;
    infer_engine_params_default(&p);
    p.n_ctx = 256;
    p.n_batch = n_batch;
    p.n_threads = 1;
    p.kv_block = kv_block;
    p.no_prefix_cache = no_cache;
    p.cache_dir = dir;
    p.mem_floor = UINT64_MAX;
    p.log = capture;
    /* block bytes of the tiny models: layers * 2 * kv_heads(2) * head_dim(16) * bt * 2 */
    uint64_t bb = (uint64_t)(m == llama ? 2 : 6) * 2 * 2 * 16 * (uint64_t)kv_block * 2;
    if (high_blocks) {
        p.cache_high = high_blocks * bb;
        p.cache_low = high_blocks * bb / 2;
    }
    infer_engine *e;
    if (infer_engine_new(&e, m, &p) != INFER_OK)
        fail_msg("engine: %s", infer_last_error());
    return e;
}

static int argmax_row(const float *l, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (l[i] > l[b])
            b = i;
    return b;
}

static void prompt(int32_t *t, int n, uint32_t seed)
{
    t[0] = 1;
    for (int i = 1; i < n; i++)
        t[i] = 3 + (int32_t)(lcg(&seed) % 190);
}

/* set_tokens then n_gen greedy steps: tokens into out, max |logit diff|
 * against ref_logits (n_gen + 1 rows, NULL: record into rec). */
static void run_greedy(infer_session *s, const int32_t *t, int n, int n_gen, int32_t *out, float *rec,
                       const float *ref, double *max_diff, int64_t *reused)
{
    int nv = infer_model_n_vocab((infer_model *)s_model(s));
    assert_int_equal(infer_session_set_tokens(s, t, n, reused), INFER_OK);
    for (int k = 0; k <= n_gen; k++) {
        const float *l = infer_session_logits(s);
        assert_non_null(l);
        if (rec)
            memcpy(rec + (size_t)k * nv, l, (size_t)nv * sizeof(float));
        if (ref)
            for (int v = 0; v < nv; v++) {
                double d = fabs((double)l[v] - ref[(size_t)k * nv + v]);
                if (d > *max_diff)
                    *max_diff = d;
            }
        if (k == n_gen)
            break;
        out[k] = argmax_row(l, nv);
        assert_int_equal(infer_session_append(s, &out[k], 1), INFER_OK);
    }
}

/* Greedy outputs and logits with the cache equal those without, for shared
 * prefixes ending inside a block and exactly on a block boundary, from the
 * session's own history and from another session's blocks. */
static void equivalence(infer_model *m, int bt, int n_gen)
{
    enum { N_GEN = 6 };
    if (n_gen > N_GEN)
        n_gen = N_GEN;
    const int nv = infer_model_n_vocab(m);
    int32_t base[80];
    prompt(base, 80, 99);
    /* prompt lengths: boundary, inside, boundary + 1, inside the first block */
    const int lens[] = {4 * bt, 4 * bt + bt / 2, 5 * bt + 1, bt - 1, 6 * bt};
    infer_engine *ref_e = engine(m, bt, 5, 0, NULL, true);
    infer_engine *e = engine(m, bt, 5, 0, NULL, false);
    infer_session *r = test_session(ref_e, NULL);
    infer_session *a = test_session(e, NULL), *b = test_session(e, NULL);
    float *ref = malloc((size_t)(N_GEN + 1) * nv * sizeof(float));
    double max_diff = 0;
    for (size_t li = 0; li < sizeof(lens) / sizeof(lens[0]); li++) {
        int n = lens[li];
        int32_t want[N_GEN], got[N_GEN];
        infer_session_truncate(r, 0);
        run_greedy(r, base, n, n_gen, want, ref, NULL, NULL, NULL);
        /* session a: first the prompt cold or from its own past, then again */
        int64_t reused;
        run_greedy(a, base, n, n_gen, got, NULL, ref, &max_diff, NULL);
        assert_memory_equal(got, want, (size_t)n_gen * sizeof(int32_t));
        /* session b: from the blocks a registered */
        run_greedy(b, base, n, n_gen, got, NULL, ref, &max_diff, &reused);
        assert_memory_equal(got, want, (size_t)n_gen * sizeof(int32_t));
        assert_true(reused >= ((n / bt) * bt < n - 1 ? (n / bt) * bt : n - 1));
        /* and a again, after b moved on (a's own history holds generated tokens) */
        run_greedy(a, base, n, n_gen, got, NULL, ref, &max_diff, NULL);
        assert_memory_equal(got, want, (size_t)n_gen * sizeof(int32_t));
    }
    infer_cache_metrics mt;
    infer_engine_get_metrics(e, &mt);
    assert_true(mt.hits > 0 && mt.hit_tokens > 0);
    print_message("%s bt=%d: max |logit diff| cache vs none %.2g, hit rate %.2f\n", infer_model_arch(m), bt,
                  max_diff, mt.hit_rate);
    assert_true(max_diff <= 1e-4); /* same computation row by row: in fact identical */
    free(ref);
    infer_session_free(r);
    infer_session_free(a);
    infer_session_free(b);
    infer_engine_free(ref_e);
    infer_engine_free(e);
}

static void test_equivalence_llama(void **state)
{
    (void)state;
    equivalence(llama, 4, 6);
    equivalence(llama, 8, 6);
}

static void test_equivalence_gemma(void **state)
{
    (void)state;
    equivalence(gemma, 4, 6); /* sliding window 8 spans blocks */
}

/* The same on real files: the default model and a generated quantized
 * gemma3 (make check builds models/gen), when present. */
static void equivalence_file(const char *path, const char *what)
{
    if (!path || access(path, R_OK) != 0) {
        print_message("%s not available; skipping\n", what);
        skip();
    }
    infer_model *m;
    if (infer_model_load(&m, path, NULL) != INFER_OK)
        fail_msg("%s: %s", path, infer_last_error());
    equivalence(m, 8, 2);
    infer_model_free(m);
}

static void test_equivalence_default(void **state)
{
    (void)state;
    equivalence_file(test_default_model(), "the default model");
}

static void test_equivalence_generated(void **state)
{
    (void)state;
    const char *build = getenv("INFER_BUILDDIR") ? getenv("INFER_BUILDDIR") : ".";
    equivalence_file(test_path(build, "models/gen/gemma3-q8_0.gguf"), "models/gen/gemma3-q8_0.gguf");
}

/* Every family's prefix hits give exactly the recomputed logits, including
 * gemma2's alternate sliding-window layers (window 32 spans blocks of 8),
 * smollm3's NoPE layers, phi3's fused tensors and partial rotary, and the
 * RoPE flavours (Llama 3 factors, YaRN + mistral3's temperature). */
static void test_equivalence_families(void **state)
{
    (void)state;
    static const char *const names[] = {"gemma2-q4_k_m", "smollm3-q4_k_m", "phi4-q4_k_m", "qwen3-q4_k_m",
                                        "granite-q4_k_m", "mistral3-q4_k_m", "llama3-q4_k_m", "qwen3moe-q4_k_m",
                                        "qwen2moe-q4_k_m", "olmoe-q4_k_m", "granitemoe-q4_k_m"};
    const char *build = getenv("INFER_BUILDDIR") ? getenv("INFER_BUILDDIR") : ".";
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        char rel[256];
        snprintf(rel, sizeof(rel), "models/gen/%s.gguf", names[i]);
        const char *path = test_path(build, rel);
        if (access(path, R_OK) != 0)
            fail_msg("%s is missing (make check builds it)", path);
        infer_model *m;
        if (infer_model_load(&m, path, NULL) != INFER_OK)
            fail_msg("%s: %s", path, infer_last_error());
        equivalence(m, 8, 2);
        infer_model_free(m);
    }
}

/* A Q8_0 KV cache (K and V): about 34/64 of the F16 block size, logits
 * close to (and not the same as) the F16 cache's, and prefix reuse still
 * gives exactly the recomputed logits.  A model whose head size Q8_0
 * cannot split (the tiny llama's 16) is refused with a message. */
static void kv_q8_check(infer_model *m)
{
    const int nv = infer_model_n_vocab(m);
    infer_engine_params p;
    infer_engine_params_default(&p);
    p.n_ctx = 256;
    p.n_threads = 1;
    p.mem_floor = UINT64_MAX;
    p.log = capture;
    infer_engine *ef, *eq;
    assert_int_equal(infer_engine_new(&ef, m, &p), INFER_OK);
    p.kv_type_k = p.kv_type_v = INFER_KV_Q8_0;
    assert_int_equal(infer_engine_new(&eq, m, &p), INFER_OK);
    assert_int_equal(eq->arena.block_bytes * 64, ef->arena.block_bytes * 34);
    assert_string_not_equal(infer_engine_fingerprint(eq), infer_engine_fingerprint(ef));
    enum { N = 70 };
    int32_t t[N];
    prompt(t, N, 11);
    infer_session *sf = test_session(ef, NULL), *sq = test_session(eq, NULL), *sq2 = test_session(eq, NULL);
    assert_int_equal(infer_session_set_tokens(sf, t, N, NULL), INFER_OK);
    assert_int_equal(infer_session_set_tokens(sq, t, N, NULL), INFER_OK);
    const float *lf = infer_session_logits(sf), *lq = infer_session_logits(sq);
    double num = 0, den = 0;
    for (int i = 0; i < nv; i++) {
        num += ((double)lf[i] - lq[i]) * ((double)lf[i] - lq[i]);
        den += (double)lf[i] * lf[i];
    }
    const double rel = sqrt(num / den);
    print_message("  q8_0 KV: logits differ from the f16 cache's by %.3g (relative L2)\n", rel);
    assert_true(rel > 0 && rel < 0.05);
    int64_t reused, reused_f;
    infer_session *sf2 = test_session(ef, NULL);
    assert_int_equal(infer_session_set_tokens(sf2, t, N, &reused_f), INFER_OK);
    assert_int_equal(infer_session_set_tokens(sq2, t, N, &reused), INFER_OK);
    assert_true(reused >= 64 && reused == reused_f); /* the two full blocks at least, as with F16 */
    assert_memory_equal(infer_session_logits(sq2), lq, (size_t)nv * sizeof(float));
    infer_session_free(sf2);
    infer_session_free(sf);
    infer_session_free(sq);
    infer_session_free(sq2);
    infer_engine_free(ef);
    infer_engine_free(eq);
}

static void test_kv_q8(void **state)
{
    (void)state;
    infer_engine_params p;
    infer_engine_params_default(&p);
    p.kv_type_k = INFER_KV_Q8_0;
    p.log = capture;
    infer_engine *e;
    assert_int_equal(infer_engine_new(&e, llama, &p), INFER_ERR_INVALID);
    assert_null(e);
    assert_non_null(strstr(infer_last_error(), "divisible by 32"));
    p.kv_type_k = (infer_kv_type)7;
    assert_int_equal(infer_engine_new(&e, llama, &p), INFER_ERR_INVALID);
    infer_kv_type kt;
    assert_true(infer_kv_type_from_name("Q8_0", &kt) && kt == INFER_KV_Q8_0);
    assert_true(infer_kv_type_from_name("f16", &kt) && kt == INFER_KV_F16);
    assert_false(infer_kv_type_from_name("q4_0", &kt));
    const char *build = getenv("INFER_BUILDDIR") ? getenv("INFER_BUILDDIR") : ".";
    const char *path = test_default_model() ? test_default_model() : test_path(build, "models/gen/gemma3-q8_0.gguf");
    infer_model *m;
    if (access(path, R_OK) != 0 || infer_model_load(&m, path, NULL) != INFER_OK) {
        print_message("no model with a head size divisible by 32 (%s); skipping the rest\n", path);
        return;
    }
    kv_q8_check(m);
    infer_model_free(m);
}

/* The whole prompt cached, ending exactly on a block: the last block is
 * shared and partly rewritten (copy-on-write), the cached one stays intact.
 * Likewise for a prompt that leaves the chain inside a cached block. */
static void test_full_hit_cow(void **state)
{
    (void)state;
    const int nv = infer_model_n_vocab(llama);
    int32_t t[32];
    prompt(t, 32, 5);
    infer_engine *e = engine(llama, 8, 64, 0, NULL, false);
    infer_session *a = test_session(e, NULL), *b = test_session(e, NULL);
    assert_int_equal(infer_session_set_tokens(a, t, 32, NULL), INFER_OK);
    float *la = malloc((size_t)nv * sizeof(float));
    memcpy(la, infer_session_logits(a), (size_t)nv * sizeof(float));
    int64_t reused;
    assert_int_equal(infer_session_set_tokens(b, t, 32, &reused), INFER_OK);
    assert_int_equal(reused, 31);
    assert_memory_equal(infer_session_logits(b), la, (size_t)nv * sizeof(float));
    /* both running sessions hold the same physical blocks; b's last block was
     * copied (to recompute the last token), then deduplicated back once full */
    for (int k = 0; k < 4; k++)
        assert_int_equal(b->seq.blocks[k], a->seq.blocks[k]);
    /* b continues: its new block is private; a's blocks are untouched */
    int32_t x = 17;
    assert_int_equal(infer_session_append(b, &x, 1), INFER_OK);
    assert_int_not_equal(b->seq.blocks[4], a->seq.blocks[3]);
    assert_int_equal(infer_session_set_tokens(a, t, 32, &reused), INFER_OK);
    assert_memory_equal(infer_session_logits(a), la, (size_t)nv * sizeof(float));
    /* a prompt that leaves the cached chain 3 tokens into block 2: those 3
     * rows of a's block 2 are reused (shared, then copied on b's first write) */
    int32_t u[24];
    memcpy(u, t, 19 * sizeof(int32_t));
    for (int i = 19; i < 24; i++)
        u[i] = 150 + i;
    infer_session *c = test_session(e, NULL);
    infer_cache_metrics m0, m1;
    infer_engine_get_metrics(e, &m0);
    assert_int_equal(infer_session_set_tokens(c, u, 24, &reused), INFER_OK);
    assert_int_equal(reused, 19);
    infer_engine_get_metrics(e, &m1);
    assert_int_equal(m1.hit_tokens - m0.hit_tokens, 19);
    assert_int_not_equal(c->seq.blocks[2], a->seq.blocks[2]); /* copied before the write */
    infer_engine *ref_e = engine(llama, 8, 64, 0, NULL, true);
    infer_session *r = test_session(ref_e, NULL);
    assert_int_equal(infer_session_set_tokens(r, u, 24, NULL), INFER_OK);
    assert_memory_equal(infer_session_logits(c), infer_session_logits(r), (size_t)nv * sizeof(float));
    infer_session_free(c);
    assert_int_equal(infer_session_set_tokens(a, t, 32, &reused), INFER_OK);
    assert_memory_equal(infer_session_logits(a), la, (size_t)nv * sizeof(float));
    char why[256];
    assert_true(prefix_check(&e->pc, NULL, why, sizeof(why)));
    free(la);
    infer_session_free(r);
    infer_engine_free(ref_e);
    infer_session_free(a);
    infer_session_free(b);
    infer_engine_free(e);
}

/* Three sessions stepped together (prefill chunks mixed with decode, two of
 * them sharing a prefix) produce the tokens each produces alone. */
static void step_batched(infer_model *m)
{
    enum { N = 3, N_GEN = 8 };
    const int nv = infer_model_n_vocab(m);
    int32_t p[N][40];
    int len[N] = {37, 29, 12};
    prompt(p[0], 40, 1);
    prompt(p[1], 40, 1); /* shares 20 tokens with p[0] */
    for (int i = 20; i < 40; i++)
        p[1][i] = 3 + (i * 7) % 150;
    prompt(p[2], 40, 3);
    int32_t alone[N][N_GEN];
    for (int i = 0; i < N; i++) {
        infer_engine *e = engine(m, 4, 7, 0, NULL, true);
        infer_session *s = test_session(e, NULL);
        run_greedy(s, p[i], len[i], N_GEN - 1, alone[i], NULL, NULL, NULL, NULL);
        alone[i][N_GEN - 1] = argmax_row(infer_session_logits(s), nv);
        infer_session_free(s);
        infer_engine_free(e);
    }
    infer_engine *e = engine(m, 4, 7, 0, NULL, false);
    infer_session *ss[N];
    int got[N] = {0};
    int32_t out[N][N_GEN];
    for (int i = 0; i < N; i++) {
        ss[i] = test_session(e, NULL);
        assert_int_equal(infer_session_prepare(ss[i], p[i], len[i], NULL), INFER_OK);
    }
    int steps = 0, mixed = 0;
    for (;;) {
        infer_session *active[N];
        int na = 0, decoding = 0, prefilling = 0;
        for (int i = 0; i < N; i++)
            if (got[i] < N_GEN) {
                active[na++] = ss[i];
                decoding += infer_session_n_pending(ss[i]) == 1;
                prefilling += infer_session_n_pending(ss[i]) > 1;
            }
        if (na == 0)
            break;
        mixed += decoding > 0 && prefilling > 0;
        infer_status st[N];
        int64_t nt;
        assert_int_equal(infer_engine_step(e, active, na, st, &nt), INFER_OK);
        assert_true(nt > 0 && nt <= 7);
        steps++;
        for (int i = 0; i < N; i++) {
            if (got[i] >= N_GEN || infer_session_n_pending(ss[i]) > 0)
                continue;
            const float *l = infer_session_logits(ss[i]);
            assert_non_null(l);
            out[i][got[i]] = argmax_row(l, nv);
            if (++got[i] < N_GEN)
                assert_int_equal(infer_session_push(ss[i], &out[i][got[i] - 1], 1), INFER_OK);
        }
    }
    print_message("3 sessions: %d steps, %d mixing prefill and decode\n", steps, mixed);
    assert_true(mixed > 0);
    for (int i = 0; i < N; i++)
        assert_memory_equal(out[i], alone[i], sizeof(alone[i]));
    /* a session listed twice or from another engine is refused */
    infer_session *dup[2] = {ss[0], ss[0]};
    assert_int_equal(infer_engine_step(e, dup, 2, NULL, NULL), INFER_ERR_INVALID);
    infer_engine *e2 = engine(m, 4, 7, 0, NULL, false);
    assert_int_equal(infer_engine_step(e2, ss, 1, NULL, NULL), INFER_ERR_INVALID);
    infer_engine_free(e2);
    for (int i = 0; i < N; i++)
        infer_session_free(ss[i]);
    infer_engine_free(e);
}

/* Continuous batching: several sessions in one step give each the tokens it
 * gets alone (the default model, and a MoE model, whose sessions route their
 * tokens to experts independently inside one grouped expert pass). */
static void test_step_batched(void **state)
{
    (void)state;
    step_batched(gemma);
    const char *build = getenv("INFER_BUILDDIR") ? getenv("INFER_BUILDDIR") : ".";
    const char *path = test_path(build, "models/gen/qwen3moe-q4_k_m.gguf");
    infer_model *moe;
    if (infer_model_load(&moe, path, NULL) != INFER_OK)
        fail_msg("%s: %s", path, infer_last_error());
    step_batched(moe);
    infer_model_free(moe);
}

/* Blocks completed while decoding are registered: a conversation's next
 * turn reuses its own history from another session too. */
static void test_decode_registers(void **state)
{
    (void)state;
    infer_engine *e = engine(llama, 4, 16, 0, NULL, false);
    infer_session *a = test_session(e, NULL);
    int32_t t[64];
    prompt(t, 10, 8);
    assert_int_equal(infer_session_set_tokens(a, t, 10, NULL), INFER_OK);
    for (int k = 10; k < 30; k++) {
        t[k] = argmax_row(infer_session_logits(a), infer_model_n_vocab(llama));
        assert_int_equal(infer_session_append(a, &t[k], 1), INFER_OK);
    }
    t[30] = 5;
    t[31] = 6;
    infer_session *b = test_session(e, NULL);
    int64_t reused;
    assert_int_equal(infer_session_set_tokens(b, t, 32, &reused), INFER_OK);
    assert_int_equal(reused, 28); /* 7 full blocks of history */
    infer_session_free(a);
    infer_session_free(b);
    infer_engine_free(e);
}

static void test_salt_engine(void **state)
{
    (void)state;
    infer_engine *e = engine(llama, 4, 16, 0, NULL, false);
    infer_session *a = test_session(e, "alice"), *b = test_session(e, "bob"), *a2 = test_session(e, "alice");
    int32_t t[24];
    prompt(t, 24, 4);
    int64_t reused;
    assert_int_equal(infer_session_set_tokens(a, t, 24, &reused), INFER_OK);
    assert_int_equal(infer_session_set_tokens(b, t, 24, &reused), INFER_OK);
    assert_int_equal(reused, 0);
    assert_int_equal(infer_session_set_tokens(a2, t, 24, &reused), INFER_OK);
    assert_int_equal(reused, 23);
    /* changing a session's salt forgets even its own history */
    assert_int_equal(infer_session_set_salt(a, "bob2"), INFER_OK);
    assert_int_equal(infer_session_set_tokens(a, t, 24, &reused), INFER_OK);
    assert_int_equal(reused, 0);
    infer_session_free(a);
    infer_session_free(b);
    infer_session_free(a2);
    infer_engine_free(e);
}

/* Crossing the high mark evicts down to the low mark, LRU first; a fully
 * pinned arena fails a new request cleanly and the others go on. */
static void test_watermarks_and_full(void **state)
{
    (void)state;
    const int nv = infer_model_n_vocab(llama);
    /* n_ctx 256 / bt 8 = 33 blocks minimum; high 40, low 20 */
    infer_engine *e = engine(llama, 8, 32, 40, NULL, false);
    infer_cache_metrics mt;
    infer_engine_get_metrics(e, &mt);
    assert_int_equal(mt.kv_bytes_capacity, 40 * mt.block_bytes);
    assert_int_equal(mt.cache_low, 20 * mt.block_bytes);
    infer_session *s = test_session(e, NULL);
    int32_t t[64];
    /* 6 prompts of 8 blocks each, one after the other: 48 blocks > 40 */
    for (int i = 0; i < 6; i++) {
        prompt(t, 64, 100 + i);
        assert_int_equal(infer_session_set_tokens(s, t, 64, NULL), INFER_OK);
        infer_engine_get_metrics(e, &mt);
        assert_true(mt.kv_bytes_in_use <= 40 * mt.block_bytes);
    }
    infer_engine_get_metrics(e, &mt);
    assert_true(mt.evictions > 0);
    /* the 6th prompt crossed the high mark (40): eviction went down to the low
     * mark (20), then the prompt's 8 blocks were taken (evicting just enough
     * would have left 40 in use) */
    assert_true(mt.kv_bytes_in_use <= (20 + 8) * mt.block_bytes);
    print_message("watermarks: %lld evictions, %llu of %llu bytes in use\n", (long long)mt.evictions,
                  (unsigned long long)mt.kv_bytes_in_use, (unsigned long long)mt.kv_bytes_capacity);
    /* the most recent prompt survived, the oldest did not */
    int64_t reused;
    prompt(t, 64, 105);
    assert_int_equal(infer_session_prepare(s, t, 64, &reused), INFER_OK);
    assert_int_equal(reused, 63);
    infer_session_truncate(s, 0);
    infer_session *s2 = test_session(e, NULL);
    prompt(t, 64, 100);
    assert_int_equal(infer_session_prepare(s2, t, 64, &reused), INFER_OK);
    assert_int_equal(reused, 0);
    infer_session_truncate(s2, 0);

    /* pin: two sessions hold 33 + 4 blocks of 40; a third request cannot fit */
    infer_session *big = test_session(e, NULL), *small = test_session(e, NULL), *late = test_session(e, NULL);
    int32_t tb[256], ts[30], tl[64];
    prompt(tb, 256, 7);
    prompt(ts, 30, 8);
    prompt(tl, 64, 9);
    assert_int_equal(infer_session_set_tokens(big, tb, 255, NULL), INFER_OK);
    assert_int_equal(infer_session_set_tokens(small, ts, 29, NULL), INFER_OK);
    infer_status st = infer_session_set_tokens(late, tl, 64, NULL);
    assert_int_equal(st, INFER_ERR_FULL);
    assert_non_null(strstr(infer_last_error(), "KV cache full"));
    assert_int_equal(infer_session_n_pending(late), 0);
    /* stepped together: late waits (FULL, queue kept), small advances */
    int32_t x = argmax_row(infer_session_logits(small), nv);
    assert_int_equal(infer_session_prepare(late, tl, 64, NULL), INFER_OK);
    assert_int_equal(infer_session_push(small, &x, 1), INFER_OK);
    int64_t late_pending = infer_session_n_pending(late);
    infer_session *pair[2] = {small, late};
    infer_status sts[2];
    assert_int_equal(infer_engine_step(e, pair, 2, sts, NULL), INFER_OK);
    assert_int_equal(sts[0], INFER_OK);
    assert_int_equal(sts[1], INFER_ERR_FULL);
    assert_int_equal(infer_session_n_pending(late), late_pending);
    assert_int_equal(infer_session_n_pending(small), 0);
    infer_session_truncate(late, 0);
    /* small decoded correctly: compare with a fresh engine */
    infer_engine *ref_e = engine(llama, 8, 32, 0, NULL, true);
    infer_session *r = test_session(ref_e, NULL);
    int32_t ts2[31];
    memcpy(ts2, ts, 29 * sizeof(int32_t));
    ts2[29] = x;
    assert_int_equal(infer_session_set_tokens(r, ts2, 30, NULL), INFER_OK);
    assert_memory_equal(infer_session_logits(r), infer_session_logits(small), (size_t)nv * sizeof(float));
    /* when big finishes, the late request fits */
    infer_session_free(big);
    assert_int_equal(infer_session_set_tokens(late, tl, 64, NULL), INFER_OK);
    char why[256];
    assert_true(prefix_check(&e->pc, NULL, why, sizeof(why)));
    infer_session_free(r);
    infer_engine_free(ref_e);
    infer_session_free(s);
    infer_session_free(s2);
    infer_session_free(small);
    infer_session_free(late);
    infer_engine_free(e);
}

/* Random requests over a tight engine with salts; the arena counts are
 * checked after every request and outputs against a reference.  With full
 * hashes and with 4-bit hashes (constant collisions). */
static void random_engine(int hash_bits, uint32_t rng)
{
    enum { N_S = 4, OPS = 150 };
    const int nv = infer_model_n_vocab(llama);
    infer_engine *e = engine(llama, 4, 16, 80, NULL, false);
    e->pc.hash_bits = hash_bits;
    infer_engine *ref_e = engine(llama, 4, 16, 0, NULL, true);
    infer_session *r = test_session(ref_e, NULL);
    infer_session *ss[N_S];
    const char *salts[N_S] = {NULL, NULL, "x", "y"};
    for (int i = 0; i < N_S; i++)
        ss[i] = test_session(e, salts[i]);
    int32_t *refs = calloc((size_t)e->arena.n_blocks, sizeof(int32_t));
    int64_t reused_total = 0;
    for (int op = 0; op < OPS; op++) {
        infer_session *s = ss[lcg(&rng) % N_S];
        int32_t t[64];
        int n = 2 + (int)(lcg(&rng) % 60);
        uint32_t seed = lcg(&rng) % 4; /* few distinct stems: frequent sharing */
        prompt(t, n, seed);
        for (int i = 12 + (int)(lcg(&rng) % 20); i < n; i++)
            t[i] = 3 + (int32_t)(lcg(&rng) % 190);
        int64_t reused;
        assert_int_equal(infer_session_set_tokens(s, t, n, &reused), INFER_OK);
        reused_total += reused;
        if (op % 10 == 0) {
            infer_session_truncate(r, 0);
            assert_int_equal(infer_session_set_tokens(r, t, n, NULL), INFER_OK);
            assert_memory_equal(infer_session_logits(r), infer_session_logits(s), (size_t)nv * sizeof(float));
        }
        memset(refs, 0, (size_t)e->arena.n_blocks * sizeof(int32_t));
        for (int i = 0; i < N_S; i++)
            for (int k = 0; k < ss[i]->seq.n_blocks; k++)
                refs[ss[i]->seq.blocks[k]]++;
        check(&e->pc, refs);
        /* every registered block of a session is its node's block */
        for (int i = 0; i < N_S; i++)
            for (int k = 0; k < ss[i]->n_reg; k++)
                assert_int_equal(e->pc.nodes[ss[i]->nodes[k]].block, ss[i]->seq.blocks[k]);
    }
    infer_cache_metrics mt;
    infer_engine_get_metrics(e, &mt);
    print_message("random engine, %d-bit hashes: %lld tokens reused, %lld evictions\n", hash_bits,
                  (long long)reused_total, (long long)mt.evictions);
    assert_true(reused_total > 0);
    free(refs);
    for (int i = 0; i < N_S; i++)
        infer_session_free(ss[i]);
    infer_session_free(r);
    infer_engine_free(ref_e);
    infer_engine_free(e);
}

static void test_random_engine(void **state)
{
    (void)state;
    random_engine(128, 777);
    random_engine(4, 778);
}

/* ------------------------------------------------------------ disk tier */

static int count_files(const char *dir, const char *suffix, char first[][512], int max)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    struct dirent *de;
    int n = 0;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name), sl = strlen(suffix);
        if (l > sl && !strcmp(de->d_name + l - sl, suffix)) {
            if (n < max)
                snprintf(first[n], 512, "%s/%s", dir, de->d_name);
            n++;
        }
    }
    closedir(d);
    return n;
}

/* The path of the file holding block `depth`, or "" */
static void file_of_depth(const char *dir, int depth, char *out)
{
    char files[64][512];
    int n = count_files(dir, ".kvb", files, 64);
    char sfx[32];
    snprintf(sfx, sizeof(sfx), "-%d.kvb", depth);
    out[0] = '\0';
    for (int i = 0; i < n && i < 64; i++)
        if (strstr(files[i], sfx) && !strcmp(files[i] + strlen(files[i]) - strlen(sfx), sfx))
            snprintf(out, 512, "%s", files[i]);
}

static void test_disk_roundtrip(void **state)
{
    (void)state;
    const int nv = infer_model_n_vocab(llama);
    char dir[600], sub[1024];
    snprintf(dir, sizeof(dir), "%s/cache-rt", tmpdir);
    int32_t t[40];
    prompt(t, 40, 21);
    float *want = malloc((size_t)nv * sizeof(float));
    {
        infer_engine *r = engine(llama, 4, 16, 0, NULL, true);
        infer_session *s = test_session(r, NULL);
        assert_int_equal(infer_session_set_tokens(s, t, 37, NULL), INFER_OK);
        memcpy(want, infer_session_logits(s), (size_t)nv * sizeof(float));
        infer_session_free(s);
        infer_engine_free(r);
    }
    /* first process: compute, shut down cleanly (writes the cache) */
    infer_engine *e = engine(llama, 4, 16, 0, dir, false);
    snprintf(sub, sizeof(sub), "%s/infer-kv-%s", dir, infer_engine_fingerprint(e));
    infer_session *s = test_session(e, NULL);
    assert_int_equal(infer_session_set_tokens(s, t, 32, NULL), INFER_OK); /* 8 full blocks */
    infer_session_free(s);
    infer_engine_free(e);
    char files[16][512];
    assert_int_equal(count_files(sub, ".kvb", files, 16), 8);
    /* a new process, a prompt that leaves the stored chain 2 tokens into
     * block 7: 7 blocks and 2 rows of the 8th come from disk */
    {
        int32_t u[36];
        memcpy(u, t, 30 * sizeof(int32_t));
        for (int i = 30; i < 36; i++)
            u[i] = 160 + i;
        infer_engine *r = engine(llama, 4, 16, 0, NULL, true);
        infer_session *rs = test_session(r, NULL);
        assert_int_equal(infer_session_set_tokens(rs, u, 36, NULL), INFER_OK);
        e = engine(llama, 4, 16, 0, dir, false);
        s = test_session(e, NULL);
        int64_t got;
        assert_int_equal(infer_session_set_tokens(s, u, 36, &got), INFER_OK);
        assert_int_equal(got, 30);
        assert_memory_equal(infer_session_logits(s), infer_session_logits(rs), (size_t)nv * sizeof(float));
        infer_session_free(s);
        infer_engine_free(e);
        infer_session_free(rs);
        infer_engine_free(r);
    }
    /* second process: the prefix comes from disk, the answer is the same */
    warnings[0] = '\0';
    e = engine(llama, 4, 16, 0, dir, false);
    s = test_session(e, NULL);
    int64_t reused;
    assert_int_equal(infer_session_set_tokens(s, t, 37, &reused), INFER_OK);
    assert_int_equal(reused, 32);
    assert_memory_equal(infer_session_logits(s), want, (size_t)nv * sizeof(float));
    infer_cache_metrics mt;
    infer_engine_get_metrics(e, &mt);
    assert_int_equal(mt.disk_reads, 8);
    assert_int_equal(mt.disk_errors, 0);
    assert_string_equal(warnings, "");
    /* another salt does not see them */
    infer_session *o = test_session(e, "other");
    assert_int_equal(infer_session_prepare(o, t, 37, &reused), INFER_OK);
    assert_int_equal(reused, 0);
    infer_session_free(o);
    infer_session_free(s);
    infer_engine_free(e);

    /* eviction writes to disk too: a budget of the minimum, many prompts */
    infer_engine_params p;
    infer_engine_params_default(&p);
    p.n_ctx = 32;
    p.n_threads = 1;
    p.kv_block = 4;
    p.cache_dir = dir;
    p.cache_high = 1; /* the minimum: one context */
    p.cache_disk_max = 1 << 30;
    p.mem_floor = UINT64_MAX;
    p.log = capture;
    assert_int_equal(infer_engine_new(&e, llama, &p), INFER_OK);
    s = test_session(e, NULL);
    for (int i = 0; i < 4; i++) {
        int32_t q[24];
        prompt(q, 24, 300 + i);
        assert_int_equal(infer_session_set_tokens(s, q, 24, NULL), INFER_OK);
    }
    infer_engine_get_metrics(e, &mt);
    assert_true(mt.evictions > 0);
    /* every evicted block was saved first, unless it had come from disk */
    assert_true(mt.disk_writes + mt.disk_reads >= mt.evictions && mt.disk_writes > 0);
    int32_t q[24];
    prompt(q, 24, 300);
    assert_int_equal(infer_session_set_tokens(s, q, 24, &reused), INFER_OK);
    assert_int_equal(reused, 23); /* read back from disk */
    infer_session_free(s);
    infer_engine_free(e);
    free(want);
}

static void test_disk_damage(void **state)
{
    (void)state;
    const int nv = infer_model_n_vocab(llama);
    char dir[600], sub[1024], path[512];
    snprintf(dir, sizeof(dir), "%s/cache-bad", tmpdir);
    int32_t t[40];
    prompt(t, 40, 22);
    float *want = malloc((size_t)nv * sizeof(float));
    {
        infer_engine *r = engine(llama, 4, 16, 0, NULL, true);
        infer_session *s = test_session(r, NULL);
        assert_int_equal(infer_session_set_tokens(s, t, 33, NULL), INFER_OK);
        memcpy(want, infer_session_logits(s), (size_t)nv * sizeof(float));
        infer_session_free(s);
        infer_engine_free(r);
    }
    infer_engine *e = engine(llama, 4, 16, 0, dir, false);
    snprintf(sub, sizeof(sub), "%s/infer-kv-%s", dir, infer_engine_fingerprint(e));
    infer_session *s = test_session(e, NULL);
    assert_int_equal(infer_session_set_tokens(s, t, 32, NULL), INFER_OK);
    infer_session_free(s);
    infer_engine_free(e);

    /* block 5: one data byte flipped; block 6: truncated; block 7: header byte flipped */
    file_of_depth(sub, 5, path);
    FILE *f = fopen(path, "r+b");
    assert_non_null(f);
    fseek(f, -10, SEEK_END);
    int ch = fgetc(f);
    fseek(f, -10, SEEK_END);
    fputc(ch ^ 0x40, f);
    fclose(f);
    file_of_depth(sub, 6, path);
    assert_int_equal(truncate(path, 200), 0);
    file_of_depth(sub, 7, path);
    f = fopen(path, "r+b");
    fseek(f, 120, SEEK_SET); /* a token of the stored prefix (after the 112-byte header) */
    ch = fgetc(f);
    fseek(f, 120, SEEK_SET);
    fputc(ch ^ 1, f);
    fclose(f);
    /* a file of another model (the gemma's) placed among them */
    infer_engine *eg = engine(gemma, 4, 16, 0, dir, false);
    char gsub[1024];
    snprintf(gsub, sizeof(gsub), "%s/infer-kv-%s", dir, infer_engine_fingerprint(eg));
    s = test_session(eg, NULL);
    assert_int_equal(infer_session_set_tokens(s, t, 8, NULL), INFER_OK);
    infer_session_free(s);
    infer_engine_free(eg);
    file_of_depth(gsub, 0, path);
    char dst[1200], cmd[2600];
    snprintf(dst, sizeof(dst), "%s/%s", sub, strrchr(path, '/') + 1);
    snprintf(cmd, sizeof(cmd), "cp '%s' '%s'", path, dst);
    assert_int_equal(system(cmd), 0);

    warnings[0] = '\0';
    e = engine(llama, 4, 16, 0, dir, false);
    assert_non_null(strstr(warnings, "truncated"));
    assert_non_null(strstr(warnings, "header checksum"));
    assert_non_null(strstr(warnings, "another model"));
    s = test_session(e, NULL);
    int64_t reused;
    assert_int_equal(infer_session_set_tokens(s, t, 33, &reused), INFER_OK);
    assert_int_equal(reused, 20); /* blocks 0-4; block 5 fails its checksum */
    assert_non_null(strstr(warnings, "data checksum"));
    assert_memory_equal(infer_session_logits(s), want, (size_t)nv * sizeof(float));
    infer_cache_metrics mt;
    infer_engine_get_metrics(e, &mt);
    assert_int_equal(mt.disk_errors, 4);
    file_of_depth(sub, 5, path); /* the corrupt file was removed ... */
    /* ... and rewritten from the recomputed block at shutdown */
    infer_session_free(s);
    infer_engine_free(e);
    warnings[0] = '\0';
    e = engine(llama, 4, 16, 0, dir, false);
    s = test_session(e, NULL);
    assert_int_equal(infer_session_set_tokens(s, t, 33, &reused), INFER_OK);
    assert_int_equal(reused, 32);
    assert_memory_equal(infer_session_logits(s), want, (size_t)nv * sizeof(float));
    infer_session_free(s);
    infer_engine_free(e);
    free(want);
}

/* Every byte of a block file flipped in turn, and the file cut at many
 * lengths: the engine starts, the request succeeds with the right logits
 * (from disk when the damage is harmless, recomputed otherwise). */
static void test_disk_hostile(void **state)
{
    (void)state;
    const int nv = infer_model_n_vocab(llama);
    char dir[600], sub[1024], path[512];
    snprintf(dir, sizeof(dir), "%s/cache-hostile", tmpdir);
    int32_t t[6];
    prompt(t, 6, 23);
    float *want = malloc((size_t)nv * sizeof(float));
    infer_engine *e = engine(llama, 4, 16, 0, NULL, true);
    infer_session *s = test_session(e, "s");
    assert_int_equal(infer_session_set_tokens(s, t, 6, NULL), INFER_OK);
    memcpy(want, infer_session_logits(s), (size_t)nv * sizeof(float));
    infer_session_free(s);
    infer_engine_free(e);
    e = engine(llama, 4, 16, 0, dir, false);
    snprintf(sub, sizeof(sub), "%s/infer-kv-%s", dir, infer_engine_fingerprint(e));
    s = test_session(e, "s");
    assert_int_equal(infer_session_set_tokens(s, t, 4, NULL), INFER_OK); /* one block */
    infer_session_free(s);
    infer_engine_free(e);
    file_of_depth(sub, 0, path);
    size_t len;
    char *orig = test_read_file(path, &len);
    assert_non_null(orig);
    assert_true(len > 112 + 1 + 16);
    int from_disk = 0, trials = 0;
    /* mode 0: cut at `at`; mode 1: byte `at` flipped; mode 2: intact */
    for (int mode = 0; mode < 3; mode++) {
        for (size_t at = 0; at < len; at += at < 160 ? 1 : 97) {
            FILE *f = fopen(path, "wb");
            assert_non_null(f);
            fwrite(orig, 1, mode == 0 ? at : len, f);
            if (mode == 1) {
                fseek(f, (long)at, SEEK_SET);
                fputc(orig[at] ^ 0x5a, f);
            }
            fclose(f);
            warnings[0] = '\0';
            e = engine(llama, 4, 16, 0, dir, false);
            s = test_session(e, "s");
            int64_t reused;
            assert_int_equal(infer_session_set_tokens(s, t, 6, &reused), INFER_OK);
            assert_memory_equal(infer_session_logits(s), want, (size_t)nv * sizeof(float));
            /* damage is always noticed: never served, and said */
            if (mode < 2) {
                assert_int_equal(reused, 0);
                assert_true(warnings[0] != '\0');
            } else {
                assert_int_equal(reused, 4);
            }
            from_disk += reused > 0;
            trials++;
            infer_session_free(s);
            infer_engine_free(e); /* rewrites the block when the file was dropped */
            if (mode == 2)
                break;
        }
    }
    print_message("hostile block files: %d trials, %d served from disk\n", trials, from_disk);
    assert_int_equal(from_disk, 1);
    free(orig);
    free(want);
}

/* infer_session_new: a private engine; cache flags pass through. */
static void test_private_engine(void **state)
{
    (void)state;
    infer_session_params sp;
    infer_session_params_default(&sp);
    sp.n_ctx = 64;
    sp.kv_block = 8;
    sp.n_threads = 1;
    sp.cache_high = 1;
    infer_session *s;
    assert_int_equal(infer_session_new(&s, llama, &sp), INFER_OK);
    infer_cache_metrics mt;
    infer_engine_get_metrics(infer_session_engine(s), &mt);
    assert_true(mt.enabled);
    assert_int_equal(mt.block_tokens, 8);
    assert_int_equal(mt.kv_bytes_capacity, (64 / 8 + 1) * mt.block_bytes); /* raised to one context */
    assert_non_null(mt.page_mode);
    infer_session_free(s);
    sp.cache_low = 5 << 20;
    sp.cache_high = 1 << 20;
    assert_int_equal(infer_session_new(&s, llama, &sp), INFER_ERR_INVALID);
    assert_null(s);
}

/* crc32c: check-crc32c.h */
static void test_crc32c(void **state)
{
    (void)state;
    check_crc32c();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_crc32c),
        cmocka_unit_test(test_trie_basic),
        cmocka_unit_test(test_salt_isolation),
        cmocka_unit_test(test_forced_collisions),
        cmocka_unit_test(test_copy_on_write),
        cmocka_unit_test(test_eviction_order),
        cmocka_unit_test(test_random_ops),
        cmocka_unit_test(test_equivalence_llama),
        cmocka_unit_test(test_equivalence_gemma),
        cmocka_unit_test(test_equivalence_generated),
        cmocka_unit_test(test_equivalence_families),
        cmocka_unit_test(test_equivalence_default),
        cmocka_unit_test(test_full_hit_cow),
        cmocka_unit_test(test_step_batched),
        cmocka_unit_test(test_decode_registers),
        cmocka_unit_test(test_salt_engine),
        cmocka_unit_test(test_watermarks_and_full),
        cmocka_unit_test(test_random_engine),
        cmocka_unit_test(test_disk_roundtrip),
        cmocka_unit_test(test_disk_damage),
        cmocka_unit_test(test_disk_hostile),
        cmocka_unit_test(test_private_engine),
        cmocka_unit_test(test_kv_q8),
    };
    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
