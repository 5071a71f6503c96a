/* All-gather and reduce-scatter along one partition dimension (each other's
 * adjoint).
 *
 * All-gather: x is decomposed on P; along dimension `dim` the blocks of the
 * workers that share all other coordinates are concatenated, and each of them
 * receives the full extent of tensor dimension `dim` (other dimensions keep
 * their block).  Its adjoint, reduce-scatter, sums those full-extent tensors
 * over the group and hands each worker its own block.  Uneven blocks allowed.
 *
 * The group is a sub-communicator made at creation; application is one
 * MPI_Iallgatherv or MPI_Ireduce_scatter on it, so the split-phase form
 * (adj_op_begin / adj_op_end) overlaps either with computation.  Inactive
 * workers have zero-volume domain and range.  dim must be a dimension of the
 * partition; a bad dim or dtype is an error with the same message on every
 * rank.  Creation is collective over the partition's base communicator. */
#ifndef ADJOIN_ALL_GATHER_H
#define ADJOIN_ALL_GATHER_H

#include "adjoin/decomposition.h"
#include "adjoin/op.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

int adj_all_gather_create(adj_dtype dtype, const adj_decomposition *x, int dim, adj_op **op);
/* Forward is reduce-scatter onto y's blocks; adjoint is all-gather. */
int adj_reduce_scatter_create(adj_dtype dtype, const adj_decomposition *y, int dim, adj_op **op);

ADJ_END_DECLS

#endif
