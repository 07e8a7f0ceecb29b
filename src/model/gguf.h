/*
 * gguf.h - internal view of a parsed GGUF file (see gguf.c).
 *
 * The public API (infer.h) exposes GGUF files through an opaque handle; the
 * engine's own modules (tokenizer, model loader) use this header to reach
 * metadata arrays without copying them: strings inside arrays point into the
 * read-only map and are NOT NUL-terminated.
 */
#ifndef INFER_GGUF_H
#define INFER_GGUF_H

#include "util/common.h"

#define GGUF_MAX_DIMS 4
#define GGUF_MAX_NESTING 8 /* an array and up to 7 levels of arrays inside it */

struct gguf_str {
    const char *s; /* into the map; not NUL-terminated */
    uint64_t len;
};

struct gguf_value {
    uint32_t type; /* infer_gguf_type */
    union {
        uint64_t u64;
        int64_t i64;
        double f64;
        bool b;
        struct gguf_str str;
        struct {
            uint32_t type;            /* element type */
            uint64_t n;               /* element count */
            const uint8_t *raw;       /* primitive elements, packed little-endian, maybe unaligned */
            struct gguf_str *strs;    /* STRING elements */
            struct gguf_value *vals;  /* ARRAY elements (nested arrays) */
        } arr;
    };
};

struct gguf_kv {
    char *key;    /* NUL-terminated copy */
    char *cstr;   /* NUL-terminated copy of a STRING value, else NULL */
    struct gguf_value v;
};

struct gguf_tensor {
    char *name;
    uint32_t type;
    uint32_t n_dims;
    int64_t ne[GGUF_MAX_DIMS]; /* unused dims are 1 */
    uint64_t offset;           /* relative to the data section */
    uint64_t nbytes;           /* 0 when the type is unknown */
    const void *data;          /* NULL when the type is unknown */
};

struct infer_gguf {
    char *path;
    const uint8_t *base;
    size_t size;
    bool mapped;
    bool locked;
    bool huge_advised; /* the map is 2 MiB-aligned and advised MADV_HUGEPAGE */
    uint32_t version;
    uint64_t alignment;
    uint64_t data_offset;
    int64_t n_kv;
    struct gguf_kv *kv;
    int64_t n_tensors;
    struct gguf_tensor *tensors;
    double load_seconds;
};

const struct gguf_kv *gguf_get_kv(const infer_gguf *g, const char *key);
/* Array value of the given element type, or NULL. */
const struct gguf_value *gguf_get_arr(const infer_gguf *g, const char *key, uint32_t elem_type);
/* Element i of a primitive array as int64 / double (any width); false on mismatch. */
bool gguf_arr_int(const struct gguf_value *arr, uint64_t i, int64_t *out);
bool gguf_arr_float(const struct gguf_value *arr, uint64_t i, double *out);
const struct gguf_tensor *gguf_get_tensor(const infer_gguf *g, const char *name);
/* Bytes of one element of a primitive type, 0 for STRING/ARRAY/unknown. */
size_t gguf_type_size(uint32_t type);
const char *gguf_type_name(uint32_t type);

/* Map size bytes of fd read-only and shared; when want_huge, at a 2 MiB
 * boundary with MADV_HUGEPAGE (*huge: the advice was taken).  MAP_FAILED
 * with errno on error.  The model file and the repacked-weight cache
 * (repack_cache.c) are mapped this way. */
void *gguf_map_readonly(int fd, size_t size, bool want_huge, bool *huge);

/* residency.c, for the cache file too: mincore over [offset, offset + size)
 * of a map starting at the page-aligned base (touches none of it), and
 * reading [offset, offset + size) of the file at path (file_size bytes)
 * into the page cache with readahead off. */
infer_status map_residency(const uint8_t *base, uint64_t offset, uint64_t size, infer_residency *out);
infer_status file_warm_range(const char *path, uint64_t file_size, uint64_t offset, uint64_t size);
/* The whole file at path into the page cache through a MADV_HUGEPAGE map,
 * so that it comes in as 2 MiB folios where the kernel can (file_warm_range
 * brings 4 KiB ones); *out: its residency after, bytes_huge included.  And
 * the bytes of this process's map starting at base that are mapped with
 * 2 MiB pages (FilePmdMapped in /proc/self/smaps; 0 when not known). */
infer_status file_warm_huge(const char *path, infer_residency *out);
uint64_t map_huge_bytes(const uint8_t *base);

#endif
