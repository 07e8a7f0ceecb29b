/*
 * cpu.c - detect the instruction-set extensions the running CPU offers.
 */
#include "cpu.h"

#include <stdio.h>
#include <string.h>

#if defined(__x86_64__)
#include <cpuid.h>

static unsigned long long xgetbv0(void)
{
    unsigned int lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    return ((unsigned long long)hi << 32) | lo;
}

static void detect(struct cpu_features *f)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return;
    f->sse2 = d & (1u << 26);
    f->ssse3 = c & (1u << 9);
    f->sse41 = c & (1u << 19);
    bool osxsave = c & (1u << 27);
    bool avx_hw = c & (1u << 28);
    bool fma_hw = c & (1u << 12);
    bool f16c_hw = c & (1u << 29);
    unsigned long long xcr0 = osxsave ? xgetbv0() : 0;
    bool ymm_os = (xcr0 & 0x6) == 0x6;      /* XMM and YMM state enabled */
    bool zmm_os = (xcr0 & 0xe6) == 0xe6;    /* plus opmask and ZMM state */
    f->avx = avx_hw && ymm_os;
    f->fma = fma_hw && f->avx;
    f->f16c = f16c_hw && f->avx;
    if (__get_cpuid_max(0, NULL) >= 7) {
        __cpuid_count(7, 0, a, b, c, d);
        f->avx2 = (b & (1u << 5)) && f->avx;
        f->avx512f = (b & (1u << 16)) && zmm_os;
        f->avx512bw = (b & (1u << 30)) && f->avx512f;
        f->avx512vl = (b & (1u << 31)) && f->avx512f;
        f->avx512vnni = (c & (1u << 11)) && f->avx512f;
        __cpuid_count(7, 1, a, b, c, d);
        f->avxvnni = (a & (1u << 4)) && f->avx2;
        f->avx512bf16 = (a & (1u << 5)) && f->avx512f;
    }
}
#elif defined(__aarch64__)
#include <sys/auxv.h>
#ifndef HWCAP_ASIMD
#define HWCAP_ASIMD (1 << 1)
#endif
#ifndef HWCAP_ASIMDDP
#define HWCAP_ASIMDDP (1 << 20)
#endif
#ifndef HWCAP_FPHP
#define HWCAP_FPHP (1 << 9)
#endif
#ifndef HWCAP_CRC32
#define HWCAP_CRC32 (1 << 7)
#endif
#ifndef HWCAP2_I8MM
#define HWCAP2_I8MM (1 << 13)
#endif

static void detect(struct cpu_features *f)
{
    unsigned long hw = getauxval(AT_HWCAP), hw2 = getauxval(AT_HWCAP2);
    f->neon = hw & HWCAP_ASIMD;
    f->dotprod = hw & HWCAP_ASIMDDP;
    f->fp16 = hw & HWCAP_FPHP;
    f->i8mm = hw2 & HWCAP2_I8MM;
    f->crc32 = hw & HWCAP_CRC32;
}
#else
static void detect(struct cpu_features *f) { (void)f; }
#endif

const struct cpu_features *cpu_features_get(void)
{
    static struct cpu_features f;
    static int done;
    if (!done) { /* idempotent: racing first calls compute the same result */
        struct cpu_features t = {0};
        detect(&t);
        f = t;
        done = 1;
    }
    return &f;
}

void cpu_features_format(const struct cpu_features *f, char *buf, size_t n)
{
    struct { bool on; const char *name; } list[] = {
        {f->sse2, "sse2"}, {f->ssse3, "ssse3"}, {f->sse41, "sse4.1"}, {f->avx, "avx"},
        {f->avx2, "avx2"}, {f->fma, "fma"}, {f->f16c, "f16c"}, {f->avxvnni, "avx-vnni"},
        {f->avx512f, "avx512f"}, {f->avx512bw, "avx512bw"}, {f->avx512vl, "avx512vl"},
        {f->avx512vnni, "avx512-vnni"}, {f->avx512bf16, "avx512-bf16"},
        {f->neon, "neon"}, {f->dotprod, "dotprod"}, {f->i8mm, "i8mm"}, {f->fp16, "fp16"},
    };
    size_t o = 0;
    if (n)
        buf[0] = '\0';
    for (size_t i = 0; i < sizeof(list) / sizeof(list[0]); i++) {
        if (!list[i].on || o + 1 >= n)
            continue;
        int w = snprintf(buf + o, n - o, "%s%s", o ? " " : "", list[i].name);
        if (w < 0)
            break;
        o += (size_t)w;
        if (o >= n)
            o = n - 1;
    }
}
