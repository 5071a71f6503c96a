#!/bin/sh
# The main job: installs what is missing, builds, provisions the MNIST digits
# (when data/mnist is incomplete) and trains the distributed LeNet-5 of the
# DistDL paper (layout dist4: Table 1 / Figure C10) on 4 MPI ranks for 10
# epochs, batch 256, Adam with learning rate 0.001, cross-entropy loss.  Its
# last line is the final test accuracy, test_accuracy=0.XXXX.  Per-epoch
# metrics go to build/lenet5-dist4.csv with a plot in build/lenet5-dist4.svg.
# Extra arguments go to adjoin-train (e.g. --epochs 2, --data DIR with the four
# standard MNIST files, --checkpoint build/lenet5.ckpt --resume).
#
# `sh tools/main.sh --battery [adjoin-dottest flags]` runs the full adjoint-test
# battery on 4 ranks instead, one row per case.
set -eu
cd "$(dirname "$0")/.."
sh tools/install-deps.sh
sh tools/build.sh
if [ "${1:-}" = "--battery" ]; then
  shift
  exec mpiexec.mpich -n 4 build/apps/adjoin-dottest "$@"
fi
sh tools/provision-data.sh mnist
# An OpenBLAS older than the CPU runs its oldest kernels there; adjoin-train
# names the ones to load instead (nothing when OpenBLAS chose well).
if [ -z "${OPENBLAS_CORETYPE:-}" ]; then
  coretype=$(build/apps/adjoin-train --openblas-coretype)
  if [ -n "$coretype" ]; then
    export OPENBLAS_CORETYPE="$coretype"
    echo "main.sh: OPENBLAS_CORETYPE=$coretype"
  fi
fi
exec mpiexec.mpich -n 4 build/apps/adjoin-train --layout dist4 --epochs 10 --batch 256 --lr 0.001 \
  --optimizer adam --metrics build/lenet5-dist4.csv "$@"
