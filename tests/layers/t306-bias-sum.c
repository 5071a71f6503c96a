/* The bias gradient's row sums (adj_rows_sum_add) against a long double
 * reference, at every row length from 0 to 80: each level's vector blocks,
 * the whole vectors of a remainder and the scalar rest all occur at every
 * level (the widest, x86-64-v4 in float32, takes 16 elements per block).
 * Rows sit ld apart with a sentinel of 1e30 between them, so a read past a
 * row's end shows as a huge error; b starts nonzero, so a sum that
 * overwrote b instead of adding to it fails too. */
#include <math.h>
#include <stdlib.h>

#include "harness.h"
#include "blas_impl.h"

enum { ROWS = 3, MAX_COLS = 80, GAP = 5 };

/* The largest error over rows and lengths, relative to |b| + sum |y| of the row. */
static double worst_error(adj_dtype dtype, adj_rng *rng) {
  double worst = 0;
  for (int64_t cols = 0; cols <= MAX_COLS; cols++) {
    int64_t ld = cols + GAP;
    double y[ROWS * (MAX_COLS + GAP)], b0[ROWS];
    float y32[ROWS * (MAX_COLS + GAP)], b32[ROWS];
    double b64[ROWS];
    for (int64_t i = 0; i < ROWS * ld; i++) {
      y[i] = i % ld < cols ? (2 * adj_rng_uniform(rng) - 1) / 3 : 1e30; /* all 53 bits used */
      y32[i] = (float)y[i];
      y[i] = dtype == ADJ_FLOAT32 ? (double)y32[i] : y[i];
    }
    for (int r = 0; r < ROWS; r++) {
      b0[r] = 2 * adj_rng_uniform(rng) - 1;
      b32[r] = (float)b0[r], b64[r] = b0[r];
      if (dtype == ADJ_FLOAT32) b0[r] = b32[r];
    }
    adj_rows_sum_add(dtype, dtype == ADJ_FLOAT32 ? (const void *)y32 : (const void *)y, ROWS, cols, ld,
                     dtype == ADJ_FLOAT32 ? (void *)b32 : (void *)b64);
    for (int r = 0; r < ROWS; r++) {
      long double sum = b0[r], scale = fabs(b0[r]);
      for (int64_t c = 0; c < cols; c++) sum += y[r * ld + c], scale += fabs(y[r * ld + c]);
      double got = dtype == ADJ_FLOAT32 ? b32[r] : b64[r];
      double error = (double)(fabsl((long double)got - sum) / scale);
      if (!(error <= worst)) worst = error; /* a NaN stays */
    }
  }
  return worst;
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t306-bias-sum");
  adj_rng *rng = NULL;
  ADJ_TEST_OK(&t, adj_rng_create(7, &rng));
  /* float32: the float64 sum rounded into float32 and added to b, two
   * roundings of float32; float64: the sum of the longest row and b, random
   * data (tolerance.h). */
  const struct {
    adj_dtype dtype;
    double tolerance;
  } cases[] = {{ADJ_FLOAT32, adj_test_tolerance(ADJ_FLOAT32, 1, 2)},
               {ADJ_FLOAT64, adj_test_random_tolerance(ADJ_FLOAT64, MAX_COLS + 1, 4)}};
  for (int i = 0; rng && i < 2; i++) {
    double error = worst_error(cases[i].dtype, rng);
    adj_test_report(&t, "%s, kernels %s: rows of 0-%d elements, largest error %.3g of |b| + sum |y| (bound %.2g)",
                    adj_dtype_name(cases[i].dtype), adj_kernels_isa(), MAX_COLS, error, cases[i].tolerance);
    ADJ_TEST_CHECK(&t, error <= cases[i].tolerance, "%s: error %.3g above %.2g", adj_dtype_name(cases[i].dtype),
                   error, cases[i].tolerance);
  }
  adj_rng_destroy(&rng);
  return adj_test_finish(&t);
}
