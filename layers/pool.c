/* Max and average pooling: forward, jvp and backward, 1-3 spatial dimensions. */
#include <string.h>

#include "kernels_impl.h"

#define ADJ_TYPED_FILE "pool_typed.inc"
#include "instantiate.h"

/* Max pooling has no value for a window made only of padding. */
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
  ADJ_CHECK(kind == ADJ_POOL_MAX || kind == ADJ_POOL_AVG, ADJ_ERR_ARG, "%s: unknown pooling kind %d", who,
            (int)kind);
  ADJ_CALL(adj_window_plan_make(who, g, x, p));
  if (kind == ADJ_POOL_MAX) ADJ_CALL(adj_pool_check_windows(who, p));
  int64_t y_shape[2 + ADJ_MAX_SPATIAL_DIMS];
  adj_window_plan_output_shape(p, p->channels, y_shape);
  if (in) ADJ_CALL(adj_check_tensor(who, in_name, in, x->dtype, x->rank, in_is_output ? y_shape : x->shape));
  return adj_check_tensor(who, out_name, out, x->dtype, x->rank, out_is_output ? y_shape : x->shape);
}

int adj_pool_forward(adj_pool_kind kind, const adj_window_geometry *g, const adj_tensor *x, adj_tensor *y) {
  adj_window_plan p;
  ADJ_CALL(adj_pool_prepare("pool forward", kind, g, x, NULL, NULL, false, "output y", y, true, &p));
  if (kind == ADJ_POOL_MAX) ADJ_DISPATCH(x->dtype, max_pool_gather, &p, x->data, x->data, y->data);
  else ADJ_DISPATCH(x->dtype, avg_pool_apply, &p, x->data, y->data);
  return ADJ_SUCCESS;
}

int adj_pool_jvp(adj_pool_kind kind, const adj_window_geometry *g, const adj_tensor *x, const adj_tensor *dx,
                 adj_tensor *dy) {
  adj_window_plan p;
  ADJ_CALL(adj_pool_prepare("pool jvp", kind, g, x, "input perturbation dx", dx, false, "output dy", dy, true, &p));
  if (kind == ADJ_POOL_MAX) ADJ_DISPATCH(x->dtype, max_pool_gather, &p, x->data, dx->data, dy->data);
  else ADJ_DISPATCH(x->dtype, avg_pool_apply, &p, dx->data, dy->data); /* average pooling is linear */
  return ADJ_SUCCESS;
}

int adj_pool_backward(adj_pool_kind kind, const adj_window_geometry *g, const adj_tensor *x, const adj_tensor *dy,
                      adj_tensor *dx) {
  adj_window_plan p;
  ADJ_CALL(adj_pool_prepare("pool backward", kind, g, x, "output gradient dy", dy, true, "input gradient dx", dx,
                            false, &p));
  if (kind == ADJ_POOL_MAX) ADJ_DISPATCH(x->dtype, max_pool_scatter, &p, x->data, dy->data, dx->data);
  else ADJ_DISPATCH(x->dtype, avg_pool_adjoint, &p, dy->data, dx->data);
  return ADJ_SUCCESS;
}
