/* Phantom-parallel feed-forward layers (Seal et al., paper 003) and the
 * tensor-parallel layer they are compared with.
 *
 * Both take x (N, n_in) with the features split over a 1 x p partition and
 * give y (N, n_out) split the same way (balanced blocks n_j; the input keeps
 * its own cuts), so a stack of them stays sharded from layer to layer.  The
 * activation is a separate layer (pointwise_layer.h), as for the affine layer.
 *
 * Phantom layer, rank j (eq. 11 without sigma, in adjoin's row-major (N, F)
 * orientation):
 *
 *   g_j = C_j x_j^T                       (k, N)   local compression
 *   G   = AllGather(g_0, ..., g_{p-1})    (p k, N) the "ghost" values
 *   y_j = x_j L_j^T + sum_{i != j} G_i^T D_ij^T + b_j
 *
 * L_j is (n_j^out, n_j^in), C_j is (k, n_j^in), D_ij (n_j^out, k) lives on
 * rank j.  The all-gather is adjoin's all-gather operator (all_gather.h);
 * backward runs its adjoint, reduce-scatter, on the gradients of the gathered
 * copies, (p k, N) with a zero own block (paper Algorithm 1), so each layer
 * moves k x N values per rank forward and k x N per rank backward and
 * nothing else.  The layer equals the dense n_out x n_in affine layer whose
 * block (j, j) is L_j and whose block (j, i) is D_ij C_i.
 *
 * Tensor-parallel layer (the dense baseline, W split by output rows), with
 * exactly paper Table II's collectives per layer and step:
 *
 *   G   = AllGather(x_0, ..., x_{p-1})    (N, n_in) on every rank    all-gather n_j^in x N
 *   X   = Broadcast(G on the first rank)  (N, n_in) on every rank    broadcast n_in x N
 *   y_j = X W_j^T + b_j                   W_j (n_j^out, n_in)
 *
 * backward: dX = dy_j W_j; the broadcast's adjoint sums the p partial dX onto
 * the first rank's copy by an all-reduce (all-reduce n_in x N; the other
 * ranks' sums are dropped, as the broadcast read only the first rank's G);
 * the all-gather's adjoint reduce-scatters that gradient onto the shards
 * (reduce-scatter n_j^in x N).  The broadcast is Table II's "global layer on
 * each rank": the sharded ends do not need it, and the layer performs it so
 * the baseline costs what the paper's TP costs.  A backward without dx (a
 * network's first layer) skips the all-reduce and reduce-scatter, which only
 * serve the input gradient.
 *
 * Parameters (global layouts, so adj_layer_set/get_parameter and checkpoints
 * work):
 *   phantom  0 "local"        flat (sum_j n_j^out n_j^in), block j = L_j row-major
 *            1 "compressor"   (k, n_in) on 1 x p, cut like the input: block j = C_j
 *            2 "decompressor" (n_out, (p-1) k) on p x 1, cut like the output:
 *                             block j holds D_ij for i = 0..p-1, i != j, in
 *                             that order, as column blocks of width k
 *            3 "bias"         (n_out) cut like the output (unless no_bias)
 *   tp       0 "weight"       (n_out, n_in) on p x 1: block j = W_j
 *            1 "bias"         (n_out) cut like the output (unless no_bias)
 *
 * Errors (every rank, same message): k <= 0; k at or over the bound of paper
 * eq. 8, k >= (n/p)(1 - 1/p) with n = min(n_in, n_out), unless allow_large_k
 * (then the phantom layer has no fewer parameters than the dense one; p = 1
 * always needs it); n_in or n_out smaller than p; in_features different from
 * the input's width; an input partition that is not 1 x p.  Creation is
 * collective over the input's base communicator. */
#ifndef ADJOIN_PHANTOM_LAYER_H
#define ADJOIN_PHANTOM_LAYER_H

#include <stdbool.h>
#include <stdint.h>

#include "adjoin/decomposition.h"
#include "adjoin/layer.h"
#include "adjoin/op.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef struct adj_phantom_layer_config {
  adj_dtype dtype;
  const adj_decomposition *input; /* x (N, n_in) on a 1 x p partition */
  int64_t in_features;            /* n_in; must equal the input's width */
  int64_t out_features;           /* n_out (0 means n_in) */
  int64_t ghosts;                 /* k, the phantom width (ignored by the TP layer) */
  bool allow_large_k;             /* accept k over the eq. 8 bound */
  bool no_bias;
} adj_phantom_layer_config;

int adj_phantom_layer_create(const adj_phantom_layer_config *config, adj_layer **layer);
/* The tensor-parallel dense layer on the same ranks and layouts. */
int adj_tp_layer_create(const adj_phantom_layer_config *config, adj_layer **layer);

/* Bytes and messages this worker's collectives moved since creation or the
 * last reset, summed over the layer's operators (the layer's only
 * communication): the phantom's all-gather and its adjoint; tp's all-gather
 * and broadcast and their adjoints.  The applications count each operator's
 * (tp: 2 per forward, 2 per backward with dx).  ADJ_ERR_ARG for a layer not
 * made by the functions above. */
int adj_phantom_layer_counters(const adj_layer *layer, adj_op_counters *counters);
int adj_phantom_layer_reset_counters(adj_layer *layer);
/* Wall seconds this worker spent inside the collective's calls (posting and
 * waiting) since creation or the last reset: the communication time that
 * computation did not hide.  0 for other layers. */
double adj_phantom_layer_comm_seconds(const adj_layer *layer);

/* ---- sizes (paper section 2.1, Table I) ------------------------------------------------- */

typedef struct adj_phantom_size {
  int64_t weights; /* entries of L, C and D (phantom) or W (dense) */
  int64_t biases;
} adj_phantom_size;

/* Parameters of one layer on rank `rank` of p (balanced blocks), or of all
 * ranks together when rank < 0.  phantom: n_j^out n_j^in + k n_j^in +
 * (p-1) k n_j^out per rank, n_out^2/p + p k n when n divides evenly; tp:
 * n_j^out n_in per rank, n_out n_in in total (the dense layer's size).
 * Pure arithmetic; no MPI.  Sizes that do not fit int64 return -1 entries. */
adj_phantom_size adj_phantom_layer_size(int64_t n_in, int64_t n_out, int p, int64_t k, int rank);
adj_phantom_size adj_tp_layer_size(int64_t n_in, int64_t n_out, int p, int rank);

/* The eq. 8 bound: true when k < (n/p)(1 - 1/p), i.e. k p^2 < n (p - 1). */
bool adj_phantom_k_within_bound(int64_t n, int p, int64_t k);

ADJ_END_DECLS

#endif
