#!/bin/sh
# The unit and mpi suites under Open MPI: Debian's Open MPI installed beside
# MPICH, a second build in build-openmpi against it (-Dmpi=ompi-c, the
# kernels at the baseline level to keep the build short), and the tests that
# TESTS selects (tools/test-select.py's arguments; by default the unit and
# mpi suites at 1 and 2 ranks and the primitives at 4, never 'slow'), built
# alone and run through Open MPI's launcher (tools/mpiexec-openmpi.sh, which
# meson.build picks from the library's own mpi.h).  Extra arguments go to
# `meson test`.
#
#   sh tools/test-openmpi.sh
#   TESTS="--suite unit --suite mpi" sh tools/test-openmpi.sh    at 1-4 ranks
#
# Installing Open MPI switches Debian's default mpicc, mpirun and mpi.pc
# alternatives to it; they are set back to MPICH where MPICH is installed,
# so the normal build and a user's plain `mpicc` keep the MPI they had.
set -eu
cd "$(dirname "$0")/.."
sh tools/install-deps.sh libopenmpi-dev openmpi-bin
if [ -x /usr/bin/mpicc.mpich ] && [ "$(id -u)" -eq 0 ]; then
  update-alternatives --quiet --set mpi /usr/bin/mpicc.mpich
  update-alternatives --quiet --set mpirun /usr/bin/mpirun.mpich
  triplet=$(dpkg-architecture -qDEB_HOST_MULTIARCH 2>/dev/null || gcc -dumpmachine)
  update-alternatives --quiet --set "mpi-$triplet" "/usr/include/$triplet/mpich"
fi
select=${TESTS:-"--suite unit --suite mpi --ranks 1,2 --also primitives=4"}
BUILD_DIR=build-openmpi TESTS=$select sh tools/build.sh -Dmpi=ompi-c -Dkernel_isa=baseline
grep -q "Open MPI" build-openmpi/meson-logs/meson-log.txt ||
  { echo "test-openmpi: build-openmpi did not find Open MPI"; exit 1; }
# shellcheck disable=SC2086 # the selection's words
names=$(python3 tools/test-select.py build-openmpi $select)
# shellcheck disable=SC2086 # one test name per word
meson test -C build-openmpi --no-rebuild --print-errorlogs --num-processes 2 $names "$@"
