/* t307: batch normalisation's local kernels (adjoin/batchnorm.h) against a
 * naive long double reference kept here (two-pass moments, sums, the map),
 * float32 and float64, at block shapes whose per-row lengths leave every
 * remainder of the kernels' 8 lanes (S = 1, 13, 99, 60, 64, 49, 100) and ranks
 * 2-5, one large enough to be split over a team; (N, C) blocks run along the
 * channels, one of 300 x 223 split over a team mid-row;
 * one block with a large offset (mean 1e4, spread 1), whose variance a
 * float32 or uncentred sum would lose.  The kernels' results are the same
 * bits for 1 and 3 threads (their sums depend on the shape alone), the map
 * runs in place (out = v) with the same bits, and bad arguments fail by
 * name. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "adjoin/batchnorm.h"

typedef struct bn_shape {
  int rank;
  int64_t shape[5];
  double offset; /* added to x */
} bn_shape;

static const bn_shape shapes[] = {
    {2, {5, 7}, 0},          {3, {3, 4, 13}, 0},     {4, {2, 3, 9, 11}, 0}, {5, {2, 2, 3, 4, 5}, 0},
    {4, {4, 3, 8, 8}, 0},    {4, {6, 5, 7, 7}, 0},   {4, {3, 2, 10, 10}, 1e4}, {4, {8, 6, 40, 40}, 0},
    {2, {300, 223}, 0},      {2, {40, 17}, 1e4},
};

typedef struct bn_data {
  adj_tensor x, v, out;
  int64_t n, c, s;
  double *mean, *inv, *scale, *slope, *shift; /* the reference's mean and inv; the map's coefficients */
} bn_data;

static void bn_data_free(bn_data *d) {
  adj_tensor_destroy(&d->x), adj_tensor_destroy(&d->v), adj_tensor_destroy(&d->out);
  free(d->mean);
}

static double bn_at(const adj_tensor *t, int64_t i, int64_t j, int64_t k, int64_t c, int64_t s) {
  return adj_tensor_get(t, (i * c + j) * s + k);
}

/* x uniform in [-1, 1) + offset, v uniform in [-1, 1), the coefficients random. */
static int bn_data_make(const bn_shape *b, adj_dtype dtype, adj_rng *rng, bn_data *d) {
  memset(d, 0, sizeof *d);
  int status = adj_tensor_create(&d->x, dtype, b->rank, b->shape);
  if (!status) status = adj_tensor_create(&d->v, dtype, b->rank, b->shape);
  if (!status) status = adj_tensor_create(&d->out, dtype, b->rank, b->shape);
  if (status) return status;
  d->n = b->shape[0], d->c = b->shape[1], d->s = 1;
  for (int r = 2; r < b->rank; r++) d->s *= b->shape[r];
  for (int64_t i = 0; i < adj_tensor_volume(&d->x); i++) {
    adj_tensor_set(&d->x, i, b->offset + 2 * adj_rng_uniform(rng) - 1);
    adj_tensor_set(&d->v, i, 2 * adj_rng_uniform(rng) - 1);
  }
  d->mean = calloc((size_t)(5 * d->c), sizeof(double));
  if (!d->mean) return ADJ_ERR_MEM;
  d->inv = d->mean + d->c, d->scale = d->inv + d->c, d->slope = d->scale + d->c, d->shift = d->slope + d->c;
  for (int64_t j = 0; j < d->c; j++)
    d->scale[j] = 2 * adj_rng_uniform(rng) - 1, d->slope[j] = 2 * adj_rng_uniform(rng) - 1,
    d->shift[j] = 2 * adj_rng_uniform(rng) - 1;
  return ADJ_SUCCESS;
}

/* The reference moments of channel j (two passes in long double). */
static void bn_reference_moments(const bn_data *d, int64_t j, long double *mean, long double *m2) {
  long double sum = 0, sq = 0;
  for (int64_t i = 0; i < d->n; i++)
    for (int64_t k = 0; k < d->s; k++) sum += bn_at(&d->x, i, j, k, d->c, d->s);
  *mean = sum / (long double)(d->n * d->s);
  for (int64_t i = 0; i < d->n; i++)
    for (int64_t k = 0; k < d->s; k++) {
      long double e = bn_at(&d->x, i, j, k, d->c, d->s) - *mean;
      sq += e * e;
    }
  *m2 = sq;
}

/* The kernels' moments against the reference; fills d->mean and d->inv from
 * the reference for the other checks.  Returns the largest relative error. */
static double bn_check_moments(adj_test *t, bn_data *d) {
  double *mean = calloc((size_t)(2 * d->c + 1), sizeof(double)), *m2 = mean + d->c, worst = 0;
  ADJ_TEST_OK(t, adj_batchnorm_moments(&d->x, mean, m2));
  for (int64_t j = 0; j < d->c; j++) {
    long double mu, q;
    bn_reference_moments(d, j, &mu, &q);
    long double spread = sqrtl(q / (long double)(d->n * d->s));
    double e_mean = (double)(fabsl(mean[j] - mu) / (fabsl(mu) + spread));
    double e_m2 = (double)(fabsl(m2[j] - q) / q);
    worst = fmax(worst, fmax(e_mean, e_m2));
    d->mean[j] = (double)mu, d->inv[j] = (double)(1 / sqrtl(q / (long double)(d->n * d->s) + 1e-5L));
  }
  free(mean);
  return worst;
}

/* The kernels' sums against the reference, relative to sum |v| and inv sum |v (x - mean)|. */
static double bn_check_sums(adj_test *t, const bn_data *d) {
  double *sum_v = calloc((size_t)(2 * d->c + 1), sizeof(double)), *sum_vx = sum_v + d->c, worst = 0;
  ADJ_TEST_OK(t, adj_batchnorm_sums(&d->v, &d->x, d->mean, d->inv, sum_v, sum_vx));
  for (int64_t j = 0; j < d->c; j++) {
    long double a = 0, abs_a = 0, b = 0, abs_b = 0;
    for (int64_t i = 0; i < d->n; i++)
      for (int64_t k = 0; k < d->s; k++) {
        long double v = bn_at(&d->v, i, j, k, d->c, d->s), e = bn_at(&d->x, i, j, k, d->c, d->s) - d->mean[j];
        a += v, abs_a += fabsl(v), b += v * e * d->inv[j], abs_b += fabsl(v * e * d->inv[j]);
      }
    worst = fmax(worst, fmax((double)(fabsl(sum_v[j] - a) / abs_a), (double)(fabsl(sum_vx[j] - b) / abs_b)));
  }
  free(sum_v);
  return worst;
}

/* The map (with v, and without) against the reference, relative to the sum of its terms' sizes. */
static double bn_check_apply(adj_test *t, bn_data *d, bool with_v) {
  adj_batchnorm_map map = {d->mean, d->scale, d->slope, d->shift};
  ADJ_TEST_OK(t, adj_batchnorm_apply(with_v ? &d->v : NULL, &d->x, &map, &d->out));
  double worst = 0;
  for (int64_t i = 0; i < d->n; i++)
    for (int64_t j = 0; j < d->c; j++)
      for (int64_t k = 0; k < d->s; k++) {
        long double v = with_v ? bn_at(&d->v, i, j, k, d->c, d->s) : 0;
        long double e = bn_at(&d->x, i, j, k, d->c, d->s) - d->mean[j];
        long double want = d->scale[j] * v + d->slope[j] * e + d->shift[j];
        long double size = fabsl(d->scale[j] * v) + fabsl(d->slope[j] * e) + fabsl(d->shift[j]);
        worst = fmax(worst, (double)(fabsl(bn_at(&d->out, i, j, k, d->c, d->s) - want) / size));
      }
  return worst;
}

/* Every kernel's output under `threads` threads, for the bit comparison. */
static void bn_outputs(adj_test *t, bn_data *d, int threads, double *figures, adj_tensor *out) {
  ADJ_TEST_OK(t, adj_threads_set(threads));
  adj_batchnorm_map map = {d->mean, d->scale, d->slope, d->shift};
  ADJ_TEST_OK(t, adj_batchnorm_moments(&d->x, figures, figures + d->c));
  ADJ_TEST_OK(t, adj_batchnorm_sums(&d->v, &d->x, d->mean, d->inv, figures + 2 * d->c, figures + 3 * d->c));
  ADJ_TEST_OK(t, adj_batchnorm_apply(&d->v, &d->x, &map, out));
}

/* 1 and 3 threads, and the map in place, give the same bits. */
static void bn_check_bits(adj_test *t, bn_data *d, const char *label) {
  size_t bytes = (size_t)adj_tensor_volume(&d->x) * adj_dtype_size(d->x.dtype);
  double *one = calloc((size_t)(8 * d->c + 1), sizeof(double)), *three = one + 4 * d->c;
  adj_tensor out3, in_place;
  ADJ_TEST_OK(t, adj_tensor_create(&out3, d->x.dtype, d->x.rank, d->x.shape));
  ADJ_TEST_OK(t, adj_tensor_create(&in_place, d->x.dtype, d->x.rank, d->x.shape));
  bn_outputs(t, d, 1, one, &d->out);
  bn_outputs(t, d, 3, three, &out3);
  memcpy(in_place.data, d->v.data, bytes);
  adj_batchnorm_map map = {d->mean, d->scale, d->slope, d->shift};
  ADJ_TEST_OK(t, adj_batchnorm_apply(&in_place, &d->x, &map, &in_place));
  ADJ_TEST_CHECK(t, !memcmp(one, three, sizeof(double) * 4 * (size_t)d->c),
                 "%s: figures differ between 1 and 3 threads", label);
  ADJ_TEST_CHECK(t, !memcmp(d->out.data, out3.data, bytes), "%s: the map differs between 1 and 3 threads", label);
  ADJ_TEST_CHECK(t, !memcmp(d->out.data, in_place.data, bytes), "%s: the map in place differs", label);
  adj_tensor_destroy(&out3), adj_tensor_destroy(&in_place);
  free(one);
}

static void bn_check_shape(adj_test *t, const bn_shape *b, adj_dtype dtype, adj_rng *rng) {
  bn_data d;
  char label[128], text[64];
  snprintf(label, sizeof label, "%s x %s%s", adj_dtype_name(dtype),
           adj_shape_format(text, sizeof text, b->rank, b->shape), b->offset ? " + 1e4" : "");
  if (bn_data_make(b, dtype, rng, &d)) {
    ADJ_TEST_CHECK(t, false, "%s: cannot make the data", label);
    bn_data_free(&d);
    return;
  }
  double values = (double)(d.n * d.s), sums = adj_test_random_sum_tolerance(ADJ_FLOAT64, values);
  double e_moments = bn_check_moments(t, &d), e_sums = bn_check_sums(t, &d);
  double e_apply = fmax(bn_check_apply(t, &d, true), bn_check_apply(t, &d, false));
  double map = adj_test_tolerance(dtype, 1, 2);
  adj_test_report(t, "%s, kernels %s: moments %.3g, sums %.3g (bound %.2g), map %.3g (bound %.2g)", label,
                  adj_kernels_isa(), e_moments, e_sums, sums, e_apply, map);
  ADJ_TEST_CHECK(t, e_moments <= sums, "%s: moments error %.3g above %.2g", label, e_moments, sums);
  ADJ_TEST_CHECK(t, e_sums <= sums, "%s: sums error %.3g above %.2g", label, e_sums, sums);
  ADJ_TEST_CHECK(t, e_apply <= map, "%s: map error %.3g above %.2g", label, e_apply, map);
  bn_check_bits(t, &d, label);
  bn_data_free(&d);
}

static void bn_check_errors(adj_test *t) {
  adj_tensor x, bad;
  double figures[8] = {0};
  ADJ_TEST_OK(t, adj_tensor_create(&x, ADJ_FLOAT32, 3, (const int64_t[]){2, 2, 3}));
  ADJ_TEST_OK(t, adj_tensor_create(&bad, ADJ_FLOAT32, 1, (const int64_t[]){12}));
  adj_test_expect_error(t, "rank-1 input", adj_batchnorm_moments(&bad, figures, figures + 2), ADJ_ERR_SIZE, "rank 1");
  adj_test_expect_error(t, "NULL m2", adj_batchnorm_moments(&x, figures, NULL), ADJ_ERR_ARG, "m2 is NULL");
  adj_test_expect_error(t, "v of another shape", adj_batchnorm_sums(&bad, &x, figures, figures, figures, figures),
                        ADJ_ERR_SIZE, "v");
  adj_batchnorm_map no_slope = {.mean = figures};
  adj_test_expect_error(t, "map without slope", adj_batchnorm_apply(NULL, &x, &no_slope, &x), ADJ_ERR_ARG,
                        "slope is NULL");
  adj_tensor_destroy(&x), adj_tensor_destroy(&bad);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t307-batchnorm-kernels");
  adj_rng *rng = NULL;
  ADJ_TEST_OK(&t, adj_rng_create(11, &rng));
  for (int dt = 0; rng && dt < 2; dt++)
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
      bn_check_shape(&t, &shapes[i], dt ? ADJ_FLOAT64 : ADJ_FLOAT32, rng);
  bn_check_errors(&t);
  adj_rng_destroy(&rng);
  return adj_test_finish(&t);
}
