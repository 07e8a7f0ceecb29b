/*
 * grammar.h - byte-level context-free grammars and the matcher that
 * constrains sampling to them (grammar.c), and the JSON-schema compiler that
 * makes them (json_schema.c).
 *
 * A grammar is a list of rules; a rule is a list of alternatives; an
 * alternative is a sequence of elements, each a byte class (a 256-bit set)
 * or a reference to a rule.  Everything works on bytes, not code points:
 * UTF-8 is spelled out in the grammar (a string character is one ASCII byte
 * or a lead byte followed by its continuation bytes), so a token's bytes
 * feed the matcher as the detokenizer writes them and a multi-byte
 * character may be split across tokens.
 *
 * The matcher's state is a set of stacks, as in llama.cpp's grammar
 * sampler: each stack lists positions (indices of elements) still to match,
 * the top being a byte class; an empty stack means the input so far is a
 * complete sentence.  Left recursion is refused when the grammar is built,
 * so expanding a reference always ends.
 */
#ifndef INFER_GRAMMAR_H
#define INFER_GRAMMAR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* element encoding: type in the top 2 bits, the value below */
#define GEL_END 0u          /* end of the rule's last alternative */
#define GEL_ALT 1u          /* end of an alternative, another follows */
#define GEL_CHAR 2u         /* byte class (value: class index) */
#define GEL_REF 3u          /* rule reference (value: rule id) */
#define GEL_TYPE(e) ((e) >> 30)
#define GEL_VAL(e) ((e) & 0x3fffffffu)
#define GEL(t, v) (((uint32_t)(t) << 30) | (uint32_t)(v))

/* Limits that keep a hostile schema from costing more than a clear error. */
#define GRAMMAR_MAX_RULES 200000
#define GRAMMAR_MAX_ELEMENTS 2000000
#define GRAMMAR_MAX_STACKS 64    /* live stacks of a matcher state */
#define GRAMMAR_MAX_DEPTH 1024   /* positions of one stack (nesting) */

struct grammar {
    uint32_t *el;          /* (n_el) all rules' elements, back to back */
    uint32_t n_el, cap_el;
    uint32_t *rule_start;  /* (n_rules) index of each rule's first element */
    uint32_t n_rules, cap_rules;
    uint64_t (*cls)[4];    /* (n_cls) byte classes: bit b of cls[i] set when byte b matches */
    uint32_t n_cls, cap_cls;
    uint32_t root;
    uint32_t *min_len;     /* (n_rules) shortest sentence of each rule, in bytes */
    uint32_t *best_alt;    /* (n_rules) element index of the alternative giving it */
};

/* ---------------------------------------------------------------- building */

/* A sequence under construction (an alternative). */
struct gseq {
    uint32_t *e;
    uint32_t n, cap;
    bool oom;
};

struct gbuild {
    struct grammar *g;
    /* rules under construction: alternatives joined later */
    struct gseq *body;     /* (n_rules) each rule's elements with GEL_ALT between alternatives */
    uint32_t cap_body;
    bool *has_alt;         /* (n_rules) at least one alternative added */
    bool oom, too_big;
};

bool gb_init(struct gbuild *b);
void gb_discard(struct gbuild *b);
/* A new rule with no alternatives yet; returns its id, or -1 (b->oom / too_big). */
int gb_rule(struct gbuild *b);
/* Add an alternative (copied) to rule r. */
void gb_alt(struct gbuild *b, int r, const struct gseq *s);
/* Index of a class (deduplicated). */
uint32_t gb_class(struct gbuild *b, const uint64_t bits[4]);

void gseq_push(struct gseq *s, uint32_t e);
void gseq_ref(struct gseq *s, int rule);
void gseq_free(struct gseq *s);
void gseq_reset(struct gseq *s);
/* Bytes b[0..n) as one class each. */
void gseq_lit(struct gbuild *b, struct gseq *s, const char *bytes, size_t n);
/* One class of the bytes lo..hi. */
void gseq_range(struct gbuild *b, struct gseq *s, unsigned lo, unsigned hi);
/* A rule matching exactly the bytes given. */
int gb_lit_rule(struct gbuild *b, const char *bytes, size_t n);
/* A rule matching item{min,max} (max < 0: unbounded), with sep (a rule, or
 * -1) between items. */
int gb_repeat(struct gbuild *b, int item, long min, long max, int sep);

/* Finish: join alternatives, check for left recursion and rules that match
 * nothing, compute shortest sentences.  Returns the grammar (b is consumed)
 * or NULL with err filled in. */
struct grammar *gb_finish(struct gbuild *b, int root, char *err, size_t errlen);
void grammar_free(struct grammar *g);

/* ---------------------------------------------------------------- matching */

/* A matcher state: n stacks packed as [n][len0][pos...][len1][pos...]... */
struct gstate {
    uint32_t *w;
    uint32_t n_w, cap_w;
};

struct gmatcher {
    const struct grammar *g;
    struct gstate cur;
    struct gstate tmp[2];   /* scratch for walking a token */
    struct gstate *lvl;     /* (cap_lvl) scratch states of a vocabulary walk, by depth */
    uint32_t cap_lvl;
    bool oom;
};

bool gmatcher_init(struct gmatcher *m, const struct grammar *g);
void gmatcher_free(struct gmatcher *m);
/* Back to the start of the grammar. */
void gmatcher_reset(struct gmatcher *m);
/* Advance over bytes[0..n); false (state unchanged) when they do not fit. */
bool gmatcher_accept(struct gmatcher *m, const char *bytes, size_t n);
/* Would bytes[0..n) fit (state unchanged)? */
bool gmatcher_check(struct gmatcher *m, const char *bytes, size_t n);
/* The input so far is a complete sentence. */
bool gmatcher_complete(const struct gmatcher *m);
/* Bytes that may come next (bit b set: byte b). */
void gmatcher_next_bytes(const struct gmatcher *m, uint64_t out[4]);
/* The shortest bytes that complete the input (written up to cap; returns
 * the full length, 0 when already complete). */
size_t gmatcher_shortest_completion(const struct gmatcher *m, char *out, size_t cap);

/* ------------------------------------------------------- token vocabulary */

/* The byte strings of a vocabulary sorted into a trie, so that the tokens
 * allowed in a matcher state are found by one walk that leaves a subtree as
 * soon as its prefix fails. */
struct gvocab;

/* texts[i] of lens[i] bytes for every token id; a token with no bytes (a
 * control token) is never allowed; eog[i] marks end-of-generation tokens,
 * allowed exactly when the input is complete.  NULL when out of memory. */
struct gvocab *gvocab_new(const char *const *texts, const uint32_t *lens, const bool *eog, int32_t n);
void gvocab_free(struct gvocab *v);
int32_t gvocab_n(const struct gvocab *v);
/* First byte of token id's text, -1 when it has none (control, EOG). */
int gvocab_first_byte(const struct gvocab *v, int32_t id);
/* May token id follow the matcher's input? */
bool gvocab_token_ok(const struct gvocab *v, struct gmatcher *m, int32_t id);
/* Advance the matcher over token id (false, unchanged, when it does not fit). */
bool gvocab_accept(const struct gvocab *v, struct gmatcher *m, int32_t id);
/* Every allowed token: bit id of allowed[] (n/64 + 1 words) set.  Returns
 * how many. */
int64_t gvocab_mask(const struct gvocab *v, struct gmatcher *m, uint64_t *allowed);
/* An end-of-generation id (-1 if none). */
int32_t gvocab_eog(const struct gvocab *v);

/* ------------------------------------------------------- JSON schemas */

/* Compile a JSON schema (text) into a grammar whose sentences are the JSON
 * texts that validate against it.  NULL with err naming the keyword or the
 * problem ("unsupported keyword 'pattern' at /properties/a") otherwise. */
struct grammar *grammar_from_json_schema_text(const char *text, size_t len, char *err, size_t errlen);
/* The same between literal bytes (a tool-call tag before and after). */
struct grammar *grammar_from_json_schema_wrapped(const char *text, size_t len, const char *prefix, const char *suffix,
                                                 char *err, size_t errlen);
/* Any JSON object (response_format json_object, ollama's format "json"). */
struct grammar *grammar_json_object(char *err, size_t errlen);

#endif
