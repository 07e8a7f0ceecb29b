/*
 * rcache.c - the response cache in front of generation (`infer serve
 * --semantic-cache`, off by default): tier 1, exact.
 *
 * The key is the sha256 of the canonical request: the model's identity
 * (id, file size and mtime, chat template), the tenant salt (API key and
 * cache_salt), the kind, every message (role and content) or the prompt,
 * and every parameter that changes the answer (effective max_tokens,
 * temperature, top_k, top_p, min_p, repeat penalty and window, seed, stop
 * strings, the response_format / tools constraint).  Two requests share a key only when they are the same question
 * to the same model from the same tenant, so a hit is the answer the model
 * gave to exactly this request (DESIGN.md decision 11: exact, and it says
 * where it came from).
 *
 * Bypassed (X-Infer-Cache: bypass): streamed requests (stored replays as
 * SSE are not built yet) and sampling without a fixed seed at temperature >
 * 0 (such a request has no one answer to repeat).  Stored: only complete
 * answers (HTTP 200, finish_reason "stop"), never errors, cancelled or
 * length-cut ones.  Controls: "Cache-Control: no-cache" (do not look up) or
 * "no-store" (do not store), or the same as "cache": {"no-cache": true,
 * "no-store": true} in the body.  The semantic tier (embedding similarity
 * inside hard partitions, with the content gate) is not built yet.
 */
#include "server.h"

#include <microhttpd.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

void rc_control_parse(struct MHD_Connection *c, const char *body, size_t len, struct rc_control *out)
{
    memset(out, 0, sizeof(*out));
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Cache-Control");
    if (h) {
        /* comma-separated directives, case-insensitive */
        for (const char *p = h; *p;) {
            while (*p == ' ' || *p == ',')
                p++;
            size_t n = strcspn(p, ", ");
            if (n == 8 && !strncasecmp(p, "no-cache", 8))
                out->no_cache = true;
            else if (n == 8 && !strncasecmp(p, "no-store", 8))
                out->no_store = true;
            p += n;
        }
    }
    json_t *root = body ? json_loadb(body, len, 0, NULL) : NULL;
    json_t *o = root ? json_object_get(root, "cache") : NULL;
    if (json_is_object(o)) {
        out->no_cache |= json_is_true(json_object_get(o, "no-cache"));
        out->no_store |= json_is_true(json_object_get(o, "no-store"));
    }
    json_decref(root);
}

bool rc_request_key(const struct server *srv, const struct job *j, uint8_t key[32])
{
    const struct gen_request *r = &j->req;
    const struct server_config *cfg = srv->cfg;
    if (r->stream)
        return false;
    if (r->sp.temp > 0.0f && r->sp.seed == INFER_SEED_RANDOM)
        return false;
    struct stat st;
    json_int_t size = 0, mtime = 0;
    if (stat(cfg->model_path, &st) == 0)
        size = (json_int_t)st.st_size, mtime = (json_int_t)st.st_mtime;
    json_t *what = json_array();
    if (r->kind == GEN_CHAT) {
        for (size_t i = 0; what && i < r->n_msgs; i++)
            json_array_append_new(what, json_pack("[s, s]", r->msgs[i].role, r->msgs[i].content));
    } else if (r->prompt_ids) {
        for (size_t i = 0; what && i < r->n_prompt_ids; i++)
            json_array_append_new(what, json_integer(r->prompt_ids[i]));
    } else if (what) {
        json_array_append_new(what, json_string(r->prompt ? r->prompt : ""));
    }
    json_t *stops = json_array();
    for (int i = 0; stops && i < r->n_stop; i++)
        json_array_append_new(stops, json_string(r->stop[i]));
    const int64_t max_tokens = r->max_tokens >= 0 ? r->max_tokens : cfg->max_tokens;
    /* the same float always prints the same way: %.17g of the double */
    json_t *k = json_pack("[s, s, I, I, s, s, s, o, I, f, i, f, f, f, i, I, o]", "infer-rc-1", srv->model_id, size,
                          mtime, cfg->chat_template ? cfg->chat_template : "", j->salt,
                          r->kind == GEN_CHAT ? "chat" : "completion", what, (json_int_t)max_tokens,
                          (double)r->sp.temp, r->sp.top_k, (double)r->sp.top_p, (double)r->sp.min_p,
                          (double)r->sp.repeat_penalty, r->sp.repeat_last_n, (json_int_t)r->sp.seed, stops);
    if (k && r->format_key) /* structured output: another answer */
        json_array_append_new(k, json_string(r->format_key));
    char *tk = api_tools_key(r);
    if (k && tk) /* tools, tool turns, tool_choice */
        json_array_append_new(k, json_string(tk));
    free(tk);
    char *s = k ? json_dumps(k, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
    json_decref(k);
    if (!s)
        return false;
    infer_sha256(s, strlen(s), key);
    free(s);
    return true;
}

json_t *rc_replay(const char *answer, size_t len, const char *id, int64_t created, double *saved_seconds)
{
    *saved_seconds = 0;
    json_t *o = json_loadb(answer, len, 0, NULL);
    if (!json_is_object(o)) {
        json_decref(o);
        return NULL;
    }
    json_object_set_new(o, "id", json_string(id));
    json_object_set_new(o, "created", json_integer((json_int_t)created));
    json_t *t = json_object_get(o, "timings");
    if (json_is_object(t))
        *saved_seconds = (json_number_value(json_object_get(t, "prompt_ms")) +
                          json_number_value(json_object_get(t, "predicted_ms"))) / 1e3;
    json_object_del(o, "timings"); /* the original generation's, not this answer's */
    return o;
}
