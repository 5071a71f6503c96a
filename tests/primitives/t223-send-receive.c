/* t223: send-receive as a copy and as a move, between the first, middle and
 * last ranks in both directions and to itself: the local shapes of
 * every rank, forward and adjoint exactly against the definitions of
 * send_receive.h, split phase against blocking, the dot-product figure, and
 * argument errors reported by every rank. */
#include <stdio.h>
#include <string.h>

#include "op_check.h"

/* The adjoint's input on rank r: distinct per rank and element. */
static double y_value(int r, int64_t j) { return (1 + r) * 1000.0 + (double)j; }

static const char *transfer_name(adj_transfer transfer) { return transfer == ADJ_TRANSFER_COPY ? "copy" : "move"; }

/* Elements of x (n of them) each rank holds in the range. */
static int64_t range_volume(adj_transfer transfer, int src, int dst, int r, int64_t n) {
  return ((r == dst) + (transfer == ADJ_TRANSFER_COPY && r == src)) * n;
}

/* x on src, adjoint output element i: what the definitions say it must be. */
static double adjoint_value(adj_transfer transfer, int src, int dst, int64_t i, int64_t n) {
  if (transfer == ADJ_TRANSFER_MOVE) return y_value(dst, i);
  return src != dst ? y_value(src, i) + y_value(dst, i) : y_value(src, i) + y_value(src, n + i);
}

static void check_values(adj_test *t, const char *label, adj_op *op, adj_transfer transfer, int src, int dst,
                         int64_t n) {
  adj_tensor x, y, back;
  ADJ_TEST_OK(t, adj_op_create_domain_tensor(op, &x));
  ADJ_TEST_OK(t, adj_op_create_range_tensor(op, &y));
  ADJ_TEST_OK(t, adj_op_create_domain_tensor(op, &back));
  ADJ_TEST_CHECK(t, adj_tensor_volume(&x) == (t->rank == src ? n : 0), "%s: domain of %lld elements on rank %d",
                 label, (long long)adj_tensor_volume(&x), t->rank);
  ADJ_TEST_CHECK(t, adj_tensor_volume(&y) == range_volume(transfer, src, dst, t->rank, n),
                 "%s: range of %lld elements on rank %d", label, (long long)adj_tensor_volume(&y), t->rank);
  for (int64_t i = 0; i < adj_tensor_volume(&x); i++) adj_tensor_set(&x, i, (double)(i + 1));
  for (int64_t j = 0; j < adj_tensor_volume(&y); j++) adj_tensor_set(&y, j, -1.0);
  ADJ_TEST_OK(t, adj_op_forward(op, &x, &y));
  int64_t wrong = 0;
  for (int64_t j = 0; j < adj_tensor_volume(&y); j++) wrong += adj_tensor_get(&y, j) != (double)(j % n + 1);
  adj_dtype dtype = adj_op_dtype(op);
  ADJ_TEST_CHECK(t, wrong == 0, "%s: forward: %lld elements wrong on rank %d", label, (long long)wrong, t->rank);
  for (int64_t j = 0; j < adj_tensor_volume(&y); j++) adj_tensor_set(&y, j, y_value(t->rank, j));
  for (int64_t i = 0; i < adj_tensor_volume(&back); i++) adj_tensor_set(&back, i, -1.0);
  ADJ_TEST_OK(t, adj_op_adjoint(op, &y, &back));
  wrong = 0;
  for (int64_t i = 0; i < adj_tensor_volume(&back); i++)
    wrong += adj_tensor_get(&back, i) != adj_test_as_dtype(dtype, adjoint_value(transfer, src, dst, i, n));
  ADJ_TEST_CHECK(t, wrong == 0, "%s: adjoint: %lld elements wrong on rank %d", label, (long long)wrong, t->rank);
  adj_tensor_destroy(&x);
  adj_tensor_destroy(&y);
  adj_tensor_destroy(&back);
}

static void check_pair(adj_test *t, adj_dtype dtype, adj_transfer transfer, int src, int dst, const int64_t *shape) {
  char label[96];
  snprintf(label, sizeof label, "%s %d->%d [%lld, %lld] on %d ranks", transfer_name(transfer), src, dst,
           (long long)shape[0], (long long)shape[1], t->size);
  adj_op *op = NULL;
  ADJ_TEST_OK(t, adj_send_receive_create(t->comm, dtype, src, dst, 2, shape, transfer, &op));
  if (!op) return;
  check_values(t, label, op, transfer, src, dst, shape[0] * shape[1]);
  /* Split phase moves the same bytes whatever the dtype: float64 suffices. */
  if (dtype == ADJ_FLOAT64) {
    op_check_split_phase(t, label, op, ADJ_FORWARD);
    op_check_split_phase(t, label, op, ADJ_ADJOINT);
  }
  op_check_dottest(t, label, op);
  adj_op_counters counters;
  adj_op_get_counters(op, &counters);
  /* Every application sends one message of x between distinct workers. */
  uint64_t applications = counters.forward_applications + counters.adjoint_applications;
  uint64_t moved = src != dst && (t->rank == src || t->rank == dst) ? applications : 0;
  uint64_t messages = counters.messages_sent + counters.messages_received;
  ADJ_TEST_CHECK(t, messages == moved, "%s: rank %d counted %llu messages for %llu", label, t->rank,
                 (unsigned long long)messages, (unsigned long long)moved);
  adj_op_destroy(&op);
}

static void check_errors(adj_test *t) {
  int64_t shape[2] = {2, 3};
  adj_op *op = NULL;
  char needle[64];
  snprintf(needle, sizeof needle, "src %d is outside the communicator of size %d", t->size, t->size);
  adj_test_expect_error(t, "src too large",
                        adj_send_receive_create(t->comm, ADJ_FLOAT64, t->size, 0, 2, shape, ADJ_TRANSFER_COPY, &op),
                        ADJ_TEST_ANY_ERROR, needle);
  adj_test_expect_error(t, "dst negative",
                        adj_send_receive_create(t->comm, ADJ_FLOAT64, 0, -2, 2, shape, ADJ_TRANSFER_MOVE, &op),
                        ADJ_TEST_ANY_ERROR, "dst -2");
  adj_test_expect_error(t, "rank 0 tensor",
                        adj_send_receive_create(t->comm, ADJ_FLOAT32, 0, 0, 0, shape, ADJ_TRANSFER_MOVE, &op),
                        ADJ_TEST_ANY_ERROR, "tensor rank 0");
  adj_test_expect_error(t, "bad transfer",
                        adj_send_receive_create(t->comm, ADJ_FLOAT32, 0, 0, 2, shape, (adj_transfer)4, &op),
                        ADJ_TEST_ANY_ERROR, "transfer 4");
  adj_test_expect_error(t, "invalid dtype",
                        adj_send_receive_create(t->comm, (adj_dtype)7, 0, 0, 2, shape, ADJ_TRANSFER_MOVE, &op),
                        ADJ_TEST_ANY_ERROR, "invalid dtype 7");
  ADJ_TEST_CHECK(t, op == NULL, "a failed create left an operator behind");
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t223-send-receive");
  /* Up and down the world, to itself, and into the middle; on small worlds
   * some pairs coincide and run twice. */
  int last = t.size - 1, pairs[4][2] = {{0, last}, {last, 0}, {last / 2, last / 2}, {last, last / 2}};
  int64_t shape[2] = {3, 4}, empty[2] = {0, 3};
  for (int dt = 0; dt < ADJ_TEST_MOVEMENT_DTYPES; dt++)
    for (int transfer = 0; transfer < 2; transfer++)
      for (int k = 0; k < 4; k++)
        check_pair(&t, adj_test_movement_dtypes[dt], (adj_transfer)transfer, pairs[k][0], pairs[k][1], shape);
  check_pair(&t, ADJ_FLOAT64, ADJ_TRANSFER_COPY, t.size - 1, 0, empty);
  check_errors(&t);
  return adj_test_finish(&t);
}
