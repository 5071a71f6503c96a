#!/bin/sh
# The main job: installs what is missing, builds, and runs the full adjoint-test
# battery on 4 MPI ranks, printing one row per case.
set -eu
cd "$(dirname "$0")/.."
sh tools/install-deps.sh
sh tools/build.sh
exec mpiexec.mpich -n "${ADJ_RANKS:-4}" build/adjoint_tests/adjoin-dottest "$@"
