/*
 * residency.c - the page-cache layer: how much of a mapped model file is in
 * memory (mincore), bringing it in (warm) and dropping it (cold).
 *
 * Weights are never copied out of the read-only map (DESIGN.md decision 3),
 * so the page cache *is* the weight cache; these functions make cold and warm
 * starts measurable and reproducible.
 */
#include "gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static size_t page_size(void)
{
    long p = sysconf(_SC_PAGESIZE);
    return p > 0 ? (size_t)p : 4096;
}

infer_status infer_gguf_range_residency(const infer_gguf *g, uint64_t offset, uint64_t size,
                                        infer_residency *out)
{
    memset(out, 0, sizeof(*out));
    if (offset > g->size || size > g->size - offset)
        return infer_error(INFER_ERR_INVALID, "range %llu+%llu is outside the file",
                           (unsigned long long)offset, (unsigned long long)size);
    out->bytes_total = size;
    if (size == 0 || !g->mapped) {
        out->bytes_resident = g->mapped ? 0 : size; /* memory images are resident */
        out->percent = size ? 100.0 * (double)out->bytes_resident / (double)size : 100.0;
        return INFER_OK;
    }
    size_t ps = page_size();
    uint64_t first = offset / ps, last = (offset + size - 1) / ps;
    size_t n_pages = (size_t)(last - first + 1);
    unsigned char *vec = malloc(n_pages);
    if (!vec)
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    if (mincore((void *)(g->base + first * ps), n_pages * ps, vec) != 0) {
        free(vec);
        return infer_error(INFER_ERR_IO, "mincore: %s", strerror(errno));
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

infer_status infer_gguf_residency(const infer_gguf *g, infer_residency *out)
{
    return infer_gguf_range_residency(g, 0, g->size, out);
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
