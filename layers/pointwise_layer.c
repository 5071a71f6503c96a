/* Pointwise layers: activations and flatten on each worker's block.
 *
 * No data moves.  An activation's Jacobian is diagonal, so every worker's
 * jvp and backward are the local kernel's at its own block of the forward
 * input.  Flatten is a reshape of the block; with only the batch and the
 * first feature dimension partitioned it is a reshape of the global tensor
 * too, so it is its own Jacobian and its backward is the reverse reshape. */
#include <stdio.h>
#include <stdlib.h>

#include "activation_impl.h"
#include "adjoin/pointwise_layer.h"
#include "dist_layer_impl.h"
#include "stage_impl.h"

/* ---- activations ----------------------------------------------------------------------- */

/* tanh and sigmoid keep the output of the last forward (as PyTorch does), so
 * jvp and backward read f'(x) from it instead of computing f(x) again: one
 * vector exp or tanh per element and step instead of two, for one block of
 * memory (plan/step_stages.c counts it). */
typedef struct adj_activation_impl {
  adj_activation activation; /* first: adj_activation_layer_describe reads it */
  adj_tensor output;         /* f(x) of the last forward, when kept */
} adj_activation_impl;

static int adj_activation_layer_forward(adj_layer *l, const adj_tensor *x, adj_tensor *y) {
  adj_activation_impl *impl = l->impl;
  if (adj_activation_keeps_output(impl->activation.kind))
    return adj_activation_forward_kept(&impl->activation, x, y, &impl->output);
  return adj_activation_forward(&impl->activation, x, y);
}

/* f'(x) * v at the last forward's x: the jvp and the backward alike. */
static int adj_activation_layer_derivative(adj_layer *l, const adj_tensor *v, adj_tensor *out) {
  adj_activation_impl *impl = l->impl;
  if (adj_activation_keeps_output(impl->activation.kind))
    return adj_activation_derivative_from_output(&impl->activation, &impl->output, v, out);
  return adj_activation_backward(&impl->activation, l->input, v, out);
}

static int adj_activation_layer_jvp(adj_layer *l, const adj_tensor *dx, adj_tensor *dy) {
  if (!dx) {
    adj_tensor_zero(dy);
    return ADJ_SUCCESS;
  }
  return adj_activation_layer_derivative(l, dx, dy);
}

static int adj_activation_layer_backward(adj_layer *l, const adj_tensor *dy, adj_tensor *dx) {
  return dx ? adj_activation_layer_derivative(l, dy, dx) : ADJ_SUCCESS;
}

static void adj_activation_layer_free(adj_layer *l) {
  adj_activation_impl *impl = l->impl;
  if (impl) adj_tensor_destroy(&impl->output);
  free(impl);
}

static void adj_activation_name(const adj_activation *a, char *name, size_t size) {
  static const char *const names[] = {"relu", "leaky_relu", "tanh", "sigmoid"};
  if (a->kind == ADJ_LEAKY_RELU) snprintf(name, size, "leaky_relu(%g)", a->negative_slope);
  else snprintf(name, size, "%s", names[a->kind]);
}

int adj_activation_layer_create(const adj_activation_layer_config *c, adj_layer **layer) {
  static const char who[] = "activation layer";
  *layer = NULL;
  ADJ_CALL(adj_layer_config_check(who, c, c ? c->dtype : ADJ_FLOAT64, c ? c->input : NULL));
  adj_activation_kind kind = c->activation.kind;
  ADJ_CHECK(kind >= ADJ_RELU && kind <= ADJ_SIGMOID, ADJ_ERR_ARG, "%s: unknown activation kind %d", who, (int)kind);
  adj_activation_impl *impl = malloc(sizeof *impl);
  if (impl) *impl = (adj_activation_impl){.activation = c->activation};
  int status = adj_layer_agree(c->input, impl ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "%s: out of memory", who));
  char name[64];
  adj_activation_name(&c->activation, name, sizeof name);
  static const adj_layer_methods methods = {adj_activation_layer_forward, adj_activation_layer_jvp,
                                            adj_activation_layer_backward, adj_activation_layer_free};
  if (!status) status = adj_layer_alloc_between(name, c->dtype, c->input, c->input, &methods, impl, layer);
  if (status) {
    free(impl);
    return status;
  }
  if (adj_activation_keeps_output(kind))
    status = adj_layer_agree(c->input, adj_layer_create_output(*layer, &impl->output));
  if (status) adj_layer_destroy(layer);
  return status;
}

bool adj_activation_layer_describe(const adj_layer *layer, adj_stage_description *d) {
  if (!layer || layer->methods.forward != adj_activation_layer_forward) return false;
  const adj_activation_impl *impl = layer->impl;
  *d = (adj_stage_description){.kind = ADJ_STAGE_ACTIVATION, .activation = impl->activation};
  return true;
}

/* ---- flatten ---------------------------------------------------------------------------- */

static int adj_flatten_layer_forward(adj_layer *l, const adj_tensor *x, adj_tensor *y) {
  adj_tensor_copy_flat(y, x);
  return ADJ_SUCCESS;
}

static int adj_flatten_layer_jvp(adj_layer *l, const adj_tensor *dx, adj_tensor *dy) {
  if (dx) adj_tensor_copy_flat(dy, dx);
  else adj_tensor_zero(dy);
  return ADJ_SUCCESS;
}

static int adj_flatten_layer_backward(adj_layer *l, const adj_tensor *dy, adj_tensor *dx) {
  if (dx) adj_tensor_copy_flat(dx, dy);
  return ADJ_SUCCESS;
}

/* A worker's block flattens into one contiguous range of features exactly
 * when the dimensions after the first feature dimension are whole on it: a
 * split of d1 into ranges [a, b) becomes the features [a, b) * d2 * ... * dk.
 * So the batch and the first feature dimension may be partitioned, the rest
 * not. */
static int adj_flatten_check(const char *who, const adj_decomposition *input) {
  const adj_partition *p = adj_decomposition_partition(input);
  int rank = adj_decomposition_rank(input);
  ADJ_CHECK(rank >= 2, ADJ_ERR_SIZE, "%s: the input has rank %d; flatten needs (N, d1, ...) of rank >= 2", who, rank);
  char text[96];
  for (int i = 2; i < rank; i++)
    ADJ_CHECK(adj_partition_shape(p)[i] == 1, ADJ_ERR_INCOMPATIBLE,
              "%s: the input partition %s splits feature dimension %d over %d workers; flatten needs P_b x P_1 x 1 "
              "x ... x 1 (only the batch and the first feature dimension partitioned): repartition first",
              who, adj_partition_format(p, text, sizeof text), i, adj_partition_shape(p)[i]);
  return ADJ_SUCCESS;
}

/* (N, d1*...*dk) on a P_b x P_1 partition of the input's ranks: the batch cut
 * alike, the features cut at d1's cuts times d2*...*dk.  The reshape is
 * collective (and agrees on itself); what follows is local, its outcome
 * agreed by the caller. */
static int adj_flatten_output_layout(const adj_decomposition *input, adj_decomposition **output) {
  const adj_partition *p = adj_decomposition_partition(input);
  const int *parts = adj_partition_shape(p);
  adj_partition *flat;
  ADJ_CALL(adj_partition_reshape(p, 2, (const int[2]){parts[0], parts[1]}, &flat));
  const int64_t *shape = adj_decomposition_global_shape(input);
  int64_t trailing = 1;
  for (int i = 2; i < adj_decomposition_rank(input); i++) trailing *= shape[i];
  int64_t global[2] = {shape[0], shape[1] * trailing};
  int64_t *feature_cuts = malloc(sizeof *feature_cuts * (size_t)(parts[1] + 1));
  int status = feature_cuts ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "flatten layer: out of memory");
  for (int k = 0; !status && k <= parts[1]; k++) feature_cuts[k] = adj_decomposition_cuts(input, 1)[k] * trailing;
  const int64_t *cuts[2] = {adj_decomposition_cuts(input, 0), feature_cuts};
  if (!status) status = adj_decomposition_create_explicit(flat, 2, global, cuts, output);
  adj_partition_destroy(&flat);
  free(feature_cuts);
  return status;
}

int adj_flatten_layer_create(const adj_flatten_layer_config *c, adj_layer **layer) {
  static const char who[] = "flatten layer";
  *layer = NULL;
  ADJ_CALL(adj_layer_config_check(who, c, c ? c->dtype : ADJ_FLOAT64, c ? c->input : NULL));
  ADJ_CALL(adj_flatten_check(who, c->input));
  adj_decomposition *output = NULL;
  int status = adj_layer_agree(c->input, adj_flatten_output_layout(c->input, &output));
  static const adj_layer_methods methods = {adj_flatten_layer_forward, adj_flatten_layer_jvp,
                                            adj_flatten_layer_backward, NULL};
  if (!status) status = adj_layer_alloc_between("flatten", c->dtype, c->input, output, &methods, NULL, layer);
  adj_decomposition_destroy(&output);
  return status;
}
