/* Shared checks of the layer kernel tests (t30x): random tensors, comparison
 * against a reference, the Jacobian dot-product test and the Taylor test. */
#ifndef ADJOIN_TEST_LAYER_CHECK_H
#define ADJOIN_TEST_LAYER_CHECK_H

#include <stdbool.h>

#include "harness.h"

/* Both dtypes, in the order the tests loop over them. */
extern const adj_dtype layer_dtypes[2];

/* The longest sum the kernel tests make: a weight gradient over a batch of 9
 * samples' 30 x 30 outputs (t300) is 8100 terms. */
enum { LAYER_LONGEST_REDUCTION = 10000 };
/* Tolerance of a kernel against its float64 naive reference, relative to the
 * largest entry: adj_test_random_sum_tolerance of LAYER_LONGEST_REDUCTION. */
double layer_reference_tolerance(adj_dtype dtype);

/* A new tensor with entries uniform on [-1, 1). */
adj_tensor layer_random(adj_rng *rng, adj_dtype dtype, int rank, const int64_t *shape);
/* A new float64 copy of t (references compute in float64). */
adj_tensor layer_to_f64(const adj_tensor *t);
/* dst = a + h v elementwise (shapes and dtypes equal). */
void layer_axpy(adj_tensor *dst, const adj_tensor *a, double h, const adj_tensor *v);
/* Compares result to reference, records a check and prints the figure under
 * the printf-style label. */
void layer_compare(adj_test *t, const adj_tensor *result, const adj_tensor *reference, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
/* Destroys n tensors. */
void layer_destroy(size_t n, adj_tensor *const *list);
/* adj_test_begin plus the test's seeded generator. */
adj_rng *layer_begin(adj_test *t, int *argc, char ***argv, const char *name, uint64_t seed);
/* Frees the generator, then adj_test_finish. */
int layer_finish(adj_test *t, adj_rng *rng);

/* Naive window indexing for the references: the flat input index (within one
 * channel plane) read by output position o at tap k, or -1 in the padding. */
int64_t layer_window_source(const adj_window_geometry *g, const int64_t *in, const int64_t *out, int64_t o,
                            int64_t k);
int64_t layer_volume(int dims, const int64_t *extents);

/* Jacobian dot-product test: forward is the jvp on (dx, dw, db, ...), adjoint
 * the backward; checks eq. 13 against the layer tolerance and prints it. */
void layer_dottest(adj_test *t, const char *label, const adj_dottest_problem *p);

/* Taylor test of y = f(p + h v) for h = 1e-1 ... 1e-4: the remainder
 * |f(p + h v) - f(p) - h J v| must fall at second order (smooth and bilinear
 * maps), or stay at round-off (piecewise-linear maps evaluated away from their
 * kinks, where the jvp must be exact).  Outputs are float64. */
typedef struct layer_taylor {
  int rank;
  const int64_t *shape;                              /* of y */
  int (*eval)(void *ctx, double h, adj_tensor *y);   /* y = f(p + h v) */
  int (*jvp)(void *ctx, adj_tensor *dy);             /* dy = J(p) v */
  void *ctx;
  bool piecewise_linear;
  int64_t reduction_length; /* piecewise linear: terms an output sums (0: pointwise) */
} layer_taylor;
void layer_taylor_check(adj_test *t, const char *label, const layer_taylor *p);

#endif
