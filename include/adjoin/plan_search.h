/* The per-layer planner: the placement of a described network (description.h)
 * on P ranks with the least predicted step time (step_model.h), under a
 * memory budget per rank, and the runners-up.
 *
 * The chain of layers is cut into segments, one per layer that takes a
 * placement of its own (convolutions, affine and phantom layers, and a first
 * layer of another kind); the layers between them follow the layout they
 * arrive in (placement.h's inheritance), and a flatten belongs to the affine
 * layer after it.  A segment's candidates are its layer's placements on any
 * number of ranks dividing the replica's ranks: every partition of
 * batch x channels x space (times the output channels of a convolution), every
 * 1.5D grid and DistDL P_b x P_fo x P_fi of an affine layer, every width of a
 * phantom layer, the sequential one among them; candidates the resolver
 * refuses are dropped.  A segment's time and memory depend only on its own
 * candidate and the one before it (which decides the repartition into it),
 * so dynamic programming over the chain finds the best plan exactly: for each
 * candidate it keeps the partial plans that fewer than `keep` others beat in
 * both time and memory, which holds the `keep` best complete plans within
 * the budget (a constrained shortest path, exact for chains).  Each replica
 * count R dividing P (when asked) is searched alike on P / R ranks with the
 * gradient reducer's buckets charged unhidden; the plans found are then
 * predicted whole (the reducer's overlap included) and ranked by that.
 *
 * Pure (no MPI) but for adj_plan_choose, which measures what the host's
 * tables lack on the ranks it is given. */
#ifndef ADJOIN_PLAN_SEARCH_H
#define ADJOIN_PLAN_SEARCH_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "adjoin/description.h"
#include "adjoin/placement.h"
#include "adjoin/step_model.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

/* Which placements a segment may take. */
typedef enum adj_plan_family {
  ADJ_PLAN_FAMILY_AUTO = 0,       /* ALL up to 64 ranks, INTEGRATED beyond */
  ADJ_PLAN_FAMILY_ALL = 1,        /* every partition, grid and DistDL grid */
  ADJ_PLAN_FAMILY_INTEGRATED = 2, /* papers 000/001's, on all the replica's ranks (or one):
                                   * window layers split the batch and one of (the first spatial
                                   * dimension, the output channels); affine layers on 1.5D grids or
                                   * P_b x P_fo */
} adj_plan_family;

typedef struct adj_plan_search_options {
  adj_step_options step;    /* dtype, optimizer, machine, times; batch and ranks: the job's */
  int64_t memory;           /* bytes per rank a plan may use (0: the machine's memory, else none) */
  int keep;                 /* plans to list: the best and the runners-up (0: 5) */
  bool replicas;            /* also search R replicas for every R dividing the ranks */
  bool exhaustive;          /* predict every combination instead (for checking the search) */
  adj_plan_family family;
} adj_plan_search_options;

typedef struct adj_plan {
  adj_placement *placement;       /* owned: an entry for every segment's layer */
  adj_step_prediction prediction; /* the whole step's */
  char summary[512];              /* "conv1 parts=2x1x1x1 | conv2 ... | replicas 2" */
} adj_plan;

typedef struct adj_plan_list {
  int n;                 /* plans, fastest first, all within the budget */
  adj_plan *plans;
  int segments;
  int64_t candidates;    /* summed over the segments */
  int64_t evaluated;     /* predictions made */
  int64_t over_budget;   /* plans (or partial plans) dropped by the memory budget */
} adj_plan_list;

/* Searches; an empty list (n = 0) when no plan fits the budget.  Candidates
 * whose compute the layer time table lacks are estimated and remembered in
 * step.times (adj_layer_times_missing). */
int adj_plan_search(const adj_description *description, const adj_plan_search_options *options,
                    adj_plan_list *list);
void adj_plan_list_free(adj_plan_list *list);

/* The plan as a placement file (placement.h's format) to out, with a comment
 * naming the prediction; adjoin-train --placement and adjoin-dottest
 * --placement read it. */
int adj_plan_write_placement(const adj_description *description, const adj_plan *plan, FILE *out);

/* The best plans for this run: the host's machine for comm's size
 * (adj_machine_host), the layer time table with every twin the search needs
 * measured on comm's ranks (adj_layer_times_measure), the search.  Every
 * rank gets the same list.  options->step.machine and .times are ignored;
 * the list's predictions refer to machine and times held by the call, so use
 * them before adj_plan_list_free.  Collective on comm. */
int adj_plan_choose(const adj_description *description, MPI_Comm comm, const adj_plan_search_options *options,
                    adj_plan_list *list);

/* The step model's prediction of one placement for this run, on the host's
 * own measurements as adj_plan_choose takes them: options->machine and
 * ->times are ignored, options->replicas 0 means the placement's (else the
 * description's, else 1).  Collective on comm. */
int adj_plan_predict(const adj_description *description, const adj_placement *placement, MPI_Comm comm,
                     const adj_step_options *options, adj_step_prediction *prediction);

ADJ_END_DECLS

#endif
