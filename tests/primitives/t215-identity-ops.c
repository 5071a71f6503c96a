/* t215: operators whose source and destination coincide report themselves as
 * identities (op.h) and cost nothing when aliased, while staying correct when
 * applied to separate storage:
 *   - a halo exchange partitioned along the batch only (no neighbour, no halo),
 *     a broadcast and a sum-reduce between one partition and itself, a
 *     repartition to the same layout and an all-sum-reduce over a dimension
 *     of one worker are identities on every rank, and so is a composition of
 *     identities (one that holds a non-identity is not); their
 *     partitioned-across-workers counterparts are not (on more than one rank);
 *   - applied to separate tensors, an identity copies exactly (forward and
 *     adjoint) and passes the dot-product test (figure printed);
 *   - aliased (adj_op_alias_output / adj_op_alias_input), the view shares the
 *     other tensor's storage, the application moves no byte and leaves the data
 *     as it was, in accumulate mode too; a non-identity's alias is its buffer. */
#include <string.h>

#include "op_check.h"

/* Forward and adjoint through separate tensors equal their input bit for bit
 * (an in-place operator has no separate output). */
static void check_copies(adj_test *t, const char *label, adj_op *op) {
  if (adj_op_in_place(op)) return;
  for (int d = 0; d < 2; d++) {
    adj_direction direction = d ? ADJ_ADJOINT : ADJ_FORWARD;
    adj_tensor in, out;
    ADJ_TEST_OK(t, op_check_make_pair(op, direction, &in, &out));
    for (int64_t i = 0; i < adj_tensor_volume(&in); i++) adj_tensor_set(&in, i, 0.5 + (double)i + 100.0 * t->rank);
    ADJ_TEST_OK(t, adj_op_apply(op, direction, &in, &out));
    ADJ_TEST_CHECK(t, adj_tensor_bytes(&in) == adj_tensor_bytes(&out) && !memcmp(in.data, out.data, adj_tensor_bytes(&in)),
                   "%s: %s through separate storage is not a copy on rank %d", label, d ? "adjoint" : "forward",
                   t->rank);
    adj_tensor_destroy(&in);
    adj_tensor_destroy(&out);
  }
}

/* The alias calls name the input's (output's) own storage, and applying to it
 * moves nothing: the counters record the applications and no byte. */
static void check_alias(adj_test *t, const char *label, adj_op *op) {
  adj_tensor in, buffer, view;
  ADJ_TEST_OK(t, op_check_make_pair(op, ADJ_FORWARD, &in, &buffer));
  for (int64_t i = 0; i < adj_tensor_volume(&in); i++) adj_tensor_set(&in, i, 1.0 + (double)i);
  adj_op_reset_counters(op);
  ADJ_TEST_OK(t, adj_op_alias_output(op, ADJ_FORWARD, &in, &buffer, &view));
  ADJ_TEST_CHECK(t, view.data == in.data, "%s: the forward's aliased output is not the input's storage", label);
  ADJ_TEST_OK(t, adj_op_forward(op, &in, &view));
  ADJ_TEST_OK(t, adj_op_alias_input(op, ADJ_ADJOINT, &in, &buffer, &view));
  ADJ_TEST_CHECK(t, view.data == in.data, "%s: the adjoint's aliased input is not the output's storage", label);
  ADJ_TEST_OK(t, adj_op_adjoint(op, &view, &in));
  int64_t wrong = 0;
  for (int64_t i = 0; i < adj_tensor_volume(&in); i++) wrong += adj_tensor_get(&in, i) != 1.0 + (double)i;
  adj_op_counters k;
  adj_op_get_counters(op, &k);
  uint64_t moved = k.bytes_sent + k.bytes_received + k.messages_sent + k.messages_received;
  ADJ_TEST_CHECK(t, wrong == 0 && moved == 0 && k.forward_applications == 1 && k.adjoint_applications == 1,
                 "%s: aliased applications on rank %d: %lld values changed, %llu bytes and messages counted", label,
                 t->rank, (long long)wrong, (unsigned long long)moved);
  adj_test_report(t, "  %s: aliased forward and adjoint on rank 0 counted %llu bytes and messages, changed %lld values",
                  label, (unsigned long long)moved, (long long)wrong);
  adj_tensor_destroy(&in);
  adj_tensor_destroy(&buffer);
}

/* The summing direction in accumulate mode: separate storage adds the input
 * into the output; aliased storage, where the caller has already added, stays. */
static void check_accumulate(adj_test *t, const char *label, adj_op *op, adj_direction summing) {
  adj_tensor in, out;
  ADJ_TEST_OK(t, op_check_make_pair(op, summing, &in, &out));
  for (int64_t i = 0; i < adj_tensor_volume(&in); i++) adj_tensor_set(&in, i, 2.0 + (double)i);
  for (int64_t i = 0; i < adj_tensor_volume(&out); i++) adj_tensor_set(&out, i, 10.0);
  ADJ_TEST_OK(t, adj_op_set_accumulate(op, summing, true));
  ADJ_TEST_OK(t, adj_op_apply(op, summing, &in, &out));
  int64_t wrong = 0;
  for (int64_t i = 0; i < adj_tensor_volume(&out); i++) wrong += adj_tensor_get(&out, i) != 12.0 + (double)i;
  ADJ_TEST_OK(t, adj_op_apply(op, summing, &out, &out));
  for (int64_t i = 0; i < adj_tensor_volume(&out); i++) wrong += adj_tensor_get(&out, i) != 12.0 + (double)i;
  ADJ_TEST_OK(t, adj_op_set_accumulate(op, summing, false));
  ADJ_TEST_CHECK(t, wrong == 0, "%s: accumulate mode: %lld values wrong on rank %d", label, (long long)wrong, t->rank);
  adj_tensor_destroy(&in);
  adj_tensor_destroy(&out);
}

/* Whether every rank's identity flag is `expected`; prints how many ranks are identities. */
static void check_flag(adj_test *t, const char *label, adj_op *op, bool expected) {
  int mine = adj_op_is_identity(op) ? 1 : 0, count = 0;
  MPI_Allreduce(&mine, &count, 1, MPI_INT, MPI_SUM, t->comm);
  ADJ_TEST_CHECK(t, mine == (int)expected, "%s: rank %d reports identity %d, expected %d", label, t->rank, mine,
                 (int)expected);
  adj_test_report(t, "%s on %d ranks: identity on %d", label, t->size, count);
}

/* An identity: flag, copies, dot-product figure, aliasing. */
static void check_identity(adj_test *t, const char *label, adj_op *op) {
  check_flag(t, label, op, true);
  check_copies(t, label, op);
  op_check_dottest(t, label, op);
  check_alias(t, label, op);
}

/* Not an identity: flag, and the alias is the buffer. */
static void check_not_identity(adj_test *t, const char *label, adj_op *op) {
  check_flag(t, label, op, false);
  adj_tensor in, buffer, view;
  ADJ_TEST_OK(t, op_check_make_pair(op, ADJ_FORWARD, &in, &buffer));
  ADJ_TEST_OK(t, adj_op_alias_output(op, ADJ_FORWARD, &in, &buffer, &view));
  ADJ_TEST_CHECK(t, view.data == buffer.data, "%s: a non-identity's alias is not its buffer", label);
  op_check_dottest(t, label, op);
  adj_tensor_destroy(&in);
  adj_tensor_destroy(&buffer);
}

/* (N, C, H, W) = (2 size, 3, 6, 5), 3x3 kernel with padding 1, over parts. */
static void check_halo(adj_test *t, const int *parts, bool identity) {
  char label[96];
  snprintf(label, sizeof label, "halo [%d,%d,%d,%d] of (%d,3,6,5) 3x3 pad 1", parts[0], parts[1], parts[2], parts[3],
           2 * t->size);
  adj_partition *p = NULL;
  adj_decomposition *x = NULL;
  adj_halo_geometry *g = NULL;
  adj_op *op = NULL;
  adj_halo_kernel kernel = {.size = {1, 1, 3, 3}, .padding = {{0, 0}, {0, 0}, {1, 1}, {1, 1}}};
  ADJ_TEST_OK(t, adj_partition_create(t->comm, 4, parts, t->size, NULL, &p));
  ADJ_TEST_OK(t, adj_decomposition_create(p, 4, (const int64_t[]){2 * t->size, 3, 6, 5}, &x));
  ADJ_TEST_OK(t, adj_halo_geometry_create_for(x, &kernel, &g));
  ADJ_TEST_OK(t, adj_halo_create(ADJ_FLOAT64, p, g, &op));
  if (op && identity) check_identity(t, label, op);
  else if (op) check_not_identity(t, label, op);
  adj_op_destroy(&op);
  adj_halo_geometry_destroy(&g);
  adj_decomposition_destroy(&x);
  adj_partition_destroy(&p);
}

/* Broadcast and sum-reduce of a (3 size + 1, 4) tensor between P = (size x 1)
 * and itself, and (on more than one rank) a broadcast from one worker to P. */
static void check_broadcasts(adj_test *t) {
  adj_partition *px = NULL, *root = NULL;
  adj_decomposition *x = NULL, *r = NULL;
  int64_t shape[2] = {3 * t->size + 1, 4};
  ADJ_TEST_OK(t, adj_partition_create(t->comm, 2, (const int[]){t->size, 1}, t->size, NULL, &px));
  ADJ_TEST_OK(t, adj_decomposition_create(px, 2, shape, &x));
  adj_op *bcast = NULL, *reduce = NULL;
  ADJ_TEST_OK(t, adj_broadcast_create(ADJ_FLOAT64, x, px, &bcast));
  ADJ_TEST_OK(t, adj_sum_reduce_create(ADJ_FLOAT64, px, x, &reduce));
  if (bcast) {
    check_identity(t, "broadcast [P,1] -> [P,1]", bcast);
    check_accumulate(t, "broadcast [P,1] -> [P,1]", bcast, ADJ_ADJOINT);
  }
  if (reduce) {
    check_identity(t, "sum-reduce [P,1] -> [P,1]", reduce);
    check_accumulate(t, "sum-reduce [P,1] -> [P,1]", reduce, ADJ_FORWARD);
  }
  adj_op_destroy(&bcast);
  adj_op_destroy(&reduce);
  if (t->size > 1) {
    ADJ_TEST_OK(t, adj_partition_create(t->comm, 2, (const int[]){1, 1}, 1, NULL, &root));
    ADJ_TEST_OK(t, adj_decomposition_create(root, 2, shape, &r));
    ADJ_TEST_OK(t, adj_broadcast_create(ADJ_FLOAT64, r, px, &bcast));
    if (bcast) check_not_identity(t, "broadcast [1,1] -> [P,1]", bcast);
    adj_op_destroy(&bcast);
  }
  adj_decomposition_destroy(&r);
  adj_partition_destroy(&root);
  adj_decomposition_destroy(&x);
  adj_partition_destroy(&px);
}

/* Repartition of a (2 size + 3, 5) tensor to the same layout made anew, and
 * (on more than one rank) to the other dimension's split. */
static void check_repartitions(adj_test *t) {
  adj_partition *rows = NULL, *cols = NULL;
  adj_decomposition *a = NULL, *b = NULL, *c = NULL;
  int64_t shape[2] = {2 * t->size + 3, 5 * t->size};
  ADJ_TEST_OK(t, adj_partition_create(t->comm, 2, (const int[]){t->size, 1}, t->size, NULL, &rows));
  ADJ_TEST_OK(t, adj_partition_create(t->comm, 2, (const int[]){1, t->size}, t->size, NULL, &cols));
  ADJ_TEST_OK(t, adj_decomposition_create(rows, 2, shape, &a));
  ADJ_TEST_OK(t, adj_decomposition_create(rows, 2, shape, &b));
  ADJ_TEST_OK(t, adj_decomposition_create(cols, 2, shape, &c));
  adj_op *same = NULL, *other = NULL;
  ADJ_TEST_OK(t, adj_repartition_create(ADJ_FLOAT64, a, b, &same));
  if (same) check_identity(t, "repartition [P,1] -> [P,1]", same);
  if (t->size > 1) {
    ADJ_TEST_OK(t, adj_repartition_create(ADJ_FLOAT64, a, c, &other));
    if (other) check_not_identity(t, "repartition [P,1] -> [1,P]", other);
  }
  adj_op_destroy(&same);
  adj_op_destroy(&other);
  adj_decomposition *all[] = {a, b, c};
  for (int i = 0; i < 3; i++) adj_decomposition_destroy(&all[i]);
  adj_partition_destroy(&rows);
  adj_partition_destroy(&cols);
}

/* All-sum-reduce of (3, 2) blocks on P = (size x 1) over dimension 1 (groups
 * of one worker) and, on more than one rank, over dimension 0. */
static void check_all_sum_reduces(adj_test *t) {
  adj_partition *p = NULL;
  ADJ_TEST_OK(t, adj_partition_create(t->comm, 2, (const int[]){t->size, 1}, t->size, NULL, &p));
  for (int dim = 1; dim >= (t->size > 1 ? 0 : 1); dim--) {
    adj_op *op = NULL;
    ADJ_TEST_OK(t, adj_all_sum_reduce_create(ADJ_FLOAT64, p, 2, (const int64_t[]){3, 2}, 1, &dim, &op));
    if (op && dim == 1) check_identity(t, "all-sum-reduce [P,1] over dimension 1", op);
    else if (op) check_not_identity(t, "all-sum-reduce [P,1] over dimension 0", op);
    adj_op_destroy(&op);
  }
  adj_partition_destroy(&p);
}

/* Compositions of the (2 size, 3 size) repartition onto its own layout:
 * twice is an identity; followed by the repartition onto the column split
 * (more than one rank) it is not, yet passes the dot-product test with its
 * identity stage handing the caller's input on as a view. */
static void check_compositions(adj_test *t) {
  adj_partition *rows = NULL, *cols = NULL;
  adj_decomposition *a = NULL, *c = NULL;
  int64_t shape[2] = {2 * t->size, 3 * t->size};
  ADJ_TEST_OK(t, adj_partition_create(t->comm, 2, (const int[]){t->size, 1}, t->size, NULL, &rows));
  ADJ_TEST_OK(t, adj_partition_create(t->comm, 2, (const int[]){1, t->size}, t->size, NULL, &cols));
  ADJ_TEST_OK(t, adj_decomposition_create(rows, 2, shape, &a));
  ADJ_TEST_OK(t, adj_decomposition_create(cols, 2, shape, &c));
  adj_op *same = NULL, *twice = NULL, *turn = NULL, *mixed = NULL;
  ADJ_TEST_OK(t, adj_repartition_create(ADJ_FLOAT64, a, a, &same));
  if (same) ADJ_TEST_OK(t, adj_op_compose(2, (adj_op *[2]){same, same}, &twice));
  if (twice) check_identity(t, "compose(repartition [P,1] -> [P,1], twice)", twice);
  if (t->size > 1 && same) {
    ADJ_TEST_OK(t, adj_repartition_create(ADJ_FLOAT64, a, c, &turn));
    if (turn) ADJ_TEST_OK(t, adj_op_compose(2, (adj_op *[2]){same, turn}, &mixed));
    if (mixed) check_not_identity(t, "compose(repartition [P,1] -> [P,1], then -> [1,P])", mixed);
  }
  adj_op *ops[] = {same, twice, turn, mixed};
  for (int i = 0; i < 4; i++) adj_op_destroy(&ops[i]);
  adj_decomposition_destroy(&a);
  adj_decomposition_destroy(&c);
  adj_partition_destroy(&rows);
  adj_partition_destroy(&cols);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t215-identity-ops");
  check_halo(&t, (const int[]){t.size, 1, 1, 1}, true);
  if (t.size > 1) check_halo(&t, (const int[]){1, 1, t.size, 1}, false);
  check_broadcasts(&t);
  check_repartitions(&t);
  check_all_sum_reduces(&t);
  check_compositions(&t);
  return adj_test_finish(&t);
}
