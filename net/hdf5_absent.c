/* HDF5 in a build without it (meson option -Dhdf5 disabled, or no
 * libhdf5-mpich-dev): an HDF5 file is recognised by its signature and
 * refused with what to do about it. */
#include "data_impl.h"
#include "error_impl.h"

bool adj_hdf5_available(void) { return false; }

int adj_hdf5_open(MPI_Comm comm, adj_data_array *a, const char *name) {
  (void)comm;
  return adj_error_set(ADJ_ERR_IO,
                       "%s file '%s' (dataset '%s') is HDF5, but this adjoin was built without HDF5: install "
                       "libhdf5-mpich-dev (sh tools/install-deps.sh) and reconfigure with meson setup -Dhdf5=enabled",
                       a->role, a->path, name);
}
