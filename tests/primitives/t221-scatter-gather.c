/* t221: scatter and gather on every battery case that fits the world (roots
 * inside and outside the partition, empty blocks, tensor ranks 1-4):
 * forward and adjoint exactly against the global-index reference, the
 * dot-product figure, a scatter-gather round trip, and bad roots reported by
 * every rank. */
#include <string.h>

#include "op_check.h"
#include "movement.h"

/* Scatter from the last rank onto a 1-D partition of the world, then gather
 * onto rank 0: rank 0 ends with the last rank's tensor, bit for bit. */
static void check_round_trip(adj_test *t) {
  int64_t global[2] = {2 * t->size + 1, 3};
  int shape[2] = {t->size, 1};
  adj_partition *p = NULL;
  adj_decomposition *d = NULL;
  ADJ_TEST_OK(t, adj_partition_create(t->comm, 2, shape, t->size, NULL, &p));
  ADJ_TEST_OK(t, adj_decomposition_create(p, 2, global, &d));
  adj_op *scatter = NULL, *gather = NULL;
  ADJ_TEST_OK(t, adj_scatter_create(ADJ_FLOAT64, t->size - 1, d, &scatter));
  ADJ_TEST_OK(t, adj_gather_create(ADJ_FLOAT64, d, 0, &gather));
  adj_tensor whole, blocks, back;
  ADJ_TEST_OK(t, adj_op_create_domain_tensor(scatter, &whole));
  ADJ_TEST_OK(t, adj_op_create_range_tensor(scatter, &blocks));
  ADJ_TEST_OK(t, adj_op_create_range_tensor(gather, &back));
  for (int64_t i = 0; i < adj_tensor_volume(&whole); i++) adj_tensor_set(&whole, i, 1.0 / (double)(i + 3));
  ADJ_TEST_OK(t, adj_op_forward(scatter, &whole, &blocks));
  ADJ_TEST_OK(t, adj_op_forward(gather, &blocks, &back));
  /* The source tensor is rebuilt on rank 0 from the same formula. */
  int64_t n = global[0] * global[1];
  ADJ_TEST_CHECK(t, adj_tensor_volume(&back) == (t->rank == 0 ? n : 0), "gather range has %lld elements on rank %d",
                 (long long)adj_tensor_volume(&back), t->rank);
  int64_t wrong = 0;
  for (int64_t i = 0; t->rank == 0 && i < n; i++) wrong += adj_tensor_get(&back, i) != 1.0 / (double)(i + 3);
  ADJ_TEST_CHECK(t, wrong == 0, "round trip: %lld of %lld elements changed", (long long)wrong, (long long)n);
  adj_test_report(t, "round trip scatter from %d, gather to 0, global [%lld, 3]: %lld elements differ", t->size - 1,
                  (long long)global[0], (long long)wrong);
  adj_tensor_destroy(&whole);
  adj_tensor_destroy(&blocks);
  adj_tensor_destroy(&back);
  adj_op_destroy(&scatter);
  adj_op_destroy(&gather);
  adj_decomposition_destroy(&d);
  adj_partition_destroy(&p);
}

static void check_errors(adj_test *t) {
  int64_t global[1] = {5};
  int shape[1] = {1}, zero = 0;
  adj_partition *p = NULL;
  adj_decomposition *d = NULL;
  ADJ_TEST_OK(t, adj_partition_create(t->comm, 1, shape, 1, &zero, &p));
  ADJ_TEST_OK(t, adj_decomposition_create(p, 1, global, &d));
  adj_op *op = NULL;
  char needle[64];
  snprintf(needle, sizeof needle, "root %d is outside the communicator of size %d", t->size, t->size);
  adj_test_expect_error(t, "scatter root too large", adj_scatter_create(ADJ_FLOAT64, t->size, d, &op),
                        ADJ_TEST_ANY_ERROR, needle);
  adj_test_expect_error(t, "gather root negative", adj_gather_create(ADJ_FLOAT32, d, -1, &op), ADJ_TEST_ANY_ERROR,
                        "root -1");
  adj_test_expect_error(t, "gather invalid dtype", adj_gather_create((adj_dtype)9, d, 0, &op), ADJ_TEST_ANY_ERROR,
                        "gather: invalid dtype 9");
  ADJ_TEST_CHECK(t, op == NULL, "a failed create left an operator behind");
  adj_decomposition_destroy(&d);
  adj_partition_destroy(&p);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t221-scatter-gather");
  int ran = movement_run_family(&t, "scatter", movement_check_permutation);
  ran += movement_run_family(&t, "gather", movement_check_permutation);
  ADJ_TEST_CHECK(&t, ran > 0, "no scatter or gather case fits %d ranks", t.size);
  check_round_trip(&t);
  check_errors(&t);
  return adj_test_finish(&t);
}
