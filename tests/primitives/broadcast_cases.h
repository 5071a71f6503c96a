/* The broadcast cases shared by the broadcast (t210), sum-reduce (t211),
 * all-sum-reduce (t212), gradient-reducer (t213) and algorithm-table (t214)
 * tests: a table of broadcast configurations (source and destination
 * partitions, rank lists, global shape, cuts) sized to the world, their
 * sequential references, and the table run every broadcast-family operator
 * gets; besides, a sum-reduce of the whole world onto rank 0 (sum_to_root)
 * and the chain algorithm's segment count (the generic operator checks are in
 * op_check.h). */
#ifndef ADJOIN_TESTS_BROADCAST_CASES_H
#define ADJOIN_TESTS_BROADCAST_CASES_H

#include <stdbool.h>

#include "harness.h"

enum { BCAST_MAX_CONFIGS = 24 };

/* A partition of `ndim` dims listing ranks first, first+1, ... (or the same
 * set in reverse order). */
typedef struct bcast_grid {
  int ndim;
  int shape[ADJ_MAX_RANK];
  int first;
  bool reverse;
} bcast_grid;

typedef struct bcast_config {
  char label[320];
  bcast_grid source, destination;
  int64_t global[ADJ_MAX_RANK];   /* rank = source.ndim */
  int64_t cuts0[ADJ_MAX_RANK + 1]; /* explicit cuts of dimension 0 when cut0 */
  bool cut0;
} bcast_config;

/* Configurations that fit in `size` ranks, described in their labels. */
int bcast_configs(int size, bcast_config *configs);

/* Partitions and source decomposition of a configuration on comm. */
typedef struct bcast_setup {
  adj_partition *source, *destination;
  adj_decomposition *x;
} bcast_setup;

int bcast_grid_create(MPI_Comm comm, const bcast_grid *g, adj_partition **p);
int bcast_setup_create(MPI_Comm comm, const bcast_config *c, bcast_setup *s);
void bcast_setup_destroy(bcast_setup *s);

/* Applies op in `direction` to known blocks and compares exactly with the
 * sequential result.  Copies (sums false: a broadcast forward, a sum-reduce
 * adjoint): every destination must hold its source's global index fill.  Sums
 * (a broadcast adjoint, a sum-reduce forward): destination d holds (1 + d)
 * times that fill, so source g must hold the fill times sum (1 + d) over its
 * destinations. */
void bcast_check_reference(adj_test *t, const bcast_config *c, const bcast_setup *s, adj_op *op,
                           adj_direction direction, bool sums);

/* A sum-reduce of `count` float64 over every rank of t's communicator onto
 * rank 0, with the partitions and layout it is made of. */
typedef struct sum_to_root {
  adj_partition *all, *root;
  adj_decomposition *y;
  adj_op *op;
} sum_to_root;

void sum_to_root_create(adj_test *t, int64_t count, sum_to_root *w);
void sum_to_root_destroy(sum_to_root *w);

/* Segments a chain (ADJ_SUM_REDUCE_ALGORITHM=chain) cuts a block of
 * `elements` into, from ADJ_CHAIN_SEGMENT_BYTES or the library's 64 KB. */
int chain_segments(int64_t elements, size_t element_size);

/* Every configuration of the world's size in every dtype (integers too): the copy and sum
 * references, the dot-product test and split phase of the summing direction,
 * for a broadcast (sum_reduce false) or a sum-reduce. */
void bcast_check_table(adj_test *t, bool sum_reduce);

#endif
