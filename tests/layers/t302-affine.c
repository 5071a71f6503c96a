/* t302: affine y = x W^T + b against a direct loop, its Jacobian dot-product
 * test (x, W, b perturbed together), its Taylor test and bad configurations. */
#include <stdio.h>

#include "layer_check.h"
#include "adjoin/affine.h"

typedef struct affine_case {
  const char *name;
  int64_t n, f_in, f_out;
  bool bias;
} affine_case;

static const affine_case cases[] = {
    {"N=5 F_in=7 F_out=3", 5, 7, 3, true},
    {"N=1 F_in=4 F_out=6 no bias", 1, 4, 6, false},
    {"N=16 F_in=120 F_out=84 (LeNet fc)", 16, 120, 84, true},
    /* >= 2^16 multiply-adds: a thread team splits each GEMM's output rows
     * (batch rows; dw's F_out rows), unevenly at 3 threads. */
    {"N=7 F_in=150 F_out=100 (team)", 7, 150, 100, true},
};

typedef struct affine_point {
  bool bias;
  adj_tensor x, w, b, dx, dw, db, xh, wh, bh;
} affine_point;

static const adj_tensor *opt(const affine_point *p, const adj_tensor *t) { return p->bias ? t : NULL; }

/* Direct loops in float64: y = x W^T + b (y != NULL); with dy, dx += dy W,
 * dw += dy^T x, db += column sums of dy. */
static void naive_affine(const adj_tensor *x, const adj_tensor *w, const adj_tensor *b, adj_tensor *y,
                         const adj_tensor *dy, adj_tensor *dx, adj_tensor *dw, adj_tensor *db) {
  int64_t n_rows = x->shape[0], f_in = x->shape[1], f_out = w->shape[0];
  for (int64_t n = 0; n < n_rows; n++)
    for (int64_t o = 0; o < f_out; o++) {
      double sum = b ? adj_tensor_get(b, o) : 0.0, grad = dy ? adj_tensor_get(dy, n * f_out + o) : 0.0;
      if (db) adj_tensor_set(db, o, adj_tensor_get(db, o) + grad);
      for (int64_t i = 0; i < f_in; i++) {
        double xv = adj_tensor_get(x, n * f_in + i), wv = adj_tensor_get(w, o * f_in + i);
        sum += xv * wv;
        if (dx) adj_tensor_set(dx, n * f_in + i, adj_tensor_get(dx, n * f_in + i) + wv * grad);
        if (dw) adj_tensor_set(dw, o * f_in + i, adj_tensor_get(dw, o * f_in + i) + xv * grad);
      }
      if (y) adj_tensor_set(y, n * f_out + o, sum);
    }
}

static int affine_jvp_cb(void *ctx, const adj_tensor *v, adj_tensor *u) {
  affine_point *p = ctx;
  return adj_affine_jvp(&p->x, &p->w, &v[0], &v[1], p->bias ? &v[2] : NULL, &u[0]);
}

static int affine_backward_cb(void *ctx, const adj_tensor *u, adj_tensor *v) {
  affine_point *p = ctx;
  adj_tensor_zero(&v[1]); /* parameter gradients accumulate */
  if (p->bias) adj_tensor_zero(&v[2]);
  return adj_affine_backward(&p->x, &p->w, &u[0], &v[0], &v[1], p->bias ? &v[2] : NULL);
}

static int affine_eval_cb(void *ctx, double h, adj_tensor *y) {
  affine_point *p = ctx;
  layer_axpy(&p->xh, &p->x, h, &p->dx);
  layer_axpy(&p->wh, &p->w, h, &p->dw);
  layer_axpy(&p->bh, &p->b, h, &p->db);
  return adj_affine_forward(&p->xh, &p->wh, opt(p, &p->bh), y);
}

static int affine_taylor_jvp_cb(void *ctx, adj_tensor *dy) {
  affine_point *p = ctx;
  return adj_affine_jvp(&p->x, &p->w, &p->dx, &p->dw, opt(p, &p->db), dy);
}

static void check_values(adj_test *t, const affine_case *c, affine_point *p, adj_rng *rng) {
  adj_dtype dtype = p->x.dtype;
  int64_t ys[2] = {c->n, c->f_out};
  adj_tensor y, dy, r1, r2, seed = layer_random(rng, dtype, 2, ys);
  adj_tensor gx = layer_random(rng, dtype, 2, p->x.shape), gw = layer_random(rng, dtype, 2, p->w.shape);
  adj_tensor gb = layer_random(rng, dtype, 1, &c->f_out), rx, rw = layer_to_f64(&gw), rb = layer_to_f64(&gb);
  adj_tensor x = layer_to_f64(&p->x), w = layer_to_f64(&p->w), b = layer_to_f64(&p->b), dx = layer_to_f64(&p->dx);
  adj_tensor dw = layer_to_f64(&p->dw), db = layer_to_f64(&p->db), seed64 = layer_to_f64(&seed);
  adj_tensor_create(&y, dtype, 2, ys);
  adj_tensor_create(&dy, dtype, 2, ys);
  adj_tensor_create(&r1, ADJ_FLOAT64, 2, ys);
  adj_tensor_create(&r2, ADJ_FLOAT64, 2, ys);
  adj_tensor_create(&rx, ADJ_FLOAT64, 2, p->x.shape);
  ADJ_TEST_OK(t, adj_affine_forward(&p->x, &p->w, opt(p, &p->b), &y));
  naive_affine(&x, &w, p->bias ? &b : NULL, &r1, NULL, NULL, NULL, NULL);
  layer_compare(t, &y, &r1, "%s forward", c->name);
  ADJ_TEST_OK(t, adj_affine_jvp(&p->x, &p->w, &p->dx, &p->dw, opt(p, &p->db), &dy));
  naive_affine(&dx, &w, p->bias ? &db : NULL, &r1, NULL, NULL, NULL, NULL);
  naive_affine(&x, &dw, NULL, &r2, NULL, NULL, NULL, NULL);
  adj_tensor_add(&r1, &r2);
  layer_compare(t, &dy, &r1, "%s jvp", c->name);
  /* gx holds junk (overwritten); gw, gb hold random values (accumulated onto). */
  ADJ_TEST_OK(t, adj_affine_backward(&p->x, &p->w, &seed, &gx, &gw, p->bias ? &gb : NULL));
  naive_affine(&x, &w, NULL, NULL, &seed64, &rx, &rw, p->bias ? &rb : NULL);
  layer_compare(t, &gx, &rx, "%s backward dx (overwrite)", c->name);
  layer_compare(t, &gw, &rw, "%s backward dw (+=)", c->name);
  layer_compare(t, &gb, &rb, "%s backward db (+=)", c->name);
  layer_destroy(18, (adj_tensor *const[]){&y, &dy, &r1, &r2, &seed, &gx, &gw, &gb, &rx, &rw, &rb, &x, &w, &b, &dx,
                                         &dw, &db, &seed64});
}

static void run_case(adj_test *t, const affine_case *c, adj_dtype dtype, adj_rng *rng) {
  int64_t xs[2] = {c->n, c->f_in}, ws[2] = {c->f_out, c->f_in}, ys[2] = {c->n, c->f_out};
  affine_point p = {.bias = c->bias};
  p.x = layer_random(rng, dtype, 2, xs), p.dx = layer_random(rng, dtype, 2, xs);
  p.w = layer_random(rng, dtype, 2, ws), p.dw = layer_random(rng, dtype, 2, ws);
  p.b = layer_random(rng, dtype, 1, &c->f_out), p.db = layer_random(rng, dtype, 1, &c->f_out);
  adj_tensor_create(&p.xh, dtype, 2, xs);
  adj_tensor_create(&p.wh, dtype, 2, ws);
  adj_tensor_create(&p.bh, dtype, 1, &c->f_out);
  check_values(t, c, &p, rng);
  adj_tensor domain[3] = {p.x, p.w, p.b}, range = {.dtype = dtype, .rank = 2, .shape = {c->n, c->f_out}};
  adj_dottest_problem problem = {.comm = t->comm, .n_domain = c->bias ? 3 : 2, .domain = domain, .n_range = 1,
                                 .range = &range, .forward = affine_jvp_cb, .adjoint = affine_backward_cb,
                                 .ctx = &p};
  layer_dottest(t, c->name, &problem);
  if (dtype == ADJ_FLOAT64) {
    /* (x, W) -> x W^T is bilinear: the remainder is exactly h^2 dx dW^T. */
    layer_taylor taylor = {.rank = 2, .shape = ys, .eval = affine_eval_cb, .jvp = affine_taylor_jvp_cb, .ctx = &p};
    layer_taylor_check(t, c->name, &taylor);
  }
  layer_destroy(9, (adj_tensor *const[]){&p.x, &p.w, &p.b, &p.dx, &p.dw, &p.db, &p.xh, &p.wh, &p.bh});
}

static void check_errors(adj_test *t) {
  adj_tensor x, w, w_bad, b_bad, y, x3;
  adj_tensor_create(&x, ADJ_FLOAT64, 2, (const int64_t[]){4, 5});
  adj_tensor_create(&w, ADJ_FLOAT64, 2, (const int64_t[]){3, 5});
  adj_tensor_create(&w_bad, ADJ_FLOAT64, 2, (const int64_t[]){3, 6});
  adj_tensor_create(&b_bad, ADJ_FLOAT64, 1, (const int64_t[]){4});
  adj_tensor_create(&y, ADJ_FLOAT64, 2, (const int64_t[]){4, 3});
  adj_tensor_create(&x3, ADJ_FLOAT64, 3, (const int64_t[]){4, 5, 1});
  adj_test_expect_error(t, "F_in 6 vs 5", adj_affine_forward(&x, &w_bad, NULL, &y), ADJ_ERR_SIZE,
                        "weights [3, 6] take 6 input features but the input [4, 5] has 5");
  adj_test_expect_error(t, "bias length", adj_affine_forward(&x, &w, &b_bad, &y), ADJ_ERR_SIZE,
                        "bias b has shape [4] but needs [3]");
  adj_test_expect_error(t, "input rank 3", adj_affine_forward(&x3, &w, NULL, &y), ADJ_ERR_SIZE,
                        "has rank 3 but needs rank 2");
  adj_test_expect_error(t, "gradient shape", adj_affine_backward(&x, &w, &x, NULL, NULL, NULL), ADJ_ERR_SIZE,
                        "output gradient dy has shape [4, 5] but needs [4, 3]");
  layer_destroy(6, (adj_tensor *const[]){&x, &w, &w_bad, &b_bad, &y, &x3});
}

int main(int argc, char **argv) {
  adj_test t;
  adj_rng *rng = layer_begin(&t, &argc, &argv, "t302-affine", 302);
  for (int threads = 1; threads <= 3; threads += 2) {
    ADJ_TEST_OK(&t, adj_threads_set(threads));
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
      for (int d = 0; d < 2; d++) {
        adj_test_report(&t, "case %s %s, %d kernel threads", cases[i].name, adj_dtype_name(layer_dtypes[d]), threads);
        run_case(&t, &cases[i], layer_dtypes[d], rng);
      }
  }
  check_errors(&t);
  return layer_finish(&t, rng);
}
