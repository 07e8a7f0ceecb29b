/*
 * residency.c - the page-cache layer: how much of a mapped model file is in
 * memory (mincore), bringing it in (warm) and dropping it (cold).
 *
 * Weights are never copied out of the read-only map (DESIGN.md decision 3),
 * so the page cache *is* the weight cache; these functions make cold and warm
 * starts measurable and reproducible.  infer_file_residency asks about a file
 * by path without parsing it, so that `infer cold` can measure what is left
 * after dropping pages without its own read bringing the header back.
 */
#include "model/gguf.h"

#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static size_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

/* mincore over [offset, offset+size) of a mapping that starts at the
 * page-aligned address base.  Fills out; touches no page of the mapping. */
infer_status map_residency(const uint8_t *base, uint64_t offset, uint64_t size,
                                  infer_residency *out)
{
    out->bytes_total = size;
    out->bytes_resident = 0;
    out->percent = 100.0; /* an empty range is trivially resident */
    if (size == 0)
        return INFER_OK;
    size_t ps = page_size();
    uint64_t first = offset / ps, last = (offset + size - 1) / ps;
    size_t n_pages = (size_t)(last - first + 1);
    unsigned char *vec = malloc(n_pages);
    if (!vec)
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    if (mincore((void *)(base + first * ps), n_pages * ps, vec) != 0) {
        int err = errno;
        free(vec);
        return infer_error(INFER_ERR_IO, "mincore: %s", strerror(err));
    }
    uint64_t resident = 0;
    for (size_t i = 0; i < n_pages; i++) {
        if (!(vec[i] & 1))
            continue;
        /* count only the part of the page inside the range */
        uint64_t ps_lo = (first + i) * ps, ps_hi = ps_lo + ps;
        uint64_t lo = ps_lo > offset ? ps_lo : offset;
        uint64_t hi = ps_hi < offset + size ? ps_hi : offset + size;
        resident += hi - lo;
    }
    free(vec);
    out->bytes_resident = resident;
    out->percent = 100.0 * (double)resident / (double)size;
    return INFER_OK;
}

infer_status infer_gguf_range_residency(const infer_gguf *g, uint64_t offset, uint64_t size,
                                        infer_residency *out)
{
    memset(out, 0, sizeof(*out));
    if (offset > g->size || size > g->size - offset)
        return infer_error(INFER_ERR_INVALID, "range %llu+%llu is outside the file",
                           (unsigned long long)offset, (unsigned long long)size);
    if (!g->mapped) { /* memory images are resident */
        out->bytes_total = out->bytes_resident = size;
        out->percent = 100.0;
        return INFER_OK;
    }
    return map_residency(g->base, offset, size, out);
}

/* path opened read-only as a regular file: *fd and its size, or *fd = -1
 * for an empty file (nothing to map: *out says 100% resident).  *out is
 * zeroed first. */
static infer_status open_regular(const char *path, int *fd, size_t *size, infer_residency *out)
{
    memset(out, 0, sizeof(*out));
    *fd = open(path, O_RDONLY | O_CLOEXEC);
    if (*fd < 0)
        return infer_error(INFER_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    struct stat sb;
    if (fstat(*fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(*fd);
        *fd = -1;
        return infer_error(INFER_ERR_IO, "'%s' is not a regular file", path);
    }
    *size = (size_t)sb.st_size;
    if (*size == 0) {
        close(*fd);
        *fd = -1;
        out->percent = 100.0;
    }
    return INFER_OK;
}

/* Map the file read-only without reading a byte of it (so that asking does
 * not pull the GGUF header back into the cache, as a parse would), mincore,
 * unmap.  On error *out is zeroed. */
infer_status infer_file_residency(const char *path, infer_residency *out)
{
    int fd;
    size_t size;
    const infer_status ost = open_regular(path, &fd, &size, out);
    if (ost != INFER_OK || fd < 0)
        return ost;
    void *map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    int map_errno = errno;
    close(fd);
    if (map == MAP_FAILED)
        return infer_error(INFER_ERR_IO, "cannot map '%s': %s", path, strerror(map_errno));
    infer_status st = map_residency(map, 0, size, out);
    munmap(map, size);
    if (st) {
        memset(out, 0, sizeof(*out));
        infer_error_prefix(st, "%s", path);
    }
    return st;
}

/* Bytes of the mapping starting at base that this process maps with PMD
 * (2 MiB) pages: the FilePmdMapped line of its /proc/self/smaps entry.  0 when
 * the kernel does not say (no /proc, older kernels). */
uint64_t map_huge_bytes(const uint8_t *base)
{
    FILE *f = fopen("/proc/self/smaps", "re");
    if (!f)
        return 0;
    char line[512];
    bool in = false, at_start = true; /* at_start: line begins a line of the file (a long path may not fit) */
    uint64_t kb = 0;
    while (fgets(line, sizeof(line), f)) {
        const bool starts = at_start;
        at_start = strchr(line, '\n') != NULL;
        if (!starts)
            continue;
        unsigned long long lo, hi;
        int end = 0;
        /* a mapping header: "lo-hi perms offset dev inode path" */
        if (sscanf(line, "%llx-%llx %n", &lo, &hi, &end) == 2 && end > 0) {
            if (in)
                break;
            in = (uintptr_t)lo == (uintptr_t)base;
            continue;
        }
        unsigned long long v;
        if (in && sscanf(line, "FilePmdMapped: %llu kB", &v) == 1)
            kb = v;
    }
    fclose(f);
    return (uint64_t)kb << 10;
}

infer_status infer_gguf_residency(const infer_gguf *g, infer_residency *out)
{
    infer_status st = infer_gguf_range_residency(g, 0, g->size, out);
    if (st == INFER_OK && g->mapped && g->huge_advised)
        out->bytes_huge = map_huge_bytes(g->base);
    return st;
}

bool infer_residency_small_pages(const infer_residency *r)
{
    return r->bytes_total >= ((uint64_t)64 << 20) && r->bytes_resident >= r->bytes_total / 10 * 9 &&
           r->bytes_huge < r->bytes_total / 10;
}

const char *infer_small_pages_note(const char *path, char *buf, size_t n)
{
    snprintf(buf, n,
             "note: the page cache holds %s in 4 KiB pages (it was read or written before infer mapped it); "
             "'infer warm --huge %s' reads it again into 2 MiB pages where the kernel can, which decode reads "
             "faster",
             path, path);
    return buf;
}

infer_status infer_gguf_probe_pages(const infer_gguf *g, infer_residency *out)
{
    memset(out, 0, sizeof(*out));
    if (!g->mapped || !g->huge_advised || g->size == 0)
        return infer_gguf_residency(g, out);
    const size_t ps = page_size(), H = (size_t)2 << 20;
    const size_t n_huge = (g->size + H - 1) / H;
    unsigned char vec[1];
    volatile unsigned sink = 0;
    for (size_t i = 0; i < n_huge; i++) {
        const uint8_t *p = g->base + i * H;
        /* only pages already in memory: asking must not read the file */
        if (mincore((void *)p, ps, vec) == 0 && (vec[0] & 1))
            sink += *p;
    }
    (void)sink;
    return infer_gguf_residency(g, out);
}

infer_status infer_gguf_warm(const infer_gguf *g, int n_threads, uint64_t *bytes, double *seconds)
{
    double t0 = infer_now();
    size_t ps = page_size();
    if (n_threads <= 0)
        n_threads = infer_n_cpus();
    if (g->mapped)
        madvise((void *)g->base, g->size, MADV_WILLNEED);
    /* Touch one byte per page; the threads split the file into contiguous
     * stripes so each reads sequentially and readahead stays effective. */
    size_t n_pages = (g->size + ps - 1) / ps;
    volatile unsigned sink = 0;
    #pragma omp parallel num_threads(n_threads) reduction(+ : sink)
    {
        unsigned acc = 0;
        #pragma omp for schedule(static)
        for (size_t i = 0; i < n_pages; i++)
            acc += g->base[i * ps];
        sink += acc;
    }
    (void)sink;
    if (bytes)
        *bytes = g->size;
    if (seconds)
        *seconds = infer_now() - t0;
    return INFER_OK;
}

infer_status infer_gguf_warm_range(const infer_gguf *g, uint64_t offset, uint64_t size)
{
    return file_warm_range(g->path, g->size, offset, size);
}

infer_status file_warm_range(const char *path, uint64_t file_size, uint64_t offset, uint64_t size)
{
    if (offset > file_size || size > file_size - offset)
        return infer_error(INFER_ERR_INVALID, "warm: range %llu + %llu is outside the file (%llu bytes)",
                           (unsigned long long)offset, (unsigned long long)size, (unsigned long long)file_size);
    if (size == 0)
        return INFER_OK;
    /* pread through a descriptor of our own with readahead off: touching the
     * map would fault in whole 2 MiB folios (the map is advised
     * MADV_HUGEPAGE) and readahead windows, i.e. the neighbours as well */
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return infer_error(INFER_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    posix_fadvise(fd, 0, 0, POSIX_FADV_RANDOM);
    const size_t ps = page_size();
    enum { CHUNK = 1 << 20 };
    char *buf = malloc(CHUNK);
    infer_status st = INFER_OK;
    if (!buf)
        st = infer_error(INFER_ERR_NOMEM, "out of memory");
    for (uint64_t at = offset / ps * ps, end = offset + size; !st && at < end;) {
        const size_t n = end - at < CHUNK ? (size_t)(end - at) : CHUNK;
        const ssize_t r = pread(fd, buf, n, (off_t)at);
        if (r <= 0)
            st = infer_error(INFER_ERR_IO, "reading '%s': %s", path, r < 0 ? strerror(errno) : "end of file");
        at += r > 0 ? (uint64_t)r : 0;
    }
    free(buf);
    close(fd);
    return st;
}

/* Whole-file warming reads through a map, not with pread: pread (and
 * readahead on a descriptor) brings a file in as 4 KiB folios, which every
 * later map of it can only map with 4 KiB pages, while page faults in a map
 * advised MADV_HUGEPAGE bring it in as 2 MiB folios where the file system
 * has them (gguf_map_readonly).  Pages already in memory stay as they are. */
infer_status file_warm_huge(const char *path, infer_residency *out)
{
    int fd;
    size_t size;
    const infer_status ost = open_regular(path, &fd, &size, out);
    if (ost != INFER_OK || fd < 0)
        return ost;
    const size_t ps = page_size();
    bool huge = false;
    uint8_t *map = gguf_map_readonly(fd, size, true, &huge);
    const int map_errno = errno;
    close(fd);
    if (map == MAP_FAILED)
        return infer_error(INFER_ERR_IO, "cannot map '%s': %s", path, strerror(map_errno));
    volatile unsigned sink = 0;
    for (size_t at = 0; at < size; at += ps)
        sink += map[at];
    (void)sink;
    infer_status st = map_residency(map, 0, size, out);
    if (st == INFER_OK && huge)
        out->bytes_huge = map_huge_bytes(map);
    munmap(map, size);
    if (st) {
        memset(out, 0, sizeof(*out));
        infer_error_prefix(st, "%s", path);
    }
    return st;
}

infer_status infer_file_cold(const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return infer_error(INFER_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    /* Dirty pages cannot be dropped; a model file is never written, but sync anyway. */
    fdatasync(fd);
    int rc = posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    close(fd);
    if (rc != 0)
        return infer_error(INFER_ERR_IO, "posix_fadvise(DONTNEED) on '%s': %s", path, strerror(rc));
    return INFER_OK;
}

infer_status infer_file_sha256(const char *path, char hex[65])
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return infer_error(INFER_ERR_IO, "cannot open '%s': %s", path, strerror(errno));
    enum { BUF = 1 << 20 };
    unsigned char *buf = malloc(BUF);
    if (!buf) {
        close(fd);
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    }
    sha256_ctx c;
    sha256_init(&c);
    ssize_t n;
    while ((n = read(fd, buf, BUF)) > 0)
        sha256_update(&c, buf, (size_t)n);
    int err = n < 0 ? errno : 0;
    free(buf);
    close(fd);
    if (err)
        return infer_error(INFER_ERR_IO, "reading '%s': %s", path, strerror(err));
    uint8_t d[32];
    sha256_final(&c, d);
    for (int i = 0; i < 32; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    return INFER_OK;
}

void infer_sha256(const void *data, size_t n, uint8_t out[32])
{
    sha256_ctx c;
    sha256_init(&c);
    sha256_update(&c, data, n);
    sha256_final(&c, out);
}
