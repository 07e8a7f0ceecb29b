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
/* Multi-line report of the kernels in use: the selected variant (best the
 * CPU runs, or INFER_KERNELS=ref|avx2|avx512|...), the variants this CPU can
 * run, and for every supported weight type its activation format and the
 * variant supplying its dot product, gemm tile and activation quantizer,
 * then the same for the f32 ops.  Static buffer, not thread-safe. */
const char *infer_kernel_report(void);
/* Name of the kernel variant in use ("avx512", "neon", "ref", ...). */
const char *infer_kernel_variant(void);
/* The default thread count: the number of physical cores. */
int infer_n_threads_default(void);

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
    /* Map with the kernel's default pages: no 2 MiB alignment, no
     * MADV_HUGEPAGE advice (also set by INFER_NO_HUGE_WEIGHTS=1 in the
     * environment).  Without it, weights the page cache holds in 2 MiB folios
     * are mapped with 2 MiB pages (see infer_residency.bytes_huge). */
    INFER_GGUF_OPEN_SMALL_PAGES = 1 << 1,
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
    /* Of the whole mapping (infer_gguf_residency only, else 0): bytes this
     * process maps with 2 MiB pages (FilePmdMapped in /proc/self/smaps).
     * Pages are mapped when first touched, so ask after a run or a warm. */
    uint64_t bytes_huge;
} infer_residency;

/* Residency (mincore) of the whole file, or of a byte range of it. */
infer_status infer_gguf_residency(const infer_gguf *g, infer_residency *out);
infer_status infer_gguf_range_residency(const infer_gguf *g, uint64_t offset, uint64_t size,
                                        infer_residency *out);
/* Bring the file into the page cache with n_threads readers (0 = all cores).
 * Reports bytes touched and seconds taken.  Pages read in by it under a
 * huge-page advised map (the default) land in 2 MiB folios where the kernel
 * and file system allow it: run infer_file_cold first to re-read a file the
 * cache holds in small pages. */
infer_status infer_gguf_warm(const infer_gguf *g, int n_threads, uint64_t *bytes, double *seconds);
/* Bring bytes [offset, offset + size) of the file into the page cache and
 * nothing else (readahead off while it reads: the pages around the range
 * stay as they were, up to the two partly covered pages at its ends).
 * INFER_ERR_INVALID for a range outside the file. */
infer_status infer_gguf_warm_range(const infer_gguf *g, uint64_t offset, uint64_t size);
/* Residency with bytes_huge filled in without reading the file: touches
 * one byte of each 2 MiB stretch whose first page is already in memory, so
 * that the kernel maps what it holds in 2 MiB folios as such.  Used to tell
 * a user whose page cache holds the model in small pages (see infer warm
 * --huge). */
infer_status infer_gguf_probe_pages(const infer_gguf *g, infer_residency *out);
/* Whether a residency probe says the weights sit in small pages where 2 MiB
 * ones could serve (mostly resident, under a tenth in 2 MiB pages, at least
 * 64 MiB): the cue for the CLI's and the server's hint at load. */
bool infer_residency_small_pages(const infer_residency *r);
/* The one-line advice to print then (no newline), naming path; into buf. */
const char *infer_small_pages_note(const char *path, char *buf, size_t n);
/* Drop the file's clean pages from the page cache (posix_fadvise DONTNEED). */
infer_status infer_file_cold(const char *path);
/* Residency of a file by path, without parsing it: maps it read-only, asks
 * mincore and unmaps, reading no byte, so asking brings no page back in.
 * An empty file is 0 of 0 bytes (100%).  On error *out is zeroed. */
infer_status infer_file_residency(const char *path, infer_residency *out);

/* sha256 of the whole file as 64 hex chars + NUL. */
infer_status infer_file_sha256(const char *path, char hex[65]);
/* sha256 of n bytes of memory (the response cache's request keys). */
void infer_sha256(const void *data, size_t n, uint8_t out[32]);

/* ---------------------------------------------------- models and sessions */

typedef struct infer_model infer_model;
typedef struct infer_session infer_session;

enum {
    /* Keep GGUF's layout for every weight: no repacked cache file is read
     * or written (also set by INFER_NO_REPACK=1 in the environment). */
    INFER_MODEL_NO_REPACK = 1 << 16,
};

typedef struct infer_model_params {
    unsigned flags;  /* INFER_GGUF_OPEN_MLOCK, INFER_GGUF_OPEN_SMALL_PAGES, INFER_MODEL_NO_REPACK */
    /* Directory of the repacked-weight cache (its files go in DIR/repack/);
     * NULL: $INFER_REPACK_DIR, else $XDG_CACHE_HOME/infer, else ~/.cache/infer. */
    const char *repack_dir;
} infer_model_params;

/* Map a GGUF model, bind its weights and load its tokenizer.  Errors name
 * the missing key or tensor, or the unsupported architecture or type. */
infer_status infer_model_load(infer_model **out, const char *path, const infer_model_params *params);
void infer_model_free(infer_model *m);
const infer_gguf *infer_model_gguf(const infer_model *m);
const char *infer_model_arch(const infer_model *m);
int infer_model_n_vocab(const infer_model *m);
int infer_model_n_ctx_train(const infer_model *m);
int infer_model_n_layers(const infer_model *m);
/* Mixture-of-experts models: experts per layer and experts each token uses
 * (0 and 0 for a dense model). */
int infer_model_n_experts(const infer_model *m);
int infer_model_n_experts_used(const infer_model *m);
/* Seconds to map, validate and bind (tokenizer and repacking included). */
double infer_model_load_seconds(const infer_model *m);

/* Weight repacking at load.  Where the active kernel variant has faster
 * kernels for an interleaved layout of a weight type (avx512: Q4_0, Q5_0),
 * the loader stores those tensors repacked in a cache file keyed by the
 * model's sha256, the variant and the layout version, maps it read-only
 * (like the model) and uses it; the next start maps the same file.  Failing
 * to read or write the cache never fails the load: the weights are then
 * used in GGUF's layout, and `note` says why. */
typedef struct infer_repack_info {
    const char *state;     /* "none" (nothing to repack), "off", "hit", "created", "failed" */
    int n_tensors;         /* tensors in the repacked layout */
    uint64_t bytes;        /* their bytes */
    double seconds;        /* all of it at load: hashing, repacking, mapping, checking */
    double hash_seconds;   /* sha256 of the model (only when its identity was not cached) */
    double repack_seconds; /* repacking and writing (state "created") */
    const char *path;      /* the cache file ("" when none) */
    const char *note;      /* why "failed" or "off" ("" otherwise) */
} infer_repack_info;
void infer_model_repack_info(const infer_model *m, infer_repack_info *out);
/* One line for people: "repack: 81 tensors (41.6 MiB) ..., cache hit in 9.1 ms". */
const char *infer_model_repack_summary(const infer_model *m);

/* The repacked copy a load with the active kernels maps instead of some of
 * a file's tensors (experts included), for the page-cache tools: decode
 * reads those tensors' bytes from it, so their residency and warming are
 * of this file, not of the GGUF.  Found without hashing the model (from the
 * identity a load remembered; repack_dir as infer_model_params.repack_dir,
 * NULL for the default) and checked like a load checks it, except the data
 * checksum (nothing here reads the data).  INFER_ERR_NOT_FOUND when no load
 * has made one for this file and variant; *out is then NULL. */
typedef struct infer_repack_file infer_repack_file;
infer_status infer_repack_file_open(infer_repack_file **out, const infer_gguf *g, const char *repack_dir);
void infer_repack_file_close(infer_repack_file *f);
const char *infer_repack_file_path(const infer_repack_file *f);
uint64_t infer_repack_file_size(const infer_repack_file *f);
/* Where the tensor whose data starts at gguf_offset in the GGUF lies in the
 * cache file (same size): true and *offset, or false when it is not in it. */
bool infer_repack_file_find(const infer_repack_file *f, uint64_t gguf_offset, uint64_t *offset);
/* infer_gguf_range_residency and infer_gguf_warm_range on the cache file. */
infer_status infer_repack_file_range_residency(const infer_repack_file *f, uint64_t offset, uint64_t size,
                                               infer_residency *out);
infer_status infer_repack_file_warm_range(const infer_repack_file *f, uint64_t offset, uint64_t size);
/* The whole cache file into the page cache, as 2 MiB folios where the kernel
 * can (read through a MADV_HUGEPAGE map, like infer_gguf_warm: a range warm's
 * reads bring 4 KiB folios, which a load then maps with 4 KiB pages; decode
 * reads those ~10-20% slower).  *out: the file's residency after, with
 * bytes_huge (the share the warm's own map held in 2 MiB pages). */
infer_status infer_repack_file_warm(const infer_repack_file *f, infer_residency *out);

/* Text -> tokens with the model's tokenizer.  add_special adds BOS/EOS as the
 * model's metadata asks; parse_special turns special-token text
 * ("<start_of_turn>") into its token (chat formatting does, user text by
 * default does not).  Returns the number of tokens, which may exceed cap (then
 * only cap were written: call again with a larger buffer), or a negative
 * infer_status. */
int64_t infer_model_tokenize(const infer_model *m, const char *text, size_t len, bool add_special,
                             bool parse_special, int32_t *out, int64_t cap);
int32_t infer_model_bos(const infer_model *m); /* -1 if none */
bool infer_model_add_bos(const infer_model *m);
/* Id of the token spelled exactly `piece`, or -1. */
int32_t infer_model_token_id(const infer_model *m, const char *piece);
/* Does generation end at this token (EOS, EOT and other end-of-turn tokens)? */
bool infer_model_is_eog(const infer_model *m, int32_t id);
/* Also end generation at the token spelled `piece`, if the vocabulary has it
 * (a chat family's end-of-turn marker).  Returns whether it was found. */
bool infer_model_add_eog(infer_model *m, const char *piece);

/* Streaming detokenizer: bytes are released only as whole UTF-8 characters,
 * never splitting one across two pushes. */
typedef struct infer_detok infer_detok;
infer_detok *infer_detok_new(const infer_model *m); /* NULL when out of memory */
/* Text of one more token into out (cap >= 64); returns bytes written. */
size_t infer_detok_push(infer_detok *d, int32_t id, char *out, size_t cap);
/* Bytes that are not a token's (a grammar's closing text) through the same
 * stream, so that a character they complete comes out whole. */
size_t infer_detok_push_text(infer_detok *d, const char *text, size_t n, char *out, size_t cap);
/* Whatever is still pending (an incomplete character at the very end). */
size_t infer_detok_flush(infer_detok *d, char *out, size_t cap);
void infer_detok_free(infer_detok *d);

/* Monotonic clock, seconds. */
double infer_now_seconds(void);

/*
 * Engines and sessions.
 *
 * An engine is a model plus one KV block arena shared by its sessions, the
 * prefix cache over those blocks and its metrics.  A session is one token
 * sequence (a conversation, a request) evaluated in the engine.  Blocks of a
 * prompt that some session has computed before (same tokens from position 0,
 * same model, same cache salt) are attached to a new session without being
 * recomputed or copied (a prompt that leaves the cached chain inside a block
 * shares that block's first rows too, and copies it before writing); with a
 * cache directory they also survive restarts.
 *
 *     infer_engine *e;  infer_session *a, *b;
 *     infer_engine_new(&e, model, NULL);
 *     infer_session_new_in(&a, e, NULL);
 *     infer_session_new_in(&b, e, NULL);
 *     infer_session_set_tokens(a, sys_and_q1, n1, NULL);  // computes everything
 *     infer_session_set_tokens(b, sys_and_q2, n2, &reused); // reuses the system prompt
 *
 * For continuous batching, queue work with infer_session_prepare() and
 * infer_session_push() and advance several sessions at once with
 * infer_engine_step().  An engine and its sessions are driven from one
 * thread at a time.  infer_session_new() (a session with a private engine)
 * keeps the simple single-sequence use working.
 *
 * Cache budget: cache_high and cache_low bound the bytes of KV blocks in use
 * (by running sessions and by the cache).  When an allocation would cross
 * the high mark, unpinned cached blocks are evicted, least recently used
 * leaves first, down to the low mark.  By default high = min(MemTotal / 4,
 * (MemAvailable - model file - 512 MiB) / 2), low = 3/4 of high, and the
 * arena always holds n_seq full contexts; when MemAvailable later falls below
 * mem_floor (default min(MemTotal / 16, 512 MiB)) the budget shrinks and
 * evicted blocks are returned to the kernel.
 */
typedef struct infer_engine infer_engine;

typedef void (*infer_log_fn)(void *ctx, const char *msg);

/* Element type of the KV cache (llama.cpp's --cache-type-k/-v): F16, or
 * Q8_0 (blocks of 32 int8 values and an F16 scale: about half the memory,
 * slightly different logits; needs a head size divisible by 32). */
typedef enum infer_kv_type { INFER_KV_F16 = 0, INFER_KV_Q8_0 = 1 } infer_kv_type;
/* "f16" / "q8_0" -> type; false for anything else. */
bool infer_kv_type_from_name(const char *name, infer_kv_type *out);
const char *infer_kv_type_name(infer_kv_type t);

typedef struct infer_engine_params {
    int n_ctx;              /* default context of a session (0: min(model's, 4096)) */
    int n_batch;            /* tokens per forward pass (0: 512) */
    int n_threads;          /* 0: physical cores */
    int kv_block;           /* tokens per KV block (0: 32) */
    int n_seq;              /* sessions expected to run at once (0: 1) */
    uint64_t cache_high;    /* bytes (0: from RAM, above) */
    uint64_t cache_low;     /* bytes (0: 3/4 of high) */
    uint64_t cache_disk_max; /* bytes of the disk tier (0: 4 x high) */
    uint64_t mem_floor;     /* bytes of MemAvailable (0: default; UINT64_MAX: never shrink) */
    const char *cache_dir;  /* disk tier directory, created if missing (NULL: none) */
    bool no_prefix_cache;   /* sessions share nothing; nothing is cached */
    bool no_coalesce;       /* never wait for another session's prefill of the same prefix */
    infer_kv_type kv_type_k, kv_type_v; /* KV cache element types (default F16) */
    infer_log_fn log;       /* warnings (ignored cache files, ...); NULL: stderr */
    void *log_ctx;
} infer_engine_params;

void infer_engine_params_default(infer_engine_params *p);
/* On error *out is NULL; INFER_ERR_INVALID names a bad parameter,
 * INFER_ERR_NOMEM/IO a budget or directory that cannot be had.  A cache
 * directory that cannot be used is an error, not a warning. */
infer_status infer_engine_new(infer_engine **out, infer_model *m, const infer_engine_params *params);
/* Release the caller's hold: the engine lives until its last session is
 * freed too.  Then cached blocks are written to the disk tier (clean
 * shutdown) and everything is freed.  The model must outlive the engine. */
void infer_engine_free(infer_engine *e);
/* Write every cached block not yet on disk to the disk tier now.  Returns
 * INFER_ERR_INVALID without a cache directory. */
infer_status infer_engine_save(infer_engine *e);
/* Drop every cached block no session uses (the next request is cold). */
void infer_engine_clear_cache(infer_engine *e);
/* Model fingerprint keying the cache: 32 hex digits. */
const char *infer_engine_fingerprint(const infer_engine *e);
/* Mixture-of-experts models: how many tokens the engine's forward passes
 * have routed to each expert since it was created (a token counts once for
 * each of its experts), layer-major: counts[layer * n_experts + expert].
 * Writes min(n, total) entries; returns total = n_layers * n_experts (0 for
 * a dense model). */
size_t infer_engine_expert_counts(const infer_engine *e, uint64_t *counts, size_t n);

typedef struct infer_session_params {
    int n_ctx;      /* context length in tokens (0: the engine's; private engine: min(model's, 4096)) */
    int n_batch;    /* tokens per forward call during prefill (0: 512) -- private engine */
    int n_threads;  /* 0: physical cores -- private engine */
    int kv_block;   /* tokens per KV block (0: 32) -- private engine */
    const char *cache_salt; /* tenant key: different salts never share blocks (NULL: "") */
    /* private engine (infer_session_new) only, as in infer_engine_params: */
    uint64_t cache_high, cache_low, cache_disk_max;
    const char *cache_dir;
    bool no_prefix_cache;
    infer_kv_type kv_type_k, kv_type_v;
} infer_session_params;

void infer_session_params_default(infer_session_params *p);
/* A session with a private engine made from params (cache fields included). */
infer_status infer_session_new(infer_session **out, infer_model *m, const infer_session_params *params);
/* A session in a shared engine (uses n_ctx and cache_salt of params). */
infer_status infer_session_new_in(infer_session **out, infer_engine *e, const infer_session_params *params);
void infer_session_free(infer_session *s);
infer_engine *infer_session_engine(const infer_session *s);
int infer_session_n_ctx(const infer_session *s);
/* Change the cache salt; the session forgets its tokens (no reuse across
 * tenants, not even of its own history). */
infer_status infer_session_set_salt(infer_session *s, const char *salt);
/* Tokens whose K/V the session holds. */
int64_t infer_session_n_tokens(const infer_session *s);
const int32_t *infer_session_tokens(const infer_session *s);
/* Evaluate more tokens after the current ones; afterwards
 * infer_session_logits() holds the next-token logits.  INFER_ERR_FULL when
 * the context would overflow (nothing is changed then) or when the engine's
 * KV budget is exhausted by running sessions (the tokens evaluated so far
 * are kept, the rest dropped). */
infer_status infer_session_append(infer_session *s, const int32_t *tokens, int64_t n);
/* Make the session hold exactly tokens[0..n): the longest prefix available
 * -- its own tokens or blocks in the prefix cache -- is kept, the rest
 * evaluated.  *n_reused (may be NULL) gets the number of tokens not
 * recomputed.  The last token is always evaluated. */
infer_status infer_session_set_tokens(infer_session *s, const int32_t *tokens, int64_t n, int64_t *n_reused);
/* Forget tokens from position n on (queued tokens too). */
void infer_session_truncate(infer_session *s, int64_t n);
/* Logits (n_vocab) after the last evaluated token, or NULL if none (or if
 * tokens are still queued). */
const float *infer_session_logits(const infer_session *s);
/* Evaluate tokens after the current ones and write every position's logits
 * to out (n x n_vocab floats): for perplexity.  Nothing may be queued. */
infer_status infer_session_eval_all(infer_session *s, const int32_t *tokens, int64_t n, float *out);

/* Step-wise evaluation (continuous batching).  prepare() is set_tokens()
 * without the evaluation: it attaches the reusable prefix and queues the
 * rest (at least the last token); push() queues tokens after those (the
 * sampled token).  Queued tokens are evaluated by infer_engine_step(). */
infer_status infer_session_prepare(infer_session *s, const int32_t *tokens, int64_t n, int64_t *n_reused);
infer_status infer_session_push(infer_session *s, const int32_t *tokens, int64_t n);
/* Tokens queued and not yet evaluated. */
int64_t infer_session_n_pending(const infer_session *s);
/* Coalescing: prepare() makes a session whose next prefix blocks another
 * session of the engine is computing right now (same cache salt, same
 * tokens from the start) wait for them instead of computing them again.
 * While it waits, infer_engine_step() evaluates nothing for it: at each
 * step it attaches the blocks the other session has registered since.  The
 * wait ends when they are all there, or at once when the other session is
 * freed, re-prepared, truncated, or not listed in a step (then the session
 * computes the rest itself).  The result is the same K/V, so the same
 * logits, as computing alone.  true while it waits. */
bool infer_session_waiting(const infer_session *s);
/*
 * One forward pass over several sessions of engine e: every session with
 * queued tokens gets one (decoding sessions are never starved), then the
 * remaining room of n_batch tokens goes to longer queues (prefill chunks)
 * in array order; a session waiting for another's prefill (see
 * infer_session_waiting) gets none.  A session whose queue empties has
 * fresh logits.  Blocks completed are registered in the prefix cache.
 * status (may be NULL) gets per session: INFER_OK, or INFER_ERR_FULL when
 * no KV block could be had for it even after eviction (its queue is kept:
 * step again later, or truncate it to fail the request; other sessions are
 * unaffected).  *n_tokens (may be NULL) gets the tokens evaluated.
 * Returns INFER_ERR_INVALID for a session of another engine or listed
 * twice, or the forward pass's error (then no session advanced).
 */
infer_status infer_engine_step(infer_engine *e, infer_session *const *sessions, int n, infer_status *status,
                               int64_t *n_tokens);

/* Perplexity of tokens the way llama.cpp's llama-perplexity computes it:
 * consecutive chunks of the session's context length, each evaluated from an
 * empty context with its first token replaced by BOS (when the model adds
 * one), scoring the second half of each chunk's positions.  max_chunks < 0
 * means all.  progress (may be NULL) is called after each chunk with the
 * running estimate.  *ppl and *err (standard error) get the result. */
infer_status infer_session_perplexity(infer_session *s, const int32_t *tokens, int64_t n, int max_chunks,
                                      double *ppl, double *err,
                                      void (*progress)(void *ctx, int chunk, int n_chunks, double ppl),
                                      void *ctx);
/*
 * KL divergence against a reference run, as llama-perplexity's
 * --kl-divergence-base / --kl-divergence (the same file format, so a base
 * file written by llama.cpp's llama-perplexity can be read, and ours by it).
 *
 * infer_session_kld_base_save: perplexity of tokens as above, and the
 * reference file at path: "_logits_", n_ctx, n_vocab, n_chunks (int32 each),
 * the n_chunks * n_ctx tokens evaluated (int32, BOS in place), then for each
 * scored position (n_ctx/2 .. n_ctx-2 of each chunk) its log-probabilities as
 * a float scale and a float minimum followed by n_vocab uint16 steps (padded
 * to an even count; values below max - 16 are clamped).
 *
 * infer_session_kld: evaluate the base file's tokens with this session (its
 * context must hold the file's n_ctx) and compare: perplexity of both, KL
 * divergence(base || this) per position, top-1 agreement, probability
 * differences of the correct token.  A malformed or truncated file, or one
 * for another vocabulary, is refused with a message.
 */
typedef struct infer_kld_result {
    int n_ctx, n_chunks;
    int64_t count;                   /* positions compared */
    double ppl, ppl_err;             /* this run */
    double ppl_base, ppl_base_err;   /* the base file's */
    double ln_ppl_ratio, ln_ppl_ratio_err;
    double kld_mean, kld_err;        /* mean KLD and its standard error */
    double kld_max, kld_p999, kld_p99, kld_p95, kld_p90, kld_median;
    double same_top, same_top_err;   /* fraction of positions with the same argmax */
    double dp_rms, dp_max;           /* RMS and max |p - p_base| of the correct token */
} infer_kld_result;
infer_status infer_session_kld_base_save(infer_session *s, const int32_t *tokens, int64_t n, int max_chunks,
                                         const char *path, double *ppl, double *err,
                                         void (*progress)(void *ctx, int chunk, int n_chunks, double ppl),
                                         void *ctx);
infer_status infer_session_kld(infer_session *s, const char *path, int max_chunks, infer_kld_result *out,
                               void (*progress)(void *ctx, int chunk, int n_chunks, double kld), void *ctx);

/* Cumulative timing of this session. */
typedef struct infer_session_stats {
    int64_t n_prompt_tokens; /* evaluated in batches (prefill) */
    double prompt_seconds;
    int64_t n_decode_tokens; /* evaluated one at a time */
    double decode_seconds;
    int64_t n_reused_tokens; /* kept by set_tokens / prepare */
    int64_t n_cached_tokens; /* of those, found in the prefix cache (not the session's own) */
    /* the last request (set_tokens / prepare): */
    int64_t last_prompt_tokens, last_reused_tokens;
    double last_ttft;        /* seconds from the request to its first logits */
    int64_t last_coalesced_tokens; /* of the last request: attached from another session's prefill */
} infer_session_stats;
void infer_session_get_stats(const infer_session *s, infer_session_stats *out);

/* Prefix-cache figures of an engine.  Counters are cumulative. */
typedef struct infer_cache_metrics {
    bool enabled;                 /* prefix cache on */
    const char *page_mode;        /* arena pages: "hugetlb", "thp" or "normal" */
    int block_tokens;
    uint64_t block_bytes;
    /* lookups: one per request (set_tokens / prepare) */
    int64_t queries, hits;        /* hits: requests that reused >= 1 cached block */
    int64_t query_tokens;         /* prompt tokens of those requests */
    int64_t hit_tokens, hit_blocks; /* found in the cache (memory or disk) */
    double hit_rate;              /* hit_tokens / query_tokens */
    int64_t reused_tokens;        /* not recomputed (cache or the session's own history) */
    int64_t prefill_tokens;       /* prompt tokens computed */
    double prefill_seconds, prefill_tok_s;
    int64_t decode_tokens;
    double decode_seconds;
    /* time to first logits of a request: cold (nothing reused) and hit */
    int64_t ttft_cold_n, ttft_hit_n;
    double ttft_cold_last, ttft_cold_avg, ttft_hit_last, ttft_hit_avg;
    /* memory */
    uint64_t kv_bytes_in_use;     /* blocks used by sessions or the cache */
    uint64_t kv_bytes_cached;     /* of those, held by the cache alone (evictable) */
    uint64_t kv_bytes_capacity;   /* the arena */
    uint64_t cache_high, cache_low; /* watermarks in force */
    int64_t cached_blocks;        /* trie nodes */
    int64_t evictions;            /* blocks evicted */
    double evictions_per_minute;  /* over the last minute */
    /* the memory the budget follows (read at most once a second while blocks
     * are taken): MemTotal/MemAvailable, or the process's cgroup limit and
     * what is left under it when that is lower */
    uint64_t mem_total, mem_available;
    uint64_t mem_cgroup_limit;    /* 0: no cgroup limit below MemTotal */
    uint64_t mem_floor;           /* below it the watermarks shrink (0: never) */
    int64_t mem_shrinks;          /* checks that found less available than the floor */
    /* disk tier */
    bool disk_enabled;
    const char *disk_dir;
    int64_t disk_reads, disk_writes; /* blocks */
    uint64_t disk_read_bytes, disk_write_bytes, disk_bytes;
    int64_t disk_files, disk_errors; /* errors: files ignored (foreign, truncated, corrupt) */
    int64_t disk_write_errors;    /* blocks that could not be written (full disk, I/O error) */
    /* coalescing: requests that waited for another session's prefill of their
     * prefix, the prompt tokens they attached from it (prefill saved), and
     * waits that ended early (the producer stopped; the waiter computed the rest) */
    int64_t coalesced_requests, coalesced_tokens, coalesce_fallbacks;
} infer_cache_metrics;
void infer_engine_get_metrics(const infer_engine *e, infer_cache_metrics *out);

/* The threads of the forward passes (one pool per process).  `threads` is the
 * number taking part now: the requested count unless the adaptive count
 * dropped threads because the others kept waiting for them (another program
 * holding the cores; INFER_THREADS_ADAPT=0 turns it off).  Counters are
 * cumulative since the process started. */
typedef struct infer_thread_stats {
    int max_threads, threads;
    uint64_t drops, raises;      /* adaptive changes */
    uint64_t loops;              /* parallel loops run */
    double loop_seconds;         /* their wall time */
    double stall_seconds;        /* of which the caller waited for other threads' chunks */
} infer_thread_stats;
void infer_get_thread_stats(infer_thread_stats *out);

/* ------------------------------------------------------------- sampling */

#define INFER_SEED_RANDOM UINT64_MAX

typedef struct infer_sampler infer_sampler;
typedef struct infer_sampler_params {
    float temp;           /* <= 0: greedy; default 0.8 */
    int top_k;            /* <= 0: off; default 40 */
    float top_p;          /* 1: off; default 0.95 */
    float min_p;          /* 0: off; default 0.05 */
    float repeat_penalty; /* 1: off (default) */
    int repeat_last_n;    /* default 64 */
    uint64_t seed;        /* INFER_SEED_RANDOM: from the clock */
} infer_sampler_params;

void infer_sampler_params_default(infer_sampler_params *p);
infer_status infer_sampler_new(infer_sampler **out, const infer_sampler_params *p);
void infer_sampler_free(infer_sampler *s);
/* Pick the next token from logits; -1 on allocation failure. */
int32_t infer_sampler_sample(infer_sampler *s, const float *logits, int n_vocab);
/* Greedy choice: the index of the first largest of x[0..n) (vectorized;
 * NaNs are passed over unless x[0] is one); 0 when n <= 0. */
int32_t infer_argmax(const float *x, int n);
/* Record a token in the repetition-penalty history. */
void infer_sampler_accept(infer_sampler *s, int32_t token);
void infer_sampler_reset(infer_sampler *s);

/* --------------------------------------------- constrained generation */

/* A grammar that generation can be held to: the JSON texts valid against
 * a JSON schema (structured outputs), or any JSON object.  Immutable once
 * built; one grammar may serve several samplers at once.
 *
 * The schema subset (the one llama.cpp's json-schema-to-grammar covers):
 * type (or a list of types), object properties / required
 * (additionalProperties false unless no properties are declared),
 * array items / minItems / maxItems, string minLength / maxLength and
 * format date / time / date-time / uuid, number, integer (small
 * minimum..maximum ranges, minimum 0 or 1), boolean, null, enum, const,
 * anyOf, oneOf, allOf of one schema, $ref inside the document ("#",
 * "#/$defs/...", "#/definitions/...", recursion allowed).  Any other
 * keyword is INFER_ERR_UNSUPPORTED with a message naming it and where it
 * is; malformed or hostile schemas (cycles without progress, enums or
 * lengths past the limits, nesting deeper than 64) are refused the same way. */
typedef struct infer_grammar infer_grammar;
infer_status infer_grammar_from_json_schema(infer_grammar **out, const char *schema, size_t len);
/* The same, between two literal texts (prefix / suffix may be NULL): a
 * tool call inside its model's tags, "<tool_call>\n" ... "\n</tool_call>". */
infer_status infer_grammar_from_json_schema_wrapped(infer_grammar **out, const char *schema, size_t len,
                                                    const char *prefix, const char *suffix);
infer_status infer_grammar_json_object(infer_grammar **out);
void infer_grammar_free(infer_grammar *g);
/* Is text[0..len) a complete sentence of g? */
bool infer_grammar_match(const infer_grammar *g, const char *text, size_t len);

/* Hold sampler s to g (NULL: unconstrained again) for model m's
 * vocabulary: every draw only considers tokens whose text keeps the output
 * a prefix of a sentence of g, and end-of-generation tokens only when it is
 * a whole one.  Greedy and temperature sampling pick exactly what they would
 * pick with every other logit at -inf (the top-k of the allowed tokens);
 * the mask is only computed in full when the most likely tokens do not
 * fit.  The first call for a model builds its vocabulary trie (~0.1 s for
 * 262k tokens).  g and m must outlive s.  infer_sampler_accept advances the
 * grammar; infer_sampler_reset restarts it. */
infer_status infer_sampler_set_grammar(infer_sampler *s, const infer_model *m, const infer_grammar *g);
typedef enum infer_grammar_state {
    INFER_GRAMMAR_NONE = 0,     /* no grammar */
    INFER_GRAMMAR_OPEN = 1,     /* the output is not a whole sentence yet */
    INFER_GRAMMAR_COMPLETE = 2, /* it is one, and could go on */
    INFER_GRAMMAR_DONE = 3,     /* it is one, and nothing may follow */
} infer_grammar_state;
infer_grammar_state infer_sampler_grammar_state(const infer_sampler *s);
/* The shortest text that makes the output so far a whole sentence (to close
 * an answer cut by a token limit).  Writes up to cap bytes, returns the full
 * length (0 when already complete or without a grammar). */
size_t infer_sampler_grammar_close(const infer_sampler *s, char *out, size_t cap);

/* ------------------------------------------------------- chat templates */

/* Prompt formats.  A model's family is detected from its
 * tokenizer.chat_template (marker substrings, as llama.cpp does), else from
 * its architecture and special tokens, else chatml.  Names (for
 * --chat-template) are those of infer_chat_family_name(). */
typedef enum infer_chat_family {
    INFER_CHAT_CHATML = 0,           /* <|im_start|>: Qwen, SmolLM, OpenHermes */
    INFER_CHAT_GEMMA = 1,            /* <start_of_turn>: no system role, assistant is "model" */
    INFER_CHAT_LLAMA3 = 2,           /* <|start_header_id|> */
    INFER_CHAT_LLAMA2 = 3,           /* [INST] <<SYS>>: Llama 2 chat */
    INFER_CHAT_MISTRAL = 4,          /* "[INST] u [/INST]": Mistral v1, HF v0.1/v0.2 */
    INFER_CHAT_MISTRAL_V3 = 5,       /* "[INST] u[/INST]" ([AVAILABLE_TOOLS] templates) */
    INFER_CHAT_MISTRAL_V3_TEKKEN = 6, /* "[INST]u[/INST]" (Nemo) */
    INFER_CHAT_MISTRAL_V7 = 7,       /* [SYSTEM_PROMPT] with spaces (Large 2411) */
    INFER_CHAT_MISTRAL_V7_TEKKEN = 8, /* [SYSTEM_PROMPT] without (Small 3.1) */
    INFER_CHAT_PHI3 = 9,             /* <|assistant|> + <|end|>: Phi-3, Phi-3.5, Phi-4-mini */
    INFER_CHAT_PHI4 = 10,            /* <|im_start|>role<|im_sep|>: Phi-4 */
    INFER_CHAT_GRANITE = 11,         /* <|start_of_role|>: Granite 3.x, 4.x */
    INFER_CHAT_DEEPSEEK3 = 12,       /* <｜User｜> <｜Assistant｜>: DeepSeek-V3, R1 and its distills */
} infer_chat_family;

/* A byte range of a text. */
typedef struct infer_text_span {
    size_t off, len;
} infer_text_span;

typedef struct infer_chat_msg {
    const char *role;    /* "system" (first only), "user", "assistant" */
    const char *content; /* an assistant's text exactly as generated, without the end-of-turn token */
} infer_chat_msg;

/* Family for a model: override_name (a family name or a template text; may
 * be NULL) wins, then the model's template, architecture and vocabulary.
 * When nothing decides (or the override is unknown) the result is chatml,
 * *warned (may be NULL) is set and infer_last_error() says why.  g may be
 * NULL when override_name is given. */
infer_chat_family infer_chat_detect(const infer_gguf *g, const char *override_name, bool *warned);
const char *infer_chat_family_name(infer_chat_family f);
/* false for an unknown name. */
bool infer_chat_family_from_name(const char *name, infer_chat_family *out);
/* Render msgs, plus the generation prompt when add_gen, as text to tokenize
 * with special tokens parsed (BOS is the tokenizer's to add).  Caller
 * free()s.  NULL with infer_last_error() on an empty list, NULL role or
 * content, unknown role, a system message not first, or (gemma, llama2,
 * mistral*) turns that do not alternate user/assistant from a user turn.
 * Incremental: with m[k-1] a user turn, the rendering of m[0..k] with add_gen,
 * followed by the answer as generated, is a prefix of the rendering of any
 * longer conversation that continues with that answer. */
char *infer_chat_format(infer_chat_family f, const infer_chat_msg *msgs, size_t n, bool add_gen);
/* Render msgs as infer_chat_format does and tokenize the result for m, BOS
 * as the model asks: the template's markers become special tokens, message
 * content never does (a user who types "<end_of_turn>" gets that text, not
 * the control token).  *out is malloc'ed (the caller frees it).  Returns the
 * token count, or a negative infer_status with infer_last_error(). */
int64_t infer_model_tokenize_chat(const infer_model *m, infer_chat_family f, const infer_chat_msg *msgs, size_t n,
                                  bool add_gen, int32_t **out);
/* Append the tokens of text (special-token text parsed, no BOS) to the n
 * tokens of *toks (malloc'ed; realloc'ed here).  Returns the new count, or
 * a negative infer_status with *toks and its n tokens unchanged. */
int64_t infer_model_tokenize_append(const infer_model *m, const char *text, int32_t **toks, int64_t n);
/* End-of-turn marker texts (NULL-terminated): generation stops on the tokens
 * they name as well as on EOS; markers missing from the vocabulary are to be
 * skipped. */
const char *const *infer_chat_eot_markers(infer_chat_family f);

/* -------------------------------------------------- reasoning (thinking) */

/* Thinking models (Qwen3, DeepSeek-R1 and its distills, SmolLM3, ...) write
 * their reasoning between two markers before the answer.  The reasoning is
 * not the answer: the server returns it as reasoning_content, `infer chat`
 * hides it.
 *
 * The markers of g's model ("<think>" / "</think>", "[THINK]" / "[/THINK]";
 * static strings), from its chat template, else from its vocabulary.  False
 * when it has none (then its output is all answer); g may be NULL. */
bool infer_chat_reasoning_markers(const infer_gguf *g, const char **open, const char **close);
/* Does the chat template (override_tmpl when it is given, e.g. --chat-template
 * TEXT, else g's) end its generation prompt with the opening marker `open`
 * and a newline, as Qwen3's -Thinking-2507 files and DeepSeek-R1 do?  Then
 * the prompt is to end with them (infer_model_tokenize_append) and the
 * output starts inside the reasoning (infer_reasoning_new's in_reasoning),
 * as llama.cpp's thinking_forced_open. */
bool infer_chat_reasoning_forced(const infer_gguf *g, const char *override_tmpl, const char *open);
/* The text that ends the prompt of a turn asked not to think (Ollama's
 * "think": false, enable_thinking = false), as llama.cpp renders it: after a
 * template that opens the reasoning itself (forced), open "\n" close; after
 * one with Qwen3's enable_thinking switch, open "\n\n" close "\n\n".  Into
 * buf (n bytes, 64 is plenty); false when the template (override_tmpl, else
 * g's) has no way to turn thinking off. */
bool infer_chat_reasoning_off(const infer_gguf *g, const char *override_tmpl, const char *open, const char *close,
                              bool forced, char *buf, size_t n);

/* Splits one generated answer, fed as it streams, into reasoning and answer
 * text: whitespace before the opening marker is skipped, the reasoning is
 * trimmed, whitespace after the closing marker is skipped; output that does
 * not start with the opening marker is all answer, verbatim; output that
 * ends inside the reasoning is all reasoning.  in_reasoning: the prompt
 * already opened the reasoning (the generation prompt ends with the marker). */
typedef struct infer_reasoning infer_reasoning;
/* NULL with infer_last_error() for empty markers (or longer than 31 bytes)
 * or no memory. */
infer_reasoning *infer_reasoning_new(const char *open, const char *close, bool in_reasoning);
/* The same for a prompt that closed the reasoning (it ends with
 * infer_chat_reasoning_off's text): whitespace, then all answer. */
infer_reasoning *infer_reasoning_new_closed(const char *open, const char *close);
void infer_reasoning_free(infer_reasoning *r);
/* Feed the next n bytes of output (final: it is complete; held-back text is
 * released).  *reasoning / *content get the text of each side that became
 * certain with this call (not NUL-terminated, possibly empty; owned by r,
 * valid until the next call).  Concatenated over all calls they are the
 * whole split.  INFER_ERR_NOMEM leaves both empty. */
infer_status infer_reasoning_push(infer_reasoning *r, const char *text, size_t n, bool final,
                                  const char **reasoning, size_t *n_reasoning, const char **content,
                                  size_t *n_content);
/* The answer of an assistant turn sent back whole (reasoning included):
 * what follows the last closing marker, whitespace skipped, i.e. what the
 * splitter returns as the answer; content itself when it has no closing
 * marker.  A pointer into content.  Qwen3's and DeepSeek-R1's templates drop
 * old reasoning the same way. */
const char *infer_reasoning_answer(const char *content, const char *close);

/* ------------------------------------------------------------- tokenizer */

/* A model's tokenizer, built from the `tokenizer.ggml.*` metadata: the
 * SentencePiece (`llama`), byte-level BPE (`gpt2`) and WordPiece (`bert`) families, giving the
 * same ids as llama.cpp.  Self-contained once loaded (the GGUF handle may be
 * closed) and safe to share between threads. */
typedef struct infer_tokenizer infer_tokenizer;

/* On error *out is NULL and infer_last_error() names the missing or
 * inconsistent key. */
infer_status infer_tokenizer_load(infer_tokenizer **out, const infer_gguf *g);
void infer_tokenizer_free(infer_tokenizer *t);
int32_t infer_tokenizer_n_vocab(const infer_tokenizer *t);
int32_t infer_tokenizer_bos(const infer_tokenizer *t); /* -1 if none */
int32_t infer_tokenizer_eos(const infer_tokenizer *t); /* -1 if none */
int32_t infer_tokenizer_eot(const infer_tokenizer *t); /* -1 if none */
/* End of generation (EOS, EOT, <end_of_turn>, <|im_end|>, ...)? */
bool infer_tokenizer_is_eog(const infer_tokenizer *t, int32_t id);
/* Does tokenizing with add_special prepend BOS? */
bool infer_tokenizer_add_bos(const infer_tokenizer *t);
const char *infer_tokenizer_model(const infer_tokenizer *t); /* "llama", "gpt2" or "bert" */
const char *infer_tokenizer_pre(const infer_tokenizer *t);   /* BPE pre-tokenizer, "" for SPM */
/* What the loader worked around (unknown pre-tokenizer, ...), or NULL. */
const char *infer_tokenizer_warning(const infer_tokenizer *t);
/* Id of the vocabulary entry spelled exactly `piece`, or -1. */
int32_t infer_tokenizer_find(const infer_tokenizer *t, const char *piece);

/* Tokenize text[0..len) (any bytes).  add_special adds BOS/EOS as the
 * metadata asks; parse_special turns special-token text ("<start_of_turn>")
 * into its id (chat formatting does, user text by default does not).  Writes
 * up to cap ids and returns the full count, which may exceed cap (call again
 * with a bigger buffer), or a negative infer_status. */
int64_t infer_tokenize(const infer_tokenizer *t, const char *text, size_t len, bool add_special,
                       bool parse_special, int32_t *out, int64_t cap);
/* infer_tokenize with parse_special, except that no control token is matched
 * where it would overlap one of the literal byte ranges (sorted, disjoint):
 * text there is tokenized as parse_special=false would. */
int64_t infer_tokenize_literal(const infer_tokenizer *t, const char *text, size_t len, bool add_special,
                               const infer_text_span *literal, size_t n_literal, int32_t *out, int64_t cap);
/* Raw vocabulary entry of a token (not NUL-terminated), NULL for a bad id. */
const char *infer_token_piece(const infer_tokenizer *t, int32_t id, size_t *len);
/* Text of one token (control tokens are "" unless special).  Writes at most
 * cap bytes, no NUL; returns the full length or INFER_ERR_INVALID. */
int64_t infer_token_to_text(const infer_tokenizer *t, int32_t id, bool special, char *buf, size_t cap);
/* Text of a token sequence, as llama.cpp's llama_detokenize.  Writes at most
 * cap bytes, no NUL; returns the full length or a negative infer_status
 * (INFER_ERR_INVALID names a bad id).  For streaming output see infer_detok. */
int64_t infer_detokenize(const infer_tokenizer *t, const int32_t *ids, size_t n, bool special, char *out,
                         size_t cap);

/* ------------------------------------------------------------ embeddings */

/* A sentence-embedding model (`general.architecture = bert`: all-MiniLM,
 * bge, ...), run as llama.cpp runs it: WordPiece tokens with [CLS] and
 * [SEP], the BERT encoder, mean / [CLS] / last-token pooling as
 * bert.pooling_type says, then L2 normalisation.  Weights stay in the
 * read-only map.  One embedder may be used from several threads at once.
 *
 *     infer_embedder *e;
 *     if (infer_embedder_open(&e, "all-minilm-l6-v2-f16.gguf", NULL) != INFER_OK) ...
 *     const char *texts[] = {"will it rain tomorrow?"};
 *     float v[384];                        (infer_embedder_n_embd(e) floats per input)
 *     infer_embed(e, texts, NULL, 1, v, NULL);
 */
typedef struct infer_embedder infer_embedder;

typedef struct infer_embedder_params {
    unsigned flags; /* INFER_GGUF_OPEN_MLOCK, INFER_GGUF_OPEN_SMALL_PAGES */
    /* Most tokens of one input ([CLS] and [SEP] included); longer inputs are
     * truncated to it.  0: the model's sentence-transformers maximum
     * (`sentence_transformers.max_seq_length`, 256 for all-MiniLM-L6-v2) when
     * the file has it, else bert.context_length.  Never above the latter. */
    int n_ctx;
    int n_threads; /* threads of each infer_embed call; 0: physical cores */
} infer_embedder_params;

/* What happened to one input. */
typedef struct infer_embed_info {
    int32_t n_tokens;    /* tokens embedded ([CLS] and [SEP] included) */
    int32_t n_tokens_in; /* tokens of the whole input, before truncation */
    bool truncated;      /* n_tokens < n_tokens_in: only the first part was embedded */
} infer_embed_info;

/* Map and bind an embedding model and its tokenizer.  params may be NULL.
 * Errors name the missing key or tensor; a decoder model is refused with
 * INFER_ERR_UNSUPPORTED. */
infer_status infer_embedder_open(infer_embedder **out, const char *path, const infer_embedder_params *params);
void infer_embedder_close(infer_embedder *e);
int infer_embedder_n_embd(const infer_embedder *e);     /* floats per embedding */
int infer_embedder_n_ctx(const infer_embedder *e);      /* truncation limit in tokens */
const char *infer_embedder_pooling(const infer_embedder *e); /* "mean", "cls" or "last" */
const char *infer_embedder_name(const infer_embedder *e);    /* general.name, or the file name */
const infer_gguf *infer_embedder_gguf(const infer_embedder *e);
const infer_tokenizer *infer_embedder_tokenizer(const infer_embedder *e);
double infer_embedder_load_seconds(const infer_embedder *e);

/* Embed n texts (texts[i] of lens[i] bytes, or NUL-terminated when lens is
 * NULL), all in as few encoder batches as fit: out gets n rows of n_embd
 * floats, unit length.  An input longer than n_ctx tokens is truncated (its
 * first n_ctx - 1 tokens and [SEP]) and info[i].truncated says so; info may
 * be NULL.  Errors: INFER_ERR_INVALID (NULL text), INFER_ERR_NOMEM; nothing
 * about the text itself is an error (empty text is [CLS] [SEP]). */
infer_status infer_embed(infer_embedder *e, const char *const *texts, const size_t *lens, size_t n, float *out,
                         infer_embed_info *info);

/* -------------------------------------------------------- response cache */

/* The store of the response cache's exact tier (`infer serve
 * --semantic-cache`): complete answers under a 32-byte key that the caller
 * derives from the whole canonical request, in one SQLite file (WAL), with a
 * TTL from creation and LRU eviction past max_entries / max_bytes.  A file
 * that is not ours or is damaged is moved aside and replaced, never read; an
 * unwritable one turns storing off (lookups go on).  Thread-safe. */
typedef struct infer_respcache infer_respcache;

typedef struct infer_respcache_params {
    const char *path;     /* the database file */
    double ttl_seconds;   /* <= 0: 24 h */
    int64_t max_entries;  /* <= 0: 100,000 */
    uint64_t max_bytes;   /* answer bytes; 0: 256 MiB */
} infer_respcache_params;

typedef struct infer_respcache_stats {
    uint64_t entries, bytes;          /* unexpired rows now */
    uint64_t hits, misses, stores, store_errors, expired, evicted, purged, set_aside;
    uint64_t hits_semantic;           /* infer_respcache_get_similar() hits */
    uint64_t evicted_model;           /* rows dropped because another embedding model made them */
    uint64_t semantic_rows, semantic_buckets; /* the semantic index now */
    bool storing;                     /* false after a write failure or on a read-only file */
    double ttl_seconds;
} infer_respcache_stats;

/* What a row carries for the semantic tier: the bucket (hash of everything
 * of the request but its last question), the normalised question
 * (infer_semgate_normalize) and its embedding (unit length, the n_embd of
 * infer_respcache_set_embedder). */
typedef struct infer_respcache_sem {
    const uint8_t *bucket; /* 32 bytes */
    const char *question;
    const float *emb;
} infer_respcache_sem;

/* The outcome of a semantic lookup, hit or not. */
typedef struct infer_respcache_match {
    float nearest;          /* highest cosine in the bucket; -1: the bucket is empty */
    bool nearest_agrees;    /* the content gate accepts the nearest question */
    char nearest_why[96];   /* else the rule it failed */
    float best_agreeing;    /* highest cosine the gate accepts (-1: none) */
    float similarity;       /* of the hit */
    int candidates;         /* unexpired rows compared */
    double search_seconds;  /* scan, gate and answer read */
} infer_respcache_match;

/* note (may be NULL) gets what was worked around: a file set aside, storing
 * off.  Errors: the file cannot be opened at all (INFER_ERR_IO). */
infer_status infer_respcache_open(infer_respcache **out, const infer_respcache_params *p, char *note,
                                  size_t note_cap);
void infer_respcache_close(infer_respcache *c);
/* Hit: true, *answer malloc'ed (NUL-terminated, *len bytes; caller frees),
 * *age the seconds since it was stored.  Expired entries are misses. */
bool infer_respcache_get(infer_respcache *c, const uint8_t key[32], char **answer, size_t *len, double *age);
/* Store (replacing an entry of the same key).  A write failure is returned
 * and, for a full disk or read-only file, turns storing off. */
infer_status infer_respcache_put(infer_respcache *c, const uint8_t key[32], const char *tenant, const char *answer,
                                 size_t len, const infer_respcache_sem *sem);
/* Turn the semantic tier on for an embedding model (identity: any string
 * that changes when the vectors would, e.g. the file's sha256): rows of
 * another model are deleted, the unexpired rows of this one are loaded into
 * per-bucket arrays.  note (may be NULL) gets a sentence on what was loaded
 * and dropped, appended.  sem rows given to infer_respcache_put() before
 * this are stored for the exact tier only. */
infer_status infer_respcache_set_embedder(infer_respcache *c, const char *model_identity, int n_embd, char *note,
                                          size_t note_cap);
/* Tier 2: among the unexpired rows of `bucket`, the most similar stored
 * question (dot product with emb) that the content gate accepts against
 * `question` (normalised); a hit when its cosine is >= threshold.  Hit:
 * true, *answer malloc'ed (caller frees), *age in seconds.  m is filled in
 * either way (the nearest similarity, also on a miss). */
bool infer_respcache_get_similar(infer_respcache *c, const uint8_t bucket[32], const float *emb, const char *question,
                                 float threshold, char **answer, size_t *len, double *age, infer_respcache_match *m);
/* Delete every entry of a tenant; returns how many, or -1. */
int64_t infer_respcache_purge(infer_respcache *c, const char *tenant);
void infer_respcache_get_stats(infer_respcache *c, infer_respcache_stats *out);

/* ------------------------------------------- semantic cache: content gate */

/* The text a question is embedded and gated as: ASCII lower case,
 * contractions expanded ("don't" -> "do not"), punctuation dropped (not
 * inside numbers: 7:30), filler words and request openers ("please", "can
 * you") dropped.  Writes at most cap bytes (NUL included) and returns the
 * length; what does not fit is cut at a word. */
size_t infer_semgate_normalize(const char *text, size_t len, char *out, size_t cap);
/* May the answer stored for question a answer question b?  Both normalised.
 * True when they agree on numbers (as a sequence), times of day, days,
 * negation, polarity words, question words, pronouns and content words, and
 * their shared entity-like words come in the same order.  Otherwise false,
 * with the first rule that failed in why (may be NULL). */
bool infer_semgate_agree(const char *a, const char *b, char *why, size_t why_cap);

#ifdef __cplusplus
}
#endif
#endif /* INFER_H */
