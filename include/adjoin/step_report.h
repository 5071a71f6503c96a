/* A run beside its prediction: the measured time of each stage of a built
 * network (adj_network_set_timing, network.h) and of whole steps, against
 * the step model's prediction for the same description and placement
 * (step_model.h), printed stage by stage and phase by phase with their
 * ratios.  adjoin-train --placement auto and bench-plan-step print through
 * it, so both show the same table.
 *
 * The measurement is this rank's: rank 0 holds the largest blocks, the
 * critical path the model predicts.  A stage's time includes what it waited
 * for other ranks inside its collectives.  The model's stages and the
 * network's are matched by position when their counts agree (the model
 * walks the placement as the builder does); otherwise only the totals are
 * set side by side, with a note. */
#ifndef ADJOIN_STEP_REPORT_H
#define ADJOIN_STEP_REPORT_H

#include <stdint.h>
#include <stdio.h>

#include "adjoin/layer.h"
#include "adjoin/step_model.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef struct adj_step_measurement {
  int n;                /* stages */
  double *forward;      /* (n) seconds per step, this rank */
  double *backward;     /* (n) */
  double step;          /* seconds per step, wall time */
  int64_t steps;        /* steps measured */
  int64_t peak_rss;     /* bytes, this rank's peak resident memory (0: unknown) */
} adj_step_measurement;

/* Takes the network's stage totals (adj_network_stage_seconds) over `steps`
 * steps that lasted `seconds` in all, as per-step figures.  ADJ_ERR_ARG if
 * `network` is not a network or steps < 1. */
int adj_step_measurement_take(const adj_layer *network, int64_t steps, double seconds, adj_step_measurement *m);
/* Adds `steps` more steps that lasted `seconds` (the network's stage totals
 * since its timing was last turned on) to m's per-step means; m starts
 * zeroed. */
int adj_step_measurement_add(adj_step_measurement *m, const adj_layer *network, int64_t steps, double seconds);
/* Keeps, stage by stage and for the step, the smaller of m and other (the
 * best of several rounds of steps). */
void adj_step_measurement_keep_best(adj_step_measurement *m, const adj_step_measurement *other);
void adj_step_measurement_free(adj_step_measurement *m);

/* The measured time of a phase: the stages' forward or backward sums, and
 * for the optimizer the rest of the step (update, reducer wait, agreements,
 * and whatever the caller's step does besides). */
double adj_step_measured_phase(const adj_step_measurement *m, adj_step_phase phase);

/* The table: one line per stage (predicted and measured forward and
 * backward seconds, measured / predicted), then per phase and for the step,
 * then rank 0's predicted memory beside the measured peak. */
void adj_step_report_print(const adj_step_prediction *prediction, const adj_step_measurement *measured,
                           const adj_layer *network, FILE *out);

ADJ_END_DECLS

#endif
