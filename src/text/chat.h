/*
 * chat.h - chat templates: which prompt format a model expects, and rendering
 * a conversation into that format (see chat.c).
 *
 * A family is detected from marker substrings of the model's
 * `tokenizer.chat_template` (as llama.cpp does; no Jinja is evaluated), then
 * from `general.architecture`, then from special tokens of the vocabulary, and
 * finally falls back to chatml.  Rendering is plain string building: the
 * output is meant to be tokenized with special-token parsing on, and BOS is
 * left to the tokenizer (no family's first turn starts with one).
 *
 * Rendering is incremental: for messages m[0..n) and any k < n,
 * chat_format(m, k, false) is a prefix of chat_format(m, n, any), and when
 * m[k-1] is a user turn, chat_format(m, k, true) followed by the assistant's
 * answer as generated is a prefix of chat_format(m + answer + ..., any).  This
 * is what lets the prefix cache reuse a whole chat history.
 */
#ifndef INFER_CHAT_H
#define INFER_CHAT_H

#include "util/common.h"

#include <stdbool.h>
#include <stddef.h>

/* Same values as the public infer_chat_family. */
enum chat_family {
    CHAT_CHATML = INFER_CHAT_CHATML,
    CHAT_GEMMA = INFER_CHAT_GEMMA,
    CHAT_LLAMA3 = INFER_CHAT_LLAMA3,
    CHAT_LLAMA2 = INFER_CHAT_LLAMA2,
    CHAT_MISTRAL = INFER_CHAT_MISTRAL,
    CHAT_MISTRAL_V3 = INFER_CHAT_MISTRAL_V3,
    CHAT_MISTRAL_V3_TEKKEN = INFER_CHAT_MISTRAL_V3_TEKKEN,
    CHAT_MISTRAL_V7 = INFER_CHAT_MISTRAL_V7,
    CHAT_MISTRAL_V7_TEKKEN = INFER_CHAT_MISTRAL_V7_TEKKEN,
    CHAT_PHI3 = INFER_CHAT_PHI3,
    CHAT_PHI4 = INFER_CHAT_PHI4,
    CHAT_GRANITE = INFER_CHAT_GRANITE,
    CHAT_DEEPSEEK3 = INFER_CHAT_DEEPSEEK3,
    CHAT_N_FAMILIES
};

struct chat_msg {
    const char *role;    /* "system", "user" or "assistant" */
    const char *content; /* NUL-terminated UTF-8 */
};

/* Family from marker substrings of a chat template (or the template text is
 * itself a family name).  Returns false, leaving *out alone, when nothing
 * known matched (NULL or empty text included). */
bool chat_detect_template(const char *tmpl, enum chat_family *out);

/* Family implied by a GGUF architecture name (gemma*, qwen*, phi3, granite*,
 * smollm3); false
 * for architectures shared by several formats (llama) and unknown ones. */
bool chat_detect_arch(const char *arch, enum chat_family *out);

/* Family implied by the special tokens of a vocabulary; has(ctx, piece) says
 * whether the vocabulary holds a token spelled exactly `piece`. */
typedef bool (*chat_vocab_has_fn)(void *ctx, const char *piece);
bool chat_detect_vocab(chat_vocab_has_fn has, void *ctx, enum chat_family *out);

/* Template first, then architecture, then vocabulary (has may be NULL);
 * when none decides, CHAT_CHATML with *fallback = true (fallback may be
 * NULL).  Never fails. */
enum chat_family chat_detect_with_vocab(const char *tmpl, const char *arch, chat_vocab_has_fn has,
                                        void *ctx, bool *fallback);
/* Same without a vocabulary. */
enum chat_family chat_detect(const char *tmpl, const char *arch, bool *fallback);

/* Canonical name ("chatml", "gemma", "llama3", "llama2", "mistral",
 * "mistral-v3", ..., "phi3", "phi4", "granite", "deepseek3"); "unknown" for
 * an out-of-range value. */
const char *chat_family_name(enum chat_family f);
/* Family from a name, case-insensitively; also accepts a few aliases
 * (llama.cpp's "llama2-sys", "mistral-v1", "gemma3", "qwen2", ...).
 * False, leaving *out alone, for an unknown name or NULL. */
bool chat_family_from_name(const char *name, enum chat_family *out);

/* Render msgs (+ the generation prompt when add_gen) into a malloc'ed,
 * NUL-terminated string.  Rules, for every family: at least one message; a
 * "system" message may only come first; roles are "system", "user",
 * "assistant"; content is not NULL.  gemma, llama2 and the mistral families
 * also need user and assistant turns to alternate starting with user, and
 * add_gen needs the last message to be a user turn.  Assistant content is
 * used as given (not trimmed): it is what the model generated, without the
 * end-of-turn token, and it already sits in the KV cache.
 * On error returns NULL with infer_last_error() set (INFER_ERR_INVALID for a
 * bad message list, INFER_ERR_NOMEM); nothing is allocated. */
char *chat_format(enum chat_family f, const struct chat_msg *msgs, size_t n, bool add_gen);
/* Same, and *spans (malloc'ed, *n_spans entries, in order, disjoint; NULL
 * when there are none) gets the byte ranges of message content, which is
 * the user's text: it is to be tokenized without special-token parsing. */
char *chat_format_spans(enum chat_family f, const struct chat_msg *msgs, size_t n, bool add_gen,
                        infer_text_span **spans, size_t *n_spans);

/* chat_format_spans on the public message type. */
char *chat_format_public(infer_chat_family f, const infer_chat_msg *msgs, size_t n, bool add_gen,
                         infer_text_span **spans, size_t *n_spans);

/* End-of-turn markers of the family, NULL-terminated, most specific first
 * (e.g. {"<end_of_turn>", NULL}); generation stops on any of them as well as
 * on EOS.  The caller maps them to token ids and skips those the vocabulary
 * lacks.  An out-of-range family gets an empty list. */
const char *const *chat_eot_markers(enum chat_family f);

#endif
