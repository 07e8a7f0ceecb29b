/*
 * quants_dotprod.c - the aarch64 variant "dotprod" (ARMv8.2-A with SDOT, e.g.
 * Raspberry Pi 5 / Cortex-A76): the quantized dots of quants_neon_body.h
 * with SDOT as the int8 dot, on top of the shared kernels of quants_neon.c.
 *
 * This whole file is compiled for armv8.2-a+dotprod (the pragma below), so
 * nothing in it may run unless the CPU reports ASIMDDP: dispatch.c selects it
 * only then.  SDOT sums four products per int32 lane exactly, for any int8
 * inputs, so DOT_SMALL and DOT_WIDE are the same instruction.
 */
#if defined(__aarch64__)

#pragma GCC target("arch=armv8.2-a+dotprod")

#include "neon.h"

#include <arm_neon.h>

#define NEON_FN(name) name##_dotprod
#define DOT_SMALL(acc, a, b) vdotq_s32((acc), (a), (b))
#define DOT_WIDE(acc, a, b) vdotq_s32((acc), (a), (b))

#define GEMM_SDOT 1
#include "quants_neon_body.h"

void kernels_fill_dotprod(struct kernel_table *t)
{
    kernels_fill_neon_common(t);
    fill_int_dots_dotprod(t);
    t->name = "dotprod";
}

#else
typedef int quants_dotprod_empty; /* ISO C wants a declaration in every file */
#endif
