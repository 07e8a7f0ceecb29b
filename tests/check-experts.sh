#!/bin/sh
# check-experts.sh - the per-expert page-cache and routing figures of a MoE
# model through the CLI: `infer info --json` shows 0% for every expert of a
# cold file and 100% after `infer warm`; `infer warm --experts PROFILE
# --experts-only` brings exactly the profiled experts in; `infer bench -o json` reports, for
# each layer, exactly n_tokens x experts_used routings per test; and (on the dense model)
# `infer bench --no-warmup` runs exactly the tests' forward passes, without it one warm-up batch
# and token more (INFER_PROFILE's pass and token counts).
# Exit status as automake's test driver expects: 0 pass, 77 skip, 1 fail.
set -u
builddir=${INFER_BUILDDIR:-.}
infer="$builddir/infer"
src="$builddir/models/gen/olmoe-q8_0.gguf" # 2 layers of 16 experts, 4 per token
py=${PYTHON:-python3}
if ! test -x "$infer" || ! test -r "$src" || ! "$py" -c 'import json' 2>/dev/null; then
    echo "SKIP: needs $infer, $src and a python"
    exit 77
fi
# a private copy: no other test maps it, so `infer cold` can drop its pages
model="$builddir/tests/check-experts.gguf"
cp "$src" "$model" || exit 1
trap 'rm -f "$model"' EXIT
fail=0
failed="$builddir/tests/check-experts.failed" # check runs at the end of a pipe, in a subshell
rm -f "$failed"
check() { # NAME PYTHON-EXPRESSION-ON-d
    if ! "$py" -c "import json,sys; d=json.load(sys.stdin); sys.exit(0 if ($2) else 1)"; then
        echo "FAIL: $1"
        : >"$failed"
    else
        echo "PASS: $1"
    fi
}
"$infer" cold "$model" >/dev/null || exit 1
"$infer" info --json "$model" | check "cold file: every expert 0% resident" \
    "len(d['experts']) == 2 and all(l['n_expert'] == 16 and len(l['resident_percent']) == 16 and
     max(l['resident_percent']) == 0 for l in d['experts'])"
"$infer" warm "$model" >/dev/null || exit 1
"$infer" info --json "$model" | check "after warm: every expert 100% resident" \
    "all(min(l['resident_percent']) == 100 for l in d['experts'])"
# a usage profile (LAYER EXPERT COUNT, or /metrics lines): exactly those experts come in
"$infer" cold "$model" >/dev/null || exit 1
profile="$builddir/tests/check-experts.profile"
printf '# layer expert count\n0 2 5\n0 7 1\ninfer_expert_routed_tokens_total{layer="0",expert="12"} 3\n1 5 9\n1 6 0\n' \
    >"$profile"
"$infer" warm --experts "$profile" --experts-only "$model" >/dev/null || exit 1
rm -f "$profile"
"$infer" info --json "$model" | check "warm --experts: the profiled experts 100%, those not next to them 0%" \
    "[l['resident_percent'][e] for l, e in ((d['experts'][0], 2), (d['experts'][0], 7), (d['experts'][0], 12),
                                           (d['experts'][1], 5))] == [100] * 4 and
     max(d['experts'][0]['resident_percent'][e] for e in (0, 4, 5, 9, 10, 14, 15)) == 0 and
     max(d['experts'][1]['resident_percent'][e] for e in (0, 1, 2, 3, 7, 8, 9, 10, 11, 12, 13, 14, 15)) == 0"
"$infer" info --json "$builddir/models/gen/qwen3-f32.gguf" | check "dense model: no experts" "d['experts'] == []"
# the repacked copy (kernels with an x4 Q4_K layout): a load writes it, and then `info` measures and
# `warm --experts` reads the tensors decode reads from it, `cold` drops it too.  A Q4_K_M file: its
# Q4_K experts and layer 1's Q6_K down (use_more_bits) are all repacked (x86 has both x4 layouts).
qmodel="$builddir/tests/check-experts-q4km.gguf"
rdir="$builddir/tests/check-experts-repack"
rm -rf "$rdir"
cp "$builddir/models/gen/olmoe-q4_k_m.gguf" "$qmodel" || exit 1
trap 'rm -f "$model" "$qmodel"; rm -rf "$rdir"' EXIT
export INFER_REPACK_DIR="$rdir"
"$infer" bench -m "$qmodel" -p 1 -n 1 -r 1 -t 1 --no-warmup >/dev/null 2>&1 || exit 1
if ls "$rdir"/repack/*.bin >/dev/null 2>&1; then # the load repacked (some Q4_K of) it
    "$infer" cold "$qmodel" >/dev/null || exit 1
    "$infer" info --json "$qmodel" | check "repacked: cold file and copy, every expert 0%; the copy named" \
        "d['experts_repacked']['path'].startswith('$rdir/') and d['experts_repacked']['tensors'] >= 3 and
         max(max(l['resident_percent']) for l in d['experts']) == 0"
    cat "$qmodel" >/dev/null # the GGUF resident: its repacked experts are not what decode reads
    "$infer" info --json "$qmodel" | check "repacked: the GGUF alone in memory, every expert still 0%" \
        "max(max(l['resident_percent']) for l in d['experts']) == 0"
    "$infer" cold "$qmodel" >/dev/null || exit 1
    printf '0 2 5\n0 7 1\n0 12 3\n1 5 9\n' >"$profile"
    "$infer" warm --experts "$profile" --experts-only "$qmodel" >/dev/null || exit 1
    rm -f "$profile"
    "$infer" info --json "$qmodel" | check "repacked: warm --experts brings exactly the profiled experts of the copy in" \
        "[l['resident_percent'][e] for l, e in ((d['experts'][0], 2), (d['experts'][0], 7), (d['experts'][0], 12),
                                               (d['experts'][1], 5))] == [100] * 4 and
         max(d['experts'][0]['resident_percent'][e] for e in (0, 4, 5, 9, 10, 14, 15)) == 0 and
         max(d['experts'][1]['resident_percent'][e] for e in (0, 1, 2, 3, 7, 8, 9, 10, 11, 12, 13, 14, 15)) == 0"
    "$infer" warm "$qmodel" >/dev/null || exit 1
    "$infer" info --json "$qmodel" | check "repacked: after warm, every expert 100% (GGUF and copy)" \
        "all(min(l['resident_percent']) == 100 for l in d['experts'])"
else
    echo "SKIP: these kernels keep Q4_K as stored (no repacked copy)"
fi
unset INFER_REPACK_DIR
"$infer" bench -m "$model" -p 16 -n 4 -r 2 -t 1 -o json 2>/dev/null | check \
    "bench -o json: 2 x 16 x 4 routings per layer for pp16 (2 reps), 2 x 4 x 4 for tg4" \
    "[t['test'] for t in d] == ['pp16', 'tg4'] and
     [sum(l) for l in d[0]['expert_counts']] == [128, 128] and
     [sum(l) for l in d[1]['expert_counts']] == [32, 32] and all(len(l) == 16 for l in d[0]['expert_counts'])"
# pp16 is one pass of 16 tokens, tg4 four of one; the warm-up adds a batch of min(16, 32) and a token
passes() { # EXPECTED-LINE BENCH-OPTIONS...: the profile line of a `bench -p 16 -n 4 -r 1` run
    want=$1
    shift
    label=${*:-"(with its warm-up)"}
    got=$(INFER_PROFILE=1 "$infer" bench -m "$builddir/models/gen/qwen3-f32.gguf" -p 16 -n 4 -r 1 -t 1 "$@" \
        -o json 2>&1 >/dev/null | sed -n 's/^profile: \([0-9]* forward passes, [0-9]* tokens\).*/\1/p')
    if test "$got" = "$want"; then
        echo "PASS: bench $label: $want"
    else
        echo "FAIL: bench $label: '$got', expected '$want'"
        fail=1
    fi
}
passes "5 forward passes, 20 tokens" --no-warmup
passes "7 forward passes, 37 tokens"
test -e "$failed" && fail=1
rm -f "$failed"
exit $fail
