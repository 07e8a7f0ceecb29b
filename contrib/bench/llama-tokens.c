/*
 * llama-tokens.c - the llama.cpp side of contrib/bench/arm-insn-count: llama-bench's pp and tg
 * tests on libllama alone (llama-bench itself needs llama.cpp's common library, whose
 * compilation - JSON, chat templates, an HTTP client - costs more than the model code; under
 * qemu cross builds on a small machine that matters).
 *
 *   llama-tokens MODEL P N THREADS
 *
 * Loads MODEL with llama.cpp's default model parameters (default load mode, weight repacking
 * on: use_extra_bufts), makes a context as llama-bench does (n_ctx P+N, n_batch 2048, n_ubatch 512,
 * F16 KV cache, flash attention auto, THREADS threads), then
 *   P > 0: evaluates P tokens in batches of n_batch from an empty context (the first the BOS
 *          token if the vocabulary adds one, the rest rand() % n_vocab), logits of the last;
 *   N > 0: clears the context and evaluates N tokens one at a time (llama-bench's tg).
 * No warm-up (llama-bench --no-warmup).  Prints one JSON object: the test sizes and settings.
 */
#include <stdio.h>
#include <stdlib.h>

#include "llama.h"

static void quiet(enum ggml_log_level level, const char *text, void *user)
{
    (void)user;
    if (level >= GGML_LOG_LEVEL_ERROR)
        fputs(text, stderr);
}

static int eval(struct llama_context *ctx, llama_token *toks, int n)
{
    int rc = llama_decode(ctx, llama_batch_get_one(toks, n));
    llama_synchronize(ctx);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: %s MODEL N_PROMPT N_GEN THREADS\n", argv[0]);
        return 2;
    }
    const int n_prompt = atoi(argv[2]), n_gen = atoi(argv[3]), n_threads = atoi(argv[4]);
    if (n_prompt < 0 || n_gen < 0 || n_prompt + n_gen < 1 || n_threads < 1) {
        fprintf(stderr, "%s: need N_PROMPT, N_GEN >= 0 (not both 0) and THREADS >= 1\n", argv[0]);
        return 2;
    }
    llama_log_set(quiet, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model) {
        fprintf(stderr, "%s: cannot load %s\n", argv[0], argv[1]);
        return 1;
    }
    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)(n_prompt + n_gen);
    cp.n_batch = 2048;
    cp.n_ubatch = 512;
    cp.type_k = GGML_TYPE_F16;
    cp.type_v = GGML_TYPE_F16;
    cp.flash_attn_type = LLAMA_FLASH_ATTN_TYPE_AUTO;
    cp.n_threads = n_threads;
    cp.n_threads_batch = n_threads;
    struct llama_context *ctx = llama_init_from_model(model, cp);
    if (!ctx) {
        fprintf(stderr, "%s: cannot create a context\n", argv[0]);
        return 1;
    }
    const struct llama_vocab *vocab = llama_model_get_vocab(model);
    const int n_vocab = llama_vocab_n_tokens(vocab);
    const int add_bos = llama_vocab_get_add_bos(vocab);
    llama_token *toks = malloc(sizeof(*toks) * (size_t)(n_prompt > 2048 ? 2048 : n_prompt + 1));
    int rc = 0;
    for (int done = 0; done < n_prompt && !rc;) { /* pp: batches of n_batch */
        int n = n_prompt - done < 2048 ? n_prompt - done : 2048;
        for (int i = 0; i < n; i++)
            toks[i] = done == 0 && i == 0 && add_bos ? llama_vocab_bos(vocab) : rand() % n_vocab;
        rc = eval(ctx, toks, n);
        done += n;
    }
    if (n_gen > 0 && !rc) { /* tg: one token at a time from an empty context */
        llama_memory_clear(llama_get_memory(ctx), false);
        llama_token t = add_bos ? llama_vocab_bos(vocab) : rand() % n_vocab;
        for (int i = 0; i < n_gen && !rc; i++) {
            rc = eval(ctx, &t, 1);
            t = rand() % n_vocab;
        }
    }
    if (rc) {
        fprintf(stderr, "%s: llama_decode returned %d\n", argv[0], rc);
        return 1;
    }
    printf("[{\"n_prompt\": %d, \"n_gen\": %d, \"n_threads\": %d, \"n_ctx\": %u, \"n_batch\": %u, \"n_ubatch\": %u, "
           "\"flash_attn\": \"auto\", \"type_kv\": \"f16\", \"use_extra_bufts\": %s, \"load_mode\": %d}]\n",
           n_prompt, n_gen, n_threads, cp.n_ctx, cp.n_batch, cp.n_ubatch, mp.use_extra_bufts ? "true" : "false",
           (int)mp.load_mode);
    free(toks);
    llama_free(ctx);
    llama_model_free(model);
    llama_backend_free();
    return 0;
}
