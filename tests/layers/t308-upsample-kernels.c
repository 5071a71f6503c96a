/* t308: upsampling's local kernels (adjoin/upsample.h) against the naive
 * reference kept here (each output summing its tensor-product taps, each
 * adjoint entry scattering them back), float32 and float64, 1-3 spatial
 * dimensions: nearest with whole factors 1-3 (the plan's copies, checked to
 * be chosen), nearest with other ratios and linear (the plan's tables, with
 * PyTorch's source rule, align_corners off).  The team's split gives the same
 * bits as one thread, and bad arguments fail by name. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "adjoin/upsample.h"

typedef struct up_case {
  adj_interp_mode mode;
  int sd;
  int64_t n, c, in[3], out[3];
  bool repeats; /* the plan must take its copies */
} up_case;

static const up_case cases[] = {
    {ADJ_INTERP_NEAREST, 2, 3, 5, {7, 9}, {14, 18}, true},      {ADJ_INTERP_NEAREST, 1, 4, 3, {33}, {66}, true},
    {ADJ_INTERP_NEAREST, 3, 2, 3, {3, 4, 5}, {6, 8, 10}, true}, {ADJ_INTERP_NEAREST, 2, 2, 3, {5, 6}, {15, 6}, true},
    {ADJ_INTERP_NEAREST, 2, 2, 3, {5, 6}, {5, 18}, true},       {ADJ_INTERP_NEAREST, 2, 2, 3, {6, 5}, {9, 7}, false},
    {ADJ_INTERP_LINEAR, 2, 3, 4, {7, 9}, {14, 18}, false},      {ADJ_INTERP_LINEAR, 1, 4, 3, {17}, {40}, false},
    {ADJ_INTERP_LINEAR, 3, 2, 2, {3, 4, 5}, {6, 7, 10}, false}, {ADJ_INTERP_NEAREST, 2, 40, 16, {7, 7}, {14, 14}, true},
    {ADJ_INTERP_LINEAR, 2, 40, 16, {7, 7}, {14, 14}, false},
};

/* PyTorch's source rule (upsample_layer.h) for output o of m from n inputs. */
static void up_source(adj_interp_mode mode, int64_t n, int64_t m, int64_t o, int64_t *i0, int64_t *i1, double *l) {
  double r = (double)n / (double)m;
  if (mode == ADJ_INTERP_NEAREST) {
    int64_t i = (int64_t)floor((double)o * r);
    *i0 = *i1 = i < n - 1 ? i : n - 1, *l = 0;
    return;
  }
  double src = fmax(((double)o + 0.5) * r - 0.5, 0);
  int64_t i = (int64_t)src < n - 1 ? (int64_t)src : n - 1;
  *i0 = i, *i1 = i < n - 1 ? i + 1 : i, *l = src - (double)i;
}

typedef struct up_tables {
  int64_t index[3][2][80];
  double weight[3][2][80];
  adj_upsample_axis axes[3];
} up_tables;

static void up_tables_make(const up_case *k, up_tables *t) {
  for (int d = 0; d < k->sd; d++) {
    for (int64_t o = 0; o < k->out[d]; o++) {
      double l;
      up_source(k->mode, k->in[d], k->out[d], o, &t->index[d][0][o], &t->index[d][1][o], &l);
      t->weight[d][0][o] = 1 - l, t->weight[d][1][o] = l;
    }
    t->axes[d] = (adj_upsample_axis){k->in[d], k->out[d], {t->index[d][0], t->index[d][1]},
                                     {t->weight[d][0], t->weight[d][1]}};
  }
}

/* The tap (t0, t1, t2) of output (a, b, c): its flat input offset and weight
 * (dimensions beyond the case's read index 0 with weight 1). */
static double up_tap(const up_case *k, const up_tables *t, const int64_t *o, const int *tap, int64_t *offset) {
  double w = 1;
  *offset = 0;
  for (int d = 0; d < k->sd; d++) {
    int u = k->mode == ADJ_INTERP_LINEAR ? tap[d] : 0;
    w *= k->mode == ADJ_INTERP_LINEAR ? t->weight[d][u][o[d]] : 1;
    *offset = *offset * k->in[d] + t->index[d][u][o[d]];
  }
  return w;
}

/* The reference forward (dx NULL) or adjoint, in long double, over every output and tap. */
static void up_reference(const up_case *k, const up_tables *t, const adj_tensor *x, const adj_tensor *dy,
                         long double *y, long double *dx) {
  int64_t in_plane = 1, out_plane = 1, planes = k->n * k->c;
  for (int d = 0; d < k->sd; d++) in_plane *= k->in[d], out_plane *= k->out[d];
  int taps = k->mode == ADJ_INTERP_LINEAR ? 1 << k->sd : 1;
  for (int64_t i = 0; dx && i < planes * in_plane; i++) dx[i] = 0;
  for (int64_t p = 0; p < planes; p++)
    for (int64_t e = 0; e < out_plane; e++) {
      int64_t o[3], rest = e;
      for (int d = k->sd - 1; d >= 0; d--) o[d] = rest % k->out[d], rest /= k->out[d];
      long double sum = 0;
      for (int tp = 0; tp < taps; tp++) {
        int tap[3] = {tp & 1, (tp >> 1) & 1, (tp >> 2) & 1};
        int64_t offset;
        double w = up_tap(k, t, o, tap, &offset);
        if (dx) dx[p * in_plane + offset] += w * (long double)adj_tensor_get(dy, p * out_plane + e);
        else sum += w * (long double)adj_tensor_get(x, p * in_plane + offset);
      }
      if (!dx) y[p * out_plane + e] = sum;
    }
}

/* Largest |got - want| / max(1, |want|). */
static double up_error(const adj_tensor *got, const long double *want) {
  double worst = 0;
  for (int64_t i = 0; i < adj_tensor_volume(got); i++)
    worst = fmax(worst, (double)(fabsl(adj_tensor_get(got, i) - want[i]) / fmaxl(1, fabsl(want[i]))));
  return worst;
}

/* Forward and adjoint under `threads` threads into y and dx. */
static void up_run(adj_test *t, const adj_upsample_plan *plan, int threads, const adj_tensor *x, adj_tensor *y,
                   const adj_tensor *dy, adj_tensor *dx) {
  ADJ_TEST_OK(t, adj_threads_set(threads));
  ADJ_TEST_OK(t, adj_upsample_forward(plan, x, y));
  ADJ_TEST_OK(t, adj_upsample_adjoint(plan, dy, dx));
}

static void up_check(adj_test *t, const up_case *k, adj_dtype dtype, adj_rng *rng) {
  int64_t xs[5] = {k->n, k->c}, ys[5] = {k->n, k->c};
  for (int d = 0; d < k->sd; d++) xs[2 + d] = k->in[d], ys[2 + d] = k->out[d];
  up_tables tables;
  up_tables_make(k, &tables);
  adj_upsample_plan *plan = NULL;
  ADJ_TEST_OK(t, adj_upsample_plan_create(k->mode, k->sd, tables.axes, &plan));
  adj_tensor x, y, dy, dx, y3, dx3;
  adj_tensor *all[] = {&x, &dx, &dx3, &y, &dy, &y3};
  for (int i = 0; i < 6; i++) ADJ_TEST_OK(t, adj_tensor_create(all[i], dtype, 2 + k->sd, i < 3 ? xs : ys));
  adj_rng_fill_uniform(rng, &x, -1, 1);
  adj_rng_fill_uniform(rng, &dy, -1, 1);
  long double *want_y = calloc((size_t)adj_tensor_volume(&y), sizeof *want_y);
  long double *want_dx = calloc((size_t)adj_tensor_volume(&x), sizeof *want_dx);
  up_reference(k, &tables, &x, NULL, want_y, NULL);
  up_reference(k, &tables, NULL, &dy, NULL, want_dx);
  up_run(t, plan, 1, &x, &y, &dy, &dx);
  up_run(t, plan, 3, &x, &y3, &dy, &dx3);
  double e_y = up_error(&y, want_y), e_dx = up_error(&dx, want_dx);
  double bound = adj_test_sum_tolerance(dtype, k->mode == ADJ_INTERP_LINEAR ? 8 : 27);
  char text[64], to[64];
  adj_test_report(t, "%s %s %s -> %s, kernels %s, %s: forward %.3g, adjoint %.3g (bound %.2g)",
                  k->mode ? "linear" : "nearest", adj_dtype_name(dtype),
                  adj_shape_format(text, sizeof text, 2 + k->sd, xs), adj_shape_format(to, sizeof to, 2 + k->sd, ys), adj_kernels_isa(),
                  adj_upsample_plan_repeats(plan) ? "copies" : "tables", e_y, e_dx, bound);
  ADJ_TEST_CHECK(t, e_y <= bound && e_dx <= bound, "%s: forward error %.3g, adjoint %.3g above %.2g", text, e_y, e_dx,
                 bound);
  ADJ_TEST_CHECK(t, adj_upsample_plan_repeats(plan) == k->repeats, "%s: the plan %s copies", text,
                 k->repeats ? "does not take" : "takes");
  size_t size = adj_dtype_size(dtype);
  ADJ_TEST_CHECK(t, !memcmp(y.data, y3.data, size * (size_t)adj_tensor_volume(&y)) &&
                        !memcmp(dx.data, dx3.data, size * (size_t)adj_tensor_volume(&dx)),
                 "%s: 1 and 3 threads give different bits", text);
  for (int i = 0; i < 6; i++) adj_tensor_destroy(all[i]);
  free(want_y), free(want_dx);
  adj_upsample_plan_destroy(&plan);
}

static void up_check_errors(adj_test *t) {
  int64_t idx[4] = {0, 1, 2, 5};
  adj_upsample_axis axis = {3, 4, {idx, idx}, {NULL, NULL}};
  adj_upsample_plan *plan = NULL;
  adj_test_expect_error(t, "index out of range", adj_upsample_plan_create(ADJ_INTERP_NEAREST, 1, &axis, &plan),
                        ADJ_ERR_ARG, "reads input 5 of 3");
  adj_test_expect_error(t, "linear without weights", adj_upsample_plan_create(ADJ_INTERP_LINEAR, 1, &axis, &plan),
                        ADJ_ERR_ARG, "no index or weight table");
  adj_test_expect_error(t, "four dimensions", adj_upsample_plan_create(ADJ_INTERP_NEAREST, 4, &axis, &plan),
                        ADJ_ERR_ARG, "4 spatial dimensions");
  idx[3] = 2;
  ADJ_TEST_OK(t, adj_upsample_plan_create(ADJ_INTERP_NEAREST, 1, &axis, &plan));
  adj_tensor x, y;
  ADJ_TEST_OK(t, adj_tensor_create(&x, ADJ_FLOAT32, 3, (const int64_t[]){2, 2, 3}));
  ADJ_TEST_OK(t, adj_tensor_create(&y, ADJ_FLOAT32, 3, (const int64_t[]){2, 2, 5}));
  adj_test_expect_error(t, "output of another length", adj_upsample_forward(plan, &x, &y), ADJ_ERR_SIZE, "output y");
  adj_tensor_destroy(&x), adj_tensor_destroy(&y);
  adj_upsample_plan_destroy(&plan);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t308-upsample-kernels");
  up_check_errors(&t);
  adj_rng *rng = NULL;
  ADJ_TEST_OK(&t, adj_rng_create(5, &rng));
  static const adj_dtype dtypes[] = {ADJ_FLOAT32, ADJ_FLOAT64};
  for (size_t i = 0; rng && i < sizeof cases / sizeof cases[0]; i++)
    for (int d = 0; d < 2; d++) up_check(&t, &cases[i], dtypes[d], rng);
  adj_rng_destroy(&rng);
  return adj_test_finish(&t);
}
