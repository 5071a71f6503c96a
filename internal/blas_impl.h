/* The GEMM and typed bias helpers of kernels/blas.c, which the local kernels
 * and the layers that run their own GEMMs (the phantom layer) share. */
#ifndef ADJOIN_INTERNAL_BLAS_IMPL_H
#define ADJOIN_INTERNAL_BLAS_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "adjoin/dtype.h"
#include "dtype_impl.h"

/* C = alpha op(A) op(B) + beta C, row-major, through cblas_sgemm / cblas_dgemm. */
void adj_gemm(adj_dtype dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
              const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc);
/* The same GEMM with the rows of C split over a thread team (adj_team_size):
 * each member computes its own rows, single-threaded BLAS, so no sums cross
 * members.  For layers whose GEMMs OpenBLAS would run on all cores if it
 * were not left single-threaded for the teams (adj_blas_leave_threads_to_teams,
 * threads_impl.h). */
void adj_gemm_team(adj_dtype dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                   const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc);
/* Fails when a GEMM dimension exceeds the (32-bit) BLAS index range. */
int adj_check_blas_dim(const char *who, const char *what, int64_t value);

/* y[r, c] = b[r] for a (rows, cols) matrix with leading dimension ld (bias
 * broadcast over positions). */
void adj_rows_fill(adj_dtype dtype, void *y, int64_t rows, int64_t cols, int64_t ld, const void *b);
/* b[r] += sum_c y[r, c], summed in float64 in the vectors of the level the
 * direct convolution's kernels run at (conv_direct_typed.inc). */
void adj_rows_sum_add(adj_dtype dtype, const void *y, int64_t rows, int64_t cols, int64_t ld, void *b);
/* b[c] += sum_r y[r, c]. */
void adj_cols_sum_add(adj_dtype dtype, const void *y, int64_t rows, int64_t cols, void *b);

/* Calls the float32 or float64 instance of a typed template function; void *
 * arguments convert to the instance's element pointers. */
#define ADJ_DISPATCH(dtype, fn, ...) \
  ((dtype) == ADJ_FLOAT32 ? fn##_f32(__VA_ARGS__) : fn##_f64(__VA_ARGS__))

/* Byte offset of element i of a dtype buffer. */
static inline void *adj_at(void *base, adj_dtype dtype, int64_t i) {
  return (char *)base + (size_t)i * adj_dtype_size(dtype);
}
static inline const void *adj_at_const(const void *base, adj_dtype dtype, int64_t i) {
  return (const char *)base + (size_t)i * adj_dtype_size(dtype);
}

#endif
