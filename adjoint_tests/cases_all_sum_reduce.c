/* Battery cases for all-sum-reduce.
 *
 * Rows cover one to eight ranks; reductions over one, several, all and no
 * partition dimensions; permuted rank orders and ranks outside the partition;
 * groups whose block shapes differ from other groups'; zero-volume blocks; and
 * tensor ranks 1 to 5. */
#include <stdio.h>
#include <string.h>

#include "adjoin/all_sum_reduce.h"
#include "battery.h"
#include "error_impl.h"

typedef struct adj_asr_spec {
  int ndim;
  int shape[3];
  const char *ranks;     /* grid order, as digits */
  int ndims;
  int dims[3];
  int rank;
  int64_t block[5];
  bool grow;             /* block dimension 0 grows with grid coordinate 0 */
} adj_asr_spec;

static const adj_asr_spec adj_asr_specs[] = {
    {1, {1}, "0", 1, {0}, 1, {5}, false},
    {1, {2}, "01", 1, {0}, 1, {5}, false},
    {1, {4}, "0123", 1, {0}, 1, {7}, false},
    {1, {4}, "3210", 1, {0}, 1, {1}, false},
    {1, {3}, "123", 1, {0}, 1, {6}, false},
    {1, {1}, "3", 1, {0}, 1, {8}, false},
    {2, {2, 2}, "0123", 1, {0}, 2, {4, 3}, false},
    {2, {2, 2}, "0123", 1, {1}, 1, {3}, true},
    {2, {2, 2}, "3210", 2, {0, 1}, 3, {2, 2, 3}, false},
    {2, {2, 2}, "0123", 0, {0}, 1, {3}, false},
    {2, {2, 2}, "0213", 1, {1}, 1, {6}, false},
    {2, {2, 1}, "02", 1, {0}, 4, {2, 3, 2, 2}, false},
    {2, {3, 1}, "123", 1, {0}, 2, {0, 4}, false},
    {2, {1, 4}, "0123", 1, {1}, 5, {2, 1, 2, 1, 3}, false},
    {2, {1, 4}, "0123", 1, {0}, 1, {3}, false},
    {3, {2, 1, 2}, "0123", 2, {0, 2}, 4, {1, 2, 3, 2}, false},
    {1, {5}, "01234", 1, {0}, 1, {9}, false},
    {2, {2, 3}, "012345", 1, {1}, 2, {4, 2}, true},
    {2, {2, 3}, "543210", 1, {0}, 3, {3, 3, 2}, false},
    {2, {6, 1}, "012345", 1, {0}, 1, {0}, false},
    {1, {7}, "0123456", 1, {0}, 1, {4}, false},
    {2, {2, 4}, "01234567", 1, {1}, 3, {5, 1, 2}, false},
    {3, {2, 2, 2}, "01234567", 2, {1, 2}, 1, {3}, true},
    {3, {2, 2, 2}, "76543210", 3, {0, 1, 2}, 2, {2, 2}, false},
};

/* params: [0] row of adj_asr_specs. */
static int adj_run_all_sum_reduce(MPI_Comm comm, const adj_battery_case *c, adj_dottest_result *r) {
  const adj_asr_spec *s = &adj_asr_specs[c->params[0]];
  adj_partition *p = NULL;
  adj_op *op = NULL;
  int status = adj_battery_partition(comm, s->ndim, s->shape, s->ranks, &p);
  if (!status) {
    int64_t block[5];
    memcpy(block, s->block, sizeof block);
    if (s->grow && adj_partition_active(p)) block[0] += adj_partition_coords(p)[0];
    status = adj_all_sum_reduce_create(c->dtype, p, s->rank, block, s->ndims, s->dims, &op);
  }
  if (!status) status = adj_dottest_op(op, c->seed + 37, r);
  adj_op_destroy(&op);
  adj_partition_destroy(&p);
  return status;
}

static int adj_add_asr_case(adj_battery *b, int row, adj_dtype dtype) {
  const adj_asr_spec *s = &adj_asr_specs[row];
  adj_battery_case c = {.dtype = dtype, .run = adj_run_all_sum_reduce, .params = {row}};
  char grid[48], dims[32];
  adj_battery_format_ints(grid, sizeof grid, s->ndim, s->shape);
  adj_battery_format_ints(dims, sizeof dims, s->ndims, s->dims);
  snprintf(c.op, sizeof c.op, "all-sum-reduce");
  snprintf(c.partitions, sizeof c.partitions, "%s@%s dims %s", grid, s->ranks, dims);
  /* Local block shape: all-sum-reduce has no global tensor. */
  char block[48];
  adj_battery_format_int64s(block, sizeof block, s->rank, s->block);
  snprintf(c.shape, sizeof c.shape, "local %s", block);
  if (s->grow) snprintf(c.shape + strlen(c.shape), sizeof c.shape - strlen(c.shape), "+c0");
  int length = snprintf(c.name, sizeof c.name, "%s/%s/%s/%s", c.op, c.partitions, c.shape, adj_dtype_name(dtype));
  ADJ_CHECK(length < (int)sizeof c.name, ADJ_ERR_ARG, "battery: case name \"%s...\" is too long", c.name);
  c.ranks = adj_battery_ranks_needed(s->ranks);
  return adj_battery_add(b, &c);
}

int adj_battery_add_all_sum_reduce(adj_battery *b) {
  int rows = (int)(sizeof adj_asr_specs / sizeof adj_asr_specs[0]);
  for (int k = 0; k < ADJ_BATTERY_MOVEMENT_DTYPES; k++)
    for (int row = 0; row < rows; row++) ADJ_CALL(adj_add_asr_case(b, row, adj_battery_movement_dtype(row, k)));
  return ADJ_SUCCESS;
}
