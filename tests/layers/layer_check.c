#include "layer_check.h"

#include <math.h>
#include <stdarg.h>
#include <string.h>

const adj_dtype layer_dtypes[2] = {ADJ_FLOAT64, ADJ_FLOAT32};

/* Kernels accumulate in their own dtype (BLAS, in any order), so they agree
 * with the float64 reference to the round-off of their longest sum; on random
 * data that grows like sqrt(n). */
double layer_reference_tolerance(adj_dtype dtype) {
  return adj_test_random_sum_tolerance(dtype, LAYER_LONGEST_REDUCTION);
}

adj_tensor layer_random(adj_rng *rng, adj_dtype dtype, int rank, const int64_t *shape) {
  adj_tensor x;
  adj_tensor_create(&x, dtype, rank, shape);
  adj_rng_fill_uniform(rng, &x, -1.0, 1.0);
  return x;
}

adj_tensor layer_to_f64(const adj_tensor *t) {
  adj_tensor c;
  adj_tensor_create(&c, ADJ_FLOAT64, t->rank, t->shape);
  for (int64_t i = 0; i < adj_tensor_volume(t); i++) adj_tensor_set(&c, i, adj_tensor_get(t, i));
  return c;
}

void layer_axpy(adj_tensor *dst, const adj_tensor *a, double h, const adj_tensor *v) {
  for (int64_t i = 0; i < adj_tensor_volume(a); i++)
    adj_tensor_set(dst, i, adj_tensor_get(a, i) + h * adj_tensor_get(v, i));
}

void layer_compare(adj_test *t, const adj_tensor *result, const adj_tensor *reference, const char *fmt, ...) {
  char label[200];
  va_list args;
  va_start(args, fmt);
  vsnprintf(label, sizeof label, fmt, args);
  va_end(args);
  double diff = adj_test_max_rel_diff(result, reference);
  double tol = layer_reference_tolerance(result->dtype);
  adj_test_report(t, "  %-58s %s  max rel diff %.2e (tolerance %.1e)", label, adj_dtype_name(result->dtype), diff,
                  tol);
  ADJ_TEST_CHECK(t, diff <= tol, "%s (%s): differs from the reference by %.3e > %.1e", label,
                 adj_dtype_name(result->dtype), diff, tol);
}

void layer_destroy(size_t n, adj_tensor *const *list) {
  for (size_t i = 0; i < n; i++) adj_tensor_destroy(list[i]);
}

adj_rng *layer_begin(adj_test *t, int *argc, char ***argv, const char *name, uint64_t seed) {
  adj_test_begin(t, argc, argv, name);
  adj_rng *rng = NULL;
  ADJ_TEST_OK(t, adj_rng_create(seed, &rng));
  return rng;
}

int layer_finish(adj_test *t, adj_rng *rng) {
  adj_rng_destroy(&rng);
  return adj_test_finish(t);
}

static int64_t or_one(int64_t v) { return v ? v : 1; }

/* Row-major multi-index of flat over extents ext[0..dims). */
static void unflatten(int64_t flat, int dims, const int64_t *ext, int64_t *idx) {
  for (int d = dims - 1; d >= 0; d--) {
    idx[d] = flat % ext[d];
    flat /= ext[d];
  }
}

int64_t layer_window_source(const adj_window_geometry *g, const int64_t *in, const int64_t *out, int64_t o,
                            int64_t k) {
  int sd = g->spatial_dims;
  int64_t oi[3], ki[3], flat = 0;
  unflatten(o, sd, out, oi);
  unflatten(k, sd, g->kernel, ki);
  for (int d = 0; d < sd; d++) {
    int64_t i = oi[d] * or_one(g->stride[d]) - g->padding_left[d] + ki[d] * or_one(g->dilation[d]);
    if (i < 0 || i >= in[d]) return -1;
    flat = flat * in[d] + i;
  }
  return flat;
}

int64_t layer_volume(int dims, const int64_t *extents) {
  int64_t v = 1;
  for (int d = 0; d < dims; d++) v *= extents[d];
  return v;
}

void layer_dottest(adj_test *t, const char *label, const adj_dottest_problem *p) {
  adj_dottest_result r;
  int status = adj_dottest_run(p, 20240611u, &r);
  ADJ_TEST_CHECK(t, status == 0, "%s: dot-product test failed to run: %s", label, adj_last_error());
  double tol = adj_dottest_tolerance(p->domain[0].dtype, 1);
  adj_test_report(t, "  %-58s %s  dot test rel err %.2e", label, adj_dtype_name(p->domain[0].dtype),
                  r.relative_error);
  ADJ_TEST_CHECK(t, status == 0 && r.relative_error < tol && r.norm_Fx > 0 && r.norm_Fty > 0,
                 "%s: <Jv,u> = %.17g but <v,J^T u> = %.17g (rel err %.3e, |Jv| %.3e, |J^T u| %.3e)", label,
                 r.range_inner, r.domain_inner, r.relative_error, r.norm_Fx, r.norm_Fty);
}

static double layer_norm(const adj_tensor *a) {
  double sum = 0;
  for (int64_t i = 0; i < adj_tensor_volume(a); i++) sum += adj_tensor_get(a, i) * adj_tensor_get(a, i);
  return sqrt(sum);
}

enum { LAYER_TAYLOR_STEPS = 4 };

/* |f(p + h v) - f(p) - h J v| for each h, |J v| and |f(p)|. */
static int layer_taylor_remainders(const layer_taylor *p, const double *h, double *rem, double *jv_norm,
                                   double *f_norm) {
  adj_tensor y0, yh, jv;
  adj_tensor_create(&y0, ADJ_FLOAT64, p->rank, p->shape);
  adj_tensor_create(&yh, ADJ_FLOAT64, p->rank, p->shape);
  adj_tensor_create(&jv, ADJ_FLOAT64, p->rank, p->shape);
  int status = p->eval(p->ctx, 0.0, &y0);
  if (!status) status = p->jvp(p->ctx, &jv);
  *jv_norm = layer_norm(&jv);
  *f_norm = layer_norm(&y0);
  for (int i = 0; !status && i < LAYER_TAYLOR_STEPS; i++) {
    status = p->eval(p->ctx, h[i], &yh);
    double *a = yh.data;
    const double *b = y0.data, *d = jv.data;
    for (int64_t k = 0; k < adj_tensor_volume(&yh); k++) a[k] -= b[k] + h[i] * d[k];
    rem[i] = layer_norm(&yh);
  }
  adj_tensor_destroy(&y0);
  adj_tensor_destroy(&yh);
  adj_tensor_destroy(&jv);
  return status;
}

void layer_taylor_check(adj_test *t, const char *label, const layer_taylor *p) {
  const double h[LAYER_TAYLOR_STEPS] = {1e-1, 1e-2, 1e-3, 1e-4};
  double rem[LAYER_TAYLOR_STEPS], jv_norm, f_norm;
  int status = layer_taylor_remainders(p, h, rem, &jv_norm, &f_norm);
  ADJ_TEST_CHECK(t, status == 0 && jv_norm > 0, "%s: Taylor test failed to run (%s) or J v = 0", label,
                 adj_last_error());
  char line[400];
  int used = snprintf(line, sizeof line, "  %-44s Taylor remainders", label);
  for (int i = 0; i < LAYER_TAYLOR_STEPS; i++) used += snprintf(line + used, sizeof line - (size_t)used, " %.2e", rem[i]);
  if (p->piecewise_linear) {
    /* Away from the kinks the map is linear: the remainder is the round-off of
     * evaluating f, so it is measured against |f(p)| + |h J v|, and bounded by
     * the round-off of the map's sums. */
    double worst = 0;
    for (int i = 0; i < LAYER_TAYLOR_STEPS; i++) worst = fmax(worst, rem[i] / (f_norm + h[i] * jv_norm));
    adj_test_report(t, "%s  (piecewise linear: max rem/(|f|+|h Jv|) %.1e)", line, worst);
    double tolerance = adj_test_sum_tolerance(ADJ_FLOAT64, (double)p->reduction_length);
    ADJ_TEST_CHECK(t, worst < tolerance, "%s: remainder %.3e of |f| + |h J v| on a linear piece (tolerance %.1e)",
                   label, worst, tolerance);
    return;
  }
  double min_order = 99;
  for (int i = 0; i + 1 < LAYER_TAYLOR_STEPS; i++)
    min_order = fmin(min_order, log10(rem[i] / rem[i + 1]) / log10(h[i] / h[i + 1]));
  adj_test_report(t, "%s  (min order %.3f)", line, min_order);
  ADJ_TEST_CHECK(t, min_order > 1.9 && min_order < 2.1, "%s: Taylor remainder falls at order %.3f, not 2", label,
                 min_order);
}
