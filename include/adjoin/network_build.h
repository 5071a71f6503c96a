/* The builder: a network (network.h) from a description (description.h) and
 * a placement (placement.h), on any communicator.
 *
 * Each layer of the description is created with its layer constructor on the
 * partition its resolved placement gives (adj_placement_resolve), in order;
 * where a layer's input partition differs from the layout the previous layer
 * produced, a repartition layer (repartition_layer.h, the DistDL paper's
 * transpose) moves the activations, and nothing is inserted where every rank
 * already holds the block the next layer needs (the same grid and cuts, or
 * only the batch split alike and a flatten between).  Partitions live on the
 * first ranks of the communicator; a larger communicator leaves the other
 * ranks idle (zero-volume blocks), a smaller one is refused.  A conv or pool
 * with a padding mode other than zeros is a pad layer (pad_layer.h) and the
 * window layer without padding, as PyTorch computes it.
 *
 * Passes over the built chain (the description is never rewritten):
 *   - a ReLU right before a max pool runs after it: the same function and
 *     gradient bit for bit (max(relu(a), relu(b)) = relu(max(a, b)) exactly,
 *     and both pass a zero gradient where the maximum is <= 0), on a quarter
 *     of the elements for a 2x2 pool;
 *   - with deep_halos, every run of two or more conv, pool and activation
 *     layers on one partition (channels unsplit) becomes one deep halo layer
 *     (deep_halo_layer.h): one halo exchange for the run.
 *
 * The network's input is (N, input shape...) on the input placement (whole
 * on rank 0 by default) and its output the loss's (a scalar on rank 0), or
 * the last layer's output with logits_only.  Parameters are created at zero:
 * adj_network_init_uniform (network.h) initialises them, and phantom layers
 * as adj_network_init_uniform does for any network.  Replicas (placement.h)
 * are not built here: a trainer builds this network on each replica's
 * communicator (data_parallel.h) and names the replicas in the options, for
 * batch norm.
 *
 * Collective on comm; every rank passes the same description, placement and
 * options, and every check is made from those alone, so a refusal (too few
 * ranks, a placement a layer refuses, a layer adjoin cannot build such as a
 * grouped convolution) is the same message on every rank. */
#ifndef ADJOIN_NETWORK_BUILD_H
#define ADJOIN_NETWORK_BUILD_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "adjoin/data_parallel.h"
#include "adjoin/description.h"
#include "adjoin/layer.h"
#include "adjoin/placement.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef struct adj_network_build_options {
  adj_dtype dtype;
  int64_t batch;      /* N, the batch of this network (one replica's), >= 1 */
  bool logits_only;   /* stop before the loss layer */
  bool deep_halos;    /* fuse runs of conv, pool and activation layers (deep_halo_layer.h) */
  bool keep_order;    /* no ReLU / max-pool reordering */
  /* The data-parallel replicas this network is one of (data_parallel.h;
   * built on adj_replicas_model_comm): its batch norm layers synchronise
   * their statistics over them (SyncBN, batchnorm_layer.h), so every
   * replica normalises with the whole replicated batch's statistics and the
   * running statistics stay identical, unless per_replica_batchnorm.  NULL:
   * one replica. */
  const adj_replicas *replicas;
  bool per_replica_batchnorm;
} adj_network_build_options;

/* Builds the network; *network is NULL on failure. */
int adj_network_build(const adj_description *description, const adj_placement *placement, MPI_Comm comm,
                      const adj_network_build_options *options, adj_layer **network);

/* From files in one call: reads the description at `path` and finds the
 * placement `placement` (adj_placement_find: a file, a shipped name, a
 * scheme; NULL the file's own) on every rank of comm, then builds. */
int adj_network_build_file(MPI_Comm comm, const char *path, const char *placement,
                           const adj_network_build_options *options, adj_layer **network);

/* The ranks one replica of that network and placement uses (batch: see
 * adj_placement_resolve), or 0 when the file or placement is refused
 * (adj_last_error() says why).  Collective on comm. */
int adj_network_file_ranks(MPI_Comm comm, const char *path, const char *placement, int64_t batch);

/* The loss layer that ends a built network (loss_layers.h or xent_layer.h),
 * or NULL when it ends otherwise. */
adj_layer *adj_network_build_loss(adj_layer *network);

ADJ_END_DECLS

#endif
