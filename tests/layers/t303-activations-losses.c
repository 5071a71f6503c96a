/* t303: activations (ReLU, leaky ReLU, tanh, sigmoid), flatten, softmax
 * cross-entropy and mean-squared error (mean and sum) against direct formulas,
 * their Jacobian dot-product tests, Taylor tests and bad configurations. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "layer_check.h"
#include "adjoin/loss.h"

/* A point x with a direction dx for a map of one tensor; `loss` selects the
 * scalar maps (xent / mse) and `act` the activation otherwise. */
typedef enum map_kind { MAP_ACTIVATION, MAP_XENT, MAP_MSE } map_kind;

typedef struct map_point {
  map_kind kind;
  adj_activation act;
  adj_reduction reduction;
  const int64_t *labels;
  adj_tensor x, dx, xh, target;
} map_point;

/* ---- direct formulas (float64) ------------------------------------------------------ */

static double naive_value(const adj_activation *a, double x) {
  switch (a->kind) {
    case ADJ_RELU: return x > 0 ? x : 0;
    case ADJ_LEAKY_RELU: return x > 0 ? x : a->negative_slope * x;
    case ADJ_TANH: return tanh(x);
    default: return 1 / (1 + exp(-x));
  }
}

static double naive_slope(const adj_activation *a, double x) {
  switch (a->kind) {
    case ADJ_RELU: return x > 0 ? 1 : 0;
    case ADJ_LEAKY_RELU: return x > 0 ? 1 : a->negative_slope;
    case ADJ_TANH: return 1 - tanh(x) * tanh(x);
    default: return exp(-x) / ((1 + exp(-x)) * (1 + exp(-x)));
  }
}

/* Loss gradient per element, unscaled by the reduction: softmax - onehot, or 2 (y - t). */
static void naive_loss_gradient(const map_point *p, adj_tensor *g, double *loss) {
  *loss = 0;
  if (p->kind == MAP_MSE) {
    for (int64_t i = 0; i < adj_tensor_volume(&p->x); i++) {
      double r = adj_tensor_get(&p->x, i) - adj_tensor_get(&p->target, i);
      *loss += r * r;
      adj_tensor_set(g, i, 2 * r);
    }
    return;
  }
  int64_t n = p->x.shape[0], c = p->x.shape[1];
  for (int64_t s = 0; s < n; s++) {
    double total = 0;
    for (int64_t k = 0; k < c; k++) total += exp(adj_tensor_get(&p->x, s * c + k));
    *loss += log(total) - adj_tensor_get(&p->x, s * c + p->labels[s]);
    for (int64_t k = 0; k < c; k++)
      adj_tensor_set(g, s * c + k, exp(adj_tensor_get(&p->x, s * c + k)) / total - (k == p->labels[s]));
  }
}

static double reduction_scale(const map_point *p) {
  if (p->reduction == ADJ_REDUCE_SUM) return 1;
  return 1.0 / (double)(p->kind == MAP_XENT ? p->x.shape[0] : adj_tensor_volume(&p->x));
}

/* ---- the kernels behind one interface -------------------------------------------------- */

static int map_forward(const map_point *p, const adj_tensor *x, adj_tensor *y) {
  double loss = 0;
  int status;
  if (p->kind == MAP_ACTIVATION) return adj_activation_forward(&p->act, x, y);
  if (p->kind == MAP_XENT) status = adj_softmax_xent_forward(x, p->labels, p->reduction, &loss);
  else status = adj_mse_forward(x, &p->target, p->reduction, &loss);
  adj_tensor_set(y, 0, loss);
  return status;
}

static int map_jvp_cb(void *ctx, const adj_tensor *v, adj_tensor *u) {
  map_point *p = ctx;
  double dloss = 0;
  int status;
  if (p->kind == MAP_ACTIVATION) return adj_activation_jvp(&p->act, &p->x, &v[0], &u[0]);
  if (p->kind == MAP_XENT) status = adj_softmax_xent_jvp(&p->x, p->labels, p->reduction, &v[0], &dloss);
  else status = adj_mse_jvp(&p->x, &p->target, p->reduction, &v[0], &dloss);
  adj_tensor_set(&u[0], 0, dloss);
  return status;
}

static int map_backward_cb(void *ctx, const adj_tensor *u, adj_tensor *v) {
  map_point *p = ctx;
  if (p->kind == MAP_ACTIVATION) return adj_activation_backward(&p->act, &p->x, &u[0], &v[0]);
  double seed = adj_tensor_get(&u[0], 0);
  if (p->kind == MAP_XENT) return adj_softmax_xent_backward(&p->x, p->labels, p->reduction, seed, &v[0]);
  return adj_mse_backward(&p->x, &p->target, p->reduction, seed, &v[0]);
}

static int map_eval_cb(void *ctx, double h, adj_tensor *y) {
  map_point *p = ctx;
  layer_axpy(&p->xh, &p->x, h, &p->dx);
  return map_forward(p, &p->xh, y);
}

static int map_taylor_jvp_cb(void *ctx, adj_tensor *dy) {
  map_point *p = ctx;
  return map_jvp_cb(p, &p->dx, dy);
}

/* The output template: x's shape for activations, a float64 scalar for losses. */
static adj_tensor map_range(const map_point *p) {
  if (p->kind == MAP_ACTIVATION) return (adj_tensor){.dtype = p->x.dtype, .rank = p->x.rank,
                                                     .shape = {p->x.shape[0], p->x.shape[1], p->x.shape[2],
                                                               p->x.shape[3], 1, 1, 1, 1}};
  return (adj_tensor){.dtype = ADJ_FLOAT64, .rank = 0, .shape = {1, 1, 1, 1, 1, 1, 1, 1}};
}

/* ---- checks ------------------------------------------------------------------------ */

/* Activation values, jvp and backward against the formulas; forward in place too. */
static void check_activation_values(adj_test *t, const char *name, map_point *p, adj_rng *rng) {
  adj_dtype dtype = p->x.dtype;
  int64_t n = adj_tensor_volume(&p->x);
  adj_tensor y, dy, g, in_place, seed = layer_random(rng, dtype, p->x.rank, p->x.shape), ry, rdy, rg;
  adj_tensor *made[] = {&y, &dy, &g, &in_place, &ry, &rdy, &rg};
  for (int i = 0; i < 7; i++) adj_tensor_create(made[i], i < 4 ? dtype : ADJ_FLOAT64, p->x.rank, p->x.shape);
  for (int64_t i = 0; i < n; i++) {
    double x = adj_tensor_get(&p->x, i), s = naive_slope(&p->act, x);
    adj_tensor_set(&ry, i, naive_value(&p->act, x));
    adj_tensor_set(&rdy, i, s * adj_tensor_get(&p->dx, i));
    adj_tensor_set(&rg, i, s * adj_tensor_get(&seed, i));
  }
  ADJ_TEST_OK(t, adj_activation_forward(&p->act, &p->x, &y));
  ADJ_TEST_OK(t, adj_activation_jvp(&p->act, &p->x, &p->dx, &dy));
  ADJ_TEST_OK(t, adj_activation_backward(&p->act, &p->x, &seed, &g));
  adj_tensor_copy(&in_place, &p->x);
  ADJ_TEST_OK(t, adj_activation_forward(&p->act, &in_place, &in_place));
  layer_compare(t, &y, &ry, "%s forward", name);
  layer_compare(t, &in_place, &ry, "%s forward in place", name);
  layer_compare(t, &dy, &rdy, "%s jvp", name);
  layer_compare(t, &g, &rg, "%s backward", name);
  /* From the output: the same bits as from the input (the layers of tanh and
   * sigmoid use it). */
  ADJ_TEST_OK(t, adj_activation_derivative_from_output(&p->act, &y, &seed, &in_place));
  size_t bytes = (size_t)n * adj_dtype_size(dtype);
  ADJ_TEST_CHECK(t, memcmp(in_place.data, g.data, bytes) == 0, "%s: the derivative from the output differs from "
                 "the backward's", name);
  for (int i = 0; i < 7; i++) adj_tensor_destroy(made[i]);
  adj_tensor_destroy(&seed);
}

/* Loss value, backward (seeded with 0.7) and jvp against the formulas. */
static void check_loss_values(adj_test *t, const char *name, map_point *p) {
  adj_tensor grad, ref_grad, loss_t = {0};
  adj_tensor_create(&grad, p->x.dtype, p->x.rank, p->x.shape);
  adj_tensor_create(&ref_grad, ADJ_FLOAT64, p->x.rank, p->x.shape);
  adj_tensor_create(&loss_t, ADJ_FLOAT64, 0, NULL);
  double ref_loss, scale = reduction_scale(p), dloss, ref_dloss = 0;
  naive_loss_gradient(p, &ref_grad, &ref_loss);
  ADJ_TEST_OK(t, map_forward(p, &p->x, &loss_t));
  ADJ_TEST_OK(t, map_jvp_cb(p, &p->dx, &loss_t));
  dloss = adj_tensor_get(&loss_t, 0);
  ADJ_TEST_OK(t, map_forward(p, &p->x, &loss_t));
  for (int64_t i = 0; i < adj_tensor_volume(&p->x); i++) {
    ref_dloss += scale * adj_tensor_get(&ref_grad, i) * adj_tensor_get(&p->dx, i);
    adj_tensor_set(&ref_grad, i, 0.7 * scale * adj_tensor_get(&ref_grad, i));
  }
  adj_tensor_set(&loss_t, 0, 0.7);
  ADJ_TEST_OK(t, map_backward_cb(p, &loss_t, &grad));
  ADJ_TEST_OK(t, map_forward(p, &p->x, &loss_t));
  double tol = layer_reference_tolerance(p->x.dtype), loss = adj_tensor_get(&loss_t, 0);
  double loss_err = fabs(loss - scale * ref_loss) / fmax(1, fabs(scale * ref_loss));
  double jvp_err = fabs(dloss - ref_dloss) / fmax(1, fabs(ref_dloss));
  adj_test_report(t, "  %-58s %s  loss %.6f rel diff %.2e, jvp rel diff %.2e", name, adj_dtype_name(p->x.dtype),
                  loss, loss_err, jvp_err);
  ADJ_TEST_CHECK(t, loss_err <= tol && jvp_err <= tol, "%s: loss %.17g vs %.17g, jvp %.17g vs %.17g", name, loss,
                 scale * ref_loss, dloss, ref_dloss);
  layer_compare(t, &grad, &ref_grad, "%s backward (dloss 0.7)", name);
  adj_tensor_destroy(&grad);
  adj_tensor_destroy(&ref_grad);
  adj_tensor_destroy(&loss_t);
}

/* Dot-product test for every map; the Taylor test in float64 (smooth maps at
 * random points, (leaky) ReLU at points |x| >= 0.2 where a step of 0.1 crosses
 * no kink). */
static void check_jacobian(adj_test *t, const char *name, map_point *p) {
  adj_tensor range = map_range(p);
  adj_dottest_problem problem = {.comm = t->comm, .n_domain = 1, .domain = &p->x, .n_range = 1, .range = &range,
                                 .forward = map_jvp_cb, .adjoint = map_backward_cb, .ctx = p};
  layer_dottest(t, name, &problem);
  if (p->x.dtype != ADJ_FLOAT64) return;
  bool kinked = p->kind == MAP_ACTIVATION && (p->act.kind == ADJ_RELU || p->act.kind == ADJ_LEAKY_RELU);
  if (kinked)
    for (int64_t i = 0; i < adj_tensor_volume(&p->x); i++) {
      double x = adj_tensor_get(&p->x, i);
      adj_tensor_set(&p->x, i, (x < 0 ? -1 : 1) * (0.2 + 0.8 * fabs(x)));
    }
  layer_taylor taylor = {.rank = range.rank, .shape = range.shape, .eval = map_eval_cb, .jvp = map_taylor_jvp_cb,
                         .ctx = p, .piecewise_linear = kinked};
  layer_taylor_check(t, name, &taylor);
}

static void map_point_make(map_point *p, adj_dtype dtype, int rank, const int64_t *shape, adj_rng *rng) {
  p->x = layer_random(rng, dtype, rank, shape);
  p->dx = layer_random(rng, dtype, rank, shape);
  p->target = layer_random(rng, dtype, rank, shape);
  adj_tensor_create(&p->xh, dtype, rank, shape);
}

static void map_point_free(map_point *p) {
  adj_tensor *all[] = {&p->x, &p->dx, &p->xh, &p->target};
  for (int i = 0; i < 4; i++) adj_tensor_destroy(all[i]);
}

static void run_activations(adj_test *t, adj_dtype dtype, adj_rng *rng) {
  static const struct {
    const char *name;
    adj_activation act;
  } acts[] = {{"relu", {ADJ_RELU, 0}},
              {"leaky relu 0.1", {ADJ_LEAKY_RELU, 0.1}},
              {"tanh", {ADJ_TANH, 0}},
              {"sigmoid", {ADJ_SIGMOID, 0}}};
  /* The second shape is large enough (>= 2^16 elements) for a thread team. */
  static const int64_t shapes[2][4] = {{3, 4, 5, 6}, {4, 8, 48, 48}};
  for (size_t i = 0; i < 2 * sizeof acts / sizeof *acts; i++) {
    map_point p = {.kind = MAP_ACTIVATION, .act = acts[i / 2].act};
    map_point_make(&p, dtype, 4, shapes[i % 2], rng);
    /* Spread x over [-4, 4) so tanh and sigmoid are exercised off their linear centre. */
    for (int64_t k = 0; k < adj_tensor_volume(&p.x); k++) adj_tensor_set(&p.x, k, 4 * adj_tensor_get(&p.x, k));
    char name[64];
    snprintf(name, sizeof name, "%s on %lld elements", acts[i / 2].name, (long long)adj_tensor_volume(&p.x));
    check_activation_values(t, name, &p, rng);
    check_jacobian(t, name, &p);
    map_point_free(&p);
  }
}

static void run_losses(adj_test *t, adj_dtype dtype, adj_rng *rng) {
  static const int64_t labels[6] = {3, 0, 9, 9, 5, 1};
  for (int r = 0; r < 2; r++)
    for (int kind = MAP_XENT; kind <= MAP_MSE; kind++) {
      adj_reduction reduction = r ? ADJ_REDUCE_SUM : ADJ_REDUCE_MEAN;
      map_point p = {.kind = (map_kind)kind, .reduction = reduction, .labels = labels};
      map_point_make(&p, dtype, 2, kind == MAP_XENT ? (const int64_t[]){6, 10} : (const int64_t[]){4, 5}, rng);
      char name[80];
      snprintf(name, sizeof name, "%s (%s)", kind == MAP_XENT ? "softmax cross-entropy" : "mse",
               r ? "sum" : "mean");
      check_loss_values(t, name, &p);
      check_jacobian(t, name, &p);
      map_point_free(&p);
    }
}

/* Flatten is a view: same data, shape (N, rest); unflatten restores the shape. */
static void check_flatten(adj_test *t) {
  adj_tensor x, flat, back, wrong;
  adj_tensor_create(&x, ADJ_FLOAT32, 4, (const int64_t[]){2, 3, 4, 5});
  ADJ_TEST_OK(t, adj_flatten_view(&x, &flat));
  ADJ_TEST_CHECK(t, flat.rank == 2 && flat.shape[0] == 2 && flat.shape[1] == 60 && flat.data == x.data &&
                        !flat.owns_data, "flatten: view has rank %d shape (%lld, %lld)", flat.rank,
                 (long long)flat.shape[0], (long long)flat.shape[1]);
  ADJ_TEST_OK(t, adj_unflatten_view(&flat, x.rank, x.shape, &back));
  ADJ_TEST_CHECK(t, adj_tensor_same_shape(&back, &x) && back.data == x.data, "unflatten: shape or data differs");
  adj_test_report(t, "  flatten [2, 3, 4, 5] -> [%lld, %lld] and back: views of the same data",
                  (long long)flat.shape[0], (long long)flat.shape[1]);
  adj_test_expect_error(t, "unflatten 2x59", adj_unflatten_view(&flat, 2, (const int64_t[]){2, 59}, &wrong),
                        ADJ_ERR_SIZE, "target shape [2, 59] holds (2, 59) but the gradient is (2, 60)");
  adj_tensor_destroy(&x);
}

static void check_errors(adj_test *t) {
  adj_tensor z, z3, y, target;
  adj_tensor_create(&z, ADJ_FLOAT64, 2, (const int64_t[]){3, 10});
  adj_tensor_create(&z3, ADJ_FLOAT64, 3, (const int64_t[]){3, 10, 1});
  adj_tensor_create(&y, ADJ_FLOAT64, 2, (const int64_t[]){3, 4});
  adj_tensor_create(&target, ADJ_FLOAT64, 2, (const int64_t[]){4, 3});
  const int64_t bad_labels[3] = {1, 2, 10};
  double loss;
  adj_test_expect_error(t, "label 10 of 10 classes", adj_softmax_xent_forward(&z, bad_labels, ADJ_REDUCE_MEAN, &loss),
                        ADJ_ERR_ARG, "label 10 of sample 2 is outside [0, 10)");
  adj_test_expect_error(t, "logits rank 3", adj_softmax_xent_forward(&z3, bad_labels, ADJ_REDUCE_SUM, &loss),
                        ADJ_ERR_SIZE, "logits (N, C) has rank 3 but needs rank 2");
  adj_test_expect_error(t, "mse target shape", adj_mse_forward(&y, &target, ADJ_REDUCE_MEAN, &loss), ADJ_ERR_SIZE,
                        "target has shape [4, 3] but needs [3, 4]");
  adj_test_expect_error(t, "unknown reduction", adj_mse_forward(&y, &y, (adj_reduction)5, &loss), ADJ_ERR_ARG,
                        "unknown reduction 5");
  adj_test_expect_error(t, "activation shapes",
                        adj_activation_forward(&(adj_activation){.kind = ADJ_TANH}, &y, &target), ADJ_ERR_SIZE,
                        "output y has shape [4, 3] but needs [3, 4]");
  adj_test_expect_error(t, "unknown activation", adj_activation_forward(&(adj_activation){.kind = 9}, &y, &y),
                        ADJ_ERR_ARG, "unknown activation kind 9");
  adj_test_expect_error(t, "leaky slope from the output",
                        adj_activation_derivative_from_output(&(adj_activation){ADJ_LEAKY_RELU, -0.5}, &y, &y, &y),
                        ADJ_ERR_ARG, "negative slope -0.5 is not positive");
  adj_test_expect_error(t, "from the output: NULL output",
                        adj_activation_derivative_from_output(&(adj_activation){.kind = ADJ_SIGMOID}, NULL, &y, &y),
                        ADJ_ERR_ARG, "output y is NULL");
  adj_tensor *all[] = {&z, &z3, &y, &target};
  for (int i = 0; i < 4; i++) adj_tensor_destroy(all[i]);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_rng *rng = layer_begin(&t, &argc, &argv, "t303-activations-losses", 303);
  for (int threads = 1; threads <= 3; threads += 2) {
    ADJ_TEST_OK(&t, adj_threads_set(threads));
    for (int d = 0; d < 2; d++) {
      adj_test_report(&t, "activations, x (3, 4, 5, 6) and (4, 8, 48, 48) %s, %d kernel threads",
                      adj_dtype_name(layer_dtypes[d]), threads);
      run_activations(&t, layer_dtypes[d], rng);
    }
  }
  for (int d = 0; d < 2; d++) {
    adj_test_report(&t, "losses: cross-entropy logits (6, 10), mse (4, 5), %s", adj_dtype_name(layer_dtypes[d]));
    run_losses(&t, layer_dtypes[d], rng);
  }
  check_flatten(&t);
  check_errors(&t);
  return layer_finish(&t, rng);
}
