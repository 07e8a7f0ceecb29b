/*
 * glu-ab.c - a prompt's prefill with the fused gate/up kernels on and off
 * (matmul_use_glu, kernels/matmul.h), alternating in one process, and
 * whether the two give the same logits bit for bit.
 *
 *   glu-ab [-t threads] [-n tokens] [-r reps] MODEL
 *
 * Each rep evaluates the same n tokens (default 512, one batch) from an
 * empty session once with fusion on and once off, in alternating order.
 * Printed per side: the minimum and the median process CPU time of a
 * prefill, and the ratio of the minimums (on a shared machine the minimum
 * is the rep that lost least to other jobs' cache traffic).  The kernel
 * variant is the process's (INFER_KERNELS).  Example:
 *   INFER_KERNELS=avxvnni build/contrib/bench/glu-ab -t 1 -r 5 models/gen/bench-llama1b-q4_k_m.gguf
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "infer.h"
#include "kernels/matmul.h"

static double cpu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int n_threads = 1, n_tok = 512, reps = 5, opt;
    while ((opt = getopt(argc, argv, "t:n:r:")) != -1) {
        if (opt == 't')
            n_threads = atoi(optarg);
        else if (opt == 'n')
            n_tok = atoi(optarg);
        else if (opt == 'r')
            reps = atoi(optarg);
        else
            break;
    }
    if (optind != argc - 1 || n_threads < 1 || n_tok < 1 || reps < 1) {
        fprintf(stderr, "usage: glu-ab [-t threads] [-n tokens] [-r reps] MODEL\n");
        return 2;
    }
    infer_model *m;
    if (infer_model_load(&m, argv[optind], NULL) != INFER_OK) {
        fprintf(stderr, "glu-ab: %s\n", infer_last_error());
        return 1;
    }
    infer_session_params sp;
    infer_session_params_default(&sp);
    sp.n_ctx = n_tok;
    sp.n_batch = n_tok;
    sp.n_threads = n_threads;
    sp.no_prefix_cache = true; /* every rep computes the whole prompt */
    infer_session *s;
    if (infer_session_new(&s, m, &sp) != INFER_OK) {
        fprintf(stderr, "glu-ab: %s\n", infer_last_error());
        return 1;
    }
    const int n_vocab = infer_model_n_vocab(m);
    int32_t *toks = malloc((size_t)n_tok * sizeof(int32_t));
    float *logits[2] = {malloc((size_t)n_vocab * sizeof(float)), malloc((size_t)n_vocab * sizeof(float))};
    double *cpu[2] = {malloc((size_t)reps * sizeof(double)), malloc((size_t)reps * sizeof(double))};
    if (!toks || !logits[0] || !logits[1] || !cpu[0] || !cpu[1])
        return 1;
    for (int i = 0; i < n_tok; i++) /* ordinary ids spread over the vocabulary */
        toks[i] = (int32_t)(1000 + (int64_t)i * 7919 % (n_vocab - 2000));
    bool same = true;
    for (int r = 0; r < reps; r++)
        for (int k = 0; k < 2; k++) {
            const int side = (r + k) % 2; /* 0: fused, 1: unfused; the order alternates */
            matmul_use_glu(side == 0);
            infer_session_truncate(s, 0);
            const double t0 = cpu_now();
            if (infer_session_set_tokens(s, toks, n_tok, NULL) != INFER_OK) {
                fprintf(stderr, "glu-ab: %s\n", infer_last_error());
                return 1;
            }
            cpu[side][r] = cpu_now() - t0;
            memcpy(logits[side], infer_session_logits(s), (size_t)n_vocab * sizeof(float));
        }
    same = memcmp(logits[0], logits[1], (size_t)n_vocab * sizeof(float)) == 0;
    matmul_use_glu(1);
    double mn[2], med[2];
    for (int side = 0; side < 2; side++) {
        qsort(cpu[side], (size_t)reps, sizeof(double), cmp_double);
        mn[side] = cpu[side][0];
        med[side] = cpu[side][reps / 2];
    }
    printf("%s: %d tokens, %d threads, %d reps, process CPU s per prefill\n", argv[optind], n_tok, n_threads, reps);
    printf("  fused   min %.3f  median %.3f\n  unfused min %.3f  median %.3f\n", mn[0], med[0], mn[1], med[1]);
    printf("  unfused/fused: min %.3fx, median %.3fx; spread fused %.3f-%.3f, unfused %.3f-%.3f; logits %s\n",
           mn[1] / mn[0], med[1] / med[0], cpu[0][0], cpu[0][reps - 1], cpu[1][0], cpu[1][reps - 1],
           same ? "identical" : "DIFFER");
    infer_session_free(s);
    infer_model_free(m);
    free(toks);
    free(logits[0]);
    free(logits[1]);
    free(cpu[0]);
    free(cpu[1]);
    return same ? 0 : 1;
}
