/* Broadcast and its adjoint, on 4 workers.
 *
 *   mpiexec -n 4 example-broadcast
 *
 * A vector of 6 numbers is split over P_x, a 1-D partition of 2 workers (ranks
 * 0 and 1 hold 3 numbers each).  The broadcast copies it to P_y, a 2 x 2
 * partition of ranks 0-3.  P_x has fewer dimensions than P_y, so it is padded
 * on the left to shape [1, 2]: the worker at P_y coordinates (i, j) receives
 * the block of P_x worker j.  Rank 0 and 1 are in both partitions.
 *
 * The adjoint runs the other way: every P_y worker's block is summed into the
 * P_x worker it came from (a sum-reduce).  That is what backpropagation does
 * with the gradient of a broadcast parameter. */
#include <stdio.h>

#include "show.h"

int main(int argc, char **argv) {
  int rank = example_begin(&argc, &argv, "example-broadcast");

  /* Partitions: every rank creates both, including the ranks left out of them. */
  adj_partition *p_x, *p_y;
  EXAMPLE_CHECK(adj_partition_create(MPI_COMM_WORLD, 1, (const int[]){2}, 2, NULL, &p_x));
  EXAMPLE_CHECK(adj_partition_create(MPI_COMM_WORLD, 2, (const int[]){2, 2}, 4, NULL, &p_y));

  /* x: a global vector of 6 entries cut evenly over P_x. */
  adj_decomposition *x_layout;
  EXAMPLE_CHECK(adj_decomposition_create(p_x, 1, (const int64_t[]){6}, &x_layout));

  /* The operator plans everything once: who sends to whom, sub-communicators. */
  adj_op *bcast;
  EXAMPLE_CHECK(adj_broadcast_create(ADJ_FLOAT64, x_layout, p_y, &bcast));

  /* Local tensors shaped like this worker's part of the domain and range;
   * workers outside a partition get zero-volume tensors. */
  adj_tensor x, y;
  EXAMPLE_CHECK(adj_op_create_domain_tensor(bcast, &x));
  EXAMPLE_CHECK(adj_op_create_range_tensor(bcast, &y));
  adj_box mine = adj_decomposition_local_block(x_layout);
  for (int64_t i = 0; i < adj_tensor_volume(&x); i++) adj_tensor_set(&x, i, (double)(mine.start[0] + i));

  show_blocks(MPI_COMM_WORLD, "before forward, x on P_x = [2] (ranks 0-1):", &x);
  EXAMPLE_CHECK(adj_op_forward(bcast, &x, &y));
  show_blocks(MPI_COMM_WORLD, "after forward, y = B x on P_y = [2, 2]: (i, j) holds block j", &y);

  /* Adjoint: give every destination a gradient equal to 1 + its rank. */
  for (int64_t i = 0; i < adj_tensor_volume(&y); i++) adj_tensor_set(&y, i, 1.0 + rank);
  show_blocks(MPI_COMM_WORLD, "before adjoint, dy = 1 + rank on P_y:", &y);
  EXAMPLE_CHECK(adj_op_adjoint(bcast, &y, &x));
  show_blocks(MPI_COMM_WORLD, "after adjoint, dx = B* dy: rank 0 sums ranks 0 and 2 (1 + 3), rank 1 sums 1 and 3 (2 + 4)",
              &x);

  adj_tensor_destroy(&x);
  adj_tensor_destroy(&y);
  adj_op_destroy(&bcast);
  adj_decomposition_destroy(&x_layout);
  adj_partition_destroy(&p_x);
  adj_partition_destroy(&p_y);
  EXAMPLE_CHECK(adj_finalize());
  return 0;
}
