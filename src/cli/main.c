/*
 * main.c - the `infer` command: dispatch to subcommands.
 */
#include "cli.h"

#include "config.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

struct command {
    const char *name;
    int (*fn)(int argc, char **argv);
    const char *help;
};

int cmd_serve(int argc, char **argv); /* cmd_serve.c */

static const struct command commands[] = {
    {"info", cmd_info, "show a model's metadata, tensors and page-cache residency"},
    {"warm", cmd_warm, "bring a model file into the page cache"},
    {"cold", cmd_cold, "drop a model file from the page cache"},
    {"cpu", cmd_cpu, "show CPU features and the kernels chosen"},
    {"run", cmd_run, "generate a continuation of a prompt"},
    {"chat", cmd_chat, "interactive chat with a model"},
    {"perplexity", cmd_perplexity, "perplexity of a model over a text file"},
    {"tokenize", cmd_tokenize, "print the token ids of a text"},
    {"detokenize", cmd_detokenize, "print the text of token ids"},
    {"embed", cmd_embed, "print sentence embeddings (bert models)"},
    {"serve", cmd_serve, "OpenAI-compatible HTTP server"},
    {"bench", cmd_bench, "benchmarks: prefix-cache scenarios (--prefix), cold and warm paths (--paths)"},
};
#define N_COMMANDS (sizeof(commands) / sizeof(commands[0]))

static void usage(FILE *f)
{
    fprintf(f, "usage: infer <command> [options]\n\ncommands:\n");
    for (size_t i = 0; i < N_COMMANDS; i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].help);
    fprintf(f, "\n  infer --version    version, libraries and kernels\n"
               "  infer <command> --help\n\n"
               "Without -m, commands use the default model (" DEFAULT_MODEL_FILE ").\n");
}

int cli_fail(const char *what)
{
    if (what)
        fprintf(stderr, "error: %s: %s\n", what, infer_last_error());
    else
        fprintf(stderr, "error: %s\n", infer_last_error());
    return 1;
}

static int file_exists(const char *p)
{
    return access(p, R_OK) == 0;
}

const char *cli_model_path(const char *arg)
{
    static char buf[PATH_MAX];
    if (arg)
        return arg;
    const char *env = getenv("INFER_MODEL");
    if (env && *env)
        return env;
    if (file_exists("models/" DEFAULT_MODEL_FILE))
        return "models/" DEFAULT_MODEL_FILE;
    char exe[PATH_MAX - 64];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n > 0) {
        exe[n] = '\0';
        char *slash = strrchr(exe, '/');
        if (slash) {
            *slash = '\0';
            snprintf(buf, sizeof(buf), "%s/models/" DEFAULT_MODEL_FILE, exe);
            if (file_exists(buf))
                return buf;
        }
    }
    snprintf(buf, sizeof(buf), "%s/models/" DEFAULT_MODEL_FILE, INFER_SRCDIR);
    if (file_exists(buf))
        return buf;
    fprintf(stderr, "error: no model given (-m FILE) and the default model " DEFAULT_MODEL_FILE
                    " was not found; run models/fetch-default to get it\n");
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    if (!strcmp(argv[1], "--version") || !strcmp(argv[1], "-V") || !strcmp(argv[1], "version")) {
        printf("infer %s\n%s\n", infer_version(), infer_build_info());
        return 0;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return 0;
    }
    for (size_t i = 0; i < N_COMMANDS; i++)
        if (!strcmp(argv[1], commands[i].name))
            return commands[i].fn(argc - 1, argv + 1);
    fprintf(stderr, "infer: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    return 2;
}
