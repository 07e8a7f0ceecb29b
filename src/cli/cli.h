/*
 * cli.h - shared pieces of the `infer` subcommands.
 */
#ifndef INFER_CLI_H
#define INFER_CLI_H

#include "infer.h"

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>

#define DEFAULT_MODEL_FILE "gemma-3-270m-q4_k_m.gguf"

/* The model path: the -m argument if given, else the default model found in
 * $INFER_MODEL, ./models, the models/ folder beside the binary, or the source
 * tree.  Prints an error and returns NULL when nothing is found. */
const char *cli_model_path(const char *arg);

/* Print "error: <msg>" for the last library error; returns 1. */
int cli_fail(const char *what);

int cmd_info(int argc, char **argv);
int cmd_warm(int argc, char **argv);
int cmd_cold(int argc, char **argv);
int cmd_cpu(int argc, char **argv);
int cmd_chat(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_perplexity(int argc, char **argv);
int cmd_tokenize(int argc, char **argv);
int cmd_detokenize(int argc, char **argv);
int cmd_embed(int argc, char **argv);

/* ---- generation options shared by run, chat, perplexity (cmd_run.c) ---- */

enum {
    OPT_TEMP = 1000, OPT_TOP_K, OPT_TOP_P, OPT_MIN_P, OPT_REPEAT_PENALTY, OPT_REPEAT_LAST_N,
    OPT_KV_BLOCK, OPT_MLOCK, OPT_NO_REPACK, OPT_NO_BOS, OPT_SPECIAL, OPT_CHUNKS, OPT_SYSTEM, OPT_CHAT_TEMPLATE,
    /* prefix cache (cmd_bench.c) */
    OPT_CACHE_HIGH = 1100, OPT_CACHE_LOW, OPT_CACHE_SALT, OPT_CACHE_DIR, OPT_CACHE_DISK_MAX, OPT_NO_PREFIX_CACHE,
    OPT_CACHE_TYPE_K, OPT_CACHE_TYPE_V,
};

struct cli_gen {
    const char *model;
    int n_predict;
    bool mlock;
    bool no_repack;
    bool quiet;
    infer_sampler_params sp;
    infer_session_params sessp;
};

/* ---- prefix-cache options and figures, shared by run, chat, bench, serve (cmd_bench.c) ---- */

#define CLI_CACHE_LONGOPTS                                                                                    \
    {"cache-high", required_argument, 0, OPT_CACHE_HIGH}, {"cache-low", required_argument, 0, OPT_CACHE_LOW}, \
        {"cache-salt", required_argument, 0, OPT_CACHE_SALT}, {"cache-dir", required_argument, 0, OPT_CACHE_DIR}, \
        {"cache-disk-max", required_argument, 0, OPT_CACHE_DISK_MAX},                                         \
        {"no-prefix-cache", no_argument, 0, OPT_NO_PREFIX_CACHE},                                             \
        {"cache-type-k", required_argument, 0, OPT_CACHE_TYPE_K}, {"ctk", required_argument, 0, OPT_CACHE_TYPE_K}, \
        {"cache-type-v", required_argument, 0, OPT_CACHE_TYPE_V}, {"ctv", required_argument, 0, OPT_CACHE_TYPE_V}

/* Help lines for CLI_CACHE_LONGOPTS. */
const char *cli_cache_help(void);
/* Apply a cache option to session params: 0 handled, 1 not a cache option,
 * 2 bad value (message printed). */
int cli_cache_option(infer_session_params *p, int c, const char *arg);
/* "512M", "2G", "1048576" -> bytes; false on a malformed size. */
bool cli_parse_bytes(const char *s, uint64_t *out);
/* The engine's cache figures, one "name: value" group per line. */
void cli_print_cache_metrics(FILE *f, const infer_cache_metrics *m);
/* Mixture-of-experts models: one line on how evenly the router spread the
 * tokens e has evaluated (`when`: "over the run", ...; `more`: a pointer to
 * the full counts); nothing for a dense model. */
void cli_print_expert_summary(FILE *f, const infer_model *m, const infer_engine *e, const char *when,
                              const char *more);
int cmd_bench(int argc, char **argv);
/* `infer bench --paths` (cmd_bench_paths.c). */
int cmd_bench_paths(int argc, char **argv);
/* Scenario pieces of cmd_bench.c shared with it: a household system text of
 * about target_tokens tokens (seeded, malloc'ed), question i, and running
 * this executable with args, its stdout into buf (exit code or -1). */
char *bench_agent_text(infer_model *m, const char *role, uint32_t seed, int target_tokens);
void bench_question(char *out, size_t n, int i);
int bench_run_child(const char *exe, char *const *args, char *buf, size_t cap);

void cli_gen_defaults(struct cli_gen *g);
int cli_gen_option(struct cli_gen *g, int c, const char *arg);
const char *cli_gen_help(void);
int cli_load(struct cli_gen *g, infer_model **m, infer_session **s, infer_sampler **smp);
int cli_generate(infer_model *m, infer_session *s, infer_sampler *smp, int n_predict, FILE *out, char **text,
                 double *first_token_s);
char *cli_read_file(const char *path, size_t *len);
void cli_install_sigint(void);
extern volatile sig_atomic_t cli_interrupted;

#endif
