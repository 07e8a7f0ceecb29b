/*
 * dispatch.h - the kernel dispatch table, filled once at start-up.
 *
 * Each SIMD variant is compiled in its own translation unit with its own
 * flags.  kernels_init() picks the best variant the CPU supports (or the one
 * named by INFER_KERNELS) and fills `kern`; the engine calls kernels only
 * through it.
 */
#ifndef INFER_KERNELS_DISPATCH_H
#define INFER_KERNELS_DISPATCH_H

#include "cpu.h"

struct kernel_table {
    const char *name; /* variant name: "ref", "avx2", "neon", ... */
};

extern struct kernel_table kern;

/* Select the variant; idempotent.  Returns 0, or -1 if INFER_KERNELS names a
 * variant that is not built in or that this CPU cannot run (message in buf). */
int kernels_init(char *err, size_t n);
/* Space-separated names of the variants compiled into this binary. */
const char *kernels_built_in(void);

#endif
