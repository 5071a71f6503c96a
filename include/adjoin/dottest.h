/* The dot-product (adjoint) test, eq. 13 of the DistDL paper:
 *
 *   | <F x, y> - <x, F* y> |  /  max( ||F x|| ||y||, ||x|| ||F* y|| )
 *
 * for random x and y.  Inner products are global (summed over every worker's
 * local memory, replicas included, since the range of a broadcast really is
 * k copies) and accumulated in float64: each rank sums its own elements in
 * row-major order, then the per-rank partial sums are gathered and added in rank
 * order.  The printed figure is therefore identical run to run.
 *
 * For integer operators (every tensor int32, int64 or uint8) the test is exact:
 * x and y are small random integers (-3..3, or 0..3 for uint8, so no sum the
 * operators take can wrap), the inner products are taken in int64 with every
 * product and sum checked for overflow, and they must be equal: the
 * relative_error field holds |<F x, y> - <x, F* y>|, an integer that must be 0.
 *
 * adj_dottest_run handles maps whose domain and range are lists of tensors (a
 * layer's Jacobian acts on the input and all parameters at once:
 * layer_dottest.h); adj_dottest_op is the one-tensor case for an adj_op. */
#ifndef ADJOIN_DOTTEST_H
#define ADJOIN_DOTTEST_H

#include <mpi.h>
#include <stdint.h>

#include "adjoin/op.h"
#include "adjoin/tensor.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef struct adj_dottest_result {
  double range_inner;    /* <F x, y> */
  double domain_inner;   /* <x, F* y> */
  double norm_Fx, norm_y, norm_x, norm_Fty;
  double relative_error; /* eq. 13; 0 when both sides vanish; the exact difference for integers */
  int exact;             /* nonzero for an integer operator: the _int fields hold the inner products */
  int64_t range_inner_int, domain_inner_int;
} adj_dottest_result;

typedef struct adj_dottest_problem {
  MPI_Comm comm;              /* every rank of it calls adj_dottest_run */
  int n_domain;
  const adj_tensor *domain;   /* n_domain templates: dtype and local shape of x's parts */
  int n_range;
  const adj_tensor *range;    /* n_range templates for y */
  /* y = F x and x = F* y over arrays of tensors shaped like the templates. */
  int (*forward)(void *ctx, const adj_tensor *x, adj_tensor *y);
  int (*adjoint)(void *ctx, const adj_tensor *y, adj_tensor *x);
  void *ctx;
} adj_dottest_problem;

/* Global float64 inner product sum_i <a_i, b_i> over n tensor pairs, in a fixed
 * order.  Collective on comm. */
int adj_global_dot(MPI_Comm comm, int n, const adj_tensor *a, const adj_tensor *b, double *dot);

/* Runs the test with x, y uniform on [-1, 1) drawn from seed (and the rank).
 * Collective on p->comm.  ADJ_ERR_ARG for a NULL problem or result, a NULL
 * forward or adjoint, or a NULL template array with a positive count, on the
 * ranks that passed it only and before any communication. */
int adj_dottest_run(const adj_dottest_problem *p, uint64_t seed, adj_dottest_result *result);

/* The test for one operator. Collective on the operator's communicator.
 * ADJ_ERR_ARG for a NULL operator or result, on the ranks that passed it only
 * and without communicating: pass an operator on every rank or none. */
int adj_dottest_op(adj_op *op, uint64_t seed, adj_dottest_result *result);

/* Tolerances of docs/design.md (how correctness is shown): data movement 1e-13 (float64), layers
 * 1e-12 (float64), 1e-5 for float32; 0 for the integer dtypes (exact).  A
 * result passes when its relative_error is at most the tolerance. */
double adj_dottest_tolerance(adj_dtype dtype, int is_layer);

ADJ_END_DECLS

#endif
