/* Impossible halo configurations fail at creation on every rank with the same
 * message and no rank hangs: a kernel wider than the padded input, a partition
 * that does not match the geometry, ranks passing different geometries, an
 * invalid dtype, an algorithm that is not one (by argument or in
 * ADJ_HALO_ALGORITHM), ranks choosing different algorithms, and a wrongly
 * shaped tensor on one rank at application.  A valid exchange still works
 * afterwards. */
#include <stdlib.h>
#include <string.h>

#include "halo_common.h"

static void kernel_too_wide(adj_test *t) {
  int64_t shape[2] = {6, 4};
  int parts[2] = {t->size, 1};
  adj_halo_geometry *g = NULL;
  int status = adj_halo_geometry_create(2, shape, parts, NULL,
                                        &(adj_halo_kernel){.size = {3, 6}, .padding = {{1, 1}, {0, 1}}}, &g);
  adj_test_expect_error(t, "kernel wider than the padded input", status, ADJ_ERR_SIZE,
                        "dimension 1: kernel 6 with dilation 1 spans 6 input entries but the padded input has only 5");
}

static void partition_mismatch(adj_test *t, adj_partition *row) {
  int64_t shape[2] = {9, 9};
  int parts[2] = {1, t->size + 1};
  adj_halo_geometry *g = NULL;
  adj_op *op = NULL;
  ADJ_TEST_OK(t, adj_halo_geometry_create(2, shape, parts, NULL, &(adj_halo_kernel){.size = {3, 3}}, &g));
  char expected[128];
  snprintf(expected, sizeof expected, "dimension 1 of the partition has %d workers but the geometry was made for %d",
           t->size, t->size + 1);
  adj_test_expect_error(t, "partition does not match the geometry", adj_halo_create(ADJ_FLOAT64, row, g, &op),
                        ADJ_ERR_SIZE, expected);
  ADJ_TEST_CHECK(t, op == NULL, "a failed creation must leave the operator NULL");
  adj_test_expect_error(t, "invalid dtype", adj_halo_create((adj_dtype)7, row, g, &op), ADJ_ERR_DTYPE,
                        "invalid dtype 7");
  adj_halo_geometry_destroy(&g);
}

/* Rank 0 asks for a wider kernel than the others: their plans would not match. */
static void ranks_disagree(adj_test *t, adj_partition *row) {
  if (t->size < 2) return;
  int64_t shape[2] = {4, 5 * t->size};
  int parts[2] = {1, t->size};
  adj_halo_geometry *g = NULL;
  adj_op *op = NULL;
  int64_t k = t->rank == 0 ? 5 : 3;
  ADJ_TEST_OK(t, adj_halo_geometry_create(2, shape, parts, NULL, &(adj_halo_kernel){.size = {1, k}}, &g));
  adj_test_expect_error(t, "ranks pass different geometries", adj_halo_create(ADJ_FLOAT64, row, g, &op), ADJ_ERR_ARG,
                        "ranks passed different geometries");
  adj_halo_geometry_destroy(&g);
}

/* An algorithm outside the enum, and rank 0 choosing nested while the others
 * choose direct, by default and forced. */
static void bad_algorithms(adj_test *t, adj_partition *row) {
  int64_t shape[2] = {4, 5 * t->size};
  int parts[2] = {1, t->size};
  adj_halo_geometry *g = NULL;
  adj_op *op = NULL;
  ADJ_TEST_OK(t, adj_halo_geometry_create(2, shape, parts, NULL, &(adj_halo_kernel){.size = {3, 3}}, &g));
  adj_test_expect_error(t, "algorithm out of range",
                        adj_halo_create_with_algorithm(ADJ_FLOAT64, row, g, (adj_halo_algorithm)9, &op), ADJ_ERR_ARG,
                        "halo: algorithm 9 is not ADJ_HALO_AUTO, ADJ_HALO_NESTED or ADJ_HALO_DIRECT");
  if (t->size > 1) {
    /* Defaults that differ between ranks (adj_halo_algorithm_set_default;
     * t008 checks a bad ADJ_HALO_ALGORITHM) are found as forced ones are. */
    ADJ_TEST_OK(t, adj_halo_algorithm_set_default(t->rank == 0 ? ADJ_HALO_NESTED : ADJ_HALO_DIRECT));
    adj_test_expect_error(t, "ranks set different default algorithms", adj_halo_create(ADJ_FLOAT64, row, g, &op),
                          ADJ_ERR_ARG, "ranks passed different geometries (dtype, shape, cuts or kernel) or algorithms");
    ADJ_TEST_OK(t, adj_halo_algorithm_set_default(ADJ_HALO_AUTO));
  }
  if (t->size > 1) {
    adj_halo_algorithm mine = t->rank == 0 ? ADJ_HALO_NESTED : ADJ_HALO_DIRECT;
    adj_test_expect_error(t, "ranks choose different algorithms",
                          adj_halo_create_with_algorithm(ADJ_FLOAT64, row, g, mine, &op), ADJ_ERR_ARG,
                          "ranks passed different geometries (dtype, shape, cuts or kernel) or algorithms");
  }
  ADJ_TEST_CHECK(t, op == NULL, "a failed creation must leave the operator NULL");
  adj_halo_geometry_destroy(&g);
}

/* A wrongly shaped tensor on the last rank fails the application everywhere;
 * then the same operator runs correctly. */
static void bad_tensor_then_valid(adj_test *t, adj_partition *row) {
  int64_t shape[2] = {3, 4 * t->size + 1};
  int parts[2] = {1, t->size};
  adj_halo_geometry *g = NULL;
  adj_op *op = NULL;
  adj_tensor x, wrong;
  ADJ_TEST_OK(t, adj_halo_geometry_create(2, shape, parts, NULL,
                                          &(adj_halo_kernel){.size = {1, 3}, .padding = {{0, 0}, {1, 1}}}, &g));
  ADJ_TEST_OK(t, adj_halo_create(ADJ_FLOAT64, row, g, &op));
  ADJ_TEST_OK(t, adj_op_create_domain_tensor(op, &x));
  int64_t bad_shape[2] = {3, 1};
  ADJ_TEST_OK(t, adj_tensor_create(&wrong, ADJ_FLOAT64, 2, bad_shape));
  adj_tensor *use = t->rank == t->size - 1 ? &wrong : &x;
  adj_test_expect_error(t, "wrongly shaped tensor on the last rank", adj_op_forward(op, use, use), ADJ_ERR_SIZE,
                        "forward input (domain) tensor has local shape [3, 1]");
  adj_halo_local local;
  adj_halo_geometry_local(g, adj_partition_coords(row), &local);
  for (int64_t i = 0; i < adj_tensor_volume(&x); i++) adj_tensor_set(&x, i, 1.0);
  adj_tensor_clear_box(&x, &local.bulk);
  ADJ_TEST_OK(t, adj_op_forward(op, &x, &x));
  double sum = 0.0;
  for (int64_t i = 0; i < adj_tensor_volume(&x); i++) sum += adj_tensor_get(&x, i);
  ADJ_TEST_CHECK(t, sum == 0.0, "after the failed call, a forward of zero bulks must give zero halos (sum %g)", sum);
  adj_tensor_destroy(&x);
  adj_tensor_destroy(&wrong);
  adj_op_destroy(&op);
  adj_halo_geometry_destroy(&g);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t235-halo-errors");
  adj_partition *row = NULL;
  ADJ_TEST_OK(&t, adj_partition_create(t.comm, 2, (int[]){1, t.size}, t.size, NULL, &row));
  kernel_too_wide(&t);
  partition_mismatch(&t, row);
  ranks_disagree(&t, row);
  bad_algorithms(&t, row);
  bad_tensor_then_valid(&t, row);
  adj_partition_destroy(&row);
  return adj_test_finish(&t);
}
