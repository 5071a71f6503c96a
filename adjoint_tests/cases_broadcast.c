/* Battery cases for broadcast and sum-reduce.
 *
 * Each row of the table is a broadcast from a source partition to a
 * destination partition; it yields a broadcast case and a sum-reduce case (the
 * same pair of partitions read the other way) in both dtypes.  The rows cover
 * one to eight ranks; sources with fewer dimensions than their destination
 * (left-padded with 1s); tensor ranks 1 to 5; disjoint, overlapping and
 * permuted worker sets; ranks in neither partition; explicit cuts leaving a
 * source block empty; and an empty global tensor. */
#include <stdio.h>
#include <string.h>

#include "adjoin/broadcast.h"
#include "battery.h"
#include "error_impl.h"

/* A partition: shape and its ranks in grid order as digits ("3210"). */
typedef struct adj_grid_spec {
  int ndim;
  int shape[5];
  const char *ranks;
} adj_grid_spec;

typedef struct adj_bcast_spec {
  adj_grid_spec source, destination;
  int64_t global[5];     /* rank = source.ndim */
  bool first_empty;      /* dimension 0 cut so the first source block is empty */
} adj_bcast_spec;

static const adj_bcast_spec adj_bcast_specs[] = {
    {{1, {1}, "0"}, {1, {1}, "0"}, {5}, false},
    {{1, {1}, "0"}, {1, {4}, "0123"}, {7}, false},
    {{1, {1}, "3"}, {1, {3}, "012"}, {5}, false},
    {{1, {2}, "01"}, {2, {2, 2}, "3210"}, {9}, false},
    {{2, {1, 1}, "1"}, {2, {2, 2}, "0123"}, {4, 3}, false},
    {{1, {1}, "2"}, {3, {2, 1, 2}, "0123"}, {6}, false},
    {{2, {3, 1}, "012"}, {2, {3, 1}, "210"}, {5, 6}, true},
    {{2, {1, 2}, "01"}, {2, {1, 2}, "23"}, {3, 8}, false},
    {{1, {4}, "0123"}, {1, {4}, "3210"}, {9}, false},
    {{3, {1, 2, 1}, "23"}, {4, {2, 1, 2, 1}, "0123"}, {4, 6, 2}, false},
    {{5, {1, 1, 2, 1, 1}, "01"}, {5, {1, 2, 2, 1, 1}, "3210"}, {2, 3, 5, 2, 3}, false},
    {{2, {2, 1}, "01"}, {2, {2, 2}, "0123"}, {0, 4}, false},
    {{1, {1}, "4"}, {1, {5}, "01234"}, {4}, false},
    {{4, {2, 1, 1, 1}, "01"}, {4, {2, 1, 3, 1}, "543210"}, {5, 2, 3, 2}, false},
    {{1, {2}, "76"}, {2, {3, 2}, "012345"}, {7}, true},
    {{2, {2, 2}, "0123"}, {3, {2, 2, 2}, "76543210"}, {3, 5}, false},
};

int adj_battery_partition(MPI_Comm comm, int ndim, const int *shape, const char *ranks, adj_partition **p) {
  int list[ADJ_MAX_RANK * 2], n = (int)strlen(ranks);
  ADJ_CHECK(n <= (int)(sizeof list / sizeof list[0]), ADJ_ERR_ARG, "battery: too many ranks in \"%s\"", ranks);
  for (int k = 0; k < n; k++) list[k] = ranks[k] - '0';
  return adj_partition_create(comm, ndim, shape, n, list, p);
}

int adj_battery_ranks_needed(const char *ranks) {
  int needed = 0;
  for (const char *r = ranks; *r; r++)
    if (*r - '0' + 1 > needed) needed = *r - '0' + 1;
  return needed;
}

/* params: [0] row of adj_bcast_specs, [1] 1 for the sum-reduce. */
static int adj_run_broadcast(MPI_Comm comm, const adj_battery_case *c, adj_dottest_result *r) {
  const adj_bcast_spec *s = &adj_bcast_specs[c->params[0]];
  adj_partition *source = NULL, *destination = NULL;
  adj_decomposition *x = NULL;
  adj_op *op = NULL;
  int64_t cuts0[4] = {0, 0, s->global[0], s->global[0]};
  const int64_t *cuts[ADJ_MAX_RANK] = {s->first_empty ? cuts0 : NULL};
  int status = adj_battery_partition(comm, s->source.ndim, s->source.shape, s->source.ranks, &source);
  if (!status) status = adj_battery_partition(comm, s->destination.ndim, s->destination.shape, s->destination.ranks,
                                              &destination);
  if (!status) status = adj_decomposition_create_explicit(source, s->source.ndim, s->global, cuts, &x);
  if (!status) status = c->params[1] ? adj_sum_reduce_create(c->dtype, destination, x, &op)
                                     : adj_broadcast_create(c->dtype, x, destination, &op);
  if (!status) status = adj_dottest_op(op, c->seed + 31, r);
  adj_op_destroy(&op);
  adj_decomposition_destroy(&x);
  adj_partition_destroy(&source);
  adj_partition_destroy(&destination);
  return status;
}

static void adj_grid_format(char *buf, size_t size, const adj_grid_spec *g) {
  adj_battery_format_ints(buf, size, g->ndim, g->shape);
  size_t used = strlen(buf);
  if (used < size) snprintf(buf + used, size - used, "@%s", g->ranks);
}

static int adj_add_bcast_case(adj_battery *b, int row, int reduce, adj_dtype dtype) {
  const adj_bcast_spec *s = &adj_bcast_specs[row];
  adj_battery_case c = {.dtype = dtype, .run = adj_run_broadcast, .params = {row, reduce}};
  char from[48], to[48];
  adj_grid_format(from, sizeof from, &s->source);
  adj_grid_format(to, sizeof to, &s->destination);
  snprintf(c.op, sizeof c.op, "%s", reduce ? "sum-reduce" : "broadcast");
  /* Read as a sum-reduce, the pair runs from the destination to the source. */
  int written = snprintf(c.partitions, sizeof c.partitions, "%s->%s%s", reduce ? to : from, reduce ? from : to,
                         s->first_empty ? ":e" : "");
  if (written >= (int)sizeof c.partitions) return adj_error_set(ADJ_ERR_ARG, "battery: partition text too long");
  adj_battery_format_int64s(c.shape, sizeof c.shape, s->source.ndim, s->global);
  int length = snprintf(c.name, sizeof c.name, "%s/%s/%s/%s", c.op, c.partitions, c.shape, adj_dtype_name(dtype));
  ADJ_CHECK(length < (int)sizeof c.name, ADJ_ERR_ARG, "battery: case name \"%s...\" is too long", c.name);
  int a = adj_battery_ranks_needed(s->source.ranks), d = adj_battery_ranks_needed(s->destination.ranks);
  c.ranks = a > d ? a : d;
  return adj_battery_add(b, &c);
}

int adj_battery_add_broadcast(adj_battery *b) {
  int rows = (int)(sizeof adj_bcast_specs / sizeof adj_bcast_specs[0]);
  for (int reduce = 0; reduce < 2; reduce++)
    for (int k = 0; k < ADJ_BATTERY_MOVEMENT_DTYPES; k++)
      for (int row = 0; row < rows; row++)
        ADJ_CALL(adj_add_bcast_case(b, row, reduce, adj_battery_movement_dtype(row, k)));
  return ADJ_SUCCESS;
}
