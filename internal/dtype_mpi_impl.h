/* The MPI datatype of each dtype (core/dtype.c), for the tiers that move data
 * through MPI; the kernels below them include dtype_impl.h alone. */
#ifndef ADJOIN_CORE_DTYPE_MPI_IMPL_H
#define ADJOIN_CORE_DTYPE_MPI_IMPL_H

#include <mpi.h>

#include "adjoin/dtype.h"

/* MPI_FLOAT, MPI_DOUBLE, MPI_INT32_T, MPI_INT64_T, MPI_UINT8_T;
 * MPI_DATATYPE_NULL for an invalid dtype. */
MPI_Datatype adj_dtype_mpi(adj_dtype dtype);

#endif
