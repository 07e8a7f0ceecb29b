/*
 * chat.c - chat templates: detect a model's prompt format and render a
 * conversation into it.
 *
 * No Jinja is evaluated.  Like llama.cpp, the family is recognised from marker
 * substrings of `tokenizer.chat_template` and each family's format is written
 * out by hand from its published template:
 *
 *   chatml   <|im_start|>{role}\n{content}<|im_end|>\n ...  <|im_start|>assistant\n
 *   gemma    <start_of_turn>user\n{system}\n\n{user}<end_of_turn>\n
 *            <start_of_turn>model\n{answer}<end_of_turn>\n ...  <start_of_turn>model\n
 *   llama3   <|start_header_id|>{role}<|end_header_id|>\n\n{content}<|eot_id|> ...
 *            <|start_header_id|>assistant<|end_header_id|>\n\n
 *   phi3     <|{role}|>\n{content}<|end|>\n ...  <|assistant|>\n
 *   phi4     <|im_start|>{role}<|im_sep|>{content}<|im_end|> ...  <|im_start|>assistant<|im_sep|>
 *   granite  <|start_of_role|>{role}<|end_of_role|>{content}<|end_of_text|>\n ...
 *            <|start_of_role|>assistant<|end_of_role|>
 *   deepseek3  {system}\n\n<｜User｜>{user}<｜Assistant｜>{answer}<｜end▁of▁sentence｜> ...  <｜Assistant｜>
 *   llama2   [INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {answer}</s><s>[INST] {user} [/INST]
 *   mistral  [INST] {system}\n\n{user} [/INST] {answer}</s>[INST] {user} [/INST]    (v1, HF v0.1/v0.2)
 *   mistral-v3         [INST] {system}\n\n{user}[/INST] {answer}</s>[INST] {user}[/INST]
 *   mistral-v3-tekken  [INST]{system}\n\n{user}[/INST]{answer}</s>[INST]{user}[/INST]
 *   mistral-v7         [SYSTEM_PROMPT] {system}[/SYSTEM_PROMPT][INST] {user}[/INST] {answer}</s>
 *   mistral-v7-tekken  [SYSTEM_PROMPT]{system}[/SYSTEM_PROMPT][INST]{user}[/INST]{answer}</s>
 *
 * BOS is never written for the first turn: the tokenizer adds it (llama2 also
 * opens every later turn with <s>, as Meta's format does).  The [INST]
 * families have no separate generation prompt: "[/INST]" is the cue.
 *
 * Incremental rendering (what the prefix cache relies on) shapes three choices
 * that differ from some published templates:
 *  - assistant content is never trimmed: it is what the model generated, and
 *    the KV cache holds it as generated (gemma's and llama3's templates trim);
 *  - where a template puts the system prompt into the LAST user turn (Mistral
 *    v1/v3 official templates), it goes into the FIRST one, as llama.cpp does,
 *    so that a new turn does not rewrite the history;
 *  - the [INST] families write one space between "[/INST]" and an answer
 *    unless the answer already starts with whitespace (a SentencePiece model
 *    generates that space as part of its first token), and none before "</s>"
 *    (Meta's llama2 format has one there, but a model stopping at EOS never
 *    generated it).
 * Each rendering is also a pure function of the messages, so rendering a
 * prefix of the messages gives a prefix of the text (a lone system message
 * renders as the open beginning of the first user turn).
 */
#include "chat.h"
#include "model/gguf.h"
#include "reasoning.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* DeepSeek's markers: fullwidth vertical bars, U+2581 for spaces */
#define DS_USER "<\xef\xbd\x9c" "User\xef\xbd\x9c>"
#define DS_ASSISTANT "<\xef\xbd\x9c" "Assistant\xef\xbd\x9c>"
#define DS_END "<\xef\xbd\x9c" "end\xe2\x96\x81" "of\xe2\x96\x81" "sentence\xef\xbd\x9c>"

/* ------------------------------------------------------------ names */

static const char *const family_names[CHAT_N_FAMILIES] = {
    [CHAT_CHATML] = "chatml",
    [CHAT_GEMMA] = "gemma",
    [CHAT_LLAMA3] = "llama3",
    [CHAT_LLAMA2] = "llama2",
    [CHAT_MISTRAL] = "mistral",
    [CHAT_MISTRAL_V3] = "mistral-v3",
    [CHAT_MISTRAL_V3_TEKKEN] = "mistral-v3-tekken",
    [CHAT_MISTRAL_V7] = "mistral-v7",
    [CHAT_MISTRAL_V7_TEKKEN] = "mistral-v7-tekken",
    [CHAT_PHI3] = "phi3",
    [CHAT_PHI4] = "phi4",
    [CHAT_GRANITE] = "granite",
    [CHAT_DEEPSEEK3] = "deepseek3",
};

static const struct {
    const char *name;
    enum chat_family f;
} family_aliases[] = {
    {"qwen", CHAT_CHATML},           {"qwen2", CHAT_CHATML},
    {"qwen3", CHAT_CHATML},          {"smollm", CHAT_CHATML},
    {"gemma2", CHAT_GEMMA},          {"gemma3", CHAT_GEMMA},
    {"llama-3", CHAT_LLAMA3},        {"llama-2", CHAT_LLAMA2},
    {"llama2-sys", CHAT_LLAMA2},     {"llama2-sys-bos", CHAT_LLAMA2},
    {"llama2-sys-strip", CHAT_LLAMA2}, {"mistral-v1", CHAT_MISTRAL},
    {"phi-3", CHAT_PHI3},            {"phi-4", CHAT_PHI4},
    {"smollm3", CHAT_CHATML},        {"granite-3", CHAT_GRANITE},
    {"granite-4.0", CHAT_GRANITE},   {"granite-4.1", CHAT_GRANITE},
    {"deepseek-r1", CHAT_DEEPSEEK3},
};

const char *chat_family_name(enum chat_family f)
{
    if ((unsigned)f >= CHAT_N_FAMILIES)
        return "unknown";
    return family_names[f];
}

bool chat_family_from_name(const char *name, enum chat_family *out)
{
    if (!name)
        return false;
    for (int f = 0; f < CHAT_N_FAMILIES; f++) {
        if (strcasecmp(name, family_names[f]) == 0) {
            *out = (enum chat_family)f;
            return true;
        }
    }
    for (size_t i = 0; i < sizeof(family_aliases) / sizeof(family_aliases[0]); i++) {
        if (strcasecmp(name, family_aliases[i].name) == 0) {
            *out = family_aliases[i].f;
            return true;
        }
    }
    return false;
}

/* -------------------------------------------------------- detection */

/* Order follows llama.cpp's llm_chat_detect_template for the families both
 * know: a chatml marker wins (phi4 when it has <|im_sep|>), then [INST]
 * (whose variants are told apart by how the template spaces its markers),
 * then phi3, gemma, llama3, deepseek3, granite.  Formats we do not render
 * (SmolVLM, zephyr, ...) are not matched so that the caller sees a fallback
 * rather than a silently wrong format. */
bool chat_detect_template(const char *t, enum chat_family *out)
{
    if (!t || !*t)
        return false;
    if (chat_family_from_name(t, out))
        return true;
#define HAS(s) (strstr(t, (s)) != NULL)
    enum chat_family f;
    if (HAS("<|im_start|>")) {
        if (HAS("<end_of_utterance>"))
            return false;
        f = HAS("<|im_sep|>") ? CHAT_PHI4 : CHAT_CHATML;
    } else if (strncmp(t, "mistral", 7) == 0 || HAS("[INST]")) {
        if (HAS("[SYSTEM_PROMPT]")) {
            /* v7 writes '[INST] ' and '[SYSTEM_PROMPT] ', v7-tekken no spaces */
            f = HAS("[INST] ") || HAS("[SYSTEM_PROMPT] ") ? CHAT_MISTRAL_V7 : CHAT_MISTRAL_V7_TEKKEN;
        } else if (HAS("' [INST] ' + system_message") || HAS("[AVAILABLE_TOOLS]")) {
            /* Mistral's official v1 / v3 / v3-tekken templates */
            if (HAS(" [INST]"))
                f = CHAT_MISTRAL;
            else if (HAS("\"[INST]\"") || HAS("'[INST]'"))
                f = CHAT_MISTRAL_V3_TEKKEN;
            else
                f = CHAT_MISTRAL_V3;
        } else if (HAS("<<SYS>>")) {
            f = CHAT_LLAMA2;
        } else {
            f = CHAT_MISTRAL; /* HF Mistral v0.1/v0.2: '[INST] ' + content + ' [/INST]' */
        }
    } else if (HAS("<|assistant|>") && HAS("<|end|>")) {
        f = CHAT_PHI3;
    } else if (HAS("<start_of_turn>")) {
        f = CHAT_GEMMA;
    } else if (HAS("<|start_header_id|>") && HAS("<|end_header_id|>")) {
        f = CHAT_LLAMA3;
    } else if (HAS(DS_ASSISTANT) && HAS(DS_USER) && HAS(DS_END)) {
        f = CHAT_DEEPSEEK3;
    } else if (HAS("<|start_of_role|>")) {
        f = CHAT_GRANITE; /* 3.x, 4.0 and 4.1 render alike without tool calls */
    } else {
        return false;
    }
#undef HAS
    *out = f;
    return true;
}

bool chat_detect_arch(const char *arch, enum chat_family *out)
{
    if (!arch)
        return false;
    if (strncmp(arch, "gemma", 5) == 0) { /* gemma, gemma2, gemma3, gemma3n */
        *out = CHAT_GEMMA;
        return true;
    }
    if (strncmp(arch, "qwen", 4) == 0) { /* qwen, qwen2, qwen2moe, qwen3, ... */
        *out = CHAT_CHATML;
        return true;
    }
    if (strcmp(arch, "phi3") == 0) {
        *out = CHAT_PHI3;
        return true;
    }
    if (strncmp(arch, "granite", 7) == 0) { /* granite, granitemoe, granitehybrid */
        *out = CHAT_GRANITE;
        return true;
    }
    if (strcmp(arch, "smollm3") == 0) {
        *out = CHAT_CHATML;
        return true;
    }
    return false; /* llama, mistral-derived, unknown: the vocabulary decides */
}

bool chat_detect_vocab(chat_vocab_has_fn has, void *ctx, enum chat_family *out)
{
    if (!has)
        return false;
    enum chat_family f;
    if (has(ctx, "<|start_header_id|>") && has(ctx, "<|eot_id|>"))
        f = CHAT_LLAMA3;
    else if (has(ctx, "<|im_start|>") && has(ctx, "<|im_sep|>"))
        f = CHAT_PHI4;
    else if (has(ctx, "<|im_start|>") && has(ctx, "<|im_end|>"))
        f = CHAT_CHATML; /* SmolLM, Qwen, OpenHermes, ... */
    else if (has(ctx, "<|start_of_role|>") && has(ctx, "<|end_of_role|>"))
        f = CHAT_GRANITE;
    else if (has(ctx, DS_USER) && has(ctx, DS_ASSISTANT))
        f = CHAT_DEEPSEEK3;
    else if (has(ctx, "<start_of_turn>") && has(ctx, "<end_of_turn>"))
        f = CHAT_GEMMA;
    else if (has(ctx, "[SYSTEM_PROMPT]") && has(ctx, "[INST]"))
        f = CHAT_MISTRAL_V7; /* [INST] is a control token from v3 on */
    else if (has(ctx, "[INST]") && has(ctx, "[/INST]"))
        f = CHAT_MISTRAL_V3;
    else if (has(ctx, "<|assistant|>") && has(ctx, "<|end|>"))
        f = CHAT_PHI3;
    else
        return false;
    *out = f;
    return true;
}

enum chat_family chat_detect_with_vocab(const char *tmpl, const char *arch, chat_vocab_has_fn has,
                                        void *ctx, bool *fallback)
{
    enum chat_family f = CHAT_CHATML;
    bool ok = chat_detect_template(tmpl, &f) || chat_detect_arch(arch, &f) ||
              chat_detect_vocab(has, ctx, &f);
    if (!ok)
        f = CHAT_CHATML;
    if (fallback)
        *fallback = !ok;
    return f;
}

enum chat_family chat_detect(const char *tmpl, const char *arch, bool *fallback)
{
    return chat_detect_with_vocab(tmpl, arch, NULL, NULL, fallback);
}

/* ------------------------------------------------ end-of-turn markers */

static const char *const eot_chatml[] = {"<|im_end|>", "<|endoftext|>", NULL};
static const char *const eot_gemma[] = {"<end_of_turn>", NULL};
static const char *const eot_llama3[] = {"<|eot_id|>", "<|eom_id|>", NULL};
static const char *const eot_inst[] = {"</s>", NULL};
static const char *const eot_phi3[] = {"<|end|>", "<|endoftext|>", NULL};
static const char *const eot_granite[] = {"<|end_of_text|>", NULL};
static const char *const eot_deepseek3[] = {DS_END, NULL};
static const char *const eot_none[] = {NULL};

const char *const *chat_eot_markers(enum chat_family f)
{
    switch (f) {
    case CHAT_CHATML: return eot_chatml;
    case CHAT_GEMMA: return eot_gemma;
    case CHAT_LLAMA3: return eot_llama3;
    case CHAT_LLAMA2:
    case CHAT_MISTRAL:
    case CHAT_MISTRAL_V3:
    case CHAT_MISTRAL_V3_TEKKEN:
    case CHAT_MISTRAL_V7:
    case CHAT_MISTRAL_V7_TEKKEN: return eot_inst;
    case CHAT_PHI3: return eot_phi3;
    case CHAT_PHI4: return eot_chatml;
    case CHAT_GRANITE: return eot_granite;
    case CHAT_DEEPSEEK3: return eot_deepseek3;
    default: return eot_none;
    }
}

/* ------------------------------------------------------ string builder */

struct sbuf {
    char *p;
    size_t len, cap;
    bool failed; /* allocation failed or size overflowed; p is then freed */
    infer_text_span *spans; /* message content written, in order (when wanted) */
    size_t n_spans, cap_spans;
    bool want_spans;
};

static void sb_putn(struct sbuf *b, const char *s, size_t n)
{
    if (b->failed || n == 0)
        return;
    uint64_t need;
    if (!ck_add(b->len, n, &need) || !ck_add(need, 1, &need) || need > SIZE_MAX / 2) {
        b->failed = true;
        return;
    }
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < need)
            cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) {
            b->failed = true;
            return;
        }
        b->p = p;
        b->cap = cap;
    }
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

static void sb_puts(struct sbuf *b, const char *s) { sb_putn(b, s, strlen(s)); }

/* Message content: written like sb_putn, and its byte range recorded. */
static void sb_content(struct sbuf *b, const char *s, size_t n)
{
    size_t off = b->len;
    sb_putn(b, s, n);
    if (b->failed || !b->want_spans || n == 0)
        return;
    if (b->n_spans == b->cap_spans) {
        size_t cap = b->cap_spans ? b->cap_spans * 2 : 8;
        infer_text_span *p = cap < SIZE_MAX / sizeof(*p) ? realloc(b->spans, cap * sizeof(*p)) : NULL;
        if (!p) {
            b->failed = true;
            return;
        }
        b->spans = p;
        b->cap_spans = cap;
    }
    b->spans[b->n_spans++] = (infer_text_span){off, n};
}

static void sb_puts_content(struct sbuf *b, const char *s) { sb_content(b, s, strlen(s)); }

/* Jinja's `| trim` / Python's str.strip(), on ASCII whitespace; content. */
static void sb_put_trimmed(struct sbuf *b, const char *s)
{
    size_t n = strlen(s);
    while (n > 0 && isspace((unsigned char)s[0])) {
        s++;
        n--;
    }
    while (n > 0 && isspace((unsigned char)s[n - 1]))
        n--;
    sb_content(b, s, n);
}

/* ------------------------------------------------------------ rendering */

enum role { ROLE_SYSTEM, ROLE_USER, ROLE_ASSISTANT };

static bool family_alternates(enum chat_family f)
{
    return f != CHAT_CHATML && f != CHAT_LLAMA3 && f != CHAT_PHI3 && f != CHAT_PHI4 && f != CHAT_GRANITE &&
           f != CHAT_DEEPSEEK3;
}

/* Check the message list against the rules documented in chat.h and fill
 * roles[] (n entries).  Returns INFER_OK or INFER_ERR_INVALID with a message. */
static infer_status check_messages(enum chat_family f, const struct chat_msg *msgs, size_t n,
                                   bool add_gen, enum role *roles)
{
    for (size_t i = 0; i < n; i++) {
        const char *r = msgs[i].role;
        if (!r)
            return infer_error(INFER_ERR_INVALID, "chat message %zu has no role", i);
        if (strcmp(r, "system") == 0)
            roles[i] = ROLE_SYSTEM;
        else if (strcmp(r, "user") == 0)
            roles[i] = ROLE_USER;
        else if (strcmp(r, "assistant") == 0)
            roles[i] = ROLE_ASSISTANT;
        else
            return infer_error(INFER_ERR_INVALID,
                               "chat message %zu: unknown role '%.32s' (system, user, assistant)", i, r);
        if (!msgs[i].content)
            return infer_error(INFER_ERR_INVALID, "chat message %zu (%s) has no content", i, r);
        if (roles[i] == ROLE_SYSTEM && i != 0)
            return infer_error(INFER_ERR_INVALID, "chat message %zu: a system message may only come first", i);
    }
    if (!family_alternates(f))
        return INFER_OK;
    size_t first = roles[0] == ROLE_SYSTEM ? 1 : 0;
    for (size_t i = first; i < n; i++) {
        enum role want = (i - first) % 2 == 0 ? ROLE_USER : ROLE_ASSISTANT;
        if (roles[i] != want)
            return infer_error(INFER_ERR_INVALID,
                               "chat message %zu: %s needs user and assistant turns to alternate, "
                               "starting with user", i, chat_family_name(f));
    }
    if (add_gen && roles[n - 1] != ROLE_USER)
        return infer_error(INFER_ERR_INVALID,
                           "chat: %s can only prompt for an answer after a user message",
                           chat_family_name(f));
    return INFER_OK;
}

/* Families that write every message as open + role + mid + content + close
 * (no trimming, as llama.cpp writes them), then gen when add_gen. */
struct role_style {
    const char *open, *mid, *close, *gen;
};

static void render_roles(struct sbuf *b, const struct role_style *st, const struct chat_msg *m, size_t n,
                         bool add_gen)
{
    for (size_t i = 0; i < n; i++) {
        sb_puts(b, st->open);
        sb_puts(b, m[i].role);
        sb_puts(b, st->mid);
        sb_puts_content(b, m[i].content);
        sb_puts(b, st->close);
    }
    if (add_gen)
        sb_puts(b, st->gen);
}

static const struct role_style style_chatml = {"<|im_start|>", "\n", "<|im_end|>\n", "<|im_start|>assistant\n"};
static const struct role_style style_phi3 = {"<|", "|>\n", "<|end|>\n", "<|assistant|>\n"};
static const struct role_style style_phi4 = {"<|im_start|>", "<|im_sep|>", "<|im_end|>",
                                             "<|im_start|>assistant<|im_sep|>"};
static const struct role_style style_granite = {"<|start_of_role|>", "<|end_of_role|>", "<|end_of_text|>\n",
                                                "<|start_of_role|>assistant<|end_of_role|>"};

/* DeepSeek-V3 / R1: the system text opens the conversation, bare. */
static void render_deepseek3(struct sbuf *b, const struct chat_msg *m, const enum role *roles, size_t n,
                             bool add_gen)
{
    for (size_t i = 0; i < n; i++) {
        switch (roles[i]) {
        case ROLE_SYSTEM:
            sb_puts_content(b, m[i].content);
            sb_puts(b, "\n\n");
            break;
        case ROLE_USER:
            sb_puts(b, DS_USER);
            sb_puts_content(b, m[i].content);
            break;
        case ROLE_ASSISTANT:
            sb_puts(b, DS_ASSISTANT);
            sb_puts_content(b, m[i].content);
            sb_puts(b, DS_END);
            break;
        }
    }
    if (add_gen)
        sb_puts(b, DS_ASSISTANT);
}

static void render_llama3(struct sbuf *b, const struct chat_msg *m, const enum role *roles, size_t n,
                          bool add_gen)
{
    for (size_t i = 0; i < n; i++) {
        sb_puts(b, "<|start_header_id|>");
        sb_puts(b, m[i].role);
        sb_puts(b, "<|end_header_id|>\n\n");
        if (roles[i] == ROLE_ASSISTANT)
            sb_puts_content(b, m[i].content);
        else
            sb_put_trimmed(b, m[i].content);
        sb_puts(b, "<|eot_id|>");
    }
    if (add_gen)
        sb_puts(b, "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

/* Gemma has no system role: as in Gemma 3's template, the system text (not
 * trimmed) and a blank line open the first user turn; user text is trimmed. */
static void render_gemma(struct sbuf *b, const struct chat_msg *m, const enum role *roles, size_t n,
                         bool add_gen)
{
    bool user_open = false; /* "<start_of_turn>user\n" already written */
    for (size_t i = 0; i < n; i++) {
        switch (roles[i]) {
        case ROLE_SYSTEM:
            sb_puts(b, "<start_of_turn>user\n");
            sb_puts_content(b, m[i].content);
            sb_puts(b, "\n\n");
            user_open = true;
            break;
        case ROLE_USER:
            if (!user_open)
                sb_puts(b, "<start_of_turn>user\n");
            user_open = false;
            sb_put_trimmed(b, m[i].content);
            sb_puts(b, "<end_of_turn>\n");
            break;
        case ROLE_ASSISTANT:
            sb_puts(b, "<start_of_turn>model\n");
            sb_puts_content(b, m[i].content);
            sb_puts(b, "<end_of_turn>\n");
            break;
        }
    }
    if (add_gen)
        sb_puts(b, "<start_of_turn>model\n");
}

/* The [INST] families differ only in where spaces go, where the system text
 * lives and whether later turns restate BOS. */
struct inst_style {
    const char *open;       /* before user text */
    const char *close;      /* after user text; also the generation cue */
    const char *sys_open;   /* system text inside the first [INST] ... */
    const char *sys_close;
    bool sys_block;         /* ... or in its own block before it (v7) */
    const char *answer_sep; /* between close and an answer not starting with whitespace */
    const char *next_turn;  /* after "</s>", before the next open */
    bool strip;             /* trim system and user text */
};

static const struct inst_style *inst_style_of(enum chat_family f)
{
    static const struct inst_style llama2 = {"[INST] ", " [/INST]", "<<SYS>>\n", "\n<</SYS>>\n\n",
                                             false, " ", "<s>", true};
    static const struct inst_style v1 = {"[INST] ", " [/INST]", "", "\n\n", false, " ", "", false};
    static const struct inst_style v3 = {"[INST] ", "[/INST]", "", "\n\n", false, " ", "", false};
    static const struct inst_style v3t = {"[INST]", "[/INST]", "", "\n\n", false, "", "", false};
    static const struct inst_style v7 = {"[INST] ", "[/INST]", "[SYSTEM_PROMPT] ", "[/SYSTEM_PROMPT]",
                                         true, " ", "", false};
    static const struct inst_style v7t = {"[INST]", "[/INST]", "[SYSTEM_PROMPT]", "[/SYSTEM_PROMPT]",
                                          true, "", "", false};
    switch (f) {
    case CHAT_LLAMA2: return &llama2;
    case CHAT_MISTRAL: return &v1;
    case CHAT_MISTRAL_V3: return &v3;
    case CHAT_MISTRAL_V3_TEKKEN: return &v3t;
    case CHAT_MISTRAL_V7: return &v7;
    case CHAT_MISTRAL_V7_TEKKEN: return &v7t;
    default: return NULL;
    }
}

static void render_inst(struct sbuf *b, const struct inst_style *st, const struct chat_msg *m,
                        const enum role *roles, size_t n)
{
    bool inst_open = false; /* "[INST]" written, user text pending */
    bool after_answer = false;
    for (size_t i = 0; i < n; i++) {
        const char *c = m[i].content;
        switch (roles[i]) {
        case ROLE_SYSTEM:
            if (!st->sys_block) {
                sb_puts(b, st->open);
                inst_open = true;
            }
            sb_puts(b, st->sys_open);
            if (st->strip)
                sb_put_trimmed(b, c);
            else
                sb_puts_content(b, c);
            sb_puts(b, st->sys_close);
            break;
        case ROLE_USER:
            if (!inst_open) {
                if (after_answer)
                    sb_puts(b, st->next_turn);
                sb_puts(b, st->open);
            }
            inst_open = false;
            if (st->strip)
                sb_put_trimmed(b, c);
            else
                sb_puts_content(b, c);
            sb_puts(b, st->close);
            break;
        case ROLE_ASSISTANT:
            if (!isspace((unsigned char)c[0])) /* also true for an empty answer */
                sb_puts(b, st->answer_sep);
            sb_puts_content(b, c);
            sb_puts(b, "</s>");
            after_answer = true;
            break;
        }
    }
}

char *chat_format_spans(enum chat_family f, const struct chat_msg *msgs, size_t n, bool add_gen,
                        infer_text_span **spans, size_t *n_spans)
{
    if (spans) {
        *spans = NULL;
        *n_spans = 0;
    }
    if ((unsigned)f >= CHAT_N_FAMILIES) {
        infer_error(INFER_ERR_INVALID, "chat: unknown template family %d", (int)f);
        return NULL;
    }
    if (n == 0 || !msgs) {
        infer_error(INFER_ERR_INVALID, "chat: no messages to format");
        return NULL;
    }
    if (n > SIZE_MAX / sizeof(enum role)) {
        infer_error(INFER_ERR_INVALID, "chat: too many messages (%zu)", n);
        return NULL;
    }
    enum role *roles = malloc(n * sizeof(*roles));
    if (!roles) {
        infer_error(INFER_ERR_NOMEM, "chat: out of memory for %zu messages", n);
        return NULL;
    }
    if (check_messages(f, msgs, n, add_gen, roles) != INFER_OK) {
        free(roles);
        return NULL;
    }

    struct sbuf b = {.want_spans = spans != NULL};
    switch (f) {
    case CHAT_CHATML: render_roles(&b, &style_chatml, msgs, n, add_gen); break;
    case CHAT_PHI3: render_roles(&b, &style_phi3, msgs, n, add_gen); break;
    case CHAT_LLAMA3: render_llama3(&b, msgs, roles, n, add_gen); break;
    case CHAT_GEMMA: render_gemma(&b, msgs, roles, n, add_gen); break;
    case CHAT_PHI4: render_roles(&b, &style_phi4, msgs, n, add_gen); break;
    case CHAT_GRANITE: render_roles(&b, &style_granite, msgs, n, add_gen); break;
    case CHAT_DEEPSEEK3: render_deepseek3(&b, msgs, roles, n, add_gen); break;
    default: render_inst(&b, inst_style_of(f), msgs, roles, n); break;
    }
    free(roles);
    if (!b.failed && !b.p) { /* nothing written (e.g. one empty tekken turn) */
        b.p = calloc(1, 1);
        b.failed = b.p == NULL;
    }
    if (b.failed) {
        free(b.p);
        free(b.spans);
        infer_error(INFER_ERR_NOMEM, "chat: out of memory rendering %zu messages", n);
        return NULL;
    }
    if (spans) {
        *spans = b.spans;
        *n_spans = b.n_spans;
    }
    return b.p;
}

char *chat_format(enum chat_family f, const struct chat_msg *msgs, size_t n, bool add_gen)
{
    return chat_format_spans(f, msgs, n, add_gen, NULL, NULL);
}

/* ------------------------------------------------------------ public API */

struct vocab_ctx {
    const struct gguf_value *tokens; /* STRING array */
};

static bool vocab_has(void *ctx, const char *piece)
{
    const struct vocab_ctx *v = ctx;
    size_t n = strlen(piece);
    for (uint64_t i = 0; i < v->tokens->arr.n; i++) {
        const struct gguf_str *s = &v->tokens->arr.strs[i];
        if (s->len == n && memcmp(s->s, piece, n) == 0)
            return true;
    }
    return false;
}

infer_chat_family infer_chat_detect(const infer_gguf *g, const char *override_name, bool *warned)
{
    bool fallback = false;
    enum chat_family f = CHAT_CHATML;
    if (override_name && *override_name) {
        /* a family name, or template text given on the command line */
        if (!chat_detect_template(override_name, &f)) {
            infer_error(INFER_ERR_NOT_FOUND, "unknown chat template '%.64s'; using chatml", override_name);
            fallback = true;
            f = CHAT_CHATML;
        }
    } else if (!g) {
        infer_error(INFER_ERR_NOT_FOUND, "no model to take a chat template from; using chatml");
        fallback = true;
    } else {
        const char *tmpl = infer_gguf_get_str(g, "tokenizer.chat_template", NULL);
        const char *arch = infer_gguf_get_str(g, "general.architecture", NULL);
        struct vocab_ctx v = {gguf_get_arr(g, "tokenizer.ggml.tokens", INFER_GGUF_STRING)};
        f = chat_detect_with_vocab(tmpl, arch, v.tokens ? vocab_has : NULL, &v, &fallback);
        if (fallback) {
            if (tmpl)
                infer_error(INFER_ERR_NOT_FOUND, "chat template of this model not recognised; using chatml");
            else
                infer_error(INFER_ERR_NOT_FOUND,
                            "model has no chat template and architecture '%.64s' does not imply one; "
                            "using chatml", arch ? arch : "?");
        }
    }
    if (warned)
        *warned = fallback;
    return (infer_chat_family)f;
}

bool infer_chat_reasoning_markers(const infer_gguf *g, const char **open, const char **close)
{
    if (!g)
        return false;
    struct vocab_ctx v = {gguf_get_arr(g, "tokenizer.ggml.tokens", INFER_GGUF_STRING)};
    return reasoning_markers(infer_gguf_get_str(g, "tokenizer.chat_template", NULL), v.tokens ? vocab_has : NULL, &v,
                             open, close);
}

/* override_tmpl when given (--chat-template TEXT), else g's template, or NULL */
static const char *template_text(const infer_gguf *g, const char *override_tmpl)
{
    if (override_tmpl && *override_tmpl)
        return override_tmpl;
    return g ? infer_gguf_get_str(g, "tokenizer.chat_template", NULL) : NULL;
}

bool infer_chat_reasoning_forced(const infer_gguf *g, const char *override_tmpl, const char *open)
{
    return reasoning_forced_open(template_text(g, override_tmpl), open);
}

bool infer_chat_reasoning_off(const infer_gguf *g, const char *override_tmpl, const char *open, const char *close,
                              bool forced, char *buf, size_t n)
{
    return reasoning_off_suffix(template_text(g, override_tmpl), open, close, forced, buf, n);
}

const char *infer_chat_family_name(infer_chat_family f) { return chat_family_name((enum chat_family)f); }

bool infer_chat_family_from_name(const char *name, infer_chat_family *out)
{
    enum chat_family f;
    if (!out || !chat_family_from_name(name, &f))
        return false;
    *out = (infer_chat_family)f;
    return true;
}

char *infer_chat_format(infer_chat_family f, const infer_chat_msg *msgs, size_t n, bool add_gen)
{
    return chat_format_public(f, msgs, n, add_gen, NULL, NULL);
}

char *chat_format_public(infer_chat_family f, const infer_chat_msg *msgs, size_t n, bool add_gen,
                         infer_text_span **spans, size_t *n_spans)
{
    if (n == 0 || !msgs)
        return chat_format_spans((enum chat_family)f, NULL, 0, add_gen, spans, n_spans); /* sets the error */
    if (n > SIZE_MAX / sizeof(struct chat_msg)) {
        infer_error(INFER_ERR_INVALID, "chat: too many messages (%zu)", n);
        return NULL;
    }
    struct chat_msg *m = malloc(n * sizeof(*m));
    if (!m) {
        infer_error(INFER_ERR_NOMEM, "chat: out of memory for %zu messages", n);
        return NULL;
    }
    for (size_t i = 0; i < n; i++) {
        m[i].role = msgs[i].role;
        m[i].content = msgs[i].content;
    }
    char *s = chat_format_spans((enum chat_family)f, m, n, add_gen, spans, n_spans);
    free(m);
    return s;
}

const char *const *infer_chat_eot_markers(infer_chat_family f) { return chat_eot_markers((enum chat_family)f); }
