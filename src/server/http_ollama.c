/*
 * http_ollama.c - the routes of Ollama's API that do not generate: the
 * model list, details, running models, version, embeddings, the refused
 * model-management calls, and the "Ollama is running" probe.
 *
 * POST /api/chat and /api/generate are routed here too (ollama_route_of) but
 * answered by http.c's handle_generate, the same path as the OpenAI
 * endpoints (api_ollama.c parses and shapes them).
 *
 * Models: the chat model under --alias (default: the file's base name
 * without .gguf), listed as "NAME:latest", and the --embedding-model under
 * its base name; a request may say NAME, NAME:latest or the file name.
 * Their descriptions are read from the GGUF metadata once at start; the
 * sha256 digest is computed on the first request that lists it (once, then
 * kept), so a start is not slowed by hashing a large file.
 */
#include "server.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <microhttpd.h>

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

enum ollama_route ollama_route_of(const char *method, const char *url, const char **endpoint)
{
    static const struct {
        const char *method, *path, *endpoint;
        enum ollama_route r;
    } table[] = {
        {"POST", "/api/chat", "ollama_chat", OR_CHAT},
        {"POST", "/api/generate", "ollama_generate", OR_GENERATE},
        {"GET", "/api/tags", "ollama_tags", OR_TAGS},
        {"POST", "/api/show", "ollama_show", OR_SHOW},
        {"GET", "/api/ps", "ollama_ps", OR_PS},
        {"GET", "/api/version", "ollama_version", OR_VERSION},
        {"POST", "/api/embed", "ollama_embed", OR_EMBED},
        {"POST", "/api/embeddings", "ollama_embed", OR_EMBEDDINGS},
        {"POST", "/api/pull", "ollama_manage", OR_UNSUPPORTED},
        {"POST", "/api/push", "ollama_manage", OR_UNSUPPORTED},
        {"POST", "/api/create", "ollama_manage", OR_UNSUPPORTED},
        {"POST", "/api/copy", "ollama_manage", OR_UNSUPPORTED},
        {"DELETE", "/api/delete", "ollama_manage", OR_UNSUPPORTED},
        {"GET", "/", "ollama_root", OR_ROOT},
    };
    if (!strncmp(url, "/api/blobs/", 11)) {
        *endpoint = "ollama_manage";
        return OR_UNSUPPORTED;
    }
    for (size_t i = 0; i < N_OF(table); i++)
        if (!strcmp(url, table[i].path)) {
            *endpoint = table[i].endpoint;
            if (!strcmp(method, table[i].method) || (!strcmp(method, "HEAD") && !strcmp(table[i].method, "GET")))
                return table[i].r;
            return OR_NONE;
        }
    return OR_NONE;
}

/* ---------------------------------------------------------------- models */

bool ollama_init(struct server *srv)
{
    const struct server_config *cfg = srv->cfg;
    srv->ollama_models = calloc(2, sizeof(*srv->ollama_models));
    if (!srv->ollama_models) {
        fprintf(stderr, "serve: error: out of memory\n");
        return false;
    }
    if (!ollama_model_init(&srv->ollama_models[0], cfg->model_path, srv->model_id, false)) {
        fprintf(stderr, "serve: error: out of memory\n");
        ollama_free(srv);
        return false;
    }
    srv->n_ollama_models = 1;
    if (srv->embedder) {
        if (!ollama_model_init(&srv->ollama_models[1], cfg->embedding_model_path, srv->embed_id, true)) {
            fprintf(stderr, "serve: error: out of memory\n");
            ollama_free(srv);
            return false;
        }
        srv->n_ollama_models = 2;
    }
    return true;
}

void ollama_free(struct server *srv)
{
    for (int i = 0; srv->ollama_models && i < srv->n_ollama_models; i++)
        ollama_model_free(&srv->ollama_models[i]);
    free(srv->ollama_models);
    srv->ollama_models = NULL;
    srv->n_ollama_models = 0;
}

static struct ollama_model *find_model(struct server *srv, const char *name)
{
    const struct server_config *cfg = srv->cfg;
    if (ollama_name_matches(name, srv->model_id, cfg->model_path))
        return &srv->ollama_models[0];
    if (srv->n_ollama_models > 1 && ollama_name_matches(name, srv->embed_id, cfg->embedding_model_path))
        return &srv->ollama_models[1];
    return NULL;
}

/* The file's sha256 (hex, as Ollama lists digests), computed once. */
static const char *digest(struct server *srv, struct ollama_model *m)
{
    pthread_mutex_lock(&srv->digest_mu);
    if (!m->digest[0]) {
        char hex[65];
        if (infer_file_sha256(m->path, hex) == INFER_OK)
            snprintf(m->digest, sizeof(m->digest), "%s", hex);
    }
    pthread_mutex_unlock(&srv->digest_mu);
    return m->digest;
}

static json_t *list_entry(struct server *srv, struct ollama_model *m)
{
    char mtime[40];
    ollama_time((double)m->mtime, mtime);
    return json_pack("{s:s, s:s, s:s, s:I, s:s, s:o}", "name", m->name, "model", m->name, "modified_at", mtime,
                     "size", (json_int_t)m->size, "digest", digest(srv, m), "details", ollama_details(m));
}

static int not_found(struct conn_ctx *ctx, const char *name)
{
    struct api_error e;
    api_error_set(&e, 404, "invalid_request_error", "model_not_found",
                  "model \"%.200s\" not found, try pulling it first", name);
    return http_respond_error(ctx, &e);
}

static int handle_tags(struct conn_ctx *ctx)
{
    struct server *srv = http_server(ctx);
    json_t *list = json_array();
    for (int i = 0; list && i < srv->n_ollama_models; i++)
        json_array_append_new(list, list_entry(srv, &srv->ollama_models[i]));
    return http_respond_json(ctx, 200, json_pack("{s:o}", "models", list));
}

/* The model the body names: *name (caller frees) and the model it is, or
 * NULL when the body is bad (then answered here: returns false, *ret set). */
static bool requested_model(struct conn_ctx *ctx, char **name, struct ollama_model **m, int *ret)
{
    size_t len;
    const char *body = http_body(ctx, &len);
    struct api_error e = {0};
    if (!(*name = ollama_request_model(body, len, &e))) {
        *ret = http_respond_error(ctx, &e);
        return false;
    }
    *m = find_model(http_server(ctx), *name);
    return true;
}

static int handle_show(struct conn_ctx *ctx)
{
    char *name;
    struct ollama_model *m;
    int ret;
    if (!requested_model(ctx, &name, &m, &ret))
        return ret;
    ret = m ? http_respond_json(ctx, 200, ollama_show(m)) : not_found(ctx, name);
    free(name);
    return ret;
}

/* The running models: the chat model while it is loaded (until its
 * keep-alive runs out), and the embedding model, which stays loaded. */
static int handle_ps(struct conn_ctx *ctx)
{
    struct server *srv = http_server(ctx);
    const struct server_config *cfg = srv->cfg;
    struct server_gauges g;
    pthread_mutex_lock(&srv->mu);
    sched_gauges(srv, &g);
    pthread_mutex_unlock(&srv->mu);
    struct timespec now_ts;
    clock_gettime(CLOCK_REALTIME, &now_ts);
    const double now = (double)now_ts.tv_sec + now_ts.tv_nsec * 1e-9;
    const double forever = 290.0 * 365.25 * 86400; /* keep_alive -1: far away (Ollama shows 2318) */
    json_t *list = json_array();
    for (int i = 0; list && i < srv->n_ollama_models; i++) {
        struct ollama_model *m = &srv->ollama_models[i];
        double left = forever;
        int64_t n_ctx;
        if (!m->embedding) {
            if (g.model_state != 2)
                continue;
            if (g.keep_alive >= 0)
                left = g.keep_alive - g.idle_seconds > 0 ? g.keep_alive - g.idle_seconds : 0;
            n_ctx = cfg->n_ctx > 0 ? cfg->n_ctx : m->context_length > 0 && m->context_length < 4096 ? m->context_length
                                                                                                     : 4096;
        } else {
            n_ctx = infer_embedder_n_ctx(srv->embedder);
        }
        char expires[40];
        ollama_time(now + left, expires);
        json_t *o = list_entry(srv, m);
        json_object_set_new(o, "expires_at", json_string(expires));
        json_object_set_new(o, "size_vram", json_integer(0)); /* CPU only */
        json_object_set_new(o, "context_length", json_integer(n_ctx));
        json_array_append_new(list, o);
    }
    return http_respond_json(ctx, 200, json_pack("{s:o}", "models", list));
}

/* ------------------------------------------------------------ embeddings */

/* POST /api/embed {"model", "input": string | [string], "truncate", "dimensions",
 * "options", "keep_alive"}, and the older POST /api/embeddings {"model",
 * "prompt"}: through the same embedder and batch as /v1/embeddings. */
static int handle_embed(struct conn_ctx *ctx, bool legacy)
{
    struct server *srv = http_server(ctx);
    size_t len;
    const char *body = http_body(ctx, &len);
    struct api_error e = {0};
    char *name;
    struct ollama_model *m;
    int ret;
    if (!requested_model(ctx, &name, &m, &ret))
        return ret;
    if (!m || !m->embedding) {
        if (m) {
            api_error_set(&e, srv->embedder ? 400 : 501, "invalid_request_error", "invalid_value",
                          "\"%.200s\" does not support embeddings%s", name,
                          srv->embedder ? "" : " (start infer serve with --embedding-model FILE)");
            ret = http_respond_error(ctx, &e);
        } else {
            ret = not_found(ctx, name);
        }
        free(name);
        return ret;
    }
    json_t *root = json_loadb(body, len, 0, NULL); /* valid: ollama_request_model parsed it */
    bool truncate = true;
    struct embed_request r = {0};
    json_t *v;
    bool ok = api_get_bool(root, "truncate", &truncate, &e);
    if (ok && (v = json_object_get(root, "options")) && !json_is_null(v) && !json_is_object(v))
        ok = false, api_error_set(&e, 400, "invalid_request_error", "invalid_value", "'options' must be an object");
    double ka;
    if (ok && (v = json_object_get(root, "keep_alive")) && !json_is_null(v) && !json_is_number(v) &&
        !(json_is_string(v) && server_parse_duration(json_string_value(v), &ka)))
        ok = false, api_error_set(&e, 400, "invalid_request_error", "invalid_value", "'keep_alive' must be a duration");
    if (ok && legacy) {
        /* {"prompt": string}: one input; an empty one gives an empty vector, as Ollama's does */
        json_t *p = json_object_get(root, "prompt");
        if (p && !json_is_null(p) && !json_is_string(p)) {
            ok = false, api_error_set(&e, 400, "invalid_request_error", "invalid_value", "'prompt' must be a string");
        } else if (!p || json_is_null(p) || json_string_length(p) == 0) {
            json_decref(root);
            free(name);
            return http_respond_json(ctx, 200, json_pack("{s:[]}", "embedding"));
        } else if ((r.inputs = malloc(sizeof(*r.inputs))) && (r.lens = malloc(sizeof(*r.lens)))) {
            r.root = json_incref(root);
            r.inputs[0] = json_string_value(p);
            r.lens[0] = json_string_length(p);
            r.n = 1;
        } else {
            ok = false, api_error_set(&e, 500, "server_error", NULL, "out of memory");
            embed_request_free(&r);
        }
    } else if (ok) {
        ok = api_parse_embed_request(body, len, infer_embedder_n_embd(srv->embedder), &r, &e);
    }
    json_decref(root);
    float *vec = NULL;
    infer_embed_info *info = NULL;
    double dt = 0;
    if (ok && !server_embed_run(srv, &r, &vec, &info, &dt, &e))
        ok = false;
    int64_t n_tok = 0;
    for (size_t i = 0; ok && i < r.n; i++) {
        n_tok += info[i].n_tokens;
        if (info[i].truncated && !truncate) {
            api_error_set(&e, 400, "invalid_request_error", "context_length_exceeded",
                          "input %zu exceeds the maximum context length (%d tokens) and 'truncate' is false", i,
                          infer_embedder_n_ctx(srv->embedder));
            ok = false;
        }
    }
    json_t *o = NULL;
    if (ok) {
        const int d = infer_embedder_n_embd(srv->embedder);
        json_t *rows = json_array();
        for (size_t i = 0; rows && i < r.n; i++) {
            json_t *row = json_array();
            for (int k = 0; row && k < d; k++)
                json_array_append_new(row, json_real((double)vec[i * (size_t)d + (size_t)k]));
            json_array_append_new(rows, row);
        }
        if (legacy) {
            o = json_pack("{s:O}", "embedding", json_array_get(rows, 0));
            json_decref(rows);
        } else {
            o = json_pack("{s:s, s:o, s:I, s:I, s:I}", "model", name, "embeddings", rows, "total_duration",
                          (json_int_t)llround(dt * 1e9), "load_duration", (json_int_t)0, "prompt_eval_count",
                          (json_int_t)n_tok);
        }
    }
    free(vec);
    free(info);
    if (r.root)
        embed_request_free(&r);
    free(name);
    return ok ? http_respond_json(ctx, 200, o) : http_respond_error(ctx, &e);
}

/* ----------------------------------------------------------------- route */

int ollama_handle(struct conn_ctx *ctx, enum ollama_route route)
{
    struct server *srv = http_server(ctx);
    struct api_error e;
    switch (route) {
    case OR_ROOT: return http_respond_text(ctx, 200, "text/plain; charset=utf-8", "Ollama is running");
    case OR_VERSION:
        return http_respond_json(ctx, 200,
                                 json_pack("{s:s, s:s}", "version", OLLAMA_API_VERSION, "infer_version", infer_version()));
    case OR_TAGS: return handle_tags(ctx);
    case OR_SHOW: return handle_show(ctx);
    case OR_PS: return handle_ps(ctx);
    case OR_EMBED: return handle_embed(ctx, false);
    case OR_EMBEDDINGS: return handle_embed(ctx, true);
    case OR_UNSUPPORTED:
        api_error_set(&e, 501, "not_supported_error", "not_supported",
                      "not supported: infer serves local GGUF files and does not pull, push, create, copy or delete "
                      "models (this server has \"%s\"; start infer serve -m FILE --alias NAME for another)",
                      srv->ollama_models[0].name);
        return http_respond_error(ctx, &e);
    default:
        api_error_set(&e, 404, "invalid_request_error", "not_found", "no such endpoint");
        return http_respond_error(ctx, &e);
    }
}
