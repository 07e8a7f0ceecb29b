/*
 * semgate.c - the semantic cache's text normalisation and content gate
 * (issue 15; DESIGN.md decision 11).
 *
 * An embedding says two questions are about the same thing; it does not say
 * they ask the same thing.  "Enable two-factor login" / "disable two-factor
 * login", "set the heating to 21" / "... to 18", "a train from Berlin to
 * Hamburg" / "... from Hamburg to Berlin" embed at cosine 0.8-0.98.  So a
 * semantic hit needs, besides the cosine, the gate below: a short list of
 * word classes on which the two questions must agree exactly.
 *
 * infer_semgate_normalize() is applied before embedding and before gating:
 * ASCII lower case; curly apostrophes straight; contractions expanded
 * ("don't" -> "do not", "what's" -> "what is", "7pm" -> "7 pm"); a
 * possessive "'s" dropped; punctuation turned into spaces (except inside
 * numbers: 7:30, 21.5); "%" and "°" spelled out; filler words dropped
 * (please, hey, um, just, ...) and so are request openers at the start
 * ("can you", "could you", "tell me", ...).  Bytes >= 0x80 are kept as they
 * are (other scripts are compared as opaque words).
 *
 * infer_semgate_agree() splits two normalised questions into words and
 * classifies each word with one table (word -> class, canonical form):
 *
 *   numbers     digits and number words ("five" = "5", "twenty one" = 21,
 *               "3rd" = "third"), compared as sequences (order matters:
 *               "10 divided by 2" is not "2 divided by 10")
 *   time        am/pm (after a number), noon, morning, evening, tonight, ...
 *   days        weekdays, today/tomorrow/yesterday, weekend, months,
 *               next/last/previous
 *   negation    not, no, never, nothing, without, ... (counted)
 *   polarity    on/off, enable/disable, start/stop, open/close, up/down,
 *               more/less, before/after, ... (each word is itself: no pair
 *               of them is a synonym)
 *   question    what, when, where, who, why, how, which; "how many",
 *               "how much", "how long", ... as one word each
 *   person      pronouns by person (my = me = i)
 *   stop words  articles, auxiliaries, prepositions: ignored
 *   common      frequent general words (get, make, tell, thing, ...):
 *               ignored
 *   content     every other word, stemmed (plural s, -ing, -ed) and mapped
 *               through a few household synonyms (mum = mom, telly = tv):
 *               these are the rare words of the question, its rooms,
 *               people, devices, dishes and places, and the two sets must be
 *               equal
 *
 * and last the order of the entity-like words (numbers and content words)
 * that both questions have must be the same: a word set cannot tell "from
 * Berlin to Hamburg" from "from Hamburg to Berlin", their order can.
 *
 * The gate errs on the side of a miss: a paraphrase that uses another
 * content word ("will it rain" / "what is the forecast") is not a hit.  A
 * miss costs one generation; a wrong hit gives a wrong answer.
 */
#include "infer.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* ------------------------------------------------------------ normalising */

struct outbuf {
    char *p;
    size_t n, cap;
    bool overflow;
};

static void out_word(struct outbuf *o, const char *w, size_t n)
{
    if (!n)
        return;
    size_t need = o->n + (o->n ? 1 : 0) + n;
    if (need + 1 > o->cap) {
        o->overflow = true;
        return;
    }
    if (o->n)
        o->p[o->n++] = ' ';
    memcpy(o->p + o->n, w, n);
    o->n += n;
    o->p[o->n] = '\0';
}

static void out_str(struct outbuf *o, const char *s) { out_word(o, s, strlen(s)); }

static bool word_is(const char *w, size_t n, const char *s) { return strlen(s) == n && !memcmp(w, s, n); }

static bool in_list(const char *w, size_t n, const char *const *list)
{
    for (; *list; list++)
        if (word_is(w, n, *list))
            return true;
    return false;
}

static const char *const fillers[] = {"please", "pls", "plz", "hey", "hi", "hello", "um", "umm", "uh", "er", "erm",
                                      "hmm", "ok", "okay", "just", "kindly", "actually", "basically", "really",
                                      "quickly", "thanks", "thx", "oh", "ah", NULL};

/* openers dropped at the start of a question, longest first */
static const char *const openers[] = {
    "i would like to know", "i want to know", "i need to know", "i was wondering", "would you mind",
    "do you know", "can you tell me", "could you tell me", "let me know", "i wonder", "tell me",
    "can you", "could you", "would you", "will you", "can u", NULL};

/* One word (lower case, apostrophes straight) with its contraction expanded. */
static void out_contracted(struct outbuf *o, const char *w, size_t n)
{
    static const struct {
        const char *word, *expanded;
    } whole[] = {{"won't", "will not"}, {"can't", "can not"}, {"cannot", "can not"}, {"shan't", "shall not"},
                 {"ain't", "is not"},   {"let's", "let us"},  {"y'all", "you all"},  {"o'clock", "o'clock"}};
    for (size_t i = 0; i < sizeof(whole) / sizeof(whole[0]); i++)
        if (word_is(w, n, whole[i].word)) {
            if (!strcmp(whole[i].word, "o'clock"))
                return; /* "7 o'clock" is "7" */
            char tmp[32];
            snprintf(tmp, sizeof(tmp), "%s", whole[i].expanded);
            char *sp = strchr(tmp, ' ');
            out_word(o, tmp, (size_t)(sp - tmp));
            out_str(o, sp + 1);
            return;
        }
    static const struct {
        const char *suffix, *word;
    } tails[] = {{"n't", "not"}, {"'re", "are"}, {"'ll", "will"}, {"'ve", "have"}, {"'m", "am"}, {"'d", "would"}};
    for (size_t i = 0; i < sizeof(tails) / sizeof(tails[0]); i++) {
        size_t k = strlen(tails[i].suffix);
        if (n > k && !memcmp(w + n - k, tails[i].suffix, k)) {
            out_word(o, w, n - k);
            out_str(o, tails[i].word);
            return;
        }
    }
    if (n > 2 && !memcmp(w + n - 2, "'s", 2)) {
        static const char *const is_words[] = {"it", "that", "what", "who", "where", "when", "how", "there",
                                               "here", "he", "she", "this", "why", "which", NULL};
        out_word(o, w, n - 2);
        if (in_list(w, n - 2, is_words))
            out_str(o, "is");
        return; /* otherwise a possessive: "emma's" is "emma" */
    }
    /* any other apostrophe goes */
    char tmp[256];
    size_t m = 0;
    for (size_t i = 0; i < n && m < sizeof(tmp); i++)
        if (w[i] != '\'')
            tmp[m++] = w[i];
    if (n > sizeof(tmp))
        out_word(o, w, n); /* very long: as it is */
    else
        out_word(o, tmp, m);
}

/* A digit-led word: "7pm" -> "7 pm", "5min" -> "5 min", "3rd" stays. */
static void out_numeric(struct outbuf *o, const char *w, size_t n)
{
    size_t i = 0;
    while (i < n && (isdigit((unsigned char)w[i]) || ((w[i] == '.' || w[i] == ':' || w[i] == ',') && i + 1 < n &&
                                                      isdigit((unsigned char)w[i + 1]))))
        i++;
    const char *rest = w + i;
    size_t nr = n - i;
    if (nr && (word_is(rest, nr, "st") || word_is(rest, nr, "nd") || word_is(rest, nr, "rd") ||
               word_is(rest, nr, "th"))) {
        out_word(o, w, n);
        return;
    }
    /* thousands separators: "1,000" -> "1000" */
    char num[64];
    size_t m = 0;
    for (size_t k = 0; k < i && m + 1 < sizeof(num); k++)
        if (w[k] != ',')
            num[m++] = w[k];
    out_word(o, num, m);
    if (nr)
        out_contracted(o, rest, nr);
}

size_t infer_semgate_normalize(const char *text, size_t len, char *out, size_t cap)
{
    if (!out || !cap)
        return 0;
    out[0] = '\0';
    if (!text)
        return 0;
    struct outbuf o = {out, 0, cap, false};
    char w[256];
    size_t i = 0;
    bool sentence_start = true;
    while (i < len) {
        bool title = false; /* "Mia" inside a sentence: a name, kept as it is written */
        /* gather one word: letters, digits, apostrophes, bytes >= 0x80, and
         * '.', ':' or ',' between digits; "a.m." / "p.m." are am / pm */
        size_t n = 0;
        bool long_word = false;
        while (i < len) {
            unsigned char ch = (unsigned char)text[i];
            if (ch == 0xE2 && i + 2 < len && (unsigned char)text[i + 1] == 0x80 &&
                ((unsigned char)text[i + 2] == 0x99 || (unsigned char)text[i + 2] == 0x98)) {
                ch = '\''; /* ’ ‘ */
                i += 2;
            } else if (ch == 0xC2 && i + 1 < len && (unsigned char)text[i + 1] == 0xB0) {
                break; /* ° ends the word: spelled out below */
            }
            bool inner = (ch == '.' || ch == ':' || ch == ',') && n && isdigit((unsigned char)w[n - 1]) &&
                         i + 1 < len && isdigit((unsigned char)text[i + 1]);
            if (!(isalnum(ch) || ch == '\'' || ch >= 0x80 || inner))
                break;
            if (n == 0)
                title = isupper(ch) && !sentence_start && ch != 'I'; /* "I", "I'm", "I've" */
            else if (isupper(ch))
                title = false; /* "TV", "NOT": not a name */
            if (n < sizeof(w))
                w[n++] = (char)tolower(ch);
            else
                long_word = true;
            i++;
        }
        if (n == 1 && (w[0] == 'a' || w[0] == 'p') && i + 2 < len + 1 && i < len && text[i] == '.' &&
            i + 1 < len && (text[i + 1] == 'm' || text[i + 1] == 'M')) {
            w[1] = 'm', n = 2; /* a.m. p.m. */
            i += 2;
            if (i < len && text[i] == '.')
                i++;
        }
        while (n && w[0] == '\'')
            memmove(w, w + 1, --n); /* quotes around words */
        while (n && w[n - 1] == '\'')
            n--;
        if (n && !long_word) {
            size_t before = o.n;
            if (isdigit((unsigned char)w[0]))
                out_numeric(&o, w, n);
            else if (!in_list(w, n, fillers))
                out_contracted(&o, w, n);
            if (title && n > 1 && o.n > before) /* the word written first gets its capital back */
                out[before + (before ? 1 : 0)] = (char)toupper((unsigned char)out[before + (before ? 1 : 0)]);
        } else if (n) {
            out_word(&o, w, n);
        }
        if (n)
            sentence_start = false;
        if (i < len) {
            unsigned char ch = (unsigned char)text[i];
            if (ch == '.' || ch == '!' || ch == '?' || ch == ':' || ch == ';' || ch == '\n')
                sentence_start = true;
            if (ch == '%')
                out_str(&o, "percent");
            else if (ch == 0xC2 && i + 1 < len && (unsigned char)text[i + 1] == 0xB0) {
                out_str(&o, "degrees");
                i++;
            }
            i++;
        }
    }
    /* request openers at the start */
    for (bool again = true; again;) {
        again = false;
        for (const char *const *op = openers; *op; op++) {
            size_t k = strlen(*op);
            if (o.n >= k && !memcmp(out, *op, k) && (out[k] == ' ' || out[k] == '\0')) {
                size_t skip = out[k] == ' ' ? k + 1 : k;
                memmove(out, out + skip, o.n - skip + 1);
                o.n -= skip;
                again = true;
                break;
            }
        }
    }
    return o.n;
}

/* ---------------------------------------------------------- word classes */

enum wclass {
    WC_CONTENT,
    WC_STOP,
    WC_COMMON,
    WC_NUMBER,
    WC_TIME,
    WC_DAY,
    WC_NEGATION,
    WC_POLARITY,
    WC_QUESTION,
    WC_PERSON,
    WC_N
};

static const char *const class_names[WC_N] = {
    "content words", "", "", "numbers", "time of day", "days", "negation", "polarity", "question words", "people"};

struct lex {
    const char *word;
    enum wclass c;
    const char *canon; /* NULL: the word itself */
};

/* number words and their values (parsed separately) */
static const struct {
    const char *word;
    int value;
} numwords[] = {{"zero", 0},      {"one", 1},        {"two", 2},        {"three", 3},     {"four", 4},
                {"five", 5},      {"six", 6},        {"seven", 7},      {"eight", 8},     {"nine", 9},
                {"ten", 10},      {"eleven", 11},    {"twelve", 12},    {"thirteen", 13}, {"fourteen", 14},
                {"fifteen", 15},  {"sixteen", 16},   {"seventeen", 17}, {"eighteen", 18}, {"nineteen", 19},
                {"twenty", 20},   {"thirty", 30},    {"forty", 40},     {"fifty", 50},    {"sixty", 60},
                {"seventy", 70},  {"eighty", 80},    {"ninety", 90},    {"hundred", 100}, {"thousand", 1000},
                {"million", 1000000}, {"dozen", 12}, {"couple", 2},     {"pair", 2},      {"single", 1},
                {"double", 2},    {"triple", 3},     {"once", 1},       {"twice", 2}};
static const struct {
    const char *word;
    int value;
} ordwords[] = {{"first", 1}, {"second", 2}, {"third", 3},  {"fourth", 4},   {"fifth", 5},     {"sixth", 6},
                {"seventh", 7}, {"eighth", 8}, {"ninth", 9}, {"tenth", 10}, {"eleventh", 11}, {"twelfth", 12},
                {"twentieth", 20}, {"thirtieth", 30}};

static const struct lex lexicon[] = {
    /* fractions are numbers too */
    {"half", WC_NUMBER, "0.5"}, {"quarter", WC_NUMBER, "0.25"},
    /* time of day ("am" only after a number: see classify) */
    {"pm", WC_TIME, NULL}, {"noon", WC_TIME, NULL}, {"midday", WC_TIME, "noon"}, {"midnight", WC_TIME, NULL},
    {"morning", WC_TIME, NULL}, {"mornings", WC_TIME, "morning"}, {"afternoon", WC_TIME, NULL},
    {"evening", WC_TIME, NULL}, {"evenings", WC_TIME, "evening"}, {"night", WC_TIME, NULL},
    {"overnight", WC_TIME, "night"}, {"dawn", WC_TIME, NULL},
    {"sunrise", WC_TIME, NULL}, {"sunset", WC_TIME, NULL}, {"dusk", WC_TIME, NULL}, {"lunchtime", WC_TIME, NULL},
    {"bedtime", WC_TIME, NULL},
    /* days, dates, relative times */
    {"monday", WC_DAY, NULL}, {"tuesday", WC_DAY, NULL}, {"wednesday", WC_DAY, NULL}, {"thursday", WC_DAY, NULL},
    {"friday", WC_DAY, NULL}, {"saturday", WC_DAY, NULL}, {"sunday", WC_DAY, NULL},
    {"mondays", WC_DAY, "monday"}, {"tuesdays", WC_DAY, "tuesday"}, {"wednesdays", WC_DAY, "wednesday"},
    {"thursdays", WC_DAY, "thursday"}, {"fridays", WC_DAY, "friday"}, {"saturdays", WC_DAY, "saturday"},
    {"sundays", WC_DAY, "sunday"}, {"today", WC_DAY, NULL}, {"tomorrow", WC_DAY, NULL},
    {"tomorrows", WC_DAY, "tomorrow"}, {"yesterday", WC_DAY, NULL}, {"tonight", WC_DAY, "today"},
    {"weekend", WC_DAY, NULL}, {"weekends", WC_DAY, "weekend"}, {"weekday", WC_DAY, NULL},
    {"weekdays", WC_DAY, "weekday"}, {"week", WC_DAY, NULL}, {"weeks", WC_DAY, "week"}, {"month", WC_DAY, NULL},
    {"months", WC_DAY, "month"}, {"year", WC_DAY, NULL}, {"years", WC_DAY, "year"}, {"hour", WC_DAY, NULL},
    {"hours", WC_DAY, "hour"}, {"minute", WC_DAY, NULL}, {"minutes", WC_DAY, "minute"}, {"min", WC_DAY, "minute"},
    {"mins", WC_DAY, "minute"}, {"second", WC_DAY, NULL}, {"seconds", WC_DAY, "second"}, {"sec", WC_DAY, "second"},
    {"secs", WC_DAY, "second"}, {"hr", WC_DAY, "hour"}, {"hrs", WC_DAY, "hour"},
    {"january", WC_DAY, NULL}, {"february", WC_DAY, NULL}, {"march", WC_DAY, NULL}, {"april", WC_DAY, NULL},
    {"june", WC_DAY, NULL}, {"july", WC_DAY, NULL}, {"august", WC_DAY, NULL}, {"september", WC_DAY, NULL},
    {"october", WC_DAY, NULL}, {"november", WC_DAY, NULL}, {"december", WC_DAY, NULL},
    {"next", WC_DAY, NULL}, {"last", WC_DAY, NULL}, {"previous", WC_DAY, "last"}, {"past", WC_DAY, "last"},
    {"coming", WC_DAY, "next"}, {"upcoming", WC_DAY, "next"}, {"ago", WC_DAY, NULL}, {"later", WC_DAY, NULL},
    {"earlier", WC_DAY, NULL}, {"now", WC_STOP, NULL}, {"currently", WC_STOP, NULL}, {"moment", WC_STOP, NULL},
    {"right", WC_POLARITY, NULL},
    {"spring", WC_DAY, NULL}, {"summer", WC_DAY, NULL}, {"autumn", WC_DAY, NULL}, {"fall", WC_DAY, "autumn"},
    {"winter", WC_DAY, NULL}, {"daily", WC_DAY, NULL}, {"weekly", WC_DAY, NULL}, {"monthly", WC_DAY, NULL},
    /* negation */
    {"not", WC_NEGATION, NULL}, {"no", WC_NEGATION, NULL}, {"never", WC_NEGATION, NULL},
    {"none", WC_NEGATION, NULL}, {"nothing", WC_NEGATION, NULL}, {"nobody", WC_NEGATION, NULL},
    {"nowhere", WC_NEGATION, NULL}, {"neither", WC_NEGATION, NULL}, {"nor", WC_NEGATION, NULL},
    {"without", WC_NEGATION, NULL}, {"nope", WC_NEGATION, "no"}, {"dont", WC_NEGATION, "not"},
    {"doesnt", WC_NEGATION, "not"}, {"isnt", WC_NEGATION, "not"}, {"wont", WC_NEGATION, "not"},
    {"cant", WC_NEGATION, "not"},
    /* polarity: every word is its own value */
    {"on", WC_POLARITY, NULL}, {"off", WC_POLARITY, NULL}, {"enable", WC_POLARITY, NULL},
    {"enabled", WC_POLARITY, "enable"}, {"disable", WC_POLARITY, NULL}, {"disabled", WC_POLARITY, "disable"},
    {"activate", WC_POLARITY, NULL}, {"deactivate", WC_POLARITY, NULL}, {"start", WC_POLARITY, NULL},
    {"started", WC_POLARITY, "start"}, {"stop", WC_POLARITY, NULL}, {"stopped", WC_POLARITY, "stop"},
    {"begin", WC_POLARITY, NULL}, {"end", WC_POLARITY, NULL}, {"finish", WC_POLARITY, NULL},
    {"open", WC_POLARITY, NULL}, {"close", WC_POLARITY, NULL}, {"closed", WC_POLARITY, "close"},
    {"shut", WC_POLARITY, "close"}, {"lock", WC_POLARITY, NULL}, {"locked", WC_POLARITY, "lock"},
    {"unlock", WC_POLARITY, NULL}, {"unlocked", WC_POLARITY, "unlock"}, {"up", WC_POLARITY, NULL},
    {"down", WC_POLARITY, NULL}, {"increase", WC_POLARITY, NULL}, {"decrease", WC_POLARITY, NULL},
    {"raise", WC_POLARITY, NULL}, {"lower", WC_POLARITY, NULL}, {"reduce", WC_POLARITY, "decrease"},
    {"higher", WC_POLARITY, NULL}, {"more", WC_POLARITY, NULL}, {"less", WC_POLARITY, NULL},
    {"fewer", WC_POLARITY, "less"}, {"most", WC_POLARITY, NULL}, {"least", WC_POLARITY, NULL},
    {"max", WC_POLARITY, NULL}, {"maximum", WC_POLARITY, "max"}, {"minimum", WC_POLARITY, NULL}, {"warm", WC_POLARITY, NULL}, {"warmer", WC_POLARITY, NULL},
    {"cool", WC_POLARITY, NULL}, {"cooler", WC_POLARITY, NULL}, {"cold", WC_POLARITY, NULL},
    {"colder", WC_POLARITY, NULL}, {"hot", WC_POLARITY, NULL}, {"hotter", WC_POLARITY, NULL},
    {"bright", WC_POLARITY, NULL}, {"brighter", WC_POLARITY, NULL}, {"dim", WC_POLARITY, NULL},
    {"dimmer", WC_POLARITY, NULL}, {"loud", WC_POLARITY, NULL}, {"louder", WC_POLARITY, NULL},
    {"quiet", WC_POLARITY, NULL}, {"quieter", WC_POLARITY, NULL}, {"mute", WC_POLARITY, NULL},
    {"unmute", WC_POLARITY, NULL}, {"pause", WC_POLARITY, NULL}, {"resume", WC_POLARITY, NULL},
    {"play", WC_POLARITY, NULL}, {"connect", WC_POLARITY, NULL}, {"disconnect", WC_POLARITY, NULL},
    {"arm", WC_POLARITY, NULL}, {"disarm", WC_POLARITY, NULL}, {"allow", WC_POLARITY, NULL},
    {"block", WC_POLARITY, NULL}, {"show", WC_POLARITY, NULL}, {"hide", WC_POLARITY, NULL},
    {"add", WC_POLARITY, NULL}, {"remove", WC_POLARITY, NULL}, {"delete", WC_POLARITY, NULL},
    {"cancel", WC_POLARITY, NULL}, {"create", WC_POLARITY, NULL}, {"include", WC_POLARITY, NULL},
    {"exclude", WC_POLARITY, NULL}, {"before", WC_POLARITY, NULL}, {"after", WC_POLARITY, NULL},
    {"above", WC_POLARITY, NULL}, {"below", WC_POLARITY, NULL}, {"over", WC_POLARITY, NULL},
    {"under", WC_POLARITY, NULL}, {"out", WC_POLARITY, NULL}, {"inside", WC_POLARITY, NULL},
    {"outside", WC_POLARITY, NULL}, {"indoors", WC_POLARITY, "inside"}, {"outdoors", WC_POLARITY, "outside"},
    {"yes", WC_POLARITY, NULL}, {"plus", WC_POLARITY, NULL}, {"minus", WC_POLARITY, NULL},
    {"times", WC_POLARITY, NULL}, {"divided", WC_POLARITY, NULL}, {"multiply", WC_POLARITY, NULL},
    {"multiplied", WC_POLARITY, "multiply"}, {"subtract", WC_POLARITY, NULL}, {"true", WC_POLARITY, NULL},
    {"false", WC_POLARITY, NULL}, {"always", WC_POLARITY, NULL}, {"sometimes", WC_POLARITY, NULL},
    {"only", WC_POLARITY, NULL}, {"all", WC_POLARITY, NULL}, {"every", WC_POLARITY, NULL},
    {"both", WC_POLARITY, NULL}, {"same", WC_POLARITY, NULL}, {"different", WC_POLARITY, NULL},
    {"early", WC_POLARITY, NULL}, {"late", WC_POLARITY, NULL}, {"fast", WC_POLARITY, NULL},
    {"slow", WC_POLARITY, NULL}, {"big", WC_POLARITY, NULL}, {"bigger", WC_POLARITY, NULL},
    {"small", WC_POLARITY, NULL}, {"smaller", WC_POLARITY, NULL}, {"long", WC_POLARITY, NULL},
    {"longer", WC_POLARITY, NULL}, {"short", WC_POLARITY, NULL}, {"shorter", WC_POLARITY, NULL},
    {"old", WC_POLARITY, NULL}, {"older", WC_POLARITY, NULL}, {"new", WC_POLARITY, NULL},
    {"newer", WC_POLARITY, NULL}, {"young", WC_POLARITY, NULL}, {"younger", WC_POLARITY, NULL},
    {"best", WC_POLARITY, NULL}, {"worst", WC_POLARITY, NULL}, {"good", WC_POLARITY, NULL},
    {"bad", WC_POLARITY, NULL}, {"better", WC_POLARITY, NULL}, {"worse", WC_POLARITY, NULL},
    {"left", WC_POLARITY, NULL}, {"front", WC_POLARITY, NULL}, {"back", WC_POLARITY, NULL},
    {"top", WC_POLARITY, NULL}, {"bottom", WC_POLARITY, NULL}, {"upstairs", WC_POLARITY, NULL},
    {"downstairs", WC_POLARITY, NULL}, {"north", WC_POLARITY, NULL}, {"south", WC_POLARITY, NULL},
    {"east", WC_POLARITY, NULL}, {"west", WC_POLARITY, NULL}, {"buy", WC_POLARITY, NULL},
    {"sell", WC_POLARITY, NULL}, {"send", WC_POLARITY, NULL}, {"receive", WC_POLARITY, NULL},
    {"win", WC_POLARITY, NULL}, {"lose", WC_POLARITY, NULL}, {"lost", WC_POLARITY, NULL},
    {"won", WC_POLARITY, NULL}, {"pass", WC_POLARITY, NULL}, {"fail", WC_POLARITY, NULL},
    {"full", WC_POLARITY, NULL}, {"empty", WC_POLARITY, NULL}, {"wet", WC_POLARITY, NULL},
    {"dry", WC_POLARITY, NULL}, {"easy", WC_POLARITY, NULL}, {"hard", WC_POLARITY, NULL},
    {"cheap", WC_POLARITY, NULL}, {"expensive", WC_POLARITY, NULL}, {"safe", WC_POLARITY, NULL},
    {"dangerous", WC_POLARITY, NULL}, {"healthy", WC_POLARITY, NULL}, {"too", WC_POLARITY, NULL},
    {"enough", WC_POLARITY, NULL}, {"again", WC_POLARITY, NULL}, {"still", WC_POLARITY, NULL},
    {"already", WC_POLARITY, NULL}, {"yet", WC_POLARITY, NULL}, {"or", WC_POLARITY, NULL},
    {"instead", WC_POLARITY, NULL}, {"except", WC_POLARITY, NULL}, {"until", WC_POLARITY, NULL},
    {"since", WC_POLARITY, NULL}, {"between", WC_POLARITY, NULL},
    /* question words */
    {"what", WC_QUESTION, NULL}, {"when", WC_QUESTION, NULL}, {"where", WC_QUESTION, NULL},
    {"who", WC_QUESTION, NULL}, {"whom", WC_QUESTION, "who"}, {"whose", WC_QUESTION, NULL},
    {"why", WC_QUESTION, NULL}, {"how", WC_QUESTION, NULL}, {"which", WC_QUESTION, "what"},
    {"whats", WC_QUESTION, "what"},
    /* pronouns, by person */
    {"i", WC_PERSON, "asker"}, {"me", WC_PERSON, "1s"}, {"my", WC_PERSON, "1s"}, {"mine", WC_PERSON, "1s"},
    {"myself", WC_PERSON, "1s"}, {"you", WC_PERSON, "asker"}, {"your", WC_PERSON, "2"}, {"yours", WC_PERSON, "2"},
    {"yourself", WC_PERSON, "2"}, {"u", WC_PERSON, "2"}, {"ur", WC_PERSON, "2"}, {"he", WC_PERSON, "3m"},
    {"him", WC_PERSON, "3m"}, {"his", WC_PERSON, "3m"}, {"himself", WC_PERSON, "3m"}, {"she", WC_PERSON, "3f"},
    {"her", WC_PERSON, "3f"}, {"hers", WC_PERSON, "3f"}, {"herself", WC_PERSON, "3f"}, {"we", WC_PERSON, "1p"},
    {"us", WC_PERSON, "1p"}, {"our", WC_PERSON, "1p"}, {"ours", WC_PERSON, "1p"}, {"ourselves", WC_PERSON, "1p"},
    {"they", WC_PERSON, "3p"}, {"them", WC_PERSON, "3p"}, {"their", WC_PERSON, "3p"},
    {"theirs", WC_PERSON, "3p"},
    /* stop words */
    {"the", WC_STOP, NULL}, {"a", WC_STOP, NULL}, {"an", WC_STOP, NULL}, {"is", WC_STOP, NULL},
    {"are", WC_STOP, NULL}, {"was", WC_STOP, NULL}, {"were", WC_STOP, NULL}, {"be", WC_STOP, NULL},
    {"been", WC_STOP, NULL}, {"being", WC_STOP, NULL}, {"am", WC_STOP, NULL}, {"do", WC_STOP, NULL},
    {"does", WC_STOP, NULL}, {"did", WC_STOP, NULL}, {"doing", WC_STOP, NULL}, {"have", WC_STOP, NULL},
    {"has", WC_STOP, NULL}, {"had", WC_STOP, NULL}, {"having", WC_STOP, NULL}, {"will", WC_STOP, NULL},
    {"would", WC_STOP, NULL}, {"shall", WC_STOP, NULL}, {"should", WC_STOP, NULL}, {"can", WC_STOP, NULL},
    {"could", WC_STOP, NULL}, {"may", WC_STOP, NULL}, {"might", WC_STOP, NULL}, {"must", WC_STOP, NULL},
    {"to", WC_STOP, NULL}, {"of", WC_STOP, NULL}, {"in", WC_STOP, NULL}, {"at", WC_STOP, NULL},
    {"by", WC_STOP, NULL}, {"for", WC_STOP, NULL}, {"from", WC_STOP, NULL}, {"with", WC_STOP, NULL},
    {"about", WC_STOP, NULL}, {"as", WC_STOP, NULL}, {"into", WC_STOP, NULL}, {"onto", WC_STOP, NULL},
    {"then", WC_STOP, NULL}, {"that", WC_STOP, NULL}, {"this", WC_STOP, NULL}, {"these", WC_STOP, NULL},
    {"those", WC_STOP, NULL}, {"there", WC_STOP, NULL}, {"here", WC_STOP, NULL}, {"it", WC_STOP, NULL},
    {"its", WC_STOP, NULL}, {"and", WC_STOP, NULL}, {"but", WC_STOP, NULL}, {"if", WC_STOP, NULL},
    {"so", WC_STOP, NULL}, {"because", WC_STOP, NULL}, {"any", WC_STOP, NULL}, {"some", WC_STOP, NULL},
    {"o", WC_STOP, NULL}, {"clock", WC_STOP, NULL}, {"oclock", WC_STOP, NULL}, {"via", WC_STOP, NULL}, {"than", WC_STOP, NULL}, {"von", WC_STOP, NULL}, {"nach", WC_STOP, NULL},
    {"bis", WC_STOP, NULL}, {"desde", WC_STOP, NULL}, {"hasta", WC_STOP, NULL}, {"vers", WC_STOP, NULL},
    {"naar", WC_STOP, NULL}, {"towards", WC_STOP, NULL},
    {"toward", WC_STOP, NULL}, {"vs", WC_STOP, NULL}, {"versus", WC_STOP, NULL},
    {"per", WC_STOP, NULL}, {"like", WC_STOP, NULL}, {"going", WC_STOP, NULL}, {"gonna", WC_STOP, NULL},
    {"wanna", WC_STOP, NULL}, {"anything", WC_STOP, NULL}, {"something", WC_STOP, NULL},
    {"s", WC_STOP, NULL}, {"t", WC_STOP, NULL}, {"d", WC_STOP, NULL}, {"ll", WC_STOP, NULL},
    /* common words: frequent, general, ignored */
    {"get", WC_COMMON, NULL}, {"got", WC_COMMON, NULL}, {"make", WC_COMMON, NULL}, {"made", WC_COMMON, NULL},
    {"tell", WC_COMMON, NULL}, {"say", WC_COMMON, NULL}, {"said", WC_COMMON, NULL}, {"know", WC_COMMON, NULL},
    {"think", WC_COMMON, NULL}, {"want", WC_COMMON, NULL}, {"need", WC_COMMON, NULL}, {"go", WC_COMMON, NULL},
    {"come", WC_COMMON, NULL}, {"see", WC_COMMON, NULL}, {"look", WC_COMMON, NULL}, {"let", WC_COMMON, NULL},
    {"put", WC_COMMON, NULL}, {"set", WC_COMMON, NULL}, {"find", WC_COMMON, NULL}, {"help", WC_COMMON, NULL},
    {"use", WC_COMMON, NULL}, {"try", WC_COMMON, NULL}, {"keep", WC_COMMON, NULL}, {"turn", WC_COMMON, NULL},
    {"switch", WC_COMMON, "turn"}, {"give", WC_COMMON, NULL}, {"check", WC_COMMON, NULL},
    {"thing", WC_COMMON, NULL}, {"things", WC_COMMON, NULL}, {"way", WC_COMMON, NULL}, {"lot", WC_COMMON, NULL},
    {"lots", WC_COMMON, NULL}, {"also", WC_COMMON, NULL}, {"very", WC_COMMON, NULL}, {"much", WC_COMMON, NULL},
    {"many", WC_COMMON, NULL}, {"soon", WC_COMMON, NULL},
    {"possible", WC_COMMON, NULL}, {"able", WC_COMMON, NULL}, {"sure", WC_COMMON, NULL},
    {"supposed", WC_COMMON, NULL}, {"likely", WC_COMMON, NULL},
    {"exactly", WC_COMMON, NULL}, {"around", WC_COMMON, NULL}, {"approximately", WC_COMMON, NULL},
    {"roughly", WC_COMMON, NULL},
    {"explain", WC_COMMON, NULL}, {"mean", WC_COMMON, NULL}, {"means", WC_COMMON, NULL},
    {"happen", WC_COMMON, NULL}, {"happening", WC_COMMON, NULL}, {"expected", WC_COMMON, NULL},
    {"expect", WC_COMMON, NULL}, {"gotta", WC_COMMON, NULL}, {"quick", WC_COMMON, NULL},
    {"exact", WC_COMMON, NULL}, {"kind", WC_COMMON, NULL},
    {"sort", WC_COMMON, NULL}, {"type", WC_COMMON, NULL}, {"even", WC_COMMON, NULL}, {"ever", WC_COMMON, NULL},
};

/* household synonyms for content words (after stemming) */
static const struct {
    const char *word, *canon;
} synonyms[] = {
    {"mum", "mom"},          {"mommy", "mom"},         {"mama", "mom"},          {"mother", "mom"},
    {"dad", "dad"},          {"daddy", "dad"},         {"papa", "dad"},          {"father", "dad"},
    {"grandma", "grandma"},  {"granny", "grandma"},    {"grandmother", "grandma"}, {"nana", "grandma"},
    {"grandpa", "grandpa"},  {"grandfather", "grandpa"}, {"granddad", "grandpa"}, {"kid", "child"},
    {"children", "child"},   {"telly", "tv"},          {"television", "tv"},     {"fridge", "refrigerator"},
    {"lamp", "light"},       {"bulb", "light"},        {"temp", "temperature"},  {"reminder", "remind"},
    {"lounge", "living"},    {"sitting", "living"},    {"loo", "bathroom"},      {"toilet", "bathroom"},
    {"hoover", "vacuum"},    {"cellphone", "phone"},   {"mobile", "phone"},      {"timers", "timer"},
    {"alarms", "alarm"},     {"ac", "aircon"},         {"airconditioning", "aircon"}, {"conditioner", "aircon"},
    {"heater", "heating"},   {"heat", "heating"},      {"thermostat", "heating"}, {"doorbell", "doorbell"},
    {"garbage", "trash"},    {"rubbish", "trash"},     {"bin", "trash"},         {"movie", "film"},
    {"song", "music"},       {"tune", "music"},        {"forecast", "weather"},  {"maths", "math"},
    {"colour", "color"},     {"favourite", "favorite"}, {"neighbour", "neighbor"}, {"centre", "center"},
    {"degree", "degrees"},   {"celsius", "celsius"},   {"c", "celsius"},         {"f", "fahrenheit"},
    {"appointment", "appointment"}, {"appt", "appointment"}, {"recipe", "recipe"}, {"cook", "cook"},
    {"oven", "oven"},        {"practise", "practice"}, {"homework", "homework"}, {"calendar", "calendar"},
    {"schedule", "calendar"}, {"agenda", "calendar"},  {"diary", "calendar"},    {"event", "calendar"},
};

static const struct lex *lex_find(const char *w, size_t n)
{
    for (size_t i = 0; i < sizeof(lexicon) / sizeof(lexicon[0]); i++)
        if (word_is(w, n, lexicon[i].word))
            return &lexicon[i];
    return NULL;
}

static int numword_value(const char *w, size_t n)
{
    for (size_t i = 0; i < sizeof(numwords) / sizeof(numwords[0]); i++)
        if (word_is(w, n, numwords[i].word))
            return numwords[i].value;
    return -1;
}

static int ordword_value(const char *w, size_t n)
{
    for (size_t i = 0; i < sizeof(ordwords) / sizeof(ordwords[0]); i++)
        if (word_is(w, n, ordwords[i].word))
            return ordwords[i].value;
    return -1;
}

/* --------------------------------------------------------------- analysis */

#define GATE_MAX_WORDS 128
#define GATE_WORD 48

struct gword {
    enum wclass c;
    bool name;         /* written with a capital inside a sentence (content words) */
    char v[GATE_WORD]; /* canonical value */
};

struct analysis {
    struct gword w[GATE_MAX_WORDS];
    int n;
};

/* Words that give the next entity a role: "from Berlin to Hamburg". */
static bool is_marker(const char *w)
{
    static const char *const markers[] = {"from", "to",    "than", "into",  "onto", "towards", "toward", "vs",
                                          "versus", "von", "nach", "bis", "desde", "hasta", "vers", "naar", NULL};
    return in_list(w, strlen(w), markers);
}

/* crude symmetric stemming of a content word: it only has to map both
 * questions' forms of a word to the same string */
static size_t stem(char *w, size_t n)
{
    if (n > 5 && !memcmp(w + n - 3, "ing", 3))
        n -= 3;
    else if (n > 4 && !memcmp(w + n - 3, "ies", 3))
        w[n - 3] = 'y', n -= 2;
    else if (n > 4 && !memcmp(w + n - 2, "es", 2) &&
             (w[n - 3] == 's' || w[n - 3] == 'x' || w[n - 3] == 'z' || (w[n - 3] == 'h' && (w[n - 4] == 'c' || w[n - 4] == 's'))))
        n -= 2;
    else if (n > 3 && w[n - 1] == 's' && w[n - 2] != 's' && w[n - 2] != 'u' && w[n - 2] != 'i')
        n -= 1;
    else if (n > 4 && !memcmp(w + n - 2, "ed", 2))
        n -= 2;
    w[n] = '\0';
    return n;
}

static void add(struct analysis *a, enum wclass c, const char *v, size_t n)
{
    if (a->n >= GATE_MAX_WORDS)
        return;
    if (n >= GATE_WORD)
        n = GATE_WORD - 1;
    a->w[a->n].c = c;
    a->w[a->n].name = false;
    memcpy(a->w[a->n].v, v, n);
    a->w[a->n].v[n] = '\0';
    a->n++;
}

static void add_number(struct analysis *a, long long v)
{
    char buf[32];
    int n = snprintf(buf, sizeof(buf), "%lld", v);
    add(a, WC_NUMBER, buf, (size_t)n);
}

static void analyse(const char *text, struct analysis *a)
{
    a->n = 0;
    const char *p = text;
    long long num_acc = -1, num_cur = 0; /* a run of number words */
    enum wclass prev = WC_STOP;
    while (*p && a->n < GATE_MAX_WORDS) {
        while (*p == ' ')
            p++;
        const char *wr = p;
        while (*p && *p != ' ')
            p++;
        size_t n = (size_t)(p - wr);
        if (!n)
            break;
        char lw[GATE_WORD];
        if (n >= GATE_WORD)
            n = GATE_WORD - 1;
        for (size_t k = 0; k < n; k++)
            lw[k] = (char)tolower((unsigned char)wr[k]);
        lw[n] = '\0';
        const char *w = lw;
        const bool is_name = isupper((unsigned char)wr[0]);
        const char *next = *p == ' ' ? p + 1 : p; /* the next word (raw) */
        size_t next_n = strcspn(next, " ");
        /* number words: "twenty one" = 21, "two hundred" = 200 */
        int nv = numword_value(w, n);
        if (nv >= 0) {
            /* "one two" and "twenty one thirty" are several numbers */
            if (num_acc >= 0 && nv < 100 &&
                ((nv >= 10 && num_cur % 100 != 0) || (nv < 10 && num_cur % 10 != 0))) {
                add_number(a, num_acc + num_cur);
                num_acc = -1;
            }
            if (num_acc < 0)
                num_acc = 0, num_cur = 0;
            if (nv == 100 || nv == 1000 || nv == 1000000) {
                num_cur = (num_cur ? num_cur : 1) * nv;
                if (nv >= 1000)
                    num_acc += num_cur, num_cur = 0;
            } else {
                num_cur += nv;
            }
            prev = WC_NUMBER;
            continue;
        }
        if (num_acc >= 0) {
            add_number(a, num_acc + num_cur);
            num_acc = -1;
        }
        char buf[GATE_WORD];
        if (isdigit((unsigned char)w[0])) {
            /* digits, maybe "3rd", "7:30", "21.5" */
            size_t k = 0;
            while (k < n && (isdigit((unsigned char)w[k]) || w[k] == '.' || w[k] == ':'))
                k++;
            if (k < n) {
                int v = atoi(w);
                snprintf(buf, sizeof(buf), "#%d", v);
                add(a, WC_NUMBER, buf, strlen(buf));
            } else {
                /* "7:00" = "7", "21.0" = "21" */
                size_t m = k;
                if (m > 3 && !memcmp(w + m - 3, ":00", 3))
                    m -= 3;
                else if (m > 2 && !memcmp(w + m - 2, ".0", 2))
                    m -= 2;
                add(a, WC_NUMBER, w, m);
            }
            prev = WC_NUMBER;
            continue;
        }
        int ov = ordword_value(w, n);
        if (ov > 0 && !(ov == 2 && (prev == WC_NUMBER))) { /* "2 second timer": the unit */
            snprintf(buf, sizeof(buf), "#%d", ov);
            add(a, WC_NUMBER, buf, strlen(buf));
            prev = WC_NUMBER;
            continue;
        }
        if (word_is(w, n, "am") && prev == WC_NUMBER) {
            add(a, WC_TIME, "am", 2);
            prev = WC_TIME;
            continue;
        }
        if (word_is(w, n, "what") && next_n == 4 && !strncasecmp(next, "time", 4)) {
            add(a, WC_QUESTION, "when", 4); /* "what time is practice" = "when is practice" */
            p = next + 4;
            prev = WC_QUESTION;
            continue;
        }
        if (word_is(w, n, "how") && next_n == 4 && !strncasecmp(next, "much", 4) &&
            !strncmp(next + 4, " time", 5) && (next[9] == ' ' || next[9] == '\0')) {
            add(a, WC_QUESTION, "how long", 8); /* "how much time is left" = "how long is left" */
            p = next + 9;
            prev = WC_QUESTION;
            continue;
        }
        if (word_is(w, n, "right") && next_n == 3 && !strncasecmp(next, "now", 3)) {
            p = next + 3; /* "right now": the default time */
            continue;
        }
        /* "on" before an article, a possessive, a day or a number is a preposition ("on the list",
         * "on Saturday"), not a state, except after turn / switch ("turn on the light") */
        if (word_is(w, n, "on") && prev != WC_COMMON && next_n) {
            static const char *const after[] = {"the", "a", "an", "my", "your", "his", "her", "our", "their",
                                                "this", "that", "these", "those", "each", "every", "earth", NULL};
            char nx[GATE_WORD];
            size_t m = next_n < GATE_WORD ? next_n : GATE_WORD - 1;
            for (size_t k = 0; k < m; k++)
                nx[k] = (char)tolower((unsigned char)next[k]);
            nx[m] = '\0';
            const struct lex *nl = lex_find(nx, m);
            if (in_list(nx, m, after) || isdigit((unsigned char)nx[0]) || (nl && nl->c == WC_DAY)) {
                prev = WC_STOP;
                continue;
            }
        }
        if (word_is(w, n, "how") && *p == ' ') {
            /* "how many", "how much", "how long", ...: one question word */
            const char *q = p + 1, *e = q;
            while (*e && *e != ' ')
                e++;
            static const char *const hows[] = {"many", "much", "long", "often", "far", "old", "big", "tall",
                                               "hot", "cold", "warm", "late", "early", "soon", NULL};
            if (in_list(q, (size_t)(e - q), hows)) {
                snprintf(buf, sizeof(buf), "how %.*s", (int)(e - q), q);
                add(a, WC_QUESTION, buf, strlen(buf));
                p = e;
                prev = WC_QUESTION;
                continue;
            }
        }
        const struct lex *lx = lex_find(w, n);
        if (lx) {
            /* "to" gives a role after a noun ("from Berlin to Hamburg"), not
             * after a verb ("going to rain", "remind me to call") */
            bool marker = is_marker(lx->word) &&
                          (strcmp(lx->word, "to") || prev == WC_CONTENT || prev == WC_NUMBER);
            if ((lx->c != WC_STOP || marker) && lx->c != WC_COMMON)
                add(a, lx->c, lx->canon ? lx->canon : lx->word, strlen(lx->canon ? lx->canon : lx->word));
            if (!strcmp(lx->word, "tonight")) /* night and today */
                add(a, WC_TIME, "night", 5);
            prev = lx->c;
            continue;
        }
        /* a content word: stem, then synonyms */
        if (n >= GATE_WORD)
            n = GATE_WORD - 1;
        memcpy(buf, w, n);
        buf[n] = '\0';
        bool ascii = true;
        for (size_t k = 0; k < n; k++)
            ascii &= (unsigned char)buf[k] < 0x80;
        const char *canon = buf;
        for (size_t k = 0; k < sizeof(synonyms) / sizeof(synonyms[0]); k++)
            if (!strcmp(buf, synonyms[k].word))
                canon = synonyms[k].canon;
        if (canon == buf && ascii) {
            n = stem(buf, n);
            for (size_t k = 0; k < sizeof(synonyms) / sizeof(synonyms[0]); k++)
                if (!strcmp(buf, synonyms[k].word))
                    canon = synonyms[k].canon;
            /* a stem that is a listed word ("lights" -> "light" is not, "timers" ...) */
            const struct lex *l2 = lex_find(buf, strlen(buf));
            if (l2 && (l2->c == WC_STOP || l2->c == WC_COMMON)) {
                prev = l2->c;
                continue;
            }
            if (l2) {
                add(a, l2->c, l2->canon ? l2->canon : l2->word, strlen(l2->canon ? l2->canon : l2->word));
                prev = l2->c;
                continue;
            }
        }
        add(a, WC_CONTENT, canon, strlen(canon));
        a->w[a->n - 1].name = is_name && a->n <= GATE_MAX_WORDS;
        prev = WC_CONTENT;
    }
    if (num_acc >= 0)
        add_number(a, num_acc + num_cur);
}

/* Is value v of class c in a? */
static bool has(const struct analysis *a, enum wclass c, const char *v)
{
    for (int i = 0; i < a->n; i++)
        if (a->w[i].c == c && !strcmp(a->w[i].v, v))
            return true;
    return false;
}

static int count(const struct analysis *a, enum wclass c, const char *v)
{
    int k = 0;
    for (int i = 0; i < a->n; i++)
        k += a->w[i].c == c && !strcmp(a->w[i].v, v);
    return k;
}

/* The values of class c, in order (numbers: as a sequence) must be equal. */
static bool same_sequence(const struct analysis *a, const struct analysis *b, enum wclass c)
{
    int i = 0, j = 0;
    for (;;) {
        while (i < a->n && a->w[i].c != c)
            i++;
        while (j < b->n && b->w[j].c != c)
            j++;
        if (i == a->n || j == b->n)
            return i == a->n && j == b->n;
        if (strcmp(a->w[i].v, b->w[j].v))
            return false;
        i++, j++;
    }
}

/* Each value of class c in a is in b as often, and the other way round. */
static bool same_multiset(const struct analysis *a, const struct analysis *b, enum wclass c, bool counted,
                          const char **which)
{
    for (int pass = 0; pass < 2; pass++) {
        const struct analysis *x = pass ? b : a, *y = pass ? a : b;
        for (int i = 0; i < x->n; i++) {
            if (x->w[i].c != c)
                continue;
            if (counted ? count(x, c, x->w[i].v) != count(y, c, x->w[i].v) : !has(y, c, x->w[i].v)) {
                *which = x->w[i].v;
                return false;
            }
        }
    }
    return true;
}

/* The role of each content word: the marker before it, looking back over
 * the words between that are not content words ("from the old town").
 * analyse() keeps markers as WC_STOP entries with their text. */
static const char *role_of(const struct analysis *a, int i)
{
    for (int k = i - 1; k >= 0; k--) {
        if (a->w[k].c == WC_CONTENT || a->w[k].c == WC_NUMBER || a->w[k].c == WC_DAY)
            return "";
        if (a->w[k].c == WC_STOP && is_marker(a->w[k].v))
            return a->w[k].v;
    }
    return "";
}

/* Order: every content word both have plays the same role in both (the
 * marker before it is the same), so "from Berlin to Hamburg" is not "from
 * Hamburg to Berlin" and "Emma older than Noah" is not "Noah older than
 * Emma", while "to Hamburg from Berlin" is "from Berlin to Hamburg".  The
 * numbers are compared as a sequence by same_sequence(). */
static bool same_roles(const struct analysis *a, const struct analysis *b, const char **which)
{
    for (int i = 0; i < a->n; i++) {
        if (a->w[i].c != WC_CONTENT && a->w[i].c != WC_DAY) /* "from Monday to Wednesday" too */
            continue;
        for (int j = 0; j < b->n; j++)
            if (b->w[j].c == a->w[i].c && !strcmp(a->w[i].v, b->w[j].v)) {
                if (strcmp(role_of(a, i), role_of(b, j))) {
                    *which = a->w[i].v;
                    return false;
                }
                break; /* first occurrence */
            }
    }
    return true;
}

/* Names (content words written with a capital inside a sentence, in either
 * question) that both have come in the same order: "Did Mia call Leo" is not
 * "Did Leo call Mia". */
static bool same_name_order(const struct analysis *a, const struct analysis *b)
{
    const char *sa[GATE_MAX_WORDS], *sb[GATE_MAX_WORDS];
    int na = 0, nb = 0;
    for (int pass = 0; pass < 2; pass++) {
        const struct analysis *x = pass ? b : a, *y = pass ? a : b;
        const char **seq = pass ? sb : sa;
        int *ns = pass ? &nb : &na;
        for (int i = 0; i < x->n; i++) {
            if (x->w[i].c != WC_CONTENT)
                continue;
            /* a name with a role ("from Berlin") is compared by same_roles() */
            bool name = x->w[i].name && !*role_of(x, i), in_y = false, seen = false;
            for (int j = 0; j < y->n; j++)
                if (y->w[j].c == WC_CONTENT && !strcmp(y->w[j].v, x->w[i].v)) {
                    in_y = true;
                    name = (name || y->w[j].name) && !*role_of(y, j) && !*role_of(x, i);
                }
            for (int k = 0; k < *ns; k++)
                seen |= !strcmp(seq[k], x->w[i].v);
            if (name && in_y && !seen)
                seq[(*ns)++] = x->w[i].v;
        }
    }
    if (na != nb)
        return false;
    for (int k = 0; k < na; k++)
        if (strcmp(sa[k], sb[k]))
            return false;
    return true;
}

/* Pronouns: when both questions have some, the same persons ("my calendar"
 * is not "her calendar"); one without any ("cancel the timer" / "cancel my
 * timer") does not conflict. */
static bool same_people(const struct analysis *a, const struct analysis *b, const char **which)
{
    int pa = 0, pb = 0;
    for (int i = 0; i < a->n; i++)
        pa += a->w[i].c == WC_PERSON;
    for (int i = 0; i < b->n; i++)
        pb += b->w[i].c == WC_PERSON;
    return !pa || !pb || same_multiset(a, b, WC_PERSON, false, which);
}

bool infer_semgate_agree(const char *a, const char *b, char *why, size_t why_cap)
{
    if (why && why_cap)
        why[0] = '\0';
    if (!a || !b)
        return false;
    struct analysis *x = malloc(2 * sizeof(*x));
    if (!x) {
        if (why && why_cap)
            snprintf(why, why_cap, "out of memory");
        return false;
    }
    struct analysis *y = x + 1;
    analyse(a, x);
    analyse(b, y);
    const char *rule = NULL, *word = NULL;
    if (!same_sequence(x, y, WC_NUMBER))
        rule = class_names[WC_NUMBER];
    else if (!same_multiset(x, y, WC_TIME, false, &word))
        rule = class_names[WC_TIME];
    else if (!same_multiset(x, y, WC_DAY, false, &word))
        rule = class_names[WC_DAY];
    else if (!same_multiset(x, y, WC_NEGATION, true, &word))
        rule = class_names[WC_NEGATION];
    else if (!same_multiset(x, y, WC_POLARITY, false, &word))
        rule = class_names[WC_POLARITY];
    else if (!same_multiset(x, y, WC_QUESTION, false, &word))
        rule = class_names[WC_QUESTION];
    else if (!same_people(x, y, &word))
        rule = class_names[WC_PERSON];
    else if (!same_multiset(x, y, WC_CONTENT, false, &word))
        rule = class_names[WC_CONTENT];
    else if (!same_roles(x, y, &word) || !same_name_order(x, y))
        rule = "order";
    if (rule && why && why_cap) {
        if (word)
            snprintf(why, why_cap, "%s (%s)", rule, word);
        else
            snprintf(why, why_cap, "%s", rule);
    }
    free(x);
    return rule == NULL;
}
