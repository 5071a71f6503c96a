/* GEMM through CBLAS, alone or over a thread team, and the typed bias helpers
 * applied to its results (kernels_impl.h). */
#include <cblas.h>
#include <limits.h>

#include "kernel_table.h"
#include "kernels_impl.h"

#define ADJ_TYPED_FILE "blas_typed.inc"
#include "instantiate.h"

int adj_check_blas_dim(const char *who, const char *what, int64_t value) {
  ADJ_CHECK(value <= INT_MAX, ADJ_ERR_SIZE, "%s: %s is %lld, beyond the BLAS index range %d", who, what,
            (long long)value, INT_MAX);
  return ADJ_SUCCESS;
}

void adj_gemm(adj_dtype dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
              const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc) {
  if (m == 0 || n == 0) return;
  /* BLAS rejects leading dimensions below 1 even when k == 0. */
  lda = lda > 1 ? lda : 1, ldb = ldb > 1 ? ldb : 1, ldc = ldc > 1 ? ldc : 1;
  enum CBLAS_TRANSPOSE ta = trans_a ? CblasTrans : CblasNoTrans, tb = trans_b ? CblasTrans : CblasNoTrans;
  if (dtype == ADJ_FLOAT32)
    cblas_sgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, (float)alpha, a, (int)lda, b, (int)ldb,
                (float)beta, c, (int)ldc);
  else
    cblas_dgemm(CblasRowMajor, ta, tb, (int)m, (int)n, (int)k, alpha, a, (int)lda, b, (int)ldb, beta, c,
                (int)ldc);
}

/* One GEMM's rows of C, for a team (adj_team_run). */
typedef struct adj_gemm_work {
  adj_dtype dtype;
  bool trans_a, trans_b;
  int64_t n, k, lda, ldb, ldc;
  double alpha, beta;
  const void *a, *b;
  void *c;
} adj_gemm_work;

static void adj_gemm_rows(void *arg, int64_t first, int64_t count, int member) {
  const adj_gemm_work *w = arg;
  /* Row r of op(A) is row r of A, or column r when A is transposed. */
  const void *a_rows = adj_at_const(w->a, w->dtype, w->trans_a ? first : first * w->lda);
  adj_gemm(w->dtype, w->trans_a, w->trans_b, count, w->n, w->k, w->alpha, a_rows, w->lda, w->b, w->ldb, w->beta,
           adj_at(w->c, w->dtype, first * w->ldc), w->ldc);
}

void adj_gemm_team(adj_dtype dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                   const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc) {
  int team = adj_team_size(m, m * n * k);
  if (team == 1) {
    adj_gemm(dtype, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  adj_blas_leave_threads_to_teams(team);
  adj_gemm_work w = {dtype, trans_a, trans_b, n, k, lda, ldb, ldc, alpha, beta, a, b, c};
  adj_team_run(team, m, adj_gemm_rows, &w);
}

void adj_rows_fill(adj_dtype dtype, void *y, int64_t rows, int64_t cols, int64_t ld, const void *b) {
  ADJ_DISPATCH(dtype, rows_fill, y, rows, cols, ld, b);
}

/* The level's vectors: a CPU's best, like the direct convolution's kernels. */
void adj_rows_sum_add(adj_dtype dtype, const void *y, int64_t rows, int64_t cols, int64_t ld, void *b) {
  adj_kernel_table_select()->rows_sum_add[dtype == ADJ_FLOAT64](y, rows, cols, ld, b);
}

void adj_cols_sum_add(adj_dtype dtype, const void *y, int64_t rows, int64_t cols, void *b) {
  ADJ_DISPATCH(dtype, cols_sum_add, y, rows, cols, b);
}
