/* LeNet-5, sequential and distributed, from one builder (DistDL paper,
 * section 5 and appendix C).
 *
 * The network, for (B, 1, 28, 28) images and 10 classes:
 *   conv1  1 -> 6, 5x5, padding 2   (B, 6, 28, 28)   ReLU   max-pool 2x2 / 2  (B, 6, 14, 14)
 *   conv2  6 -> 16, 5x5             (B, 16, 10, 10)  ReLU   max-pool 2x2 / 2  (B, 16, 5, 5)
 *   flatten (B, 400)
 *   affine 400 -> 120  ReLU   affine 120 -> 84  ReLU   affine 84 -> 10 (logits)
 *   softmax cross-entropy, mean over the batch (xent_layer.h)
 * ReLU rather than the 1998 tanh: it reaches the accuracy targets of the
 * paper's PyTorch twin with the same Adam settings, and is what that twin uses.
 * The stages run as conv, max-pool, ReLU: the same function and gradient as
 * conv, ReLU, max-pool bit for bit (net/lenet.c says why), on a quarter of
 * the elements.
 *
 * The input enters whole on rank 0 and a repartition layer moves it onto
 * conv1's partition; the logits are gathered back onto rank 0 by the loss.
 * Layouts (P_0 x P_1: the spatial partition of both convolutions and pools;
 * affine weights on P_fo x P_fi grids, biases on their fi = 0 column; every
 * convolution's weights and bias on rank 0, broadcast to its spatial workers):
 *
 *   name        ranks  conv/pool    C5 (400->120)  F6 (120->84)  out (84->10)  batch
 *   sequential  1      1 x 1        1 x 1          1 x 1         1 x 1         whole
 *   dist2       2      2 x 1 rows   1 x 2          2 x 1         1 x 2         whole
 *   dist4       4      2 x 2        2 x 2          2 x 2         2 x 2         whole   (Table 1)
 *   dist8       8      2 x 4        2 x 2          2 x 2         2 x 2         2 parts
 *   hybrid4     4      2 x 2        1.5D 2 x 2     1.5D 2 x 2    1.5D 2 x 2    2 parts (affine)
 *   hybrid4-batch 4    2 x 1 x 2    1.5D 2 x 2     1.5D 2 x 2    1.5D 2 x 2    2 parts (all)
 *
 * dist4 is the paper's Table 1 and Figure C10: conv weights (6,1,5,5) and
 * (16,6,5,5) on worker 0, C5 (60,200), F6 (42,60) and output (5,42) blocks on
 * each of the four workers, biases on two.  Between the pools and C5, one
 * repartition splits the features' channels over C5's input partition and
 * each worker flattens its channel range into its range of C5's features.
 * dist8 adds data parallelism to the affine layers: each weight block is
 * broadcast to two batch halves and its gradient summed back (P_b = 2).
 * dist2 alternates the affine grids (1 x 2, 2 x 1, 1 x 2) so each layer's
 * output partition is the next one's input partition without glue.
 * hybrid4 runs the three affine layers as the 1.5D layers of affine15_layer.h on a
 * P_r x P_c = 2 x 2 grid (rows of the weights over P_r, the batch over P_c).
 * hybrid4-batch also splits the convolutions and pools over the batch: rows
 * of the image over 2 workers and the batch over 2 (the integrated
 * model/batch/domain layout of the parallelism spec), so the batch must have
 * at least 2 samples.  Any grid "RxC" (R <= 10 for the 10 classes) is that
 * layout on R x C ranks: rows over R and the batch over C in the convolutions
 * and pools, 1.5D affine layers on R x C; hybrid4-batch is "2x2".
 * A communicator larger than the layout leaves the extra ranks idle (zero
 * volume everywhere); a smaller one is an error.
 *
 * Parameters, in order: conv1 weight, bias; conv2 weight, bias; C5, F6 and
 * output weight, bias — the same names and global shapes in every layout, so
 * global parameter sets and checkpoints move between layouts. */
#ifndef ADJOIN_LENET_H
#define ADJOIN_LENET_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "adjoin/window.h"
#include "adjoin/layer.h"
#include "adjoin/network.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef struct adj_lenet_config {
  MPI_Comm comm;          /* every rank of it calls adj_lenet_create */
  adj_dtype dtype;
  const char *layout;     /* "sequential", "dist2", "dist4", "dist8", "hybrid4" or "hybrid4-batch" */
  int64_t batch;          /* B: fixed batch size (pad a short last batch; see xent_layer.h) */
  bool logits_only;       /* stop at the logits (B, 10) on rank 0, without the loss */
  bool deep_halos;        /* fuse conv1 .. the second ReLU into one deep halo layer
                           * (deep_halo_layer.h): one halo exchange instead of four;
                           * the same function, parameters and layouts */
} adj_lenet_config;

/* Builds the network: one adj_layer (network.h) whose input is (B, 1, 28, 28) on
 * rank 0 (zero volume elsewhere) and whose output is the scalar loss on rank 0
 * (or the logits, with logits_only).  Parameters start at zero: call
 * adj_lenet_init.  Collective on config->comm; an unknown layout or too few
 * ranks fails on every rank with a message listing the layouts. */
int adj_lenet_create(const adj_lenet_config *config, adj_layer **network);

/* The loss stage of a network made by adj_lenet_create (NULL with
 * logits_only), to set labels and read loss and accuracy (xent_layer.h). */
adj_layer *adj_lenet_loss(adj_layer *network);

/* Number of ranks a layout needs, or 0 for an unknown name; and the names, for
 * help texts ("sequential, dist2, dist4, dist8, hybrid4, hybrid4-batch"). */
int adj_lenet_layout_ranks(const char *layout);
const char *adj_lenet_layout_names(void);

ADJ_END_DECLS

#endif
