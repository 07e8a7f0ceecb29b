/*
 * semindex.h - the semantic tier's in-memory index (internal to the
 * response cache, src/cache/respcache.c).
 */
#ifndef INFER_SEMINDEX_H
#define INFER_SEMINDEX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct semindex;

struct sem_cand {
    int64_t rowid;
    float sim;
    const char *question; /* the stored normalised question; valid until the next change */
};

/* NULL when out of memory. */
struct semindex *semindex_new(int n_embd);
void semindex_free(struct semindex *ix);
int semindex_n_embd(const struct semindex *ix);
/* Add a row (v: n_embd floats, copied; question copied).  false: out of memory. */
bool semindex_add(struct semindex *ix, const uint8_t bucket[32], int64_t rowid, double expires, const float *v,
                  const char *question);
/* Drop a row wherever it is (no-op when absent). */
void semindex_remove(struct semindex *ix, int64_t rowid);
/* The rows of a bucket not expired at `now`, best max_out by dot product
 * with q (unit vectors: the cosine), most similar first.  Returns how many
 * were written; *n_compared gets how many rows were scanned. */
int semindex_search(const struct semindex *ix, const uint8_t bucket[32], const float *q, double now,
                    struct sem_cand *out, int max_out, int *n_compared);
/* Rows held, over every bucket, and the number of buckets. */
size_t semindex_rows(const struct semindex *ix);
size_t semindex_buckets(const struct semindex *ix);

#endif
