/* The planner's plans (plan_search.h): each replica count searched, the plans
 * predicted whole and ranked, written as placement files, and chosen for a
 * run on the host's own measurements. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/plan_search.h"
#include "error_impl.h"
#include "plan_search_impl.h"

/* ---- the list ----------------------------------------------------------------------------------- */

static void search_summary(const search_state *s, const adj_placement *p, char *buf, size_t size) {
  size_t used = 0;
  buf[0] = '\0';
  for (int k = 0; k < p->n && used < size; k++) {
    char place[160];
    used += (size_t)snprintf(buf + used, size - used, "%s%s %s", k ? " | " : "", p->entries[k].layer,
                             adj_layer_placement_format(&p->entries[k].placement, place, sizeof place));
  }
  if (s->replicas > 1 && used < size) snprintf(buf + used, size - used, " | replicas %d", s->replicas);
}

static void plan_free(adj_plan *plan) {
  adj_placement_destroy(&plan->placement);
  adj_step_prediction_free(&plan->prediction);
}

/* Inserts a plan by its predicted step time, keeping the `keep` fastest. */
static void search_insert(search_state *s, adj_plan *plan) {
  adj_plan_list *list = s->list;
  int at = list->n;
  while (at > 0 && list->plans[at - 1].prediction.step > plan->prediction.step) at--;
  if (at >= s->keep) {
    plan_free(plan);
    return;
  }
  if (list->n == s->keep) plan_free(&list->plans[--list->n]);
  memmove(&list->plans[at + 1], &list->plans[at], sizeof *list->plans * (size_t)(list->n - at));
  list->plans[at] = *plan;
  list->n++;
}

int search_offer_plan(search_state *s, const int *choice) {
  adj_plan plan = {0};
  ADJ_CALL(search_predict(s, choice, 0, s->n - 1, &plan.prediction, &plan.placement));
  if ((double)plan.prediction.memory_total > s->budget) {
    s->list->over_budget++;
    plan_free(&plan);
    return ADJ_SUCCESS;
  }
  search_summary(s, plan.placement, plan.summary, sizeof plan.summary);
  search_insert(s, &plan);
  return ADJ_SUCCESS;
}

/* ---- one replica count ---------------------------------------------------------------------------- */

/* Every combination of candidates, predicted whole. */
static int search_exhaustive(search_state *s) {
  double combinations = 1;
  for (int k = 0; k < s->n; k++) combinations *= s->segments[k].count;
  ADJ_CHECK(combinations <= 1e6, ADJ_ERR_ARG, "planner: %.0f combinations are too many to predict each", combinations);
  int *choice = s->choice;
  memset(choice, 0, sizeof *choice * (size_t)s->n);
  for (;;) {
    ADJ_CALL(search_offer_plan(s, choice));
    int k = s->n - 1;
    while (k >= 0 && ++choice[k] == s->segments[k].count) choice[k--] = 0;
    if (k < 0) return ADJ_SUCCESS;
  }
}

/* What every plan of this replica count shares: the memory besides its
 * stages, and the optimizer's cost per parameter. */
static int search_constants(search_state *s) {
  adj_step_prediction p;
  ADJ_CALL(search_predict(s, NULL, 0, 0, &p, NULL));
  double stages = 0;
  for (int i = 0; i < p.n; i++)
    for (int m = 0; m < ADJ_STEP_MEMORY_KINDS; m++) stages += (double)p.stages[i].memory[m];
  s->fixed_memory = (double)p.memory_total - stages;
  adj_step_prediction_free(&p);
  const adj_step_options *o = &s->o->step;
  int threads = adj_machine_threads(&s->machine, o->ranks);
  double none, million;
  ADJ_CALL(adj_layer_times_optimizer(o->times, &s->machine, o->optimizer, o->dtype, threads, 0, &none, NULL));
  ADJ_CALL(adj_layer_times_optimizer(o->times, &s->machine, o->optimizer, o->dtype, threads, 1000000, &million, NULL));
  s->update_per_parameter = (million - none) / 1e6;
  return ADJ_SUCCESS;
}

static void search_state_free(search_state *s) {
  for (int k = 0; s->segments && k < s->n; k++) {
    search_segment *g = &s->segments[k];
    for (int b = 0; g->labels && b < g->count; b++) free(g->labels[b].items);
    free(g->labels), free(g->costs), free(g->candidates);
  }
  free(s->segments), free(s->choice);
  adj_step_model_destroy(&s->model);
}

static int search_replicas(const adj_description *d, const adj_plan_search_options *o, int replicas,
                           adj_plan_list *list) {
  adj_step_options step = o->step;
  step.replicas = replicas;
  search_state s = {.d = d, .o = o, .list = list, .machine = *o->step.machine, .replicas = replicas,
                    .ranks = o->step.ranks / replicas, .batch = (o->step.batch + replicas - 1) / replicas,
                    .keep = o->keep > 0 ? o->keep : 5, .budget = INFINITY};
  s.family = o->family != ADJ_PLAN_FAMILY_AUTO ? o->family
             : s.ranks <= 64                  ? ADJ_PLAN_FAMILY_ALL
                                              : ADJ_PLAN_FAMILY_INTEGRATED;
  int64_t budget = o->memory ? o->memory : o->step.machine->memory;
  if (budget > 0) s.budget = (double)budget;
  int status = adj_step_model_create(&step, &s.model);
  if (!status) status = search_prepare(&s);
  if (!status) status = search_constants(&s);
  list->segments = s.n;
  if (!status) status = o->exhaustive ? search_exhaustive(&s) : search_dynamic(&s);
  search_state_free(&s);
  return status;
}

/* ---- public ------------------------------------------------------------------------------------ */

int adj_plan_search(const adj_description *d, const adj_plan_search_options *o, adj_plan_list *list) {
  ADJ_CHECK(list, ADJ_ERR_ARG, "planner: output list is NULL");
  *list = (adj_plan_list){0};
  ADJ_CHECK(d && o && o->step.machine, ADJ_ERR_ARG, "planner: description, options and machine are required");
  ADJ_CHECK(o->step.ranks >= 1 && o->step.ranks <= ADJ_PLACE_MAX_PARTS, ADJ_ERR_ARG,
            "planner: %d ranks (1 to %d)", o->step.ranks, ADJ_PLACE_MAX_PARTS);
  ADJ_CHECK(o->step.batch >= 1, ADJ_ERR_ARG, "planner: batch %lld must be >= 1", (long long)o->step.batch);
  ADJ_CHECK(o->memory >= 0 && o->keep >= 0, ADJ_ERR_ARG, "planner: memory %lld and keep %d must be >= 0",
            (long long)o->memory, o->keep);
  int keep = o->keep > 0 ? o->keep : 5;
  list->plans = calloc((size_t)keep, sizeof *list->plans);
  ADJ_CHECK(list->plans, ADJ_ERR_MEM, "planner: out of memory");
  int status = ADJ_SUCCESS;
  for (int r = 1; r <= o->step.ranks && !status; r++) {
    if (o->step.ranks % r || (r > 1 && !o->replicas) || r > o->step.batch) continue;
    status = search_replicas(d, o, r, list);
  }
  if (status) adj_plan_list_free(list);
  return status;
}

void adj_plan_list_free(adj_plan_list *list) {
  if (!list) return;
  for (int i = 0; i < list->n; i++) plan_free(&list->plans[i]);
  free(list->plans);
  *list = (adj_plan_list){0};
}

int adj_plan_write_placement(const adj_description *d, const adj_plan *plan, FILE *out) {
  ADJ_CHECK(d && plan && plan->placement && out, ADJ_ERR_ARG, "planner: description, plan or stream is NULL");
  const adj_step_prediction *p = &plan->prediction;
  int bad = fprintf(out,
                    "# Planned for network %s: a batch of %lld on %d replica(s); predicted step %.6e s "
                    "(forward %.3e, backward %.3e, optimizer %.3e), rank 0 memory %.1f MiB.\n"
                    "placement planned\n",
                    d->name, (long long)(p->replica_batch * p->replicas), p->replicas, p->step,
                    p->phase[ADJ_STEP_FORWARD], p->phase[ADJ_STEP_BACKWARD], p->phase[ADJ_STEP_OPTIMIZER],
                    (double)p->memory_total / (1 << 20)) < 0;
  if (p->replicas > 1) bad |= fprintf(out, "replicas %d\n", p->replicas) < 0;
  for (int k = 0; k < plan->placement->n; k++) {
    char place[160];
    const adj_placement_entry *e = &plan->placement->entries[k];
    bad |= fprintf(out, "%s %s\n", e->layer, adj_layer_placement_format(&e->placement, place, sizeof place)) < 0;
  }
  ADJ_CHECK(!bad, ADJ_ERR_IO, "planner: writing the placement failed");
  return ADJ_SUCCESS;
}

/* The host's machine and layer time table, and whether the table must be
 * measured further. */
static int plan_host(MPI_Comm comm, adj_machine *machine, adj_layer_times **times) {
  ADJ_CALL(adj_machine_host(comm, machine));
  ADJ_CALL(adj_layer_times_create(times));
  return adj_layer_times_load(comm, *times);
}

static int plan_predict_once(const adj_description *d, const adj_network_layout *layout, const adj_step_options *o,
                             adj_step_prediction *prediction) {
  adj_step_model *model = NULL;
  ADJ_CALL(adj_step_model_create(o, &model));
  int status = adj_step_model_predict(model, d, layout, prediction);
  adj_step_model_destroy(&model);
  return status;
}

int adj_plan_predict(const adj_description *d, const adj_placement *placement, MPI_Comm comm,
                     const adj_step_options *options, adj_step_prediction *prediction) {
  ADJ_CHECK(d && options && prediction, ADJ_ERR_ARG, "planner: description, options or prediction is NULL");
  *prediction = (adj_step_prediction){0};
  adj_step_options o = *options;
  if (!o.replicas) o.replicas = placement && placement->replicas ? placement->replicas : d->replicas ? d->replicas : 1;
  ADJ_CHECK(o.replicas >= 1 && o.batch >= o.replicas, ADJ_ERR_ARG, "planner: a batch of %lld for %d replicas",
            (long long)o.batch, o.replicas);
  adj_network_layout layout;
  ADJ_CALL(adj_placement_resolve(d, placement, (o.batch + o.replicas - 1) / o.replicas, &layout));
  adj_machine machine;
  adj_layer_times *times = NULL;
  int status = plan_host(comm, &machine, &times);
  o.machine = &machine, o.times = times;
  if (!status) status = plan_predict_once(d, &layout, &o, prediction);
  if (!status && adj_layer_times_missing(times)) {
    adj_step_prediction_free(prediction);
    status = adj_layer_times_measure(times, comm, 0, 0, true);
    if (!status) status = plan_predict_once(d, &layout, &o, prediction);
  }
  adj_layer_times_destroy(&times);
  adj_network_layout_free(&layout);
  return status;
}

int adj_plan_choose(const adj_description *d, MPI_Comm comm, const adj_plan_search_options *options,
                    adj_plan_list *list) {
  ADJ_CHECK(list && options, ADJ_ERR_ARG, "planner: options or list is NULL");
  *list = (adj_plan_list){0};
  adj_machine machine;
  adj_layer_times *times = NULL;
  int status = plan_host(comm, &machine, &times);
  adj_plan_search_options o = *options;
  o.step.machine = &machine, o.step.times = times;
  if (!status) status = adj_plan_search(d, &o, list);
  if (!status && adj_layer_times_missing(times)) {
    adj_plan_list_free(list);
    status = adj_layer_times_measure(times, comm, 0, 0, true);
    if (!status) status = adj_plan_search(d, &o, list);
  }
  adj_layer_times_destroy(&times);
  return status;
}
