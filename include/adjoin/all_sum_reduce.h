/* All-sum-reduce over chosen dimensions of a partition (DistDL paper, section 3:
 * A = B R, self-adjoint).
 *
 * Workers whose coordinates agree in every dimension not listed in `dims` form
 * a group; each group's blocks (equal local shapes within a group) are summed
 * and every member receives the sum.  Forward and adjoint are the same
 * operation.  With dims = all dimensions this is a gradient all-reduce for data
 * parallelism; split-phase begin/end lets it overlap backpropagation. */
#ifndef ADJOIN_ALL_SUM_REDUCE_H
#define ADJOIN_ALL_SUM_REDUCE_H

#include "adjoin/op.h"
#include "adjoin/partition.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

/* local_shape: this worker's block shape (ignored, zero volume, when inactive;
 * may be NULL there).  rank is 1..ADJ_MAX_RANK (hold a scalar as shape [1]).
 * Members of a group must pass equal shapes; a mismatch is an error on every
 * rank, found at create.  dims: ndims distinct partition dimensions; ndims = 0
 * makes every worker its own group (the identity).  Input and output of an
 * application may be the same tensor.  Collective on the base. */
int adj_all_sum_reduce_create(adj_dtype dtype, const adj_partition *p, int rank, const int64_t *local_shape,
                              int ndims, const int *dims, adj_op **op);

ADJ_END_DECLS

#endif
