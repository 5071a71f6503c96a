#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "op_check.h"

int op_check_make_pair(adj_op *op, adj_direction direction, adj_tensor *in, adj_tensor *out) {
  bool fwd = direction == ADJ_FORWARD;
  int status = fwd ? adj_op_create_domain_tensor(op, in) : adj_op_create_range_tensor(op, in);
  if (!status) status = fwd ? adj_op_create_range_tensor(op, out) : adj_op_create_domain_tensor(op, out);
  for (int64_t i = 0; !status && i < adj_tensor_volume(out); i++) adj_tensor_set(out, i, -123.0);
  return status;
}

void op_check_dottest(adj_test *t, const char *label, adj_op *op) {
  adj_dottest_result r = {0};
  ADJ_TEST_OK(t, adj_dottest_op(op, 2024, &r));
  double tolerance = adj_dottest_tolerance(adj_op_dtype(op), 0);
  ADJ_TEST_CHECK(t, r.relative_error <= tolerance, "%s %s: dot-product relative error %.3e exceeds %.0e", label,
                 adj_dtype_name(adj_op_dtype(op)), r.relative_error, tolerance);
  if (r.exact)
    adj_test_report(t, "  %s %s %s: exact dot-product <Fx,y> = %lld, <x,F*y> = %lld, difference %lld",
                    adj_op_name(op), label, adj_dtype_name(adj_op_dtype(op)), (long long)r.range_inner_int,
                    (long long)r.domain_inner_int, (long long)(r.range_inner_int - r.domain_inner_int));
  else
    adj_test_report(t, "  %s %s %s: dot-product relative error %.3e (<Fx,y> = %.6f)", adj_op_name(op), label,
                    adj_dtype_name(adj_op_dtype(op)), r.relative_error, r.range_inner);
}

/* Work the caller does between begin and end. */
static double local_work(int n) {
  double acc = 0;
  for (int i = 0; i < n; i++) acc += sin(0.001 * i);
  return acc;
}

void op_check_split_phase(adj_test *t, const char *label, adj_op *op, adj_direction direction) {
  adj_tensor in, blocking, split;
  ADJ_TEST_OK(t, op_check_make_pair(op, direction, &in, &blocking));
  ADJ_TEST_OK(t, adj_tensor_create(&split, blocking.dtype, blocking.rank, blocking.shape));
  int rank;
  MPI_Comm_rank(adj_op_comm(op), &rank);
  /* Non-representable-sum values, so a different summation order would show
   * (integers: values that wrap when summed, so a wrong add would show). */
  bool integer = !adj_dtype_is_float(in.dtype);
  for (int64_t i = 0; i < adj_tensor_volume(&in); i++) {
    double value = sin(1.0 + 7.0 * rank + 0.37 * i);
    adj_tensor_set(&in, i, integer ? trunc(3e9 * value) : value);
  }
  ADJ_TEST_OK(t, adj_op_apply(op, direction, &in, &blocking));
  ADJ_TEST_OK(t, adj_op_begin(op, direction, &in, &split));
  ADJ_TEST_CHECK(t, adj_op_pending(op), "%s: no application pending after adj_op_begin", label);
  volatile double sink = local_work(20000);
  (void)sink;
  ADJ_TEST_OK(t, adj_op_end(op));
  ADJ_TEST_CHECK(t, memcmp(blocking.data, split.data, adj_tensor_bytes(&split)) == 0,
                 "%s %s: split-phase %s differs from the blocking result", label, adj_op_name(op),
                 direction == ADJ_FORWARD ? "forward" : "adjoint");
  adj_tensor_destroy(&in);
  adj_tensor_destroy(&blocking);
  adj_tensor_destroy(&split);
}

void op_check_local_error(adj_test *t, int status, const char *needle, const char *what) {
  ADJ_TEST_CHECK(t, status != 0, "%s: expected an error, got success", what);
  ADJ_TEST_CHECK(t, strstr(adj_last_error(), needle) != NULL, "%s: message '%s' does not contain '%s'", what,
                 adj_last_error(), needle);
}
