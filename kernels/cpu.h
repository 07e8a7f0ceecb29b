/*
 * cpu.h - CPU feature detection and the kernel variants built into this binary.
 *
 * Features are read once (cpuid + xgetbv on x86-64, getauxval(AT_HWCAP) on
 * aarch64).  The dispatch table (dispatch.h) is filled from them at start-up;
 * no kernel checks features per call.
 */
#ifndef INFER_KERNELS_CPU_H
#define INFER_KERNELS_CPU_H

#include <stdbool.h>
#include <stddef.h>

struct cpu_features {
    /* x86-64 */
    bool sse2, ssse3, sse41, avx, avx2, fma, f16c;
    bool avx512f, avx512bw, avx512vl, avx512vnni, avx512bf16, avxvnni;
    /* aarch64 */
    bool neon, dotprod, i8mm, fp16, crc32;
};

const struct cpu_features *cpu_features_get(void);
/* Space-separated list of detected features, e.g. "sse2 avx avx2 fma". */
void cpu_features_format(const struct cpu_features *f, char *buf, size_t n);

#endif
