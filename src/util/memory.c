/*
 * memory.c - how much memory this process may use: the machine's MemTotal
 * and MemAvailable (/proc/meminfo), narrowed by the memory limit of the
 * cgroup the process runs in.
 *
 * A server started with systemd's MemoryMax=, in a container, or on a board
 * whose service manager caps it is OOM-killed at the cgroup's limit, not when
 * the machine runs out; the KV budget (engine.c, DESIGN decision 6) must be
 * sized for that limit.  Both hierarchies are read:
 *   v2  "0::/path" in /proc/self/cgroup; memory.max of that directory and of
 *       every ancestor up to the mount (the smallest applies), memory.current
 *       and memory.stat's inactive_file of the leaf.  Looked for in
 *       /sys/fs/cgroup (unified) and /sys/fs/cgroup/unified (hybrid).
 *   v1  "N:...memory...:/path"; memory.stat's hierarchical_memory_limit (the
 *       smallest limit on the path) and total_inactive_file, and
 *       memory.usage_in_bytes, in /sys/fs/cgroup/memory.
 * Within a cgroup, available = limit - usage + inactive file pages (page
 * cache the kernel reclaims before it OOM-kills), as container-aware tools
 * count it.  A limit at or above MemTotal ("max", v1's PAGE_COUNTER_MAX) is
 * no limit.
 *
 * Every path is prefixed with `root` so that tests can point the reader at a
 * made-up tree; the library passes "".
 */
#include "common.h"

#include <string.h>

#define PATH_LEN 4096

/* The first line of root/rel/name, or false if unreadable. */
static bool read_line(const char *root, const char *rel, const char *name, char *buf, size_t n)
{
    char path[PATH_LEN];
    int len = snprintf(path, sizeof(path), "%s%s%s%s", root, rel, *name ? "/" : "", name);
    if (len < 0 || (size_t)len >= sizeof(path))
        return false;
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool ok = fgets(buf, (int)n, f) != NULL;
    fclose(f);
    return ok;
}

/* A decimal byte count at the start of s (trailing newline allowed). */
static bool parse_u64(const char *s, uint64_t *out)
{
    char *end;
    if (*s < '0' || *s > '9')
        return false;
    unsigned long long v = strtoull(s, &end, 10);
    if (*end != '\0' && *end != '\n')
        return false;
    *out = v;
    return true;
}

/* The value of `key` in a "key value" file such as memory.stat. */
static bool stat_value(const char *root, const char *dir, const char *key, uint64_t *out)
{
    char path[PATH_LEN], line[256];
    int len = snprintf(path, sizeof(path), "%s%s/memory.stat", root, dir);
    if (len < 0 || (size_t)len >= sizeof(path))
        return false;
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    size_t kl = strlen(key);
    bool found = false;
    while (!found && fgets(line, sizeof(line), f))
        if (!strncmp(line, key, kl) && line[kl] == ' ')
            found = parse_u64(line + kl + 1, out);
    fclose(f);
    return found;
}

static bool read_meminfo(const char *root, uint64_t *total, uint64_t *avail)
{
    char path[PATH_LEN], line[256];
    snprintf(path, sizeof(path), "%s/proc/meminfo", root);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    unsigned long long v;
    int got = 0;
    while (fgets(line, sizeof(line), f)) {
        if (sscanf(line, "MemTotal: %llu kB", &v) == 1) {
            *total = (uint64_t)v * 1024;
            got |= 1;
        } else if (sscanf(line, "MemAvailable: %llu kB", &v) == 1) {
            *avail = (uint64_t)v * 1024;
            got |= 2;
        }
    }
    fclose(f);
    return got == 3;
}

/* The cgroup path of this process in hierarchy v2 ("0::") or in the v1
 * hierarchy that has the memory controller. */
static bool cgroup_path(const char *root, int version, char *out, size_t n)
{
    char path[PATH_LEN];
    snprintf(path, sizeof(path), "%s/proc/self/cgroup", root);
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    char *line = NULL;
    size_t cap = 0;
    bool found = false;
    while (!found && getline(&line, &cap, f) >= 0) {
        line[strcspn(line, "\n")] = '\0';
        char *c1 = strchr(line, ':'), *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (!c2 || c2[1] != '/')
            continue;
        *c1 = *c2 = '\0'; /* line: the hierarchy id, ctl: its controllers */
        const char *ctl = c1 + 1;
        if (version == 2) {
            found = strcmp(line, "0") == 0 && *ctl == '\0';
        } else {
            for (const char *p = ctl; *p && !found;) { /* "memory" or a list such as "cpu,memory" */
                size_t len = strcspn(p, ",");
                found = len == 6 && strncmp(p, "memory", 6) == 0;
                p += len + (p[len] == ',');
            }
        }
        /* a path too long for the buffers is not this reader's to guess at */
        if (found && snprintf(out, n, "%s", strcmp(c2 + 1, "/") ? c2 + 1 : "") >= (int)n)
            found = false;
    }
    free(line);
    fclose(f);
    return found;
}

/* v2: the smallest memory.max from dir up to the mount; usage and inactive
 * file pages of dir.  A cgroup namespace may show a path that does not exist
 * under the mount: then the mount's own directory is the process's cgroup. */
static bool cgroup2_read(const char *root, const char *mount, const char *cg, uint64_t *limit, uint64_t *usage,
                         uint64_t *inactive)
{
    char dir[PATH_LEN], buf[64];
    if (snprintf(dir, sizeof(dir), "%s%s", mount, cg) >= (int)sizeof(dir))
        return false;
    if (!read_line(root, dir, "memory.current", buf, sizeof(buf)))
        snprintf(dir, sizeof(dir), "%s", mount);
    if (!read_line(root, dir, "memory.current", buf, sizeof(buf)) || !parse_u64(buf, usage))
        return false;
    if (!stat_value(root, dir, "inactive_file", inactive))
        *inactive = 0;
    *limit = UINT64_MAX;
    size_t mlen = strlen(mount);
    for (;;) {
        uint64_t v;
        if (read_line(root, dir, "memory.max", buf, sizeof(buf)) && parse_u64(buf, &v) && v < *limit)
            *limit = v; /* "max" does not parse: no limit at this level */
        char *slash = strrchr(dir, '/');
        if (strlen(dir) <= mlen || !slash || (size_t)(slash - dir) < mlen)
            break;
        *slash = '\0';
    }
    return true;
}

static bool cgroup1_read(const char *root, const char *cg, uint64_t *limit, uint64_t *usage, uint64_t *inactive)
{
    char dir[PATH_LEN], buf[64];
    const char *mount = "/sys/fs/cgroup/memory";
    if (snprintf(dir, sizeof(dir), "%s%s", mount, cg) >= (int)sizeof(dir))
        return false;
    if (!read_line(root, dir, "memory.usage_in_bytes", buf, sizeof(buf)))
        snprintf(dir, sizeof(dir), "%s", mount);
    if (!read_line(root, dir, "memory.usage_in_bytes", buf, sizeof(buf)) || !parse_u64(buf, usage))
        return false;
    if (!stat_value(root, dir, "hierarchical_memory_limit", limit) &&
        !(read_line(root, dir, "memory.limit_in_bytes", buf, sizeof(buf)) && parse_u64(buf, limit)))
        return false;
    if (!stat_value(root, dir, "total_inactive_file", inactive) && !stat_value(root, dir, "inactive_file", inactive))
        *inactive = 0;
    return true;
}

bool mem_info_read_at(const char *root, struct mem_info *out)
{
    memset(out, 0, sizeof(*out));
    if (!read_meminfo(root, &out->total, &out->avail))
        return false;
    char cg[PATH_LEN];
    uint64_t limit = 0, usage = 0, inactive = 0;
    int version = 0;
    if (cgroup_path(root, 2, cg, sizeof(cg)) &&
        (cgroup2_read(root, "/sys/fs/cgroup", cg, &limit, &usage, &inactive) ||
         cgroup2_read(root, "/sys/fs/cgroup/unified", cg, &limit, &usage, &inactive)) &&
        limit < out->total)
        version = 2;
    else if (cgroup_path(root, 1, cg, sizeof(cg)) && cgroup1_read(root, cg, &limit, &usage, &inactive) &&
             limit < out->total)
        version = 1;
    if (version == 0)
        return true;
    uint64_t reclaimable = inactive < usage ? inactive : usage;
    uint64_t used = usage - reclaimable;
    out->cg_version = version;
    out->cg_limit = limit;
    out->cg_usage = usage;
    out->total = limit;
    uint64_t cg_avail = used < limit ? limit - used : 0;
    if (cg_avail < out->avail)
        out->avail = cg_avail;
    return true;
}

bool mem_info_read(struct mem_info *out) { return mem_info_read_at("", out); }
