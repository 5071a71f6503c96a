/* Training loop: epochs of shuffled mini-batches through a network whose last
 * stage is a softmax cross-entropy layer (xent_layer.h), as adj_network_build
 * builds a description ending in `loss type=xent`.
 *
 * Each step: rank 0 copies the batch's images into the network's input (the
 * input lives whole on rank 0; the network's first stage repartitions it onto
 * the first layer's partition) and sets the labels on the loss; then zero-grad,
 * forward, backward from d loss = 1, and one optimizer step on every worker's
 * shards.  An epoch visits every sample once in an order drawn from a seeded
 * generator (adj_shuffle_indices); a short last batch is padded with zeros and
 * only its real samples count in the loss (xent_layer.h), so no sample is
 * dropped and every layer keeps its fixed batch size.
 *
 * Reproducibility: the same seed, layout and dtype give bit-identical runs
 * (the only randomness is the shuffle; reductions run in a fixed order).
 * Resumption: the trainer keeps the generator's state as it was when the
 * current epoch began, so a checkpoint (checkpoint.h) taken at any batch lets a
 * new process redraw the epoch's order, skip the batches done and continue
 * exactly as the uninterrupted run would.
 *
 * All calls are collective on the network's communicator.  Statistics (loss,
 * correct counts) are computed where the loss lives, rank 0; other ranks get
 * zeros. */
#ifndef ADJOIN_TRAIN_H
#define ADJOIN_TRAIN_H

#include <stdint.h>
#include <stdio.h>

#include "adjoin/data_parallel.h"
#include "adjoin/dataset.h"
#include "adjoin/gradient_reducer.h"
#include "adjoin/layer.h"
#include "adjoin/network.h"
#include "adjoin/optimizer.h"
#include "adjoin/trace.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef struct adj_trainer_config {
  adj_layer *network;         /* input (B, 1, rows, cols) on rank 0, output the loss */
  adj_optimizer *optimizer;   /* over network's parameters */
  const adj_dataset *train;   /* the same data set on every rank (adj_dataset_load) */
  uint64_t seed;              /* of the shuffling generator */
  /* Data parallelism (data_parallel.h); NULL: one replica.  network is then
   * this rank's replica, built on adj_replicas_model_comm, and every rank of
   * the replicas' communicator calls the trainer.  A step's global batch is
   * the network's batch x replicas x micro_batches samples; each replica
   * takes a balanced contiguous share of it (shares differ by at most one, and
   * a short last batch is shared the same way), scales its loss by its share
   * of the global sample count, and the gradients are summed over replicas by
   * a gradient reducer posted bucket by bucket during the backward, so every
   * layout computes the sequential gradient of the same global batch. */
  const adj_replicas *replicas;
  int micro_batches;          /* forward/backward passes per step, gradients accumulated; 0 means 1 */
  int64_t global_batch;       /* samples per step, at most the product above; 0 means that product */
  const int64_t *bucket_caps; /* {first bucket, later buckets} in bytes; NULL: 1 MiB and 25 MiB */
  bool reduce_after_backward; /* baseline: post every bucket only after the whole backward */
  bool require_equal_start;   /* refuse replicas with different parameters instead of taking replica 0's */
  FILE *trace;                /* optional: one line per event (backward stages, buckets, wait, step) */
  adj_trace *timeline;        /* optional: every rank's steps, passes, layers, buckets and waits (trace.h) */
} adj_trainer_config;

typedef struct adj_trainer adj_trainer;

/* Statistics of a run of batches or of an evaluation (valid on rank 0). */
typedef struct adj_train_stats {
  double loss;       /* mean loss per sample */
  int64_t correct;   /* samples whose largest logit is the label */
  int64_t samples;   /* samples seen */
  int64_t batches;   /* batches run (every rank) */
  double seconds;    /* wall time */
  /* The gradient reducer's work over the batches run (zero without replicas):
   * payload bytes and bucket messages of this rank, the time its waits
   * before the optimizer steps blocked, and the time its posts and pokes
   * took inside the backward. */
  uint64_t reduced_bytes, reduced_messages;
  double reduce_wait_seconds, reduce_progress_seconds;
} adj_train_stats;

/* Called on every rank after each training batch: batch index within the
 * epoch (1-based, after the step), batches per epoch, and the batch's loss
 * (rank 0). */
typedef void adj_train_progress(void *ctx, int64_t batch, int64_t batches, double loss);

/* The network's last stage must be a softmax cross-entropy layer and its input
 * must match the data set's images.  Collective. */
int adj_trainer_create(const adj_trainer_config *config, adj_trainer **trainer);
void adj_trainer_destroy(adj_trainer **trainer);

/* The replicas' gradient reducer (NULL without replicas), for its bucket
 * plan and counters. */
adj_gradient_reducer *adj_trainer_reducer(adj_trainer *trainer);

/* ShallowSpeed's assert_sync: every replica holds bit-identical parameters
 * (adj_replicas_check_sync); trivially true without replicas.  *hash may be
 * NULL.  Collective. */
int adj_trainer_check_sync(adj_trainer *trainer, uint64_t *hash);

/* Batches per epoch: ceil(N / B), B the global batch. */
int64_t adj_trainer_batches_per_epoch(const adj_trainer *trainer);

/* Runs the rest of the current epoch, or at most max_batches of it when
 * max_batches >= 0, and reports on the batches run.  Collective.  Training
 * that diverges (a non-finite loss, or a non-finite parameter at the end of
 * the run) stops with ADJ_ERR_NUMERIC on every rank, naming the batch. */
int adj_trainer_run(adj_trainer *trainer, int64_t max_batches, adj_train_progress *progress, void *ctx,
                    adj_train_stats *stats);

/* Position: epochs completed, and batches done in the current epoch. */
int64_t adj_trainer_epoch(const adj_trainer *trainer);
int64_t adj_trainer_batch(const adj_trainer *trainer);

/* Loss and accuracy of the network on a data set, in fixed-size batches (the
 * last one padded), without changing parameters or the shuffle.  Runs in
 * evaluation mode (adj_network_set_training: batch norm uses and keeps its
 * running statistics) and returns the network to training mode.  Collective. */
int adj_trainer_evaluate(adj_trainer *trainer, const adj_dataset *data, adj_train_stats *stats);

/* Checkpoint of parameters, optimizer state, shuffle state and position
 * (checkpoint.h), and its restoration.  A refused checkpoint changes
 * nothing; refused too is a position past this run's batches per epoch, or a
 * mid-epoch position saved with another batch size (the epoch's remaining
 * samples would differ).  Collective. */
int adj_trainer_save(adj_trainer *trainer, const char *path);
int adj_trainer_load(adj_trainer *trainer, const char *path);

/* OpenBLAS and the kernels' thread teams (threads.h) would each start one
 * thread per core in every rank; ranks sharing a node would then fight over
 * its cores.  Gives each rank max(1, cores / ranks on its node) kernel threads
 * and OpenBLAS threads, unless ADJ_NUM_THREADS or OPENBLAS_NUM_THREADS say
 * otherwise, and returns the kernel thread count.  Collective on comm. */
int adj_train_share_cores(MPI_Comm comm);

ADJ_END_DECLS

#endif
