/*
 * cmd_bench_paths.c - `infer bench --paths`: one fixed request (a long system
 * prompt, a short question, a short answer) in the eight situations a
 * household server meets, with the time of every layer measured on its own
 * (DESIGN.md: "Cold and warm are separate classes of measurement").
 *
 *   1 cold storage          the model's pages dropped (posix_fadvise
 *                           DONTNEED, as `infer cold`), an empty repack
 *                           cache, no prefix cache; a new process
 *   2 page cache warm       the file resident (as `infer warm`), an empty
 *                           repack cache; a new process
 *   3 + repack cache warm   the repack cache of 2; an empty --cache-dir; a
 *                           new process (its exit writes the prefix to disk)
 *   4 restart, prefix on disk  a new process on the --cache-dir of 3
 *   5 immediate repeat      the same request again in a running process
 *   8 another question      a new question after the same system prompt
 *   7 competing workload    other long prompts through the same engine (a
 *                           budget of ~2.5 requests) until the watermark has
 *                           evicted the first prefix, then the request
 *   6 keep-alive expiry     the engine and the model freed as `infer serve`
 *                           does after --keep-alive, then the request (the
 *                           reload is part of it)
 *
 * Situations with a process boundary run in a child: this executable with
 * the hidden option --child, which prints one JSON object per situation on
 * stdout (a pipe).  5, 8, 7 and 6 share one child, in that order, after a
 * first request that is not reported.  A new process's TTFT is measured from
 * the parent's clock just before the spawn (CLOCK_MONOTONIC is shared), so
 * the exec and the dynamic linking are a layer of their own.
 *
 * Layers: process start; artifact check (size, and sha256 against a
 * SHA256SUMS file beside the model when it lists the file; the pages the
 * check brought in are dropped again so that the load still meets the
 * storage as it was); map + validate (infer_model_load minus its repack
 * work, tokenizer included); repack (created, cache hit, or none for this
 * file and kernel variant); engine (KV arena); tokenization (chat template +
 * tokenizer); prefix lookup (in memory, and reading blocks from the disk
 * tier); prefill of the tokens not reused; "other" is what is left of TTFT.
 * Storage reads are page faults inside map and prefill: the row gives the
 * bytes that became resident between the load and the first token (mincore)
 * and the rate over that span.  Decode: the rest of the answer, greedy.
 */
#include "cli.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <jansson.h>
#include <libgen.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define N_SIT 8

static const char *sit_name[N_SIT + 1] = {
    "",
    "cold storage",
    "page cache warm, new process",
    "page cache + repack cache warm, new process",
    "restart, prefix on disk (--cache-dir)",
    "same process, immediate repeat",
    "after keep-alive expiry (reload)",
    "after a competing workload",
    "another question, same prefix",
};

/* One situation's measurements: filled by the child, sent as JSON. */
struct row {
    int id;
    bool available;
    char reason[256];
    bool new_process, loaded;
    double process_s;
    char check_state[128];
    double check_s;
    double check_read_bytes;
    double resident_before_pct;
    double storage_read_bytes, storage_s, storage_mib_s;
    double load_s, map_validate_s;
    char repack_state[160];
    double repack_tensors, repack_s, repack_work_s; /* all of it at load; of which repacking + writing */
    double engine_s, tokenize_s, prefix_lookup_s;
    double prompt_tokens, reused_tokens, disk_blocks, disk_bytes;
    double prefill_tokens, prefill_s, prefill_tok_s;
    double ttft_s, other_s;
    double decode_tokens, decode_s, decode_tok_s;
    char note[256];
};

/* The JSON form of a row: one table for writing and reading. */
enum ftype { F_INT, F_BOOL, F_NUM, F_STR };
static const struct field {
    const char *name;
    enum ftype type;
    size_t off, size;
} fields[] = {
#define FN(n) {#n, F_NUM, offsetof(struct row, n), 0}
#define FS(n) {#n, F_STR, offsetof(struct row, n), sizeof(((struct row *)0)->n)}
#define FB(n) {#n, F_BOOL, offsetof(struct row, n), 0}
    {"id", F_INT, offsetof(struct row, id), 0}, FB(available), FS(reason), FB(new_process), FB(loaded),
    FN(process_s), FS(check_state), FN(check_s), FN(check_read_bytes), FN(resident_before_pct),
    FN(storage_read_bytes), FN(storage_s), FN(storage_mib_s), FN(load_s), FN(map_validate_s), FS(repack_state),
    FN(repack_tensors), FN(repack_s), FN(repack_work_s), FN(engine_s), FN(tokenize_s), FN(prefix_lookup_s), FN(prompt_tokens),
    FN(reused_tokens), FN(disk_blocks), FN(disk_bytes), FN(prefill_tokens), FN(prefill_s), FN(prefill_tok_s),
    FN(ttft_s), FN(other_s), FN(decode_tokens), FN(decode_s), FN(decode_tok_s), FS(note),
#undef FN
#undef FS
#undef FB
};
#define N_FIELDS (sizeof(fields) / sizeof(fields[0]))

static json_t *row_json(const struct row *r)
{
    json_t *o = json_object();
    json_object_set_new(o, "situation", json_string(sit_name[r->id]));
    for (size_t i = 0; i < N_FIELDS; i++) {
        const char *p = (const char *)r + fields[i].off;
        json_t *v = NULL;
        switch (fields[i].type) {
        case F_INT: v = json_integer(*(const int *)p); break;
        case F_BOOL: v = json_boolean(*(const bool *)p); break;
        case F_NUM: v = json_real(*(const double *)p); break;
        case F_STR: v = json_string(p); break;
        }
        json_object_set_new(o, fields[i].name, v);
    }
    return o;
}

/* A row from the child's JSON; false when it is not one. */
static bool row_parse(const char *line, struct row *r)
{
    json_error_t err;
    json_t *o = json_loads(line, 0, &err);
    if (!json_is_object(o)) {
        json_decref(o);
        return false;
    }
    memset(r, 0, sizeof(*r));
    for (size_t i = 0; i < N_FIELDS; i++) {
        char *p = (char *)r + fields[i].off;
        json_t *v = json_object_get(o, fields[i].name);
        switch (fields[i].type) {
        case F_INT: *(int *)p = (int)json_integer_value(v); break;
        case F_BOOL: *(bool *)p = json_is_true(v); break;
        case F_NUM: *(double *)p = json_number_value(v); break;
        case F_STR: snprintf(p, fields[i].size, "%s", json_is_string(v) ? json_string_value(v) : ""); break;
        }
    }
    json_decref(o);
    return r->id >= 1 && r->id <= N_SIT;
}

static void unavailable(struct row *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void unavailable(struct row *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
    va_end(ap);
    r->available = false;
}

/* ------------------------------------------------------------ options */

struct paths {
    const char *model, *exe;
    const char *repack_dir, *cache_dir, *sum; /* child */
    const char *child;                        /* which situations, e.g. "1" or "5876" */
    double t0;                                /* the parent's clock at the spawn */
    int threads, n_batch, prefix_tokens, gen, competing;
    int n_ctx;                                /* engine context (0: from --prefix-tokens) */
    bool no_check;
    /* child state */
    infer_model *m;
    infer_chat_family fam;
    char *sys;
    double resident_at_first; /* file bytes resident at the first token of a request after a load */
};

/* ------------------------------------------------------ artifact check */

/* The sha256 recorded for path in SHA256SUMS beside it ("" when none). */
static void recorded_sum(const char *path, char hex[65])
{
    hex[0] = '\0';
    char dir[PATH_MAX], base[PATH_MAX], sums[PATH_MAX + 16];
    snprintf(dir, sizeof(dir), "%s", path);
    snprintf(base, sizeof(base), "%s", path);
    snprintf(sums, sizeof(sums), "%s/SHA256SUMS", dirname(dir));
    FILE *f = fopen(sums, "r");
    if (!f)
        return;
    const char *name = basename(base);
    char line[1024];
    while (fgets(line, sizeof(line), f)) {
        /* "<64 hex>  name" or "<64 hex> *name" (sha256sum's text and binary modes) */
        size_t h = strspn(line, "0123456789abcdefABCDEF");
        if (h != 64 || line[64] != ' ')
            continue;
        char *n = line + 65;
        if (*n == ' ' || *n == '*')
            n++;
        n[strcspn(n, "\r\n")] = '\0';
        if (!strcmp(n, name)) {
            memcpy(hex, line, 64);
            hex[64] = '\0';
            break;
        }
    }
    fclose(f);
}

/* Page residency of a file, one byte per page (caller frees); NULL on error. */
static unsigned char *page_vector(int fd, size_t size, size_t *n_pages)
{
    size_t ps = (size_t)sysconf(_SC_PAGESIZE);
    *n_pages = (size + ps - 1) / ps;
    if (!size)
        return NULL;
    void *map = mmap(NULL, size, PROT_READ, MAP_SHARED, fd, 0);
    if (map == MAP_FAILED)
        return NULL;
    unsigned char *v = malloc(*n_pages);
    if (v && mincore(map, size, v) != 0) {
        free(v);
        v = NULL;
    }
    munmap(map, size);
    return v;
}

/* Size, and sha256 against the recorded sum.  The pages the hash read in
 * are dropped again (those that were not resident before), so that the
 * load meets the storage in the state the situation asked for. */
static void artifact_check(const struct paths *p, struct row *r)
{
    double t = infer_now_seconds();
    struct stat st;
    if (stat(p->model, &st) != 0) {
        snprintf(r->check_state, sizeof(r->check_state), "stat failed: %s", strerror(errno));
        return;
    }
    if (!p->sum || !*p->sum) {
        r->check_s = infer_now_seconds() - t;
        snprintf(r->check_state, sizeof(r->check_state), "no recorded sum: size only (%lld bytes)",
                 (long long)st.st_size);
        return;
    }
    int fd = open(p->model, O_RDONLY | O_CLOEXEC);
    size_t np = 0;
    unsigned char *before = fd >= 0 ? page_vector(fd, (size_t)st.st_size, &np) : NULL;
    char hex[65];
    infer_status s = infer_file_sha256(p->model, hex);
    r->check_s = infer_now_seconds() - t;
    if (s != INFER_OK)
        snprintf(r->check_state, sizeof(r->check_state), "sha256 failed: %s", infer_last_error());
    else if (strcasecmp(hex, p->sum) != 0) {
        snprintf(r->check_state, sizeof(r->check_state), "sha256 MISMATCH with SHA256SUMS");
        fprintf(stderr, "warning: %s: sha256 %s differs from SHA256SUMS (%s)\n", p->model, hex, p->sum);
    } else
        snprintf(r->check_state, sizeof(r->check_state), "sha256 matches SHA256SUMS");
    size_t np2;
    unsigned char *after = fd >= 0 && before ? page_vector(fd, (size_t)st.st_size, &np2) : NULL;
    if (before && after) {
        size_t ps = (size_t)sysconf(_SC_PAGESIZE), brought = 0;
        for (size_t i = 0; i < np;) {
            if ((before[i] & 1) || !(after[i] & 1)) {
                i++;
                continue;
            }
            size_t j = i;
            while (j < np && !(before[j] & 1) && (after[j] & 1))
                j++;
            brought += j - i;
            posix_fadvise(fd, (off_t)(i * ps), (off_t)((j - i) * ps), POSIX_FADV_DONTNEED);
            i = j;
        }
        r->check_read_bytes = (double)brought * (double)ps;
    }
    free(before);
    free(after);
    if (fd >= 0)
        close(fd);
}

/* ------------------------------------------------------------- request */

static double resident_bytes(const char *path)
{
    infer_residency res;
    return infer_file_residency(path, &res) == INFER_OK ? (double)res.bytes_resident : 0;
}

static int load_model(struct paths *p, struct row *r)
{
    infer_model_params mp = {.repack_dir = p->repack_dir};
    r->resident_before_pct = 0;
    infer_residency res;
    if (infer_file_residency(p->model, &res) == INFER_OK)
        r->resident_before_pct = res.percent;
    r->storage_read_bytes = (double)res.bytes_resident;
    double t = infer_now_seconds();
    if (infer_model_load(&p->m, p->model, &mp) != INFER_OK)
        return cli_fail("loading model");
    bool warned;
    p->fam = infer_chat_detect(infer_model_gguf(p->m), NULL, &warned);
    for (const char *const *mk = infer_chat_eot_markers(p->fam); mk && *mk; mk++)
        infer_model_add_eog(p->m, *mk);
    r->load_s = infer_now_seconds() - t;
    infer_repack_info ri;
    infer_model_repack_info(p->m, &ri);
    r->loaded = true;
    r->repack_tensors = ri.n_tensors;
    r->repack_s = ri.seconds;
    r->repack_work_s = ri.repack_seconds;
    r->map_validate_s = r->load_s - ri.seconds;
    if (!strcmp(ri.state, "none"))
        snprintf(r->repack_state, sizeof(r->repack_state), "no repack for this file/variant (%s)",
                 infer_kernel_variant());
    else
        snprintf(r->repack_state, sizeof(r->repack_state), "%s%s%s", ri.state, *ri.note ? ": " : "", ri.note);
    return 0;
}

static int make_engine(struct paths *p, const char *cache_dir, uint64_t high, infer_engine **e, struct row *r)
{
    double t = infer_now_seconds();
    infer_engine_params ep;
    infer_engine_params_default(&ep);
    ep.n_ctx = p->n_ctx ? p->n_ctx : p->prefix_tokens + p->gen + 512;
    ep.n_batch = p->n_batch;
    ep.n_threads = p->threads;
    ep.cache_dir = cache_dir;
    ep.cache_high = high;
    ep.cache_low = high / 4 * 3;
    if (infer_engine_new(e, p->m, &ep) != INFER_OK)
        return cli_fail("engine");
    if (r)
        r->engine_s = infer_now_seconds() - t;
    return 0;
}

/* The system text (not timed: the bench's own input, made once). */
static int make_text(struct paths *p, double *seconds)
{
    double t = infer_now_seconds();
    if (!p->sys && !(p->sys = bench_agent_text(p->m, "Hestia, the household assistant", 42, p->prefix_tokens)))
        return cli_fail("system prompt");
    *seconds = infer_now_seconds() - t;
    return 0;
}

/* One request in a fresh session: question q after system text sys.  Fills
 * the request's layers and the first-token time *t_first. */
static int request(struct paths *p, infer_engine *e, const char *sys, int q, struct row *r, double *t_first)
{
    char qt[256];
    bench_question(qt, sizeof(qt), q);
    double t = infer_now_seconds();
    infer_chat_msg msgs[2] = {{"system", sys}, {"user", qt}};
    int32_t *toks = NULL;
    int64_t n = infer_model_tokenize_chat(p->m, p->fam, msgs, 2, true, &toks);
    if (n <= 0) {
        free(toks);
        return cli_fail("tokenizing the request");
    }
    double t_tok = infer_now_seconds();
    infer_cache_metrics m0, m1;
    infer_engine_get_metrics(e, &m0);
    infer_session *s;
    int64_t reused = 0;
    if (infer_session_new_in(&s, e, NULL) != INFER_OK || infer_session_prepare(s, toks, n, &reused) != INFER_OK) {
        free(toks);
        return cli_fail("request");
    }
    double t_prep = infer_now_seconds();
    infer_engine_get_metrics(e, &m1);
    while (infer_session_n_pending(s) > 0) {
        infer_status st = INFER_OK;
        if (infer_engine_step(e, &s, 1, &st, NULL) != INFER_OK || st != INFER_OK) {
            infer_session_free(s);
            free(toks);
            return cli_fail("prefill");
        }
    }
    const int nv = infer_model_n_vocab(p->m);
    int32_t id = infer_argmax(infer_session_logits(s), nv);
    *t_first = infer_now_seconds();
    if (r->loaded)
        p->resident_at_first = resident_bytes(p->model);
    int k = 0;
    for (; k + 1 < p->gen && !infer_model_is_eog(p->m, id) && infer_session_n_tokens(s) + 1 < infer_session_n_ctx(s);
         k++) {
        if (infer_session_append(s, &id, 1) != INFER_OK)
            break;
        id = infer_argmax(infer_session_logits(s), nv);
    }
    double t_end = infer_now_seconds();
    infer_session_free(s);
    free(toks);
    r->tokenize_s = t_tok - t;
    r->prefix_lookup_s = t_prep - t_tok;
    r->prompt_tokens = (double)n;
    r->reused_tokens = (double)reused;
    r->disk_blocks = (double)(m1.disk_reads - m0.disk_reads);
    r->disk_bytes = (double)(m1.disk_read_bytes - m0.disk_read_bytes);
    r->prefill_tokens = (double)(n - reused);
    r->prefill_s = *t_first - t_prep;
    r->prefill_tok_s = r->prefill_s > 0 ? r->prefill_tokens / r->prefill_s : 0;
    r->decode_tokens = k;
    r->decode_s = t_end - *t_first;
    r->decode_tok_s = r->decode_s > 0 && k ? k / r->decode_s : 0;
    return 0;
}

/* TTFT and what is left of it after the measured layers. */
static void finish(struct row *r, double t_start, double t_first, double excluded)
{
    r->ttft_s = t_first - t_start - excluded;
    r->other_s = r->ttft_s - (r->process_s + r->check_s + r->load_s + r->engine_s + r->tokenize_s +
                              r->prefix_lookup_s + r->prefill_s);
    r->available = true;
}

static void emit(const struct row *r)
{
    json_t *o = row_json(r);
    char *s = json_dumps(o, JSON_COMPACT);
    printf("%s\n", s);
    fflush(stdout);
    free(s);
    json_decref(o);
}

/* The storage-read columns: bytes that became resident from the start of
 * the load to the first token, and the rate over that span. */
static void storage(const struct paths *p, struct row *r, double t_load, double t_first, double excluded)
{
    double before = r->storage_read_bytes, now = p->resident_at_first;
    r->storage_read_bytes = now > before ? now - before : 0;
    r->storage_s = t_first - t_load - excluded;
    r->storage_mib_s = r->storage_s > 0 ? r->storage_read_bytes / 1048576.0 / r->storage_s : 0;
}

/* Situations 1-4: a new process, one request. */
static int child_new_process(struct paths *p, int id)
{
    struct row r = {.id = id, .new_process = true};
    double t_enter = infer_now_seconds();
    r.process_s = p->t0 > 0 ? t_enter - p->t0 : 0;
    double t_start = p->t0 > 0 ? p->t0 : t_enter;
    if (!p->no_check)
        artifact_check(p, &r);
    else
        snprintf(r.check_state, sizeof(r.check_state), "skipped (--no-check)");
    double t_load = infer_now_seconds();
    infer_engine *e;
    double text_s, t_first;
    if (load_model(p, &r) || make_engine(p, p->cache_dir, 0, &e, &r))
        return 1;
    if (make_text(p, &text_s) || request(p, e, p->sys, 0, &r, &t_first))
        return 1;
    storage(p, &r, t_load, t_first, text_s);
    finish(&r, t_start, t_first, text_s);
    if (id == 4 && r.disk_blocks == 0)
        unavailable(&r, "no prefix block was read from the disk tier (%s)", p->cache_dir ? p->cache_dir : "none");
    emit(&r);
    infer_engine_free(e); /* with --cache-dir: writes the cached prefix to disk */
    infer_model_free(p->m);
    return 0;
}

/* Situations 5, 8, 7, 6 in one running process. */
static int child_running(struct paths *p)
{
    struct row warm = {0};
    infer_engine *e;
    double text_s, t_first;
    if (load_model(p, &warm) || make_text(p, &text_s))
        return 1;
    /* A context just large enough for the request, and a budget of about 2.5
     * requests, so that a few other long prompts evict the first. */
    int64_t longest = 0;
    for (int q = 0; q < 2; q++) {
        char qt[256];
        bench_question(qt, sizeof(qt), q);
        infer_chat_msg msgs[2] = {{"system", p->sys}, {"user", qt}};
        int32_t *toks = NULL;
        int64_t n = infer_model_tokenize_chat(p->m, p->fam, msgs, 2, true, &toks);
        free(toks);
        longest = n > longest ? n : longest;
    }
    p->n_ctx = (int)longest + p->gen + 64;
    if (make_engine(p, NULL, 0, &e, NULL))
        return 1;
    infer_cache_metrics cm;
    infer_engine_get_metrics(e, &cm);
    infer_engine_free(e);
    uint64_t blocks = (uint64_t)(longest + p->gen) / (uint64_t)cm.block_tokens + 2;
    uint64_t high = blocks * cm.block_bytes * 5 / 2;
    if (make_engine(p, NULL, high, &e, NULL) || request(p, e, p->sys, 0, &warm, &t_first))
        return 1;
    fprintf(stderr, "  first request of the running process: %.0f prompt tokens computed\n", warm.prefill_tokens);

    struct row r5 = {.id = 5};
    snprintf(r5.check_state, sizeof(r5.check_state), "not repeated in a running process");
    snprintf(r5.repack_state, sizeof(r5.repack_state), "loaded before");
    double t = infer_now_seconds();
    if (request(p, e, p->sys, 0, &r5, &t_first))
        return 1;
    finish(&r5, t, t_first, 0);
    emit(&r5);

    struct row r8 = r5;
    r8.id = 8;
    t = infer_now_seconds();
    if (request(p, e, p->sys, 1, &r8, &t_first))
        return 1;
    finish(&r8, t, t_first, 0);
    emit(&r8);

    struct row r7 = r5, other = {0};
    r7.id = 7;
    infer_cache_metrics m0, m1;
    infer_engine_get_metrics(e, &m0);
    for (int i = 0; i < p->competing; i++) {
        char *txt = bench_agent_text(p->m, "the family's travel planner", 900u + (uint32_t)i * 17u, p->prefix_tokens);
        if (!txt)
            return cli_fail("competing prompt");
        int rc = request(p, e, txt, 50 + i, &other, &t_first);
        free(txt);
        if (rc)
            return 1;
    }
    infer_engine_get_metrics(e, &m1);
    t = infer_now_seconds();
    if (request(p, e, p->sys, 0, &r7, &t_first))
        return 1;
    finish(&r7, t, t_first, 0);
    snprintf(r7.note, sizeof(r7.note), "%d competing prompts of ~%d tokens, %lld blocks evicted", p->competing,
             p->prefix_tokens, (long long)(m1.evictions - m0.evictions));
    if (r7.reused_tokens >= r5.reused_tokens)
        unavailable(&r7, "the competing workload did not evict the prefix (%.0f tokens still reused; %lld blocks "
                         "evicted)", r7.reused_tokens, (long long)(m1.evictions - m0.evictions));
    emit(&r7);

    /* keep-alive expiry as the server does it: engine and model freed, then the request */
    infer_engine_free(e);
    infer_model_free(p->m);
    p->m = NULL;
    struct row r6 = {.id = 6};
    snprintf(r6.check_state, sizeof(r6.check_state), "not repeated by a reload");
    t = infer_now_seconds();
    if (load_model(p, &r6) || make_engine(p, NULL, high, &e, &r6) || request(p, e, p->sys, 0, &r6, &t_first))
        return 1;
    storage(p, &r6, t, t_first, 0);
    finish(&r6, t, t_first, 0);
    emit(&r6);
    infer_engine_free(e);
    infer_model_free(p->m);
    return 0;
}

static int child(struct paths *p)
{
    int rc;
    if (!strcmp(p->child, "running"))
        rc = child_running(p);
    else
        rc = child_new_process(p, atoi(p->child));
    free(p->sys);
    return rc;
}

/* ------------------------------------------------------------- parent */

static int spawn(const struct paths *p, const char *which, const char *repack, const char *cache, const char *sum,
                 struct row *rows)
{
    char t0[32], th[16], nb[16], pt[16], gen[16], comp[16];
    snprintf(th, sizeof(th), "%d", p->threads);
    snprintf(nb, sizeof(nb), "%d", p->n_batch);
    snprintf(pt, sizeof(pt), "%d", p->prefix_tokens);
    snprintf(gen, sizeof(gen), "%d", p->gen);
    snprintf(comp, sizeof(comp), "%d", p->competing);
    char *args[40];
    int k = 0;
    const char *kv[][2] = {{"-m", p->model}, {"-b", nb}, {"--prefix-tokens", pt}, {"--gen", gen},
                           {"--competing", comp}, {"--child", which}, {"--repack-dir", repack}};
    args[k++] = (char *)"infer";
    args[k++] = (char *)"bench";
    args[k++] = (char *)"--paths";
    for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++) {
        args[k++] = (char *)kv[i][0];
        args[k++] = (char *)kv[i][1];
    }
    if (p->threads) {
        args[k++] = (char *)"-t";
        args[k++] = th;
    }
    if (cache) {
        args[k++] = (char *)"--cache-dir";
        args[k++] = (char *)cache;
    }
    if (sum && *sum) {
        args[k++] = (char *)"--sum";
        args[k++] = (char *)sum;
    }
    if (p->no_check)
        args[k++] = (char *)"--no-check";
    args[k++] = (char *)"--t0";
    int t0_at = k++;
    args[k] = NULL;
    static char out[1 << 16];
    snprintf(t0, sizeof(t0), "%.9f", infer_now_seconds());
    args[t0_at] = t0;
    int rc = bench_run_child(p->exe, args, out, sizeof(out));
    int got = 0;
    for (char *line = strtok(out, "\n"); line; line = strtok(NULL, "\n")) {
        struct row r;
        if (row_parse(line, &r)) {
            rows[r.id] = r;
            got++;
        }
    }
    if (rc != 0)
        fprintf(stderr, "warning: the child for situation(s) %s exited with %d\n", which, rc);
    return rc != 0 ? (rc < 0 ? -1 : rc) : (got ? 0 : -1);
}

static void mark_failed(struct row *rows, const char *ids, int rc)
{
    for (const char *c = ids; *c; c++) {
        int id = *c - '0';
        if (id >= 1 && id <= N_SIT && !rows[id].available && !rows[id].reason[0]) {
            rows[id].id = id;
            unavailable(&rows[id], "the child process failed (exit %d; see stderr)", rc);
        }
    }
}

static double ms(double s) { return s * 1000.0; }

static void print_table(FILE *f, const struct row *rows)
{
    fprintf(f, "| # | situation | artifact check | storage read | map + validate | repack | engine | tokenize | "
           "prefix reused (RAM / disk) | prefill | TTFT | decode |\n"
           "|---|---|---|---|---|---|---|---|---|---|---|---|\n");
    for (int i = 1; i <= N_SIT; i++) {
        const struct row *r = &rows[i];
        if (!r->available) {
            fprintf(f, "| %d | %s | not measured: %s ||||||||||\n", i, sit_name[i], r->reason);
            continue;
        }
        char check[192], stor[96], map[32], rep[224], eng[32], pre[160];
        if (r->new_process)
            snprintf(check, sizeof(check), "%.1f ms, %s%s", ms(r->check_s), r->check_state,
                     r->check_read_bytes > 0 ? " (its reads dropped again)" : "");
        else
            snprintf(check, sizeof(check), "%s", r->check_state);
        if (r->loaded) {
            snprintf(stor, sizeof(stor), "%.1f MiB, %.0f MiB/s (%.0f%% resident before)",
                     r->storage_read_bytes / 1048576.0, r->storage_mib_s, r->resident_before_pct);
            snprintf(map, sizeof(map), "%.1f ms", ms(r->map_validate_s));
            if (!strncmp(r->repack_state, "no repack", 9))
                snprintf(rep, sizeof(rep), "%s", r->repack_state);
            else
                snprintf(rep, sizeof(rep), "%s, %.0f tensors, %.1f ms", r->repack_state, r->repack_tensors,
                         ms(r->repack_s));
            snprintf(eng, sizeof(eng), "%.1f ms", ms(r->engine_s));
        } else {
            snprintf(stor, sizeof(stor), "model mapped");
            snprintf(map, sizeof(map), "-");
            snprintf(rep, sizeof(rep), "-");
            snprintf(eng, sizeof(eng), "-");
        }
        double from_disk = r->disk_blocks > 0 && r->reused_tokens > 0 ? r->disk_blocks : 0;
        snprintf(pre, sizeof(pre), "%.0f of %.0f tokens (%.0f blocks, %.1f MiB from disk), %.1f ms", r->reused_tokens,
                 r->prompt_tokens, from_disk, r->disk_bytes / 1048576.0, ms(r->prefix_lookup_s));
        fprintf(f, "| %d | %s | %s | %s | %s | %s | %s | %.1f ms | %s | %.0f tokens, %.0f tok/s, %.0f ms | **%.0f ms** | "
               "%.0f tokens, %.1f tok/s |\n",
               i, sit_name[i], check, stor, map, rep, eng, ms(r->tokenize_s), pre, r->prefill_tokens, r->prefill_tok_s,
               ms(r->prefill_s), ms(r->ttft_s), r->decode_tokens, r->decode_tok_s);
    }
    for (int i = 1; i <= N_SIT; i++)
        if (rows[i].available && rows[i].note[0])
            fprintf(f, "\n%d: %s", i, rows[i].note);
    fprintf(f, "\n");
}

/* ---- SVG: one stacked bar per situation, where its TTFT went ---- */

static const struct seg {
    const char *name, *color;
    size_t off;
} segs[] = {
    {"process start", "#9e9e9e", offsetof(struct row, process_s)},
    {"artifact check", "#8d6e63", offsetof(struct row, check_s)},
    {"map + validate (page faults)", "#e53935", offsetof(struct row, map_validate_s)},
    {"repack / repack cache", "#fb8c00", offsetof(struct row, repack_s)},
    {"engine (KV arena)", "#fdd835", offsetof(struct row, engine_s)},
    {"tokenize", "#7cb342", offsetof(struct row, tokenize_s)},
    {"prefix lookup + disk read", "#00897b", offsetof(struct row, prefix_lookup_s)},
    {"prefill (uncached tokens)", "#1e88e5", offsetof(struct row, prefill_s)},
    {"other", "#cfd8dc", offsetof(struct row, other_s)},
};
#define N_SEGS (sizeof(segs) / sizeof(segs[0]))

static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++)
        switch (*s) {
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '&': fputs("&amp;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
}

static void print_svg(FILE *f, const struct row *rows, const char *model)
{
    const int label_w = 330, bar_w = 560, row_h = 34, top = 86, w = label_w + bar_w + 120;
    const int h = top + N_SIT * row_h + 40;
    double max = 0;
    for (int i = 1; i <= N_SIT; i++)
        if (rows[i].available && rows[i].ttft_s > max)
            max = rows[i].ttft_s;
    if (max <= 0)
        max = 1;
    fprintf(f, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
               "font-family=\"sans-serif\" font-size=\"12\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
            w, h, w, h);
    fprintf(f, "<text x=\"10\" y=\"20\" font-size=\"15\" font-weight=\"bold\">infer bench --paths: where the time to "
               "first token went (");
    xml_text(f, model);
    fprintf(f, ")</text>\n");
    int lx = 10, ly = 40;
    for (size_t s = 0; s < N_SEGS; s++) {
        int tw = 8 + (int)strlen(segs[s].name) * 6 + 18;
        if (lx + tw > w - 10) {
            lx = 10;
            ly += 18;
        }
        fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"12\" height=\"12\" fill=\"%s\"/><text x=\"%d\" y=\"%d\">%s</text>\n",
                lx, ly, segs[s].color, lx + 16, ly + 10, segs[s].name);
        lx += tw;
    }
    for (int i = 1; i <= N_SIT; i++) {
        const struct row *r = &rows[i];
        int y = top + (i - 1) * row_h;
        fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%d. %s</text>\n", label_w - 8, y + 17, i, sit_name[i]);
        if (!r->available) {
            fprintf(f, "<text x=\"%d\" y=\"%d\" fill=\"#b71c1c\">not measured: ", label_w, y + 17);
            xml_text(f, r->reason);
            fprintf(f, "</text>\n");
            continue;
        }
        double x = label_w;
        for (size_t s = 0; s < N_SEGS; s++) {
            double v = *(const double *)((const char *)r + segs[s].off);
            if (v <= 0)
                continue;
            double wd = v / max * bar_w;
            fprintf(f, "<rect x=\"%.2f\" y=\"%d\" width=\"%.2f\" height=\"22\" fill=\"%s\"><title>%s: %.1f ms</title>"
                       "</rect>\n",
                    x, y + 4, wd, segs[s].color, segs[s].name, ms(v));
            x += wd;
        }
        fprintf(f, "<text x=\"%.2f\" y=\"%d\">%.0f ms</text>\n", x + 6, y + 19, ms(r->ttft_s));
    }
    fprintf(f, "<text x=\"10\" y=\"%d\" fill=\"#555\">Bars share one linear scale (longest %.0f ms); hover a segment "
               "for its time. Storage reads happen as page faults inside map and prefill.</text>\n</svg>\n",
            h - 14, ms(max));
}

struct out_ctx {
    const struct paths *p;
    const struct row *rows;
    const char *model_shown, *sum;
};

static void write_output(FILE *f, const char *fmt, const struct out_ctx *c)
{
    const struct paths *p = c->p;
    if (!strcmp(fmt, "json")) {
        json_t *o = json_object(), *a = json_array();
        json_object_set_new(o, "model", json_string(c->model_shown));
        json_object_set_new(o, "model_measured", json_string(p->model));
        json_object_set_new(o, "kernel_variant", json_string(infer_kernel_variant()));
        json_object_set_new(o, "prefix_tokens", json_integer(p->prefix_tokens));
        json_object_set_new(o, "gen", json_integer(p->gen));
        json_object_set_new(o, "competing", json_integer(p->competing));
        json_object_set_new(o, "recorded_sha256", json_string(c->sum));
        for (int i = 1; i <= N_SIT; i++)
            json_array_append_new(a, row_json(&c->rows[i]));
        json_object_set_new(o, "situations", a);
        json_dumpf(o, f, JSON_INDENT(1));
        fprintf(f, "\n");
        json_decref(o);
    } else if (!strcmp(fmt, "svg")) {
        print_svg(f, c->rows, c->model_shown);
    } else {
        fprintf(f, "# infer bench --paths\n\nmodel %s, kernels %s, request: %d-token system prompt + question, %d "
                   "tokens of answer; %d threads\n\n",
                c->model_shown, infer_kernel_variant(), p->prefix_tokens, p->gen,
                p->threads ? p->threads : infer_n_threads_default());
        if (p->model != c->model_shown)
            fprintf(f, "(measured on a private copy: another process maps %s, so its pages could not be dropped)\n\n",
                    c->model_shown);
        print_table(f, c->rows);
    }
}

static const char *paths_help =
    "usage: infer bench --paths [-m MODEL] [--prefix-tokens 2000] [--gen 64] [--competing 3] [-t N] [-b N]\n"
    "                           [--no-check] [-o md|json|svg] [--svg FILE] [--json FILE]\n"
    "One request (a system prompt of --prefix-tokens tokens, a short question, --gen tokens of answer) in\n"
    "eight situations, each layer of its time to first token measured on its own:\n"
    "  1 cold storage (pages dropped with posix_fadvise DONTNEED), new process, no repack cache\n"
    "  2 page cache warm, new process, no repack cache\n"
    "  3 page cache + repack cache warm, new process, empty prefix cache (--cache-dir, written at exit)\n"
    "  4 restart with the prefix on disk (--cache-dir of 3)\n"
    "  5 same process, immediate repeat (prefix in RAM)\n"
    "  6 after keep-alive expiry (engine and model freed, then the request)\n"
    "  7 after a competing workload (--competing other long prompts evicted the prefix)\n"
    "  8 another question after the same prefix\n"
    "  -o md (default): a table; json: one object per situation; svg: a stacked bar chart\n"
    "  --svg FILE, --json FILE: also write that form of the same run to FILE\n"
    "  --no-check: skip the artifact check (sha256 against SHA256SUMS beside the model)\n";

enum { P_PATHS = 3000, P_PREFIX_TOKENS, P_GEN, P_COMPETING, P_CHILD, P_REPACK_DIR, P_CACHE_DIR, P_SUM, P_T0, P_NO_CHECK, P_SVG, P_JSON };

static int positive_arg(const char *arg, int *out)
{
    char *end;
    long v = strtol(arg, &end, 10);
    if (*end || v <= 0 || v > 1 << 20) {
        fprintf(stderr, "error: '%s' is not a positive count\n", arg);
        return 2;
    }
    *out = (int)v;
    return 0;
}

/* Copy src to dst (a new file); 0 or -1 with a message. */
static int copy_file(const char *src, const char *dst)
{
    int in = open(src, O_RDONLY | O_CLOEXEC), out = -1;
    struct stat st;
    int rc = -1;
    if (in >= 0 && fstat(in, &st) == 0 && (out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) >= 0) {
        off_t left = st.st_size;
        ssize_t n = 0;
        while (left > 0 && (n = copy_file_range(in, NULL, out, NULL, (size_t)left, 0)) > 0)
            left -= n;
        rc = left == 0 && fdatasync(out) == 0 ? 0 : -1;
    }
    if (rc != 0)
        fprintf(stderr, "warning: copying %s to %s: %s\n", src, dst, strerror(errno));
    if (in >= 0)
        close(in);
    if (out >= 0)
        close(out);
    return rc;
}

static int remove_tree(const char *dir)
{
    char cmd[PATH_MAX + 32];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
    return system(cmd);
}

int cmd_bench_paths(int argc, char **argv)
{
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"threads", required_argument, 0, 't'},
        {"batch-size", required_argument, 0, 'b'}, {"output", required_argument, 0, 'o'},
        {"paths", no_argument, 0, P_PATHS}, {"prefix-tokens", required_argument, 0, P_PREFIX_TOKENS},
        {"gen", required_argument, 0, P_GEN}, {"competing", required_argument, 0, P_COMPETING},
        {"child", required_argument, 0, P_CHILD}, {"repack-dir", required_argument, 0, P_REPACK_DIR},
        {"cache-dir", required_argument, 0, P_CACHE_DIR}, {"sum", required_argument, 0, P_SUM},
        {"t0", required_argument, 0, P_T0}, {"no-check", no_argument, 0, P_NO_CHECK},
        {"svg", required_argument, 0, P_SVG}, {"json", required_argument, 0, P_JSON},
        {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    struct paths p = {.n_batch = 512, .prefix_tokens = 2000, .gen = 64, .competing = 3};
    const char *model = NULL, *fmt = "md", *svg_file = NULL, *json_file = NULL;
    int c, rc;
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:t:b:o:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 't': if ((rc = positive_arg(optarg, &p.threads))) return rc; break;
        case 'b': if ((rc = positive_arg(optarg, &p.n_batch))) return rc; break;
        case 'o':
            if (strcmp(optarg, "md") && strcmp(optarg, "json") && strcmp(optarg, "svg")) {
                fprintf(stderr, "error: -o takes md, json or svg\n");
                return 2;
            }
            fmt = optarg;
            break;
        case P_PATHS: break;
        case P_PREFIX_TOKENS: if ((rc = positive_arg(optarg, &p.prefix_tokens))) return rc; break;
        case P_GEN: if ((rc = positive_arg(optarg, &p.gen))) return rc; break;
        case P_COMPETING: if ((rc = positive_arg(optarg, &p.competing))) return rc; break;
        case P_CHILD: p.child = optarg; break;
        case P_REPACK_DIR: p.repack_dir = optarg; break;
        case P_CACHE_DIR: p.cache_dir = optarg; break;
        case P_SUM: p.sum = optarg; break;
        case P_T0: p.t0 = strtod(optarg, NULL); break;
        case P_NO_CHECK: p.no_check = true; break;
        case P_SVG: svg_file = optarg; break;
        case P_JSON: json_file = optarg; break;
        case 'h': printf("%s", paths_help); return 0;
        default: fprintf(stderr, "%s", paths_help); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "error: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (!(p.model = cli_model_path(model)))
        return 1;
    if (p.child)
        return child(&p);

    static char exe[PATH_MAX];
    ssize_t el = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (el <= 0) {
        fprintf(stderr, "error: cannot find this executable to start the situations' processes\n");
        return 1;
    }
    exe[el] = '\0';
    p.exe = exe;
    char sum[65];
    recorded_sum(p.model, sum);
    char tmp[] = "/tmp/infer-paths-XXXXXX";
    if (!mkdtemp(tmp)) {
        fprintf(stderr, "error: cannot create a temporary directory: %s\n", strerror(errno));
        return 1;
    }
    char r1[sizeof(tmp) + 16], r2[sizeof(tmp) + 16], kv[sizeof(tmp) + 16];
    snprintf(r1, sizeof(r1), "%s/repack-1", tmp);
    snprintf(r2, sizeof(r2), "%s/repack-2", tmp);
    snprintf(kv, sizeof(kv), "%s/kv", tmp);

    struct row rows[N_SIT + 1];
    memset(rows, 0, sizeof(rows));
    for (int i = 1; i <= N_SIT; i++)
        rows[i].id = i;

    /* 1: cold storage.  Pages that another process maps (a running server
     * on the same file) cannot be dropped: then the situations run on a
     * private copy of the file, which nobody else maps. */
    fprintf(stderr, "paths: 1 %s ...\n", sit_name[1]);
    static char copy[PATH_MAX];
    const char *model_shown = p.model;
    infer_residency res;
    bool dropped = false;
    for (int attempt = 0; attempt < 2 && !dropped; attempt++) {
        if (infer_file_cold(p.model) != INFER_OK) {
            unavailable(&rows[1], "posix_fadvise(DONTNEED) failed: %s", infer_last_error());
            break;
        }
        if (infer_file_residency(p.model, &res) != INFER_OK) {
            unavailable(&rows[1], "mincore failed: %s", infer_last_error());
            break;
        }
        dropped = res.percent <= 5.0;
        if (dropped || attempt > 0)
            break;
        char base[PATH_MAX];
        snprintf(base, sizeof(base), "%s", p.model);
        snprintf(copy, sizeof(copy), "%s/%s", tmp, basename(base));
        fprintf(stderr, "paths: %.0f%% of %s stays resident after DONTNEED (another process maps it); using a "
                        "private copy, %s\n", res.percent, p.model, copy);
        if (copy_file(p.model, copy) != 0)
            break;
        p.model = copy;
    }
    if (!dropped && !rows[1].reason[0])
        unavailable(&rows[1], "posix_fadvise(DONTNEED) did not drop the pages (%.0f%% still resident, also of a "
                              "private copy)", res.percent);
    else if (dropped && (rc = spawn(&p, "1", r1, NULL, sum, rows)))
        mark_failed(rows, "1", rc);

    /* 2: page cache warm, no repack cache */
    fprintf(stderr, "paths: 2 %s ...\n", sit_name[2]);
    infer_gguf *g;
    uint64_t wb;
    double ws;
    if (infer_gguf_open(&g, p.model, 0) != INFER_OK)
        return cli_fail("opening the model");
    infer_gguf_warm(g, 0, &wb, &ws);
    infer_gguf_close(g);
    if ((rc = spawn(&p, "2", r2, NULL, sum, rows)))
        mark_failed(rows, "2", rc);
    /* 3: + the repack cache of 2, an empty --cache-dir; 4: restart on it */
    fprintf(stderr, "paths: 3 %s ...\n", sit_name[3]);
    if ((rc = spawn(&p, "3", r2, kv, sum, rows)))
        mark_failed(rows, "34", rc);
    else {
        fprintf(stderr, "paths: 4 %s ...\n", sit_name[4]);
        if ((rc = spawn(&p, "4", r2, kv, sum, rows)))
            mark_failed(rows, "4", rc);
    }
    fprintf(stderr, "paths: 5, 8, 7, 6 in one running process ...\n");
    if ((rc = spawn(&p, "running", r2, NULL, sum, rows)))
        mark_failed(rows, "5876", rc);
    if (remove_tree(tmp) != 0)
        fprintf(stderr, "warning: could not remove %s\n", tmp);

    struct out_ctx oc = {&p, rows, model_shown, sum};
    write_output(stdout, fmt, &oc);
    const char *also[2][2] = {{"svg", svg_file}, {"json", json_file}};
    for (int i = 0; i < 2; i++) {
        if (!also[i][1])
            continue;
        FILE *f = fopen(also[i][1], "w");
        if (!f) {
            fprintf(stderr, "error: cannot write %s: %s\n", also[i][1], strerror(errno));
            return 1;
        }
        write_output(f, also[i][0], &oc);
        if (fclose(f) != 0) {
            fprintf(stderr, "error: writing %s: %s\n", also[i][1], strerror(errno));
            return 1;
        }
    }
    return 0;
}
