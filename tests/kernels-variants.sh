#!/bin/sh
# kernels-variants.sh - run tests/test-kernels and tests/test-moe once
# under every kernel variant this CPU can run (INFER_KERNELS=avx512,
# avxvnni, avx2, ref, ...), so that the reference-kernel tests (golden data,
# the f32 op formulas, matmul) and the grouped expert FFN against its
# reference path also hold for each SIMD variant, not only for the one
# selected by default.  The variants come from `infer cpu` ("runnable here:").
# Exit status as automake's test driver expects: 0 pass, 77 skip, 1 fail.
set -u
builddir=${INFER_BUILDDIR:-.}
infer="$builddir/infer"
test_kernels="$builddir/tests/test-kernels"
test_moe="$builddir/tests/test-moe"
if ! test -x "$infer" || ! test -x "$test_kernels" || ! test -x "$test_moe"; then
    echo "SKIP: $infer, $test_kernels or $test_moe not built"
    exit 77
fi
variants=$(INFER_KERNELS= "$infer" cpu | sed -n 's/^runnable here: *//p')
if test -z "$variants"; then
    echo "FAIL: no 'runnable here:' line in the output of infer cpu"
    exit 1
fi
status=0
for v in $variants; do
    for t in "$test_kernels" "$test_moe"; do
        name=$(basename "$t")
        log="tests/kernels-variant-$v-$name.log"
        if INFER_KERNELS=$v "$t" >"$log" 2>&1; then
            echo "PASS: $name with INFER_KERNELS=$v"
        else
            echo "FAIL: $name with INFER_KERNELS=$v (log: $log)"
            tail -n 20 "$log"
            status=1
        fi
    done
done
exit $status
