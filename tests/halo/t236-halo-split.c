/* Split-phase halo exchange (adj_op_begin, local work, adj_op_end) gives
 * bit-for-bit the blocking result, forward and adjoint, on every configuration
 * of the shared table that fits the run; the operator reports itself pending
 * in between. */
#include <string.h>

#include "halo_common.h"

static double fill_value(int index, int64_t i) { return (double)((index * 131 + i * 17) % 29) - 14.0 + 0.25; }

/* Work the caller overlaps with the exchange; it must not touch the tensor. */
static double overlap_work(int64_t n) {
  double acc = 0.0;
  for (int64_t i = 0; i < n; i++) acc += (double)(i % 7) * 0.5;
  return acc;
}

static int run_direction(adj_test *t, const halo_setup *s, adj_direction direction) {
  adj_tensor blocking, split;
  ADJ_TEST_OK(t, adj_op_create_domain_tensor(s->op, &blocking));
  ADJ_TEST_OK(t, adj_op_create_domain_tensor(s->op, &split));
  for (int64_t i = 0; i < adj_tensor_volume(&blocking); i++) adj_tensor_set(&blocking, i, fill_value(s->index, i));
  ADJ_TEST_OK(t, adj_tensor_copy(&split, &blocking));
  ADJ_TEST_OK(t, adj_op_apply(s->op, direction, &blocking, &blocking));
  ADJ_TEST_OK(t, adj_op_begin(s->op, direction, &split, &split));
  ADJ_TEST_CHECK(t, adj_op_pending(s->op), "%s: the operator must be pending between begin and end", s->c->name);
  double work = overlap_work(20000);
  ADJ_TEST_OK(t, adj_op_end(s->op));
  ADJ_TEST_CHECK(t, !adj_op_pending(s->op) && work > 0, "%s: still pending after end", s->c->name);
  int same = !memcmp(blocking.data, split.data, adj_tensor_bytes(&blocking));
  ADJ_TEST_CHECK(t, same, "%s %s: split phase differs from blocking on worker %d", s->c->name,
                 direction == ADJ_FORWARD ? "forward" : "adjoint", s->index);
  adj_tensor_destroy(&blocking);
  adj_tensor_destroy(&split);
  return same;
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t236-halo-split");
  for (int i = 0; i < halo_case_count(); i++) {
    const halo_case *c = halo_case_get(i);
    if (halo_case_workers(c) > t.size) continue;
    halo_setup s;
    int status = halo_setup_create(c, ADJ_FLOAT64, &s);
    ADJ_TEST_CHECK(&t, status == 0, "%s: setup failed: %s", c->name, adj_last_error());
    if (!status) {
      int same = run_direction(&t, &s, ADJ_FORWARD);
      same &= run_direction(&t, &s, ADJ_ADJOINT);
      adj_test_report(&t, "%-30s on %d of %d ranks: split phase %s blocking (forward and adjoint)", c->name, s.workers,
                      t.size, halo_sum(t.comm, !same) ? "DIFFERS from" : "equals");
    }
    halo_setup_destroy(&s);
  }
  return adj_test_finish(&t);
}
