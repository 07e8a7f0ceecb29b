/*
 * grammar.c - byte-level grammars, their matcher, and the token vocabulary
 * trie that turns a matcher state into the set of tokens allowed next.
 *
 * See grammar.h for the representation.  The matcher follows the method of
 * llama.cpp's grammar sampler (a set of stacks of element positions,
 * expanded so that every top is a byte class), on bytes instead of code
 * points.  For constrained sampling two questions are asked of a state:
 * "may this token follow?" (walk its bytes: used for the few most likely
 * tokens, which is almost always enough) and "which tokens may follow?"
 * (one walk of the vocabulary trie, pruning a subtree at the first byte
 * that no stack accepts).
 */
#include "text/grammar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define INF_LEN UINT32_MAX

static bool grow(void **p, uint32_t *cap, uint32_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    uint32_t nc = *cap ? *cap : 16;
    while (nc < need)
        nc *= 2;
    void *np = realloc(*p, (size_t)nc * elem);
    if (!np)
        return false;
    *p = np;
    *cap = nc;
    return true;
}

/* ---------------------------------------------------------------- building */

void gseq_push(struct gseq *s, uint32_t e)
{
    if (!grow((void **)&s->e, &s->cap, s->n + 1, sizeof(uint32_t))) {
        s->oom = true;
        return;
    }
    s->e[s->n++] = e;
}

void gseq_ref(struct gseq *s, int rule)
{
    if (rule < 0)
        s->oom = true;
    else
        gseq_push(s, GEL(GEL_REF, (uint32_t)rule));
}

void gseq_free(struct gseq *s)
{
    free(s->e);
    memset(s, 0, sizeof(*s));
}

void gseq_reset(struct gseq *s)
{
    s->n = 0;
    s->oom = false;
}

bool gb_init(struct gbuild *b)
{
    memset(b, 0, sizeof(*b));
    b->g = calloc(1, sizeof(*b->g));
    return b->g != NULL;
}

void gb_discard(struct gbuild *b)
{
    if (b->body)
        for (uint32_t i = 0; i < b->g->n_rules; i++)
            gseq_free(&b->body[i]);
    free(b->body);
    free(b->has_alt);
    grammar_free(b->g);
    memset(b, 0, sizeof(*b));
}

int gb_rule(struct gbuild *b)
{
    struct grammar *g = b->g;
    if (b->oom || b->too_big)
        return -1;
    if (g->n_rules >= GRAMMAR_MAX_RULES) {
        b->too_big = true;
        return -1;
    }
    uint32_t cap = b->cap_body;
    if (!grow((void **)&b->body, &b->cap_body, g->n_rules + 1, sizeof(*b->body)) ||
        !grow((void **)&b->has_alt, &cap, g->n_rules + 1, sizeof(bool))) {
        b->oom = true;
        return -1;
    }
    memset(&b->body[g->n_rules], 0, sizeof(*b->body));
    b->has_alt[g->n_rules] = false;
    return (int)g->n_rules++;
}

void gb_alt(struct gbuild *b, int r, const struct gseq *s)
{
    if (r < 0 || s->oom) {
        b->oom |= s->oom;
        return;
    }
    struct gseq *body = &b->body[r];
    if (b->has_alt[r])
        gseq_push(body, GEL(GEL_ALT, 0));
    b->has_alt[r] = true;
    for (uint32_t i = 0; i < s->n; i++)
        gseq_push(body, s->e[i]);
    if (body->oom)
        b->oom = true;
}

uint32_t gb_class(struct gbuild *b, const uint64_t bits[4])
{
    struct grammar *g = b->g;
    for (uint32_t i = 0; i < g->n_cls; i++)
        if (!memcmp(g->cls[i], bits, sizeof(g->cls[i])))
            return i;
    if (!grow((void **)&g->cls, &g->cap_cls, g->n_cls + 1, sizeof(*g->cls))) {
        b->oom = true;
        return 0;
    }
    memcpy(g->cls[g->n_cls], bits, sizeof(g->cls[0]));
    return g->n_cls++;
}

void gseq_range(struct gbuild *b, struct gseq *s, unsigned lo, unsigned hi)
{
    uint64_t bits[4] = {0};
    for (unsigned c = lo; c <= hi && c < 256; c++)
        bits[c >> 6] |= 1ull << (c & 63);
    gseq_push(s, GEL(GEL_CHAR, gb_class(b, bits)));
}

void gseq_lit(struct gbuild *b, struct gseq *s, const char *bytes, size_t n)
{
    for (size_t i = 0; i < n; i++)
        gseq_range(b, s, (unsigned char)bytes[i], (unsigned char)bytes[i]);
}

int gb_lit_rule(struct gbuild *b, const char *bytes, size_t n)
{
    int r = gb_rule(b);
    struct gseq s = {0};
    gseq_lit(b, &s, bytes, n);
    gb_alt(b, r, &s);
    gseq_free(&s);
    return r;
}

int gb_repeat(struct gbuild *b, int item, long min, long max, int sep)
{
    if (item < 0 || min < 0 || (max >= 0 && max < min)) {
        b->oom |= item < 0;
        return -1;
    }
    struct gseq s = {0};
    int r = gb_rule(b);
    if (max == 0) { /* nothing */
        gb_alt(b, r, &s);
        return r;
    }
    /* tail(first) := the optional rest: items after the mandatory ones */
    int tail = -1;
    if (max < 0) { /* star := "" | sep item star */
        tail = gb_rule(b);
        gb_alt(b, tail, &s);
        if (sep >= 0)
            gseq_ref(&s, sep);
        gseq_ref(&s, item);
        gseq_ref(&s, tail);
        gb_alt(b, tail, &s);
        gseq_reset(&s);
    } else if (max > (min ? min : 1)) {
        /* opt_k := "" | sep item opt_{k-1}: the items after the first
         * max(min, 1), which the rule below spells out */
        for (long k = 1; k <= max - (min ? min : 1) && !b->oom && !b->too_big; k++) {
            int o = gb_rule(b);
            gb_alt(b, o, &s);
            if (sep >= 0)
                gseq_ref(&s, sep);
            gseq_ref(&s, item);
            if (tail >= 0)
                gseq_ref(&s, tail);
            gb_alt(b, o, &s);
            gseq_reset(&s);
            tail = o;
        }
    }
    if (min == 0) {
        /* r := "" | item tail (tail's items carry their separator) */
        gb_alt(b, r, &s);
        gseq_ref(&s, item);
        if (tail >= 0)
            gseq_ref(&s, tail);
        gb_alt(b, r, &s);
    } else {
        for (long i = 0; i < min && !s.oom; i++) {
            if (i > 0 && sep >= 0)
                gseq_ref(&s, sep);
            gseq_ref(&s, item);
            if (s.n > GRAMMAR_MAX_ELEMENTS / 4) {
                b->too_big = true;
                break;
            }
        }
        if (tail >= 0)
            gseq_ref(&s, tail);
        gb_alt(b, r, &s);
    }
    gseq_free(&s);
    return b->oom || b->too_big ? -1 : r;
}

void grammar_free(struct grammar *g)
{
    if (!g)
        return;
    free(g->el);
    free(g->rule_start);
    free(g->cls);
    free(g->min_len);
    free(g->best_alt);
    free(g);
}

static bool el_is_end(uint32_t e) { return GEL_TYPE(e) == GEL_END || GEL_TYPE(e) == GEL_ALT; }

/* Left recursion (a rule reaching itself before matching a byte) would make
 * expansion loop: refuse it.  Edge r -> s when s is referenced in one of r's
 * alternatives after nothing but rules that can match the empty text. */
static bool check_left_recursion(const struct grammar *g, char *err, size_t errlen)
{
    uint32_t n = g->n_rules;
    bool *nullable = calloc(n, 1);
    uint8_t *color = calloc(n, 1);
    uint32_t *estart = calloc((size_t)n + 1, sizeof(uint32_t));
    uint32_t *edges = malloc((size_t)g->n_el * sizeof(uint32_t) + 4);
    uint32_t *stk = malloc((size_t)n * 2 * sizeof(uint32_t) + 8);
    bool ok = nullable && color && estart && edges && stk;
    if (!ok) {
        snprintf(err, errlen, "out of memory");
        goto out;
    }
    for (bool changed = true; changed;) {
        changed = false;
        for (uint32_t r = 0; r < n; r++) {
            if (nullable[r])
                continue;
            bool all = true;
            for (uint32_t p = g->rule_start[r];; p++) {
                uint32_t e = g->el[p];
                if (el_is_end(e)) {
                    if (all) {
                        nullable[r] = changed = true;
                        break;
                    }
                    if (GEL_TYPE(e) == GEL_END)
                        break;
                    all = true;
                } else if (GEL_TYPE(e) == GEL_CHAR || !nullable[GEL_VAL(e)]) {
                    all = false;
                }
            }
        }
    }
    uint32_t ne = 0;
    for (uint32_t r = 0; r < n; r++) {
        estart[r] = ne;
        bool lead = true;
        for (uint32_t p = g->rule_start[r];; p++) {
            uint32_t e = g->el[p];
            if (el_is_end(e)) {
                if (GEL_TYPE(e) == GEL_END)
                    break;
                lead = true;
            } else if (lead) {
                if (GEL_TYPE(e) == GEL_CHAR) {
                    lead = false;
                } else {
                    edges[ne++] = GEL_VAL(e);
                    lead = nullable[GEL_VAL(e)];
                }
            }
        }
    }
    estart[n] = ne;
    /* iterative DFS: stk holds (rule, next edge) pairs; grey seen again = cycle */
    for (uint32_t r0 = 0; r0 < n && ok; r0++) {
        if (color[r0])
            continue;
        uint32_t sp = 0;
        stk[sp++] = r0;
        stk[sp++] = estart[r0];
        color[r0] = 1;
        while (sp) {
            uint32_t r = stk[sp - 2], k = stk[sp - 1];
            if (k == estart[r + 1]) {
                color[r] = 2;
                sp -= 2;
                continue;
            }
            stk[sp - 1]++;
            uint32_t s = edges[k];
            if (color[s] == 1) {
                snprintf(err, errlen, "the schema refers to itself before any text is matched (a $ref cycle)");
                ok = false;
                break;
            }
            if (color[s] == 0) {
                color[s] = 1;
                stk[sp++] = s;
                stk[sp++] = estart[s];
            }
        }
    }
out:
    free(nullable);
    free(color);
    free(estart);
    free(edges);
    free(stk);
    return ok;
}

static uint32_t sat_add(uint32_t a, uint32_t b) { return a > INF_LEN - b ? INF_LEN : a + b; }

/* Shortest sentence of every rule (fixed point; a strict improvement only,
 * so the chosen alternatives never form a cycle). */
static bool compute_min_len(struct grammar *g, char *err, size_t errlen)
{
    uint32_t n = g->n_rules;
    g->min_len = malloc((size_t)n * sizeof(uint32_t));
    g->best_alt = malloc((size_t)n * sizeof(uint32_t));
    if (!g->min_len || !g->best_alt) {
        snprintf(err, errlen, "out of memory");
        return false;
    }
    for (uint32_t r = 0; r < n; r++)
        g->min_len[r] = INF_LEN, g->best_alt[r] = g->rule_start[r];
    for (bool changed = true; changed;) {
        changed = false;
        /* ascending: a rule mostly refers to rules made before it, so
         * one pass settles nearly everything */
        for (uint32_t r = 0; r < n; r++) {
            uint32_t len = 0, alt = g->rule_start[r];
            for (uint32_t p = g->rule_start[r];; p++) {
                uint32_t e = g->el[p];
                if (el_is_end(e)) {
                    if (len < g->min_len[r]) {
                        g->min_len[r] = len;
                        g->best_alt[r] = alt;
                        changed = true;
                    }
                    if (GEL_TYPE(e) == GEL_END)
                        break;
                    len = 0;
                    alt = p + 1;
                } else {
                    len = sat_add(len, GEL_TYPE(e) == GEL_CHAR ? 1 : g->min_len[GEL_VAL(e)]);
                }
            }
        }
    }
    for (uint32_t r = 0; r < n; r++)
        if (g->min_len[r] == INF_LEN) {
            snprintf(err, errlen, "the schema cannot be satisfied by any finite JSON text");
            return false;
        }
    return true;
}

struct grammar *gb_finish(struct gbuild *b, int root, char *err, size_t errlen)
{
    struct grammar *g = b->g;
    if (b->oom || root < 0) {
        snprintf(err, errlen, b->too_big ? "the schema is too large (more than %d grammar rules)" : "out of memory",
                 GRAMMAR_MAX_RULES);
        if (b->too_big || !b->oom)
            snprintf(err, errlen, "the schema is too large (more than %d grammar rules)", GRAMMAR_MAX_RULES);
        gb_discard(b);
        return NULL;
    }
    if (b->too_big) {
        snprintf(err, errlen, "the schema is too large (more than %d grammar rules)", GRAMMAR_MAX_RULES);
        gb_discard(b);
        return NULL;
    }
    uint64_t total = 0;
    for (uint32_t r = 0; r < g->n_rules; r++)
        total += b->body[r].n + 1;
    if (total > GRAMMAR_MAX_ELEMENTS) {
        snprintf(err, errlen, "the schema is too large (more than %d grammar elements)", GRAMMAR_MAX_ELEMENTS);
        gb_discard(b);
        return NULL;
    }
    g->el = malloc((size_t)(total + 1) * sizeof(uint32_t));
    g->rule_start = malloc((size_t)(g->n_rules + 1) * sizeof(uint32_t));
    if (!g->el || !g->rule_start) {
        snprintf(err, errlen, "out of memory");
        gb_discard(b);
        return NULL;
    }
    uint32_t k = 0;
    for (uint32_t r = 0; r < g->n_rules; r++) {
        if (!b->has_alt[r]) {
            snprintf(err, errlen, "the schema cannot be satisfied (an empty enum or anyOf)");
            gb_discard(b);
            return NULL;
        }
        g->rule_start[r] = k;
        memcpy(g->el + k, b->body[r].e, b->body[r].n * sizeof(uint32_t));
        k += b->body[r].n;
        g->el[k++] = GEL(GEL_END, 0);
    }
    g->n_el = k;
    g->root = (uint32_t)root;
    if (!check_left_recursion(g, err, errlen) || !compute_min_len(g, err, errlen)) {
        gb_discard(b);
        return NULL;
    }
    for (uint32_t r = 0; r < g->n_rules; r++)
        gseq_free(&b->body[r]);
    free(b->body);
    free(b->has_alt);
    b->body = NULL;
    b->has_alt = NULL;
    b->g = NULL;
    return g;
}

/* ---------------------------------------------------------------- matching */

/* State layout: w[0] = number of stacks, then per stack its length and
 * positions (bottom first). */

static bool state_reserve(struct gstate *s, uint32_t need)
{
    return grow((void **)&s->w, &s->cap_w, need, sizeof(uint32_t));
}

static void state_clear(struct gstate *s)
{
    if (state_reserve(s, 1)) {
        s->w[0] = 0;
        s->n_w = 1;
    }
}

/* Add a stack to out unless it is there already (or out is full). */
static bool state_add(struct gstate *out, const uint32_t *st, uint32_t len)
{
    uint32_t n = out->w[0], p = 1;
    if (n >= GRAMMAR_MAX_STACKS)
        return true;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t l = out->w[p];
        if (l == len && !memcmp(out->w + p + 1, st, len * sizeof(uint32_t)))
            return true;
        p += 1 + l;
    }
    if (!state_reserve(out, out->n_w + 1 + len))
        return false;
    out->w[out->n_w] = len;
    memcpy(out->w + out->n_w + 1, st, len * sizeof(uint32_t));
    out->n_w += 1 + len;
    out->w[0]++;
    return true;
}

static bool expand(const struct grammar *g, struct gstate *out, uint32_t *st, uint32_t len, int depth);

/* The alternatives of rule r pushed on st[0..len) (st has room for
 * GRAMMAR_MAX_DEPTH + 1 positions). */
static bool expand_rule(const struct grammar *g, struct gstate *out, uint32_t *st, uint32_t len, uint32_t r,
                        int depth)
{
    if (depth > 4096 || len >= GRAMMAR_MAX_DEPTH)
        return true; /* too deep: this path is dropped */
    uint32_t p = g->rule_start[r];
    uint32_t saved = len ? st[len - 1] : 0;
    for (;;) {
        bool ok;
        if (el_is_end(g->el[p])) {
            ok = expand(g, out, st, len, depth + 1);
        } else {
            st[len] = p;
            ok = expand(g, out, st, len + 1, depth + 1);
        }
        if (len)
            st[len - 1] = saved;
        if (!ok)
            return false;
        while (!el_is_end(g->el[p]))
            p++;
        if (GEL_TYPE(g->el[p]) == GEL_END)
            return true;
        p++;
    }
}

/* Expand st[0..len) until its top is a byte class (or it is empty). */
static bool expand(const struct grammar *g, struct gstate *out, uint32_t *st, uint32_t len, int depth)
{
    if (len == 0)
        return state_add(out, st, 0);
    uint32_t pos = st[len - 1], e = g->el[pos];
    if (GEL_TYPE(e) == GEL_CHAR)
        return state_add(out, st, len);
    uint32_t nl = len - 1;
    if (!el_is_end(g->el[pos + 1]))
        st[nl++] = pos + 1;
    return expand_rule(g, out, st, nl, GEL_VAL(e), depth);
}

static uint32_t *scratch_stack(void)
{
    static _Thread_local uint32_t buf[GRAMMAR_MAX_DEPTH + 2];
    return buf;
}

/* out = in advanced over byte c; false only when out of memory. */
static bool state_advance(const struct grammar *g, const struct gstate *in, unsigned c, struct gstate *out)
{
    state_clear(out);
    if (!out->w)
        return false;
    uint32_t *buf = scratch_stack();
    uint32_t n = in->w[0], p = 1;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t len = in->w[p];
        const uint32_t *st = in->w + p + 1;
        p += 1 + len;
        if (len == 0)
            continue;
        uint32_t top = st[len - 1];
        const uint64_t *cls = g->cls[GEL_VAL(g->el[top])];
        if (!(cls[c >> 6] >> (c & 63) & 1))
            continue;
        memcpy(buf, st, (len - 1) * sizeof(uint32_t));
        uint32_t nl = len - 1;
        if (!el_is_end(g->el[top + 1]))
            buf[nl++] = top + 1;
        if (!expand(g, out, buf, nl, 0))
            return false;
    }
    return true;
}

static bool state_copy(struct gstate *dst, const struct gstate *src)
{
    if (!state_reserve(dst, src->n_w))
        return false;
    memcpy(dst->w, src->w, src->n_w * sizeof(uint32_t));
    dst->n_w = src->n_w;
    return true;
}

static bool state_complete(const struct gstate *s)
{
    uint32_t n = s->w[0], p = 1;
    for (uint32_t i = 0; i < n; i++) {
        if (s->w[p] == 0)
            return true;
        p += 1 + s->w[p];
    }
    return false;
}

static void state_next_bytes(const struct grammar *g, const struct gstate *s, uint64_t out[4])
{
    out[0] = out[1] = out[2] = out[3] = 0;
    uint32_t n = s->w[0], p = 1;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t len = s->w[p];
        if (len) {
            const uint64_t *c = g->cls[GEL_VAL(g->el[s->w[p + len]])];
            out[0] |= c[0], out[1] |= c[1], out[2] |= c[2], out[3] |= c[3];
        }
        p += 1 + len;
    }
}

bool gmatcher_init(struct gmatcher *m, const struct grammar *g)
{
    memset(m, 0, sizeof(*m));
    m->g = g;
    gmatcher_reset(m);
    return !m->oom;
}

void gmatcher_free(struct gmatcher *m)
{
    free(m->cur.w);
    free(m->tmp[0].w);
    free(m->tmp[1].w);
    for (uint32_t i = 0; i < m->cap_lvl; i++)
        free(m->lvl[i].w);
    free(m->lvl);
    memset(m, 0, sizeof(*m));
}

void gmatcher_reset(struct gmatcher *m)
{
    state_clear(&m->cur);
    if (!m->cur.w || !expand_rule(m->g, &m->cur, scratch_stack(), 0, m->g->root, 0))
        m->oom = true;
}

/* The state after bytes[0..n) from m->cur, in one of m->tmp (NULL: they do not fit). */
static const struct gstate *walk(struct gmatcher *m, const char *bytes, size_t n)
{
    const struct gstate *s = &m->cur;
    for (size_t i = 0; i < n; i++) {
        struct gstate *o = &m->tmp[i & 1];
        if (!state_advance(m->g, s, (unsigned char)bytes[i], o)) {
            m->oom = true;
            return NULL;
        }
        if (o->w[0] == 0)
            return NULL;
        s = o;
    }
    return s;
}

bool gmatcher_check(struct gmatcher *m, const char *bytes, size_t n) { return walk(m, bytes, n) != NULL; }

bool gmatcher_accept(struct gmatcher *m, const char *bytes, size_t n)
{
    const struct gstate *s = walk(m, bytes, n);
    if (!s)
        return false;
    if (s != &m->cur && !state_copy(&m->cur, s)) {
        m->oom = true;
        return false;
    }
    return true;
}

bool gmatcher_complete(const struct gmatcher *m) { return state_complete(&m->cur); }

void gmatcher_next_bytes(const struct gmatcher *m, uint64_t out[4]) { state_next_bytes(m->g, &m->cur, out); }

struct outbuf {
    char *p;
    size_t n, cap;
};

static void out_byte(struct outbuf *o, unsigned c)
{
    if (o->n < o->cap)
        o->p[o->n] = (char)c;
    o->n++;
}

static unsigned class_lowest(const uint64_t *c)
{
    for (unsigned b = 0; b < 256; b++)
        if (c[b >> 6] >> (b & 63) & 1)
            return b;
    return 0;
}

static void emit_rule(const struct grammar *g, uint32_t r, struct outbuf *o, int depth);

/* The shortest text of the elements from p to the end of its alternative. */
static void emit_from(const struct grammar *g, uint32_t p, struct outbuf *o, int depth)
{
    for (; !el_is_end(g->el[p]); p++) {
        uint32_t e = g->el[p];
        if (GEL_TYPE(e) == GEL_CHAR)
            out_byte(o, class_lowest(g->cls[GEL_VAL(e)]));
        else
            emit_rule(g, GEL_VAL(e), o, depth + 1);
    }
}

static void emit_rule(const struct grammar *g, uint32_t r, struct outbuf *o, int depth)
{
    if (depth > 100000)
        return;
    emit_from(g, g->best_alt[r], o, depth);
}

size_t gmatcher_shortest_completion(const struct gmatcher *m, char *out, size_t cap)
{
    const struct gstate *s = &m->cur;
    if (state_complete(s) || s->w[0] == 0)
        return 0;
    /* the stack whose remainder is shortest */
    uint32_t n = s->w[0], p = 1, best_p = 1;
    uint64_t best = UINT64_MAX;
    for (uint32_t i = 0; i < n; i++) {
        uint32_t len = s->w[p];
        uint64_t total = 0;
        for (uint32_t k = len; k-- > 0;)
            for (uint32_t q = s->w[p + 1 + k]; !el_is_end(m->g->el[q]); q++) {
                uint32_t e = m->g->el[q];
                total += GEL_TYPE(e) == GEL_CHAR ? 1 : m->g->min_len[GEL_VAL(e)];
            }
        if (total < best)
            best = total, best_p = p;
        p += 1 + len;
    }
    struct outbuf o = {out, 0, cap};
    uint32_t len = s->w[best_p];
    for (uint32_t k = len; k-- > 0;)
        emit_from(m->g, s->w[best_p + 1 + k], &o, 0);
    return o.n;
}

/* ------------------------------------------------------- token vocabulary */

struct tnode {
    uint32_t first_child; /* index of the first child in nodes[] */
    uint32_t n_child;
    uint32_t tok_lo, tok_n; /* order[tok_lo .. +tok_n): tokens whose text ends here */
    uint8_t byte;
};

struct gvocab {
    int32_t n;
    char *blob;           /* every token's text */
    uint64_t *off;        /* (n) offset in blob */
    uint32_t *len;        /* (n) */
    bool *eog;            /* (n) */
    int32_t *eog_ids;
    int32_t n_eog;
    uint32_t *order;      /* token ids with text, sorted by text */
    uint32_t n_order;
    struct tnode *nodes;  /* nodes[0] is the root (the empty prefix) */
    uint32_t n_nodes, cap_nodes;
    uint32_t max_len;
};

static const struct gvocab *sort_vocab; /* qsort has no context argument */

static int cmp_tok(const void *a, const void *b)
{
    const struct gvocab *v = sort_vocab;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    uint32_t lx = v->len[x], ly = v->len[y];
    int c = memcmp(v->blob + v->off[x], v->blob + v->off[y], lx < ly ? lx : ly);
    if (c)
        return c;
    if (lx != ly)
        return lx < ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Fill node ni for the sorted tokens order[lo..hi) sharing `depth` bytes. */
static bool build_node(struct gvocab *v, uint32_t ni, uint32_t lo, uint32_t hi, uint32_t depth)
{
    uint32_t i = lo;
    while (i < hi && v->len[v->order[i]] == depth)
        i++;
    v->nodes[ni].tok_lo = lo;
    v->nodes[ni].tok_n = i - lo;
    /* count children (runs of the same byte at depth) */
    uint32_t nc = 0;
    for (uint32_t k = i; k < hi;) {
        unsigned char c = (unsigned char)v->blob[v->off[v->order[k]] + depth];
        while (k < hi && (unsigned char)v->blob[v->off[v->order[k]] + depth] == c)
            k++;
        nc++;
    }
    uint32_t first = v->n_nodes;
    if (!grow((void **)&v->nodes, &v->cap_nodes, v->n_nodes + nc, sizeof(*v->nodes)))
        return false;
    v->n_nodes += nc;
    v->nodes[ni].first_child = first;
    v->nodes[ni].n_child = nc;
    uint32_t ci = first;
    for (uint32_t k = i; k < hi; ci++) {
        unsigned char c = (unsigned char)v->blob[v->off[v->order[k]] + depth];
        uint32_t s = k;
        while (k < hi && (unsigned char)v->blob[v->off[v->order[k]] + depth] == c)
            k++;
        memset(&v->nodes[ci], 0, sizeof(v->nodes[ci]));
        v->nodes[ci].byte = c;
        if (!build_node(v, ci, s, k, depth + 1))
            return false;
    }
    return true;
}

struct gvocab *gvocab_new(const char *const *texts, const uint32_t *lens, const bool *eog, int32_t n)
{
    struct gvocab *v = calloc(1, sizeof(*v));
    if (!v || n <= 0)
        goto fail;
    v->n = n;
    uint64_t total = 0;
    for (int32_t i = 0; i < n; i++)
        total += lens[i];
    v->blob = malloc(total + 1);
    v->off = malloc((size_t)n * sizeof(uint64_t));
    v->len = malloc((size_t)n * sizeof(uint32_t));
    v->eog = calloc((size_t)n, sizeof(bool));
    v->eog_ids = malloc((size_t)n * sizeof(int32_t));
    v->order = malloc((size_t)n * sizeof(uint32_t));
    if (!v->blob || !v->off || !v->len || !v->eog || !v->eog_ids || !v->order)
        goto fail;
    uint64_t o = 0;
    for (int32_t i = 0; i < n; i++) {
        v->off[i] = o;
        v->len[i] = eog && eog[i] ? 0 : lens[i];
        memcpy(v->blob + o, texts[i], v->len[i]);
        o += v->len[i];
        if (eog && eog[i]) {
            v->eog[i] = true;
            v->eog_ids[v->n_eog++] = i;
        } else if (v->len[i]) {
            v->order[v->n_order++] = (uint32_t)i;
            if (v->len[i] > v->max_len)
                v->max_len = v->len[i];
        }
    }
    sort_vocab = v;
    qsort(v->order, v->n_order, sizeof(uint32_t), cmp_tok);
    sort_vocab = NULL;
    if (!grow((void **)&v->nodes, &v->cap_nodes, 1, sizeof(*v->nodes)))
        goto fail;
    memset(&v->nodes[0], 0, sizeof(v->nodes[0]));
    v->n_nodes = 1;
    if (!build_node(v, 0, 0, v->n_order, 0))
        goto fail;
    return v;
fail:
    gvocab_free(v);
    return NULL;
}

void gvocab_free(struct gvocab *v)
{
    if (!v)
        return;
    free(v->blob);
    free(v->off);
    free(v->len);
    free(v->eog);
    free(v->eog_ids);
    free(v->order);
    free(v->nodes);
    free(v);
}

int32_t gvocab_n(const struct gvocab *v) { return v->n; }

int gvocab_first_byte(const struct gvocab *v, int32_t id)
{
    if (id < 0 || id >= v->n || !v->len[id])
        return -1;
    return (unsigned char)v->blob[v->off[id]];
}
int32_t gvocab_eog(const struct gvocab *v) { return v->n_eog ? v->eog_ids[0] : -1; }

bool gvocab_token_ok(const struct gvocab *v, struct gmatcher *m, int32_t id)
{
    if (id < 0 || id >= v->n)
        return false;
    if (v->eog[id])
        return gmatcher_complete(m);
    if (!v->len[id])
        return false;
    return gmatcher_check(m, v->blob + v->off[id], v->len[id]);
}

bool gvocab_accept(const struct gvocab *v, struct gmatcher *m, int32_t id)
{
    if (id < 0 || id >= v->n)
        return false;
    if (v->eog[id])
        return gmatcher_complete(m);
    if (!v->len[id])
        return false;
    return gmatcher_accept(m, v->blob + v->off[id], v->len[id]);
}

struct mask_walk {
    const struct gvocab *v;
    struct gmatcher *m;
    uint64_t *allowed;
    int64_t count;
};

static void walk_node(struct mask_walk *w, uint32_t ni, uint32_t depth, const struct gstate *st)
{
    const struct gvocab *v = w->v;
    const struct tnode *nd = &v->nodes[ni];
    uint64_t next[4];
    state_next_bytes(w->m->g, st, next);
    struct gstate *o = &w->m->lvl[depth + 1];
    for (uint32_t c = 0; c < nd->n_child; c++) {
        const struct tnode *ch = &v->nodes[nd->first_child + c];
        if (!(next[ch->byte >> 6] >> (ch->byte & 63) & 1))
            continue;
        if (!state_advance(w->m->g, st, ch->byte, o)) {
            w->m->oom = true;
            return;
        }
        if (o->w[0] == 0)
            continue;
        for (uint32_t k = 0; k < ch->tok_n; k++) {
            uint32_t id = v->order[ch->tok_lo + k];
            w->allowed[id >> 6] |= 1ull << (id & 63);
            w->count++;
        }
        if (ch->n_child)
            walk_node(w, nd->first_child + c, depth + 1, o);
        nd = &v->nodes[ni];
    }
}

int64_t gvocab_mask(const struct gvocab *v, struct gmatcher *m, uint64_t *allowed)
{
    memset(allowed, 0, ((size_t)v->n / 64 + 1) * sizeof(uint64_t));
    uint32_t need = v->max_len + 2;
    if (m->cap_lvl < need) {
        struct gstate *nl = realloc(m->lvl, need * sizeof(*nl));
        if (!nl) {
            m->oom = true;
            return 0;
        }
        memset(nl + m->cap_lvl, 0, (need - m->cap_lvl) * sizeof(*nl));
        m->lvl = nl;
        m->cap_lvl = need;
    }
    struct mask_walk w = {v, m, allowed, 0};
    walk_node(&w, 0, 0, &m->cur);
    if (gmatcher_complete(m))
        for (int32_t i = 0; i < v->n_eog; i++) {
            allowed[v->eog_ids[i] >> 6] |= 1ull << (v->eog_ids[i] & 63);
            w.count++;
        }
    return w.count;
}

/* ---------------------------------------------------------- public API */

#include "util/common.h"

infer_status infer_grammar_from_json_schema(infer_grammar **out, const char *schema, size_t len)
{
    return infer_grammar_from_json_schema_wrapped(out, schema, len, NULL, NULL);
}

infer_status infer_grammar_from_json_schema_wrapped(infer_grammar **out, const char *schema, size_t len,
                                                    const char *prefix, const char *suffix)
{
    char err[512];
    *out = NULL;
    if (!schema)
        return infer_error(INFER_ERR_INVALID, "no schema");
    struct grammar *g = grammar_from_json_schema_wrapped(schema, len, prefix, suffix, err, sizeof(err));
    if (!g)
        return infer_error(strstr(err, "out of memory") ? INFER_ERR_NOMEM
                           : strstr(err, "not valid JSON") ? INFER_ERR_INVALID
                                                           : INFER_ERR_UNSUPPORTED,
                           "%s", err);
    *out = (infer_grammar *)g;
    return INFER_OK;
}

infer_status infer_grammar_json_object(infer_grammar **out)
{
    char err[256];
    struct grammar *g = grammar_json_object(err, sizeof(err));
    *out = (infer_grammar *)g;
    return g ? INFER_OK : infer_error(INFER_ERR_NOMEM, "%s", err);
}

void infer_grammar_free(infer_grammar *g) { grammar_free((struct grammar *)g); }

bool infer_grammar_match(const infer_grammar *g, const char *text, size_t len)
{
    struct gmatcher m;
    if (!g || !gmatcher_init(&m, (const struct grammar *)g))
        return false;
    bool ok = gmatcher_accept(&m, text, len) && gmatcher_complete(&m);
    gmatcher_free(&m);
    return ok;
}
