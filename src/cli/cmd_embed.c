/*
 * cmd_embed.c - `infer embed`: sentence embeddings of texts given on the
 * command line or one per line of a file, printed as JSON or plain numbers.
 *
 * All inputs are embedded in one infer_embed call (batched).  An input
 * longer than the model's context is truncated and a note on stderr says so
 * (the JSON output also marks it); that is never an error.
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char usage_text[] =
    "usage: infer embed -m EMBED.gguf [options] [TEXT ...]\n"
    "       infer embed -m EMBED.gguf [options] -f FILE      (one input per line; - for stdin)\n"
    "\n"
    "Print the embedding of each input (a bert GGUF, e.g. all-MiniLM-L6-v2 from\n"
    "models/fetch-embedder).\n"
    "\n"
    "  -m, --model FILE      embedding model (default: $INFER_EMBED_MODEL, else\n"
    "                        models/all-minilm-l6-v2-f16.gguf)\n"
    "  -f, --file FILE       inputs, one per non-empty line\n"
    "      --format FMT      json (default) | plain: one line of numbers per input\n"
    "  -c, --ctx N           truncate inputs to N tokens (default: the model's maximum)\n"
    "  -t, --threads N       threads (default: physical cores)\n"
    "  -q, --quiet           no notes on stderr\n";

#define DEFAULT_EMBED_FILE "all-minilm-l6-v2-f16.gguf"

/* Split buf into its non-empty lines (in place); returns the count or -1. */
static long split_lines(char *buf, size_t len, const char ***out, size_t **lens)
{
    size_t cap = 64, n = 0;
    const char **v = malloc(cap * sizeof(*v));
    size_t *l = malloc(cap * sizeof(*l));
    for (size_t i = 0; v && l && i < len;) {
        size_t j = i;
        while (j < len && buf[j] != '\n')
            j++;
        size_t e = j > i && buf[j - 1] == '\r' ? j - 1 : j;
        if (e > i) {
            if (n == cap) {
                cap *= 2;
                const char **v2 = realloc(v, cap * sizeof(*v));
                size_t *l2 = realloc(l, cap * sizeof(*l));
                if (v2)
                    v = v2;
                if (l2)
                    l = l2;
                if (!v2 || !l2)
                    break;
            }
            v[n] = buf + i;
            l[n++] = e - i;
        }
        i = j + 1;
    }
    if (!v || !l) {
        free(v);
        free(l);
        return -1;
    }
    *out = v;
    *lens = l;
    return (long)n;
}

static void print_json_string(const char *s, size_t n)
{
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            printf("\\%c", c);
        else if (c < 0x20)
            printf("\\u%04x", c);
        else
            putchar(c);
    }
    putchar('"');
}

int cmd_embed(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"model", required_argument, 0, 'm'}, {"file", required_argument, 0, 'f'},
        {"format", required_argument, 0, 'F'}, {"ctx", required_argument, 0, 'c'},
        {"threads", required_argument, 0, 't'}, {"quiet", no_argument, 0, 'q'},
        {"help", no_argument, 0, 'h'},        {0, 0, 0, 0},
    };
    const char *model = getenv("INFER_EMBED_MODEL"), *file = NULL;
    bool json = true, quiet = false;
    infer_embedder_params ep = {0};
    int c;
    char *end;
    while ((c = getopt_long(argc, argv, "m:f:c:t:qh", longopts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 'f': file = optarg; break;
        case 'F':
            if (strcmp(optarg, "json") && strcmp(optarg, "plain")) {
                fprintf(stderr, "error: --format must be json or plain\n");
                return 2;
            }
            json = !strcmp(optarg, "json");
            break;
        case 'c':
        case 't': {
            long v = strtol(optarg, &end, 10);
            if (*end || v < (c == 'c' ? 2 : 1) || v > 1 << 20) {
                fprintf(stderr, "error: bad value for -%c: '%s'\n", c, optarg);
                return 2;
            }
            if (c == 'c')
                ep.n_ctx = (int)v;
            else
                ep.n_threads = (int)v;
            break;
        }
        case 'q': quiet = true; break;
        case 'h': fputs(usage_text, stdout); return 0;
        default: fputs(usage_text, stderr); return 2;
        }
    }
    if (!model || !*model) {
        model = "models/" DEFAULT_EMBED_FILE;
        static char buf[4096];
        if (access(model, R_OK) != 0) {
            snprintf(buf, sizeof(buf), "%s/models/" DEFAULT_EMBED_FILE, INFER_SRCDIR);
            model = buf;
        }
        if (access(model, R_OK) != 0) {
            fprintf(stderr, "error: no embedding model given (-m FILE) and " DEFAULT_EMBED_FILE
                            " was not found; run models/fetch-embedder to get it\n");
            return 1;
        }
    }
    if ((file != NULL) == (optind < argc)) {
        fprintf(stderr, "error: give the inputs as arguments or with -f FILE (one of the two)\n");
        fputs(usage_text, stderr);
        return 2;
    }

    char *buf = NULL;
    const char **texts = NULL;
    size_t *lens = NULL;
    long n = 0;
    if (file) {
        size_t len;
        buf = cli_read_file(file, &len);
        if (!buf)
            return 1;
        n = split_lines(buf, len, &texts, &lens);
        if (n < 0) {
            fprintf(stderr, "error: out of memory\n");
            free(buf);
            return 1;
        }
        if (n == 0) {
            fprintf(stderr, "error: %s has no non-empty line\n", file);
            free(buf);
            free(texts);
            free(lens);
            return 1;
        }
    } else {
        n = argc - optind;
        texts = malloc((size_t)n * sizeof(*texts));
        lens = malloc((size_t)n * sizeof(*lens));
        for (long i = 0; texts && lens && i < n; i++)
            texts[i] = argv[optind + i], lens[i] = strlen(argv[optind + i]);
    }

    int rc = 1;
    infer_embedder *e = NULL;
    float *vec = NULL;
    infer_embed_info *info = NULL;
    if (!texts || !lens) {
        fprintf(stderr, "error: out of memory\n");
        goto done;
    }
    if (infer_embedder_open(&e, model, &ep) != INFER_OK) {
        cli_fail(NULL);
        goto done;
    }
    const int d = infer_embedder_n_embd(e);
    vec = malloc((size_t)n * (size_t)d * sizeof(float));
    info = malloc((size_t)n * sizeof(*info));
    if (!vec || !info) {
        fprintf(stderr, "error: out of memory for %ld embeddings\n", n);
        goto done;
    }
    double t0 = infer_now_seconds();
    if (infer_embed(e, texts, lens, (size_t)n, vec, info) != INFER_OK) {
        cli_fail("embed");
        goto done;
    }
    double dt = infer_now_seconds() - t0;
    long n_tok = 0, n_trunc = 0;
    for (long i = 0; i < n; i++) {
        n_tok += info[i].n_tokens;
        if (info[i].truncated) {
            n_trunc++;
            if (!quiet)
                fprintf(stderr, "note: input %ld has %d tokens: truncated to the model's %d\n", i,
                        info[i].n_tokens_in, infer_embedder_n_ctx(e));
        }
    }
    if (json) {
        printf("{\"model\": ");
        print_json_string(infer_embedder_name(e), strlen(infer_embedder_name(e)));
        printf(", \"n_embd\": %d, \"pooling\": \"%s\", \"n_ctx\": %d, \"data\": [", d, infer_embedder_pooling(e),
               infer_embedder_n_ctx(e));
        for (long i = 0; i < n; i++) {
            printf("%s\n  {\"index\": %ld, \"n_tokens\": %d, \"truncated\": %s, \"embedding\": [", i ? "," : "", i,
                   info[i].n_tokens, info[i].truncated ? "true" : "false");
            for (int j = 0; j < d; j++)
                printf("%s%.9g", j ? ", " : "", (double)vec[(size_t)i * d + j]);
            printf("]}");
        }
        printf("\n], \"usage\": {\"prompt_tokens\": %ld, \"total_tokens\": %ld}}\n", n_tok, n_tok);
    } else {
        for (long i = 0; i < n; i++) {
            for (int j = 0; j < d; j++)
                printf("%s%.9g", j ? " " : "", (double)vec[(size_t)i * d + j]);
            putchar('\n');
        }
    }
    if (!quiet)
        fprintf(stderr, "embed: %ld input(s), %ld tokens (%ld truncated) in %.1f ms (%s, %d dims, %s pooling)\n", n,
                n_tok, n_trunc, dt * 1e3, infer_embedder_name(e), d, infer_embedder_pooling(e));
    rc = fflush(stdout) == 0 ? 0 : 1;
done:
    infer_embedder_close(e);
    free(vec);
    free(info);
    free(texts);
    free(lens);
    free(buf);
    return rc;
}
