/*
 * json_schema.c - JSON schema -> grammar (grammar.h), for structured outputs.
 *
 * The subset is the one llama.cpp's json-schema-to-grammar covers for the
 * schemas people send (OpenAI response_format, pydantic models, ollama's
 * format):
 *
 *   type (a name or a list of names), object with properties / required
 *   (properties in schema order, optional ones may be left out;
 *   additionalProperties is false unless the object declares no properties,
 *   then true or a schema gives a map), array with items / minItems /
 *   maxItems, string with minLength / maxLength and format date, time,
 *   date-time, uuid, number, integer (minimum / maximum: both given and at
 *   most 1,000 values apart, or a minimum of 0 or 1 alone), boolean, null,
 *   enum, const, anyOf / oneOf, allOf of one schema, $ref to "#", "#/$defs/..."
 *   or "#/definitions/..." (any local JSON pointer; recursion allowed), and
 *   the schemas true and {}.  Annotations (title, description, default,
 *   examples, $schema, $id, $comment, deprecated, readOnly, writeOnly) are
 *   ignored.
 *
 * Every other keyword is refused, naming it and where it is: a constraint
 * that cannot be enforced must not be dropped silently.  Whitespace is
 * limited to nothing, one space, or a newline and up to 16 spaces between
 * tokens, and numbers to 16 digits before and after the point, so that a
 * small model cannot run away in padding.
 */
#include "text/grammar.h"

#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_SCHEMA_DEPTH 64
#define MAX_REPEAT 10000      /* maxLength / maxItems beyond minLength / minItems */
#define MAX_ENUM 10000        /* enum values */
#define MAX_LITERAL_BYTES (1 << 20)

struct jsc {
    struct gbuild b;
    json_t *root;
    char *err;
    size_t errlen;
    bool failed;
    int ws, sep, colon, chr, string, number, integer, value, object, array;
    struct ref_memo {
        char *ref;
        int rule;
    } *refs;
    size_t n_refs, cap_refs;
    size_t literal_bytes;
    char path[512];
};

static int fail(struct jsc *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct jsc *c, const char *fmt, ...)
{
    if (!c->failed) {
        c->failed = true;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(c->err, c->errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static const char *where(const struct jsc *c) { return c->path[0] ? c->path : "/"; }

/* ---------------------------------------------------------- building blocks */

static void bits_set(uint64_t b[4], unsigned lo, unsigned hi)
{
    for (unsigned x = lo; x <= hi; x++)
        b[x >> 6] |= 1ull << (x & 63);
}

static void seq_class(struct jsc *c, struct gseq *s, const uint64_t b[4])
{
    gseq_push(s, GEL(GEL_CHAR, gb_class(&c->b, b)));
}

/* Add "ref a" as an alternative of rule r (nothing when a < 0). */
static void alt_ref(struct jsc *c, int r, int a)
{
    struct gseq s = {0};
    gseq_ref(&s, a);
    gb_alt(&c->b, r, &s);
    gseq_free(&s);
}

/* rule := alternatives given as refs (n of them) */
static int alt_rule(struct jsc *c, const int *alts, size_t n)
{
    int r = gb_rule(&c->b);
    for (size_t i = 0; i < n; i++)
        alt_ref(c, r, alts[i]);
    return r;
}

static int lit(struct jsc *c, const char *s)
{
    return gb_lit_rule(&c->b, s, strlen(s));
}

/* ws := "" | " " | "\n" " "{0,16} */
static int ws_rule(struct jsc *c)
{
    if (c->ws >= 0)
        return c->ws;
    int sp = lit(c, " "), nl_pad = gb_repeat(&c->b, sp, 0, 16, -1);
    int r = gb_rule(&c->b);
    struct gseq s = {0};
    gb_alt(&c->b, r, &s);
    gseq_lit(&c->b, &s, " ", 1);
    gb_alt(&c->b, r, &s);
    gseq_reset(&s);
    gseq_lit(&c->b, &s, "\n", 1);
    gseq_ref(&s, nl_pad);
    gb_alt(&c->b, r, &s);
    gseq_free(&s);
    return c->ws = r;
}

/* a ws "x" ws rule (separators ',' and ':') */
static int punct_rule(struct jsc *c, const char *p)
{
    int r = gb_rule(&c->b);
    struct gseq s = {0};
    gseq_ref(&s, ws_rule(c));
    gseq_lit(&c->b, &s, p, 1);
    gseq_ref(&s, ws_rule(c));
    gb_alt(&c->b, r, &s);
    gseq_free(&s);
    return r;
}

static int sep_rule(struct jsc *c) { return c->sep >= 0 ? c->sep : (c->sep = punct_rule(c, ",")); }
static int colon_rule(struct jsc *c) { return c->colon >= 0 ? c->colon : (c->colon = punct_rule(c, ":")); }

/* One JSON string character: unescaped (valid UTF-8 spelled out byte by
 * byte) or an escape; \u escapes of lone surrogates are not produced. */
static int chr_rule(struct jsc *c)
{
    if (c->chr >= 0)
        return c->chr;
    struct gbuild *b = &c->b;
    int r = gb_rule(b);
    struct gseq s = {0};
    uint64_t plain[4] = {0}, cont[4] = {0}, hex[4] = {0}, b1[4] = {0};
    bits_set(plain, 0x20, 0x7f);
    plain[0x22 >> 6] &= ~(1ull << (0x22 & 63));
    plain[0x5c >> 6] &= ~(1ull << (0x5c & 63));
    bits_set(cont, 0x80, 0xbf);
    bits_set(hex, '0', '9'), bits_set(hex, 'a', 'f'), bits_set(hex, 'A', 'F');
    seq_class(c, &s, plain);
    gb_alt(b, r, &s);
    /* escapes */
    gseq_reset(&s);
    gseq_lit(b, &s, "\\", 1);
    uint64_t esc[4] = {0};
    for (const char *e = "\"\\/bfnrt"; *e; e++)
        bits_set(esc, (unsigned char)*e, (unsigned char)*e);
    seq_class(c, &s, esc);
    gb_alt(b, r, &s);
    gseq_reset(&s);
    gseq_lit(b, &s, "\\u", 2);
    memset(b1, 0, sizeof(b1));
    bits_set(b1, '0', '9'), bits_set(b1, 'a', 'c'), bits_set(b1, 'A', 'C'), bits_set(b1, 'e', 'f'),
        bits_set(b1, 'E', 'F');
    seq_class(c, &s, b1);
    seq_class(c, &s, hex), seq_class(c, &s, hex), seq_class(c, &s, hex);
    gb_alt(b, r, &s);
    gseq_reset(&s);
    gseq_lit(b, &s, "\\u", 2);
    memset(b1, 0, sizeof(b1));
    bits_set(b1, 'd', 'd'), bits_set(b1, 'D', 'D');
    seq_class(c, &s, b1);
    gseq_range(b, &s, '0', '7');
    seq_class(c, &s, hex), seq_class(c, &s, hex);
    gb_alt(b, r, &s);
    /* UTF-8: 2, 3 and 4 bytes, without overlongs and surrogates */
    static const struct {
        unsigned lo0, hi0, lo1, hi1;
        int n_cont; /* continuation bytes after the second */
    } u8[] = {
        {0xc2, 0xdf, 0x80, 0xbf, 0}, {0xe0, 0xe0, 0xa0, 0xbf, 1}, {0xe1, 0xec, 0x80, 0xbf, 1},
        {0xed, 0xed, 0x80, 0x9f, 1}, {0xee, 0xef, 0x80, 0xbf, 1}, {0xf0, 0xf0, 0x90, 0xbf, 2},
        {0xf1, 0xf3, 0x80, 0xbf, 2}, {0xf4, 0xf4, 0x80, 0x8f, 2},
    };
    for (size_t i = 0; i < sizeof(u8) / sizeof(u8[0]); i++) {
        gseq_reset(&s);
        gseq_range(b, &s, u8[i].lo0, u8[i].hi0);
        gseq_range(b, &s, u8[i].lo1, u8[i].hi1);
        for (int k = 0; k < u8[i].n_cont; k++)
            seq_class(c, &s, cont);
        gb_alt(b, r, &s);
    }
    gseq_free(&s);
    return c->chr = r;
}

/* "\"" chr{min,max} "\"" */
static int string_rule(struct jsc *c, long min, long max)
{
    if (min == 0 && max < 0 && c->string >= 0)
        return c->string;
    int body = gb_repeat(&c->b, chr_rule(c), min, max, -1);
    int r = gb_rule(&c->b);
    struct gseq s = {0};
    gseq_lit(&c->b, &s, "\"", 1);
    gseq_ref(&s, body);
    gseq_lit(&c->b, &s, "\"", 1);
    gb_alt(&c->b, r, &s);
    gseq_free(&s);
    if (min == 0 && max < 0)
        c->string = r;
    return r;
}

/* digits: [0-9]{min,max} */
static int digits(struct jsc *c, long min, long max)
{
    int d = gb_rule(&c->b);
    struct gseq s = {0};
    gseq_range(&c->b, &s, '0', '9');
    gb_alt(&c->b, d, &s);
    gseq_free(&s);
    return gb_repeat(&c->b, d, min, max, -1);
}

/* an integer: -? (0 | [1-9][0-9]{0,15}); negative: the minus sign may
 * come; zero: 0 is allowed (minimum 1 leaves it out) */
static int integer_rule(struct jsc *c, bool negative, bool zero)
{
    if (negative && zero && c->integer >= 0)
        return c->integer;
    struct gbuild *b = &c->b;
    int r = gb_rule(b);
    int tail = digits(c, 0, 15);
    struct gseq s = {0};
    for (int neg = 0; neg <= (negative ? 1 : 0); neg++) {
        if (zero) {
            gseq_reset(&s);
            gseq_lit(b, &s, neg ? "-0" : "0", neg ? 2 : 1);
            gb_alt(b, r, &s);
        }
        gseq_reset(&s);
        if (neg)
            gseq_lit(b, &s, "-", 1);
        gseq_range(b, &s, '1', '9');
        gseq_ref(&s, tail);
        gb_alt(b, r, &s);
    }
    gseq_free(&s);
    if (negative && zero)
        c->integer = r;
    return r;
}

/* integer ("." [0-9]{1,16})? ([eE] [-+]? [0-9]{1,3})? */
static int number_rule(struct jsc *c, bool negative)
{
    if (negative && c->number >= 0)
        return c->number;
    struct gbuild *b = &c->b;
    int frac = gb_rule(b), expo = gb_rule(b), r = gb_rule(b);
    struct gseq s = {0};
    gb_alt(b, frac, &s);
    gseq_lit(b, &s, ".", 1);
    gseq_ref(&s, digits(c, 1, 16));
    gb_alt(b, frac, &s);
    gseq_reset(&s);
    gb_alt(b, expo, &s);
    uint64_t e[4] = {0}, pm[4] = {0};
    bits_set(e, 'e', 'e'), bits_set(e, 'E', 'E');
    bits_set(pm, '-', '-'), bits_set(pm, '+', '+');
    int sign = gb_rule(b);
    gb_alt(b, sign, &s);
    seq_class(c, &s, pm);
    gb_alt(b, sign, &s);
    gseq_reset(&s);
    seq_class(c, &s, e);
    gseq_ref(&s, sign);
    gseq_ref(&s, digits(c, 1, 3));
    gb_alt(b, expo, &s);
    gseq_reset(&s);
    gseq_ref(&s, integer_rule(c, negative, true));
    gseq_ref(&s, frac);
    gseq_ref(&s, expo);
    gb_alt(b, r, &s);
    gseq_free(&s);
    if (negative)
        c->number = r;
    return r;
}

/* open ws close | open ws item (sep item)* ws close */
static int container(struct jsc *c, const char *open, const char *close, int item, long min, long max)
{
    struct gbuild *b = &c->b;
    int r = gb_rule(b);
    struct gseq s = {0};
    if (min == 0) {
        gseq_lit(b, &s, open, 1);
        gseq_ref(&s, ws_rule(c));
        gseq_lit(b, &s, close, 1);
        gb_alt(b, r, &s);
        gseq_reset(&s);
    }
    if (max != 0) {
        int items = gb_repeat(b, item, min > 0 ? min : 1, max, sep_rule(c));
        gseq_lit(b, &s, open, 1);
        gseq_ref(&s, ws_rule(c));
        gseq_ref(&s, items);
        gseq_ref(&s, ws_rule(c));
        gseq_lit(b, &s, close, 1);
        gb_alt(b, r, &s);
    }
    gseq_free(&s);
    return r;
}

/* "key" : value */
static int member_rule(struct jsc *c, int key, int value)
{
    int r = gb_rule(&c->b);
    struct gseq s = {0};
    gseq_ref(&s, key);
    gseq_ref(&s, colon_rule(c));
    gseq_ref(&s, value);
    gb_alt(&c->b, r, &s);
    gseq_free(&s);
    return r;
}

static int map_rule(struct jsc *c, int value)
{
    return container(c, "{", "}", member_rule(c, string_rule(c, 0, -1), value), 0, -1);
}

/* Any JSON value (and the object and array rules built on it). */
static int value_rule(struct jsc *c)
{
    if (c->value >= 0)
        return c->value;
    struct gbuild *b = &c->b;
    c->value = gb_rule(b); /* forward: objects and arrays refer back to it */
    c->object = map_rule(c, c->value);
    c->array = container(c, "[", "]", c->value, 0, -1);
    int alts[] = {c->object, c->array, string_rule(c, 0, -1), number_rule(c, true), lit(c, "true"),
                  lit(c, "false"), lit(c, "null")};
    for (size_t i = 0; i < sizeof(alts) / sizeof(alts[0]); i++)
        alt_ref(c, c->value, alts[i]);
    return c->value;
}

/* A JSON value as compact text. */
static int literal_rule(struct jsc *c, const json_t *v)
{
    char *t = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    if (!t)
        return fail(c, "out of memory");
    size_t n = strlen(t);
    c->literal_bytes += n;
    int r = c->literal_bytes > MAX_LITERAL_BYTES
                ? fail(c, "enum/const values at %s are too large (more than %d bytes in all)", where(c),
                       MAX_LITERAL_BYTES)
                : gb_lit_rule(&c->b, t, n);
    free(t);
    return r;
}

/* -------------------------------------------------------------- schemas */

static const char *const annotations[] = {"title",   "description", "default",  "examples",  "$schema",
                                          "$id",     "$comment",    "deprecated", "readOnly", "writeOnly",
                                          "$defs",   "definitions", NULL};
static const char *const constraints[] = {"type",      "properties", "required",  "additionalProperties",
                                          "items",     "minItems",   "maxItems",  "enum",
                                          "const",     "minLength",  "maxLength", "anyOf",
                                          "oneOf",     "allOf",      "$ref",      "format",
                                          "minimum",   "maximum",    NULL};

static bool in_list(const char *const *l, const char *k)
{
    for (; *l; l++)
        if (!strcmp(*l, k))
            return true;
    return false;
}

static int compile(struct jsc *c, const json_t *schema, int depth);

/* Push "/seg" (JSON-pointer escaped, truncated when too long) onto the path;
 * returns the old length. */
static size_t path_push(struct jsc *c, const char *a, const char *b)
{
    size_t old = strlen(c->path);
    snprintf(c->path + old, sizeof(c->path) - old, "/%s%s%s", a, b ? "/" : "", b ? b : "");
    return old;
}

static int compile_at(struct jsc *c, const json_t *schema, int depth, const char *a, const char *b)
{
    size_t old = path_push(c, a, b);
    int r = compile(c, schema, depth + 1);
    c->path[old] = '\0';
    return r;
}

static bool get_count(struct jsc *c, const json_t *s, const char *key, long *out)
{
    const json_t *v = json_object_get(s, key);
    if (!v)
        return true;
    if (!json_is_integer(v) && !(json_is_real(v) && json_real_value(v) == floor(json_real_value(v)))) {
        fail(c, "'%s' at %s must be a non-negative integer", key, where(c));
        return false;
    }
    double d = json_number_value(v);
    if (d < 0 || d > 1e9) {
        fail(c, "'%s' at %s must be a non-negative integer", key, where(c));
        return false;
    }
    *out = (long)d;
    return true;
}

static bool get_range(struct jsc *c, const json_t *s, const char *kmin, const char *kmax, long *min, long *max)
{
    *min = 0, *max = -1;
    if (!get_count(c, s, kmin, min) || !get_count(c, s, kmax, max))
        return false;
    if (*max >= 0 && *max < *min) {
        fail(c, "'%s' is below '%s' at %s: nothing can satisfy it", kmax, kmin, where(c));
        return false;
    }
    if (*max >= 0 && *max - *min > MAX_REPEAT) {
        fail(c, "'%s' at %s is too large: at most %d above '%s' is supported", kmax, where(c), MAX_REPEAT, kmin);
        return false;
    }
    if (*min > MAX_REPEAT) {
        fail(c, "'%s' at %s is too large: at most %d is supported", kmin, where(c), MAX_REPEAT);
        return false;
    }
    return true;
}

/* JSON pointer "#/a/b" inside the root document. */
static const json_t *resolve_pointer(struct jsc *c, const char *ref)
{
    if (ref[0] != '#')
        return NULL;
    const json_t *cur = c->root;
    const char *p = ref + 1;
    if (*p && *p != '/')
        return NULL;
    while (*p == '/' && cur) {
        p++;
        char seg[256];
        size_t n = 0;
        for (; *p && *p != '/'; p++) {
            char ch = *p;
            if (ch == '~' && p[1] == '0')
                ch = '~', p++;
            else if (ch == '~' && p[1] == '1')
                ch = '/', p++;
            if (n + 1 >= sizeof(seg))
                return NULL;
            seg[n++] = ch;
        }
        seg[n] = '\0';
        if (json_is_object(cur)) {
            cur = json_object_get(cur, seg);
        } else if (json_is_array(cur)) {
            char *end;
            long i = strtol(seg, &end, 10);
            cur = *end || i < 0 ? NULL : json_array_get(cur, (size_t)i);
        } else {
            cur = NULL;
        }
    }
    return cur;
}

static int compile_ref(struct jsc *c, const char *ref, int depth)
{
    for (size_t i = 0; i < c->n_refs; i++)
        if (!strcmp(c->refs[i].ref, ref))
            return c->refs[i].rule;
    const json_t *target = resolve_pointer(c, ref);
    if (!target)
        return fail(c, "'$ref' \"%s\" at %s: only references inside the schema (\"#\", \"#/$defs/NAME\") that "
                       "exist are supported",
                    ref, where(c));
    if (c->n_refs == c->cap_refs) {
        size_t nc = c->cap_refs ? c->cap_refs * 2 : 8;
        struct ref_memo *nr = realloc(c->refs, nc * sizeof(*nr));
        if (!nr)
            return fail(c, "out of memory");
        c->refs = nr;
        c->cap_refs = nc;
    }
    int r = gb_rule(&c->b);
    char *copy = strdup(ref);
    if (r < 0 || !copy) {
        free(copy);
        return fail(c, "out of memory");
    }
    c->refs[c->n_refs].ref = copy;
    c->refs[c->n_refs].rule = r;
    c->n_refs++;
    /* compiled from its own place: errors name the pointer */
    char saved[sizeof(c->path)];
    memcpy(saved, c->path, sizeof(saved));
    snprintf(c->path, sizeof(c->path), "%s", ref + 1);
    int t = compile(c, target, depth + 1);
    memcpy(c->path, saved, sizeof(saved));
    if (t < 0)
        return -1;
    alt_ref(c, r, t);
    return r;
}

static int compile_object(struct jsc *c, const json_t *s, int depth)
{
    const json_t *props = json_object_get(s, "properties"), *req = json_object_get(s, "required"),
                 *addl = json_object_get(s, "additionalProperties");
    if (props && !json_is_object(props))
        return fail(c, "'properties' at %s must be an object", where(c));
    if (req && !json_is_array(req))
        return fail(c, "'required' at %s must be an array of strings", where(c));
    size_t i;
    const json_t *v;
    json_array_foreach(req, i, v) if (!json_is_string(v)) return fail(c, "'required' at %s must be an array of strings",
                                                                      where(c));
    size_t n = props ? json_object_size(props) : 0;
    if (n == 0) {
        /* no declared properties: a map of anything, or of the
         * additionalProperties schema; false: the empty object only */
        if (json_is_false(addl))
            return lit(c, "{}");
        if (req && json_array_size(req) > 0)
            return fail(c, "'required' at %s names properties that 'properties' does not declare", where(c));
        if (!addl || json_is_true(addl))
            return value_rule(c), c->object;
        int item = compile_at(c, addl, depth, "additionalProperties", NULL);
        return item < 0 ? -1 : map_rule(c, item);
    }
    if (addl && !json_is_boolean(addl) && !json_is_object(addl))
        return fail(c, "'additionalProperties' at %s must be a boolean or a schema", where(c));
    /* required names must be declared (else the output could not contain them) */
    json_array_foreach(req, i, v) if (!json_object_get(props, json_string_value(v))) return fail(
        c, "'required' at %s names \"%s\", which 'properties' does not declare", where(c), json_string_value(v));
    int *kv = malloc(n * sizeof(int));
    bool *need = calloc(n, sizeof(bool));
    if (!kv || !need) {
        free(kv);
        free(need);
        return fail(c, "out of memory");
    }
    const char *key;
    size_t k = 0;
    json_object_foreach((json_t *)props, key, v) {
        json_t *ks = json_string(key);
        int kr = ks ? literal_rule(c, ks) : fail(c, "out of memory");
        json_decref(ks);
        int vr = kr < 0 ? -1 : compile_at(c, v, depth, "properties", key);
        if (vr < 0) {
            free(kv);
            free(need);
            return -1;
        }
        kv[k] = member_rule(c, kr, vr);
        const json_t *rn;
        json_array_foreach(req, i, rn) if (!strcmp(json_string_value(rn), key)) need[k] = true;
        k++;
    }
    /* rest[i][first]: members i..n-1, `first` when none came before (no comma) */
    struct gbuild *b = &c->b;
    int next_first = -1, next_more = -1; /* rest[i+1][*]; -1 = empty */
    struct gseq sq = {0};
    for (size_t ii = n; ii-- > 0;) {
        int rf = gb_rule(b), rm = gb_rule(b);
        for (int first = 1; first >= 0; first--) {
            int r = first ? rf : rm;
            gseq_reset(&sq);
            if (!first)
                gseq_ref(&sq, sep_rule(c));
            gseq_ref(&sq, kv[ii]);
            if (next_more >= 0)
                gseq_ref(&sq, next_more);
            gb_alt(b, r, &sq);
            if (!need[ii]) {
                gseq_reset(&sq);
                int skip = first ? next_first : next_more;
                if (skip >= 0)
                    gseq_ref(&sq, skip);
                gb_alt(b, r, &sq);
            }
        }
        next_first = rf, next_more = rm;
    }
    free(kv);
    free(need);
    int r = gb_rule(b);
    gseq_reset(&sq);
    gseq_lit(b, &sq, "{", 1);
    gseq_ref(&sq, ws_rule(c));
    gseq_ref(&sq, next_first);
    gseq_ref(&sq, ws_rule(c));
    gseq_lit(b, &sq, "}", 1);
    gb_alt(b, r, &sq);
    gseq_free(&sq);
    return r;
}

static int compile_array(struct jsc *c, const json_t *s, int depth)
{
    long min, max;
    if (!get_range(c, s, "minItems", "maxItems", &min, &max))
        return -1;
    const json_t *items = json_object_get(s, "items");
    int item;
    if (!items || json_is_true(items))
        item = value_rule(c);
    else if (json_is_array(items))
        return fail(c, "'items' as an array (tuple validation) at %s is not supported", where(c));
    else
        item = compile_at(c, items, depth, "items", NULL);
    return item < 0 ? -1 : container(c, "[", "]", item, min, max);
}

/* yyyy-mm-dd, hh:mm:ss(.fff)?(Z|+hh:mm), uuid */
static int format_rule(struct jsc *c, const char *fmt)
{
    struct gbuild *b = &c->b;
    struct gseq s = {0};
    int r = gb_rule(b);
    bool date = !strcmp(fmt, "date") || !strcmp(fmt, "date-time"), time = !strcmp(fmt, "time") || !strcmp(fmt, "date-time");
    gseq_lit(b, &s, "\"", 1);
    if (!strcmp(fmt, "uuid")) {
        static const int groups[] = {8, 4, 4, 4, 12};
        for (int g = 0; g < 5; g++) {
            if (g)
                gseq_lit(b, &s, "-", 1);
            for (int k = 0; k < groups[g]; k++) {
                uint64_t hex[4] = {0};
                bits_set(hex, '0', '9'), bits_set(hex, 'a', 'f');
                seq_class(c, &s, hex);
            }
        }
    } else if (date || time) {
        if (date) { /* [0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01]) */
            int month = gb_rule(b), day = gb_rule(b);
            struct gseq a = {0};
            gseq_lit(b, &a, "0", 1), gseq_range(b, &a, '1', '9'), gb_alt(b, month, &a), gseq_reset(&a);
            gseq_lit(b, &a, "1", 1), gseq_range(b, &a, '0', '2'), gb_alt(b, month, &a), gseq_reset(&a);
            gseq_lit(b, &a, "0", 1), gseq_range(b, &a, '1', '9'), gb_alt(b, day, &a), gseq_reset(&a);
            gseq_range(b, &a, '1', '2'), gseq_range(b, &a, '0', '9'), gb_alt(b, day, &a), gseq_reset(&a);
            gseq_lit(b, &a, "3", 1), gseq_range(b, &a, '0', '1'), gb_alt(b, day, &a);
            gseq_free(&a);
            for (int k = 0; k < 4; k++)
                gseq_range(b, &s, '0', '9');
            gseq_lit(b, &s, "-", 1);
            gseq_ref(&s, month);
            gseq_lit(b, &s, "-", 1);
            gseq_ref(&s, day);
        }
        if (date && time)
            gseq_lit(b, &s, "T", 1);
        if (time) { /* ([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\.[0-9]{1,3})?(Z|[+-]hh:mm) */
            int hour = gb_rule(b), frac = gb_rule(b), zone = gb_rule(b);
            struct gseq a = {0};
            gseq_range(b, &a, '0', '1'), gseq_range(b, &a, '0', '9'), gb_alt(b, hour, &a), gseq_reset(&a);
            gseq_lit(b, &a, "2", 1), gseq_range(b, &a, '0', '3'), gb_alt(b, hour, &a), gseq_reset(&a);
            gb_alt(b, frac, &a);
            gseq_lit(b, &a, ".", 1), gseq_ref(&a, digits(c, 1, 3)), gb_alt(b, frac, &a), gseq_reset(&a);
            gseq_lit(b, &a, "Z", 1), gb_alt(b, zone, &a), gseq_reset(&a);
            uint64_t pm[4] = {0};
            bits_set(pm, '+', '+'), bits_set(pm, '-', '-');
            seq_class(c, &a, pm), gseq_ref(&a, hour), gseq_lit(b, &a, ":", 1), gseq_range(b, &a, '0', '5'),
                gseq_range(b, &a, '0', '9'), gb_alt(b, zone, &a);
            gseq_free(&a);
            gseq_ref(&s, hour);
            for (int k = 0; k < 2; k++)
                gseq_lit(b, &s, ":", 1), gseq_range(b, &s, '0', '5'), gseq_range(b, &s, '0', '9');
            gseq_ref(&s, frac);
            gseq_ref(&s, zone);
        }
    } else {
        gseq_free(&s);
        return fail(c, "'format' \"%s\" at %s is not supported (date, time, date-time, uuid are)", fmt, where(c));
    }
    gseq_lit(b, &s, "\"", 1);
    gb_alt(b, r, &s);
    gseq_free(&s);
    return r;
}

static int compile_string(struct jsc *c, const json_t *s)
{
    const json_t *fmt = json_object_get(s, "format");
    if (fmt) {
        if (!json_is_string(fmt))
            return fail(c, "'format' at %s must be a string", where(c));
        if (json_object_get(s, "minLength") || json_object_get(s, "maxLength"))
            return fail(c, "'format' together with 'minLength'/'maxLength' at %s is not supported", where(c));
        return format_rule(c, json_string_value(fmt));
    }
    long min, max;
    if (!get_range(c, s, "minLength", "maxLength", &min, &max))
        return -1;
    return string_rule(c, min, max);
}

static bool get_bound(struct jsc *c, const json_t *s, const char *key, bool *have, double *out)
{
    const json_t *v = json_object_get(s, key);
    *have = v != NULL;
    if (!v)
        return true;
    if (!json_is_number(v)) {
        fail(c, "'%s' at %s must be a number", key, where(c));
        return false;
    }
    *out = json_number_value(v);
    return true;
}

static int compile_number(struct jsc *c, const json_t *s, bool integer)
{
    bool hmin, hmax;
    double min = 0, max = 0;
    if (!get_bound(c, s, "minimum", &hmin, &min) || !get_bound(c, s, "maximum", &hmax, &max))
        return -1;
    if (!hmin && !hmax)
        return integer ? integer_rule(c, true, true) : number_rule(c, true);
    if (integer && hmin && hmax) {
        double lo = ceil(min), hi = floor(max);
        if (hi < lo)
            return fail(c, "'maximum' is below 'minimum' at %s: nothing can satisfy it", where(c));
        if (hi - lo > 1000)
            return fail(c, "'minimum'/'maximum' at %s: integer ranges of more than 1,000 values are not supported",
                        where(c));
        int r = gb_rule(&c->b);
        struct gseq q = {0};
        for (double x = lo; x <= hi; x++) {
            char t[32];
            snprintf(t, sizeof(t), "%.0f", x);
            gseq_reset(&q);
            gseq_lit(&c->b, &q, t, strlen(t));
            gb_alt(&c->b, r, &q);
        }
        gseq_free(&q);
        return r;
    }
    if (hmin && !hmax && (min == 0 || (integer && min == 1)))
        return integer ? integer_rule(c, false, min == 0) : number_rule(c, false);
    return fail(c, "'%s' at %s is not supported here (integers: both bounds at most 1,000 apart, or a minimum of 0 "
                   "or 1; numbers: a minimum of 0)",
                hmin ? "minimum" : "maximum", where(c));
}

static int compile_type(struct jsc *c, const json_t *s, const char *type, int depth)
{
    if (!strcmp(type, "object"))
        return compile_object(c, s, depth);
    if (!strcmp(type, "array"))
        return compile_array(c, s, depth);
    if (!strcmp(type, "string"))
        return compile_string(c, s);
    if (!strcmp(type, "number"))
        return compile_number(c, s, false);
    if (!strcmp(type, "integer"))
        return compile_number(c, s, true);
    if (!strcmp(type, "boolean")) {
        int a[] = {lit(c, "true"), lit(c, "false")};
        return alt_rule(c, a, 2);
    }
    if (!strcmp(type, "null"))
        return lit(c, "null");
    return fail(c, "'type' \"%s\" at %s is not a JSON schema type", type, where(c));
}

/* Only annotations may stand next to a combinator ($ref, anyOf, ...). */
static bool check_alone(struct jsc *c, const json_t *s, const char *kw)
{
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)s, key, v) {
        if (strcmp(key, kw) && !in_list(annotations, key)) {
            fail(c, "'%s' next to '%s' at %s is not supported (use one or the other)", key, kw, where(c));
            return false;
        }
    }
    return true;
}

static int compile(struct jsc *c, const json_t *s, int depth)
{
    if (c->failed)
        return -1;
    if (depth > MAX_SCHEMA_DEPTH)
        return fail(c, "the schema is nested deeper than %d levels (at %s)", MAX_SCHEMA_DEPTH, where(c));
    if (json_is_true(s))
        return value_rule(c);
    if (json_is_false(s))
        return fail(c, "the schema false at %s cannot be satisfied", where(c));
    if (!json_is_object(s))
        return fail(c, "the schema at %s must be an object or a boolean", where(c));
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)s, key, v) {
        if (!in_list(annotations, key) && !in_list(constraints, key))
            return fail(c, "unsupported schema keyword '%s' at %s", key, where(c));
    }
    if ((v = json_object_get(s, "$ref"))) {
        if (!json_is_string(v))
            return fail(c, "'$ref' at %s must be a string", where(c));
        return check_alone(c, s, "$ref") ? compile_ref(c, json_string_value(v), depth) : -1;
    }
    if ((v = json_object_get(s, "const")))
        return check_alone(c, s, "const") ? literal_rule(c, v) : -1;
    if ((v = json_object_get(s, "enum"))) {
        if (!json_is_array(v) || json_array_size(v) == 0)
            return fail(c, "'enum' at %s must be a non-empty array", where(c));
        if (json_array_size(v) > MAX_ENUM)
            return fail(c, "'enum' at %s has more than %d values", where(c), MAX_ENUM);
        int r = gb_rule(&c->b);
        size_t i;
        const json_t *e;
        json_array_foreach(v, i, e) {
            int lr = literal_rule(c, e);
            if (lr < 0)
                break;
            alt_ref(c, r, lr);
        }
        return c->failed ? -1 : r;
    }
    const char *comb = json_object_get(s, "anyOf") ? "anyOf" : json_object_get(s, "oneOf") ? "oneOf" : NULL;
    if (comb || (v = json_object_get(s, "allOf"))) {
        const char *kw = comb ? comb : "allOf";
        v = json_object_get(s, kw);
        if (!check_alone(c, s, kw))
            return -1;
        if (!json_is_array(v) || json_array_size(v) == 0)
            return fail(c, "'%s' at %s must be a non-empty array of schemas", kw, where(c));
        if (!comb && json_array_size(v) != 1)
            return fail(c, "'allOf' with more than one schema at %s is not supported", where(c));
        int r = gb_rule(&c->b);
        size_t i;
        const json_t *e;
        json_array_foreach(v, i, e) {
            char idx[24];
            snprintf(idx, sizeof(idx), "%zu", i);
            int a = compile_at(c, e, depth, kw, idx);
            if (a < 0)
                break;
            alt_ref(c, r, a);
        }
        return c->failed ? -1 : r;
    }
    const json_t *type = json_object_get(s, "type");
    if (json_is_string(type))
        return compile_type(c, s, json_string_value(type), depth);
    if (json_is_array(type)) {
        if (json_array_size(type) == 0)
            return fail(c, "'type' at %s is an empty list", where(c));
        int r = gb_rule(&c->b);
        size_t i;
        const json_t *e;
        json_array_foreach(type, i, e) {
            if (!json_is_string(e))
                return fail(c, "'type' at %s must be a string or a list of strings", where(c));
            int a = compile_type(c, s, json_string_value(e), depth);
            if (a < 0)
                break;
            alt_ref(c, r, a);
        }
        return c->failed ? -1 : r;
    }
    if (type)
        return fail(c, "'type' at %s must be a string or a list of strings", where(c));
    /* no type: from the keywords present, else any value */
    if (json_object_get(s, "properties") || json_object_get(s, "required") ||
        json_object_get(s, "additionalProperties"))
        return compile_object(c, s, depth);
    if (json_object_get(s, "items") || json_object_get(s, "minItems") || json_object_get(s, "maxItems"))
        return compile_array(c, s, depth);
    if (json_object_get(s, "minLength") || json_object_get(s, "maxLength") || json_object_get(s, "format"))
        return compile_string(c, s);
    if (json_object_get(s, "minimum") || json_object_get(s, "maximum"))
        return compile_number(c, s, false);
    return value_rule(c);
}

static void jsc_init(struct jsc *c, char *err, size_t errlen)
{
    memset(c, 0, sizeof(*c));
    c->err = err;
    c->errlen = errlen;
    c->ws = c->sep = c->colon = c->chr = c->string = c->number = c->integer = c->value = c->object = c->array = -1;
    if (errlen)
        err[0] = '\0';
}

static struct grammar *jsc_finish(struct jsc *c, int root)
{
    for (size_t i = 0; i < c->n_refs; i++)
        free(c->refs[i].ref);
    free(c->refs);
    if (c->failed || root < 0) {
        if (!c->failed)
            snprintf(c->err, c->errlen, c->b.too_big ? "the schema is too large (more than %d grammar rules)"
                                                     : "out of memory",
                     GRAMMAR_MAX_RULES);
        gb_discard(&c->b);
        return NULL;
    }
    return gb_finish(&c->b, root, c->err, c->errlen);
}

struct grammar *grammar_from_json_schema_text(const char *text, size_t len, char *err, size_t errlen)
{
    return grammar_from_json_schema_wrapped(text, len, NULL, NULL, err, errlen);
}

struct grammar *grammar_from_json_schema_wrapped(const char *text, size_t len, const char *prefix, const char *suffix,
                                                 char *err, size_t errlen)
{
    struct jsc c;
    jsc_init(&c, err, errlen);
    json_error_t je;
    c.root = json_loadb(text, len, JSON_DECODE_ANY, &je);
    if (!c.root) {
        snprintf(err, errlen, "the schema is not valid JSON: %s (at byte %d)", je.text, je.position);
        return NULL;
    }
    if (!gb_init(&c.b)) {
        json_decref(c.root);
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    int root = compile(&c, c.root, 0);
    if (root >= 0 && ((prefix && *prefix) || (suffix && *suffix))) {
        int r = gb_rule(&c.b);
        struct gseq s = {0};
        if (prefix)
            gseq_lit(&c.b, &s, prefix, strlen(prefix));
        gseq_ref(&s, root);
        if (suffix)
            gseq_lit(&c.b, &s, suffix, strlen(suffix));
        gb_alt(&c.b, r, &s);
        gseq_free(&s);
        root = r;
    }
    struct grammar *g = jsc_finish(&c, root);
    json_decref(c.root);
    return g;
}

struct grammar *grammar_json_object(char *err, size_t errlen)
{
    struct jsc c;
    jsc_init(&c, err, errlen);
    if (!gb_init(&c.b)) {
        snprintf(err, errlen, "out of memory");
        return NULL;
    }
    value_rule(&c);
    return jsc_finish(&c, c.object);
}
