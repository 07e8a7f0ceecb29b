#!/bin/sh
# think.sh - a thinking model's output through `infer run` and `infer chat`.
#
# The model is qwen3think-f32 (contrib/mkmodel.py --think-script, built by `make check`): after
# any prompt its greedy output is "<think>\nSome reasoning.\n</think>\n\nThe answer." and
# <|im_end|>, as in llama.cpp (tests/golden/qwen3think-f32.txt).
#   - `infer run` is a raw continuation: the text verbatim, markers included, ending at the
#     end of turn (as llama.cpp's completion prints it);
#   - `infer chat` shows the answer alone: one line per answer in a script, the reasoning
#     hidden; the second answer is the same, i.e. the history holds the answer alone (a
#     <think> left in the context makes this model skip its opening marker, and its reasoning
#     would be shown); --show-thinking prints the reasoning between its markers; a template
#     whose generation prompt opens the reasoning gives the same answers;
#   - --reasoning-budget 0: the prompt ends with the template's "<think>\n\n</think>\n\n" and
#     the model answers at once (3 tokens and the end of turn; thinking first would be cut at
#     -n 4), nothing to show even with --show-thinking; a bad value is refused;
#   - on a terminal (through script(1), when installed): a dim "thinking..." that is erased
#     before the answer, or with --show-thinking the reasoning dim, then the answer.
# Exit status as automake's test driver expects: 0 pass, 77 skip, 1 fail.
set -u
builddir=${INFER_BUILDDIR:-.}
infer="$builddir/infer"
model=$builddir/models/gen/qwen3think-f32.gguf
if ! test -x "$infer" || ! test -f "$model"; then
    echo "SKIP: $infer or $model missing (make check builds the model)"
    exit 77
fi
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
status=0
fail() { printf "FAIL: %s\n" "$*"; status=1; }

# run: raw, verbatim (printf: the expected bytes, no trailing newline)
"$infer" run -m "$model" --temp 0 -p 'Hello' >"$tmp/run" 2>"$tmp/run.err" || fail "run exited $?"
printf '<think>\nSome reasoning.\n</think>\n\nThe answer.' >"$tmp/run.want"
cmp -s "$tmp/run" "$tmp/run.want" || fail "run printed '$(cat "$tmp/run")'"

# chat, scripted: two answers, reasoning hidden
printf 'Hello\nAnd then?\n' | "$infer" chat -m "$model" --temp 0 >"$tmp/chat" 2>"$tmp/chat.err" ||
    fail "chat exited $?"
printf 'The answer.\nThe answer.\n' >"$tmp/chat.want"
cmp -s "$tmp/chat" "$tmp/chat.want" || fail "chat printed '$(cat "$tmp/chat")' (want 'The answer.' twice)"
grep -q 'Some reasoning' "$tmp/chat.err" && fail "the reasoning went to stderr: $(cat "$tmp/chat.err")"

# chat --show-thinking, scripted: between the markers, then the answer (its newline escaped)
printf 'Hello\nAnd then?\n' | "$infer" chat -m "$model" --temp 0 --show-thinking >"$tmp/show" 2>/dev/null ||
    fail "chat --show-thinking exited $?"
printf '%s\n%s\n' '<think>Some reasoning.</think>\nThe answer.' '<think>Some reasoning.</think>\nThe answer.' \
    >"$tmp/show.want"
cmp -s "$tmp/show" "$tmp/show.want" || fail "chat --show-thinking printed '$(cat "$tmp/show")'"

# a template whose generation prompt opens the reasoning (Qwen3-*-Thinking-2507): the prompt
# ends with "<think>\n", the model answers "Some reasoning.\n</think>\n\nThe answer." without
# opening it, and that is still reasoning
forced=$(cat <<'EOF'
{%- for message in messages %}{{- '<|im_start|>' + message.role + '\n' + message.content + '<|im_end|>\n' }}{%- endfor %}{%- if add_generation_prompt %}{{- '<|im_start|>assistant\n<think>\n' }}{%- endif %}
EOF
)
# (-n 9: the 8 tokens after "<think>\n" end the turn; generating "<think>\n" too would be cut)
printf 'Hello\nAnd then?\n' | "$infer" chat -m "$model" --temp 0 -n 9 --chat-template "$forced" >"$tmp/forced" \
    2>"$tmp/forced.err" ||
    fail "chat --chat-template (forced open) exited $?"
cmp -s "$tmp/forced" "$tmp/chat.want" ||
    fail "chat with a template that opens the reasoning printed '$(cat "$tmp/forced")' (want 'The answer.' twice)"

# chat --reasoning-budget 0: no thinking at all
printf 'Hello\nAnd then?\n' | "$infer" chat -m "$model" --temp 0 -n 4 --show-thinking --reasoning-budget 0 \
    >"$tmp/off" 2>"$tmp/off.err" || fail "chat --reasoning-budget 0 exited $?"
cmp -s "$tmp/off" "$tmp/chat.want" ||
    fail "chat --reasoning-budget 0 printed '$(cat "$tmp/off")' (want 'The answer.' twice, no reasoning)"
"$infer" chat -m "$model" --reasoning-budget 5 </dev/null >/dev/null 2>"$tmp/bad.err" &&
    fail "chat --reasoning-budget 5 was accepted"
grep -q 'reasoning-budget' "$tmp/bad.err" || fail "chat --reasoning-budget 5: no clear error: $(cat "$tmp/bad.err")"

# chat on a terminal
if command -v script >/dev/null 2>&1; then
    esc=$(printf '\033')
    for mode in hide show; do
        flag=; test $mode = show && flag=--show-thinking
        (printf 'Hello\n'; sleep 2; printf '/quit\n') |
            timeout 60 script -qec "'$infer' chat -m '$model' --temp 0 $flag" /dev/null >"$tmp/tty.$mode" 2>&1 ||
            fail "chat on a terminal ($mode) exited $?"
        tr -d '\r' <"$tmp/tty.$mode" >"$tmp/tty"
        if test $mode = hide; then
            grep -q "${esc}\[2mthinking\.\.\.${esc}\[0m${esc}\[KThe answer\.\$" "$tmp/tty" ||
                fail "terminal: no dim 'thinking...' erased before 'The answer.': $(od -c "$tmp/tty" | tail -8)"
            grep -q 'Some reasoning' "$tmp/tty" && fail "terminal: the reasoning is shown without --show-thinking"
        else
            grep -q "${esc}\[2mSome reasoning\.${esc}\[0m\$" "$tmp/tty" && grep -q '^The answer\.$' "$tmp/tty" ||
                fail "terminal --show-thinking: no dim reasoning then the answer: $(od -c "$tmp/tty" | tail -8)"
        fi
    done
else
    echo "script(1) not installed: the terminal display is not checked"
fi
test $status -eq 0 && echo "PASS: a thinking model's reasoning through run and chat"
exit $status
