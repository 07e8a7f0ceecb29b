#!/usr/bin/env bash
# contrib/cross-check.sh - cross-build infer for aarch64 and run the kernel tests under qemu.
#
#   contrib/cross-check.sh [--install | --install-only] [BUILDDIR]
#
# On an x86-64 Debian host: configure BUILDDIR (default: build-aarch64/ in the source tree, or
# $INFER_BUILDDIR/build-aarch64 under `make check`) with --host=aarch64-linux-gnu, build the kernel
# test programs (linked statically against libinfer), and run each under qemu-aarch64 as
#   -cpu cortex-a72  (Raspberry Pi 4: NEON, no dot product)  variants ref, neon
#   -cpu cortex-a76  (Raspberry Pi 5: NEON + SDOT)           variants neon, dotprod
#   -cpu max         (+ I8MM: Neoverse V1/N2 class)          variant i8mm
# (test-kernels once per variant, forced with INFER_KERNELS; the variant-comparing tests once
# per CPU); `infer --version` must report the expected default variant on each CPU, and forcing
# a variant the CPU lacks must be refused.
#
# The cross build needs Debian's gcc-aarch64-linux-gnu and qemu-user plus the arm64 (multiarch)
# -dev packages of infer's dependencies (ARM64_PACKAGES below). --install adds the arm64
# architecture and installs what is missing (root, or sudo); --install-only does only that.
#
# Exit status: 0 all passed; 1 a build or a test failed; 77 skipped (not an x86-64 host, the cross
# tools are missing and --install was not given, or INFER_CROSS_CHECK=no); under CI=true a
# missing tool is a failure, not a skip. make check runs this script as one of its tests.
set -euo pipefail

# The arm64 builds of the libraries configure requires (keep in step with the -dev packages of
# DEB_PACKAGES in contrib/quickstart.sh), and the cross pkg-config (aarch64-linux-gnu-pkg-config).
ARM64_PACKAGES="libopenblas-dev:arm64 libsleef-dev:arm64 libmimalloc-dev:arm64 libcmocka-dev:arm64
  libedit-dev:arm64 libmicrohttpd-dev:arm64 libjansson-dev:arm64 libsqlite3-dev:arm64 libgomp1:arm64 pkgconf:arm64"
HOST_PACKAGES="gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user"
# The kernel test programs, run when the build defines them: test-kernels and test-moe (the
# grouped expert FFN against its reference path) once per variant
# (INFER_KERNELS), the others once per CPU (they compare every variant the CPU runs to ref).
KERNEL_TESTS="test-kernels test-kernels-arm test-kernels-simd test-moe"
PER_VARIANT_TESTS="test-kernels test-moe"

srcdir=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
say() { printf 'cross-check: %s\n' "$*"; }
skip() {
    say "SKIP: $*"
    if [[ ${CI:-} == true ]]; then
        say "CI=true: the aarch64 kernel tests must run here"
        exit 1
    fi
    exit 77
}
now_ms() { echo $(($(date +%s%N) / 1000000)); }
since() { local ms=$(($(now_ms) - $1)); printf '%d.%ds' $((ms / 1000)) $((ms % 1000 / 100)); }

install=no
builddir=""
for arg in "$@"; do
    case $arg in
        --install) install=yes ;;
        --install-only) install=only ;;
        -h | --help) sed -n '2,22p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
        -*) say "unknown option $arg"; exit 1 ;;
        *) builddir=$arg ;;
    esac
done

# Not applicable here: --install-only has nothing to do (exit 0), a check is skipped (77).
not_here() {
    if [[ $install == only ]]; then say "$1: nothing to install"; exit 0; fi
    say "SKIP: $1"
    exit 77
}
[[ ${INFER_CROSS_CHECK:-} != no ]] || not_here "INFER_CROSS_CHECK=no"
[[ $(uname -m) == x86_64 ]] || not_here "not an x86-64 host (on aarch64, make check tests the kernels natively)"

# Packages of ARM64_PACKAGES and HOST_PACKAGES that dpkg does not list as installed.
missing_packages() {
    local p
    for p in $HOST_PACKAGES $ARM64_PACKAGES; do
        if [[ $(dpkg-query -W -f='${db:Status-Abbrev}' "$p" 2> /dev/null) != "ii " ]]; then
            printf '%s ' "$p"
        fi
    done
}

install_packages() {
    if ! command -v dpkg-query > /dev/null || ! command -v apt-get > /dev/null; then
        skip "no dpkg/apt-get: install an aarch64 cross compiler, qemu-user and arm64 builds of: $ARM64_PACKAGES"
    fi
    local missing sudo=()
    missing=$(missing_packages)
    if [[ -z $missing ]]; then
        say "cross tools and arm64 packages are installed"
        return 0
    fi
    if ((EUID != 0)); then
        command -v sudo > /dev/null || { say "installing $missing needs root"; exit 1; }
        sudo=(sudo)
    fi
    if ! dpkg --print-foreign-architectures | grep -qx arm64; then
        say "adding the arm64 architecture (dpkg --add-architecture arm64)"
        "${sudo[@]}" dpkg --add-architecture arm64
    fi
    say "installing $missing"
    "${sudo[@]}" apt-get update -q
    # shellcheck disable=SC2086 # a list of package names
    "${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
}

if [[ $install != no ]]; then
    install_packages
    [[ $install == only ]] && exit 0
fi

for tool in aarch64-linux-gnu-gcc aarch64-linux-gnu-pkg-config qemu-aarch64; do
    command -v "$tool" > /dev/null ||
        skip "$tool not found (contrib/cross-check.sh --install, or apt-get install $HOST_PACKAGES $ARM64_PACKAGES)"
done
if command -v dpkg-query > /dev/null; then
    missing=$(missing_packages)
    [[ -z $missing ]] || skip "missing packages: $missing(contrib/cross-check.sh --install)"
fi
[[ -x $srcdir/configure ]] || { say "$srcdir/configure is missing: run autoreconf -fi there"; exit 1; }

if [[ -z $builddir ]]; then
    if [[ -n ${INFER_BUILDDIR:-} ]]; then builddir=$INFER_BUILDDIR/build-aarch64; else builddir=$srcdir/build-aarch64; fi
fi
mkdir -p "$builddir"
builddir=$(cd "$builddir" && pwd)
t_begin=$(now_ms)

# A make running this script (make check) must not pass its jobserver or its command-line
# variables on to the cross build.
unset MAKEFLAGS MFLAGS MAKELEVEL MAKEOVERRIDES
jobs=$(nproc 2> /dev/null || echo 2)

cd "$builddir"
if [[ ! -f config.status || ! -f Makefile ]]; then
    say "configuring $builddir for aarch64-linux-gnu"
    # Static libinfer: the test programs are plain executables that qemu runs directly.
    "$srcdir/configure" -q --host=aarch64-linux-gnu --enable-static --disable-shared > configure.log 2>&1 || {
        tail -n 30 configure.log
        say "FAIL: configure (log: $builddir/configure.log, config.log)"
        exit 1
    }
fi

# bring the Makefile up to date (configure.ac or Makefile.am may have changed) before reading it
make -s Makefile > build.log 2>&1 || { tail -n 30 build.log; say "FAIL: regenerating the Makefile"; exit 1; }
programs=()
for t in $KERNEL_TESTS; do
    if grep -q "^tests_${t//-/_}_SOURCES" Makefile; then programs+=("tests/$t"); fi
done
((${#programs[@]})) || { say "FAIL: no kernel test program in $builddir/Makefile (cmocka:arm64 missing?)"; exit 1; }

t_build=$(now_ms)
say "building ${programs[*]} infer (make -j$jobs)"
if ! make -j"$jobs" "${programs[@]}" infer > build.log 2>&1; then
    tail -n 40 build.log
    say "FAIL: build (log: $builddir/build.log)"
    exit 1
fi
say "built in $(since "$t_build")"

export INFER_SRCDIR=$srcdir INFER_BUILDDIR=$builddir INFER_SHARED=${INFER_SHARED:-$srcdir/../shared}
export OMP_NUM_THREADS=2
passed=0
failed=0
failures=()

# run NAME COMMAND...: run a check and count it.
run() {
    local name=$1 t0 rc=0
    shift
    t0=$(now_ms)
    "$@" > "run.log" 2>&1 || rc=$?
    if ((rc == 0)); then
        passed=$((passed + 1))
        say "PASS: $name ($(since "$t0"))"
    else
        failed=$((failed + 1))
        failures+=("$name")
        grep -E 'ERROR|FAIL|LINE|error' run.log | head -n 20 || true
        tail -n 5 run.log
        say "FAIL: $name (exit $rc)"
    fi
}

# the default variant on each CPU, and the refusal of one the CPU lacks
expect_selected() { # CPU VARIANT
    local out
    out=$(qemu-aarch64 -cpu "$1" ./infer --version) || return 1
    printf '%s\n' "$out"
    grep -qx "kernels selected: $2" <<< "$out"
}
refuses() { # CPU VARIANT: loading a model must fail in kernels_init, before the file is read
    local out
    out=$(INFER_KERNELS=$2 qemu-aarch64 -cpu "$1" ./infer run -m "$srcdir/configure" -p hi 2>&1) || true
    printf '%s\n' "$out"
    grep -q "INFER_KERNELS=$2: this CPU lacks" <<< "$out"
}
run "cortex-a72 selects neon" expect_selected cortex-a72 neon
run "cortex-a76 selects dotprod" expect_selected cortex-a76 dotprod
run "max selects i8mm" expect_selected max i8mm
run "cortex-a72 refuses INFER_KERNELS=dotprod" refuses cortex-a72 dotprod
run "cortex-a76 refuses INFER_KERNELS=i8mm" refuses cortex-a76 i8mm

for cpu_variants in "cortex-a72:ref neon" "cortex-a76:neon dotprod" "max:i8mm"; do
    cpu=${cpu_variants%%:*}
    for p in "${programs[@]}"; do
        if [[ " $PER_VARIANT_TESTS " == *" ${p#tests/} "* ]]; then
            for v in ${cpu_variants#*:}; do
                run "$cpu INFER_KERNELS=$v $p" env INFER_KERNELS="$v" qemu-aarch64 -cpu "$cpu" "./$p"
            done
        else
            run "$cpu $p" qemu-aarch64 -cpu "$cpu" "./$p"
        fi
    done
done
rm -f run.log

say "aarch64 kernel tests done in $(since "$t_begin")"
((failed == 0)) || say "failed: $(printf '[%s] ' "${failures[@]}")"
echo "cross-check: $passed passed, $failed failed"
((failed == 0))
