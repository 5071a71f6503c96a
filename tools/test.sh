#!/bin/sh
# The whole test suite: installs what is missing, builds, runs `meson test
# --setup full` (every suite, 'slow' included) on the normal build, then the
# unit and mpi suites again under AddressSanitizer and UndefinedBehaviorSanitizer.
# Exits non-zero if anything fails.
set -eu
cd "$(dirname "$0")/.."
sh tools/install-deps.sh
sh tools/build.sh
# The real-data test (t501) reads the provisioned MNIST digits.
sh tools/provision-data.sh mnist
meson test -C build --setup full --print-errorlogs --num-processes 2 "$@"

# Sanitizers.  MPICH unloads its UCX plugins at exit, which turns their live
# allocations into unattributable "leaks"; tools/keep_modules.c keeps them
# loaded so LeakSanitizer reports only real leaks (see that file).  This build
# compiles the kernels for the baseline CPU only (ADJ_NO_KERNEL_CLONES,
# layers/kernels_impl.h), so the suites below also run the code a CPU without
# AVX-512 gets; the build above runs the AVX-512 clones.
BUILD_DIR=build-sanitize sh tools/build.sh -Db_sanitize=address,undefined -Db_lundef=false -Dbuildtype=debug \
  -Dc_args=-DADJ_NO_KERNEL_CLONES
cc -shared -fPIC -O2 -o build-sanitize/libadjoin-keep-modules.so tools/keep_modules.c
LD_PRELOAD="$(pwd)/build-sanitize/libadjoin-keep-modules.so" \
ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:verify_asan_link_order=0" \
UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
  meson test -C build-sanitize --print-errorlogs --num-processes 2 --suite unit --suite mpi

# One closing line a person (and CI) can read: totals over both runs.
python3 - build/meson-logs/testlog.json build-sanitize/meson-logs/testlog.json <<'PY'
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
