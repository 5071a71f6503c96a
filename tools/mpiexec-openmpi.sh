#!/bin/sh
# Open MPI's launcher as the build's tests and scripts call it (meson.build
# picks it for an Open MPI build): allowed to run as root, as CI does, and to
# place more ranks than the machine has cores, as the tests do on 2 cores.
# The UCX messaging layer is left out: on one host it warns where no network
# device is found, and ob1 with shared memory is Open MPI's own path.  The
# byte transports are self, vader (shared memory) and tcp unless OMPI_MCA_btl
# names others: a test whose ranks run under a file-size limit gives
# self,tcp, since vader backs its memory with files the limit refuses.  The
# AVX reduction operators (op/avx) are left out too: Open MPI 4.1's sum of
# 8-bit integers there saturates instead of wrapping (200 + 200 gives 255
# over 64 uint8 elements, 144 with the component off), which t210, t211 and
# t241 catch against the sequential wrapped sum.
exec mpiexec.openmpi --allow-run-as-root --oversubscribe --mca pml ob1 --mca btl "${OMPI_MCA_btl:-self,vader,tcp}" \
  --mca op ^avx "$@"
