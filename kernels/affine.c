/* Affine layer y = x W^T + b over a batch: forward, jvp and backward, each a few
 * GEMMs (no typed loops beyond the shared bias helpers), their output rows
 * split over a thread team (adj_gemm_team). */
#include <string.h>

#include "adjoin/affine.h"
#include "kernels_impl.h"

typedef struct adj_affine_shape {
  adj_dtype dtype;
  int64_t batch, f_in, f_out;
} adj_affine_shape;

static int adj_affine_check(const char *who, const adj_tensor *x, const adj_tensor *w, adj_affine_shape *s) {
  ADJ_CALL(adj_check_input(who, "input x (N, F_in)", x, 2));
  ADJ_CALL(adj_check_input(who, "weights w (F_out, F_in)", w, 2));
  *s = (adj_affine_shape){.dtype = x->dtype, .batch = x->shape[0], .f_in = x->shape[1], .f_out = w->shape[0]};
  char w_text[160], x_text[160];
  ADJ_CHECK(w->shape[1] == s->f_in, ADJ_ERR_SIZE, "%s: weights %s take %lld input features but the input %s has %lld",
            who, adj_shape_format(w_text, sizeof w_text, 2, w->shape), (long long)w->shape[1],
            adj_shape_format(x_text, sizeof x_text, 2, x->shape), (long long)s->f_in);
  ADJ_CALL(adj_check_tensor(who, "weights w", w, s->dtype, 2, w->shape));
  ADJ_CALL(adj_check_blas_dim(who, "batch", s->batch));
  ADJ_CALL(adj_check_blas_dim(who, "F_in", s->f_in));
  return adj_check_blas_dim(who, "F_out", s->f_out);
}

/* y = sum_t x_t w_t^T + b; a term with a NULL factor is zero (the jvp's dx or dw). */
static void adj_affine_apply(const adj_affine_shape *s, int n_terms, const adj_tensor *const (*terms)[2],
                             const adj_tensor *b, adj_tensor *y) {
  double beta = 0.0;
  if (b) {
    size_t row = (size_t)s->f_out * adj_dtype_size(s->dtype);
    for (int64_t n = 0; n < s->batch; n++) memcpy(adj_at(y->data, s->dtype, n * s->f_out), b->data, row);
    beta = 1.0;
  }
  for (int t = 0; t < n_terms; t++) {
    const adj_tensor *x = terms[t][0], *w = terms[t][1];
    if (!x || !w) continue;
    adj_gemm_team(s->dtype, false, true, s->batch, s->f_out, s->f_in, 1.0, x->data, s->f_in, w->data, s->f_in, beta,
                  y->data, s->f_out);
    beta = 1.0;
  }
  if (beta == 0.0) adj_tensor_zero(y);
}

int adj_affine_forward(const adj_tensor *x, const adj_tensor *w, const adj_tensor *b, adj_tensor *y) {
  static const char who[] = "affine forward";
  adj_affine_shape s;
  ADJ_CALL(adj_affine_check(who, x, w, &s));
  ADJ_CALL(adj_check_optional(who, "bias b", b, s.dtype, 1, &s.f_out));
  ADJ_CALL(adj_check_tensor(who, "output y", y, s.dtype, 2, (const int64_t[2]){s.batch, s.f_out}));
  adj_affine_apply(&s, 1, (const adj_tensor *const[][2]){{x, w}}, b, y);
  return ADJ_SUCCESS;
}

int adj_affine_jvp(const adj_tensor *x, const adj_tensor *w, const adj_tensor *dx, const adj_tensor *dw,
                   const adj_tensor *db, adj_tensor *dy) {
  static const char who[] = "affine jvp";
  adj_affine_shape s;
  ADJ_CALL(adj_affine_check(who, x, w, &s));
  ADJ_CALL(adj_check_optional(who, "input perturbation dx", dx, s.dtype, 2, x->shape));
  ADJ_CALL(adj_check_optional(who, "weight perturbation dw", dw, s.dtype, 2, w->shape));
  ADJ_CALL(adj_check_optional(who, "bias perturbation db", db, s.dtype, 1, &s.f_out));
  ADJ_CALL(adj_check_tensor(who, "output dy", dy, s.dtype, 2, (const int64_t[2]){s.batch, s.f_out}));
  /* Product rule of the bilinear map (x, W) -> x W^T. */
  adj_affine_apply(&s, 2, (const adj_tensor *const[][2]){{dx, w}, {x, dw}}, db, dy);
  return ADJ_SUCCESS;
}

int adj_affine_backward(const adj_tensor *x, const adj_tensor *w, const adj_tensor *dy, adj_tensor *dx,
                        adj_tensor *dw, adj_tensor *db) {
  static const char who[] = "affine backward";
  adj_affine_shape s;
  ADJ_CALL(adj_affine_check(who, x, w, &s));
  ADJ_CALL(adj_check_tensor(who, "output gradient dy", dy, s.dtype, 2, (const int64_t[2]){s.batch, s.f_out}));
  ADJ_CALL(adj_check_optional(who, "input gradient dx", dx, s.dtype, 2, x->shape));
  ADJ_CALL(adj_check_optional(who, "weight gradient dw", dw, s.dtype, 2, w->shape));
  ADJ_CALL(adj_check_optional(who, "bias gradient db", db, s.dtype, 1, &s.f_out));
  if (db) adj_cols_sum_add(s.dtype, dy->data, s.batch, s.f_out, db->data);
  if (dw)
    adj_gemm_team(s.dtype, true, false, s.f_out, s.f_in, s.batch, 1.0, dy->data, s.f_out, x->data, s.f_in, 1.0,
                  dw->data, s.f_in);
  if (dx)
    adj_gemm_team(s.dtype, false, false, s.batch, s.f_in, s.f_out, 1.0, dy->data, s.f_out, w->data, s.f_in, 0.0,
                  dx->data, s.f_in);
  return ADJ_SUCCESS;
}
