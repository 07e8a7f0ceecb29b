#!/bin/sh
# check-paths.sh - `infer bench --paths -o json` keeps the cold and warm
# classes apart: cold storage reads the file from disk and a warm page cache
# does not; a prefix hit (in RAM, from the disk tier, after the same system
# prompt) computes fewer tokens than the empty-cache request; the repack-cache
# hit does no repack work while the first start does; a competing workload
# leaves fewer tokens to reuse; a keep-alive reload maps the model again.
# On a synthetic Q4_0 model (its weights repack on avx512) with short sizes.
# Exit status as automake's test driver expects: 0 pass, 77 skip, 1 fail.
set -u
builddir=${INFER_BUILDDIR:-.}
infer="$builddir/infer"
src="$builddir/models/gen/llama-q4_0.gguf"
py=${PYTHON:-python3}
if ! test -x "$infer" || ! test -r "$src" || ! "$py" -c 'import json' 2>/dev/null; then
    echo "SKIP: needs $infer, $src and a python"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# a private copy: no other test maps it, so DONTNEED can drop its pages; and
# a SHA256SUMS beside it, so that the artifact check has a recorded sum
model="$tmp/paths.gguf"
cp "$src" "$model" || exit 1
(cd "$tmp" && sha256sum paths.gguf >SHA256SUMS) || exit 1
OMP_NUM_THREADS=2 "$infer" bench --paths -m "$model" -t 2 --prefix-tokens 160 --gen 4 --competing 3 -o json \
    --svg "$tmp/paths.svg" >"$tmp/paths.json" 2>"$tmp/err" || {
    cat "$tmp/err"
    echo "FAIL: infer bench --paths exited with an error"
    exit 1
}
fail=0
check() { # NAME PYTHON-EXPRESSION-ON-s (the situations by id)
    if "$py" -c "
import json, sys
d = json.load(open('$tmp/paths.json'))
s = {r['id']: r for r in d['situations']}
sys.exit(0 if ($2) else 1)"; then
        echo "PASS: $1"
    else
        echo "FAIL: $1"
        fail=1
    fi
}
skip_unless() { # NAME PYTHON-EXPRESSION: true when the part can be checked
    "$py" -c "
import json, sys
d = json.load(open('$tmp/paths.json'))
s = {r['id']: r for r in d['situations']}
sys.exit(0 if ($2) else 1)" && return 0
    echo "SKIP part: $1"
    return 1
}

check "eight situations" "sorted(s) == list(range(1, 9))"
for i in 2 3 4 5 6 8; do
    check "situation $i measured" "s[$i]['available'] and s[$i]['ttft_s'] > 0"
done
check "the artifact check compares against SHA256SUMS" "s[2]['check_state'] == 'sha256 matches SHA256SUMS'"

if skip_unless "cold storage: $("$py" -c "import json; print([r['reason'] for r in json.load(open('$tmp/paths.json'))['situations'] if r['id'] == 1][0])")" \
    "s[1]['available']"; then
    check "cold storage reads the file from disk" "s[1]['storage_read_bytes'] >= 0.9 * $(wc -c <"$model")"
    check "cold storage started with the file out of the page cache" "s[1]['resident_before_pct'] < 5"
fi
check "a warm page cache reads nothing from disk" \
    "s[2]['storage_read_bytes'] == 0 and s[3]['storage_read_bytes'] == 0 and s[2]['resident_before_pct'] > 99"

check "an empty prefix cache computes the whole prompt" \
    "s[3]['reused_tokens'] == 0 and s[3]['prefill_tokens'] == s[3]['prompt_tokens']"
check "restart: the prefix comes from the disk tier, fewer tokens computed" \
    "s[4]['disk_blocks'] > 0 and s[4]['disk_bytes'] > 0 and s[4]['prefill_tokens'] < s[3]['prefill_tokens']"
check "immediate repeat: prefix in RAM, nothing read from disk, fewer tokens computed" \
    "s[5]['reused_tokens'] > 0 and s[5]['disk_blocks'] == 0 and s[5]['prefill_tokens'] < s[3]['prefill_tokens']"
check "another question after the same prefix reuses it" \
    "s[8]['reused_tokens'] > 0 and s[8]['prefill_tokens'] < s[3]['prefill_tokens']"
check "keep-alive expiry: the model is mapped again and the RAM prefix is gone" \
    "s[6]['loaded'] and s[6]['load_s'] > 0 and s[6]['reused_tokens'] == 0"
if skip_unless "competing workload: $("$py" -c "import json; print([r['reason'] for r in json.load(open('$tmp/paths.json'))['situations'] if r['id'] == 7][0])")" \
    "s[7]['available']"; then
    check "a competing workload leaves less of the prefix to reuse" \
        "s[7]['reused_tokens'] < s[5]['reused_tokens'] and s[7]['prefill_tokens'] > s[5]['prefill_tokens']"
fi

if skip_unless "repack: this kernel variant repacks nothing in this file" "s[2]['repack_tensors'] > 0"; then
    check "the first start repacks" "s[2]['repack_state'].startswith('created') and s[2]['repack_work_s'] > 0"
    check "the repack-cache hit does no repack work" \
        "s[3]['repack_state'] == 'hit' and s[3]['repack_work_s'] == 0 and s[4]['repack_state'] == 'hit'"
fi
grep -q '<svg' "$tmp/paths.svg" && grep -q 'cold storage' "$tmp/paths.svg" && echo "PASS: the SVG has the rows" ||
    { echo "FAIL: the SVG"; fail=1; }
exit $fail
