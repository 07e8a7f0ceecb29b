#!/bin/sh
# chat-script.sh - `infer chat` with stdin not a terminal, as scripts use it:
# one answer per input line (an answer's own newlines written as \n, its
# backslashes as \\), the per-answer token limit on by default and reported
# on stderr when it cuts an answer, and /help naming the limit.  Runs on the
# default model (a base model: it never ends its turn, so every answer is
# cut), and /stats on a MoE model naming its routing.  Exit status as automake's test driver expects: 0 pass, 77 skip, 1 fail.
set -u
builddir=${INFER_BUILDDIR:-.}
srcdir=${INFER_SRCDIR:-.}
infer="$builddir/infer"
model=$srcdir/models/gemma-3-270m-q4_k_m.gguf
if ! test -x "$infer" || ! test -f "$model"; then
    echo "SKIP: $infer or $model missing"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
fail() { echo "FAIL: $*"; status=1; }

# Three messages, three lines; every backslash starts a valid escape.
printf 'Hello!\nWrite a short list of three fruits.\nThank you.\n' |
    OMP_NUM_THREADS=2 "$infer" chat -m "$model" --temp 0 -n 48 >"$tmp/out" 2>"$tmp/err" || fail "chat exited $?"
lines=$(wc -l <"$tmp/out")
test "$lines" -eq 3 || fail "3 messages gave $lines lines of output"
if sed 's/\\[nr\\]//g' "$tmp/out" | grep -q '\\'; then
    fail "a backslash in the output does not start \\n, \\r or \\\\"
fi
# the base model's answers have newlines (it starts new turns): they must be escaped, not printed
grep -q '\\n' "$tmp/out" || fail "no escaped newline in the answers (expected from this model)"
cuts=$(grep -c 'answer cut at 48 tokens' "$tmp/err")
test "$cuts" -eq 3 || fail "expected 3 'answer cut at 48 tokens' notes on stderr, got $cuts"

# No -n: the chat default limit (256) applies and is reported.
printf 'Hi\n' | OMP_NUM_THREADS=2 "$infer" chat -m "$model" --temp 0 >"$tmp/out2" 2>"$tmp/err2" ||
    fail "chat exited $?"
grep -q 'answer cut at 256 tokens' "$tmp/err2" || fail "no 'answer cut at 256 tokens' note without -n"
test "$(wc -l <"$tmp/out2")" -eq 1 || fail "one message did not give one line"
# -n -1: no limit; a message that does not generate: /help names the limit
printf '/help\n' | "$infer" chat -m "$model" -n 100 >"$tmp/help" 2>&1 || fail "chat /help exited $?"
grep -q 'after 100 tokens' "$tmp/help" || fail "/help does not name the -n limit"
printf '/help\n' | "$infer" chat -m "$model" -n -1 >"$tmp/help2" 2>&1 || fail "chat /help exited $?"
grep -q 'no token limit' "$tmp/help2" || fail "/help with -n -1 does not say there is no limit"

# A mixture-of-experts model (a generated test model): /stats says how the router spread the tokens.
moe=$builddir/models/gen/qwen3moe-q8_0.gguf
if test -f "$moe"; then
    printf 'Hello there\n/stats\n' | "$infer" chat -m "$moe" -n 8 >"$tmp/moe" 2>&1 || fail "chat on $moe exited $?"
    grep -q '^experts: 2 layers x 8, 2 per token; in this chat the busiest expert took' "$tmp/moe" ||
        fail "/stats on a MoE model has no routing line: $(cat "$tmp/moe")"
else
    echo "note: $moe missing, the MoE /stats case is not checked"
fi

test $status -eq 0 && echo "PASS: scripted chat: one line per answer, escapes, limits, MoE routing in /stats"
exit $status
