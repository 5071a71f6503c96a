/* t300: convolution 1-D/2-D/3-D against a direct loop, its Jacobian dot-product
 * test, its Taylor test and its bad-configuration errors; then every case
 * again under each algorithm forced (the default algorithm's setter and the plan
 * object's flag), and the plan object's own errors. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "layer_check.h"

typedef struct conv_case {
  const char *name;
  int64_t n, c_in, c_out;
  int64_t in[3]; /* spatial extents, first spatial_dims used */
  adj_window_geometry g;
  bool bias;
} conv_case;

static const conv_case cases[] = {
    {"1d k3 s2 d2 pad(1,2)", 3, 3, 4, {11}, {.spatial_dims = 1, .kernel = {3}, .stride = {2}, .dilation = {2},
                                              .padding_left = {1}, .padding_right = {2}}, true},
    {"1d k4 s1 d1 pad(0,0) no bias", 2, 2, 5, {9}, {.spatial_dims = 1, .kernel = {4}}, false},
    {"2d k5 pad 2 (LeNet conv1)", 4, 1, 6, {12, 12}, {.spatial_dims = 2, .kernel = {5, 5},
                                                      .padding_left = {2, 2}, .padding_right = {2, 2}}, true},
    {"2d k(3,2) s(1,2) d(2,1) pad(0,1|2,0)", 2, 2, 3, {9, 8},
     {.spatial_dims = 2, .kernel = {3, 2}, .stride = {1, 2}, .dilation = {2, 1}, .padding_left = {0, 1},
      .padding_right = {2, 0}}, true},
    {"2d k1 s2", 2, 4, 3, {7, 6}, {.spatial_dims = 2, .kernel = {1, 1}, .stride = {2, 2}}, true},
    {"2d k3 s2 d2 pad(2,1|1,2)", 2, 3, 2, {10, 11},
     {.spatial_dims = 2, .kernel = {3, 3}, .stride = {2, 2}, .dilation = {2, 2}, .padding_left = {2, 1},
      .padding_right = {1, 2}}, false},
    {"3d k(2,3,1) s(2,1,1) d(1,2,1) pad(1,0,2|0,2,1)", 2, 2, 2, {6, 5, 7},
     {.spatial_dims = 3, .kernel = {2, 3, 1}, .stride = {2, 1, 1}, .dilation = {1, 2, 1},
      .padding_left = {1, 0, 2}, .padding_right = {0, 2, 1}}, true},
    {"3d k3 pad 1", 2, 2, 3, {4, 5, 4},
     {.spatial_dims = 3, .kernel = {3, 3, 3}, .padding_left = {1, 1, 1}, .padding_right = {1, 1, 1}}, true},
    /* Unit strides and C_in >= 16 take the shifted-GEMM path (its tiling checks
     * compare it with the im2col path that smaller workspaces fall back to). */
    {"shifted 1d C_in 16 k5 d2 pad(3,1)", 2, 16, 4, {40},
     {.spatial_dims = 1, .kernel = {5}, .dilation = {2}, .padding_left = {3}, .padding_right = {1}}, true},
    {"shifted 2d C_in 16 k3 pad(1,2|1,0)", 3, 16, 3, {12, 20},
     {.spatial_dims = 2, .kernel = {3, 3}, .padding_left = {1, 2}, .padding_right = {1, 0}}, true},
    {"shifted 3d C_in 16 k(2,2,3) no bias", 2, 16, 2, {4, 10, 20}, {.spatial_dims = 3, .kernel = {2, 2, 3}}, false},
    /* Unit strides and C_in < 16 take the direct path: 7 output channels and
     * 12 taps leave partial register blocks (6+1 channels; taps in blocks of
     * 4 + 4 + 4 here, 2 + 3 and 1 in the two cases after it). */
    {"direct 2d C_out 7 k(3,4) d(2,1) pad(1,0|0,3)", 3, 3, 7, {9, 11},
     {.spatial_dims = 2, .kernel = {3, 4}, .dilation = {2, 1}, .padding_left = {1, 0}, .padding_right = {0, 3}}, true},
    {"direct 2d k(1,5) pad(0,2)", 2, 2, 5, {6, 9},
     {.spatial_dims = 2, .kernel = {1, 5}, .padding_left = {0, 2}, .padding_right = {0, 2}}, true},
    {"direct 2d k1 no bias", 2, 3, 4, {5, 7}, {.spatial_dims = 2, .kernel = {1, 1}}, false},
    /* One and two channels take wider correlation blocks (8 and 4 vectors):
     * one output channel in the forward (in rows) and the input gradient (on
     * the grid), two in the input gradient in place; the vector counts leave
     * remainders at every level (e.g. 33 row vectors and 35 grid vectors of
     * float32 at x86-64-v3; 43 in-place vectors of float64 at v3). */
    {"direct narrow C_in 1 C_out 1 k3 pad 1", 2, 1, 1, {11, 19},
     {.spatial_dims = 2, .kernel = {3, 3}, .padding_left = {1, 1}, .padding_right = {1, 1}}, true},
    {"direct narrow C_in 2 no padding k3", 2, 2, 3, {13, 13}, {.spatial_dims = 2, .kernel = {3, 3}}, true},
    /* Output rows of at least one vector (16 float32 lanes at x86-64-v4, 8 at
     * v3, 4 at the baseline) are computed in place, the last vector of a row
     * overlapping the one before it: LeNet's conv1 (28 wide), rows of whole
     * vectors (32) and of one lane more than a v4 vector (17).
     * N=9 images make two chunks in the backward. */
    {"direct rows LeNet conv1 28x28 N=9", 9, 1, 6, {28, 28},
     {.spatial_dims = 2, .kernel = {5, 5}, .padding_left = {2, 2}, .padding_right = {2, 2}}, true},
    {"direct rows 2d width 32 k3", 2, 2, 3, {4, 34}, {.spatial_dims = 2, .kernel = {3, 3}}, true},
    {"direct rows 3d width 17 k(1,2,3) d(1,1,2) pad(0,1,1|1,0,2)", 2, 3, 5, {3, 4, 16},
     {.spatial_dims = 3, .kernel = {1, 2, 3}, .dilation = {1, 1, 2}, .padding_left = {0, 1, 1},
      .padding_right = {1, 0, 2}}, false},
    /* The input gradient of one input channel on a grid of whole-vector rows
     * (32 wide) loads each dy row once for a block of output rows (8 at
     * x86-64-v4 and v3): kernels of 3 and 7 rows, the smallest and largest
     * of the kernel's cases, taps 2 rows apart (a middle row of zero
     * weights), and grid heights of 23 and 19 rows, which leave rows after
     * the last whole block to the one-channel vector blocks. */
    {"direct dx rows C_in 1 k3 pad 1 21x30", 2, 1, 4, {21, 30},
     {.spatial_dims = 2, .kernel = {3, 3}, .padding_left = {1, 1}, .padding_right = {1, 1}}, true},
    {"direct dx rows C_in 1 k7 pad 3 13x26", 2, 1, 3, {13, 26},
     {.spatial_dims = 2, .kernel = {7, 7}, .padding_left = {3, 3}, .padding_right = {3, 3}}, false},
    {"direct dx rows C_in 1 k(2,3) d(2,1) pad 1 6x30", 3, 1, 2, {6, 30},
     {.spatial_dims = 2, .kernel = {2, 3}, .dilation = {2, 1}, .padding_left = {1, 1}, .padding_right = {1, 1}},
     true},
    /* No padding: x is read and dx written in place (every image but the
     * last); N=9 makes several backward chunks, so some chunks read x in
     * place and the last copies it. */
    {"direct no padding 30x30 k3 N=9", 9, 3, 4, {30, 30}, {.spatial_dims = 2, .kernel = {3, 3}}, true},
    /* C_out a multiple of the vector length: dw runs with the output channels
     * along the vectors.  32 channels make 2 float32 / 4 float64 vectors, 24
     * make 3 float64 vectors (blocks of 2 and 1; float32 takes the other
     * kernel); 15 and 21 taps make blocks of 7 + 8 and 10 + 11. */
    {"direct C_out 32 k(3,5) pad(1,2|0,2)", 3, 2, 32, {9, 12},
     {.spatial_dims = 2, .kernel = {3, 5}, .padding_left = {1, 2}, .padding_right = {0, 2}}, true},
    {"direct C_out 24 k(3,7) d(1,2) no bias", 2, 3, 24, {8, 20},
     {.spatial_dims = 2, .kernel = {3, 7}, .dilation = {1, 2}}, false},
    /* Small planes, whose dy grid is mostly zeros (under 60% real (tap, output)
     * pairs), take the input gradient by pairs with the images along the
     * vectors from 3 input channels, given a group of images (32 float32
     * lanes at x86-64-v4, 16 at v3, 8 at the baseline): a dist4 worker's
     * conv2 block (one block of 6 channels), 7 channels (blocks of 3 + 4) with
     * padding and dilation, 5 channels in 3-D.  The batches leave a last
     * group of a few images at every level. */
    {"direct pairs dist4 conv2 block 9x9 N=37", 37, 6, 16, {9, 9}, {.spatial_dims = 2, .kernel = {5, 5}}, true},
    {"direct pairs C_in 7 k3 d(2,1) pad(2,1|0,1) N=35", 35, 7, 5, {7, 6},
     {.spatial_dims = 2, .kernel = {3, 3}, .dilation = {2, 1}, .padding_left = {2, 1}, .padding_right = {0, 1}},
     false},
    {"direct pairs 3d C_in 5 k(2,3,3) d(1,1,2) N=33", 33, 5, 3, {3, 4, 5},
     {.spatial_dims = 3, .kernel = {2, 3, 3}, .dilation = {1, 1, 2}, .padding_left = {0, 1, 0},
      .padding_right = {1, 0, 2}}, true},
    /* Large enough (>= 2^16 multiply-adds) for a thread team to split the batch. */
    {"LeNet conv2 N=7 (team)", 7, 6, 16, {14, 14}, {.spatial_dims = 2, .kernel = {5, 5}}, true},
    {"shifted 2d C_in 16 k3 pad 1 N=5 (team)", 5, 16, 8, {12, 12},
     {.spatial_dims = 2, .kernel = {3, 3}, .padding_left = {1, 1}, .padding_right = {1, 1}}, true},
};

/* ---- naive reference -------------------------------------------------------------- */

/* Direct loops in float64.  Forward: y = conv(x; w) + b (y != NULL).  Backward
 * (dy != NULL): dx += J_x^T dy, dw += J_w^T dy, db += J_b^T dy. */
static void naive_conv(const adj_window_geometry *g, const adj_tensor *x, const adj_tensor *w, const adj_tensor *b,
                       adj_tensor *y, const adj_tensor *dy, adj_tensor *dx, adj_tensor *dw, adj_tensor *db) {
  int sd = g->spatial_dims;
  const int64_t *in = x->shape + 2;
  int64_t out[3];
  adj_window_output_shape(g, in, out);
  int64_t n_img = x->shape[0], ci_n = x->shape[1], co_n = w->shape[0];
  int64_t iv = layer_volume(sd, in), ov = layer_volume(sd, out), kv = layer_volume(sd, g->kernel);
  /* Each (output, tap)'s source position, once: every image and channel pair reads it. */
  int64_t *source = malloc(sizeof *source * (size_t)(ov * kv));
  if (!source) abort();
  for (int64_t o = 0; o < ov; o++)
    for (int64_t k = 0; k < kv; k++) source[o * kv + k] = layer_window_source(g, in, out, o, k);
  for (int64_t n = 0; n < n_img; n++)
    for (int64_t co = 0; co < co_n; co++)
      for (int64_t o = 0; o < ov; o++) {
        int64_t yi = (n * co_n + co) * ov + o;
        double sum = b ? adj_tensor_get(b, co) : 0.0, grad = dy ? adj_tensor_get(dy, yi) : 0.0;
        if (db) adj_tensor_set(db, co, adj_tensor_get(db, co) + grad);
        for (int64_t ci = 0; ci < ci_n; ci++)
          for (int64_t k = 0; k < kv; k++) {
            int64_t s = source[o * kv + k];
            if (s < 0) continue;
            int64_t xi = (n * ci_n + ci) * iv + s, wi = (co * ci_n + ci) * kv + k;
            sum += adj_tensor_get(x, xi) * adj_tensor_get(w, wi);
            if (dx) adj_tensor_set(dx, xi, adj_tensor_get(dx, xi) + adj_tensor_get(w, wi) * grad);
            if (dw) adj_tensor_set(dw, wi, adj_tensor_get(dw, wi) + adj_tensor_get(x, xi) * grad);
          }
        if (y) adj_tensor_set(y, yi, sum);
      }
  free(source);
}

/* ---- one case ------------------------------------------------------------------------ */

typedef struct conv_point {
  const adj_window_geometry *g;
  adj_tensor x, w, b, dx, dw, db; /* point and direction */
  adj_tensor xh, wh, bh;          /* scratch for x + h dx, ... */
  bool bias;
  adj_workspace ws;
} conv_point;

static int64_t shape_of(const conv_case *c, int64_t channels, const int64_t *spatial, int64_t *shape) {
  shape[0] = c->n;
  shape[1] = channels;
  for (int d = 0; d < c->g.spatial_dims; d++) shape[2 + d] = spatial[d];
  return 2 + c->g.spatial_dims;
}

static void point_make(conv_point *p, const conv_case *c, adj_dtype dtype, adj_rng *rng) {
  int64_t xs[5], ws[5] = {c->c_out, c->c_in};
  int rank = (int)shape_of(c, c->c_in, c->in, xs);
  for (int d = 0; d < c->g.spatial_dims; d++) ws[2 + d] = c->g.kernel[d];
  *p = (conv_point){.g = &c->g, .bias = c->bias};
  p->x = layer_random(rng, dtype, rank, xs);
  p->w = layer_random(rng, dtype, rank, ws);
  p->b = layer_random(rng, dtype, 1, &c->c_out);
  p->dx = layer_random(rng, dtype, rank, xs);
  p->dw = layer_random(rng, dtype, rank, ws);
  p->db = layer_random(rng, dtype, 1, &c->c_out);
  adj_tensor_create(&p->xh, dtype, rank, xs);
  adj_tensor_create(&p->wh, dtype, rank, ws);
  adj_tensor_create(&p->bh, dtype, 1, &c->c_out);
  size_t bytes = 0;
  adj_conv_workspace_size(&c->g, &p->x, &p->w, &bytes);
  adj_workspace_reserve(&p->ws, bytes);
}

static void point_free(conv_point *p) {
  adj_tensor *all[] = {&p->x, &p->w, &p->b, &p->dx, &p->dw, &p->db, &p->xh, &p->wh, &p->bh};
  for (size_t i = 0; i < sizeof all / sizeof *all; i++) adj_tensor_destroy(all[i]);
  adj_workspace_release(&p->ws);
}

static const adj_tensor *maybe(const conv_point *p, const adj_tensor *t) { return p->bias ? t : NULL; }

/* Dot test callbacks: the domain is (dx, dw[, db]), the range dy. */
static int conv_jvp_cb(void *ctx, const adj_tensor *v, adj_tensor *u) {
  conv_point *p = ctx;
  return adj_conv_jvp(p->g, &p->x, &p->w, &v[0], &v[1], p->bias ? &v[2] : NULL, &u[0], &p->ws);
}

static int conv_backward_cb(void *ctx, const adj_tensor *u, adj_tensor *v) {
  conv_point *p = ctx;
  adj_tensor_zero(&v[1]); /* parameter gradients accumulate */
  if (p->bias) adj_tensor_zero(&v[2]);
  return adj_conv_backward(p->g, &p->x, &p->w, &u[0], &v[0], &v[1], p->bias ? &v[2] : NULL, &p->ws);
}

static int conv_eval_cb(void *ctx, double h, adj_tensor *y) {
  conv_point *p = ctx;
  layer_axpy(&p->xh, &p->x, h, &p->dx);
  layer_axpy(&p->wh, &p->w, h, &p->dw);
  layer_axpy(&p->bh, &p->b, h, &p->db);
  return adj_conv_forward(p->g, &p->xh, &p->wh, maybe(p, &p->bh), y, &p->ws);
}

static int conv_taylor_jvp_cb(void *ctx, adj_tensor *dy) {
  conv_point *p = ctx;
  return adj_conv_jvp(p->g, &p->x, &p->w, &p->dx, &p->dw, maybe(p, &p->db), dy, &p->ws);
}

/* forward and jvp against the direct loop. */
static void check_forward_jvp(adj_test *t, const conv_case *c, conv_point *p, int rank, const int64_t *ys) {
  adj_dtype dtype = p->x.dtype;
  adj_tensor y, dy, ref, ref2;
  adj_tensor_create(&y, dtype, rank, ys);
  adj_tensor_create(&dy, dtype, rank, ys);
  adj_tensor_create(&ref, ADJ_FLOAT64, rank, ys);
  adj_tensor_create(&ref2, ADJ_FLOAT64, rank, ys);
  adj_tensor x = layer_to_f64(&p->x), w = layer_to_f64(&p->w), b = layer_to_f64(&p->b);
  adj_tensor dx = layer_to_f64(&p->dx), dw = layer_to_f64(&p->dw), db = layer_to_f64(&p->db);
  ADJ_TEST_OK(t, adj_conv_forward(&c->g, &p->x, &p->w, maybe(p, &p->b), &y, &p->ws));
  naive_conv(&c->g, &x, &w, p->bias ? &b : NULL, &ref, NULL, NULL, NULL, NULL);
  layer_compare(t, &y, &ref, "%s forward", c->name);
  /* The jvp of the bilinear map: conv(dx; w) + conv(x; dw) + db. */
  ADJ_TEST_OK(t, adj_conv_jvp(&c->g, &p->x, &p->w, &p->dx, &p->dw, maybe(p, &p->db), &dy, &p->ws));
  naive_conv(&c->g, &dx, &w, p->bias ? &db : NULL, &ref, NULL, NULL, NULL, NULL);
  naive_conv(&c->g, &x, &dw, NULL, &ref2, NULL, NULL, NULL, NULL);
  adj_tensor_add(&ref, &ref2);
  layer_compare(t, &dy, &ref, "%s jvp", c->name);
  layer_destroy(10, (adj_tensor *const[]){&y, &dy, &ref, &ref2, &x, &w, &b, &dx, &dw, &db});
}

/* Forward output and backward gradients (dw, db from zero) with workspace ws. */
static void run_with(adj_test *t, const conv_case *c, conv_point *p, const adj_tensor *dy, adj_workspace *ws,
                     adj_tensor *out /* [y, dx, dw, db] */) {
  for (int i = 0; i < 4; i++) adj_tensor_zero(&out[i]);
  ADJ_TEST_OK(t, adj_conv_forward(&c->g, &p->x, &p->w, maybe(p, &p->b), &out[0], ws));
  ADJ_TEST_OK(t, adj_conv_backward(&c->g, &p->x, &p->w, dy, &out[1], &out[2], p->bias ? &out[3] : NULL, ws));
}

/* Smaller workspaces cut the output into smaller tiles (one output line, a few
 * lines, one image, two images with a partial last tile when N is odd); every
 * tiling must give the results of the preferred one. */
static void check_tiling(adj_test *t, const conv_case *c, conv_point *p, adj_rng *rng, int rank, const int64_t *ys) {
  size_t es = adj_dtype_size(p->x.dtype), image = 0;
  size_t line = (size_t)((c->c_in * layer_volume(c->g.spatial_dims, c->g.kernel) + c->c_out) * ys[rank - 1]) * es;
  adj_tensor one = p->x, dy = layer_random(rng, p->x.dtype, rank, ys), ref[4], got[4];
  one.shape[0] = 1;
  ADJ_TEST_OK(t, adj_conv_workspace_size(&c->g, &one, &p->w, &image));
  const adj_tensor *like[4] = {&dy, &p->x, &p->w, &p->b};
  for (int i = 0; i < 4; i++) {
    adj_tensor_create(&ref[i], p->x.dtype, like[i]->rank, like[i]->shape);
    adj_tensor_create(&got[i], p->x.dtype, like[i]->rank, like[i]->shape);
  }
  run_with(t, c, p, &dy, &p->ws, ref);
  const struct {
    const char *what;
    size_t bytes;
  } sizes[] = {{"1 line", line}, {"3 lines", 3 * line}, {"1 image", image}, {"2 images", 2 * image}};
  static const char *const names[4] = {"y", "dx", "dw", "db"};
  for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
    adj_workspace small = {0};
    ADJ_TEST_OK(t, adj_workspace_reserve(&small, sizes[i].bytes));
    run_with(t, c, p, &dy, &small, got);
    for (int k = 0; k < 4; k++) {
      layer_compare(t, &got[k], &ref[k], "%s %s, workspace of %s", c->name, names[k], sizes[i].what);
    }
    adj_workspace_release(&small);
  }
  for (int i = 0; i < 4; i++) adj_tensor_destroy(&ref[i]), adj_tensor_destroy(&got[i]);
  adj_tensor_destroy(&dy);
}

/* backward against the direct loop: dx is overwritten (pre-filled with junk),
 * dw and db accumulate onto their previous (random) contents. */
static void check_backward(adj_test *t, const conv_case *c, conv_point *p, adj_rng *rng, int rank,
                           const int64_t *ys) {
  adj_dtype dtype = p->x.dtype;
  adj_tensor dy = layer_random(rng, dtype, rank, ys);
  adj_tensor gx = layer_random(rng, dtype, rank, p->x.shape), gw = layer_random(rng, dtype, rank, p->w.shape);
  adj_tensor gb = layer_random(rng, dtype, 1, &c->c_out);
  adj_tensor rx, rw = layer_to_f64(&gw), rb = layer_to_f64(&gb);
  adj_tensor_create(&rx, ADJ_FLOAT64, rank, p->x.shape);
  adj_tensor x = layer_to_f64(&p->x), w = layer_to_f64(&p->w), dy64 = layer_to_f64(&dy);
  ADJ_TEST_OK(t, adj_conv_backward(&c->g, &p->x, &p->w, &dy, &gx, &gw, p->bias ? &gb : NULL, &p->ws));
  naive_conv(&c->g, &x, &w, NULL, NULL, &dy64, &rx, &rw, p->bias ? &rb : NULL);
  layer_compare(t, &gx, &rx, "%s backward dx (overwrite)", c->name);
  layer_compare(t, &gw, &rw, "%s backward dw (+=)", c->name);
  layer_compare(t, &gb, &rb, "%s backward db (+=)", c->name);
  /* Without dx (a network's first layer): the direct path's weight gradient
   * then reads dy where it lies instead of from its grid. */
  ADJ_TEST_OK(t, adj_conv_backward(&c->g, &p->x, &p->w, &dy, NULL, &gw, p->bias ? &gb : NULL, &p->ws));
  naive_conv(&c->g, &x, &w, NULL, NULL, &dy64, NULL, &rw, p->bias ? &rb : NULL);
  layer_compare(t, &gw, &rw, "%s backward without dx: dw (+=)", c->name);
  layer_compare(t, &gb, &rb, "%s backward without dx: db (+=)", c->name);
  layer_destroy(10, (adj_tensor *const[]){&dy, &gx, &gw, &gb, &rx, &rw, &rb, &x, &w, &dy64});
}

static void check_jacobian(adj_test *t, const conv_case *c, conv_point *p, int rank, const int64_t *ys) {
  adj_tensor domain[3] = {p->x, p->w, p->b};
  adj_tensor range = {.dtype = p->x.dtype, .rank = rank};
  memcpy(range.shape, ys, sizeof(int64_t) * (size_t)rank);
  adj_dottest_problem problem = {.comm = t->comm, .n_domain = p->bias ? 3 : 2, .domain = domain,
                                 .n_range = 1, .range = &range, .forward = conv_jvp_cb,
                                 .adjoint = conv_backward_cb, .ctx = p};
  char label[160];
  snprintf(label, sizeof label, "%s J (x, w%s)", c->name, p->bias ? ", b" : "");
  layer_dottest(t, label, &problem);
  if (p->x.dtype != ADJ_FLOAT64) return;
  layer_taylor taylor = {.rank = rank, .shape = ys, .eval = conv_eval_cb, .jvp = conv_taylor_jvp_cb, .ctx = p};
  layer_taylor_check(t, c->name, &taylor);
}

/* A random point of case c, its output's shape in ys and rank returned, and
 * the forward and jvp checked there. */
static int point_checked(adj_test *t, const conv_case *c, adj_dtype dtype, adj_rng *rng, conv_point *p, int64_t *ys) {
  point_make(p, c, dtype, rng);
  int64_t out[3];
  ADJ_TEST_OK(t, adj_window_output_shape(&c->g, c->in, out));
  int rank = (int)shape_of(c, c->c_out, out, ys);
  check_forward_jvp(t, c, p, rank, ys);
  return rank;
}

static void run_case(adj_test *t, const conv_case *c, adj_dtype dtype, adj_rng *rng) {
  conv_point p;
  int64_t ys[5];
  int rank = point_checked(t, c, dtype, rng, &p, ys);
  check_tiling(t, c, &p, rng, rank, ys);
  check_backward(t, c, &p, rng, rank, ys);
  check_jacobian(t, c, &p, rank, ys);
  point_free(&p);
}

/* ---- every algorithm on every case ---------------------------------------------------- */

static const adj_conv_algorithm forced[] = {ADJ_CONV_ALGORITHM_DIRECT, ADJ_CONV_ALGORITHM_SHIFTED,
                                            ADJ_CONV_ALGORITHM_IM2COL, ADJ_CONV_ALGORITHM_MEASURE};

/* What a plan forced to `a` runs: direct and shifted need unit strides. */
static adj_conv_algorithm expected_algorithm(const conv_case *c, adj_conv_algorithm a) {
  for (int d = 0; d < c->g.spatial_dims; d++)
    if (c->g.stride[d] > 1) return ADJ_CONV_ALGORITHM_IM2COL;
  return a;
}

/* Whether a plan asked for `a` may run `ran`: the forced algorithm where it
 * applies, and under MEASURE any algorithm that applies. */
static bool plan_runs(const conv_case *c, adj_conv_algorithm a, adj_conv_algorithm ran) {
  if (a != ADJ_CONV_ALGORITHM_MEASURE) return ran == expected_algorithm(c, a);
  return ran != ADJ_CONV_ALGORITHM_AUTO && ran != ADJ_CONV_ALGORITHM_MEASURE && expected_algorithm(c, ran) == ran;
}

/* Plan object forced to a: it reports the algorithm it runs, and its forward
 * and backward give bit for bit what the stateless calls under
 * the default algorithm set to the one it runs give, twice in a row (the same
 * sums every run). */
static void check_plan(adj_test *t, const conv_case *c, conv_point *p, adj_conv_algorithm a, adj_rng *rng,
                       int rank, const int64_t *ys) {
  adj_conv_plan *plan = NULL;
  ADJ_TEST_OK(t, adj_conv_plan_create(&(adj_conv_plan_config){.geometry = c->g, .algorithm = a}, &p->x, &p->w,
                                      &plan));
  adj_conv_algorithm ran = adj_conv_plan_algorithm(plan);
  ADJ_TEST_CHECK(t, plan_runs(c, a, ran), "%s plan forced to %s runs %s", c->name, adj_conv_algorithm_name(a),
                 adj_conv_algorithm_name(ran));
  /* The stateless reference runs the plan's algorithm, in a workspace sized for it. */
  adj_workspace ref_ws = {0};
  if (a == ADJ_CONV_ALGORITHM_MEASURE) {
    adj_test_report(t, "  %s: measured at plan creation, runs %s", c->name, adj_conv_algorithm_name(ran));
    ADJ_TEST_OK(t, adj_conv_algorithm_set_default(ran));
  }
  size_t ref_bytes = 0;
  ADJ_TEST_OK(t, adj_conv_workspace_size(&c->g, &p->x, &p->w, &ref_bytes));
  ADJ_TEST_OK(t, adj_workspace_reserve(&ref_ws, ref_bytes));
  adj_workspace ws = {0};
  ADJ_TEST_OK(t, adj_workspace_reserve(&ws, adj_conv_plan_workspace_size(plan)));
  adj_tensor dy = layer_random(rng, p->x.dtype, rank, ys), got[2][4], ref[4];
  const adj_tensor *like[4] = {&dy, &p->x, &p->w, &p->b};
  for (int i = 0; i < 4; i++) {
    adj_tensor_create(&ref[i], p->x.dtype, like[i]->rank, like[i]->shape);
    for (int r = 0; r < 2; r++) adj_tensor_create(&got[r][i], p->x.dtype, like[i]->rank, like[i]->shape);
  }
  run_with(t, c, p, &dy, &ref_ws, ref);
  adj_workspace_release(&ref_ws);
  /* The workspace is scratch, shared with other layers in a network: the
   * plan must give the same sums over a workspace full of NaN bytes, left by
   * somebody else, as over a fresh one. */
  for (int r = 0; r < 2; r++) {
    if (ws.data) memset(ws.data, 0xff, ws.bytes);
    ADJ_TEST_OK(t, adj_conv_plan_forward(plan, &p->x, &p->w, maybe(p, &p->b), &got[r][0], &ws));
    if (ws.data) memset(ws.data, 0xff, ws.bytes);
    ADJ_TEST_OK(t, adj_conv_plan_backward(plan, &p->x, &p->w, &dy, &got[r][1], &got[r][2],
                                          p->bias ? &got[r][3] : NULL, &ws));
  }
  static const char *const names[4] = {"y", "dx", "dw", "db"};
  for (int i = 0; i < (p->bias ? 4 : 3); i++) {
    size_t bytes = (size_t)adj_tensor_volume(&ref[i]) * adj_dtype_size(p->x.dtype);
    ADJ_TEST_CHECK(t, memcmp(got[0][i].data, ref[i].data, bytes) == 0, "%s plan %s %s equals the stateless call's",
                   c->name, adj_conv_algorithm_name(a), names[i]);
    ADJ_TEST_CHECK(t, memcmp(got[0][i].data, got[1][i].data, bytes) == 0, "%s plan %s %s the same on a second run",
                   c->name, adj_conv_algorithm_name(a), names[i]);
  }
  for (int i = 0; i < 4; i++) {
    adj_tensor_destroy(&ref[i]);
    for (int r = 0; r < 2; r++) adj_tensor_destroy(&got[r][i]);
  }
  adj_tensor_destroy(&dy);
  adj_workspace_release(&ws);
  adj_conv_plan_destroy(&plan);
  ADJ_TEST_CHECK(t, plan == NULL, "plan destroy clears the handle");
}

/* One case with the algorithm forced as the process's default
 * (adj_conv_algorithm_set_default, as ADJ_CONV_ALGORITHM would; the stateless
 * calls and the workspace size read it): against the direct loop,
 * the dot-product test, and the plan object. */
static void run_forced(adj_test *t, const conv_case *c, adj_dtype dtype, adj_conv_algorithm a, adj_rng *rng) {
  ADJ_TEST_OK(t, adj_conv_algorithm_set_default(a));
  conv_point p;
  int64_t ys[5];
  int rank = point_checked(t, c, dtype, rng, &p, ys);
  check_backward(t, c, &p, rng, rank, ys);
  adj_tensor domain[3] = {p.x, p.w, p.b};
  adj_tensor range = {.dtype = dtype, .rank = rank};
  memcpy(range.shape, ys, sizeof(int64_t) * (size_t)rank);
  adj_dottest_problem problem = {.comm = t->comm, .n_domain = p.bias ? 3 : 2, .domain = domain, .n_range = 1,
                                 .range = &range, .forward = conv_jvp_cb, .adjoint = conv_backward_cb, .ctx = &p};
  char label[200];
  snprintf(label, sizeof label, "%s J (%s)", c->name, adj_conv_algorithm_name(a));
  layer_dottest(t, label, &problem);
  check_plan(t, c, &p, a, rng, rank, ys);
  point_free(&p);
  ADJ_TEST_OK(t, adj_conv_algorithm_set_default(ADJ_CONV_ALGORITHM_AUTO));
}

/* ---- bad configurations --------------------------------------------------------------- */

/* The plan object and the algorithm override reject bad values by name. */
static void check_plan_errors(adj_test *t) {
  adj_tensor x, w, x_other, y;
  adj_tensor_create(&x, ADJ_FLOAT32, 4, (const int64_t[]){2, 3, 8, 8});
  adj_tensor_create(&x_other, ADJ_FLOAT32, 4, (const int64_t[]){3, 3, 8, 8});
  adj_tensor_create(&w, ADJ_FLOAT32, 4, (const int64_t[]){4, 3, 3, 3});
  adj_tensor_create(&y, ADJ_FLOAT32, 4, (const int64_t[]){2, 4, 6, 6});
  adj_window_geometry g = {.spatial_dims = 2, .kernel = {3, 3}};
  adj_conv_plan *plan = NULL;
  adj_test_expect_error(t, "plan algorithm 7",
                     adj_conv_plan_create(&(adj_conv_plan_config){.geometry = g, .algorithm = 7}, &x, &w, &plan),
                     ADJ_ERR_ARG, "algorithm 7 is not an adj_conv_algorithm");
  ADJ_TEST_CHECK(t, plan == NULL, "a failed plan create leaves the handle NULL");
  /* t008 checks a bad ADJ_CONV_ALGORITHM. */
  adj_test_expect_error(t, "default algorithm 7", adj_conv_algorithm_set_default((adj_conv_algorithm)7), ADJ_ERR_ARG,
                        "7 is not one of auto (0), direct (1), shifted (2), im2col (3), measure (4)");
  adj_test_expect_error(t, "plan config NULL", adj_conv_plan_create(NULL, &x, &w, &plan), ADJ_ERR_ARG,
                     "config is NULL");
  ADJ_TEST_OK(t, adj_conv_plan_create(&(adj_conv_plan_config){.geometry = g}, &x, &w, &plan));
  adj_workspace ws = {0};
  ADJ_TEST_OK(t, adj_workspace_reserve(&ws, adj_conv_plan_workspace_size(plan)));
  adj_test_expect_error(t, "plan input of another shape", adj_conv_plan_forward(plan, &x_other, &w, NULL, &y, &ws),
                     ADJ_ERR_SIZE, "input x has shape [3, 3, 8, 8] but needs [2, 3, 8, 8]");
  adj_test_expect_error(t, "plan NULL", adj_conv_plan_forward(NULL, &x, &w, NULL, &y, &ws), ADJ_ERR_ARG,
                     "plan is NULL");
  adj_workspace_release(&ws);
  adj_conv_plan_destroy(&plan);
  layer_destroy(4, (adj_tensor *const[]){&x, &x_other, &w, &y});
}


static void check_errors(adj_test *t) {
  adj_tensor x, w, w_bad, w32, y;
  adj_tensor_create(&x, ADJ_FLOAT64, 4, (const int64_t[]){2, 3, 4, 4});
  adj_tensor_create(&w, ADJ_FLOAT64, 4, (const int64_t[]){5, 3, 3, 3});
  adj_tensor_create(&w_bad, ADJ_FLOAT64, 4, (const int64_t[]){5, 2, 3, 3});
  adj_tensor_create(&w32, ADJ_FLOAT32, 4, (const int64_t[]){5, 3, 3, 3});
  adj_tensor_create(&y, ADJ_FLOAT64, 4, (const int64_t[]){2, 5, 4, 4});
  adj_window_geometry pad1 = {.spatial_dims = 2, .kernel = {3, 3}, .padding_left = {1, 1}, .padding_right = {1, 1}};
  adj_workspace ws = {0}, tiny = {0};
  size_t bytes = 0;
  ADJ_TEST_OK(t, adj_conv_workspace_size(&pad1, &x, &w, &bytes));
  adj_workspace_reserve(&ws, bytes);
  adj_workspace_reserve(&tiny, 64);
  adj_window_geometry big = {.spatial_dims = 2, .kernel = {7, 3}, .padding_left = {1, 0}, .padding_right = {1, 0}};
  adj_test_expect_error(t, "kernel 7 > padded input 6", adj_conv_workspace_size(&big, &x, &w, &bytes), ADJ_ERR_SIZE,
                        "spans 7 but the padded input is only 6");
  adj_test_expect_error(t, "channels 2 vs 3", adj_conv_forward(&pad1, &x, &w_bad, NULL, &y, &ws), ADJ_ERR_SIZE,
                        "have 2 input channels but the input [2, 3, 4, 4] has 3");
  adj_window_geometry k5 = pad1;
  k5.kernel[0] = 5;
  k5.padding_left[0] = k5.padding_right[0] = 2;
  adj_test_expect_error(t, "kernel extents vs weights", adj_conv_forward(&k5, &x, &w, NULL, &y, &ws), ADJ_ERR_SIZE,
                        "weights w has shape [5, 3, 3, 3] but needs [5, 3, 5, 3]");
  adj_test_expect_error(t, "dtype mix", adj_conv_forward(&pad1, &x, &w32, NULL, &y, &ws), ADJ_ERR_DTYPE,
                        "float32 but the input is float64");
  adj_window_geometry nopad = {.spatial_dims = 2, .kernel = {3, 3}};
  adj_test_expect_error(t, "output shape", adj_conv_forward(&nopad, &x, &w, NULL, &y, &ws), ADJ_ERR_SIZE,
                        "output y has shape [2, 5, 4, 4] but needs [2, 5, 2, 2]");
  adj_test_expect_error(t, "workspace too small", adj_conv_forward(&pad1, &x, &w, NULL, &y, &tiny), ADJ_ERR_SIZE,
                        "workspace holds 64 bytes");
  adj_window_geometry four = pad1;
  four.spatial_dims = 4;
  adj_test_expect_error(t, "spatial_dims 4", adj_conv_forward(&four, &x, &w, NULL, &y, &ws), ADJ_ERR_ARG,
                        "spatial_dims is 4");
  adj_window_geometry negative = pad1;
  negative.padding_right[1] = -1;
  adj_test_expect_error(t, "negative padding", adj_conv_forward(&negative, &x, &w, NULL, &y, &ws), ADJ_ERR_ARG,
                        "is negative");
  adj_test_expect_error(t, "input rank", adj_conv_forward(&pad1, &y, &w, NULL, &y, &ws), ADJ_ERR_SIZE,
                        "have 3 input channels but the input [2, 5, 4, 4] has 5");
  adj_workspace_release(&ws);
  adj_workspace_release(&tiny);
  layer_destroy(5, (adj_tensor *const[]){&x, &w, &w_bad, &w32, &y});
}

/* Every case with the algorithm forced to a, at one thread; the GEMM paths
 * in one dtype, the direct kernels (built per level) in both. */
static void run_forced_cases(adj_test *t, adj_conv_algorithm a, adj_rng *rng) {
  ADJ_TEST_OK(t, adj_threads_set(1));
  adj_test_report(t, "algorithm forced to %s, direct kernels at %s", adj_conv_algorithm_name(a), adj_kernels_isa());
  for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
    for (int d = 0; d < (a == ADJ_CONV_ALGORITHM_DIRECT ? 2 : 1); d++) {
      adj_test_report(t, "case %s %s, algorithm forced to %s", cases[i].name, adj_dtype_name(layer_dtypes[d]),
                      adj_conv_algorithm_name(a));
      run_forced(t, &cases[i], layer_dtypes[d], a, rng);
    }
}

/* `t300-conv` runs everything; `t300-conv --direct-kernels` the direct
 * kernels alone, what a CPU level that runs under emulation
 * (tools/emulate-x86-64-v4.sh) can afford. */
int main(int argc, char **argv) {
  adj_test t;
  adj_rng *rng = layer_begin(&t, &argc, &argv, "t300-conv", 300);
  if (argc > 1 && strcmp(argv[1], "--direct-kernels") == 0) {
    run_forced_cases(&t, ADJ_CONV_ALGORITHM_DIRECT, rng);
    return layer_finish(&t, rng);
  }
  for (int threads = 1; threads <= 3; threads += 2) { /* 3 threads: uneven shares of the batch */
    ADJ_TEST_OK(&t, adj_threads_set(threads));
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
      for (int d = 0; d < 2; d++) {
        adj_test_report(&t, "case %s (N=%lld C_in=%lld C_out=%lld) %s, %d kernel threads", cases[i].name,
                        (long long)cases[i].n, (long long)cases[i].c_in, (long long)cases[i].c_out,
                        adj_dtype_name(layer_dtypes[d]), threads);
        run_case(&t, &cases[i], layer_dtypes[d], rng);
      }
  }
  for (size_t a = 0; a < sizeof forced / sizeof *forced; a++) run_forced_cases(&t, forced[a], rng);
  check_errors(&t);
  check_plan_errors(&t);
  return layer_finish(&t, rng);
}
