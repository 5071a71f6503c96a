#include <math.h>
#include <stdlib.h>

#include "adjoin/agree.h"
#include "adjoin/dottest.h"
#include "adjoin/rng.h"
#include "error_impl.h"

static double adj_local_dot(const adj_tensor *a, const adj_tensor *b) {
  double sum = 0.0;
  int64_t n = adj_tensor_volume(a);
  if (a->dtype == ADJ_FLOAT64 && b->dtype == ADJ_FLOAT64) {
    const double *x = a->data, *y = b->data;
    for (int64_t i = 0; i < n; i++) sum += x[i] * y[i];
  } else {
    for (int64_t i = 0; i < n; i++) sum += adj_tensor_get(a, i) * adj_tensor_get(b, i);
  }
  return sum;
}

int adj_global_dot(MPI_Comm comm, int n, const adj_tensor *a, const adj_tensor *b, double *dot) {
  double local = 0.0;
  for (int i = 0; i < n; i++) {
    ADJ_CHECK(adj_tensor_same_shape(&a[i], &b[i]), ADJ_ERR_SIZE, "global dot: tensor pair %d differs in shape", i);
    local += adj_local_dot(&a[i], &b[i]);
  }
  int size;
  MPI_Comm_size(comm, &size);
  double *partials = malloc(sizeof(double) * (size_t)size);
  ADJ_CHECK(partials, ADJ_ERR_MEM, "global dot: out of memory");
  MPI_Request request;
  int status = MPI_Iallgather(&local, 1, MPI_DOUBLE, partials, 1, MPI_DOUBLE, comm, &request);
  if (status == MPI_SUCCESS) status = adj_wait_all(1, &request, ADJ_WAIT_YIELD);
  else status = adj_error_mpi(status, "MPI_Iallgather");
  /* Rank order, so the result does not depend on MPI's reduction tree. */
  double sum = 0.0;
  for (int r = 0; r < size; r++) sum += partials[r];
  free(partials);
  *dot = sum;
  return status;
}

static void adj_destroy_tensors(int n, adj_tensor *t) {
  for (int i = 0; t && i < n; i++) adj_tensor_destroy(&t[i]);
  free(t);
}

static int adj_make_like(int n, const adj_tensor *templates, adj_tensor **out) {
  *out = NULL;
  ADJ_CHECK(n >= 0, ADJ_ERR_ARG, "dot-product test: negative tensor count %d", n);
  adj_tensor *t = calloc((size_t)(n ? n : 1), sizeof *t);
  *out = t;
  ADJ_CHECK(t, ADJ_ERR_MEM, "dot-product test: out of memory");
  for (int i = 0; i < n; i++)
    ADJ_CALL(adj_tensor_create(&t[i], templates[i].dtype, templates[i].rank, templates[i].shape));
  return ADJ_SUCCESS;
}

/* ---- the exact integer test ------------------------------------------------------- */

static int adj_all_integer(int n, const adj_tensor *t) {
  for (int i = 0; i < n; i++)
    if (adj_dtype_is_float(t[i].dtype)) return 0;
  return n > 0;
}

/* Small integers, so every sum a data-movement operator takes stays far from
 * wrapping: -3..3, or 0..3 for the unsigned uint8. */
static void adj_fill_small_integers(adj_rng *rng, adj_tensor *t) {
  int64_t lo = t->dtype == ADJ_UINT8 ? 0 : -3, n = adj_tensor_volume(t);
  for (int64_t i = 0; i < n; i++) adj_tensor_set_int(t, i, lo + (int64_t)adj_rng_below(rng, (uint64_t)(4 - lo)));
}

static int adj_local_dot_int(const adj_tensor *a, const adj_tensor *b, int64_t *sum) {
  int64_t n = adj_tensor_volume(a);
  for (int64_t i = 0; i < n; i++) {
    int64_t product;
    ADJ_CHECK(!__builtin_mul_overflow(adj_tensor_get_int(a, i), adj_tensor_get_int(b, i), &product) &&
                  !__builtin_add_overflow(*sum, product, sum),
              ADJ_ERR_NUMERIC, "exact dot-product test: the int64 inner product overflows at element %lld",
              (long long)i);
  }
  return ADJ_SUCCESS;
}

/* The exact global inner product: local int64 sums, gathered and added in rank
 * order, every step checked.  Collective on comm. */
static int adj_global_dot_int(MPI_Comm comm, int n, const adj_tensor *a, const adj_tensor *b, int64_t *dot) {
  int64_t local = 0;
  int status = ADJ_SUCCESS;
  for (int i = 0; i < n && !status; i++) status = adj_local_dot_int(&a[i], &b[i], &local);
  ADJ_CALL(adj_status_agree(comm, status, ADJ_WAIT_YIELD));
  int size;
  MPI_Comm_size(comm, &size);
  int64_t *partials = malloc(sizeof(int64_t) * (size_t)size);
  ADJ_CHECK(partials, ADJ_ERR_MEM, "exact dot-product test: out of memory");
  MPI_Request request;
  status = MPI_Iallgather(&local, 1, MPI_INT64_T, partials, 1, MPI_INT64_T, comm, &request);
  if (status == MPI_SUCCESS) status = adj_wait_all(1, &request, ADJ_WAIT_YIELD);
  else status = adj_error_mpi(status, "MPI_Iallgather");
  *dot = 0;
  for (int r = 0; r < size && !status; r++)
    if (__builtin_add_overflow(*dot, partials[r], dot))
      status = adj_error_set(ADJ_ERR_NUMERIC, "exact dot-product test: the int64 inner product overflows");
  free(partials);
  return status;
}

/* Fills x and y with small integers, applies F and F*, and compares the two
 * inner products exactly. */
static int adj_dottest_exact(const adj_dottest_problem *p, adj_rng *rng, adj_tensor *x, adj_tensor *y, adj_tensor *fx,
                             adj_tensor *fty, adj_dottest_result *r) {
  for (int i = 0; i < p->n_domain; i++) adj_fill_small_integers(rng, &x[i]);
  for (int i = 0; i < p->n_range; i++) adj_fill_small_integers(rng, &y[i]);
  ADJ_CALL(p->forward(p->ctx, x, fx));
  ADJ_CALL(p->adjoint(p->ctx, y, fty));
  *r = (adj_dottest_result){.exact = 1};
  ADJ_CALL(adj_global_dot_int(p->comm, p->n_range, fx, y, &r->range_inner_int));
  ADJ_CALL(adj_global_dot_int(p->comm, p->n_domain, x, fty, &r->domain_inner_int));
  r->range_inner = (double)r->range_inner_int, r->domain_inner = (double)r->domain_inner_int;
  int64_t difference = r->range_inner_int > r->domain_inner_int ? r->range_inner_int - r->domain_inner_int
                                                                : r->domain_inner_int - r->range_inner_int;
  r->relative_error = (double)difference;
  return ADJ_SUCCESS;
}

int adj_dottest_run(const adj_dottest_problem *p, uint64_t seed, adj_dottest_result *r) {
  ADJ_CHECK(p && r, ADJ_ERR_ARG, "adj_dottest_run: %s is NULL", p ? "result" : "problem");
  ADJ_CHECK(p->forward && p->adjoint, ADJ_ERR_ARG, "adj_dottest_run: the problem's forward and adjoint are required");
  ADJ_CHECK((p->domain || p->n_domain == 0) && (p->range || p->n_range == 0), ADJ_ERR_ARG,
            "adj_dottest_run: %d domain and %d range templates but a template array is NULL", p->n_domain, p->n_range);
  int rank, status;
  MPI_Comm_rank(p->comm, &rank);
  adj_tensor *x = NULL, *y = NULL, *fx = NULL, *fty = NULL;
  adj_rng *rng = NULL;
  status = adj_make_like(p->n_domain, p->domain, &x);
  if (!status) status = adj_make_like(p->n_domain, p->domain, &fty);
  if (!status) status = adj_make_like(p->n_range, p->range, &y);
  if (!status) status = adj_make_like(p->n_range, p->range, &fx);
  if (!status) status = adj_rng_create(seed * 1000003u + (uint64_t)rank, &rng);
  ADJ_CALL_GOTO(adj_status_agree(p->comm, status, ADJ_WAIT_YIELD), done);
  if (adj_all_integer(p->n_domain, p->domain) && adj_all_integer(p->n_range, p->range)) {
    status = adj_dottest_exact(p, rng, x, y, fx, fty, r);
    goto done;
  }
  for (int i = 0; i < p->n_domain; i++) adj_rng_fill_uniform(rng, &x[i], -1.0, 1.0);
  for (int i = 0; i < p->n_range; i++) adj_rng_fill_uniform(rng, &y[i], -1.0, 1.0);
  ADJ_CALL_GOTO(p->forward(p->ctx, x, fx), done);
  ADJ_CALL_GOTO(p->adjoint(p->ctx, y, fty), done);
  double xx, yy, fxfx, ftyfty;
  ADJ_CALL_GOTO(adj_global_dot(p->comm, p->n_range, fx, y, &r->range_inner), done);
  ADJ_CALL_GOTO(adj_global_dot(p->comm, p->n_domain, x, fty, &r->domain_inner), done);
  ADJ_CALL_GOTO(adj_global_dot(p->comm, p->n_domain, x, x, &xx), done);
  ADJ_CALL_GOTO(adj_global_dot(p->comm, p->n_range, y, y, &yy), done);
  ADJ_CALL_GOTO(adj_global_dot(p->comm, p->n_range, fx, fx, &fxfx), done);
  ADJ_CALL_GOTO(adj_global_dot(p->comm, p->n_domain, fty, fty, &ftyfty), done);
  r->exact = 0;
  r->norm_x = sqrt(xx), r->norm_y = sqrt(yy), r->norm_Fx = sqrt(fxfx), r->norm_Fty = sqrt(ftyfty);
  double a = r->norm_Fx * r->norm_y, b = r->norm_x * r->norm_Fty;
  double scale = a > b ? a : b;
  double diff = fabs(r->range_inner - r->domain_inner);
  r->relative_error = scale > 0 ? diff / scale : diff;
done:
  adj_rng_destroy(&rng);
  adj_destroy_tensors(p->n_domain, x);
  adj_destroy_tensors(p->n_domain, fty);
  adj_destroy_tensors(p->n_range, y);
  adj_destroy_tensors(p->n_range, fx);
  return status;
}

static int adj_dottest_op_forward(void *ctx, const adj_tensor *x, adj_tensor *y) {
  adj_op *op = ctx;
  if (!adj_op_in_place(op)) return adj_op_forward(op, x, y);
  ADJ_CALL(adj_tensor_copy(y, x));
  return adj_op_forward(op, y, y);
}

static int adj_dottest_op_adjoint(void *ctx, const adj_tensor *y, adj_tensor *x) {
  adj_op *op = ctx;
  if (!adj_op_in_place(op)) return adj_op_adjoint(op, y, x);
  ADJ_CALL(adj_tensor_copy(x, y));
  return adj_op_adjoint(op, x, x);
}

/* A shape-only template: adj_dottest_run reads dtype, rank and shape, never data. */
static adj_tensor adj_template(adj_dtype dtype, int rank, const int64_t *shape) {
  adj_tensor t = {.dtype = dtype, .rank = rank};
  for (int i = 0; i < ADJ_MAX_RANK; i++) t.shape[i] = i < rank ? shape[i] : 1;
  return t;
}

int adj_dottest_op(adj_op *op, uint64_t seed, adj_dottest_result *result) {
  ADJ_CHECK(op && result, ADJ_ERR_ARG, "adj_dottest_op: %s is NULL", op ? "result" : "operator");
  adj_tensor domain = adj_template(adj_op_dtype(op), adj_op_domain_rank(op), adj_op_domain_shape(op));
  adj_tensor range = adj_template(adj_op_dtype(op), adj_op_range_rank(op), adj_op_range_shape(op));
  adj_dottest_problem p = {
      .comm = adj_op_comm(op),
      .n_domain = 1,
      .domain = &domain,
      .n_range = 1,
      .range = &range,
      .forward = adj_dottest_op_forward,
      .adjoint = adj_dottest_op_adjoint,
      .ctx = op,
  };
  return adj_dottest_run(&p, seed, result);
}

double adj_dottest_tolerance(adj_dtype dtype, int is_layer) {
  if (!adj_dtype_is_float(dtype)) return 0.0;
  if (dtype == ADJ_FLOAT32) return 1e-5;
  return is_layer ? 1e-12 : 1e-13;
}
