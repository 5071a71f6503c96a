/* t222: all-gather and reduce-scatter on every battery case that fits the
 * world: all-gather exactly against the global-index reference, reduce-scatter
 * as the group size times it, split phase bit for bit equal to blocking in
 * both directions, the dot-product figure, and bad dimensions and dtypes
 * reported by every rank. */
#include <string.h>

#include "op_check.h"
#include "movement.h"

/* All-gather takes my block to its full extent along dim; reduce-scatter of a
 * fill that every member holds gives each block `members` times the fill. */
static void check_gather(adj_test *t, const adj_battery_case *c, const movement_setup *s) {
  int dim = (int)c->params[ADJ_CASE_EXTRA];
  const adj_partition *p = adj_decomposition_partition(s->x);
  const int64_t *global = adj_decomposition_global_shape(s->x);
  adj_box block = adj_decomposition_local_block(s->x), full = block;
  if (adj_partition_active(p)) full.start[dim] = 0, full.extent[dim] = global[dim];
  double members = adj_partition_shape(p)[dim];
  bool gather_forward = !strcmp(c->op, "all_gather");
  adj_direction gather = gather_forward ? ADJ_FORWARD : ADJ_ADJOINT;
  adj_direction scatter = gather_forward ? ADJ_ADJOINT : ADJ_FORWARD;
  movement_check_map(t, c->name, s->op, gather, &block, &full, global, 1.0);
  movement_check_map(t, c->name, s->op, scatter, &full, &block, global, members);
  op_check_split_phase(t, c->name, s->op, ADJ_FORWARD);
  op_check_split_phase(t, c->name, s->op, ADJ_ADJOINT);
}

static void check_errors(adj_test *t) {
  int64_t global[2] = {4, 3};
  int shape[2] = {1, t->size};
  adj_partition *p = NULL;
  adj_decomposition *d = NULL;
  ADJ_TEST_OK(t, adj_partition_create(t->comm, 2, shape, t->size, NULL, &p));
  ADJ_TEST_OK(t, adj_decomposition_create(p, 2, global, &d));
  adj_op *op = NULL;
  adj_test_expect_error(t, "dim too large", adj_all_gather_create(ADJ_FLOAT64, d, 2, &op), ADJ_TEST_ANY_ERROR,
                        "all_gather: dim 2 is outside 0..1");
  adj_test_expect_error(t, "dim negative", adj_reduce_scatter_create(ADJ_FLOAT32, d, -1, &op), ADJ_TEST_ANY_ERROR,
                        "reduce_scatter: dim -1");
  adj_test_expect_error(t, "invalid dtype", adj_all_gather_create((adj_dtype)5, d, 0, &op), ADJ_TEST_ANY_ERROR,
                        "invalid dtype 5");
  ADJ_TEST_CHECK(t, op == NULL, "a failed create left an operator behind");
  /* A float32 tensor on the last rank only, applied to a float64 operator. */
  ADJ_TEST_OK(t, adj_all_gather_create(ADJ_FLOAT64, d, 1, &op));
  adj_tensor in, out;
  ADJ_TEST_OK(t, adj_tensor_create(&in, t->rank == t->size - 1 ? ADJ_FLOAT32 : ADJ_FLOAT64, 2,
                                   adj_op_domain_shape(op)));
  ADJ_TEST_OK(t, adj_op_create_range_tensor(op, &out));
  adj_test_expect_error(t, "dtype mismatch on one rank", adj_op_forward(op, &in, &out), ADJ_TEST_ANY_ERROR,
                        "dtype float32");
  adj_tensor_destroy(&in);
  adj_tensor_destroy(&out);
  adj_op_destroy(&op);
  adj_decomposition_destroy(&d);
  adj_partition_destroy(&p);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t222-all-gather");
  int ran = movement_run_family(&t, "all_gather", check_gather);
  ran += movement_run_family(&t, "reduce_scatter", check_gather);
  ADJ_TEST_CHECK(&t, ran > 0, "no all-gather case fits %d ranks", t.size);
  check_errors(&t);
  return adj_test_finish(&t);
}
