/* A multilayer perceptron for (B, 1, rows, cols) images: flatten, then affine
 * layers of the given widths with ReLU between them, then softmax
 * cross-entropy (xent_layer.h).  ShallowSpeed's reference network (paper 004)
 * is sizes 784-128-127-126-125-124-123-10.  By default every stage lives on
 * rank 0 of the communicator (a sequential network; data parallelism
 * replicates it, see data_parallel.h); with a grid, the flattened images move
 * onto a P_r x P_c grid of the first ranks and the affine layers are the 1.5D
 * layers of affine15_layer.h (features over P_r, the batch over P_c).  Either way it
 * trains with adj_trainer like LeNet-5, and the parameters have the same
 * names and global shapes, so checkpoints move between grids.
 *
 * Parameters, in order: weight (F_out, F_in) and bias (F_out) of each affine
 * layer.  adj_network_init_uniform initialises them. */
#ifndef ADJOIN_MLP_H
#define ADJOIN_MLP_H

#include <mpi.h>
#include <stdint.h>

#include "adjoin/layer.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

enum { ADJ_MLP_MAX_LAYERS = 16 };

typedef struct adj_mlp_config {
  MPI_Comm comm;               /* every rank of it calls adj_mlp_create */
  adj_dtype dtype;
  int64_t batch;               /* B: fixed batch size */
  int64_t rows, cols;          /* image size; sizes[0] must be rows x cols */
  int n_sizes;                 /* 2..ADJ_MLP_MAX_LAYERS + 1 widths, input first, classes last */
  const int64_t *sizes;
  int grid_rows, grid_cols;    /* P_r x P_c of 1.5D layers; 0 x 0: every stage on rank 0 */
} adj_mlp_config;

/* Builds the network.  Collective on config->comm; bad sizes fail on every
 * rank with a message naming them. */
int adj_mlp_create(const adj_mlp_config *config, adj_layer **network);

ADJ_END_DECLS

#endif
