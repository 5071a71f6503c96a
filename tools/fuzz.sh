#!/bin/sh
# Fuzzes the readers of untrusted input (IDX data, checkpoints, the text
# formats, the tools' command lines; tests/fuzz) with libFuzzer: the clang
# build with ASan + UBSan and coverage instrumentation in BUILD_DIR (default
# build-fuzz; tools/build-clang-asan.sh, which installs clang when missing),
# and its 'fuzz' suite, each target for FUZZ_SECONDS (default 30; e.g.
# FUZZ_SECONDS=600 for a longer run by hand).
#
#   sh tools/fuzz.sh            FUZZ_SECONDS=600 sh tools/fuzz.sh
set -eu
cd "$(dirname "$0")/.."
dir=${BUILD_DIR:-build-fuzz}
# The fuzz suite runs the fuzz targets alone, so only they are built here
# (the sanitizer step of tools/test-extra.sh builds the rest of the same
# build): the alias fuzz-targets of tests/fuzz/meson.build names them.
BUILD_DIR=$dir TARGETS=fuzz-targets sh tools/build-clang-asan.sh
seconds=${FUZZ_SECONDS:-30}
# The preloaded library keeps MPICH's UCX plugins loaded (tools/keep_modules.c):
# the checkpoint target's seed writer finalizes MPI.
LD_PRELOAD="$(pwd)/$dir/libadjoin-keep-modules.so" ASAN_OPTIONS="verify_asan_link_order=0" \
FUZZ_SECONDS=$seconds meson test -C "$dir" --no-rebuild --suite fuzz --print-errorlogs --verbose \
  --timeout-multiplier $(( (seconds + 599) / 600 + 1 ))
