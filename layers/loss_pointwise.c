/* The elementwise losses' values and slopes over a block (loss_pointwise_impl.h).
 *
 * A block goes a chunk at a time: x and t widened to double, one loop per
 * loss kind (no switch per element), the exps and logs a register at a time
 * through the vector math (vector_math_impl.h), and the sum carried in
 * float64 lanes added in a fixed order (lane_sums_impl.h), so every loop
 * vectorizes and the result does not depend on the thread count.  The
 * formulas are PyTorch's (adjoin/loss_layers.h). */
#include <math.h>

#include "loss_pointwise_impl.h"
#include "vector_math_impl.h"
#include "lane_sums_impl.h"
#include "vectorize_impl.h"

enum { ADJ_LOSS_CHUNK = 256 };

/* The chunk math is inlined (ADJ_CLONE_HELPER) into the typed loops over a
 * block, which are built per level: the default build runs it at the CPU's
 * vector width. */

/* A chunk's operands and results in double: x, t, the values or slopes f, and
 * a scratch w. */
typedef struct adj_loss_chunk {
  double x[ADJ_LOSS_CHUNK], t[ADJ_LOSS_CHUNK], f[ADJ_LOSS_CHUNK], w[ADJ_LOSS_CHUNK];
  int64_t m;
} adj_loss_chunk;

ADJ_CLONE_HELPER void adj_exps(double *v, int64_t m) { adj_vector_math(ADJ_VECTOR_EXP, sizeof(double), v, v, m); }
ADJ_CLONE_HELPER void adj_logs(double *v, int64_t m) { adj_vector_math(ADJ_VECTOR_LOG, sizeof(double), v, v, m); }

/* log(v) clamped at -100, as PyTorch's BCE does: log 0 = -inf, and the NaN
 * of a negative v or a NaN, both fail the comparison and become -100. */
ADJ_CLONE_HELPER void adj_clamped_logs(double *v, int64_t m) {
  adj_logs(v, m);
  for (int64_t j = 0; j < m; j++) v[j] = v[j] > -100.0 ? v[j] : -100.0;
}

/* e_j = exp(-|x_j|), an exp of no positive argument. */
ADJ_CLONE_HELPER void adj_exp_minus_abs(const double *x, double *e, int64_t m) {
  for (int64_t j = 0; j < m; j++) e[j] = -fabs(x[j]);
  adj_exps(e, m);
}

ADJ_CLONE_HELPER void adj_bce_values(adj_loss_chunk *c) {
  int64_t m = c->m;
  for (int64_t j = 0; j < m; j++) {
    c->f[j] = c->x[j];
    c->w[j] = 1 - c->x[j];
  }
  adj_clamped_logs(c->f, m);
  adj_clamped_logs(c->w, m);
  for (int64_t j = 0; j < m; j++) c->f[j] = -(c->t[j] * c->f[j] + (1 - c->t[j]) * c->w[j]);
}

/* max(x, 0) - x t + log1p(exp(-|x|)). */
ADJ_CLONE_HELPER void adj_bce_logits_values(adj_loss_chunk *c) {
  int64_t m = c->m;
  adj_exp_minus_abs(c->x, c->w, m);
  adj_vector_math(ADJ_VECTOR_LOG1P, sizeof(double), c->w, c->w, m);
  for (int64_t j = 0; j < m; j++) c->f[j] = (c->x[j] > 0 ? c->x[j] : 0) - c->x[j] * c->t[j] + c->w[j];
}

/* exp(t) (t - x) with log targets; t log t - t x (0 log 0 = 0) without. */
ADJ_CLONE_HELPER void adj_kl_values(const adj_loss_point *p, adj_loss_chunk *c) {
  int64_t m = c->m;
  for (int64_t j = 0; j < m; j++) c->w[j] = c->t[j];
  if (p->log_target) {
    adj_exps(c->w, m);
    for (int64_t j = 0; j < m; j++) c->f[j] = c->w[j] * (c->t[j] - c->x[j]);
    return;
  }
  adj_logs(c->w, m);
  for (int64_t j = 0; j < m; j++) c->f[j] = (c->t[j] > 0 ? c->t[j] * c->w[j] : 0) - c->t[j] * c->x[j];
}

/* x - t log(x + eps) on linear input, exp(x) - t x on log input; the full
 * loss adds Stirling's t log t - t + log(2 pi t) / 2 where t > 1. */
ADJ_CLONE_HELPER void adj_poisson_values(const adj_loss_point *p, adj_loss_chunk *c) {
  int64_t m = c->m;
  if (p->linear_input) {
    for (int64_t j = 0; j < m; j++) c->w[j] = c->x[j] + p->eps;
    adj_logs(c->w, m);
    for (int64_t j = 0; j < m; j++) c->f[j] = c->x[j] - c->t[j] * c->w[j];
  } else {
    for (int64_t j = 0; j < m; j++) c->w[j] = c->x[j];
    adj_exps(c->w, m);
    for (int64_t j = 0; j < m; j++) c->f[j] = c->w[j] - c->t[j] * c->x[j];
  }
  if (!p->full) return;
  const double log_two_pi = 1.8378770664093453;
  for (int64_t j = 0; j < m; j++) c->w[j] = c->t[j];
  adj_logs(c->w, m);
  for (int64_t j = 0; j < m; j++)
    c->f[j] += c->t[j] > 1 ? c->t[j] * c->w[j] - c->t[j] + 0.5 * (log_two_pi + c->w[j]) : 0;
}

/* f = f(x, t) over the chunk. */
ADJ_CLONE_HELPER void adj_loss_chunk_values(const adj_loss_point *p, adj_loss_chunk *c) {
  int64_t m = c->m;
  switch (p->kind) {
  case ADJ_LOSS_L1:
    for (int64_t j = 0; j < m; j++) c->f[j] = fabs(c->x[j] - c->t[j]);
    break;
  case ADJ_LOSS_MSE:
    for (int64_t j = 0; j < m; j++) c->f[j] = (c->x[j] - c->t[j]) * (c->x[j] - c->t[j]);
    break;
  case ADJ_LOSS_BCE: adj_bce_values(c); break;
  case ADJ_LOSS_BCE_WITH_LOGITS: adj_bce_logits_values(c); break;
  case ADJ_LOSS_KL_DIV: adj_kl_values(p, c); break;
  case ADJ_LOSS_POISSON_NLL: adj_poisson_values(p, c); break;
  default:
    for (int64_t j = 0; j < m; j++) c->f[j] = 0;
  }
}

/* f = f'(x) over the chunk.  L1's kink takes slope 0; BCE's denominator is
 * kept from 1e-12 as PyTorch does; BCE with logits is sigmoid(x) - t. */
ADJ_CLONE_HELPER void adj_loss_chunk_slopes(const adj_loss_point *p, adj_loss_chunk *c) {
  int64_t m = c->m;
  const double *x = c->x, *t = c->t;
  double *f = c->f;
  switch (p->kind) {
  case ADJ_LOSS_L1:
    for (int64_t j = 0; j < m; j++) f[j] = x[j] > t[j] ? 1 : x[j] < t[j] ? -1 : 0;
    break;
  case ADJ_LOSS_MSE:
    for (int64_t j = 0; j < m; j++) f[j] = 2 * (x[j] - t[j]);
    break;
  case ADJ_LOSS_BCE:
    for (int64_t j = 0; j < m; j++) {
      double q = (1 - x[j]) * x[j];
      f[j] = (x[j] - t[j]) / (q > 1e-12 ? q : 1e-12);
    }
    break;
  case ADJ_LOSS_BCE_WITH_LOGITS:
    adj_vector_math(ADJ_VECTOR_SIGMOID, sizeof(double), x, f, m);
    for (int64_t j = 0; j < m; j++) f[j] -= t[j];
    break;
  case ADJ_LOSS_KL_DIV:
    for (int64_t j = 0; j < m; j++) f[j] = t[j];
    if (p->log_target) adj_exps(f, m);
    for (int64_t j = 0; j < m; j++) f[j] = -f[j];
    break;
  case ADJ_LOSS_POISSON_NLL:
    if (p->linear_input) {
      for (int64_t j = 0; j < m; j++) f[j] = 1 - t[j] / (x[j] + p->eps);
    } else {
      for (int64_t j = 0; j < m; j++) f[j] = x[j];
      adj_exps(f, m);
      for (int64_t j = 0; j < m; j++) f[j] -= t[j];
    }
    break;
  default:
    for (int64_t j = 0; j < m; j++) f[j] = 0;
  }
}

#define ADJ_TYPED_FILE "loss_pointwise_typed.inc"
#include "instantiate.h"

double adj_loss_point_values(const adj_loss_point *p, adj_dtype dtype, const void *x, const void *t, int64_t n,
                             void *out) {
  return dtype == ADJ_FLOAT32 ? loss_values_f32(p, x, t, n, out) : loss_values_f64(p, x, t, n, out);
}

double adj_loss_point_slopes(const adj_loss_point *p, adj_dtype dtype, const void *x, const void *t, int64_t n,
                             const void *v, double scale, void *out) {
  return dtype == ADJ_FLOAT32 ? loss_slopes_f32(p, x, t, n, v, scale, out)
                              : loss_slopes_f64(p, x, t, n, v, scale, out);
}

int64_t adj_loss_first_outside_unit(adj_dtype dtype, const void *x, int64_t n) {
  return dtype == ADJ_FLOAT32 ? first_outside_unit_f32(x, n) : first_outside_unit_f64(x, n);
}
