/* Partitions: Cartesian grids of workers.
 *
 * A partition arranges an ordered subset of a base communicator's ranks in a
 * grid of shape P_0 x ... x P_{d-1}, row-major: the i-th listed rank has the
 * i-th coordinates in row-major order.  Ranks of the base communicator that are
 * not listed are *inactive* for the partition; they still call every collective
 * adjoin function (with zero-volume tensors), so no code path depends on
 * membership.  Every worker knows every other worker's coordinates and base
 * rank without communication.
 *
 * Creation, sub-partitions and destruction are collective over the base
 * communicator.  Partitions are reference counted: operators built on a
 * partition keep it alive. */
#ifndef ADJOIN_PARTITION_H
#define ADJOIN_PARTITION_H

#include <mpi.h>
#include <stdbool.h>

#include "adjoin/tensor.h"
#include "adjoin/wait.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef struct adj_partition adj_partition;

/* Creates a partition of ndim dimensions (1..ADJ_MAX_RANK) with the given shape
 * over `nranks` ranks of base listed in `ranks` (distinct, 0 <= r < size(base));
 * ranks == NULL means ranks 0..nranks-1.  The product of shape must equal
 * nranks.  Collective on base; every rank passes the same arguments. */
int adj_partition_create(MPI_Comm base, int ndim, const int *shape, int nranks, const int *ranks,
                         adj_partition **partition);

/* The sub-grid of `parent` whose coordinates lie in [start, start + shape) per
 * dimension, keeping the parent's ndim.  Collective on the parent's base. */
int adj_partition_create_sub(const adj_partition *parent, const int *start, const int *shape,
                             adj_partition **sub);

/* Adds a reference; destroy drops one and frees at zero.  Destroy of NULL is a no-op. */
adj_partition *adj_partition_reference(adj_partition *partition);
void adj_partition_destroy(adj_partition **partition);

MPI_Comm adj_partition_base_comm(const adj_partition *partition);
/* Communicator of the active workers, ranked by grid index, for callers that
 * want plain MPI among them; MPI_COMM_NULL on inactive workers.  Made on first
 * request (adjoin's operators do not need it), so the first call is collective
 * over the partition's ACTIVE workers only; later calls are free. */
int adj_partition_get_comm(adj_partition *partition, MPI_Comm *comm);
int adj_partition_ndim(const adj_partition *partition);
const int *adj_partition_shape(const adj_partition *partition);
int adj_partition_size(const adj_partition *partition);
bool adj_partition_active(const adj_partition *partition);
/* This worker's coordinates (all -1 when inactive). */
const int *adj_partition_coords(const adj_partition *partition);
/* Base-communicator rank of the worker at coords / at row-major grid index. */
int adj_partition_rank_at(const adj_partition *partition, const int *coords);
int adj_partition_rank_of_index(const adj_partition *partition, int index);
/* Row-major grid index of coords, and the inverse. */
int adj_partition_index(const adj_partition *partition, const int *coords);
void adj_partition_coords_of_index(const adj_partition *partition, int index, int *coords);
/* Grid index of base rank r in this partition, or -1 if r is inactive. */
int adj_partition_index_of_rank(const adj_partition *partition, int base_rank);
/* Wait policy resolved for this partition's base communicator. */
adj_wait_policy adj_partition_wait_policy(const adj_partition *partition);

/* The broadcast-compatibility rule of the DistDL paper (NumPy-like, but source
 * to destination only): right-align the two shapes, pad the shorter with 1s on
 * the left; they are compatible when, for every dimension, the source extent is
 * 1 or equals the destination extent.  Both must live on the same base
 * communicator.  Returns ADJ_SUCCESS or ADJ_ERR_INCOMPATIBLE with a message
 * naming the dimension and both extents.  Not collective (pure function of
 * arguments every rank shares). */
int adj_partition_check_broadcast(const adj_partition *source, const adj_partition *destination);

/* Formats "[2, 2]" into buf. */
const char *adj_partition_format(const adj_partition *partition, char *buf, size_t size);

ADJ_END_DECLS

#endif
