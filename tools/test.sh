#!/bin/sh
# The whole test suite: installs what is missing, builds, runs `meson test
# --setup full` (every suite, 'slow' included) on the normal build, the layer
# kernel tests again with the kernels pinned to x86-64-v3 (and at x86-64-v4 in an
# emulated CPU where this one lacks AVX-512), then the unit and mpi
# suites under AddressSanitizer and UndefinedBehaviorSanitizer with the kernels
# at the baseline level, a bounded libFuzzer run of the file readers, the
# layer kernel tests once more in a clang build, the unit suite of an
# aarch64 build under qemu-user, and the unit and mpi suites built against
# Open MPI.
# Exits non-zero if anything fails.
set -eu
cd "$(dirname "$0")/.."
sh tools/install-deps.sh
sh tools/build.sh
# The real-data tests read the provisioned data: t501 both sets, the
# encoder-decoder's end-to-end tests (t522, t523) Fashion-MNIST; t523 also
# runs the PyTorch twin under Debian's python3-torch.
sh tools/provision-data.sh mnist fashion-mnist
sh tools/install-deps.sh python3-torch
meson test -C build --setup full --print-errorlogs --num-processes 2 "$@"

# The layer kernel tests (3xx unit) alone, built alone in DIR, configured
# with the meson options that follow (and CC from the environment).
kernel_tests() {
  dir=$1
  shift
  tests="t300-conv t301-pool t302-affine t303-activations-losses t306-bias-sum"
  BUILD_DIR=$dir TARGETS=$(for t in $tests; do printf 'tests/%s ' "$t"; done) sh tools/build.sh "$@"
  meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes 2 \
    $(for t in $tests; do printf '%s-np1 ' "$t"; done)
}

# The kernels at the x86-64-v3 level (AVX2 + FMA, 16 registers), which an
# AVX-512 host's normal build never runs, on hosts that can execute it.
v3_logs=
if /lib64/ld-linux-x86-64.so.2 --help 2>/dev/null | grep -q 'x86-64-v3 (supported'; then
  kernel_tests build-v3 -Dkernel_isa=x86-64-v3
  v3_logs=build-v3/meson-logs/testlog.json
fi

# The kernels at x86-64-v4 (AVX-512) on hosts that cannot execute it, in an
# emulated Skylake-X (tools/emulate-x86-64-v4.sh): the normal build of an
# AVX-512 host runs them natively.
v4_logs=
if [ "$(uname -m)" = x86_64 ] && ! /lib64/ld-linux-x86-64.so.2 --help | grep -q 'x86-64-v4 (supported'; then
  sh tools/emulate-x86-64-v4.sh
  v4_logs=build-v4/meson-logs/testlog-emulated.json
fi

# Sanitizers.  MPICH unloads its UCX plugins at exit, which turns their live
# allocations into unattributable "leaks"; tools/keep_modules.c keeps them
# loaded so LeakSanitizer reports only real leaks (see that file).  This build
# pins the kernels to the baseline level (kernel_isa=baseline: SSE2, no
# target_clones), so the suites below also run the code a CPU without AVX2
# gets; the first build runs the best level of this CPU.  Unoptimised and
# instrumented, tests run up to ten times longer here (t300: 115-129 s against
# 11), hence twice the timeouts.
BUILD_DIR=build-sanitize sh tools/build.sh -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug \
  -Dkernel_isa=baseline
cc -shared -fPIC -O2 -o build-sanitize/libadjoin-keep-modules.so tools/keep_modules.c
LD_PRELOAD="$(pwd)/build-sanitize/libadjoin-keep-modules.so" \
ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:verify_asan_link_order=0" \
UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
  meson test -C build-sanitize --print-errorlogs --num-processes 2 --timeout-multiplier 2 --suite unit --suite mpi

# Bounded fuzzing of the readers of untrusted files (IDX data, checkpoints):
# a clang build with libFuzzer, ASan and UBSan, each target for FUZZ_SECONDS
# (30 here; longer by hand with tools/fuzz.sh).
FUZZ_SECONDS=${FUZZ_SECONDS:-30} sh tools/fuzz.sh

# The kernels as clang compiles them (tools/fuzz.sh installed clang-14), at
# the best level this CPU runs: their register blocks rely on compiler
# pragmas and vector extensions that each compiler reads in its own way.
CC=clang-14 kernel_tests build-clang

# The code a 64-bit ARM machine builds (generic kernels, no x86 CPU
# detection), cross-compiled with warnings as errors; its unit suite, the
# kernels' tests included, under qemu-user (docs/building.md).
sh tools/cross-aarch64.sh --suite unit

# The unit and mpi suites again in a second build against Debian's Open MPI
# (tools/test-openmpi.sh; docs/building.md): adjoin builds and passes with
# either MPI.
sh tools/test-openmpi.sh

# One closing line a person (and CI) can read: totals over every run.  A run
# under a test setup writes testlog-<setup>.json, so the full run's log is
# testlog-full.json.
# shellcheck disable=SC2086
python3 - build/meson-logs/testlog-full.json $v3_logs $v4_logs build-sanitize/meson-logs/testlog.json \
  build-fuzz/meson-logs/testlog.json build-clang/meson-logs/testlog.json build-aarch64/meson-logs/testlog.json \
  build-openmpi/meson-logs/testlog.json <<'PY'
import json, sys
passed = failed = skipped = 0
for path in sys.argv[1:]:
    for line in open(path):
        r = json.loads(line)["result"]
        if r == "OK": passed += 1
        elif r == "SKIP": skipped += 1
        else: failed += 1
print(f"{passed} passed, {failed} failed, {skipped} skipped")
PY
