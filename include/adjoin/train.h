/* Training loop: epochs of shuffled mini-batches through a network whose last
 * stage is a loss layer: the softmax cross-entropy of xent_layer.h or any
 * reduced loss of loss_layers.h (mean, sum or batchmean; not none), as
 * adj_network_build builds a description ending in a `loss` line.
 *
 * Each step: every rank reads from the data set (dataset.h) only the block
 * of the batch its input layout holds (adj_layer_input_layout of the
 * network: batch and sample dimensions may be split any way), straight into
 * the network's input, and the targets the loss layer needs where it needs
 * them: the labels of the whole batch on the cross-entropy's root, the
 * labels of its batch rows on each NLL worker, the block of the target
 * array shaped like its input block on each worker of an elementwise loss.
 * Then zero-grad, forward, backward from d loss = 1, and one optimizer step
 * on every worker's shards.  An epoch visits every sample once in an order
 * drawn from a seeded generator (adj_shuffle_indices); a short last batch is
 * padded with zeros and only its real samples count in the loss (both loss
 * headers: the padding adds nothing and gets no gradient), so no sample is
 * dropped and every layer keeps its fixed batch size.
 *
 * Classification (cross-entropy, NLL) reports the loss and the samples whose
 * largest score is the label; regression (every other loss) the loss.
 *
 * Reproducibility: the same seed, layout and dtype give bit-identical runs
 * (the only randomness is the shuffle; reductions run in a fixed order), and
 * so do two sources holding the same values (IDX, .npy, HDF5).  Resumption:
 * the trainer keeps the generator's state as it was when the current epoch
 * began, so a checkpoint (checkpoint.h) taken at any batch lets a new
 * process redraw the epoch's order, skip the batches done and continue
 * exactly as the uninterrupted run would.
 *
 * All calls are collective on the network's communicator (with replicas, on
 * every rank of every replica).  Statistics (loss, correct counts) are
 * valid on rank 0 of the network's communicator, wherever the loss layer
 * computes them (the cross-entropy's root sends them there); other ranks
 * get what their loss layer holds. */
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
  adj_layer *network;         /* input (B, sample...) on any layout, last stage a loss layer */
  adj_optimizer *optimizer;   /* over network's parameters */
  adj_dataset *train;         /* the same set opened on every rank; inputs and targets must fit the network */
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
  double loss;         /* loss per sample: the mean-reduced loss, or a sum-reduced one divided by the samples */
  bool classification; /* the loss is cross-entropy or NLL, and correct counts */
  int64_t correct;     /* classification: samples whose largest score (the first, on ties) is the label */
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
 * (valid on rank 0). */
typedef void adj_train_progress(void *ctx, int64_t batch, int64_t batches, double loss);

/* Checks, on every rank alike: the network's last stage is a loss layer
 * with a reduced loss; the data set's samples fit the network's input and
 * its targets the loss (labels for cross-entropy and NLL, with at most as
 * many classes as the loss takes; arrays shaped like one sample of the
 * loss's input otherwise), where shapes that differ only by extents of 1
 * are read as the network's (adj_dataset_set_input_shape).  A mismatch is
 * ADJ_ERR_SIZE or ADJ_ERR_ARG naming both shapes or counts.  Collective. */
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

/* Loss and accuracy of the network on a data set (whose samples fit the
 * network as the training set's do), in fixed-size batches (the last one
 * padded), without changing parameters or the shuffle.  Runs in
 * evaluation mode (adj_network_set_training: batch norm uses and keeps its
 * running statistics) and returns the network to training mode.  Collective. */
int adj_trainer_evaluate(adj_trainer *trainer, adj_dataset *data, adj_train_stats *stats);

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
