/* The elementwise losses' values and slopes over a block (loss_pointwise.c),
 * for the distributed loss layers of loss_layers.c. */
#ifndef ADJOIN_LAYERS_LOSS_POINTWISE_IMPL_H
#define ADJOIN_LAYERS_LOSS_POINTWISE_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "adjoin/loss_layers.h"
#include "adjoin/tensor.h"

/* One elementwise loss f(x, t) with its options (adjoin/loss_layers.h). */
typedef struct adj_loss_point {
  adj_loss_kind kind;
  bool log_target, linear_input, full;
  double eps;
} adj_loss_point;

/* sum_i f(x_i, t_i) over i < n, in double; with out, also out[i] = f(x_i, t_i)
 * (reduction NONE).  x, t and out have the given dtype. */
double adj_loss_point_values(const adj_loss_point *p, adj_dtype dtype, const void *x, const void *t, int64_t n,
                             void *out);

/* sum_i f'(x_i) v_i (0 when v is NULL); with out, also out[i] = scale f'(x_i)
 * (v_i, or 1 without v): the reduced jvp (the sum), the reduced backward (out,
 * v NULL) and the unreduced jvp and backward (out and v). */
double adj_loss_point_slopes(const adj_loss_point *p, adj_dtype dtype, const void *x, const void *t, int64_t n,
                             const void *v, double scale, void *out);

/* The first i < n whose x_i is outside [0, 1] (NaN included), or -1. */
int64_t adj_loss_first_outside_unit(adj_dtype dtype, const void *x, int64_t n);

#endif
