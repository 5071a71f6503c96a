#!/bin/sh
# Fuzzes the readers of untrusted input (IDX data, checkpoints, the text
# formats, the tools' command lines; tests/fuzz) with libFuzzer:
# installs clang and its runtime from Debian when missing, configures a clang
# build with ASan + UBSan and coverage instrumentation in BUILD_DIR (default
# build-fuzz), and runs the 'fuzz' suite, each target for FUZZ_SECONDS
# (default 30; e.g. FUZZ_SECONDS=600 for a longer run by hand).
#
#   sh tools/fuzz.sh            FUZZ_SECONDS=600 sh tools/fuzz.sh
set -eu
cd "$(dirname "$0")/.."
sh tools/install-deps.sh clang-14 libclang-rt-14-dev
dir=${BUILD_DIR:-build-fuzz}
# The library and targets alike carry coverage instrumentation
# (fuzzer-no-link); the targets' executables then link libFuzzer's main.
# The targets fuzz file readers, not kernels, so the kernels are built at the
# baseline alone: clang spent over 13 minutes on the instrumented x86-64-v4
# object of kernel_isa=auto.  Optimised at -O1, as the sanitizer step is: at
# the project's -O3, clang spent over 20 minutes on the instrumented
# baseline kernels alone on a loaded 2-core machine.
# The fuzz suite runs the fuzz targets alone, so only they are built (the
# rest of the tree, instrumented, is the sanitizer step's): the alias
# fuzz-targets of tests/fuzz/meson.build names them.
CC=clang-14 BUILD_DIR=$dir TARGETS=fuzz-targets sh tools/build.sh \
  -Db_sanitize=address,undefined -Db_lundef=false -Dc_args=-fsanitize=fuzzer-no-link -Dkernel_isa=baseline \
  -Doptimization=1
# MPICH unloads its UCX plugins in MPI_Finalize, which turns their live
# allocations into leaks of an "<unknown module>" that no suppression can
# name; the checkpoint target's seed writer finalizes MPI.  As in the
# sanitizer step (tools/test-extra.sh), tools/keep_modules.c keeps them
# loaded, so LeakSanitizer reports only real leaks.
cc -shared -fPIC -O2 -o "$dir/libadjoin-keep-modules.so" tools/keep_modules.c
seconds=${FUZZ_SECONDS:-30}
LD_PRELOAD="$(pwd)/$dir/libadjoin-keep-modules.so" ASAN_OPTIONS="verify_asan_link_order=0" \
FUZZ_SECONDS=$seconds meson test -C "$dir" --no-rebuild --suite fuzz --print-errorlogs --verbose \
  --timeout-multiplier $(( (seconds + 599) / 600 + 1 ))
