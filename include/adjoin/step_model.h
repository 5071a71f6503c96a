/* The step model: the time and memory of one training step of a described
 * network (description.h) on a placement (placement.h), stage by stage and
 * phase by phase, predicted from what the builder (network_build.h) will make.
 *
 * The model walks the resolved placement as the builder walks it: a
 * repartition where a layer asks for its input on other parts and the blocks
 * differ, the ReLU after a max pool, a pad layer before a window with a
 * padding mode.  For each stage it gives, on the busiest worker (every block
 * is balanced, so rank 0's is the largest):
 *
 *   compute   the stage's local computation, timed as its one-layer twin
 *             (layer_times.h) or, for a machine file, from its rates;
 *   comm      every operator the layer creates, with the MPI pattern its
 *             algorithm will use (the sum-reduces choose by the measured
 *             algorithm table, else by the fixed rule of
 *             docs/primitive-algorithms.md), priced by the machine's line
 *             for that pattern (machine.h): halo exchanges (nested rounds),
 *             the broadcasts of inputs and weights and their summing
 *             adjoints, the sum-reduce of partial outputs, the 1.5D layer's
 *             all-gather and its reduce-scatter, the loss's gather, batch
 *             norm's statistics, and repartitions (every worker's sent and
 *             received volume from the intersections of its blocks);
 *   memory    on rank 0: parameters, their gradients and tangents, the
 *             optimizer's state, the network's activations and their
 *             gradients, the layer's own buffers (halo-extended copies,
 *             broadcast copies, gathered inputs, staging) and the local
 *             convolution's workspace.
 *
 * Phases: forward; backward (a stage up to the network's first stage with
 * parameters computes no input gradient, and the stages before it none at
 * all, as network.h runs them); optimizer (the update over this rank's
 * parameters, zero-grad included, and, with replicas, the part of the
 * gradient reducer's buckets the backward cannot hide).  Per step the
 * network agrees three times (t403): three small all-reduces over the ranks.
 *
 * Replicas (data_parallel.h): each replica's network runs on `ranks /
 * replicas` ranks with its share of the batch, and the gradients are summed
 * over the replicas in buckets (gradient_reducer.h): parameters in reverse
 * stage order, cut at the caps; a bucket is posted when the backward has
 * finished its stages and reduces after the bucket before it, each costing
 * the all-reduce line over the replicas.  What ends after the backward is
 * the exposed part; the rest is hidden.
 *
 * Pure and deterministic (no MPI): the same inputs give the same prediction
 * on every rank.  Twins the layer time table lacks are estimated and
 * remembered (adj_layer_times_missing) for measurement. */
#ifndef ADJOIN_STEP_MODEL_H
#define ADJOIN_STEP_MODEL_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "adjoin/description.h"
#include "adjoin/dtype.h"
#include "adjoin/layer_times.h"
#include "adjoin/machine.h"
#include "adjoin/optimizer.h"
#include "adjoin/placement.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef enum adj_step_phase {
  ADJ_STEP_FORWARD = 0,
  ADJ_STEP_BACKWARD = 1,
  ADJ_STEP_OPTIMIZER = 2,
  ADJ_STEP_PHASES = 3
} adj_step_phase;

typedef enum adj_step_memory_kind {
  ADJ_STEP_MEMORY_PARAMETERS = 0,  /* values */
  ADJ_STEP_MEMORY_GRADIENTS = 1,   /* gradients and tangents (network.h packs both) */
  ADJ_STEP_MEMORY_OPTIMIZER = 2,   /* Adam's moments, SGD's velocity */
  ADJ_STEP_MEMORY_ACTIVATIONS = 3, /* stage outputs and their gradients, the input batch */
  ADJ_STEP_MEMORY_BUFFERS = 4,     /* the layers' own copies, staging, reducer scratch */
  ADJ_STEP_MEMORY_WORKSPACE = 5,   /* the local convolutions' workspace */
  ADJ_STEP_MEMORY_KINDS = 6
} adj_step_memory_kind;

/* "forward", "backward", "optimizer"; "parameters", "gradients", ... */
const char *adj_step_phase_name(adj_step_phase phase);
const char *adj_step_memory_name(adj_step_memory_kind kind);

/* One operator application of a stage in a phase: the MPI pattern its
 * algorithm runs, its group, the block it moves (for point-to-point, the
 * busiest member's payload) and its predicted seconds. */
enum { ADJ_STEP_MAX_OPS = 12 };
typedef struct adj_step_op {
  const char *what;        /* "halo", "input broadcast", "output sum", "weight broadcast", "weight sum", ... */
  adj_step_phase phase;
  adj_comm_kind pattern;
  int group;
  double bytes;
  double messages;
  double seconds;
} adj_step_op;

typedef struct adj_step_stage {
  char name[ADJ_DESC_NAME_SIZE]; /* the description layer's name; a repartition's is "->" + the next layer's */
  const char *kind;              /* "conv", "relu", ..., "repartition", "pad" */
  int layer;                     /* description layer (a repartition's: the layer it feeds) */
  int workers;                   /* ranks that hold a block of its output */
  bool input_gradient;           /* its backward computes dx */
  bool measured;                 /* its compute time came from the table */
  double compute[ADJ_STEP_PHASES];  /* seconds */
  double comm[ADJ_STEP_PHASES];     /* seconds */
  double bytes[ADJ_STEP_PHASES];    /* the busiest worker's payload */
  double messages[ADJ_STEP_PHASES];
  int64_t memory[ADJ_STEP_MEMORY_KINDS]; /* rank 0's bytes */
  int64_t parameters;               /* rank 0's parameter count */
  int tensors;                      /* its parameter blocks on rank 0, in the layer's order */
  int64_t tensor[ADJ_DESC_MAX_PARAMETERS];
  int n_ops;                        /* the operators that move data (groups of one move none) */
  adj_step_op ops[ADJ_STEP_MAX_OPS];
} adj_step_stage;

typedef struct adj_step_options {
  adj_dtype dtype;              /* 0 (ADJ_FLOAT32 is not 0): see dtype.h; set it */
  int64_t batch;                /* the global batch of a step */
  int ranks;                    /* of the whole job (replicas included), >= 1 */
  int replicas;                 /* 0 means the layout's */
  adj_optimizer_kind optimizer;
  bool momentum;                /* SGD with momentum keeps a velocity */
  int64_t bucket_bytes, first_bucket_bytes; /* 0: the reducer's defaults */
  const adj_machine *machine;   /* required */
  adj_layer_times *times;       /* measured compute; NULL: the machine's rates */
} adj_step_options;

typedef struct adj_step_prediction {
  int n;
  adj_step_stage *stages;        /* (n), in the order the builder makes them */
  int replicas;
  int64_t replica_batch;         /* the largest replica's share of the batch */
  double phase[ADJ_STEP_PHASES]; /* seconds: stages' compute + comm, and the optimizer */
  double agreements;             /* the three per-step agreements */
  double reducer;                /* seconds of bucket reductions, and the part the backward hides */
  double reducer_hidden;
  int buckets;
  double step;                   /* forward + backward + optimizer + agreements */
  int64_t memory[ADJ_STEP_MEMORY_KINDS];
  int64_t baseline;              /* the machine's */
  int64_t memory_total;          /* baseline + every kind: rank 0's peak */
  int estimated;                 /* stages whose compute was estimated, not measured */
} adj_step_prediction;

typedef struct adj_step_model adj_step_model;

/* A model for the options (copied; the machine too).  It reads this host's
 * measured algorithm table (docs/primitive-algorithms.md) and
 * ADJ_SUM_REDUCE_ALGORITHM, as the operators will.  Not collective. */
int adj_step_model_create(const adj_step_options *options, adj_step_model **model);
void adj_step_model_destroy(adj_step_model **model);

/* Predicts a step of `description` laid out as `layout` (adj_placement_resolve
 * of the replica's batch).  ADJ_ERR_ARG names a batch the replicas cannot
 * share, a layout of another description, a layout needing more ranks than
 * the replicas leave.  Free with adj_step_prediction_free. */
int adj_step_model_predict(adj_step_model *model, const adj_description *description,
                           const adj_network_layout *layout, adj_step_prediction *prediction);
void adj_step_prediction_free(adj_step_prediction *prediction);

/* A table of the prediction, one line per stage (compute and communication
 * seconds per phase, bytes, memory), then the totals, to out. */
void adj_step_prediction_print(const adj_step_prediction *prediction, FILE *out);

ADJ_END_DECLS

#endif
