/* Battery cases for repartition, scatter and gather, and the machinery every
 * data-movement case shares (movement_cases.h): encoding a decomposition in a
 * case's params, rebuilding it, and building the operator.
 *
 * The repartition pairs cover what a generalized all-to-all must get right:
 * tensor ranks 1 to 5; one to eight ranks; partitions of different shapes and
 * dimensions; disjoint worker sets ({0,1} -> {2,3}), overlapping ones and
 * reversed or permuted rank orders; balanced and explicit cuts that leave
 * blocks empty; and empty global tensors. */
#include <stdio.h>
#include <string.h>

#include "adjoin/all_gather.h"
#include "adjoin/repartition.h"
#include "error_impl.h"
#include "movement_cases.h"

/* ---- sides ------------------------------------------------------------------------ */

int adj_side_encode(int64_t *side, int rank, const int64_t *global, const adj_side_spec *spec) {
  ADJ_CHECK(rank >= 1 && rank <= ADJ_SIDE_MAX_RANK, ADJ_ERR_ARG, "battery: side of tensor rank %d", rank);
  int workers = 1, listed = (int)strlen(spec->ranks);
  memset(side, 0, sizeof *side * ADJ_SIDE_PARAMS);
  side[0] = rank;
  side[11] = spec->cuts;
  for (int i = 0; i < rank; i++) {
    side[1 + i] = global[i];
    side[6 + i] = spec->shape[i];
    workers *= spec->shape[i];
  }
  ADJ_CHECK(workers == listed && workers <= ADJ_SIDE_MAX_WORKERS, ADJ_ERR_ARG,
            "battery: partition of %d workers lists ranks \"%s\"", workers, spec->ranks);
  for (int k = 0; k < listed; k++) side[12 + k] = spec->ranks[k] - '0';
  return ADJ_SUCCESS;
}

static int adj_side_workers(const int64_t *side) {
  int workers = 1;
  for (int i = 0; i < side[0]; i++) workers *= (int)side[6 + i];
  return workers;
}

void adj_side_format(char *buf, size_t size, const int64_t *side) {
  static const char *const suffix[] = {"", ":q", ":l"};
  int rank = (int)side[0], shape[ADJ_SIDE_MAX_RANK];
  for (int i = 0; i < rank; i++) shape[i] = (int)side[6 + i];
  adj_battery_format_ints(buf, size, rank, shape);
  size_t used = strlen(buf);
  used += (size_t)snprintf(buf + used, size > used ? size - used : 0, "@");
  for (int k = 0; k < adj_side_workers(side) && used < size; k++)
    used += (size_t)snprintf(buf + used, size - used, "%d", (int)side[12 + k]);
  if (used < size) snprintf(buf + used, size - used, "%s", suffix[side[11]]);
}

int adj_side_ranks_needed(const int64_t *side) {
  int needed = 0;
  for (int k = 0; side[0] > 0 && k < adj_side_workers(side); k++)
    if (side[12 + k] + 1 > needed) needed = (int)side[12 + k] + 1;
  return needed;
}

/* The offsets of one dimension under the side's cut rule; NULL means balanced. */
static const int64_t *adj_side_cuts(adj_cut_rule rule, int dim, int64_t n, int parts, int64_t *cuts) {
  if (rule == ADJ_CUTS_BALANCED) return NULL;
  for (int p = 0; p <= parts; p++) {
    if (rule == ADJ_CUTS_LAST && dim == 0)
      cuts[p] = p == parts ? n : 0;
    else
      cuts[p] = n * p * p / ((int64_t)parts * parts);
  }
  return cuts;
}

int adj_side_decomposition(MPI_Comm comm, const int64_t *side, adj_decomposition **d) {
  int rank = (int)side[0], shape[ADJ_SIDE_MAX_RANK], ranks[ADJ_SIDE_MAX_WORKERS];
  int64_t global[ADJ_SIDE_MAX_RANK], storage[ADJ_SIDE_MAX_RANK][ADJ_SIDE_MAX_WORKERS + 1];
  const int64_t *cuts[ADJ_SIDE_MAX_RANK];
  for (int i = 0; i < rank; i++) {
    shape[i] = (int)side[6 + i];
    global[i] = side[1 + i];
    cuts[i] = adj_side_cuts((adj_cut_rule)side[11], i, global[i], shape[i], storage[i]);
  }
  int workers = adj_side_workers(side);
  for (int k = 0; k < workers; k++) ranks[k] = (int)side[12 + k];
  adj_partition *p;
  ADJ_CALL(adj_partition_create(comm, rank, shape, workers, ranks, &p));
  int status = adj_decomposition_create_explicit(p, rank, global, cuts, d);
  adj_partition_destroy(&p);
  return status;
}

/* ---- operators -------------------------------------------------------------------- */

static int adj_movement_op_create(const adj_battery_case *c, const adj_decomposition *x,
                                  const adj_decomposition *y, adj_op **op) {
  int extra = (int)c->params[ADJ_CASE_EXTRA];
  if (!strcmp(c->op, "repartition")) return adj_repartition_create(c->dtype, x, y, op);
  if (!strcmp(c->op, "scatter")) return adj_scatter_create(c->dtype, (int)c->params[ADJ_SIDE_X + 12], y, op);
  if (!strcmp(c->op, "gather")) return adj_gather_create(c->dtype, x, (int)c->params[ADJ_SIDE_Y + 12], op);
  if (!strcmp(c->op, "all_gather")) return adj_all_gather_create(c->dtype, x, extra, op);
  if (!strcmp(c->op, "reduce_scatter")) return adj_reduce_scatter_create(c->dtype, x, extra, op);
  return adj_error_set(ADJ_ERR_ARG, "battery: '%s' is not a data-movement family", c->op);
}

int adj_movement_case_create(MPI_Comm comm, const adj_battery_case *c, adj_decomposition **x,
                             adj_decomposition **y, adj_op **op) {
  *x = *y = NULL;
  *op = NULL;
  bool two_sides = c->params[ADJ_SIDE_Y] > 0;
  int status = adj_side_decomposition(comm, &c->params[ADJ_SIDE_X], x);
  if (!status && two_sides) status = adj_side_decomposition(comm, &c->params[ADJ_SIDE_Y], y);
  if (!status) status = adj_movement_op_create(c, *x, *y, op);
  if (status) {
    adj_decomposition_destroy(x);
    adj_decomposition_destroy(y);
  }
  return status;
}

static int adj_movement_run(MPI_Comm comm, const adj_battery_case *c, adj_dottest_result *r) {
  adj_decomposition *x, *y;
  adj_op *op;
  ADJ_CALL(adj_movement_case_create(comm, c, &x, &y, &op));
  int status = adj_dottest_op(op, c->seed + 220, r);
  adj_op_destroy(&op);
  adj_decomposition_destroy(&x);
  adj_decomposition_destroy(&y);
  return status;
}

int adj_movement_case_add(adj_battery *b, adj_battery_case *c, const char *op, const char *partitions,
                          adj_dtype dtype) {
  const int64_t *x = &c->params[ADJ_SIDE_X], *y = &c->params[ADJ_SIDE_Y];
  snprintf(c->op, sizeof c->op, "%s", op);
  snprintf(c->partitions, sizeof c->partitions, "%s", partitions);
  adj_battery_format_int64s(c->shape, sizeof c->shape, (int)x[0], &x[1]);
  c->dtype = dtype;
  int needed_x = adj_side_ranks_needed(x), needed_y = adj_side_ranks_needed(y);
  c->ranks = needed_x > needed_y ? needed_x : needed_y;
  c->run = adj_movement_run;
  snprintf(c->name, sizeof c->name, "%s/%s/%s/%s", op, partitions, c->shape, adj_dtype_name(dtype));
  return adj_battery_add(b, c);
}

/* ---- the tables ------------------------------------------------------------------- */

typedef struct adj_pair_spec {
  int rank;
  int64_t global[ADJ_SIDE_MAX_RANK];
  adj_side_spec x, y;
} adj_pair_spec;

/* Short names for the cut rules, so the tables read as tables. */
#define B ADJ_CUTS_BALANCED
#define Q ADJ_CUTS_QUADRATIC
#define L ADJ_CUTS_LAST

static const adj_pair_spec adj_repartition_pairs[] = {
    /* tensor rank 1 */
    {1, {10}, {{1}, "0", B}, {{1}, "0", B}},
    {1, {10}, {{2}, "01", B}, {{2}, "10", B}},
    {1, {11}, {{2}, "01", B}, {{3}, "012", B}},
    {1, {7}, {{4}, "0123", B}, {{1}, "2", B}},
    {1, {9}, {{3}, "012", B}, {{2}, "34", B}},
    {1, {13}, {{7}, "0123456", B}, {{5}, "65432", B}},
    {1, {16}, {{8}, "01234567", B}, {{8}, "76543210", B}},
    {1, {0}, {{2}, "01", B}, {{3}, "210", B}},
    {1, {6}, {{4}, "0123", Q}, {{3}, "123", L}},
    /* tensor rank 2 */
    {2, {6, 5}, {{2, 1}, "01", B}, {{1, 2}, "01", B}},
    {2, {7, 5}, {{2, 2}, "0123", B}, {{4, 1}, "0123", B}},
    {2, {7, 5}, {{2, 2}, "0123", B}, {{2, 2}, "3210", B}},
    {2, {5, 6}, {{1, 2}, "01", B}, {{2, 1}, "23", B}},
    {2, {8, 9}, {{2, 3}, "012345", B}, {{3, 2}, "012345", B}},
    {2, {6, 7}, {{2, 2}, "0123", B}, {{1, 3}, "123", B}},
    {2, {5, 4}, {{2, 2}, "0123", L}, {{2, 2}, "0123", B}},
    {2, {3, 3}, {{4, 2}, "01234567", B}, {{1, 1}, "5", B}},
    {2, {9, 4}, {{3, 1}, "012", B}, {{1, 3}, "234", B}},
    {2, {6, 6}, {{3, 2}, "012345", L}, {{2, 3}, "012345", Q}},
    {2, {5, 5}, {{1, 1}, "3", B}, {{2, 2}, "0123", B}},
    {2, {10, 3}, {{5, 1}, "01234", Q}, {{5, 1}, "01234", B}},
    {2, {4, 0}, {{2, 1}, "01", B}, {{1, 2}, "10", B}},
    /* tensor rank 3 */
    {3, {4, 5, 6}, {{2, 1, 2}, "0123", B}, {{1, 2, 2}, "0123", B}},
    {3, {3, 4, 5}, {{1, 1, 2}, "01", B}, {{2, 2, 1}, "0123", B}},
    {3, {5, 3, 4}, {{2, 2, 2}, "01234567", B}, {{1, 4, 2}, "76543210", B}},
    {3, {4, 4, 4}, {{1, 2, 2}, "0123", Q}, {{2, 2, 1}, "0123", L}},
    {3, {6, 2, 3}, {{3, 1, 1}, "012", B}, {{1, 1, 3}, "456", B}},
    {3, {2, 5, 3}, {{1, 5, 1}, "01234", B}, {{1, 1, 1}, "0", B}},
    /* tensor rank 4 */
    {4, {3, 4, 2, 5}, {{1, 2, 1, 2}, "0123", B}, {{2, 1, 2, 1}, "0123", B}},
    {4, {2, 3, 4, 5}, {{2, 1, 1, 1}, "01", B}, {{1, 1, 2, 2}, "2345", B}},
    {4, {4, 3, 3, 2}, {{1, 3, 1, 1}, "210", B}, {{2, 1, 1, 1}, "12", B}},
    {4, {3, 3, 3, 3}, {{1, 1, 1, 3}, "456", B}, {{3, 1, 1, 1}, "012", B}},
    /* tensor rank 5 */
    {5, {2, 3, 2, 3, 2}, {{1, 1, 1, 1, 2}, "01", B}, {{2, 1, 1, 1, 1}, "01", B}},
    {5, {3, 2, 4, 2, 3}, {{1, 2, 2, 1, 1}, "0123", B}, {{1, 1, 1, 2, 2}, "3120", B}},
    {5, {2, 2, 2, 2, 3}, {{2, 1, 1, 1, 1}, "01", B}, {{1, 1, 1, 1, 3}, "012", Q}},
};

/* Scatter from root x onto y, and gather (the reverse); the root may lie
 * outside y's partition. */
typedef struct adj_root_spec {
  int rank;
  int64_t global[ADJ_SIDE_MAX_RANK];
  const char *root;
  adj_side_spec y;
} adj_root_spec;

static const adj_root_spec adj_root_cases[] = {
    {2, {5, 7}, "0", {{2, 2}, "0123", B}},
    {2, {4, 4}, "3", {{2, 2}, "0123", Q}},
    {1, {10}, "2", {{3}, "012", B}},
    {2, {6, 5}, "4", {{2, 2}, "0123", B}},
    {3, {3, 4, 2}, "0", {{1, 1, 1}, "0", B}},
    {3, {4, 3, 5}, "1", {{2, 1, 3}, "543210", B}},
    {1, {7}, "0", {{2}, "12", B}},
    {1, {5}, "6", {{7}, "0123456", B}},
    {4, {2, 3, 2, 2}, "1", {{1, 2, 1, 2}, "3102", L}},
};

static int adj_add_pair(adj_battery *b, const char *op, int row, int rank, const int64_t *global,
                        const adj_side_spec *x, const adj_side_spec *y) {
  adj_battery_case c = {0};
  ADJ_CALL(adj_side_encode(&c.params[ADJ_SIDE_X], rank, global, x));
  ADJ_CALL(adj_side_encode(&c.params[ADJ_SIDE_Y], rank, global, y));
  char a[40], bb[40], partitions[96];
  adj_side_format(a, sizeof a, &c.params[ADJ_SIDE_X]);
  adj_side_format(bb, sizeof bb, &c.params[ADJ_SIDE_Y]);
  snprintf(partitions, sizeof partitions, "%s->%s", a, bb);
  for (int k = 0; k < ADJ_BATTERY_MOVEMENT_DTYPES; k++)
    ADJ_CALL(adj_movement_case_add(b, &c, op, partitions, adj_battery_movement_dtype(row, k)));
  return ADJ_SUCCESS;
}

int adj_battery_add_repartition(adj_battery *b) {
  for (size_t i = 0; i < sizeof adj_repartition_pairs / sizeof adj_repartition_pairs[0]; i++) {
    const adj_pair_spec *s = &adj_repartition_pairs[i];
    ADJ_CALL(adj_add_pair(b, "repartition", (int)i, s->rank, s->global, &s->x, &s->y));
  }
  for (size_t i = 0; i < sizeof adj_root_cases / sizeof adj_root_cases[0]; i++) {
    const adj_root_spec *s = &adj_root_cases[i];
    adj_side_spec root = {{1, 1, 1, 1, 1}, s->root, ADJ_CUTS_BALANCED};
    ADJ_CALL(adj_add_pair(b, "scatter", (int)i, s->rank, s->global, &root, &s->y));
    ADJ_CALL(adj_add_pair(b, "gather", (int)i, s->rank, s->global, &s->y, &root));
  }
  return ADJ_SUCCESS;
}
