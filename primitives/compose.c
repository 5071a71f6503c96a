/* Composition of operators: F = F_{n-1} ... F_1 F_0, F* = F_0* F_1* ... F_{n-1}*.
 *
 * Intermediate results live in buffers allocated at creation.  An in-place stage
 * runs on a copy of its input held in its own output buffer, so a composition
 * never writes into the caller's input; an identity stage passes a view of its
 * input on instead (adj_op_alias_output).  Split phase: begin runs every stage but
 * the last to completion and posts the last one; end completes it, so the last
 * stage's communication (typically a reduction) overlaps the caller's work. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/agree.h"
#include "op_impl.h"

typedef struct adj_compose {
  int n;
  adj_op **ops;           /* references */
  adj_tensor *buffers;    /* buffers[i] holds the output of stage i, i < n-1 */
} adj_compose;

static void adj_compose_destroy(adj_op *op) {
  adj_compose *c = op->impl;
  if (!c) return;
  for (int i = 0; i < c->n; i++) {
    adj_op_destroy(&c->ops[i]);
    if (c->buffers && i < c->n - 1) adj_tensor_destroy(&c->buffers[i]);
  }
  free(c->ops);
  free(c->buffers);
  free(c);
}

/* Runs stage `op` in `direction` from `in` into `out` (begin only). */
static int adj_compose_stage_begin(adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out) {
  if (op->in_place) {
    if (out->data != in->data) ADJ_CALL(adj_tensor_copy(out, in));
    return adj_op_begin(op, direction, out, out);
  }
  return adj_op_begin(op, direction, in, out);
}

static void adj_compose_sum_counters(adj_op *op) {
  adj_compose *c = op->impl;
  op->counters.bytes_sent = op->counters.bytes_received = 0;
  op->counters.messages_sent = op->counters.messages_received = 0;
  for (int i = 0; i < c->n; i++) {
    op->counters.bytes_sent += c->ops[i]->counters.bytes_sent;
    op->counters.bytes_received += c->ops[i]->counters.bytes_received;
    op->counters.messages_sent += c->ops[i]->counters.messages_sent;
    op->counters.messages_received += c->ops[i]->counters.messages_received;
  }
}

static int adj_compose_begin(adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out) {
  adj_compose *c = op->impl;
  int n = c->n;
  const adj_tensor *current = in;
  adj_tensor views[2]; /* the intermediate in hand and the one being made */
  for (int k = 0; k < n; k++) {
    /* Forward visits stages 0..n-1; the adjoint visits n-1..0. */
    int stage = direction == ADJ_FORWARD ? k : n - 1 - k;
    adj_tensor *target = out;
    if (k < n - 1) {
      /* An identity stage hands its input on as a view instead of a copy. */
      const adj_tensor *buffer = &c->buffers[direction == ADJ_FORWARD ? stage : stage - 1];
      target = &views[k % 2];
      ADJ_CALL(adj_op_alias_output(c->ops[stage], direction, current, buffer, target));
    }
    ADJ_CALL(adj_compose_stage_begin(c->ops[stage], direction, current, target));
    if (k < n - 1) ADJ_CALL(adj_op_end(c->ops[stage]));
    current = target;
  }
  return ADJ_SUCCESS;
}

static int adj_compose_end(adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out) {
  (void)in, (void)out;
  adj_compose *c = op->impl;
  int last = direction == ADJ_FORWARD ? c->n - 1 : 0;
  int status = adj_op_end(c->ops[last]);
  adj_compose_sum_counters(op);
  return status;
}

static int adj_compose_validate(int n, adj_op *const *ops) {
  ADJ_CHECK(n >= 1 && ops, ADJ_ERR_ARG, "compose: needs at least one operator, got %d", n);
  for (int i = 0; i < n; i++) ADJ_CHECK(ops[i], ADJ_ERR_ARG, "compose: operator %d is NULL", i);
  for (int i = 0; i + 1 < n; i++) {
    const adj_op *a = ops[i], *b = ops[i + 1];
    ADJ_CHECK(a->dtype == b->dtype, ADJ_ERR_DTYPE, "compose: operator %d (%s) works in %s but operator %d (%s) in %s",
              i, a->name, adj_dtype_name(a->dtype), i + 1, b->name, adj_dtype_name(b->dtype));
    int same = a->range_rank == b->domain_rank;
    for (int d = 0; same && d < a->range_rank; d++) same = a->range_shape[d] == b->domain_shape[d];
    char s1[160], s2[160];
    ADJ_CHECK(same, ADJ_ERR_SIZE, "compose: range %s of operator %d (%s) does not match domain %s of operator %d (%s)",
              adj_shape_format(s1, sizeof s1, a->range_rank, a->range_shape), i, a->name,
              adj_shape_format(s2, sizeof s2, b->domain_rank, b->domain_shape), i + 1, b->name);
  }
  return ADJ_SUCCESS;
}

int adj_op_compose(int n, adj_op *const *ops, adj_op **composed) {
  ADJ_CHECK(composed, ADJ_ERR_ARG, "compose: output operator pointer is NULL");
  *composed = NULL;
  /* A shape mismatch can be local to one rank: agree before going further. */
  int local = adj_compose_validate(n, ops);
  MPI_Comm base = (n >= 1 && ops && ops[0]) ? ops[0]->comm : MPI_COMM_WORLD;
  ADJ_CALL(adj_status_agree(base, local, ADJ_WAIT_YIELD));
  adj_compose *c = calloc(1, sizeof *c);
  if (c) {
    c->ops = calloc((size_t)n, sizeof *c->ops);
    c->buffers = calloc((size_t)n, sizeof *c->buffers);
  }
  int status = (c && c->ops && c->buffers) ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "compose: out of memory");
  for (int i = 0; status == ADJ_SUCCESS && i + 1 < n; i++)
    status = adj_op_create_range_tensor(ops[i], &c->buffers[i]);
  status = adj_status_agree(base, status, ADJ_WAIT_YIELD);
  if (status) {
    if (c) {
      for (int i = 0; c->buffers && i + 1 < n; i++) adj_tensor_destroy(&c->buffers[i]);
      free(c->ops);
      free(c->buffers);
      free(c);
    }
    return status;
  }
  c->n = n;
  for (int i = 0; i < n; i++) c->ops[i] = adj_op_reference(ops[i]);
  char name[64];
  snprintf(name, sizeof name, "compose(%d)", n);
  static const adj_op_methods methods = {adj_compose_begin, adj_compose_end, adj_compose_destroy};
  adj_op *op;
  status = adj_op_alloc(name, base, ops[0]->dtype, ops[0]->domain_rank, ops[0]->domain_shape, ops[n - 1]->range_rank,
                        ops[n - 1]->range_shape, &methods, c, &op);
  if (status) {
    adj_op tmp = {.impl = c};
    adj_compose_destroy(&tmp);
    return status;
  }
  /* An identity where every stage is one: it moves nothing and y = x. */
  op->identity = true;
  for (int i = 0; i < n; i++) op->identity = op->identity && ops[i]->identity;
  *composed = op;
  return ADJ_SUCCESS;
}
