/* t212: all-sum-reduce over chosen partition dimensions: forward and adjoint
 * equal the sequential group sums (out of place and in place), the dot-product
 * test, split phase equals blocking, and shape errors on one rank fail on
 * every rank. */
#include <stdio.h>
#include <string.h>

#include "broadcast_cases.h"
#include "op_check.h"

typedef struct asr_config {
  bcast_grid grid;
  int ndims, dims[ADJ_MAX_RANK];
  int rank;
  int64_t shape[ADJ_MAX_RANK];
  bool grow0; /* dimension 0 of the block grows with grid coordinate 0 (groups differ) */
} asr_config;

#define GRID(first_, reverse_, ...)                                                                \
  ((bcast_grid){.ndim = (int)(sizeof((int[]){__VA_ARGS__}) / sizeof(int)), .shape = {__VA_ARGS__}, \
                .first = (first_), .reverse = (reverse_)})

/* Size-derived grids vanish or overflow on small worlds. */
static bool fits(const asr_config *c, int size) {
  int n = 1;
  for (int i = 0; i < c->grid.ndim; i++) n *= c->grid.shape[i];
  return n >= 1 && c->grid.first >= 0 && c->grid.first + n <= size;
}

static int asr_configs(int n, asr_config *out) {
  const asr_config all[] = {
      {GRID(0, false, n), 1, {0}, 1, {5}, false},
      {GRID(1, false, n - 1), 1, {0}, 1, {6}, false},                /* rank 0 inactive */
      {GRID(0, false, 2, n / 2), 1, {1}, 2, {3, 2}, true},           /* groups of unequal shapes */
      {GRID(0, true, 2, n / 2), 1, {0}, 1, {4}, false},
      {GRID(0, false, 2, n / 2), 2, {1, 0}, 3, {2, 2, 3}, false},
      {GRID(0, false, 2, n / 2), 0, {0}, 1, {3}, false},             /* identity */
      {GRID(n - 4, true, 2, 1, 2), 2, {0, 2}, 4, {1, 2, 3, 2}, false},
      {GRID(n - 3, false, 3, 1), 1, {0}, 2, {0, 4}, false},          /* zero volume */
      {GRID(0, false, 1, n), 1, {1}, 5, {2, 1, 2, 1, 3}, false},
      {GRID(0, false, 2, 2, 2), 2, {1, 2}, 1, {3}, true},
  };
  int count = 0;
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
    if (fits(&all[i], n)) out[count++] = all[i];
  return count;
}

static void describe(const asr_config *c, char *buf, size_t size) {
  int64_t p[ADJ_MAX_RANK], d[ADJ_MAX_RANK];
  for (int i = 0; i < c->grid.ndim; i++) p[i] = c->grid.shape[i];
  for (int i = 0; i < c->ndims; i++) d[i] = c->dims[i];
  char a[64], b[64], s[64];
  snprintf(buf, size, "P %s from rank %d%s, dims %s, block %s%s", adj_shape_format(a, sizeof a, c->grid.ndim, p),
           c->grid.first, c->grid.reverse ? " reversed" : "", adj_shape_format(b, sizeof b, c->ndims, d),
           adj_shape_format(s, sizeof s, c->rank, c->shape), c->grow0 ? " (+coordinate 0 in dim 0)" : "");
}

/* Block shape of the worker at coords. */
static void block_shape(const asr_config *c, const int *coords, int64_t *shape) {
  memcpy(shape, c->shape, sizeof c->shape);
  if (c->grow0) shape[0] += coords[0];
}

/* Whether the workers at a and b share coordinates on every dimension kept. */
static bool same_group(const asr_config *c, const int *a, const int *b) {
  for (int i = 0; i < c->grid.ndim; i++) {
    bool reduced = false;
    for (int k = 0; k < c->ndims; k++) reduced |= c->dims[k] == i;
    if (!reduced && a[i] != b[i]) return false;
  }
  return true;
}

/* Worker g holds (1 + g) + 10 i at element i; its group's sum is
 * sum(1 + g) + 10 k i over the k members. */
static void fill(adj_tensor *x, int g) {
  for (int64_t i = 0; i < adj_tensor_volume(x); i++) adj_tensor_set(x, i, (1 + g) + 10.0 * (double)i);
}

static void check_reference(adj_test *t, const asr_config *c, const char *label, const adj_partition *p, adj_op *op,
                            adj_direction direction) {
  adj_tensor in, out;
  adj_op_create_domain_tensor(op, &in);
  adj_op_create_range_tensor(op, &out);
  int g = adj_partition_active(p) ? adj_partition_index(p, adj_partition_coords(p)) : -1;
  double members = 0, offsets = 0;
  for (int m = 0; g >= 0 && m < adj_partition_size(p); m++) {
    int coords[ADJ_MAX_RANK];
    adj_partition_coords_of_index(p, m, coords);
    if (same_group(c, coords, adj_partition_coords(p))) members += 1, offsets += 1 + m;
  }
  static const char *const passes[] = {"out of place", "in place", "in place on odd ranks"};
  for (int pass = 0; pass < 3; pass++) {
    /* Pass 0 out of place, pass 1 in place (input and output the same tensor),
     * pass 2 each rank as it likes: MPI's in-place mode is all or nothing. */
    bool in_place = pass == 1 || (pass == 2 && t->rank % 2);
    adj_tensor *target = in_place ? &in : &out;
    fill(&in, g);
    ADJ_TEST_OK(t, adj_op_apply(op, direction, &in, target));
    int64_t bad = 0;
    for (int64_t i = 0; i < adj_tensor_volume(target); i++)
      bad += adj_tensor_get(target, i) != adj_test_as_dtype(target->dtype, offsets + 10.0 * members * (double)i);
    ADJ_TEST_CHECK(t, bad == 0, "%s: %lld elements differ from the group sum (%s, %s)", label, (long long)bad,
                   direction == ADJ_FORWARD ? "forward" : "adjoint", passes[pass]);
  }
  adj_tensor_destroy(&in);
  adj_tensor_destroy(&out);
}

static void check_config(adj_test *t, const asr_config *c, adj_dtype dtype, const adj_partition *p) {
  char label[256];
  describe(c, label, sizeof label);
  int64_t shape[ADJ_MAX_RANK];
  block_shape(c, adj_partition_coords(p), shape);
  adj_op *op = NULL;
  int status = adj_all_sum_reduce_create(dtype, p, c->rank, adj_partition_active(p) ? shape : NULL, c->ndims, c->dims,
                                         &op);
  ADJ_TEST_OK(t, status);
  if (status) return;
  check_reference(t, c, label, p, op, ADJ_FORWARD);
  check_reference(t, c, label, p, op, ADJ_ADJOINT);
  op_check_dottest(t, label, op);
  op_check_split_phase(t, label, op, ADJ_FORWARD);
  op_check_split_phase(t, label, op, ADJ_ADJOINT);
  adj_op_destroy(&op);
}

static void check_errors(adj_test *t) {
  adj_partition *p = NULL;
  adj_op *op = NULL;
  int n = t->size;
  ADJ_TEST_OK(t, adj_partition_create(t->comm, 1, (const int[]){n}, n, NULL, &p));
  int64_t five[1] = {5}, six[1] = {6};
  if (n >= 2) {
    /* Only the last rank passes [6]: every rank must fail, at create. */
    adj_test_expect_error(t, "shape [6] on the last rank",
                          adj_all_sum_reduce_create(ADJ_FLOAT64, p, 1, t->rank == n - 1 ? six : five, 1,
                          (const int[]){0}, &op), ADJ_TEST_ANY_ERROR, "extents 5 to 6 in dimension 0");
    ADJ_TEST_CHECK(t, op == NULL, "a failed create left an operator behind");
  }
  adj_test_expect_error(t, "dims {0, 0}",
                        adj_all_sum_reduce_create(ADJ_FLOAT64, p, 1, five, 2, (const int[]){0, 0}, &op),
                        ADJ_TEST_ANY_ERROR, "listed twice");
  adj_test_expect_error(t, "dims {2} on a 1-D partition",
                        adj_all_sum_reduce_create(ADJ_FLOAT64, p, 1, five, 1, (const int[]){2}, &op),
                        ADJ_TEST_ANY_ERROR, "dimension 2");
  adj_test_expect_error(t, "rank-0 tensor",
                        adj_all_sum_reduce_create(ADJ_FLOAT32, p, 0, five, 1, (const int[]){0}, &op),
                        ADJ_TEST_ANY_ERROR, "tensor rank 0");
  int64_t negative[1] = {-1};
  adj_test_expect_error(t, "negative extent on rank 0",
                        adj_all_sum_reduce_create(ADJ_FLOAT32, p, 1, t->rank == 0 ? negative : five, 1,
                        (const int[]){0}, &op), ADJ_TEST_ANY_ERROR, "extent -1");
  /* A wrong-shape tensor on one rank at apply time. */
  ADJ_TEST_OK(t, adj_all_sum_reduce_create(ADJ_FLOAT32, p, 1, five, 1, (const int[]){0}, &op));
  adj_tensor x, y;
  adj_tensor_create(&x, ADJ_FLOAT32, 1, t->rank == n - 1 ? six : five);
  adj_tensor_create(&y, ADJ_FLOAT32, 1, five);
  adj_test_expect_error(t, "shape [6] input on the last rank", adj_op_forward(op, &x, &y), ADJ_TEST_ANY_ERROR,
                        "local shape [6]");
  adj_tensor_destroy(&x);
  adj_tensor_destroy(&y);
  adj_op_destroy(&op);
  adj_partition_destroy(&p);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t212-all-sum-reduce");
  asr_config configs[16];
  int n = asr_configs(t.size, configs);
  adj_test_report(&t, "%d configurations on %d ranks", n, t.size);
  for (int i = 0; i < n; i++) {
    adj_partition *p = NULL;
    int status = bcast_grid_create(t.comm, &configs[i].grid, &p);
    ADJ_TEST_OK(&t, status);
    if (!status) {
      for (int k = 0; k < ADJ_TEST_MOVEMENT_DTYPES; k++) check_config(&t, &configs[i], adj_test_movement_dtypes[k], p);
    }
    adj_partition_destroy(&p);
  }
  check_errors(&t);
  return adj_test_finish(&t);
}
