/* A compact encoder-decoder classifier with batch normalisation, for
 * (B, 1, 28, 28) images and 10 classes (Fashion-MNIST), sequential or over a
 * spatial partition (docs/training.md says why this shape).
 *
 *   enc1  conv 3x3 1 -> 16, pad 1    (B, 16, 28, 28)  BN  ReLU  max-pool 2  (B, 16, 14, 14)
 *   enc2  conv 3x3 16 -> 32, pad 1   (B, 32, 14, 14)  BN  ReLU  max-pool 2  (B, 32, 7, 7)
 *   dec   nearest upsample x2        (B, 32, 14, 14)
 *         conv 3x3 32 -> 16, pad 1   (B, 16, 14, 14)  BN  ReLU
 *         max-pool 2                 (B, 16, 7, 7)
 *   head  flatten (B, 784), affine 784 -> 10 (logits), softmax cross-entropy
 *
 * Batch normalisation is batchnorm_layer.h's (eps 1e-5, momentum 0.1, PyTorch's
 * defaults): batch statistics in training, running statistics in
 * evaluation (adj_network_set_training), and the running statistics are
 * network state that checkpoints save (checkpoint.h).  The pooled blocks run
 * as conv, BN, pool, ReLU: the same function and gradient as conv, BN, ReLU,
 * pool bit for bit (lenet.c says why), on a quarter of the elements.
 *
 * Layouts: "sequential" (every stage on rank 0), or a spatial grid "P0xP1"
 * (image rows over P0, columns over P1, P0, P1 in 1..7): every convolution,
 * batch norm, pool and the upsampling run on that partition of the first
 * P0 P1 ranks (convolution weights on rank 0, broadcast to their workers;
 * batch-norm statistics reduced over the grid), and the pooled features are
 * gathered onto rank 0 for the head.  The batch is split by data-parallel
 * replicas on top (data_parallel.h, adjoin-train --replicas).  A larger
 * communicator leaves the extra ranks idle; a smaller one is an error.
 *
 * The convolutions have no bias (the batch norm after each removes it).
 * Parameters, in order: enc1 conv weight, BN weight, BN bias; enc2 the
 * same; dec the same; head weight, bias — the same names and global shapes in
 * every layout, so checkpoints move between layouts.  adj_network_init_uniform
 * initialises them like PyTorch (batch norm: weight 1, bias 0).  The loss
 * stage is found with adj_lenet_loss (it takes any network ending in one). */
#ifndef ADJOIN_ENCDEC_H
#define ADJOIN_ENCDEC_H

#include <mpi.h>
#include <stdint.h>

#include "adjoin/layer.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef struct adj_encdec_config {
  MPI_Comm comm;          /* every rank of it calls adj_encdec_create */
  adj_dtype dtype;
  const char *layout;     /* "sequential" or "P0xP1" */
  int64_t batch;          /* B: fixed batch size (pad a short last batch; see xent_layer.h) */
} adj_encdec_config;

/* Builds the network; input (B, 1, 28, 28) on rank 0, output the scalar loss
 * on rank 0.  Convolution and affine parameters start at zero: call
 * adj_network_init_uniform.  Collective on config->comm; a bad layout, too
 * few ranks or a batch below 1 fail on every rank with a message naming the
 * value. */
int adj_encdec_create(const adj_encdec_config *config, adj_layer **network);

/* Ranks a layout needs, or 0 for an unknown one. */
int adj_encdec_layout_ranks(const char *layout);

ADJ_END_DECLS

#endif
