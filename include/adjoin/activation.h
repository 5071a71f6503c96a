/* Pointwise activation kernels (ReLU, leaky ReLU, tanh, sigmoid) and the
 * flatten view, on any shape, with forward, jvp and backward as conv.h
 * describes for every local kernel. */
#ifndef ADJOIN_ACTIVATION_H
#define ADJOIN_ACTIVATION_H

#include <stdint.h>

#include "adjoin/tensor.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef enum adj_activation_kind {
  ADJ_RELU = 0,
  ADJ_LEAKY_RELU = 1, /* x > 0 ? x : negative_slope * x */
  ADJ_TANH = 2,
  ADJ_SIGMOID = 3,
} adj_activation_kind;

typedef struct adj_activation {
  adj_activation_kind kind;
  double negative_slope; /* leaky ReLU only, e.g. 0.01 */
} adj_activation;

/* The Jacobian is diagonal, so jvp and backward compute the same product
 * f'(x) * v; both take the forward INPUT x (not y).  Any shape; in place
 * (y == x, dy == dx) is allowed.  At the kink of (leaky) ReLU, f'(0) is taken
 * from the negative side. */
int adj_activation_forward(const adj_activation *a, const adj_tensor *x, adj_tensor *y);
int adj_activation_jvp(const adj_activation *a, const adj_tensor *x, const adj_tensor *dx, adj_tensor *dy);
int adj_activation_backward(const adj_activation *a, const adj_tensor *x, const adj_tensor *dy, adj_tensor *dx);

/* out = f'(x) * v read from the forward's OUTPUT y = f(x) instead of x: the
 * jvp (v = dx) and the backward (v = dy) with no exp or tanh per element
 * (tanh' = 1 - y^2, sigmoid' = y (1 - y), (leaky) ReLU from the sign of y),
 * the same values as adj_activation_backward at that x.  Leaky ReLU needs a
 * positive negative_slope (otherwise y does not tell x's sign): ADJ_ERR_ARG. */
int adj_activation_derivative_from_output(const adj_activation *a, const adj_tensor *y, const adj_tensor *v,
                                          adj_tensor *out);

/* Flatten. */
/* A view of x (N, d1, d2, ...) as (N, d1*d2*...): no data moves, so flatten is
 * its own Jacobian and its adjoint is the reverse view, adj_unflatten_view. */
int adj_flatten_view(const adj_tensor *x, adj_tensor *view);
/* A view of g (N, F) with the shape (rank, shape) of the unflattened tensor. */
int adj_unflatten_view(const adj_tensor *g, int rank, const int64_t *shape, adj_tensor *view);

ADJ_END_DECLS

#endif
