/*
 * warm.c - `infer serve --warm-prompts FILE`: after the first model load,
 * before the first request is admitted, prefill the household's usual
 * prompts so that the first request after a restart finds their prefix in
 * the cache (RAM, and with --cache-dir the disk tier: then the prefill is
 * mostly a read).
 *
 * FILE has one prompt per line; blank lines and lines starting with '#' are
 * skipped.  A line is
 *   - a JSON object with "messages" (rendered by the model's chat template
 *     with the generation prompt, exactly as /v1/chat/completions renders
 *     it), or with "prompt" (a raw completion prompt),
 *   - a JSON string: a system prompt, rendered as a system turn followed by
 *     an empty user turn (the rendering every request with that system
 *     prompt starts with),
 *   - anything else: that text as a raw prompt.
 * The prompts are cached without a tenant salt, so they serve requests
 * without an API key tenant or cache_salt.  A line that cannot be used is
 * reported with its number and skipped; it never stops the server.
 */
#include "server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Tokens of one line (malloc'ed into *out), or a negative count with *why. */
static int64_t line_tokens(infer_model *m, infer_chat_family fam, const char *line, int32_t **out,
                           const char **why)
{
    *out = NULL;
    json_error_t jerr;
    json_t *o = (line[0] == '{' || line[0] == '"') ? json_loads(line, JSON_DECODE_ANY, &jerr) : NULL;
    int64_t n = -1;
    *why = "not valid";
    if (json_is_string(o)) {
        infer_chat_msg msgs[2] = {{"system", json_string_value(o)}, {"user", ""}};
        n = infer_model_tokenize_chat(m, fam, msgs, 2, true, out);
    } else if (json_is_object(o) && json_is_array(json_object_get(o, "messages"))) {
        json_t *arr = json_object_get(o, "messages");
        size_t k = json_array_size(arr);
        infer_chat_msg *msgs = k ? calloc(k, sizeof(*msgs)) : NULL;
        bool ok = msgs != NULL;
        for (size_t i = 0; ok && i < k; i++) {
            json_t *mi = json_array_get(arr, i);
            msgs[i].role = json_string_value(json_object_get(mi, "role"));
            msgs[i].content = json_string_value(json_object_get(mi, "content"));
            ok = msgs[i].role && msgs[i].content;
        }
        *why = ok ? "rejected by the chat template" : "\"messages\" needs role and content strings";
        if (ok)
            n = infer_model_tokenize_chat(m, fam, msgs, k, true, out);
        free(msgs);
    } else if (json_is_object(o) && json_is_string(json_object_get(o, "prompt"))) {
        const char *t = json_string_value(json_object_get(o, "prompt"));
        size_t len = strlen(t);
        *out = malloc((len + 16) * sizeof(int32_t));
        n = *out ? infer_model_tokenize(m, t, len, true, false, *out, (int64_t)len + 16) : -1;
    } else if (!o && line[0] != '{' && line[0] != '"') {
        size_t len = strlen(line);
        *out = malloc((len + 16) * sizeof(int32_t));
        n = *out ? infer_model_tokenize(m, line, len, true, false, *out, (int64_t)len + 16) : -1;
    } else if (json_is_object(o)) {
        *why = "an object needs \"messages\" or \"prompt\"";
    }
    json_decref(o);
    if (n <= 0) {
        free(*out);
        *out = NULL;
        return -1;
    }
    return n;
}

int warm_prompts_run(const struct server_config *cfg, infer_model *m, infer_engine *e, infer_chat_family fam)
{
    FILE *f = fopen(cfg->warm_prompts, "r");
    if (!f) {
        fprintf(stderr, "serve: warning: --warm-prompts %s: cannot open it\n", cfg->warm_prompts);
        return 0;
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int lineno = 0, done = 0;
    double t0 = infer_now_seconds();
    while ((len = getline(&line, &cap, f)) >= 0) {
        lineno++;
        while (len > 0 && (line[len - 1] == '\n' || line[len - 1] == '\r'))
            line[--len] = '\0';
        if (len == 0 || line[0] == '#')
            continue;
        int32_t *toks;
        const char *why;
        int64_t n = line_tokens(m, fam, line, &toks, &why);
        if (n < 0) {
            fprintf(stderr, "serve: warning: --warm-prompts %s:%d: %s; skipped\n", cfg->warm_prompts, lineno, why);
            continue;
        }
        infer_session *s = NULL;
        int64_t reused = 0;
        double t = infer_now_seconds();
        infer_status st = infer_session_new_in(&s, e, NULL);
        if (st == INFER_OK)
            st = infer_session_set_tokens(s, toks, n, &reused);
        if (st == INFER_OK) {
            done++;
            fprintf(stderr, "serve: warm prompt %d: %lld tokens (%lld already cached) in %.2f s\n", lineno,
                    (long long)n, (long long)reused, infer_now_seconds() - t);
        } else {
            fprintf(stderr, "serve: warning: --warm-prompts %s:%d: %s; skipped\n", cfg->warm_prompts, lineno,
                    infer_last_error());
        }
        infer_session_free(s); /* its blocks stay in the prefix cache */
        free(toks);
    }
    free(line);
    fclose(f);
    fprintf(stderr, "serve: %d warm prompt%s prefilled in %.2f s\n", done, done == 1 ? "" : "s",
            infer_now_seconds() - t0);
    return done;
}
