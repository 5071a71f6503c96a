/* t210: broadcast between partitions: forward equals the sequential copy,
 * adjoint the sequential sum, the dot-product test, split-phase adjoint equals
 * blocking, counters, a root whose x and y share one buffer, and errors
 * reported on every rank without a hang. */
#include <string.h>

#include "broadcast_cases.h"

/* [1] on rank 0 -> [size] on every rank, a 7-element float64 vector. */
typedef struct root_broadcast {
  adj_partition *px, *py;
  adj_decomposition *x;
  adj_op *op;
  adj_tensor in, out;
} root_broadcast;

static void root_broadcast_create(adj_test *t, root_broadcast *r) {
  *r = (root_broadcast){0};
  ADJ_TEST_OK(t, adj_partition_create(t->comm, 1, (const int[]){1}, 1, NULL, &r->px));
  ADJ_TEST_OK(t, adj_partition_create(t->comm, 1, (const int[]){t->size}, t->size, NULL, &r->py));
  ADJ_TEST_OK(t, adj_decomposition_create(r->px, 1, (const int64_t[]){7}, &r->x));
  ADJ_TEST_OK(t, adj_broadcast_create(ADJ_FLOAT64, r->x, r->py, &r->op));
  ADJ_TEST_OK(t, adj_op_create_domain_tensor(r->op, &r->in));
  ADJ_TEST_OK(t, adj_op_create_range_tensor(r->op, &r->out));
}

static void root_broadcast_destroy(root_broadcast *r) {
  adj_tensor_destroy(&r->in);
  adj_tensor_destroy(&r->out);
  adj_op_destroy(&r->op);
  adj_decomposition_destroy(&r->x);
  adj_partition_destroy(&r->px);
  adj_partition_destroy(&r->py);
}

/* The root sends the 56-byte block, every other rank receives it: in one
 * message by MPI_Ibcast; by the chain, one per segment, and every rank but the
 * last forwards them to the next. */
static void check_counters(adj_test *t) {
  root_broadcast r;
  root_broadcast_create(t, &r);
  ADJ_TEST_OK(t, adj_op_forward(r.op, &r.in, &r.out));
  adj_op_counters k;
  adj_op_get_counters(r.op, &k);
  bool root = t->rank == 0, others = t->size > 1, chain = !strncmp(adj_op_algorithm(r.op), "chain,", 6);
  uint64_t segments = chain ? (uint64_t)chain_segments(7, 8) : 1;
  uint64_t sent = (root || chain) && t->rank < t->size - 1 && others ? segments : 0, received = !root ? segments : 0;
  uint64_t bytes_sent = sent ? 56 : 0, bytes_received = received ? 56 : 0;
  ADJ_TEST_CHECK(t, k.forward_applications == 1 && k.messages_sent == sent && k.bytes_sent == bytes_sent &&
                        k.messages_received == received && k.bytes_received == bytes_received,
                 "counters: sent %llu messages / %llu bytes, received %llu / %llu; expected %llu / %llu, %llu / %llu",
                 (unsigned long long)k.messages_sent, (unsigned long long)k.bytes_sent,
                 (unsigned long long)k.messages_received, (unsigned long long)k.bytes_received,
                 (unsigned long long)sent, (unsigned long long)bytes_sent, (unsigned long long)received,
                 (unsigned long long)bytes_received);
  adj_test_report(t, "broadcast [7] from rank 0 by '%s': rank %d sent %llu B in %llu messages", adj_op_algorithm(r.op),
                  t->rank, (unsigned long long)k.bytes_sent, (unsigned long long)k.messages_sent);
  root_broadcast_destroy(&r);
}

/* The root may give one buffer as its x and as its own copy in y, as
 * MPI_Bcast's root does; the operator then skips its local copy, and both
 * directions must still be right. */
static void check_aliased_root(adj_test *t) {
  root_broadcast r;
  root_broadcast_create(t, &r);
  adj_tensor view, *y = &r.out;
  if (t->rank == 0) {
    ADJ_TEST_OK(t, adj_tensor_view(&view, ADJ_FLOAT64, 1, adj_op_range_shape(r.op), r.in.data));
    y = &view;
    for (int64_t i = 0; i < 7; i++) adj_tensor_set(&r.in, i, (double)(i + 1));
  }
  ADJ_TEST_OK(t, adj_op_forward(r.op, &r.in, y));
  for (int64_t i = 0; i < 7; i++)
    ADJ_TEST_CHECK(t, adj_tensor_get(y, i) == (double)(i + 1), "aliased root: forward y[%lld] = %g, expected %g",
                   (long long)i, adj_tensor_get(y, i), (double)(i + 1));
  ADJ_TEST_OK(t, adj_op_adjoint(r.op, y, &r.in));
  for (int64_t i = 0; t->rank == 0 && i < 7; i++)
    ADJ_TEST_CHECK(t, adj_tensor_get(&r.in, i) == (double)(t->size * (i + 1)),
                   "aliased root: adjoint x[%lld] = %g, expected %g", (long long)i, adj_tensor_get(&r.in, i),
                   (double)(t->size * (i + 1)));
  if (t->rank == 0) adj_tensor_destroy(&view);
  root_broadcast_destroy(&r);
}

/* Errors every rank finds from the shared arguments. */
static void check_argument_errors(adj_test *t) {
  adj_partition *a = NULL, *b = NULL;
  adj_decomposition *x = NULL;
  adj_op *op = NULL;
  if (t->size >= 3) {
    ADJ_TEST_OK(t, adj_partition_create(t->comm, 2, (const int[]){2, 1}, 2, NULL, &a));
    ADJ_TEST_OK(t, adj_partition_create(t->comm, 2, (const int[]){3, 1}, 3, NULL, &b));
    ADJ_TEST_OK(t, adj_decomposition_create(a, 2, (const int64_t[]){4, 4}, &x));
    adj_test_expect_error(t, "broadcast [2,1] -> [3,1]", adj_broadcast_create(ADJ_FLOAT64, x, b, &op),
                          ADJ_TEST_ANY_ERROR, "source extent 2 and destination extent 3");
    ADJ_TEST_CHECK(t, op == NULL, "a failed create left an operator behind");
    adj_decomposition_destroy(&x);
    adj_partition_destroy(&a);
    adj_partition_destroy(&b);
  }
  ADJ_TEST_OK(t, adj_partition_create(t->comm, 2, (const int[]){1, 1}, 1, NULL, &a));
  ADJ_TEST_OK(t, adj_partition_create(t->comm, 1, (const int[]){1}, 1, NULL, &b));
  ADJ_TEST_OK(t, adj_decomposition_create(a, 2, (const int64_t[]){4, 4}, &x));
  adj_test_expect_error(t, "broadcast [1,1] -> [1]", adj_broadcast_create(ADJ_FLOAT64, x, b, &op), ADJ_TEST_ANY_ERROR,
                        "more dimensions (2)");
  adj_test_expect_error(t, "broadcast with dtype 7", adj_broadcast_create((adj_dtype)7, x, a, &op), ADJ_TEST_ANY_ERROR,
                        "invalid dtype 7");
  adj_partition_destroy(&b);
  if (t->size >= 2) {
    /* Same ranks, other order: MPI_SIMILAR, not the same base. */
    MPI_Comm reversed;
    MPI_Comm_split(t->comm, 0, t->size - t->rank, &reversed);
    ADJ_TEST_OK(t, adj_partition_create(reversed, 1, (const int[]){t->size}, t->size, NULL, &b));
    adj_test_expect_error(t, "broadcast across communicators", adj_broadcast_create(ADJ_FLOAT64, x, b, &op),
                          ADJ_TEST_ANY_ERROR, "different base communicators");
    adj_partition_destroy(&b);
    MPI_Comm_free(&reversed);
  }
  adj_decomposition_destroy(&x);
  adj_partition_destroy(&a);
}

/* Bad tensors, some on one rank only: every rank must return the error (the
 * operator agrees before moving data), and the operator stays usable. */
static void check_tensor_errors(adj_test *t) {
  root_broadcast r;
  root_broadcast_create(t, &r);
  adj_tensor f32, wrong;
  adj_tensor_create(&f32, ADJ_FLOAT32, 1, adj_op_domain_shape(r.op));
  adj_tensor_create(&wrong, ADJ_FLOAT64, 1, (const int64_t[]){8});
  adj_test_expect_error(t, "float32 input on every rank", adj_op_forward(r.op, &f32, &r.out), ADJ_TEST_ANY_ERROR,
                        "has dtype float32");
  int last = t->size - 1;
  adj_test_expect_error(t, "float32 input on the last rank",
                        adj_op_forward(r.op, t->rank == last ? &f32 : &r.in, &r.out), ADJ_TEST_ANY_ERROR,
                        "has dtype float32");
  adj_test_expect_error(t, "shape [8] input on the last rank",
                        adj_op_forward(r.op, t->rank == last ? &wrong : &r.in, &r.out), ADJ_TEST_ANY_ERROR,
                        "local shape [8]");
  char prefix[32];
  snprintf(prefix, sizeof prefix, "rank %d: ", last);
  ADJ_TEST_CHECK(t, t->size == 1 || strncmp(adj_last_error(), prefix, strlen(prefix)) == 0,
                 "the agreed message '%s' does not name rank %d", adj_last_error(), last);
  adj_test_expect_error(t, "adj_op_end without begin", adj_op_end(r.op), ADJ_TEST_ANY_ERROR,
                        "without a matching adj_op_begin");
  ADJ_TEST_OK(t, adj_op_forward(r.op, &r.in, &r.out));
  adj_tensor_destroy(&f32);
  adj_tensor_destroy(&wrong);
  root_broadcast_destroy(&r);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t210-broadcast");
  bcast_check_table(&t, false);
  check_counters(&t);
  check_aliased_root(&t);
  check_argument_errors(&t);
  check_tensor_errors(&t);
  return adj_test_finish(&t);
}
