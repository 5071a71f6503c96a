/* Private to the library, for the layers above primitives/: a broadcast whose
 * adjoint always sums by all-reduce, whatever the block size and
 * ADJ_SUM_REDUCE_ALGORITHM say.  For a layer that must perform an all-reduce
 * (the tensor-parallel layer of phantom_layer.h reproduces paper 003's Table II):
 * every member sends and receives the whole block, and the leaves drop the
 * sum, so the adjoint is still the sum-reduce onto the source. */
#ifndef ADJOIN_PRIMITIVES_BROADCAST_IMPL_H
#define ADJOIN_PRIMITIVES_BROADCAST_IMPL_H

#include "adjoin/decomposition.h"
#include "adjoin/op.h"

int adj_broadcast_create_summing_by_all_reduce(adj_dtype dtype, const adj_decomposition *x, const adj_partition *p_y,
                                               adj_op **op);

#endif
