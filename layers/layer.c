#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/layer.h"
#include "adjoin/agree.h"
#include "adjoin/repartition.h"
#include "agree_impl.h"
#include "fault_impl.h"
#include "layer_impl.h"

int adj_layer_alloc(const char *name, MPI_Comm base, adj_dtype dtype, int input_rank, const int64_t *input_shape,
                    int output_rank, const int64_t *output_shape, const adj_layer_methods *methods, void *impl,
                    adj_layer **out) {
  *out = NULL;
  adj_layer *l = calloc(1, sizeof *l);
  int local = l ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "%s: out of memory", name);
  if (!local) local = adj_dtype_check_compute(name, "the layer", dtype);
  int status = adj_status_agree(base, local, ADJ_WAIT_YIELD);
  if (status) {
    free(l);
    return status;
  }
  snprintf(l->name, sizeof l->name, "%s", name);
  l->refcount = 1;
  l->dtype = dtype;
  l->input_rank = input_rank;
  l->output_rank = output_rank;
  for (int i = 0; i < ADJ_MAX_RANK; i++) {
    l->input_shape[i] = i < input_rank ? input_shape[i] : 1;
    l->output_shape[i] = i < output_rank ? output_shape[i] : 1;
  }
  l->methods = *methods;
  l->impl = impl;
  status = adj_comm_dup_with_policy(base, &l->comm, &l->wait);
  if (status) {
    free(l);
    return status;
  }
  *out = l;
  return ADJ_SUCCESS;
}

static int adj_layer_grow(adj_layer *l) {
  if (l->n_parameters < l->capacity) return ADJ_SUCCESS;
  int capacity = l->capacity ? 2 * l->capacity : 4;
  adj_parameter **list = realloc(l->parameters, sizeof *list * (size_t)capacity);
  if (list) l->parameters = list;
  bool *owned = list ? realloc(l->owned, sizeof *owned * (size_t)capacity) : NULL;
  if (owned) l->owned = owned;
  ADJ_CHECK(list && owned, ADJ_ERR_MEM, "%s: out of memory for %d parameters", l->name, capacity);
  l->capacity = capacity;
  return ADJ_SUCCESS;
}

static void adj_parameter_free(adj_parameter *p) {
  if (!p) return;
  adj_tensor_destroy(&p->value), adj_tensor_destroy(&p->grad), adj_tensor_destroy(&p->tangent);
  adj_decomposition_destroy(&p->layout);
  free(p);
}

int adj_layer_add_parameter(adj_layer *l, const char *name, adj_decomposition *layout) {
  ADJ_CALL(adj_layer_grow(l));
  adj_parameter *p = calloc(1, sizeof *p);
  ADJ_CHECK(p, ADJ_ERR_MEM, "%s: out of memory for parameter %s", l->name, name);
  snprintf(p->name, sizeof p->name, "%s", name);
  p->layout = adj_decomposition_reference(layout);
  adj_box block = adj_decomposition_local_block(layout);
  int status = adj_tensor_create(&p->value, l->dtype, block.rank, block.extent);
  if (!status) status = adj_tensor_create(&p->grad, l->dtype, block.rank, block.extent);
  if (!status) status = adj_tensor_create(&p->tangent, l->dtype, block.rank, block.extent);
  if (status) {
    adj_parameter_free(p);
    return status;
  }
  l->parameters[l->n_parameters] = p;
  l->owned[l->n_parameters++] = true;
  return ADJ_SUCCESS;
}

int adj_layer_share_parameter(adj_layer *l, adj_parameter *p) {
  ADJ_CALL(adj_layer_grow(l));
  l->parameters[l->n_parameters] = p;
  l->owned[l->n_parameters++] = false;
  return ADJ_SUCCESS;
}

adj_layer *adj_layer_reference(adj_layer *l) {
  if (l) l->refcount++;
  return l;
}

void adj_layer_destroy(adj_layer **layer) {
  if (!layer || !*layer) return;
  adj_layer *l = *layer;
  *layer = NULL;
  if (--l->refcount > 0) return;
  if (l->methods.destroy) l->methods.destroy(l);
  for (int i = 0; i < l->n_parameters; i++)
    if (l->owned[i]) adj_parameter_free(l->parameters[i]);
  free(l->parameters);
  free(l->owned);
  adj_decomposition_destroy(&l->input_layout);
  adj_decomposition_destroy(&l->output_layout);
  if (l->comm != MPI_COMM_NULL) MPI_Comm_free(&l->comm);
  free(l);
}

static int adj_layer_check(const adj_layer *l, const adj_tensor *t, const char *role, int rank, const int64_t *shape) {
  return adj_tensor_check(t, l->dtype, rank, shape, l->name, role, "layer");
}

/* Checks an (input-shaped, output-shaped) pair, either of which may be
 * optional, and agrees on the result so a bad tensor on one rank stops all;
 * `prior`, a failure this rank already has, is agreed on in the same call. */
static int adj_layer_check_pair(int prior, const adj_layer *l, const adj_tensor *in_shaped, bool in_optional,
                                const char *in_role, const adj_tensor *out_shaped, bool out_optional,
                                const char *out_role) {
  int status = prior;
  if (!status && (in_shaped || !in_optional))
    status = adj_layer_check(l, in_shaped, in_role, l->input_rank, l->input_shape);
  if (!status && (out_shaped || !out_optional))
    status = adj_layer_check(l, out_shaped, out_role, l->output_rank, l->output_shape);
  if (!in_optional) return adj_status_agree_private(l->comm, status, false, NULL, l->wait);
  /* Leaving the optional tensor out is a collective choice (layer.h): held
   * to it here, in the same agreement, so the methods may trust it. */
  char what[200];
  snprintf(what, sizeof what, "%s: the %s is NULL", l->name, in_role);
  return adj_status_agree_private(l->comm, status, in_shaped == NULL, what, l->wait);
}

/* The stage calls run the method with neither argument check nor agreement
 * (see layer_impl.h), and whatever `prior` holds, so every rank makes the same
 * collectives after a failure on one; the first failure is returned.  A
 * failure injected after the method (fault_impl.h) is this rank's alone until
 * the composite agrees. */
int adj_layer_forward_stage(int prior, adj_layer *l, const adj_tensor *x, adj_tensor *y) {
  l->input = x;
  int status = adj_fault_at(l->name, "forward", l->methods.forward(l, x, y));
  return prior ? prior : status;
}

int adj_layer_jvp_stage(int prior, adj_layer *l, const adj_tensor *dx, adj_tensor *dy) {
  if (!l->input) return prior ? prior : adj_error_set(ADJ_ERR_STATE, "%s: jvp called before forward", l->name);
  int status = adj_fault_at(l->name, "jvp", l->methods.jvp(l, dx, dy));
  return prior ? prior : status;
}

int adj_layer_backward_stage(int prior, adj_layer *l, const adj_tensor *dy, adj_tensor *dx) {
  if (!l->input) return prior ? prior : adj_error_set(ADJ_ERR_STATE, "%s: backward called before forward", l->name);
  int status = adj_fault_at(l->name, "backward", l->methods.backward(l, dy, dx));
  return prior ? prior : status;
}

/* The public calls check their arguments and agree on them once (folding in
 * `prior`, a failure the caller has on this rank), so no rank enters the
 * method's collectives with tensors it cannot use; then they run the method (a
 * composite runs its stages unchecked).  The open forms return the method's
 * outcome unagreed, *agreed false, for a caller that folds it into its next
 * agreement (the trainer); the public calls agree on it, so a local step that
 * failed on one rank reaches every rank before any goes on. */
int adj_layer_forward_open(int prior, adj_layer *l, const adj_tensor *x, adj_tensor *y, bool *agreed) {
  *agreed = true;
  ADJ_CALL(adj_layer_check_pair(prior, l, x, false, "forward input", y, false, "forward output"));
  *agreed = false;
  return adj_layer_forward_stage(ADJ_SUCCESS, l, x, y);
}

int adj_layer_backward_open(int prior, adj_layer *l, const adj_tensor *dy, adj_tensor *dx, bool *agreed) {
  *agreed = true;
  int status = prior || l->input ? prior : adj_error_set(ADJ_ERR_STATE, "%s: backward called before forward", l->name);
  ADJ_CALL(adj_layer_check_pair(status, l, dx, true, "backward input gradient", dy, false, "backward output gradient"));
  *agreed = false;
  return adj_layer_backward_stage(ADJ_SUCCESS, l, dy, dx);
}

/* A NULL layer has no communicator to agree on, so the entry points below
 * refuse it on this rank alone, before any communication (layer.h). */
#define ADJ_LAYER_REQUIRED(l, caller) ADJ_CHECK(l, ADJ_ERR_ARG, caller ": layer is NULL")

int adj_layer_forward(adj_layer *l, const adj_tensor *x, adj_tensor *y) {
  ADJ_LAYER_REQUIRED(l, "adj_layer_forward");
  bool agreed;
  int status = adj_layer_forward_open(ADJ_SUCCESS, l, x, y, &agreed);
  return agreed ? status : adj_status_agree_private(l->comm, status, false, NULL, l->wait);
}

int adj_layer_jvp(adj_layer *l, const adj_tensor *dx, adj_tensor *dy) {
  ADJ_LAYER_REQUIRED(l, "adj_layer_jvp");
  int status = l->input ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_STATE, "%s: jvp called before forward", l->name);
  ADJ_CALL(adj_layer_check_pair(status, l, dx, true, "jvp input perturbation", dy, false, "jvp output"));
  return adj_status_agree_private(l->comm, adj_layer_jvp_stage(ADJ_SUCCESS, l, dx, dy), false, NULL, l->wait);
}

int adj_layer_backward(adj_layer *l, const adj_tensor *dy, adj_tensor *dx) {
  ADJ_LAYER_REQUIRED(l, "adj_layer_backward");
  bool agreed;
  int status = adj_layer_backward_open(ADJ_SUCCESS, l, dy, dx, &agreed);
  return agreed ? status : adj_status_agree_private(l->comm, status, false, NULL, l->wait);
}

const char *adj_layer_name(const adj_layer *l) { return l->name; }
adj_dtype adj_layer_dtype(const adj_layer *l) { return l->dtype; }
MPI_Comm adj_layer_comm(const adj_layer *l) { return l->comm; }
int adj_layer_input_rank(const adj_layer *l) { return l->input_rank; }
const int64_t *adj_layer_input_shape(const adj_layer *l) { return l->input_shape; }
int adj_layer_output_rank(const adj_layer *l) { return l->output_rank; }
const int64_t *adj_layer_output_shape(const adj_layer *l) { return l->output_shape; }

void adj_layer_set_layouts(adj_layer *l, adj_decomposition *input, adj_decomposition *output) {
  adj_decomposition_destroy(&l->input_layout);
  adj_decomposition_destroy(&l->output_layout);
  l->input_layout = adj_decomposition_reference(input);
  l->output_layout = adj_decomposition_reference(output);
}

const adj_decomposition *adj_layer_input_layout(const adj_layer *l) { return l->input_layout; }
const adj_decomposition *adj_layer_output_layout(const adj_layer *l) { return l->output_layout; }

int adj_layer_create_input(const adj_layer *l, adj_tensor *x) {
  ADJ_LAYER_REQUIRED(l, "adj_layer_create_input");
  return adj_tensor_create(x, l->dtype, l->input_rank, l->input_shape);
}

int adj_layer_create_output(const adj_layer *l, adj_tensor *y) {
  ADJ_LAYER_REQUIRED(l, "adj_layer_create_output");
  return adj_tensor_create(y, l->dtype, l->output_rank, l->output_shape);
}

int adj_layer_parameter_count(const adj_layer *l) { return l->n_parameters; }

adj_parameter *adj_layer_parameter(adj_layer *l, int index) {
  return l && index >= 0 && index < l->n_parameters ? l->parameters[index] : NULL;
}

void adj_layer_zero_grad(adj_layer *l) {
  for (int i = 0; l && i < l->n_parameters; i++) adj_tensor_zero(&l->parameters[i]->grad);
}

void adj_layer_zero_tangent(adj_layer *l) {
  for (int i = 0; l && i < l->n_parameters; i++) adj_tensor_zero(&l->parameters[i]->tangent);
}

/* Scatter and gather are repartitions between the whole tensor on `root` and the
 * parameter's layout; they run once per checkpoint or comparison, never per
 * step, so the operator is built on the spot.  Ranks other than root pass an
 * empty view: their share of the whole tensor is empty. */
int adj_layer_move_parameter_data(adj_layer *l, int index, int root, bool scatter, adj_tensor *local,
                                  adj_tensor *global) {
  ADJ_LAYER_REQUIRED(l, "adj_layer_move_parameter_data");
  ADJ_CHECK(index >= 0 && index < l->n_parameters, ADJ_ERR_ARG, "%s: parameter index %d outside 0..%d", l->name,
            index, l->n_parameters - 1);
  adj_parameter *p = l->parameters[index];
  int rank;
  MPI_Comm_rank(l->comm, &rank);
  adj_tensor empty;
  int64_t zeros[ADJ_MAX_RANK] = {0};
  adj_tensor_view(&empty, l->dtype, adj_decomposition_rank(p->layout), zeros, NULL);
  adj_tensor *whole = rank == root && global ? global : &empty;
  adj_op *op;
  if (scatter) ADJ_CALL(adj_scatter_create(l->dtype, root, p->layout, &op));
  else ADJ_CALL(adj_gather_create(l->dtype, p->layout, root, &op));
  int status = scatter ? adj_op_forward(op, whole, local) : adj_op_forward(op, local, whole);
  adj_op_destroy(&op);
  return status;
}

static int adj_layer_move_parameter(adj_layer *l, int index, int root, bool scatter, bool gradient,
                                    adj_tensor *global) {
  adj_parameter *p = adj_layer_parameter(l, index);
  adj_tensor *local = p && gradient ? &p->grad : p ? &p->value : NULL;
  return adj_layer_move_parameter_data(l, index, root, scatter, local, global);
}

int adj_layer_set_parameter(adj_layer *l, int index, int root, const adj_tensor *global) {
  ADJ_LAYER_REQUIRED(l, "adj_layer_set_parameter");
  /* Scatter only reads the whole tensor. */
  return adj_layer_move_parameter(l, index, root, true, false, (adj_tensor *)global);
}

int adj_layer_get_parameter(adj_layer *l, int index, int root, adj_tensor *global) {
  ADJ_LAYER_REQUIRED(l, "adj_layer_get_parameter");
  return adj_layer_move_parameter(l, index, root, false, false, global);
}

int adj_layer_get_gradient(adj_layer *l, int index, int root, adj_tensor *global) {
  ADJ_LAYER_REQUIRED(l, "adj_layer_get_gradient");
  return adj_layer_move_parameter(l, index, root, false, true, global);
}
