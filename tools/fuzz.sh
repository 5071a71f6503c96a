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
# object of kernel_isa=auto.
# The fuzz suite runs the fuzz targets alone, so only they are built (the
# rest of the tree, instrumented, is the sanitizer step's): the alias
# fuzz-targets of tests/fuzz/meson.build names them.
CC=clang-14 BUILD_DIR=$dir TARGETS=fuzz-targets sh tools/build.sh \
  -Db_sanitize=address,undefined -Db_lundef=false -Dc_args=-fsanitize=fuzzer-no-link -Dkernel_isa=baseline
seconds=${FUZZ_SECONDS:-30}
FUZZ_SECONDS=$seconds meson test -C "$dir" --no-rebuild --suite fuzz --print-errorlogs --verbose \
  --timeout-multiplier $(( (seconds + 599) / 600 + 1 ))
