/* Max and average pooling: forward, jvp and backward, 1-3 spatial dimensions. */
#include <string.h>

#include "adjoin/pool.h"
#include "kernels_impl.h"

enum { ADJ_POOL_MAX_TAPS = 512 }; /* larger windows take the general path */

/* The passes of the typed interior loops (pool_typed.inc). */
typedef enum adj_pool_pass {
  ADJ_MAX_GATHER,  /* y[o] = src[argmax] */
  ADJ_MAX_SCATTER, /* dx[argmax] += dy[o] */
  ADJ_AVG_APPLY,   /* y[o] = mean of the window of src */
  ADJ_AVG_ADJOINT, /* every tap of the window += dy[o] / kernel volume */
} adj_pool_pass;

/* ---- float32 max pooling's 2x2 transpose in vectors ---------------------------------
 *
 * The float32 backward of a 2x2 stride-2 max pool writes every tap: dy at each
 * window's first largest input, 0 at the other three, four windows per
 * vector (two input rows deinterleaved into the four taps, the selects, the
 * four results interleaved back).  No clearing pass is needed (the windows
 * tile the input), and rows of 4 outputs or more need no scalar tail: their
 * last vector overlaps the one before it and rewrites the same values.  The
 * vectors are 16 bytes, which every level holds in one register (the
 * baseline's SSE2 would split 32-byte shuffles into slow sequences).  Ties
 * and NaNs go as in the scalar loops (strict >, the first tap wins), and
 * +0.0f is added to the chosen dy as the scalar path's add into a cleared dx
 * does, so even a -0.0 gradient comes out bit for bit the same.  Used from
 * the typed kernel's clones (pool_typed.inc), so it is compiled for each
 * level. */
typedef float adj_pool_floats __attribute__((vector_size(16)));
typedef int32_t adj_pool_lanes __attribute__((vector_size(16)));

/* v where mask's lanes are set, else +0.0f. */
#define ADJ_POOL_PICK(mask, v) ((adj_pool_floats)((mask) & (adj_pool_lanes)(v)))

/* Windows [o, o + 4) of the output row whose input rows start at x0 and x1. */
ADJ_CLONE_HELPER void adj_pool_scatter4(const float *x0, const float *x1, float *d0, float *d1, const float *dy,
                                        int64_t o) {
  adj_pool_floats a, b, c, e, g;
  memcpy(&a, x0 + 2 * o, sizeof a), memcpy(&b, x0 + 2 * o + 4, sizeof b);
  memcpy(&c, x1 + 2 * o, sizeof c), memcpy(&e, x1 + 2 * o + 4, sizeof e);
  memcpy(&g, dy + o, sizeof g);
  adj_pool_floats v0 = __builtin_shufflevector(a, b, 0, 2, 4, 6), v1 = __builtin_shufflevector(a, b, 1, 3, 5, 7);
  adj_pool_floats v2 = __builtin_shufflevector(c, e, 0, 2, 4, 6), v3 = __builtin_shufflevector(c, e, 1, 3, 5, 7);
  adj_pool_lanes m1 = v1 > v0;
  adj_pool_floats top = ADJ_POOL_PICK(m1, v1) + ADJ_POOL_PICK(~m1, v0);
  adj_pool_lanes m2 = v2 > top;
  top = ADJ_POOL_PICK(m2, v2) + ADJ_POOL_PICK(~m2, top);
  adj_pool_lanes m3 = v3 > top, later = m2 | m3;
  adj_pool_floats t0 = ADJ_POOL_PICK(~(m1 | later), g) + 0.0f, t1 = ADJ_POOL_PICK(m1 & ~later, g) + 0.0f;
  adj_pool_floats t2 = ADJ_POOL_PICK(m2 & ~m3, g) + 0.0f, t3 = ADJ_POOL_PICK(m3, g) + 0.0f;
  adj_pool_floats r0 = __builtin_shufflevector(t0, t1, 0, 4, 1, 5), r1 = __builtin_shufflevector(t0, t1, 2, 6, 3, 7);
  adj_pool_floats r2 = __builtin_shufflevector(t2, t3, 0, 4, 1, 5), r3 = __builtin_shufflevector(t2, t3, 2, 6, 3, 7);
  memcpy(d0 + 2 * o, &r0, sizeof r0), memcpy(d0 + 2 * o + 4, &r1, sizeof r1);
  memcpy(d1 + 2 * o, &r2, sizeof r2), memcpy(d1 + 2 * o + 4, &r3, sizeof r3);
}

/* Rows of at least 4 outputs (shorter ones take the float64 loop). */
ADJ_CLONE_HELPER void adj_pool_2x2_scatter_floats(int64_t rows, int64_t w, const float *x, float *dx, const float *dy) {
  for (int64_t r = 0; r < rows; r++) {
    const float *x0 = x + 4 * r * w, *x1 = x0 + 2 * w, *g = dy + r * w;
    float *d0 = dx + 4 * r * w, *d1 = d0 + 2 * w;
    for (int64_t o = 0; o + 4 <= w; o += 4) adj_pool_scatter4(x0, x1, d0, d1, g, o);
    if (w % 4) adj_pool_scatter4(x0, x1, d0, d1, g, w - 4);
  }
}

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

/* One interior pass over planes, for a team (adj_team_run). */
typedef struct adj_pool_work {
  const adj_window_plan *p;
  const int64_t *taps;
  adj_dtype dtype;
  adj_pool_pass pass;
  const void *x;
  void *in, *out;
} adj_pool_work;

static void adj_pool_planes(void *arg, int64_t first, int64_t count, int member) {
  const adj_pool_work *w = arg;
  int64_t at_in = first * w->p->in_volume, at_out = first * w->p->out_volume;
  ADJ_DISPATCH(w->dtype, pool_interior, w->p, w->taps, w->pass, count, adj_at_const(w->x, w->dtype, at_in),
               adj_at(w->in, w->dtype, at_in), adj_at(w->out, w->dtype, at_out));
}

/* Runs `pass` through the interior loops when they apply, the planes shared
 * over a team; false otherwise. */
static bool adj_pool_fast(const adj_window_plan *p, adj_dtype dtype, adj_pool_pass pass, const void *x, void *in,
                          void *out) {
  int64_t taps[ADJ_POOL_MAX_TAPS];
  if (!adj_pool_interior_taps(p, taps)) return false;
  int64_t planes = p->batch * p->channels;
  adj_pool_work w = {p, taps, dtype, pass, x, in, out};
  adj_team_run(adj_team_size(planes, planes * p->in_volume), planes, adj_pool_planes, &w);
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
