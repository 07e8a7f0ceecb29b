/*
 * common.h - internal helpers shared by every libinfer source file: the
 * per-thread error message, checked arithmetic and small utilities.
 */
#ifndef INFER_COMMON_H
#define INFER_COMMON_H

#include "infer.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#if defined(__GNUC__)
#define INFER_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define INFER_PRINTF(a, b)
#endif

/* Record an error message for the calling thread and return st, so that
 * `return infer_error(INFER_ERR_IO, "...")` is the idiom. */
infer_status infer_error(infer_status st, const char *fmt, ...) INFER_PRINTF(2, 3);
/* Prefix the current message with more context ("loading X: <old>"). */
infer_status infer_error_prefix(infer_status st, const char *fmt, ...) INFER_PRINTF(2, 3);
void infer_error_clear(void);

/* Monotonic clock in seconds. */
double infer_now(void);

/* Overflow-checked size arithmetic: return false on overflow. */
static inline int ck_add(uint64_t a, uint64_t b, uint64_t *r) { return !__builtin_add_overflow(a, b, r); }
static inline int ck_mul(uint64_t a, uint64_t b, uint64_t *r) { return !__builtin_mul_overflow(a, b, r); }

/* Number of online CPUs (>= 1). */
int infer_n_cpus(void);
/* Number of physical cores (>= 1), the default thread count. */
int infer_n_physical_cores(void);

/* Memory this process may use (memory.c): MemTotal/MemAvailable narrowed by
 * the limit of its cgroup (v1 or v2), so that the KV budget fits a service's
 * MemoryMax= or a container's limit. */
struct mem_info {
    uint64_t total;    /* bytes: MemTotal, or the cgroup limit when lower */
    uint64_t avail;    /* bytes: MemAvailable, or limit - (usage - inactive file pages) when lower */
    uint64_t cg_limit; /* the cgroup's limit (0: none below MemTotal) */
    uint64_t cg_usage; /* its usage, page cache included */
    int cg_version;    /* 0 (no limit applies), 1 or 2 */
};
/* false (and *out zeroed) when /proc/meminfo is unreadable; cgroup files that
 * are missing or malformed are ignored.  _at prefixes every path with root
 * (tests). */
bool mem_info_read(struct mem_info *out);
bool mem_info_read_at(const char *root, struct mem_info *out);

/* sha256 of a buffer, streaming interface. */
typedef struct sha256_ctx {
    uint32_t state[8];
    uint64_t bitlen;
    uint8_t buf[64];
    uint32_t buflen;
} sha256_ctx;
void sha256_init(sha256_ctx *c);
void sha256_update(sha256_ctx *c, const void *data, size_t n);
void sha256_final(sha256_ctx *c, uint8_t out[32]);
/* Tests: use the portable compression even where the CPU has SHA
 * instructions (on) or not (off); returns the previous setting. */
bool sha256_use_portable(bool on);

#ifdef NDEBUG
#define INFER_DCHECK(x) ((void)0)
#else
#include <assert.h>
#define INFER_DCHECK(x) assert(x)
#endif

#endif
