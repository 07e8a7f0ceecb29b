/*
 * unicode.h - the Unicode pieces the tokenizer needs (see unicode.c):
 * UTF-8 decoding with llama.cpp's rules for invalid input, the category of a
 * code point (table generated into unicode-data.c by contrib/gen-unicode.py),
 * GPT-2's byte <-> code point mapping, and the regex-free pre-tokenizer
 * splits selected by `tokenizer.ggml.pre`.
 */
#ifndef INFER_UNICODE_H
#define INFER_UNICODE_H

#include "util/common.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Category class of a code point (exactly one of the first seven bits) plus
 * the White_Space bit.  Code points past U+10FFFF read as UCP_CONTROL. */
enum {
    UCP_NUMBER = 1 << 0,     /* \p{N} */
    UCP_LETTER = 1 << 1,     /* \p{L} */
    UCP_SEPARATOR = 1 << 2,  /* \p{Z} */
    UCP_MARK = 1 << 3,       /* \p{M} */
    UCP_PUNCT = 1 << 4,      /* \p{P} */
    UCP_SYMBOL = 1 << 5,     /* \p{S} */
    UCP_CONTROL = 1 << 6,    /* \p{C}, including unassigned code points */
    UCP_WHITESPACE = 1 << 7, /* White_Space property (what \s matches) */
};

/* generated tables (unicode-data.c) */
extern const char unicode_data_version[];
extern const uint8_t unicode_latin1_flags[256];
extern const size_t unicode_n_ranges;
extern const uint32_t unicode_range_starts[];
extern const uint8_t unicode_range_flags[];

extern const size_t unicode_n_lower, unicode_n_nfd, unicode_n_assigned_flips;
extern const uint32_t unicode_lower_from[], unicode_lower_to[];
extern const uint32_t unicode_nfd_first[], unicode_nfd_last[], unicode_nfd_nfd[];
extern const uint32_t unicode_assigned_flips[];

uint8_t unicode_flags(uint32_t cpt);
/* Simple (one to one) lower-case mapping; cpt itself when it has none. */
uint32_t unicode_tolower(uint32_t cpt);
/* First code point of the NFD decomposition (what llama.cpp's
 * unicode_cpts_normalize_nfd keeps); cpt itself when it does not decompose. */
uint32_t unicode_nfd_first_cpt(uint32_t cpt);
/* Whether cpt is assigned (general category other than Cn). */
bool unicode_is_assigned(uint32_t cpt);

/* Bytes in the UTF-8 sequence announced by a lead byte (1 for continuation
 * and invalid bytes), as llama.cpp's unicode_len_utf8. */
static inline size_t unicode_len_utf8(unsigned char c)
{
    static const uint8_t len[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
    return len[c >> 4];
}

/* Decode one code point at s[*pos] (pos < len) and advance *pos.  Invalid
 * input yields U+FFFD and advances one byte (llama.cpp's rule; overlong forms
 * and surrogates are accepted as it does, values past U+10FFFF are not). */
uint32_t unicode_decode_one(const char *s, size_t len, size_t *pos);
/* Decode a whole string into cpts (room for len entries); returns the count. */
size_t unicode_decode(const char *s, size_t len, uint32_t *cpts);
/* Encode a code point (<= 0x10FFFF) as UTF-8; returns 1..4 bytes written. */
size_t unicode_encode(uint32_t cpt, char out[4]);
/* Length of a valid UTF-8 sequence at s (strict: no overlongs, surrogates or
 * values past U+10FFFF), 0 if invalid, or -1 if s[0..n) is a valid but
 * incomplete prefix of a sequence. */
int unicode_valid_prefix(const unsigned char *s, size_t n);
/* Whether s[0..n) is entirely valid UTF-8 (strict, as above). */
bool unicode_is_valid(const char *s, size_t n);

/* GPT-2 byte-level BPE: each byte is shown as a printable code point. */
uint32_t unicode_byte_to_cpt(uint8_t b);
/* Inverse mapping; -1 for code points that are not the image of a byte. */
int unicode_cpt_to_byte(uint32_t cpt);

/* Pre-tokenizer splits, named after the `tokenizer.ggml.pre` families whose
 * regular expressions they implement (see unicode.c for the patterns). */
enum unicode_split {
    UNICODE_SPLIT_GPT2,    /* 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+ */
    UNICODE_SPLIT_LLAMA3,  /* llama-3: contractions, letters, \p{N}{1,3}, punctuation, newlines, spaces */
    UNICODE_SPLIT_QWEN2,   /* llama-3's pattern with single digits (\p{N}) */
    UNICODE_SPLIT_GPT4O,   /* o200k: letter runs cut where lower case turns upper, contractions kept */
    UNICODE_SPLIT_TEKKEN,  /* Mistral's tekken: gpt-4o's pattern, single digits, no contractions */
    UNICODE_SPLIT_DIGITS_GPT2, /* \p{N} then GPT-2 (smollm, starcoder, refact, ...) */
    UNICODE_SPLIT_DEFAULT, /* llama.cpp's fallback: punctuation runs, GPT-2, \p{N}+, [0-9]{3} */
};

/* Growable array of word lengths, in code points. */
struct unicode_words {
    size_t *len;
    size_t n, cap;
};

/* Split cpts[0..n) into words; appends their lengths (summing to n) to *w.
 * Returns INFER_OK or INFER_ERR_NOMEM. */
infer_status unicode_split_words(enum unicode_split kind, const uint32_t *cpts, size_t n,
                                 struct unicode_words *w);

/* BERT's pre-tokenizer (llama.cpp's llm_tokenizer_wpm_session::preprocess):
 * with strip_accents every code point becomes the first of its NFD and marks
 * (\p{M}) are dropped; whitespace separates words; NUL, U+FFFD and assigned
 * \p{C} are dropped; with lowercase code points are lower-cased; \p{P},
 * ASCII \p{S} and CJK ideographs are words of their own.  The normalised
 * code points are written to out (room for n) and the word lengths appended
 * to *w; returns the number written, or (size_t)-1 when out of memory. */
size_t unicode_bert_words(const uint32_t *cpts, size_t n, bool lowercase, bool strip_accents, uint32_t *out,
                          struct unicode_words *w);

#endif
