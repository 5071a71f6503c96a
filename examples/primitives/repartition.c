/* Repartition (generalized all-to-all) and its adjoint, on 4 workers.
 *
 *   mpiexec -n 4 example-repartition
 *
 * A 4 x 6 matrix whose entries count 0..23 in row-major order is held in row
 * blocks by P_x = [2, 1] (ranks 0 and 1: two rows each).  The repartition moves
 * it to column blocks on P_y = [1, 3] (ranks 1, 2, 3: two columns each).  Rank
 * 1 is in both partitions: the part of its row block that is also its column
 * block is copied in memory, the rest travels as one message per peer.  Rank 0
 * ends with nothing, because it is not in P_y.
 *
 * Every entry has exactly one owner on each side, so the operator is a
 * permutation and its adjoint is the repartition back: the adjoint returns
 * the column blocks to the row blocks unchanged. */
#include <stdio.h>

#include "show.h"

int main(int argc, char **argv) {
  example_begin(&argc, &argv, "example-repartition");

  /* Every rank creates both partitions, including the ranks left out. */
  adj_partition *p_x, *p_y;
  EXAMPLE_CHECK(adj_partition_create(MPI_COMM_WORLD, 2, (const int[]){2, 1}, 2, (const int[]){0, 1}, &p_x));
  EXAMPLE_CHECK(adj_partition_create(MPI_COMM_WORLD, 2, (const int[]){1, 3}, 3, (const int[]){1, 2, 3}, &p_y));

  /* The same global 4 x 6 tensor laid out two ways. */
  const int64_t global[2] = {4, 6};
  adj_decomposition *rows, *columns;
  EXAMPLE_CHECK(adj_decomposition_create(p_x, 2, global, &rows));
  EXAMPLE_CHECK(adj_decomposition_create(p_y, 2, global, &columns));

  /* All planning happens here: intersections, peers, pack buffers. */
  adj_op *repartition;
  EXAMPLE_CHECK(adj_repartition_create(ADJ_FLOAT64, rows, columns, &repartition));

  adj_tensor x, y;
  EXAMPLE_CHECK(adj_op_create_domain_tensor(repartition, &x));
  EXAMPLE_CHECK(adj_op_create_range_tensor(repartition, &y));
  /* Entry (i, j) of the global matrix holds 6 i + j. */
  adj_box mine = adj_decomposition_local_block(rows);
  for (int64_t i = 0; i < mine.extent[0]; i++)
    for (int64_t j = 0; j < mine.extent[1]; j++)
      adj_tensor_set(&x, i * mine.extent[1] + j, (double)(6 * (mine.start[0] + i) + mine.start[1] + j));

  show_blocks(MPI_COMM_WORLD, "before forward, x in row blocks on P_x = [2, 1] (ranks 0-1):", &x);
  EXAMPLE_CHECK(adj_op_forward(repartition, &x, &y));
  show_blocks(MPI_COMM_WORLD, "after forward, y in column blocks on P_y = [1, 3] (ranks 1-3):", &y);

  /* The adjoint moves column blocks back to row blocks: scale dy to see it. */
  for (int64_t i = 0; i < adj_tensor_volume(&y); i++) adj_tensor_set(&y, i, 100.0 + adj_tensor_get(&y, i));
  show_blocks(MPI_COMM_WORLD, "before adjoint, dy = 100 + y:", &y);
  EXAMPLE_CHECK(adj_op_adjoint(repartition, &y, &x));
  show_blocks(MPI_COMM_WORLD, "after adjoint, dx = dy back in row blocks:", &x);

  /* What each worker sent over the two applications; its local copy is free. */
  adj_op_counters counters;
  adj_op_get_counters(repartition, &counters);
  adj_tensor counts;
  EXAMPLE_CHECK(adj_tensor_create(&counts, ADJ_FLOAT64, 1, (const int64_t[]){2}));
  adj_tensor_set(&counts, 0, (double)counters.messages_sent);
  adj_tensor_set(&counts, 1, (double)counters.bytes_sent);
  show_blocks(MPI_COMM_WORLD, "messages and bytes each rank sent in forward + adjoint:", &counts);

  adj_tensor_destroy(&counts);
  adj_tensor_destroy(&x);
  adj_tensor_destroy(&y);
  adj_op_destroy(&repartition);
  adj_decomposition_destroy(&rows);
  adj_decomposition_destroy(&columns);
  adj_partition_destroy(&p_x);
  adj_partition_destroy(&p_y);
  EXAMPLE_CHECK(adj_finalize());
  return 0;
}
