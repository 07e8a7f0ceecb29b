/*
 * check-argmax.h - the argmax op of a kernel table against the reference,
 * shared by test-kernels-simd (x86 variants) and test-kernels-arm (under
 * qemu).  Include after cmocka and kernels/dispatch.h.
 */
#ifndef INFER_CHECK_ARGMAX_H
#define INFER_CHECK_ARGMAX_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* Every size up to 80 (each tail), some long ones (a vocabulary), with the
 * largest value repeated, at either end, NaNs, infinities and signed zeros:
 * the variant must return the reference's index every time. */
static void check_argmax(const struct kernel_table *kt, const struct kernel_table *rt)
{
    static const int64_t big[] = {255, 256, 257, 1000, 32000, 262144};
    uint32_t seed = 99;
    float *x = malloc(262144 * sizeof(float));
    assert_non_null(x);
    for (int64_t k = 0; k < 80 + 6; k++) {
        const int64_t n = k < 80 ? k + 1 : big[k - 80];
        for (int shape = 0; shape < 9; shape++) {
            for (int64_t i = 0; i < n; i++) {
                seed = seed * 1664525u + 1013904223u;
                x[i] = (float)(seed >> 8) / 16777216.0f * 40.0f - 20.0f;
            }
            const int64_t a = (int64_t)(seed % (uint32_t)n), b = (int64_t)((seed >> 7) % (uint32_t)n);
            switch (shape) {
            case 0: break;
            case 1: x[a] = x[b] = 100.0f; break;                  /* a tie: the first wins */
            case 2: x[n - 1] = 100.0f; break;                     /* in the tail */
            case 3: x[0] = 100.0f; x[n - 1] = 100.0f; break;      /* first element */
            case 4: x[a] = NAN; x[b] = 50.0f; break;              /* NaN passed over */
            case 5: x[0] = NAN; x[b] = 50.0f; break;              /* NaN first: index 0 */
            case 6: for (int64_t i = 0; i < n; i++) x[i] = -INFINITY; break;
            case 7: for (int64_t i = 0; i < n; i++) x[i] = i % 3 ? -0.0f : 0.0f; break;
            case 8: x[a] = INFINITY; x[b] = INFINITY; break;
            }
            const int64_t want = rt->argmax(x, n), got = kt->argmax(x, n);
            if (got != want)
                fail_msg("%s argmax, n %lld, case %d: %lld, reference %lld", kt->name, (long long)n, shape,
                         (long long)got, (long long)want);
        }
    }
    assert_int_equal(kt->argmax(x, 0), 0);
    free(x);
}

#endif
