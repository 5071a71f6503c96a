/* Tolerances of the tests: multiples of the dtype's machine epsilon times the
 * length of the reduction that produced the compared value.
 *
 * Why this form: a floating-point sum of n terms, in any order, errs by at
 * most about n * eps * sum |x_i| (each of the n - 1 additions rounds once and
 * the rounding errors of the early partial sums are carried through the later
 * ones), and typically by sqrt(n) * eps * sum |x_i|, since the roundings behave
 * like a random walk.  So two computations of the same n-term sums in different
 * orders (distributed against sequential, fused against layer by layer, a
 * float32 kernel against a float64 reference) can differ by a few n * eps, and
 * a bound written as multiple * eps * n holds for every size and dtype at
 * once, where a literal (1e-12) is vacuous for a small sum and too tight for a
 * large one.  The multiple covers what n does not: the ratio of sum |x_i| to
 * the scale the error is measured against (the largest entry), and the number
 * of stages that chain such sums.  Keep it small enough that a wrong result
 * (an error of O(1), or a term missing from a sum) still fails by decades.
 *
 * The dot-product test's tolerance is adj_dottest_tolerance (dottest.h),
 * which tests reuse rather than redefine here. */
#ifndef ADJOIN_TEST_TOLERANCE_H
#define ADJOIN_TEST_TOLERANCE_H

#include "adjoin/adjoin.h"

/* The spacing of the dtype's numbers at 1 (DBL_EPSILON, FLT_EPSILON); 0 for
 * the integer dtypes, whose sums are exact (or wrap exactly). */
double adj_test_eps(adj_dtype dtype);

/* multiple * eps(dtype) * max(1, reduction_length): the bound on the relative
 * error of a value summed from reduction_length terms (1 for a value produced
 * by a fixed handful of operations, where the bound is a multiple of eps). */
double adj_test_tolerance(adj_dtype dtype, double reduction_length, double multiple);

/* multiple * eps(dtype) * sqrt(max(1, reduction_length)): the same for sums of
 * random data, whose roundings cancel like a random walk.  The tests draw
 * their data at random, so this is what they see; use it where the worst case
 * form would let a float32 result drift by far more than it ever does. */
double adj_test_random_tolerance(adj_dtype dtype, double reduction_length, double multiple);

/* The multiple of a sum compared with the same sum computed otherwise: another
 * order, another split over ranks, or a float64 reference.  It covers the
 * rounding of the inputs to the dtype and of the compared value itself, and
 * keeps a wrong term (an error of O(1)) failing by many decades. */
enum { ADJ_TEST_SUM_MULTIPLE = 8 };

/* adj_test_tolerance(dtype, reduction_length, ADJ_TEST_SUM_MULTIPLE). */
double adj_test_sum_tolerance(adj_dtype dtype, double reduction_length);
/* adj_test_random_tolerance(dtype, reduction_length, ADJ_TEST_SUM_MULTIPLE). */
double adj_test_random_sum_tolerance(adj_dtype dtype, double reduction_length);

/* Parameters after `steps` training steps whose gradients sum
 * reduction_length terms of random data: each step adds the rounding of its
 * sums (adj_test_random_sum_tolerance) and carries the earlier steps' on, so
 * the bound grows linearly with the steps (the worst case across steps). */
double adj_test_training_tolerance(adj_dtype dtype, double reduction_length, int steps);

#endif
