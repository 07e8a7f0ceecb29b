/*
 * cmd_bench.c - `infer bench`, and the prefix-cache options and figures the
 * other subcommands share (cli.h: CLI_CACHE_LONGOPTS, cli_cache_option,
 * cli_print_cache_metrics).
 *
 *   infer bench --prefix [scenario options] [-o md|json]
 *       the prefix-cache scenarios of DESIGN.md's "prefix KV" layer:
 *       A  one household agent: a ~2,000-token system prompt + document, then
 *          20 different ~30-token questions: cold TTFT, warm TTFT (median of
 *          the rest), hit rate, reused tokens, prefill tok/s
 *       B  several agents: 3 different ~1,500-token prefixes used by 30
 *          requests in a shuffled interleaved order, with a budget that fits
 *          all three, then one that fits only two (eviction behaviour)
 *       C  chat: a 10-turn conversation, each turn's prompt the whole history
 *       D  restart: A with --cache-dir in a child process that exits, then a
 *          new process's first request
 *   infer bench -m MODEL [-p 512] [-n 128] [-d 0] [-r 5] [-t N] [-o md|json]
 *       llama-bench-style prompt processing (ppN: N random tokens in batches
 *       from an empty context) and generation (tgN: N tokens one at a time),
 *       mean ± stddev over repetitions, prefix cache off, in llama-bench's
 *       table layout or as JSON objects (test, n_prompt, n_gen, avg_ts,
 *       stddev_ts, samples_ts)
 *
 * Every request runs in a fresh session of one shared engine, as a server
 * would, so reuse comes from the prefix cache, never from a session's own
 * history.  TTFT is measured from handing the prompt tokens to the engine to
 * the first token chosen (greedy).  Texts are generated from fixed word lists
 * and a seeded generator, so every run sees the same tokens.
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* ---------------------------------------------------- shared cache options */

static const char *cache_help =
    "      --cache-high SIZE   KV bytes (running + cached) that trigger eviction, e.g. 512M, 2G\n"
    "                          (default: min(RAM/4, (available - model - 512M)/2))\n"
    "      --cache-low SIZE    eviction goes down to this (default 3/4 of --cache-high)\n"
    "      --cache-salt TEXT   tenant key: different salts never share cached blocks\n"
    "      --cache-dir DIR     keep cached prefixes on disk across runs (per model fingerprint)\n"
    "      --cache-disk-max SIZE  bytes the disk tier may use (default 4 x --cache-high)\n"
    "      --no-prefix-cache   share and keep nothing between requests\n"
    "      --cache-type-k T, --cache-type-v T\n"
    "                          KV cache element type of keys / values: f16 (default) or q8_0 (about\n"
    "                          half the memory; needs a head size divisible by 32)\n";

const char *cli_cache_help(void) { return cache_help; }

bool cli_parse_bytes(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno || !(v >= 0))
        return false;
    double mul = 1;
    switch (*end) {
    case 'k': case 'K': mul = 1024.0; end++; break;
    case 'm': case 'M': mul = 1048576.0; end++; break;
    case 'g': case 'G': mul = 1073741824.0; end++; break;
    case 't': case 'T': mul = 1099511627776.0; end++; break;
    default: break;
    }
    if (*end == 'i' && mul > 1)
        end++;
    if (*end == 'B' || *end == 'b')
        end++;
    if (*end || v * mul >= 1.8e19)
        return false;
    *out = (uint64_t)(v * mul);
    return true;
}

int cli_cache_option(infer_session_params *p, int c, const char *arg)
{
    uint64_t *size = NULL;
    switch (c) {
    case OPT_CACHE_HIGH: size = &p->cache_high; break;
    case OPT_CACHE_LOW: size = &p->cache_low; break;
    case OPT_CACHE_DISK_MAX: size = &p->cache_disk_max; break;
    case OPT_CACHE_SALT: p->cache_salt = arg; return 0;
    case OPT_CACHE_DIR: p->cache_dir = arg; return 0;
    case OPT_NO_PREFIX_CACHE: p->no_prefix_cache = true; return 0;
    case OPT_CACHE_TYPE_K:
    case OPT_CACHE_TYPE_V:
        if (!infer_kv_type_from_name(arg, c == OPT_CACHE_TYPE_K ? &p->kv_type_k : &p->kv_type_v)) {
            fprintf(stderr, "error: KV cache type '%s': f16 or q8_0\n", arg);
            return 2;
        }
        return 0;
    default: return 1;
    }
    if (!cli_parse_bytes(arg, size) || *size == 0) {
        fprintf(stderr, "error: bad size '%s' (bytes, or with K, M, G suffix)\n", arg);
        return 2;
    }
    return 0;
}

static double mib(uint64_t b) { return (double)b / 1048576.0; }

void cli_print_cache_metrics(FILE *f, const infer_cache_metrics *m)
{
    if (!m->enabled) {
        fprintf(f, "prefix cache: off (--no-prefix-cache)\n");
        return;
    }
    fprintf(f, "prefix cache: %lld lookups, %lld hits; %lld of %lld prompt tokens from the cache (hit rate %.1f%%), "
               "%lld reused in all\n",
            (long long)m->queries, (long long)m->hits, (long long)m->hit_tokens, (long long)m->query_tokens,
            100.0 * m->hit_rate, (long long)m->reused_tokens);
    fprintf(f, "prefill:      %lld tokens computed, %.1f tok/s\n", (long long)m->prefill_tokens, m->prefill_tok_s);
    fprintf(f, "first token:  cold %.3f s (last) / %.3f s (avg of %lld), hit %.3f s (last) / %.3f s (avg of %lld)\n",
            m->ttft_cold_last, m->ttft_cold_avg, (long long)m->ttft_cold_n, m->ttft_hit_last, m->ttft_hit_avg,
            (long long)m->ttft_hit_n);
    fprintf(f, "KV memory:    %.1f MiB in use (%.1f MiB cached, %lld blocks), capacity %.1f MiB, "
               "watermarks %.1f / %.1f MiB, blocks of %d tokens (%.2f MiB), %s pages\n",
            mib(m->kv_bytes_in_use), mib(m->kv_bytes_cached), (long long)m->cached_blocks, mib(m->kv_bytes_capacity),
            mib(m->cache_high), mib(m->cache_low), m->block_tokens, mib(m->block_bytes), m->page_mode);
    fprintf(f, "evictions:    %lld blocks (%.0f in the last minute)\n", (long long)m->evictions,
            m->evictions_per_minute);
    if (m->disk_enabled)
        fprintf(f, "disk tier:    %s: %lld files, %.1f MiB; %lld blocks read (%.1f MiB), %lld written (%.1f MiB), "
                   "%lld files ignored\n",
                m->disk_dir, (long long)m->disk_files, mib(m->disk_bytes), (long long)m->disk_reads,
                mib(m->disk_read_bytes), (long long)m->disk_writes, mib(m->disk_write_bytes),
                (long long)m->disk_errors);
}

/* ------------------------------------------------------- scenario texts */

static uint32_t rnd(uint32_t *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}

#define PICK(arr, s) (arr[rnd(s) % (sizeof(arr) / sizeof(arr[0]))])

static const char *rooms[] = {"kitchen", "living room", "garage", "main bedroom", "bathroom", "garden",
                              "home office", "hallway", "basement", "attic", "laundry room", "kids' room"};
static const char *devices[] = {"thermostat", "ceiling lights", "blinds", "dishwasher", "washing machine",
                                "robot vacuum", "door lock", "sprinkler", "oven", "air purifier",
                                "water heater", "security camera", "smoke detector", "heat pump"};
static const char *days[] = {"Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"};
static const char *people[] = {"Ana", "Luis", "Marta", "Diego", "grandma Rosa", "the babysitter", "Tomas"};
static const char *verbs[] = {"prefers", "asked for", "complained about", "set up", "usually checks",
                              "wants a reminder about"};

/* One sentence of a household document. */
static void sentence(char *out, size_t n, uint32_t *s)
{
    switch (rnd(s) % 5) {
    case 0:
        snprintf(out, n, "The %s %s runs on %ss at %02u:%02u, and %s %s it at level %u. ", PICK(rooms, s),
                 PICK(devices, s), PICK(days, s), rnd(s) % 24, rnd(s) % 4 * 15, PICK(people, s), PICK(verbs, s),
                 1 + rnd(s) % 9);
        break;
    case 1:
        snprintf(out, n, "On %ss %s leaves at %02u:%02u, so the %s in the %s must be off by then. ", PICK(days, s),
                 PICK(people, s), 6 + rnd(s) % 4, rnd(s) % 4 * 15, PICK(devices, s), PICK(rooms, s));
        break;
    case 2:
        snprintf(out, n, "Maintenance note %u: the %s of the %s was serviced in month %u and costs about %u euros "
                         "a year to run. ",
                 rnd(s) % 900 + 100, PICK(devices, s), PICK(rooms, s), 1 + rnd(s) % 12, 20 + rnd(s) % 400);
        break;
    case 3:
        snprintf(out, n, "If nobody is home after %02u:00, turn the %s in the %s to eco mode and tell %s. ",
                 17 + rnd(s) % 6, PICK(devices, s), PICK(rooms, s), PICK(people, s));
        break;
    default:
        snprintf(out, n, "%s %s the %s; remember that the %s is shared with the %s. ", PICK(people, s),
                 PICK(verbs, s), PICK(devices, s), PICK(rooms, s), PICK(rooms, s));
        break;
    }
}

static int64_t count_tokens(infer_model *m, const char *text)
{
    return infer_model_tokenize(m, text, strlen(text), false, false, NULL, 0);
}

/* An agent's system text: instructions then a document of about
 * target_tokens tokens in all. */
char *bench_agent_text(infer_model *m, const char *role, uint32_t seed, int target_tokens)
{
    size_t cap = 1 << 16, len = 0;
    char *t = malloc(cap);
    if (!t)
        return NULL;
    len = (size_t)snprintf(t, cap,
                           "You are %s for the Ortega family's home. Answer in one or two short sentences, using "
                           "only the household notes below; if the notes do not say, answer that you do not know. "
                           "Never invent schedules.\n\nHousehold notes:\n",
                           role);
    uint32_t s = seed;
    char buf[512];
    for (int64_t have = 0;;) {
        /* sentences are ~25 tokens: count after a batch, one by one near the end */
        int batch = have < target_tokens - 300 ? 8 : 1;
        for (int k = 0; k < batch; k++) {
            sentence(buf, sizeof(buf), &s);
            size_t bl = strlen(buf);
            if (len + bl + 1 > cap) {
                char *nt = realloc(t, cap *= 2);
                if (!nt) {
                    free(t);
                    return NULL;
                }
                t = nt;
            }
            memcpy(t + len, buf, bl + 1);
            len += bl;
        }
        if ((have = count_tokens(m, t)) >= target_tokens)
            return t;
    }
}

void bench_question(char *out, size_t n, int i)
{
    uint32_t s = 1000u + (uint32_t)i * 7919u;
    switch (i % 4) {
    case 0:
        snprintf(out, n, "Question %d: when does the %s in the %s run on %s?", i + 1, PICK(devices, &s),
                 PICK(rooms, &s), PICK(days, &s));
        break;
    case 1:
        snprintf(out, n, "Question %d: what does %s prefer for the %s?", i + 1, PICK(people, &s), PICK(devices, &s));
        break;
    case 2:
        snprintf(out, n, "Question %d: how much does the %s in the %s cost to run each year?", i + 1,
                 PICK(devices, &s), PICK(rooms, &s));
        break;
    default:
        snprintf(out, n, "Question %d: who should I tell if the %s is left on after dark?", i + 1, PICK(devices, &s));
        break;
    }
}

/* ------------------------------------------------------------ requests */

struct bench {
    infer_model *m;
    infer_chat_family fam;
    const char *model_path;
    infer_session_params sp; /* cache flags and threads, as given */
    int n_batch, kv_block, threads;
    int prefix_tokens, questions, agent_tokens, requests, turns, chat_gen, gen;
    bool json;
    const char *exe;
};

struct req {
    int64_t prompt, reused;
    double ttft;
};

static int32_t *tokenize(infer_model *m, const char *text, int64_t *n)
{
    int64_t cap = (int64_t)strlen(text) + 16;
    int32_t *t = malloc((size_t)cap * sizeof(int32_t));
    *n = t ? infer_model_tokenize(m, text, strlen(text), true, true, t, cap) : -1;
    if (*n <= 0) {
        free(t);
        return NULL;
    }
    return t;
}

static int32_t *render(struct bench *b, const infer_chat_msg *msgs, size_t n_msgs, int64_t *n)
{
    char *text = infer_chat_format(b->fam, msgs, n_msgs, true);
    if (!text)
        return NULL;
    int32_t *t = tokenize(b->m, text, n);
    free(text);
    return t;
}

static infer_status engine_for(struct bench *b, int n_ctx, uint64_t high, uint64_t low, const char *dir,
                               infer_engine **e)
{
    infer_engine_params p;
    infer_engine_params_default(&p);
    p.n_ctx = n_ctx;
    p.n_batch = b->n_batch;
    p.n_threads = b->threads;
    p.kv_block = b->kv_block;
    p.cache_high = high ? high : b->sp.cache_high;
    p.cache_low = high ? low : b->sp.cache_low;
    p.cache_disk_max = b->sp.cache_disk_max;
    p.cache_dir = dir;
    p.no_prefix_cache = b->sp.no_prefix_cache;
    p.kv_type_k = b->sp.kv_type_k;
    p.kv_type_v = b->sp.kv_type_v;
    return infer_engine_new(e, b->m, &p);
}

/* One request in a fresh session: prompt, first token (greedy), then up to
 * gen - 1 more; the answer text when wanted.  Returns 0 or 1 on error. */
static int request(struct bench *b, infer_engine *e, const int32_t *toks, int64_t n, int gen, struct req *r,
                   char **answer)
{
    infer_session_params sp;
    infer_session_params_default(&sp);
    sp.cache_salt = b->sp.cache_salt;
    infer_session *s;
    if (infer_session_new_in(&s, e, &sp) != INFER_OK)
        return cli_fail("session");
    const int nv = infer_model_n_vocab(b->m);
    double t0 = infer_now_seconds();
    if (infer_session_set_tokens(s, toks, n, &r->reused) != INFER_OK) {
        infer_session_free(s);
        return cli_fail("request");
    }
    int32_t id = infer_argmax(infer_session_logits(s), nv);
    r->ttft = infer_now_seconds() - t0;
    r->prompt = n;
    infer_detok *d = answer ? infer_detok_new(b->m) : NULL;
    size_t len = 0, cap = 0;
    char piece[256];
    for (int k = 0; k < gen && !infer_model_is_eog(b->m, id); k++) {
        if (d) {
            size_t pl = infer_detok_push(d, id, piece, sizeof(piece));
            if (len + pl + 1 > cap) {
                cap = (len + pl + 1) * 2;
                *answer = realloc(*answer, cap);
            }
            memcpy(*answer + len, piece, pl);
            len += pl;
            (*answer)[len] = '\0';
        }
        if (k + 1 == gen || infer_session_n_tokens(s) + 1 >= infer_session_n_ctx(s) ||
            infer_session_append(s, &id, 1) != INFER_OK)
            break;
        id = infer_argmax(infer_session_logits(s), nv);
    }
    if (d) {
        size_t pl = infer_detok_flush(d, piece, sizeof(piece));
        *answer = realloc(*answer, len + pl + 1);
        memcpy(*answer + len, piece, pl);
        (*answer)[len + pl] = '\0';
        infer_detok_free(d);
    }
    infer_session_free(s);
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    if (n <= 0)
        return 0;
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* -------------------------------------------------------- scenario A */

struct result_a {
    int64_t prefix_tokens, cold_prompt;
    double cold_ttft, warm_ttft, ratio, hit_rate, prefix_hit_rate, prefill_tok_s, cold_prefill_tok_s;
    int64_t reused, warm_n;
};

/* prompts[i] = system + document, question i */
static int32_t **prompts_a(struct bench *b, int n_q, int64_t *lens, int64_t *prefix_len)
{
    char *sys = bench_agent_text(b->m, "Hestia, the household assistant", 42, b->prefix_tokens);
    if (!sys)
        return NULL;
    int32_t **p = calloc((size_t)n_q, sizeof(*p));
    char q[256];
    for (int i = 0; p && i < n_q; i++) {
        bench_question(q, sizeof(q), i);
        infer_chat_msg msgs[2] = {{"system", sys}, {"user", q}};
        if (!(p[i] = render(b, msgs, 2, &lens[i]))) {
            fprintf(stderr, "error: rendering a prompt: %s\n", infer_last_error());
            free(sys);
            return NULL;
        }
    }
    /* the shared prefix: the common part of the first two prompts */
    int64_t k = 0;
    if (n_q > 1)
        while (k < lens[0] && k < lens[1] && p[0][k] == p[1][k])
            k++;
    *prefix_len = k;
    free(sys);
    return p;
}

static void free_prompts(int32_t **p, int n)
{
    for (int i = 0; p && i < n; i++)
        free(p[i]);
    free(p);
}

static int scenario_a(struct bench *b, const char *dir, int n_q, int first_q, struct result_a *out, bool quiet)
{
    memset(out, 0, sizeof(*out));
    int64_t *lens = calloc((size_t)(first_q + n_q), sizeof(int64_t)), maxlen = 0;
    int32_t **p = prompts_a(b, first_q + n_q, lens, &out->prefix_tokens);
    if (!p)
        return 1;
    for (int i = 0; i < first_q + n_q; i++)
        maxlen = lens[i] > maxlen ? lens[i] : maxlen;
    infer_engine *e;
    if (engine_for(b, (int)maxlen + b->gen + 64, 0, 0, dir, &e) != INFER_OK) {
        free_prompts(p, first_q + n_q);
        free(lens);
        return cli_fail("engine");
    }
    double *warm = calloc((size_t)n_q, sizeof(double));
    int rc = 0;
    for (int i = 0; i < n_q && !rc; i++) {
        struct req r;
        if ((rc = request(b, e, p[first_q + i], lens[first_q + i], b->gen, &r, NULL)))
            break;
        if (!quiet)
            fprintf(stderr, "  A request %2d: %4lld prompt tokens, %4lld reused, TTFT %.3f s\n", i + 1,
                    (long long)r.prompt, (long long)r.reused, r.ttft);
        if (i == 0) {
            out->cold_ttft = r.ttft;
            out->cold_prompt = r.prompt - r.reused;
        } else {
            warm[out->warm_n++] = r.ttft;
            out->prefix_hit_rate += (double)(r.reused < out->prefix_tokens ? r.reused : out->prefix_tokens);
        }
        out->reused += r.reused;
    }
    infer_cache_metrics cm;
    infer_engine_get_metrics(e, &cm);
    out->warm_ttft = median(warm, (int)out->warm_n);
    if (out->warm_n && out->prefix_tokens)
        out->prefix_hit_rate /= (double)out->warm_n * (double)out->prefix_tokens;
    out->ratio = out->cold_ttft > 0 ? out->warm_ttft / out->cold_ttft : 0;
    out->hit_rate = cm.hit_rate;
    out->prefill_tok_s = cm.prefill_tok_s;
    out->cold_prefill_tok_s = out->cold_ttft > 0 ? (double)out->cold_prompt / out->cold_ttft : 0;
    free(warm);
    infer_engine_free(e);
    free_prompts(p, first_q + n_q);
    free(lens);
    return rc;
}

/* -------------------------------------------------------- scenario B */

struct result_b {
    int fits;                /* prefixes the budget holds */
    double high_mib, low_mib;
    double hit_rate_after_first; /* reused / prefix tokens, requests after each prefix was seen once */
    int64_t evictions, hits, misses;
    double ttft_hit, ttft_miss;  /* medians */
};

static int scenario_b(struct bench *b, int fits, int32_t **p, const int64_t *lens, const int64_t *prefix_len,
                      const int *order, int n_req, int64_t maxlen, struct result_b *out)
{
    memset(out, 0, sizeof(*out));
    out->fits = fits;
    /* budget: `fits` prefixes, the running request's own blocks (its question
     * and a copy-on-write) and 4 more; eviction frees 4 blocks at a time */
    int64_t blocks = 0;
    for (int a = 0; a < 3; a++)
        blocks = prefix_len[a] / b->kv_block > blocks ? prefix_len[a] / b->kv_block : blocks;
    infer_engine *e;
    if (engine_for(b, (int)maxlen + b->gen + 64, 1, 1, NULL, &e) != INFER_OK)
        return cli_fail("engine");
    infer_cache_metrics cm;
    infer_engine_get_metrics(e, &cm);
    infer_engine_free(e);
    uint64_t bb = cm.block_bytes;
    int64_t ctx_blocks = (int64_t)(cm.kv_bytes_capacity / bb); /* one running request's worst case */
    int64_t tail = ctx_blocks - blocks + 2;
    uint64_t high = (uint64_t)(fits * blocks + tail + 4) * bb, low = high - 4 * bb;
    if (engine_for(b, (int)maxlen + b->gen + 64, high, low, NULL, &e) != INFER_OK)
        return cli_fail("engine");
    infer_engine_get_metrics(e, &cm);
    out->high_mib = mib(cm.cache_high);
    out->low_mib = mib(cm.cache_low);
    bool seen[3] = {false, false, false};
    double *th = calloc((size_t)n_req, sizeof(double)), *tm = calloc((size_t)n_req, sizeof(double));
    int64_t reused_after = 0, prefix_after = 0;
    int nh = 0, nm = 0, rc = 0;
    for (int i = 0; i < n_req && !rc; i++) {
        int a = order[i];
        struct req r;
        if ((rc = request(b, e, p[i], lens[i], b->gen, &r, NULL)))
            break;
        bool all_seen = seen[0] && seen[1] && seen[2];
        seen[a] = true;
        if (all_seen) {
            reused_after += r.reused < prefix_len[a] ? r.reused : prefix_len[a];
            prefix_after += prefix_len[a];
        }
        if (r.reused >= prefix_len[a] / b->kv_block * b->kv_block && r.reused > 0)
            th[nh++] = r.ttft;
        else
            tm[nm++] = r.ttft;
        fprintf(stderr, "  B(%d) request %2d: agent %c, %4lld prompt tokens, %4lld reused, TTFT %.3f s\n", fits,
                i + 1, 'A' + a, (long long)r.prompt, (long long)r.reused, r.ttft);
    }
    infer_engine_get_metrics(e, &cm);
    out->evictions = cm.evictions;
    out->hits = nh;
    out->misses = nm;
    out->ttft_hit = median(th, nh);
    out->ttft_miss = median(tm, nm);
    out->hit_rate_after_first = prefix_after ? (double)reused_after / (double)prefix_after : 0;
    free(th);
    free(tm);
    infer_engine_free(e);
    return rc;
}

/* -------------------------------------------------------- scenario C */

struct result_c {
    int turns;
    int64_t prompt_tokens, reused_tokens;
    double ttft_first, ttft_rest_median, reuse_rate_after_first;
};

static int scenario_c(struct bench *b, struct result_c *out)
{
    memset(out, 0, sizeof(*out));
    char *sys = bench_agent_text(b->m, "Hestia, the household assistant", 77, b->prefix_tokens / 4);
    if (!sys)
        return 1;
    infer_chat_msg *msgs = calloc((size_t)(2 * b->turns + 1), sizeof(*msgs));
    char **owned = calloc((size_t)(2 * b->turns + 1), sizeof(char *));
    size_t nm = 0;
    msgs[nm++] = (infer_chat_msg){"system", sys};
    int n_ctx = b->prefix_tokens / 4 + b->turns * (64 + b->chat_gen) + 256;
    infer_engine *e;
    if (engine_for(b, n_ctx, 0, 0, NULL, &e) != INFER_OK) {
        free(sys);
        free(msgs);
        free(owned);
        return cli_fail("engine");
    }
    double *rest = calloc((size_t)b->turns, sizeof(double));
    int64_t reused_after = 0, prompt_after = 0;
    int rc = 0;
    for (int t = 0; t < b->turns && !rc; t++) {
        char q[256];
        bench_question(q, sizeof(q), 100 + t);
        owned[nm] = strdup(q);
        msgs[nm] = (infer_chat_msg){"user", owned[nm]};
        nm++;
        int64_t n;
        int32_t *toks = render(b, msgs, nm, &n);
        if (!toks) {
            rc = cli_fail("rendering");
            break;
        }
        struct req r;
        char *answer = NULL;
        rc = request(b, e, toks, n, b->chat_gen, &r, &answer);
        free(toks);
        if (rc)
            break;
        fprintf(stderr, "  C turn %2d: %4lld prompt tokens, %4lld reused, TTFT %.3f s\n", t + 1, (long long)r.prompt,
                (long long)r.reused, r.ttft);
        owned[nm] = answer ? answer : strdup("");
        msgs[nm] = (infer_chat_msg){"assistant", owned[nm]};
        nm++;
        out->prompt_tokens += r.prompt;
        out->reused_tokens += r.reused;
        if (t == 0) {
            out->ttft_first = r.ttft;
        } else {
            rest[t - 1] = r.ttft;
            reused_after += r.reused;
            prompt_after += r.prompt;
        }
        out->turns++;
    }
    out->ttft_rest_median = median(rest, out->turns - 1);
    out->reuse_rate_after_first = prompt_after ? (double)reused_after / (double)prompt_after : 0;
    free(rest);
    for (size_t i = 0; i < nm; i++)
        free(owned[i]);
    free(owned);
    free(msgs);
    free(sys);
    infer_engine_free(e);
    return rc;
}

/* -------------------------------------------------------- scenario D */

struct result_d {
    double ttft, start_seconds;
    int64_t prompt, reused, disk_reads;
};

/* Run this executable with args; its stdout into buf.  Returns the exit code or -1. */
int bench_run_child(const char *exe, char *const *args, char *buf, size_t cap)
{
    int fds[2];
    if (pipe(fds) != 0)
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_addclose(&fa, fds[0]);
    pid_t pid;
    int err = posix_spawn(&pid, exe, &fa, NULL, args, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(fds[1]);
    if (err) {
        close(fds[0]);
        return -1;
    }
    size_t len = 0;
    ssize_t r;
    while ((r = read(fds[0], buf + len, cap - 1 - len)) > 0 && len + 1 < cap)
        len += (size_t)r;
    buf[len] = '\0';
    close(fds[0]);
    int status;
    if (waitpid(pid, &status, 0) < 0 || !WIFEXITED(status))
        return -1;
    return WEXITSTATUS(status);
}

static int scenario_d(struct bench *b, const char *dir, struct result_d *out)
{
    memset(out, 0, sizeof(*out));
    char tmpl[] = "/tmp/infer-bench-cache-XXXXXX";
    const char *cache = dir;
    if (!cache && !(cache = mkdtemp(tmpl))) {
        fprintf(stderr, "error: cannot create a temporary cache directory: %s\n", strerror(errno));
        return 1;
    }
    char nb[16], kvb[16], th[16], pt[16], nq[16], gen[16];
    snprintf(nb, sizeof(nb), "%d", b->n_batch);
    snprintf(kvb, sizeof(kvb), "%d", b->kv_block);
    snprintf(th, sizeof(th), "%d", b->threads);
    snprintf(pt, sizeof(pt), "%d", b->prefix_tokens);
    snprintf(nq, sizeof(nq), "%d", b->questions);
    snprintf(gen, sizeof(gen), "%d", b->gen);
    char *args[32];
    int k = 0;
    args[k++] = (char *)"infer";
    args[k++] = (char *)"bench";
    args[k++] = (char *)"--prefix";
    args[k++] = (char *)"--phase";
    int phase_at = k++;
    const char *kv[][2] = {{"-m", b->model_path}, {"-b", nb}, {"--kv-block", kvb}, {"-t", th},
                           {"--prefix-tokens", pt}, {"--questions", nq}, {"--gen", gen}, {"--cache-dir", cache}};
    for (size_t i = 0; i < sizeof(kv) / sizeof(kv[0]); i++) {
        args[k++] = (char *)kv[i][0];
        args[k++] = (char *)kv[i][1];
    }
    if (b->sp.cache_salt) {
        args[k++] = (char *)"--cache-salt";
        args[k++] = (char *)b->sp.cache_salt;
    }
    args[k] = NULL;
    char out1[4096];
    args[phase_at] = (char *)"populate";
    fprintf(stderr, "  D: first process (scenario A with --cache-dir %s) ...\n", cache);
    int rc = bench_run_child(b->exe, args, out1, sizeof(out1));
    if (rc == 0) {
        args[phase_at] = (char *)"restart";
        fprintf(stderr, "  D: second process, first request ...\n");
        rc = bench_run_child(b->exe, args, out1, sizeof(out1));
    }
    if (rc == 0) {
        const char *line = strstr(out1, "restart ");
        long long pr, re, dr;
        if (!line || sscanf(line, "restart ttft=%lf start=%lf prompt=%lld reused=%lld disk_reads=%lld", &out->ttft,
                            &out->start_seconds, &pr, &re, &dr) != 5) {
            fprintf(stderr, "error: scenario D: unexpected output from the second process\n");
            rc = 1;
        } else {
            out->prompt = pr;
            out->reused = re;
            out->disk_reads = dr;
        }
    } else {
        fprintf(stderr, "error: scenario D: a child process failed (%d)\n", rc);
        rc = 1;
    }
    if (!dir) {
        char cmd[256];
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", cache);
        if (system(cmd) != 0)
            fprintf(stderr, "warning: could not remove %s\n", cache);
    }
    return rc;
}

/* The child side of D. */
static int phase(struct bench *b, const char *which)
{
    if (!strcmp(which, "populate")) {
        struct result_a a;
        return scenario_a(b, b->sp.cache_dir, b->questions, 0, &a, true);
    }
    if (strcmp(which, "restart") != 0) {
        fprintf(stderr, "error: unknown phase '%s'\n", which);
        return 2;
    }
    /* a question A did not ask: the prefix comes from disk, the question is new */
    int64_t prefix;
    double t0 = infer_now_seconds();
    int32_t **q = NULL;
    int64_t lq[64];
    int nq = b->questions + 1 <= 64 ? b->questions + 1 : 64;
    if (!(q = prompts_a(b, nq, lq, &prefix)))
        return 1;
    infer_engine *e;
    if (engine_for(b, (int)lq[nq - 1] + b->gen + 64, 0, 0, b->sp.cache_dir, &e) != INFER_OK) {
        free_prompts(q, nq);
        return cli_fail("engine");
    }
    double start = infer_now_seconds() - t0;
    struct req r;
    int rc = request(b, e, q[nq - 1], lq[nq - 1], b->gen, &r, NULL);
    infer_cache_metrics cm;
    infer_engine_get_metrics(e, &cm);
    if (!rc)
        printf("restart ttft=%.6f start=%.6f prompt=%lld reused=%lld disk_reads=%lld\n", r.ttft, start,
               (long long)r.prompt, (long long)r.reused, (long long)cm.disk_reads);
    infer_engine_free(e);
    free_prompts(q, nq);
    return rc;
}

/* ------------------------------------------------------------ command */

static const char *bench_help =
    "usage: infer bench --prefix [-m MODEL] [--scenario A,B,C,D] [sizes] [cache options] [-o md|json]\n"
    "       infer bench --paths [...]   (one request in 8 cold/warm situations; infer bench --paths --help)\n"
    "       infer bench -m MODEL [-p 512] [-n 128] [-d 0] [-r 5] [-t N] [--np N] [--no-warmup] [-o md|json]   (prompt/"
    "generation rates)\n"
    "  -d N (--n-depth N): run each test after N tokens already in the context (untimed), as\n"
    "  llama-bench's -d; reported as \"tg128 @ d2048\"\n"
    "  --np N (--parallel N): generate with N sequences at once, one token of each per forward pass (as\n"
    "  infer serve batches them); tgK xN reports all sequences' tokens per second\n"
    "  --no-warmup: skip the warm-up batch and token before the tests (llama-bench's --no-warmup;\n"
    "  contrib/bench/arm-insn-count counts instructions per token by differences of runs)\n\n"
    "Prefix-cache scenarios (each request in a fresh session of one engine; TTFT = prompt handed\n"
    "to the engine -> first token chosen, greedy):\n"
    "  A  one agent: a long system prompt + document, then short questions (cold vs warm TTFT)\n"
    "  B  three agents' prefixes in a shuffled order, budget for all three, then for two\n"
    "  C  a chat: each turn's prompt is the whole conversation so far\n"
    "  D  A with --cache-dir in one process, then a new process's first request\n\n"
    "  -m, --model FILE        GGUF model (default: the default model)\n"
    "  -t, --threads N         threads (default: physical cores)\n"
    "  -b, --batch-size N      prompt tokens per forward pass (default 512)\n"
    "      --kv-block N        tokens per KV block (default 32)\n"
    "      --scenario LIST     which of A,B,C,D (default all)\n"
    "      --prefix-tokens N   A/D system prompt + document length (default 2000)\n"
    "      --questions N       A/D questions (default 20)\n"
    "      --agent-tokens N    B prefix length of each agent (default 1500)\n"
    "      --requests N        B requests (default 30)\n"
    "      --turns N           C turns (default 10)\n"
    "      --chat-gen N        C tokens generated per answer (default 24)\n"
    "      --gen N             A/B/D tokens generated per request (default 1)\n"
    "  -o, --output FMT        md (default) or json\n";

static int positive(const char *arg, int *out)
{
    char *end;
    long v = strtol(arg, &end, 10);
    if (*end || v < 1 || v > 1000000) {
        fprintf(stderr, "error: bad number '%s'\n", arg);
        return 2;
    }
    *out = (int)v;
    return 0;
}

enum {
    B_PREFIX = 2000, B_SCENARIO, B_PREFIX_TOKENS, B_QUESTIONS, B_AGENT_TOKENS, B_REQUESTS, B_TURNS, B_CHAT_GEN,
    B_GEN, B_PHASE, B_PARALLEL, B_NO_WARMUP,
};

static void print_md_a(const struct result_a *a)
{
    printf("\n## A: one household agent\n\n");
    printf("| shared prefix | cold TTFT | warm TTFT (median of %lld) | warm / cold | prefix hit rate (warm) | "
           "hit rate (all prompt tokens) | reused tokens | cold prefill tok/s | prefill tok/s (all) |\n"
           "|---|---|---|---|---|---|---|---|---|\n",
           (long long)a->warm_n);
    printf("| %lld tokens | %.3f s | %.3f s | %.2f%% %s | %.1f%% | %.1f%% | %lld | %.1f | %.1f |\n",
           (long long)a->prefix_tokens, a->cold_ttft, a->warm_ttft, 100 * a->ratio,
           a->ratio <= 0.03 ? "(target <= 3%: met)" : "(target <= 3%: NOT met)", 100 * a->prefix_hit_rate,
           100 * a->hit_rate, (long long)a->reused, a->cold_prefill_tok_s, a->prefill_tok_s);
}

/* ---- llama-bench-style prompt processing (ppN) and generation (tgN) ---- */

struct tp_opts {
    int n_prompt, n_gen, reps;
    int depth; /* -d: tokens already in the context when a test starts (llama-bench's n_depth) */
    int parallel; /* tg: sequences decoded together, one token each per step */
    bool no_warmup; /* --no-warmup: no warm-up batch and token before the tests (llama-bench's) */
};

static int nonneg(const char *arg, int *out)
{
    char *end;
    long v = strtol(arg, &end, 10);
    if (*arg == '\0' || *end || v < 0 || v > 1 << 20) {
        fprintf(stderr, "error: '%s' is not a count\n", arg);
        return 2;
    }
    *out = (int)v;
    return 0;
}

static void mean_sd(const double *v, int n, double *mean, double *sd)
{
    double s = 0, s2 = 0;
    for (int i = 0; i < n; i++)
        s += v[i];
    *mean = s / n;
    for (int i = 0; i < n; i++)
        s2 += (v[i] - *mean) * (v[i] - *mean);
    *sd = n > 1 ? sqrt(s2 / (n - 1)) : 0.0;
}

/* One repetition: tokens/s of evaluating n random tokens after a context of
 * depth random tokens (evaluated first, untimed), in batches (pp) or one at a
 * time (tg).  Random tokens are drawn anew each time and the prefix cache is
 * off, so nothing is reused. */
/* Mixture-of-experts models: the engine's routing counts (n_layers x
 * n_experts, infer_engine_expert_counts), or NULL for a dense model. */
static uint64_t *expert_counts(const infer_engine *e, size_t *n)
{
    *n = infer_engine_expert_counts(e, NULL, 0);
    uint64_t *c = *n ? malloc(*n * sizeof(*c)) : NULL;
    if (c)
        infer_engine_expert_counts(e, c, *n);
    else
        *n = 0;
    return c;
}

void cli_print_expert_summary(FILE *f, const infer_model *m, const infer_engine *e, const char *when,
                              const char *more)
{
    const int n_exp = infer_model_n_experts(m);
    if (n_exp <= 0)
        return;
    size_t n_ec;
    uint64_t *ec = expert_counts(e, &n_ec);
    uint64_t most = 0, total = 0;
    size_t unused = 0;
    for (size_t i = 0; ec && i < n_ec; i++) {
        most = ec[i] > most ? ec[i] : most;
        total += ec[i];
        unused += ec[i] == 0;
    }
    if (ec && total)
        fprintf(f,
                "experts: %d layers x %d, %d per token; %s the busiest expert took %.1f%% of its layer's "
                "routings (even: %.1f%%), %zu of %zu never routed to (%s)\n",
                infer_model_n_layers(m), n_exp, infer_model_n_experts_used(m), when,
                100.0 * (double)most / ((double)total / (double)infer_model_n_layers(m)), 100.0 / n_exp, unused, n_ec,
                more);
    free(ec);
}

/* ", "expert_counts": [[...layer 0...], ...]": tokens routed to each expert
 * between two snapshots (after - before). */
static void print_expert_counts(const uint64_t *before, const uint64_t *after, size_t n, int n_exp)
{
    if (!before || !after || n_exp <= 0)
        return;
    printf(", \"expert_counts\": [");
    for (size_t i = 0; i < n; i++)
        printf("%s%llu%s", i % (size_t)n_exp == 0 ? (i ? ", [" : "[") : ", ",
               (unsigned long long)(after[i] - before[i]), (i + 1) % (size_t)n_exp == 0 ? "]" : "");
    printf("]");
}

static double tp_run(infer_session *s, int n, bool one_by_one, uint32_t *seed, int n_vocab, int depth)
{
    const int total = depth + n;
    int32_t *all = malloc((size_t)(total > 0 ? total : 1) * sizeof(int32_t));
    if (!all)
        return -1;
    for (int i = 0; i < total; i++)
        all[i] = (int32_t)(rnd(seed) % (uint32_t)n_vocab);
    int32_t *toks = all + depth;
    infer_session_truncate(s, 0);
    if (depth > 0 && infer_session_append(s, all, depth) != INFER_OK) {
        free(all);
        return -1;
    }
    double t0 = infer_now_seconds();
    infer_status st = INFER_OK;
    if (one_by_one)
        for (int i = 0; i < n && !st; i++)
            st = infer_session_append(s, &toks[i], 1);
    else
        st = infer_session_append(s, toks, n);
    double dt = infer_now_seconds() - t0;
    free(all);
    return st ? -1 : n / dt;
}

/* Generation with several sequences at once, as `infer serve` runs them:
 * every step evaluates one random token of each of the np sessions of e in
 * one forward pass (infer_engine_step).  Returns aggregate tokens/s. */
static double tp_run_parallel(infer_engine *e, infer_session **ss, int np, int n, uint32_t *seed, int n_vocab)
{
    infer_status *st = calloc((size_t)np, sizeof(*st));
    if (!st)
        return -1;
    for (int i = 0; i < np; i++)
        infer_session_truncate(ss[i], 0);
    double t0 = infer_now_seconds();
    infer_status rc = INFER_OK;
    for (int k = 0; k < n && !rc; k++) {
        for (int i = 0; i < np && !rc; i++) {
            int32_t tok = (int32_t)(rnd(seed) % (uint32_t)n_vocab);
            rc = infer_session_push(ss[i], &tok, 1);
        }
        int64_t done = 0;
        if (!rc)
            rc = infer_engine_step(e, ss, np, st, &done);
        for (int i = 0; i < np && !rc; i++)
            rc = st[i];
        if (!rc && done != np) {
            fprintf(stderr, "error: a step evaluated %lld of %d tokens\n", (long long)done, np);
            rc = INFER_ERR_INVALID;
        }
    }
    double dt = infer_now_seconds() - t0;
    free(st);
    return rc ? -1 : (double)n * np / dt;
}

/* Everything bench_throughput made (ps, pe may be NULL). */
static void tp_free(infer_session **ps, int np, infer_engine *pe, infer_session *s, infer_model *m)
{
    for (int i = 0; ps && i < np; i++)
        infer_session_free(ps[i]);
    free(ps);
    infer_engine_free(pe);
    infer_session_free(s);
    infer_model_free(m);
}

static int bench_throughput(struct bench *b, const char *model, const struct tp_opts *tp)
{
    const char *path = cli_model_path(model);
    if (!path)
        return 1;
    infer_residency before = {0};
    infer_file_residency(path, &before);
    infer_model *m;
    if (infer_model_load(&m, path, NULL) != INFER_OK)
        return cli_fail("loading model");
    infer_session_params sp = b->sp;
    sp.n_ctx = tp->depth + tp->n_prompt + tp->n_gen + 16;
    const int n_ctx_train = infer_model_n_ctx_train(m);
    if (tp->depth > 0 && n_ctx_train > 0 && sp.n_ctx > n_ctx_train) {
        fprintf(stderr, "error: -d %d with -p %d -n %d needs %d tokens of context; the model was trained for %d\n",
                tp->depth, tp->n_prompt, tp->n_gen, sp.n_ctx, n_ctx_train);
        infer_model_free(m);
        return 2;
    }
    sp.n_batch = b->n_batch;
    sp.n_threads = b->threads;
    sp.kv_block = b->kv_block;
    sp.no_prefix_cache = true;
    infer_session *s;
    if (infer_session_new(&s, m, &sp) != INFER_OK) {
        infer_model_free(m);
        return cli_fail("session");
    }
    /* -np N: an engine with N sessions for tg (the private one above does pp) */
    infer_engine *pe = NULL;
    infer_session **ps = NULL;
    if (tp->parallel > 1) {
        infer_engine_params ep;
        infer_engine_params_default(&ep);
        ep.n_ctx = sp.n_ctx;
        ep.n_batch = b->n_batch;
        ep.n_threads = b->threads;
        ep.kv_block = b->kv_block;
        ep.n_seq = tp->parallel;
        ep.no_prefix_cache = true;
        ep.kv_type_k = sp.kv_type_k;
        ep.kv_type_v = sp.kv_type_v;
        ps = calloc((size_t)tp->parallel, sizeof(*ps));
        bool ok = ps && infer_engine_new(&pe, m, &ep) == INFER_OK;
        for (int i = 0; ok && i < tp->parallel; i++)
            ok = infer_session_new_in(&ps[i], pe, NULL) == INFER_OK;
        if (!ok) {
            int rc = cli_fail("engine for --parallel");
            tp_free(ps, tp->parallel, pe, s, m);
            return rc;
        }
    }
    const infer_gguf *g = infer_model_gguf(m);
    uint64_t n_params = 0;
    for (int64_t i = 0; i < infer_gguf_n_tensors(g); i++) {
        infer_tensor_info t;
        infer_gguf_tensor(g, i, &t);
        n_params += (uint64_t)(t.ne[0] * t.ne[1] * t.ne[2] * t.ne[3]);
    }
    const int threads = b->threads ? b->threads : infer_n_threads_default();
    char desc[256];
    snprintf(desc, sizeof(desc), "%s %s", infer_model_arch(m), infer_gguf_get_str(g, "general.size_label", ""));
    uint32_t seed = 1234;
    const int n_vocab = infer_model_n_vocab(m);
    /* warm-up, as llama-bench: one short batch and one token */
    if (!tp->no_warmup) {
        tp_run(s, tp->n_prompt > 0 ? (tp->n_prompt < 32 ? tp->n_prompt : 32) : 8, false, &seed, n_vocab, 0);
        tp_run(s, 1, true, &seed, n_vocab, 0);
        if (pe)
            tp_run_parallel(pe, ps, tp->parallel, 2, &seed, n_vocab);
    }
    struct { const char *kind; int n; bool tg; } tests[2] = {{"pp", tp->n_prompt, false}, {"tg", tp->n_gen, true}};
    if (!b->json)
        printf("| model | size | params | backend | threads | test | t/s |\n"
               "| --- | ---: | ---: | --- | ---: | ---: | ---: |\n");
    else
        printf("[\n");
    int printed = 0, rc = 0;
    for (int k = 0; k < 2; k++) {
        if (tests[k].n <= 0)
            continue;
        double *ts = calloc((size_t)tp->reps, sizeof(double));
        const infer_engine *te = tests[k].tg && pe ? pe : infer_session_engine(s);
        size_t n_ec;
        uint64_t *ec0 = expert_counts(te, &n_ec);
        for (int r = 0; r < tp->reps && ts; r++) {
            ts[r] = tests[k].tg && pe ? tp_run_parallel(pe, ps, tp->parallel, tests[k].n, &seed, n_vocab)
                                      : tp_run(s, tests[k].n, tests[k].tg, &seed, n_vocab, tp->depth);
            if (ts[r] < 0) {
                rc = cli_fail("benchmark");
                break;
            }
        }
        size_t n_ec1;
        uint64_t *ec1 = expert_counts(te, &n_ec1);
        if (rc || !ts) {
            free(ts);
            free(ec0);
            free(ec1);
            break;
        }
        double mean, sd;
        mean_sd(ts, tp->reps, &mean, &sd);
        char test[32];
        if (tests[k].tg && pe) /* llama-batched-bench's aggregate: all sequences' tokens per second */
            snprintf(test, sizeof(test), "%s%d x%d", tests[k].kind, tests[k].n, tp->parallel);
        else if (tp->depth > 0) /* llama-bench's label */
            snprintf(test, sizeof(test), "%s%d @ d%d", tests[k].kind, tests[k].n, tp->depth);
        else
            snprintf(test, sizeof(test), "%s%d", tests[k].kind, tests[k].n);
        if (!b->json) {
            printf("| %s | %.2f MiB | %.2f M | CPU (%s) | %d | %s | %.2f ± %.2f |\n", desc,
                   mib(infer_gguf_file_size(g)), (double)n_params / 1e6, infer_kernel_variant(), threads, test,
                   mean, sd);
        } else {
            printf("%s  {\"model\": \"%s\", \"model_size\": %zu, \"model_n_params\": %llu, \"kernels\": \"%s\", "
                   "\"n_threads\": %d, \"test\": \"%s\", \"n_prompt\": %d, \"n_gen\": %d, \"n_depth\": %d, "
                   "\"avg_ts\": %.4f, "
                   "\"stddev_ts\": %.4f, \"samples_ts\": [",
                   printed ? ",\n" : "", desc, infer_gguf_file_size(g), (unsigned long long)n_params,
                   infer_kernel_variant(), threads, test, tests[k].tg ? 0 : tests[k].n, tests[k].tg ? tests[k].n : 0,
                   tp->depth, mean, sd);
            for (int r = 0; r < tp->reps; r++)
                printf("%s%.4f", r ? ", " : "", ts[r]);
            infer_repack_info ri;
            infer_model_repack_info(m, &ri);
            infer_thread_stats ts_now;
            infer_get_thread_stats(&ts_now);
            printf("], \"load_seconds\": %.4f, \"resident_at_load_percent\": %.2f, \"repack\": \"%s\", "
                   "\"repack_tensors\": %d, \"repack_seconds\": %.4f, \"threads_now\": %d, "
                   "\"thread_drops\": %llu, \"thread_raises\": %llu, \"stall_share\": %.4f",
                   infer_model_load_seconds(m), before.percent, ri.state, ri.n_tensors, ri.seconds, ts_now.threads,
                   (unsigned long long)ts_now.drops, (unsigned long long)ts_now.raises,
                   ts_now.loop_seconds > 0 ? ts_now.stall_seconds / ts_now.loop_seconds : 0.0);
            if (n_ec1 == n_ec)
                print_expert_counts(ec0, ec1, n_ec, infer_model_n_experts(m));
            printf("}");
        }
        printed++;
        free(ts);
        free(ec0);
        free(ec1);
    }
    infer_residency after = {0};
    infer_gguf_residency(g, &after);
    infer_thread_stats th;
    infer_get_thread_stats(&th);
    if (b->json)
        printf("\n]\n");
    else
        printf("\nload %.3f s (map, validate, bind, tokenizer, repack); %.1f%% of the file was in the page cache "
               "before loading; %.1f%% of the file mapped in 2 MiB pages after the run (repacked weights are read "
               "from the repack cache's own map instead); kernels %s; %d repetitions, mean ± "
               "sample stddev\nthreads: %d of %d taking part at the end (adaptive count: %llu dropped, %llu tried "
               "again; %.1f%% of the parallel time spent waiting for other threads)\n%s\n",
               infer_model_load_seconds(m), before.percent,
               after.bytes_total ? 100.0 * (double)after.bytes_huge / (double)after.bytes_total : 0.0,
               infer_kernel_variant(), tp->reps, th.threads, th.max_threads, (unsigned long long)th.drops,
               (unsigned long long)th.raises, th.loop_seconds > 0 ? 100.0 * th.stall_seconds / th.loop_seconds : 0.0,
               infer_model_repack_summary(m));
    if (!b->json) /* how evenly the router spread this run's tokens (the private engine's counts) */
        cli_print_expert_summary(stdout, m, infer_session_engine(s), "over the run", "-o json has the counts");
    tp_free(ps, tp->parallel, pe, s, m);
    return rc;
}

int cmd_bench(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--paths"))
            return cmd_bench_paths(argc, argv);
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"threads", required_argument, 0, 't'},
        {"batch-size", required_argument, 0, 'b'}, {"kv-block", required_argument, 0, OPT_KV_BLOCK},
        {"output", required_argument, 0, 'o'}, {"prefix", no_argument, 0, B_PREFIX},
        {"scenario", required_argument, 0, B_SCENARIO}, {"prefix-tokens", required_argument, 0, B_PREFIX_TOKENS},
        {"questions", required_argument, 0, B_QUESTIONS}, {"agent-tokens", required_argument, 0, B_AGENT_TOKENS},
        {"requests", required_argument, 0, B_REQUESTS}, {"turns", required_argument, 0, B_TURNS},
        {"chat-gen", required_argument, 0, B_CHAT_GEN}, {"gen", required_argument, 0, B_GEN},
        {"phase", required_argument, 0, B_PHASE}, {"parallel", required_argument, 0, B_PARALLEL},
        {"np", required_argument, 0, B_PARALLEL}, {"n-depth", required_argument, 0, 'd'},
        {"no-warmup", no_argument, 0, B_NO_WARMUP}, CLI_CACHE_LONGOPTS, {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    struct bench b = {.n_batch = 512, .kv_block = 32, .prefix_tokens = 2000, .questions = 20, .agent_tokens = 1500,
                      .requests = 30, .turns = 10, .chat_gen = 24, .gen = 1};
    infer_session_params_default(&b.sp);
    const char *model = NULL, *scen = "ABCD", *ph = NULL;
    bool prefix = false;
    struct tp_opts tp = {.n_prompt = 512, .n_gen = 128, .reps = 5};
    int c, rc;
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:t:b:o:p:n:r:d:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 't': if ((rc = positive(optarg, &b.threads))) return rc; break;
        case 'b': if ((rc = positive(optarg, &b.n_batch))) return rc; break;
        case OPT_KV_BLOCK: if ((rc = positive(optarg, &b.kv_block))) return rc; break;
        case 'o':
            if (strcmp(optarg, "md") && strcmp(optarg, "json")) {
                fprintf(stderr, "error: -o takes md or json\n");
                return 2;
            }
            b.json = !strcmp(optarg, "json");
            break;
        case B_PREFIX: prefix = true; break;
        case B_SCENARIO: scen = optarg; break;
        case B_PREFIX_TOKENS: if ((rc = positive(optarg, &b.prefix_tokens))) return rc; break;
        case B_QUESTIONS: if ((rc = positive(optarg, &b.questions))) return rc; break;
        case B_AGENT_TOKENS: if ((rc = positive(optarg, &b.agent_tokens))) return rc; break;
        case B_REQUESTS: if ((rc = positive(optarg, &b.requests))) return rc; break;
        case B_TURNS: if ((rc = positive(optarg, &b.turns))) return rc; break;
        case B_CHAT_GEN: if ((rc = positive(optarg, &b.chat_gen))) return rc; break;
        case B_GEN: if ((rc = positive(optarg, &b.gen))) return rc; break;
        case B_PHASE: ph = optarg; break;
        case 'p': if ((rc = nonneg(optarg, &tp.n_prompt))) return rc; break;
        case 'n': if ((rc = nonneg(optarg, &tp.n_gen))) return rc; break;
        case 'r': if ((rc = positive(optarg, &tp.reps))) return rc; break;
        case 'd': if ((rc = nonneg(optarg, &tp.depth))) return rc; break;
        case B_PARALLEL: if ((rc = positive(optarg, &tp.parallel))) return rc; break;
        case B_NO_WARMUP: tp.no_warmup = true; break;
        case 'h': printf("%s", bench_help); return 0;
        default:
            if (cli_cache_option(&b.sp, c, optarg) != 0)
                return 2;
        }
    }
    if (!prefix && tp.depth > 0 && tp.parallel > 1) {
        fprintf(stderr, "error: -d (context depth) is not supported with --np\n");
        return 2;
    }
    if (!prefix)
        return bench_throughput(&b, model, &tp);
    for (const char *s = scen; *s; s++)
        if (!strchr("ABCDabcd,", *s)) {
            fprintf(stderr, "error: --scenario takes letters from A, B, C, D\n");
            return 2;
        }
    if (b.questions < 2) {
        fprintf(stderr, "error: --questions must be at least 2\n");
        return 2;
    }
    static char exe[4096];
    ssize_t el = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (el <= 0) {
        fprintf(stderr, "error: cannot find this executable for the restart scenario\n");
        return 1;
    }
    exe[el] = '\0';
    b.exe = exe;
    if (!(b.model_path = cli_model_path(model)))
        return 1;
    bool want[4];
    for (int i = 0; i < 4; i++)
        want[i] = strchr(scen, 'A' + i) || strchr(scen, 'a' + i);
    if (ph || want[0] || want[1] || want[2]) {
        if (infer_model_load(&b.m, b.model_path, NULL) != INFER_OK)
            return cli_fail("loading model");
        bool warned;
        b.fam = infer_chat_detect(infer_model_gguf(b.m), NULL, &warned);
        for (const char *const *mk = infer_chat_eot_markers(b.fam); mk && *mk; mk++)
            infer_model_add_eog(b.m, *mk);
    }
    if (ph) {
        rc = phase(&b, ph);
        infer_model_free(b.m);
        return rc;
    }
    if (!b.json)
        printf("# infer bench --prefix\n\nmodel %s, %d-token blocks, batch %d, %d threads; every request in a "
               "fresh session of one engine; TTFT = prompt handed to the engine -> first (greedy) token.\n",
               b.model_path, b.kv_block, b.n_batch, b.threads ? b.threads : 0);
    struct result_a ra;
    struct result_b rb[2];
    struct result_c rcc;
    struct result_d rd;
    bool done[4] = {false, false, false, false};
    rc = 0;
    if (want[0] && !rc) {
        fprintf(stderr, "scenario A: %d-token prefix, %d questions\n", b.prefix_tokens, b.questions);
        if (!(rc = scenario_a(&b, b.sp.cache_dir, b.questions, 0, &ra, false))) {
            done[0] = true;
            if (!b.json)
                print_md_a(&ra);
        }
    }
    if (want[1] && !rc) {
        fprintf(stderr, "scenario B: 3 agents of %d tokens, %d requests\n", b.agent_tokens, b.requests);
        static const char *roles[3] = {"the kitchen and groceries agent", "the security and doors agent",
                                       "the energy and heating agent"};
        char *sys[3] = {0};
        int32_t **p = calloc((size_t)b.requests, sizeof(*p));
        int64_t *lens = calloc((size_t)b.requests, sizeof(int64_t)), prefix_len[3] = {0}, maxlen = 0;
        int *order = calloc((size_t)b.requests, sizeof(int));
        for (int a = 0; a < 3; a++)
            sys[a] = bench_agent_text(b.m, roles[a], 500u + (uint32_t)a * 31u, b.agent_tokens);
        /* shuffled interleaving: each agent as often as the others */
        uint32_t s = 2024;
        for (int i = 0; i < b.requests; i++)
            order[i] = i % 3;
        for (int i = b.requests - 1; i > 0; i--) {
            int j = (int)(rnd(&s) % (uint32_t)(i + 1)), t = order[i];
            order[i] = order[j];
            order[j] = t;
        }
        for (int i = 0; i < b.requests && !rc; i++) {
            char q[256];
            bench_question(q, sizeof(q), 200 + i);
            infer_chat_msg msgs[2] = {{"system", sys[order[i]]}, {"user", q}};
            if (!sys[order[i]] || !(p[i] = render(&b, msgs, 2, &lens[i])))
                rc = cli_fail("rendering");
            else if (lens[i] > maxlen)
                maxlen = lens[i];
        }
        /* each agent's prefix: common part of two of its prompts */
        for (int a = 0; a < 3 && !rc; a++) {
            int first = -1;
            for (int i = 0; i < b.requests; i++) {
                if (order[i] != a)
                    continue;
                if (first < 0) {
                    first = i;
                    prefix_len[a] = lens[i];
                    continue;
                }
                int64_t k = 0;
                while (k < lens[i] && k < lens[first] && p[i][k] == p[first][k])
                    k++;
                prefix_len[a] = k;
                break;
            }
        }
        for (int f = 0; f < 2 && !rc; f++)
            rc = scenario_b(&b, 3 - f, p, lens, prefix_len, order, b.requests, maxlen, &rb[f]);
        if (!rc) {
            done[1] = true;
            if (!b.json) {
                printf("\n## B: three agents (prefixes of %lld, %lld, %lld tokens), %d requests, shuffled\n\n",
                       (long long)prefix_len[0], (long long)prefix_len[1], (long long)prefix_len[2], b.requests);
                printf("| budget | high / low | hit rate after the first round | requests hit / missed | "
                       "TTFT hit (median) | TTFT miss (median) | evictions |\n|---|---|---|---|---|---|---|\n");
                for (int f = 0; f < 2; f++)
                    printf("| fits %d | %.1f / %.1f MiB | %.1f%%%s | %lld / %lld | %.3f s | %.3f s | %lld |\n",
                           rb[f].fits, rb[f].high_mib, rb[f].low_mib, 100 * rb[f].hit_rate_after_first,
                           f == 0 ? (rb[f].hit_rate_after_first >= 0.95 ? " (target >= 95%: met)"
                                                                        : " (target >= 95%: NOT met)")
                                  : "",
                           (long long)rb[f].hits, (long long)rb[f].misses, rb[f].ttft_hit, rb[f].ttft_miss,
                           (long long)rb[f].evictions);
                printf("\nWith room for two, least-recently-used eviction drops the prefix not used the longest;"
                       " a request for it recomputes it and evicts another.\n");
            }
        }
        for (int a = 0; a < 3; a++)
            free(sys[a]);
        free_prompts(p, b.requests);
        free(lens);
        free(order);
    }
    if (want[2] && !rc) {
        fprintf(stderr, "scenario C: %d turns\n", b.turns);
        if (!(rc = scenario_c(&b, &rcc))) {
            done[2] = true;
            if (!b.json) {
                printf("\n## C: a %d-turn chat\n\n", rcc.turns);
                printf("| turns | prompt tokens | reused | reuse after turn 1 | TTFT turn 1 | TTFT later turns "
                       "(median) |\n|---|---|---|---|---|---|\n");
                printf("| %d | %lld | %lld | %.1f%% | %.3f s | %.3f s |\n", rcc.turns, (long long)rcc.prompt_tokens,
                       (long long)rcc.reused_tokens, 100 * rcc.reuse_rate_after_first, rcc.ttft_first,
                       rcc.ttft_rest_median);
            }
        }
    }
    if (b.m) {
        infer_model_free(b.m);
        b.m = NULL;
    }
    if (want[3] && !rc) {
        fprintf(stderr, "scenario D: restart\n");
        if (!(rc = scenario_d(&b, b.sp.cache_dir, &rd))) {
            done[3] = true;
            if (!b.json) {
                printf("\n## D: restart with --cache-dir\n\n");
                printf("| first request TTFT | reused | blocks read from disk | engine start (load + index) |%s\n",
                       done[0] ? " vs A's warm TTFT |" : "");
                printf("|---|---|---|---|%s\n", done[0] ? "---|" : "");
                printf("| %.3f s | %lld of %lld | %lld | %.3f s |", rd.ttft, (long long)rd.reused,
                       (long long)rd.prompt, (long long)rd.disk_reads, rd.start_seconds);
                if (done[0])
                    printf(" %.2fx %s |", ra.warm_ttft > 0 ? rd.ttft / ra.warm_ttft : 0,
                           rd.ttft <= 2 * ra.warm_ttft ? "(target <= 2x: met)" : "(target <= 2x: NOT met)");
                printf("\n");
            }
        }
    }
    if (b.json) {
        printf("{\"model\":\"%s\",\"kv_block\":%d,\"n_batch\":%d", b.model_path, b.kv_block, b.n_batch);
        if (done[0])
            printf(",\"A\":{\"prefix_tokens\":%lld,\"questions\":%d,\"cold_ttft_s\":%.6f,\"warm_ttft_median_s\":%.6f,"
                   "\"warm_over_cold\":%.5f,\"prefix_hit_rate\":%.5f,\"hit_rate\":%.5f,\"reused_tokens\":%lld,\"cold_prefill_tok_s\":%.2f,"
                   "\"prefill_tok_s\":%.2f}",
                   (long long)ra.prefix_tokens, b.questions, ra.cold_ttft, ra.warm_ttft, ra.ratio,
                   ra.prefix_hit_rate, ra.hit_rate,
                   (long long)ra.reused, ra.cold_prefill_tok_s, ra.prefill_tok_s);
        if (done[1]) {
            printf(",\"B\":[");
            for (int f = 0; f < 2; f++)
                printf("%s{\"fits\":%d,\"cache_high_mib\":%.2f,\"cache_low_mib\":%.2f,\"hit_rate_after_first_round\":"
                       "%.5f,\"hits\":%lld,\"misses\":%lld,\"ttft_hit_median_s\":%.6f,\"ttft_miss_median_s\":%.6f,"
                       "\"evictions\":%lld}",
                       f ? "," : "", rb[f].fits, rb[f].high_mib, rb[f].low_mib, rb[f].hit_rate_after_first,
                       (long long)rb[f].hits, (long long)rb[f].misses, rb[f].ttft_hit, rb[f].ttft_miss,
                       (long long)rb[f].evictions);
            printf("]");
        }
        if (done[2])
            printf(",\"C\":{\"turns\":%d,\"prompt_tokens\":%lld,\"reused_tokens\":%lld,\"reuse_after_first\":%.5f,"
                   "\"ttft_first_s\":%.6f,\"ttft_later_median_s\":%.6f}",
                   rcc.turns, (long long)rcc.prompt_tokens, (long long)rcc.reused_tokens, rcc.reuse_rate_after_first,
                   rcc.ttft_first, rcc.ttft_rest_median);
        if (done[3])
            printf(",\"D\":{\"first_ttft_s\":%.6f,\"reused_tokens\":%lld,\"prompt_tokens\":%lld,\"disk_reads\":%lld,"
                   "\"engine_start_s\":%.6f}",
                   rd.ttft, (long long)rd.reused, (long long)rd.prompt, (long long)rd.disk_reads, rd.start_seconds);
        printf("}\n");
    }
    return rc;
}
