#!/bin/sh
# tests/haproxy/run.sh - four `infer serve` boards behind Debian's HAProxy with the shipped
# contrib/haproxy configuration (boards.py); skipped (77) without haproxy, python3 or the model.
set -u
here=$(cd "$(dirname "$0")" && pwd)
export INFER_BUILDDIR=${INFER_BUILDDIR:-$(pwd)}
export INFER_SRCDIR=${INFER_SRCDIR:-$here/../..}
PYTHON=${PYTHON:-python3}
if ! command -v haproxy >/dev/null 2>&1; then
    echo "SKIP: haproxy not installed (contrib/quickstart.sh installs it)"
    exit 77
fi
exec "$PYTHON" "$here/boards.py"
