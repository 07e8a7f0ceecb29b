/*
 * dispatch.c - choose the kernel variant once, from the CPU features.
 */
#include "dispatch.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct kernel_table kern = {.name = "ref"};

struct variant {
    const char *name;
    bool (*runs_on)(const struct cpu_features *f);
    void (*fill)(struct kernel_table *t);
};

static bool always(const struct cpu_features *f) { (void)f; return true; }
static void fill_ref(struct kernel_table *t) { t->name = "ref"; }

/* Best first. */
static const struct variant variants[] = {
    {"ref", always, fill_ref},
};
#define N_VARIANTS (sizeof(variants) / sizeof(variants[0]))

const char *kernels_built_in(void)
{
    static char buf[256];
    if (!buf[0]) {
        size_t o = 0;
        for (size_t i = 0; i < N_VARIANTS && o < sizeof(buf); i++)
            o += (size_t)snprintf(buf + o, sizeof(buf) - o, "%s%s", i ? " " : "", variants[i].name);
    }
    return buf;
}

int kernels_init(char *err, size_t n)
{
    const struct cpu_features *f = cpu_features_get();
    const char *want = getenv("INFER_KERNELS");
    if (want && *want) {
        for (size_t i = 0; i < N_VARIANTS; i++) {
            if (strcmp(variants[i].name, want) != 0)
                continue;
            if (!variants[i].runs_on(f)) {
                snprintf(err, n, "INFER_KERNELS=%s: this CPU lacks the instructions it needs", want);
                return -1;
            }
            variants[i].fill(&kern);
            return 0;
        }
        snprintf(err, n, "INFER_KERNELS=%s: no such variant (built in: %s)", want, kernels_built_in());
        return -1;
    }
    for (size_t i = 0; i < N_VARIANTS; i++) {
        if (variants[i].runs_on(f)) {
            variants[i].fill(&kern);
            break;
        }
    }
    return 0;
}
