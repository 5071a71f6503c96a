/* The distributed affine layer (DistDL paper, section 4, "Forward Affine
 * Algorithm"), with the batch optionally partitioned:
 *
 *   x^ = B_x x,  W^ = B_w W,  b^ = B_b b     broadcasts onto the work partition
 *   y^ = x^ W^T + b^                         local GEMM (bias on fi = 0 only)
 *   y  = R y^                                sum-reduce over P_fi onto P_b x P_fo
 *
 *   jvp       the same chain on the tangents (dx, dW, db), product rule locally
 *   backward  dy^ = R* dy;  local GEMM adjoints;  dx = B_x* dx^,
 *             grad W += B_w* dW^,  grad b += B_b* db^
 *
 * Shapes: x is (N, F_in) on P_x = P_b x P_fi, seen by the operators as
 * (N, 1, F_in) on P_b x 1 x P_fi so it broadcasts along P_fo; W (F_out, F_in)
 * on P_r = P_fo x P_fi broadcasts along P_b; y^ (N, F_out) is seen as
 * (N, F_out, 1) and reduced onto P_b x P_fo x 1.  The bias (F_out) lives on
 * the fi = 0 column of P_r, seen as (F_out, 1), and goes only to the fi = 0
 * column of the work partition so the sum over P_fi adds it once. */
#include <stdio.h>
#include <stdlib.h>

#include "adjoin/affine_layer.h"
#include "adjoin/broadcast.h"
#include "adjoin/affine.h"
#include "dist_layer_impl.h"
#include "fault_impl.h"
#include "op_after_impl.h"

typedef struct adj_affine_layer {
  bool works;     /* member of the work partition */
  bool bias_here; /* ... in its fi = 0 column, where the bias is added */
  adj_op *bcast_x, *bcast_w, *bcast_b, *reduce_y; /* bcast_b is NULL without bias */
  /* Work-partition blocks at the forward point and their tangents or
   * gradients, in the operators' shapes: x^ (n, 1, fi), W^ (fo, fi),
   * b^ (fo, 1), y^ (n, fo, 1).  Unused where their operator is the identity
   * on this worker (op.h): the layer then works on a view of the caller's or
   * the parameter's block. */
  adj_tensor x_hat, w_hat, b_hat, y_hat;
  adj_tensor dx_hat, dw_hat, db_hat, dy_hat;
  /* Views: x^, W^ and b^ of the last forward (buffers or the blocks themselves). */
  adj_tensor x_point, w_point, b_point;
} adj_affine_layer;

/* ---- application ------------------------------------------------------------------------ */

/* A view of a caller's or parameter's block in the shape its operator sees. */
static int adj_affine_domain_view(const adj_op *op, const adj_tensor *t, adj_tensor *view) {
  return adj_reshape_view(t, adj_op_domain_rank(op), adj_op_domain_shape(op), view);
}
static int adj_affine_range_view(const adj_op *op, const adj_tensor *t, adj_tensor *view) {
  return adj_reshape_view(t, adj_op_range_rank(op), adj_op_range_shape(op), view);
}

/* The (rows, cols) matrix the local GEMM sees in a rank-3 operator block. */
static adj_tensor adj_affine_matrix(const adj_tensor *t, int cols_dim) {
  adj_tensor view;
  adj_tensor_view(&view, t->dtype, 2, (const int64_t[2]){t->shape[0], t->shape[cols_dim]}, t->data);
  return view;
}

/* The (fo) vector the GEMM adds in a (fo, 1) bias block, or NULL off the fi = 0 column. */
static adj_tensor *adj_affine_vector(const adj_affine_layer *a, const adj_tensor *t, adj_tensor *view) {
  if (!a->bias_here) return NULL;
  adj_tensor_view(view, t->dtype, 1, t->shape, t->data);
  return view;
}

/* The bias parameter, or NULL when the layer has none. */
static adj_parameter *adj_affine_bias(adj_layer *l) {
  return ((adj_affine_layer *)l->impl)->bcast_b ? l->parameters[1] : NULL;
}

/* The shared first half of forward and jvp: x, W and b (the values, or dx and
 * the tangents; x may be NULL for no input perturbation) broadcast onto the
 * work partition into out[], which are views of the blocks themselves where an
 * operator is the identity, else of buffers[]; then y viewed in the
 * sum-reduce's shape as yv, with y_hat the block the local GEMM writes (yv
 * itself where the sum-reduce is the identity, else y_buffer). */
static int adj_affine_spread(adj_layer *l, const adj_tensor *x, const adj_tensor *w, const adj_tensor *b,
                             adj_tensor *const *buffers, adj_tensor *const *out, const adj_tensor *y,
                             adj_tensor *y_buffer, adj_tensor *yv, adj_tensor *y_hat) {
  adj_affine_layer *a = l->impl;
  adj_tensor xv, bv;
  if (x) ADJ_CALL(adj_affine_domain_view(a->bcast_x, x, &xv));
  if (b) ADJ_CALL(adj_affine_domain_view(a->bcast_b, b, &bv));
  const adj_tensor *in[3] = {x ? &xv : NULL, w, b ? &bv : NULL};
  adj_op *ops[3] = {a->bcast_x, a->bcast_w, a->bcast_b};
  for (int i = 0; i < 3; i++)
    if (ops[i] && in[i]) ADJ_CALL(adj_op_alias_output(ops[i], ADJ_FORWARD, in[i], buffers[i], out[i]));
  ADJ_CALL(adj_layer_move_ops(ADJ_SUCCESS, 3, ops, ADJ_FORWARD, in, out));
  ADJ_CALL(adj_affine_range_view(a->reduce_y, y, yv)); /* a view of a checked tensor: fails alike everywhere */
  return adj_op_alias_input(a->reduce_y, ADJ_FORWARD, yv, y_buffer, y_hat);
}

/* x^, W^, b^ onto the work partition, then the local GEMM into y^ and the
 * sum-reduce onto y; y^ is y's block itself where that sum-reduce is the
 * identity, so the GEMM writes y directly. */
static int adj_affine_layer_forward(adj_layer *l, const adj_tensor *x, adj_tensor *y) {
  adj_affine_layer *a = l->impl;
  adj_parameter *b = adj_affine_bias(l);
  adj_tensor yv, y_hat;
  ADJ_CALL(adj_affine_spread(l, x, &l->parameters[0]->value, b ? &b->value : NULL,
                             (adj_tensor *[3]){&a->x_hat, &a->w_hat, &a->b_hat},
                             (adj_tensor *[3]){&a->x_point, &a->w_point, &a->b_point}, y, &a->y_hat, &yv, &y_hat));
  /* A local failure here reaches every rank at the sum-reduce's check. */
  int status = ADJ_SUCCESS;
  adj_tensor bias;
  if (a->works) {
    adj_tensor x_mat = adj_affine_matrix(&a->x_point, 2), y_mat = adj_affine_matrix(&y_hat, 1);
    status = adj_affine_forward(&x_mat, &a->w_point, adj_affine_vector(a, &a->b_point, &bias), &y_mat);
  }
  status = adj_fault_at(l->name, "forward local", status);
  return adj_op_apply_after(status, a->reduce_y, ADJ_FORWARD, &y_hat, &yv);
}

static int adj_affine_layer_jvp(adj_layer *l, const adj_tensor *dx, adj_tensor *dy) {
  adj_affine_layer *a = l->impl;
  adj_parameter *b = adj_affine_bias(l);
  adj_tensor dyv, dx_hat, dw_hat, db_hat, dy_hat;
  ADJ_CALL(adj_affine_spread(l, dx, &l->parameters[0]->tangent, b ? &b->tangent : NULL,
                             (adj_tensor *[3]){&a->dx_hat, &a->dw_hat, &a->db_hat},
                             (adj_tensor *[3]){&dx_hat, &dw_hat, &db_hat}, dy, &a->dy_hat, &dyv, &dy_hat));
  int status = ADJ_SUCCESS;
  adj_tensor bias;
  if (a->works) {
    adj_tensor x_mat = adj_affine_matrix(&a->x_point, 2), dy_mat = adj_affine_matrix(&dy_hat, 1);
    adj_tensor dx_mat = dx ? adj_affine_matrix(&dx_hat, 2) : (adj_tensor){0};
    status = adj_affine_jvp(&x_mat, &a->w_point, dx ? &dx_mat : NULL, &dw_hat, adj_affine_vector(a, &db_hat, &bias),
                            &dy_mat);
  }
  return adj_op_apply_after(status, a->reduce_y, ADJ_FORWARD, &dy_hat, &dyv);
}

/* Where the local backward writes dx^ and adds dW^, db^: the blocks
 * themselves (dx, the gradients) where the broadcasts are identities, else the
 * buffers, the gradient ones cleared.  dx may be NULL. */
static int adj_affine_gradient_targets(adj_affine_layer *a, adj_tensor *const *out, adj_tensor *const *targets) {
  adj_op *ops[3] = {a->bcast_x, a->bcast_w, a->bcast_b};
  adj_tensor *buffers[3] = {&a->dx_hat, &a->dw_hat, &a->db_hat};
  for (int i = 0; i < 3; i++) {
    if (!ops[i] || !out[i]) continue;
    ADJ_CALL(adj_op_alias_input(ops[i], ADJ_ADJOINT, out[i], buffers[i], targets[i]));
    if (i > 0 && !adj_op_is_identity(ops[i])) adj_tensor_zero(targets[i]);
  }
  return ADJ_SUCCESS;
}

static int adj_affine_layer_backward(adj_layer *l, const adj_tensor *dy, adj_tensor *dx) {
  adj_affine_layer *a = l->impl;
  adj_parameter *w = l->parameters[0], *b = adj_affine_bias(l);
  adj_tensor dyv, dxv, gwv, gbv, dy_hat, dx_hat, dw_hat, db_hat;
  ADJ_CALL(adj_affine_range_view(a->reduce_y, dy, &dyv));
  ADJ_CALL(adj_op_alias_output(a->reduce_y, ADJ_ADJOINT, &dyv, &a->dy_hat, &dy_hat));
  ADJ_CALL(adj_op_adjoint(a->reduce_y, &dyv, &dy_hat));
  if (dx) ADJ_CALL(adj_affine_domain_view(a->bcast_x, dx, &dxv));
  ADJ_CALL(adj_affine_domain_view(a->bcast_w, &w->grad, &gwv));
  if (b) ADJ_CALL(adj_affine_domain_view(a->bcast_b, &b->grad, &gbv));
  adj_tensor *out[3] = {dx ? &dxv : NULL, &gwv, b ? &gbv : NULL};
  ADJ_CALL(adj_affine_gradient_targets(a, out, (adj_tensor *[3]){&dx_hat, &dw_hat, &db_hat}));
  /* A local failure here reaches every rank at the broadcasts' adjoints. */
  int status = ADJ_SUCCESS;
  adj_tensor bias;
  if (a->works) {
    adj_tensor x_mat = adj_affine_matrix(&a->x_point, 2), dy_mat = adj_affine_matrix(&dy_hat, 1);
    adj_tensor dx_mat = dx ? adj_affine_matrix(&dx_hat, 2) : (adj_tensor){0};
    status = adj_affine_backward(&x_mat, &a->w_point, &dy_mat, dx ? &dx_mat : NULL, &dw_hat,
                                 adj_affine_vector(a, &db_hat, &bias));
  }
  status = adj_fault_at(l->name, "backward local", status);
  /* The weight and bias adjoints add into the gradients (accumulate mode). */
  adj_op *ops[3] = {a->bcast_x, a->bcast_w, a->bcast_b};
  return adj_layer_move_ops(status, 3, ops, ADJ_ADJOINT, (const adj_tensor *[3]){dx ? &dx_hat : NULL, &dw_hat, &db_hat},
                            out);
}

static void adj_affine_layer_free(adj_affine_layer *a) {
  if (!a) return;
  adj_op_destroy(&a->bcast_x), adj_op_destroy(&a->bcast_w), adj_op_destroy(&a->bcast_b);
  adj_op_destroy(&a->reduce_y);
  adj_tensor *owned[] = {&a->x_hat,  &a->w_hat,  &a->b_hat,  &a->y_hat, &a->dx_hat,
                         &a->dw_hat, &a->db_hat, &a->dy_hat};
  for (size_t i = 0; i < sizeof owned / sizeof owned[0]; i++) adj_tensor_destroy(owned[i]);
  free(a);
}

static void adj_affine_layer_destroy(adj_layer *l) { adj_affine_layer_free(l->impl); }
static void adj_affine_layer_free_impl(void *a) { adj_affine_layer_free(a); }

/* ---- validation ------------------------------------------------------------------------- */

static int adj_affine_validate(const char *who, const adj_affine_layer_config *c, int base_size) {
  ADJ_CALL(adj_layer_config_check(who, c, c ? c->dtype : ADJ_FLOAT64, c ? c->input : NULL));
  int rank = adj_decomposition_rank(c->input);
  ADJ_CHECK(rank == 2, ADJ_ERR_SIZE,
            "%s: the input partition has %d dimensions but affine takes (N, F_in) on a P_b x P_fi partition "
            "(flatten first)",
            who, rank);
  int64_t f_in = adj_decomposition_global_shape(c->input)[1];
  ADJ_CHECK(c->in_features == f_in, ADJ_ERR_SIZE,
            "%s: the weights take %lld input features but the input has %lld", who, (long long)c->in_features,
            (long long)f_in);
  ADJ_CHECK(c->in_features >= 1 && c->out_features >= 1, ADJ_ERR_ARG,
            "%s: in_features %lld and out_features %lld must be >= 1", who, (long long)c->in_features,
            (long long)c->out_features);
  ADJ_CHECK(c->out_parts >= 0, ADJ_ERR_ARG, "%s: out_parts %d is negative", who, c->out_parts);
  const int *px = adj_partition_shape(adj_decomposition_partition(c->input));
  int p_fo = c->out_parts ? c->out_parts : 1;
  ADJ_CHECK((int64_t)px[0] * p_fo * px[1] <= base_size, ADJ_ERR_SIZE,
            "%s: the work partition P_b x P_fo x P_fi = %d x %d x %d needs %d ranks but the communicator has %d",
            who, px[0], p_fo, px[1], px[0] * p_fo * px[1], base_size);
  return ADJ_SUCCESS;
}

/* ---- planning --------------------------------------------------------------------------- */

/* Partitions and layouts that exist only while the layer is created. */
typedef struct adj_affine_plan {
  int p_b, p_fi, p_fo;
  adj_partition *px3, *pw, *pr, *pcol, *pbias, *pwcol, *py, *py3;
  adj_decomposition *x3, *w, *b2, *b, *y, *y3;
} adj_affine_plan;

static void adj_affine_plan_free(adj_affine_plan *p) {
  adj_partition **parts[] = {&p->px3, &p->pw, &p->pr, &p->pcol, &p->pbias, &p->pwcol, &p->py, &p->py3};
  for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) adj_partition_destroy(parts[i]);
  adj_decomposition **layouts[] = {&p->x3, &p->w, &p->b2, &p->b, &p->y, &p->y3};
  for (size_t i = 0; i < sizeof layouts / sizeof layouts[0]; i++) adj_decomposition_destroy(layouts[i]);
}

static int adj_affine_partitions(const adj_affine_layer_config *c, adj_affine_plan *p) {
  const adj_partition *px = adj_decomposition_partition(c->input);
  MPI_Comm base = adj_partition_base_comm(px);
  int b = p->p_b, fi = p->p_fi, fo = p->p_fo;
  ADJ_CALL(adj_partition_reshape(px, 3, (const int[3]){b, 1, fi}, &p->px3));
  ADJ_CALL(adj_partition_create(base, 3, (const int[3]){b, fo, fi}, b * fo * fi, c->work_ranks, &p->pw));
  ADJ_CALL(adj_partition_create(base, 2, (const int[2]){fo, fi}, fo * fi, c->weight_ranks, &p->pr));
  ADJ_CALL(adj_partition_create(base, 2, (const int[2]){b, fo}, b * fo, c->output_ranks, &p->py));
  ADJ_CALL(adj_partition_reshape(p->py, 3, (const int[3]){b, fo, 1}, &p->py3));
  if (c->no_bias) return ADJ_SUCCESS;
  ADJ_CALL(adj_partition_create_sub(p->pr, (const int[2]){0, 0}, (const int[2]){fo, 1}, &p->pcol));
  ADJ_CALL(adj_partition_reshape(p->pcol, 1, (const int[1]){fo}, &p->pbias));
  return adj_partition_create_sub(p->pw, (const int[3]){0, 0, 0}, (const int[3]){b, fo, 1}, &p->pwcol);
}

/* Batch cuts and F_in cuts follow the input, so blocks line up everywhere. */
static int adj_affine_layouts(const adj_affine_layer_config *c, adj_affine_plan *p) {
  const int64_t *shape = adj_decomposition_global_shape(c->input);
  int64_t n = shape[0], f_in = shape[1], f_out = c->out_features;
  const int64_t *batch = adj_decomposition_cuts(c->input, 0), *features = adj_decomposition_cuts(c->input, 1);
  ADJ_CALL(adj_decomposition_create_explicit(p->px3, 3, (const int64_t[3]){n, 1, f_in},
                                             (const int64_t *[3]){batch, NULL, features}, &p->x3));
  ADJ_CALL(adj_decomposition_create_explicit(p->pr, 2, (const int64_t[2]){f_out, f_in},
                                             (const int64_t *[2]){NULL, features}, &p->w));
  ADJ_CALL(adj_decomposition_create_explicit(p->py, 2, (const int64_t[2]){n, f_out},
                                             (const int64_t *[2]){batch, NULL}, &p->y));
  ADJ_CALL(adj_decomposition_create_explicit(p->py3, 3, (const int64_t[3]){n, f_out, 1},
                                             (const int64_t *[3]){batch, NULL, NULL}, &p->y3));
  if (c->no_bias) return ADJ_SUCCESS;
  ADJ_CALL(adj_decomposition_create(p->pcol, 2, (const int64_t[2]){f_out, 1}, &p->b2));
  return adj_decomposition_create(p->pbias, 1, (const int64_t[1]){f_out}, &p->b);
}

static int adj_affine_ops(adj_dtype dtype, const adj_affine_plan *p, adj_affine_layer *a) {
  ADJ_CALL(adj_broadcast_create(dtype, p->x3, p->pw, &a->bcast_x));
  ADJ_CALL(adj_broadcast_create(dtype, p->w, p->pw, &a->bcast_w));
  if (p->b2) ADJ_CALL(adj_broadcast_create(dtype, p->b2, p->pwcol, &a->bcast_b));
  ADJ_CALL(adj_sum_reduce_create(dtype, p->pw, p->y3, &a->reduce_y));
  /* Every tensor the operators see is the layer's own buffer or a view of one
   * the layer dispatcher has already checked (and agreed on) for this call. */
  adj_op *ops[] = {a->bcast_x, a->bcast_w, a->bcast_b, a->reduce_y};
  for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
    if (ops[i]) adj_op_set_checks(ops[i], false);
  /* The parameter adjoints add into the gradients, which backward accumulates. */
  ADJ_CALL(adj_op_set_accumulate(a->bcast_w, ADJ_ADJOINT, true));
  if (a->bcast_b) ADJ_CALL(adj_op_set_accumulate(a->bcast_b, ADJ_ADJOINT, true));
  a->works = adj_partition_active(p->pw);
  a->bias_here = a->bcast_b && a->works && adj_partition_coords(p->pw)[2] == 0;
  return ADJ_SUCCESS;
}

/* Work buffers in the operators' shapes.  Local: the caller agrees on the
 * outcome. */
static int adj_affine_buffers(adj_affine_layer *a) {
  ADJ_CALL(adj_op_create_range_tensor(a->bcast_x, &a->x_hat));
  ADJ_CALL(adj_op_create_range_tensor(a->bcast_x, &a->dx_hat));
  ADJ_CALL(adj_op_create_range_tensor(a->bcast_w, &a->w_hat));
  ADJ_CALL(adj_op_create_range_tensor(a->bcast_w, &a->dw_hat));
  ADJ_CALL(adj_op_create_domain_tensor(a->reduce_y, &a->y_hat));
  ADJ_CALL(adj_op_create_domain_tensor(a->reduce_y, &a->dy_hat));
  if (!a->bcast_b) return ADJ_SUCCESS;
  ADJ_CALL(adj_op_create_range_tensor(a->bcast_b, &a->b_hat));
  return adj_op_create_range_tensor(a->bcast_b, &a->db_hat);
}

/* Operators and buffers of this worker.  Collective. */
static int adj_affine_plan_layer(const adj_affine_layer_config *c, adj_affine_plan *p, adj_affine_layer **out) {
  *out = NULL;
  adj_affine_layer *a = calloc(1, sizeof *a);
  int status = adj_layer_agree(c->input, a ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "affine layer: out of memory"));
  if (!status) status = adj_affine_partitions(c, p);
  if (!status) status = adj_affine_layouts(c, p);
  if (!status) status = adj_affine_ops(c->dtype, p, a);
  if (!status) status = adj_layer_agree(c->input, adj_affine_buffers(a));
  if (status) adj_affine_layer_free(a);
  else *out = a;
  return status;
}

int adj_affine_layer_create(const adj_affine_layer_config *c, adj_layer **layer) {
  static const char who[] = "affine layer";
  *layer = NULL;
  int base_size = 0;
  if (c && c->input) MPI_Comm_size(adj_partition_base_comm(adj_decomposition_partition(c->input)), &base_size);
  ADJ_CALL(adj_affine_validate(who, c, base_size));
  const int *px = adj_partition_shape(adj_decomposition_partition(c->input));
  adj_affine_plan p = {.p_b = px[0], .p_fi = px[1], .p_fo = c->out_parts ? c->out_parts : 1};
  adj_affine_layer *a;
  int status = adj_affine_plan_layer(c, &p, &a);
  char name[64];
  snprintf(name, sizeof name, "affine[%d,%d,%d]", p.p_b, p.p_fo, p.p_fi);
  static const adj_layer_methods methods = {adj_affine_layer_forward, adj_affine_layer_jvp, adj_affine_layer_backward,
                                            adj_affine_layer_destroy};
  if (!status)
    status = adj_layer_create_weighted(name, c->dtype, c->input, p.y, &methods, a, adj_affine_layer_free_impl, p.w,
                                       p.b, layer);
  adj_affine_plan_free(&p);
  return status;
}
