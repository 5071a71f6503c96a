#include <string.h>

#include "op_check.h"
#include "movement.h"

static const double movement_sentinel = -123.0;

/* The operator's local shape is the block the reference expects. */
static bool movement_shape_is(adj_test *t, const char *label, const char *role, const adj_tensor *x,
                              const adj_box *b) {
  adj_tensor expected = {.rank = b->rank};
  memcpy(expected.shape, b->extent, sizeof b->extent);
  char s1[96], s2[96];
  bool same = adj_tensor_same_shape(x, &expected);
  ADJ_TEST_CHECK(t, same, "%s: %s has local shape %s, expected the block %s", label, role,
                 adj_shape_format(s1, sizeof s1, x->rank, x->shape),
                 adj_shape_format(s2, sizeof s2, b->rank, b->extent));
  return same;
}

/* Counts the elements of out that differ from want and reports the first. */
static void movement_compare(adj_test *t, const char *label, adj_direction direction, const adj_tensor *out,
                             const adj_tensor *want) {
  int64_t wrong = 0, first = -1;
  for (int64_t i = 0; i < adj_tensor_volume(out); i++)
    if (adj_tensor_get(out, i) != adj_tensor_get(want, i) && wrong++ == 0) first = i;
  ADJ_TEST_CHECK(t, wrong == 0, "%s: %s: %lld of %lld elements wrong, first at %lld: %g instead of %g", label,
                 direction == ADJ_FORWARD ? "forward" : "adjoint", (long long)wrong, (long long)adj_tensor_volume(out),
                 (long long)first, wrong ? adj_tensor_get(out, first) : 0.0, wrong ? adj_tensor_get(want, first) : 0.0);
}

void movement_check_map(adj_test *t, const char *label, adj_op *op, adj_direction direction, const adj_box *in_box,
                        const adj_box *out_box, const int64_t *global, double factor) {
  bool fwd = direction == ADJ_FORWARD;
  adj_tensor in, out, want;
  ADJ_TEST_OK(t, fwd ? adj_op_create_domain_tensor(op, &in) : adj_op_create_range_tensor(op, &in));
  ADJ_TEST_OK(t, fwd ? adj_op_create_range_tensor(op, &out) : adj_op_create_domain_tensor(op, &out));
  ADJ_TEST_OK(t, adj_tensor_create(&want, out.dtype, out.rank, out.shape));
  /* Both shape checks run, so every mismatch is reported; the fills need the
   * shapes right, but the application is collective and runs regardless. */
  bool in_ok = movement_shape_is(t, label, "input", &in, in_box);
  bool shapes_ok = movement_shape_is(t, label, "output", &out, out_box) && in_ok;
  if (shapes_ok) {
    adj_test_fill_global_index(&in, in_box, global);
    adj_test_fill_global_index(&want, out_box, global);
  }
  for (int64_t i = 0; i < adj_tensor_volume(&out); i++) {
    adj_tensor_set(&out, i, movement_sentinel);
    adj_tensor_set(&want, i, factor * adj_tensor_get(&want, i));
  }
  ADJ_TEST_OK(t, adj_op_apply(op, direction, &in, &out));
  if (shapes_ok) movement_compare(t, label, direction, &out, &want);
  adj_tensor_destroy(&in);
  adj_tensor_destroy(&out);
  adj_tensor_destroy(&want);
}

void movement_check_permutation(adj_test *t, const adj_battery_case *c, const movement_setup *s) {
  adj_box bx = adj_decomposition_local_block(s->x), by = adj_decomposition_local_block(s->y);
  const int64_t *global = adj_decomposition_global_shape(s->x);
  movement_check_map(t, c->name, s->op, ADJ_FORWARD, &bx, &by, global, 1.0);
  movement_check_map(t, c->name, s->op, ADJ_ADJOINT, &by, &bx, global, 1.0);
}

int movement_run_family(adj_test *t, const char *family, movement_check_fn check) {
  adj_battery b;
  ADJ_TEST_OK(t, adj_battery_build(&b));
  int ran = 0, skipped = 0;
  for (int i = 0; i < b.count; i++) {
    const adj_battery_case *c = &b.cases[i];
    if (strcmp(c->op, family)) continue;
    /* Each case runs at the one world size equal to its own, so the
     * registered sizes share the table out (the battery runs every case at
     * every size).  Bystanders come from the cases themselves: roots outside
     * the partition, disjoint worker sets, ranks no partition lists. */
    if (c->ranks != t->size) {
      skipped++;
      continue;
    }
    movement_setup s;
    int status = adj_movement_case_create(t->comm, c, &s.x, &s.y, &s.op);
    ADJ_TEST_CHECK(t, status == 0, "%s: create failed: %s", c->name, adj_last_error());
    if (status) continue;
    check(t, c, &s);
    op_check_dottest(t, c->name, s.op);
    adj_op_destroy(&s.op);
    adj_decomposition_destroy(&s.x);
    adj_decomposition_destroy(&s.y);
    ran++;
  }
  adj_test_report(t, "%s: %d cases checked on %d ranks, %d left to other sizes", family, ran, t->size, skipped);
  adj_battery_free(&b);
  return ran;
}
