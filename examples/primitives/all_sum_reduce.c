/* All-sum-reduce over one partition dimension, on 4 workers.
 *
 *   mpiexec -n 4 example-all-sum-reduce
 *
 * Four workers form a 2 x 2 partition.  Reducing over dimension 0 groups the
 * workers that share a column (ranks 0 and 2, ranks 1 and 3): each group adds
 * its blocks and every member receives the sum.  With every dimension listed
 * this is the gradient all-reduce of data parallelism.
 *
 * The operator is self-adjoint: its adjoint is the same sum.  Blocks in a group
 * must have equal shapes; different groups may differ (here column 1 holds a
 * longer block than column 0). */
#include <stdio.h>

#include "show.h"

int main(int argc, char **argv) {
  int rank = example_begin(&argc, &argv, "example-all-sum-reduce");

  adj_partition *p;
  EXAMPLE_CHECK(adj_partition_create(MPI_COMM_WORLD, 2, (const int[]){2, 2}, 4, NULL, &p));

  /* This worker's block: length 2 in column 0, 3 in column 1.  Workers outside
   * the partition pass nothing (their block has zero volume). */
  const int *coords = adj_partition_coords(p);
  int64_t shape[1] = {adj_partition_active(p) ? 2 + coords[1] : 0};
  adj_op *sum;
  EXAMPLE_CHECK(adj_all_sum_reduce_create(ADJ_FLOAT64, p, 1, shape, 1, (const int[]){0}, &sum));

  adj_tensor x, y;
  EXAMPLE_CHECK(adj_op_create_domain_tensor(sum, &x));
  EXAMPLE_CHECK(adj_op_create_range_tensor(sum, &y));
  for (int64_t i = 0; i < adj_tensor_volume(&x); i++) adj_tensor_set(&x, i, 10.0 * rank + (double)i);
  show_blocks(MPI_COMM_WORLD, "before forward, x on P = [2, 2]:", &x);

  EXAMPLE_CHECK(adj_op_forward(sum, &x, &y));
  show_blocks(MPI_COMM_WORLD, "after forward, y = A x: ranks 0 and 2 hold x0 + x2, ranks 1 and 3 hold x1 + x3", &y);

  /* The adjoint is the same operation; input and output may be one tensor. */
  EXAMPLE_CHECK(adj_op_adjoint(sum, &y, &y));
  show_blocks(MPI_COMM_WORLD, "after adjoint in place, A* y = A A x: twice the column sums", &y);

  adj_tensor_destroy(&x);
  adj_tensor_destroy(&y);
  adj_op_destroy(&sum);
  adj_partition_destroy(&p);
  EXAMPLE_CHECK(adj_finalize());
  return 0;
}
