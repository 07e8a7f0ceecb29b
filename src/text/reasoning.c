/*
 * reasoning.c - split a thinking model's output into its reasoning and its
 * answer, as llama.cpp's server does for reasoning_content.
 *
 * Qwen3, DeepSeek-R1 and its distills, SmolLM3 and others open their output
 * with "<think>", reason, write "</think>", then answer; Magistral-style
 * Mistral models use "[THINK]" ... "[/THINK]".  The markers are found in the
 * chat template (reasoning_markers).  The splitter reads the output as it
 * streams and releases each byte once its side is certain:
 *
 *   - whitespace before the opening marker is skipped; output that does not
 *     start with it is all answer, verbatim (whitespace included);
 *   - reasoning is trimmed of whitespace at both ends (a whitespace-only
 *     reasoning is none), which is why trailing whitespace and a possible
 *     start of the closing marker are held back while streaming;
 *   - whitespace after the closing marker is skipped, the rest is the answer;
 *   - output that ends inside the reasoning (length limit) is reasoning: the
 *     thinking is never shown as the answer.
 *
 * Held text is bounded by a whitespace run plus the closing marker; the rest
 * of the output goes straight through.
 */
#include "reasoning.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum rs_state {
    RS_START,     /* nothing decided: held is all output so far */
    RS_REASONING, /* after the opening marker: held is reasoning not yet released */
    RS_AFTER,     /* after the closing marker, skipping whitespace */
    RS_CONTENT,   /* answer: everything passes */
};

struct rbuf {
    char *p;
    size_t n, cap;
};

struct infer_reasoning {
    char open[32], close[32];
    size_t n_open, n_close;
    enum rs_state state;
    bool started; /* some reasoning released (no more left trimming) */
    bool failed;
    struct rbuf held, out_r, out_c;
};

static bool rb_put(infer_reasoning *r, struct rbuf *b, const char *s, size_t n)
{
    if (n == 0 || r->failed)
        return !r->failed;
    if (b->n + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->n + n + 1)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            r->failed = true;
            return false;
        }
        b->p = p;
        b->cap = cap;
    }
    memmove(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = '\0';
    return true;
}

/* Drop the first k bytes of held. */
static void held_drop(struct rbuf *b, size_t k)
{
    memmove(b->p, b->p + k, b->n - k);
    b->n -= k;
}

static inline bool is_ws(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

/* Release s[0..n) as reasoning (left-trimmed while none has been released). */
static void release_reasoning(infer_reasoning *r, const char *s, size_t n)
{
    if (!r->started) {
        while (n > 0 && is_ws(*s))
            s++, n--;
        if (n == 0)
            return;
        r->started = true;
    }
    rb_put(r, &r->out_r, s, n);
}

static size_t trim_right(const char *s, size_t n)
{
    while (n > 0 && is_ws(s[n - 1]))
        n--;
    return n;
}

/* Length of the longest suffix of s[0..n) that is a proper prefix of tag. */
static size_t partial_suffix(const char *s, size_t n, const char *tag, size_t n_tag)
{
    for (size_t k = n_tag - 1 < n ? n_tag - 1 : n; k > 0; k--)
        if (memcmp(s + n - k, tag, k) == 0)
            return k;
    return 0;
}

infer_reasoning *infer_reasoning_new(const char *open, const char *close, bool in_reasoning)
{
    if (!open || !close || !*open || !*close || strlen(open) >= sizeof(((infer_reasoning *)0)->open) ||
        strlen(close) >= sizeof(((infer_reasoning *)0)->close)) {
        infer_error(INFER_ERR_INVALID, "reasoning markers must be non-empty and shorter than 32 bytes");
        return NULL;
    }
    infer_reasoning *r = calloc(1, sizeof(*r));
    if (!r) {
        infer_error(INFER_ERR_NOMEM, "out of memory");
        return NULL;
    }
    strcpy(r->open, open);
    strcpy(r->close, close);
    r->n_open = strlen(open);
    r->n_close = strlen(close);
    r->state = in_reasoning ? RS_REASONING : RS_START;
    return r;
}

infer_reasoning *infer_reasoning_new_closed(const char *open, const char *close)
{
    infer_reasoning *r = infer_reasoning_new(open, close, false);
    if (r)
        r->state = RS_AFTER;
    return r;
}

void infer_reasoning_free(infer_reasoning *r)
{
    if (!r)
        return;
    free(r->held.p);
    free(r->out_r.p);
    free(r->out_c.p);
    free(r);
}

/* Advance over held text as far as it is decided. */
static void step(infer_reasoning *r, bool final)
{
    struct rbuf *h = &r->held;
    for (;;) {
        switch (r->state) {
        case RS_START: {
            size_t i = 0;
            while (i < h->n && is_ws(h->p[i]))
                i++;
            size_t rest = h->n - i;
            if (rest >= r->n_open && memcmp(h->p + i, r->open, r->n_open) == 0) {
                held_drop(h, i + r->n_open);
                r->state = RS_REASONING;
                continue;
            }
            if (!final && rest < r->n_open && memcmp(h->p + i, r->open, rest) == 0)
                return; /* may still become the opening marker */
            rb_put(r, &r->out_c, h->p, h->n);
            h->n = 0;
            r->state = RS_CONTENT;
            return;
        }
        case RS_REASONING: {
            const char *end = h->n >= r->n_close ? memmem(h->p, h->n, r->close, r->n_close) : NULL;
            if (end) {
                size_t k = (size_t)(end - h->p);
                release_reasoning(r, h->p, trim_right(h->p, k));
                held_drop(h, k + r->n_close);
                r->state = RS_AFTER;
                continue;
            }
            size_t safe = final ? h->n : h->n - partial_suffix(h->p, h->n, r->close, r->n_close);
            safe = trim_right(h->p, safe);
            release_reasoning(r, h->p, safe);
            held_drop(h, safe);
            if (final)
                h->n = 0;
            return;
        }
        case RS_AFTER: {
            size_t i = 0;
            while (i < h->n && is_ws(h->p[i]))
                i++;
            held_drop(h, i);
            if (h->n == 0)
                return;
            r->state = RS_CONTENT;
            continue;
        }
        case RS_CONTENT:
            rb_put(r, &r->out_c, h->p, h->n);
            h->n = 0;
            return;
        }
    }
}

infer_status infer_reasoning_push(infer_reasoning *r, const char *text, size_t n, bool final,
                                  const char **reasoning, size_t *n_reasoning, const char **content,
                                  size_t *n_content)
{
    r->out_r.n = r->out_c.n = 0;
    if (r->state == RS_CONTENT)
        rb_put(r, &r->out_c, text, n);
    else if (rb_put(r, &r->held, text, n))
        step(r, final);
    if (r->failed) {
        *reasoning = *content = "";
        *n_reasoning = *n_content = 0;
        return infer_error(INFER_ERR_NOMEM, "out of memory splitting the reasoning from the answer");
    }
    *reasoning = r->out_r.n ? r->out_r.p : "";
    *n_reasoning = r->out_r.n;
    *content = r->out_c.n ? r->out_c.p : "";
    *n_content = r->out_c.n;
    return INFER_OK;
}

const char *infer_reasoning_answer(const char *content, const char *close)
{
    if (!content || !close || !*close)
        return content;
    const size_t n = strlen(close);
    const char *answer = NULL;
    for (const char *p = strstr(content, close); p; p = strstr(p + n, close))
        answer = p + n;
    if (!answer)
        return content;
    while (is_ws(*answer))
        answer++;
    return answer;
}

/* ---------------------------------------------------------------- markers */

static const struct {
    const char *open, *close;
} marker_pairs[] = {
    {"<think>", "</think>"}, /* Qwen3, QwQ, DeepSeek-R1, SmolLM3, Granite 3.2+, ... */
    {"[THINK]", "[/THINK]"}, /* Magistral, Ministral 3 reasoning */
};

bool reasoning_forced_open(const char *tmpl, const char *open)
{
    if (!tmpl || !open || !*open)
        return false;
    const char *gen = NULL;
    for (const char *p = strstr(tmpl, "add_generation_prompt"); p; p = strstr(p + 1, "add_generation_prompt"))
        gen = p;
    if (!gen)
        return false;
    const char *end = strstr(gen, "endif");
    const size_t n = strlen(open);
    for (const char *p = strstr(gen, open); p && (!end || p < end); p = strstr(p + n, open)) {
        const char *q = p + n;
        if (q[0] == '\\' && q[1] == 'n') /* "\n" in a template string literal */
            q += 2;
        else if (q[0] == '\n')
            q++;
        else
            continue;
        if (*q == '\'' || *q == '"') /* the literal ends there */
            return true;
    }
    return false;
}

bool reasoning_off_suffix(const char *tmpl, const char *open, const char *close, bool forced, char *buf, size_t n)
{
    if (!tmpl || !open || !close)
        return false;
    int w;
    if (forced)
        w = snprintf(buf, n, "%s\n%s", open, close);
    else if (strstr(tmpl, "enable_thinking"))
        w = snprintf(buf, n, "%s\n\n%s\n\n", open, close);
    else
        return false;
    return w > 0 && (size_t)w < n;
}

bool reasoning_markers(const char *tmpl, bool (*has)(void *ctx, const char *piece), void *ctx,
                       const char **open, const char **close)
{
    for (size_t i = 0; i < sizeof(marker_pairs) / sizeof(marker_pairs[0]); i++) {
        bool found = tmpl && (strstr(tmpl, marker_pairs[i].open) || strstr(tmpl, marker_pairs[i].close));
        if (!found && has)
            found = has(ctx, marker_pairs[i].open) && has(ctx, marker_pairs[i].close);
        if (found) {
            *open = marker_pairs[i].open;
            *close = marker_pairs[i].close;
            return true;
        }
    }
    return false;
}
