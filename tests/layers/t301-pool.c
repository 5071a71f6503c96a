/* t301: max and average pooling 1-D/2-D/3-D against a direct loop, the
 * Jacobian dot-product test, the Taylor test, ties (and the max pool's
 * commuting with ReLU) and bad-configuration errors. */
#include <stdio.h>
#include <string.h>

#include "layer_check.h"
#include "adjoin/pool.h"

typedef struct pool_case {
  const char *name;
  adj_pool_kind kind;
  int64_t n, c;
  int64_t in[3];
  adj_window_geometry g;
} pool_case;

static const pool_case cases[] = {
    {"max 1d k2 s2", ADJ_POOL_MAX, 2, 3, {10}, {.spatial_dims = 1, .kernel = {2}, .stride = {2}}},
    {"avg 1d k3 s1 d2 pad(1,1)", ADJ_POOL_AVG, 2, 2, {9},
     {.spatial_dims = 1, .kernel = {3}, .dilation = {2}, .padding_left = {1}, .padding_right = {1}}},
    {"max 2d k2 s2 (LeNet)", ADJ_POOL_MAX, 3, 4, {12, 12}, {.spatial_dims = 2, .kernel = {2, 2}, .stride = {2, 2}}},
    /* Odd extents: the windows leave a last row and column out, so the 2x2
     * forward path does not apply (the plain interior loops do). */
    {"max 2d k2 s2 13x11", ADJ_POOL_MAX, 2, 3, {13, 11}, {.spatial_dims = 2, .kernel = {2, 2}, .stride = {2, 2}}},
    /* Rows of 3, 8, 16 and 21 outputs: the float32 backward one window at a
     * time, and in vectors, whole and with a last one overlapping the one
     * before. */
    {"max 2d k2 s2 8x6", ADJ_POOL_MAX, 3, 2, {8, 6}, {.spatial_dims = 2, .kernel = {2, 2}, .stride = {2, 2}}},
    {"max 2d k2 s2 4x16", ADJ_POOL_MAX, 2, 3, {4, 16}, {.spatial_dims = 2, .kernel = {2, 2}, .stride = {2, 2}}},
    {"max 2d k2 s2 6x32", ADJ_POOL_MAX, 2, 2, {6, 32}, {.spatial_dims = 2, .kernel = {2, 2}, .stride = {2, 2}}},
    {"max 2d k2 s2 4x42", ADJ_POOL_MAX, 3, 2, {4, 42}, {.spatial_dims = 2, .kernel = {2, 2}, .stride = {2, 2}}},
    {"avg 2d k2 s2 (LeNet)", ADJ_POOL_AVG, 3, 4, {12, 12}, {.spatial_dims = 2, .kernel = {2, 2}, .stride = {2, 2}}},
    {"max 2d k3 s2 pad(1,0|1,1)", ADJ_POOL_MAX, 2, 3, {9, 8},
     {.spatial_dims = 2, .kernel = {3, 3}, .stride = {2, 2}, .padding_left = {1, 0}, .padding_right = {1, 1}}},
    {"avg 2d k2 s3 d2 pad(0,1|2,0)", ADJ_POOL_AVG, 2, 2, {10, 9},
     {.spatial_dims = 2, .kernel = {2, 2}, .stride = {3, 3}, .dilation = {2, 2}, .padding_left = {0, 1},
      .padding_right = {2, 0}}},
    {"max 2d k2 s1 d2 pad 1", ADJ_POOL_MAX, 2, 2, {7, 6},
     {.spatial_dims = 2, .kernel = {2, 2}, .dilation = {2, 2}, .padding_left = {1, 1}, .padding_right = {1, 1}}},
    {"max 3d k(2,3,2) s(1,2,3) d(2,1,1) pad(1,1,0|0,1,1)", ADJ_POOL_MAX, 2, 2, {5, 6, 7},
     {.spatial_dims = 3, .kernel = {2, 3, 2}, .stride = {1, 2, 3}, .dilation = {2, 1, 1},
      .padding_left = {1, 1, 0}, .padding_right = {0, 1, 1}}},
    {"avg 3d k3 s2 pad 1", ADJ_POOL_AVG, 2, 2, {5, 6, 5},
     {.spatial_dims = 3, .kernel = {3, 3, 3}, .stride = {2, 2, 2}, .padding_left = {1, 1, 1},
      .padding_right = {1, 1, 1}}},
    /* No padding: the interior loops, with dilation, 3-D and unused trailing inputs. */
    {"max 2d k3 s2 d2", ADJ_POOL_MAX, 2, 3, {11, 10}, {.spatial_dims = 2, .kernel = {3, 3}, .stride = {2, 2},
                                                       .dilation = {2, 2}}},
    {"avg 3d k2 s(2,1,2) d(1,2,1)", ADJ_POOL_AVG, 2, 2, {5, 7, 6},
     {.spatial_dims = 3, .kernel = {2, 2, 2}, .stride = {2, 1, 2}, .dilation = {1, 2, 1}}},
    /* Large enough (>= 2^16 elements) for a thread team to split the planes. */
    {"max 2d k2 s2 N=16 C=6 28x28 (team)", ADJ_POOL_MAX, 16, 6, {28, 28},
     {.spatial_dims = 2, .kernel = {2, 2}, .stride = {2, 2}}},
    {"avg 2d k3 s3 N=9 C=5 30x31 (team)", ADJ_POOL_AVG, 9, 5, {30, 31},
     {.spatial_dims = 2, .kernel = {3, 3}, .stride = {3, 3}}},
};

/* Direct loops in float64.  Per output: the window's first maximum (max) or
 * the mean over the full kernel volume (avg).  Forward y = pool(x); jvp
 * y = J(x) src (src = dx); backward (dy != NULL) dx += J(x)^T dy. */
static void naive_pool(const pool_case *c, const adj_tensor *x, const adj_tensor *src, adj_tensor *y,
                       const adj_tensor *dy, adj_tensor *dx) {
  const adj_window_geometry *g = &c->g;
  int sd = g->spatial_dims;
  int64_t out[3];
  adj_window_output_shape(g, c->in, out);
  int64_t iv = layer_volume(sd, c->in), ov = layer_volume(sd, out), kv = layer_volume(sd, g->kernel);
  for (int64_t plane = 0; plane < c->n * c->c; plane++)
    for (int64_t o = 0; o < ov; o++) {
      double sum = 0, best = 0;
      int64_t arg = -1;
      double grad = dy ? adj_tensor_get(dy, plane * ov + o) : 0;
      for (int64_t k = 0; k < kv; k++) {
        int64_t s = layer_window_source(g, c->in, out, o, k);
        if (s < 0) continue;
        double v = adj_tensor_get(x, plane * iv + s);
        if (arg < 0 || v > best) best = v, arg = s;
        if (src) sum += adj_tensor_get(src, plane * iv + s);
        if (dx && c->kind == ADJ_POOL_AVG)
          adj_tensor_set(dx, plane * iv + s, adj_tensor_get(dx, plane * iv + s) + grad / (double)kv);
      }
      if (dx && c->kind == ADJ_POOL_MAX)
        adj_tensor_set(dx, plane * iv + arg, adj_tensor_get(dx, plane * iv + arg) + grad);
      if (y) adj_tensor_set(y, plane * ov + o, c->kind == ADJ_POOL_MAX ? adj_tensor_get(src, plane * iv + arg)
                                                                         : sum / (double)kv);
    }
}

typedef struct pool_point {
  const pool_case *c;
  adj_tensor x, dx, xh;
} pool_point;

static int pool_jvp_cb(void *ctx, const adj_tensor *v, adj_tensor *u) {
  pool_point *p = ctx;
  return adj_pool_jvp(p->c->kind, &p->c->g, &p->x, &v[0], &u[0]);
}

static int pool_backward_cb(void *ctx, const adj_tensor *u, adj_tensor *v) {
  pool_point *p = ctx;
  return adj_pool_backward(p->c->kind, &p->c->g, &p->x, &u[0], &v[0]);
}

static int pool_eval_cb(void *ctx, double h, adj_tensor *y) {
  pool_point *p = ctx;
  layer_axpy(&p->xh, &p->x, h, &p->dx);
  return adj_pool_forward(p->c->kind, &p->c->g, &p->xh, y);
}

static int pool_taylor_jvp_cb(void *ctx, adj_tensor *dy) {
  pool_point *p = ctx;
  return adj_pool_jvp(p->c->kind, &p->c->g, &p->x, &p->dx, dy);
}

/* Distinct values spaced 2/n apart, with a direction small enough (|0.1 dx| <
 * spacing / 2) that no window's maximum changes for the Taylor steps. */
static void spread_point(pool_point *p) {
  int64_t n = adj_tensor_volume(&p->x);
  for (int64_t i = 0; i < n; i++) {
    adj_tensor_set(&p->x, i, -1.0 + 2.0 * (double)(i * 7919 % n) / (double)n);
    adj_tensor_set(&p->dx, i, adj_tensor_get(&p->dx, i) * (2.0 / (double)n) * 4.0);
  }
}

static void check_values(adj_test *t, const pool_case *c, pool_point *p, adj_rng *rng, int rank,
                         const int64_t *ys) {
  adj_dtype dtype = p->x.dtype;
  adj_tensor y, dy, ry, rdy, seed = layer_random(rng, dtype, rank, ys), g = layer_random(rng, dtype, rank, p->x.shape);
  adj_tensor x = layer_to_f64(&p->x), dx = layer_to_f64(&p->dx), seed64 = layer_to_f64(&seed), rg;
  adj_tensor_create(&y, dtype, rank, ys);
  adj_tensor_create(&dy, dtype, rank, ys);
  adj_tensor_create(&ry, ADJ_FLOAT64, rank, ys);
  adj_tensor_create(&rdy, ADJ_FLOAT64, rank, ys);
  adj_tensor_create(&rg, ADJ_FLOAT64, rank, p->x.shape);
  ADJ_TEST_OK(t, adj_pool_forward(c->kind, &c->g, &p->x, &y));
  ADJ_TEST_OK(t, adj_pool_jvp(c->kind, &c->g, &p->x, &p->dx, &dy));
  ADJ_TEST_OK(t, adj_pool_backward(c->kind, &c->g, &p->x, &seed, &g)); /* g held junk: overwritten */
  naive_pool(c, &x, &x, &ry, NULL, NULL);
  naive_pool(c, &x, &dx, &rdy, NULL, NULL);
  naive_pool(c, &x, NULL, NULL, &seed64, &rg);
  layer_compare(t, &y, &ry, "%s forward", c->name);
  layer_compare(t, &dy, &rdy, "%s jvp", c->name);
  layer_compare(t, &g, &rg, "%s backward", c->name);
  adj_tensor *all[] = {&y, &dy, &ry, &rdy, &seed, &g, &x, &dx, &seed64, &rg};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) adj_tensor_destroy(all[i]);
}

static void run_case(adj_test *t, const pool_case *c, adj_dtype dtype, adj_rng *rng) {
  int64_t xs[5] = {c->n, c->c}, ys[5] = {c->n, c->c}, out[3];
  int rank = 2 + c->g.spatial_dims;
  ADJ_TEST_OK(t, adj_window_output_shape(&c->g, c->in, out));
  for (int d = 0; d < c->g.spatial_dims; d++) xs[2 + d] = c->in[d], ys[2 + d] = out[d];
  pool_point p = {.c = c, .x = layer_random(rng, dtype, rank, xs), .dx = layer_random(rng, dtype, rank, xs)};
  adj_tensor_create(&p.xh, dtype, rank, xs);
  check_values(t, c, &p, rng, rank, ys);
  adj_tensor range = {.dtype = dtype, .rank = rank};
  memcpy(range.shape, ys, sizeof ys);
  adj_dottest_problem problem = {.comm = t->comm, .n_domain = 1, .domain = &p.x, .n_range = 1, .range = &range,
                                 .forward = pool_jvp_cb, .adjoint = pool_backward_cb, .ctx = &p};
  layer_dottest(t, c->name, &problem);
  if (dtype == ADJ_FLOAT64) {
    spread_point(&p);
    /* Max pooling is piecewise linear and average pooling linear: away from
     * ties the jvp must reproduce the step exactly. */
    layer_taylor taylor = {.rank = rank, .shape = ys, .eval = pool_eval_cb, .jvp = pool_taylor_jvp_cb, .ctx = &p,
                           .piecewise_linear = true, .reduction_length = layer_volume(c->g.spatial_dims, c->g.kernel)};
    layer_taylor_check(t, c->name, &taylor);
  }
  adj_tensor_destroy(&p.x);
  adj_tensor_destroy(&p.dx);
  adj_tensor_destroy(&p.xh);
}

/* ---- ties, and the pool before the ReLU ---------------------------------------------
 *
 * Values from {-1, -1/2, 0, 0, 1/2, 1/2}: most windows hold ties and many hold
 * only numbers <= 0.  The max pool must still pick the first largest tap,
 * exactly as the naive loops do (fast 2x2 path, interior loops, padded
 * path).  And LeNet-5 runs pool then ReLU in place of ReLU then pool
 * (net/lenet.c): both orders must give the same output and the same input
 * gradient bit for bit, on exactly these tie-heavy inputs. */

/* Entries drawn from six values.  Small multiples of 1/2 also keep the sums
 * of overlapping windows' gradients exact in float32, so every comparison
 * below can ask for equal bits. */
static adj_tensor ties_tensor(adj_rng *rng, adj_dtype dtype, int rank, const int64_t *shape, const double *values) {
  adj_tensor t = layer_random(rng, dtype, rank, shape);
  for (int64_t i = 0; i < adj_tensor_volume(&t); i++) {
    int pick = (int)((adj_tensor_get(&t, i) + 1.0) * 3.0);
    adj_tensor_set(&t, i, values[pick < 0 ? 0 : pick > 5 ? 5 : pick]);
  }
  return t;
}

/* Elements whose bits differ (0: identical tensors). */
static int64_t bits_differing(const adj_tensor *a, const adj_tensor *b) {
  size_t es = adj_dtype_size(a->dtype);
  int64_t differ = 0;
  for (int64_t i = 0; i < adj_tensor_volume(a); i++)
    differ += memcmp((const char *)a->data + (size_t)i * es, (const char *)b->data + (size_t)i * es, es) != 0;
  return differ;
}

static void check_ties(adj_test *t, const pool_case *c, adj_dtype dtype, adj_rng *rng) {
  int64_t xs[5] = {c->n, c->c}, ys[5] = {c->n, c->c}, out[3];
  int rank = 2 + c->g.spatial_dims;
  adj_window_output_shape(&c->g, c->in, out);
  for (int d = 0; d < c->g.spatial_dims; d++) xs[2 + d] = c->in[d], ys[2 + d] = out[d];
  static const double tied[] = {-1.0, -0.5, 0.0, 0.0, 0.5, 0.5}, grads[] = {-2.0, -1.0, -0.5, 0.5, 1.0, 1.5};
  adj_tensor x = ties_tensor(rng, dtype, rank, xs, tied), dy = ties_tensor(rng, dtype, rank, ys, grads);
  adj_tensor y, dx, ry, rdx;
  adj_tensor x64 = layer_to_f64(&x), dy64 = layer_to_f64(&dy);
  adj_tensor_create(&y, dtype, rank, ys), adj_tensor_create(&dx, dtype, rank, xs);
  adj_tensor_create(&ry, ADJ_FLOAT64, rank, ys), adj_tensor_create(&rdx, ADJ_FLOAT64, rank, xs);
  ADJ_TEST_OK(t, adj_pool_forward(c->kind, &c->g, &x, &y));
  ADJ_TEST_OK(t, adj_pool_backward(c->kind, &c->g, &x, &dy, &dx));
  naive_pool(c, &x64, &x64, &ry, NULL, NULL);
  naive_pool(c, &x64, NULL, NULL, &dy64, &rdx);
  adj_tensor y64 = layer_to_f64(&y), dx64 = layer_to_f64(&dx);
  int64_t wrong_y = bits_differing(&y64, &ry), wrong_dx = bits_differing(&dx64, &rdx);
  ADJ_TEST_CHECK(t, wrong_y == 0 && wrong_dx == 0, "%s %s ties: %lld outputs and %lld gradients differ from the "
                 "first-maximum reference", c->name, adj_dtype_name(dtype), (long long)wrong_y, (long long)wrong_dx);
  adj_test_report(t, "  %-44s %s  ties: outputs differing %lld of %lld, gradients %lld of %lld", c->name,
                  adj_dtype_name(dtype), (long long)wrong_y, (long long)adj_tensor_volume(&y), (long long)wrong_dx,
                  (long long)adj_tensor_volume(&dx));
  layer_destroy(6, (adj_tensor *const[]){&x64, &dy64, &ry, &rdx, &y64, &dx64});

  /* pool then ReLU against ReLU then pool, forward and backward. */
  adj_activation relu = {ADJ_RELU, 0};
  adj_tensor xr, yr, ypr, rely, g_in, g_out, dx2;
  adj_tensor_create(&xr, dtype, rank, xs), adj_tensor_create(&yr, dtype, rank, ys);
  adj_tensor_create(&ypr, dtype, rank, ys), adj_tensor_create(&rely, dtype, rank, ys);
  adj_tensor_create(&g_in, dtype, rank, xs), adj_tensor_create(&g_out, dtype, rank, ys);
  adj_tensor_create(&dx2, dtype, rank, xs);
  ADJ_TEST_OK(t, adj_activation_forward(&relu, &x, &xr));             /* ReLU, then pool */
  ADJ_TEST_OK(t, adj_pool_forward(c->kind, &c->g, &xr, &yr));
  ADJ_TEST_OK(t, adj_pool_backward(c->kind, &c->g, &xr, &dy, &g_in));
  ADJ_TEST_OK(t, adj_activation_backward(&relu, &x, &g_in, &dx));
  ADJ_TEST_OK(t, adj_pool_forward(c->kind, &c->g, &x, &ypr));           /* pool, then ReLU */
  ADJ_TEST_OK(t, adj_activation_forward(&relu, &ypr, &rely));
  ADJ_TEST_OK(t, adj_activation_backward(&relu, &ypr, &dy, &g_out));
  ADJ_TEST_OK(t, adj_pool_backward(c->kind, &c->g, &x, &g_out, &dx2));
  int64_t differ_y = bits_differing(&yr, &rely), differ_dx = bits_differing(&dx, &dx2);
  ADJ_TEST_CHECK(t, differ_y == 0 && differ_dx == 0, "%s %s: pool-then-ReLU differs from ReLU-then-pool in %lld "
                 "outputs and %lld gradients", c->name, adj_dtype_name(dtype), (long long)differ_y,
                 (long long)differ_dx);
  adj_test_report(t, "  %-44s %s  ReLU after pool vs before: outputs differing %lld, gradients %lld", c->name,
                  adj_dtype_name(dtype), (long long)differ_y, (long long)differ_dx);
  layer_destroy(11, (adj_tensor *const[]){&x, &dy, &y, &dx, &xr, &yr, &ypr, &rely, &g_in, &g_out, &dx2});
}

static void check_errors(adj_test *t) {
  adj_tensor x, y;
  adj_tensor_create(&x, ADJ_FLOAT64, 3, (const int64_t[]){1, 2, 3});
  adj_tensor_create(&y, ADJ_FLOAT64, 3, (const int64_t[]){1, 2, 4});
  adj_window_geometry only_pad = {.spatial_dims = 1, .kernel = {2}, .padding_left = {2}};
  adj_test_expect_error(t, "max window all padding", adj_pool_forward(ADJ_POOL_MAX, &only_pad, &x, &y), ADJ_ERR_SIZE,
                        "the window of output 0 covers only padding");
  /* Average pooling of an all-padding window is simply 0, so the same geometry passes the checks. */
  ADJ_TEST_OK(t, adj_pool_forward(ADJ_POOL_AVG, &only_pad, &x, &y));
  adj_window_geometry big = {.spatial_dims = 1, .kernel = {3}, .dilation = {2}};
  adj_test_expect_error(t, "dilated kernel 5 > input 3", adj_pool_forward(ADJ_POOL_AVG, &big, &x, &y), ADJ_ERR_SIZE,
                        "spans 5 but the padded input is only 3");
  adj_window_geometry k2 = {.spatial_dims = 1, .kernel = {2}};
  adj_test_expect_error(t, "output shape", adj_pool_forward(ADJ_POOL_MAX, &k2, &x, &y), ADJ_ERR_SIZE,
                        "output y has shape [1, 2, 4] but needs [1, 2, 2]");
  adj_test_expect_error(t, "unknown kind", adj_pool_forward((adj_pool_kind)7, &k2, &x, &y), ADJ_ERR_ARG,
                        "unknown pooling kind 7");
  adj_window_geometry two_d = {.spatial_dims = 2, .kernel = {2, 2}};
  adj_test_expect_error(t, "rank vs spatial_dims", adj_pool_forward(ADJ_POOL_MAX, &two_d, &x, &y), ADJ_ERR_SIZE,
                        "has rank 3 but needs rank 4");
  adj_tensor_destroy(&x);
  adj_tensor_destroy(&y);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_rng *rng = layer_begin(&t, &argc, &argv, "t301-pool", 301);
  for (int threads = 1; threads <= 3; threads += 2) { /* 3 threads: uneven shares of the planes */
    ADJ_TEST_OK(&t, adj_threads_set(threads));
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
      for (int d = 0; d < 2; d++) {
        adj_test_report(&t, "case %s (N=%lld C=%lld) %s, %d kernel threads", cases[i].name, (long long)cases[i].n,
                        (long long)cases[i].c, adj_dtype_name(layer_dtypes[d]), threads);
        run_case(&t, &cases[i], layer_dtypes[d], rng);
      }
  }
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    for (int d = 0; d < 2 && cases[i].kind == ADJ_POOL_MAX; d++) check_ties(&t, &cases[i], layer_dtypes[d], rng);
  check_errors(&t);
  return layer_finish(&t, rng);
}
