/*
 * cli.h - shared pieces of the `infer` subcommands.
 */
#ifndef INFER_CLI_H
#define INFER_CLI_H

#include "infer.h"

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

#endif
