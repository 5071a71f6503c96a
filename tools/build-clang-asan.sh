#!/bin/sh
# The clang build with AddressSanitizer, UndefinedBehaviorSanitizer and
# libFuzzer's coverage instrumentation in BUILD_DIR (default build-fuzz): one
# build serves the fuzzing runs (tools/fuzz.sh) and the sanitizer step of
# tools/test-extra.sh, which runs its unit and mpi suites.  Installs clang-14 and its runtime when
# missing.  TARGETS or TESTS (tools/build.sh) say what to build; the
# configuration is the same for every caller, so a second caller adds targets
# to the first one's build instead of reconfiguring it.
#
# The library and targets alike carry coverage instrumentation
# (fuzzer-no-link); the fuzz targets' executables then link libFuzzer's main,
# and the other programs run without it (the ASan runtime has the coverage
# callbacks).  Optimised at -O1 (ASan's advice: unoptimised, instrumented
# tests ran up to ten times longer than the normal build's; at the project's
# -O3, clang spent over 20 minutes on the instrumented baseline kernels alone
# on a loaded 2-core machine).  The kernels are built at the baseline alone:
# the instrumented x86-64-v4 kernel object took clang over 10 minutes even at
# -O1, and the fuzz targets read files, not kernels.
#
# MPICH unloads its UCX plugins in MPI_Finalize, which turns their live
# allocations into leaks of an "<unknown module>" that no suppression can
# name; tools/keep_modules.c, built here as BUILD_DIR/libadjoin-keep-modules.so,
# keeps them loaded when preloaded, so LeakSanitizer reports only real leaks.
set -eu
cd "$(dirname "$0")/.."
sh tools/install-deps.sh clang-14 libclang-rt-14-dev
dir=${BUILD_DIR:-build-fuzz}
CC=clang-14 BUILD_DIR=$dir sh tools/build.sh \
  -Db_sanitize=address,undefined -Db_lundef=false -Dc_args=-fsanitize=fuzzer-no-link -Doptimization=1 \
  -Dkernel_isa=baseline
cc -shared -fPIC -O2 -o "$dir/libadjoin-keep-modules.so" tools/keep_modules.c
