/* Max and average pooling: forward, jvp and backward, 1-3 spatial dimensions. */
#include <string.h>

#include "kernels_impl.h"

enum { ADJ_POOL_MAX_TAPS = 512 }; /* larger windows take the general path */

/* The passes of the typed interior loops (pool_typed.inc). */
typedef enum adj_pool_pass {
  ADJ_MAX_GATHER,  /* y[o] = src[argmax] */
  ADJ_MAX_SCATTER, /* dx[argmax] += dy[o] */
  ADJ_AVG_APPLY,   /* y[o] = mean of the window of src */
  ADJ_AVG_ADJOINT, /* every tap of the window += dy[o] / kernel volume */
} adj_pool_pass;

#define ADJ_TYPED_FILE "pool_typed.inc"
#include "instantiate.h"

/* Max pooling, and averaging over the input taps only, have no value for a
 * window made only of padding. */
static int adj_pool_check_windows(const char *who, const adj_window_plan *p) {
  for (int d = 0; d < 3; d++)
    for (int64_t o = 0; o < p->out[d]; o++) {
      int64_t lo, hi;
      adj_valid_range(o * p->stride[d] - p->pad[d], p->dilation[d], p->in[d], p->kernel[d], &lo, &hi);
      ADJ_CHECK(hi > lo, ADJ_ERR_SIZE,
                "%s: spatial dimension %d: the window of output %lld covers only padding (input extent %lld, "
                "padding %lld)",
                who, d - (3 - p->spatial_dims), (long long)o, (long long)p->in[d], (long long)p->pad[d]);
    }
  return ADJ_SUCCESS;
}

/* Validates kind, geometry, input x and the call's two other tensors: `in`
 * (read; NULL for the forward, which reads x) and `out` (written), each shaped
 * like the pooling's input or output as the flags say. */
static int adj_pool_prepare(const char *who, adj_pool_kind kind, const adj_window_geometry *g, const adj_tensor *x,
                            const char *in_name, const adj_tensor *in, bool in_is_output, const char *out_name,
                            const adj_tensor *out, bool out_is_output, adj_window_plan *p) {
  ADJ_CHECK(kind == ADJ_POOL_MAX || kind == ADJ_POOL_AVG || kind == ADJ_POOL_AVG_EXCLUDE_PAD, ADJ_ERR_ARG,
            "%s: unknown pooling kind %d", who, (int)kind);
  ADJ_CALL(adj_window_plan_make(who, g, x, p));
  if (kind != ADJ_POOL_AVG) ADJ_CALL(adj_pool_check_windows(who, p));
  int64_t y_shape[2 + ADJ_MAX_SPATIAL_DIMS];
  adj_window_plan_output_shape(p, p->channels, y_shape);
  if (in) ADJ_CALL(adj_check_tensor(who, in_name, in, x->dtype, x->rank, in_is_output ? y_shape : x->shape));
  return adj_check_tensor(who, out_name, out, x->dtype, x->rank, out_is_output ? y_shape : x->shape);
}

/* Fills taps[k] (offset of tap k from its window's first element) and returns
 * true when no window leaves the input, so the interior loops apply. */
static bool adj_pool_interior_taps(const adj_window_plan *p, int64_t *taps) {
  if (p->kernel_volume > ADJ_POOL_MAX_TAPS) return false;
  for (int d = 0; d < 3; d++) /* the plan keeps the left padding; the last window shows the right */
    if (p->pad[d] != 0 || (p->out[d] - 1) * p->stride[d] + (p->kernel[d] - 1) * p->dilation[d] >= p->in[d])
      return false;
  int64_t k = 0;
  for (int64_t k0 = 0; k0 < p->kernel[0]; k0++)
    for (int64_t k1 = 0; k1 < p->kernel[1]; k1++)
      for (int64_t k2 = 0; k2 < p->kernel[2]; k2++)
        taps[k++] = (k0 * p->dilation[0] * p->in[1] + k1 * p->dilation[1]) * p->in[2] + k2 * p->dilation[2];
  return true;
}

/* Runs `pass` through the interior loops when they apply, the planes shared
 * over a team; false otherwise. */
static bool adj_pool_fast(const adj_window_plan *p, adj_dtype dtype, adj_pool_pass pass, const void *x, void *in,
                          void *out) {
  int64_t taps[ADJ_POOL_MAX_TAPS];
  if (!adj_pool_interior_taps(p, taps)) return false;
  int64_t planes = p->batch * p->channels;
  int team = adj_team_size(planes, planes * p->in_volume);
#pragma omp parallel for num_threads(team) schedule(static, 1)
  for (int member = 0; member < team; member++) {
    int64_t first, count;
    adj_team_range(planes, team, member, &first, &count);
    int64_t at_in = first * p->in_volume, at_out = first * p->out_volume;
    ADJ_DISPATCH(dtype, pool_interior, p, taps, pass, count, adj_at_const(x, dtype, at_in), adj_at(in, dtype, at_in),
                 adj_at(out, dtype, at_out));
  }
  return true;
}

int adj_pool_forward(adj_pool_kind kind, const adj_window_geometry *g, const adj_tensor *x, adj_tensor *y) {
  adj_window_plan p;
  ADJ_CALL(adj_pool_prepare("pool forward", kind, g, x, NULL, NULL, false, "output y", y, true, &p));
  adj_pool_pass pass = kind == ADJ_POOL_MAX ? ADJ_MAX_GATHER : ADJ_AVG_APPLY;
  if (adj_pool_fast(&p, x->dtype, pass, x->data, x->data, y->data)) return ADJ_SUCCESS;
  if (kind == ADJ_POOL_MAX) ADJ_DISPATCH(x->dtype, max_pool_gather, &p, x->data, x->data, y->data);
  else ADJ_DISPATCH(x->dtype, avg_pool_apply, &p, kind == ADJ_POOL_AVG_EXCLUDE_PAD, x->data, y->data);
  return ADJ_SUCCESS;
}

int adj_pool_jvp(adj_pool_kind kind, const adj_window_geometry *g, const adj_tensor *x, const adj_tensor *dx,
                 adj_tensor *dy) {
  adj_window_plan p;
  ADJ_CALL(adj_pool_prepare("pool jvp", kind, g, x, "input perturbation dx", dx, false, "output dy", dy, true, &p));
  adj_pool_pass pass = kind == ADJ_POOL_MAX ? ADJ_MAX_GATHER : ADJ_AVG_APPLY;
  if (adj_pool_fast(&p, x->dtype, pass, x->data, dx->data, dy->data)) return ADJ_SUCCESS;
  if (kind == ADJ_POOL_MAX) ADJ_DISPATCH(x->dtype, max_pool_gather, &p, x->data, dx->data, dy->data);
  else ADJ_DISPATCH(x->dtype, avg_pool_apply, &p, kind == ADJ_POOL_AVG_EXCLUDE_PAD, dx->data, dy->data); /* linear */
  return ADJ_SUCCESS;
}

int adj_pool_backward(adj_pool_kind kind, const adj_window_geometry *g, const adj_tensor *x, const adj_tensor *dy,
                      adj_tensor *dx) {
  adj_window_plan p;
  ADJ_CALL(adj_pool_prepare("pool backward", kind, g, x, "output gradient dy", dy, true, "input gradient dx", dx,
                            false, &p));
  adj_pool_pass pass = kind == ADJ_POOL_MAX ? ADJ_MAX_SCATTER : ADJ_AVG_ADJOINT;
  if (adj_pool_fast(&p, x->dtype, pass, x->data, dx->data, dy->data)) return ADJ_SUCCESS;
  if (kind == ADJ_POOL_MAX) ADJ_DISPATCH(x->dtype, max_pool_scatter, &p, x->data, dy->data, dx->data);
  else ADJ_DISPATCH(x->dtype, avg_pool_adjoint, &p, kind == ADJ_POOL_AVG_EXCLUDE_PAD, dy->data, dx->data);
  return ADJ_SUCCESS;
}
