/* t211: sum-reduce between partitions (the adjoint of a broadcast): forward
 * equals the sequential sum, adjoint the sequential copy, the dot-product test,
 * split-phase forward equals blocking, and its errors. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broadcast_cases.h"
#include "op_check.h"

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

/* Counters report what the chosen algorithm moves (include/adjoin/broadcast.h)
 * for a sum-reduce of 10 float64 over the world onto rank 0; the algorithm is
 * the one ADJ_SUM_REDUCE_ALGORITHM forces when set (the test's variants;
 * t008 checks a bad value). */
static void check_counters(adj_test *t) {
  sum_to_root w;
  sum_to_root_create(t, 10, &w);
  adj_op *op = w.op;
  const char *forced = getenv("ADJ_SUM_REDUCE_ALGORITHM"), *chosen = adj_op_algorithm(op);
  if (forced && *forced && strcmp(forced, "auto") && t->size > 1)
    ADJ_TEST_CHECK(t, strstr(chosen, forced) != NULL, "ADJ_SUM_REDUCE_ALGORITHM=%s but the operator chose '%s'",
                   forced, chosen);
  adj_tensor in, out;
  adj_op_create_domain_tensor(op, &in);
  adj_op_create_range_tensor(op, &out);
  ADJ_TEST_OK(t, adj_op_forward(op, &in, &out));
  adj_op_counters c;
  adj_op_get_counters(op, &c);
  uint64_t block = 80, own = 8 * (uint64_t)(10 / t->size + (t->rank < 10 % t->size));
  uint64_t sent = 0, received = 0, msent = 0, mreceived = 0;
  bool root_rank = t->rank == 0;
  if (t->size == 1) {
    /* the group is the source alone: a local copy */
  } else if (strstr(chosen, "chain")) {
    /* summed from the last rank towards rank 0, one message per segment */
    uint64_t segments = (uint64_t)chain_segments(10, 8);
    if (t->rank < t->size - 1) received = block, mreceived = segments;
    if (!root_rank) sent = block, msent = segments;
  } else if (strstr(chosen, "reduce-scatter")) {
    sent = block - own, msent = block > own;
    received = own, mreceived = own > 0;
    if (root_rank) received += block - own, mreceived += block > own;
    else sent += own, msent += own > 0;
  } else if (strstr(chosen, "allreduce")) {
    sent = received = block, msent = mreceived = 1;
  } else {
    if (root_rank) received = block, mreceived = 1;
    else sent = block, msent = 1;
  }
  ADJ_TEST_CHECK(t,
                 c.bytes_sent == sent && c.bytes_received == received && c.messages_sent == msent &&
                     c.messages_received == mreceived,
                 "sum-reduce of [10] onto rank 0 by '%s': counters sent %llu B / %llu msg, received %llu B / %llu msg; "
                 "expected %llu / %llu, %llu / %llu",
                 chosen, (unsigned long long)c.bytes_sent, (unsigned long long)c.messages_sent,
                 (unsigned long long)c.bytes_received, (unsigned long long)c.messages_received,
                 (unsigned long long)sent, (unsigned long long)msent, (unsigned long long)received,
                 (unsigned long long)mreceived);
  adj_test_report(t, "sum-reduce [10] onto rank 0 by '%s': rank 0 received %llu B in %llu messages", chosen,
                  (unsigned long long)c.bytes_received, (unsigned long long)c.messages_received);
  adj_tensor_destroy(&in), adj_tensor_destroy(&out);

  sum_to_root_destroy(&w);
}

/* Accumulate mode (adj_op_set_accumulate): the sum onto rank 0 adds into what
 * the output held, exactly (integer-valued float64), twice in a row, under
 * whichever algorithm the run forces; off again, it overwrites; the copying
 * direction refuses the mode on every rank alike. */
static void check_accumulate(adj_test *t) {
  enum { COUNT = 20000 }; /* several chain segments at the default 64 KB */
  sum_to_root w;
  sum_to_root_create(t, COUNT, &w);
  adj_tensor in, out;
  adj_op_create_domain_tensor(w.op, &in);
  adj_op_create_range_tensor(w.op, &out);
  for (int64_t i = 0; i < adj_tensor_volume(&in); i++) adj_tensor_set(&in, i, (double)((t->rank + 1) * (i % 97 + 1)));
  int64_t n = adj_tensor_volume(&out);
  for (int64_t i = 0; i < n; i++) adj_tensor_set(&out, i, 1000.0 + (double)i);
  double ranks_sum = (double)t->size * (t->size + 1) / 2, worst = 0;
  ADJ_TEST_OK(t, adj_op_set_accumulate(w.op, ADJ_FORWARD, true));
  for (int times = 1; times <= 2; times++) {
    ADJ_TEST_OK(t, adj_op_forward(w.op, &in, &out));
    for (int64_t i = 0; i < n; i++)
      worst = fmax(worst, fabs(adj_tensor_get(&out, i) - (1000.0 + (double)i + times * ranks_sum * (double)(i % 97 + 1))));
  }
  ADJ_TEST_OK(t, adj_op_set_accumulate(w.op, ADJ_FORWARD, false));
  ADJ_TEST_OK(t, adj_op_forward(w.op, &in, &out));
  for (int64_t i = 0; i < n; i++)
    worst = fmax(worst, fabs(adj_tensor_get(&out, i) - ranks_sum * (double)(i % 97 + 1)));
  ADJ_TEST_CHECK(t, worst == 0, "accumulating sum-reduce by '%s' off by %g", adj_op_algorithm(w.op), worst);
  adj_test_report(t, "accumulate mode, sum-reduce of [%d] by '%s': out + sum twice, then overwrite: max error %g",
                  COUNT, adj_op_algorithm(w.op), worst);
  int status = adj_op_set_accumulate(w.op, ADJ_ADJOINT, true);
  ADJ_TEST_CHECK(t, status == ADJ_ERR_ARG && strstr(adj_last_error(), "cannot accumulate"),
                 "the copying direction accepted accumulate mode: %s", adj_last_error());
  adj_tensor_destroy(&in), adj_tensor_destroy(&out);
  sum_to_root_destroy(&w);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t211-sum-reduce");
  bcast_check_table(&t, true);
  check_errors(&t);
  check_counters(&t);
  check_accumulate(&t);
  return adj_test_finish(&t);
}
