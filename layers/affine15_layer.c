/* The 1.5D affine layer (affine15_layer.h):
 *
 *   X^ = G x,  W^ = B_w W,  b^ = B_b b      all-gather over P_r, broadcasts over P_c
 *   y  = X^ W^T + b^                        local GEMM, this worker's output block
 *
 *   jvp       the same chain on (dx, dW, db), product rule locally
 *   backward  local GEMM adjoints into dX^, dW^, db^;  dx = G* dX^ (reduce-scatter),
 *             grad W += B_w* dW^,  grad b += B_b* db^ (sum-reduces over P_c)
 *
 * Operator shapes: x is (N, F_in) on the P_c x P_r input partition; W (F_out,
 * F_in) lives on the P_r x 1 partition of the c = 0 workers and broadcasts onto
 * the input partition seen as P_c x P_r x 1; the bias (F_out) is seen there as
 * (F_out, 1). */
#include <stdio.h>
#include <stdlib.h>

#include "adjoin/affine15_layer.h"
#include "adjoin/all_gather.h"
#include "adjoin/broadcast.h"
#include "adjoin/affine.h"
#include "dist_layer_impl.h"
#include "fault_impl.h"

typedef struct adj_affine15_layer {
  bool works;                     /* member of the grid */
  adj_op *gather, *bcast_w, *bcast_b; /* bcast_b is NULL without bias */
  /* Work blocks at the forward point and their tangents or gradients:
   * X^ (n_c, F_in), W^ (fo_r, F_in), b^ (fo_r, 1). */
  adj_tensor x_hat, w_hat, b_hat, dx_hat, dw_hat, db_hat;
  adj_tensor b_vec, db_vec;  /* b^, db^ as the GEMM sees them: (fo_r) */
} adj_affine15_layer;

static adj_parameter *adj_affine15_bias(adj_layer *l) {
  return ((adj_affine15_layer *)l->impl)->bcast_b ? l->parameters[1] : NULL;
}

/* The bias block in the shape its broadcast sees, (fo_r, 1). */
static int adj_affine15_bias_view(const adj_affine15_layer *a, const adj_tensor *t, adj_tensor *view) {
  return adj_reshape_view(t, adj_op_domain_rank(a->bcast_b), adj_op_domain_shape(a->bcast_b), view);
}

static int adj_affine15_layer_forward(adj_layer *l, const adj_tensor *x, adj_tensor *y) {
  adj_affine15_layer *a = l->impl;
  adj_parameter *b = adj_affine15_bias(l);
  adj_tensor bv;
  if (b) ADJ_CALL(adj_affine15_bias_view(a, &b->value, &bv));
  adj_op *ops[3] = {a->gather, a->bcast_w, a->bcast_b};
  ADJ_CALL(adj_layer_move_ops(ADJ_SUCCESS, 3, ops, ADJ_FORWARD, (const adj_tensor *[3]){x, &l->parameters[0]->value, b ? &bv : NULL},
                              (adj_tensor *[3]){&a->x_hat, &a->w_hat, &a->b_hat}));
  /* A local failure here is agreed at the caller's outcome check (a network's
   * next stage, or adj_layer_forward), as no operator follows inside. */
  int status = a->works ? adj_affine_forward(&a->x_hat, &a->w_hat, b ? &a->b_vec : NULL, y) : ADJ_SUCCESS;
  return adj_fault_at(l->name, "forward local", status);
}

static int adj_affine15_layer_jvp(adj_layer *l, const adj_tensor *dx, adj_tensor *dy) {
  adj_affine15_layer *a = l->impl;
  adj_parameter *b = adj_affine15_bias(l);
  adj_tensor dbv;
  if (b) ADJ_CALL(adj_affine15_bias_view(a, &b->tangent, &dbv));
  adj_op *ops[3] = {a->gather, a->bcast_w, a->bcast_b};
  ADJ_CALL(adj_layer_move_ops(ADJ_SUCCESS, 3, ops, ADJ_FORWARD,
                              (const adj_tensor *[3]){dx, &l->parameters[0]->tangent, b ? &dbv : NULL},
                              (adj_tensor *[3]){&a->dx_hat, &a->dw_hat, &a->db_hat}));
  if (!a->works) return ADJ_SUCCESS;
  return adj_affine_jvp(&a->x_hat, &a->w_hat, dx ? &a->dx_hat : NULL, &a->dw_hat, b ? &a->db_vec : NULL, dy);
}

static int adj_affine15_layer_backward(adj_layer *l, const adj_tensor *dy, adj_tensor *dx) {
  adj_affine15_layer *a = l->impl;
  adj_parameter *w = l->parameters[0], *b = adj_affine15_bias(l);
  adj_tensor_zero(&a->dw_hat);
  if (b) adj_tensor_zero(&a->db_hat);
  /* A local failure here reaches every rank at the operators' adjoints. */
  int status = ADJ_SUCCESS;
  if (a->works)
    status = adj_affine_backward(&a->x_hat, &a->w_hat, dy, dx ? &a->dx_hat : NULL, &a->dw_hat, b ? &a->db_vec : NULL);
  status = adj_fault_at(l->name, "backward local", status);
  /* The weight and bias adjoints add into the gradients (accumulate mode). */
  adj_tensor gbv;
  if (b) ADJ_CALL(adj_affine15_bias_view(a, &b->grad, &gbv));
  adj_op *ops[3] = {a->gather, a->bcast_w, a->bcast_b};
  return adj_layer_move_ops(status, 3, ops, ADJ_ADJOINT,
                            (const adj_tensor *[3]){dx ? &a->dx_hat : NULL, &a->dw_hat, &a->db_hat},
                            (adj_tensor *[3]){dx, &w->grad, b ? &gbv : NULL});
}

static void adj_affine15_layer_free(adj_affine15_layer *a) {
  if (!a) return;
  adj_op_destroy(&a->gather), adj_op_destroy(&a->bcast_w), adj_op_destroy(&a->bcast_b);
  adj_tensor *owned[] = {&a->x_hat, &a->w_hat, &a->b_hat, &a->dx_hat, &a->dw_hat, &a->db_hat};
  for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) adj_tensor_destroy(owned[i]);
  free(a);
}

static void adj_affine15_layer_destroy(adj_layer *l) { adj_affine15_layer_free(l->impl); }
static void adj_affine15_layer_free_impl(void *a) { adj_affine15_layer_free(a); }

static const adj_layer_methods adj_affine15_methods = {adj_affine15_layer_forward, adj_affine15_layer_jvp,
                                                       adj_affine15_layer_backward, adj_affine15_layer_destroy};

/* ---- validation ------------------------------------------------------------------------- */

static int adj_affine15_validate(const char *who, const adj_affine15_layer_config *c) {
  ADJ_CALL(adj_layer_config_check(who, c, c ? c->dtype : ADJ_FLOAT64, c ? c->input : NULL));
  int rank = adj_decomposition_rank(c->input);
  ADJ_CHECK(rank == 2, ADJ_ERR_SIZE,
            "%s: the input partition has %d dimensions but the 1.5D layer takes (N, F_in) on a P_c x P_r partition",
            who, rank);
  const int *grid = adj_partition_shape(adj_decomposition_partition(c->input));
  ADJ_CHECK(c->out_features >= 1, ADJ_ERR_ARG, "%s: out_features %lld must be >= 1", who,
            (long long)c->out_features);
  ADJ_CHECK(c->out_features >= grid[1], ADJ_ERR_SIZE,
            "%s: P_r = %d row workers but only %lld output features (more workers than rows)", who, grid[1],
            (long long)c->out_features);
  return ADJ_SUCCESS;
}

/* ---- planning --------------------------------------------------------------------------- */

/* Partitions and layouts that exist only while the layer is created (the
 * layer and its parameters keep references to what they need). */
typedef struct adj_affine15_plan {
  int p_c, p_r;
  adj_partition *grid3, *owners, *weights, *biases;
  adj_decomposition *w, *b2, *b, *y;
} adj_affine15_plan;

static void adj_affine15_plan_free(adj_affine15_plan *p) {
  adj_partition **parts[] = {&p->grid3, &p->owners, &p->weights, &p->biases};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) adj_partition_destroy(parts[i]);
  adj_decomposition **layouts[] = {&p->w, &p->b2, &p->b, &p->y};
  for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) adj_decomposition_destroy(layouts[i]);
}

static int adj_affine15_layouts(const adj_affine15_layer_config *c, adj_affine15_plan *p) {
  const adj_partition *grid = adj_decomposition_partition(c->input);
  const int64_t *shape = adj_decomposition_global_shape(c->input);
  int64_t n = shape[0], f_in = shape[1], f_out = c->out_features;
  ADJ_CALL(adj_partition_reshape(grid, 3, (const int[3]){p->p_c, p->p_r, 1}, &p->grid3));
  ADJ_CALL(adj_partition_create_sub(grid, (const int[2]){0, 0}, (const int[2]){1, p->p_r}, &p->owners));
  ADJ_CALL(adj_partition_reshape(p->owners, 2, (const int[2]){p->p_r, 1}, &p->weights));
  ADJ_CALL(adj_decomposition_create(p->weights, 2, (const int64_t[2]){f_out, f_in}, &p->w));
  ADJ_CALL(adj_decomposition_create_explicit(grid, 2, (const int64_t[2]){n, f_out},
                                             (const int64_t *[2]){adj_decomposition_cuts(c->input, 0), NULL}, &p->y));
  if (c->no_bias) return ADJ_SUCCESS;
  ADJ_CALL(adj_partition_reshape(p->owners, 1, (const int[1]){p->p_r}, &p->biases));
  ADJ_CALL(adj_decomposition_create(p->weights, 2, (const int64_t[2]){f_out, 1}, &p->b2));
  return adj_decomposition_create(p->biases, 1, (const int64_t[1]){f_out}, &p->b);
}

static int adj_affine15_ops(const adj_affine15_layer_config *c, const adj_affine15_plan *p, adj_affine15_layer *a) {
  ADJ_CALL(adj_all_gather_create(c->dtype, c->input, 1, &a->gather));
  ADJ_CALL(adj_broadcast_create(c->dtype, p->w, p->grid3, &a->bcast_w));
  if (p->b2) ADJ_CALL(adj_broadcast_create(c->dtype, p->b2, p->grid3, &a->bcast_b));
  /* Every tensor the operators see is the layer's own buffer or one the layer
   * dispatcher has already checked (and agreed on) for this call. */
  adj_op *ops[] = {a->gather, a->bcast_w, a->bcast_b};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (ops[i]) adj_op_set_checks(ops[i], false);
  /* The parameter adjoints add into the gradients, which backward accumulates. */
  ADJ_CALL(adj_op_set_accumulate(a->bcast_w, ADJ_ADJOINT, true));
  if (a->bcast_b) ADJ_CALL(adj_op_set_accumulate(a->bcast_b, ADJ_ADJOINT, true));
  a->works = adj_partition_active(adj_decomposition_partition(c->input));
  return ADJ_SUCCESS;
}

/* Work buffers in the operators' shapes.  Local: the caller agrees. */
static int adj_affine15_buffers(adj_affine15_layer *a) {
  ADJ_CALL(adj_op_create_range_tensor(a->gather, &a->x_hat));
  ADJ_CALL(adj_op_create_range_tensor(a->gather, &a->dx_hat));
  ADJ_CALL(adj_op_create_range_tensor(a->bcast_w, &a->w_hat));
  ADJ_CALL(adj_op_create_range_tensor(a->bcast_w, &a->dw_hat));
  if (!a->bcast_b) return ADJ_SUCCESS;
  ADJ_CALL(adj_op_create_range_tensor(a->bcast_b, &a->b_hat));
  ADJ_CALL(adj_op_create_range_tensor(a->bcast_b, &a->db_hat));
  ADJ_CALL(adj_reshape_view(&a->b_hat, 1, a->b_hat.shape, &a->b_vec));
  return adj_reshape_view(&a->db_hat, 1, a->db_hat.shape, &a->db_vec);
}

static int adj_affine15_plan_layer(const adj_affine15_layer_config *c, adj_affine15_plan *p,
                                   adj_affine15_layer **out) {
  *out = NULL;
  adj_affine15_layer *a = calloc(1, sizeof *a);
  int status =
      adj_layer_agree(c->input, a ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "1.5D affine layer: out of memory"));
  if (!status) status = adj_affine15_layouts(c, p);
  if (!status) status = adj_affine15_ops(c, p, a);
  if (!status) status = adj_layer_agree(c->input, adj_affine15_buffers(a));
  if (status) adj_affine15_layer_free(a);
  else *out = a;
  return status;
}

int adj_affine15_layer_create(const adj_affine15_layer_config *c, adj_layer **layer) {
  static const char who[] = "1.5D affine layer";
  ADJ_CHECK(layer, ADJ_ERR_ARG, "%s: output layer pointer is NULL", who);
  *layer = NULL;
  ADJ_CALL(adj_affine15_validate(who, c));
  const int *grid = adj_partition_shape(adj_decomposition_partition(c->input));
  adj_affine15_plan p = {.p_c = grid[0], .p_r = grid[1]};
  adj_affine15_layer *a;
  int status = adj_affine15_plan_layer(c, &p, &a);
  char name[64];
  snprintf(name, sizeof name, "affine15[%dx%d]", p.p_r, p.p_c);
  if (!status)
    status = adj_layer_create_weighted(name, c->dtype, c->input, p.y, &adj_affine15_methods, a,
                                       adj_affine15_layer_free_impl, p.w, p.b, layer);
  adj_affine15_plan_free(&p);
  return status;
}

/* ---- counters --------------------------------------------------------------------------- */

static const adj_affine15_layer *adj_affine15_of(const adj_layer *l) {
  return l && l->methods.forward == adj_affine15_layer_forward ? l->impl : NULL;
}

int adj_affine15_layer_counters(const adj_layer *l, adj_affine15_counters *counters) {
  const adj_affine15_layer *a = adj_affine15_of(l);
  ADJ_CHECK(a && counters, ADJ_ERR_ARG, "1.5D affine counters: %s is not a 1.5D affine layer",
            l ? l->name : "(NULL)");
  *counters = (adj_affine15_counters){0};
  adj_op_get_counters(a->gather, &counters->gather);
  adj_op_get_counters(a->bcast_w, &counters->weight);
  if (a->bcast_b) adj_op_get_counters(a->bcast_b, &counters->bias);
  return ADJ_SUCCESS;
}

void adj_affine15_layer_reset_counters(adj_layer *l) {
  const adj_affine15_layer *a = adj_affine15_of(l);
  if (!a) return;
  adj_op_reset_counters(a->gather), adj_op_reset_counters(a->bcast_w);
  if (a->bcast_b) adj_op_reset_counters(a->bcast_b);
}

int adj_affine15_layer_ops(adj_layer *l, adj_op **gather, adj_op **weight, adj_op **bias) {
  const adj_affine15_layer *a = adj_affine15_of(l);
  ADJ_CHECK(a && gather && weight && bias, ADJ_ERR_ARG, "1.5D affine ops: %s is not a 1.5D affine layer",
            l ? l->name : "(NULL)");
  *gather = a->gather, *weight = a->bcast_w, *bias = a->bcast_b;
  return ADJ_SUCCESS;
}
