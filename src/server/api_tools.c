/*
 * api_tools.c - tool calls: the tool catalogue and the tool turns of a
 * conversation rendered into the model family's prompt format, the model's
 * output parsed back into calls, and the grammar that forces a call when
 * tool_choice is "required" or names a function.
 *
 * Formats (api_tool_format):
 *
 *   hermes   chatml families (Qwen 2.5/3, Hermes, SmolLM): the catalogue in
 *            <tools></tools> in the system turn, one call per
 *            <tool_call>{"name": ..., "arguments": {...}}</tool_call>,
 *            results as a user turn of <tool_response></tool_response>
 *   llama3   Llama 3.x: the catalogue in the system turn, a call is the
 *            whole answer {"name": ..., "parameters": {...}}
 *   mistral  Mistral: a call is a JSON array [{"name": ..., "arguments":
 *            {...}}] (after the [TOOL_CALLS] control token)
 *   generic  every other family (Gemma, Phi, Granite, DeepSeek, ...): the
 *            catalogue in the system turn, a call is the whole answer
 *            {"tool_calls": [{"name": ..., "arguments": {...}}]}; results
 *            go back as a user turn "Tool result (call ID):\n..."
 *
 * The rendering is deterministic (tools in the order sent, keys sorted,
 * compact JSON, fixed text), so a conversation with a stable tool catalogue
 * has a stable prefix and hits the prefix cache from its second request.
 * The parser accepts the family's format, and the generic envelope from any
 * family; a call naming a function that was not offered is left as text.
 */
#include "server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_TOOLS 128

const char *api_tool_format_name(enum tool_format f)
{
    switch (f) {
    case TOOL_FMT_HERMES: return "hermes";
    case TOOL_FMT_LLAMA3: return "llama3";
    case TOOL_FMT_MISTRAL: return "mistral";
    default: return "generic";
    }
}

enum tool_format api_tool_format(infer_chat_family f)
{
    switch (f) {
    case INFER_CHAT_CHATML: return TOOL_FMT_HERMES;
    case INFER_CHAT_LLAMA3: return TOOL_FMT_LLAMA3;
    case INFER_CHAT_MISTRAL:
    case INFER_CHAT_MISTRAL_V3:
    case INFER_CHAT_MISTRAL_V3_TEKKEN:
    case INFER_CHAT_MISTRAL_V7:
    case INFER_CHAT_MISTRAL_V7_TEKKEN: return TOOL_FMT_MISTRAL;
    default: return TOOL_FMT_GENERIC;
    }
}

/* ------------------------------------------------------------- parsing */

static bool valid_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 64)
        return false;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '_' ||
              *s == '-' || *s == '.'))
            return false;
    return true;
}

static const json_t *tool_function(const json_t *tools, const char *name)
{
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t) {
        const json_t *f = json_object_get(t, "function");
        if (!strcmp(json_string_value(json_object_get(f, "name")), name))
            return f;
    }
    return NULL;
}

bool api_parse_tools(json_t *root, struct gen_request *r, struct api_error *e)
{
    json_t *tools = json_object_get(root, "tools"), *choice = json_object_get(root, "tool_choice"),
           *msgs = json_object_get(root, "messages");
    if (json_object_get(root, "functions") && !json_is_null(json_object_get(root, "functions"))) {
        api_error_set(e, 400, "invalid_request_error", "unsupported_parameter",
                      "'functions' is not supported: use 'tools'");
        return false;
    }
    if (tools && !json_is_null(tools)) {
        if (!json_is_array(tools) || json_array_size(tools) > MAX_TOOLS) {
            api_error_set(e, 400, "invalid_request_error", "invalid_value",
                          "'tools' must be an array of at most %d tools", MAX_TOOLS);
            return false;
        }
        size_t i;
        json_t *t;
        json_array_foreach(tools, i, t) {
            json_t *type = json_object_get(t, "type"), *f = json_object_get(t, "function");
            json_t *name = json_object_get(f, "name"), *params = json_object_get(f, "parameters"),
                   *desc = json_object_get(f, "description");
            if (!json_is_object(t) || (type && !(json_is_string(type) && !strcmp(json_string_value(type), "function"))) ||
                !json_is_object(f) || !json_is_string(name) || !valid_name(json_string_value(name)) ||
                (params && !json_is_null(params) && !json_is_object(params)) ||
                (desc && !json_is_null(desc) && !json_is_string(desc))) {
                api_error_set(e, 400, "invalid_request_error", "invalid_value",
                              "tools[%zu] must be {\"type\": \"function\", \"function\": {\"name\": NAME (letters, "
                              "digits, _ - ., at most 64), \"description\": TEXT, \"parameters\": SCHEMA}}",
                              i);
                return false;
            }
            for (size_t k = 0; k < i; k++)
                if (!strcmp(json_string_value(json_object_get(json_object_get(json_array_get(tools, k), "function"),
                                                              "name")),
                            json_string_value(name))) {
                    api_error_set(e, 400, "invalid_request_error", "invalid_value",
                                  "tools[%zu]: the name \"%s\" is used twice", i, json_string_value(name));
                    return false;
                }
        }
        if (json_array_size(tools) > 0)
            r->tools = json_incref(tools);
    }
    r->tool_choice = TOOL_CHOICE_DEFAULT;
    if (choice && !json_is_null(choice)) {
        const char *cs = json_string_value(choice);
        json_t *fn = json_object_get(json_object_get(choice, "function"), "name");
        if (cs && !strcmp(cs, "auto"))
            r->tool_choice = TOOL_CHOICE_AUTO;
        else if (cs && !strcmp(cs, "none"))
            r->tool_choice = TOOL_CHOICE_NONE;
        else if (cs && !strcmp(cs, "required"))
            r->tool_choice = TOOL_CHOICE_REQUIRED;
        else if (json_is_object(choice) && json_is_string(fn)) {
            r->tool_choice = TOOL_CHOICE_NAMED;
            if (!(r->tool_name = strdup(json_string_value(fn)))) {
                api_error_set(e, 500, "server_error", NULL, "out of memory");
                return false;
            }
            if (!r->tools || !tool_function(r->tools, r->tool_name)) {
                api_error_set(e, 400, "invalid_request_error", "invalid_value",
                              "'tool_choice' names \"%s\", which is not in 'tools'", r->tool_name);
                return false;
            }
        } else {
            api_error_set(e, 400, "invalid_request_error", "invalid_value",
                          "'tool_choice' must be \"auto\", \"none\", \"required\" or {\"type\": \"function\", "
                          "\"function\": {\"name\": NAME}}");
            return false;
        }
        if (r->tool_choice == TOOL_CHOICE_REQUIRED && !r->tools) {
            api_error_set(e, 400, "invalid_request_error", "invalid_value",
                          "'tool_choice' \"required\" needs 'tools'");
            return false;
        }
    }
    /* the conversation is rendered at admission (the family is the
     * model's): keep it when tools or tool turns are in it */
    bool tool_turns = false, called = false;
    size_t i;
    json_t *m;
    json_array_foreach(msgs, i, m) {
        const char *role = json_string_value(json_object_get(m, "role"));
        json_t *tc = json_object_get(m, "tool_calls");
        if (tc && !json_is_null(tc) && !json_is_array(tc)) {
            api_error_set(e, 400, "invalid_request_error", "invalid_value",
                          "messages[%zu].tool_calls must be an array", i);
            return false;
        }
        for (size_t k = 0; k < json_array_size(tc); k++) {
            /* {"function": {"name": N, "arguments": {...} or its JSON text}}, plus
             * "id"/"type"/"index" as OpenAI and Ollama send them */
            json_t *f = json_object_get(json_array_get(tc, k), "function");
            json_t *a = json_object_get(f, "arguments");
            if (!json_is_object(f) || !json_is_string(json_object_get(f, "name")) ||
                (a && !json_is_null(a) && !json_is_string(a) && !json_is_object(a))) {
                api_error_set(e, 400, "invalid_request_error", "invalid_value",
                              "messages[%zu].tool_calls[%zu] must be {\"function\": {\"name\": NAME, "
                              "\"arguments\": OBJECT or its JSON text}}",
                              i, k);
                return false;
            }
        }
        json_t *tn = json_object_get(m, "tool_name"); /* Ollama's, on a tool result */
        if (tn && !json_is_null(tn) && !json_is_string(tn)) {
            api_error_set(e, 400, "invalid_request_error", "invalid_type", "messages[%zu].tool_name must be a string",
                          i);
            return false;
        }
        if (role && !strcmp(role, "tool") && !called) {
            api_error_set(e, 400, "invalid_request_error", "invalid_value",
                          "messages[%zu]: a 'tool' message must follow an assistant message with tool_calls", i);
            return false;
        }
        called |= json_array_size(tc) > 0 && role && !strcmp(role, "assistant");
        tool_turns |= (role && !strcmp(role, "tool")) || json_array_size(tc) > 0;
    }
    if (r->tools || tool_turns)
        r->raw_msgs = json_incref(msgs);
    return true;
}

/* ------------------------------------------------------------ rendering */

struct sbuf {
    char *p;
    size_t n, cap;
    bool oom;
};

static void sb_add(struct sbuf *b, const char *s, size_t n)
{
    if (b->oom)
        return;
    if (b->n + n + 1 > b->cap) {
        size_t c = (b->n + n + 1) * 2;
        char *q = realloc(b->p, c);
        if (!q) {
            b->oom = true;
            return;
        }
        b->p = q;
        b->cap = c;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
}

static void sb_str(struct sbuf *b, const char *s) { sb_add(b, s, strlen(s)); }

static void sb_json(struct sbuf *b, const json_t *v)
{
    char *t = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    if (!t) {
        b->oom = true;
        return;
    }
    sb_str(b, t);
    free(t);
}

/* The catalogue, one tool per line. */
static void render_catalogue(struct sbuf *b, const json_t *tools, enum tool_format fmt)
{
    size_t i;
    const json_t *t;
    switch (fmt) {
    case TOOL_FMT_HERMES:
        sb_str(b, "# Tools\n\nYou may call one or more of these functions to help with the user's request. "
                  "Their signatures are inside <tools></tools>:\n<tools>");
        json_array_foreach(tools, i, t) {
            sb_str(b, "\n");
            json_t *o = json_pack("{s:s, s:O}", "type", "function", "function", json_object_get(t, "function"));
            sb_json(b, o);
            json_decref(o);
        }
        sb_str(b, "\n</tools>\n\nTo call a function, write a JSON object with its name and arguments inside "
                  "<tool_call></tool_call> tags:\n<tool_call>\n{\"name\": <function name>, \"arguments\": "
                  "<arguments as a JSON object>}\n</tool_call>");
        break;
    case TOOL_FMT_LLAMA3:
        sb_str(b, "You have access to these functions. To call one, answer with only a JSON object "
                  "{\"name\": <function name>, \"parameters\": <arguments as a JSON object>}.\n");
        json_array_foreach(tools, i, t) {
            sb_str(b, "\n");
            sb_json(b, json_object_get(t, "function"));
        }
        break;
    case TOOL_FMT_MISTRAL:
        sb_str(b, "Available tools:\n");
        json_array_foreach(tools, i, t) {
            sb_json(b, json_object_get(t, "function"));
            sb_str(b, "\n");
        }
        sb_str(b, "To call tools, answer with only a JSON array [{\"name\": <tool name>, \"arguments\": "
                  "<arguments as a JSON object>}].");
        break;
    default:
        sb_str(b, "You can call these tools (the JSON schema of each tool's arguments is its \"parameters\"):\n");
        json_array_foreach(tools, i, t) {
            sb_json(b, json_object_get(t, "function"));
            sb_str(b, "\n");
        }
        sb_str(b, "To call tools, answer with only this JSON object and nothing else: {\"tool_calls\": "
                  "[{\"name\": <tool name>, \"arguments\": <arguments as a JSON object>}]}. Otherwise answer "
                  "in plain text.");
        break;
    }
}

/* One call as the family writes it: {"name": N, "arguments": {...}}. */
static void render_call(struct sbuf *b, const char *name, const json_t *args, const char *args_key)
{
    sb_str(b, "{\"name\": ");
    json_t *n = json_string(name);
    sb_json(b, n);
    json_decref(n);
    sb_str(b, ", \"");
    sb_str(b, args_key);
    sb_str(b, "\": ");
    sb_json(b, args);
    sb_str(b, "}");
}

/* An assistant turn's tool_calls, appended to its text. */
static bool render_calls(struct sbuf *b, const json_t *calls, enum tool_format fmt, size_t idx, struct api_error *e)
{
    size_t i;
    const json_t *c;
    if (b->n)
        sb_str(b, "\n");
    if (fmt == TOOL_FMT_GENERIC)
        sb_str(b, "{\"tool_calls\": [");
    else if (fmt == TOOL_FMT_MISTRAL)
        sb_str(b, "[");
    json_array_foreach(calls, i, c) {
        const json_t *f = json_object_get(c, "function");
        const char *name = json_string_value(json_object_get(f, "name"));
        const json_t *a = json_object_get(f, "arguments");
        if (!name || (a && !json_is_null(a) && !json_is_string(a) && !json_is_object(a))) {
            /* (api_parse_tools refused this already) */
            api_error_set(e, 400, "invalid_request_error", "invalid_value",
                          "messages[%zu].tool_calls[%zu] must have function.name and function.arguments", idx, i);
            return false;
        }
        json_t *args = json_is_string(a)   ? json_loads(json_string_value(a), JSON_DECODE_ANY, NULL)
                       : json_is_object(a) ? json_incref((json_t *)a)
                                           : json_object();
        if (!args) /* not JSON: keep the text */
            args = json_incref((json_t *)a);
        if (i)
            sb_str(b, fmt == TOOL_FMT_GENERIC || fmt == TOOL_FMT_MISTRAL ? ", " : "\n");
        if (fmt == TOOL_FMT_HERMES)
            sb_str(b, "<tool_call>\n");
        render_call(b, name, args, fmt == TOOL_FMT_LLAMA3 ? "parameters" : "arguments");
        if (fmt == TOOL_FMT_HERMES)
            sb_str(b, "\n</tool_call>");
        json_decref(args);
    }
    if (fmt == TOOL_FMT_GENERIC)
        sb_str(b, "]}");
    else if (fmt == TOOL_FMT_MISTRAL)
        sb_str(b, "]");
    return true;
}

static void render_result(struct sbuf *b, const json_t *m, const char *content, enum tool_format fmt)
{
    if (b->n)
        sb_str(b, "\n");
    if (fmt == TOOL_FMT_HERMES) {
        sb_str(b, "<tool_response>\n");
        sb_str(b, content);
        sb_str(b, "\n</tool_response>");
        return;
    }
    /* OpenAI names the call (tool_call_id), Ollama the function (tool_name) */
    const char *id = json_string_value(json_object_get(m, "tool_call_id"));
    const char *fn = json_string_value(json_object_get(m, "tool_name"));
    sb_str(b, "Tool result");
    if (fn) {
        sb_str(b, " (");
        sb_str(b, fn);
        sb_str(b, ")");
    }
    if (id) {
        sb_str(b, " (call ");
        sb_str(b, id);
        sb_str(b, ")");
    }
    sb_str(b, ":\n");
    sb_str(b, content);
}

/* In a forced call, an array of choices (items an enum, a const or a
 * boolean) without maxItems gets at most as many items as there are
 * choices: a small model forced into such a list repeats the choices until
 * the token limit (the default model did, in Home Assistant's
 * "domain": ["light", "switch", "fan", "light", ...]).  Longer lists could
 * only repeat a choice. */
static void bound_choice_arrays(json_t *v)
{
    const char *k;
    json_t *x;
    size_t i;
    if (json_is_array(v)) {
        json_array_foreach(v, i, x) bound_choice_arrays(x);
        return;
    }
    if (!json_is_object(v))
        return;
    json_t *items = json_object_get(v, "items");
    if (json_is_object(items) && !json_object_get(v, "maxItems")) {
        json_t *en = json_object_get(items, "enum");
        const char *type = json_string_value(json_object_get(items, "type"));
        json_int_t n = json_is_array(en) && json_array_size(en) ? (json_int_t)json_array_size(en)
                       : json_object_get(items, "const")       ? 1
                       : type && !strcmp(type, "boolean")      ? 2
                                                               : 0;
        json_t *min = json_object_get(v, "minItems");
        if (n && (!json_is_integer(min) || json_integer_value(min) <= n))
            json_object_set_new(v, "maxItems", json_integer(n));
    }
    json_object_foreach(v, k, x) bound_choice_arrays(x);
}

/* The JSON schema of one forced call, in the family's envelope. */
static json_t *call_schema(const json_t *tools, const char *only, enum tool_format fmt)
{
    json_t *alts = json_array();
    size_t i;
    const json_t *t;
    json_array_foreach(tools, i, t) {
        const json_t *f = json_object_get(t, "function");
        const char *name = json_string_value(json_object_get(f, "name"));
        if (only && strcmp(only, name))
            continue;
        json_t *params = json_object_get(f, "parameters");
        json_t *p = params && !json_is_null(params) ? json_deep_copy(params) : json_pack("{s:s}", "type", "object");
        bound_choice_arrays(p);
        const char *key = fmt == TOOL_FMT_LLAMA3 ? "parameters" : "arguments";
        json_array_append_new(alts, json_pack("{s:s, s:{s:{s:s}, s:o}, s:[s, s]}", "type", "object", "properties",
                                              "name", "const", name, key, p, "required", "name", key));
    }
    json_t *one = json_array_size(alts) == 1 ? json_incref(json_array_get(alts, 0)) : json_pack("{s:O}", "anyOf", alts);
    json_decref(alts);
    /* one call, in every format (hermes and llama3 wrap a single call):
     * a small model forced into a list tends to repeat the call until the
     * token limit */
    if (fmt == TOOL_FMT_GENERIC)
        return json_pack("{s:s, s:{s:{s:s, s:o, s:i, s:i}}, s:[s]}", "type", "object", "properties", "tool_calls",
                         "type", "array", "items", one, "minItems", 1, "maxItems", 1, "required", "tool_calls");
    if (fmt == TOOL_FMT_MISTRAL)
        return json_pack("{s:s, s:o, s:i, s:i}", "type", "array", "items", one, "minItems", 1, "maxItems", 1);
    return one;
}

/* Tool parameters with "$ref": "#/..." point into the tool's own schema;
 * inside the call schema they live at `base`: rewrite them. */
static void rebase_refs(json_t *v, const char *base)
{
    const char *k;
    json_t *x;
    size_t i;
    if (json_is_object(v)) {
        json_object_foreach(v, k, x) {
            if (!strcmp(k, "$ref") && json_is_string(x) && json_string_value(x)[0] == '#') {
                char *nr = malloc(strlen(base) + strlen(json_string_value(x)) + 1);
                if (nr) {
                    sprintf(nr, "%s%s", base, json_string_value(x) + 1);
                    json_object_set_new(v, k, json_string(nr));
                    free(nr);
                }
            } else {
                rebase_refs(x, base);
            }
        }
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, x) rebase_refs(x, base);
    }
}

static infer_grammar *call_grammar(const json_t *tools, const char *only, enum tool_format fmt, struct api_error *e)
{
    json_t *schema = call_schema(tools, only, fmt);
    if (!schema) {
        api_error_set(e, 500, "server_error", NULL, "out of memory");
        return NULL;
    }
    /* where each alternative's arguments sit, for $ref rewriting */
    json_t *items = fmt == TOOL_FMT_GENERIC ? json_object_get(json_object_get(json_object_get(schema, "properties"),
                                                                              "tool_calls"),
                                                              "items")
                    : fmt == TOOL_FMT_MISTRAL ? json_object_get(schema, "items")
                                              : schema;
    const char *items_path = fmt == TOOL_FMT_GENERIC ? "#/properties/tool_calls/items"
                             : fmt == TOOL_FMT_MISTRAL ? "#/items"
                                                       : "#";
    const char *key = fmt == TOOL_FMT_LLAMA3 ? "parameters" : "arguments";
    json_t *anyof = json_object_get(items, "anyOf");
    size_t n = anyof ? json_array_size(anyof) : 1;
    for (size_t i = 0; i < n; i++) {
        json_t *alt = anyof ? json_array_get(anyof, i) : items;
        char base[160];
        if (anyof)
            snprintf(base, sizeof(base), "%s/anyOf/%zu/properties/%s", items_path, i, key);
        else
            snprintf(base, sizeof(base), "%s/properties/%s", items_path, key);
        rebase_refs(json_object_get(json_object_get(alt, "properties"), key), base);
    }
    char *text = json_dumps(schema, JSON_COMPACT);
    json_decref(schema);
    infer_grammar *g = NULL;
    infer_status st = text ? infer_grammar_from_json_schema_wrapped(&g, text, strlen(text),
                                                                    fmt == TOOL_FMT_HERMES ? "<tool_call>\n" : NULL,
                                                                    fmt == TOOL_FMT_HERMES ? "\n</tool_call>" : NULL)
                           : INFER_ERR_NOMEM;
    free(text);
    if (st == INFER_ERR_NOMEM)
        api_error_set(e, 500, "server_error", NULL, "out of memory");
    else if (st != INFER_OK)
        api_error_set(e, 400, "invalid_request_error", "unsupported_schema", "tools: the parameters of a tool: %s",
                      infer_last_error());
    return g;
}

static bool push_msg(infer_chat_msg **msgs, size_t *n, const char *role, struct sbuf *text)
{
    /* two user turns in a row (a tool result, then the user) become one */
    if (*n && !strcmp(role, "user") && !strcmp((*msgs)[*n - 1].role, "user")) {
        struct sbuf b = {0};
        sb_str(&b, (*msgs)[*n - 1].content);
        sb_str(&b, "\n\n");
        sb_add(&b, text->p ? text->p : "", text->n);
        if (b.oom) {
            free(b.p);
            return false;
        }
        free((char *)(*msgs)[*n - 1].content);
        (*msgs)[*n - 1].content = b.p;
        free(text->p);
        memset(text, 0, sizeof(*text));
        return true;
    }
    char *r = strdup(role), *c = text->p ? text->p : strdup("");
    if (!r || !c) {
        free(r);
        free(c);
        return false;
    }
    (*msgs)[*n].role = r;
    (*msgs)[*n].content = c;
    (*n)++;
    memset(text, 0, sizeof(*text));
    return true;
}

bool api_tools_render(struct gen_request *r, infer_chat_family fam, enum tool_choice dflt, struct api_error *e)
{
    if (!r->raw_msgs)
        return true;
    enum tool_format fmt = api_tool_format(fam);
    r->tool_format = fmt;
    size_t n_raw = json_array_size(r->raw_msgs);
    /* The server's default "required" (--tool-choice required, for models
     * that do not call tools on their own) forces a call on the user's
     * turn; once the last message is a tool result the answer is text, so
     * that a client which loops until it gets text (Home Assistant, the
     * ollama and openai examples) ends after one round.  A request's own
     * tool_choice is taken as it is. */
    const char *last = json_string_value(json_object_get(json_array_get(r->raw_msgs, n_raw ? n_raw - 1 : 0), "role"));
    if (dflt == TOOL_CHOICE_REQUIRED && last && !strcmp(last, "tool"))
        dflt = TOOL_CHOICE_NONE;
    r->tool_choice_eff = r->tool_choice != TOOL_CHOICE_DEFAULT ? r->tool_choice
                         : r->tools                            ? dflt
                                                               : TOOL_CHOICE_NONE;
    if (!r->tools)
        r->tool_choice_eff = TOOL_CHOICE_NONE;
    infer_chat_msg *out = calloc(n_raw + 1, sizeof(*out));
    size_t n = 0;
    if (!out)
        goto oom;
    struct sbuf b = {0};
    size_t i = 0;
    /* the system turn: the client's, then the catalogue */
    if (n_raw && r->n_msgs && !strcmp(r->msgs[0].role, "system")) {
        sb_str(&b, r->msgs[0].content);
        i = 1;
    }
    if (r->tools) {
        if (b.n)
            sb_str(&b, "\n\n");
        render_catalogue(&b, r->tools, fmt);
    }
    if (b.oom || ((b.n || i) && !push_msg(&out, &n, "system", &b)))
        goto oom;
    for (; i < n_raw && i < r->n_msgs; i++) {
        const json_t *m = json_array_get(r->raw_msgs, i);
        const char *role = r->msgs[i].role, *content = r->msgs[i].content;
        if (!strcmp(role, "tool")) {
            render_result(&b, m, content, fmt);
            /* consecutive results: one turn */
            if (i + 1 < r->n_msgs && !strcmp(r->msgs[i + 1].role, "tool"))
                continue;
            if (b.oom || !push_msg(&out, &n, "user", &b))
                goto oom;
            continue;
        }
        sb_str(&b, content);
        const json_t *calls = json_object_get(m, "tool_calls");
        if (!strcmp(role, "assistant") && json_is_array(calls) && json_array_size(calls) &&
            !render_calls(&b, calls, fmt, i, e)) {
            free(b.p);
            goto fail;
        }
        if (b.oom || !push_msg(&out, &n, role, &b))
            goto oom;
    }
    for (size_t k = 0; k < r->n_msgs; k++) {
        free((char *)r->msgs[k].role);
        free((char *)r->msgs[k].content);
    }
    free(r->msgs);
    r->msgs = out;
    r->n_msgs = n;
    if (r->tools && (r->tool_choice_eff == TOOL_CHOICE_REQUIRED || r->tool_choice_eff == TOOL_CHOICE_NAMED)) {
        infer_grammar_free(r->grammar); /* a forced call wins over response_format */
        r->grammar = call_grammar(r->tools, r->tool_choice_eff == TOOL_CHOICE_NAMED ? r->tool_name : NULL, fmt, e);
        if (!r->grammar)
            return false;
    }
    return true;
oom:
    api_error_set(e, 500, "server_error", NULL, "out of memory");
fail:
    for (size_t k = 0; k < n; k++) {
        free((char *)out[k].role);
        free((char *)out[k].content);
    }
    free(out);
    return false;
}

/* -------------------------------------------------------------- output */

/* {"name": N, "arguments"|"parameters": {...}} -> a call, when N is offered. */
static bool add_call(json_t *calls, const json_t *tools, const json_t *o)
{
    const char *name = json_string_value(json_object_get(o, "name"));
    json_t *args = json_object_get(o, "arguments");
    if (!args)
        args = json_object_get(o, "parameters");
    if (!name || !tool_function(tools, name))
        return false;
    if (json_is_string(args)) /* arguments already as a JSON string */
        args = json_loads(json_string_value(args), 0, NULL);
    else
        args = args ? json_incref(args) : json_object();
    if (!json_is_object(args)) {
        json_decref(args);
        return false;
    }
    json_array_append_new(calls, json_pack("{s:s, s:o}", "name", name, "arguments", args));
    return true;
}

static bool add_calls(json_t *calls, const json_t *tools, const json_t *v)
{
    if (json_is_array(v)) {
        size_t i;
        const json_t *x;
        bool any = false;
        json_array_foreach(v, i, x) any |= add_call(calls, tools, x);
        return any;
    }
    if (json_is_object(v) && json_is_array(json_object_get(v, "tool_calls")))
        return add_calls(calls, tools, json_object_get(v, "tool_calls"));
    return json_is_object(v) && add_call(calls, tools, v);
}

static const char *skip_ws(const char *s, const char *end)
{
    while (s < end && (*s == ' ' || *s == '\n' || *s == '\t' || *s == '\r'))
        s++;
    return s;
}

json_t *api_tools_parse(const struct gen_request *r, const char *text, size_t len, char **content)
{
    *content = NULL;
    if (!r->tools || r->tool_choice_eff == TOOL_CHOICE_NONE || !text)
        return NULL;
    json_t *calls = json_array();
    const char *end = text + len, *p = skip_ws(text, end);
    struct sbuf rest = {0};
    /* hermes tags (any family may use them) */
    const char *open = "<tool_call>", *close = "</tool_call>";
    const char *q = p;
    bool tagged = false;
    while (q < end) {
        const char *a = memmem(q, (size_t)(end - q), open, strlen(open));
        if (!a)
            break;
        tagged = true;
        sb_add(&rest, q, (size_t)(a - q));
        const char *body = a + strlen(open);
        const char *z = memmem(body, (size_t)(end - body), close, strlen(close));
        const char *bend = z ? z : end;
        json_t *v = json_loadb(body, (size_t)(bend - body), JSON_DECODE_ANY, NULL);
        if (!v || !add_calls(calls, r->tools, v))
            sb_add(&rest, a, (size_t)((z ? z + strlen(close) : end) - a));
        json_decref(v);
        q = z ? z + strlen(close) : end;
    }
    if (tagged) {
        sb_add(&rest, q, (size_t)(end - q));
    } else {
        /* the whole answer as JSON: generic, llama3, mistral ([TOOL_CALLS] as text too) */
        if ((size_t)(end - p) >= 12 && !memcmp(p, "[TOOL_CALLS]", 12))
            p = skip_ws(p + 12, end);
        json_t *v = json_loadb(p, (size_t)(end - p), JSON_DECODE_ANY, NULL);
        if (!v || !add_calls(calls, r->tools, v))
            sb_add(&rest, text, len);
        json_decref(v);
    }
    if (json_array_size(calls) == 0) {
        json_decref(calls);
        free(rest.p);
        return NULL;
    }
    /* the text around the calls, trimmed (NULL when there is none) */
    const char *rs = rest.p ? skip_ws(rest.p, rest.p + rest.n) : NULL;
    size_t rn = rs ? rest.n - (size_t)(rs - rest.p) : 0;
    while (rn && (rs[rn - 1] == ' ' || rs[rn - 1] == '\n' || rs[rn - 1] == '\t' || rs[rn - 1] == '\r'))
        rn--;
    if (rn)
        *content = strndup(rs, rn);
    free(rest.p);
    return calls;
}

size_t api_tools_stream_len(const char *text, size_t len)
{
    static const char tag[] = "<tool_call>";
    const size_t n_tag = sizeof(tag) - 1;
    if (!text)
        return 0;
    const char *end = text + len, *p = skip_ws(text, end), *cut = end;
    if (p == end || *p == '{' || *p == '[') /* undecided, or a whole-answer call */
        return 0;
    const char *a = memmem(p, (size_t)(end - p), tag, n_tag);
    if (a) {
        cut = a;
    } else { /* the earliest tail that is a proper prefix of the tag */
        size_t most = (size_t)(end - p) < n_tag - 1 ? (size_t)(end - p) : n_tag - 1;
        for (size_t k = most; k > 0; k--)
            if (!memcmp(end - k, tag, k)) {
                cut = end - k;
                break;
            }
    }
    /* white space alone is not content yet: a call may follow it */
    return cut <= p ? 0 : (size_t)(cut - text);
}

enum call_shape { SHAPE_OPENAI, SHAPE_OPENAI_DELTA, SHAPE_OLLAMA };

/* The calls [{"name", "arguments": {...}}] in a client's shape, each with
 * the id "call_<id_base>_<i>". */
static json_t *shape_calls(const json_t *calls, const char *id_base, enum call_shape shape)
{
    json_t *out = json_array();
    size_t i;
    const json_t *c;
    json_array_foreach(calls, i, c) {
        char id[96];
        snprintf(id, sizeof(id), "call_%s_%zu", id_base, i);
        json_t *name = json_object_get(c, "name"), *args = json_object_get(c, "arguments"), *o;
        if (shape == SHAPE_OLLAMA) { /* arguments an object, the index inside function */
            o = json_pack("{s:s, s:{s:I, s:O, s:O}}", "id", id, "function", "index", (json_int_t)i, "name", name,
                          "arguments", args);
        } else { /* arguments as JSON text; a stream's delta has the index */
            char *text = json_dumps(args, JSON_COMPACT);
            o = json_pack("{s:s, s:s, s:{s:O, s:s}}", "id", id, "type", "function", "function", "name", name,
                          "arguments", text ? text : "{}");
            free(text);
            if (o && shape == SHAPE_OPENAI_DELTA)
                json_object_set_new(o, "index", json_integer((json_int_t)i));
        }
        json_array_append_new(out, o);
    }
    return out;
}

json_t *api_tool_calls_openai(const json_t *calls, const char *id_base, bool with_index)
{
    return shape_calls(calls, id_base, with_index ? SHAPE_OPENAI_DELTA : SHAPE_OPENAI);
}

json_t *api_tool_calls_ollama(const json_t *calls, const char *id_base)
{
    return shape_calls(calls, id_base, SHAPE_OLLAMA);
}
