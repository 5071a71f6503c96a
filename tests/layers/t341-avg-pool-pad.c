/* t341: average pooling with and without count_include_pad (pool.h:
 * ADJ_POOL_AVG divides by the kernel volume, ADJ_POOL_AVG_EXCLUDE_PAD by the
 * window's taps inside the input), and pooling after a padding mode:
 *   - the sequential kernels against a naive reference written here (each
 *     window summed tap by tap) and against PyTorch's F.avg_pool1d/2d/3d with
 *     count_include_pad False and True on fixed inputs (tools/pytorch/pad_twin.py wrote
 *     data/t341-avg-pool-torch.txt): outputs and input gradients, both dtypes;
 *   - the distributed pool layer with ADJ_POOL_AVG_EXCLUDE_PAD: dot-product,
 *     Taylor (linear: round-off) and distributed against sequential at 1-8
 *     ranks, with rank 0 inactive and with empty boundary blocks, and a
 *     reflect pad layer followed by the pool (a pool with padding mode
 *     reflect) against its sequential twin;
 *   - bad input on every rank: a window of padding only, which has no input
 *     taps to average. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "dist_check.h"
#include "adjoin/pool.h"
#include "adjoin/pool_layer.h"

typedef struct avg_case {
  int rank;
  int64_t shape[5];
  adj_window_geometry window;
  bool include_pad;
} avg_case;

#define W1(k, s, p) {.spatial_dims = 1, .kernel = {k}, .stride = {s}, .padding_left = {p}, .padding_right = {p}}
#define W2(k0, k1, s0, s1, p0, p1)                                                                      \
  {.spatial_dims = 2, .kernel = {k0, k1}, .stride = {s0, s1}, .padding_left = {p0, p1}, .padding_right = {p0, p1}}
#define W3(k0, k1, k2, s0, s1, s2, p0, p1, p2)                                                           \
  {.spatial_dims = 3, .kernel = {k0, k1, k2}, .stride = {s0, s1, s2}, .padding_left = {p0, p1, p2},      \
   .padding_right = {p0, p1, p2}}

/* The table of tools/pytorch/pad_twin.py's POOL_CASES, in its order. */
static const avg_case torch_cases[] = {
    {3, {2, 1, 9}, W1(3, 2, 1), false},
    {3, {2, 1, 9}, W1(3, 2, 1), true},
    {4, {1, 2, 7, 6}, W2(3, 2, 2, 1, 1, 1), false},
    {4, {1, 2, 7, 6}, W2(3, 2, 2, 1, 1, 1), true},
    {4, {1, 2, 7, 6}, W2(4, 4, 3, 2, 2, 2), false},
    {5, {1, 1, 5, 4, 6}, W3(3, 3, 3, 2, 1, 2, 1, 1, 1), false},
    {5, {1, 1, 5, 4, 6}, W3(2, 3, 2, 1, 2, 2, 1, 1, 0), true},
};

/* Distributed cases: uneven padding, dilation, padding wider than PyTorch allows. */
static const avg_case dist_cases[] = {
    {4, {2, 3, 11, 9}, W2(3, 3, 2, 2, 1, 1), false},
    {4, {2, 3, 11, 9}, {.spatial_dims = 2, .kernel = {3, 2}, .stride = {1, 2}, .dilation = {2, 1},
                        .padding_left = {2, 0}, .padding_right = {1, 1}}, false},
    {3, {2, 2, 17}, W1(5, 3, 2), false},
    {5, {1, 2, 5, 4, 6}, W3(3, 2, 3, 2, 1, 2, 1, 1, 1), false},
};

static const int parts_by_size[9][5] = {{1, 1, 1, 1, 1}, {1, 1, 1, 1, 1}, {1, 1, 2, 1, 1}, {1, 1, 1, 3, 1},
                                        {1, 1, 2, 2, 1}, {1, 1, 5, 1, 1}, {1, 1, 3, 2, 1}, {1, 1, 7, 1, 1},
                                        {2, 1, 2, 2, 1}};

static adj_pool_kind avg_kind(const avg_case *c) { return c->include_pad ? ADJ_POOL_AVG : ADJ_POOL_AVG_EXCLUDE_PAD; }

static void avg_format(char *buf, size_t size, const avg_case *c) {
  const adj_window_geometry *w = &c->window;
  int used = snprintf(buf, size, "avg%dd%s k", w->spatial_dims, c->include_pad ? "" : " exclude-pad");
  for (int d = 0; d < w->spatial_dims && used < (int)size; d++)
    used += snprintf(buf + used, size - (size_t)used, "%s%lld", d ? "x" : "", (long long)w->kernel[d]);
}

/* ---- the naive reference ---------------------------------------------------------------- */

/* y = A x, or with `adjoint` dx = A^T dy: each window's taps visited one by one. */
static void naive_avg(const avg_case *c, const adj_tensor *in, adj_tensor *out, bool adjoint) {
  const adj_window_geometry *w = &c->window;
  const adj_tensor *x = adjoint ? out : in, *y = adjoint ? in : out;
  int sd = w->spatial_dims;
  adj_tensor_zero(out);
  int64_t planes = x->shape[0] * x->shape[1], xv = 1, yv = 1;
  for (int d = 0; d < sd; d++) xv *= x->shape[2 + d], yv *= y->shape[2 + d];
  int64_t kv = 1;
  for (int d = 0; d < sd; d++) kv *= w->kernel[d];
  for (int64_t plane = 0; plane < planes; plane++)
    for (int64_t o = 0; o < yv; o++) {
      int64_t oi[3] = {0}, rest = o;
      for (int d = sd - 1; d >= 0; d--) oi[d] = rest % y->shape[2 + d], rest /= y->shape[2 + d];
      int64_t taps[512], count = 0;
      for (int64_t k = 0; k < kv; k++) {
        int64_t krest = k, flat = 0;
        bool inside = true;
        for (int d = sd - 1; d >= 0; d--) {
          int64_t j = krest % w->kernel[d];
          krest /= w->kernel[d];
          int64_t s = w->stride[d] ? w->stride[d] : 1, dil = w->dilation[d] ? w->dilation[d] : 1;
          int64_t i = oi[d] * s - w->padding_left[d] + j * dil, stride = 1;
          for (int e = d + 1; e < sd; e++) stride *= x->shape[2 + e];
          inside = inside && i >= 0 && i < x->shape[2 + d];
          flat += i * stride;
        }
        if (inside) taps[count++] = plane * xv + flat;
      }
      double divisor = c->include_pad ? (double)kv : (double)count;
      int64_t at = plane * yv + o;
      for (int64_t k = 0; k < count; k++) {
        if (adjoint) adj_tensor_set(out, taps[k], adj_tensor_get(out, taps[k]) + adj_tensor_get(in, at) / divisor);
        else adj_tensor_set(out, at, adj_tensor_get(out, at) + adj_tensor_get(in, taps[k]) / divisor);
      }
    }
}

static int avg_create(const void *spec, adj_dtype dtype, const adj_decomposition *input, adj_layer **layer) {
  const avg_case *c = spec;
  return adj_pool_layer_create(
      &(adj_pool_layer_config){.dtype = dtype, .kind = avg_kind(c), .input = input, .window = c->window}, layer);
}

/* Runs the sequential layer on x and dy; compares with y_ref and g_ref. */
static void check_sequential(adj_test *t, const avg_case *c, adj_dtype dtype, const double *x, const double *dy,
                             const double *y_ref, const double *g_ref, double *worst, const char *against) {
  adj_decomposition *root = dl_self_layout(t, c->rank, c->shape);
  adj_layer *layer = NULL;
  ADJ_TEST_OK(t, avg_create(c, dtype, root, &layer));
  if (layer) {
    adj_tensor tx, ty, tdy, tdx;
    adj_layer_create_input(layer, &tx), adj_layer_create_input(layer, &tdx);
    adj_layer_create_output(layer, &ty), adj_layer_create_output(layer, &tdy);
    for (int64_t i = 0; i < adj_tensor_volume(&tx); i++) adj_tensor_set(&tx, i, x[i]);
    for (int64_t j = 0; j < adj_tensor_volume(&ty); j++) adj_tensor_set(&tdy, j, dy[j]);
    ADJ_TEST_OK(t, adj_layer_forward(layer, &tx, &ty));
    ADJ_TEST_OK(t, adj_layer_backward(layer, &tdy, &tdx));
    double ey = 0, eg = 0;
    for (int64_t j = 0; j < adj_tensor_volume(&ty); j++) ey = fmax(ey, fabs(adj_tensor_get(&ty, j) - y_ref[j]));
    for (int64_t i = 0; i < adj_tensor_volume(&tx); i++) eg = fmax(eg, fabs(adj_tensor_get(&tdx, i) - g_ref[i]));
    char label[96];
    avg_format(label, sizeof label, c);
    /* An output averages one window and a gradient entry gathers at most one
     * window's worth of outputs. */
    int64_t taps = 1;
    for (int d = 0; d < c->window.spatial_dims; d++) taps *= c->window.kernel[d];
    double tol = adj_test_random_sum_tolerance(dtype, (double)taps);
    ADJ_TEST_CHECK(t, ey < tol && eg < tol, "%s %s: against %s y %.3e, grad %.3e", label, adj_dtype_name(dtype),
                   against, ey, eg);
    worst[dtype] = fmax(worst[dtype], fmax(ey, eg));
    adj_tensor_destroy(&tx), adj_tensor_destroy(&ty), adj_tensor_destroy(&tdy), adj_tensor_destroy(&tdx);
  }
  adj_layer_destroy(&layer);
  adj_decomposition_destroy(&root);
}

/* The fixed inputs of the twin script, in float64, and the naive results. */
static void naive_case(adj_test *t, const avg_case *c, double *worst) {
  adj_decomposition *root = dl_self_layout(t, c->rank, c->shape);
  adj_layer *layer = NULL;
  ADJ_TEST_OK(t, avg_create(c, ADJ_FLOAT64, root, &layer));
  if (layer) {
    adj_tensor x, y, dy, dx;
    adj_layer_create_input(layer, &x), adj_layer_create_input(layer, &dx);
    adj_layer_create_output(layer, &y), adj_layer_create_output(layer, &dy);
    for (int64_t i = 0; i < adj_tensor_volume(&x); i++) adj_tensor_set(&x, i, (double)((11 * i + 5) % 17) / 17.0);
    for (int64_t j = 0; j < adj_tensor_volume(&y); j++) adj_tensor_set(&dy, j, (double)((3 * j + 2) % 7) / 7.0 - 0.4);
    naive_avg(c, &x, &y, false);
    naive_avg(c, &dy, &dx, true);
    for (int dt = 0; dt < 2; dt++)
      check_sequential(t, c, (adj_dtype)dt, x.data, dy.data, y.data, dx.data, worst, "the naive reference");
    adj_tensor_destroy(&x), adj_tensor_destroy(&y), adj_tensor_destroy(&dy), adj_tensor_destroy(&dx);
  }
  adj_layer_destroy(&layer);
  adj_decomposition_destroy(&root);
}

static void test_naive(adj_test *t) {
  double worst[2] = {0, 0};
  int n = 0;
  for (size_t k = 0; k < sizeof torch_cases / sizeof torch_cases[0]; k++, n++) naive_case(t, &torch_cases[k], worst);
  for (size_t k = 0; k < sizeof dist_cases / sizeof dist_cases[0]; k++, n++) naive_case(t, &dist_cases[k], worst);
  adj_test_report(t, "  against the naive reference: %d poolings, max error float32 %.1e, float64 %.1e", n, worst[0],
                  worst[1]);
}

static void test_torch(adj_test *t, const char *path) {
  FILE *f = dl_open_reference(t, path);
  if (!f) return;
  static dl_reference r;
  static double x[DL_REFERENCE_MAX], dy[DL_REFERENCE_MAX];
  int cases = 0, total = (int)(sizeof torch_cases / sizeof torch_cases[0]);
  double worst[2] = {0, 0};
  for (int64_t i = 0; i < DL_REFERENCE_MAX; i++) x[i] = (double)((7 * i + 3) % 13) / 13.0;
  for (int64_t j = 0; j < DL_REFERENCE_MAX; j++) dy[j] = (double)((5 * j + 1) % 11) / 11.0 - 0.5;
  while (dl_read_reference(t, f, total, &r)) {
    for (int dt = 0; dt < 2; dt++)
      check_sequential(t, &torch_cases[r.index], (adj_dtype)dt, x, dy, r.y, r.grad, worst, "PyTorch");
    cases++;
  }
  fclose(f);
  adj_test_report(t, "  against PyTorch: %d poolings, max error float32 %.1e, float64 %.1e", cases, worst[0], worst[1]);
  ADJ_TEST_CHECK(t, cases == total, "%d reference cases, expected %d", cases, total);
}

/* ---- distributed ------------------------------------------------------------------------ */

/* A reflect pad layer and then the pool with zero padding, as one network. */
static int reflect_pool_create(const void *spec, adj_dtype dtype, const adj_decomposition *input, adj_layer **net) {
  const avg_case *c = spec;
  adj_pad_layer_config pad = {.dtype = dtype, .input = input, .spatial_dims = c->window.spatial_dims,
                              .mode = ADJ_PAD_REFLECT};
  adj_window_geometry w = c->window;
  for (int d = 0; d < w.spatial_dims; d++) {
    pad.padding[d][0] = w.padding_left[d], pad.padding[d][1] = w.padding_right[d];
    w.padding_left[d] = w.padding_right[d] = 0;
  }
  adj_layer *layers[2] = {NULL, NULL};
  int status = adj_pad_layer_create(&pad, &layers[0]);
  if (!status) status = adj_pool_layer_create(&(adj_pool_layer_config){.dtype = dtype, .kind = ADJ_POOL_AVG,
                                                              .input = adj_layer_output_layout(layers[0]), .window = w},
                                     &layers[1]);
  if (!status) status = adj_network_create("reflect_pool", 2, layers, net);
  adj_layer_destroy(&layers[0]), adj_layer_destroy(&layers[1]);
  return status;
}

static void test_distributed(adj_test *t) {
  for (size_t k = 0; k < sizeof dist_cases / sizeof dist_cases[0]; k++) {
    const avg_case *c = &dist_cases[k];
    char what[80], reflect[96];
    avg_format(what, sizeof what, c);
    snprintf(reflect, sizeof reflect, "reflect pad + %s", what);
    dl_check_layouts(t, what, c->rank, c->shape, parts_by_size, avg_create, c, DL_TAYLOR_LINEAR, 47u);
    dl_check_layouts(t, reflect, c->rank, c->shape, parts_by_size, reflect_pool_create, c, DL_TAYLOR_LINEAR, 53u);
  }
}

/* ---- errors ----------------------------------------------------------------------------- */

static void test_errors(adj_test *t) {
  static const int64_t shape[3] = {2, 3, 4};
  adj_decomposition *layout = dl_size_layout(t, DL_LAYOUT_ALL, 3, shape, parts_by_size);
  adj_layer *layer = NULL;
  avg_case c = {3, {2, 3, 4}, {.spatial_dims = 1, .kernel = {2}, .stride = {3}, .padding_left = {2}}, false};
  dl_expect_error(t, "window of padding only", avg_create(&c, ADJ_FLOAT64, layout, &layer), &layer,
                  "the pooling window of output 0 covers only padding");
  c.include_pad = true; /* counting the padding, the same window averages to 0 */
  ADJ_TEST_OK(t, avg_create(&c, ADJ_FLOAT64, layout, &layer));
  adj_layer_destroy(&layer);
  adj_decomposition_destroy(&layout);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t341-avg-pool-pad");
  if (t.size > 8) return adj_test_skip(&t, "the partitions are written for 1 to 8 ranks");
  if (argc < 2) return adj_test_skip(&t, "usage: t341-avg-pool-pad PYTORCH_REFERENCE_FILE");
  adj_test_report(&t, "t341 on %d ranks", t.size);
  test_naive(&t);
  test_torch(&t, argv[1]);
  test_distributed(&t);
  test_errors(&t);
  return adj_test_finish(&t);
}
