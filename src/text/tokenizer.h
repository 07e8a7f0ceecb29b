/*
 * tokenizer.h - the engine's view of a model's tokenizer (see tokenizer.c).
 *
 * Built from the `tokenizer.ggml.*` metadata of a GGUF file; the families
 * llama.cpp supports for the models we run are implemented: SentencePiece
 * (`llama`: score-driven merges, byte fallback), byte-level BPE (`gpt2`:
 * ranked merges after a pre-tokenizer split chosen by `tokenizer.ggml.pre`)
 * and WordPiece (`bert`: BERT's normaliser, greedy longest match).
 * Results are meant to equal llama.cpp's token for token.
 *
 * A loaded tokenizer is immutable and self-contained (it copies what it needs
 * from the file): it may outlive the infer_gguf handle and be used from
 * several threads at once.  The public wrappers in include/infer.h
 * (infer_tokenize, ...) are thin layers over these functions.
 */
#ifndef INFER_TOKENIZER_H
#define INFER_TOKENIZER_H

#include "util/common.h"
#include "model/gguf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct tokenizer;

/* Token attributes, from `tokenizer.ggml.token_type` (as llama.cpp's
 * llama_token_attr).  A token may carry several. */
enum {
    TOKEN_ATTR_UNDEFINED = 0,
    TOKEN_ATTR_UNKNOWN = 1 << 0,
    TOKEN_ATTR_UNUSED = 1 << 1,
    TOKEN_ATTR_NORMAL = 1 << 2,
    TOKEN_ATTR_CONTROL = 1 << 3,
    TOKEN_ATTR_USER_DEFINED = 1 << 4,
    TOKEN_ATTR_BYTE = 1 << 5,
    TOKEN_ATTR_NORMALIZED = 1 << 6,
    TOKEN_ATTR_LSTRIP = 1 << 7, /* as a special token, eats the whitespace before it */
    TOKEN_ATTR_RSTRIP = 1 << 8, /* ... and after it */
};

/* Build a tokenizer from g's metadata.  On error *out is NULL and the message
 * names the missing or inconsistent key. */
infer_status tokenizer_load(struct tokenizer **out, const infer_gguf *g);
void tokenizer_free(struct tokenizer *t);

/* Tokenize text[0..len) (any bytes: invalid UTF-8 and NULs are allowed).
 * add_special: BOS/EOS as the metadata asks (add_bos_token/add_eos_token).
 * parse_special: control tokens written in the text (<start_of_turn>,
 * <|im_start|>, ...) become their ids; user-defined tokens always do.
 * Writes up to cap ids to out and returns the full count, which may exceed
 * cap (then call again with a bigger buffer), or a negative infer_status. */
int64_t tokenizer_encode(const struct tokenizer *t, const char *text, size_t len, bool add_special,
                         bool parse_special, int32_t *out, int64_t cap);
/* Same, but no control token is matched where it would overlap one of the
 * literal byte ranges (sorted, disjoint; n_literal may be 0): user text
 * inside a template keeps its "<end_of_turn>" as text.  A range out of order
 * or outside the text is INFER_ERR_INVALID. */
int64_t tokenizer_encode_literal(const struct tokenizer *t, const char *text, size_t len, bool add_special,
                                 bool parse_special, const infer_text_span *literal, size_t n_literal, int32_t *out,
                                 int64_t cap);

/* Raw vocabulary text of a token (not NUL-terminated), or NULL for a bad id. */
const char *tokenizer_piece(const struct tokenizer *t, int32_t id, size_t *len);

/* The bytes a token stands for (▁ -> space, <0xNN> -> byte, GPT-2 byte
 * decoding); control and unknown tokens give "" unless special.  Writes at
 * most cap bytes and returns the full length (snprintf-style, no NUL), or
 * INFER_ERR_INVALID for an id outside the vocabulary. */
int64_t tokenizer_token_to_text(const struct tokenizer *t, int32_t id, bool special, char *buf,
                                size_t cap);
/* Longest text of any token (with special = true). */
size_t tokenizer_max_token_text(const struct tokenizer *t);

/* Text of a whole id sequence, as llama.cpp's llama_detokenize with
 * remove_special = false: the first token loses one leading space when the
 * vocabulary adds a space prefix, and BPE vocabularies that ask for it get
 * llama.cpp's clean-up of spaces before punctuation.  Same return convention
 * as tokenizer_token_to_text; a bad id is INFER_ERR_INVALID. */
int64_t tokenizer_decode(const struct tokenizer *t, const int32_t *ids, size_t n, bool special,
                         char *out, size_t cap);

/* Streaming detokenization: ids are pushed one at a time and their text
 * comes out as soon as it forms complete UTF-8 characters, so a multi-byte
 * character is never split across two writes.  Bytes that can never form
 * valid UTF-8 come out as U+FFFD.  The output is the concatenation of
 * tokenizer_token_to_text (no leading-space or clean-up rules, as llama.cpp
 * streams).  The state is plain data: zero-initialised it is ready, with
 * control tokens hidden; nothing to free. */
#define DETOK_STREAM_HOLD 256
struct detok_stream {
    unsigned char held[DETOK_STREAM_HOLD]; /* text not written yet: an incomplete
                                              character, or output that did not fit */
    uint32_t n_held;
    bool special; /* render control tokens */
};
void detok_stream_init(struct detok_stream *s, bool special);
/* A cap that always lets a push write everything but an incomplete
 * character (>= 64 is enough for common vocabularies). */
size_t detok_stream_bound(const struct tokenizer *t);
/* Write the text that is complete after token id; returns the bytes written.
 * With a small cap, whole characters that do not fit are held back and come
 * out first on the next push or flush (at most DETOK_STREAM_HOLD bytes are
 * held; beyond that text is lost and infer_last_error() says so).  A bad id
 * writes nothing and returns 0. */
size_t detok_stream_push(struct detok_stream *s, const struct tokenizer *t, int32_t id, char *out, size_t cap);
/* The same for bytes that are not a token's (a grammar's closing text). */
size_t detok_stream_push_text(struct detok_stream *s, const char *text, size_t len, char *out, size_t cap);
/* Write what is held (an incomplete character at the end becomes U+FFFD);
 * call again while it returns non-zero if cap may be small. */
size_t detok_stream_flush(struct detok_stream *s, char *out, size_t cap);

int32_t tokenizer_n_vocab(const struct tokenizer *t);
/* Special ids, or -1 when the vocabulary has none. */
int32_t tokenizer_bos(const struct tokenizer *t);
int32_t tokenizer_eos(const struct tokenizer *t);
int32_t tokenizer_eot(const struct tokenizer *t);
int32_t tokenizer_pad(const struct tokenizer *t);
int32_t tokenizer_unk(const struct tokenizer *t);
int32_t tokenizer_sep(const struct tokenizer *t); /* [SEP] of WordPiece */
/* End of generation: EOS, EOT, EOM and the end-of-turn tokens llama.cpp
 * recognises by their text (<end_of_turn>, <|im_end|>, <|eot_id|>, ...). */
bool tokenizer_is_eog(const struct tokenizer *t, int32_t id);
/* Attributes of a token (TOKEN_ATTR_*), 0 for a bad id. */
unsigned tokenizer_attr(const struct tokenizer *t, int32_t id);
/* Id of a vocabulary entry given its raw text (NUL-terminated), or -1. */
int32_t tokenizer_find(const struct tokenizer *t, const char *piece);
bool tokenizer_add_bos(const struct tokenizer *t);
bool tokenizer_add_eos(const struct tokenizer *t);
/* "llama", "gpt2" or "bert" */
const char *tokenizer_model(const struct tokenizer *t);
/* The pre-tokenizer in use ("gpt-2", "llama-bpe", "qwen2", ...; "" for SPM). */
const char *tokenizer_pre(const struct tokenizer *t);
/* A note about metadata the loader worked around (e.g. an unknown pre-tokenizer
 * replaced by gpt-2, an out-of-range pad id ignored), or NULL. */
const char *tokenizer_warning(const struct tokenizer *t);

#endif
