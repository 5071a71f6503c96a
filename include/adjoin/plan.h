/* The communication cost model and grid planner of the integrated model,
 * batch and domain parallelism of Gholami et al. (papers 000 and 001).
 *
 * A network description (conv, pool and fc layers with their shapes) and a
 * P_r x P_c grid give, per layer and in total, the predicted communication
 * time of one training step in the alpha-beta model (alpha seconds per
 * message, beta seconds per byte), split by collective.  Three modes:
 *
 *   paper-eq4  000 eq. (4): every parameterised layer 1.5D on the one grid,
 *              3 (all-gather + all-reduce of dX) + 2 (all-reduce of dW) terms.
 *   paper      001 eq. (8)/(9) verbatim with the decisions of
 *              docs/parallelism.md A2-A11: the first layer has no dX term,
 *              the grid's P_r splits an fc layer's model and, for a conv
 *              layer, its model (eq. 8) or, with ADJ_PLAN_CONV_DOMAIN, the
 *              cheaper of model and domain (eq. 9).
 *   adjoin     what adjoin's operators count for the 1.5D affine layer
 *              (affine15_layer.h): all-gather of each fc layer's input over P_r,
 *              the reduce-scatter adjoint (half the paper's all-reduce, none
 *              for the first layer), the weight and bias broadcasts and their
 *              sum-reduces over P_c; real (balanced) block sizes, the largest
 *              block on any worker being the critical path.  Conv and pool
 *              layers split H by P_r (halo exchange) and the batch by P_c
 *              unless ADJ_PLAN_CONV_BATCH puts them on 1 x P.
 *
 * Times: a collective over a group of q workers costs alpha ceil(log2 q) plus
 * beta times its per-worker volume (with the collective constants when the
 * config has them, e.g. from an all-reduce calibration sweep); paper modes use the papers' real-valued
 * volumes, adjoin mode the bytes the operators count.  Nothing here runs MPI
 * except adj_plan_calibrate.  Errors name the bad value (a grid that does not
 * multiply to P, a layer that cannot be split as asked, an unknown layer type,
 * a malformed line, non-positive alpha or beta). */
#ifndef ADJOIN_PLAN_H
#define ADJOIN_PLAN_H

#include <stdbool.h>
#include <stdint.h>

#include <mpi.h>

#include "adjoin/affine15_layer.h"
#include "adjoin/description.h"
#include "adjoin/pad_layer.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

/* ---- network descriptions ------------------------------------------------------------- */

typedef enum adj_plan_kind { ADJ_PLAN_CONV = 0, ADJ_PLAN_POOL = 1, ADJ_PLAN_FC = 2 } adj_plan_kind;

typedef struct adj_plan_layer {
  char name[32];
  adj_plan_kind kind;
  int64_t kernel, stride, pad, groups;   /* conv / pool (square kernels) */
  int64_t in_c, in_h, in_w;              /* input (C, H, W); fc: (F_in, 1, 1) */
  int64_t out_c, out_h, out_w;           /* output before any pooling */
  int64_t weights, biases;               /* parameter counts (|W_i| = weights + biases) */
  adj_padding_mode padding_mode;         /* conv / pool: what p pads with (pad_layer.h) */
} adj_plan_layer;

typedef struct adj_plan_network {
  char name[64];
  int n;                   /* layers, conv / pool / fc in order */
  adj_plan_layer *layers;
} adj_plan_network;

/* The planner reads networks through description.h (the .net format of
 * docs/network-format.md, one parser in the tree): its conv, pool and fc
 * layers, in order, with the shapes the description infers; activations,
 * flattens, batch norm, upsampling, padding, phantom layers and losses carry
 * no communication the models price and are left out.  A window's kernel,
 * stride and padding are those of its first spatial dimension (the one the
 * grid splits), its kernel dilated; 3-d windows are refused.  `source`
 * names the text in error messages. */
int adj_plan_network_from_description(const adj_description *description, adj_plan_network **network);
int adj_plan_network_parse(const char *text, const char *source, adj_plan_network **network);
int adj_plan_network_read(const char *path, adj_plan_network **network);
void adj_plan_network_destroy(adj_plan_network **network);
/* Total parameters (weights and biases). */
int64_t adj_plan_network_parameters(const adj_plan_network *network);

/* ---- costs ---------------------------------------------------------------------------- */

typedef enum adj_plan_mode { ADJ_PLAN_PAPER_EQ4 = 0, ADJ_PLAN_PAPER = 1, ADJ_PLAN_ADJOIN = 2 } adj_plan_mode;

/* Where the grid's P_r goes in conv layers. */
typedef enum adj_plan_conv_layout {
  ADJ_PLAN_CONV_SAME = 0,   /* the fc layers' grid, P_r splitting the model (001 eq. 8, Fig. 6) */
  ADJ_PLAN_CONV_BATCH = 1,  /* conv layers pure batch, 1 x P (001 Fig. 7) */
  ADJ_PLAN_CONV_DOMAIN = 2, /* the fc layers' grid, P_r splitting the model or the domain,
                             * whichever costs less per layer (001 eq. 9) */
} adj_plan_conv_layout;

typedef struct adj_plan_config {
  adj_plan_mode mode;
  adj_plan_conv_layout conv;
  int p;                   /* workers */
  int64_t batch;           /* global batch B */
  double alpha;            /* seconds per message, > 0 */
  double beta;             /* seconds per byte, > 0 */
  int word_bytes;          /* 0 means 4 */
  /* Constants of the collectives (all-gather, reduce-scatter, broadcast,
   * sum-reduce, all-reduce) when they differ from the point-to-point ones,
   * e.g. an all-reduce sweep's fit (adj_plan_calibrate_allreduce); both 0
   * means alpha and beta.  Halo exchanges always use alpha and beta. */
  double collective_alpha; /* seconds per latency term, >= 0 */
  double collective_beta;  /* seconds per byte, >= 0 */
} adj_plan_config;

/* The collectives a step is split into. */
enum {
  ADJ_PLAN_FWD_GATHER = 0, /* activations: forward all-gather over P_r */
  ADJ_PLAN_BWD_DX = 1,     /* activation gradients over P_r: all-reduce (paper) or reduce-scatter */
  ADJ_PLAN_WEIGHTS = 2,    /* weight gradients over P_c (or P): all-reduce, or broadcast + sum-reduce */
  ADJ_PLAN_HALO = 3,       /* domain halo exchanges, forward and backward */
  ADJ_PLAN_COLLECTIVES = 4
};
/* The short name of collective class k ("fwd-gather", "bwd-dx", "weights",
 * "halo"), or "invalid". */
const char *adj_plan_collective_name(int k);

typedef struct adj_plan_layer_cost {
  int p_r, p_c;                                /* the grid this layer runs on */
  bool domain;                                 /* P_r splits the domain (eq. 9 L_D) */
  double time[ADJ_PLAN_COLLECTIVES];           /* seconds */
  double words[ADJ_PLAN_COLLECTIVES];          /* per-worker volume, elements */
  double messages[ADJ_PLAN_COLLECTIVES];       /* latency terms (log2 q per collective) */
  double total;
} adj_plan_layer_cost;

typedef struct adj_plan_result {
  int p_r, p_c;
  int n;                                       /* = network layers */
  adj_plan_layer_cost *layers;                 /* (n), owned */
  double time[ADJ_PLAN_COLLECTIVES];
  double total;
} adj_plan_result;

/* Cost of one step on grid p_r x (P / p_r).  Fills *result (free with
 * adj_plan_result_free). */
int adj_plan_evaluate(const adj_plan_network *network, const adj_plan_config *config, int p_r, int p_c,
                      adj_plan_result *result);
void adj_plan_result_free(adj_plan_result *result);
/* The grid of least total time among all P_r dividing P (ties: smaller P_r)
 * that can split every layer; *best is filled. */
int adj_plan_best(const adj_plan_network *network, const adj_plan_config *config, adj_plan_result *best);
const char *adj_plan_mode_name(adj_plan_mode mode);
int adj_plan_mode_parse(const char *text, adj_plan_mode *mode);

/* ---- exact prediction of adjoin's counters ----------------------------------------------- */

/* What the operators of one 1.5D affine layer (affine15_layer.h) on this worker
 * count for one forward and one backward: input (N, f_in) on a p_c x p_r grid
 * with batch cuts `batch_cuts` (p_c + 1 offsets, or NULL for balanced), the
 * worker at row r, column c, word_bytes per element; `input_gradient` says
 * whether the backward asks for dx (the network's first layer does not). */
int adj_plan_affine15_counts(int64_t n, const int64_t *batch_cuts, int64_t f_in, int64_t f_out, bool bias, int p_r,
                             int p_c, int r, int c, int word_bytes, bool input_gradient,
                             adj_affine15_counters *predicted);

/* ---- calibration ----------------------------------------------------------------------- */

/* Measures alpha and beta between base ranks 0 and 1 of comm: a ping-pong of
 * 8 B ... 4 MiB messages (best of `repeats` round trips per size, one way =
 * half), fitted by least squares to t = alpha + beta m.  Collective on comm
 * (>= 2 ranks; the others wait); every rank gets the figures.  The wait
 * policy is adjoin's (wait.h), so an oversubscribed host measures what the
 * operators see. */
int adj_plan_calibrate(MPI_Comm comm, int repeats, double *alpha, double *beta);

/* Measures the collectives' alpha and beta on all q ranks of comm: an
 * all-reduce (MPI_Iallreduce, adjoin's wait policy) of 8 B ... 4 MiB, each
 * size's time the slowest rank's best of `repeats`, fitted by least squares
 * to the planner's model of an all-reduce, a reduce-scatter plus an
 * all-gather:  t = alpha 2 ceil(log2 q) + beta 2 (q - 1)/q m.  Collective on
 * comm (>= 2 ranks); every rank gets the figures. */
int adj_plan_calibrate_allreduce(MPI_Comm comm, int repeats, double *alpha, double *beta);

/* A machine's constants: the ping-pong fit, and the all-reduce fit on
 * collective_ranks workers when measured (all three 0 when not). */
typedef struct adj_plan_calibration {
  double alpha, beta;
  double collective_alpha, collective_beta;
  int collective_ranks;
} adj_plan_calibration;

/* Text file, one "key value" a line: alpha, beta, and optionally
 * allreduce_alpha, allreduce_beta, allreduce_ranks (all three or none).
 * load reads files written by either save or adj_plan_calibration_write;
 * a missing, repeated, malformed or non-positive value or an unknown key is
 * an error naming it (alpha and beta at most 1e30, allreduce_ranks an
 * integer 2 to 2^24).  save checks the path first (file.h) and reports a
 * write that fails. */
int adj_plan_calibration_save(const char *path, const adj_plan_calibration *calibration);
int adj_plan_calibration_load(const char *path, adj_plan_calibration *calibration);
/* The same format from text (`source` names it in messages); load reads a
 * regular file of at most 64 KiB (file.h) and parses it so. */
int adj_plan_calibration_parse(const char *text, const char *source, adj_plan_calibration *calibration);
/* Sets config's alpha and beta, and its collective constants when the
 * calibration has an all-reduce fit. */
void adj_plan_calibration_apply(const adj_plan_calibration *calibration, adj_plan_config *config);
/* The ping-pong constants alone: writes "alpha A\nbeta B\n" to path, and
 * reads alpha and beta of any calibration file. */
int adj_plan_calibration_write(const char *path, double alpha, double beta);
int adj_plan_calibration_read(const char *path, double *alpha, double *beta);

ADJ_END_DECLS

#endif
