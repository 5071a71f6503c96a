#!/bin/sh
# The tests beyond the README's command, which CI runs after tools/test.sh:
# the normal build's slow suite, the layer kernel tests at the other
# instruction-set levels (x86-64-v3; x86-64-v4 in an emulated CPU where this
# one lacks AVX-512) and as clang compiles them, the unit and mpi suites at
# 1-4 ranks under AddressSanitizer and UndefinedBehaviorSanitizer, a bounded
# libFuzzer run of the readers of untrusted input, the unit suite of an
# aarch64 build under qemu-user, and the unit and mpi suites at 1-4 ranks
# built against Open MPI.  The 5-8 rank tests run in the normal build only.
# Installs what each step needs.  Ends with the closing count, one line per
# step and then the totals; exits non-zero if any step fails.
#
#   sh tools/test-extra.sh                   every step
#   sh tools/test-extra.sh sanitizers fuzz   the steps named
#
# A new step: a function below that runs its tests and names its meson log
# with `counted LABEL LOG` (tools/test-steps.sh), added to the default list
# at the end.
set -eu
cd "$(dirname "$0")/.."
. tools/test-steps.sh

# The layer kernel tests (3xx unit) alone, built alone in DIR, configured
# with the meson options that follow (and CC from the environment).
kernel_tests() {
  dir=$1
  shift
  tests="t300-conv t301-pool t302-affine t303-activations-losses t306-bias-sum"
  counted "$dir" "$dir/meson-logs/testlog.json"
  BUILD_DIR=$dir TARGETS=$(for t in $tests; do printf 'tests/%s ' "$t"; done) sh tools/build.sh "$@"
  # shellcheck disable=SC2046 # one test name per word
  meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes 2 \
    $(for t in $tests; do printf '%s-np1 ' "$t"; done)
}

# The normal build's 'slow' suite, which the README's command leaves out:
# every MPI test above 4 ranks (tests/meson.build) and the battery's cases of
# 5 to 8 ranks.  A run under a test setup writes testlog-<setup>.json.
slow() {
  sh tools/install-deps.sh
  sh tools/build.sh
  counted slow build/meson-logs/testlog-full.json
  meson test -C build --setup full --suite slow --print-errorlogs --num-processes 2
}

# The kernels at the x86-64-v3 level (AVX2 + FMA, 16 registers), which an
# AVX-512 host's normal build never runs, on hosts that can execute it.
kernels_v3() {
  if /lib64/ld-linux-x86-64.so.2 --help 2>/dev/null | grep -q 'x86-64-v3 (supported'; then
    kernel_tests build-v3 -Dkernel_isa=x86-64-v3
  else
    echo "test-extra: this CPU cannot run x86-64-v3 code; skipped"
  fi
}

# The kernels at x86-64-v4 (AVX-512) on hosts that cannot execute it, in an
# emulated Skylake-X (tools/emulate-x86-64-v4.sh): the normal build of an
# AVX-512 host runs them natively.
kernels_v4_emulated() {
  if [ "$(uname -m)" = x86_64 ] && ! /lib64/ld-linux-x86-64.so.2 --help | grep -q 'x86-64-v4 (supported'; then
    counted build-v4-emulated build-v4/meson-logs/testlog-emulated.json
    sh tools/emulate-x86-64-v4.sh
  else
    echo "test-extra: this CPU runs x86-64-v4 natively (the normal build tested it); not emulated"
  fi
}

# Sanitizers.  MPICH unloads its UCX plugins at exit, which turns their live
# allocations into unattributable "leaks"; tools/keep_modules.c keeps them
# loaded so LeakSanitizer reports only real leaks (see that file).  This build
# pins the kernels to the baseline level (kernel_isa=baseline: SSE2, no
# target_clones), so the suites below also run the code a CPU without AVX2
# gets; the normal build runs the best level of this CPU.  The unit and mpi
# suites at 1-4 ranks (--no-suite slow: a --suite given to meson test
# overrides the default setup's exclusion of 'slow'; the 5-8 rank runs, half
# the time, are the normal build's).  Optimised at -O1 (ASan's advice:
# unoptimised, instrumented tests ran up to ten times longer than the normal
# build's), with twice the timeouts.
sanitizers() {
  counted build-sanitize build-sanitize/meson-logs/testlog.json
  BUILD_DIR=build-sanitize sh tools/build.sh -Db_sanitize=address,undefined -Db_lundef=false \
    -Doptimization=1 -Dkernel_isa=baseline
  cc -shared -fPIC -O2 -o build-sanitize/libadjoin-keep-modules.so tools/keep_modules.c
  LD_PRELOAD="$(pwd)/build-sanitize/libadjoin-keep-modules.so" \
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:verify_asan_link_order=0" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    meson test -C build-sanitize --no-rebuild --print-errorlogs --num-processes 2 --timeout-multiplier 2 \
    --suite unit --suite mpi --no-suite slow
}

# Bounded fuzzing of the readers of untrusted input (IDX data, checkpoints,
# the text formats, the tools' command lines):
# a clang build with libFuzzer, ASan and UBSan, each target for FUZZ_SECONDS
# (30 here; longer by hand with tools/fuzz.sh).
fuzz() {
  counted build-fuzz build-fuzz/meson-logs/testlog.json
  FUZZ_SECONDS=${FUZZ_SECONDS:-30} sh tools/fuzz.sh
}

# The kernels as clang compiles them, at the best level this CPU runs: their
# register blocks rely on compiler pragmas and vector extensions that each
# compiler reads in its own way.
kernels_clang() {
  sh tools/install-deps.sh clang-14
  CC=clang-14 kernel_tests build-clang
}

# The code a 64-bit ARM machine builds (generic kernels, no x86 CPU
# detection), cross-compiled with warnings as errors; its unit suite, the
# kernels' tests included, under qemu-user (docs/building.md).
aarch64() {
  counted build-aarch64 build-aarch64/meson-logs/testlog.json
  sh tools/cross-aarch64.sh --suite unit
}

# The unit and mpi suites again in a second build against Debian's Open MPI
# (tools/test-openmpi.sh; docs/building.md): adjoin builds and passes with
# either MPI.
openmpi() {
  counted build-openmpi build-openmpi/meson-logs/testlog.json
  sh tools/test-openmpi.sh
}

run_steps "${*:-slow kernels_v3 kernels_v4_emulated sanitizers fuzz kernels_clang aarch64 openmpi}"
