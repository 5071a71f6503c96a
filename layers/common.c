/* Shared machinery of the local kernels: argument checks, window plans, the
 * workspace, GEMM dispatch and typed bias helpers. */
#include <cblas.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>

#include "kernels_impl.h"

#define ADJ_TYPED_FILE "common_typed.inc"
#include "instantiate.h"

/* ---- argument checks -------------------------------------------------------------- */

int adj_check_input(const char *who, const char *name, const adj_tensor *x, int rank) {
  ADJ_CHECK(x, ADJ_ERR_ARG, "%s: %s is NULL", who, name);
  ADJ_CALL(adj_dtype_check_compute(who, name, x->dtype));
  ADJ_CHECK(x->rank == rank, ADJ_ERR_SIZE, "%s: %s has rank %d but needs rank %d", who, name, x->rank, rank);
  return ADJ_SUCCESS;
}

int adj_check_optional(const char *who, const char *name, const adj_tensor *t, adj_dtype dtype, int rank,
                       const int64_t *shape) {
  if (!t) return ADJ_SUCCESS;
  ADJ_CHECK(t->dtype == dtype, ADJ_ERR_DTYPE, "%s: %s is %s but the input is %s", who, name,
            adj_dtype_name(t->dtype), adj_dtype_name(dtype));
  adj_tensor want = {.rank = rank};
  for (int i = 0; i < rank; i++) want.shape[i] = shape[i];
  char have_text[160], want_text[160];
  ADJ_CHECK(adj_tensor_same_shape(t, &want), ADJ_ERR_SIZE, "%s: %s has shape %s but needs %s", who, name,
            adj_shape_format(have_text, sizeof have_text, t->rank, t->shape),
            adj_shape_format(want_text, sizeof want_text, rank, shape));
  return ADJ_SUCCESS;
}

int adj_check_tensor(const char *who, const char *name, const adj_tensor *t, adj_dtype dtype, int rank,
                     const int64_t *shape) {
  ADJ_CHECK(t, ADJ_ERR_ARG, "%s: %s is NULL", who, name);
  return adj_check_optional(who, name, t, dtype, rank, shape);
}

int adj_check_blas_dim(const char *who, const char *what, int64_t value) {
  ADJ_CHECK(value <= INT_MAX, ADJ_ERR_SIZE, "%s: %s is %lld, beyond the BLAS index range %d", who, what,
            (long long)value, INT_MAX);
  return ADJ_SUCCESS;
}

/* ---- window geometry ---------------------------------------------------------------- */

static int64_t adj_default_one(int64_t v) { return v == 0 ? 1 : v; }

/* Validates one spatial dimension and returns its output extent in *out. */
static int adj_window_dim(const char *who, const adj_window_geometry *g, int d, int64_t in, int64_t *out) {
  int64_t k = g->kernel[d], s = adj_default_one(g->stride[d]), dil = adj_default_one(g->dilation[d]);
  int64_t pl = g->padding_left[d], pr = g->padding_right[d];
  ADJ_CHECK(k >= 1, ADJ_ERR_ARG, "%s: kernel extent %lld in spatial dimension %d must be >= 1", who,
            (long long)k, d);
  ADJ_CHECK(s >= 1 && dil >= 1, ADJ_ERR_ARG,
            "%s: stride %lld and dilation %lld in spatial dimension %d must be >= 1", who, (long long)s,
            (long long)dil, d);
  ADJ_CHECK(pl >= 0 && pr >= 0, ADJ_ERR_ARG, "%s: padding (%lld, %lld) in spatial dimension %d is negative",
            who, (long long)pl, (long long)pr, d);
  int64_t span = dil * (k - 1) + 1, padded = in + pl + pr;
  ADJ_CHECK(span <= padded, ADJ_ERR_SIZE,
            "%s: spatial dimension %d: kernel %lld with dilation %lld spans %lld but the padded input is "
            "only %lld (%lld + padding %lld + %lld)",
            who, d, (long long)k, (long long)dil, (long long)span, (long long)padded, (long long)in,
            (long long)pl, (long long)pr);
  *out = (padded - span) / s + 1;
  return ADJ_SUCCESS;
}

static int adj_check_spatial_dims(const char *who, const adj_window_geometry *g) {
  ADJ_CHECK(g, ADJ_ERR_ARG, "%s: window geometry is NULL", who);
  ADJ_CHECK(g->spatial_dims >= 1 && g->spatial_dims <= ADJ_MAX_SPATIAL_DIMS, ADJ_ERR_ARG,
            "%s: spatial_dims is %d, not 1, 2 or 3", who, g->spatial_dims);
  return ADJ_SUCCESS;
}

int adj_window_output_shape(const adj_window_geometry *g, const int64_t *in_spatial, int64_t *out_spatial) {
  ADJ_CALL(adj_check_spatial_dims("window", g));
  for (int d = 0; d < g->spatial_dims; d++) ADJ_CALL(adj_window_dim("window", g, d, in_spatial[d], &out_spatial[d]));
  return ADJ_SUCCESS;
}

int adj_window_plan_make(const char *who, const adj_window_geometry *g, const adj_tensor *x, adj_window_plan *p) {
  ADJ_CALL(adj_check_spatial_dims(who, g));
  int sd = g->spatial_dims;
  ADJ_CALL(adj_check_input(who, "input x (N, C, spatial...)", x, 2 + sd));
  *p = (adj_window_plan){.spatial_dims = sd, .batch = x->shape[0], .channels = x->shape[1]};
  for (int d = 0; d < 3; d++) {
    p->in[d] = p->out[d] = p->kernel[d] = p->stride[d] = p->dilation[d] = 1;
    p->pad[d] = 0;
  }
  for (int d = 0; d < sd; d++) {
    int q = 3 - sd + d; /* spatial dimension d goes to slot q of three */
    p->in[q] = x->shape[2 + d];
    ADJ_CALL(adj_window_dim(who, g, d, p->in[q], &p->out[q]));
    p->kernel[q] = g->kernel[d];
    p->stride[q] = adj_default_one(g->stride[d]);
    p->dilation[q] = adj_default_one(g->dilation[d]);
    p->pad[q] = g->padding_left[d];
  }
  p->in_volume = p->in[0] * p->in[1] * p->in[2];
  p->out_volume = p->out[0] * p->out[1] * p->out[2];
  p->kernel_volume = p->kernel[0] * p->kernel[1] * p->kernel[2];
  return ADJ_SUCCESS;
}

int adj_window_plan_output_shape(const adj_window_plan *p, int64_t channels, int64_t *shape) {
  shape[0] = p->batch;
  shape[1] = channels;
  for (int d = 0; d < p->spatial_dims; d++) shape[2 + d] = p->out[3 - p->spatial_dims + d];
  return 2 + p->spatial_dims;
}

/* ---- workspace ---------------------------------------------------------------------- */

enum { ADJ_WORKSPACE_ALIGN = 64 };

int adj_workspace_reserve(adj_workspace *ws, size_t bytes) {
  ADJ_CHECK(ws, ADJ_ERR_ARG, "workspace: pointer is NULL");
  if (ws->data && ws->bytes >= bytes) return ADJ_SUCCESS;
  size_t rounded = (bytes + ADJ_WORKSPACE_ALIGN - 1) / ADJ_WORKSPACE_ALIGN * ADJ_WORKSPACE_ALIGN;
  void *data = aligned_alloc(ADJ_WORKSPACE_ALIGN, rounded ? rounded : ADJ_WORKSPACE_ALIGN);
  ADJ_CHECK(data, ADJ_ERR_MEM, "workspace: cannot allocate %zu bytes", bytes);
  free(ws->data);
  ws->data = data;
  ws->bytes = rounded;
  return ADJ_SUCCESS;
}

void adj_workspace_release(adj_workspace *ws) {
  if (!ws) return;
  free(ws->data);
  ws->data = NULL;
  ws->bytes = 0;
}

/* ---- BLAS and typed helpers -------------------------------------------------------- */

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

void adj_gemm_team(adj_dtype dtype, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                   const void *a, int64_t lda, const void *b, int64_t ldb, double beta, void *c, int64_t ldc) {
  int team = adj_team_size(m, m * n * k);
  if (team == 1) {
    adj_gemm(dtype, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return;
  }
  adj_blas_leave_threads_to_teams(team);
#pragma omp parallel for num_threads(team) schedule(static, 1)
  for (int member = 0; member < team; member++) {
    int64_t first, count;
    adj_team_range(m, team, member, &first, &count);
    /* Row r of op(A) is row r of A, or column r when A is transposed. */
    const void *a_rows = adj_at_const(a, dtype, trans_a ? first : first * lda);
    adj_gemm(dtype, trans_a, trans_b, count, n, k, alpha, a_rows, lda, b, ldb, beta, adj_at(c, dtype, first * ldc),
             ldc);
  }
}

void adj_rows_fill(adj_dtype dtype, void *y, int64_t rows, int64_t cols, int64_t ld, const void *b) {
  ADJ_DISPATCH(dtype, rows_fill, y, rows, cols, ld, b);
}

void adj_rows_sum_add(adj_dtype dtype, const void *y, int64_t rows, int64_t cols, int64_t ld, void *b) {
  ADJ_DISPATCH(dtype, rows_sum_add, y, rows, cols, ld, b);
}

void adj_cols_sum_add(adj_dtype dtype, const void *y, int64_t rows, int64_t cols, void *b) {
  ADJ_DISPATCH(dtype, cols_sum_add, y, rows, cols, b);
}

/* ---- thread teams ----------------------------------------------------------------------- */

int adj_team_size(int64_t items, int64_t work) {
  if (work < ADJ_TEAM_MIN_WORK || items < 2) return 1;
  int threads = adj_threads_get();
  return items < threads ? (int)items : threads;
}

void adj_team_range(int64_t items, int team, int member, int64_t *first, int64_t *count) {
  int64_t base = items / team, extra = items % team;
  *first = member * base + (member < extra ? member : extra);
  *count = base + (member < extra ? 1 : 0);
}

void adj_blas_leave_threads_to_teams(int team) {
  if (team > 1 && openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}
