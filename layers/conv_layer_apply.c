/* Application of the distributed convolution layer: forward, jvp and backward
 * are the data movement of conv_layer.h around the local kernels.
 *
 * The movement is linear, so the jvp runs the forward operators on the
 * perturbations and the backward runs their adjoints in reverse order.  The
 * parameter broadcasts (forward, jvp) and gradient sum-reduces (backward) are
 * split-phase: posted first, completed after the input's halo exchange and
 * broadcast, which they overlap.
 *
 * Collective safety: every rank applies the same operators in the same order.
 * A local kernel failure (the creation checks rule it out, but it is reported)
 * does not skip the collectives after it, so no rank is left waiting. */
#include "conv_layer_impl.h"

/* A view of t with another shape of the same volume. */
static adj_tensor adj_conv_reshape(const adj_tensor *t, int rank, const int64_t *shape) {
  adj_tensor view;
  adj_tensor_view(&view, t->dtype, rank, shape, t->data);
  return view;
}

static int adj_conv_first_error(int a, int b) { return a ? a : b; }

/* The local conv's bias: b^ on the ci = 0 slab of P_w and NULL elsewhere, so
 * the sum over the P_ci partial outputs adds it once. */
static adj_tensor *adj_conv_local_bias(const adj_conv_layer *c, adj_tensor *hat) {
  return c->b_bcast && adj_partition_active(c->pw_bias) ? hat : NULL;
}

/* ---- parameters ------------------------------------------------------------------------- */

/* Posts w^ <- B_{Pr->Pw} w and b^ <- B_{Pb->Pw} b on the values (forward,
 * into w_point, b_point) or the tangents (jvp, into w_dir, b_dir).  Where a
 * broadcast is the identity (P_r's block stays on its worker) the destination
 * is a view of the parameter itself and nothing moves (op.h). */
static int adj_conv_parameters_begin(adj_layer *l, bool tangent) {
  adj_conv_layer *c = l->impl;
  adj_parameter *w = l->parameters[0];
  const adj_tensor *w_in = tangent ? &w->tangent : &w->value;
  adj_tensor *w_out = tangent ? &c->w_dir : &c->w_point;
  ADJ_CALL(adj_op_alias_output(c->w_bcast, ADJ_FORWARD, w_in, tangent ? &c->dw_hat : &c->w_hat, w_out));
  ADJ_CALL(adj_op_begin(c->w_bcast, ADJ_FORWARD, w_in, w_out));
  if (!c->b_bcast) return ADJ_SUCCESS;
  adj_parameter *b = l->parameters[1];
  const adj_tensor *b_in = tangent ? &b->tangent : &b->value;
  adj_tensor *b_out = tangent ? &c->b_dir : &c->b_point;
  ADJ_CALL(adj_op_alias_output(c->b_bcast, ADJ_FORWARD, b_in, tangent ? &c->db_hat : &c->b_hat, b_out));
  return adj_op_begin(c->b_bcast, ADJ_FORWARD, b_in, b_out);
}

/* Completes whichever parameter movement is pending (either direction). */
static int adj_conv_parameters_end(adj_conv_layer *c) {
  int status = adj_op_end(c->w_bcast);
  return adj_conv_first_error(status, c->b_bcast ? adj_op_end(c->b_bcast) : ADJ_SUCCESS);
}

/* Where the local backward adds dw^ and db^ (w_dir, b_dir): the gradients
 * themselves where the broadcasts are identities, else the layer's buffers,
 * cleared, whose adjoints then add into the gradients. */
static int adj_conv_gradient_targets(adj_layer *l) {
  adj_conv_layer *c = l->impl;
  ADJ_CALL(adj_op_alias_input(c->w_bcast, ADJ_ADJOINT, &l->parameters[0]->grad, &c->dw_hat, &c->w_dir));
  if (!adj_op_is_identity(c->w_bcast)) adj_tensor_zero(&c->w_dir);
  if (!c->b_bcast) return ADJ_SUCCESS;
  ADJ_CALL(adj_op_alias_input(c->b_bcast, ADJ_ADJOINT, &l->parameters[1]->grad, &c->db_hat, &c->b_dir));
  if (!adj_op_is_identity(c->b_bcast)) adj_tensor_zero(&c->b_dir);
  return ADJ_SUCCESS;
}

/* Posts the adjoints R_{Pw->Pr} dw^ and R_{Pw->Pb} db^, which add into the
 * owning workers' parameter gradients (accumulate mode, conv_layer.c). */
static int adj_conv_gradients_begin(adj_layer *l) {
  adj_conv_layer *c = l->impl;
  ADJ_CALL(adj_op_begin(c->w_bcast, ADJ_ADJOINT, &c->w_dir, &l->parameters[0]->grad));
  return c->b_bcast ? adj_op_begin(c->b_bcast, ADJ_ADJOINT, &c->b_dir, &l->parameters[1]->grad) : ADJ_SUCCESS;
}

/* ---- input and output movement ---------------------------------------------------------- */

/* pad <- x (zeros when x is NULL) on its bulk, then H, then B_{Px->Pw}; the
 * kernel input is the broadcast block or, when the local outputs read less
 * than it holds, a trimmed copy.  Where H is the identity (no halo, no
 * neighbour) the padded block is x itself, and where B is (P_co = 1 on P_x's
 * workers) the broadcast block is the padded one, so without a trim the
 * kernel reads x where it lies. */
static int adj_conv_input_forward(adj_conv_layer *c, const adj_tensor *x, adj_tensor *pad_buffer, adj_tensor *hat,
                                  adj_tensor *trimmed, adj_tensor *kernel_input) {
  adj_tensor pad;
  if (x) {
    ADJ_CALL(adj_op_alias_output(c->halo, ADJ_FORWARD, x, pad_buffer, &pad));
    adj_box whole = adj_box_whole(x->rank, x->shape);
    if (!adj_op_is_identity(c->halo)) adj_tensor_copy_box(&pad, &c->x_local.bulk, x, &whole, ADJ_UNPACK_COPY);
  } else {
    pad = adj_conv_reshape(pad_buffer, pad_buffer->rank, pad_buffer->shape);
    adj_tensor_zero(&pad);
  }
  ADJ_CALL(adj_op_forward(c->halo, &pad, &pad));
  adj_tensor from = adj_conv_reshape(&pad, c->rank + 1, adj_op_domain_shape(c->x_bcast));
  adj_tensor wide = adj_conv_reshape(hat, c->rank + 1, adj_op_range_shape(c->x_bcast)), to;
  ADJ_CALL(adj_op_alias_output(c->x_bcast, ADJ_FORWARD, &from, &wide, &to));
  ADJ_CALL(adj_op_forward(c->x_bcast, &from, &to));
  *kernel_input = adj_conv_reshape(&to, hat->rank, hat->shape);
  if (c->trims) {
    adj_box whole = adj_box_whole(trimmed->rank, trimmed->shape);
    adj_tensor_copy_box(trimmed, &whole, kernel_input, &c->w_local.kernel_input, ADJ_UNPACK_COPY);
    *kernel_input = adj_conv_reshape(trimmed, trimmed->rank, trimmed->shape);
  }
  return ADJ_SUCCESS;
}

/* The adjoint chain's buffers for a dx: the padded block (dx itself where H is
 * the identity), the full kernel-input block (pad, or dx^ after a broadcast)
 * and where the local backward writes (full, or the trimmed buffer). */
typedef struct adj_conv_dx_chain {
  adj_tensor pad, full, kernel;
} adj_conv_dx_chain;

static int adj_conv_dx_chain_make(adj_conv_layer *c, adj_tensor *dx, adj_conv_dx_chain *chain) {
  ADJ_CALL(adj_op_alias_input(c->halo, ADJ_ADJOINT, dx, &c->dx_pad, &chain->pad));
  adj_tensor to = adj_conv_reshape(&chain->pad, c->rank + 1, adj_op_domain_shape(c->x_bcast));
  adj_tensor wide = adj_conv_reshape(&c->dx_hat, c->rank + 1, adj_op_range_shape(c->x_bcast)), from;
  ADJ_CALL(adj_op_alias_input(c->x_bcast, ADJ_ADJOINT, &to, &wide, &from));
  chain->full = adj_conv_reshape(&from, c->rank, c->dx_hat.shape);
  chain->kernel = c->trims ? adj_conv_reshape(&c->dx_k, c->rank, c->dx_k.shape) : chain->full;
  return ADJ_SUCCESS;
}

/* The adjoint of adj_conv_input_forward: untrim (pad dx^ with zeros), sum onto
 * P_x, add the halos into their owners' bulk (H^T) and copy the bulk to dx
 * (nothing to copy where the padded block is dx). */
static int adj_conv_input_adjoint(adj_conv_layer *c, adj_conv_dx_chain *chain, adj_tensor *dx) {
  if (!c->computes || c->trims) adj_tensor_zero(&chain->full);
  if (c->trims) {
    adj_box whole = adj_box_whole(c->dx_k.rank, c->dx_k.shape);
    adj_tensor_copy_box(&chain->full, &c->w_local.kernel_input, &c->dx_k, &whole, ADJ_UNPACK_COPY);
  }
  adj_tensor from = adj_conv_reshape(&chain->full, c->rank + 1, adj_op_range_shape(c->x_bcast));
  adj_tensor to = adj_conv_reshape(&chain->pad, c->rank + 1, adj_op_domain_shape(c->x_bcast));
  ADJ_CALL(adj_op_adjoint(c->x_bcast, &from, &to));
  ADJ_CALL(adj_op_adjoint(c->halo, &chain->pad, &chain->pad));
  if (!adj_op_is_identity(c->halo)) {
    adj_box whole = adj_box_whole(dx->rank, dx->shape);
    adj_tensor_copy_box(dx, &whole, &chain->pad, &c->x_local.bulk, ADJ_UNPACK_COPY);
  }
  return ADJ_SUCCESS;
}

/* Where the local conv writes y^ (or dy^): y's block itself where the
 * sum-reduce over the input-channel blocks is the identity, else `buffer`. */
static int adj_conv_output_target(adj_conv_layer *c, adj_tensor *y, adj_tensor *buffer, adj_tensor *y_hat) {
  adj_tensor out = adj_conv_reshape(y, c->rank + 1, adj_op_range_shape(c->y_reduce));
  adj_tensor wide = adj_conv_reshape(buffer, c->rank + 1, adj_op_domain_shape(c->y_reduce)), in;
  ADJ_CALL(adj_op_alias_input(c->y_reduce, ADJ_FORWARD, &out, &wide, &in));
  *y_hat = adj_conv_reshape(&in, c->rank, buffer->shape);
  return ADJ_SUCCESS;
}

/* y <- R_{Pw->Py} y^, through views with the unit dimension the broadcast
 * rule needs. */
static int adj_conv_output_forward(adj_conv_layer *c, const adj_tensor *y_hat, adj_tensor *y) {
  adj_tensor in = adj_conv_reshape(y_hat, c->rank + 1, adj_op_domain_shape(c->y_reduce));
  adj_tensor out = adj_conv_reshape(y, c->rank + 1, adj_op_range_shape(c->y_reduce));
  return adj_op_forward(c->y_reduce, &in, &out);
}

/* dy^ <- B_{Py->Pw} dy, its adjoint: the local conv's output gradient, dy's
 * block itself where the sum-reduce is the identity. */
static int adj_conv_output_adjoint(adj_conv_layer *c, const adj_tensor *dy, adj_tensor *dy_hat) {
  adj_tensor in = adj_conv_reshape(dy, c->rank + 1, adj_op_range_shape(c->y_reduce));
  adj_tensor wide = adj_conv_reshape(&c->dy_hat, c->rank + 1, adj_op_domain_shape(c->y_reduce)), out;
  ADJ_CALL(adj_op_alias_output(c->y_reduce, ADJ_ADJOINT, &in, &wide, &out));
  ADJ_CALL(adj_op_adjoint(c->y_reduce, &in, &out));
  *dy_hat = adj_conv_reshape(&out, c->rank, c->dy_hat.shape);
  return ADJ_SUCCESS;
}

/* ---- the layer methods ------------------------------------------------------------------- */

/* The kernel input may be the caller's x (layer.h keeps it intact until the
 * backward) and the weights the parameters' own values. */
int adj_conv_layer_forward(adj_layer *l, const adj_tensor *x, adj_tensor *y) {
  adj_conv_layer *c = l->impl;
  ADJ_CALL(adj_conv_parameters_begin(l, false));
  int status = adj_conv_input_forward(c, x, &c->x_pad, &c->x_hat, &c->x_k, &c->x_kernel);
  status = adj_conv_first_error(status, adj_conv_parameters_end(c));
  adj_tensor y_hat;
  ADJ_CALL(adj_conv_output_target(c, y, &c->y_hat, &y_hat)); /* a view of checked y: fails alike everywhere */
  if (!status && c->computes)
    status = adj_conv_plan_forward(c->plan, &c->x_kernel, &c->w_point, adj_conv_local_bias(c, &c->b_point), &y_hat,
                                   &c->ws);
  return adj_conv_first_error(status, adj_conv_output_forward(c, &y_hat, y));
}

/* A NULL dx (jvp, backward) is the same on every rank, held to at the public
 * call, so skipping its movement leaves the collectives matched. */
int adj_conv_layer_jvp(adj_layer *l, const adj_tensor *dx, adj_tensor *dy) {
  adj_conv_layer *c = l->impl;
  ADJ_CALL(adj_conv_parameters_begin(l, true));
  adj_tensor dx_kernel;
  int status = dx ? adj_conv_input_forward(c, dx, &c->dx_pad, &c->dx_hat, &c->dx_k, &dx_kernel) : ADJ_SUCCESS;
  status = adj_conv_first_error(status, adj_conv_parameters_end(c));
  adj_tensor dy_hat;
  ADJ_CALL(adj_conv_output_target(c, dy, &c->dy_hat, &dy_hat)); /* a view of checked dy: fails alike everywhere */
  if (!status && c->computes)
    status = adj_conv_plan_jvp(c->plan, &c->x_kernel, &c->w_point, dx ? &dx_kernel : NULL, &c->w_dir,
                               adj_conv_local_bias(c, &c->b_dir), &dy_hat, &c->ws);
  return adj_conv_first_error(status, adj_conv_output_forward(c, &dy_hat, dy));
}

int adj_conv_layer_backward(adj_layer *l, const adj_tensor *dy, adj_tensor *dx) {
  adj_conv_layer *c = l->impl;
  adj_tensor dy_hat;
  int status = adj_conv_output_adjoint(c, dy, &dy_hat);
  /* Views of tensors whose shapes were checked at the public call: they fail
   * nowhere or everywhere, so returning here leaves no rank waiting. */
  ADJ_CALL(adj_conv_gradient_targets(l));
  adj_conv_dx_chain chain;
  ADJ_CALL(dx ? adj_conv_dx_chain_make(c, dx, &chain) : ADJ_SUCCESS);
  if (!status && c->computes)
    status = adj_conv_plan_backward(c->plan, &c->x_kernel, &c->w_point, &dy_hat, dx ? &chain.kernel : NULL, &c->w_dir,
                                    adj_conv_local_bias(c, &c->b_dir), &c->ws);
  int posted = adj_conv_gradients_begin(l);
  status = adj_conv_first_error(status, dx ? adj_conv_input_adjoint(c, &chain, dx) : ADJ_SUCCESS);
  status = adj_conv_first_error(status, posted);
  return adj_conv_first_error(status, posted ? posted : adj_conv_parameters_end(c));
}
