/* t202: the operators' check levels (full, first, off; set as the default
 * with adj_check_level_set_default, as ADJ_CHECK would).  At every
 * level a bad tensor at an agreed application is the same error on every rank;
 * at first and off a tensor that turns bad later is an error on its own rank,
 * the others complete with that rank's part taken as zeros, nobody hangs, and
 * the next good application is exact again.  A level outside the enum is
 * refused (t008: a bad ADJ_CHECK at creation on every rank).  Runs an all-sum-reduce over the world and a
 * sum-reduce onto rank 0 (sub-communicators); at full, the sum-reduce's
 * agreement alongside its data, and before it when accumulating. */
#include <stdlib.h>
#include <string.h>

#include "broadcast_cases.h"
#include "op_check.h"

enum { N = 6 };


static adj_partition *world_partition(adj_test *t) {
  adj_partition *p = NULL;
  ADJ_TEST_OK(t, adj_partition_create(t->comm, 1, (const int[]){t->size}, t->size, NULL, &p));
  return p;
}

static adj_op *make_allsum(adj_test *t, const adj_partition *p) {
  adj_op *op = NULL;
  ADJ_TEST_OK(t, adj_all_sum_reduce_create(ADJ_FLOAT64, p, 1, (const int64_t[]){N}, 1, (const int[]){0}, &op));
  return op;
}

/* x_i = rank + 1 + i, so the group sum is size*(size+1)/2 + size*i, less the
 * contribution of `missing` (-1: none). */
static void fill(adj_test *t, adj_tensor *x) {
  double *v = x->data;
  for (int i = 0; i < N; i++) v[i] = t->rank + 1 + i;
}

static void check_sum(adj_test *t, const adj_tensor *y, int missing, const char *what) {
  const double *v = y->data;
  double worst = 0;
  for (int i = 0; i < N; i++) {
    double want = t->size * (t->size + 1) / 2.0 + (double)t->size * i;
    if (missing >= 0) want -= missing + 1 + i;
    double d = v[i] > want ? v[i] - want : want - v[i];
    if (d > worst) worst = d;
  }
  ADJ_TEST_CHECK(t, worst == 0, "%s: all-sum differs from the sequential sum by %g", what, worst);
}

/* Makes `level` ("full", "first" or "off") the default of the operators
 * created next, as ADJ_CHECK would; returns it. */
static adj_check_level set_default_level(adj_test *t, const char *level) {
  adj_check_level want = !strcmp(level, "full") ? ADJ_CHECK_FULL : !strcmp(level, "first") ? ADJ_CHECK_FIRST : ADJ_CHECK_OFF;
  ADJ_TEST_OK(t, adj_check_level_set_default(want));
  return want;
}

static void check_levels_allsum(adj_test *t, const char *level) {
  adj_check_level want = set_default_level(t, level);
  adj_partition *p = world_partition(t);
  adj_op *op = make_allsum(t, p);
  ADJ_TEST_CHECK(t, adj_op_check_level(op) == want, "ADJ_CHECK=%s: operator level is %s", level,
                 adj_check_level_name(adj_op_check_level(op)));
  adj_tensor x, y, wrong;
  adj_op_create_domain_tensor(op, &x);
  adj_op_create_range_tensor(op, &y);
  adj_tensor_create(&wrong, ADJ_FLOAT64, 1, (const int64_t[]){N + 1});
  fill(t, &x);
  int bad = t->size - 1;
  char what[160];

  /* The first application: agreed at full and first. */
  int status = adj_op_forward(op, t->rank == bad ? &wrong : &x, &y);
  snprintf(what, sizeof what, "ADJ_CHECK=%s, wrong shape on rank %d at the first application", level, bad);
  if (want != ADJ_CHECK_OFF) {
    op_check_local_error(t, status, "local shape [7]", what);
  } else if (t->rank == bad) {
    op_check_local_error(t, status, "found on this rank only", what);
  } else {
    ADJ_TEST_OK(t, status);
    check_sum(t, &y, bad, what);
  }

  /* A good application is exact whatever came before, and makes one
   * agreement (none on one rank) at full, and at first too: a failed
   * agreement leaves the direction's first good application still to agree. */
  uint64_t agreements = adj_status_agreements();
  ADJ_TEST_OK(t, adj_op_forward(op, &x, &y));
  snprintf(what, sizeof what, "ADJ_CHECK=%s, good application", level);
  check_sum(t, &y, -1, what);
  uint64_t made = adj_status_agreements() - agreements, expected = want != ADJ_CHECK_OFF && t->size > 1;
  ADJ_TEST_CHECK(t, made == expected, "%s: %llu agreements, expected %llu", what, (unsigned long long)made,
                 (unsigned long long)expected);

  /* A later bad application: agreed only at full. */
  status = adj_op_forward(op, t->rank == bad ? &wrong : &x, &y);
  snprintf(what, sizeof what, "ADJ_CHECK=%s, wrong shape on rank %d at a later application", level, bad);
  if (want == ADJ_CHECK_FULL) {
    op_check_local_error(t, status, "local shape [7]", what);
  } else if (t->rank == bad) {
    op_check_local_error(t, status, "local shape [7]", what);
    op_check_local_error(t, status, "found on this rank only", what);
  } else {
    ADJ_TEST_OK(t, status);
    check_sum(t, &y, t->size > 1 ? bad : -1, what);
  }

  /* Split phase: a bad begin leaves nothing outstanding, and the next
   * application completes on every rank. */
  status = adj_op_begin(op, ADJ_FORWARD, t->rank == bad ? &wrong : &x, &y);
  if (!status) status = adj_op_end(op);
  snprintf(what, sizeof what, "ADJ_CHECK=%s, split phase with a wrong shape on rank %d", level, bad);
  if (want == ADJ_CHECK_FULL || t->rank == bad) op_check_local_error(t, status, "local shape [7]", what);
  else ADJ_TEST_OK(t, status);
  ADJ_TEST_CHECK(t, !adj_op_pending(op), "%s: an application is left outstanding", what);
  ADJ_TEST_OK(t, adj_op_forward(op, &x, &y));
  snprintf(what, sizeof what, "ADJ_CHECK=%s, good application after the errors", level);
  check_sum(t, &y, -1, what);
  adj_test_report(t, "ADJ_CHECK=%s: all-sum-reduce of [%d] on %d ranks, errors and recovery as documented", level, N,
                  t->size);

  adj_tensor_destroy(&x), adj_tensor_destroy(&y), adj_tensor_destroy(&wrong);
  adj_op_destroy(&op);
  adj_partition_destroy(&p);
}

/* A sum-reduce of [N] from every rank onto rank 0 (one sub-communicator per
 * block), created at check level `level`. */
typedef struct sum_reduce_case {
  adj_partition *world, *root;
  adj_decomposition *y;
  adj_op *op;
} sum_reduce_case;

static void sum_reduce_case_create(adj_test *t, const char *level, sum_reduce_case *c) {
  set_default_level(t, level);
  *c = (sum_reduce_case){.world = world_partition(t)};
  ADJ_TEST_OK(t, adj_partition_create(t->comm, 1, (const int[]){1}, 1, NULL, &c->root));
  ADJ_TEST_OK(t, adj_decomposition_create(c->root, 1, (const int64_t[]){N}, &c->y));
  ADJ_TEST_OK(t, adj_sum_reduce_create(ADJ_FLOAT64, c->world, c->y, &c->op));
}

static void sum_reduce_case_destroy(sum_reduce_case *c) {
  adj_op_destroy(&c->op);
  adj_decomposition_destroy(&c->y);
  adj_partition_destroy(&c->root), adj_partition_destroy(&c->world);
}

/* At first, a sum-reduce onto rank 0 (one sub-communicator per block) whose
 * leaf passes a bad tensor after the agreement: the root sums the others. */
static void check_first_sum_reduce(adj_test *t) {
  sum_reduce_case c;
  sum_reduce_case_create(t, "first", &c);
  adj_op *op = c.op;
  adj_tensor in, out, wrong;
  adj_op_create_domain_tensor(op, &in);
  adj_op_create_range_tensor(op, &out);
  adj_tensor_create(&wrong, ADJ_FLOAT32, 1, (const int64_t[]){N});
  fill(t, &in);
  ADJ_TEST_OK(t, adj_op_forward(op, &in, &out));
  if (t->rank == 0) check_sum(t, &out, -1, "sum-reduce, first application");
  int bad = t->size - 1;
  int status = adj_op_forward(op, t->rank == bad ? &wrong : &in, &out);
  if (t->rank == bad) {
    op_check_local_error(t, status, "found on this rank only", "sum-reduce, float32 tensor on the last rank later");
  } else {
    ADJ_TEST_OK(t, status);
    if (t->rank == 0) check_sum(t, &out, bad, "sum-reduce, float32 tensor on the last rank later");
  }
  ADJ_TEST_OK(t, adj_op_forward(op, &in, &out));
  if (t->rank == 0) check_sum(t, &out, -1, "sum-reduce, good application after the error");
  adj_tensor_destroy(&in), adj_tensor_destroy(&out), adj_tensor_destroy(&wrong);
  sum_reduce_case_destroy(&c);
}

/* At full, a sum-reduce onto rank 0 moves its data while the agreement
 * travels (out of place): a bad tensor on the last rank at a later
 * application is the same error on every rank, and the next good application
 * is exact.  With accumulation on, the agreement comes first instead, so the
 * failed application leaves the root's accumulated output as it was. */
static void check_full_alongside(adj_test *t) {
  sum_reduce_case c;
  sum_reduce_case_create(t, "full", &c);
  adj_op *op = c.op;
  adj_tensor in, out, kept, wrong;
  adj_op_create_domain_tensor(op, &in);
  adj_op_create_range_tensor(op, &out);
  adj_op_create_range_tensor(op, &kept);
  adj_tensor_create(&wrong, ADJ_FLOAT32, 1, (const int64_t[]){N});
  fill(t, &in);
  int bad = t->size - 1;
  for (int round = 0; round < 3; round++) {
    ADJ_TEST_OK(t, adj_op_forward(op, &in, &out));
    if (t->rank == 0) check_sum(t, &out, -1, "full, sum-reduce, good application");
    adj_test_expect_error(t, "full, sum-reduce, float32 tensor on the last rank",
                          adj_op_forward(op, t->rank == bad ? &wrong : &in, &out), ADJ_TEST_ANY_ERROR, "float32");
  }
  ADJ_TEST_OK(t, adj_op_forward(op, &in, &out));
  if (t->rank == 0) check_sum(t, &out, -1, "full, sum-reduce, good application after the errors");

  ADJ_TEST_OK(t, adj_op_set_accumulate(op, ADJ_FORWARD, true));
  memcpy(kept.data, out.data, adj_tensor_bytes(&out));
  adj_test_expect_error(t, "full, accumulating sum-reduce, float32 tensor on the last rank",
                        adj_op_forward(op, t->rank == bad ? &wrong : &in, &out), ADJ_TEST_ANY_ERROR, "float32");
  ADJ_TEST_CHECK(t, memcmp(kept.data, out.data, adj_tensor_bytes(&out)) == 0,
                 "full, accumulating sum-reduce: a failed application changed the output");
  adj_test_report(t, "ADJ_CHECK=full: sum-reduce of [%d] onto rank 0 of %d, errors alike on every rank, exact after",
                  N, t->size);
  adj_tensor_destroy(&in), adj_tensor_destroy(&out), adj_tensor_destroy(&kept), adj_tensor_destroy(&wrong);
  sum_reduce_case_destroy(&c);
}

static void check_default_and_bad_value(adj_test *t) {
  adj_check_level level = ADJ_CHECK_AUTO;
  ADJ_TEST_OK(t, adj_check_level_set_default(ADJ_CHECK_AUTO));
  ADJ_TEST_OK(t, adj_check_level_default(&level));
  ADJ_TEST_CHECK(t, level == ADJ_CHECK_FULL, "default level is %s, expected full", adj_check_level_name(level));
  adj_partition *p = world_partition(t);
  adj_op *op = make_allsum(t, p);
  ADJ_TEST_CHECK(t, adj_op_check_level(op) == ADJ_CHECK_FULL, "an operator's default level is %s",
                 adj_check_level_name(adj_op_check_level(op)));
  adj_op_set_checks(op, false);
  ADJ_TEST_CHECK(t, adj_op_check_level(op) == ADJ_CHECK_OFF, "set_checks(false) gives level %s",
                 adj_check_level_name(adj_op_check_level(op)));
  adj_op_set_checks(op, true);
  ADJ_TEST_CHECK(t, adj_op_check_level(op) == ADJ_CHECK_FULL, "set_checks(true) gives level %s",
                 adj_check_level_name(adj_op_check_level(op)));
  adj_op_destroy(&op);
  int status = adj_check_level_set_default((adj_check_level)7);
  op_check_local_error(t, status, "7 is not one of auto (0), full (1), first (2), off (3)",
                       "adj_check_level_set_default(7)");
  adj_partition_destroy(&p);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t202-check-level");
  check_default_and_bad_value(&t);
  check_levels_allsum(&t, "full");
  check_levels_allsum(&t, "first");
  check_levels_allsum(&t, "off");
  check_first_sum_reduce(&t);
  check_full_alongside(&t);
  return adj_test_finish(&t);
}
