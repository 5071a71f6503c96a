/* Broadcast and sum-reduce between partitions (DistDL paper, eqs. 8-9).
 *
 * Broadcast B: P_x -> P_y copies each source worker's block to every
 * destination worker that maps to it.  P_x must be broadcast-compatible with
 * P_y (adj_partition_check_broadcast): shapes right-aligned, P_x padded with 1s
 * on the left, every source extent 1 or equal to the destination's.  The
 * destination worker at coordinates c receives from the source worker at c',
 * where c'_i = c_i if the source extent is P_i and 0 if it is 1.  The tensor's
 * layout on P_x is a decomposition; a destination's local block is the block
 * of its source.  Workers may belong to both partitions; a worker that is its
 * own source copies locally.
 *
 * The adjoint of a broadcast is a sum-reduce: every destination's block is
 * summed into its source.  Sum-reduce R: P_x -> P_y is defined as the adjoint
 * of the broadcast P_y -> P_x, so its own adjoint is that broadcast.
 *
 * Both are adj_ops: use adj_op_forward / adj_op_adjoint, and adj_op_begin /
 * adj_op_end for the split-phase form (the sum-reduce direction is what a
 * trainer overlaps with backpropagation).  Creation is collective over the
 * partitions' base communicator; it builds one sub-communicator per source
 * block.  Blocking applications on ranks that spin use MPI's blocking
 * calls, the others MPI_Ibcast / MPI_Ireduce and their kin
 * (docs/primitive-algorithms.md).
 *
 * Both directions overwrite their output; input and output must be distinct
 * tensors.  A source worker that is not a destination of its own block
 * contributes zeros to the sum.
 *
 * The summing direction (a broadcast's adjoint, a sum-reduce's forward) picks
 * an algorithm per group at creation from the group size and the block's
 * bytes, by the table `bench-primitives --calibrate` measured on this machine
 * (docs/primitive-algorithms.md), else by a fixed rule: MPI_Ireduce below
 * 64 KB, MPI_Iallreduce from 64 KB (MPICH's reduce to one root measured 3-6x
 * slower than its all-reduce at 1-8 MB), reduce-scatter + gather from 1 MB.
 * The fourth algorithm is a pipelined chain of point-to-point messages
 * (segments of 64 KB, or ADJ_CHAIN_SEGMENT_BYTES, along the group,
 * summed from the last member towards the root), which when forced also
 * copies, root -> 1 -> 2 ...; otherwise the copying direction is MPI's
 * broadcast.
 * ADJ_SUM_REDUCE_ALGORITHM=auto|reduce|allreduce|reduce-scatter|chain forces one
 * (except in the tensor-parallel layer of phantom_layer.h, whose broadcast always
 * sums by all-reduce); each of these variables is read once, and the setters
 * below replace it (docs/configuration.md);
 * adj_op_algorithm names the choice.  An all-reduce or reduce-scatter leaf
 * keeps a scratch block (the whole block, or its chunk), a chain member
 * other than the last a block for the running sum.  A reduce-scatter's
 * gather is posted by adj_op_end, so a split-phase application overlaps only
 * its first half; a chain's begin posts every receive and the head's sends,
 * and its end forwards each segment as it arrives.
 *
 * Counters, one message per collective contribution: a broadcast's source
 * sends the block and every other member receives it.  Summing by reduce, a
 * leaf sends the block and the source receives it; by all-reduce every member
 * sends and receives the block; by reduce-scatter every member sends the
 * chunks the others own and receives its own chunk, then a leaf sends its
 * chunk and the source receives the rest.  By the chain, in either
 * direction, one message per segment: every member but the head receives the
 * block and every member but the tail sends it.  A worker that is its own only
 * destination copies locally and counts nothing. */
#ifndef ADJOIN_BROADCAST_H
#define ADJOIN_BROADCAST_H

#include <stddef.h>

#include "adjoin/decomposition.h"
#include "adjoin/op.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

/* The summing algorithms, in the order of their names. */
typedef enum adj_sum_algorithm {
  ADJ_SUM_AUTO = 0,       /* the measured table, else the rule by block size */
  ADJ_SUM_REDUCE,         /* MPI_Ireduce */
  ADJ_SUM_ALLREDUCE,      /* MPI_Iallreduce */
  ADJ_SUM_REDUCE_SCATTER, /* MPI_Ireduce_scatter, then a gather */
  ADJ_SUM_CHAIN,          /* pipelined point-to-point along the group */
} adj_sum_algorithm;

/* The process's default summing algorithm: what adj_sum_algorithm_set_default
 * set, else ADJ_SUM_REDUCE_ALGORITHM (read at the first call), else AUTO.
 * Broadcasts and sum-reduces created from now on use it.  Not collective, but
 * every rank must set the same.  ADJ_ERR_ARG naming a bad variable's value, a
 * value outside the enum or a NULL pointer. */
int adj_sum_algorithm_get_default(adj_sum_algorithm *algorithm);
int adj_sum_algorithm_set_default(adj_sum_algorithm algorithm);

/* Bytes per segment of the chain: what adj_chain_segment_bytes_set_default
 * set (0: the default again), else ADJ_CHAIN_SEGMENT_BYTES (read at the first
 * call), else 65536.  Same rules as above; ADJ_ERR_ARG for a count that is
 * not from 1 to INT_MAX. */
int adj_chain_segment_bytes_get_default(long *bytes);
int adj_chain_segment_bytes_set_default(long bytes);

/* The file of the measured algorithm table: what adj_algorithm_table_set_path
 * set ("" for the default place), else ADJ_ALGORITHM_CACHE (read at the first
 * call), else $XDG_CACHE_HOME/adjoin/primitive-algorithms, else
 * $HOME/.cache/adjoin/primitive-algorithms; "" when none of these names a
 * place.  A path to a missing file means no table.  Same rules as above. */
int adj_algorithm_table_set_path(const char *path);
int adj_algorithm_table_get_path(char *path, size_t size);

/* Broadcast from x (a decomposition on P_x) to partition p_y. */
int adj_broadcast_create(adj_dtype dtype, const adj_decomposition *x, const adj_partition *p_y, adj_op **op);

/* Sum-reduce from partition p_x onto y (a decomposition on P_y): the adjoint of
 * the broadcast from y to p_x.  A worker of P_x holds a block shaped like the
 * block of the P_y worker it reduces into. */
int adj_sum_reduce_create(adj_dtype dtype, const adj_partition *p_x, const adj_decomposition *y, adj_op **op);

ADJ_END_DECLS

#endif
