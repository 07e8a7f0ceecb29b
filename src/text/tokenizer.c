/*
 * tokenizer.c - SentencePiece and byte-level BPE tokenizers built from a
 * GGUF file's `tokenizer.ggml.*` metadata, meant to give llama.cpp's ids.
 *
 * Encoding runs in three steps, as llama.cpp's llama_vocab::tokenize:
 *
 *  1. Partition.  Text that spells a special token is cut out first, longest
 *     token first: user-defined tokens always (Gemma's runs of spaces, tabs
 *     and newlines, its HTML tags), control and unknown tokens only when the
 *     caller asks to parse special text (chat templates do, user text does not).
 *  2. The raw fragments in between are tokenized by the model's algorithm:
 *     - SPM (`llama`): spaces become U+2581 "▁" (one is prepended to a fragment
 *       at the start or after a special token when add_space_prefix), the
 *       fragment is cut into UTF-8 characters, and adjacent symbols are merged
 *       while their concatenation is a token, best score first (ties: leftmost).
 *       Symbols left that are not tokens fall back to <0xNN> byte tokens.
 *     - BPE (`gpt2`): the fragment is split into words by the pre-tokenizer of
 *       `tokenizer.ggml.pre` (unicode.c), each byte is shown as a printable
 *       code point (GPT-2's byte map), and adjacent symbols are merged by
 *       `tokenizer.ggml.merges` rank, lowest first (ties: leftmost).
 *     - WordPiece (`bert`): the fragment is normalised and cut into words as
 *       BERT does (unicode_bert_words: accents stripped through NFD, lower
 *       case, punctuation and CJK ideographs alone), "▁" is prepended to each
 *       word (the converter writes word-initial pieces with it and "##"
 *       continuations without), and the word is covered greedily by the
 *       longest tokens from the left; a word that cannot be covered is [UNK].
 *     Both merge loops keep a binary heap of candidate pairs over a linked list
 *     of symbols, so a piece of n characters costs O(n log n); SPM fragments
 *     are first cut at word starts that no merge can cross (spm_tokenize).
 *  3. BOS/EOS are added as the metadata says (add_bos_token, add_eos_token);
 *     WordPiece always adds [CLS] and [SEP], as llama.cpp does.
 *
 * Token texts are found through an open-addressing hash map (Gemma has 262144
 * tokens); merges through another keyed by the "left right" merge string.
 * Detokenization (whole sequences, and streams that only release complete
 * UTF-8 characters) uses a table of every token's text built at load time.
 * Special tokens, attributes and end-of-generation ids follow llama.cpp's
 * llama_vocab::impl::load, including the tokens it recognises by their text.
 */
#include "tokenizer.h"

#include "unicode.h"

#include <ctype.h>
#include <math.h>
#include <string.h>

enum tok_kind { TOK_SPM, TOK_BPE, TOK_WPM };

struct tok_entry {
    uint32_t off, len; /* raw text in t->text */
    float score;
    uint32_t attr;
};

struct tokenizer {
    enum tok_kind kind;
    enum unicode_split split;
    char model[16];
    char pre[64];
    int32_t n_vocab;
    struct tok_entry *tok;
    char *text;               /* all raw token texts */
    uint32_t *tok_hash;       /* slot = id + 1, 0 = empty */
    uint32_t tok_mask;
    /* BPE merges: merge i is merge_text[merge_off[i] ..][0 .. merge_len[i]),
     * "left right" with the space at merge_split[i] */
    char *merge_text;
    uint32_t *merge_off, *merge_len, *merge_split;
    uint32_t n_merges;
    uint32_t *merge_hash; /* slot = rank + 1 */
    uint32_t merge_mask;
    /* detokenized text of every token (as if special): render[render_off[id] ..
     * render_off[id + 1]) */
    char *render;
    uint32_t *render_off;
    size_t max_render;
    int32_t bos, eos, eot, eom, unk, sep, pad;
    int32_t fim[6]; /* prefix, suffix, middle, pad, repo, file separator */
    int32_t byte_tok[256]; /* SPM byte fallback: <0xNN> (or the byte itself), -1 */
    bool spm_split;        /* SPM fragments may be cut into words (see spm_tokenize) */
    int32_t *spm_cross;    /* tokens with a U+2581 after their first byte, other than runs of it */
    size_t n_spm_cross;
    bool add_bos, add_eos, add_space_prefix, ignore_merges, clean_spaces;
    bool lowercase, strip_accents; /* WordPiece normaliser */
    uint32_t max_token_len;        /* bytes of the longest token text */
    int32_t *special; /* partition candidates, longest text first */
    size_t n_special;
    int32_t *eog;
    size_t n_eog;
    char warning[256];
};

#define MAX_TEXT_BYTES ((size_t)256 << 20) /* offsets below stay in uint32_t */
#define SPACE "\xe2\x96\x81"                /* U+2581, SentencePiece's space */
#define MAX_RENDER ((size_t)1 << 16)        /* bytes of a token's text, see render_token */

/* --------------------------------------------------------------- hashing */

#define HASH_SEED 0xcbf29ce484222325ull

static inline uint32_t hash_mix(uint64_t h) { return (uint32_t)(h ^ (h >> 29) ^ (h >> 47)); }

static uint64_t hash_state(const char *s, size_t n)
{
    uint64_t h = HASH_SEED;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 0x100000001b3ull;
    }
    return h;
}

static int32_t tok_lookup(const struct tokenizer *t, const char *s, size_t n)
{
    uint32_t i = hash_mix(hash_state(s, n)) & t->tok_mask;
    for (;; i = (i + 1) & t->tok_mask) {
        uint32_t slot = t->tok_hash[i];
        if (!slot)
            return -1;
        const struct tok_entry *e = &t->tok[slot - 1];
        if (e->len == n && memcmp(t->text + e->off, s, n) == 0)
            return (int32_t)(slot - 1);
    }
}

/* Rank of the merge "l r", or -1. */
static int32_t merge_rank(const struct tokenizer *t, const char *l, size_t ln, const char *r, size_t rn)
{
    uint64_t h = hash_state(l, ln);
    h ^= ' ';
    h *= 0x100000001b3ull;
    for (size_t k = 0; k < rn; k++) {
        h ^= (unsigned char)r[k];
        h *= 0x100000001b3ull;
    }
    uint32_t i = hash_mix(h) & t->merge_mask;
    for (;; i = (i + 1) & t->merge_mask) {
        uint32_t slot = t->merge_hash[i];
        if (!slot)
            return -1;
        uint32_t m = slot - 1;
        const char *s = t->merge_text + t->merge_off[m];
        if (t->merge_split[m] == ln && t->merge_len[m] == ln + 1 + rn && memcmp(s, l, ln) == 0 &&
            memcmp(s + ln + 1, r, rn) == 0)
            return (int32_t)m;
    }
}

static uint32_t table_size(uint64_t n)
{
    uint32_t size = 16;
    while (size < 2 * n)
        size *= 2;
    return size;
}

/* ------------------------------------------------------------- load helpers */

/* Quote at most 40 bytes of s for an error message. */
static const char *quote(const char *s, size_t n, char *buf, size_t cap)
{
    size_t o = 0;
    for (size_t i = 0; i < n && o + 6 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (i == 40) {
            o += (size_t)snprintf(buf + o, cap - o, "...");
            break;
        }
        if (c < 0x20 || c == 0x7F)
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02X", c);
        else
            buf[o++] = (char)c;
    }
    buf[o] = '\0';
    return buf;
}

static bool is_int_type(uint32_t type)
{
    return type <= INFER_GGUF_INT32 || type == INFER_GGUF_UINT64 || type == INFER_GGUF_INT64 ||
           type == INFER_GGUF_BOOL;
}

/* Optional boolean key: false if present with a non-boolean/integer type. */
static bool get_flag(const infer_gguf *g, const char *key, bool *val, infer_status *st)
{
    const struct gguf_kv *kv = gguf_get_kv(g, key);
    if (!kv)
        return true;
    if (!is_int_type(kv->v.type)) {
        *st = infer_error(INFER_ERR_FORMAT, "%s has type %s, expected bool", key, gguf_type_name(kv->v.type));
        return false;
    }
    *val = infer_gguf_get_bool(g, key, *val);
    return true;
}

/* Optional token id key.  required: out of range is an error (else ignored
 * with a warning). */
static infer_status get_id(struct tokenizer *t, const infer_gguf *g, const char *key, int32_t *id,
                           bool required)
{
    if (*id >= t->n_vocab)
        *id = -1; /* default out of range: disabled */
    const struct gguf_kv *kv = gguf_get_kv(g, key);
    if (!kv)
        return INFER_OK;
    if (!is_int_type(kv->v.type) || kv->v.type == INFER_GGUF_BOOL)
        return infer_error(INFER_ERR_FORMAT, "%s has type %s, expected an integer token id", key,
                           gguf_type_name(kv->v.type));
    int64_t v = infer_gguf_get_int(g, key, -1);
    if (v < 0 || v >= t->n_vocab) {
        if (required)
            return infer_error(INFER_ERR_FORMAT, "%s = %lld is out of range (the vocabulary has %d tokens)",
                               key, (long long)v, t->n_vocab);
        if (!t->warning[0])
            snprintf(t->warning, sizeof(t->warning), "%s = %lld is out of range, ignored", key, (long long)v);
        return INFER_OK;
    }
    *id = (int32_t)v;
    return INFER_OK;
}

/* Pre-tokenizers by `tokenizer.ggml.pre` value, with the flags llama.cpp sets
 * for each (llama_vocab::impl::load). */
static const struct pre_info {
    const char *name;
    enum unicode_split split;
    bool ignore_merges, add_bos, keep_spaces; /* keep_spaces: no clean-up on decode */
} pre_table[] = {
    {"default", UNICODE_SPLIT_DEFAULT, 0, 0, 0}, {"llama3", UNICODE_SPLIT_LLAMA3, 1, 1, 0},
    {"llama-v3", UNICODE_SPLIT_LLAMA3, 1, 1, 0}, {"llama-bpe", UNICODE_SPLIT_LLAMA3, 1, 1, 0},
    {"falcon3", UNICODE_SPLIT_LLAMA3, 1, 1, 0}, {"falcon-h1", UNICODE_SPLIT_LLAMA3, 1, 1, 0},
    {"pixtral", UNICODE_SPLIT_LLAMA3, 1, 1, 0}, {"midm-2.0", UNICODE_SPLIT_LLAMA3, 1, 1, 0},
    {"lfm2", UNICODE_SPLIT_LLAMA3, 1, 1, 0}, {"dbrx", UNICODE_SPLIT_LLAMA3, 0, 0, 0},
    {"smaug-bpe", UNICODE_SPLIT_LLAMA3, 0, 0, 0}, {"glm4", UNICODE_SPLIT_LLAMA3, 0, 0, 0},
    {"chatglm-bpe", UNICODE_SPLIT_LLAMA3, 0, 0, 0}, {"gpt-2", UNICODE_SPLIT_GPT2, 0, 0, 0},
    {"phi-2", UNICODE_SPLIT_GPT2, 0, 0, 0}, {"mpt", UNICODE_SPLIT_GPT2, 0, 0, 0},
    {"olmo", UNICODE_SPLIT_GPT2, 0, 0, 0}, {"jais", UNICODE_SPLIT_GPT2, 0, 0, 0},
    {"exaone4", UNICODE_SPLIT_GPT2, 0, 0, 0}, {"roberta-bpe", UNICODE_SPLIT_GPT2, 0, 0, 0},
    {"trillion", UNICODE_SPLIT_GPT2, 0, 0, 1}, {"granite-docling", UNICODE_SPLIT_GPT2, 0, 0, 1},
    {"qwen2", UNICODE_SPLIT_QWEN2, 0, 0, 1}, {"deepseek-r1-qwen", UNICODE_SPLIT_QWEN2, 0, 0, 1},
    {"stablelm2", UNICODE_SPLIT_QWEN2, 0, 0, 0}, {"megrez", UNICODE_SPLIT_QWEN2, 0, 0, 0},
    {"hunyuan", UNICODE_SPLIT_QWEN2, 0, 0, 1}, {"solar-open", UNICODE_SPLIT_QWEN2, 0, 0, 1},
    {"grok-2", UNICODE_SPLIT_QWEN2, 0, 0, 1}, {"smollm", UNICODE_SPLIT_DIGITS_GPT2, 0, 0, 1},
    {"starcoder", UNICODE_SPLIT_DIGITS_GPT2, 0, 0, 0}, {"refact", UNICODE_SPLIT_DIGITS_GPT2, 0, 0, 0},
    {"command-r", UNICODE_SPLIT_DIGITS_GPT2, 0, 0, 1}, {"codeshell", UNICODE_SPLIT_DIGITS_GPT2, 0, 0, 0},
    {"exaone", UNICODE_SPLIT_DIGITS_GPT2, 0, 0, 0}, {"minerva-7b", UNICODE_SPLIT_DIGITS_GPT2, 0, 0, 0},
    {"gpt-4o", UNICODE_SPLIT_GPT4O, 0, 0, 1}, {"llama4", UNICODE_SPLIT_GPT4O, 0, 0, 1},
    {"kanana2", UNICODE_SPLIT_GPT4O, 0, 0, 1}, {"talkie", UNICODE_SPLIT_GPT4O, 0, 0, 1},
    {"minimax-m2", UNICODE_SPLIT_GPT4O, 0, 0, 1}, {"tekken", UNICODE_SPLIT_TEKKEN, 1, 1, 1},
};

/* Texts llama.cpp treats as end of generation when present (its
 * special_eog_ids).  This includes "</s>" even where it is an HTML tag, as in
 * Gemma 3: llama.cpp then stops there and does not cut it out of plain text. */
static const char *const eog_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>", "[e~[",
};
/* EOT candidates when tokenizer.ggml.eot_token_id is absent, in preference order. */
static const char *const eot_texts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|end_of_text|>",
    "<EOT>", "_<EOT>", "[EOT]", "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>",
    "<end_of_utterance>",
};
/* Fill-in-the-middle tokens recognised by their text when their ids are
 * not in the metadata: prefix, suffix, middle, pad, repo, file separator. */
static const char *const fim_texts[6][8] = {
    {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "begin\xef\xbd\x9c>",
     "<PRE>", "\xe2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>"},
    {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "hole\xef\xbd\x9c>",
     "<SUF>", "\xe2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>"},
    {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xef\xbd\x9c" "fim\xe2\x96\x81" "end\xef\xbd\x9c>",
     "<MID>", "\xe2\x96\x81<MID>", "<|code_middle|>", "<|middle|>"},
    {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"},
    {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"},
    {"<|file_sep|>"},
};
static const char *const fim_keys[6] = {
    "tokenizer.ggml.fim_pre_token_id", "tokenizer.ggml.fim_suf_token_id", "tokenizer.ggml.fim_mid_token_id",
    "tokenizer.ggml.fim_pad_token_id", "tokenizer.ggml.fim_rep_token_id", "tokenizer.ggml.fim_sep_token_id",
};

#define N_ELEMS(a) (sizeof(a) / sizeof((a)[0]))

static int32_t find_first(const struct tokenizer *t, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n && list[i]; i++) {
        int32_t id = tokenizer_find(t, list[i]);
        if (id >= 0)
            return id;
    }
    return -1;
}

static void make_control(struct tokenizer *t, int32_t id)
{
    if (id >= 0)
        t->tok[id].attr |= TOKEN_ATTR_CONTROL;
}

static void eog_add(struct tokenizer *t, int32_t id)
{
    if (id < 0)
        return;
    for (size_t i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id)
            return;
    t->eog[t->n_eog++] = id;
}

static void eog_remove(struct tokenizer *t, int32_t id)
{
    for (size_t i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id) {
            t->eog[i] = t->eog[--t->n_eog];
            return;
        }
}

/* llama.cpp recognises some special tokens only by their text (converters do
 * not always set their ids); tokens found this way become control tokens. */
static infer_status detect_special(struct tokenizer *t)
{
    t->eog = malloc((N_ELEMS(eog_texts) + 6) * sizeof(*t->eog));
    if (!t->eog)
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    if (t->eot < 0)
        make_control(t, t->eot = find_first(t, eot_texts, N_ELEMS(eot_texts)));
    if (t->eom < 0)
        make_control(t, t->eom = tokenizer_find(t, "<|eom_id|>"));
    for (int k = 0; k < 6; k++)
        if (t->fim[k] < 0)
            make_control(t, t->fim[k] = find_first(t, fim_texts[k], N_ELEMS(fim_texts[k])));
    /* control tokens named "unused" are unused */
    for (int32_t id = 0; id < t->n_vocab; id++) {
        struct tok_entry *e = &t->tok[id];
        if ((e->attr & TOKEN_ATTR_CONTROL) && memmem(t->text + e->off, e->len, "unused", 6))
            e->attr |= TOKEN_ATTR_UNUSED;
    }
    /* end of generation: FIM pad/repo/separator, the known texts, EOS, EOT, EOM */
    for (int k = 3; k < 6; k++)
        eog_add(t, t->fim[k]);
    for (size_t i = 0; i < N_ELEMS(eog_texts); i++) {
        int32_t id = tokenizer_find(t, eog_texts[i]);
        eog_add(t, id);
        make_control(t, id);
    }
    eog_add(t, t->eos);
    eog_add(t, t->eot);
    eog_add(t, t->eom);
    /* Gemma 4 (has <|tool_response>): </s> is an ordinary token */
    int32_t s_end = tokenizer_find(t, "</s>");
    if (s_end >= 0 && tokenizer_find(t, "<|tool_response>") >= 0) {
        eog_remove(t, s_end);
        t->tok[s_end].attr = TOKEN_ATTR_NORMAL;
    }
    /* gpt-oss: these are always rendered */
    static const char *const shown[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"};
    for (size_t i = 0; i < N_ELEMS(shown); i++) {
        int32_t id = tokenizer_find(t, shown[i]);
        if (id >= 0)
            t->tok[id].attr = TOKEN_ATTR_USER_DEFINED;
    }
    /* harmony-style vocabularies: <|end|> ends a message, not the generation */
    int32_t end = tokenizer_find(t, "<|end|>");
    if (end >= 0 && ((tokenizer_find(t, "<|return|>") >= 0 && tokenizer_find(t, "<|call|>") >= 0) ||
                     (tokenizer_find(t, "<|calls|>") >= 0 && tokenizer_find(t, "<|flush|>") >= 0))) {
        eog_remove(t, end);
        t->tok[end].attr = TOKEN_ATTR_USER_DEFINED;
    }
    return INFER_OK;
}

static bool contains_any(const char *s, const char *const *subs, size_t n)
{
    for (size_t i = 0; s && i < n; i++)
        if (strstr(s, subs[i]))
            return true;
    return false;
}

static void set_attr(struct tokenizer *t, int32_t id, uint32_t attr, bool on)
{
    if (id >= 0)
        t->tok[id].attr = on ? t->tok[id].attr | attr : t->tok[id].attr & ~attr;
}

/* The whitespace-eating special tokens llama.cpp knows by model name (GGUF
 * files carry no lstrip/rstrip flags): Phi-3's special tokens and </s> eat
 * the whitespace after them, except <unk>, <s> and <|endoftext|>; some BERT
 * variants' mask token eats the whitespace before it. */
static void set_strip_attrs(struct tokenizer *t, const infer_gguf *g, const char *pre)
{
    const char *name = infer_gguf_get_str(g, "general.name", NULL);
    const char *arch = infer_gguf_get_str(g, "general.architecture", NULL);
    char lower[256] = "";
    for (size_t i = 0; name && name[i] && i + 1 < sizeof(lower); i++)
        lower[i] = (char)tolower((unsigned char)name[i]);
    static const char *const jina[] = {"jina-v2-de", "jina-v2-es", "jina-v2-code"};
    static const char *const bert3[] = {"nomic-bert-moe", "jina-bert-v3"};
    static const char *const phi3[] = {"phi-3", "phi3"};
    static const char *const modern[] = {"modern-bert"};
    if (contains_any(pre, jina, N_ELEMS(jina)) || contains_any(arch, bert3, N_ELEMS(bert3))) {
        set_attr(t, tokenizer_find(t, "<mask>"), TOKEN_ATTR_LSTRIP, true);
    } else if (contains_any(lower, phi3, N_ELEMS(phi3))) {
        for (int32_t id = 0; id < t->n_vocab; id++)
            if (t->tok[id].attr & (TOKEN_ATTR_CONTROL | TOKEN_ATTR_USER_DEFINED | TOKEN_ATTR_UNKNOWN))
                set_attr(t, id, TOKEN_ATTR_RSTRIP, true);
        set_attr(t, tokenizer_find(t, "</s>"), TOKEN_ATTR_RSTRIP, true);
        static const char *const keep[] = {"<unk>", "<s>", "<|endoftext|>"};
        for (size_t i = 0; i < N_ELEMS(keep); i++)
            set_attr(t, tokenizer_find(t, keep[i]), TOKEN_ATTR_RSTRIP, false);
    } else if (contains_any(lower, modern, N_ELEMS(modern))) {
        set_attr(t, tokenizer_find(t, "[MASK]"), TOKEN_ATTR_LSTRIP, true);
    }
}

/* Byte of a <0xNN> token, or -1 if the text is not of that form. */
static int parse_byte_token(const char *s, size_t n)
{
    if (n != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>')
        return -1;
    int v = 0;
    for (int i = 3; i < 5; i++) {
        char c = s[i];
        int d = c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10
              : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (d < 0)
            return -1;
        v = v * 16 + d;
    }
    return v;
}

/* Growable byte buffer. */
struct buf {
    char *p;
    size_t n, cap;
};

static bool buf_reserve(struct buf *b, size_t extra)
{
    if (b->n + extra <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->n + extra)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p)
        return false;
    b->p = p;
    b->cap = cap;
    return true;
}

static bool buf_add(struct buf *b, const void *s, size_t n)
{
    if (n == 0)
        return true;
    if (!buf_reserve(b, n))
        return false;
    memcpy(b->p + b->n, s, n);
    b->n += n;
    return true;
}

/* Append the text of token id (llama.cpp's token_to_piece with special = true). */
static bool render_token(const struct tokenizer *t, int32_t id, struct buf *b)
{
    const struct tok_entry *e = &t->tok[id];
    const char *s = t->text + e->off;
    size_t n = e->len;
    if (e->attr & (TOKEN_ATTR_UNKNOWN | TOKEN_ATTR_CONTROL | TOKEN_ATTR_USER_DEFINED))
        return buf_add(b, s, n);
    if (e->attr & TOKEN_ATTR_NORMAL) {
        if (t->kind != TOK_BPE) { /* ▁ -> space */
            for (const char *end = s + n, *sp; s < end; s = sp + 3) {
                sp = memmem(s, (size_t)(end - s), SPACE, 3);
                if (!buf_add(b, s, (size_t)((sp ? sp : end) - s)) || (sp && !buf_add(b, " ", 1)))
                    return false;
                if (!sp)
                    break;
            }
            return true;
        }
        /* GPT-2 byte decoding; code points outside the byte map are shown as
         * llama.cpp does: [UNK_BYTE_0x<utf-8 hex><token text>] (cut at
         * MAX_RENDER bytes: that grows with the square of the token length) */
        size_t start = b->n;
        for (size_t pos = 0; pos < n && b->n - start < MAX_RENDER;) {
            uint32_t cpt = unicode_decode_one(s, n, &pos);
            int byte = unicode_cpt_to_byte(cpt);
            if (byte >= 0) {
                char c = (char)byte;
                if (!buf_add(b, &c, 1))
                    return false;
                continue;
            }
            char u[4], hex[16];
            size_t un = unicode_encode(cpt, u);
            if (!buf_add(b, "[UNK_BYTE_0x", 12))
                return false;
            for (size_t k = 0; k < un; k++) {
                snprintf(hex, sizeof(hex), "%02x", (unsigned char)u[k]);
                if (!buf_add(b, hex, 2))
                    return false;
            }
            if (!buf_add(b, s, n) || !buf_add(b, "]", 1))
                return false;
        }
        return true;
    }
    if (e->attr & TOKEN_ATTR_BYTE) {
        int v = parse_byte_token(s, n);
        if (v < 0)
            return buf_add(b, s, n);
        char c = (char)v;
        return buf_add(b, &c, 1);
    }
    return true; /* unused or undefined: nothing */
}

static int cmp_special(const void *a, const void *b, void *arg)
{
    const struct tokenizer *t = arg;
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    uint32_t lx = t->tok[x].len, ly = t->tok[y].len;
    if (lx != ly)
        return lx > ly ? -1 : 1;
    return x < y ? -1 : x > y;
}

/* Copy the vocabulary, index it and set the token attributes. */
static infer_status load_vocab(struct tokenizer *t, const infer_gguf *g)
{
    const struct gguf_kv *kv = gguf_get_kv(g, "tokenizer.ggml.tokens");
    if (!kv)
        return infer_error(INFER_ERR_NOT_FOUND, "tokenizer.ggml.tokens is missing");
    if (kv->v.type != INFER_GGUF_ARRAY || kv->v.arr.type != INFER_GGUF_STRING)
        return infer_error(INFER_ERR_FORMAT, "tokenizer.ggml.tokens must be an array of strings");
    uint64_t n = kv->v.arr.n;
    if (n == 0)
        return infer_error(INFER_ERR_FORMAT, "tokenizer.ggml.tokens is empty");
    if (n > (1u << 24))
        return infer_error(INFER_ERR_FORMAT, "tokenizer.ggml.tokens has %llu entries (limit %u)",
                           (unsigned long long)n, 1u << 24);
    t->n_vocab = (int32_t)n;
    const struct gguf_str *strs = kv->v.arr.strs;

    const struct gguf_value *scores = NULL, *types = NULL;
    const struct gguf_kv *skv = gguf_get_kv(g, "tokenizer.ggml.scores");
    if (skv) {
        if (skv->v.type != INFER_GGUF_ARRAY || !gguf_type_size(skv->v.arr.type) ||
            skv->v.arr.type == INFER_GGUF_BOOL)
            return infer_error(INFER_ERR_FORMAT, "tokenizer.ggml.scores must be an array of numbers");
        if (skv->v.arr.n < n)
            return infer_error(INFER_ERR_FORMAT,
                               "tokenizer.ggml.scores has %llu entries but tokenizer.ggml.tokens has %llu",
                               (unsigned long long)skv->v.arr.n, (unsigned long long)n);
        scores = &skv->v;
    }
    const struct gguf_kv *tkv = gguf_get_kv(g, "tokenizer.ggml.token_type");
    if (tkv) {
        if (tkv->v.type != INFER_GGUF_ARRAY || !is_int_type(tkv->v.arr.type) ||
            tkv->v.arr.type == INFER_GGUF_BOOL)
            return infer_error(INFER_ERR_FORMAT, "tokenizer.ggml.token_type must be an array of integers");
        if (tkv->v.arr.n < n)
            return infer_error(INFER_ERR_FORMAT,
                               "tokenizer.ggml.token_type has %llu entries but tokenizer.ggml.tokens has %llu",
                               (unsigned long long)tkv->v.arr.n, (unsigned long long)n);
        types = &tkv->v;
    }

    /* texts (an empty token is renamed [EMPTY_<id>], as llama.cpp does) */
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++)
        total += strs[i].len ? strs[i].len : 24;
    if (total >= UINT32_MAX)
        return infer_error(INFER_ERR_FORMAT, "tokenizer.ggml.tokens holds %llu bytes of text (too much)",
                           (unsigned long long)total);
    t->tok = calloc(n, sizeof(*t->tok));
    t->text = malloc(total + 1);
    t->tok_mask = table_size(n) - 1;
    t->tok_hash = calloc((size_t)t->tok_mask + 1, sizeof(*t->tok_hash));
    if (!t->tok || !t->text || !t->tok_hash)
        return infer_error(INFER_ERR_NOMEM, "out of memory loading %llu tokens", (unsigned long long)n);
    uint32_t off = 0;
    for (uint64_t i = 0; i < n; i++) {
        struct tok_entry *e = &t->tok[i];
        e->off = off;
        if (strs[i].len) {
            memcpy(t->text + off, strs[i].s, strs[i].len);
            e->len = (uint32_t)strs[i].len;
        } else {
            e->len = (uint32_t)sprintf(t->text + off, "[EMPTY_%llu]", (unsigned long long)i);
        }
        off += e->len;
        double sc = 0;
        if (scores && !gguf_arr_float(scores, i, &sc))
            sc = 0;
        e->score = isnan(sc) ? -INFINITY : (float)sc;
        int64_t ty = 1;
        if (types && !gguf_arr_int(types, i, &ty))
            ty = 0;
        switch (ty) {
        case 1: e->attr = TOKEN_ATTR_NORMAL; break;
        case 2: e->attr = TOKEN_ATTR_UNKNOWN; break;
        case 3: e->attr = TOKEN_ATTR_CONTROL; break;
        case 4: e->attr = TOKEN_ATTR_USER_DEFINED; break;
        case 5: e->attr = TOKEN_ATTR_UNUSED; break;
        case 6: e->attr = TOKEN_ATTR_BYTE; break;
        default: e->attr = TOKEN_ATTR_UNDEFINED; break;
        }
        /* index */
        const char *s = t->text + e->off;
        uint32_t h = hash_mix(hash_state(s, e->len)) & t->tok_mask;
        for (;; h = (h + 1) & t->tok_mask) {
            uint32_t slot = t->tok_hash[h];
            if (!slot) {
                t->tok_hash[h] = (uint32_t)i + 1;
                break;
            }
            const struct tok_entry *o = &t->tok[slot - 1];
            if (o->len == e->len && memcmp(t->text + o->off, s, e->len) == 0) {
                char q[200];
                return infer_error(INFER_ERR_FORMAT,
                                   "tokenizer.ggml.tokens: duplicate token '%s' (ids %u and %llu)",
                                   quote(s, e->len, q, sizeof(q)), slot - 1, (unsigned long long)i);
            }
        }
    }
    return INFER_OK;
}

static infer_status load_merges(struct tokenizer *t, const infer_gguf *g)
{
    const struct gguf_kv *kv = gguf_get_kv(g, "tokenizer.ggml.merges");
    if (!kv)
        return infer_error(INFER_ERR_NOT_FOUND, "tokenizer.ggml.merges is missing (the gpt2 tokenizer needs it)");
    if (kv->v.type != INFER_GGUF_ARRAY || kv->v.arr.type != INFER_GGUF_STRING)
        return infer_error(INFER_ERR_FORMAT, "tokenizer.ggml.merges must be an array of strings");
    uint64_t n = kv->v.arr.n;
    if (n > (1u << 24))
        return infer_error(INFER_ERR_FORMAT, "tokenizer.ggml.merges has %llu entries (limit %u)",
                           (unsigned long long)n, 1u << 24);
    const struct gguf_str *strs = kv->v.arr.strs;
    uint64_t total = 0;
    for (uint64_t i = 0; i < n; i++)
        total += strs[i].len;
    if (total >= UINT32_MAX)
        return infer_error(INFER_ERR_FORMAT, "tokenizer.ggml.merges holds too much text");
    t->merge_text = malloc(total + 1);
    t->merge_off = malloc((n + 1) * sizeof(uint32_t));
    t->merge_len = malloc((n + 1) * sizeof(uint32_t));
    t->merge_split = malloc((n + 1) * sizeof(uint32_t));
    t->merge_mask = table_size(n) - 1;
    t->merge_hash = calloc((size_t)t->merge_mask + 1, sizeof(uint32_t));
    if (!t->merge_text || !t->merge_off || !t->merge_len || !t->merge_split || !t->merge_hash)
        return infer_error(INFER_ERR_NOMEM, "out of memory loading %llu merges", (unsigned long long)n);
    uint32_t off = 0;
    for (uint64_t i = 0; i < n; i++) {
        const char *s = strs[i].s;
        size_t len = strs[i].len;
        /* split at the first space after the first byte (a merge without one
         * can never apply, as in llama.cpp) */
        const char *sp = len > 1 ? memchr(s + 1, ' ', len - 1) : NULL;
        uint32_t m = t->n_merges;
        t->merge_off[m] = off;
        t->merge_len[m] = (uint32_t)len;
        t->merge_split[m] = sp ? (uint32_t)(sp - s) : 0;
        memcpy(t->merge_text + off, s, len);
        off += (uint32_t)len;
        t->n_merges++; /* ranks are indices, kept even for unusable merges */
        if (!sp)
            continue;
        uint32_t h = hash_mix(hash_state(s, len)) & t->merge_mask;
        for (;; h = (h + 1) & t->merge_mask) {
            uint32_t slot = t->merge_hash[h];
            if (!slot) {
                t->merge_hash[h] = m + 1;
                break;
            }
            uint32_t o = slot - 1; /* duplicate: the first (lowest) rank wins */
            if (t->merge_len[o] == len && memcmp(t->merge_text + t->merge_off[o], s, len) == 0)
                break;
        }
    }
    return INFER_OK;
}

static infer_status load_all(struct tokenizer *t, const infer_gguf *g)
{
    infer_status st;
    const struct gguf_kv *mkv = gguf_get_kv(g, "tokenizer.ggml.model");
    if (!mkv)
        return infer_error(INFER_ERR_NOT_FOUND, "tokenizer.ggml.model is missing");
    if (!mkv->cstr)
        return infer_error(INFER_ERR_FORMAT, "tokenizer.ggml.model must be a string");
    if (!strcmp(mkv->cstr, "llama"))
        t->kind = TOK_SPM;
    else if (!strcmp(mkv->cstr, "gpt2"))
        t->kind = TOK_BPE;
    else if (!strcmp(mkv->cstr, "bert"))
        t->kind = TOK_WPM;
    else
        return infer_error(INFER_ERR_UNSUPPORTED,
                           "tokenizer.ggml.model '%.40s' is not supported (only 'llama', 'gpt2' and 'bert')",
                           mkv->cstr);
    snprintf(t->model, sizeof(t->model), "%s", mkv->cstr);

    if ((st = load_vocab(t, g)))
        return st;

    const char *pre = infer_gguf_get_str(g, "tokenizer.ggml.pre", NULL);
    t->eot = t->eom = t->sep = t->pad = -1;
    if (t->kind == TOK_SPM) {
        t->bos = 1, t->eos = 2, t->unk = 0;
        t->add_space_prefix = true;
        t->add_bos = true;
    } else if (t->kind == TOK_WPM) {
        /* llama.cpp's defaults: [CLS] 101 (as BOS), [UNK] 100, [SEP] 102, [PAD] 0 */
        t->bos = 101, t->eos = -1, t->unk = 100, t->sep = 102, t->pad = 0;
        t->add_bos = true;
        t->clean_spaces = true;
    } else {
        if ((st = load_merges(t, g)))
            return st;
        t->bos = 11, t->eos = 11, t->unk = -1;
        t->clean_spaces = true;
        const struct pre_info *pi = NULL;
        for (size_t i = 0; i < N_ELEMS(pre_table) && pre; i++)
            if (!strcmp(pre, pre_table[i].name))
                pi = &pre_table[i];
        if (!pre) {
            pi = &pre_table[0];
            snprintf(t->warning, sizeof(t->warning),
                     "tokenizer.ggml.pre is missing: using llama.cpp's 'default' pre-tokenizer");
        } else if (!pi) {
            for (size_t i = 0; i < N_ELEMS(pre_table); i++)
                if (!strcmp(pre_table[i].name, "gpt-2"))
                    pi = &pre_table[i];
            snprintf(t->warning, sizeof(t->warning),
                     "tokenizer.ggml.pre '%.40s' is not supported: using 'gpt-2' (tokens may differ)", pre);
        }
        t->split = pi->split;
        t->ignore_merges = pi->ignore_merges;
        t->add_bos = pi->add_bos;
        t->clean_spaces = !pi->keep_spaces;
        if (!strcmp(pi->name, "glm4") || !strcmp(pi->name, "chatglm-bpe"))
            t->bos = -1;
        snprintf(t->pre, sizeof(t->pre), "%s", pi->name);
    }
    if (!get_flag(g, "tokenizer.ggml.add_space_prefix", &t->add_space_prefix, &st) ||
        !get_flag(g, "tokenizer.ggml.add_bos_token", &t->add_bos, &st) ||
        !get_flag(g, "tokenizer.ggml.add_eos_token", &t->add_eos, &st))
        return st;
    if ((st = get_id(t, g, "tokenizer.ggml.bos_token_id", &t->bos, true)) ||
        (st = get_id(t, g, "tokenizer.ggml.eos_token_id", &t->eos, true)) ||
        (st = get_id(t, g, "tokenizer.ggml.eot_token_id", &t->eot, false)) ||
        (st = get_id(t, g, "tokenizer.ggml.eom_token_id", &t->eom, false)) ||
        (st = get_id(t, g, "tokenizer.ggml.unknown_token_id", &t->unk, false)) ||
        (st = get_id(t, g, "tokenizer.ggml.seperator_token_id", &t->sep, false)) ||
        (st = get_id(t, g, "tokenizer.ggml.padding_token_id", &t->pad, false)))
        return st;
    for (int k = 0; k < 6; k++) {
        t->fim[k] = -1;
        if ((st = get_id(t, g, fim_keys[k], &t->fim[k], false)))
            return st;
    }
    if (t->kind == TOK_WPM) {
        /* llama.cpp adds [CLS] and [SEP] whatever add_bos_token says */
        t->add_bos = true, t->add_eos = false;
        t->lowercase = true;
        if (!get_flag(g, "tokenizer.ggml.normalizer.lowercase", &t->lowercase, &st))
            return st;
        t->strip_accents = t->lowercase;
        if (!get_flag(g, "tokenizer.ggml.normalizer.strip_accents", &t->strip_accents, &st))
            return st;
        if (t->bos < 0 || t->sep < 0 || t->unk < 0)
            return infer_error(INFER_ERR_FORMAT,
                               "a bert (WordPiece) vocabulary needs [CLS], [SEP] and [UNK] ids "
                               "(tokenizer.ggml.bos_token_id, seperator_token_id, unknown_token_id)");
        for (int32_t id = 0; id < t->n_vocab; id++)
            if (t->tok[id].len > t->max_token_len)
                t->max_token_len = t->tok[id].len;
    }
    if (t->add_bos && t->bos < 0)
        return infer_error(INFER_ERR_FORMAT, "tokenizer.ggml.add_bos_token is true but there is no BOS token");
    if (t->add_eos && t->eos < 0)
        return infer_error(INFER_ERR_FORMAT, "tokenizer.ggml.add_eos_token is true but there is no EOS token");
    if ((st = detect_special(t)))
        return st;
    set_strip_attrs(t, g, pre);

    /* special tokens for the partition, longest first */
    t->special = malloc((size_t)t->n_vocab * sizeof(*t->special));
    if (!t->special)
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    for (int32_t id = 0; id < t->n_vocab; id++)
        if (t->tok[id].attr & (TOKEN_ATTR_CONTROL | TOKEN_ATTR_USER_DEFINED | TOKEN_ATTR_UNKNOWN))
            t->special[t->n_special++] = id;
    qsort_r(t->special, t->n_special, sizeof(*t->special), cmp_special, t);

    /* SPM byte fallback */
    for (int b = 0; b < 256; b++) {
        char hex[8], c = (char)b;
        snprintf(hex, sizeof(hex), "<0x%02X>", b);
        int32_t id = tok_lookup(t, hex, 6);
        t->byte_tok[b] = id >= 0 ? id : tok_lookup(t, &c, 1);
    }

    /* tokens that let SPM merges cross a word start */
    if (t->kind == TOK_SPM) {
        t->spm_split = true;
        for (int32_t id = 0; id < t->n_vocab && t->spm_split; id++) {
            const struct tok_entry *e = &t->tok[id];
            const char *s = t->text + e->off;
            if (e->len < 4 || !memmem(s + 1, e->len - 1, SPACE, 3))
                continue;
            bool all_space = e->len % 3 == 0;
            for (uint32_t i = 0; i < e->len && all_space; i += 3)
                all_space = memcmp(s + i, SPACE, 3) == 0;
            if (all_space)
                continue;
            if (t->n_spm_cross == 64) { /* too many to check: merge whole fragments */
                t->spm_split = false;
                break;
            }
            if (!t->spm_cross && !(t->spm_cross = malloc(64 * sizeof(*t->spm_cross))))
                return infer_error(INFER_ERR_NOMEM, "out of memory");
            t->spm_cross[t->n_spm_cross++] = id;
        }
    }

    /* detokenized text of every token */
    struct buf r = {0};
    t->render_off = malloc(((size_t)t->n_vocab + 1) * sizeof(*t->render_off));
    if (!t->render_off)
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    for (int32_t id = 0; id < t->n_vocab; id++) {
        t->render_off[id] = (uint32_t)r.n;
        if (!render_token(t, id, &r) || r.n >= UINT32_MAX / 2) {
            free(r.p);
            return infer_error(INFER_ERR_NOMEM, "out of memory rendering the vocabulary");
        }
        size_t len = r.n - t->render_off[id];
        if (len > t->max_render)
            t->max_render = len;
    }
    t->render_off[t->n_vocab] = (uint32_t)r.n;
    t->render = r.p ? r.p : malloc(1);
    if (!t->render)
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    return INFER_OK;
}

infer_status tokenizer_load(struct tokenizer **out, const infer_gguf *g)
{
    *out = NULL;
    struct tokenizer *t = calloc(1, sizeof(*t));
    if (!t)
        return infer_error(INFER_ERR_NOMEM, "out of memory");
    infer_status st = load_all(t, g);
    if (st != INFER_OK) {
        tokenizer_free(t);
        return infer_error_prefix(st, "tokenizer");
    }
    *out = t;
    return INFER_OK;
}

void tokenizer_free(struct tokenizer *t)
{
    if (!t)
        return;
    free(t->tok);
    free(t->text);
    free(t->tok_hash);
    free(t->merge_text);
    free(t->merge_off);
    free(t->merge_len);
    free(t->merge_split);
    free(t->merge_hash);
    free(t->render);
    free(t->render_off);
    free(t->special);
    free(t->eog);
    free(t->spm_cross);
    free(t);
}

/* ------------------------------------------------------------- accessors */

int32_t tokenizer_n_vocab(const struct tokenizer *t) { return t->n_vocab; }
int32_t tokenizer_bos(const struct tokenizer *t) { return t->bos; }
int32_t tokenizer_eos(const struct tokenizer *t) { return t->eos; }
int32_t tokenizer_eot(const struct tokenizer *t) { return t->eot; }
int32_t tokenizer_pad(const struct tokenizer *t) { return t->pad; }
int32_t tokenizer_unk(const struct tokenizer *t) { return t->unk; }
int32_t tokenizer_sep(const struct tokenizer *t) { return t->sep; }
bool tokenizer_add_bos(const struct tokenizer *t) { return t->add_bos; }
bool tokenizer_add_eos(const struct tokenizer *t) { return t->add_eos; }
const char *tokenizer_model(const struct tokenizer *t) { return t->model; }
const char *tokenizer_pre(const struct tokenizer *t) { return t->pre; }
const char *tokenizer_warning(const struct tokenizer *t) { return t->warning[0] ? t->warning : NULL; }
size_t tokenizer_max_token_text(const struct tokenizer *t) { return t->max_render; }

bool tokenizer_is_eog(const struct tokenizer *t, int32_t id)
{
    for (size_t i = 0; i < t->n_eog; i++)
        if (t->eog[i] == id)
            return true;
    return false;
}

unsigned tokenizer_attr(const struct tokenizer *t, int32_t id)
{
    return id >= 0 && id < t->n_vocab ? t->tok[id].attr : 0;
}

int32_t tokenizer_find(const struct tokenizer *t, const char *piece)
{
    return tok_lookup(t, piece, strlen(piece));
}

const char *tokenizer_piece(const struct tokenizer *t, int32_t id, size_t *len)
{
    if (id < 0 || id >= t->n_vocab)
        return NULL;
    if (len)
        *len = t->tok[id].len;
    return t->text + t->tok[id].off;
}

/* Text of a token for output: hidden control/unknown tokens give "". */
static inline const char *token_text(const struct tokenizer *t, int32_t id, bool special, size_t *len)
{
    if (!special && (t->tok[id].attr & (TOKEN_ATTR_UNKNOWN | TOKEN_ATTR_CONTROL))) {
        *len = 0;
        return "";
    }
    *len = t->render_off[id + 1] - t->render_off[id];
    return t->render + t->render_off[id];
}

int64_t tokenizer_token_to_text(const struct tokenizer *t, int32_t id, bool special, char *buf, size_t cap)
{
    if (id < 0 || id >= t->n_vocab)
        return infer_error(INFER_ERR_INVALID, "token id %d is out of range (vocabulary of %d)", id, t->n_vocab);
    size_t len;
    const char *s = token_text(t, id, special, &len);
    if (buf && cap)
        memcpy(buf, s, len < cap ? len : cap);
    return (int64_t)len;
}

/* ------------------------------------------------------------- encoding */

struct symbol {
    int32_t prev, next;
    uint32_t start, n; /* bytes of the word; n = 0 once merged into its left neighbour */
};

/* Candidate merge of symbols left and right (adjacent when pushed).  key:
 * SPM = -score, BPE = rank; the smallest key wins, ties go to the leftmost. */
struct bigram {
    double key;
    int32_t left, right;
    uint32_t size; /* bytes of the pair when pushed: stale once it differs */
};

struct frag {
    uint32_t off, len;
    int32_t id; /* special token, or -1 for raw text */
};

struct enc {
    const struct tokenizer *t;
    int32_t *out;
    int64_t cap, n;
    struct symbol *sym;
    size_t sym_cap;
    struct bigram *heap;
    size_t heap_n, heap_cap;
    struct buf word;
    uint32_t *cpts;
    size_t cpts_cap;
    struct unicode_words words;
    bool oom;
};

static inline void put(struct enc *e, int32_t id)
{
    if (e->n < e->cap)
        e->out[e->n] = id;
    e->n++;
}

static bool grow(void **p, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap)
        return true;
    size_t c = *cap ? *cap : 64;
    while (c < need)
        c *= 2;
    void *q = realloc(*p, c * elem);
    if (!q)
        return false;
    *p = q;
    *cap = c;
    return true;
}

static inline bool bigram_before(const struct bigram *a, const struct bigram *b)
{
    return a->key < b->key || (a->key == b->key && a->left < b->left);
}

static void heap_push(struct enc *e, struct bigram b)
{
    if (!grow((void **)&e->heap, &e->heap_cap, e->heap_n + 1, sizeof(*e->heap))) {
        e->oom = true;
        return;
    }
    size_t i = e->heap_n++;
    while (i > 0) {
        size_t parent = (i - 1) / 2;
        if (!bigram_before(&b, &e->heap[parent]))
            break;
        e->heap[i] = e->heap[parent];
        i = parent;
    }
    e->heap[i] = b;
}

static struct bigram heap_pop(struct enc *e)
{
    struct bigram top = e->heap[0], last = e->heap[--e->heap_n];
    size_t i = 0, n = e->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n)
            break;
        if (c + 1 < n && bigram_before(&e->heap[c + 1], &e->heap[c]))
            c++;
        if (!bigram_before(&e->heap[c], &last))
            break;
        e->heap[i] = e->heap[c];
        i = c;
    }
    if (n)
        e->heap[i] = last;
    return top;
}

/* Cut s[0..n) into UTF-8 characters (by lead byte, as llama.cpp). */
static size_t make_symbols(struct enc *e, const char *s, size_t n)
{
    if (!grow((void **)&e->sym, &e->sym_cap, n + 1, sizeof(*e->sym))) {
        e->oom = true;
        return 0;
    }
    size_t k = 0;
    for (size_t off = 0; off < n; k++) {
        size_t len = unicode_len_utf8((unsigned char)s[off]);
        if (len > n - off)
            len = n - off;
        e->sym[k] = (struct symbol){(int32_t)k - 1, off + len == n ? -1 : (int32_t)k + 1, (uint32_t)off,
                                    (uint32_t)len};
        off += len;
    }
    return k;
}

/* Propose merging symbols left and right of word s. */
static void try_pair(struct enc *e, const char *s, int32_t left, int32_t right)
{
    if (left < 0 || right < 0)
        return;
    const struct symbol *l = &e->sym[left], *r = &e->sym[right];
    struct bigram b = {0, left, right, l->n + r->n};
    if (e->t->kind == TOK_SPM) {
        int32_t id = tok_lookup(e->t, s + l->start, b.size);
        if (id < 0)
            return;
        b.key = -(double)e->t->tok[id].score;
    } else {
        int32_t rank = merge_rank(e->t, s + l->start, l->n, s + r->start, r->n);
        if (rank < 0)
            return;
        b.key = rank;
    }
    heap_push(e, b);
}

/* The merge loop shared by SPM and BPE: afterwards the live symbols (from
 * index 0 along next) are the final pieces of s. */
static size_t merge_symbols(struct enc *e, const char *s, size_t n)
{
    size_t n_sym = make_symbols(e, s, n);
    e->heap_n = 0;
    for (size_t i = 1; i < n_sym && !e->oom; i++)
        try_pair(e, s, (int32_t)i - 1, (int32_t)i);
    while (e->heap_n && !e->oom) {
        struct bigram b = heap_pop(e);
        struct symbol *l = &e->sym[b.left], *r = &e->sym[b.right];
        if (l->n == 0 || r->n == 0 || l->n + r->n != b.size)
            continue; /* one side changed since the pair was proposed */
        l->n += r->n;
        r->n = 0;
        l->next = r->next;
        if (r->next >= 0)
            e->sym[r->next].prev = b.left;
        try_pair(e, s, l->prev, b.left);
        try_pair(e, s, b.left, l->next);
    }
    return n_sym;
}

/* SentencePiece: tokens for one piece of an escaped fragment. */
static void spm_piece(struct enc *e, const char *s, size_t n)
{
    const struct tokenizer *t = e->t;
    if (n == 0 || merge_symbols(e, s, n) == 0 || e->oom)
        return;
    for (int32_t i = 0; i != -1; i = e->sym[i].next) {
        const struct symbol *sy = &e->sym[i];
        int32_t id = tok_lookup(t, s + sy->start, sy->n);
        if (id >= 0) {
            put(e, id);
            continue;
        }
        for (uint32_t k = 0; k < sy->n; k++) { /* byte fallback */
            int32_t b = t->byte_tok[(unsigned char)s[sy->start + k]];
            if (b < 0)
                b = t->unk; /* no byte token (llama.cpp would throw): <unk>, if any */
            if (b >= 0)
                put(e, b);
        }
    }
}

/* SentencePiece over one escaped fragment.  Merges never cross a "▁" that
 * starts a word unless some token has a "▁" after its first byte; so the
 * fragment is cut before each such "▁" (first of a run, at a symbol start)
 * that none of those tokens (t->spm_cross, few in practice: ">▁</" in Gemma;
 * Llama 2's runs of "▁" are covered by the run rule) overlaps in the text,
 * and the pieces are merged one by one.  Same result as one merge over the
 * whole fragment, in time linear in the number of words. */
static void spm_tokenize(struct enc *e, const char *s, size_t n)
{
    const struct tokenizer *t = e->t;
    if (!t->spm_split) {
        spm_piece(e, s, n);
        return;
    }
    uint8_t *blocked = NULL; /* blocked[p]: a crossing token covers byte p */
    for (size_t k = 0; k < t->n_spm_cross && !e->oom; k++) {
        const struct tok_entry *x = &t->tok[t->spm_cross[k]];
        const char *xs = t->text + x->off;
        const char *h = memmem(s, n, xs, x->len);
        while (h) {
            if (!blocked && !(blocked = calloc(n + 1, 1))) {
                e->oom = true;
                break;
            }
            memset(blocked + (h - s) + 1, 1, x->len - 1);
            size_t next = (size_t)(h - s) + 1;
            h = next < n ? memmem(s + next, n - next, xs, x->len) : NULL;
        }
    }
    size_t start = 0, off = 0;
    bool prev_space = false;
    while (off < n && !e->oom) {
        size_t len = unicode_len_utf8((unsigned char)s[off]);
        if (len > n - off)
            len = n - off;
        bool space = len == 3 && memcmp(s + off, SPACE, 3) == 0;
        if (space && !prev_space && off > start && !(blocked && blocked[off])) {
            spm_piece(e, s + start, off - start);
            start = off;
        }
        prev_space = space;
        off += len;
    }
    if (!e->oom)
        spm_piece(e, s + start, n - start);
    free(blocked);
}

/* BPE: tokens for one pre-tokenized word, already byte-encoded. */
static void bpe_word(struct enc *e, const char *s, size_t n)
{
    const struct tokenizer *t = e->t;
    if (t->ignore_merges) {
        int32_t id = tok_lookup(t, s, n);
        if (id >= 0) {
            put(e, id);
            return;
        }
    }
    size_t n_sym = merge_symbols(e, s, n);
    if (e->oom)
        return;
    for (size_t i = 0; i < n_sym; i++) {
        const struct symbol *sy = &e->sym[i];
        if (sy->n == 0)
            continue;
        int32_t id = tok_lookup(t, s + sy->start, sy->n);
        if (id >= 0) {
            put(e, id);
            continue;
        }
        for (uint32_t k = 0; k < sy->n; k++) { /* single bytes that are tokens */
            int32_t b = tok_lookup(t, s + sy->start + k, 1);
            if (b >= 0)
                put(e, b);
        }
    }
}

static void bpe_tokenize(struct enc *e, const char *s, size_t n)
{
    if (!grow((void **)&e->cpts, &e->cpts_cap, n, sizeof(*e->cpts))) {
        e->oom = true;
        return;
    }
    size_t n_cpts = unicode_decode(s, n, e->cpts);
    e->words.n = 0;
    if (unicode_split_words(e->t->split, e->cpts, n_cpts, &e->words) != INFER_OK) {
        e->oom = true;
        return;
    }
    size_t c = 0;
    for (size_t w = 0; w < e->words.n && !e->oom; w++) {
        /* UTF-8 of the word's code points, each byte shown as its GPT-2 code point */
        e->word.n = 0;
        if (!buf_reserve(&e->word, e->words.len[w] * 8)) {
            e->oom = true;
            return;
        }
        for (size_t end = c + e->words.len[w]; c < end; c++) {
            char u[4];
            size_t un = unicode_encode(e->cpts[c], u);
            for (size_t k = 0; k < un; k++)
                e->word.n += unicode_encode(unicode_byte_to_cpt((uint8_t)u[k]), e->word.p + e->word.n);
        }
        bpe_word(e, e->word.p, e->word.n);
    }
}

/* WordPiece over one raw fragment (llama.cpp's llm_tokenizer_wpm_session). */
static void wpm_tokenize(struct enc *e, const char *s, size_t n)
{
    const struct tokenizer *t = e->t;
    /* the normalised code points go after the decoded ones: 2n entries */
    if (!grow((void **)&e->cpts, &e->cpts_cap, 2 * n + 1, sizeof(*e->cpts))) {
        e->oom = true;
        return;
    }
    size_t n_cpts = unicode_decode(s, n, e->cpts);
    uint32_t *norm = e->cpts + n_cpts;
    e->words.n = 0;
    size_t n_norm = unicode_bert_words(e->cpts, n_cpts, t->lowercase, t->strip_accents, norm, &e->words);
    if (n_norm == (size_t)-1) {
        e->oom = true;
        return;
    }
    size_t c = 0;
    for (size_t w = 0; w < e->words.n && !e->oom; w++) {
        e->word.n = 0;
        if (!buf_reserve(&e->word, e->words.len[w] * 4 + 3)) {
            e->oom = true;
            return;
        }
        buf_add(&e->word, SPACE, 3);
        for (size_t end = c + e->words.len[w]; c < end; c++)
            e->word.n += unicode_encode(norm[c], e->word.p + e->word.n);
        /* longest token at each position, left to right; any gap: [UNK] */
        const char *ws = e->word.p;
        size_t wn = e->word.n;
        int64_t first = e->n;
        for (size_t i = 0; i < wn;) {
            size_t j = wn - i < t->max_token_len ? wn : i + t->max_token_len;
            int32_t id = -1;
            for (; j > i && (id = tok_lookup(t, ws + i, j - i)) < 0; j--)
                ;
            if (id < 0) {
                e->n = first;
                break;
            }
            put(e, id);
            i = j;
        }
        if (e->n == first)
            put(e, t->unk);
    }
}

/* Cut the special tokens out of text (llama.cpp's tokenizer_st_partition):
 * each candidate, longest first, takes its leftmost non-overlapping
 * occurrences in the raw fragments left by the ones before it.  Candidates
 * whose bytes (or byte pairs) do not all occur in the text are skipped. */
/* Does [pos, pos+L) overlap one of the literal ranges (sorted, disjoint)? */
static bool overlaps_literal(const infer_text_span *lit, size_t n_lit, size_t pos, size_t L)
{
    size_t lo = 0, hi = n_lit; /* first range ending after pos */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (lit[mid].off + lit[mid].len <= pos)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < n_lit && lit[lo].off < pos + L && lit[lo].len > 0;
}

/* Leftmost occurrence of s[0..L) in text[base..base+rem) that a literal
 * range does not forbid (lit is NULL when the token may match anywhere). */
static const char *find_special(const char *text, size_t base, size_t rem, const unsigned char *s, size_t L,
                                const infer_text_span *lit, size_t n_lit)
{
    while (rem >= L) {
        const char *hit = memmem(text + base, rem, s, L);
        if (!hit)
            return NULL;
        size_t pos = (size_t)(hit - text);
        if (!lit || !overlaps_literal(lit, n_lit, pos, L))
            return hit;
        rem -= pos + 1 - base;
        base = pos + 1;
    }
    return NULL;
}

static bool partition(const struct tokenizer *t, const char *text, size_t len, bool parse_special,
                      const infer_text_span *literal, size_t n_literal, struct frag **frags_out, size_t *n_out)
{
    struct frag *a = malloc(sizeof(*a) * 2), *b = NULL;
    size_t na = 0, cap_a = 2, cap_b = 0;
    uint64_t *pairs = NULL;
    uint64_t bytes[4] = {0};
    bool ok = false;
    if (!a)
        goto done;
    if (len)
        a[na++] = (struct frag){0, (uint32_t)len, -1};
    if (len && t->n_special) {
        pairs = calloc(65536 / 64, sizeof(uint64_t));
        if (!pairs)
            goto done;
        const unsigned char *u = (const unsigned char *)text;
        bytes[u[0] >> 6] |= 1ull << (u[0] & 63);
        for (size_t i = 1; i < len; i++) {
            unsigned p = (unsigned)u[i - 1] << 8 | u[i];
            pairs[p >> 6] |= 1ull << (p & 63);
            bytes[u[i] >> 6] |= 1ull << (u[i] & 63);
        }
    }
    for (size_t c = 0; c < t->n_special && na; c++) {
        int32_t id = t->special[c];
        const struct tok_entry *e = &t->tok[id];
        bool control = (e->attr & (TOKEN_ATTR_CONTROL | TOKEN_ATTR_UNKNOWN)) != 0;
        if (!parse_special && control)
            continue;
        const infer_text_span *lit = control && n_literal ? literal : NULL;
        const unsigned char *s = (const unsigned char *)t->text + e->off;
        size_t L = e->len;
        if (L > len || !(bytes[s[0] >> 6] & (1ull << (s[0] & 63))))
            continue;
        size_t k = 1;
        for (; k < L; k++) {
            unsigned p = (unsigned)s[k - 1] << 8 | s[k];
            if (!(pairs[p >> 6] & (1ull << (p & 63))))
                break;
        }
        if (k < L)
            continue;
        /* split; b is only built once a first occurrence turns up */
        size_t nb = 0;
        bool found = false;
        for (size_t f = 0; f < na; f++) {
            struct frag fr = a[f];
            const char *hit = NULL;
            if (fr.id < 0 && fr.len >= L)
                hit = find_special(text, fr.off, fr.len, s, L, lit, n_literal);
            if (!found && !hit)
                continue;
            if (!found) {
                found = true;
                if (!grow((void **)&b, &cap_b, na + 16, sizeof(*b)))
                    goto done;
                memcpy(b, a, f * sizeof(*b));
                nb = f;
            }
            size_t base = fr.off, rem = fr.len;
            while (hit) {
                size_t pos = (size_t)(hit - text), left = pos - base;
                if (!grow((void **)&b, &cap_b, nb + 3, sizeof(*b)))
                    goto done;
                if (e->attr & TOKEN_ATTR_LSTRIP) /* the text before it loses its trailing whitespace */
                    while (left > 0 && isspace((unsigned char)text[base + left - 1]))
                        left--;
                if (left > 0)
                    b[nb++] = (struct frag){(uint32_t)base, (uint32_t)left, -1};
                b[nb++] = (struct frag){(uint32_t)pos, (uint32_t)L, id};
                rem -= pos - base + L;
                base = pos + L;
                if (e->attr & TOKEN_ATTR_RSTRIP) /* ... the text after it its leading whitespace */
                    for (; rem > 0 && isspace((unsigned char)text[base]); rem--)
                        base++;
                hit = find_special(text, base, rem, s, L, lit, n_literal);
            }
            if (!grow((void **)&b, &cap_b, nb + 1, sizeof(*b)))
                goto done;
            if (rem)
                b[nb++] = (struct frag){(uint32_t)base, (uint32_t)rem, fr.id};
        }
        if (found) {
            struct frag *tmp = a;
            size_t tcap = cap_a;
            a = b, cap_a = cap_b, na = nb;
            b = tmp, cap_b = tcap;
        }
    }
    ok = true;
done:
    free(b);
    free(pairs);
    if (!ok) {
        free(a);
        return false;
    }
    *frags_out = a;
    *n_out = na;
    return true;
}

int64_t tokenizer_encode(const struct tokenizer *t, const char *text, size_t len, bool add_special,
                         bool parse_special, int32_t *out, int64_t cap)
{
    return tokenizer_encode_literal(t, text, len, add_special, parse_special, NULL, 0, out, cap);
}

int64_t tokenizer_encode_literal(const struct tokenizer *t, const char *text, size_t len, bool add_special,
                                 bool parse_special, const infer_text_span *literal, size_t n_literal, int32_t *out,
                                 int64_t cap)
{
    for (size_t i = 0; i < n_literal; i++)
        if (!literal || literal[i].off > len || literal[i].len > len - literal[i].off ||
            (i && literal[i].off < literal[i - 1].off + literal[i - 1].len))
            return infer_error(INFER_ERR_INVALID, "tokenize: literal range %zu is out of order or outside the text",
                               i);
    if (!text && len)
        return infer_error(INFER_ERR_INVALID, "tokenize: NULL text");
    if (len > MAX_TEXT_BYTES)
        return infer_error(INFER_ERR_INVALID, "tokenize: text of %zu bytes is too long (limit %zu MiB)", len,
                           MAX_TEXT_BYTES >> 20);
    struct enc e = {.t = t, .out = out, .cap = out ? cap : 0};
    struct frag *frags = NULL;
    size_t n_frags = 0;
    if (add_special && t->add_bos)
        put(&e, t->bos);
    if (!partition(t, text, len, parse_special, literal, n_literal, &frags, &n_frags)) {
        e.oom = true;
        goto done;
    }
    bool prev_special = true; /* SPM: a space is prefixed at the start and after specials */
    struct buf esc = {0};
    for (size_t f = 0; f < n_frags && !e.oom; f++) {
        const struct frag *fr = &frags[f];
        if (fr->id >= 0) {
            put(&e, fr->id);
            prev_special = true;
            continue;
        }
        const char *s = text + fr->off;
        if (t->kind == TOK_BPE) {
            bpe_tokenize(&e, s, fr->len);
            continue;
        }
        if (t->kind == TOK_WPM) {
            wpm_tokenize(&e, s, fr->len);
            continue;
        }
        esc.n = 0;
        if (!buf_reserve(&esc, (size_t)fr->len * 3 + 3)) {
            e.oom = true;
            break;
        }
        if (t->add_space_prefix && prev_special)
            buf_add(&esc, SPACE, 3);
        for (uint32_t i = 0; i < fr->len; i++) {
            if (s[i] == ' ') {
                memcpy(esc.p + esc.n, SPACE, 3);
                esc.n += 3;
            } else {
                esc.p[esc.n++] = s[i];
            }
        }
        spm_tokenize(&e, esc.p, esc.n);
        prev_special = false;
    }
    free(esc.p);
    if (add_special && t->add_eos)
        put(&e, t->eos);
    if (add_special && t->kind == TOK_WPM)
        put(&e, t->sep);
done:
    free(frags);
    free(e.sym);
    free(e.heap);
    free(e.word.p);
    free(e.cpts);
    free(e.words.len);
    if (e.oom)
        return infer_error(INFER_ERR_NOMEM, "tokenize: out of memory (%zu bytes of text)", len);
    return e.n;
}

/* ------------------------------------------------------------- decoding */

/* llama.cpp's clean_up_tokenization_spaces, in place; returns the new length. */
static size_t clean_spaces(char *s, size_t n)
{
    size_t total, i, n1, n2;
    /* " ?", " !", " .", " ," lose the space */
    total = n ? 1 : 0;
    for (i = 1; i < n; i++) {
        char x = s[i];
        if (s[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ','))
            total--;
        s[total++] = x;
    }
    /* " ' " becomes "'" */
    n1 = total;
    total = n1 ? 1 : 0;
    for (i = 1; i < n1; i++) {
        char x = s[i];
        if (x == '\'' && i + 1 < n1 && s[i - 1] == ' ' && s[i + 1] == ' ') {
            total--;
            s[++i] = '\0';
        }
        s[total++] = x;
    }
    /* " 's", " 'm", " 're", " 've" lose the space */
    n2 = total;
    total = n2 ? 1 : 0;
    for (i = 1; i < n2; i++) {
        char x = s[i];
        if (s[i - 1] == ' ' && x == '\'' && i + 1 < n2) {
            char x1 = s[i + 1];
            if (x1 == 's' || x1 == 'm')
                total--;
            else if (x1 != 't' && x1 != 'd' && i + 2 < n2) {
                char x2 = s[i + 2];
                if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e'))
                    total--;
            }
        }
        s[total++] = x;
    }
    return total;
}

int64_t tokenizer_decode(const struct tokenizer *t, const int32_t *ids, size_t n, bool special, char *out,
                         size_t cap)
{
    struct buf b = {0};
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= t->n_vocab)
            return infer_error(INFER_ERR_INVALID, "detokenize: token id %d (at %zu) is out of range (vocabulary of %d)",
                               ids[i], i, t->n_vocab);
    for (size_t i = 0; i < n; i++) {
        size_t len;
        const char *s = token_text(t, ids[i], special, &len);
        if (i == 0 && t->add_space_prefix && len && s[0] == ' ')
            s++, len--; /* the space the tokenizer added */
        if (!buf_add(&b, s, len)) {
            free(b.p);
            return infer_error(INFER_ERR_NOMEM, "detokenize: out of memory");
        }
    }
    size_t total = b.n;
    if (t->clean_spaces && total)
        total = clean_spaces(b.p, total);
    if (out && cap && total)
        memcpy(out, b.p, total < cap ? total : cap);
    free(b.p);
    return (int64_t)total;
}

/* ------------------------------------------------------------ streaming */

void detok_stream_init(struct detok_stream *s, bool special)
{
    memset(s, 0, sizeof(*s));
    s->special = special;
}

size_t detok_stream_bound(const struct tokenizer *t)
{
    return t->max_render + 3;
}

/* Write the whole characters of in[0..n) that fit in out[0..cap) (invalid
 * bytes as U+FFFD) and hold the rest; an incomplete character at the end is
 * held too, unless final (then it is invalid).  Returns the bytes written. */
static size_t stream_emit(struct detok_stream *s, const unsigned char *in, size_t n, char *out, size_t cap,
                          bool final)
{
    size_t o = 0, i = 0;
    while (i < n) {
        int k = unicode_valid_prefix(in + i, n - i);
        if (k < 0 && final)
            k = 0;
        if (k < 0)
            break; /* incomplete: wait for more bytes */
        const void *src = k ? (const void *)(in + i) : "\xef\xbf\xbd";
        size_t len = k ? (size_t)k : 3;
        if (!out || o + len > cap)
            break;
        memcpy(out + o, src, len);
        o += len;
        i += k ? (size_t)k : 1;
    }
    size_t rest = n - i;
    if (rest > DETOK_STREAM_HOLD) {
        infer_error(INFER_ERR_FULL, "detokenize: %zu bytes did not fit the stream output and were lost",
                    rest - DETOK_STREAM_HOLD);
        rest = DETOK_STREAM_HOLD;
    }
    memmove(s->held, in + i, rest);
    s->n_held = (uint32_t)rest;
    return o;
}

size_t detok_stream_push_text(struct detok_stream *s, const char *text, size_t len, char *out, size_t cap)
{
    size_t n = s->n_held + len;
    unsigned char small[DETOK_STREAM_HOLD + 128], *in = n <= sizeof(small) ? small : malloc(n);
    if (!in) {
        infer_error(INFER_ERR_NOMEM, "out of memory");
        return 0;
    }
    memcpy(in, s->held, s->n_held);
    memcpy(in + s->n_held, text, len);
    size_t o = stream_emit(s, in, n, out, cap, false);
    if (in != small)
        free(in);
    return o;
}

size_t detok_stream_push(struct detok_stream *s, const struct tokenizer *t, int32_t id, char *out, size_t cap)
{
    if (id < 0 || id >= t->n_vocab) {
        infer_error(INFER_ERR_INVALID, "token id %d is out of range (vocabulary of %d)", id, t->n_vocab);
        return 0;
    }
    size_t len;
    const char *piece = token_text(t, id, s->special, &len);
    return detok_stream_push_text(s, piece, len, out, cap);
}

size_t detok_stream_flush(struct detok_stream *s, char *out, size_t cap)
{
    unsigned char in[DETOK_STREAM_HOLD];
    size_t n = s->n_held;
    memcpy(in, s->held, n);
    return stream_emit(s, in, n, out, cap, true);
}

/* ---------------------------------------------------------- public API */

infer_status infer_tokenizer_load(infer_tokenizer **out, const infer_gguf *g)
{
    return tokenizer_load((struct tokenizer **)out, g);
}

void infer_tokenizer_free(infer_tokenizer *t) { tokenizer_free((struct tokenizer *)t); }

#define T(x) ((const struct tokenizer *)(x))

int32_t infer_tokenizer_n_vocab(const infer_tokenizer *t) { return tokenizer_n_vocab(T(t)); }
int32_t infer_tokenizer_bos(const infer_tokenizer *t) { return tokenizer_bos(T(t)); }
int32_t infer_tokenizer_eos(const infer_tokenizer *t) { return tokenizer_eos(T(t)); }
int32_t infer_tokenizer_eot(const infer_tokenizer *t) { return tokenizer_eot(T(t)); }
bool infer_tokenizer_is_eog(const infer_tokenizer *t, int32_t id) { return tokenizer_is_eog(T(t), id); }
bool infer_tokenizer_add_bos(const infer_tokenizer *t) { return tokenizer_add_bos(T(t)); }
const char *infer_tokenizer_model(const infer_tokenizer *t) { return tokenizer_model(T(t)); }
const char *infer_tokenizer_pre(const infer_tokenizer *t) { return tokenizer_pre(T(t)); }
const char *infer_tokenizer_warning(const infer_tokenizer *t) { return tokenizer_warning(T(t)); }
int32_t infer_tokenizer_find(const infer_tokenizer *t, const char *piece) { return tokenizer_find(T(t), piece); }

int64_t infer_tokenize(const infer_tokenizer *t, const char *text, size_t len, bool add_special,
                       bool parse_special, int32_t *out, int64_t cap)
{
    return tokenizer_encode(T(t), text, len, add_special, parse_special, out, cap);
}

int64_t infer_tokenize_literal(const infer_tokenizer *t, const char *text, size_t len, bool add_special,
                               const infer_text_span *literal, size_t n_literal, int32_t *out, int64_t cap)
{
    return tokenizer_encode_literal(T(t), text, len, add_special, true, literal, n_literal, out, cap);
}

const char *infer_token_piece(const infer_tokenizer *t, int32_t id, size_t *len)
{
    return tokenizer_piece(T(t), id, len);
}

int64_t infer_token_to_text(const infer_tokenizer *t, int32_t id, bool special, char *buf, size_t cap)
{
    return tokenizer_token_to_text(T(t), id, special, buf, cap);
}

int64_t infer_detokenize(const infer_tokenizer *t, const int32_t *ids, size_t n, bool special, char *out,
                         size_t cap)
{
    return tokenizer_decode(T(t), ids, n, special, out, cap);
}
