#!/bin/sh
# The tests beyond the README's command, which CI runs after tools/test.sh.
# One step each, in this order:
#   slow        the normal build's slow suite: its MPI tests at 5-8 ranks.
#   kernels_v3  the layer kernel tests at x86-64-v3 on an AVX-512 host (on a
#               host without AVX-512 the normal build runs that level).
#   kernels_v4_emulated  the x86-64-v4 kernel tests on a host without
#               AVX-512: the normal build's, in an emulated CPU that has it
#               (an AVX-512 host's normal build runs them natively).
#   fuzz        a bounded libFuzzer run of the readers of untrusted input, in
#               a clang build with AddressSanitizer and UBSan.
#   sanitizers  that clang build's unit and mpi suites at 1-2 ranks under ASan
#               and UBSan, the baseline kernels among them.
#   kernels_clang  the layer kernel tests at this CPU's best level as clang
#               compiles them (a plain -O3 build of those tests alone).
#   aarch64     the unit suite of an aarch64 cross build under qemu-user.
#   openmpi     the unit and mpi suites at 1-2 ranks, and the primitives at 4,
#               in a build against Open MPI.
# The sanitizer and Open MPI steps choose their tests by name (the -npN of
# `meson test --list`, tools/test-select.py) and build only what those tests
# need; the tests at 3 and 4 ranks are the normal build's (tools/test.sh).
# Tests without -npN (scripts that start the tools) run in every step that
# runs their suite.  Installs what each step needs.  Ends with the closing
# count, one line per step and then the totals; exits non-zero if any step
# fails.
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
# AVX-512 host's normal build never runs.  A host with x86-64-v3 and without
# AVX-512 runs them in its normal build (its best level), so the step builds
# nothing there.
kernels_v3() {
  levels=$(/lib64/ld-linux-x86-64.so.2 --help 2>/dev/null || true)
  if ! echo "$levels" | grep -q 'x86-64-v3 (supported'; then
    echo "test-extra: this CPU cannot run x86-64-v3 code; skipped"
  elif ! echo "$levels" | grep -q 'x86-64-v4 (supported'; then
    echo "test-extra: x86-64-v3 is this CPU's best level (the normal build tested it); not built again"
  else
    kernel_tests build-v3 -Dkernel_isa=x86-64-v3
  fi
}

# The kernels at x86-64-v4 (AVX-512) on hosts that cannot execute it, in an
# emulated Skylake-X (tools/emulate-x86-64-v4.sh): the normal build of an
# AVX-512 host runs them natively.  The normal build's own kernel tests run
# there (its run-time dispatch picks x86-64-v4 in the guest, and the script
# checks that it did), so nothing is built again.
kernels_v4_emulated() {
  if [ "$(uname -m)" = x86_64 ] && ! /lib64/ld-linux-x86-64.so.2 --help | grep -q 'x86-64-v4 (supported'; then
    counted build-v4-emulated build/meson-logs/testlog-emulated.json
    BUILD_DIR=build KERNEL_ISA=auto sh tools/emulate-x86-64-v4.sh
  else
    echo "test-extra: this CPU runs x86-64-v4 natively (the normal build tested it); not emulated"
  fi
}

# Bounded fuzzing of the readers of untrusted input (IDX data, checkpoints,
# the text formats, the tools' command lines): the clang build with
# libFuzzer, ASan and UBSan (tools/build-clang-asan.sh), its fuzz targets
# alone, each for FUZZ_SECONDS (20 here; longer by hand with tools/fuzz.sh).
fuzz() {
  counted build-fuzz build-fuzz/meson-logs/testlog.json
  FUZZ_SECONDS=${FUZZ_SECONDS:-20} sh tools/fuzz.sh
}

# AddressSanitizer (LeakSanitizer included) and UndefinedBehaviorSanitizer
# over the unit and mpi suites at 1 and 2 ranks, in the fuzz step's clang build
# (tools/build-clang-asan.sh: -O1, twice the timeouts).  That build pins the
# kernels to the baseline level (SSE2, no target_clones), so its unit suite
# also runs the baseline kernels as clang compiles them; instrumented, clang
# spent over 10 minutes on the x86-64-v4 kernel object alone, so the other
# levels' clang check is the plain build of kernels_clang.  The preloaded
# library keeps MPICH's UCX plugins loaded (tools/keep_modules.c), so
# LeakSanitizer reports only real leaks.
sanitizers() {
  select="--suite unit --suite mpi --ranks 1,2"
  counted sanitizers build-fuzz/meson-logs/testlog-sanitizers.json
  BUILD_DIR=build-fuzz TESTS=$select sh tools/build-clang-asan.sh
  # shellcheck disable=SC2086 # the selection's words
  names=$(python3 tools/test-select.py build-fuzz $select)
  # shellcheck disable=SC2086 # one test name per word
  LD_PRELOAD="$(pwd)/build-fuzz/libadjoin-keep-modules.so" \
  ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:verify_asan_link_order=0" \
  UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
    meson test -C build-fuzz --no-rebuild --logbase testlog-sanitizers --print-errorlogs --num-processes 2 \
    --timeout-multiplier 2 $names
}

# The kernels as clang compiles them, at the best level this CPU runs: their
# register blocks rely on compiler pragmas and vector extensions that each
# compiler reads in its own way.  A build of the kernel tests alone.
kernels_clang() {
  sh tools/install-deps.sh clang-14
  CC=clang-14 kernel_tests build-clang
}

# The code a 64-bit ARM machine builds (generic kernels, no x86 CPU
# detection), cross-compiled with warnings as errors; its unit suite, the
# kernels' tests included, under qemu-user (docs/building.md).  Only what the
# unit suite needs is built.
aarch64() {
  counted build-aarch64 build-aarch64/meson-logs/testlog.json
  TESTS="--suite unit" sh tools/cross-aarch64.sh --suite unit
}

# The unit and mpi suites at 1 and 2 ranks, and the primitives at 4 ranks
# (where a schedule that only Open MPI refused showed), in a second build
# against Debian's Open MPI (tools/test-openmpi.sh; docs/building.md): adjoin
# builds and passes with either MPI.
openmpi() {
  counted build-openmpi build-openmpi/meson-logs/testlog.json
  sh tools/test-openmpi.sh
}

run_steps "${*:-slow kernels_v3 kernels_v4_emulated fuzz sanitizers kernels_clang aarch64 openmpi}"
