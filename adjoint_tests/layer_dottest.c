/* Jacobian dot-product and Taylor tests for layers.
 *
 * The Jacobian of a layer at (x0, theta0) acts on the perturbation
 * (dx, dtheta_1, ..., dtheta_p): the domain of the linear map tested is the
 * input followed by every parameter, its range the output.  jvp reads dtheta
 * from the parameters' tangents and backward accumulates into their grads, so
 * the forward map writes the tangents and the adjoint map zeroes the grads and
 * reads them back. */
#include <math.h>
#include <stdlib.h>

#include "adjoin/agree.h"
#include "adjoin/dottest.h"
#include "adjoin/layer_dottest.h"
#include "adjoin/layer.h"
#include "adjoin/rng.h"
#include "error_impl.h"

typedef struct adj_layer_map {
  adj_layer *layer;
} adj_layer_map;

static int adj_layer_map_forward(void *ctx, const adj_tensor *x, adj_tensor *y) {
  adj_layer *l = ((adj_layer_map *)ctx)->layer;
  for (int i = 0; i < adj_layer_parameter_count(l); i++)
    ADJ_CALL(adj_tensor_copy(&adj_layer_parameter(l, i)->tangent, &x[1 + i]));
  return adj_layer_jvp(l, &x[0], &y[0]);
}

static int adj_layer_map_adjoint(void *ctx, const adj_tensor *y, adj_tensor *x) {
  adj_layer *l = ((adj_layer_map *)ctx)->layer;
  adj_layer_zero_grad(l);
  ADJ_CALL(adj_layer_backward(l, &y[0], &x[0]));
  for (int i = 0; i < adj_layer_parameter_count(l); i++)
    ADJ_CALL(adj_tensor_copy(&x[1 + i], &adj_layer_parameter(l, i)->grad));
  return ADJ_SUCCESS;
}

/* A rank-dependent stream so every worker's block is different. */
static int adj_layer_random_point(adj_layer *l, uint64_t seed, adj_tensor *x0) {
  int rank;
  MPI_Comm_rank(adj_layer_comm(l), &rank);
  adj_rng *rng;
  ADJ_CALL(adj_rng_create(seed * 7919u + (uint64_t)rank, &rng));
  int status = adj_layer_create_input(l, x0);
  if (!status) {
    adj_rng_fill_uniform(rng, x0, -1, 1);
    for (int i = 0; i < adj_layer_parameter_count(l); i++)
      adj_rng_fill_uniform(rng, &adj_layer_parameter(l, i)->value, -1, 1);
  }
  adj_rng_destroy(&rng);
  return status;
}

/* Shape-only templates for the domain (input, parameters) and range (output). */
static void adj_layer_templates(adj_layer *l, adj_tensor *domain, adj_tensor *range) {
  domain[0] = (adj_tensor){.dtype = adj_layer_dtype(l), .rank = adj_layer_input_rank(l)};
  range[0] = (adj_tensor){.dtype = adj_layer_dtype(l), .rank = adj_layer_output_rank(l)};
  for (int d = 0; d < ADJ_MAX_RANK; d++) {
    domain[0].shape[d] = adj_layer_input_shape(l)[d];
    range[0].shape[d] = adj_layer_output_shape(l)[d];
  }
  for (int i = 0; i < adj_layer_parameter_count(l); i++) domain[1 + i] = adj_layer_parameter(l, i)->value;
}

int adj_dottest_layer(adj_layer *l, uint64_t seed, adj_dottest_result *result) {
  ADJ_CHECK(l && result, ADJ_ERR_ARG, "dot-product test of a layer: %s is NULL", l ? "result" : "layer");
  adj_tensor x0, y0, range[1];
  adj_tensor *domain = calloc((size_t)(1 + adj_layer_parameter_count(l)), sizeof *domain);
  ADJ_CHECK(domain, ADJ_ERR_MEM, "dot-product test: out of memory");
  int status = adj_layer_random_point(l, seed, &x0);
  if (!status) status = adj_layer_create_output(l, &y0);
  ADJ_CALL(adj_status_agree(adj_layer_comm(l), status, ADJ_WAIT_YIELD));
  status = adj_layer_forward(l, &x0, &y0);
  if (!status) {
    adj_layer_templates(l, domain, range);
    adj_layer_map map = {l};
    adj_dottest_problem p = {.comm = adj_layer_comm(l),
                             .n_domain = 1 + adj_layer_parameter_count(l),
                             .domain = domain,
                             .n_range = 1,
                             .range = range,
                             .forward = adj_layer_map_forward,
                             .adjoint = adj_layer_map_adjoint,
                             .ctx = &map};
    status = adj_dottest_run(&p, seed + 1, result);
  }
  adj_tensor_destroy(&x0);
  adj_tensor_destroy(&y0);
  free(domain);
  return status;
}

/* value += h * direction over every parameter; h = -h undoes it up to
 * round-off, so the caller restores from a saved copy instead. */
static void adj_axpy(adj_tensor *y, double h, const adj_tensor *x) {
  int64_t n = adj_tensor_volume(y);
  for (int64_t i = 0; i < n; i++) adj_tensor_set(y, i, adj_tensor_get(y, i) + h * adj_tensor_get(x, i));
}

typedef struct adj_taylor_state {
  adj_tensor x0, dx, xh, y0, yh, jv;
  adj_tensor *saved; /* one per parameter: the values at the base point */
} adj_taylor_state;

static void adj_taylor_free(adj_taylor_state *s, int n_params) {
  adj_tensor_destroy(&s->x0), adj_tensor_destroy(&s->dx), adj_tensor_destroy(&s->xh);
  adj_tensor_destroy(&s->y0), adj_tensor_destroy(&s->yh), adj_tensor_destroy(&s->jv);
  for (int i = 0; s->saved && i < n_params; i++) adj_tensor_destroy(&s->saved[i]);
  free(s->saved);
}

static int adj_taylor_setup(adj_layer *l, uint64_t seed, adj_taylor_state *s) {
  int rank;
  MPI_Comm_rank(adj_layer_comm(l), &rank);
  s->saved = calloc((size_t)adj_layer_parameter_count(l) + 1, sizeof *s->saved);
  ADJ_CHECK(s->saved, ADJ_ERR_MEM, "taylor test: out of memory");
  ADJ_CALL(adj_layer_random_point(l, seed, &s->x0));
  ADJ_CALL(adj_layer_create_input(l, &s->dx));
  ADJ_CALL(adj_layer_create_input(l, &s->xh));
  ADJ_CALL(adj_layer_create_output(l, &s->y0));
  ADJ_CALL(adj_layer_create_output(l, &s->yh));
  ADJ_CALL(adj_layer_create_output(l, &s->jv));
  adj_rng *rng;
  ADJ_CALL(adj_rng_create(seed * 31u + 17u + (uint64_t)rank, &rng));
  adj_rng_fill_uniform(rng, &s->dx, -1, 1);
  int status = ADJ_SUCCESS;
  for (int i = 0; i < adj_layer_parameter_count(l) && !status; i++) {
    adj_parameter *p = adj_layer_parameter(l, i);
    adj_rng_fill_uniform(rng, &p->tangent, -1, 1);
    status = adj_tensor_create(&s->saved[i], p->value.dtype, p->value.rank, p->value.shape);
    if (!status) status = adj_tensor_copy(&s->saved[i], &p->value);
  }
  adj_rng_destroy(&rng);
  return status;
}

static double adj_norm_diff(MPI_Comm comm, const adj_tensor *yh, const adj_tensor *y0, const adj_tensor *jv, double h) {
  double local = 0;
  int64_t n = adj_tensor_volume(yh);
  for (int64_t i = 0; i < n; i++) {
    double r = adj_tensor_get(yh, i) - adj_tensor_get(y0, i) - h * adj_tensor_get(jv, i);
    local += r * r;
  }
  double total = 0;
  MPI_Request request;
  MPI_Iallreduce(&local, &total, 1, MPI_DOUBLE, MPI_SUM, comm, &request);
  adj_wait_all(1, &request, ADJ_WAIT_YIELD);
  return sqrt(total);
}

int adj_taylor_test_layer(adj_layer *l, uint64_t seed, double h0, int n, double *remainders, double *orders) {
  adj_taylor_state s = {0};
  int np = adj_layer_parameter_count(l);
  int status = adj_status_agree(adj_layer_comm(l), adj_taylor_setup(l, seed, &s), ADJ_WAIT_YIELD);
  if (!status) status = adj_layer_forward(l, &s.x0, &s.y0);
  if (!status) status = adj_layer_jvp(l, &s.dx, &s.jv);
  double h = h0;
  for (int k = 0; k < n && !status; k++, h /= 2) {
    adj_tensor_copy(&s.xh, &s.x0);
    adj_axpy(&s.xh, h, &s.dx);
    for (int i = 0; i < np; i++) {
      adj_parameter *p = adj_layer_parameter(l, i);
      adj_tensor_copy(&p->value, &s.saved[i]);
      adj_axpy(&p->value, h, &p->tangent);
    }
    status = adj_layer_forward(l, &s.xh, &s.yh);
    if (!status) remainders[k] = adj_norm_diff(adj_layer_comm(l), &s.yh, &s.y0, &s.jv, h);
  }
  for (int k = 0; k + 1 < n; k++)
    orders[k] = remainders[k + 1] > 0 ? log2(remainders[k] / remainders[k + 1]) : INFINITY;
  for (int i = 0; i < np; i++) adj_tensor_copy(&adj_layer_parameter(l, i)->value, &s.saved[i]);
  adj_taylor_free(&s, np);
  return status;
}
