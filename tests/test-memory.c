/*
 * test-memory.c - the memory reader (src/util/memory.c) on made-up /proc and
 * /sys/fs/cgroup trees: MemTotal/MemAvailable alone, cgroup v1 and v2 limits
 * (ancestors, hybrid mount, namespaces, "cpu,memory" lists), page cache
 * counted as reclaimable, and malformed files ignored.
 */
#include "test-common.h"

#include "../src/util/common.h"

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#define GiB ((uint64_t)1 << 30)
#define MiB ((uint64_t)1 << 20)

static char root[256];

/* Write text to root/rel, creating the directories on the way. */
static void put(const char *rel, const char *text)
{
    char path[1024];
    snprintf(path, sizeof(path), "%s/%s", root, rel);
    for (char *p = path + strlen(root) + 1; *p; p++) {
        if (*p == '/') {
            *p = '\0';
            assert_true(mkdir(path, 0755) == 0 || errno == EEXIST);
            *p = '/';
        }
    }
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static int setup(void **state)
{
    (void)state;
    snprintf(root, sizeof(root), "/tmp/infer-test-memory-XXXXXX");
    assert_non_null(mkdtemp(root));
    /* 24 GiB machine, 20 GiB available */
    put("proc/meminfo", "MemTotal:       25165824 kB\nMemFree:        1000 kB\nMemAvailable:   20971520 kB\n");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    return system(cmd);
}

static void no_cgroup_limit(void **state)
{
    (void)state;
    struct mem_info mi;
    /* no /proc/self/cgroup at all */
    assert_true(mem_info_read_at(root, &mi));
    assert_int_equal(mi.total, 24 * GiB);
    assert_int_equal(mi.avail, 20 * GiB);
    assert_int_equal(mi.cg_version, 0);
    /* v1 memory cgroup without a limit (PAGE_COUNTER_MAX) */
    put("proc/self/cgroup", "4:memory:/svc\n0::/\n");
    put("sys/fs/cgroup/memory/svc/memory.usage_in_bytes", "1073741824\n");
    put("sys/fs/cgroup/memory/svc/memory.stat", "cache 1\nhierarchical_memory_limit 9223372036854771712\n");
    assert_true(mem_info_read_at(root, &mi));
    assert_int_equal(mi.total, 24 * GiB);
    assert_int_equal(mi.avail, 20 * GiB);
    assert_int_equal(mi.cg_version, 0);
    assert_int_equal(mi.cg_limit, 0);
}

static void cgroup_v1_limit(void **state)
{
    (void)state;
    struct mem_info mi;
    /* 4 GiB board-like limit on an ancestor (hierarchical), 3 GiB used of which 512 MiB inactive page cache */
    put("proc/self/cgroup", "9:cpu,memory:/board/infer\n1:name=systemd:/\n0::/\n");
    put("sys/fs/cgroup/memory/board/infer/memory.usage_in_bytes", "3221225472\n");
    put("sys/fs/cgroup/memory/board/infer/memory.limit_in_bytes", "9223372036854771712\n");
    put("sys/fs/cgroup/memory/board/infer/memory.stat",
        "cache 600000000\ninactive_file 1\nhierarchical_memory_limit 4294967296\ntotal_inactive_file 536870912\n");
    assert_true(mem_info_read_at(root, &mi));
    assert_int_equal(mi.cg_version, 1);
    assert_int_equal(mi.cg_limit, 4 * GiB);
    assert_int_equal(mi.total, 4 * GiB);
    assert_int_equal(mi.cg_usage, 3 * GiB);
    assert_int_equal(mi.avail, 4 * GiB - (3 * GiB - 512 * MiB)); /* the inactive page cache is reclaimable */

    /* usage above the limit (charged page cache in flight): nothing available, no underflow */
    put("sys/fs/cgroup/memory/board/infer/memory.usage_in_bytes", "5368709120\n");
    put("sys/fs/cgroup/memory/board/infer/memory.stat", "hierarchical_memory_limit 4294967296\n");
    assert_true(mem_info_read_at(root, &mi));
    assert_int_equal(mi.total, 4 * GiB);
    assert_int_equal(mi.avail, 0);

    /* without hierarchical_memory_limit (old kernels): the group's own limit */
    put("sys/fs/cgroup/memory/board/infer/memory.usage_in_bytes", "1073741824\n");
    put("sys/fs/cgroup/memory/board/infer/memory.stat", "total_inactive_file 0\n");
    put("sys/fs/cgroup/memory/board/infer/memory.limit_in_bytes", "2147483648\n");
    assert_true(mem_info_read_at(root, &mi));
    assert_int_equal(mi.total, 2 * GiB);
    assert_int_equal(mi.avail, 1 * GiB);
}

static void cgroup_v2_limit(void **state)
{
    (void)state;
    struct mem_info mi;
    /* unified hierarchy: the leaf has no limit, its parent 2 GiB, the grandparent 8 GiB */
    put("proc/self/cgroup", "0::/system.slice/infer.service\n");
    put("sys/fs/cgroup/system.slice/infer.service/memory.current", "1073741824\n");
    put("sys/fs/cgroup/system.slice/infer.service/memory.max", "max\n");
    put("sys/fs/cgroup/system.slice/infer.service/memory.stat", "anon 1\nfile 300000000\ninactive_file 268435456\n");
    put("sys/fs/cgroup/system.slice/memory.max", "2147483648\n");
    put("sys/fs/cgroup/memory.max", "8589934592\n");
    assert_true(mem_info_read_at(root, &mi));
    assert_int_equal(mi.cg_version, 2);
    assert_int_equal(mi.cg_limit, 2 * GiB);
    assert_int_equal(mi.total, 2 * GiB);
    assert_int_equal(mi.avail, 2 * GiB - (1 * GiB - 256 * MiB));

    /* MemAvailable lower than what the cgroup leaves: the machine's figure wins */
    put("proc/meminfo", "MemTotal:       25165824 kB\nMemAvailable:   524288 kB\n");
    assert_true(mem_info_read_at(root, &mi));
    assert_int_equal(mi.total, 2 * GiB);
    assert_int_equal(mi.avail, 512 * MiB);
    put("proc/meminfo", "MemTotal:       25165824 kB\nMemFree:        1000 kB\nMemAvailable:   20971520 kB\n");

    /* a malformed limit is no limit; the valid one above it still applies */
    put("sys/fs/cgroup/system.slice/memory.max", "lots\n");
    assert_true(mem_info_read_at(root, &mi));
    assert_int_equal(mi.cg_limit, 8 * GiB);
    assert_int_equal(mi.total, 8 * GiB);
}

static void cgroup_v2_hybrid_and_namespace(void **state)
{
    (void)state;
    struct mem_info mi;
    /* hybrid layout: v2 at /sys/fs/cgroup/unified; a cgroup namespace shows "/" as the path */
    put("proc/self/cgroup", "0::/\n");
    put("sys/fs/cgroup/unified/memory.current", "536870912\n");
    put("sys/fs/cgroup/unified/memory.max", "3221225472\n");
    assert_true(mem_info_read_at(root, &mi));
    assert_int_equal(mi.cg_version, 2);
    assert_int_equal(mi.total, 3 * GiB);
    assert_int_equal(mi.avail, 3 * GiB - 512 * MiB);

    /* a path that does not exist under the mount (another namespace): the mount's own group */
    put("proc/self/cgroup", "0::/../outside/group\n");
    assert_true(mem_info_read_at(root, &mi));
    assert_int_equal(mi.cg_version, 2);
    assert_int_equal(mi.total, 3 * GiB);
}

static void unreadable_or_hostile(void **state)
{
    (void)state;
    struct mem_info mi;
    /* no MemAvailable: unreadable, zeroed */
    assert_false(mem_info_read_at("/nonexistent/infer-test-memory", &mi));
    assert_int_equal(mi.total, 0);

    /* garbage in /proc/self/cgroup and in the counters: ignored, the machine's figures stand */
    put("proc/self/cgroup", ":::\n0:\n::\nmemory\n4:memory\n4:memoryx:/a\n");
    assert_true(mem_info_read_at(root, &mi));
    assert_int_equal(mi.cg_version, 0);
    assert_int_equal(mi.total, 24 * GiB);
    put("proc/self/cgroup", "4:memory:/bad\n");
    put("sys/fs/cgroup/memory/bad/memory.usage_in_bytes", "-5\n");
    put("sys/fs/cgroup/memory/bad/memory.stat", "hierarchical_memory_limit 1073741824\n");
    assert_true(mem_info_read_at(root, &mi));
    assert_int_equal(mi.cg_version, 0);
    assert_int_equal(mi.total, 24 * GiB);
    /* an over-long path line is skipped, not truncated into another group */
    char line[6000];
    memset(line, 'a', sizeof(line));
    memcpy(line, "4:memory:/", 10);
    line[sizeof(line) - 2] = '\n';
    line[sizeof(line) - 1] = '\0';
    put("proc/self/cgroup", line);
    assert_true(mem_info_read_at(root, &mi));
    assert_int_equal(mi.cg_version, 0);
}

/* The real machine: whatever it has, the figures are consistent. */
static void this_machine(void **state)
{
    (void)state;
    struct mem_info mi;
    if (!mem_info_read(&mi))
        skip();
    assert_true(mi.total > 0);
    assert_true(mi.avail <= mi.total || mi.cg_version == 0);
    if (mi.cg_version)
        assert_int_equal(mi.total, mi.cg_limit);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(no_cgroup_limit),
        cmocka_unit_test(cgroup_v1_limit),
        cmocka_unit_test(cgroup_v2_limit),
        cmocka_unit_test(cgroup_v2_hybrid_and_namespace),
        cmocka_unit_test(unreadable_or_hostile),
        cmocka_unit_test(this_machine),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
