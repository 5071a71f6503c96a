/* Softmax cross-entropy as a layer (see include/adjoin/xent_layer.h): a gather
 * of the logits onto the root, then the local kernel on the counted rows.
 * Where the gather is the identity (the logits already whole on the root), z
 * and dz are views of the caller's blocks and nothing is copied; the logits
 * must then stay unchanged until the backward, as every layer's input. */
#include <stdlib.h>
#include <string.h>

#include "adjoin/xent_layer.h"
#include "adjoin/repartition.h"
#include "adjoin/loss.h"
#include "dist_layer_impl.h"
#include "fault_impl.h"

typedef struct adj_xent_layer {
  adj_op *gather;          /* logits layout -> (N, C) whole on the root */
  adj_tensor z_buffer;     /* (N, C) on the root, zero volume elsewhere; */
  adj_tensor dz_buffer;    /* unused where the gather is the identity */
  adj_tensor z, dz;        /* views: of the buffers, or of the caller's blocks */
  int64_t *labels;         /* (N) on the root */
  int64_t count;           /* samples 0..count-1 count; the rest are padding */
  double loss;             /* of the last forward, on the root */
  int64_t correct;         /* of the last forward, on the root */
} adj_xent_layer;

/* The counted rows (count, C) of an (N, C) block. */
static adj_tensor adj_xent_rows(const adj_xent_layer *x, const adj_tensor *t) {
  adj_tensor rows = *t;
  rows.owns_data = false;
  rows.shape[0] = adj_tensor_volume(t) ? x->count : 0;
  return rows;
}

static int adj_xent_layer_forward(adj_layer *l, const adj_tensor *in, adj_tensor *y) {
  adj_xent_layer *x = l->impl;
  ADJ_CALL(adj_op_alias_output(x->gather, ADJ_FORWARD, in, &x->z_buffer, &x->z));
  ADJ_CALL(adj_op_forward(x->gather, in, &x->z));
  if (!adj_tensor_volume(y)) return ADJ_SUCCESS;
  adj_tensor rows = adj_xent_rows(x, &x->z);
  ADJ_CALL(adj_softmax_xent_forward(&rows, x->labels, ADJ_REDUCE_MEAN, &x->loss));
  ADJ_CALL(adj_softmax_xent_correct(&rows, x->labels, &x->correct));
  adj_tensor_set(y, 0, x->loss);
  return ADJ_SUCCESS;
}

static int adj_xent_layer_jvp(adj_layer *l, const adj_tensor *din, adj_tensor *dy) {
  adj_xent_layer *x = l->impl;
  adj_tensor_zero(dy);
  if (!din) return ADJ_SUCCESS;
  ADJ_CALL(adj_op_alias_output(x->gather, ADJ_FORWARD, din, &x->dz_buffer, &x->dz));
  ADJ_CALL(adj_op_forward(x->gather, din, &x->dz));
  if (!adj_tensor_volume(dy)) return ADJ_SUCCESS;
  adj_tensor rows = adj_xent_rows(x, &x->z), drows = adj_xent_rows(x, &x->dz);
  double dloss;
  ADJ_CALL(adj_softmax_xent_jvp(&rows, x->labels, ADJ_REDUCE_MEAN, &drows, &dloss));
  adj_tensor_set(dy, 0, dloss);
  return ADJ_SUCCESS;
}

/* Padding rows keep the zero gradient written here. */
static int adj_xent_layer_backward(adj_layer *l, const adj_tensor *dy, adj_tensor *din) {
  adj_xent_layer *x = l->impl;
  if (!din) return ADJ_SUCCESS;
  ADJ_CALL(adj_op_alias_input(x->gather, ADJ_ADJOINT, din, &x->dz_buffer, &x->dz));
  adj_tensor_zero(&x->dz);
  int status = ADJ_SUCCESS;
  if (adj_tensor_volume(dy)) {
    adj_tensor rows = adj_xent_rows(x, &x->z), drows = adj_xent_rows(x, &x->dz);
    status = adj_softmax_xent_backward(&rows, x->labels, ADJ_REDUCE_MEAN, adj_tensor_get(dy, 0), &drows);
  }
  /* The scatter back runs after a local failure too, so no rank waits for it. */
  status = adj_fault_at(l->name, "backward local", status);
  int moved = adj_op_adjoint(x->gather, &x->dz, din);
  return status ? status : moved;
}

static void adj_xent_free(adj_xent_layer *x) {
  if (!x) return;
  adj_op_destroy(&x->gather);
  adj_tensor_destroy(&x->z_buffer), adj_tensor_destroy(&x->dz_buffer);
  free(x->labels);
  free(x);
}

static void adj_xent_layer_destroy(adj_layer *l) { adj_xent_free(l->impl); }

static const adj_layer_methods adj_xent_methods = {adj_xent_layer_forward, adj_xent_layer_jvp,
                                                   adj_xent_layer_backward, adj_xent_layer_destroy};

static int adj_xent_validate(const char *who, const adj_xent_layer_config *c) {
  ADJ_CALL(adj_layer_config_check(who, c, c ? c->dtype : ADJ_FLOAT64, c ? c->input : NULL));
  int rank = adj_decomposition_rank(c->input), size;
  ADJ_CHECK(rank == 2, ADJ_ERR_SIZE, "%s: the logits have rank %d; the loss takes (N, C)", who, rank);
  MPI_Comm_size(adj_partition_base_comm(adj_decomposition_partition(c->input)), &size);
  ADJ_CHECK(c->root >= 0 && c->root < size, ADJ_ERR_ARG, "%s: root %d is outside the communicator of %d ranks", who,
            c->root, size);
  return ADJ_SUCCESS;
}

/* The gather and the root's buffers.  Collective. */
static int adj_xent_plan(const adj_xent_layer_config *c, adj_xent_layer *x) {
  ADJ_CALL(adj_gather_create(c->dtype, c->input, c->root, &x->gather));
  /* The layer checks its tensors at its public call; the gather moves its own
   * buffers and needs no agreement of its own. */
  adj_op_set_checks(x->gather, false);
  int status = adj_op_create_range_tensor(x->gather, &x->z_buffer);
  if (!status) status = adj_op_create_range_tensor(x->gather, &x->dz_buffer);
  int64_t n = adj_decomposition_global_shape(c->input)[0];
  if (!status) x->labels = calloc((size_t)n + 1, sizeof *x->labels);
  if (!status && !x->labels) status = adj_error_set(ADJ_ERR_MEM, "loss layer: out of memory for %lld labels", (long long)n);
  return adj_layer_agree(c->input, status);
}

/* The scalar's layout: global shape [1] on a partition of the root alone. */
static int adj_xent_output_layout(const adj_xent_layer_config *c, adj_decomposition **out) {
  MPI_Comm base = adj_partition_base_comm(adj_decomposition_partition(c->input));
  adj_partition *p;
  ADJ_CALL(adj_partition_create(base, 1, (const int[1]){1}, 1, &c->root, &p));
  int status = adj_decomposition_create(p, 1, (const int64_t[1]){1}, out);
  adj_partition_destroy(&p);
  return status;
}

int adj_xent_layer_create(const adj_xent_layer_config *c, adj_layer **layer) {
  static const char who[] = "softmax cross-entropy layer";
  *layer = NULL;
  ADJ_CALL(adj_xent_validate(who, c));
  adj_xent_layer *x = calloc(1, sizeof *x);
  ADJ_CALL(adj_layer_agree(c->input, x ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "%s: out of memory", who)));
  adj_decomposition *output = NULL;
  int status = adj_xent_plan(c, x);
  if (!status) status = adj_xent_output_layout(c, &output);
  if (!status) status = adj_layer_alloc_between("softmax_xent", c->dtype, c->input, output, &adj_xent_methods, x, layer);
  if (status) adj_xent_free(x);
  adj_decomposition_destroy(&output);
  return status;
}

static adj_xent_layer *adj_xent_impl(const adj_layer *l) {
  return l && l->methods.forward == adj_xent_layer_forward ? l->impl : NULL;
}

int adj_xent_layer_set_labels(adj_layer *l, const int64_t *labels, int64_t count) {
  adj_xent_layer *x = adj_xent_impl(l);
  ADJ_CHECK(x, ADJ_ERR_ARG, "loss layer: %s is not a softmax cross-entropy layer", l ? l->name : "NULL");
  if (!adj_tensor_volume(&x->z_buffer)) return ADJ_SUCCESS;
  int64_t n = x->z_buffer.shape[0], classes = x->z_buffer.shape[1];
  ADJ_CHECK(count >= 0 && count <= n, ADJ_ERR_ARG, "loss layer: %lld labels for a batch of %lld", (long long)count,
            (long long)n);
  ADJ_CHECK(labels || count == 0, ADJ_ERR_ARG, "loss layer: labels is NULL on the root");
  for (int64_t i = 0; i < count; i++)
    ADJ_CHECK(labels[i] >= 0 && labels[i] < classes, ADJ_ERR_ARG, "loss layer: label %lld of sample %lld is outside [0, %lld)",
              (long long)labels[i], (long long)i, (long long)classes);
  if (count) memcpy(x->labels, labels, sizeof *labels * (size_t)count);
  x->count = count;
  return ADJ_SUCCESS;
}

double adj_xent_layer_loss(const adj_layer *l) {
  const adj_xent_layer *x = adj_xent_impl(l);
  return x ? x->loss : 0.0;
}

int64_t adj_xent_layer_correct(const adj_layer *l) {
  const adj_xent_layer *x = adj_xent_impl(l);
  return x ? x->correct : 0;
}
