/*
 * moe-ab.c - the expert FFN (moe_ffn) of two builds of libinfer on the same
 * MoE file, alternating in one process, and whether their outputs agree bit
 * for bit.
 *
 *   moe-ab [-t threads] [-n tokens] [-r reps] [-R] MODEL LIB_A LIB_B
 *
 * Each rep runs moe_ffn on every layer (random normalised inputs, the same
 * for both) with build A, sleeps 20 ms (so A's pool workers stop spinning),
 * then with build B, and so on.  Printed per build: the minimum and the
 * median wall time of a rep (all layers) and its process CPU time (the
 * minimum is the figure to compare on a shared machine: it is the rep that
 * was not preempted), and, for one token, the bytes of the experts read per
 * second.  Both builds must have the same struct infer_model layout.  One
 * token reads other experts each rep (inputs differ per rep), so a file
 * larger than the last-level cache is read from memory as in decode.  -R:
 * each build repacks the weights as a load does (model_repack: the cache
 * file under $INFER_REPACK_DIR or ~/.cache/infer), so a build that repacks
 * the experts runs them in its layout; without -R both read GGUF's.
 *
 * On a machine shared with other jobs, wall times of two threads are noise;
 * -t 1 and the CPU minimum compare the work each build does:
 *   build/contrib/bench/moe-ab -t 1 -r 40 models/gen/bench-granitemoe1b-q4_k_m.gguf \
 *       OTHER/.libs/libinfer.so.0.0.0 build/.libs/libinfer.so.0.0.0
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "infer.h"
#include "model/model.h"

typedef int (*kinit_fn)(char *, size_t);
typedef int (*threads_fn)(int);
typedef infer_status (*open_fn)(infer_gguf **, const char *, unsigned);
typedef infer_status (*bind_fn)(struct infer_model *, infer_gguf *);
typedef void (*repack_fn)(struct infer_model *, const infer_model_params *);
typedef infer_status (*moe_fn)(const struct model_config *, const struct layer_weights *, const float *, int64_t,
                               float *, uint64_t *);

struct side {
    const char *lib;
    moe_fn moe;
    struct infer_model m;
    double *wall, *cpu;
};

static double now(clockid_t c)
{
    struct timespec ts;
    clock_gettime(c, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void load(struct side *s, const char *model, int threads, bool repack)
{
    void *h = dlopen(s->lib, RTLD_NOW | RTLD_LOCAL | RTLD_DEEPBIND);
    if (!h) {
        fprintf(stderr, "%s: %s\n", s->lib, dlerror());
        exit(1);
    }
    kinit_fn kinit = (kinit_fn)dlsym(h, "kernels_init");
    threads_fn thr = (threads_fn)dlsym(h, "pool_set_threads");
    open_fn op = (open_fn)dlsym(h, "infer_gguf_open");
    bind_fn bind = (bind_fn)dlsym(h, "model_bind");
    s->moe = (moe_fn)dlsym(h, "moe_ffn");
    char err[256];
    infer_gguf *g;
    if (!kinit || !thr || !op || !bind || !s->moe || kinit(err, sizeof(err)) || op(&g, model, 0) ||
        bind(&s->m, g)) {
        fprintf(stderr, "%s: cannot load %s\n", s->lib, model);
        exit(1);
    }
    thr(threads);
    repack_fn rp = repack ? (repack_fn)dlsym(h, "model_repack") : NULL;
    if (repack && !rp) {
        fprintf(stderr, "%s: no model_repack\n", s->lib);
        exit(1);
    }
    if (rp) {
        rp(&s->m, NULL);
        fprintf(stderr, "%s: %s\n", s->lib, s->m.repack.summary);
    }
}

static int cmp(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int threads = 2, reps = 20, opt;
    long n = 1;
    bool repack = false;
    while ((opt = getopt(argc, argv, "t:n:r:R")) != -1) {
        if (opt == 't')
            threads = atoi(optarg);
        else if (opt == 'n')
            n = atol(optarg);
        else if (opt == 'r')
            reps = atoi(optarg);
        else if (opt == 'R')
            repack = true;
        else
            return 2;
    }
    if (argc - optind != 3) {
        fprintf(stderr, "usage: moe-ab [-t threads] [-n tokens] [-r reps] [-R] MODEL LIB_A LIB_B\n");
        return 2;
    }
    struct side s[2] = {{.lib = argv[optind + 1]}, {.lib = argv[optind + 2]}};
    for (int i = 0; i < 2; i++)
        load(&s[i], argv[optind], threads, repack);
    const struct model_config *c = &s[0].m.c;
    if (c->n_expert == 0) {
        fprintf(stderr, "not a MoE model\n");
        return 1;
    }
    const int64_t D = c->n_embd, L = c->n_layer;
    const int64_t nx = n * D * L * (n == 1 ? 2 * reps + 2 : 1); /* one token: other experts each run */
    float *x = malloc((size_t)nx * sizeof(float));
    float *y[2] = {malloc((size_t)(n * D) * sizeof(float)), malloc((size_t)(n * D) * sizeof(float))};
    srand(1);
    for (int64_t i = 0; i < nx; i++)
        x[i] = (float)rand() / RAND_MAX * 2.0f - 1.0f;
    for (int i = 0; i < 2; i++) {
        s[i].wall = calloc((size_t)reps, sizeof(double));
        s[i].cpu = calloc((size_t)reps, sizeof(double));
    }
    int differ = 0;
    for (int r = -1; r < reps; r++) /* rep -1: warm-up */
        for (int i = 0; i < 2; i++) {
            usleep(20000);
            const double w0 = now(CLOCK_MONOTONIC), c0 = now(CLOCK_PROCESS_CPUTIME_ID);
            for (int64_t il = 0; il < L; il++) {
                if (s[i].moe(&s[i].m.c, &s[i].m.w.layers[il], x + ((n == 1 ? 2 * (r + 1) + i : 0) * L + il) * n * D, n, y[i], NULL)) {
                    fprintf(stderr, "moe_ffn failed\n");
                    return 1;
                }
                if (i == 1 && r == -1) { /* compare the outputs on the same inputs */
                    s[0].moe(&s[0].m.c, &s[0].m.w.layers[il], x + ((n == 1 ? 1 : 0) * L + il) * n * D, n, y[0], NULL);
                    differ |= memcmp(y[0], y[1], (size_t)(n * D) * sizeof(float)) != 0;
                }
            }
            if (r >= 0) {
                s[i].wall[r] = now(CLOCK_MONOTONIC) - w0;
                s[i].cpu[r] = now(CLOCK_PROCESS_CPUTIME_ID) - c0;
            }
        }
    /* bytes of one token's experts: K experts' three matrices per layer */
    double bytes = 0;
    for (int64_t il = 0; il < L; il++) {
        const struct layer_weights *l = &s[0].m.w.layers[il];
        bytes += ((double)l->ffn_gate_exps.stride + (double)l->ffn_up_exps.stride * !l->gate_up_merged +
                  (double)l->ffn_down_exps.stride) * c->n_expert_used;
    }
    printf("moe-ab: %lld layers x %d experts (%d used), D %lld F %lld, %ld tokens, %d threads, %d reps; outputs %s\n",
           (long long)L, c->n_expert, c->n_expert_used, (long long)D, (long long)c->n_ff_exp, n, threads, reps,
           differ ? "DIFFER" : "bit-identical");
    for (int i = 0; i < 2; i++) {
        qsort(s[i].wall, (size_t)reps, sizeof(double), cmp);
        qsort(s[i].cpu, (size_t)reps, sizeof(double), cmp);
        printf("  %c %-50s wall min %8.3f ms med %8.3f ms, cpu min %8.3f ms", 'A' + i, s[i].lib, 1e3 * s[i].wall[0],
               1e3 * s[i].wall[reps / 2], 1e3 * s[i].cpu[0]);
        if (n == 1)
            printf(", %.1f GB/s (min)", bytes / s[i].wall[0] / 1e9);
        else
            printf(", %.1f tok/s (min)", (double)n / s[i].wall[0]);
        printf("\n");
    }
    fflush(stdout); /* _exit: two mimalloc-linked libraries crash each other at exit */
    _exit(differ);
}
