/* Memory primitives: forward and adjoint of every out-of-place and in-place
 * form against the paper's block matrices applied by hand, exact; the
 * dot-product figure; and argument errors. */
#include <string.h>

#include "harness.h"

/* Applies op in direction dir to in, returning out (created by the caller). */
static void apply(adj_test *t, adj_op *op, adj_direction dir, const adj_tensor *in, adj_tensor *out) {
  if (adj_op_in_place(op)) {
    ADJ_TEST_OK(t, adj_tensor_copy(out, in));
    ADJ_TEST_OK(t, adj_op_apply(op, dir, out, out));
  } else {
    ADJ_TEST_OK(t, adj_op_apply(op, dir, in, out));
  }
}

static void check_flat(adj_test *t, adj_dtype dtype) {
  int64_t m = 5, n = 3;
  adj_tensor x, y, out;
  int64_t two_m = 2 * m, mn = m + n;
  adj_op *op;
  /* allocate: [x] -> [x; 0]; adjoint keeps the first m entries. */
  ADJ_TEST_OK(t, adj_allocate_create(dtype, m, n, &op));
  adj_tensor_create(&x, dtype, 1, &m), adj_tensor_create(&y, dtype, 1, &mn), adj_tensor_create(&out, dtype, 1, &mn);
  for (int64_t i = 0; i < m; i++) adj_tensor_set(&x, i, (double)(i + 1));
  for (int64_t i = 0; i < mn; i++) adj_tensor_set(&y, i, (double)(10 + i));
  apply(t, op, ADJ_FORWARD, &x, &out);
  for (int64_t i = 0; i < mn; i++)
    ADJ_TEST_CHECK(t, adj_tensor_get(&out, i) == (i < m ? (double)(i + 1) : 0.0), "allocate forward entry %lld", (long long)i);
  adj_tensor back;
  adj_tensor_create(&back, dtype, 1, &m);
  apply(t, op, ADJ_ADJOINT, &y, &back);
  for (int64_t i = 0; i < m; i++) ADJ_TEST_CHECK(t, adj_tensor_get(&back, i) == (double)(10 + i), "allocate adjoint entry %lld", (long long)i);
  adj_op_destroy(&op), adj_tensor_destroy(&y), adj_tensor_destroy(&out);
  /* copy: x -> [x; x]; adjoint [a; b] -> a + b. */
  ADJ_TEST_OK(t, adj_copy_create(dtype, m, &op));
  adj_tensor_create(&y, dtype, 1, &two_m), adj_tensor_create(&out, dtype, 1, &two_m);
  for (int64_t i = 0; i < two_m; i++) adj_tensor_set(&y, i, (double)(100 + i));
  apply(t, op, ADJ_FORWARD, &x, &out);
  for (int64_t i = 0; i < two_m; i++)
    ADJ_TEST_CHECK(t, adj_tensor_get(&out, i) == (double)(i % m + 1), "copy forward entry %lld", (long long)i);
  apply(t, op, ADJ_ADJOINT, &y, &back);
  for (int64_t i = 0; i < m; i++)
    ADJ_TEST_CHECK(t, adj_tensor_get(&back, i) == (double)(200 + 2 * i + m), "copy adjoint entry %lld = %g", (long long)i,
                   adj_tensor_get(&back, i));
  adj_op_destroy(&op), adj_tensor_destroy(&y), adj_tensor_destroy(&out), adj_tensor_destroy(&back), adj_tensor_destroy(&x);
}

/* In-place forms on a 4x6 tensor with boxes a = rows 0-1 cols 1-3, b = rows 2-3 cols 3-5. */
static void check_in_place(adj_test *t, adj_dtype dtype) {
  int64_t shape[2] = {4, 6};
  adj_box a = {.rank = 2, .start = {0, 1}, .extent = {2, 3}}, b = {.rank = 2, .start = {2, 3}, .extent = {2, 3}};
  adj_tensor x, out, ref;
  adj_tensor_create(&x, dtype, 2, shape), adj_tensor_create(&out, dtype, 2, shape), adj_tensor_create(&ref, dtype, 2, shape);
  for (int64_t i = 0; i < 24; i++) adj_tensor_set(&x, i, (double)(i + 1));
  for (int kind = ADJ_MEMORY_CLEAR; kind <= ADJ_MEMORY_MOVE; kind++)
    for (int dir = 0; dir < 2; dir++) {
      adj_op *op;
      ADJ_TEST_OK(t, adj_memory_in_place_create(dtype, (adj_memory_kind)kind, 2, shape, &a, &b, &op));
      apply(t, op, (adj_direction)dir, &x, &out);
      adj_tensor_copy(&ref, &x);
      /* Reference: element loops over the boxes, per the paper's formulas. */
      for (int64_t r = 0; r < 2; r++)
        for (int64_t c = 0; c < 3; c++) {
          int64_t ia = (a.start[0] + r) * 6 + a.start[1] + c, ib = (b.start[0] + r) * 6 + b.start[1] + c;
          double va = adj_tensor_get(&x, ia), vb = adj_tensor_get(&x, ib);
          double na = va, nb = vb;
          if (kind == ADJ_MEMORY_CLEAR) nb = 0;
          else if (kind == ADJ_MEMORY_ADD) dir == ADJ_FORWARD ? (nb = va + vb) : (na = va + vb);
          else if (kind == ADJ_MEMORY_COPY) dir == ADJ_FORWARD ? (nb = va) : (na = va + vb, nb = 0);
          else dir == ADJ_FORWARD ? (nb = va, na = 0) : (na = vb, nb = 0);
          adj_tensor_set(&ref, ia, na), adj_tensor_set(&ref, ib, nb);
        }
      ADJ_TEST_CHECK(t, adj_test_max_rel_diff(&out, &ref) == 0, "in-place kind %d direction %d differs from the reference", kind, dir);
      adj_dottest_result r;
      ADJ_TEST_OK(t, adj_dottest_op(op, 3, &r));
      ADJ_TEST_CHECK(t, r.relative_error < adj_dottest_tolerance(dtype, 0), "dot-product %g", r.relative_error);
      if (dir == 0) adj_test_report(t, "in-place %-16s %s: forward/adjoint exact, dot-product %.3e", adj_op_name(op),
                                    adj_dtype_name(dtype), r.relative_error);
      adj_op_destroy(&op);
    }
  adj_tensor_destroy(&x), adj_tensor_destroy(&out), adj_tensor_destroy(&ref);
}

static void check_errors(adj_test *t) {
  int64_t shape[2] = {4, 6};
  adj_box a = {.rank = 2, .start = {0, 0}, .extent = {2, 3}}, overlapping = {.rank = 2, .start = {1, 1}, .extent = {2, 3}};
  adj_box outside = {.rank = 2, .start = {3, 4}, .extent = {2, 3}};
  adj_op *op = NULL;
  int status = adj_memory_in_place_create(ADJ_FLOAT64, ADJ_MEMORY_COPY, 2, shape, &a, &overlapping, &op);
  ADJ_TEST_CHECK(t, status == ADJ_ERR_ARG && strstr(adj_last_error(), "overlap"), "overlapping boxes: '%s'", adj_last_error());
  status = adj_memory_in_place_create(ADJ_FLOAT64, ADJ_MEMORY_ADD, 2, shape, &a, &outside, &op);
  ADJ_TEST_CHECK(t, status == ADJ_ERR_ARG && strstr(adj_last_error(), "inside"), "box outside: '%s'", adj_last_error());
  status = adj_allocate_create(ADJ_FLOAT32, -2, 3, &op);
  ADJ_TEST_CHECK(t, status == ADJ_ERR_ARG && strstr(adj_last_error(), "m=-2"), "negative size: '%s'", adj_last_error());
  /* Applying with a tensor of the wrong dtype or shape is refused, naming both. */
  ADJ_TEST_OK(t, adj_copy_create(ADJ_FLOAT64, 4, &op));
  adj_tensor x32, y, x_short;
  int64_t four = 4, eight = 8, three = 3;
  adj_tensor_create(&x32, ADJ_FLOAT32, 1, &four), adj_tensor_create(&y, ADJ_FLOAT64, 1, &eight);
  adj_tensor_create(&x_short, ADJ_FLOAT64, 1, &three);
  status = adj_op_forward(op, &x32, &y);
  ADJ_TEST_CHECK(t, status == ADJ_ERR_DTYPE && strstr(adj_last_error(), "float32"), "dtype mismatch: '%s'", adj_last_error());
  status = adj_op_forward(op, &x_short, &y);
  ADJ_TEST_CHECK(t, status == ADJ_ERR_SIZE && strstr(adj_last_error(), "[3]") && strstr(adj_last_error(), "[4]"),
                 "shape mismatch: '%s'", adj_last_error());
  status = adj_op_end(op);
  ADJ_TEST_CHECK(t, status == ADJ_ERR_STATE, "end without begin must be ADJ_ERR_STATE, got %s", adj_status_name(status));
  adj_tensor_destroy(&x32), adj_tensor_destroy(&y), adj_tensor_destroy(&x_short);
  adj_op_destroy(&op);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t200-memory");
  for (int dt = 0; dt < 2; dt++) {
    check_flat(&t, (adj_dtype)dt);
    check_in_place(&t, (adj_dtype)dt);
  }
  check_errors(&t);
  return adj_test_finish(&t);
}
