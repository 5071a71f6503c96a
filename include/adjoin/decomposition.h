/* Decompositions: which block of a global tensor each worker of a partition holds.
 *
 * The tensor's rank equals the partition's ndim: dimension i of the tensor is cut
 * over dimension i of the grid.  A dimension is either *balanced* (extent n/P,
 * the first n mod P workers get one more, as the DistDL paper prescribes) or cut
 * at explicit offsets 0 = c_0 <= c_1 <= ... <= c_P = n, which may leave some
 * workers empty.  Any worker computes any other worker's block without
 * communication.  Inactive workers hold zero-volume blocks.
 *
 * Creation is not collective (it is a pure function of its arguments) but every
 * rank must create the same decomposition. */
#ifndef ADJOIN_DECOMPOSITION_H
#define ADJOIN_DECOMPOSITION_H

#include <stdint.h>

#include "adjoin/partition.h"
#include "adjoin/tensor.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef struct adj_decomposition adj_decomposition;

/* Balanced in every dimension.  global_shape[i] >= 0, rank == partition ndim. */
int adj_decomposition_create(const adj_partition *partition, int rank, const int64_t *global_shape,
                             adj_decomposition **decomposition);

/* cuts[i] is NULL (balanced) or an array of P_i + 1 nondecreasing offsets from 0
 * to global_shape[i]. */
int adj_decomposition_create_explicit(const adj_partition *partition, int rank,
                                      const int64_t *global_shape, const int64_t *const *cuts,
                                      adj_decomposition **decomposition);

/* Balanced over a new partition of shape parts[0..rank) on the first
 * parts[0] x ... x parts[rank-1] ranks of base in grid order (the
 * decomposition keeps the partition).  Collective over base, as
 * adj_partition_create. */
int adj_decomposition_create_on_first_ranks(MPI_Comm base, int rank, const int *parts, const int64_t *global_shape,
                                            adj_decomposition **decomposition);

adj_decomposition *adj_decomposition_reference(adj_decomposition *decomposition);
void adj_decomposition_destroy(adj_decomposition **decomposition);

const adj_partition *adj_decomposition_partition(const adj_decomposition *decomposition);
int adj_decomposition_rank(const adj_decomposition *decomposition);
const int64_t *adj_decomposition_global_shape(const adj_decomposition *decomposition);
/* Block (global start and extent) of the worker at coords. */
adj_box adj_decomposition_block(const adj_decomposition *decomposition, const int *coords);
/* This worker's block; zero-volume (start 0, extent 0) when inactive. */
adj_box adj_decomposition_local_block(const adj_decomposition *decomposition);
/* Offsets c_0..c_P of dimension dim (P + 1 entries). */
const int64_t *adj_decomposition_cuts(const adj_decomposition *decomposition, int dim);
/* Extent n/P balanced rule: start and extent of part p of n split in P. */
void adj_balanced_block(int64_t n, int parts, int part, int64_t *start, int64_t *extent);

/* Zero-filled local tensor of this worker's block shape.  Not collective.
 * ADJ_ERR_ARG if `decomposition` or `local` is NULL. */
int adj_decomposition_create_local(const adj_decomposition *decomposition, adj_dtype dtype,
                                   adj_tensor *local);

ADJ_END_DECLS

#endif
