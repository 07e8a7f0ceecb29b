/*
 * cache_disk.c - the disk tier of the prefix cache (see prefix.h): one
 * self-describing, checksummed file per KV block under
 * DIR/infer-kv-<model fingerprint>/, an in-memory index rebuilt from the
 * file headers at start, reads verified against the request's token prefix.
 *
 * File layout (little-endian), written to a temporary name then renamed:
 *
 *     struct kvb_header       112 bytes (below)
 *     salt                    salt_len bytes, no NUL
 *     prefix tokens           (depth + 1) * block_tokens int32: every token
 *                             from position 0 to the end of this block
 *     data                    block_bytes: the arena block as is (F16 or Q8_0 K/V)
 *
 * Every byte read back is hostile: sizes are checked against the file size
 * before anything is allocated or read, the header is covered by its own
 * crc32c and the data by another.  A file that fails is never used.
 */
#include "prefix.h"

#include "../../kernels/types.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the KV disk tier writes little-endian files; add byte swapping for this host"
#endif

#define KVB_MAGIC "INFERKV"
#define KVB_VERSION 2u
#define KVB_TYPE_F16 1u /* K and V F16; 2: K Q8_0, 3: V Q8_0, 4: both Q8_0 */
#define KVB_MAX_SALT 4096u
#define KVB_MAX_DEPTH (1u << 20)

/* The header's code for the shape's K and V element types. */
static uint32_t kvb_type(const struct kv_shape *s)
{
    return KVB_TYPE_F16 + (s->type_k == GGML_TYPE_Q8_0 ? 1u : 0u) + (s->type_v == GGML_TYPE_Q8_0 ? 2u : 0u);
}

struct kvb_header {
    char magic[8];          /* "INFERKV\0" */
    uint32_t version;
    uint32_t header_bytes;  /* this struct + salt + prefix tokens */
    uint8_t fingerprint[16];
    uint8_t hash[16];       /* the block's chained hash (lo, hi) */
    uint8_t parent_hash[16]; /* its parent's (or the root's) */
    uint32_t n_layer, n_head_kv, head_dim, block_tokens;
    uint32_t kv_type;
    uint32_t depth;
    uint32_t salt_len;
    uint32_t data_crc;      /* crc32c of the data */
    uint64_t block_bytes;
    uint32_t header_crc;    /* crc32c of this struct (this field 0), the salt and the prefix */
    uint32_t reserved;
};
_Static_assert(sizeof(struct kvb_header) == 112, "kvb_header is 112 bytes on disk");

struct disk_entry {
    struct prefix_hash h, ph; /* the block's hash and its parent's */
    int32_t *tokens;   /* (bt) the block's own tokens */
    int32_t depth;
    int32_t next;      /* bucket chain, or free list */
    char *salt;        /* NULL when the entry is free */
    uint64_t bytes;    /* file size */
    double last_use;   /* seconds since the epoch */
};

struct disk_tier {
    char *dir;
    uint8_t fp[16];
    struct kv_shape shape;
    uint64_t block_bytes;
    struct disk_entry *e;
    int32_t cap, n, free_head;
    int32_t *buckets;
    uint32_t mask;
    struct disk_stats st;
    bool write_warned;  /* a failed write has been reported (once per tier: a full disk would repeat it) */
    prefix_log_fn log;
    void *log_ctx;
};

static void warn(struct disk_tier *d, const char *fmt, ...) INFER_PRINTF(2, 3);
static void warn(struct disk_tier *d, const char *fmt, ...)
{
    char msg[768];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (d->log)
        d->log(d->log_ctx, msg);
    else
        fprintf(stderr, "warning: %s\n", msg);
}

static double now_epoch(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void hex(char *out, const uint8_t *b, size_t n)
{
    static const char digits[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = digits[b[i] >> 4];
        out[2 * i + 1] = digits[b[i] & 15];
    }
    out[2 * n] = '\0';
}

static void hash_bytes(struct prefix_hash h, uint8_t out[16])
{
    memcpy(out, &h.lo, 8);
    memcpy(out + 8, &h.hi, 8);
}

/* "<dir>/<hash hex>-<depth>.kvb" */
static void entry_path(const struct disk_tier *d, struct prefix_hash h, int32_t depth, char *out, size_t n)
{
    uint8_t b[16];
    char hx[33];
    hash_bytes(h, b);
    hex(hx, b, 16);
    snprintf(out, n, "%s/%s-%d.kvb", d->dir, hx, depth);
}

static uint32_t bucket_of(const struct disk_tier *d, struct prefix_hash h, int32_t depth)
{
    return (uint32_t)((h.lo ^ (uint64_t)depth * 0x9e3779b97f4a7c15ull) & d->mask);
}

static infer_status index_grow(struct disk_tier *d)
{
    int32_t cap = d->cap ? d->cap * 2 : 256;
    struct disk_entry *ne = realloc(d->e, (size_t)cap * sizeof(*ne));
    if (!ne)
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    d->e = ne;
    for (int32_t i = d->cap; i < cap; i++) {
        d->e[i].salt = NULL;
        d->e[i].tokens = NULL;
        d->e[i].next = i + 1 < cap ? i + 1 : d->free_head;
    }
    d->free_head = d->cap;
    int32_t *nb = malloc((size_t)cap * sizeof(int32_t));
    if (!nb)
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    free(d->buckets);
    d->buckets = nb;
    d->mask = (uint32_t)cap - 1;
    d->cap = cap;
    for (int32_t i = 0; i < cap; i++)
        d->buckets[i] = -1;
    for (int32_t i = 0; i < cap; i++)
        if (d->e[i].salt) {
            uint32_t b = bucket_of(d, d->e[i].h, d->e[i].depth);
            d->e[i].next = d->buckets[b];
            d->buckets[b] = i;
        }
    return INFER_OK;
}

static int32_t entry_find(const struct disk_tier *d, struct prefix_hash h, int32_t depth)
{
    if (!d->cap)
        return -1;
    for (int32_t i = d->buckets[bucket_of(d, h, depth)]; i >= 0; i = d->e[i].next)
        if (prefix_hash_eq(d->e[i].h, h) && d->e[i].depth == depth)
            return i;
    return -1;
}

static int32_t entry_add(struct disk_tier *d, struct prefix_hash h, struct prefix_hash ph, int32_t depth,
                         const char *salt, const int32_t *block_tokens, uint64_t bytes, double last_use)
{
    if (d->free_head < 0 && index_grow(d))
        return -1;
    char *s = strdup(salt);
    int32_t *t = malloc((size_t)d->shape.block_tokens * sizeof(int32_t));
    if (!s || !t) {
        free(s);
        free(t);
        return -1;
    }
    memcpy(t, block_tokens, (size_t)d->shape.block_tokens * sizeof(int32_t));
    int32_t i = d->free_head;
    d->free_head = d->e[i].next;
    struct disk_entry *e = &d->e[i];
    e->h = h;
    e->ph = ph;
    e->tokens = t;
    e->depth = depth;
    e->salt = s;
    e->bytes = bytes;
    e->last_use = last_use;
    uint32_t b = bucket_of(d, h, depth);
    e->next = d->buckets[b];
    d->buckets[b] = i;
    d->n++;
    d->st.n_files++;
    d->st.bytes += bytes;
    return i;
}

/* Forget entry i; delete its file when unlink_file. */
static void entry_drop(struct disk_tier *d, int32_t i, bool unlink_file)
{
    struct disk_entry *e = &d->e[i];
    if (unlink_file) {
        char path[4096];
        entry_path(d, e->h, e->depth, path, sizeof(path));
        unlink(path);
    }
    int32_t *p = &d->buckets[bucket_of(d, e->h, e->depth)];
    while (*p != i)
        p = &d->e[*p].next;
    *p = e->next;
    free(e->salt);
    free(e->tokens);
    e->salt = NULL;
    e->tokens = NULL;
    e->next = d->free_head;
    d->free_head = i;
    d->n--;
    d->st.n_files--;
    d->st.bytes -= e->bytes;
}

static uint64_t expected_header_bytes(uint32_t salt_len, uint32_t depth, uint32_t bt)
{
    return sizeof(struct kvb_header) + (uint64_t)salt_len + ((uint64_t)depth + 1) * bt * sizeof(int32_t);
}

/* Check a header against this tier and the file size; on failure write why. */
static bool header_ok(const struct disk_tier *d, const struct kvb_header *h, uint64_t file_size, char *why,
                      size_t n)
{
    if (memcmp(h->magic, KVB_MAGIC, 8) != 0) {
        snprintf(why, n, "not a KV block file (bad magic)");
        return false;
    }
    if (h->version != KVB_VERSION) {
        snprintf(why, n, "unsupported version %u", h->version);
        return false;
    }
    if (memcmp(h->fingerprint, d->fp, 16) != 0) {
        snprintf(why, n, "written for another model (fingerprint differs)");
        return false;
    }
    if (h->n_layer != (uint32_t)d->shape.n_layer || h->n_head_kv != (uint32_t)d->shape.n_head_kv ||
        h->head_dim != (uint32_t)d->shape.head_dim || h->block_tokens != (uint32_t)d->shape.block_tokens ||
        h->kv_type != kvb_type(&d->shape) || h->block_bytes != d->block_bytes) {
        snprintf(why, n, "KV shape or type differs (blocks of %u tokens, %llu bytes)", h->block_tokens,
                 (unsigned long long)h->block_bytes);
        return false;
    }
    if (h->salt_len > KVB_MAX_SALT || h->depth >= KVB_MAX_DEPTH ||
        ((uint64_t)h->depth + 1) * h->block_tokens > ((uint64_t)1 << 22) ||
        h->header_bytes != expected_header_bytes(h->salt_len, h->depth, h->block_tokens)) {
        snprintf(why, n, "inconsistent header sizes");
        return false;
    }
    if (file_size != (uint64_t)h->header_bytes + h->block_bytes) {
        snprintf(why, n, "truncated or padded: %llu bytes, expected %llu", (unsigned long long)file_size,
                 (unsigned long long)h->header_bytes + h->block_bytes);
        return false;
    }
    return true;
}

static bool read_full(int fd, void *buf, size_t n, uint64_t off)
{
    uint8_t *p = buf;
    while (n > 0) {
        ssize_t r = pread(fd, p, n, (off_t)off);
        if (r <= 0) {
            if (r < 0 && errno == EINTR)
                continue;
            return false;
        }
        p += r;
        n -= (size_t)r;
        off += (uint64_t)r;
    }
    return true;
}

static bool write_full(int fd, const void *buf, size_t n)
{
    const uint8_t *p = buf;
    while (n > 0) {
        ssize_t r = write(fd, p, n);
        if (r <= 0) {
            if (r < 0 && errno == EINTR)
                continue;
            return false;
        }
        p += r;
        n -= (size_t)r;
    }
    return true;
}

/* Read and verify the header and its tail (salt, prefix) of an open file;
 * *tail (caller frees) gets salt then prefix.  Returns false with why. */
static bool read_header(const struct disk_tier *d, int fd, struct kvb_header *h, uint8_t **tail, char *why,
                        size_t n)
{
    *tail = NULL;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !read_full(fd, h, sizeof(*h), 0)) {
        snprintf(why, n, "unreadable or shorter than a header");
        return false;
    }
    if (!header_ok(d, h, (uint64_t)sb.st_size, why, n))
        return false;
    size_t tail_len = h->header_bytes - sizeof(*h);
    uint8_t *t = malloc(tail_len ? tail_len : 1);
    if (!t || !read_full(fd, t, tail_len, sizeof(*h))) {
        free(t);
        snprintf(why, n, t ? "unreadable header" : "out of memory");
        return false;
    }
    struct kvb_header z = *h;
    z.header_crc = 0;
    uint32_t crc = crc32c(crc32c(0, &z, sizeof(z)), t, tail_len);
    if (crc != h->header_crc) {
        free(t);
        snprintf(why, n, "header checksum mismatch");
        return false;
    }
    *tail = t;
    return true;
}

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static void scan(struct disk_tier *d)
{
    DIR *dir = opendir(d->dir);
    if (!dir)
        return;
    struct dirent *de;
    char path[4096], why[256];
    double now = now_epoch();
    while ((de = readdir(dir))) {
        if (de->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", d->dir, de->d_name);
        if (strstr(de->d_name, ".kvb.tmp.")) {
            /* a write that never completed (crash); leave fresh ones to their writer */
            struct stat sb;
            if (stat(path, &sb) == 0 && now - (double)sb.st_mtime > 600)
                unlink(path);
            continue;
        }
        if (!ends_with(de->d_name, ".kvb"))
            continue;
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        struct kvb_header h;
        uint8_t *tail;
        struct stat sb;
        bool ok = read_header(d, fd, &h, &tail, why, sizeof(why)) && fstat(fd, &sb) == 0;
        close(fd);
        if (!ok) {
            warn(d, "KV cache file %s ignored: %s", path, why);
            d->st.errors++;
            continue;
        }
        struct prefix_hash hh, ph;
        memcpy(&hh.lo, h.hash, 8);
        memcpy(&hh.hi, h.hash + 8, 8);
        memcpy(&ph.lo, h.parent_hash, 8);
        memcpy(&ph.hi, h.parent_hash + 8, 8);
        int32_t *btok = malloc((size_t)h.block_tokens * sizeof(int32_t));
        if (btok)
            memcpy(btok, tail + h.salt_len + (size_t)h.depth * h.block_tokens * sizeof(int32_t),
                   (size_t)h.block_tokens * sizeof(int32_t));
        char expect[4096];
        entry_path(d, hh, (int32_t)h.depth, expect, sizeof(expect));
        char *salt = malloc(h.salt_len + 1);
        if (salt) {
            memcpy(salt, tail, h.salt_len);
            salt[h.salt_len] = '\0';
        }
        free(tail);
        if (!salt || !btok || strlen(salt) != h.salt_len || strcmp(expect, path) != 0 ||
            entry_find(d, hh, (int32_t)h.depth) >= 0) {
            if (salt && btok) {
                warn(d, "KV cache file %s ignored: its name does not match its header", path);
                d->st.errors++;
            }
            free(salt);
            free(btok);
            continue;
        }
        entry_add(d, hh, ph, (int32_t)h.depth, salt, btok, (uint64_t)sb.st_size, (double)sb.st_mtime);
        free(salt);
        free(btok);
    }
    closedir(dir);
}

/* Delete least recently used files (deepest first among equals) until
 * `incoming` more bytes fit under max_bytes. */
static void make_room(struct disk_tier *d, uint64_t incoming)
{
    while (d->n > 0 && d->st.bytes + incoming > d->st.max_bytes) {
        int32_t best = -1;
        for (int32_t i = 0; i < d->cap; i++) {
            if (!d->e[i].salt)
                continue;
            if (best < 0 || d->e[i].last_use < d->e[best].last_use ||
                (d->e[i].last_use == d->e[best].last_use && d->e[i].depth > d->e[best].depth))
                best = i;
        }
        entry_drop(d, best, true);
    }
}

infer_status disk_open(struct disk_tier **out, const char *dir, const uint8_t fp[16], const struct kv_arena *a,
                       uint64_t max_bytes, prefix_log_fn log, void *log_ctx)
{
    *out = NULL;
    struct disk_tier *d = calloc(1, sizeof(*d));
    if (!d)
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    d->log = log;
    d->log_ctx = log_ctx;
    memcpy(d->fp, fp, 16);
    d->shape = a->s;
    d->block_bytes = a->block_bytes;
    d->st.max_bytes = max_bytes;
    d->free_head = -1;
    char fph[33];
    hex(fph, fp, 16);
    size_t n = strlen(dir) + 64;
    d->dir = malloc(n);
    if (!d->dir || index_grow(d)) {
        disk_close(d);
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    }
    if (mkdir(dir, 0755) != 0 && errno != EEXIST) {
        infer_status st = infer_error(INFER_ERR_IO, "cannot create cache directory %s: %s", dir, strerror(errno));
        disk_close(d);
        return st;
    }
    snprintf(d->dir, n, "%s/infer-kv-%s", dir, fph);
    if (mkdir(d->dir, 0755) != 0 && errno != EEXIST) {
        infer_status st = infer_error(INFER_ERR_IO, "cannot create %s: %s", d->dir, strerror(errno));
        disk_close(d);
        return st;
    }
    scan(d);
    make_room(d, 0);
    *out = d;
    return INFER_OK;
}

void disk_close(struct disk_tier *d)
{
    if (!d)
        return;
    for (int32_t i = 0; i < d->cap; i++) {
        free(d->e[i].salt);
        free(d->e[i].tokens);
    }
    free(d->e);
    free(d->buckets);
    free(d->dir);
    free(d);
}

int32_t disk_find(const struct disk_tier *d, struct prefix_hash h, int32_t depth, const char *salt)
{
    int32_t i = entry_find(d, h, depth);
    return i >= 0 && !strcmp(d->e[i].salt, salt) ? i : -1;
}

int32_t disk_partial(const struct disk_tier *d, struct prefix_hash ph, int32_t depth, const char *salt,
                     const int32_t *tokens, int64_t n, int32_t *k)
{
    *k = 0;
    if (n > d->shape.block_tokens - 1)
        n = d->shape.block_tokens - 1;
    int32_t best = -1;
    /* a scan of the index: once per request, small next to a forward pass */
    for (int32_t i = 0; i < d->cap; i++) {
        const struct disk_entry *e = &d->e[i];
        if (!e->salt || e->depth != depth || !prefix_hash_eq(e->ph, ph) || strcmp(e->salt, salt) != 0)
            continue;
        int32_t j = 0;
        while (j < n && e->tokens[j] == tokens[j])
            j++;
        if (j > *k || (j == *k && j > 0 && e->last_use > d->e[best].last_use)) {
            *k = j;
            best = i;
        }
    }
    return best;
}

const int32_t *disk_block_tokens(const struct disk_tier *d, int32_t i) { return d->e[i].tokens; }

infer_status disk_read(struct disk_tier *d, int32_t i, const int32_t *prefix, int64_t n_verify, const char *salt,
                       void *dst)
{
    if (i < 0 || i >= d->cap || !d->e[i].salt)
        return infer_error(INFER_ERR_INVALID, "no such disk entry");
    struct disk_entry *e = &d->e[i];
    char path[4096], why[256];
    entry_path(d, e->h, e->depth, path, sizeof(path));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        /* removed behind our back (another process trimmed the directory) */
        entry_drop(d, i, false);
        return infer_error(INFER_ERR_NOT_FOUND, "%s: %s", path, strerror(errno));
    }
    struct kvb_header h;
    uint8_t *tail = NULL;
    infer_status st = INFER_OK;
    bool corrupt = false;
    if (!read_header(d, fd, &h, &tail, why, sizeof(why))) {
        corrupt = true;
    } else if (h.depth != (uint32_t)e->depth || h.salt_len != strlen(salt) || memcmp(tail, salt, h.salt_len) ||
               n_verify < 0 || (uint64_t)n_verify > ((uint64_t)h.depth + 1) * h.block_tokens ||
               memcmp(tail + h.salt_len, prefix, (size_t)n_verify * sizeof(int32_t))) {
        /* a hash collision: another prefix under the same name; only a miss */
        st = infer_error(INFER_ERR_NOT_FOUND, "%s holds another prefix", path);
    } else if (!read_full(fd, dst, d->block_bytes, h.header_bytes)) {
        corrupt = true;
        snprintf(why, sizeof(why), "cannot read the data: %s", strerror(errno));
    } else if (crc32c(0, dst, d->block_bytes) != h.data_crc) {
        corrupt = true;
        snprintf(why, sizeof(why), "data checksum mismatch");
    }
    if (!corrupt && !st)
        futimens(fd, NULL); /* the file's mtime is its last use across restarts */
    close(fd);
    free(tail);
    if (corrupt) {
        warn(d, "KV cache file %s ignored and removed: %s", path, why);
        d->st.errors++;
        entry_drop(d, i, true);
        return infer_error(INFER_ERR_FORMAT, "%s: %s", path, why);
    }
    if (st)
        return st;
    e->last_use = now_epoch();
    d->st.reads++;
    d->st.read_bytes += e->bytes;
    return INFER_OK;
}

infer_status disk_write(struct disk_tier *d, struct prefix_hash hash, struct prefix_hash ph, int32_t depth,
                        const char *salt, const int32_t *prefix, const void *data)
{
    if (entry_find(d, hash, depth) >= 0)
        return INFER_OK;
    size_t salt_len = strlen(salt);
    if (salt_len > KVB_MAX_SALT || depth < 0 || (uint32_t)depth >= KVB_MAX_DEPTH)
        return infer_error(INFER_ERR_INVALID, "block not storable (salt or depth too large)");
    struct kvb_header h;
    memset(&h, 0, sizeof(h));
    memcpy(h.magic, KVB_MAGIC, 8);
    h.version = KVB_VERSION;
    h.header_bytes = (uint32_t)expected_header_bytes((uint32_t)salt_len, (uint32_t)depth,
                                                     (uint32_t)d->shape.block_tokens);
    memcpy(h.fingerprint, d->fp, 16);
    hash_bytes(hash, h.hash);
    hash_bytes(ph, h.parent_hash);
    h.n_layer = (uint32_t)d->shape.n_layer;
    h.n_head_kv = (uint32_t)d->shape.n_head_kv;
    h.head_dim = (uint32_t)d->shape.head_dim;
    h.block_tokens = (uint32_t)d->shape.block_tokens;
    h.kv_type = kvb_type(&d->shape);
    h.depth = (uint32_t)depth;
    h.salt_len = (uint32_t)salt_len;
    h.block_bytes = d->block_bytes;
    h.data_crc = crc32c(0, data, d->block_bytes);
    size_t prefix_bytes = ((size_t)depth + 1) * (size_t)d->shape.block_tokens * sizeof(int32_t);
    h.header_crc = crc32c(crc32c(crc32c(0, &h, sizeof(h)), salt, salt_len), prefix, prefix_bytes);
    uint64_t bytes = (uint64_t)h.header_bytes + d->block_bytes;
    if (bytes > d->st.max_bytes)
        return infer_error(INFER_ERR_FULL, "disk tier budget smaller than one block");
    make_room(d, bytes);

    char path[4096], tmp[4200];
    entry_path(d, hash, depth, path, sizeof(path));
    snprintf(tmp, sizeof(tmp), "%s.tmp.%ld", path, (long)getpid());
    /* Written under a temporary name and renamed: a reader never sees a
     * partial file, whatever kills the writer or fills the disk. */
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    bool ok = fd >= 0 && write_full(fd, &h, sizeof(h)) && write_full(fd, salt, salt_len) &&
              write_full(fd, prefix, prefix_bytes) && write_full(fd, data, d->block_bytes);
    int err = errno;
    if (fd >= 0 && close(fd) != 0 && ok) {
        ok = false;
        err = errno;
    }
    if (!ok || rename(tmp, path) != 0) {
        if (ok)
            err = errno;
        if (fd >= 0)
            unlink(tmp);
        d->st.write_errors++;
        if (!d->write_warned) {
            d->write_warned = true;
            warn(d, "KV cache disk tier: cannot write %s: %s; blocks that cannot be written stay in memory only "
                    "(warned once; see infer_prefix_cache_disk_write_errors_total)", path, strerror(err));
        }
        return infer_error(INFER_ERR_IO, "cannot write %s: %s", path, strerror(err));
    }
    if (entry_add(d, hash, ph, depth, salt, prefix + (size_t)depth * d->shape.block_tokens, bytes, now_epoch()) < 0)
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    d->st.writes++;
    d->st.write_bytes += bytes;
    return INFER_OK;
}

void disk_get_stats(const struct disk_tier *d, struct disk_stats *out) { *out = d->st; }
const char *disk_path(const struct disk_tier *d) { return d->dir; }
