/*
 * insn-count.c - a qemu TCG plugin that counts the guest instructions a program executes.
 *
 *   gcc -shared -fPIC -O2 -fvisibility=hidden -I QEMU_SRC/include/qemu -o insn-count.so insn-count.c
 *   qemu-aarch64 -cpu cortex-a76 -plugin ./insn-count.so,out=counts.txt[,sym=on][,top=40] PROGRAM ARGS...
 *
 * Built against the qemu-plugin.h of the qemu that loads it (Debian 12's qemu-user 7.2: plugin API
 * version 1, QEMU_PLUGIN_VERSION below). contrib/bench/arm-insn-count builds it and uses it.
 *
 * How it counts: when qemu translates a block of guest code (a TB: straight-line code up to a
 * branch), the plugin attaches an inline "add n" to a 64-bit counter, n = the TB's instruction
 * count, executed each time the TB runs. The total is thus every instruction of every TB entered,
 * including library code and the dynamic loader; a TB left early by a fault counts whole (rare:
 * signals, page faults of user mode are handled by the host kernel and do not end TBs).
 *
 * The inline adds are not atomic: with several guest threads running at once (qemu-user runs each
 * in its own host thread) increments can be lost. The plugin reports how many vCPUs (guest threads)
 * it saw; counts are exact when that is 1.
 *
 * sym=on: every TB also gets a counter of its own, and at exit the TB counts are summed per symbol
 * of the TB's first instruction (qemu's best-effort lookup in the main executable's symbol table;
 * code elsewhere - shared libraries, the vDSO - is "(outside the executable)"). The top=N symbols
 * (default 40) are written with their instruction counts.
 *
 * Output (out=FILE, else stderr), one "key value" per line:
 *   insns N            guest instructions executed
 *   vcpus N            vCPUs (guest threads) seen
 *   tbs N              TBs translated (sym=on)
 *   sym N NAME         instructions executed in TBs starting in NAME (sym=on), largest first
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <qemu-plugin.h>

QEMU_PLUGIN_EXPORT int qemu_plugin_version = QEMU_PLUGIN_VERSION;

/* One translated TB in sym mode: its symbol and the times it was entered. The counter is written by
 * generated code through its address, so records never move (they live in fixed-size chunks). */
struct tb_rec {
    const char *sym; /* NULL: outside the executable's symbol table */
    uint64_t n_insns;
    uint64_t execs;
};

#define CHUNK_RECS 4096
struct chunk {
    struct chunk *next;
    size_t used;
    struct tb_rec recs[CHUNK_RECS];
};

static uint64_t total_insns;        /* the inline-incremented total */
static unsigned max_vcpu_seen;      /* highest vcpu index + 1 */
static bool by_symbol;
static int top_n = 40;
static const char *out_path;
static struct chunk *chunks;        /* newest first */
static uint64_t n_tbs;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

static struct tb_rec *rec_new(void)
{
    if (!chunks || chunks->used == CHUNK_RECS) {
        struct chunk *c = calloc(1, sizeof(*c));
        if (!c)
            return NULL;
        c->next = chunks;
        chunks = c;
    }
    return &chunks->recs[chunks->used++];
}

static void vcpu_init(qemu_plugin_id_t id, unsigned int vcpu_index)
{
    (void)id;
    pthread_mutex_lock(&lock);
    if (vcpu_index + 1 > max_vcpu_seen)
        max_vcpu_seen = vcpu_index + 1;
    pthread_mutex_unlock(&lock);
}

static void tb_trans(qemu_plugin_id_t id, struct qemu_plugin_tb *tb)
{
    (void)id;
    const size_t n = qemu_plugin_tb_n_insns(tb);
    qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &total_insns, n);
    if (!by_symbol || n == 0)
        return;
    pthread_mutex_lock(&lock);
    struct tb_rec *r = rec_new();
    if (r) {
        r->sym = qemu_plugin_insn_symbol(qemu_plugin_tb_get_insn(tb, 0));
        r->n_insns = n;
        n_tbs++;
    }
    pthread_mutex_unlock(&lock);
    if (r)
        qemu_plugin_register_vcpu_tb_exec_inline(tb, QEMU_PLUGIN_INLINE_ADD_U64, &r->execs, 1);
}

struct sym_total {
    const char *sym;
    uint64_t insns;
};

static int by_name(const void *a, const void *b)
{
    const struct sym_total *x = a, *y = b;
    if (!x->sym || !y->sym)
        return (x->sym != NULL) - (y->sym != NULL);
    return strcmp(x->sym, y->sym);
}

static int by_count_desc(const void *a, const void *b)
{
    const struct sym_total *x = a, *y = b;
    return (x->insns < y->insns) - (x->insns > y->insns);
}

/* Appends "sym N NAME" lines for the top_n symbols to f. */
static void write_symbols(FILE *f)
{
    size_t n = 0;
    for (struct chunk *c = chunks; c; c = c->next)
        n += c->used;
    struct sym_total *t = calloc(n ? n : 1, sizeof(*t));
    if (!t) {
        fprintf(f, "error out of memory for %zu symbol records\n", n);
        return;
    }
    size_t k = 0;
    for (struct chunk *c = chunks; c; c = c->next)
        for (size_t i = 0; i < c->used; i++)
            t[k++] = (struct sym_total){c->recs[i].sym, c->recs[i].execs * c->recs[i].n_insns};
    qsort(t, n, sizeof(*t), by_name);
    size_t m = 0; /* merge equal names in place */
    for (size_t i = 0; i < n; i++) {
        if (m && by_name(&t[m - 1], &t[i]) == 0)
            t[m - 1].insns += t[i].insns;
        else
            t[m++] = t[i];
    }
    qsort(t, m, sizeof(*t), by_count_desc);
    for (size_t i = 0; i < m && (int)i < top_n; i++)
        fprintf(f, "sym %" PRIu64 " %s\n", t[i].insns, t[i].sym ? t[i].sym : "(outside the executable)");
    free(t);
}

static void at_exit(qemu_plugin_id_t id, void *userdata)
{
    (void)id;
    (void)userdata;
    FILE *f = out_path ? fopen(out_path, "w") : stderr;
    if (!f) {
        fprintf(stderr, "insn-count: cannot write %s; the counts follow on stderr\n", out_path);
        f = stderr;
    }
    fprintf(f, "insns %" PRIu64 "\nvcpus %u\n", total_insns, max_vcpu_seen);
    if (by_symbol) {
        fprintf(f, "tbs %" PRIu64 "\n", n_tbs);
        write_symbols(f);
    }
    if (f != stderr)
        fclose(f);
}

QEMU_PLUGIN_EXPORT int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t *info, int argc, char **argv)
{
    (void)info;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *eq = strchr(a, '=');
        if (!eq) {
            fprintf(stderr, "insn-count: argument %s is not KEY=VALUE\n", a);
            return -1;
        }
        const size_t klen = (size_t)(eq - a);
        const char *v = eq + 1;
        if (klen == 3 && !strncmp(a, "out", 3) && *v) {
            out_path = v;
        } else if (klen == 3 && !strncmp(a, "sym", 3)) {
            if (!qemu_plugin_bool_parse("sym", v, &by_symbol)) {
                fprintf(stderr, "insn-count: sym=%s is not on/off\n", v);
                return -1;
            }
        } else if (klen == 3 && !strncmp(a, "top", 3)) {
            char *end;
            long n = strtol(v, &end, 10);
            if (end == v || *end || n < 1 || n > 100000) {
                fprintf(stderr, "insn-count: top=%s is not a count from 1 to 100000\n", v);
                return -1;
            }
            top_n = (int)n;
        } else {
            fprintf(stderr, "insn-count: unknown argument %s (out=FILE, sym=on|off, top=N)\n", a);
            return -1;
        }
    }
    qemu_plugin_register_vcpu_init_cb(id, vcpu_init);
    qemu_plugin_register_vcpu_tb_trans_cb(id, tb_trans);
    qemu_plugin_register_atexit_cb(id, at_exit, NULL);
    return 0;
}
