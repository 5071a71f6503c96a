/* The repartition layer: the paper's "transpose" glue between layers whose
 * layouts differ.  Linear, so jvp is the operator itself and backward its
 * adjoint (the repartition back); no parameters. */
#include "adjoin/repartition_layer.h"
#include "adjoin/repartition.h"
#include "dist_layer_impl.h"

static int adj_repartition_layer_forward(adj_layer *l, const adj_tensor *x, adj_tensor *y) {
  return adj_op_forward(l->impl, x, y);
}

static int adj_repartition_layer_jvp(adj_layer *l, const adj_tensor *dx, adj_tensor *dy) {
  if (dx) return adj_op_forward(l->impl, dx, dy);
  adj_tensor_zero(dy);
  return ADJ_SUCCESS;
}

static int adj_repartition_layer_backward(adj_layer *l, const adj_tensor *dy, adj_tensor *dx) {
  return dx ? adj_op_adjoint(l->impl, dy, dx) : ADJ_SUCCESS;
}

static void adj_repartition_layer_destroy(adj_layer *l) {
  adj_op *op = l->impl;
  adj_op_destroy(&op);
}

int adj_repartition_layer_create(const adj_repartition_layer_config *c, adj_layer **layer) {
  static const char who[] = "repartition layer";
  *layer = NULL;
  ADJ_CALL(adj_layer_config_check(who, c, c ? c->dtype : ADJ_FLOAT64, c ? c->input : NULL));
  ADJ_CHECK(c->output, ADJ_ERR_ARG, "%s: the output decomposition is NULL", who);
  adj_op *op;
  ADJ_CALL(adj_repartition_create(c->dtype, c->input, c->output, &op));
  /* The layer dispatcher has already checked and agreed on x and y. */
  adj_op_set_checks(op, false);
  static const adj_layer_methods methods = {adj_repartition_layer_forward, adj_repartition_layer_jvp,
                                            adj_repartition_layer_backward, adj_repartition_layer_destroy};
  int status = adj_layer_alloc_between("repartition", c->dtype, c->input, c->output, &methods, op, layer);
  if (status) adj_op_destroy(&op);
  return status;
}
