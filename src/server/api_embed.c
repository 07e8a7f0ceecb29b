/*
 * api_embed.c - POST /v1/embeddings in OpenAI's shape (as llama-server
 * serves it), with jansson.
 *
 * Request: {"model", "input": string | [string, ...], "encoding_format":
 * "float" (default) | "base64", "dimensions" (only the model's own), "user"
 * (ignored)}.  Token-id inputs are refused (400) rather than guessed at.
 * Response: {"object": "list", "data": [{"object": "embedding", "index",
 * "embedding": [floats] | base64 of little-endian float32}], "model",
 * "usage": {"prompt_tokens", "total_tokens"}}; an input that was cut to the
 * model's maximum carries "truncated": true (and the X-Infer-Truncated
 * header counts them): it is never an error.
 *
 * All inputs of a request go to one infer_embed call, which batches them.
 */
#include "server.h"

#include <stdlib.h>
#include <string.h>

/* RFC 4648 base64 of n bytes (caller frees).  Twenty lines, so no library
 * for it (jansson and libmicrohttpd have none public; OpenSSL would be a new
 * dependency for the server). */
static char *base64(const unsigned char *p, size_t n)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *out = malloc((n + 2) / 3 * 4 + 1), *o = out;
    if (!out)
        return NULL;
    size_t i = 0;
    for (; i + 2 < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        *o++ = tab[v >> 18], *o++ = tab[(v >> 12) & 63], *o++ = tab[(v >> 6) & 63], *o++ = tab[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
        *o++ = tab[v >> 18], *o++ = tab[(v >> 12) & 63];
        *o++ = i + 1 < n ? tab[(v >> 6) & 63] : '=';
        *o++ = '=';
    }
    *o = '\0';
    return out;
}

void embed_request_free(struct embed_request *r)
{
    free(r->model);
    free(r->inputs); /* pointers into r->root's strings */
    free(r->lens);
    json_decref(r->root);
    memset(r, 0, sizeof(*r));
}

static bool bad(struct api_error *e, const char *msg)
{
    api_error_set(e, 400, "invalid_request_error", "invalid_value", "%s", msg);
    return false;
}

bool api_parse_embed_request(const char *body, size_t len, int n_embd, struct embed_request *r,
                             struct api_error *e)
{
    memset(r, 0, sizeof(*r));
    json_error_t je;
    r->root = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je);
    if (!r->root) {
        api_error_set(e, 400, "invalid_request_error", "invalid_json", "invalid JSON: %s", je.text);
        return false;
    }
    bool ok = false;
    if (!json_is_object(r->root)) {
        bad(e, "the request body must be a JSON object");
        goto out;
    }
    json_t *m = json_object_get(r->root, "model");
    if (m && !json_is_null(m)) {
        if (!json_is_string(m)) {
            bad(e, "'model' must be a string");
            goto out;
        }
        if (!(r->model = strdup(json_string_value(m)))) {
            api_error_set(e, 500, "server_error", NULL, "out of memory");
            goto out;
        }
    }
    json_t *fmt = json_object_get(r->root, "encoding_format");
    if (fmt && !json_is_null(fmt)) {
        const char *f = json_is_string(fmt) ? json_string_value(fmt) : "";
        if (!strcmp(f, "base64"))
            r->base64 = true;
        else if (strcmp(f, "float")) {
            bad(e, "'encoding_format' must be \"float\" or \"base64\"");
            goto out;
        }
    }
    json_t *dim = json_object_get(r->root, "dimensions");
    if (dim && !json_is_null(dim) && (!json_is_integer(dim) || json_integer_value(dim) != n_embd)) {
        api_error_set(e, 400, "invalid_request_error", "invalid_value",
                      "'dimensions' must be this model's %d (it has no shortened embeddings)", n_embd);
        goto out;
    }
    json_t *in = json_object_get(r->root, "input");
    if (!in || json_is_null(in)) {
        bad(e, "'input' is required: a string or an array of strings");
        goto out;
    }
    size_t n = json_is_array(in) ? json_array_size(in) : 1;
    if (json_is_array(in) && n == 0) {
        bad(e, "'input' must not be an empty array");
        goto out;
    }
    if (n > EMBED_MAX_INPUTS) {
        api_error_set(e, 400, "invalid_request_error", "invalid_value", "'input' has %zu items; at most %d", n,
                      EMBED_MAX_INPUTS);
        goto out;
    }
    r->inputs = malloc(n * sizeof(*r->inputs));
    r->lens = malloc(n * sizeof(*r->lens));
    if (!r->inputs || !r->lens) {
        api_error_set(e, 500, "server_error", NULL, "out of memory");
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_is_array(in) ? json_array_get(in, i) : in;
        if (!json_is_string(v)) {
            bad(e, json_is_integer(v) || json_is_array(v)
                       ? "token-id inputs are not supported: send 'input' as a string or an array of strings"
                       : "'input' must be a string or an array of strings");
            goto out;
        }
        r->inputs[i] = json_string_value(v);
        r->lens[i] = json_string_length(v);
    }
    r->n = n;
    ok = true;
out:
    if (!ok)
        embed_request_free(r);
    return ok;
}

json_t *api_embed_response(const struct embed_request *r, const float *vec, int n_embd,
                           const infer_embed_info *info, const char *model_id)
{
    json_t *data = json_array();
    int64_t n_tok = 0;
    for (size_t i = 0; data && i < r->n; i++) {
        const float *v = vec + i * (size_t)n_embd;
        json_t *emb;
        if (r->base64) {
            /* little-endian float32, as OpenAI's base64 encoding */
            unsigned char *bytes = malloc((size_t)n_embd * 4);
            char *s = NULL;
            if (bytes) {
                for (int k = 0; k < n_embd; k++) {
                    uint32_t u;
                    memcpy(&u, &v[k], 4);
                    bytes[4 * k] = (unsigned char)u, bytes[4 * k + 1] = (unsigned char)(u >> 8);
                    bytes[4 * k + 2] = (unsigned char)(u >> 16), bytes[4 * k + 3] = (unsigned char)(u >> 24);
                }
                s = base64(bytes, (size_t)n_embd * 4);
            }
            free(bytes);
            emb = s ? json_string(s) : NULL;
            free(s);
        } else {
            emb = json_array();
            for (int k = 0; emb && k < n_embd; k++)
                json_array_append_new(emb, json_real((double)v[k]));
        }
        json_t *item = json_pack("{s:s, s:I, s:o}", "object", "embedding", "index", (json_int_t)i, "embedding", emb);
        if (item && info[i].truncated)
            json_object_set_new(item, "truncated", json_true());
        if (!item || json_array_append_new(data, item)) {
            json_decref(data);
            return NULL;
        }
        n_tok += info[i].n_tokens;
    }
    if (!data)
        return NULL;
    return json_pack("{s:s, s:o, s:s, s:{s:I, s:I}}", "object", "list", "data", data, "model", model_id, "usage",
                     "prompt_tokens", (json_int_t)n_tok, "total_tokens", (json_int_t)n_tok);
}
