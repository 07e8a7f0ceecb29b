/*
 * cmd_run.c - `infer run` (one prompt, streamed) and `infer perplexity`.
 *
 * Flags and defaults follow llama.cpp's llama-cli / llama-perplexity so that
 * users can carry their habits over.
 */
#include "cli.h"

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

volatile sig_atomic_t cli_interrupted;

enum { OPT_RUN_JSON_SCHEMA = 3000, OPT_RUN_JSON };

/* Seconds spent choosing tokens (sampler and grammar) by cli_generate. */
static double cli_sample_seconds;

static void on_sigint(int sig)
{
    (void)sig;
    cli_interrupted = 1;
}

void cli_install_sigint(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_sigint;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
}

char *cli_read_file(const char *path, size_t *len)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    if (!f) {
        fprintf(stderr, "error: cannot open '%s': %s\n", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 1 >= cap) {
            char *nb = realloc(buf, cap *= 2);
            if (!nb) {
                free(buf);
                buf = NULL;
                break;
            }
            buf = nb;
        }
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        if (r == 0)
            break;
        n += r;
    }
    if (f != stdin)
        fclose(f);
    if (!buf) {
        fprintf(stderr, "error: out of memory reading '%s'\n", path);
        return NULL;
    }
    buf[n] = '\0';
    if (len)
        *len = n;
    return buf;
}

/* ---- shared generation options ---- */

void cli_gen_defaults(struct cli_gen *g)
{
    memset(g, 0, sizeof(*g));
    infer_sampler_params_default(&g->sp);
    infer_session_params_default(&g->sessp);
    g->n_predict = -1;
}

/* Parse one generation option at argv[optind-1] (getopt already matched it);
 * returns 0 if handled, 2 on a bad value. */
int cli_gen_option(struct cli_gen *g, int c, const char *arg)
{
    char *end = NULL;
    errno = 0;
    switch (c) {
    case 'm': g->model = arg; return 0;
    case 'n': g->n_predict = (int)strtol(arg, &end, 10); break;
    case 'c': g->sessp.n_ctx = (int)strtol(arg, &end, 10); break;
    case 'b': g->sessp.n_batch = (int)strtol(arg, &end, 10); break;
    case 't': g->sessp.n_threads = (int)strtol(arg, &end, 10); break;
    case 's': {
        long long v = strtoll(arg, &end, 10);
        g->sp.seed = v < 0 ? INFER_SEED_RANDOM : (uint64_t)v;
        break;
    }
    case OPT_TEMP: g->sp.temp = strtof(arg, &end); break;
    case OPT_TOP_K: g->sp.top_k = (int)strtol(arg, &end, 10); break;
    case OPT_TOP_P: g->sp.top_p = strtof(arg, &end); break;
    case OPT_MIN_P: g->sp.min_p = strtof(arg, &end); break;
    case OPT_REPEAT_PENALTY: g->sp.repeat_penalty = strtof(arg, &end); break;
    case OPT_REPEAT_LAST_N: g->sp.repeat_last_n = (int)strtol(arg, &end, 10); break;
    case OPT_KV_BLOCK: g->sessp.kv_block = (int)strtol(arg, &end, 10); break;
    case OPT_MLOCK: g->mlock = true; return 0;
    case OPT_NO_REPACK: g->no_repack = true; return 0;
    default: return cli_cache_option(&g->sessp, c, arg) == 0 ? 0 : 2;
    }
    if (!end || *end || errno) {
        fprintf(stderr, "error: bad value '%s'\n", arg);
        return 2;
    }
    return 0;
}

int cli_load(struct cli_gen *g, infer_model **m, infer_session **s, infer_sampler **smp)
{
    const char *path = cli_model_path(g->model);
    if (!path)
        return 1;
    infer_model_params mp = {.flags = (g->mlock ? INFER_GGUF_OPEN_MLOCK : 0) | (g->no_repack ? INFER_MODEL_NO_REPACK : 0)};
    if (infer_model_load(m, path, &mp) != INFER_OK)
        return cli_fail("loading model");
    infer_residency r;
    infer_gguf_probe_pages(infer_model_gguf(*m), &r);
    if (infer_session_new(s, *m, &g->sessp) != INFER_OK) {
        infer_model_free(*m);
        return cli_fail("creating session");
    }
    if (smp && infer_sampler_new(smp, &g->sp) != INFER_OK) {
        infer_session_free(*s);
        infer_model_free(*m);
        return cli_fail("sampler");
    }
    if (!g->quiet) {
        fprintf(stderr, "loaded %s (%s, %d-token context) in %.0f ms, %.1f%% of the file resident\n", path,
                infer_model_arch(*m), infer_session_n_ctx(*s), infer_model_load_seconds(*m) * 1e3, r.percent);
        char note[1024];
        if (infer_residency_small_pages(&r))
            fprintf(stderr, "%s\n", infer_small_pages_note(path, note, sizeof(note)));
        infer_repack_info ri;
        infer_model_repack_info(*m, &ri);
        if (strcmp(ri.state, "none") != 0)
            fprintf(stderr, "%s\n", infer_model_repack_summary(*m));
    }
    return 0;
}

/* Append k bytes to the NUL-terminated *text (length *len, capacity *cap);
 * on allocation failure the text keeps what it had. */
static void text_append(char **text, size_t *len, size_t *cap, const char *p, size_t k)
{
    if (*len + k + 1 > *cap) {
        size_t ncap = (*len + k + 1) * 2;
        char *nt = realloc(*text, ncap);
        if (!nt)
            return;
        *text = nt;
        *cap = ncap;
    }
    memcpy(*text + *len, p, k);
    *len += k;
    (*text)[*len] = '\0';
}

/* Generate after the session's current tokens until EOG, n_predict, the
 * context end or Ctrl-C, streaming text to out.  Appends the text to *text
 * when text is not NULL.  Returns tokens generated, or -1 on error. */
int cli_generate(infer_model *m, infer_session *s, infer_sampler *smp, int n_predict, FILE *out, char **text,
                 double *first_token_s)
{
    const int n_vocab = infer_model_n_vocab(m);
    infer_detok *d = infer_detok_new(m);
    size_t tlen = 0, tcap = 0;
    char piece[256];
    int n = 0;
    double t0 = infer_now_seconds();
    if (!d)
        return -1;
    while (n_predict < 0 || n < n_predict) {
        if (cli_interrupted)
            break;
        double ts = infer_now_seconds();
        int32_t id = infer_sampler_sample(smp, infer_session_logits(s), n_vocab);
        if (id < 0)
            break;
        infer_sampler_accept(smp, id);
        cli_sample_seconds += infer_now_seconds() - ts;
        if (n == 0 && first_token_s)
            *first_token_s = infer_now_seconds() - t0;
        if (infer_model_is_eog(m, id))
            break;
        n++;
        size_t k = infer_detok_push(d, id, piece, sizeof(piece));
        if (k) {
            fwrite(piece, 1, k, out);
            fflush(out);
            if (text)
                text_append(text, &tlen, &tcap, piece, k);
        }
        if (infer_sampler_grammar_state(smp) == INFER_GRAMMAR_DONE)
            break;
        if (infer_session_n_tokens(s) + 1 > infer_session_n_ctx(s)) {
            fprintf(stderr, "\n[context full: %d tokens; use -c to enlarge it]\n", infer_session_n_ctx(s));
            break;
        }
        if (infer_session_append(s, &id, 1) != INFER_OK) {
            infer_detok_free(d);
            fprintf(stderr, "\nerror: %s\n", infer_last_error());
            return -1;
        }
    }
    if (infer_sampler_grammar_state(smp) == INFER_GRAMMAR_OPEN) {
        /* cut short (-n, context, Ctrl-C): close the JSON so that it parses */
        size_t nc = infer_sampler_grammar_close(smp, NULL, 0);
        char *tail = malloc(nc + 1), *outb = malloc(nc + 512);
        if (tail && outb) {
            infer_sampler_grammar_close(smp, tail, nc);
            size_t k = infer_detok_push_text(d, tail, nc, outb, nc + 512);
            fwrite(outb, 1, k, out);
            if (text)
                text_append(text, &tlen, &tcap, outb, k);
        }
        free(tail);
        free(outb);
    }
    size_t k = infer_detok_flush(d, piece, sizeof(piece));
    if (k) {
        fwrite(piece, 1, k, out);
        if (text)
            text_append(text, &tlen, &tcap, piece, k);
    }
    fflush(out);
    infer_detok_free(d);
    return n;
}

#define GEN_LONGOPTS                                                                                          \
    {"model", required_argument, 0, 'm'}, {"n-predict", required_argument, 0, 'n'},                          \
        {"ctx-size", required_argument, 0, 'c'}, {"batch-size", required_argument, 0, 'b'},                  \
        {"threads", required_argument, 0, 't'}, {"seed", required_argument, 0, 's'},                         \
        {"temp", required_argument, 0, OPT_TEMP}, {"top-k", required_argument, 0, OPT_TOP_K},                \
        {"top-p", required_argument, 0, OPT_TOP_P}, {"min-p", required_argument, 0, OPT_MIN_P},              \
        {"repeat-penalty", required_argument, 0, OPT_REPEAT_PENALTY},                                        \
        {"repeat-last-n", required_argument, 0, OPT_REPEAT_LAST_N},                                          \
        {"kv-block", required_argument, 0, OPT_KV_BLOCK}, {"mlock", no_argument, 0, OPT_MLOCK},                \
        {"no-repack", no_argument, 0, OPT_NO_REPACK}, CLI_CACHE_LONGOPTS

static const char *gen_help =
    "  -m, --model FILE        GGUF model (default: the default model)\n"
    "  -n, --n-predict N       tokens to generate (default -1: until end of turn or context)\n"
    "  -c, --ctx-size N        context size (default: min(model, 4096))\n"
    "  -b, --batch-size N      prompt tokens per forward call (default 512)\n"
    "  -t, --threads N         threads (default: physical cores)\n"
    "  -s, --seed N            sampling seed (default -1: random)\n"
    "      --temp T            temperature (default 0.8; 0 = greedy)\n"
    "      --top-k N           (default 40; 0 = off)\n"
    "      --top-p P           (default 0.95; 1 = off)\n"
    "      --min-p P           (default 0.05; 0 = off)\n"
    "      --repeat-penalty P  (default 1.0 = off)\n"
    "      --repeat-last-n N   tokens the penalty looks back over (default 64)\n"
    "      --kv-block N        tokens per KV block (default 32)\n"
    "      --mlock             lock the model's pages in memory\n"
    "      --no-repack         use the weights as stored (no repacked-weight cache)\n";

const char *cli_gen_help(void)
{
    static char buf[4096];
    if (!buf[0])
        snprintf(buf, sizeof(buf), "%s%s", gen_help, cli_cache_help());
    return buf;
}

static void print_timings(infer_session *s, int n_gen, double ttft)
{
    infer_session_stats st;
    infer_session_get_stats(s, &st);
    fprintf(stderr,
            "\nprompt: %lld tokens in %.3f s (%.1f tok/s), reused %lld | generated: %d tokens in %.3f s "
            "(%.1f tok/s) | time to first token: %.3f s\n",
            (long long)st.n_prompt_tokens, st.prompt_seconds,
            st.prompt_seconds > 0 ? (double)st.n_prompt_tokens / st.prompt_seconds : 0.0,
            (long long)st.n_reused_tokens, n_gen, st.decode_seconds,
            st.decode_seconds > 0 ? (double)st.n_decode_tokens / st.decode_seconds : 0.0, ttft);
    double gen_s = st.decode_seconds + cli_sample_seconds;
    fprintf(stderr, "sampling (sampler and grammar): %.1f ms, %.3f ms per token | decode with sampling: %.1f tok/s\n",
            cli_sample_seconds * 1e3, n_gen > 0 ? cli_sample_seconds * 1e3 / n_gen : 0.0,
            gen_s > 0 ? (double)st.n_decode_tokens / gen_s : 0.0);
    infer_cache_metrics cm;
    infer_engine_get_metrics(infer_session_engine(s), &cm);
    if (cm.enabled)
        fprintf(stderr, "prefix cache: %lld of %lld prompt tokens from the cache%s%s | KV %.1f MiB in use, %s pages\n",
                (long long)st.n_cached_tokens, (long long)st.last_prompt_tokens,
                cm.disk_enabled ? ", disk " : "", cm.disk_enabled ? cm.disk_dir : "",
                (double)cm.kv_bytes_in_use / 1048576.0, cm.page_mode);
}

int cmd_run(int argc, char **argv)
{
    static const struct option opts[] = {GEN_LONGOPTS,
                                         {"prompt", required_argument, 0, 'p'},
                                         {"file", required_argument, 0, 'f'},
                                         {"no-bos", no_argument, 0, OPT_NO_BOS},
                                         {"special", no_argument, 0, OPT_SPECIAL},
                                         {"json-schema", required_argument, 0, OPT_RUN_JSON_SCHEMA},
                                         {"json", no_argument, 0, OPT_RUN_JSON},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    struct cli_gen g;
    cli_gen_defaults(&g);
    const char *prompt = NULL, *file = NULL, *schema_file = NULL;
    bool json_object = false;
    bool add_bos = true, special = false;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:n:c:b:t:s:p:f:h", opts, NULL)) != -1) {
        if (c == 'p') prompt = optarg;
        else if (c == 'f') file = optarg;
        else if (c == OPT_NO_BOS) add_bos = false;
        else if (c == OPT_SPECIAL) special = true;
        else if (c == OPT_RUN_JSON_SCHEMA) schema_file = optarg;
        else if (c == OPT_RUN_JSON) json_object = true;
        else if (c == 'h') {
            printf("usage: infer run [-m MODEL] (-p PROMPT | -f FILE) [options]\n\n"
                   "Generates a continuation of the prompt; the text goes to stdout as it is\n"
                   "generated, timings to stderr.\n\n%s"
                   "  -p, --prompt TEXT       the prompt\n"
                   "  -f, --file FILE         read the prompt from FILE ('-' = stdin)\n"
                   "      --no-bos            do not add the BOS token\n"
                   "      --special           parse special-token text in the prompt\n"
                   "      --json-schema FILE  constrain the output to JSON valid against the schema in FILE\n"
                   "      --json              constrain the output to a JSON object\n",
                   cli_gen_help());
            return 0;
        } else if (cli_gen_option(&g, c, optarg))
            return 2;
    }
    char *owned = NULL;
    if (file) {
        if (!(owned = cli_read_file(file, NULL)))
            return 1;
        prompt = owned;
    }
    if (!prompt) {
        fprintf(stderr, "error: give a prompt with -p TEXT or -f FILE\n");
        return 2;
    }
    infer_grammar *grammar = NULL;
    if (schema_file || json_object) {
        size_t slen = 0;
        char *schema = schema_file ? cli_read_file(schema_file, &slen) : NULL;
        infer_status st = schema_file ? (schema ? infer_grammar_from_json_schema(&grammar, schema, slen)
                                                : INFER_ERR_IO)
                                      : infer_grammar_json_object(&grammar);
        free(schema);
        if (st != INFER_OK) {
            if (st != INFER_ERR_IO)
                fprintf(stderr, "error: %s: %s\n", schema_file ? schema_file : "--json", infer_last_error());
            free(owned);
            return 1;
        }
    }
    infer_model *m;
    infer_session *s;
    infer_sampler *smp;
    if (cli_load(&g, &m, &s, &smp)) {
        free(owned);
        infer_grammar_free(grammar);
        return 1;
    }
    if (grammar && infer_sampler_set_grammar(smp, m, grammar) != INFER_OK)
        cli_fail("grammar");
    int rc = 1;
    int64_t cap = (int64_t)strlen(prompt) + 16;
    int32_t *toks = malloc((size_t)cap * sizeof(int32_t));
    int64_t n = toks ? infer_model_tokenize(m, prompt, strlen(prompt), add_bos, special, toks, cap) : -1;
    if (n < 0) {
        cli_fail("tokenizing");
    } else if (n == 0) {
        fprintf(stderr, "error: the prompt is empty\n");
    } else if (infer_session_set_tokens(s, toks, n, NULL) != INFER_OK) {
        cli_fail("prompt");
    } else {
        cli_install_sigint();
        double ttft = 0;
        int n_gen = cli_generate(m, s, smp, g.n_predict, stdout, NULL, &ttft);
        if (n_gen >= 0) {
            infer_session_stats st;
            infer_session_get_stats(s, &st);
            print_timings(s, n_gen, st.prompt_seconds + ttft);
            rc = 0;
        }
    }
    free(toks);
    free(owned);
    infer_sampler_free(smp);
    infer_grammar_free(grammar);
    infer_session_free(s);
    infer_model_free(m);
    return rc;
}

static void progress(void *ctx, int chunk, int n_chunks, double ppl)
{
    (void)ctx;
    printf("[%d]%.4f%s", chunk, ppl, chunk < n_chunks ? "," : "\n");
    fflush(stdout);
}

static void kld_progress(void *ctx, int chunk, int n_chunks, double kld)
{
    (void)ctx;
    printf("[%d]%.6f%s", chunk, kld, chunk < n_chunks ? "," : "\n");
    fflush(stdout);
}

/* infer perplexity --kl-divergence --kl-divergence-base FILE: compare this
 * model (and configuration) with the reference run saved in FILE, printing
 * llama-perplexity's statistics. */
static int kld_compare(struct cli_gen *g, const char *path, int max_chunks)
{
    FILE *f = fopen(path, "rb");
    int32_t hdr[3] = {0};
    char magic[8];
    if (!f || fread(magic, 1, 8, f) != 8 || fread(hdr, 4, 3, f) != 3 || memcmp(magic, "_logits_", 8) ||
        hdr[0] < 8 || hdr[0] > (1 << 22)) {
        fprintf(stderr, "error: %s is not a log-probability file of llama-perplexity --kl-divergence-base\n", path);
        if (f)
            fclose(f);
        return 1;
    }
    fclose(f);
    g->sessp.n_ctx = hdr[0]; /* the base file's chunk size */
    g->sessp.n_batch = hdr[0];
    infer_model *m;
    infer_session *s;
    if (cli_load(g, &m, &s, NULL))
        return 1;
    fprintf(stderr, "kl-divergence: %d chunks of %d from %s\n", hdr[2], hdr[0], path);
    infer_kld_result r;
    const double t0 = infer_now_seconds();
    int rc = 0;
    if (infer_session_kld(s, path, max_chunks, &r, kld_progress, NULL) != INFER_OK) {
        cli_fail("kl-divergence");
        rc = 1;
    } else {
        printf("====== Perplexity statistics ======\n");
        printf("Mean PPL(Q)                   : %10.6f +/- %10.6f\n", r.ppl, r.ppl_err);
        printf("Mean PPL(base)                : %10.6f +/- %10.6f\n", r.ppl_base, r.ppl_base_err);
        printf("Mean ln(PPL(Q)/PPL(base))     : %10.6f +/- %10.6f\n", r.ln_ppl_ratio, r.ln_ppl_ratio_err);
        printf("Mean PPL(Q)-PPL(base)         : %10.6f\n", r.ppl - r.ppl_base);
        printf("\n====== KL divergence statistics ======\n");
        printf("Mean    KLD: %10.6f +/- %10.6f\n", r.kld_mean, r.kld_err);
        printf("Maximum KLD: %10.6f\n99.9%%   KLD: %10.6f\n99.0%%   KLD: %10.6f\n", r.kld_max, r.kld_p999, r.kld_p99);
        printf("95.0%%   KLD: %10.6f\n90.0%%   KLD: %10.6f\nMedian  KLD: %10.6f\n", r.kld_p95, r.kld_p90,
               r.kld_median);
        printf("\n====== Token probability statistics ======\n");
        printf("Maximum dp: %6.3f%%\nRMS dp    : %6.3f %%\n", 100.0 * r.dp_max, 100.0 * r.dp_rms);
        printf("Same top p: %6.3f +/- %5.3f %%\n", 100.0 * r.same_top, 100.0 * r.same_top_err);
        fprintf(stderr, "%lld positions compared in %.2f s\n", (long long)r.count, infer_now_seconds() - t0);
    }
    infer_session_free(s);
    infer_model_free(m);
    return rc;
}

/* llama-perplexity's method: chunks of n_ctx tokens, each starting with BOS
 * (when the model adds one), scored on the second half of their positions.
 * --kl-divergence-base FILE saves the log-probabilities of the scored
 * positions (llama-perplexity's format); with --kl-divergence it compares
 * against such a file instead (no -f needed: the file holds the tokens). */
int cmd_perplexity(int argc, char **argv)
{
    enum { OPT_KLD_BASE = 0x4b00, OPT_KLD };
    static const struct option opts[] = {GEN_LONGOPTS, {"file", required_argument, 0, 'f'},
                                         {"chunks", required_argument, 0, OPT_CHUNKS},
                                         {"kl-divergence-base", required_argument, 0, OPT_KLD_BASE},
                                         {"kl-divergence", no_argument, 0, OPT_KLD},
                                         {"help", no_argument, 0, 'h'}, {0, 0, 0, 0}};
    struct cli_gen g;
    cli_gen_defaults(&g);
    g.sessp.n_ctx = 512;
    const char *file = NULL, *kld_base = NULL;
    bool kld = false;
    int max_chunks = -1, c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "m:c:b:t:f:h", opts, NULL)) != -1) {
        if (c == 'f') file = optarg;
        else if (c == OPT_CHUNKS) max_chunks = atoi(optarg);
        else if (c == OPT_KLD_BASE) kld_base = optarg;
        else if (c == OPT_KLD) kld = true;
        else if (c == 'h') {
            printf("usage: infer perplexity [-m MODEL] -f TEXT [-c CTX] [--chunks N] [-t N]\n"
                   "                        [--kl-divergence-base FILE]   also save the log-probabilities\n"
                   "       infer perplexity [-m MODEL] --kl-divergence --kl-divergence-base FILE [--chunks N]\n"
                   "                        compare with a saved run (llama-perplexity's format)\n");
            return 0;
        } else if (cli_gen_option(&g, c, optarg))
            return 2;
    }
    if (kld) {
        if (!kld_base) {
            fprintf(stderr, "error: --kl-divergence needs --kl-divergence-base FILE\n");
            return 2;
        }
        return kld_compare(&g, kld_base, max_chunks);
    }
    if (!file) {
        fprintf(stderr, "error: give the text with -f FILE\n");
        return 2;
    }
    size_t len;
    char *text = cli_read_file(file, &len);
    if (!text)
        return 1;
    const int n_ctx = g.sessp.n_ctx;
    if (n_ctx < 8) {
        fprintf(stderr, "error: -c must be at least 8\n");
        free(text);
        return 2;
    }
    g.sessp.n_batch = n_ctx;
    infer_model *m;
    infer_session *s;
    if (cli_load(&g, &m, &s, NULL)) {
        free(text);
        return 1;
    }
    int rc = 1;
    int64_t cap = (int64_t)len + 16;
    int32_t *toks = malloc((size_t)cap * sizeof(int32_t));
    int64_t n = toks ? infer_model_tokenize(m, text, len, true, false, toks, cap) : -1;
    int64_t n_chunks = n > 0 ? n / n_ctx : 0;
    if (max_chunks >= 0 && n_chunks > max_chunks)
        n_chunks = max_chunks;
    if (n < 0) {
        cli_fail("tokenizing");
        goto out;
    }
    if (n_chunks < 1) {
        fprintf(stderr, "error: the text has %lld tokens, need at least %d (one chunk of -c)\n", (long long)n,
                n_ctx);
        goto out;
    }
    fprintf(stderr, "perplexity: %lld tokens, %lld chunks of %d, scoring the second half of each\n",
            (long long)n, (long long)n_chunks, n_ctx);
    double ppl, err, t0 = infer_now_seconds();
    if ((kld_base ? infer_session_kld_base_save(s, toks, n, max_chunks, kld_base, &ppl, &err, progress, NULL)
                  : infer_session_perplexity(s, toks, n, max_chunks, &ppl, &err, progress, NULL)) != INFER_OK) {
        cli_fail("perplexity");
        goto out;
    }
    printf("Final estimate: PPL = %.4f +/- %.5f\n", ppl, err);
    if (kld_base)
        fprintf(stderr, "log-probabilities of %lld positions saved to %s\n",
                (long long)(n_chunks * (n_ctx - 1 - n_ctx / 2)), kld_base);
    fprintf(stderr, "%lld tokens evaluated in %.2f s (%.1f tok/s)\n", (long long)(n_chunks * n_ctx),
            infer_now_seconds() - t0, (double)(n_chunks * n_ctx) / (infer_now_seconds() - t0));
    rc = 0;
out:
    free(toks);
    free(text);
    infer_session_free(s);
    infer_model_free(m);
    return rc;
}
