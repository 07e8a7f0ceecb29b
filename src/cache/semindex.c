/*
 * semindex.c - the semantic tier's index: per-bucket arrays of unit
 * vectors, searched by an exact scan (issue 15).
 *
 * A bucket is the hard partition of the semantic cache (model, embedding
 * model, tenant, system prompt, earlier turns, output parameters: the server
 * hashes them into 32 bytes).  Inside one, every stored question's
 * embedding (F32, n_embd floats, row-major) is compared with the asked one
 * by the dispatched SIMD dot product: at home-server scale (thousands of
 * rows, most buckets small) a flat scan is exact and cheaper than keeping
 * any approximate index up to date.  Buckets are found through an
 * open-addressing table on the bucket hash.  Not thread-safe: the response
 * cache's mutex guards it.
 */
#include "cache/semindex.h"

#include "../../kernels/ops.h"

#include <stdlib.h>
#include <string.h>

struct sem_row {
    int64_t rowid;
    double expires;
    char *question;
};

struct sem_bucket {
    uint8_t id[32];
    int n, cap;
    float *vecs;          /* (cap, n_embd) */
    struct sem_row *rows; /* (cap) */
};

struct semindex {
    int n_embd;
    struct sem_bucket **slots; /* open addressing, n_slots a power of two; NULL: empty */
    size_t n_slots, n_buckets, n_rows;
};

struct semindex *semindex_new(int n_embd)
{
    struct semindex *ix = calloc(1, sizeof(*ix));
    if (!ix)
        return NULL;
    ix->n_embd = n_embd;
    ix->n_slots = 64;
    ix->slots = calloc(ix->n_slots, sizeof(*ix->slots));
    if (!ix->slots) {
        free(ix);
        return NULL;
    }
    return ix;
}

static void bucket_free(struct sem_bucket *b)
{
    for (int i = 0; i < b->n; i++)
        free(b->rows[i].question);
    free(b->rows);
    free(b->vecs);
    free(b);
}

void semindex_free(struct semindex *ix)
{
    if (!ix)
        return;
    for (size_t i = 0; i < ix->n_slots; i++)
        if (ix->slots[i])
            bucket_free(ix->slots[i]);
    free(ix->slots);
    free(ix);
}

int semindex_n_embd(const struct semindex *ix) { return ix->n_embd; }
size_t semindex_rows(const struct semindex *ix) { return ix->n_rows; }
size_t semindex_buckets(const struct semindex *ix) { return ix->n_buckets; }

static size_t slot_of(const struct semindex *ix, const uint8_t id[32])
{
    uint64_t h;
    memcpy(&h, id, 8); /* the id is a sha256: any 8 bytes are uniform */
    size_t i = (size_t)h & (ix->n_slots - 1);
    while (ix->slots[i] && memcmp(ix->slots[i]->id, id, 32))
        i = (i + 1) & (ix->n_slots - 1);
    return i;
}

static bool grow_table(struct semindex *ix)
{
    struct semindex big = *ix;
    big.n_slots = ix->n_slots * 2;
    big.slots = calloc(big.n_slots, sizeof(*big.slots));
    if (!big.slots)
        return false;
    for (size_t i = 0; i < ix->n_slots; i++)
        if (ix->slots[i])
            big.slots[slot_of(&big, ix->slots[i]->id)] = ix->slots[i];
    free(ix->slots);
    ix->slots = big.slots;
    ix->n_slots = big.n_slots;
    return true;
}

bool semindex_add(struct semindex *ix, const uint8_t bucket[32], int64_t rowid, double expires, const float *v,
                  const char *question)
{
    if ((ix->n_buckets + 1) * 4 > ix->n_slots * 3 && !grow_table(ix))
        return false;
    size_t s = slot_of(ix, bucket);
    struct sem_bucket *b = ix->slots[s];
    if (!b) {
        if (!(b = calloc(1, sizeof(*b))))
            return false;
        memcpy(b->id, bucket, 32);
        ix->slots[s] = b;
        ix->n_buckets++;
    }
    if (b->n == b->cap) {
        int cap = b->cap ? 2 * b->cap : 4;
        float *vecs = realloc(b->vecs, (size_t)cap * (size_t)ix->n_embd * sizeof(float));
        if (!vecs)
            return false;
        b->vecs = vecs;
        struct sem_row *rows = realloc(b->rows, (size_t)cap * sizeof(*rows));
        if (!rows)
            return false;
        b->rows = rows;
        b->cap = cap;
    }
    char *q = strdup(question ? question : "");
    if (!q)
        return false;
    memcpy(b->vecs + (size_t)b->n * (size_t)ix->n_embd, v, (size_t)ix->n_embd * sizeof(float));
    b->rows[b->n] = (struct sem_row){rowid, expires, q};
    b->n++;
    ix->n_rows++;
    return true;
}

/* Empty slot s of the table and re-place the run after it, so that a
 * lookup never stops at the hole. */
static void slot_delete(struct semindex *ix, size_t s)
{
    bucket_free(ix->slots[s]);
    ix->slots[s] = NULL;
    ix->n_buckets--;
    for (size_t i = (s + 1) & (ix->n_slots - 1); ix->slots[i]; i = (i + 1) & (ix->n_slots - 1)) {
        struct sem_bucket *b = ix->slots[i];
        ix->slots[i] = NULL;
        ix->slots[slot_of(ix, b->id)] = b;
    }
}

void semindex_remove(struct semindex *ix, int64_t rowid)
{
    for (size_t s = 0; s < ix->n_slots; s++) {
        struct sem_bucket *b = ix->slots[s];
        if (!b)
            continue;
        for (int i = 0; i < b->n; i++) {
            if (b->rows[i].rowid != rowid)
                continue;
            free(b->rows[i].question);
            int last = b->n - 1; /* swap-remove */
            if (i != last) {
                b->rows[i] = b->rows[last];
                memcpy(b->vecs + (size_t)i * (size_t)ix->n_embd, b->vecs + (size_t)last * (size_t)ix->n_embd,
                       (size_t)ix->n_embd * sizeof(float));
            }
            b->n--;
            ix->n_rows--;
            if (b->n == 0)
                slot_delete(ix, s);
            return;
        }
    }
}

int semindex_search(const struct semindex *ix, const uint8_t bucket[32], const float *q, double now,
                    struct sem_cand *out, int max_out, int *n_compared)
{
    *n_compared = 0;
    const struct sem_bucket *b = ix->slots[slot_of(ix, bucket)];
    if (!b || max_out <= 0)
        return 0;
    int n_out = 0;
    for (int i = 0; i < b->n; i++) {
        if (b->rows[i].expires <= now)
            continue;
        (*n_compared)++;
        float sim = vec_dot_f32(b->vecs + (size_t)i * (size_t)ix->n_embd, q, ix->n_embd);
        if (n_out == max_out && sim <= out[n_out - 1].sim)
            continue;
        int k = n_out < max_out ? n_out++ : max_out - 1; /* insertion into the sorted top list */
        while (k > 0 && out[k - 1].sim < sim) {
            out[k] = out[k - 1];
            k--;
        }
        out[k] = (struct sem_cand){b->rows[i].rowid, sim, b->rows[i].question};
    }
    return n_out;
}
