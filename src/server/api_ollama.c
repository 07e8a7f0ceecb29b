/*
 * api_ollama.c - Ollama's request and response shapes (its docs/api.md),
 * with jansson.
 *
 * POST /api/chat and /api/generate become the same struct gen_request the
 * OpenAI endpoints use, so they run through the same scheduler, sessions and
 * prefix cache (sched.c); only the parsing and the shapes differ.
 *
 *   chat       {"model", "messages", "stream" (default true), "options",
 *              "keep_alive", "think", "format", "tools"}; messages may carry
 *              "tool_calls" ({"function": {"name", "arguments": {...}}})
 *              and role "tool" results ("tool_name")
 *   generate   {"model", "prompt", "system", "raw", "stream", "options",
 *              "keep_alive", "think", "format"}: the prompt is rendered with the
 *              model's chat template as one user turn (after the system
 *              prompt), unless "raw": true sends it as is
 *
 * An empty prompt or message list loads the model (done_reason "load"), or
 * with "keep_alive": 0 unloads it ("unload"), as Ollama does.  "options" are
 * checked by name: the sampler's (temperature, top_k, top_p, min_p,
 * repeat_penalty, repeat_last_n, seed, num_predict, num_ctx, stop) are used;
 * those about the hardware (num_gpu, num_thread, use_mmap, ...) change
 * nothing here and are accepted; sampling methods infer does not have
 * (mirostat, typical_p, presence/frequency penalties) are accepted only at
 * their neutral value; any other name is a 400.  Unknown top-level fields are
 * ignored, as Ollama ignores them; images, templates, suffixes and the
 * deprecated "context" are refused rather than dropped.
 *
 * The responses carry what Ollama clients read: model, created_at,
 * message / response (and thinking), done, done_reason and the durations in
 * nanoseconds, all measured by the scheduler (struct job_stats).
 */
#include "server.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

char *ollama_error_json(const struct api_error *e)
{
    json_t *o = json_pack("{s:s}", "error", e->message);
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

/* ------------------------------------------------------------- requests */

/* `format` ("json" or a JSON schema) holds the answer to it, as OpenAI's
 * response_format does (the same compiler and matcher, api_format.c).
 * `tools` on /api/chat goes through the OpenAI path's checks (api_tools.c):
 * the same definitions, the assistant turns' tool_calls (arguments as an
 * object here) and role "tool" results (with Ollama's tool_name); rendered
 * and parsed as for /v1/chat/completions.  Ollama has no tool_choice, so
 * the server's --tool-choice decides (a tool_choice sent anyway is taken as
 * OpenAI's).  /api/generate has no tools in Ollama: a 400 there. */
static bool ollama_format_tools_hook(enum ollama_api api, json_t *root, struct gen_request *r, struct api_error *e)
{
    json_t *f = api_field(root, "format"), *t = api_field(root, "tools");
    if (f && !(json_is_string(f) && json_string_length(f) == 0)) {
        r->grammar = api_grammar_from_json(f, e, "format");
        if (!r->grammar)
            return false;
    }
    if (api == OLLAMA_CHAT)
        return api_parse_tools(root, r, e);
    if (t && (!json_is_array(t) || json_array_size(t) > 0)) {
        api_error_set(e, 400, "invalid_request_error", "unsupported_parameter", "'tools' needs /api/chat");
        return false;
    }
    return true;
}

/* Options that change nothing in infer (hardware, memory, batching): accepted, ignored. */
static const char *const ignored_options[] = {
    "numa", "num_batch", "num_gpu", "main_gpu", "low_vram", "f16_kv", "logits_all", "vocab_only",
    "use_mmap", "use_mlock", "embedding_only", "num_thread", "num_keep", "penalize_newline",
};

/* Sampling methods infer does not have: only their neutral value is accepted. */
static const struct {
    const char *name;
    double neutral;
} neutral_options[] = {
    {"mirostat", 0}, {"typical_p", 1}, {"tfs_z", 1}, {"presence_penalty", 0}, {"frequency_penalty", 0},
};

/* The sampler's options, and the two the tuning of mirostat needs (harmless without it). */
static const char *const sampler_options[] = {
    "temperature", "top_k", "top_p", "min_p", "repeat_penalty", "repeat_last_n", "seed", "num_predict",
    "num_ctx", "stop", "mirostat_tau", "mirostat_eta",
};

static bool in_list(const char *key, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(key, list[i]))
            return true;
    return false;
}

#define N_OF(a) (sizeof(a) / sizeof((a)[0]))

static bool parse_options(json_t *root, struct gen_request *r, struct api_error *e)
{
    json_t *o = api_field(root, "options");
    if (!o)
        return true;
    if (!json_is_object(o))
        return api_bad(e, "'%s' must be an object", "options");
    const char *key;
    json_t *v;
    json_object_foreach(o, key, v) {
        if (in_list(key, sampler_options, N_OF(sampler_options)) || json_is_null(v))
            continue;
        if (in_list(key, ignored_options, N_OF(ignored_options)))
            continue;
        size_t i = 0;
        while (i < N_OF(neutral_options) && strcmp(key, neutral_options[i].name))
            i++;
        if (i < N_OF(neutral_options)) {
            if (!json_is_number(v) || json_number_value(v) != neutral_options[i].neutral) {
                api_error_set(e, 400, "invalid_request_error", "unsupported_parameter",
                              "option '%.64s' is not supported (only %g, which turns it off)", key,
                              neutral_options[i].neutral);
                return false;
            }
            continue;
        }
        api_error_set(e, 400, "invalid_request_error", "unsupported_parameter", "unknown option '%.64s'", key);
        return false;
    }
    /* Ollama reads JSON numbers as float64 and takes 8192.0 for an integer
     * option (Home Assistant's number fields send such values): an integral
     * real is that integer here, 1.5 is still refused */
    static const char *const int_options[] = {"top_k", "repeat_last_n", "seed", "num_predict", "num_ctx"};
    for (size_t i = 0; i < N_OF(int_options); i++) {
        json_t *x = json_object_get(o, int_options[i]);
        double d = json_is_real(x) ? json_real_value(x) : 0.5;
        if (d == floor(d) && fabs(d) < 9e15)
            json_object_set_new(o, int_options[i], json_integer((json_int_t)d));
    }
    int64_t top_k = r->sp.top_k, seed = 0, num_predict = 0, num_ctx = 0, last_n = r->sp.repeat_last_n;
    float tau = 0, eta = 0;
    if (!api_get_real(o, "temperature", 0, 100, &r->sp.temp, e) ||
        !api_get_int(o, "top_k", 0, INT32_MAX, &top_k, e) || !api_get_real(o, "top_p", 0, 1, &r->sp.top_p, e) ||
        !api_get_real(o, "min_p", 0, 1, &r->sp.min_p, e) ||
        !api_get_real(o, "repeat_penalty", 0.01, 100, &r->sp.repeat_penalty, e) ||
        !api_get_int(o, "repeat_last_n", -1, 65536, &last_n, e) ||
        !api_get_int(o, "seed", INT64_MIN, INT64_MAX, &seed, e) ||
        !api_get_int(o, "num_predict", -2, INT32_MAX, &num_predict, e) ||
        !api_get_int(o, "num_ctx", 1, INT32_MAX, &num_ctx, e) || !api_parse_stop(o, r, e) ||
        !api_get_real(o, "mirostat_tau", -1e9, 1e9, &tau, e) || !api_get_real(o, "mirostat_eta", -1e9, 1e9, &eta, e))
        return false;
    r->sp.top_k = (int)top_k;
    r->sp.repeat_last_n = last_n < 0 ? 4096 : (int)last_n; /* -1: "the context", bounded */
    if (api_field(o, "seed"))
        r->sp.seed = (uint64_t)seed;
    if (num_predict > 0) /* -1 (no limit), -2 (fill the context), 0: the server's limit */
        r->max_tokens = num_predict;
    r->n_ctx_limit = num_ctx;
    return true;
}

static bool parse_keep_alive(json_t *root, struct gen_request *r, struct api_error *e)
{
    json_t *v = api_field(root, "keep_alive");
    if (!v)
        return true;
    double sec;
    if (json_is_number(v)) {
        sec = json_number_value(v);
        if (!isfinite(sec))
            return api_bad(e, "'%s' must be a duration", "keep_alive");
        if (sec < 0)
            sec = -1;
    } else if (!json_is_string(v) || !server_parse_duration(json_string_value(v), &sec)) {
        return api_bad(e, "'%s' must be a number of seconds or a duration such as \"5m\", \"1h30m\", \"0\" or \"-1\"",
                   "keep_alive");
    }
    r->keep_alive_set = true;
    r->keep_alive = sec;
    return true;
}

static bool parse_think(json_t *root, struct gen_request *r, struct api_error *e)
{
    json_t *v = api_field(root, "think");
    if (!v)
        return true;
    if (json_is_boolean(v)) {
        r->think = json_is_true(v);
        return true;
    }
    if (json_is_string(v)) { /* gpt-oss's levels: thinking on, the level is the model's business */
        const char *s = json_string_value(v);
        if (!strcmp(s, "low") || !strcmp(s, "medium") || !strcmp(s, "high")) {
            r->think = 1;
            return true;
        }
    }
    return api_bad(e, "'%s' must be true, false, \"low\", \"medium\" or \"high\"", "think");
}

/* Fields Ollama has that would change the answer and that infer cannot honour. */
static bool refuse_unsupported(json_t *root, struct api_error *e)
{
    static const char *const refused[] = {"template", "suffix", "images", "context"};
    for (size_t i = 0; i < N_OF(refused); i++) {
        json_t *v = api_field(root, refused[i]);
        if (v && !(json_is_string(v) && json_string_length(v) == 0) && !(json_is_array(v) && json_array_size(v) == 0)) {
            api_error_set(e, 400, "invalid_request_error", "unsupported_parameter", "'%s' is not supported",
                          refused[i]);
            return false;
        }
    }
    json_t *v = api_field(root, "logprobs");
    if (v && !json_is_false(v)) {
        api_error_set(e, 400, "invalid_request_error", "unsupported_parameter", "'logprobs' is not supported");
        return false;
    }
    json_t *msgs = api_field(root, "messages");
    size_t i;
    json_array_foreach(json_is_array(msgs) ? msgs : NULL, i, v) {
        json_t *img = json_is_object(v) ? api_field(v, "images") : NULL;
        if (img && (!json_is_array(img) || json_array_size(img) > 0)) {
            api_error_set(e, 400, "invalid_request_error", "unsupported_parameter",
                          "messages[%zu].images: images are not supported", i);
            return false;
        }
    }
    return true;
}

static bool add_msg(struct gen_request *r, const char *role, const char *content)
{
    char *rc = strdup(role), *cc = strdup(content);
    if (!rc || !cc) {
        free(rc);
        free(cc);
        return false;
    }
    r->msgs[r->n_msgs].role = rc;
    r->msgs[r->n_msgs].content = cc;
    r->n_msgs++;
    return true;
}

static bool parse_generate_prompt(json_t *root, struct gen_request *r, struct api_error *e)
{
    char *prompt = NULL, *system = NULL;
    bool raw = false, ok = false;
    if (!api_get_string(root, "prompt", SIZE_MAX, &prompt, e) || !api_get_string(root, "system", SIZE_MAX, &system, e) ||
        !api_get_bool(root, "raw", &raw, e))
        goto out;
    if (!prompt || !*prompt) {
        r->load_only = true;
        ok = true;
        goto out;
    }
    if (raw) { /* as is: no template, no system prompt */
        r->kind = GEN_COMPLETION;
        r->prompt = prompt;
        prompt = NULL;
        ok = true;
        goto out;
    }
    r->kind = GEN_CHAT;
    if (!(r->msgs = calloc(2, sizeof(*r->msgs))) || (system && *system && !add_msg(r, "system", system)) ||
        !add_msg(r, "user", prompt)) {
        api_error_set(e, 500, "server_error", NULL, "out of memory");
        goto out;
    }
    ok = true;
out:
    free(prompt);
    free(system);
    return ok;
}

bool ollama_parse_request(enum ollama_api api, const char *body, size_t len, struct gen_request *r,
                          struct api_error *e)
{
    memset(r, 0, sizeof(*r));
    r->kind = GEN_CHAT;
    r->ollama = api;
    r->max_tokens = -1;
    r->think = -1;
    r->stream = true; /* Ollama streams unless told not to */
    infer_sampler_params_default(&r->sp);
    json_t *root = api_load_object(body, len, e);
    if (!root)
        return false;
    bool ok = false;
    if (!api_get_string(root, "model", 256, &r->model, e))
        goto out;
    if (!r->model || !*r->model) {
        api_bad(e, "%s is required", "model");
        goto out;
    }
    if (!api_get_bool(root, "stream", &r->stream, e) || !parse_keep_alive(root, r, e) || !parse_think(root, r, e) ||
        !parse_options(root, r, e) || !refuse_unsupported(root, e) || !ollama_format_tools_hook(api, root, r, e))
        goto out;
    if (api == OLLAMA_CHAT) {
        json_t *m = api_field(root, "messages");
        if (m && !json_is_array(m)) {
            api_bad(e, "'%s' must be an array", "messages");
            goto out;
        }
        if (!m || json_array_size(m) == 0)
            r->load_only = true;
        else if (!api_parse_messages(root, r, e))
            goto out;
    } else if (!parse_generate_prompt(root, r, e)) {
        goto out;
    }
    if (r->load_only)
        r->stream = false; /* one object, as Ollama answers a load */
    ok = true;
out:
    json_decref(root);
    if (!ok)
        gen_request_free(r);
    return ok;
}

/* ------------------------------------------------------------ responses */

void ollama_time(double t, char buf[40])
{
    time_t sec = (time_t)floor(t);
    long ns = (long)((t - floor(t)) * 1e9);
    if (ns > 999999999)
        ns = 999999999;
    struct tm tm;
    gmtime_r(&sec, &tm);
    size_t n = strftime(buf, 40, "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(buf + n, 40 - n, ".%09ldZ", ns);
}

static double wall_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* {"model", "created_at"} and the text in the endpoint's field. */
static json_t *base(const struct job *j, const char *model, const char *text, size_t len, const char *reasoning,
                    size_t n_reasoning, bool done)
{
    char ts[40];
    ollama_time(wall_now(), ts);
    json_t *o = json_pack("{s:s, s:s}", "model", model, "created_at", ts);
    if (!o)
        return NULL;
    const bool show_thinking = n_reasoning && j->req.think != 0;
    if (j->req.ollama == OLLAMA_CHAT) {
        json_t *m = json_pack("{s:s, s:s%}", "role", "assistant", "content", text, len);
        if (m && show_thinking)
            json_object_set_new(m, "thinking", json_stringn(reasoning, n_reasoning));
        json_object_set_new(o, "message", m);
    } else {
        json_object_set_new(o, "response", json_stringn(text, len));
        if (show_thinking)
            json_object_set_new(o, "thinking", json_stringn(reasoning, n_reasoning));
    }
    json_object_set_new(o, "done", json_boolean(done));
    return o;
}

static json_int_t ns(double ms)
{
    return ms > 0 ? (json_int_t)llround(ms * 1e6) : 0;
}

/* done_reason and the durations (nanoseconds) of a finished job. */
static json_t *add_stats(json_t *o, const struct job *j)
{
    if (!o)
        return NULL;
    const struct job_stats *s = &j->stats;
    const char *reason = j->req.load_only ? (j->req.keep_alive_set && j->req.keep_alive == 0 ? "unload" : "load")
                         : j->finish == FINISH_LENGTH                                        ? "length"
                                                                                             : "stop";
    json_object_set_new(o, "done_reason", json_string(reason));
    double total_ms = j->t_done > j->t_arrival ? (j->t_done - j->t_arrival) * 1e3 : 0;
    json_object_set_new(o, "total_duration", json_integer(ns(total_ms)));
    json_object_set_new(o, "load_duration", json_integer(ns(s->load_ms)));
    if (j->req.load_only)
        return o;
    json_object_set_new(o, "prompt_eval_count", json_integer(s->prompt_tokens));
    json_object_set_new(o, "prompt_eval_duration", json_integer(ns(s->prompt_ms)));
    json_object_set_new(o, "eval_count", json_integer(s->completion_tokens));
    json_object_set_new(o, "eval_duration", json_integer(ns(s->predicted_ms)));
    /* infer's own: how many prompt tokens came from the prefix cache */
    json_object_set_new(o, "prompt_cache_count", json_integer(s->cached_tokens));
    return o;
}

json_t *ollama_chunk(const struct job *j, const char *model, const char *text, size_t len, const char *reasoning,
                     size_t n_reasoning)
{
    return base(j, model, text, len, reasoning, n_reasoning, false);
}

json_t *ollama_final(const struct job *j, const char *model)
{
    return add_stats(base(j, model, "", 0, "", 0, true), j);
}

/* The calls of a finished tools answer into message.tool_calls, with the
 * text around them as content (NULL when the answer is not tool calls). */
static json_t *with_tool_calls(const struct job *j, const char *model, bool done, size_t from)
{
    char *content = NULL, *reasoning = NULL;
    if (from > j->text_len)
        from = j->text_len;
    /* a thinking model: the calls are in the answer; the reasoning goes in
     * "thinking" of the whole response (a stream has sent it already) */
    const size_t answer = api_answer_start(j, done ? &reasoning : NULL);
    if (from < answer)
        from = answer;
    json_t *calls = j->req.ollama == OLLAMA_CHAT && j->text
                        ? api_tools_parse(&j->req, j->text + from, j->text_len - from, &content)
                        : NULL;
    if (!calls) {
        free(reasoning);
        return NULL;
    }
    const char *id = strchr(j->id, '-') ? strchr(j->id, '-') + 1 : j->id;
    json_t *o = base(j, model, content ? content : "", content ? strlen(content) : 0, reasoning ? reasoning : "",
                     reasoning ? strlen(reasoning) : 0, done);
    free(reasoning);
    json_t *m = json_object_get(o, "message");
    if (m)
        json_object_set_new(m, "tool_calls", api_tool_calls_ollama(calls, id));
    free(content);
    json_decref(calls);
    return o;
}

json_t *ollama_tool_calls_chunk(const struct job *j, const char *model, size_t from)
{
    return with_tool_calls(j, model, false, from);
}

json_t *ollama_response(const struct job *j, const char *model)
{
    const char *text = j->text ? j->text : "";
    json_t *tc = with_tool_calls(j, model, true, 0);
    if (tc) /* done_reason "stop", as Ollama answers a call */
        return add_stats(tc, j);
    if (!j->think_open)
        return add_stats(base(j, model, text, j->text_len, "", 0, true), j);
    /* a thinking model: the reasoning goes to "thinking", the answer to content */
    infer_reasoning *r = job_reasoning_new(j);
    const char *pr, *pc;
    size_t nr, nc;
    json_t *o = NULL;
    if (r && infer_reasoning_push(r, text, j->text_len, true, &pr, &nr, &pc, &nc) == INFER_OK)
        o = add_stats(base(j, model, pc, nc, pr, nr, true), j);
    infer_reasoning_free(r);
    return o;
}

/* ------------------------------------------------------- served models */

/* llama.cpp's LLAMA_FTYPE numbers (general.file_type) and their names. */
static const char *ftype_name(int64_t t)
{
    static const char *const names[] = {
        [0] = "F32",     [1] = "F16",     [2] = "Q4_0",    [3] = "Q4_1",   [7] = "Q8_0",     [8] = "Q5_0",
        [9] = "Q5_1",    [10] = "Q2_K",   [11] = "Q3_K_S", [12] = "Q3_K_M", [13] = "Q3_K_L", [14] = "Q4_K_S",
        [15] = "Q4_K_M", [16] = "Q5_K_S", [17] = "Q5_K_M", [18] = "Q6_K",   [19] = "IQ2_XXS", [20] = "IQ2_XS",
        [21] = "Q2_K_S", [22] = "IQ3_XS", [23] = "IQ3_XXS", [24] = "IQ1_S", [25] = "IQ4_NL", [26] = "IQ3_S",
        [27] = "IQ3_M",  [28] = "IQ2_S",  [29] = "IQ2_M",  [30] = "IQ4_XS", [31] = "IQ1_M",  [32] = "BF16",
    };
    return t >= 0 && t < (int64_t)N_OF(names) ? names[t] : NULL;
}

/* Ollama's way of writing a parameter count: "8.0B", "268.10M". */
static void human_count(uint64_t n, char *buf, size_t len)
{
    if (n >= 1000000000ULL)
        snprintf(buf, len, "%.1fB", (double)n / 1e9);
    else if (n >= 1000000ULL)
        snprintf(buf, len, "%.2fM", (double)n / 1e6);
    else
        snprintf(buf, len, "%.2fK", (double)n / 1e3);
}

bool ollama_name_matches(const char *name, const char *id, const char *path)
{
    size_t n = strlen(name);
    if (n > 7 && !strcmp(name + n - 7, ":latest"))
        n -= 7;
    if (strlen(id) == n && !strncmp(name, id, n))
        return true;
    if (!path)
        return false;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t nb = strlen(base);
    if (nb == n && !strncmp(name, base, n))
        return true;
    return nb > 5 && !strcmp(base + nb - 5, ".gguf") && nb - 5 == n && !strncmp(name, base, n); /* without .gguf */
}

bool ollama_model_init(struct ollama_model *m, const char *path, const char *id, bool embedding)
{
    memset(m, 0, sizeof(*m));
    m->path = path;
    m->embedding = embedding;
    snprintf(m->name, sizeof(m->name), strchr(id, ':') ? "%s" : "%s:latest", id);
    struct stat st;
    if (stat(path, &st) == 0)
        m->size = (int64_t)st.st_size, m->mtime = (int64_t)st.st_mtime;
    infer_gguf *g;
    if (infer_gguf_open(&g, path, INFER_GGUF_OPEN_SMALL_PAGES) != INFER_OK) {
        /* the engine's load reports it (and /health says "failed"): list the file as it is */
        snprintf(m->family, sizeof(m->family), "unknown");
        snprintf(m->quantization_level, sizeof(m->quantization_level), "unknown");
        m->model_info = json_object();
        return m->model_info != NULL;
    }
    const char *arch = infer_gguf_get_str(g, "general.architecture", "unknown");
    snprintf(m->family, sizeof(m->family), "%s", arch);
    char key[128];
    snprintf(key, sizeof(key), "%s.context_length", arch);
    m->context_length = infer_gguf_get_int(g, key, 0);
    /* parameters: the elements of every tensor; the quantization: the file
     * type, else the type holding the most bytes */
    uint64_t n_params = 0, best_bytes = 0;
    const char *best_type = "unknown";
    struct {
        const char *name;
        uint64_t bytes;
    } by_type[48] = {{0}};
    for (int64_t i = 0; i < infer_gguf_n_tensors(g); i++) {
        infer_tensor_info t;
        if (infer_gguf_tensor(g, i, &t) != INFER_OK)
            continue;
        uint64_t ne = 1;
        for (uint32_t d = 0; d < t.n_dims; d++)
            ne *= (uint64_t)t.ne[d];
        n_params += ne;
        if (t.type < N_OF(by_type)) {
            by_type[t.type].name = t.type_name;
            by_type[t.type].bytes += t.nbytes;
            if (by_type[t.type].bytes > best_bytes)
                best_bytes = by_type[t.type].bytes, best_type = t.type_name;
        }
    }
    human_count(n_params, m->parameter_size, sizeof(m->parameter_size));
    const char *ft = ftype_name(infer_gguf_get_int(g, "general.file_type", -1));
    snprintf(m->quantization_level, sizeof(m->quantization_level), "%s", ft ? ft : best_type);
    const char *tmpl = infer_gguf_get_str(g, "tokenizer.chat_template", NULL);
    m->template_text = tmpl ? strdup(tmpl) : NULL;
    const char *open, *close;
    m->thinking = !embedding && infer_chat_reasoning_markers(g, &open, &close);
    /* /api/show's model_info: the scalar metadata (arrays such as the
     * vocabulary are left out, as Ollama leaves them out unless verbose) */
    m->model_info = json_object();
    for (int64_t i = 0; m->model_info && i < infer_gguf_n_kv(g); i++) {
        const char *k = infer_gguf_kv_key(g, i);
        json_t *v = NULL;
        switch (infer_gguf_kv_type(g, i)) {
        case INFER_GGUF_FLOAT32:
        case INFER_GGUF_FLOAT64: v = json_real(infer_gguf_get_float(g, k, 0)); break;
        case INFER_GGUF_BOOL: v = json_boolean(infer_gguf_get_bool(g, k, false)); break;
        case INFER_GGUF_STRING:
            if (strcmp(k, "tokenizer.chat_template"))
                v = json_string(infer_gguf_get_str(g, k, ""));
            break;
        case INFER_GGUF_ARRAY: break;
        default: v = json_integer(infer_gguf_get_int(g, k, 0)); break;
        }
        if (v)
            json_object_set_new(m->model_info, k, v);
    }
    if (m->model_info && !json_object_get(m->model_info, "general.parameter_count"))
        json_object_set_new(m->model_info, "general.parameter_count", json_integer((json_int_t)n_params));
    infer_gguf_close(g);
    return true;
}

void ollama_model_free(struct ollama_model *m)
{
    free(m->template_text);
    json_decref(m->model_info);
    memset(m, 0, sizeof(*m));
}

json_t *ollama_details(const struct ollama_model *m)
{
    return json_pack("{s:s, s:s, s:s, s:[s], s:s, s:s}", "parent_model", "", "format", "gguf", "family", m->family,
                     "families", m->family, "parameter_size", m->parameter_size, "quantization_level",
                     m->quantization_level);
}

json_t *ollama_show(const struct ollama_model *m)
{
    char mtime[40];
    ollama_time((double)m->mtime, mtime);
    size_t n = strlen(m->path) + 64;
    char *modelfile = malloc(n);
    if (!modelfile)
        return NULL;
    snprintf(modelfile, n, "# served by infer from a local GGUF file\nFROM %s\n", m->path);
    json_t *caps = json_array();
    json_array_append_new(caps, json_string(m->embedding ? "embedding" : "completion"));
    if (!m->embedding) /* every family: its own tool format or the generic one (api_tools.c) */
        json_array_append_new(caps, json_string("tools"));
    if (m->thinking)
        json_array_append_new(caps, json_string("thinking"));
    json_t *o = json_pack("{s:s, s:s, s:s, s:s, s:o, s:O, s:o, s:s}", "license", "", "modelfile", modelfile,
                          "parameters", "", "template", m->template_text ? m->template_text : "", "details",
                          ollama_details(m), "model_info", m->model_info, "capabilities", caps, "modified_at", mtime);
    free(modelfile);
    return o;
}

char *ollama_request_model(const char *body, size_t len, struct api_error *e)
{
    json_t *root = api_load_object(body, len, e);
    if (!root)
        return NULL;
    char *name = NULL;
    if (api_get_string(root, "model", 256, &name, e) && !name &&
               api_get_string(root, "name", 256, &name, e) && !name) {
        api_bad(e, "%s is required", "model");
    } else if (name && !*name) {
        free(name);
        name = NULL;
        api_bad(e, "%s is required", "model");
    }
    json_decref(root);
    return name;
}
