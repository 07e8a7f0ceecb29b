/*
 * infer.h - the public C API of libinfer, a CPU-first LLM inference engine.
 *
 * libinfer maps a GGUF model file read-only, reports how much of it sits in the
 * page cache, and (in later layers) tokenizes, runs the transformer and keeps a
 * prefix cache of KV blocks.  The `infer` command-line tool uses nothing but
 * this header.
 *
 * Errors are values: every fallible function returns an infer_status (or NULL)
 * and leaves a human-readable message for the calling thread in
 * infer_last_error().  The library never exits the process.
 *
 * Example:
 *
 *     infer_gguf *g;
 *     if (infer_gguf_open(&g, "model.gguf", 0) != INFER_OK) {
 *         fprintf(stderr, "error: %s\n", infer_last_error());
 *         return 1;
 *     }
 *     const char *arch = infer_gguf_get_str(g, "general.architecture", "?");
 *     infer_residency r;
 *     infer_gguf_residency(g, &r);
 *     printf("%s, %.1f%% resident\n", arch, r.percent);
 *     infer_gguf_close(g);
 */
#ifndef INFER_H
#define INFER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------------------------------------------------------- errors */

typedef enum infer_status {
    INFER_OK = 0,
    INFER_ERR_IO = -1,          /* open/read/mmap failed */
    INFER_ERR_FORMAT = -2,      /* malformed or hostile file contents */
    INFER_ERR_UNSUPPORTED = -3, /* valid but not supported (type, arch, version) */
    INFER_ERR_NOMEM = -4,       /* allocation failed or budget exhausted */
    INFER_ERR_INVALID = -5,     /* bad argument from the caller */
    INFER_ERR_NOT_FOUND = -6,   /* missing key, tensor or token */
    INFER_ERR_FULL = -7,        /* context or cache full */
    INFER_ERR_CANCELLED = -8,   /* stopped by the caller */
} infer_status;

/* Message describing the last error on the calling thread ("" if none). */
const char *infer_last_error(void);
/* Short name of a status code. */
const char *infer_status_name(infer_status st);

/* ------------------------------------------------------------- library */

/* Version string, e.g. "0.1.0". */
const char *infer_version(void);
/* Multi-line description of linked libraries and built-in kernel variants. */
const char *infer_build_info(void);

/* ------------------------------------------------------------ GGUF files */

typedef struct infer_gguf infer_gguf;

/* Metadata value types, numbered as in the GGUF specification. */
typedef enum infer_gguf_type {
    INFER_GGUF_UINT8 = 0,
    INFER_GGUF_INT8 = 1,
    INFER_GGUF_UINT16 = 2,
    INFER_GGUF_INT16 = 3,
    INFER_GGUF_UINT32 = 4,
    INFER_GGUF_INT32 = 5,
    INFER_GGUF_FLOAT32 = 6,
    INFER_GGUF_BOOL = 7,
    INFER_GGUF_STRING = 8,
    INFER_GGUF_ARRAY = 9,
    INFER_GGUF_UINT64 = 10,
    INFER_GGUF_INT64 = 11,
    INFER_GGUF_FLOAT64 = 12,
} infer_gguf_type;

enum {
    INFER_GGUF_OPEN_MLOCK = 1 << 0, /* mlock the mapping (error if the limit forbids) */
};

/* Open and validate a GGUF file through a read-only mmap.  Every count,
 * length and offset is checked against the file size; on error *out is NULL
 * and infer_last_error() names what is wrong. */
infer_status infer_gguf_open(infer_gguf **out, const char *path, unsigned flags);
/* Parse a GGUF image held in memory (not copied; must outlive the handle). */
infer_status infer_gguf_open_memory(infer_gguf **out, const void *data, size_t size);
void infer_gguf_close(infer_gguf *g);

uint32_t infer_gguf_version(const infer_gguf *g);
size_t infer_gguf_file_size(const infer_gguf *g);
const char *infer_gguf_path(const infer_gguf *g);
size_t infer_gguf_alignment(const infer_gguf *g);
size_t infer_gguf_data_offset(const infer_gguf *g);
/* Seconds spent opening and validating the file. */
double infer_gguf_load_seconds(const infer_gguf *g);

/* Metadata, by index or key. */
int64_t infer_gguf_n_kv(const infer_gguf *g);
const char *infer_gguf_kv_key(const infer_gguf *g, int64_t i);
infer_gguf_type infer_gguf_kv_type(const infer_gguf *g, int64_t i);
int64_t infer_gguf_find_key(const infer_gguf *g, const char *key); /* -1 if absent */
/* For an array: element type and count (0 for non-arrays). */
infer_gguf_type infer_gguf_kv_arr_type(const infer_gguf *g, int64_t i);
uint64_t infer_gguf_kv_arr_n(const infer_gguf *g, int64_t i);
/* Render a value as short text (arrays summarised) into buf; returns buf. */
char *infer_gguf_kv_format(const infer_gguf *g, int64_t i, char *buf, size_t n);

/* Typed getters; any integer width is accepted where writers differ.
 * Return the default when the key is absent or of an incompatible type. */
int64_t infer_gguf_get_int(const infer_gguf *g, const char *key, int64_t dflt);
double infer_gguf_get_float(const infer_gguf *g, const char *key, double dflt);
bool infer_gguf_get_bool(const infer_gguf *g, const char *key, bool dflt);
/* NUL-terminated copy owned by the handle. */
const char *infer_gguf_get_str(const infer_gguf *g, const char *key, const char *dflt);

/* Tensors. */
int64_t infer_gguf_n_tensors(const infer_gguf *g);
int64_t infer_gguf_find_tensor(const infer_gguf *g, const char *name); /* -1 if absent */
typedef struct infer_tensor_info {
    const char *name;    /* NUL-terminated, owned by the handle */
    uint32_t type;       /* ggml type id (may be unknown: see type_name) */
    const char *type_name; /* "Q4_K", or "unknown(N)" */
    uint32_t n_dims;
    int64_t ne[4];       /* ne[0] is the contiguous (row) dimension */
    uint64_t offset;     /* from the start of the file */
    uint64_t nbytes;     /* 0 when the type is unknown */
    const void *data;    /* inside the read-only map */
} infer_tensor_info;
infer_status infer_gguf_tensor(const infer_gguf *g, int64_t i, infer_tensor_info *out);

/* ----------------------------------------------- page-cache residency */

typedef struct infer_residency {
    uint64_t bytes_total;
    uint64_t bytes_resident;
    double percent;
} infer_residency;

/* Residency (mincore) of the whole file, or of a byte range of it. */
infer_status infer_gguf_residency(const infer_gguf *g, infer_residency *out);
infer_status infer_gguf_range_residency(const infer_gguf *g, uint64_t offset, uint64_t size,
                                        infer_residency *out);
/* Bring the file into the page cache with n_threads readers (0 = all cores).
 * Reports bytes touched and seconds taken. */
infer_status infer_gguf_warm(const infer_gguf *g, int n_threads, uint64_t *bytes, double *seconds);
/* Drop the file's clean pages from the page cache (posix_fadvise DONTNEED). */
infer_status infer_file_cold(const char *path);

/* sha256 of the whole file as 64 hex chars + NUL. */
infer_status infer_file_sha256(const char *path, char hex[65]);

#ifdef __cplusplus
}
#endif
#endif /* INFER_H */
