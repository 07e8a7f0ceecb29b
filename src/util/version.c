/*
 * version.c - version and build description (`infer --version`).
 */
#include "common.h"

#include "../../kernels/cpu.h"
#include "../../kernels/dispatch.h"
#include "config.h"

#include <cblas.h>
#include <mimalloc.h>
#include <sleef.h>
#include <string.h>

const char *infer_version(void)
{
    return PACKAGE_VERSION;
}

const char *infer_build_info(void)
{
    static char buf[2048];
    char feats[256];
    char err[256];
    kernels_init(err, sizeof(err));
    cpu_features_format(cpu_features_get(), feats, sizeof(feats));
    int mv = mi_version();
    const char *blas = openblas_get_config();
    snprintf(buf, sizeof(buf),
             "libraries: mimalloc %d.%d.%d (process allocator), OpenBLAS (%s), sleef %d.%d.%d, "
#ifdef _OPENMP
             "OpenMP %d"
#else
             "no OpenMP%d"
#endif
             "\n"
             "kernels built in: %s\n"
             "kernels selected: %s\n"
             "cpu features: %s",
             mv / 100, (mv / 10) % 10, mv % 10, blas ? blas : "?", SLEEF_VERSION_MAJOR,
             SLEEF_VERSION_MINOR, SLEEF_VERSION_PATCHLEVEL,
#ifdef _OPENMP
             _OPENMP,
#else
             0,
#endif
             kernels_built_in(), kern.name, feats[0] ? feats : "(none detected)");
    return buf;
}

const char *infer_kernel_variant(void)
{
    char err[256];
    kernels_init(err, sizeof(err));
    return kern.name;
}

int infer_n_threads_default(void)
{
    return infer_n_physical_cores();
}
