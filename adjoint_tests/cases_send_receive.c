/* Battery cases for send-receive: copy and move, both directions of a pair,
 * a worker sending to itself, bystander ranks, and an empty tensor. */
#include <stdio.h>

#include "adjoin/send_receive.h"
#include "battery.h"
#include "error_impl.h"

/* params: src, dst, transfer, tensor rank, shape[rank] */
static int adj_run_send_receive(MPI_Comm comm, const adj_battery_case *c, adj_dottest_result *r) {
  adj_op *op;
  ADJ_CALL(adj_send_receive_create(comm, c->dtype, (int)c->params[0], (int)c->params[1], (int)c->params[3],
                                   &c->params[4], (adj_transfer)c->params[2], &op));
  int status = adj_dottest_op(op, c->seed + 223, r);
  adj_op_destroy(&op);
  return status;
}

typedef struct adj_send_receive_spec {
  int src, dst, ranks, rank;
  int64_t shape[3];
} adj_send_receive_spec;

static const adj_send_receive_spec adj_send_receive_cases[] = {
    {0, 1, 2, 1, {9}},       {1, 0, 2, 2, {3, 4}},    {0, 0, 1, 3, {2, 3, 4}}, {2, 0, 3, 2, {5, 1}},
    {1, 1, 3, 1, {6}},       {3, 1, 4, 3, {2, 2, 3}}, {4, 6, 7, 2, {3, 5}},    {0, 1, 2, 2, {0, 3}},
};

int adj_battery_add_send_receive(adj_battery *b) {
  static const char *const transfers[] = {"copy", "move"};
  for (size_t i = 0; i < sizeof adj_send_receive_cases / sizeof adj_send_receive_cases[0]; i++) {
    const adj_send_receive_spec *s = &adj_send_receive_cases[i];
    for (int t = 0; t < 2; t++)
      for (int k = 0; k < ADJ_BATTERY_MOVEMENT_DTYPES; k++) {
        adj_dtype dtype = adj_battery_movement_dtype(2 * (int)i + t, k);
        adj_battery_case c = {.run = adj_run_send_receive, .dtype = dtype, .ranks = s->ranks,
                              .params = {s->src, s->dst, t, s->rank, s->shape[0], s->shape[1], s->shape[2]}};
        char pair[32], shape[32];
        snprintf(pair, sizeof pair, "%s %d->%d", transfers[t], s->src, s->dst);
        adj_battery_format_int64s(shape, sizeof shape, s->rank, s->shape);
        snprintf(c.op, sizeof c.op, "send_receive");
        snprintf(c.partitions, sizeof c.partitions, "%s", pair);
        snprintf(c.shape, sizeof c.shape, "%s", shape);
        snprintf(c.name, sizeof c.name, "send_receive/%s/%s/%s", pair, shape, adj_dtype_name(c.dtype));
        ADJ_CALL(adj_battery_add(b, &c));
      }
  }
  return ADJ_SUCCESS;
}
