/* The per-layer planner (plan_search.h): segments, their candidates, the
 * dynamic programme over the chain, and the plans it returns. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/plan_search.h"
#include "error_impl.h"
#include "plan_impl.h"
#include "plan_search_impl.h"

/* ---- segments ----------------------------------------------------------------------------------- */

static bool search_placeable(const adj_description *d, int i) {
  adj_desc_kind k = d->layers[i].kind;
  if (k == ADJ_DESC_CONV || k == ADJ_DESC_AFFINE || k == ADJ_DESC_PHANTOM) return true;
  return i == 0 && k != ADJ_DESC_FLATTEN && k != ADJ_DESC_LOSS && k != ADJ_DESC_XENT;
}

/* Segments in order: each placeable layer, from the flatten before it (if
 * any) to the layer before the next segment. */
static int search_segments(search_state *s) {
  const adj_description *d = s->d;
  s->segments = calloc((size_t)d->n, sizeof *s->segments);
  ADJ_CHECK(s->segments, ADJ_ERR_MEM, "planner: out of memory");
  for (int i = 0; i < d->n; i++) {
    if (!search_placeable(d, i)) continue;
    search_segment *g = &s->segments[s->n++];
    g->layer = i;
    g->first = i > 0 && d->layers[i - 1].kind == ADJ_DESC_FLATTEN ? i - 1 : i;
  }
  ADJ_CHECK(s->n > 0, ADJ_ERR_ARG, "planner: network %s has no layer that takes a placement", d->name);
  s->segments[0].first = 0;
  for (int k = 0; k < s->n; k++) s->segments[k].last = k + 1 < s->n ? s->segments[k + 1].first - 1 : d->n - 1;
  return ADJ_SUCCESS;
}

int search_segment_of(const search_state *s, int layer) {
  for (int k = s->n - 1; k >= 0; k--)
    if (layer >= s->segments[k].first) return k;
  return 0;
}

/* ---- placements from choices -------------------------------------------------------------------- */

/* A placement giving segment k its candidate choice[k] (0, sequential, where
 * choice is NULL or for the segments outside [from, to]). */
int search_placement(const search_state *s, const int *choice, int from, int to, int replicas,
                     adj_placement **out) {
  adj_placement *p = calloc(1, sizeof *p);
  adj_placement_entry *e = calloc((size_t)s->n, sizeof *e);
  if (!p || !e) {
    free(p), free(e);
    return adj_error_set(ADJ_ERR_MEM, "planner: out of memory");
  }
  snprintf(p->name, sizeof p->name, "planned");
  snprintf(p->source, sizeof p->source, "the planner");
  p->replicas = replicas > 1 ? replicas : 0;
  p->whole = true;
  p->n = s->n, p->entries = e;
  for (int k = 0; k < s->n; k++) {
    const search_segment *g = &s->segments[k];
    int c = choice && k >= from && k <= to ? choice[k] : 0;
    snprintf(e[k].layer, sizeof e[k].layer, "%s", s->d->layers[g->layer].name);
    e[k].placement = g->candidates[c];
  }
  *out = p;
  return ADJ_SUCCESS;
}

/* ---- candidates --------------------------------------------------------------------------------- */

static int search_push(search_segment *g, const adj_layer_placement *pl) {
  ADJ_CALL(adj_plan_grow((void **)&g->candidates, g->count, &g->capacity, sizeof *g->candidates, 16,
                         "planner: candidates"));
  g->candidates[g->count++] = *pl;
  return ADJ_SUCCESS;
}

/* Calls back with every ordered factorisation of n into `slots` factors. */
static int search_factor(int n, int slots, int *f, int depth, int (*visit)(void *, const int *), void *ctx) {
  if (depth == slots - 1) {
    f[depth] = n;
    return visit(ctx, f);
  }
  for (int k = 1; k <= n; k++)
    if (n % k == 0) {
      f[depth] = k;
      ADJ_CALL(search_factor(n / k, slots, f, depth + 1, visit, ctx));
    }
  return ADJ_SUCCESS;
}

typedef struct search_visit {
  search_segment *g;
  const adj_description *d;
  adj_plan_family family;
  int ndim; /* of the layer's input, batch first */
} search_visit;

/* A window layer's parts (and a convolution's out_parts, the last factor). */
static int search_visit_window(void *ctx, const int *f) {
  search_visit *v = ctx;
  bool conv = v->d->layers[v->g->layer].kind == ADJ_DESC_CONV;
  adj_layer_placement pl = {.kind = ADJ_PLACE_PARTS, .ndim = v->ndim, .out_parts = conv ? f[v->ndim] : 1};
  int split = 0;
  for (int k = 0; k < v->ndim; k++) pl.parts[k] = f[k], split += k > 0 && f[k] > 1;
  /* The integrated family: batch x (rows, or output channels). */
  if (v->family == ADJ_PLAN_FAMILY_INTEGRATED &&
      (pl.parts[1] > 1 || split > 1 || (split == 1 && pl.parts[2] == 1) || (split && pl.out_parts > 1)))
    return ADJ_SUCCESS;
  return search_push(v->g, &pl);
}

/* An affine layer on P_b x P_fo x P_fi. */
static int search_visit_affine(void *ctx, const int *f) {
  search_visit *v = ctx;
  if (v->family == ADJ_PLAN_FAMILY_INTEGRATED && f[2] > 1) return ADJ_SUCCESS;
  adj_layer_placement pl = {.kind = ADJ_PLACE_PARTS, .ndim = 2, .parts = {f[0], f[2]}, .out_parts = f[1]};
  return search_push(v->g, &pl);
}

static int search_visit_grid(void *ctx, const int *f) {
  adj_layer_placement pl = {.kind = ADJ_PLACE_GRID, .grid = {f[0], f[1]}};
  return search_push(((search_visit *)ctx)->g, &pl);
}

/* Every placement of the segment's layer on `workers` ranks. */
static int search_candidates_on(search_state *s, search_segment *g, int workers) {
  const adj_desc_layer *l = &s->d->layers[g->layer];
  search_visit v = {.g = g, .d = s->d, .family = s->family, .ndim = l->in_rank + 1};
  int f[ADJ_DESC_MAX_DIMS + 2];
  if (l->kind == ADJ_DESC_AFFINE) {
    ADJ_CALL(search_factor(workers, 2, f, 0, search_visit_grid, &v));
    return search_factor(workers, 3, f, 0, search_visit_affine, &v);
  }
  if (l->kind == ADJ_DESC_PHANTOM) {
    adj_layer_placement pl = {.kind = ADJ_PLACE_PARTS, .ndim = 2, .parts = {1, workers}, .out_parts = 1};
    return search_push(g, &pl);
  }
  return search_factor(workers, v.ndim + (l->kind == ADJ_DESC_CONV), f, 0, search_visit_window, &v);
}

/* Drops the candidates the resolver refuses (with every other segment
 * sequential), keeping the sequential one first. */
static int search_validate(search_state *s, int k) {
  search_segment *g = &s->segments[k];
  int *choice = calloc((size_t)s->n, sizeof *choice), kept = 0;
  ADJ_CHECK(choice, ADJ_ERR_MEM, "planner: out of memory");
  int status = ADJ_SUCCESS;
  for (int c = 0; c < g->count && !status; c++) {
    choice[k] = c;
    adj_placement *p = NULL;
    adj_network_layout layout;
    status = search_placement(s, choice, k, k, 1, &p);
    if (!status && adj_placement_resolve(s->d, p, s->batch, &layout) == ADJ_SUCCESS) {
      g->candidates[kept++] = g->candidates[c];
      adj_network_layout_free(&layout);
    } else if (!status) {
      adj_clear_error();
    }
    adj_placement_destroy(&p);
  }
  free(choice);
  g->count = kept;
  return status;
}

/* The sequential candidate of every segment first (the others' placement
 * while one segment's candidates are checked), then each segment's own. */
static int search_candidates(search_state *s) {
  s->choice = calloc((size_t)s->n, sizeof *s->choice);
  ADJ_CHECK(s->choice, ADJ_ERR_MEM, "planner: out of memory");
  for (int k = 0; k < s->n; k++) {
    const adj_desc_layer *l = &s->d->layers[s->segments[k].layer];
    adj_layer_placement sequential = {.kind = ADJ_PLACE_PARTS, .ndim = l->in_rank + 1, .out_parts = 1};
    for (int j = 0; j <= l->in_rank; j++) sequential.parts[j] = 1;
    ADJ_CALL(search_push(&s->segments[k], &sequential));
  }
  for (int k = 0; k < s->n; k++) {
    /* The integrated family uses all the ranks of a replica, or one. */
    for (int w = 2; w <= s->ranks; w++)
      if (s->ranks % w == 0 && (s->family != ADJ_PLAN_FAMILY_INTEGRATED || w == s->ranks))
        ADJ_CALL(search_candidates_on(s, &s->segments[k], w));
    ADJ_CALL(search_validate(s, k));
    s->list->candidates += s->segments[k].count;
  }
  return ADJ_SUCCESS;
}

int search_prepare(search_state *s) {
  ADJ_CALL(search_segments(s));
  return search_candidates(s);
}

/* ---- segment costs ------------------------------------------------------------------------------ */

/* The prediction of a placement (choices outside [from, to] sequential). */
int search_predict(search_state *s, const int *choice, int from, int to, adj_step_prediction *prediction,
                   adj_placement **placement) {
  adj_placement *p = NULL;
  adj_network_layout layout;
  ADJ_CALL(search_placement(s, choice, from, to, s->replicas, &p));
  int status = adj_placement_resolve(s->d, p, s->batch, &layout);
  if (!status) {
    status = adj_step_model_predict(s->model, s->d, &layout, prediction);
    adj_network_layout_free(&layout);
    s->list->evaluated++;
  }
  if (!status && placement) *placement = p;
  else adj_placement_destroy(&p);
  return status;
}

/* Segment k's share of a prediction: its stages' forward and backward time,
 * its parameters' update and (with replicas) their unhidden reduction, and
 * its stages' memory. */
void search_share(const search_state *s, const adj_step_prediction *p, int k, double *time, double *memory) {
  *time = 0, *memory = 0;
  int64_t parameters = 0;
  for (int i = 0; i < p->n; i++) {
    const adj_step_stage *st = &p->stages[i];
    if (search_segment_of(s, st->layer) != k) continue;
    for (int phase = 0; phase < ADJ_STEP_OPTIMIZER; phase++) *time += st->compute[phase] + st->comm[phase];
    for (int m = 0; m < ADJ_STEP_MEMORY_KINDS; m++) *memory += (double)st->memory[m];
    parameters += st->parameters;
  }
  *time += s->update_per_parameter * (double)parameters;
  if (s->replicas > 1)
    *time += adj_machine_comm_time(&s->machine, ADJ_COMM_ALLREDUCE, s->replicas,
                                   (double)parameters * (double)adj_dtype_size(s->o->step.dtype), 0);
}

/* Segment k's time and memory after candidate a of segment k - 1 (a is
 * ignored for k = 0), predicted once and cached. */
static int search_cost(search_state *s, int k, int a, int b, double *time, double *memory) {
  search_segment *g = &s->segments[k];
  int prev = k ? s->segments[k - 1].count : 1;
  search_cost_entry *e = &g->costs[(size_t)b * (size_t)prev + (size_t)(k ? a : 0)];
  if (!e->known) {
    s->choice[k] = b;
    if (k) s->choice[k - 1] = a;
    adj_step_prediction p;
    ADJ_CALL(search_predict(s, s->choice, k ? k - 1 : 0, k, &p, NULL));
    search_share(s, &p, k, &e->time, &e->memory);
    adj_step_prediction_free(&p);
    e->known = true;
  }
  *time = e->time, *memory = e->memory;
  return ADJ_SUCCESS;
}

/* ---- the dynamic programme ------------------------------------------------------------------------ */

/* Adds a label to a candidate's list unless `keep` labels already beat it in
 * both time and memory; drops the labels it makes superfluous. */
static int search_offer(search_labels *list, const search_label *label, int keep) {
  int beaten = 0;
  for (int i = 0; i < list->n; i++)
    beaten += list->items[i].time <= label->time && list->items[i].memory <= label->memory;
  if (beaten >= keep) return ADJ_SUCCESS;
  ADJ_CALL(adj_plan_grow((void **)&list->items, list->n, &list->capacity, sizeof *list->items, 8,
                         "planner: partial plans"));
  list->items[list->n++] = *label;
  /* A label beaten by `keep` others in both, the new one included, can go. */
  for (int i = 0; i < list->n; i++) {
    int by = 0;
    for (int j = 0; j < list->n; j++)
      by += j != i && list->items[j].time <= list->items[i].time && list->items[j].memory <= list->items[i].memory &&
            (list->items[j].time < list->items[i].time || list->items[j].memory < list->items[i].memory || j < i);
    if (by >= keep) list->items[i--] = list->items[--list->n];
  }
  return ADJ_SUCCESS;
}

/* Segment k's labels from segment k - 1's. */
static int search_step(search_state *s, int k) {
  search_segment *g = &s->segments[k];
  const search_segment *before = k ? &s->segments[k - 1] : NULL;
  for (int b = 0; b < g->count; b++) {
    for (int a = 0; a < (before ? before->count : 1); a++) {
      int labels = before ? before->labels[a].n : 1;
      for (int j = 0; j < labels; j++) {
        double time = 0, memory = 0;
        ADJ_CALL(search_cost(s, k, a, b, &time, &memory));
        search_label l = {.time = time, .memory = memory, .from = a, .index = j};
        if (before) l.time += before->labels[a].items[j].time, l.memory += before->labels[a].items[j].memory;
        if (l.memory + s->fixed_memory > s->budget) {
          s->list->over_budget++;
          continue;
        }
        ADJ_CALL(search_offer(&g->labels[b], &l, s->keep));
      }
    }
  }
  return ADJ_SUCCESS;
}

/* The choices of a complete label of the last segment, followed back. */
static void search_trace(const search_state *s, int b, int j, int *choice) {
  for (int k = s->n - 1; k >= 0; k--) {
    const search_label *l = &s->segments[k].labels[b].items[j];
    choice[k] = b;
    b = l->from, j = l->index;
  }
}

int search_dynamic(search_state *s) {
  for (int k = 0; k < s->n; k++) {
    search_segment *g = &s->segments[k];
    size_t prev = k ? (size_t)s->segments[k - 1].count : 1;
    g->costs = calloc((size_t)g->count * prev, sizeof *g->costs);
    g->labels = calloc((size_t)g->count, sizeof *g->labels);
    ADJ_CHECK(g->costs && g->labels, ADJ_ERR_MEM, "planner: out of memory for segment %d", k);
    ADJ_CALL(search_step(s, k));
  }
  const search_segment *last = &s->segments[s->n - 1];
  for (int b = 0; b < last->count; b++)
    for (int j = 0; j < last->labels[b].n; j++) {
      search_trace(s, b, j, s->choice);
      ADJ_CALL(search_offer_plan(s, s->choice));
    }
  return ADJ_SUCCESS;
}
