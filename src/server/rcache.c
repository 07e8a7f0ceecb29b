/*
 * rcache.c - the response cache in front of generation (`infer serve
 * --semantic-cache`, off by default): tier 1 exact, tier 2 semantic.
 *
 * Tier 1.  The key is the sha256 of the canonical request: the model's
 * identity (id, file size and mtime, chat template), the tenant salt (API
 * key and cache_salt), the kind, every message (role and content) or the
 * prompt, and every parameter that changes the answer (effective
 * max_tokens, temperature, top_k, top_p, min_p, repeat penalty and window,
 * seed, stop strings, the response_format constraint).  Two requests share a key only when they are the
 * same question to the same model from the same tenant.  Sampling without a
 * fixed seed at temperature > 0 has no one answer to repeat: no tier 1.
 * Requests with tools or tool turns bypass both tiers: an answer that is a
 * call asks the client to act (again, on a replay), the stored call ids
 * would be replayed, and the streamed replay carries text only.
 *
 * Tier 2 (with --embedding-model), on a tier-1 miss, for chat requests
 * whose last message is the user's: the bucket is the sha256 of the same
 * list with the embedding model's sha256 added and the last user message
 * left out - so a hit needs the same model, tenant, system prompt, earlier
 * turns and output parameters, and buckets are partitions, never a text
 * prefix.  Inside the bucket the normalised last user message
 * (infer_semgate_normalize) is embedded and compared with the stored
 * questions (infer_respcache_get_similar): the most similar one the content
 * gate accepts answers if its cosine reaches the threshold - the calibrated
 * one of the embedding model (rc_default_threshold), which a request may
 * raise ("cache": {"threshold": x}), never lower.  Bypassed: tool messages
 * or tools, n > 1, logprobs, temperature above --semantic-cache-max-temp.
 *
 * Stored (both tiers at once): only complete answers (HTTP 200,
 * finish_reason "stop", not cancelled), streamed or not, as the
 * non-streamed response object; a hit on a streamed request is replayed as
 * chat.completion.chunk events (rc_replay_sse).  Controls:
 * "Cache-Control: no-cache" (do not look up) or "no-store" (do not store),
 * or the body's "cache": {"no-cache": true, "no-store": true}.
 */
#include "server.h"

#include <math.h>
#include <microhttpd.h>
#include <stdio.h>
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
        json_t *t = json_object_get(o, "threshold");
        if (json_is_number(t) && isfinite(json_number_value(t)))
            out->threshold = json_number_value(t);
    }
    /* what tier 2 must not answer (the parser refuses some of these today;
     * the check does not depend on it) */
    json_t *v;
    if (json_is_object(root)) {
        if ((v = json_object_get(root, "n")) && json_is_integer(v) && json_integer_value(v) > 1)
            out->sem_bypass = "n > 1";
        else if ((v = json_object_get(root, "logprobs")) && json_is_true(v))
            out->sem_bypass = "logprobs";
        else if ((v = json_object_get(root, "tools")) && json_is_array(v) && json_array_size(v) > 0)
            out->sem_bypass = "tools";
    }
    json_decref(root);
}

/* The canonical request as a JSON array: what both tiers hash.  n_msgs of
 * the messages (chat) are listed; emb_id is added for tier 2. */
static char *canonical(const struct server *srv, const struct job *j, size_t n_msgs, const char *tier,
                       const char *emb_id)
{
    const struct gen_request *r = &j->req;
    const struct server_config *cfg = srv->cfg;
    struct stat st;
    json_int_t size = 0, mtime = 0;
    if (stat(cfg->model_path, &st) == 0)
        size = (json_int_t)st.st_size, mtime = (json_int_t)st.st_mtime;
    json_t *what = json_array();
    if (r->kind == GEN_CHAT) {
        for (size_t i = 0; what && i < n_msgs; i++)
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
    json_t *k = json_pack("[s, s, I, I, s, s, s, o, I, f, i, f, f, f, i, I, o]", tier, srv->model_id, size, mtime,
                          cfg->chat_template ? cfg->chat_template : "", j->salt,
                          r->kind == GEN_CHAT ? "chat" : "completion", what, (json_int_t)max_tokens,
                          (double)r->sp.temp, r->sp.top_k, (double)r->sp.top_p, (double)r->sp.min_p,
                          (double)r->sp.repeat_penalty, r->sp.repeat_last_n, (json_int_t)r->sp.seed, stops);
    if (k && r->format_key) /* structured output: another answer */
        json_array_append_new(k, json_string(r->format_key));
    if (k && r->kind == GEN_CHAT && gen_no_think(r, cfg->reasoning_budget)) /* another prompt */
        json_array_append_new(k, json_string("no-think"));
    if (k && emb_id)
        json_array_append_new(k, json_string(emb_id));
    char *s = k ? json_dumps(k, JSON_COMPACT | JSON_ENSURE_ASCII) : NULL;
    json_decref(k);
    return s;
}

bool rc_request_key(const struct server *srv, const struct job *j, uint8_t key[32])
{
    const struct gen_request *r = &j->req;
    if ((r->sp.temp > 0.0f && r->sp.seed == INFER_SEED_RANDOM) || r->tools || r->raw_msgs)
        return false;
    char *s = canonical(srv, j, r->n_msgs, "infer-rc-1", NULL);
    if (!s)
        return false;
    infer_sha256(s, strlen(s), key);
    free(s);
    return true;
}

const char *rc_semantic_bucket(const struct server *srv, const struct job *j, const struct rc_control *ctl,
                               uint8_t bucket[32])
{
    const struct gen_request *r = &j->req;
    if (!srv->rc_semantic)
        return "no embedding model";
    if (ctl->sem_bypass)
        return ctl->sem_bypass;
    if (r->tools || r->raw_msgs) /* (tool turns without tools: an assistant turn's tool_calls) */
        return "tools";
    if (r->kind != GEN_CHAT)
        return "not a chat";
    if (!r->n_msgs || strcmp(r->msgs[r->n_msgs - 1].role, "user"))
        return "the last message is not the user's";
    for (size_t i = 0; i < r->n_msgs; i++)
        if (strcmp(r->msgs[i].role, "system") && strcmp(r->msgs[i].role, "developer") &&
            strcmp(r->msgs[i].role, "user") && strcmp(r->msgs[i].role, "assistant"))
            return "tool messages";
    if (r->sp.temp > srv->cfg->response_cache_max_temp)
        return "temperature";
    /* the seed only matters when sampling */
    struct job tmp = *j;
    if (tmp.req.sp.temp <= 0.0f)
        tmp.req.sp.seed = INFER_SEED_RANDOM;
    char *s = canonical(srv, &tmp, r->n_msgs - 1, "infer-rc-2", srv->embed_sha);
    if (!s)
        return "out of memory";
    infer_sha256(s, strlen(s), bucket);
    free(s);
    return NULL;
}

/* Calibrated thresholds, by the sha256 of the embedding model's GGUF file
 * (models/SHA256SUMS): chosen with contrib/bench/semantic-eval on
 * tests/data/semantic-pairs.tsv (README, "Response cache").  Another model
 * gets RC_UNCALIBRATED unless --semantic-cache-threshold says otherwise. */
static const struct {
    const char *sha256, *name;
    float threshold;
} calibrated[] = {
    /* 2026-12-02, 436 English pairs: precision 1.000 [0.973, 1.000], recall 0.683 [0.616, 0.743]
     * (the same recall as at 0.80, more margin); Q8_0 embeds within cosine 0.999 of F16 */
    {"99bce1aa4211fea3b2cd95d38007a35f41304501c021c865f4a9bbd15f355224", "all-MiniLM-L6-v2 F16", 0.82f},
    {"791c1c434570a0595af297c3633b45b3fbcebf76d8e505a5f68947089f4071de", "all-MiniLM-L6-v2 Q8_0", 0.82f},
};
#define RC_UNCALIBRATED 0.95f

float rc_default_threshold(const char *sha256, bool *known)
{
    for (size_t i = 0; i < sizeof(calibrated) / sizeof(calibrated[0]); i++)
        if (!strcmp(calibrated[i].sha256, sha256)) {
            *known = true;
            return calibrated[i].threshold;
        }
    *known = false;
    return RC_UNCALIBRATED;
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

/* Append "data: <o>\n\n" (takes o). */
static bool sse_add(char **buf, size_t *len, size_t *cap, json_t *o)
{
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    if (!s)
        return false;
    size_t n = strlen(s), need = *len + n + 9;
    if (need > *cap) {
        char *b = realloc(*buf, need * 2);
        if (!b) {
            free(s);
            return false;
        }
        *buf = b;
        *cap = need * 2;
    }
    *len += (size_t)sprintf(*buf + *len, "data: %s\n\n", s);
    free(s);
    return true;
}

/* Length of the next piece of text to send: up to ~24 bytes, ending after a
 * space when there is one, never inside a UTF-8 sequence. */
static size_t piece_len(const char *s, size_t n)
{
    const size_t want = 24;
    if (n <= want)
        return n;
    size_t k = want;
    for (size_t i = want; i > 4; i--)
        if (s[i - 1] == ' ') {
            k = i;
            break;
        }
    while (k < n && ((unsigned char)s[k] & 0xC0) == 0x80)
        k++;
    return k;
}

/* One chunk of the replay: delta (chat) or text (completion). */
static json_t *replay_chunk(const json_t *o, bool chat, json_t *delta_or_text, json_t *finish, bool usage_null)
{
    json_t *choice = chat ? json_pack("{s:i, s:o, s:o, s:n}", "index", 0, "delta", delta_or_text, "finish_reason",
                                      finish, "logprobs")
                          : json_pack("{s:i, s:o, s:o, s:n}", "index", 0, "text", delta_or_text, "finish_reason",
                                      finish, "logprobs");
    json_t *c = json_pack("{s:O, s:s, s:O, s:O, s:[o]}", "id", json_object_get(o, "id"), "object",
                          chat ? "chat.completion.chunk" : "text_completion", "created", json_object_get(o, "created"),
                          "model", json_object_get(o, "model"), "choices", choice);
    if (c && usage_null)
        json_object_set_new(c, "usage", json_null());
    return c;
}

char *rc_replay_sse(const json_t *o, bool include_usage, size_t *out_len)
{
    *out_len = 0;
    const char *object = json_string_value(json_object_get(o, "object"));
    const bool chat = object && !strcmp(object, "chat.completion");
    json_t *choice = json_array_get(json_object_get(o, "choices"), 0);
    json_t *msg = json_object_get(choice, "message");
    const char *text = json_string_value(chat ? json_object_get(msg, "content") : json_object_get(choice, "text"));
    const char *reasoning = chat ? json_string_value(json_object_get(msg, "reasoning_content")) : NULL;
    json_t *finish = json_object_get(choice, "finish_reason");
    if (!json_object_get(o, "id") || !text || !json_is_string(finish))
        return NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    bool ok = true;
    if (chat) /* the role first, as a generation's stream starts */
        ok = sse_add(&buf, &len, &cap,
                     replay_chunk(o, true, json_pack("{s:s, s:s}", "role", "assistant", "content", ""), json_null(),
                                  include_usage));
    for (int part = 0; part < 2 && ok; part++) {
        const char *t = part ? text : reasoning;
        size_t n = t ? strlen(t) : 0;
        while (ok && n) {
            size_t k = piece_len(t, n);
            json_t *piece = json_stringn(t, k);
            json_t *d = chat ? json_pack("{s:o}", part ? "content" : "reasoning_content", piece) : piece;
            ok = sse_add(&buf, &len, &cap, replay_chunk(o, chat, d, json_null(), include_usage));
            t += k, n -= k;
        }
    }
    if (ok)
        ok = sse_add(&buf, &len, &cap,
                     replay_chunk(o, chat, chat ? json_object() : json_string(""), json_incref(finish), include_usage));
    if (ok && include_usage) {
        json_t *u = json_pack("{s:O, s:s, s:O, s:O, s:[], s:O}", "id", json_object_get(o, "id"), "object",
                              chat ? "chat.completion.chunk" : "text_completion", "created",
                              json_object_get(o, "created"), "model", json_object_get(o, "model"), "choices", "usage",
                              json_object_get(o, "usage"));
        ok = sse_add(&buf, &len, &cap, u);
    }
    if (ok && len + 16 > cap) {
        char *b = realloc(buf, len + 16);
        ok = b != NULL;
        if (b)
            buf = b;
    }
    if (!ok) {
        free(buf);
        return NULL;
    }
    memcpy(buf + len, "data: [DONE]\n\n", 15);
    *out_len = len + 14;
    buf[*out_len] = '\0';
    return buf;
}

/* ------------------------------------------------ lookup and store glue */

void rc_pending_free(struct rc_pending *p)
{
    if (!p)
        return;
    free(p->question);
    free(p->emb);
    p->question = NULL;
    p->emb = NULL;
}

void rc_headers(const struct rc_pending *p, const char **h)
{
    int n = 0;
    h[n++] = "X-Infer-Cache", h[n++] = p->state;
    if (p->sim[0])
        h[n++] = "X-Infer-Cache-Similarity", h[n++] = p->sim;
    if (p->gate[0])
        h[n++] = "X-Infer-Cache-Gate", h[n++] = p->gate;
    if (p->age[0])
        h[n++] = "Age", h[n++] = p->age;
    h[n] = NULL;
}

/* A stored answer as this request's response; counts what it saved. */
static json_t *replay(struct server *srv, struct rc_pending *p, const struct job *j, char *ans, size_t alen,
                      double age)
{
    double saved;
    json_t *o = rc_replay(ans, alen, j->id, j->created, &saved);
    free(ans);
    if (!o)
        return NULL;
    json_t *u = json_object_get(o, "usage");
    json_int_t pt = json_integer_value(json_object_get(u, "prompt_tokens")),
               ct = json_integer_value(json_object_get(u, "completion_tokens"));
    snprintf(p->age, sizeof(p->age), "%lld", (long long)(age > 0 ? age : 0));
    pthread_mutex_lock(&srv->mu);
    srv->metrics.rc_seconds_saved += saved;
    srv->metrics.rc_prompt_tokens_saved += (uint64_t)(pt > 0 ? pt : 0);
    srv->metrics.rc_completion_tokens_saved += (uint64_t)(ct > 0 ? ct : 0);
    pthread_mutex_unlock(&srv->mu);
    return o;
}

json_t *rc_lookup(struct server *srv, struct MHD_Connection *c, const char *body, size_t len, const struct job *j,
                  const char *tenant, struct rc_pending *p)
{
    memset(p, 0, sizeof(*p));
    snprintf(p->tenant, sizeof(p->tenant), "%s", tenant ? tenant : "");
    rc_control_parse(c, body, len, &p->ctl);
    p->have_key = rc_request_key(srv, j, p->key);
    p->sem_bypass = rc_semantic_bucket(srv, j, &p->ctl, p->bucket);
    p->sem = p->sem_bypass == NULL;
    p->state = p->have_key || p->sem ? "miss" : "bypass";
    json_t *o = NULL;
    /* tier 1 */
    if (p->have_key && !p->ctl.no_cache) {
        char *ans;
        size_t alen;
        double age;
        if (infer_respcache_get(srv->rcache, p->key, &ans, &alen, &age) &&
            (o = replay(srv, p, j, ans, alen, age))) {
            p->state = "hit-exact";
            snprintf(p->sim, sizeof(p->sim), "1");
            pthread_mutex_lock(&srv->mu);
            srv->metrics.rc_hits++;
            pthread_mutex_unlock(&srv->mu);
            return o;
        }
    }
    /* tier 2: the normalised last user message, embedded */
    if (p->sem) {
        const char *q = j->req.msgs[j->req.n_msgs - 1].content;
        size_t qn = strlen(q), cap = 4 * qn + 64;
        p->question = malloc(cap);
        p->emb = malloc((size_t)infer_embedder_n_embd(srv->embedder) * sizeof(float));
        if (!p->question || !p->emb) {
            rc_pending_free(p);
            p->sem = false;
        } else {
            if (infer_semgate_normalize(q, qn, p->question, cap) == 0) {
                /* nothing left to compare ("please", "?"): not a question tier 2 can match */
                rc_pending_free(p);
                p->sem = false;
                p->sem_bypass = "empty question";
                if (!p->have_key)
                    p->state = "bypass";
                goto tier2_done;
            }
            const char *texts[1] = {p->question};
            /* one short question: the one-thread handle, beside any batch on the shared one */
            infer_embedder *e = srv->rc_embedder ? srv->rc_embedder : srv->embedder;
            if (!srv->rc_embedder)
                pthread_mutex_lock(&srv->embed_mu);
            double t0 = infer_now_seconds();
            infer_status st = infer_embed(e, texts, NULL, 1, p->emb, NULL);
            double dt = infer_now_seconds() - t0;
            if (!srv->rc_embedder)
                pthread_mutex_unlock(&srv->embed_mu);
            pthread_mutex_lock(&srv->mu);
            srv->metrics.rc_embed_seconds += dt;
            srv->metrics.rc_embeds++;
            pthread_mutex_unlock(&srv->mu);
            if (st != INFER_OK) {
                rc_pending_free(p);
                p->sem = false;
            }
        }
    }
    if (p->sem && !p->ctl.no_cache) {
        float th = srv->rc_threshold;
        if (p->ctl.threshold > th) /* a request may raise it, never lower it */
            th = (float)p->ctl.threshold;
        char *ans;
        size_t alen;
        double age;
        infer_respcache_match m;
        bool hit = infer_respcache_get_similar(srv->rcache, p->bucket, p->emb, p->question, th, &ans, &alen, &age, &m);
        if (m.nearest >= -0.5f) {
            snprintf(p->sim, sizeof(p->sim), "%.4f", (double)(hit ? m.similarity : m.nearest));
            snprintf(p->gate, sizeof(p->gate), "%s", hit || m.nearest_agrees ? "pass" : m.nearest_why);
        }
        pthread_mutex_lock(&srv->mu);
        srv->metrics.rc_search_seconds += m.search_seconds;
        srv->metrics.rc_searches++;
        if (m.nearest >= -0.5f)
            hist_observe(&srv->metrics.rc_similarity, m.nearest);
        pthread_mutex_unlock(&srv->mu);
        if (hit && (o = replay(srv, p, j, ans, alen, age))) {
            p->state = "hit-semantic";
            pthread_mutex_lock(&srv->mu);
            srv->metrics.rc_hits_semantic++;
            pthread_mutex_unlock(&srv->mu);
            return o;
        }
    }
tier2_done:
    pthread_mutex_lock(&srv->mu);
    if (!strcmp(p->state, "bypass"))
        srv->metrics.rc_bypass++;
    else
        srv->metrics.rc_misses++;
    pthread_mutex_unlock(&srv->mu);
    return NULL;
}

void rc_store(struct server *srv, struct rc_pending *p, const struct job *j, const json_t *o)
{
    if (!p->have_key && !p->sem)
        return; /* bypassed: nothing to store */
    const bool complete = j->finish == FINISH_STOP && !j->cancelled && !j->err.status;
    bool stored = false, failed = false;
    if (!p->ctl.no_store && complete && o) {
        char *s = json_dumps(o, JSON_COMPACT);
        uint8_t key[32];
        if (p->have_key) {
            memcpy(key, p->key, 32);
        } else { /* a sampled answer: the semantic tier's own key */
            char k[64 + 1024];
            int n = snprintf(k, sizeof(k), "infer-rc-2-row:%.1000s", p->question ? p->question : "");
            memcpy(k + n, p->bucket, 32);
            infer_sha256(k, (size_t)n + 32, key);
        }
        infer_respcache_sem sem = {p->bucket, p->question, p->emb};
        stored = s && infer_respcache_put(srv->rcache, key, p->tenant, s, strlen(s), p->sem ? &sem : NULL) == INFER_OK;
        failed = !stored;
        if (failed && srv->cfg->verbose)
            fprintf(stderr, "serve: response cache: %s\n", infer_last_error());
        free(s);
    }
    pthread_mutex_lock(&srv->mu);
    if (stored)
        srv->metrics.rc_stores++;
    else if (failed)
        srv->metrics.rc_store_errors++;
    else if (p->ctl.no_store)
        srv->metrics.rc_skip_no_store++;
    else if (j->err.status || j->cancelled)
        srv->metrics.rc_skip_error++;
    else
        srv->metrics.rc_skip_not_stop++;
    pthread_mutex_unlock(&srv->mu);
}
