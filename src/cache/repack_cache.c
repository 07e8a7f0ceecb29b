/*
 * repack_cache.c - weights repacked for the active kernels (kernels/repack.h)
 * in a cache file, keyed by the model's sha256, the kernel variant and the
 * layout version, mapped read-only and shared like the model itself
 * (DESIGN.md: decision 3 and the "prepared kernels" layer).
 *
 * Files, under DIR/repack/ (DIR: infer_model_params.repack_dir, else
 * $INFER_REPACK_DIR, else $XDG_CACHE_HOME/infer, else ~/.cache/infer):
 *
 *   <sha256>-<variant>-L<layout>.bin   the repacked tensors (below)
 *   id-<dev>-<inode>-<size>-<mtime>    the sha256 (64 hex digits) of the
 *                                      model file with that identity, so
 *                                      that a start does not hash the model
 *
 * A cache file, little-endian, written under a temporary name and renamed:
 *
 *   struct rpk_header     128 bytes
 *   struct rpk_entry      n_entries x 64 bytes, one per repacked tensor
 *   zeros                 up to data_offset (a multiple of 4096)
 *   data                  the tensors, each at a multiple of 64 bytes,
 *                         zeros in between, up to the end of the file
 *
 * Everything read back is hostile: the header and the entry table carry a
 * crc32c, every entry must describe exactly the tensor of this model it
 * replaces (offset in the GGUF file, types, shape, size) and lie inside the
 * file, and the data has its own crc32c, checked at every load (one pass
 * over the file, reported as part of the load).  A file that fails is
 * replaced.  Any error of the cache (no directory, read-only disk, disk
 * full) leaves the weights in GGUF's layout with a note saying why; it
 * never fails the load.
 */
#include "model/model.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../../kernels/dispatch.h"
#include "../../kernels/repack.h"
#include "prefix.h"

#if !defined(__BYTE_ORDER__) || __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "the repacked-weight cache writes little-endian files; add byte swapping for this host"
#endif

#define RPK_MAGIC "INFERRPK"
#define RPK_VERSION 1u
#define RPK_MAX_ENTRIES 65536u

struct rpk_header {
    char magic[8];
    uint32_t version;     /* RPK_VERSION: this file format */
    uint32_t layout;      /* REPACK_LAYOUT_VERSION: the byte order of the layouts */
    uint8_t model_sha256[32];
    uint64_t model_size;
    char variant[16];     /* kernel variant, NUL-terminated */
    uint32_t n_entries;
    uint32_t header_crc;  /* crc32c of this header (with this field 0) and the entries */
    uint64_t data_offset;
    uint64_t data_bytes;  /* data_offset + data_bytes = file size */
    uint32_t data_crc;    /* crc32c of the data */
    uint8_t reserved[28];
};
_Static_assert(sizeof(struct rpk_header) == 128, "rpk_header is 128 bytes");

struct rpk_entry {
    uint64_t src_offset;  /* the tensor's data in the GGUF file, from the file start */
    uint32_t base_type;   /* GGUF type */
    uint32_t x4_type;     /* layout (repack.h) */
    int64_t n_in, n_out;
    uint64_t offset;      /* the repacked tensor in this file */
    uint64_t nbytes;
    uint8_t reserved[16];
};
_Static_assert(sizeof(struct rpk_entry) == 64, "rpk_entry is 64 bytes");

/* The weights the active table wants repacked, distinct by data.  A 3-D
 * expert tensor is one entry: its n_expert matrices of rows_e rows each are
 * one matrix of n_expert * rows_e rows, whose x4 layout is each expert's
 * (groups of four rows never cross an expert when rows_e % 4 == 0, which
 * add_cand_exps requires), so expert e's matrix stays at e * stride. */
struct cand {
    struct mat *m[4]; /* the struct mats sharing this tensor (tied output) */
    int n_m;
    struct mat_exps *x[2]; /* or the expert views of it (merged gate_up: two) */
    size_t x_delta[2];     /* bytes from the tensor's start to view k's expert 0 */
    int n_x;
    struct rpk_entry e;
};

static void note(struct repack_state *rs, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note(struct repack_state *rs, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(rs->note, sizeof(rs->note), fmt, ap);
    va_end(ap);
}

static uint64_t up(uint64_t x, uint64_t a) { return (x + a - 1) / a * a; }

static int add_cand(struct cand *c, int n, struct mat *m, const infer_gguf *g)
{
    if (!m->data || m->type >= GGML_TYPE_COUNT)
        return n;
    const uint32_t x4 = kern.types[m->type].repack_type;
    if (!x4 || m->n_out < 4 || m->n_in % (int64_t)ggml_type_traits_get(m->type)->block_size != 0)
        return n;
    const uint64_t src = (uint64_t)((const uint8_t *)m->data - g->base);
    for (int i = 0; i < n; i++)
        if (c[i].e.src_offset == src) {
            if (c[i].n_m < 4 && c[i].n_x == 0)
                c[i].m[c[i].n_m++] = m;
            return n;
        }
    memset(&c[n], 0, sizeof(c[n]));
    c[n].m[0] = m;
    c[n].n_m = 1;
    c[n].e.src_offset = src;
    c[n].e.base_type = m->type;
    c[n].e.x4_type = x4;
    c[n].e.n_in = m->n_in;
    c[n].e.n_out = m->n_out;
    c[n].e.nbytes = ggml_row_size(m->type, m->n_in) * (uint64_t)m->n_out;
    return n + 1;
}

/* An expert tensor starting at `start` (n_expert matrices of the view's
 * stride), bound as view x (whose expert 0 lies at or after start: the up
 * half of a merged gate_up). */
static int add_cand_exps(struct cand *c, int n, struct mat_exps *x, const void *start, int64_t n_expert,
                         const infer_gguf *g)
{
    if (!x->m.data || !start || x->m.type >= GGML_TYPE_COUNT || n_expert < 1)
        return n;
    const uint32_t x4 = kern.types[x->m.type].repack_type;
    const size_t w_row = ggml_row_size(x->m.type, x->m.n_in);
    if (!x4 || !w_row || x->m.n_in % (int64_t)ggml_type_traits_get(x->m.type)->block_size != 0 ||
        x->stride % w_row != 0 || (x->stride / w_row) % 4 != 0)
        return n;
    const size_t delta = (size_t)((const uint8_t *)x->m.data - (const uint8_t *)start);
    if (delta % (4 * w_row) != 0 || delta >= x->stride)
        return n;
    const uint64_t src = (uint64_t)((const uint8_t *)start - g->base);
    for (int i = 0; i < n; i++)
        if (c[i].e.src_offset == src) {
            if (c[i].n_x < 2 && c[i].n_m == 0 && c[i].e.base_type == x->m.type && c[i].e.n_in == x->m.n_in) {
                c[i].x[c[i].n_x] = x;
                c[i].x_delta[c[i].n_x++] = delta;
            }
            return n;
        }
    memset(&c[n], 0, sizeof(c[n]));
    c[n].x[0] = x;
    c[n].x_delta[0] = delta;
    c[n].n_x = 1;
    c[n].e.src_offset = src;
    c[n].e.base_type = x->m.type;
    c[n].e.x4_type = x4;
    c[n].e.n_in = x->m.n_in;
    c[n].e.n_out = (int64_t)(x->stride / w_row) * n_expert;
    c[n].e.nbytes = (uint64_t)x->stride * (uint64_t)n_expert;
    return n + 1;
}

/* The candidates, in a fixed order (so that the entry table can be compared
 * with them); *n_out their count, NULL on allocation failure. */
static struct cand *candidates(struct infer_model *m, int *n_out)
{
    const int max = 1 + 13 * m->c.n_layer;
    struct cand *c = calloc((size_t)max, sizeof(*c));
    if (!c)
        return NULL;
    int n = add_cand(c, 0, &m->w.output, m->gguf);
    for (int il = 0; il < m->c.n_layer; il++) {
        struct layer_weights *l = &m->w.layers[il];
        struct mat *ms[] = {&l->wq,           &l->wk,         &l->wv,          &l->wo,
                            &l->ffn_gate,     &l->ffn_up,     &l->ffn_down,    &l->ffn_gate_shexp,
                            &l->ffn_up_shexp, &l->ffn_down_shexp};
        for (size_t k = 0; k < sizeof(ms) / sizeof(ms[0]); k++)
            n = add_cand(c, n, ms[k], m->gguf);
        /* a merged gate_up is one tensor from the gate view's expert 0; its
         * up half must start on a group of four rows (every matmul over an
         * x4 matrix starts on one: matmul.c's tiles) */
        const int64_t E = m->c.n_expert;
        if (E > 0 && (!l->gate_up_merged || m->c.n_ff_exp % 4 == 0)) {
            n = add_cand_exps(c, n, &l->ffn_gate_exps, l->ffn_gate_exps.m.data, E, m->gguf);
            n = add_cand_exps(c, n, &l->ffn_up_exps,
                              l->gate_up_merged ? l->ffn_gate_exps.m.data : l->ffn_up_exps.m.data, E, m->gguf);
        }
        if (E > 0)
            n = add_cand_exps(c, n, &l->ffn_down_exps, l->ffn_down_exps.m.data, E, m->gguf);
    }
    uint64_t at = 0;
    for (int i = 0; i < n; i++) { /* data offsets, relative to data_offset for now */
        c[i].e.offset = at;
        at = up(at + c[i].e.nbytes, 64);
    }
    *n_out = n;
    return c;
}

static bool cache_dir(const infer_model_params *p, char *out, size_t n)
{
    const char *d = p && p->repack_dir && *p->repack_dir ? p->repack_dir : getenv("INFER_REPACK_DIR");
    int k;
    if (d && *d) {
        k = snprintf(out, n, "%s/repack", d);
    } else if ((d = getenv("XDG_CACHE_HOME")) && *d) {
        k = snprintf(out, n, "%s/infer/repack", d);
    } else if ((d = getenv("HOME")) && *d) {
        k = snprintf(out, n, "%s/.cache/infer/repack", d);
    } else {
        return false;
    }
    return k > 0 && (size_t)k < n;
}

/* mkdir -p */
static int make_dirs(const char *path)
{
    char tmp[1024];
    if (snprintf(tmp, sizeof(tmp), "%s", path) >= (int)sizeof(tmp))
        return ENAMETOOLONG;
    for (char *p = tmp + 1; *p; p++) {
        if (*p != '/')
            continue;
        *p = '\0';
        if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
            return errno;
        *p = '/';
    }
    if (mkdir(tmp, 0755) != 0 && errno != EEXIST)
        return errno;
    return 0;
}

static void to_hex(const uint8_t *d, int n, char *hex)
{
    for (int i = 0; i < n; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

static bool from_hex(const char *hex, uint8_t *d, int n)
{
    for (int i = 0; i < n; i++) {
        unsigned v;
        if (!hex[2 * i] || !hex[2 * i + 1] || sscanf(hex + 2 * i, "%2x", &v) != 1)
            return false;
        d[i] = (uint8_t)v;
    }
    return true;
}

/* Files are written under a temporary name in their directory and renamed
 * into place, so a reader sees a whole file or none: tmp_create makes the
 * temporary file (its name in tmp; -1 with errno), tmp_finish closes it and
 * renames it to path when err is 0, removes it otherwise, and returns the
 * first error (0 or an errno). */
static int tmp_create(const char *dir, char *tmp, size_t n)
{
    snprintf(tmp, n, "%s/.tmp-XXXXXX", dir); /* mkstemp's template */
    return mkstemp(tmp);
}

static int tmp_finish(int fd, const char *tmp, const char *path, int err)
{
    if (close(fd) != 0 && !err)
        err = errno;
    if (!err && rename(tmp, path) != 0)
        err = errno;
    if (err)
        unlink(tmp);
    return err;
}

/* Write `len` bytes to path (via a temporary file). */
static int write_small(const char *dir, const char *path, const void *data, size_t len)
{
    char tmp[1100];
    const int fd = tmp_create(dir, tmp, sizeof(tmp));
    if (fd < 0)
        return errno;
    return tmp_finish(fd, tmp, path, write(fd, data, len) == (ssize_t)len ? 0 : (errno ? errno : EIO));
}

/* The sha256 the id file of the model's identity remembers: 1, 0 when there
 * is none (its name in id), -1 when the file cannot be identified. */
static int id_sha256(const infer_gguf *g, const char *dir, uint8_t sha[32], char *id, size_t n)
{
    struct stat sb;
    if (stat(g->path, &sb) != 0 || (uint64_t)sb.st_size != g->size)
        return -1;
    snprintf(id, n, "%s/id-%llx-%llx-%llx-%lld.%09ld", dir, (unsigned long long)sb.st_dev,
             (unsigned long long)sb.st_ino, (unsigned long long)sb.st_size, (long long)sb.st_mtim.tv_sec,
             (long)sb.st_mtim.tv_nsec);
    FILE *f = fopen(id, "re");
    if (!f)
        return 0;
    char hex[80] = {0};
    const bool ok = fgets(hex, sizeof(hex), f) && strlen(hex) >= 64 && from_hex(hex, sha, 32);
    fclose(f);
    return ok;
}

/* The model's sha256: from the id file of its identity, else hashed from the
 * map (what the weights really are) and remembered. */
static int model_sha256(struct repack_state *rs, const infer_gguf *g, const char *dir, uint8_t sha[32])
{
    char id[1200];
    const int known = id_sha256(g, dir, sha, id, sizeof(id));
    if (known < 0) {
        note(rs, "cannot identify '%s' (changed since it was opened?)", g->path);
        return -1;
    }
    if (known)
        return 0;
    const double t0 = infer_now();
    sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, g->base, g->size);
    sha256_final(&c, sha);
    rs->hash_seconds = infer_now() - t0;
    char hex[65];
    to_hex(sha, 32, hex);
    hex[64] = '\n';
    write_small(dir, id, hex, 65); /* only a shortcut: failing to save it costs a hash next time */
    return 0;
}

static uint32_t header_crc(const struct rpk_header *h, const struct rpk_entry *e, uint32_t n)
{
    struct rpk_header hc = *h;
    hc.header_crc = 0;
    return crc32c(crc32c(0, &hc, sizeof(hc)), e, (size_t)n * sizeof(*e));
}

/* Map the cache file and check it against the model; 0 and the map, or -1
 * (with a note when the file exists but is unusable). */
static int open_cache(struct repack_state *rs, const char *path, const struct rpk_header *want,
                      const struct cand *c, int n, bool huge_ok)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size < sizeof(struct rpk_header)) {
        close(fd);
        note(rs, "'%s' is not a cache file", path);
        return -1;
    }
    bool huge = false;
    const size_t size = (size_t)sb.st_size;
    uint8_t *map = gguf_map_readonly(fd, size, huge_ok, &huge);
    close(fd);
    if (map == MAP_FAILED) {
        note(rs, "cannot map '%s': %s", path, strerror(errno));
        return -1;
    }
    struct rpk_header h;
    memcpy(&h, map, sizeof(h));
    const char *bad = NULL;
    const uint64_t table = sizeof(h) + (uint64_t)n * sizeof(struct rpk_entry);
    if (bad)
        ;
    else if (memcmp(h.magic, RPK_MAGIC, 8) != 0 || h.version != RPK_VERSION)
        bad = "not a cache file of this version";
    else if (h.layout != want->layout || memcmp(h.model_sha256, want->model_sha256, 32) != 0 ||
             h.model_size != want->model_size || memcmp(h.variant, want->variant, sizeof(h.variant)) != 0)
        bad = "made for another model, variant or layout";
    else if (h.n_entries != (uint32_t)n || h.data_offset < table || h.data_offset > size ||
             h.data_bytes != size - h.data_offset)
        bad = "inconsistent sizes";
    else if (header_crc(&h, (const struct rpk_entry *)(map + sizeof(h)), h.n_entries) != h.header_crc)
        bad = "header checksum mismatch";
    for (int i = 0; !bad && i < n; i++) {
        struct rpk_entry e;
        memcpy(&e, map + sizeof(h) + (size_t)i * sizeof(e), sizeof(e));
        if (e.src_offset != c[i].e.src_offset || e.base_type != c[i].e.base_type || e.x4_type != c[i].e.x4_type ||
            e.n_in != c[i].e.n_in || e.n_out != c[i].e.n_out || e.nbytes != c[i].e.nbytes)
            bad = "its tensors are not this model's";
        else if (e.offset < h.data_offset || e.offset % 64 != 0 || e.offset > size || e.nbytes > size - e.offset)
            bad = "a tensor lies outside the file";
    }
    if (!bad && crc32c(0, map + h.data_offset, (size_t)h.data_bytes) != h.data_crc)
        bad = "data checksum mismatch";
    if (bad) {
        munmap(map, size);
        note(rs, "'%s': %s; rebuilding it", path, bad);
        return -1;
    }
    rs->map = map;
    rs->map_size = size;
    rs->huge = huge;
    return 0;
}

/* Repack the candidates into a new cache file at path (via a temporary
 * file and rename).  0, or -1 with a note. */
static int create_cache(struct repack_state *rs, const char *dir, const char *path, struct rpk_header *h,
                        struct cand *c, int n, const infer_gguf *g)
{
    const uint64_t data_offset = up(sizeof(*h) + (uint64_t)n * sizeof(struct rpk_entry), 4096);
    uint64_t data_bytes = 0;
    for (int i = 0; i < n; i++)
        data_bytes = c[i].e.offset + c[i].e.nbytes; /* relative offsets, ascending */
    struct rpk_entry *e = calloc((size_t)n, sizeof(*e));
    uint8_t *buf = NULL;
    size_t buf_size = 0;
    char tmp[1100];
    const int fd = e ? tmp_create(dir, tmp, sizeof(tmp)) : -1;
    int err = !e ? ENOMEM : fd < 0 ? errno : 0;
    uint32_t crc = 0;
    uint64_t at = 0; /* bytes of data written */
    static const uint8_t zeros[64];
    for (int i = 0; i < n && !err; i++) {
        e[i] = c[i].e;
        e[i].offset += data_offset;
        if (c[i].e.nbytes > buf_size) {
            free(buf);
            buf_size = (size_t)c[i].e.nbytes;
            if (!(buf = malloc(buf_size))) {
                err = ENOMEM;
                break;
            }
        }
        repack_x4(c[i].e.x4_type, g->base + c[i].e.src_offset, buf, c[i].e.n_in, c[i].e.n_out);
        const size_t pad = (size_t)(c[i].e.offset - at);
        crc = crc32c(crc32c(crc, zeros, pad), buf, (size_t)c[i].e.nbytes);
        const uint8_t *p = buf;
        for (uint64_t left = c[i].e.nbytes, off = e[i].offset; left > 0 && !err;) {
            const ssize_t w = pwrite(fd, p, left > (1u << 30) ? (1u << 30) : (size_t)left, (off_t)off);
            if (w <= 0) {
                err = w < 0 ? errno : EIO;
                break;
            }
            p += w, off += (uint64_t)w, left -= (uint64_t)w;
        }
        at = c[i].e.offset + c[i].e.nbytes;
    }
    free(buf);
    if (!err) {
        h->n_entries = (uint32_t)n;
        h->data_offset = data_offset;
        h->data_bytes = data_bytes;
        h->data_crc = crc;
        h->header_crc = header_crc(h, e, (uint32_t)n);
        if (pwrite(fd, h, sizeof(*h), 0) != (ssize_t)sizeof(*h) ||
            pwrite(fd, e, (size_t)n * sizeof(*e), sizeof(*h)) != (ssize_t)((size_t)n * sizeof(*e)) ||
            ftruncate(fd, (off_t)(data_offset + data_bytes)) != 0)
            err = errno ? errno : EIO;
        /* Written pages sit in the page cache in small folios, which a map
         * can only use with 4 KiB pages; once on disk, drop them, so that the
         * first read through the (MADV_HUGEPAGE) map brings the file back in
         * 2 MiB folios: decode streams these bytes, and on this machine 4 KiB
         * pages cost ~20% of the read bandwidth (gguf.c). */
        if (!err && fdatasync(fd) == 0)
            posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    }
    free(e);
    if (fd >= 0)
        err = tmp_finish(fd, tmp, path, err);
    if (err) {
        note(rs, "cannot write the cache file in '%s': %s", dir, strerror(err));
        return -1;
    }
    return 0;
}

static void summarize(struct repack_state *rs)
{
    const double mib = (double)rs->bytes / (1 << 20);
    if (!strcmp(rs->state, "none")) {
        snprintf(rs->summary, sizeof(rs->summary), "repack: none (the %s kernels use every weight type as stored)",
                 kern.name);
    } else if (!strcmp(rs->state, "off") || !strcmp(rs->state, "failed")) {
        snprintf(rs->summary, sizeof(rs->summary), "repack: %s (%s); weights used as stored", rs->state, rs->note);
    } else if (!strcmp(rs->state, "hit")) {
        snprintf(rs->summary, sizeof(rs->summary),
                 "repack: %d tensors (%.1f MiB) in the %s layout, cache hit: mapped and checked in %.1f ms (%s)%s",
                 rs->n_tensors, mib, kern.name, rs->seconds * 1e3, rs->path, rs->pages);
    } else {
        snprintf(rs->summary, sizeof(rs->summary),
                 "repack: %d tensors (%.1f MiB) for %s, repacked in %.1f ms (model sha256 %.1f ms), total %.1f ms; "
                 "cached in %s%s%s%s",
                 rs->n_tensors, mib, kern.name, rs->repack_seconds * 1e3, rs->hash_seconds * 1e3, rs->seconds * 1e3,
                 rs->path, rs->pages, rs->note[0] ? "; " : "", rs->note);
    }
}

void model_repack(struct infer_model *m, const infer_model_params *p)
{
    struct repack_state *rs = &m->repack;
    const double t0 = infer_now();
    memset(rs, 0, sizeof(*rs));
    rs->state = "none";
    int n = 0;
    struct cand *c = candidates(m, &n);
    char dir[900], path[1024];
    const char *off = getenv("INFER_NO_REPACK");
    int err;
    if (!c) {
        rs->state = "failed";
        note(rs, "out of memory");
    } else if (n == 0) {
        /* nothing the active kernels want repacked */
    } else if ((p && (p->flags & INFER_MODEL_NO_REPACK)) || (off && *off && strcmp(off, "0") != 0)) {
        rs->state = "off";
        note(rs, p && (p->flags & INFER_MODEL_NO_REPACK) ? "--no-repack" : "INFER_NO_REPACK is set");
    } else if (!cache_dir(p, dir, sizeof(dir))) {
        rs->state = "failed";
        note(rs, "no cache directory: set INFER_REPACK_DIR or HOME");
    } else if ((err = make_dirs(dir)) != 0) {
        rs->state = "failed";
        note(rs, "cannot create '%s': %s", dir, strerror(err));
    } else {
        struct rpk_header h;
        memset(&h, 0, sizeof(h));
        memcpy(h.magic, RPK_MAGIC, 8);
        h.version = RPK_VERSION;
        h.layout = REPACK_LAYOUT_VERSION;
        h.model_size = m->gguf->size;
        snprintf(h.variant, sizeof(h.variant), "%s", kern.name);
        rs->state = "failed";
        if (model_sha256(rs, m->gguf, dir, h.model_sha256) == 0) {
            char hex[65];
            to_hex(h.model_sha256, 32, hex);
            if (snprintf(path, sizeof(path), "%s/%.64s-%.15s-L%u.bin", dir, hex, h.variant, REPACK_LAYOUT_VERSION) >=
                (int)sizeof(path))
                path[0] = '\0';
            memcpy(rs->path, path, sizeof(path));
            const bool huge = m->gguf->huge_advised;
            if (!path[0]) {
                note(rs, "cache directory name too long");
            } else if (open_cache(rs, path, &h, c, n, huge) == 0) {
                rs->state = "hit";
            } else {
                const double t1 = infer_now();
                if (create_cache(rs, dir, path, &h, c, n, m->gguf) == 0) {
                    rs->repack_seconds = infer_now() - t1;
                    char why[sizeof(rs->note)];
                    snprintf(why, sizeof(why), "%s", rs->note);
                    /* map it as a hit would: the check is also the read that
                     * brings the file back in 2 MiB folios (create_cache) */
                    if (open_cache(rs, path, &h, c, n, huge) == 0) {
                        rs->state = "created";
                        snprintf(rs->note, sizeof(rs->note), "%s", why);
                    }
                }
            }
        }
    }
    if (rs->map) {
        const struct rpk_entry *e = (const struct rpk_entry *)((const uint8_t *)rs->map + sizeof(struct rpk_header));
        for (int i = 0; i < n; i++) {
            for (int k = 0; k < c[i].n_m; k++) {
                c[i].m[k]->data = (const uint8_t *)rs->map + e[i].offset;
                c[i].m[k]->type = c[i].e.x4_type;
            }
            for (int k = 0; k < c[i].n_x; k++) {
                c[i].x[k]->m.data = (const uint8_t *)rs->map + e[i].offset + c[i].x_delta[k];
                c[i].x[k]->m.type = c[i].e.x4_type;
            }
            rs->n_tensors++;
            rs->bytes += c[i].e.nbytes;
        }
    }
    free(c);
    /* The check read every page through the map: how many it maps with 2
     * MiB pages.  A copy the page cache holds in 4 KiB folios (read by
     * something other than a map advised MADV_HUGEPAGE) decodes ~10% slower
     * on one thread (perf stat, granitemoe1b Q4_K_M); infer warm --huge reads
     * it again. */
    if (rs->map && rs->huge && rs->map_size >= ((size_t)64 << 20)) {
        const uint64_t hb = map_huge_bytes(rs->map);
        if (hb > 0 || access("/proc/self/smaps", R_OK) == 0)
            snprintf(rs->pages, sizeof(rs->pages), ", %.0f%% in 2 MiB pages%s", 100.0 * (double)hb / (double)rs->map_size,
                     hb < rs->map_size / 10 ? " (the page cache holds it in 4 KiB pages: 'infer warm --huge MODEL' "
                                              "reads it again)"
                                            : "");
    }
    rs->seconds = infer_now() - t0;
    summarize(rs);
}

void model_repack_release(struct infer_model *m)
{
    if (m->repack.map)
        munmap(m->repack.map, m->repack.map_size);
    m->repack.map = NULL;
}

void infer_model_repack_info(const infer_model *m, infer_repack_info *out)
{
    const struct repack_state *rs = &m->repack;
    out->state = rs->state ? rs->state : "none";
    out->n_tensors = rs->n_tensors;
    out->bytes = rs->bytes;
    out->seconds = rs->seconds;
    out->hash_seconds = rs->hash_seconds;
    out->repack_seconds = rs->repack_seconds;
    out->path = rs->map ? rs->path : "";
    out->note = rs->note;
}

const char *infer_model_repack_summary(const infer_model *m) { return m->repack.summary; }

/* ------------------------------------------- the cache file, for the tools */

struct infer_repack_file {
    char path[1024];
    uint8_t *map;
    size_t size;
    struct rpk_entry *e; /* read with the header (the map is only asked, never read) */
    uint32_t n;
};

infer_status infer_repack_file_open(infer_repack_file **out, const infer_gguf *g, const char *repack_dir)
{
    *out = NULL;
    char err[256], dir[900], id[1200];
    if (kernels_init(err, sizeof(err)) != 0)
        return infer_error(INFER_ERR_UNSUPPORTED, "kernels: %s", err);
    const infer_model_params p = {.repack_dir = repack_dir};
    uint8_t sha[32];
    if (!cache_dir(&p, dir, sizeof(dir)) || id_sha256(g, dir, sha, id, sizeof(id)) != 1)
        return infer_error(INFER_ERR_NOT_FOUND, "no repacked copy of '%s' is known", g->path);
    infer_repack_file *f = calloc(1, sizeof(*f));
    if (!f)
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    char hex[65];
    to_hex(sha, 32, hex);
    snprintf(f->path, sizeof(f->path), "%s/%.64s-%.15s-L%u.bin", dir, hex, kern.name, REPACK_LAYOUT_VERSION);
    const int fd = open(f->path, O_RDONLY | O_CLOEXEC);
    struct stat sb;
    if (fd < 0 || fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size < sizeof(struct rpk_header)) {
        if (fd >= 0)
            close(fd);
        free(f);
        return infer_error(INFER_ERR_NOT_FOUND, "no repacked copy of '%s' for %s", g->path, kern.name);
    }
    /* header and entries by pread with readahead off: a fault on the map
     * (or a plain read) would bring in the file's first megabytes, which
     * would then show as resident */
    posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
    f->size = (size_t)sb.st_size;
    struct rpk_header h;
    const char *bad = NULL;
    if (pread(fd, &h, sizeof(h), 0) != (ssize_t)sizeof(h))
        memset(&h, 0, sizeof(h));
    const size_t n_e = h.n_entries <= RPK_MAX_ENTRIES ? h.n_entries : 0;
    f->e = malloc(n_e ? n_e * sizeof(*f->e) : 1);
    if (!f->e || pread(fd, f->e, n_e * sizeof(*f->e), sizeof(h)) != (ssize_t)(n_e * sizeof(*f->e)))
        bad = "cannot read its entries";
    f->map = mmap(NULL, f->size, PROT_READ, MAP_SHARED, fd, 0); /* for mincore */
    close(fd);
    if (f->map == MAP_FAILED) {
        const int e = errno;
        free(f->e);
        free(f);
        return infer_error(INFER_ERR_IO, "cannot map a repacked copy: %s", strerror(e));
    }
    if (bad)
        ;
    else if (memcmp(h.magic, RPK_MAGIC, 8) != 0 || h.version != RPK_VERSION || h.layout != REPACK_LAYOUT_VERSION ||
        memcmp(h.model_sha256, sha, 32) != 0 || h.model_size != g->size)
        bad = "made for another model or version";
    else if (h.n_entries > RPK_MAX_ENTRIES || h.data_offset > f->size ||
             h.data_offset < sizeof(h) + (uint64_t)h.n_entries * sizeof(struct rpk_entry))
        bad = "inconsistent sizes";
    else if (header_crc(&h, f->e, h.n_entries) != h.header_crc)
        bad = "header checksum mismatch";
    f->n = bad ? 0 : h.n_entries;
    for (uint32_t i = 0; !bad && i < f->n; i++)
        if (f->e[i].offset > f->size || f->e[i].nbytes > f->size - f->e[i].offset ||
            f->e[i].src_offset > g->size || f->e[i].nbytes > g->size - f->e[i].src_offset)
            bad = "a tensor lies outside the file";
    if (bad) {
        munmap(f->map, f->size);
        free(f->e);
        free(f);
        return infer_error(INFER_ERR_FORMAT, "the repacked copy of '%s' is unusable (%s): a load rebuilds it",
                           g->path, bad);
    }
    *out = f;
    return INFER_OK;
}

void infer_repack_file_close(infer_repack_file *f)
{
    if (!f)
        return;
    munmap(f->map, f->size);
    free(f->e);
    free(f);
}

const char *infer_repack_file_path(const infer_repack_file *f) { return f->path; }
uint64_t infer_repack_file_size(const infer_repack_file *f) { return f->size; }

bool infer_repack_file_find(const infer_repack_file *f, uint64_t gguf_offset, uint64_t *offset)
{
    for (uint32_t i = 0; f && i < f->n; i++)
        if (f->e[i].src_offset == gguf_offset) {
            *offset = f->e[i].offset;
            return true;
        }
    return false;
}

infer_status infer_repack_file_range_residency(const infer_repack_file *f, uint64_t offset, uint64_t size,
                                               infer_residency *out)
{
    memset(out, 0, sizeof(*out));
    if (offset > f->size || size > f->size - offset)
        return infer_error(INFER_ERR_INVALID, "range %llu+%llu is outside the repacked copy",
                           (unsigned long long)offset, (unsigned long long)size);
    return map_residency(f->map, offset, size, out);
}

infer_status infer_repack_file_warm_range(const infer_repack_file *f, uint64_t offset, uint64_t size)
{
    return file_warm_range(f->path, f->size, offset, size);
}

infer_status infer_repack_file_warm(const infer_repack_file *f, infer_residency *out)
{
    return file_warm_huge(f->path, out);
}
