/*
 * http.c - the HTTP side of `infer serve`, on libmicrohttpd.
 *
 * libmicrohttpd runs one thread per connection (MHD_USE_THREAD_PER_CONNECTION),
 * so a handler may block: a non-streamed request waits for its job to end, a
 * streamed one blocks in the SSE content reader until the engine has more
 * text.  While waiting, a handler polls its socket for a hang-up (POLLRDHUP)
 * every 100 ms; a client that went away cancels its job, and the engine frees
 * the sequence before its next step.
 *
 * Routes:
 *   POST /v1/chat/completions, /v1/completions   generation (SSE with "stream")
 *   POST /v1/embeddings                           with --embedding-model (api_embed.c), run on the
 *                                                 connection thread, one batch at a time
 *   GET  /v1/models, /v1/models/{id}              the model, and the embedding model if any
 *   GET  /health                                  503 while loading, else 200
 *   GET  /metrics                                 Prometheus text
 *   OPTIONS *                                     CORS preflight
 *   /api/..., GET /                               Ollama's API (http_ollama.c; chat and generate run
 *                                                 through handle_generate below, streamed as NDJSON,
 *                                                 errors as {"error": "..."})
 *
 * Limits, all answered with an OpenAI-shaped error: request headers beyond
 * MHD's connection memory (431 from MHD), a body over --max-body (413, from
 * Content-Length before it is read, or as it streams in), a body that takes
 * longer than twice --timeout to arrive (408), a full queue (503 with
 * Retry-After), an unknown model (404), max_tokens above --max-tokens
 * (400).  With --api-key, /v1/... and /metrics need "Authorization: Bearer
 * KEY", compared in constant time; the matching key also salts the prefix
 * cache so that tenants never share cached blocks.
 */
#include "server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <microhttpd.h>

#define SSE_PING_SECONDS 15.0

enum route {
    R_NONE, R_CHAT, R_COMPLETIONS, R_EMBEDDINGS, R_MODELS, R_MODEL, R_HEALTH, R_METRICS, R_OPTIONS,
    R_CACHE_PURGE, R_CACHE_STATS, R_DRAIN, R_OLLAMA,
};

struct conn_ctx {
    struct server *srv;
    int refs;                  /* the connection, and the SSE response if any (under srv->mu) */
    enum route route;
    enum ollama_route ollama;  /* R_OLLAMA: which (http_ollama.c) */
    bool ollama_shape;         /* a path under /api/: errors as {"error": "..."}, streams as NDJSON */
    const char *endpoint;      /* metrics label */
    const char *method, *url;
    double t_start;
    char *body;
    size_t len, cap;
    bool too_large, too_slow, responded;
    char salt_key[20];         /* hash of the API key that matched, "" without keys */
    int fd;
    struct MHD_Connection *conn;
    struct job *job;
    /* SSE */
    size_t sent_text;
    bool sent_first, sent_final;
    infer_reasoning *reasoning; /* splits a thinking model's text (chat), else NULL */
    bool reasoning_checked;
    bool tools_hold;           /* tools offered: the text is held while it may be a call, then
                                  sent as content (api_tools_stream_len) or at the end as
                                  tool_calls */
    size_t tools_out;          /* bytes of the held text already sent as content */
    double t_last_out;         /* last bytes handed to MHD (for keep-alive comments) */
    char *out;                 /* bytes serialized, not yet handed to MHD */
    size_t out_len, out_off, out_cap;
    bool rc_on;                /* the response cache saw this request: rc says what to store */
    struct rc_pending rc;
};

/* ---------------------------------------------------------------- helpers */

/* 64-bit FNV-1a with a seed: enough to name a tenant's salt (not a MAC). */
static uint64_t fnv1a(const char *s, size_t n, uint64_t h)
{
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ULL;
    }
    return h;
}

static void hash_hex(const char *s, size_t n, char out[20])
{
    snprintf(out, 20, "%016llx", (unsigned long long)fnv1a(s, n, 0xcbf29ce484222325ULL ^ 0x696e666572ULL));
}

/* Compare in time that depends only on the length of `key`, not on where
 * the first difference is. */
static bool equal_const_time(const char *given, size_t given_len, const char *key)
{
    size_t key_len = strlen(key);
    unsigned diff = given_len != key_len;
    for (size_t i = 0; i < key_len; i++)
        diff |= (unsigned char)key[i] ^ (unsigned char)(i < given_len ? given[i] : 0);
    return diff == 0;
}

static bool client_gone(int fd)
{
    if (fd < 0)
        return false;
    struct pollfd p = {.fd = fd, .events = POLLRDHUP};
    return poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* Append a (name, value) pair to a NULL-ended header list (room for it and
 * the NULL is the caller's). */
static void add_header_pair(const char **h, const char *name, const char *value)
{
    size_t n = 0;
    while (h[n])
        n++;
    h[n] = name, h[n + 1] = value, h[n + 2] = NULL;
}

static void add_common_headers(struct server *srv, struct MHD_Response *r)
{
    MHD_add_response_header(r, "X-Infer-Board", srv->board);
    if (srv->cfg->cors_origin) {
        MHD_add_response_header(r, "Access-Control-Allow-Origin", srv->cfg->cors_origin);
        if (strcmp(srv->cfg->cors_origin, "*"))
            MHD_add_response_header(r, "Vary", "Origin");
    }
}

/* Queue a response with a malloc'ed body (taken) and extra headers
 * (name, value pairs up to a NULL name; hdrs may be NULL). */
static enum MHD_Result respond_h(struct conn_ctx *ctx, struct MHD_Connection *c, int status, const char *ctype,
                                 char *body, size_t len, const char *const *hdrs)
{
    struct server *srv = ctx->srv;
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (!r) {
        free(body);
        return MHD_NO;
    }
    if (ctype)
        MHD_add_response_header(r, "Content-Type", ctype);
    for (size_t i = 0; hdrs && hdrs[i]; i += 2)
        MHD_add_response_header(r, hdrs[i], hdrs[i + 1]);
    add_common_headers(srv, r);
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)status, r);
    MHD_destroy_response(r);
    ctx->responded = true;
    pthread_mutex_lock(&srv->mu);
    metrics_count_request(&srv->metrics, ctx->endpoint, status);
    pthread_mutex_unlock(&srv->mu);
    if (srv->cfg->verbose)
        fprintf(stderr, "serve: %s %s -> %d (%.0f ms)\n", ctx->method, ctx->url, status,
                (infer_now_seconds() - ctx->t_start) * 1e3);
    return ret;
}

static enum MHD_Result respond(struct conn_ctx *ctx, struct MHD_Connection *c, int status, const char *ctype,
                               char *body, size_t len, const char *hname, const char *hvalue)
{
    const char *hdrs[3] = {hname, hvalue, NULL};
    return respond_h(ctx, c, status, ctype, body, len, hname ? hdrs : NULL);
}

static enum MHD_Result respond_json_h(struct conn_ctx *ctx, struct MHD_Connection *c, int status, json_t *o,
                                      const char *const *hdrs)
{
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!s)
        return MHD_NO;
    return respond_h(ctx, c, status, "application/json", s, strlen(s), hdrs);
}

static enum MHD_Result respond_json(struct conn_ctx *ctx, struct MHD_Connection *c, int status, json_t *o)
{
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!s)
        return MHD_NO;
    return respond(ctx, c, status, "application/json", s, strlen(s), NULL, NULL);
}

static enum MHD_Result respond_error(struct conn_ctx *ctx, struct MHD_Connection *c, const struct api_error *e)
{
    char *s = ctx->ollama_shape ? ollama_error_json(e) : api_error_json(e);
    if (!s)
        return MHD_NO;
    const char *hn = NULL, *hv = NULL;
    if (e->status == 401)
        hn = "WWW-Authenticate", hv = "Bearer";
    else if (e->status == 503)
        hn = "Retry-After", hv = "1";
    return respond(ctx, c, e->status, "application/json", s, strlen(s), hn, hv);
}

static enum MHD_Result fail(struct conn_ctx *ctx, struct MHD_Connection *c, int status, const char *type,
                            const char *code, const char *msg)
{
    struct api_error e;
    api_error_set(&e, status, type, code, "%s", msg);
    return respond_error(ctx, c, &e);
}

/* ------------------------------------------------------------ GET routes */

static const char *state_name(int st)
{
    static const char *n[] = {"unloaded", "loading", "loaded", "failed"};
    return st >= 0 && st < 4 ? n[st] : "?";
}

static enum MHD_Result handle_health(struct conn_ctx *ctx, struct MHD_Connection *c)
{
    struct server *srv = ctx->srv;
    struct server_gauges g;
    pthread_mutex_lock(&srv->mu);
    sched_gauges(srv, &g);
    pthread_mutex_unlock(&srv->mu);
    int status = g.model_state == 1 || g.model_state == 3 || srv->draining ? 503 : 200;
    const char *s = srv->draining          ? "draining"
                    : g.model_state == 1   ? "loading"
                    : g.model_state == 3   ? "error"
                                           : "ok";
    json_t *o = json_pack("{s:s, s:s, s:s, s:f, s:i, s:i, s:i, s:f}", "status", s, "model", srv->model_id,
                          "model_state", state_name(g.model_state), "resident_percent",
                          g.model_bytes ? 100.0 * (double)g.model_resident_bytes / (double)g.model_bytes : 0.0,
                          "slots_processing", g.running, "slots_idle", g.parallel - g.running, "queued", g.queued,
                          "keep_alive", g.keep_alive);
    return respond_json(ctx, c, status, o);
}

/* Stop taking new work gracefully: /health says "draining" (a balancer takes
 * the board out), requests that still arrive are served, and the server
 * exits once idle (serve_run's loop).  SIGTERM does the same. */
static void start_drain(struct server *srv, const char *why)
{
    if (srv->draining)
        return;
    srv->drain_start = infer_now_seconds();
    srv->draining = 1;
    fprintf(stderr, "serve: %s: draining (health 503, still serving; exit when idle, at most %.0f s)\n", why,
            srv->cfg->drain_timeout);
}

static enum MHD_Result handle_drain(struct conn_ctx *ctx, struct MHD_Connection *c)
{
    struct server *srv = ctx->srv;
    const char *key = srv->cfg->admin_key;
    if (!key)
        return fail(ctx, c, 403, "permission_error", "admin_disabled",
                    "this server has no admin key (start it with --admin-key KEY)");
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7))
        return fail(ctx, c, 401, "authentication_error", "invalid_admin_key",
                    "the admin key is required: 'Authorization: Bearer KEY'");
    h += 7;
    while (*h == ' ')
        h++;
    if (!equal_const_time(h, strlen(h), key))
        return fail(ctx, c, 401, "authentication_error", "invalid_admin_key", "wrong admin key");
    start_drain(srv, "POST /admin/drain");
    return respond_json(ctx, c, 202, json_pack("{s:s}", "status", "draining"));
}

static enum MHD_Result handle_metrics(struct conn_ctx *ctx, struct MHD_Connection *c)
{
    struct server *srv = ctx->srv;
    struct server_gauges g;
    infer_respcache_stats rc;
    if (srv->rcache)
        infer_respcache_get_stats(srv->rcache, &rc); /* before mu: the store has its own lock */
    pthread_mutex_lock(&srv->mu);
    sched_gauges(srv, &g);
    g.rc_on = srv->rcache != NULL;
    if (g.rc_on)
        g.rc = rc;
    char *text = metrics_render(&srv->metrics, &g);
    pthread_mutex_unlock(&srv->mu);
    if (!text)
        return fail(ctx, c, 500, "server_error", NULL, "out of memory");
    return respond(ctx, c, 200, "text/plain; version=0.0.4; charset=utf-8", text, strlen(text), NULL, NULL);
}

static json_t *model_object(struct server *srv)
{
    return json_pack("{s:s, s:s, s:I, s:s}", "id", srv->model_id, "object", "model", "created",
                     (json_int_t)srv->model_created, "owned_by", "infer");
}

static json_t *embed_model_object(struct server *srv)
{
    return json_pack("{s:s, s:s, s:I, s:s}", "id", srv->embed_id, "object", "model", "created",
                     (json_int_t)srv->embed_created, "owned_by", "infer");
}

static bool embed_model_known(struct server *srv, const char *name)
{
    if (!srv->embedder)
        return false;
    if (!strcmp(name, srv->embed_id))
        return true;
    const char *path = srv->cfg->embedding_model_path, *base = strrchr(path, '/');
    return !strcmp(name, base ? base + 1 : path);
}

static bool model_known(struct server *srv, const char *name)
{
    if (!strcmp(name, srv->model_id))
        return true;
    const char *base = strrchr(srv->cfg->model_path, '/');
    base = base ? base + 1 : srv->cfg->model_path;
    return !strcmp(name, base);
}

static enum MHD_Result handle_models(struct conn_ctx *ctx, struct MHD_Connection *c)
{
    struct server *srv = ctx->srv;
    if (ctx->route == R_MODEL) {
        const char *id = ctx->url + strlen("/v1/models/");
        if (embed_model_known(srv, id))
            return respond_json(ctx, c, 200, embed_model_object(srv));
        if (!model_known(srv, id)) {
            struct api_error e;
            api_error_set(&e, 404, "invalid_request_error", "model_not_found", "the model '%.200s' does not exist",
                          id);
            return respond_error(ctx, c, &e);
        }
        return respond_json(ctx, c, 200, model_object(srv));
    }
    json_t *list = json_pack("{s:s, s:[o]}", "object", "list", "data", model_object(srv));
    if (list && srv->embedder)
        json_array_append_new(json_object_get(list, "data"), embed_model_object(srv));
    return respond_json(ctx, c, 200, list);
}

/* -------------------------------------------------------- response cache */

/* DELETE /v1/cache: the caller's tenant's answers (the API key's; without
 * keys, everyone's shared tenant).  GET /v1/cache/stats: the store's figures. */
static enum MHD_Result handle_cache(struct conn_ctx *ctx, struct MHD_Connection *c)
{
    struct server *srv = ctx->srv;
    if (!srv->rcache)
        return fail(ctx, c, 501, "not_supported_error", "not_supported",
                    "the response cache is off: start infer serve with --semantic-cache");
    if (ctx->route == R_CACHE_PURGE) {
        int64_t n = infer_respcache_purge(srv->rcache, ctx->salt_key);
        if (n < 0)
            return fail(ctx, c, 500, "server_error", NULL, infer_last_error());
        return respond_json(ctx, c, 200, json_pack("{s:s, s:I}", "object", "cache.purge", "deleted", (json_int_t)n));
    }
    infer_respcache_stats st;
    infer_respcache_get_stats(srv->rcache, &st);
    pthread_mutex_lock(&srv->mu);
    const struct server_metrics *m = &srv->metrics;
    json_t *o = json_pack(
        "{s:s, s:b, s:f, s:I, s:I, s:{s:I, s:I, s:I, s:I}, s:I, s:I, s:{s:I, s:I, s:I},"
        " s:{s:I, s:I, s:I, s:I}, s:f, s:{s:I, s:I}, s:[s]}",
        "object", "cache.stats", "storing", st.storing, "ttl_seconds", st.ttl_seconds, "entries",
        (json_int_t)st.entries, "bytes", (json_int_t)st.bytes, "lookups", "hit-exact", (json_int_t)m->rc_hits,
        "hit-semantic", (json_int_t)m->rc_hits_semantic, "miss", (json_int_t)m->rc_misses, "bypass",
        (json_int_t)m->rc_bypass, "stores", (json_int_t)m->rc_stores, "store_errors", (json_int_t)m->rc_store_errors,
        "skipped", "no-store", (json_int_t)m->rc_skip_no_store, "not-complete", (json_int_t)m->rc_skip_not_stop,
        "error", (json_int_t)m->rc_skip_error, "evictions", "expired", (json_int_t)st.expired, "capacity",
        (json_int_t)st.evicted, "purged", (json_int_t)st.purged, "embedding-model", (json_int_t)st.evicted_model,
        "seconds_saved", m->rc_seconds_saved, "tokens_saved", "prompt", (json_int_t)m->rc_prompt_tokens_saved,
        "completion", (json_int_t)m->rc_completion_tokens_saved, "tiers", "exact");
    if (o && srv->rc_semantic)
        json_array_append_new(json_object_get(o, "tiers"), json_string("semantic"));
    if (o && srv->rc_semantic)
        json_object_set_new(o, "semantic",
                            json_pack("{s:s, s:s, s:f, s:I, s:I, s:f}", "embedding_model", srv->embed_id,
                                      "embedding_sha256", srv->embed_sha, "threshold", (double)srv->rc_threshold,
                                      "rows", (json_int_t)st.semantic_rows, "buckets",
                                      (json_int_t)st.semantic_buckets, "max_temperature",
                                      srv->cfg->response_cache_max_temp));
    pthread_mutex_unlock(&srv->mu);
    return respond_json(ctx, c, 200, o);
}

/* ------------------------------------------------------------ embeddings */

bool server_embed_run(struct server *srv, const struct embed_request *r, float **vec_out,
                      infer_embed_info **info_out, double *seconds, struct api_error *e)
{
    const int d = infer_embedder_n_embd(srv->embedder);
    float *vec = malloc(r->n * (size_t)d * sizeof(float));
    infer_embed_info *info = malloc(r->n * sizeof(*info));
    if (!vec || !info) {
        free(vec);
        free(info);
        api_error_set(e, 500, "server_error", NULL, "out of memory");
        return false;
    }
    pthread_mutex_lock(&srv->embed_mu);
    double t0 = infer_now_seconds();
    infer_status st = infer_embed(srv->embedder, r->inputs, r->lens, r->n, vec, info);
    double dt = infer_now_seconds() - t0;
    pthread_mutex_unlock(&srv->embed_mu);
    if (st != INFER_OK) {
        api_error_set(e, st == INFER_ERR_NOMEM ? 503 : 500, "server_error", NULL, "embedding failed: %s",
                      infer_last_error());
        free(vec);
        free(info);
        return false;
    }
    uint64_t n_tok = 0, n_trunc = 0;
    for (size_t i = 0; i < r->n; i++) {
        n_tok += (uint64_t)info[i].n_tokens;
        n_trunc += info[i].truncated;
    }
    pthread_mutex_lock(&srv->mu);
    srv->metrics.embed_inputs += r->n;
    srv->metrics.embed_tokens += n_tok;
    srv->metrics.embed_truncated += n_trunc;
    srv->metrics.embed_seconds += dt;
    pthread_mutex_unlock(&srv->mu);
    *vec_out = vec;
    *info_out = info;
    *seconds = dt;
    return true;
}

static enum MHD_Result handle_embeddings(struct conn_ctx *ctx, struct MHD_Connection *c)
{
    struct server *srv = ctx->srv;
    if (!srv->embedder)
        return fail(ctx, c, 501, "not_supported_error", "not_supported",
                    "this server has no embedding model: start infer serve with --embedding-model FILE");
    const int d = infer_embedder_n_embd(srv->embedder);
    struct embed_request r;
    struct api_error e = {0};
    if (!api_parse_embed_request(ctx->body ? ctx->body : "", ctx->len, d, &r, &e))
        return respond_error(ctx, c, &e);
    if (r.model && !embed_model_known(srv, r.model)) {
        api_error_set(&e, 404, "invalid_request_error", "model_not_found",
                      "the model '%.200s' does not exist (this server embeds with '%s')", r.model, srv->embed_id);
        embed_request_free(&r);
        return respond_error(ctx, c, &e);
    }
    float *vec;
    infer_embed_info *info;
    double dt;
    if (!server_embed_run(srv, &r, &vec, &info, &dt, &e)) {
        embed_request_free(&r);
        return respond_error(ctx, c, &e);
    }
    uint64_t n_trunc = 0;
    for (size_t i = 0; i < r.n; i++)
        n_trunc += info[i].truncated;
    json_t *o = api_embed_response(&r, vec, d, info, srv->embed_id);
    free(vec);
    free(info);
    embed_request_free(&r);
    char *body = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!body)
        return fail(ctx, c, 500, "server_error", NULL, "out of memory");
    char count[24];
    snprintf(count, sizeof(count), "%llu", (unsigned long long)n_trunc);
    return respond(ctx, c, 200, "application/json", body, strlen(body), n_trunc ? "X-Infer-Truncated" : NULL,
                   count);
}

/* ------------------------------------------------------------ generation */

static void ctx_unref(struct conn_ctx *ctx)
{
    struct server *srv = ctx->srv;
    pthread_mutex_lock(&srv->mu);
    bool last = --ctx->refs == 0;
    if (last && ctx->job) {
        if (ctx->job->state != JOB_DONE && !ctx->job->cancelled) {
            ctx->job->cancelled = true;
            srv->metrics.disconnects++;
            sched_kick(srv);
        }
        job_unref(ctx->job);
        ctx->job = NULL;
    }
    pthread_mutex_unlock(&srv->mu);
    if (last) {
        free(ctx->body);
        free(ctx->out);
        infer_reasoning_free(ctx->reasoning);
        rc_pending_free(&ctx->rc);
        free(ctx);
    }
}

/* Wait (mu held) until the job reaches `state` or the client leaves.
 * Returns false when the client left (the job is then cancelled). */
static bool wait_job(struct conn_ctx *ctx, struct job *j, enum job_state state)
{
    struct server *srv = ctx->srv;
    while (j->state < state) {
        cond_wait_for(&j->cv, &srv->mu, 0.1);
        if (j->state < state && client_gone(ctx->fd)) {
            j->cancelled = true;
            srv->metrics.disconnects++;
            sched_kick(srv);
            return false;
        }
    }
    return true;
}

/* Append "data: <json>\n\n" to the SSE output, or "<json>\n" to an Ollama
 * NDJSON stream (takes o). */
static bool sse_push(struct conn_ctx *ctx, json_t *o)
{
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!s)
        return false;
    size_t n = strlen(s), need = ctx->out_len + n + 9;
    if (need > ctx->out_cap) {
        char *b = realloc(ctx->out, need * 2);
        if (!b) {
            free(s);
            return false;
        }
        ctx->out = b;
        ctx->out_cap = need * 2;
    }
    ctx->out_len += (size_t)sprintf(ctx->out + ctx->out_len, ctx->ollama_shape ? "%s\n" : "data: %s\n\n", s);
    free(s);
    return true;
}

static bool sse_push_raw(struct conn_ctx *ctx, const char *s)
{
    size_t n = strlen(s);
    if (ctx->out_len + n + 1 > ctx->out_cap) {
        char *b = realloc(ctx->out, (ctx->out_len + n + 1) * 2);
        if (!b)
            return false;
        ctx->out = b;
        ctx->out_cap = (ctx->out_len + n + 1) * 2;
    }
    memcpy(ctx->out + ctx->out_len, s, n + 1);
    ctx->out_len += n;
    return true;
}

/* SSE content reader: blocks (this is the connection's own thread) until
 * the engine has produced something, turns it into chunks and copies them
 * out.  Ends the stream after "data: [DONE]", or with an error when the
 * client has gone.  The lock is held only to take the new text and the
 * job's state; chunks are built without it.  New text can make no chunk (a
 * thinking model's splitter holds whitespace and a possible start of its
 * closing marker): it then waits for more (that ended the stream as "out of
 * memory" before, cancelling the answer after its reasoning). */
static ssize_t sse_reader(void *cls, uint64_t pos, char *buf, size_t max)
{
    (void)pos;
    struct conn_ctx *ctx = cls;
    struct server *srv = ctx->srv;
    struct job *j = ctx->job;
    while (ctx->out_off == ctx->out_len) {
        if (ctx->sent_final)
            return MHD_CONTENT_READER_END_OF_STREAM;
        ctx->out_off = ctx->out_len = 0;
        char *text = NULL;
        size_t n_text = 0;
        bool done = false, ping = false;
        pthread_mutex_lock(&srv->mu);
        for (;;) {
            done = j->state == JOB_DONE;
            if (j->text_len > ctx->sent_text) {
                n_text = j->text_len - ctx->sent_text;
                if (!(text = malloc(n_text))) {
                    pthread_mutex_unlock(&srv->mu);
                    return MHD_CONTENT_READER_END_WITH_ERROR;
                }
                memcpy(text, j->text + ctx->sent_text, n_text);
                ctx->sent_text = j->text_len;
            }
            if ((n_text || done) && !ctx->reasoning_checked) {
                ctx->reasoning_checked = true; /* the job is admitted: its markers are set */
                if (j->think_open && j->req.kind == GEN_CHAT)
                    ctx->reasoning = job_reasoning_new(j);
                ctx->tools_hold = j->req.kind == GEN_CHAT && j->req.tools &&
                                  j->req.tool_choice_eff != TOOL_CHOICE_NONE;
            }
            if (ctx->tools_hold && n_text) {
                /* only what cannot be a call goes out as it comes (a chat page
                 * that offers tools with every message still streams its
                 * answers); a call, and the rest, at the end.  A thinking
                 * model's text is held whole (its reasoning is not split then). */
                free(text);
                text = NULL;
                n_text = 0;
                size_t ok = ctx->reasoning ? 0 : api_tools_stream_len(j->text, j->text_len);
                if (ok > ctx->tools_out) {
                    if (!(text = malloc(ok - ctx->tools_out))) {
                        pthread_mutex_unlock(&srv->mu);
                        return MHD_CONTENT_READER_END_WITH_ERROR;
                    }
                    n_text = ok - ctx->tools_out;
                    memcpy(text, j->text + ctx->tools_out, n_text);
                    ctx->tools_out = ok;
                }
            }
            if (n_text || done || !ctx->sent_first)
                break;
            if (!ctx->ollama_shape && infer_now_seconds() - ctx->t_last_out > SSE_PING_SECONDS) {
                /* (NDJSON has no comments: Ollama streams stay silent until the first token) */
                ping = true;
                break;
            }
            cond_wait_for(&j->cv, &srv->mu, 0.1);
            if (j->state != JOB_DONE && j->text_len == ctx->sent_text && client_gone(ctx->fd)) {
                j->cancelled = true;
                srv->metrics.disconnects++;
                sched_kick(srv);
                pthread_mutex_unlock(&srv->mu);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
        }
        pthread_mutex_unlock(&srv->mu);
        /* from here on, what is read of the job is fixed (done: all of it) */
        if (ping) {
            /* an SSE comment while queued or in a long prefill: proxies see
             * traffic, and a write to a closed socket ends us */
            sse_push_raw(ctx, ": ping\n\n");
        }
        if (n_text || !ctx->sent_first) {
            /* the role chunk goes first, at once; then the text as it comes
             * (a thinking model's reasoning as reasoning_content) */
            const char *content = text ? text : "", *reasoning = "";
            size_t n_content = n_text, n_reasoning = 0;
            if (!ctx->tools_hold && ctx->reasoning) /* (tools: text is content for sure here) */
                infer_reasoning_push(ctx->reasoning, content, n_text, false, &reasoning, &n_reasoning, &content,
                                     &n_content);
            if (n_content || n_reasoning || !ctx->sent_first)
                sse_push(ctx, ctx->ollama_shape
                                  ? ollama_chunk(j, j->req.model, content, n_content, reasoning, n_reasoning)
                                  : api_chunk(j, srv->model_id, content, n_content, reasoning, n_reasoning,
                                              !ctx->sent_first, FINISH_NONE));
            ctx->sent_first = true;
        }
        free(text);
        if (done) {
            if (j->err.status) {
                char *e = ctx->ollama_shape ? ollama_error_json(&j->err) : api_error_json(&j->err);
                if (e) {
                    sse_push_raw(ctx, ctx->ollama_shape ? "" : "data: ");
                    sse_push_raw(ctx, e);
                    sse_push_raw(ctx, ctx->ollama_shape ? "\n" : "\n\n");
                    free(e);
                }
            } else if (ctx->tools_hold) {
                /* a thinking model's text was held whole: its reasoning goes
                 * first, then the calls or the rest, from its answer */
                char *reasoning = NULL;
                const size_t rest = ctx->reasoning ? api_answer_start(j, &reasoning) : ctx->tools_out;
                if (ctx->ollama_shape) {
                    /* as Ollama streams a call: a line with message.tool_calls, then the final line */
                    if (reasoning && j->req.think != 0)
                        sse_push(ctx, ollama_chunk(j, j->req.model, "", 0, reasoning, strlen(reasoning)));
                    json_t *tc = ollama_tool_calls_chunk(j, j->req.model, rest);
                    if (tc)
                        sse_push(ctx, tc);
                    else if (j->text_len > rest) /* the rest of the content */
                        sse_push(ctx, ollama_chunk(j, j->req.model, j->text + rest, j->text_len - rest, "", 0));
                    sse_push(ctx, ollama_final(j, j->req.model));
                } else {
                    if (reasoning)
                        sse_push(ctx, api_chunk(j, srv->model_id, "", 0, reasoning, strlen(reasoning), false,
                                                FINISH_NONE));
                    json_t *tc = api_tool_calls_chunk(j, srv->model_id, rest);
                    if (tc)
                        sse_push(ctx, tc);
                    else if (j->text_len > rest) /* the rest of the content */
                        sse_push(ctx, api_chunk(j, srv->model_id, j->text + rest, j->text_len - rest, "", 0, false,
                                                FINISH_NONE));
                    sse_push(ctx, api_chunk(j, srv->model_id, "", 0, "", 0, false,
                                            tc ? FINISH_TOOL_CALLS : j->finish));
                    if (j->req.include_usage)
                        sse_push(ctx, api_usage_chunk(j, srv->model_id));
                }
                free(reasoning);
            } else {
                const char *content, *reasoning;
                size_t n_content, n_reasoning;
                if (ctx->reasoning &&
                    infer_reasoning_push(ctx->reasoning, "", 0, true, &reasoning, &n_reasoning, &content,
                                         &n_content) == INFER_OK &&
                    (n_content || n_reasoning)) /* what was held back */
                    sse_push(ctx, ctx->ollama_shape
                                      ? ollama_chunk(j, j->req.model, content, n_content, reasoning, n_reasoning)
                                      : api_chunk(j, srv->model_id, content, n_content, reasoning, n_reasoning,
                                                  false, FINISH_NONE));
                if (ctx->ollama_shape) {
                    sse_push(ctx, ollama_final(j, j->req.model));
                } else {
                    sse_push(ctx, api_chunk(j, srv->model_id, "", 0, "", 0, false, j->finish));
                    if (j->req.include_usage)
                        sse_push(ctx, api_usage_chunk(j, srv->model_id));
                    if (ctx->rc_on) { /* the stream is complete: store it as the whole response */
                        json_t *o = api_response(j, srv->model_id);
                        rc_store(srv, &ctx->rc, j, o);
                        json_decref(o);
                    }
                }
            }
            if (!ctx->ollama_shape)
                sse_push_raw(ctx, "data: [DONE]\n\n");
            ctx->sent_final = true;
            if (srv->cfg->verbose) /* (whole responses are logged by respond_h) */
                fprintf(stderr, "serve: %s %s -> 200 streamed (%.0f ms)\n", ctx->method, ctx->url,
                        (infer_now_seconds() - ctx->t_start) * 1e3);
            /* idle timeout again (it was off while generating) */
            MHD_set_connection_option(ctx->conn, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)srv->cfg->timeout);
        }
        if (ctx->out_len == 0 && ctx->sent_final)
            return MHD_CONTENT_READER_END_WITH_ERROR; /* out of memory */
    }
    size_t n = ctx->out_len - ctx->out_off;
    if (n > max)
        n = max;
    memcpy(buf, ctx->out + ctx->out_off, n);
    ctx->out_off += n;
    ctx->t_last_out = infer_now_seconds();
    return (ssize_t)n;
}

static void sse_free(void *cls)
{
    ctx_unref(cls);
}

static enum MHD_Result handle_generate(struct conn_ctx *ctx, struct MHD_Connection *c)
{
    struct server *srv = ctx->srv;
    const struct server_config *cfg = srv->cfg;
    struct api_error e = {0};
    struct job *j = job_new();
    if (!j)
        return fail(ctx, c, 500, "server_error", NULL, "out of memory");
    const char *body = ctx->body ? ctx->body : "";
    if (ctx->route == R_OLLAMA ? !ollama_parse_request(ctx->ollama == OR_CHAT ? OLLAMA_CHAT : OLLAMA_GENERATE, body,
                                                       ctx->len, &j->req, &e)
                               : !api_parse_request(ctx->route == R_CHAT ? GEN_CHAT : GEN_COMPLETION, body, ctx->len,
                                                    &j->req, &e)) {
        pthread_mutex_lock(&srv->mu);
        job_unref(j);
        pthread_mutex_unlock(&srv->mu);
        return respond_error(ctx, c, &e);
    }
    if (j->req.ollama && srv->embedder &&
        ollama_name_matches(j->req.model, srv->embed_id, cfg->embedding_model_path)) {
        api_error_set(&e, 400, "invalid_request_error", "invalid_value", "\"%.200s\" does not support %s",
                      j->req.model, j->req.ollama == OLLAMA_CHAT ? "chat" : "generate");
    } else if (j->req.ollama && !ollama_name_matches(j->req.model, srv->model_id, cfg->model_path)) {
        api_error_set(&e, 404, "invalid_request_error", "model_not_found",
                      "model \"%.200s\" not found, try pulling it first (this server has \"%s\")", j->req.model,
                      srv->ollama_models[0].name);
    } else if (!j->req.ollama && j->req.model && !model_known(srv, j->req.model)) {
        api_error_set(&e, 404, "invalid_request_error", "model_not_found",
                      "the model '%.200s' does not exist (this server has '%s')", j->req.model, srv->model_id);
    } else if (j->req.max_tokens > cfg->max_tokens) {
        api_error_set(&e, 400, "invalid_request_error", "max_tokens_exceeded",
                      "%s is %lld, more than this server's limit of %d", j->req.ollama ? "num_predict" : "max_tokens",
                      (long long)j->req.max_tokens, cfg->max_tokens);
    }
    if (e.status) {
        pthread_mutex_lock(&srv->mu);
        job_unref(j);
        pthread_mutex_unlock(&srv->mu);
        return respond_error(ctx, c, &e);
    }
    static const char hex[] = "0123456789abcdef";
    uint64_t rnd = fnv1a((const char *)&j, sizeof(j), (uint64_t)(infer_now_seconds() * 1e9));
    snprintf(j->id, sizeof(j->id), "%s", ctx->route == R_CHAT ? "chatcmpl-" : "cmpl-");
    for (size_t i = strlen(j->id), k = 0; k < 16; i++, k++)
        j->id[i] = hex[(rnd >> (4 * k)) & 15], j->id[i + 1] = '\0';
    j->created = (int64_t)time(NULL);
    j->t_arrival = infer_now_seconds();
    if (ctx->salt_key[0] || j->req.cache_salt) {
        char sh[20] = "";
        if (j->req.cache_salt)
            hash_hex(j->req.cache_salt, strlen(j->req.cache_salt), sh);
        snprintf(j->salt, sizeof(j->salt), "k%s/s%s", ctx->salt_key, sh);
    }

    /* ollama's unload request for a model that is not loaded: nothing to do */
    if (j->req.load_only && j->req.keep_alive_set && j->req.keep_alive == 0) {
        pthread_mutex_lock(&srv->mu);
        const bool loaded = sched_model_state(srv) == 2;
        if (!loaded) {
            j->finish = FINISH_STOP;
            j->t_done = infer_now_seconds();
            json_t *o = ollama_response(j, j->req.model);
            job_unref(j);
            pthread_mutex_unlock(&srv->mu);
            return respond_json(ctx, c, 200, o);
        }
        pthread_mutex_unlock(&srv->mu);
    }

    /* response cache: tier 1, then tier 2 (not for Ollama's shapes: the stored answers are OpenAI's) */
    if (srv->rcache && !j->req.ollama) {
        ctx->rc_on = true;
        json_t *o = rc_lookup(srv, c, ctx->body, ctx->len, j, ctx->salt_key, &ctx->rc);
        if (o) {
            const char *hdrs[16]; /* rc_headers' 9, the path and Cache-Control pairs */
            rc_headers(&ctx->rc, hdrs);
            add_header_pair(hdrs, "X-Infer-Path", "class=response-cache");
            const bool stream = j->req.stream, usage = j->req.include_usage;
            pthread_mutex_lock(&srv->mu);
            job_unref(j);
            pthread_mutex_unlock(&srv->mu);
            if (!stream)
                return respond_json_h(ctx, c, 200, o, hdrs);
            size_t n;
            char *sse = rc_replay_sse(o, usage, &n);
            json_decref(o);
            if (!sse)
                return fail(ctx, c, 500, "server_error", NULL, "out of memory");
            add_header_pair(hdrs, "Cache-Control", "no-cache");
            return respond_h(ctx, c, 200, "text/event-stream", sse, n, hdrs);
        }
    }

    pthread_mutex_lock(&srv->mu);
    if (!sched_submit(srv, j)) {
        srv->metrics.rejected_queue_full++;
        job_unref(j);
        pthread_mutex_unlock(&srv->mu);
        return fail(ctx, c, 503, "server_error", "queue_full",
                    "the server is busy: too many requests are waiting; retry later");
    }
    ctx->job = j; /* the connection's reference */
    /* No idle timeout while the engine works: libmicrohttpd would otherwise
     * close the connection when the handler returns after a long generation
     * (setting it again from 0 restarts its timer). */
    MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, 0u);
    /* a stream's headers go out once the job runs: its prefix lookup (and a
     * wait for a concurrent prefill of the same prefix) is done by then */
    bool here = wait_job(ctx, j, j->req.stream ? JOB_RUNNING : JOB_DONE);
    if (!j->req.stream || j->state == JOB_DONE)
        MHD_set_connection_option(c, MHD_CONNECTION_OPTION_TIMEOUT, (unsigned)cfg->timeout);
    if (!here) {
        pthread_mutex_unlock(&srv->mu);
        return MHD_NO; /* the client left: close */
    }
    if (j->state == JOB_DONE && j->err.status) {
        e = j->err;
        pthread_mutex_unlock(&srv->mu);
        if (ctx->rc_on)
            rc_store(srv, &ctx->rc, j, NULL); /* counted as skipped: errors are never stored */
        return respond_error(ctx, c, &e);
    }
    if (!j->req.stream) {
        json_t *o = j->req.ollama ? ollama_response(j, j->req.model) : api_response(j, srv->model_id);
        char path[160], cached[24];
        api_path_header(&j->stats, path, sizeof(path));
        snprintf(cached, sizeof(cached), "%lld", (long long)j->stats.cached_tokens);
        pthread_mutex_unlock(&srv->mu);
        if (!ctx->rc_on) {
            const char *hdrs[] = {"X-Infer-Path", path, "X-Infer-Cached-Tokens", cached, NULL};
            return respond_json_h(ctx, c, 200, o, hdrs);
        }
        rc_store(srv, &ctx->rc, j, o);
        const char *hdrs[16];
        rc_headers(&ctx->rc, hdrs);
        add_header_pair(hdrs, "X-Infer-Path", path);
        add_header_pair(hdrs, "X-Infer-Cached-Tokens", cached);
        return respond_json_h(ctx, c, 200, o, hdrs);
    }
    ctx->refs++; /* the response's reference */
    /* the job has its slot: the prefix lookup is done, so the balancer's
     * hit figure goes out before the first SSE byte */
    char cached[24], path[160];
    snprintf(cached, sizeof(cached), "%lld", (long long)j->stats.cached_tokens);
    api_path_header(&j->stats, path, sizeof(path));
    pthread_mutex_unlock(&srv->mu);
    struct MHD_Response *r = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_reader, ctx, sse_free);
    if (!r) {
        ctx_unref(ctx);
        return MHD_NO;
    }
    MHD_add_response_header(r, "Content-Type", ctx->ollama_shape ? "application/x-ndjson" : "text/event-stream");
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    MHD_add_response_header(r, "X-Infer-Cached-Tokens", cached);
    MHD_add_response_header(r, "X-Infer-Path", path);
    if (ctx->rc_on) {
        const char *hdrs[12];
        rc_headers(&ctx->rc, hdrs);
        for (size_t i = 0; hdrs[i]; i += 2)
            MHD_add_response_header(r, hdrs[i], hdrs[i + 1]);
    }
    add_common_headers(srv, r);
    enum MHD_Result ret = MHD_queue_response(c, MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    ctx->responded = true;
    pthread_mutex_lock(&srv->mu);
    metrics_count_request(&srv->metrics, ctx->endpoint, 200);
    pthread_mutex_unlock(&srv->mu);
    return ret;
}

/* ------------------------------------------------- for http_ollama.c */

struct server *http_server(const struct conn_ctx *ctx)
{
    return ctx->srv;
}

const char *http_body(const struct conn_ctx *ctx, size_t *len)
{
    *len = ctx->len;
    return ctx->body ? ctx->body : "";
}

int http_respond_json(struct conn_ctx *ctx, int status, json_t *o)
{
    return respond_json(ctx, ctx->conn, status, o);
}

int http_respond_error(struct conn_ctx *ctx, const struct api_error *e)
{
    return respond_error(ctx, ctx->conn, e);
}

int http_respond_text(struct conn_ctx *ctx, int status, const char *ctype, const char *text)
{
    char *s = strdup(text);
    return s ? respond(ctx, ctx->conn, status, ctype, s, strlen(s), NULL, NULL) : MHD_NO;
}

/* --------------------------------------------------------------- routing */

static enum route route_of(const char *method, const char *url, const char **endpoint)
{
    static const struct {
        const char *method, *path, *endpoint;
        enum route r;
    } table[] = {
        {"POST", "/v1/chat/completions", "chat", R_CHAT},
        {"POST", "/chat/completions", "chat", R_CHAT},
        {"POST", "/v1/completions", "completions", R_COMPLETIONS},
        {"POST", "/completions", "completions", R_COMPLETIONS},
        {"POST", "/v1/embeddings", "embeddings", R_EMBEDDINGS},
        {"POST", "/embeddings", "embeddings", R_EMBEDDINGS},
        {"DELETE", "/v1/cache", "cache", R_CACHE_PURGE},
        {"GET", "/v1/cache/stats", "cache", R_CACHE_STATS},
        {"GET", "/v1/models", "models", R_MODELS},
        {"GET", "/models", "models", R_MODELS},
        {"GET", "/health", "health", R_HEALTH},
        {"GET", "/v1/health", "health", R_HEALTH},
        {"GET", "/metrics", "metrics", R_METRICS},
        {"POST", "/admin/drain", "admin", R_DRAIN},
    };
    *endpoint = "other";
    if (!strcmp(method, "OPTIONS"))
        return R_OPTIONS;
    if (!strncmp(url, "/v1/models/", 11) && url[11]) {
        *endpoint = "models";
        return !strcmp(method, "GET") ? R_MODEL : R_NONE;
    }
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
        if (!strcmp(url, table[i].path)) {
            *endpoint = table[i].endpoint;
            if (!strcmp(method, table[i].method) || (!strcmp(method, "HEAD") && !strcmp(table[i].method, "GET")))
                return table[i].r;
            return R_NONE;
        }
    return R_NONE;
}

/* Authorization: Bearer KEY against every configured key (no early exit). */
static bool authorized(struct server *srv, struct MHD_Connection *c, char salt_key[20])
{
    const struct server_config *cfg = srv->cfg;
    if (cfg->n_api_keys == 0)
        return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    if (!h || strncasecmp(h, "Bearer ", 7))
        return false;
    h += 7;
    while (*h == ' ')
        h++;
    size_t n = strlen(h);
    int match = -1;
    for (int i = 0; i < cfg->n_api_keys; i++)
        if (equal_const_time(h, n, cfg->api_keys[i]) && match < 0)
            match = i;
    if (match < 0)
        return false;
    hash_hex(cfg->api_keys[match], strlen(cfg->api_keys[match]), salt_key);
    return true;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    (void)version;
    struct server *srv = cls;
    struct conn_ctx *ctx = *con_cls;
    if (!ctx) {
        /* headers are in: route, authenticate, check the announced size */
        ctx = calloc(1, sizeof(*ctx));
        if (!ctx)
            return MHD_NO;
        ctx->srv = srv;
        ctx->refs = 1;
        ctx->fd = -1;
        ctx->conn = c;
        ctx->method = method;
        ctx->url = url;
        ctx->t_start = infer_now_seconds();
        const union MHD_ConnectionInfo *ci = MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci)
            ctx->fd = ci->connect_fd;
        *con_cls = ctx;
        ctx->route = route_of(method, url, &ctx->endpoint);
        ctx->ollama_shape = !strncmp(url, "/api/", 5);
        if (ctx->route == R_NONE && (ctx->ollama = ollama_route_of(method, url, &ctx->endpoint)) != OR_NONE)
            ctx->route = R_OLLAMA;
        if (ctx->route == R_OPTIONS) {
            struct MHD_Response *r = MHD_create_response_from_buffer(0, (void *)"", MHD_RESPMEM_PERSISTENT);
            if (!r)
                return MHD_NO;
            MHD_add_response_header(r, "Allow", "GET, POST, DELETE, OPTIONS");
            if (srv->cfg->cors_origin) {
                MHD_add_response_header(r, "Access-Control-Allow-Methods", "GET, POST, DELETE, OPTIONS");
                MHD_add_response_header(r, "Access-Control-Allow-Headers", "Authorization, Content-Type");
                MHD_add_response_header(r, "Access-Control-Max-Age", "600");
            }
            add_common_headers(srv, r);
            enum MHD_Result ret = MHD_queue_response(c, 204, r);
            MHD_destroy_response(r);
            ctx->responded = true;
            return ret;
        }
        if (ctx->route == R_NONE)
            return fail(ctx, c, strcmp(ctx->endpoint, "other") ? 405 : 404, "invalid_request_error",
                        strcmp(ctx->endpoint, "other") ? "method_not_allowed" : "not_found",
                        strcmp(ctx->endpoint, "other") ? "method not allowed on this path" : "no such endpoint");
        if (ctx->route != R_HEALTH && ctx->route != R_DRAIN && ctx->ollama != OR_ROOT &&
            !authorized(srv, c, ctx->salt_key))
            return fail(ctx, c, 401, "authentication_error", "invalid_api_key",
                        "a valid API key is required: 'Authorization: Bearer KEY'");
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl) {
            char *end;
            errno = 0;
            unsigned long long v = strtoull(cl, &end, 10);
            if (errno || end == cl || *end || v > srv->cfg->max_body) {
                struct api_error e;
                api_error_set(&e, 413, "invalid_request_error", "request_too_large",
                              "the request body is larger than %zu bytes", srv->cfg->max_body);
                return respond_error(ctx, c, &e);
            }
        }
        return MHD_YES;
    }
    if (ctx->responded) {
        *upload_data_size = 0; /* discard the rest */
        return MHD_YES;
    }
    if (*upload_data_size) {
        /* more of the body */
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (ctx->too_large || ctx->too_slow)
            return MHD_YES;
        if (ctx->len + n > srv->cfg->max_body) {
            ctx->too_large = true;
            free(ctx->body);
            ctx->body = NULL;
            ctx->len = ctx->cap = 0;
            return MHD_YES;
        }
        if (infer_now_seconds() - ctx->t_start > 2.0 * srv->cfg->timeout) {
            ctx->too_slow = true;
            free(ctx->body);
            ctx->body = NULL;
            ctx->len = ctx->cap = 0;
            return MHD_YES;
        }
        if (ctx->len + n + 1 > ctx->cap) {
            size_t cap = (ctx->len + n + 1) * 2;
            if (cap > srv->cfg->max_body + 1)
                cap = srv->cfg->max_body + 1;
            char *b = realloc(ctx->body, cap);
            if (!b)
                return MHD_NO;
            ctx->body = b;
            ctx->cap = cap;
        }
        memcpy(ctx->body + ctx->len, upload_data, n);
        ctx->len += n;
        ctx->body[ctx->len] = '\0';
        return MHD_YES;
    }
    /* the whole request is in */
    if (ctx->too_slow)
        return fail(ctx, c, 408, "invalid_request_error", "request_timeout", "the request body came too slowly");
    if (ctx->too_large) {
        struct api_error e;
        api_error_set(&e, 413, "invalid_request_error", "request_too_large",
                      "the request body is larger than %zu bytes", srv->cfg->max_body);
        return respond_error(ctx, c, &e);
    }
    switch (ctx->route) {
    case R_HEALTH: return handle_health(ctx, c);
    case R_DRAIN: return handle_drain(ctx, c);
    case R_METRICS: return handle_metrics(ctx, c);
    case R_MODELS:
    case R_MODEL: return handle_models(ctx, c);
    case R_CHAT:
    case R_COMPLETIONS: return handle_generate(ctx, c);
    case R_EMBEDDINGS: return handle_embeddings(ctx, c);
    case R_CACHE_PURGE:
    case R_CACHE_STATS: return handle_cache(ctx, c);
    case R_OLLAMA:
        if (ctx->ollama == OR_CHAT || ctx->ollama == OR_GENERATE)
            return handle_generate(ctx, c);
        return (enum MHD_Result)ollama_handle(ctx, ctx->ollama);
    default: return fail(ctx, c, 404, "invalid_request_error", "not_found", "no such endpoint");
    }
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
    (void)cls;
    (void)c;
    (void)toe;
    struct conn_ctx *ctx = *con_cls;
    if (ctx)
        ctx_unref(ctx);
    *con_cls = NULL;
}

static void on_mhd_log(void *cls, const char *fmt, va_list ap)
{
    struct server *srv = cls;
    if (!srv->cfg->verbose)
        return;
    fprintf(stderr, "serve: http: ");
    vfprintf(stderr, fmt, ap);
}

/* ------------------------------------------------------------------ run */

/* A drain lasts at least this long, so that a balancer's health checks
 * (HAProxy: every 2 s, out after 2 failures) see 503 before the port closes. */
#define DRAIN_MIN_S 5.0

static void set_model_id(struct server *srv)
{
    const struct server_config *cfg = srv->cfg;
    if (cfg->model_id) {
        snprintf(srv->model_id, sizeof(srv->model_id), "%s", cfg->model_id);
    } else {
        const char *base = strrchr(cfg->model_path, '/');
        base = base ? base + 1 : cfg->model_path;
        snprintf(srv->model_id, sizeof(srv->model_id), "%s", base);
        size_t n = strlen(srv->model_id);
        if (n > 5 && !strcmp(srv->model_id + n - 5, ".gguf"))
            srv->model_id[n - 5] = '\0';
    }
    struct stat st;
    srv->model_created = stat(cfg->model_path, &st) == 0 ? (int64_t)st.st_mtime : (int64_t)time(NULL);
    /* the board's name for X-Infer-Board: printable ASCII only (it is a header value) */
    if (cfg->board_name)
        snprintf(srv->board, sizeof(srv->board), "%s", cfg->board_name);
    else if (gethostname(srv->board, sizeof(srv->board) - 1) != 0)
        snprintf(srv->board, sizeof(srv->board), "infer");
    srv->board[sizeof(srv->board) - 1] = '\0';
    for (char *p = srv->board; *p; p++)
        if (*p < 0x20 || *p > 0x7e)
            *p = '_';
    if (!srv->board[0])
        snprintf(srv->board, sizeof(srv->board), "infer");
}

/* A SIGINT/SIGTERM delivered to a thread that does not block it (see
 * server_run): noted here, acted on by the main loop. */
static volatile sig_atomic_t stray_signal;
static void on_stray_signal(int sig) { stray_signal = sig; }

int server_run(const struct server_config *cfg)
{
    struct server srv;
    memset(&srv, 0, sizeof(srv));
    srv.cfg = cfg;
    pthread_mutex_init(&srv.mu, NULL);
    pthread_mutex_init(&srv.embed_mu, NULL);
    metrics_init(&srv.metrics);
    set_model_id(&srv);
    if (cfg->response_cache) {
        char dflt[1024], note[1024];
        const char *db = cfg->response_cache_db;
        if (!db) {
            const char *xdg = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
            if (xdg && *xdg)
                snprintf(dflt, sizeof(dflt), "%s/infer", xdg);
            else
                snprintf(dflt, sizeof(dflt), "%s/.cache/infer", home && *home ? home : ".");
            mkdir(dflt, 0700);
            size_t n = strlen(dflt);
            snprintf(dflt + n, sizeof(dflt) - n, "/responses.sqlite");
            db = dflt;
        }
        infer_respcache_params rp = {.path = db, .ttl_seconds = cfg->response_cache_ttl,
                                     .max_entries = cfg->response_cache_max_entries,
                                     .max_bytes = cfg->response_cache_max_bytes};
        if (infer_respcache_open(&srv.rcache, &rp, note, sizeof(note)) != INFER_OK) {
            /* the server keeps answering, without the cache */
            fprintf(stderr, "serve: warning: response cache off: %s\n", infer_last_error());
        } else {
            if (note[0])
                fprintf(stderr, "serve: warning: response cache: %s\n", note);
            fprintf(stderr, "serve: response cache (exact tier%s) in %s, TTL %.0f s\n",
                    cfg->embedding_model_path ? ", semantic tier" : "; no --embedding-model: no semantic tier", db,
                    cfg->response_cache_ttl > 0 ? cfg->response_cache_ttl : 86400.0);
        }
    }
    if (cfg->embedding_model_path) {
        infer_embedder_params ep = {.n_ctx = cfg->embedding_ctx, .n_threads = cfg->n_threads,
                                    .flags = cfg->mlock ? INFER_GGUF_OPEN_MLOCK : 0};
        if (infer_embedder_open(&srv.embedder, cfg->embedding_model_path, &ep) != INFER_OK) {
            fprintf(stderr, "serve: error: --embedding-model: %s\n", infer_last_error());
            pthread_mutex_destroy(&srv.embed_mu);
            pthread_mutex_destroy(&srv.mu);
            return 1;
        }
        const char *base = strrchr(cfg->embedding_model_path, '/');
        snprintf(srv.embed_id, sizeof(srv.embed_id), "%s", base ? base + 1 : cfg->embedding_model_path);
        size_t n = strlen(srv.embed_id);
        if (n > 5 && !strcmp(srv.embed_id + n - 5, ".gguf"))
            srv.embed_id[n - 5] = '\0';
        struct stat est;
        srv.embed_created = stat(cfg->embedding_model_path, &est) == 0 ? (int64_t)est.st_mtime : (int64_t)time(NULL);
        fprintf(stderr, "serve: embedding model %s (%s, %d dims, inputs up to %d tokens, %.0f ms)\n", srv.embed_id,
                infer_embedder_name(srv.embedder), infer_embedder_n_embd(srv.embedder),
                infer_embedder_n_ctx(srv.embedder), infer_embedder_load_seconds(srv.embedder) * 1e3);
        if (srv.rcache) {
            /* the semantic tier: keyed by the embedding file's sha256, with
             * the threshold calibrated for it */
            char note[512] = "";
            bool known = false;
            if (infer_file_sha256(cfg->embedding_model_path, srv.embed_sha) != INFER_OK ||
                infer_respcache_set_embedder(srv.rcache, srv.embed_sha, infer_embedder_n_embd(srv.embedder), note,
                                             sizeof(note)) != INFER_OK) {
                fprintf(stderr, "serve: warning: response cache: no semantic tier: %s\n", infer_last_error());
            } else {
                srv.rc_semantic = true;
                infer_embedder_params ep1 = ep;
                ep1.n_threads = 1;
                if (infer_embedder_open(&srv.rc_embedder, cfg->embedding_model_path, &ep1) != INFER_OK)
                    srv.rc_embedder = NULL; /* the shared handle does it, under embed_mu */
                float th = rc_default_threshold(srv.embed_sha, &known);
                if (cfg->response_cache_threshold > 0)
                    th = (float)cfg->response_cache_threshold;
                srv.rc_threshold = th;
                fprintf(stderr, "serve: response cache: semantic tier with %s, threshold %.3f (%s); %s\n",
                        srv.embed_id, (double)th,
                        cfg->response_cache_threshold > 0 ? "--semantic-cache-threshold"
                        : known                           ? "calibrated for this embedding model"
                                                          : "not calibrated for this embedding model: conservative",
                        note);
            }
        }
    }

    pthread_mutex_init(&srv.digest_mu, NULL);
    if (!ollama_init(&srv)) {
        infer_embedder_close(srv.embedder);
        return 1;
    }

    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_NUMERICHOST}, *ai;
    char port[16];
    snprintf(port, sizeof(port), "%d", cfg->port);
    int gai = getaddrinfo(cfg->host, port, &hints, &ai);
    if (gai) {
        fprintf(stderr, "serve: error: --host '%s' is not a numeric IPv4 or IPv6 address: %s\n", cfg->host,
                gai_strerror(gai));
        ollama_free(&srv);
        infer_embedder_close(srv.embedder);
        return 1;
    }

    /* SIGINT and SIGTERM are blocked in every thread started from here on
     * (the mask is inherited) and taken by sigtimedwait below.  Threads
     * started before main() do not block them (OpenBLAS's, from its library
     * constructor): the kernel may hand a process-directed signal to one of
     * those, whose default action would end the process without the
     * shutdown (seen once in CI: the server exited on SIGINT without "shutting
     * down").  There the handler notes it for the loop below. */
    struct sigaction sa = {.sa_handler = on_stray_signal};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigset_t sigs;
    sigemptyset(&sigs);
    sigaddset(&sigs, SIGINT);
    sigaddset(&sigs, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &sigs, NULL);
    signal(SIGPIPE, SIG_IGN);

    unsigned flags = MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_THREAD_PER_CONNECTION | MHD_USE_POLL |
                     MHD_USE_ERROR_LOG;
    if (ai->ai_family == AF_INET6)
        flags |= MHD_USE_IPv6;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)cfg->port, NULL, NULL, on_request, &srv, MHD_OPTION_EXTERNAL_LOGGER, on_mhd_log, &srv,
        MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)cfg->max_connections, MHD_OPTION_CONNECTION_TIMEOUT,
        (unsigned)cfg->timeout, MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)32768, MHD_OPTION_NOTIFY_COMPLETED,
        on_completed, &srv, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!d) {
        fprintf(stderr, "serve: error: cannot listen on %s port %d: %s\n", cfg->host, cfg->port,
                errno ? strerror(errno) : "libmicrohttpd failed");
        ollama_free(&srv);
        infer_embedder_close(srv.embedder);
        pthread_mutex_destroy(&srv.embed_mu);
        pthread_mutex_destroy(&srv.mu);
        return 1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    int bound = di ? di->port : cfg->port;
    bool v6 = strchr(cfg->host, ':') != NULL;
    fprintf(stderr, "serve: listening on http://%s%s%s:%d (model %s, loading)\n", v6 ? "[" : "", cfg->host,
            v6 ? "]" : "", bound, srv.model_id);

    int rc = 0;
    if (sched_start(&srv) != 0) {
        rc = 1;
    } else {
        bool ready = false;
        double idle_since = 0;
        for (;;) {
            struct timespec ts = {0, 200 * 1000 * 1000};
            int sig = sigtimedwait(&sigs, NULL, &ts);
            if (sig <= 0 && stray_signal) { /* taken by a thread that does not block it */
                sig = stray_signal;
                stray_signal = 0;
            }
            if (sig == SIGTERM && !srv.draining && ready) {
                start_drain(&srv, "SIGTERM");
            } else if (sig > 0) { /* SIGINT, a second SIGTERM, or SIGTERM before the model is in */
                fprintf(stderr, "serve: %s: shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
                break;
            }
            if (srv.draining) {
                /* exit once nothing ran for a second, but not before the balancer's health
                 * checks saw 503 (DRAIN_MIN_S), and at the latest after --drain-timeout */
                const double now = infer_now_seconds(), t = now - srv.drain_start;
                struct server_gauges g;
                pthread_mutex_lock(&srv.mu);
                sched_gauges(&srv, &g);
                pthread_mutex_unlock(&srv.mu);
                if (g.running > 0 || g.queued > 0)
                    idle_since = now;
                if ((t >= DRAIN_MIN_S && now - idle_since >= 1.0) || t >= cfg->drain_timeout) {
                    fprintf(stderr, "serve: drained after %.1f s%s: shutting down\n", t,
                            g.running > 0 || g.queued > 0 ? " (--drain-timeout, requests still running)" : "");
                    break;
                }
            }
            if (!ready) {
                pthread_mutex_lock(&srv.mu);
                int st = sched_model_state(&srv);
                pthread_mutex_unlock(&srv.mu);
                if (st == 3) { /* the first load failed: nothing to serve */
                    rc = 1;
                    break;
                }
                if (st == 2) {
                    fprintf(stderr, "serve: ready\n");
                    ready = true;
                }
            }
        }
    }
    sched_stop(&srv);      /* jobs end, the engine thread exits, the model is freed */
    MHD_stop_daemon(d);    /* connection threads see their jobs ended */
    sched_free(&srv);
    infer_respcache_close(srv.rcache);
    infer_embedder_close(srv.rc_embedder);
    ollama_free(&srv);
    infer_embedder_close(srv.embedder);
    pthread_mutex_destroy(&srv.embed_mu);
    pthread_mutex_destroy(&srv.mu);
    return rc;
}
