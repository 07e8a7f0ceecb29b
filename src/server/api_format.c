/*
 * api_format.c - structured outputs: the request fields that constrain an
 * answer to JSON (OpenAI's response_format, ollama's format) made into an
 * infer_grammar that the engine's sampler is held to.
 *
 * A schema the compiler cannot enforce is a 400 that names the keyword: the
 * client asked for a guarantee, and an unconstrained answer would break it
 * silently.
 */
#include "server.h"

#include <stdlib.h>
#include <string.h>

infer_grammar *api_grammar_from_json(const json_t *format, struct api_error *e, const char *what)
{
    infer_grammar *g = NULL;
    if (json_is_string(format) && !strcmp(json_string_value(format), "json")) {
        if (infer_grammar_json_object(&g) != INFER_OK)
            api_error_set(e, 500, "server_error", NULL, "%s", infer_last_error());
        return g;
    }
    if (!json_is_object(format) && !json_is_boolean(format)) {
        api_error_set(e, 400, "invalid_request_error", "invalid_value",
                      "'%s' must be \"json\" or a JSON schema (an object)", what);
        return NULL;
    }
    char *text = json_dumps(format, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!text) {
        api_error_set(e, 500, "server_error", NULL, "out of memory");
        return NULL;
    }
    infer_status st = infer_grammar_from_json_schema(&g, text, strlen(text));
    free(text);
    if (st == INFER_ERR_NOMEM)
        api_error_set(e, 500, "server_error", NULL, "%s", infer_last_error());
    else if (st != INFER_OK)
        api_error_set(e, 400, "invalid_request_error", "unsupported_schema", "%s: %s", what, infer_last_error());
    return g;
}

/* The canonical text of what constrains the answer (for the response
 * cache's key): the same constraint gives the same text. */
static bool set_format_key(struct gen_request *r, const char *kind, const json_t *schema, struct api_error *e)
{
    json_t *k = json_pack("{s:s, s:O?}", "kind", kind, "schema", (json_t *)schema);
    char *text = k ? json_dumps(k, JSON_COMPACT | JSON_SORT_KEYS) : NULL;
    json_decref(k);
    if (!text) {
        api_error_set(e, 500, "server_error", NULL, "out of memory");
        return false;
    }
    free(r->format_key);
    r->format_key = text;
    return true;
}

bool api_parse_response_format(json_t *root, struct gen_request *r, struct api_error *e)
{
    json_t *rf = json_object_get(root, "response_format");
    if (!rf || json_is_null(rf))
        return true;
    json_t *t = json_is_object(rf) ? json_object_get(rf, "type") : NULL;
    if (!json_is_string(t)) {
        api_error_set(e, 400, "invalid_request_error", "invalid_value",
                      "'response_format' must be an object with a 'type' (text, json_object, json_schema)");
        return false;
    }
    const char *type = json_string_value(t);
    if (!strcmp(type, "text"))
        return true;
    if (!strcmp(type, "json_object")) {
        json_t *js = json_string("json");
        r->grammar = js ? api_grammar_from_json(js, e, "response_format") : NULL;
        json_decref(js);
        return r->grammar && set_format_key(r, "json_object", NULL, e);
    }
    if (strcmp(type, "json_schema")) {
        api_error_set(e, 400, "invalid_request_error", "invalid_value",
                      "'response_format.type' must be text, json_object or json_schema");
        return false;
    }
    json_t *js = json_object_get(rf, "json_schema");
    if (!json_is_object(js)) {
        api_error_set(e, 400, "invalid_request_error", "invalid_value",
                      "'response_format.json_schema' must be an object with a 'schema'");
        return false;
    }
    json_t *strict = json_object_get(js, "strict");
    if (strict && !json_is_boolean(strict) && !json_is_null(strict)) {
        api_error_set(e, 400, "invalid_request_error", "invalid_value",
                      "'response_format.json_schema.strict' must be a boolean");
        return false;
    }
    /* strict or not, the answer is held to the schema: with additionalProperties
     * false by default the two differ only in what the client may expect */
    json_t *schema = json_object_get(js, "schema");
    if (!schema || json_is_null(schema))
        schema = json_true(); /* OpenAI: a schema-less json_schema is any JSON */
    else
        json_incref(schema);
    r->grammar = api_grammar_from_json(schema, e, "response_format.json_schema.schema");
    bool ok = r->grammar && set_format_key(r, "json_schema", schema, e);
    json_decref(schema);
    return ok;
}
