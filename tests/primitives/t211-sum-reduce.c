/* t211: sum-reduce between partitions (the adjoint of a broadcast): forward
 * equals the sequential sum, adjoint the sequential copy, the dot-product test,
 * split-phase forward equals blocking, and its errors. */
#include "bcast_common.h"

/* The compatibility rule is the broadcast's, from P_y to P_x; the message says
 * so.  A wrong-shape adjoint input on one rank fails on every rank. */
static void check_errors(adj_test *t) {
  adj_partition *many = NULL, *few = NULL;
  adj_decomposition *y = NULL;
  adj_op *op = NULL;
  int n = t->size;
  ADJ_TEST_OK(t, adj_partition_create(t->comm, 1, (const int[]){n}, n, NULL, &many));
  if (n >= 2) {
    ADJ_TEST_OK(t, adj_partition_create(t->comm, 2, (const int[]){2, 1}, 2, NULL, &few));
    ADJ_TEST_OK(t, adj_decomposition_create(few, 2, (const int64_t[]){3, 3}, &y));
    adj_test_expect_error(t, "sum-reduce [n] -> [2,1]", adj_sum_reduce_create(ADJ_FLOAT32, many, y, &op),
                          ADJ_TEST_ANY_ERROR, "sum-reduce is the adjoint of a broadcast");
    adj_decomposition_destroy(&y);
    adj_partition_destroy(&few);
  }
  ADJ_TEST_OK(t, adj_partition_create(t->comm, 1, (const int[]){1}, 1, (const int[]){n - 1}, &few));
  ADJ_TEST_OK(t, adj_decomposition_create(few, 1, (const int64_t[]){5}, &y));
  ADJ_TEST_OK(t, adj_sum_reduce_create(ADJ_FLOAT32, many, y, &op));
  adj_tensor in, out, wrong;
  adj_op_create_range_tensor(op, &in);
  adj_op_create_domain_tensor(op, &out);
  adj_tensor_create(&wrong, ADJ_FLOAT32, 2, (const int64_t[]){5, 1});
  adj_test_expect_error(t, "rank-2 adjoint input on rank 0", adj_op_adjoint(op, t->rank == 0 ? &wrong : &in, &out),
                        ADJ_TEST_ANY_ERROR, "local shape [5, 1]");
  ADJ_TEST_OK(t, adj_op_adjoint(op, &in, &out));
  adj_tensor_destroy(&in);
  adj_tensor_destroy(&out);
  adj_tensor_destroy(&wrong);
  adj_op_destroy(&op);
  adj_decomposition_destroy(&y);
  adj_partition_destroy(&few);
  adj_partition_destroy(&many);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t211-sum-reduce");
  bcast_check_table(&t, true);
  check_errors(&t);
  return adj_test_finish(&t);
}
