/* Generalized all-to-all: repartition, scatter and gather.
 *
 * Repartition moves a tensor from decomposition x (on P_x) to decomposition y
 * (on P_y) of the same global shape: any partition shapes and ranks, disjoint
 * or overlapping worker sets, balanced or explicit cuts, zero-volume blocks.
 * Each global element has one owner on each side, so the operator is a block
 * permutation and its adjoint is the repartition from y back to x.  The plan
 * (box intersections, peers, buffers) is computed at creation; application is
 * nonblocking point-to-point with local copies for data that stays.
 *
 * Scatter (from one root rank holding the whole tensor onto a decomposition) and
 * gather (the reverse) are repartitions from / to a one-worker partition; they
 * are adjoints of each other.
 *
 * Local shapes: the domain on a worker is its x block, the range its y block
 * (zero-volume where it is not in the partition).  Both decompositions must
 * have the same global shape (hence the same tensor rank) and partitions on the
 * same base communicator (MPI_IDENT or MPI_CONGRUENT); a mismatch, an invalid
 * dtype or a root outside the base communicator is an error with the same
 * message on every rank.  Creation is collective over the base communicator. */
#ifndef ADJOIN_REPARTITION_H
#define ADJOIN_REPARTITION_H

#include "adjoin/decomposition.h"
#include "adjoin/op.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

int adj_repartition_create(adj_dtype dtype, const adj_decomposition *x, const adj_decomposition *y, adj_op **op);

/* root: rank of y's base communicator that holds the whole tensor (domain).
 * Other ranks have a zero-volume domain. */
int adj_scatter_create(adj_dtype dtype, int root, const adj_decomposition *y, adj_op **op);
/* Gathers x onto root (range: whole tensor on root, zero volume elsewhere). */
int adj_gather_create(adj_dtype dtype, const adj_decomposition *x, int root, adj_op **op);

ADJ_END_DECLS

#endif
