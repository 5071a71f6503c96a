/* Timing one layer as a trainer runs it: its forward alone, and its forward
 * followed by its backward, on inputs and output gradients of the layer's own
 * local shapes.
 *
 * This is the one measurement of a layer's compute that adjoin makes: the
 * per-layer benchmark (bench-layers, which prints it beside PyTorch's op at
 * the same shape) and the planner's compute calibration both call
 * adj_layer_time, so a figure in one is a figure in the other.
 *
 * How it measures.  The input x and the output gradient dy are filled with
 * fixed pseudo-random values in [-1, 1) (or x is the caller's), and one
 * forward + backward warms the layer up (first-touch pages, lazily built
 * plans).  The number of calls per timed round is then chosen from that
 * warm-up so a round lasts about `round_seconds` (the slowest rank's count,
 * so every rank makes the same calls), and `rounds` rounds of forwards, then
 * `rounds` rounds of forward + backward pairs, are timed.  A round's time is
 * the slowest rank's; the timing reports the median round (what a steady
 * trainer sees on a shared machine) and the fastest (the machine's best).
 * Parameter gradients are zeroed before each round, outside the timed
 * region, and accumulate within it as in training.
 *
 * The layer runs exactly as it would in a network: its own thread team, its
 * own collectives on its own communicator.  Loss layers need their labels or
 * targets set before (adj_xent_layer_set_labels, adj_loss_layer_set_target).
 *
 * Collective over the layer's communicator (adj_layer_comm): every rank of it
 * calls with the same configuration. */
#ifndef ADJOIN_LAYER_TIMING_H
#define ADJOIN_LAYER_TIMING_H

#include <stdbool.h>
#include <stdint.h>

#include "adjoin/layer.h"
#include "adjoin/tensor.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

/* What a round's time is: the wall clock (the default, what training takes),
 * or the CPU time of the whole process, every thread's added up, which a
 * loaded machine disturbs far less than the wall clock; it compares
 * single-threaded runs well and counts a spinning thread's time as work. */
typedef enum adj_timing_clock { ADJ_TIMING_WALL = 0, ADJ_TIMING_CPU = 1 } adj_timing_clock;

typedef struct adj_layer_timing_config {
  double round_seconds;    /* about this long per timed round; 0 means 0.05 */
  int rounds;              /* timed rounds of each kind; 0 means 5 */
  int max_calls;           /* at most this many calls per round; 0 means 100000 */
  bool no_input_gradient;  /* backward with dx NULL, as a network's first layer runs it */
  uint64_t seed;           /* the pseudo-random x and dy; 0 means 1 */
  const adj_tensor *input; /* x to use instead of random values (this worker's block), or NULL */
  adj_timing_clock clock;  /* ADJ_TIMING_WALL (0) or ADJ_TIMING_CPU */
} adj_layer_timing_config;

typedef struct adj_layer_timing {
  double forward;               /* seconds per forward, median round */
  double forward_backward;      /* seconds per forward + backward, median round */
  double forward_best;          /* seconds per forward, fastest round */
  double forward_backward_best; /* seconds per forward + backward, fastest round */
  int calls;                    /* calls per round (the same for both kinds) */
  int rounds;                   /* rounds of each kind */
} adj_layer_timing;

/* Times `layer` (see the top of this header) and fills *timing.  A NULL
 * config takes every default.  Fails with ADJ_ERR_ARG for a NULL layer or
 * timing, a negative round_seconds, rounds or max_calls, an unknown clock, or an input whose
 * shape is not the layer's local input shape; with the layer's own status
 * when a forward or backward fails.  Collective over adj_layer_comm(layer):
 * the failure is the same on every rank. */
int adj_layer_time(adj_layer *layer, const adj_layer_timing_config *config, adj_layer_timing *timing);

ADJ_END_DECLS

#endif
