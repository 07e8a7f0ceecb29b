#!/bin/sh
# kernels-variants.sh - run tests/test-kernels once under every kernel
# variant this CPU can run (INFER_KERNELS=avx512, avxvnni, avx2, ref, ...),
# so that the reference-kernel tests (golden data, the f32 op formulas,
# matmul) also hold for each SIMD variant, not only for the one selected by
# default.  The variants come from `infer cpu` ("runnable here:").
# Exit status as automake's test driver expects: 0 pass, 77 skip, 1 fail.
set -u
builddir=${INFER_BUILDDIR:-.}
infer="$builddir/infer"
test_kernels="$builddir/tests/test-kernels"
if ! test -x "$infer" || ! test -x "$test_kernels"; then
    echo "SKIP: $infer or $test_kernels not built"
    exit 77
fi
variants=$(INFER_KERNELS= "$infer" cpu | sed -n 's/^runnable here: *//p')
if test -z "$variants"; then
    echo "FAIL: no 'runnable here:' line in the output of infer cpu"
    exit 1
fi
status=0
for v in $variants; do
    if INFER_KERNELS=$v "$test_kernels" >"tests/kernels-variant-$v.log" 2>&1; then
        echo "PASS: test-kernels with INFER_KERNELS=$v"
    else
        echo "FAIL: test-kernels with INFER_KERNELS=$v (log: tests/kernels-variant-$v.log)"
        tail -n 20 "tests/kernels-variant-$v.log"
        status=1
    fi
done
exit $status
