/*
 * unicode.c - UTF-8, code point categories and the regex-free pre-tokenizers
 * of byte-level BPE vocabularies.
 *
 * A BPE tokenizer first cuts text into "words" with a regular expression that
 * depends on the model family (`tokenizer.ggml.pre`); merges never cross a
 * word boundary.  llama.cpp hand-codes the GPT-2 and Llama-3 patterns and runs
 * the others through std::regex over a text in which every non-ASCII code point
 * is replaced by a stand-in for its category.  The functions here are direct
 * scanners for the patterns we support, written to give the same words as
 * llama.cpp (leftmost match, alternatives tried in order, greedy repetition):
 *
 *   gpt-2:    's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
 *   llama-3:  (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
 *             ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *   qwen2:    the llama-3 pattern with \p{N} instead of \p{N}{1,3}
 *   gpt-4o:   [^\r\n\p{L}\p{N}]?U*W+C?|[^\r\n\p{L}\p{N}]?U+W*C?|\p{N}{1,3}|
 *              ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+
 *             U: [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}], W: [\p{Ll}\p{Lm}\p{Lo}\p{M}], C: a
 *             contraction, with U and W as llama.cpp's regex engine sees them
 *             (see upperish)
 *   tekken:   the gpt-4o pattern without C and with \p{N}
 *   smollm:   \p{N} first, then gpt-2 inside each piece
 *   default:  [\p{P}$+<=>^~|]+, then gpt-2, then \p{N}+, then [0-9][0-9][0-9]
 *
 * Each pass works inside the pieces of the previous one.  Positions count code
 * points; every code point inside the text has a non-zero category, so "flags
 * of a position" is zero exactly past the end of the piece.
 */
#include "unicode.h"

#include <string.h>

/* ------------------------------------------------------------ categories */

uint8_t unicode_flags(uint32_t cpt)
{
    if (cpt < 256)
        return unicode_latin1_flags[cpt];
    if (cpt >= 0x110000)
        return UCP_CONTROL;
    size_t lo = 0, hi = unicode_n_ranges; /* find the last start <= cpt */
    while (hi - lo > 1) {
        size_t mid = (lo + hi) / 2;
        if (unicode_range_starts[mid] <= cpt)
            lo = mid;
        else
            hi = mid;
    }
    return unicode_range_flags[lo];
}

/* ------------------------------------------------------------------ UTF-8 */

static inline bool is_cont(unsigned char c) { return (c & 0xC0) == 0x80; }

uint32_t unicode_decode_one(const char *str, size_t len, size_t *pos)
{
    const unsigned char *s = (const unsigned char *)str + *pos;
    size_t avail = len - *pos;
    unsigned char c = s[0];
    uint32_t cpt;
    size_t n;
    if (c < 0x80) {
        *pos += 1;
        return c;
    }
    if (!(c & 0x40)) /* stray continuation byte */
        goto invalid;
    if (!(c & 0x20)) {
        n = 2;
        cpt = c & 0x1F;
    } else if (!(c & 0x10)) {
        n = 3;
        cpt = c & 0x0F;
    } else if (!(c & 0x08)) {
        n = 4;
        cpt = c & 0x07;
    } else {
        goto invalid;
    }
    if (avail < n)
        goto invalid;
    for (size_t i = 1; i < n; i++) {
        if (!is_cont(s[i]))
            goto invalid;
        cpt = (cpt << 6) | (s[i] & 0x3F);
    }
    if (cpt > 0x10FFFF) /* llama.cpp would throw while re-encoding it */
        goto invalid;
    *pos += n;
    return cpt;
invalid:
    *pos += 1;
    return 0xFFFD;
}

size_t unicode_decode(const char *s, size_t len, uint32_t *cpts)
{
    size_t n = 0, pos = 0;
    while (pos < len)
        cpts[n++] = unicode_decode_one(s, len, &pos);
    return n;
}

size_t unicode_encode(uint32_t cpt, char out[4])
{
    if (cpt < 0x80) {
        out[0] = (char)cpt;
        return 1;
    }
    if (cpt < 0x800) {
        out[0] = (char)(0xC0 | (cpt >> 6));
        out[1] = (char)(0x80 | (cpt & 0x3F));
        return 2;
    }
    if (cpt < 0x10000) {
        out[0] = (char)(0xE0 | (cpt >> 12));
        out[1] = (char)(0x80 | ((cpt >> 6) & 0x3F));
        out[2] = (char)(0x80 | (cpt & 0x3F));
        return 3;
    }
    out[0] = (char)(0xF0 | ((cpt >> 18) & 0x07));
    out[1] = (char)(0x80 | ((cpt >> 12) & 0x3F));
    out[2] = (char)(0x80 | ((cpt >> 6) & 0x3F));
    out[3] = (char)(0x80 | (cpt & 0x3F));
    return 4;
}

int unicode_valid_prefix(const unsigned char *s, size_t n)
{
    unsigned char c = s[0];
    unsigned char lo = 0x80, hi = 0xBF; /* allowed range of the second byte */
    int need;
    if (c < 0x80)
        return 1;
    if (c >= 0xC2 && c <= 0xDF) {
        need = 2;
    } else if (c >= 0xE0 && c <= 0xEF) {
        need = 3;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 4;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else {
        return 0;
    }
    for (int i = 1; i < need; i++) {
        if ((size_t)i >= n)
            return -1;
        unsigned char lo_i = i == 1 ? lo : 0x80, hi_i = i == 1 ? hi : 0xBF;
        if (s[i] < lo_i || s[i] > hi_i)
            return 0;
    }
    return need;
}

bool unicode_is_valid(const char *str, size_t n)
{
    const unsigned char *s = (const unsigned char *)str;
    size_t i = 0;
    while (i < n) {
        int k = unicode_valid_prefix(s + i, n - i);
        if (k <= 0)
            return false;
        i += (size_t)k;
    }
    return true;
}

/* ------------------------------------------------------ GPT-2 byte mapping */

/* Bytes ! .. ~, ¡ .. ¬ and ® .. ÿ stand for themselves; the other 68 bytes
 * (controls, space, DEL, C1 controls, NBSP, soft hyphen) are shown as
 * U+0100 + their rank among those 68. */
static inline bool byte_printable(unsigned b)
{
    return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
}

uint32_t unicode_byte_to_cpt(uint8_t b)
{
    if (byte_printable(b))
        return b;
    if (b <= 0x20)
        return 256u + b;
    if (b <= 0xA0)
        return 256u + 33 + (b - 0x7Fu);
    return 256u + 67; /* 0xAD */
}

int unicode_cpt_to_byte(uint32_t cpt)
{
    if (cpt < 256)
        return byte_printable(cpt) ? (int)cpt : -1;
    if (cpt < 256 + 33)
        return (int)(cpt - 256);
    if (cpt < 256 + 67)
        return (int)(0x7F + (cpt - 256 - 33));
    if (cpt == 256 + 67)
        return 0xAD;
    return -1;
}

/* -------------------------------------------------------------- splitting */

static infer_status words_push(struct unicode_words *w, size_t len)
{
    if (len == 0)
        return INFER_OK;
    if (w->n == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 256;
        size_t *p = realloc(w->len, cap * sizeof(*p));
        if (!p)
            return infer_error(INFER_ERR_NOMEM, "out of memory splitting text into words");
        w->len = p;
        w->cap = cap;
    }
    w->len[w->n++] = len;
    return INFER_OK;
}

/* One piece being split: cpts[ini..end), words emitted up to `done`. */
struct piece {
    const uint32_t *c;
    size_t end, done;
    struct unicode_words *w;
    infer_status st;
};

static inline uint8_t pflags(const struct piece *p, size_t pos)
{
    return pos < p->end ? unicode_flags(p->c[pos]) : 0;
}

static inline uint32_t pcpt(const struct piece *p, size_t pos)
{
    return pos < p->end ? p->c[pos] : 0xFFFFFFFFu;
}

/* Emit the word ending at `end`. */
static inline void emit(struct piece *p, size_t end)
{
    if (p->st == INFER_OK)
        p->st = words_push(p->w, end - p->done);
    p->done = end;
}

static inline uint32_t ascii_lower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

/* Length of an English contraction ('s 't 're 've 'm 'll 'd) at pos, or 0. */
static size_t contraction(const struct piece *p, size_t pos, bool fold)
{
    if (p->c[pos] != '\'' || pos + 1 >= p->end)
        return 0;
    uint32_t a = fold ? ascii_lower(p->c[pos + 1]) : p->c[pos + 1];
    if (a == 's' || a == 't' || a == 'm' || a == 'd')
        return 2;
    if (pos + 2 >= p->end)
        return 0;
    uint32_t b = fold ? ascii_lower(p->c[pos + 2]) : p->c[pos + 2];
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l'))
        return 3;
    return 0;
}

#define WLN (UCP_WHITESPACE | UCP_LETTER | UCP_NUMBER)

static void split_gpt2(struct piece *p, size_t pos)
{
    while (pos < p->end) {
        uint32_t c = p->c[pos];
        uint8_t f = pflags(p, pos);
        size_t k = contraction(p, pos, false);
        if (k) {
            emit(p, pos += k);
            continue;
        }
        uint8_t f2 = c == ' ' ? pflags(p, pos + 1) : f; /* optional leading space */
        if (f2 & UCP_LETTER) {
            pos += c == ' ';
            while (pflags(p, pos) & UCP_LETTER)
                pos++;
            emit(p, pos);
            continue;
        }
        if (f2 & UCP_NUMBER) {
            pos += c == ' ';
            while (pflags(p, pos) & UCP_NUMBER)
                pos++;
            emit(p, pos);
            continue;
        }
        if (f2 && !(f2 & WLN)) {
            pos += c == ' ';
            while (pos < p->end && !(pflags(p, pos) & WLN))
                pos++;
            emit(p, pos);
            continue;
        }
        size_t nws = 0;
        while (pflags(p, pos + nws) & UCP_WHITESPACE)
            nws++;
        if (nws > 1 && pos + nws < p->end) { /* \s+(?!\S): leave one for the next word */
            emit(p, pos += nws - 1);
            continue;
        }
        if (nws > 0) {
            emit(p, pos += nws);
            continue;
        }
        emit(p, ++pos);
    }
}

/* Letter classes of the cased patterns as llama.cpp runs them: its regex
 * engine sees every non-ASCII letter as one stand-in character, so
 * [\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}] becomes "a letter other than a-z" and
 * [\p{Ll}\p{Lm}\p{Lo}\p{M}] "a letter other than A-Z"; a non-ASCII letter is
 * both, and combining marks belong to neither. */
static inline bool upperish(const struct piece *p, size_t pos)
{
    return (pflags(p, pos) & UCP_LETTER) && !(p->c[pos] >= 'a' && p->c[pos] <= 'z');
}

static inline bool lowerish(const struct piece *p, size_t pos)
{
    return (pflags(p, pos) & UCP_LETTER) && !(p->c[pos] >= 'A' && p->c[pos] <= 'Z');
}

/* End of the cased letter word starting at the letter s:
 *   U*W+ (greedy, backtracking into U*), else U+W*. */
static size_t cased_word_end(const struct piece *p, size_t s)
{
    size_t u = s;
    while (upperish(p, u))
        u++;
    size_t k = u; /* where W+ starts: the last W at or before u */
    if (!lowerish(p, u)) {
        while (k > s && !lowerish(p, k - 1))
            k--;
        if (k == s) /* no W: U+ and an empty W* */
            return u;
        k--;
    }
    while (lowerish(p, k))
        k++;
    return k;
}

/* How the letter alternative of the llama-3 family of patterns reads. */
enum letters {
    LETTERS_PLAIN,        /* [^\r\n\p{L}\p{N}]?\p{L}+, contractions before it (llama-3, qwen2) */
    LETTERS_CASED,        /* [^\r\n\p{L}\p{N}]?(U*W+|U+W*) (tekken) */
    LETTERS_CASED_SUFFIX, /* the same, each followed by an optional contraction (gpt-4o) */
};

/* llama-3, qwen2, gpt-4o and tekken patterns; max_digits is 3 or 1.  The
 * cased ones also end a punctuation run with [\r\n/]* instead of [\r\n]*. */
static void split_llama3(struct piece *p, size_t pos, size_t max_digits, enum letters letters)
{
    while (pos < p->end) {
        uint32_t c = p->c[pos];
        uint8_t f = pflags(p, pos);
        size_t k = letters == LETTERS_PLAIN ? contraction(p, pos, true) : 0;
        if (k) {
            emit(p, pos += k);
            continue;
        }
        /* [^\r\n\p{L}\p{N}]? then letters */
        if (!(c == '\r' || c == '\n' || (f & UCP_NUMBER)) &&
            ((f & UCP_LETTER) || (pflags(p, pos + 1) & UCP_LETTER))) {
            pos += !(f & UCP_LETTER);
            if (letters == LETTERS_PLAIN) {
                while (pflags(p, pos) & UCP_LETTER)
                    pos++;
            } else {
                pos = cased_word_end(p, pos);
                if (letters == LETTERS_CASED_SUFFIX && pos < p->end)
                    pos += contraction(p, pos, true);
            }
            emit(p, pos);
            continue;
        }
        /* \p{N}{1,max} */
        if (f & UCP_NUMBER) {
            size_t start = pos;
            while (pflags(p, pos) & UCP_NUMBER) {
                if (++pos - start >= max_digits) {
                    emit(p, pos);
                    start = pos;
                }
            }
            emit(p, pos);
            continue;
        }
        /*  ?[^\s\p{L}\p{N}]+[\r\n]* (or [\r\n/]*) */
        uint8_t f2 = c == ' ' ? pflags(p, pos + 1) : f;
        if (!(f2 & WLN)) { /* f is non-zero inside the piece */
            pos += c == ' ';
            while (pos < p->end && !(pflags(p, pos) & WLN))
                pos++;
            for (uint32_t c2; (c2 = pcpt(p, pos)) == '\r' || c2 == '\n' || (c2 == '/' && letters != LETTERS_PLAIN);)
                pos++;
            emit(p, pos);
            continue;
        }
        size_t nws = 0, last_nl = 0;
        while (pflags(p, pos + nws) & UCP_WHITESPACE) {
            uint32_t c2 = p->c[pos + nws];
            if (c2 == '\r' || c2 == '\n')
                last_nl = pos + nws + 1;
            nws++;
        }
        if (last_nl > 0) { /* \s*[\r\n]+ */
            emit(p, pos = last_nl);
            continue;
        }
        if (nws > 1 && pos + nws < p->end) {
            emit(p, pos += nws - 1);
            continue;
        }
        if (nws > 0) {
            emit(p, pos += nws);
            continue;
        }
        emit(p, ++pos);
    }
}

/* Single-pattern passes: length of the match at pos (0 = none). */
typedef size_t (*match_fn)(const struct piece *p, size_t pos);

static size_t match_number(const struct piece *p, size_t pos)
{
    return (pflags(p, pos) & UCP_NUMBER) ? 1 : 0;
}

static size_t match_number_run(const struct piece *p, size_t pos)
{
    size_t n = 0;
    while (pflags(p, pos + n) & UCP_NUMBER)
        n++;
    return n;
}

static inline bool is_default_punct(uint32_t c)
{
    return (unicode_flags(c) & UCP_PUNCT) || (c < 128 && c && strchr("$+<=>^~|", (int)c));
}

static size_t match_punct_run(const struct piece *p, size_t pos)
{
    size_t n = 0;
    while (pos + n < p->end && is_default_punct(p->c[pos + n]))
        n++;
    return n;
}

static size_t match_ascii_digits3(const struct piece *p, size_t pos)
{
    for (size_t i = 0; i < 3; i++) {
        uint32_t c = pcpt(p, pos + i);
        if (c < '0' || c > '9')
            return 0;
    }
    return 3;
}

/* Leftmost matches of one pattern: the matches and the gaps between them
 * become pieces (as std::regex_iterator walks them in llama.cpp). */
static void split_matches(struct piece *p, size_t pos, match_fn m)
{
    while (pos < p->end) {
        size_t k = m(p, pos);
        if (k == 0) {
            pos++;
            continue;
        }
        emit(p, pos);      /* the gap before the match (nothing if empty) */
        emit(p, pos += k); /* the match */
    }
    emit(p, p->end);
}

enum pass { PASS_GPT2, PASS_LLAMA3, PASS_QWEN2, PASS_GPT4O, PASS_TEKKEN, PASS_DIGIT, PASS_DIGITS, PASS_PUNCT, PASS_ASCII3 };

/* Run one pass over every piece of `in` (or over the whole text when in is
 * NULL), appending the new pieces to out. */
static infer_status run_pass(enum pass kind, const uint32_t *cpts, size_t n,
                             const struct unicode_words *in, struct unicode_words *out)
{
    size_t ini = 0;
    size_t n_pieces = in ? in->n : 1;
    for (size_t i = 0; i < n_pieces; i++) {
        size_t len = in ? in->len[i] : n;
        struct piece p = {cpts, ini + len, ini, out, INFER_OK};
        switch (kind) {
        case PASS_GPT2: split_gpt2(&p, ini); break;
        case PASS_LLAMA3: split_llama3(&p, ini, 3, LETTERS_PLAIN); break;
        case PASS_QWEN2: split_llama3(&p, ini, 1, LETTERS_PLAIN); break;
        case PASS_GPT4O: split_llama3(&p, ini, 3, LETTERS_CASED_SUFFIX); break;
        case PASS_TEKKEN: split_llama3(&p, ini, 1, LETTERS_CASED); break;
        case PASS_DIGIT: split_matches(&p, ini, match_number); break;
        case PASS_DIGITS: split_matches(&p, ini, match_number_run); break;
        case PASS_PUNCT: split_matches(&p, ini, match_punct_run); break;
        case PASS_ASCII3: split_matches(&p, ini, match_ascii_digits3); break;
        }
        if (p.st != INFER_OK)
            return p.st;
        ini += len;
    }
    return INFER_OK;
}

infer_status unicode_split_words(enum unicode_split kind, const uint32_t *cpts, size_t n,
                                 struct unicode_words *w)
{
    static const enum pass gpt2[] = {PASS_GPT2}, llama3[] = {PASS_LLAMA3}, qwen2[] = {PASS_QWEN2},
                           gpt4o[] = {PASS_GPT4O}, tekken[] = {PASS_TEKKEN},
                           digits_gpt2[] = {PASS_DIGIT, PASS_GPT2},
                           dflt[] = {PASS_PUNCT, PASS_GPT2, PASS_DIGITS, PASS_ASCII3};
    const enum pass *passes;
    size_t n_passes;
    switch (kind) {
    case UNICODE_SPLIT_LLAMA3: passes = llama3; n_passes = 1; break;
    case UNICODE_SPLIT_QWEN2: passes = qwen2; n_passes = 1; break;
    case UNICODE_SPLIT_GPT4O: passes = gpt4o; n_passes = 1; break;
    case UNICODE_SPLIT_TEKKEN: passes = tekken; n_passes = 1; break;
    case UNICODE_SPLIT_DIGITS_GPT2: passes = digits_gpt2; n_passes = 2; break;
    case UNICODE_SPLIT_DEFAULT: passes = dflt; n_passes = 4; break;
    default: passes = gpt2; n_passes = 1; break;
    }
    if (n == 0)
        return INFER_OK;
    struct unicode_words a = {0}, b = {0};
    infer_status st = INFER_OK;
    const struct unicode_words *in = NULL;
    for (size_t i = 0; i < n_passes && st == INFER_OK; i++) {
        struct unicode_words *out = i + 1 == n_passes ? w : (i % 2 ? &b : &a);
        out->n = out == w ? out->n : 0;
        st = run_pass(passes[i], cpts, n, in, out);
        in = out;
    }
    free(a.len);
    free(b.len);
    return st;
}

/* ------------------------------------------------------ BERT normaliser */

uint32_t unicode_tolower(uint32_t cpt)
{
    if (cpt < 128)
        return cpt >= 'A' && cpt <= 'Z' ? cpt + 32 : cpt;
    size_t lo = 0, hi = unicode_n_lower;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (unicode_lower_from[mid] < cpt)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < unicode_n_lower && unicode_lower_from[lo] == cpt ? unicode_lower_to[lo] : cpt;
}

uint32_t unicode_nfd_first_cpt(uint32_t cpt)
{
    size_t lo = 0, hi = unicode_n_nfd; /* first range ending at or after cpt */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (unicode_nfd_last[mid] < cpt)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < unicode_n_nfd && unicode_nfd_first[lo] <= cpt ? unicode_nfd_nfd[lo] : cpt;
}

bool unicode_is_assigned(uint32_t cpt)
{
    if (cpt >= 0x110000)
        return false;
    size_t lo = 0, hi = unicode_n_assigned_flips; /* flips at or before cpt */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (unicode_assigned_flips[mid] <= cpt)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo % 2 == 0;
}

/* CJK ideographs BERT cuts one by one (the ranges of Google's BERT and
 * HF tokenizers, which llama.cpp copies, with 0x2B920 where 0x2B820 was meant). */
static bool is_cjk_ideograph(uint32_t c)
{
    return (c >= 0x4E00 && c <= 0x9FFF) || (c >= 0x3400 && c <= 0x4DBF) || (c >= 0x20000 && c <= 0x2A6DF) ||
           (c >= 0x2A700 && c <= 0x2B73F) || (c >= 0x2B740 && c <= 0x2B81F) || (c >= 0x2B920 && c <= 0x2CEAF) ||
           (c >= 0xF900 && c <= 0xFAFF) || (c >= 0x2F800 && c <= 0x2FA1F);
}

size_t unicode_bert_words(const uint32_t *cpts, size_t n, bool lowercase, bool strip_accents, uint32_t *out,
                          struct unicode_words *w)
{
    size_t n_out = 0, word = 0; /* code points in the open word */
    for (size_t i = 0; i < n; i++) {
        uint32_t c = strip_accents ? unicode_nfd_first_cpt(cpts[i]) : cpts[i];
        uint8_t f = unicode_flags(c);
        bool single = false;
        if (f & UCP_WHITESPACE)
            goto cut;
        if (c == 0 || c == 0xFFFD || ((f & UCP_CONTROL) && unicode_is_assigned(c)))
            continue;
        if (strip_accents && (f & UCP_MARK))
            continue;
        single = (f & UCP_PUNCT) || (c < 0x7F && (f & UCP_SYMBOL)) || is_cjk_ideograph(c);
        if (!single) {
            out[n_out++] = lowercase ? unicode_tolower(c) : c;
            word++;
            continue;
        }
    cut:
        if (word && words_push(w, word) != INFER_OK)
            return (size_t)-1;
        word = 0;
        if (single) {
            out[n_out++] = lowercase ? unicode_tolower(c) : c;
            if (words_push(w, 1) != INFER_OK)
                return (size_t)-1;
        }
    }
    if (word && words_push(w, word) != INFER_OK)
        return (size_t)-1;
    return n_out;
}
