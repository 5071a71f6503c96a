#include "tolerance.h"

#include <float.h>
#include <math.h>

double adj_test_eps(adj_dtype dtype) {
  switch (dtype) {
  case ADJ_FLOAT64: return DBL_EPSILON;
  case ADJ_FLOAT32: return FLT_EPSILON;
  default: return 0.0;
  }
}

double adj_test_tolerance(adj_dtype dtype, double reduction_length, double multiple) {
  return multiple * adj_test_eps(dtype) * fmax(1.0, reduction_length);
}

double adj_test_random_tolerance(adj_dtype dtype, double reduction_length, double multiple) {
  return multiple * adj_test_eps(dtype) * sqrt(fmax(1.0, reduction_length));
}

double adj_test_sum_tolerance(adj_dtype dtype, double reduction_length) {
  return adj_test_tolerance(dtype, reduction_length, ADJ_TEST_SUM_MULTIPLE);
}

double adj_test_random_sum_tolerance(adj_dtype dtype, double reduction_length) {
  return adj_test_random_tolerance(dtype, reduction_length, ADJ_TEST_SUM_MULTIPLE);
}

double adj_test_training_tolerance(adj_dtype dtype, double reduction_length, int steps) {
  return adj_test_random_sum_tolerance(dtype, reduction_length) * (steps > 1 ? steps : 1);
}
