/* The window geometry of convolution and pooling: output extents and the
 * plans the kernels loop over (kernels_impl.h). */
#include "adjoin/window.h"
#include "kernels_impl.h"

static int64_t adj_default_one(int64_t v) { return v == 0 ? 1 : v; }

/* Validates one spatial dimension and returns its output extent in *out. */
static int adj_window_dim(const char *who, const adj_window_geometry *g, int d, int64_t in, int64_t *out) {
  int64_t k = g->kernel[d], s = adj_default_one(g->stride[d]), dil = adj_default_one(g->dilation[d]);
  int64_t pl = g->padding_left[d], pr = g->padding_right[d];
  ADJ_CHECK(k >= 1, ADJ_ERR_ARG, "%s: kernel extent %lld in spatial dimension %d must be >= 1", who,
            (long long)k, d);
  ADJ_CHECK(s >= 1 && dil >= 1, ADJ_ERR_ARG,
            "%s: stride %lld and dilation %lld in spatial dimension %d must be >= 1", who, (long long)s,
            (long long)dil, d);
  ADJ_CHECK(pl >= 0 && pr >= 0, ADJ_ERR_ARG, "%s: padding (%lld, %lld) in spatial dimension %d is negative",
            who, (long long)pl, (long long)pr, d);
  /* k, dil, pl and pr come from the caller unbounded: the span and the padded
   * extent must not overflow int64 on the way to the comparison. */
  int64_t span, padded;
  ADJ_CHECK(!__builtin_mul_overflow(dil, k - 1, &span) && !__builtin_add_overflow(span, 1, &span), ADJ_ERR_ARG,
            "%s: spatial dimension %d: kernel %lld with dilation %lld spans more than int64 can hold", who, d,
            (long long)k, (long long)dil);
  ADJ_CHECK(!__builtin_add_overflow(in, pl, &padded) && !__builtin_add_overflow(padded, pr, &padded), ADJ_ERR_ARG,
            "%s: spatial dimension %d: input %lld with padding %lld + %lld is more than int64 can hold", who, d,
            (long long)in, (long long)pl, (long long)pr);
  ADJ_CHECK(span <= padded, ADJ_ERR_SIZE,
            "%s: spatial dimension %d: kernel %lld with dilation %lld spans %lld but the padded input is "
            "only %lld (%lld + padding %lld + %lld)",
            who, d, (long long)k, (long long)dil, (long long)span, (long long)padded, (long long)in,
            (long long)pl, (long long)pr);
  *out = (padded - span) / s + 1;
  return ADJ_SUCCESS;
}

static int adj_check_spatial_dims(const char *who, const adj_window_geometry *g) {
  ADJ_CHECK(g, ADJ_ERR_ARG, "%s: window geometry is NULL", who);
  ADJ_CHECK(g->spatial_dims >= 1 && g->spatial_dims <= ADJ_MAX_SPATIAL_DIMS, ADJ_ERR_ARG,
            "%s: spatial_dims is %d, not 1, 2 or 3", who, g->spatial_dims);
  return ADJ_SUCCESS;
}

int adj_window_output_shape(const adj_window_geometry *g, const int64_t *in_spatial, int64_t *out_spatial) {
  ADJ_CALL(adj_check_spatial_dims("window", g));
  for (int d = 0; d < g->spatial_dims; d++) ADJ_CALL(adj_window_dim("window", g, d, in_spatial[d], &out_spatial[d]));
  return ADJ_SUCCESS;
}

int adj_window_plan_make(const char *who, const adj_window_geometry *g, const adj_tensor *x, adj_window_plan *p) {
  ADJ_CALL(adj_check_spatial_dims(who, g));
  int sd = g->spatial_dims;
  ADJ_CALL(adj_check_input(who, "input x (N, C, spatial...)", x, 2 + sd));
  *p = (adj_window_plan){.spatial_dims = sd, .batch = x->shape[0], .channels = x->shape[1]};
  for (int d = 0; d < 3; d++) {
    p->in[d] = p->out[d] = p->kernel[d] = p->stride[d] = p->dilation[d] = 1;
    p->pad[d] = 0;
  }
  for (int d = 0; d < sd; d++) {
    int q = 3 - sd + d; /* spatial dimension d goes to slot q of three */
    p->in[q] = x->shape[2 + d];
    ADJ_CALL(adj_window_dim(who, g, d, p->in[q], &p->out[q]));
    p->kernel[q] = g->kernel[d];
    p->stride[q] = adj_default_one(g->stride[d]);
    p->dilation[q] = adj_default_one(g->dilation[d]);
    p->pad[q] = g->padding_left[d];
  }
  p->in_volume = p->in[0] * p->in[1] * p->in[2];
  p->out_volume = p->out[0] * p->out[1] * p->out[2];
  p->kernel_volume = p->kernel[0] * p->kernel[1] * p->kernel[2];
  return ADJ_SUCCESS;
}

int adj_window_plan_output_shape(const adj_window_plan *p, int64_t channels, int64_t *shape) {
  shape[0] = p->batch;
  shape[1] = channels;
  for (int d = 0; d < p->spatial_dims; d++) shape[2 + d] = p->out[3 - p->spatial_dims + d];
  return 2 + p->spatial_dims;
}
