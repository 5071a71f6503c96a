/* Scatter, gather and their adjoints, on 4 workers.
 *
 *   mpiexec -n 4 example-scatter-gather
 *
 * Rank 0 holds a whole vector of 8 numbers.  The scatter hands out pieces to
 * a 1-D partition of the 4 ranks, cut by hand at offsets 0, 1, 4, 4, 8: rank 0
 * keeps 1 number, rank 1 gets 3, rank 2 gets none and rank 3 gets 4.  The
 * gather collects the pieces on rank 3, which is not the scatter's root.
 *
 * Both are repartitions between the partition and a one-worker partition on
 * the root, so each is a permutation and its adjoint is the other: the adjoint
 * of the scatter gathers onto the root, the adjoint of the gather scatters
 * from rank 3. */
#include <stdio.h>

#include "show.h"

int main(int argc, char **argv) {
  example_begin(&argc, &argv, "example-scatter-gather");

  adj_partition *line;
  EXAMPLE_CHECK(adj_partition_create(MPI_COMM_WORLD, 1, (const int[]){4}, 4, NULL, &line));
  /* Explicit cuts: one offset per worker boundary; equal offsets leave a
   * worker empty. */
  const int64_t global[1] = {8}, cuts[5] = {0, 1, 4, 4, 8};
  const int64_t *cuts_per_dim[1] = {cuts};
  adj_decomposition *pieces;
  EXAMPLE_CHECK(adj_decomposition_create_explicit(line, 1, global, cuts_per_dim, &pieces));

  adj_op *scatter, *gather;
  EXAMPLE_CHECK(adj_scatter_create(ADJ_FLOAT64, 0, pieces, &scatter));
  EXAMPLE_CHECK(adj_gather_create(ADJ_FLOAT64, pieces, 3, &gather));

  /* The scatter's domain is the whole vector on rank 0 and empty elsewhere. */
  adj_tensor whole, piece, collected;
  EXAMPLE_CHECK(adj_op_create_domain_tensor(scatter, &whole));
  EXAMPLE_CHECK(adj_op_create_range_tensor(scatter, &piece));
  EXAMPLE_CHECK(adj_op_create_range_tensor(gather, &collected));
  for (int64_t i = 0; i < adj_tensor_volume(&whole); i++) adj_tensor_set(&whole, i, 10.0 + (double)i);

  show_blocks(MPI_COMM_WORLD, "before scatter, the whole vector on rank 0:", &whole);
  EXAMPLE_CHECK(adj_op_forward(scatter, &whole, &piece));
  show_blocks(MPI_COMM_WORLD, "after scatter, pieces cut at 0, 1, 4, 4, 8:", &piece);
  EXAMPLE_CHECK(adj_op_forward(gather, &piece, &collected));
  show_blocks(MPI_COMM_WORLD, "after gather onto rank 3:", &collected);

  /* Adjoints: the gather's adjoint scatters from rank 3, the scatter's gathers
   * onto rank 0.  Negate on the way so the values show where they went. */
  for (int64_t i = 0; i < adj_tensor_volume(&collected); i++)
    adj_tensor_set(&collected, i, -adj_tensor_get(&collected, i));
  show_blocks(MPI_COMM_WORLD, "before the adjoints, d(collected) = -collected on rank 3:", &collected);
  EXAMPLE_CHECK(adj_op_adjoint(gather, &collected, &piece));
  show_blocks(MPI_COMM_WORLD, "after the gather's adjoint (a scatter from rank 3):", &piece);
  EXAMPLE_CHECK(adj_op_adjoint(scatter, &piece, &whole));
  show_blocks(MPI_COMM_WORLD, "after the scatter's adjoint (a gather onto rank 0):", &whole);

  adj_tensor_destroy(&whole);
  adj_tensor_destroy(&piece);
  adj_tensor_destroy(&collected);
  adj_op_destroy(&scatter);
  adj_op_destroy(&gather);
  adj_decomposition_destroy(&pieces);
  adj_partition_destroy(&line);
  EXAMPLE_CHECK(adj_finalize());
  return 0;
}
