/* Private to plan/: the planner's state, shared by the dynamic programme
 * (plan_search.c) and the plans it returns (plan_choose.c). */
#ifndef ADJOIN_PLAN_PLAN_SEARCH_IMPL_H
#define ADJOIN_PLAN_PLAN_SEARCH_IMPL_H

#include "adjoin/plan_search.h"

/* A partial plan ending at some candidate: its time and memory, and the
 * candidate and label of the segment before. */
typedef struct search_label {
  double time, memory;
  int from, index;
} search_label;

typedef struct search_labels {
  int n, capacity;
  search_label *items;
} search_labels;

typedef struct search_cost_entry {
  bool known;
  double time, memory;
} search_cost_entry;

typedef struct search_segment {
  int layer;                       /* the layer that takes the placement */
  int first, last;                 /* the layers of the segment */
  int count, capacity;
  adj_layer_placement *candidates; /* [0] is sequential */
  search_cost_entry *costs;        /* (count x candidates of the segment before) */
  search_labels *labels;           /* (count) */
} search_segment;

typedef struct search_state {
  const adj_description *d;
  const adj_plan_search_options *o;
  adj_plan_list *list;
  adj_step_model *model;           /* for this replica count */
  adj_machine machine;
  adj_plan_family family;
  int ranks;                       /* of one replica */
  int replicas;
  int64_t batch;                   /* of one replica */
  int keep;
  double budget;                   /* bytes per rank */
  double fixed_memory;             /* what every plan holds besides its stages: baseline, input */
  double update_per_parameter;     /* the optimizer's seconds per parameter */
  int n;
  search_segment *segments;
  int *choice;                     /* (n) scratch */
} search_state;

/* The segments and their validated candidates. */
int search_prepare(search_state *s);
int search_segment_of(const search_state *s, int layer);
int search_placement(const search_state *s, const int *choice, int from, int to, int replicas, adj_placement **out);
int search_predict(search_state *s, const int *choice, int from, int to, adj_step_prediction *prediction,
                   adj_placement **placement);
void search_share(const search_state *s, const adj_step_prediction *p, int k, double *time, double *memory);
int search_dynamic(search_state *s);

/* Predicts the complete plan of `choice` whole and offers it to the list
 * (kept when within the budget and among the `keep` fastest). */
int search_offer_plan(search_state *s, const int *choice);

#endif
