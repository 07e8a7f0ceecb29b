/*
 * cmd_tokenize.c - `infer tokenize` and `infer detokenize`: a model's
 * tokenizer on the command line (ids as llama.cpp would produce them), plus a
 * throughput benchmark of the tokenizer (--bench).
 */
#include "cli.h"

#include <ctype.h>
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Open a model's metadata and build its tokenizer; NULL after printing why. */
static infer_tokenizer *open_tokenizer(const char *model_arg)
{
    const char *path = cli_model_path(model_arg);
    if (!path)
        return NULL;
    infer_gguf *g;
    if (infer_gguf_open(&g, path, 0) != INFER_OK) {
        cli_fail(NULL);
        return NULL;
    }
    infer_tokenizer *t;
    infer_status st = infer_tokenizer_load(&t, g);
    infer_gguf_close(g); /* the tokenizer keeps its own copy */
    if (st != INFER_OK) {
        cli_fail(path);
        return NULL;
    }
    if (infer_tokenizer_warning(t))
        fprintf(stderr, "warning: %s\n", infer_tokenizer_warning(t));
    return t;
}

/* Whole file or stdin ("-") into a buffer; NULL after printing why. */
static char *slurp(const char *path, size_t *len)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) {
        fprintf(stderr, "error: %s: %s\n", path, strerror(errno));
        return NULL;
    }
    size_t n = 0, cap = 1 << 16;
    char *buf = malloc(cap);
    while (buf) {
        if (n == cap) {
            char *p = realloc(buf, cap *= 2);
            if (!p) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = p;
        }
        size_t k = fread(buf + n, 1, cap - n, f);
        n += k;
        if (k == 0)
            break;
    }
    bool bad = ferror(f);
    if (f != stdin)
        fclose(f);
    if (!buf || bad) {
        fprintf(stderr, "error: %s: %s\n", path, buf ? "read error" : "out of memory");
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

/* Tokenize into a growing buffer; returns the count or -1 after printing why. */
static int64_t tokenize_all(const infer_tokenizer *t, const char *text, size_t len, bool add_special,
                            bool parse_special, int32_t **ids)
{
    int64_t cap = (int64_t)len / 2 + 16;
    for (;;) {
        int32_t *p = realloc(*ids, (size_t)cap * sizeof(**ids));
        if (!p) {
            fprintf(stderr, "error: out of memory\n");
            return -1;
        }
        *ids = p;
        int64_t n = infer_tokenize(t, text, len, add_special, parse_special, *ids, cap);
        if (n < 0) {
            cli_fail("tokenize");
            return -1;
        }
        if (n <= cap)
            return n;
        cap = n;
    }
}

/* Print a token's text on one line: escapes for control characters,
 * backslashes and bytes that are not valid UTF-8. */
static void print_escaped(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char c = s[i];
        size_t k = c < 0x80 ? 1 : c >= 0xC2 && c <= 0xDF ? 2 : c >= 0xE0 && c <= 0xEF ? 3 : c >= 0xF0 && c <= 0xF4 ? 4 : 0;
        bool ok = k > 0 && i + k <= n;
        for (size_t j = 1; ok && j < k; j++)
            ok = (s[i + j] & 0xC0) == 0x80;
        if (!ok) {
            printf("\\x%02X", c);
            i++;
        } else if (k > 1) {
            fwrite(s + i, 1, k, stdout);
            i += k;
        } else if (c == '\n') {
            fputs("\\n", stdout), i++;
        } else if (c == '\t') {
            fputs("\\t", stdout), i++;
        } else if (c == '\r') {
            fputs("\\r", stdout), i++;
        } else if (c == '\\') {
            fputs("\\\\", stdout), i++;
        } else if (c < 0x20 || c == 0x7F) {
            printf("\\x%02X", c), i++;
        } else {
            putchar(c), i++;
        }
    }
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Median time of repeated tokenizations of the same text. */
static int bench(const infer_tokenizer *t, const char *text, size_t len, bool add_special, bool parse_special)
{
    enum { MAX_RUNS = 50 };
    double times[MAX_RUNS], total = 0;
    int32_t *ids = NULL;
    int64_t n = 0;
    int runs = 0;
    while (runs < MAX_RUNS && (runs < 5 || total < 1.0)) {
        double t0 = now();
        n = tokenize_all(t, text, len, add_special, parse_special, &ids);
        double dt = now() - t0;
        if (n < 0) {
            free(ids);
            return 1;
        }
        times[runs++] = dt;
        total += dt;
    }
    free(ids);
    qsort(times, (size_t)runs, sizeof(times[0]), cmp_double);
    double med = times[runs / 2];
    printf("tokenizer: %s%s%s, %d tokens\n", infer_tokenizer_model(t), *infer_tokenizer_pre(t) ? "/" : "",
           infer_tokenizer_pre(t), infer_tokenizer_n_vocab(t));
    printf("text: %zu bytes -> %lld tokens\n", len, (long long)n);
    printf("method: median of %d runs of infer_tokenize on the whole text, one thread, output buffer reused\n",
           runs);
    printf("time: %.2f ms median (min %.2f, max %.2f), %.1f MB/s, %.0f tokens/ms\n", med * 1e3, times[0] * 1e3,
           times[runs - 1] * 1e3, (double)len / med / 1e6, (double)n / (med * 1e3));
    return 0;
}

int cmd_tokenize(int argc, char **argv)
{
    enum { OPT_PIECES = 2000, OPT_BENCH, OPT_NOBOS, OPT_SPEC };
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"file", required_argument, 0, 'f'},
        {"no-bos", no_argument, 0, OPT_NOBOS}, {"special", no_argument, 0, OPT_SPEC},
        {"pieces", no_argument, 0, OPT_PIECES}, {"bench", no_argument, 0, OPT_BENCH},
        {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};
    const char *model = NULL, *file = NULL;
    bool add_special = true, parse_special = false, pieces = false, do_bench = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:f:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 'f': file = optarg; break;
        case OPT_NOBOS: add_special = false; break;
        case OPT_SPEC: parse_special = true; break;
        case OPT_PIECES: pieces = true; break;
        case OPT_BENCH: do_bench = true; break;
        case 'h':
            printf("usage: infer tokenize [-m MODEL] [--no-bos] [--special] [--pieces] [--bench]\n"
                   "                      [-f FILE | TEXT...]\n\n"
                   "Print the token ids of TEXT (the arguments joined by spaces), of FILE, or of\n"
                   "standard input, on one line.\n"
                   "  --no-bos    do not add BOS/EOS (by default they are added as the model says)\n"
                   "  --special   turn special-token text (<start_of_turn>, <|im_start|>) into ids\n"
                   "  --pieces    one token per line: id -> 'text' (escaped)\n"
                   "  --bench     time the tokenizer on the text instead of printing ids\n");
            return 0;
        default: return 2;
        }
    }
    if (file && optind < argc) {
        fprintf(stderr, "error: give either -f FILE or TEXT, not both\n");
        return 2;
    }
    char *text = NULL;
    size_t len = 0;
    if (!file && optind == argc && isatty(STDIN_FILENO)) {
        fprintf(stderr, "usage: infer tokenize [-m MODEL] [options] [-f FILE | TEXT...] (--help for more)\n");
        return 2;
    }
    if (file || optind == argc) {
        if (!(text = slurp(file ? file : "-", &len)))
            return 1;
    } else {
        for (int i = optind; i < argc; i++)
            len += strlen(argv[i]) + 1;
        text = malloc(len);
        if (!text)
            return fprintf(stderr, "error: out of memory\n"), 1;
        len = 0;
        for (int i = optind; i < argc; i++) {
            if (i > optind)
                text[len++] = ' ';
            memcpy(text + len, argv[i], strlen(argv[i]));
            len += strlen(argv[i]);
        }
    }
    infer_tokenizer *t = open_tokenizer(model);
    if (!t) {
        free(text);
        return 1;
    }
    int rc = 0;
    if (do_bench) {
        rc = bench(t, text, len, add_special, parse_special);
    } else {
        int32_t *ids = NULL;
        int64_t n = tokenize_all(t, text, len, add_special, parse_special, &ids);
        if (n < 0)
            rc = 1;
        for (int64_t i = 0; i < n; i++) {
            if (!pieces) {
                printf(i ? " %d" : "%d", ids[i]);
                continue;
            }
            char buf[512], *p = buf;
            int64_t k = infer_token_to_text(t, ids[i], true, buf, sizeof(buf));
            if (k > (int64_t)sizeof(buf) && (p = malloc((size_t)k)))
                infer_token_to_text(t, ids[i], true, p, (size_t)k);
            printf("%6d -> '", ids[i]);
            print_escaped((const unsigned char *)(p ? p : ""), p ? (size_t)k : 0);
            fputs("'\n", stdout);
            if (p != buf)
                free(p);
        }
        if (!pieces && n >= 0)
            putchar('\n');
        free(ids);
    }
    infer_tokenizer_free(t);
    free(text);
    return rc;
}

int cmd_detokenize(int argc, char **argv)
{
    static const struct option opts[] = {{"model", required_argument, 0, 'm'}, {"special", no_argument, 0, 's'},
                                         {"no-newline", no_argument, 0, 'n'}, {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    const char *model = NULL;
    bool special = false, newline = true;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:nh", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 's': special = true; break;
        case 'n': newline = false; break;
        case 'h':
            printf("usage: infer detokenize [-m MODEL] [--special] [-n] IDS...\n\n"
                   "Print the text of token ids, given as arguments or as one string of ids\n"
                   "separated by spaces or commas.\n"
                   "  --special        show control tokens (<bos>, <end_of_turn>, ...)\n"
                   "  -n, --no-newline do not end the output with a newline\n");
            return 0;
        default: return 2;
        }
    }
    size_t n = 0, cap = 64;
    int32_t *ids = malloc(cap * sizeof(*ids));
    if (!ids)
        return fprintf(stderr, "error: out of memory\n"), 1;
    for (int i = optind; i < argc; i++) {
        for (const char *p = argv[i]; *p;) {
            if (isspace((unsigned char)*p) || *p == ',' || *p == '[' || *p == ']') {
                p++;
                continue;
            }
            char *end;
            errno = 0;
            long v = strtol(p, &end, 10);
            if (end == p || errno || v < 0 || v > INT32_MAX ||
                (*end && !isspace((unsigned char)*end) && *end != ',' && *end != ']')) {
                size_t w = strcspn(p, " \t\n,]");
                fprintf(stderr, "error: '%.*s' is not a token id\n", (int)w, p);
                free(ids);
                return 2;
            }
            if (n == cap) {
                int32_t *q = realloc(ids, (cap *= 2) * sizeof(*ids));
                if (!q) {
                    free(ids);
                    return fprintf(stderr, "error: out of memory\n"), 1;
                }
                ids = q;
            }
            ids[n++] = (int32_t)v;
            p = end;
        }
    }
    if (n == 0) {
        fprintf(stderr, "usage: infer detokenize [-m MODEL] [--special] IDS...\n");
        free(ids);
        return 2;
    }
    infer_tokenizer *t = open_tokenizer(model);
    if (!t) {
        free(ids);
        return 1;
    }
    int rc = 0;
    int64_t len = infer_detokenize(t, ids, n, special, NULL, 0);
    char *text = len >= 0 ? malloc((size_t)len + 1) : NULL;
    if (len < 0) {
        rc = cli_fail(NULL);
    } else if (!text) {
        fprintf(stderr, "error: out of memory\n");
        rc = 1;
    } else {
        infer_detokenize(t, ids, n, special, text, (size_t)len);
        fwrite(text, 1, (size_t)len, stdout);
        if (newline)
            putchar('\n');
    }
    free(text);
    free(ids);
    infer_tokenizer_free(t);
    return rc;
}
