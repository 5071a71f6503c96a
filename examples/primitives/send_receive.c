/* Send-receive as a copy and as a move, and their adjoints, on 4 workers.
 *
 *   mpiexec -n 4 example-send-receive
 *
 * Rank 0 holds a 2 x 3 tensor x.
 *   copy 0 -> 2: afterwards rank 0 still holds x and rank 2 holds a copy.  The
 *                adjoint sends rank 2's part back and adds it to rank 0's
 *                own: dx = dy_0 + dy_2, which is how gradients of a value
 *                used in two places combine.
 *   move 0 -> 3: afterwards only rank 3 holds x; the adjoint moves it back.
 * The other ranks take part in every call with empty tensors. */
#include <stdio.h>

#include "show.h"

/* One transfer, forward then adjoint; dy is 1 + rank everywhere. */
static void demonstrate(adj_transfer transfer, int dst, const char *title) {
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  adj_op *op;
  EXAMPLE_CHECK(adj_send_receive_create(MPI_COMM_WORLD, ADJ_FLOAT64, 0, dst, 2, (const int64_t[]){2, 3}, transfer,
                                        &op));
  adj_tensor x, y;
  EXAMPLE_CHECK(adj_op_create_domain_tensor(op, &x));
  EXAMPLE_CHECK(adj_op_create_range_tensor(op, &y));
  for (int64_t i = 0; i < adj_tensor_volume(&x); i++) adj_tensor_set(&x, i, (double)(i + 1));

  if (rank == 0) printf("=== %s\n", title);
  show_blocks(MPI_COMM_WORLD, "before forward, x on rank 0:", &x);
  EXAMPLE_CHECK(adj_op_forward(op, &x, &y));
  show_blocks(MPI_COMM_WORLD, "after forward:", &y);
  for (int64_t i = 0; i < adj_tensor_volume(&y); i++) adj_tensor_set(&y, i, 1.0 + rank);
  show_blocks(MPI_COMM_WORLD, "before adjoint, dy = 1 + rank where the range lives:", &y);
  EXAMPLE_CHECK(adj_op_adjoint(op, &y, &x));
  show_blocks(MPI_COMM_WORLD, "after adjoint, dx on rank 0:", &x);

  adj_tensor_destroy(&x);
  adj_tensor_destroy(&y);
  adj_op_destroy(&op);
}

int main(int argc, char **argv) {
  example_begin(&argc, &argv, "example-send-receive");
  demonstrate(ADJ_TRANSFER_COPY, 2, "copy 0 -> 2: the adjoint adds rank 2's part to rank 0's (1 + 3 = 4)");
  demonstrate(ADJ_TRANSFER_MOVE, 3, "move 0 -> 3: the adjoint moves rank 3's part back (4)");
  EXAMPLE_CHECK(adj_finalize());
  return 0;
}
