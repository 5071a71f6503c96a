/* t220: repartition on every battery pair that fits the world (35 pairs,
 * both dtypes): forward and adjoint exactly against the global-index
 * reference, the dot-product figure, and errors that every rank must report
 * the same way (shape, rank, dtype, communicator mismatches at creation; a
 * bad tensor on one rank at application). */
#include <string.h>

#include "op_check.h"
#include "movement.h"

/* A decomposition of `global` held whole by one rank of comm. */
static adj_decomposition *whole_on(adj_test *t, MPI_Comm comm, int owner, int rank, const int64_t *global) {
  int ones[ADJ_MAX_RANK] = {1, 1, 1, 1, 1, 1, 1, 1};
  adj_partition *p = NULL;
  adj_decomposition *d = NULL;
  ADJ_TEST_OK(t, adj_partition_create(comm, rank, ones, 1, &owner, &p));
  if (p) ADJ_TEST_OK(t, adj_decomposition_create(p, rank, global, &d));
  adj_partition_destroy(&p);
  return d;
}

/* Creation errors come from arguments every rank shares: each rank must fail
 * with a message naming the bad values. */
static void check_create_errors(adj_test *t) {
  int64_t g65[3] = {6, 5, 2}, g64[2] = {6, 4};
  int last = t->size - 1;
  adj_decomposition *a = whole_on(t, t->comm, 0, 2, g65), *b = whole_on(t, t->comm, last, 2, g64);
  adj_decomposition *c = whole_on(t, t->comm, last, 3, g65);
  adj_op *op = NULL;
  adj_test_expect_error(t, "global shape mismatch", adj_repartition_create(ADJ_FLOAT64, a, b, &op), ADJ_TEST_ANY_ERROR,
                        "global shape [6, 5] of x does not match global shape [6, 4] of y");
  adj_test_expect_error(t, "tensor rank mismatch", adj_repartition_create(ADJ_FLOAT32, a, c, &op), ADJ_TEST_ANY_ERROR,
                        "[6, 5, 2]");
  adj_test_expect_error(t, "invalid dtype", adj_repartition_create((adj_dtype)7, a, a, &op), ADJ_TEST_ANY_ERROR,
                        "invalid dtype 7");
  ADJ_TEST_CHECK(t, op == NULL, "a failed create left an operator behind");
  /* The same ranks in another order form a different communicator. */
  if (t->size > 1) {
    MPI_Comm reversed;
    MPI_Comm_split(t->comm, 0, t->size - t->rank, &reversed);
    adj_decomposition *r = whole_on(t, reversed, 0, 2, g65);
    adj_test_expect_error(t, "base communicator mismatch", adj_repartition_create(ADJ_FLOAT64, a, r, &op),
                          ADJ_TEST_ANY_ERROR, "different base communicators");
    adj_decomposition_destroy(&r);
    MPI_Comm_free(&reversed);
  }
  adj_decomposition_destroy(&a);
  adj_decomposition_destroy(&b);
  adj_decomposition_destroy(&c);
}

/* A wrong tensor on the last rank only: every rank returns an error naming
 * the bad value, and the operator still works afterwards. */
static void check_apply_errors(adj_test *t) {
  int64_t global[1] = {21};
  int shape[1] = {t->size};
  adj_partition *p = NULL;
  adj_decomposition *x = NULL, *y = NULL;
  ADJ_TEST_OK(t, adj_partition_create(t->comm, 1, shape, t->size, NULL, &p));
  ADJ_TEST_OK(t, adj_decomposition_create(p, 1, global, &x));
  y = whole_on(t, t->comm, 0, 1, global);
  adj_op *op = NULL;
  ADJ_TEST_OK(t, adj_repartition_create(ADJ_FLOAT64, x, y, &op));
  adj_tensor in, out, bad;
  ADJ_TEST_OK(t, adj_op_create_domain_tensor(op, &in));
  ADJ_TEST_OK(t, adj_op_create_range_tensor(op, &out));
  bool culprit = t->rank == t->size - 1;
  int64_t wrong = in.shape[0] + 2;
  ADJ_TEST_OK(t, adj_tensor_create(&bad, culprit ? ADJ_FLOAT32 : ADJ_FLOAT64, 1, in.shape));
  adj_test_expect_error(t, "dtype mismatch on one rank", adj_op_forward(op, &bad, &out), ADJ_TEST_ANY_ERROR,
                        "dtype float32");
  adj_tensor_destroy(&bad);
  ADJ_TEST_OK(t, adj_tensor_create(&bad, ADJ_FLOAT64, 1, culprit ? &wrong : in.shape));
  int last[1] = {t->size - 1};
  char needle[64];
  long long bad_extent = (long long)adj_decomposition_block(x, last).extent[0] + 2;
  snprintf(needle, sizeof needle, "local shape [%lld] but", bad_extent);
  adj_test_expect_error(t, "local shape mismatch on one rank", adj_op_forward(op, &bad, &out), ADJ_TEST_ANY_ERROR,
                        needle);
  adj_test_expect_error(t, "local shape mismatch on one rank (adjoint)", adj_op_adjoint(op, &out, &bad),
                        ADJ_TEST_ANY_ERROR, needle);
  ADJ_TEST_OK(t, adj_op_forward(op, &in, &out));
  adj_tensor_destroy(&bad);
  adj_tensor_destroy(&in);
  adj_tensor_destroy(&out);
  adj_op_destroy(&op);
  adj_decomposition_destroy(&x);
  adj_decomposition_destroy(&y);
  adj_partition_destroy(&p);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t220-repartition");
  int ran = movement_run_family(&t, "repartition", movement_check_permutation);
  ADJ_TEST_CHECK(&t, ran > 0, "no repartition case fits %d ranks", t.size);
  check_create_errors(&t);
  check_apply_errors(&t);
  return adj_test_finish(&t);
}
