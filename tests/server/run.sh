#!/bin/sh
# tests/server/run.sh - the `infer serve` integration suite, run by `make check`.
#
# Starts the real server on loopback ports and drives it with the official openai SDK,
# curl and raw sockets: test_api.py (API behaviour), test_hostile.py (malformed and
# hostile requests), test_embeddings.py (/v1/embeddings; skipped without models/fetch-embedder),
# test_respcache.py (the response cache's exact tier), test_paths.py (every response's path
# class: X-Infer-Path, timings.path, /metrics per class, --warm-prompts), test_faults.py (SIGKILL
# at random points with --cache-dir, the repack cache killed in its first write, a full disk), test_structured.py (response_format and
# tools on the default model, validated with jsonschema; skipped without it), test_semcache.py (its semantic tier;
# skipped without models/fetch-embedder), test_ollama.py (the Ollama API
# through the official ollama client; skipped without it), test_think.py (a thinking model's
# reasoning split on the scripted qwen3think-f32 model; skipped without it), load.py (a bounded concurrent load:
# zero errors, no memory growth).
# In an --enable-asan build the server runs under ASan/UBSan and any report fails it.
#
# Environment: PYTHON (configure's), INFER_BUILDDIR, INFER_SRCDIR (set by the generated
# wrapper tests/server/check-server); INFER_SERVE_TEST_MODEL overrides the model;
# INFER_SERVE_LOAD="CLIENTS REQUESTS" sizes the load test (default "4 5").
# Exit 77 (skipped) without python's openai module, curl or any model.
set -u
export PYTHONDONTWRITEBYTECODE=1  # no __pycache__ in the source tree
here=$(cd "$(dirname "$0")" && pwd)
PYTHON=${PYTHON:-python3}
export INFER_BUILDDIR=${INFER_BUILDDIR:-$(pwd)}
export INFER_SRCDIR=${INFER_SRCDIR:-$here/../..}

if ! "$PYTHON" -c 'import openai' >/dev/null 2>&1; then
    echo "SKIP: '$PYTHON' cannot import openai (contrib/quickstart.sh installs it in .venv)"
    exit 77
fi
if ! command -v curl >/dev/null 2>&1; then
    echo "SKIP: curl not installed"
    exit 77
fi
if [ ! -x "$INFER_BUILDDIR/infer" ]; then
    echo "FAIL: $INFER_BUILDDIR/infer not built"
    exit 1
fi
model=$("$PYTHON" -c "import sys; sys.path.insert(0, '$here'); import harness; print(harness.test_model() or '')")
if [ -z "$model" ]; then
    echo "SKIP: no model (neither models/gen/gemma3-q8_0.gguf from 'make check' nor the default model)"
    exit 77
fi

# ASan: leaks and errors fail the server's exit status, which the tests check.
export ASAN_OPTIONS=${ASAN_OPTIONS:-abort_on_error=0:detect_leaks=1:exitcode=66}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1:exitcode=67}
# the machine is shared: keep the server's threads modest
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}

set -- ${INFER_SERVE_LOAD:-4 5}
rc=0
"$PYTHON" "$here/test_api.py" || rc=1
"$PYTHON" "$here/test_hostile.py" || rc=1
"$PYTHON" "$here/test_embeddings.py"; e=$?; [ $e -eq 0 ] || [ $e -eq 77 ] || rc=1
"$PYTHON" "$here/test_respcache.py" || rc=1
"$PYTHON" "$here/test_paths.py" || rc=1
"$PYTHON" "$here/test_faults.py" || rc=1
"$PYTHON" "$here/test_structured.py"; e=$?; [ $e -eq 0 ] || [ $e -eq 77 ] || rc=1
"$PYTHON" "$here/test_semcache.py"; e=$?; [ $e -eq 0 ] || [ $e -eq 77 ] || rc=1
"$PYTHON" "$here/test_ollama.py"; e=$?; [ $e -eq 0 ] || [ $e -eq 77 ] || rc=1
"$PYTHON" "$here/test_think.py"; e=$?; [ $e -eq 0 ] || [ $e -eq 77 ] || rc=1
"$PYTHON" "$here/load.py" --clients "$1" --requests "$2" --max-tokens 4 --check || rc=1
if [ $rc -eq 0 ]; then echo "server suite: all passed"; else echo "server suite: FAILED"; fi
exit $rc
