/* Proven before trained: the checks of DESIGN.md section 5 on exactly the
 * network a description and a placement build (network_build.h).
 *
 *   distributed == sequential  the placed network and the same description
 *                              built sequentially (every layer on rank 0;
 *                              phantom layers keep their width p, which
 *                              defines their parameters) start from the
 *                              same global parameters (adj_network_init_
 *                              uniform) and see the same input, labels or
 *                              targets; their outputs, input gradients and
 *                              every gathered parameter gradient are
 *                              compared (largest relative difference);
 *   Jacobian dot-product test  <J v, u> against <v, J^T u> over the input
 *                              and every parameter of the placed network
 *                              (adj_dottest_layer).
 *
 * The input, labels (xent, nll) and targets (other losses: uniform on
 * [0.05, 0.95], inside every loss's domain) are drawn from the seed unless
 * given; backward starts from d loss = 1, or from a drawn output gradient
 * when the network has no reduced loss.  Collective on config->comm. */
#ifndef ADJOIN_NETWORK_CHECK_H
#define ADJOIN_NETWORK_CHECK_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "adjoin/description.h"
#include "adjoin/dottest.h"
#include "adjoin/placement.h"
#include "adjoin/tensor.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef struct adj_network_check_config {
  const adj_description *description;
  const adj_placement *placement; /* NULL: the description's own */
  MPI_Comm comm;
  adj_dtype dtype;                /* float64 for the 1e-12 criteria */
  int64_t batch;                  /* N >= 1 */
  uint64_t seed;
  bool deep_halos;                /* build the placed network with deep halos (network_build.h) */
  /* Optional, read on rank 0: the global input (N, input shape...) in any
   * float dtype, and N class labels for a xent or nll loss. */
  const adj_tensor *input;
  const int64_t *labels;
} adj_network_check_config;

typedef struct adj_network_check_result {
  int ranks;                      /* ranks the placement uses */
  adj_dottest_result jacobian;
  double jacobian_tolerance;      /* adj_dottest_tolerance(dtype, layer) */
  double output_diff;             /* largest relative differences to the sequential network */
  double input_gradient_diff;
  double parameter_gradient_diff;
  double tolerance;               /* what the three must stay below: 1e-12 in float64, 1e-5 in float32 */
  bool passed;                    /* every figure within its tolerance, and the Jacobian test not 0 = 0 */
} adj_network_check_result;

/* Runs both checks; a build or run failure returns its status (the same on
 * every rank), a check that runs but fails returns ADJ_SUCCESS with passed
 * false.  Every rank gets the same result. */
int adj_network_check(const adj_network_check_config *config, adj_network_check_result *result);

ADJ_END_DECLS

#endif
