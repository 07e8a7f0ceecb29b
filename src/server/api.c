/*
 * api.c - the OpenAI request and response shapes, with jansson.
 *
 * api_parse_request() turns the body of POST /v1/chat/completions or
 * /v1/completions into a struct gen_request, checking every field's type and
 * range: the body is hostile until proven otherwise.  JSON that jansson
 * rejects (broken syntax, invalid UTF-8, \u0000, nesting deeper than
 * JSON_PARSER_MAX_DEPTH, integers beyond int64, reals beyond double) is a 400
 * with jansson's message.  Fields set to null count as absent; unknown
 * fields are ignored, as OpenAI's and llama-server's are, except those asking
 * for something this server cannot do (n > 1, logprobs, functions, a schema
 * keyword the grammar compiler lacks), which are refused rather than
 * silently dropped.  response_format is api_format.c's, tools api_tools.c's.
 *
 * The builders below make the response objects (chat.completion,
 * text_completion, their streamed chunks, usage, timings) from a finished or
 * running job.
 */
#include "server.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_MESSAGES 4096

void api_error_set(struct api_error *e, int status, const char *type, const char *code, const char *fmt, ...)
{
    e->status = status;
    e->type = type;
    e->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof(e->message), fmt, ap);
    va_end(ap);
}

char *api_error_json(const struct api_error *e)
{
    json_t *o = json_pack("{s:{s:s, s:s, s:o, s:n}}", "error", "message", e->message, "type",
                          e->type ? e->type : "invalid_request_error", "code",
                          e->code ? json_string(e->code) : json_null(), "param");
    char *s = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    return s;
}

static bool bad(struct api_error *e, const char *fmt, const char *key)
{
    api_error_set(e, 400, "invalid_request_error", "invalid_value", fmt, key);
    return false;
}

/* Field accessors: absent or null leaves *out alone and succeeds. */

static json_t *field(json_t *root, const char *key)
{
    json_t *v = json_object_get(root, key);
    return v && !json_is_null(v) ? v : NULL;
}

static bool get_real(json_t *root, const char *key, double lo, double hi, float *out, struct api_error *e)
{
    json_t *v = field(root, key);
    if (!v)
        return true;
    if (!json_is_number(v))
        return bad(e, "'%s' must be a number", key);
    double d = json_number_value(v);
    if (!isfinite(d) || d < lo || d > hi) {
        api_error_set(e, 400, "invalid_request_error", "invalid_value", "'%s' must be between %g and %g", key, lo,
                      hi);
        return false;
    }
    *out = (float)d;
    return true;
}

static bool get_int(json_t *root, const char *key, int64_t lo, int64_t hi, int64_t *out, struct api_error *e)
{
    json_t *v = field(root, key);
    if (!v)
        return true;
    if (!json_is_integer(v))
        return bad(e, "'%s' must be an integer", key);
    json_int_t i = json_integer_value(v);
    if (i < lo || i > hi) {
        api_error_set(e, 400, "invalid_request_error", "invalid_value", "'%s' must be between %lld and %lld", key,
                      (long long)lo, (long long)hi);
        return false;
    }
    *out = i;
    return true;
}

static bool get_bool(json_t *root, const char *key, bool *out, struct api_error *e)
{
    json_t *v = field(root, key);
    if (!v)
        return true;
    if (!json_is_boolean(v))
        return bad(e, "'%s' must be a boolean", key);
    *out = json_is_true(v);
    return true;
}

/* A string of at most max_len bytes, copied. */
static bool get_string(json_t *root, const char *key, size_t max_len, char **out, struct api_error *e)
{
    json_t *v = field(root, key);
    if (!v)
        return true;
    if (!json_is_string(v))
        return bad(e, "'%s' must be a string", key);
    if (json_string_length(v) > max_len) {
        api_error_set(e, 400, "invalid_request_error", "invalid_value", "'%s' is longer than %zu bytes", key,
                      max_len);
        return false;
    }
    *out = strdup(json_string_value(v));
    if (!*out) {
        api_error_set(e, 500, "server_error", NULL, "out of memory");
        return false;
    }
    return true;
}

/* Message content: a string, or an array of {"type": "text", "text": ...}
 * parts joined.  Returns a malloc'ed string or NULL with e set. */
static char *message_content(json_t *c, size_t idx, struct api_error *e)
{
    if (json_is_string(c))
        return strdup(json_string_value(c));
    if (!json_is_array(c)) {
        api_error_set(e, 400, "invalid_request_error", "invalid_type",
                      "messages[%zu].content must be a string or an array of text parts", idx);
        return NULL;
    }
    size_t total = 0, i;
    json_t *part;
    json_array_foreach(c, i, part) {
        json_t *type = json_object_get(part, "type"), *text = json_object_get(part, "text");
        if (!json_is_object(part) || !json_is_string(type) || strcmp(json_string_value(type), "text") ||
            !json_is_string(text)) {
            api_error_set(e, 400, "invalid_request_error", "invalid_type",
                          "messages[%zu].content[%zu] must be {\"type\": \"text\", \"text\": string} (only text "
                          "parts are supported)",
                          idx, i);
            return NULL;
        }
        total += json_string_length(text);
    }
    char *s = malloc(total + 1), *p = s;
    if (!s) {
        api_error_set(e, 500, "server_error", NULL, "out of memory");
        return NULL;
    }
    json_array_foreach(c, i, part) {
        json_t *text = json_object_get(part, "text");
        memcpy(p, json_string_value(text), json_string_length(text));
        p += json_string_length(text);
    }
    *p = '\0';
    return s;
}

static bool parse_messages(json_t *root, struct gen_request *r, struct api_error *e)
{
    json_t *msgs = field(root, "messages");
    if (!msgs)
        return bad(e, "'%s' is required", "messages");
    if (!json_is_array(msgs) || json_array_size(msgs) == 0)
        return bad(e, "'%s' must be a non-empty array", "messages");
    if (json_array_size(msgs) > MAX_MESSAGES) {
        api_error_set(e, 400, "invalid_request_error", "invalid_value", "more than %d messages", MAX_MESSAGES);
        return false;
    }
    r->msgs = calloc(json_array_size(msgs), sizeof(*r->msgs));
    if (!r->msgs) {
        api_error_set(e, 500, "server_error", NULL, "out of memory");
        return false;
    }
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        if (!json_is_object(m)) {
            api_error_set(e, 400, "invalid_request_error", "invalid_type", "messages[%zu] must be an object", i);
            return false;
        }
        json_t *role = json_object_get(m, "role"), *content = json_object_get(m, "content");
        if (!json_is_string(role)) {
            api_error_set(e, 400, "invalid_request_error", "invalid_type", "messages[%zu].role must be a string",
                          i);
            return false;
        }
        const char *rs = json_string_value(role);
        const char *canon = !strcmp(rs, "developer") ? "system"
                            : !strcmp(rs, "system") || !strcmp(rs, "user") || !strcmp(rs, "assistant") ||
                                    !strcmp(rs, "tool")
                                ? rs
                                : NULL;
        if (!canon) {
            api_error_set(e, 400, "invalid_request_error", "invalid_value",
                          "messages[%zu].role must be system, developer, user, assistant or tool", i);
            return false;
        }
        json_t *calls = json_object_get(m, "tool_calls"), *empty = NULL;
        if ((!content || json_is_null(content)) && !strcmp(canon, "assistant") && json_is_array(calls) &&
            json_array_size(calls) > 0)
            content = empty = json_string(""); /* a tool call without text */
        else if ((!content || json_is_null(content)) && r->ollama)
            content = empty = json_string(""); /* Ollama's clients leave out an empty content */
        if (!content || json_is_null(content)) {
            api_error_set(e, 400, "invalid_request_error", "invalid_value", "messages[%zu].content is required",
                          i);
            return false;
        }
        char *text = message_content(content, i, e);
        json_decref(empty);
        char *role_copy = strdup(canon);
        if (!text || !role_copy) {
            if (text && !role_copy)
                api_error_set(e, 500, "server_error", NULL, "out of memory");
            free(text);
            free(role_copy);
            return false;
        }
        r->msgs[i].role = role_copy;
        r->msgs[i].content = text;
        r->n_msgs = i + 1;
    }
    return true;
}

static bool parse_prompt(json_t *root, struct gen_request *r, struct api_error *e)
{
    json_t *p = field(root, "prompt");
    if (!p)
        return bad(e, "'%s' is required", "prompt");
    if (json_is_array(p) && json_array_size(p) == 1 && json_is_string(json_array_get(p, 0)))
        p = json_array_get(p, 0);
    if (json_is_string(p)) {
        r->prompt = strdup(json_string_value(p));
        if (!r->prompt) {
            api_error_set(e, 500, "server_error", NULL, "out of memory");
            return false;
        }
        return true;
    }
    if (!json_is_array(p) || json_array_size(p) == 0)
        return bad(e, "'%s' must be a string, an array of one string or a non-empty array of token ids",
                   "prompt");
    size_t n = json_array_size(p), i;
    json_t *v;
    r->prompt_ids = malloc(n * sizeof(int32_t));
    if (!r->prompt_ids) {
        api_error_set(e, 500, "server_error", NULL, "out of memory");
        return false;
    }
    json_array_foreach(p, i, v) {
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > INT32_MAX) {
            api_error_set(e, 400, "invalid_request_error", "invalid_value",
                          "prompt[%zu] must be a token id (several prompts in one request are not supported)", i);
            return false;
        }
        r->prompt_ids[i] = (int32_t)json_integer_value(v);
    }
    r->n_prompt_ids = n;
    return true;
}

static bool parse_stop(json_t *root, struct gen_request *r, struct api_error *e)
{
    json_t *s = field(root, "stop");
    if (!s)
        return true;
    json_t *one[1] = {s};
    json_t **items = one;
    size_t n = 1;
    if (json_is_array(s)) {
        n = json_array_size(s);
        if (n > GEN_MAX_STOP) {
            api_error_set(e, 400, "invalid_request_error", "invalid_value", "'stop' has more than %d sequences",
                          GEN_MAX_STOP);
            return false;
        }
        items = NULL;
    } else if (!json_is_string(s)) {
        return bad(e, "'%s' must be a string or an array of strings", "stop");
    }
    for (size_t i = 0; i < n; i++) {
        json_t *v = items ? items[i] : json_array_get(s, i);
        if (!json_is_string(v))
            return bad(e, "'%s' must be a string or an array of strings", "stop");
        if (json_string_length(v) > GEN_MAX_STOP_LEN) {
            api_error_set(e, 400, "invalid_request_error", "invalid_value", "a stop sequence is longer than %d bytes",
                          GEN_MAX_STOP_LEN);
            return false;
        }
        if (json_string_length(v) == 0)
            continue;
        if (!(r->stop[r->n_stop] = strdup(json_string_value(v)))) {
            api_error_set(e, 500, "server_error", NULL, "out of memory");
            return false;
        }
        r->n_stop++;
    }
    return true;
}

/* llama-server's chat_template_kwargs: of the template's variables only
 * enable_thinking means something to infer's renderer (Qwen3's switch, see
 * gen_no_think); the others are ignored, as a template that does not name
 * them ignores them. */
static bool parse_template_kwargs(json_t *root, struct gen_request *r, struct api_error *e)
{
    json_t *kw = field(root, "chat_template_kwargs"), *v;
    if (!kw)
        return true;
    if (!json_is_object(kw))
        return bad(e, "'%s' must be an object", "chat_template_kwargs");
    if (!(v = field(kw, "enable_thinking")))
        return true;
    if (!json_is_boolean(v))
        return bad(e, "'%s' must be a boolean", "chat_template_kwargs.enable_thinking");
    r->think = json_is_true(v); /* true on a model without reasoning: nothing to do (as llama-server) */
    return true;
}

/* Features this server does not have: refuse rather than ignore; then
 * response_format and tools. */
static bool refuse_unsupported(json_t *root, struct gen_request *r, struct api_error *e)
{
    json_t *v;
    int64_t n = 1;
    if (!get_int(root, "n", 1, 1, &n, e)) {
        api_error_set(e, 400, "invalid_request_error", "unsupported_value", "only 'n': 1 is supported");
        return false;
    }
    if ((v = field(root, "logprobs")) && !json_is_false(v)) {
        api_error_set(e, 400, "invalid_request_error", "unsupported_parameter", "'logprobs' is not supported");
        return false;
    }
    if (!api_parse_response_format(root, r, e))
        return false;
    if (r->kind == GEN_CHAT)
        return api_parse_tools(root, r, e);
    if ((v = field(root, "tools")) && (!json_is_array(v) || json_array_size(v) > 0)) {
        api_error_set(e, 400, "invalid_request_error", "unsupported_parameter",
                      "'tools' needs /v1/chat/completions");
        return false;
    }
    return true;
}

json_t *api_load_object(const char *body, size_t len, struct api_error *e)
{
    json_error_t jerr;
    json_t *root = json_loadb(body, len, 0, &jerr);
    if (!root) {
        api_error_set(e, 400, "invalid_request_error", "invalid_json",
                      "the request body is not valid JSON: %s (at byte %d)", jerr.text, jerr.position);
        return NULL;
    }
    if (!json_is_object(root)) {
        api_error_set(e, 400, "invalid_request_error", "invalid_json", "the request body must be a JSON object");
        json_decref(root);
        return NULL;
    }
    return root;
}

bool api_parse_request(enum gen_kind kind, const char *body, size_t len, struct gen_request *r,
                       struct api_error *e)
{
    memset(r, 0, sizeof(*r));
    r->kind = kind;
    r->max_tokens = -1;
    r->think = -1;
    infer_sampler_params_default(&r->sp);
    json_t *root = api_load_object(body, len, e);
    if (!root)
        return false;
    bool ok = false;
    int64_t max_tokens = -1, top_k = r->sp.top_k, seed = -1;
    bool have_seed = field(root, "seed") != NULL;
    json_t *so;
    if (!get_string(root, "model", 256, &r->model, e) ||
        !(kind == GEN_CHAT ? parse_messages(root, r, e) : parse_prompt(root, r, e)) ||
        !get_int(root, "max_tokens", 1, INT32_MAX, &max_tokens, e) ||
        !get_int(root, "max_completion_tokens", 1, INT32_MAX, &max_tokens, e) ||
        !get_real(root, "temperature", 0, 2, &r->sp.temp, e) || !get_real(root, "top_p", 0, 1, &r->sp.top_p, e) ||
        !get_int(root, "top_k", 0, INT32_MAX, &top_k, e) || !get_real(root, "min_p", 0, 1, &r->sp.min_p, e) ||
        !get_int(root, "seed", INT64_MIN, INT64_MAX, &seed, e) || !parse_stop(root, r, e) ||
        !get_bool(root, "stream", &r->stream, e) ||
        !get_string(root, "cache_salt", GEN_MAX_SALT_LEN, &r->cache_salt, e) ||
        !(kind == GEN_CHAT ? parse_template_kwargs(root, r, e) : true) || !refuse_unsupported(root, r, e))
        goto out;
    if ((so = field(root, "stream_options"))) {
        if (!json_is_object(so)) {
            bad(e, "'%s' must be an object", "stream_options");
            goto out;
        }
        if (!get_bool(so, "include_usage", &r->include_usage, e))
            goto out;
    }
    r->max_tokens = max_tokens;
    r->sp.top_k = (int)top_k;
    if (have_seed) /* -1 (llama-server's "random") maps to INFER_SEED_RANDOM */
        r->sp.seed = (uint64_t)seed;
    ok = true;
out:
    json_decref(root);
    if (!ok)
        gen_request_free(r);
    return ok;
}

void gen_request_free(struct gen_request *r)
{
    free(r->model);
    for (size_t i = 0; i < r->n_msgs; i++) {
        free((char *)r->msgs[i].role);
        free((char *)r->msgs[i].content);
    }
    free(r->msgs);
    free(r->prompt);
    free(r->prompt_ids);
    for (int i = 0; i < r->n_stop; i++)
        free(r->stop[i]);
    free(r->cache_salt);
    infer_grammar_free(r->grammar);
    free(r->format_key);
    json_decref(r->tools);
    json_decref(r->raw_msgs);
    free(r->tool_name);
    memset(r, 0, sizeof(*r));
}

/* ------------------------------------------------------------ responses */

const char *finish_reason_name(enum finish_reason f)
{
    switch (f) {
    case FINISH_STOP: return "stop";
    case FINISH_LENGTH: return "length";
    case FINISH_ERROR: return "error";
    case FINISH_TOOL_CALLS: return "tool_calls";
    default: return NULL;
    }
}

json_t *api_usage(const struct job_stats *s)
{
    return json_pack("{s:I, s:I, s:I, s:{s:I}}", "prompt_tokens", (json_int_t)s->prompt_tokens,
                     "completion_tokens", (json_int_t)s->completion_tokens, "total_tokens",
                     (json_int_t)(s->prompt_tokens + s->completion_tokens), "prompt_tokens_details",
                     "cached_tokens", (json_int_t)s->cached_tokens);
}

const char *path_model_name(int model)
{
    static const char *n[] = {"warm", "load", "reload"};
    return model >= 0 && model < PATH_MODEL_N ? n[model] : "?";
}

const char *path_prefix_name(int prefix)
{
    static const char *n[] = {"miss", "ram", "disk"};
    return prefix >= 0 && prefix < PATH_PREFIX_N ? n[prefix] : "?";
}

int api_path_prefix(const struct job_stats *s)
{
    return s->disk_tokens > 0 ? PATH_PREFIX_DISK : s->cached_tokens > 0 ? PATH_PREFIX_RAM : PATH_PREFIX_MISS;
}

const char *api_path_header(const struct job_stats *s, char *buf, size_t n)
{
    snprintf(buf, n, "class=%s+%s; model=%s; ram=%lld; disk=%lld; computed=%lld; coalesced=%lld",
             path_model_name(s->path_model), path_prefix_name(api_path_prefix(s)), path_model_name(s->path_model),
             (long long)(s->cached_tokens - s->disk_tokens), (long long)s->disk_tokens,
             (long long)(s->prompt_tokens - s->cached_tokens), (long long)s->coalesced_tokens);
    return buf;
}

/* llama-server's timings object, and the request's path (the layers it hit). */
json_t *api_timings(const struct job_stats *s)
{
    int64_t prompt_n = s->prompt_tokens - s->cached_tokens;
    json_t *t = json_pack("{s:I, s:I, s:f, s:f, s:I, s:f, s:f}", "cache_n", (json_int_t)s->cached_tokens, "prompt_n",
                          (json_int_t)prompt_n, "prompt_ms", s->prompt_ms, "prompt_per_second",
                          s->prompt_ms > 0 ? (double)prompt_n * 1e3 / s->prompt_ms : 0.0, "predicted_n",
                          (json_int_t)s->completion_tokens, "predicted_ms", s->predicted_ms, "predicted_per_second",
                          s->predicted_ms > 0 ? (double)s->completion_tokens * 1e3 / s->predicted_ms : 0.0);
    char cls[32];
    snprintf(cls, sizeof(cls), "%s+%s", path_model_name(s->path_model), path_prefix_name(api_path_prefix(s)));
    json_t *path = json_pack("{s:s, s:s, s:f, s:I, s:I, s:I, s:f}", "class", cls, "model",
                             path_model_name(s->path_model), "load_ms", s->load_ms, "prefix_ram_tokens",
                             (json_int_t)(s->cached_tokens - s->disk_tokens), "prefix_disk_tokens",
                             (json_int_t)s->disk_tokens, "computed_tokens", (json_int_t)prompt_n, "ttft_ms",
                             s->ttft_ms);
    if (path) /* of prefix_ram_tokens: attached from a concurrent request's prefill of the same prefix */
        json_object_set_new(path, "prefix_coalesced_tokens", json_integer(s->coalesced_tokens));
    if (t && path)
        json_object_set_new(t, "path", path);
    else
        json_decref(path);
    return t;
}

static json_t *finish_json(enum finish_reason f)
{
    const char *n = finish_reason_name(f);
    return n ? json_string(n) : json_null();
}

infer_reasoning *job_reasoning_new(const struct job *j)
{
    if (j->think_closed)
        return infer_reasoning_new_closed(j->think_open, j->think_close);
    return infer_reasoning_new(j->think_open, j->think_close, j->think_forced);
}

/* The assistant message of a finished chat job: a thinking model's
 * reasoning goes into reasoning_content (when there is any), the rest into
 * content, as llama.cpp's server does. */
static json_t *chat_message(const struct job *j)
{
    const char *text = j->text ? j->text : "";
    if (!j->think_open)
        return json_pack("{s:s, s:s%}", "role", "assistant", "content", text, j->text_len);
    infer_reasoning *r = job_reasoning_new(j);
    const char *pr, *pc;
    size_t nr, nc;
    if (!r || infer_reasoning_push(r, text, j->text_len, true, &pr, &nr, &pc, &nc) != INFER_OK) {
        infer_reasoning_free(r);
        return NULL;
    }
    json_t *m = json_pack("{s:s, s:s%}", "role", "assistant", "content", pc, nc);
    if (m && nr)
        json_object_set_new(m, "reasoning_content", json_stringn(pr, nr));
    infer_reasoning_free(r);
    return m;
}

size_t api_answer_start(const struct job *j, char **reasoning)
{
    if (reasoning)
        *reasoning = NULL;
    if (!j->think_open || !j->text)
        return 0;
    infer_reasoning *r = job_reasoning_new(j);
    const char *pr, *pc;
    size_t nr, nc, start = 0;
    /* the answer is always a suffix of the text (verbatim after the
     * closing marker and its whitespace, or all of it) */
    if (r && infer_reasoning_push(r, j->text, j->text_len, true, &pr, &nr, &pc, &nc) == INFER_OK) {
        start = j->text_len - nc;
        if (reasoning && nr && (*reasoning = malloc(nr + 1))) {
            memcpy(*reasoning, pr, nr);
            (*reasoning)[nr] = '\0';
        }
    }
    infer_reasoning_free(r);
    return start;
}

/* The assistant message when the answer is tool calls (NULL otherwise); a
 * thinking model's reasoning before them is reasoning_content. */
static json_t *tool_call_message(const struct job *j)
{
    char *content = NULL, *reasoning = NULL;
    const size_t from = api_answer_start(j, &reasoning);
    json_t *calls = api_tools_parse(&j->req, j->text + from, j->text_len - from, &content);
    if (!calls) {
        free(reasoning);
        return NULL;
    }
    const char *id = strchr(j->id, '-') ? strchr(j->id, '-') + 1 : j->id;
    json_t *m = json_pack("{s:s, s:o, s:o}", "role", "assistant", "content",
                          content ? json_string(content) : json_null(), "tool_calls",
                          api_tool_calls_openai(calls, id, false));
    if (m && reasoning)
        json_object_set_new(m, "reasoning_content", json_string(reasoning));
    free(content);
    free(reasoning);
    json_decref(calls);
    return m;
}

json_t *api_response(const struct job *j, const char *model_id)
{
    json_t *choice, *tm;
    if (j->req.kind == GEN_CHAT && (tm = tool_call_message(j)))
        choice = json_pack("{s:i, s:o, s:s, s:n}", "index", 0, "message", tm, "finish_reason", "tool_calls",
                           "logprobs");
    else if (j->req.kind == GEN_CHAT)
        choice = json_pack("{s:i, s:o, s:o, s:n}", "index", 0, "message", chat_message(j), "finish_reason",
                           finish_json(j->finish), "logprobs");
    else
        choice = json_pack("{s:i, s:s%, s:o, s:n}", "index", 0, "text", j->text ? j->text : "", j->text_len,
                           "finish_reason", finish_json(j->finish), "logprobs");
    return json_pack("{s:s, s:s, s:I, s:s, s:[o], s:o, s:o}", "id", j->id, "object",
                     j->req.kind == GEN_CHAT ? "chat.completion" : "text_completion", "created",
                     (json_int_t)j->created, "model", model_id, "choices", choice, "usage", api_usage(&j->stats),
                     "timings", api_timings(&j->stats));
}

json_t *api_chunk(const struct job *j, const char *model_id, const char *text, size_t len, const char *reasoning,
                  size_t n_reasoning, bool first, enum finish_reason finish)
{
    json_t *choice;
    if (j->req.kind == GEN_CHAT) {
        json_t *delta = json_object();
        if (first)
            json_object_set_new(delta, "role", json_string("assistant"));
        if (n_reasoning)
            json_object_set_new(delta, "reasoning_content", json_stringn(reasoning, n_reasoning));
        if (len || (first && finish == FINISH_NONE))
            json_object_set_new(delta, "content", json_stringn(text, len));
        choice = json_pack("{s:i, s:o, s:o, s:n}", "index", 0, "delta", delta, "finish_reason", finish_json(finish),
                           "logprobs");
    } else {
        choice = json_pack("{s:i, s:s%, s:o, s:n}", "index", 0, "text", text, len, "finish_reason",
                           finish_json(finish), "logprobs");
    }
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:[o]}", "id", j->id, "object",
                          j->req.kind == GEN_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                          (json_int_t)j->created, "model", model_id, "choices", choice);
    if (o && j->req.include_usage)
        json_object_set_new(o, "usage", json_null());
    if (o && finish != FINISH_NONE)
        json_object_set_new(o, "timings", api_timings(&j->stats));
    return o;
}

json_t *api_tool_calls_chunk(const struct job *j, const char *model_id, size_t from)
{
    char *content = NULL;
    if (from > j->text_len)
        from = j->text_len;
    const size_t answer = api_answer_start(j, NULL); /* (the reasoning went out as reasoning_content) */
    if (from < answer)
        from = answer;
    json_t *calls = j->req.kind == GEN_CHAT && j->text
                        ? api_tools_parse(&j->req, j->text + from, j->text_len - from, &content)
                        : NULL;
    if (!calls)
        return NULL;
    const char *id = strchr(j->id, '-') ? strchr(j->id, '-') + 1 : j->id;
    json_t *delta = json_pack("{s:o}", "tool_calls", api_tool_calls_openai(calls, id, true));
    if (delta && content)
        json_object_set_new(delta, "content", json_string(content));
    free(content);
    json_decref(calls);
    json_t *o = json_pack("{s:s, s:s, s:I, s:s, s:[{s:i, s:o, s:n, s:n}]}", "id", j->id, "object",
                          "chat.completion.chunk", "created", (json_int_t)j->created, "model", model_id, "choices",
                          "index", 0, "delta", delta, "finish_reason", "logprobs");
    if (o && j->req.include_usage)
        json_object_set_new(o, "usage", json_null());
    return o;
}

json_t *api_usage_chunk(const struct job *j, const char *model_id)
{
    return json_pack("{s:s, s:s, s:I, s:s, s:[], s:o}", "id", j->id, "object",
                     j->req.kind == GEN_CHAT ? "chat.completion.chunk" : "text_completion", "created",
                     (json_int_t)j->created, "model", model_id, "choices", "usage", api_usage(&j->stats));
}

/* ---------------------------------------------------------- durations */

bool server_parse_duration(const char *s, double *seconds)
{
    char *end;
    if (!s || !*s)
        return false;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || !isfinite(v))
        return false;
    if (!*end) { /* a bare number: seconds; negative: forever */
        *seconds = v < 0 ? -1 : v;
        return true;
    }
    /* a Go duration; a negative one ("-1m") means forever, as in ollama */
    double total = 0;
    const char *p = s;
    bool negative = false;
    if (*p == '-' || *p == '+')
        negative = *p++ == '-';
    while (*p) {
        errno = 0;
        double x = strtod(p, &end);
        if (errno || end == p || x < 0 || !isfinite(x) || *p == '-' || *p == '+')
            return false;
        p = end;
        double unit;
        if (!strncmp(p, "ms", 2)) unit = 1e-3, p += 2;
        else if (!strncmp(p, "us", 2)) unit = 1e-6, p += 2;
        else if (!strncmp(p, "ns", 2)) unit = 1e-9, p += 2;
        else if (*p == 's') unit = 1, p++;
        else if (*p == 'm') unit = 60, p++;
        else if (*p == 'h') unit = 3600, p++;
        else return false;
        total += x * unit;
    }
    *seconds = negative ? -1 : total;
    return true;
}

/* ------------------------------------------- shared with api_ollama.c */

/* The same checks on another object (ollama's "options", its messages):
 * one parser for the fields whose meaning the two APIs share. */
json_t *api_field(json_t *o, const char *key)
{
    return field(o, key);
}

bool api_bad(struct api_error *e, const char *fmt, const char *key)
{
    return bad(e, fmt, key);
}

bool api_get_real(json_t *o, const char *key, double lo, double hi, float *out, struct api_error *e)
{
    return get_real(o, key, lo, hi, out, e);
}

bool api_get_int(json_t *o, const char *key, int64_t lo, int64_t hi, int64_t *out, struct api_error *e)
{
    return get_int(o, key, lo, hi, out, e);
}

bool api_get_bool(json_t *o, const char *key, bool *out, struct api_error *e)
{
    return get_bool(o, key, out, e);
}

bool api_get_string(json_t *o, const char *key, size_t max_len, char **out, struct api_error *e)
{
    return get_string(o, key, max_len, out, e);
}

bool api_parse_stop(json_t *o, struct gen_request *r, struct api_error *e)
{
    return parse_stop(o, r, e);
}

bool api_parse_messages(json_t *o, struct gen_request *r, struct api_error *e)
{
    return parse_messages(o, r, e);
}
