/* The forward of tanh and sigmoid that also keeps its output, for the layers
 * that read the derivative from it (adj_activation_derivative_from_output):
 * the copy is written from each chunk while it is in L1, instead of a second
 * pass over y. */
#ifndef ADJOIN_INTERNAL_ACTIVATION_IMPL_H
#define ADJOIN_INTERNAL_ACTIVATION_IMPL_H

#include <stdbool.h>

#include "adjoin/activation.h"

/* tanh and sigmoid: the kinds whose slope is a function of their output
 * alone, whose layers keep that output (pointwise_layer.c) and whose step
 * model counts it (plan/step_stages.c). */
static inline bool adj_activation_keeps_output(adj_activation_kind kind) {
  return kind == ADJ_TANH || kind == ADJ_SIGMOID;
}

/* y = f(x) and kept = y; tanh and sigmoid only (ADJ_ERR_ARG otherwise); kept
 * has x's dtype and shape and overlaps neither. */
int adj_activation_forward_kept(const adj_activation *a, const adj_tensor *x, adj_tensor *y, adj_tensor *kept);

#endif
