/* Composition of distributed operators: a repartition followed by a broadcast.
 * The composed forward and adjoint equal the stages applied one after the
 * other (bitwise), the split-phase form equals the blocking one, the
 * dot-product test holds, and chaining operators whose shapes do not meet is
 * an error on every rank. */
#include <string.h>

#include "error_impl.h"
#include "harness.h"

typedef struct chain {
  adj_partition *rows, *cols, *wide;
  adj_decomposition *x, *y;
  adj_op *stages[2], *composed;
} chain;

/* x: [7, 5] on a size x 1 grid -> repartition onto 1 x 2 -> broadcast onto 2 x 2. */
static int chain_create(adj_test *t, adj_dtype dtype, chain *c) {
  memset(c, 0, sizeof *c);
  int64_t global[2] = {7, 5};
  int rows[2] = {t->size, 1}, cols[2] = {1, 2}, wide[2] = {2, 2};
  ADJ_CALL(adj_partition_create(t->comm, 2, rows, t->size, NULL, &c->rows));
  ADJ_CALL(adj_partition_create(t->comm, 2, cols, 2, NULL, &c->cols));
  ADJ_CALL(adj_partition_create(t->comm, 2, wide, 4, NULL, &c->wide));
  ADJ_CALL(adj_decomposition_create(c->rows, 2, global, &c->x));
  ADJ_CALL(adj_decomposition_create(c->cols, 2, global, &c->y));
  ADJ_CALL(adj_repartition_create(dtype, c->x, c->y, &c->stages[0]));
  ADJ_CALL(adj_broadcast_create(dtype, c->y, c->wide, &c->stages[1]));
  return adj_op_compose(2, c->stages, &c->composed);
}

static void chain_destroy(chain *c) {
  adj_op_destroy(&c->composed), adj_op_destroy(&c->stages[0]), adj_op_destroy(&c->stages[1]);
  adj_decomposition_destroy(&c->x), adj_decomposition_destroy(&c->y);
  adj_partition_destroy(&c->rows), adj_partition_destroy(&c->cols), adj_partition_destroy(&c->wide);
}

static void check_chain(adj_test *t, adj_dtype dtype) {
  chain c;
  ADJ_TEST_OK(t, chain_create(t, dtype, &c));
  if (!c.composed) {
    chain_destroy(&c);
    return;
  }
  adj_tensor x, mid, y, y_split, back, back_ref;
  adj_op_create_domain_tensor(c.composed, &x), adj_op_create_range_tensor(c.composed, &y);
  adj_op_create_range_tensor(c.composed, &y_split), adj_op_create_range_tensor(c.stages[0], &mid);
  adj_op_create_domain_tensor(c.composed, &back), adj_op_create_domain_tensor(c.composed, &back_ref);
  adj_box block = adj_decomposition_local_block(c.x);
  adj_test_fill_global_index(&x, &block, adj_decomposition_global_shape(c.x));
  /* Forward: composed versus stage by stage. */
  ADJ_TEST_OK(t, adj_op_forward(c.composed, &x, &y));
  ADJ_TEST_OK(t, adj_op_forward(c.stages[0], &x, &mid));
  adj_tensor y_ref;
  adj_op_create_range_tensor(c.composed, &y_ref);
  ADJ_TEST_OK(t, adj_op_forward(c.stages[1], &mid, &y_ref));
  ADJ_TEST_CHECK(t, adj_test_max_rel_diff(&y, &y_ref) == 0, "composed forward differs from the stages applied in turn");
  /* Split phase: begin, unrelated work, end. */
  ADJ_TEST_OK(t, adj_op_begin(c.composed, ADJ_FORWARD, &x, &y_split));
  ADJ_TEST_CHECK(t, adj_op_pending(c.composed), "composition must be pending between begin and end");
  ADJ_TEST_OK(t, adj_op_end(c.composed));
  ADJ_TEST_CHECK(t, memcmp(y.data, y_split.data, adj_tensor_bytes(&y)) == 0, "split-phase forward differs from blocking");
  /* Adjoint: reversed chain of adjoints. */
  ADJ_TEST_OK(t, adj_op_adjoint(c.composed, &y, &back));
  ADJ_TEST_OK(t, adj_op_adjoint(c.stages[1], &y, &mid));
  ADJ_TEST_OK(t, adj_op_adjoint(c.stages[0], &mid, &back_ref));
  ADJ_TEST_CHECK(t, adj_test_max_rel_diff(&back, &back_ref) == 0, "composed adjoint differs from the reversed adjoints");
  adj_dottest_result r;
  ADJ_TEST_OK(t, adj_dottest_op(c.composed, 11, &r));
  ADJ_TEST_CHECK(t, r.relative_error < adj_dottest_tolerance(dtype, 0), "dot-product %.3e", r.relative_error);
  adj_op_counters counters;
  adj_op_get_counters(c.composed, &counters);
  adj_test_report(t, "repartition then broadcast, %s, %d ranks: exact against the stages, dot-product %.3e, "
                  "rank 0 sent %llu bytes in %llu messages", adj_dtype_name(dtype), t->size, r.relative_error,
                  (unsigned long long)counters.bytes_sent, (unsigned long long)counters.messages_sent);
  adj_tensor *all[] = {&x, &mid, &y, &y_split, &back, &back_ref, &y_ref};
  for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) adj_tensor_destroy(all[i]);
  chain_destroy(&c);
}

/* Broadcast then the same broadcast again: the range of the first ([2,2]
 * copies) is not the domain of the second on every rank. */
static void check_mismatch(adj_test *t) {
  chain c;
  ADJ_TEST_OK(t, chain_create(t, ADJ_FLOAT64, &c));
  adj_op *bad = NULL, *pair[2] = {c.stages[1], c.stages[1]};
  int status = adj_op_compose(2, pair, &bad);
  ADJ_TEST_CHECK(t, status == ADJ_ERR_SIZE && bad == NULL && strstr(adj_last_error(), "does not match domain"),
                 "mismatched composition: %s '%s'", adj_status_name(status), adj_last_error());
  adj_op *reversed[2] = {c.stages[1], c.stages[0]};
  status = adj_op_compose(2, reversed, &bad);
  ADJ_TEST_CHECK(t, status == ADJ_ERR_SIZE, "reversed stages must not compose: %s", adj_status_name(status));
  chain_destroy(&c);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t201-compose");
  if (t.size < 4) return adj_test_skip(&t, "needs 4 ranks for the 2 x 2 broadcast");
  check_chain(&t, ADJ_FLOAT64);
  check_chain(&t, ADJ_FLOAT32);
  check_mismatch(&t);
  return adj_test_finish(&t);
}
