#!/bin/sh
# The README's test command: installs what is missing, builds into build/,
# provisions the data sets, and runs the normal build's tests: meson's default
# setup, every suite but 'slow' (docs/building.md says what is where).  Ends
# with the closing count, one line per step and then the totals.  Arguments go
# to meson test (e.g. --suite layers, or a test's name).  Exits non-zero if any
# step fails.
#
# The other builds (sanitizers, fuzzing, other kernel levels, an emulated
# AVX-512 CPU, clang, aarch64) and the slow suite run from
# tools/test-extra.sh, which CI runs after this script.
#
# A new step: a function that runs its tests and names its meson log with
# `counted LABEL LOG` (tools/test-steps.sh), added to the list run_steps runs.
set -eu
cd "$(dirname "$0")/.."
. tools/test-steps.sh

sh tools/install-deps.sh
sh tools/build.sh
# The real-data tests read the provisioned data: t501 both sets, the
# encoder-decoder's end-to-end tests (t522, t523) Fashion-MNIST; t523 also
# runs the PyTorch twin under Debian's python3-torch.
sh tools/provision-data.sh mnist fashion-mnist
sh tools/install-deps.sh python3-torch

# The normal build's suites: unit, mpi, adjoint, train, package, ...
normal() {
  counted normal build/meson-logs/testlog.json
  meson test -C build --print-errorlogs --num-processes 2 "$@"
}

run_steps "normal" "$@"
