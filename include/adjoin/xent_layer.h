/* The loss as a layer: softmax cross-entropy of logits that live on any
 * decomposition, so that `network + loss` is one adj_layer whose Jacobian (of
 * the loss with respect to the input and every parameter) gets the same
 * dot-product test as any layer.
 *
 * The logits z (N, C) are gathered onto one root worker (a repartition: the
 * paper's "transpose" glue, linear, with the scatter as its adjoint), where the
 * local kernel of loss.h computes the mean over the batch:
 *
 *   forward   y  = L(G z) = (1/n) sum_{i<n} logsumexp(z_i) - z_i[label_i]
 *   jvp       dy = < grad L, G dz >
 *   backward  dz = G* (dy grad L),   grad L = (softmax(z_i) - onehot(label_i)) / n
 *
 * The output is a scalar: local shape [1] on the root and [0] on every other
 * worker.  Only the first n samples of the batch count (set per batch with the
 * labels): the rest are padding, enter neither the loss nor the mean, and get a
 * zero gradient, so a short last batch trains exactly like a batch of n
 * (PyTorch's drop_last=False) while every layer keeps its fixed batch size. */
#ifndef ADJOIN_XENT_LAYER_H
#define ADJOIN_XENT_LAYER_H

#include <stdint.h>

#include "adjoin/decomposition.h"
#include "adjoin/layer.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef struct adj_xent_layer_config {
  adj_dtype dtype;
  const adj_decomposition *input; /* logits (N, C) on any partition */
  int root;                       /* base rank that holds the labels and the loss */
} adj_xent_layer_config;

/* Creates the softmax cross-entropy layer.  No parameters.  Collective on the
 * input decomposition's base communicator; a bad configuration (input not of
 * rank 2, root outside the communicator) fails on every rank alike.  Until
 * labels are set every sample is padding (the loss is 0). */
int adj_xent_layer_create(const adj_xent_layer_config *config, adj_layer **layer);

/* Sets the labels for the following forward/jvp/backward: labels[0..count) in
 * [0, C) for samples 0..count-1, 0 <= count <= N; samples count..N-1 are
 * padding.  Read on the root only (may be NULL elsewhere).  Not collective.
 * Errors (on the root): ADJ_ERR_ARG for a count or label out of range. */
int adj_xent_layer_set_labels(adj_layer *layer, const int64_t *labels, int64_t count);

/* On the root, after a forward: the loss (in float64, before rounding to the
 * layer's dtype) and how many of the counted samples have their largest logit
 * (the first, on ties) at the label.  0 on other workers.  Not collective. */
double adj_xent_layer_loss(const adj_layer *layer);
int64_t adj_xent_layer_correct(const adj_layer *layer);

ADJ_END_DECLS

#endif
