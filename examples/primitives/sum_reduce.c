/* Sum-reduce and its adjoint, on 4 workers.
 *
 *   mpiexec -n 4 example-sum-reduce
 *
 * Four workers in a 2 x 2 partition P_x each hold a partial result of shape
 * [2, 3] (say, a partial gradient).  The sum-reduce adds the blocks of each
 * column of P_x and leaves the sums on P_y, a 1 x 2 partition of ranks 2 and
 * 3: P_y worker (0, j) receives the sum over i of P_x worker (i, j).
 *
 * The sum-reduce is defined as the adjoint of the broadcast from P_y to P_x,
 * so it is created from the layout of its result y (a decomposition on P_y)
 * and its adjoint is that broadcast: each P_x worker gets a copy of its
 * column's block back.  The split-phase form (adj_op_begin / adj_op_end) lets
 * a trainer overlap the reduction with other work. */
#include <stdio.h>

#include "show.h"

int main(int argc, char **argv) {
  int rank = example_begin(&argc, &argv, "example-sum-reduce");

  adj_partition *p_x, *p_y;
  EXAMPLE_CHECK(adj_partition_create(MPI_COMM_WORLD, 2, (const int[]){2, 2}, 4, NULL, &p_x));
  EXAMPLE_CHECK(adj_partition_create(MPI_COMM_WORLD, 2, (const int[]){1, 2}, 2, (const int[]){2, 3}, &p_y));

  /* y: a global [2, 6] tensor; P_y cuts its columns, so each P_y worker holds
   * [2, 3], and so does every P_x worker that reduces into it. */
  adj_decomposition *y_layout;
  EXAMPLE_CHECK(adj_decomposition_create(p_y, 2, (const int64_t[]){2, 6}, &y_layout));
  adj_op *reduce;
  EXAMPLE_CHECK(adj_sum_reduce_create(ADJ_FLOAT64, p_x, y_layout, &reduce));

  adj_tensor x, y;
  EXAMPLE_CHECK(adj_op_create_domain_tensor(reduce, &x));
  EXAMPLE_CHECK(adj_op_create_range_tensor(reduce, &y));
  for (int64_t i = 0; i < adj_tensor_volume(&x); i++) adj_tensor_set(&x, i, 10.0 * rank + (double)i);
  show_blocks(MPI_COMM_WORLD, "before forward, x on P_x = [2, 2] (ranks 0-3):", &x);

  /* Split phase: post the reduction, do something else, then complete it.
   * x and y must not be touched in between. */
  EXAMPLE_CHECK(adj_op_begin(reduce, ADJ_FORWARD, &x, &y));
  double other_work = 0;
  for (int i = 0; i < 1000; i++) other_work += i;
  EXAMPLE_CHECK(adj_op_end(reduce));
  show_blocks(MPI_COMM_WORLD, "after forward, y = R x on P_y = [1, 2] (ranks 2-3): rank 2 = x0 + x2, rank 3 = x1 + x3",
              &y);

  /* Adjoint: a broadcast back to the workers that contributed. */
  EXAMPLE_CHECK(adj_op_adjoint(reduce, &y, &x));
  show_blocks(MPI_COMM_WORLD, "after adjoint, x = R* y: each P_x column gets its sum back", &x);

  /* Each operator counts the payload this worker moved, for cost models. */
  adj_op_counters k;
  adj_op_get_counters(reduce, &k);
  double moved[4] = {(double)k.bytes_sent, (double)k.messages_sent, (double)k.bytes_received,
                     (double)k.messages_received};
  adj_tensor counters;
  EXAMPLE_CHECK(adj_tensor_view(&counters, ADJ_FLOAT64, 1, (const int64_t[]){4}, moved));
  show_blocks(MPI_COMM_WORLD, "counters: bytes sent, messages sent, bytes received, messages received", &counters);
  (void)other_work;

  adj_tensor_destroy(&x);
  adj_tensor_destroy(&y);
  adj_op_destroy(&reduce);
  adj_decomposition_destroy(&y_layout);
  adj_partition_destroy(&p_x);
  adj_partition_destroy(&p_y);
  EXAMPLE_CHECK(adj_finalize());
  return 0;
}
