/* bench-plan-step: one placement of a described network, predicted by the
 * step model (step_model.h) and then run, stage by stage.
 *
 *   mpiexec -n P bench-plan-step [--batch B] [--steps S] [--rounds R]
 *       [--dtype float32|float64] [--memory BYTES] NETWORK_FILE [PLACEMENT]
 *
 * PLACEMENT is a placement file or name (placement.h's adj_placement_find:
 * a file, networks/NET/NAME.place, "sequential", "RxC", "window=...,fc=..."),
 * or "auto": the planner's first choice for these ranks (adj_plan_choose,
 * within --memory per rank when given); default: the description's own.
 *
 * The prediction comes first, from this host's measured machine and layer
 * time table (measuring what they lack, on these ranks).  Then the network is
 * built, its replicas' gradients summed by the bucketed reducer as
 * adjoin-train sums them, and trained on synthetic data with Adam: two
 * warm-up steps, then R rounds of S steps each timed stage by stage
 * (adj_network_set_timing); each stage's and the step's figure is its best
 * round's mean, as the layer times are their best round's.  The process's
 * peak resident memory is taken after the planning and the prediction (which
 * touch and free their own memory), from a reset of the kernel's high-water
 * mark where the system allows it.  Rank 0 prints the table of
 * adj_step_report_print and a last line
 *
 *   summary network=N ranks=P predicted_s=... measured_s=... time_ratio=...
 *           predicted_mib=... peak_mib=... memory_ratio=... placement=...
 *
 * which tools/bench-plan-table.sh collects. */
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/adjoin.h"
#include "bench_host.h"

static const char usage[] =
    "usage: mpiexec -n P bench-plan-step [--batch B] [--steps S] [--rounds R] [--dtype float32|float64]\n"
    "                                   [--memory BYTES] NETWORK_FILE [PLACEMENT|auto]";

typedef struct bench_args {
  long long batch, steps, rounds;
  const char *dtype, *memory, *net, *placement;
} bench_args;

/* ---- planning and prediction ------------------------------------------------------------------ */

typedef struct bench_plan {
  adj_description *d;
  adj_placement *placement;
  adj_step_prediction prediction;
  adj_network_layout layout;
  char name[512];
} bench_plan;

static adj_step_options bench_step_options(const bench_args *a, int ranks) {
  return (adj_step_options){.dtype = strcmp(a->dtype, "float64") ? ADJ_FLOAT32 : ADJ_FLOAT64, .batch = a->batch,
                            .ranks = ranks, .optimizer = ADJ_OPTIMIZER_ADAM};
}

/* The planner's first choice: its placement and prediction. */
static int bench_auto(const bench_args *a, int ranks, bench_plan *p) {
  adj_plan_search_options o = {.step = bench_step_options(a, ranks), .replicas = true, .keep = 1};
  if (a->memory && adj_parse_bytes(a->memory, 1, INT64_MAX, "--memory", &o.memory)) return 1;
  adj_plan_list list;
  if (adj_plan_choose(p->d, MPI_COMM_WORLD, &o, &list)) return 1;
  if (!list.n) {
    adj_plan_list_free(&list);
    fprintf(stderr, "bench-plan-step: no plan of %s fits %s per rank\n", p->d->name, a->memory ? a->memory : "-");
    return 1;
  }
  p->placement = list.plans[0].placement, list.plans[0].placement = NULL;
  p->prediction = list.plans[0].prediction, list.plans[0].prediction = (adj_step_prediction){0};
  snprintf(p->name, sizeof p->name, "%s", list.plans[0].summary);
  adj_plan_list_free(&list);
  return 0;
}

/* "conv1 parts=2x1x1x1 | fc1 grid=1x2 | replicas 2", as the planner names
 * its plans; "own" for a placement that names no layer. */
static void bench_placement_name(const adj_placement *p, char *buf, size_t size) {
  size_t used = (size_t)snprintf(buf, size, "%s", p->n ? "" : "own");
  for (int k = 0; k < p->n && used < size; k++) {
    char place[160];
    used += (size_t)snprintf(buf + used, size - used, "%s%s %s", k ? " | " : "", p->entries[k].layer,
                             adj_layer_placement_format(&p->entries[k].placement, place, sizeof place));
  }
  if (p->replicas > 1 && used < size) snprintf(buf + used, size - used, " | replicas %d", p->replicas);
}

static int bench_plan_make(const bench_args *a, int ranks, bench_plan *p) {
  if (adj_description_read_all(MPI_COMM_WORLD, a->net, &p->d)) return 1;
  bool planned = a->placement && !strcmp(a->placement, "auto");
  if (planned && bench_auto(a, ranks, p)) return 1;
  if (!planned) {
    if (adj_placement_find(MPI_COMM_WORLD, p->d, a->net, a->placement, &p->placement)) return 1;
    bench_placement_name(p->placement, p->name, sizeof p->name);
  }
  int replicas = p->placement->replicas ? p->placement->replicas : p->d->replicas ? p->d->replicas : 1;
  if (ranks % replicas) {
    fprintf(stderr, "bench-plan-step: %d ranks do not divide into %d replicas\n", ranks, replicas);
    return 1;
  }
  if (adj_placement_resolve(p->d, p->placement, (a->batch + replicas - 1) / replicas, &p->layout)) return 1;
  p->layout.replicas = replicas;
  adj_step_options o = bench_step_options(a, ranks);
  o.replicas = replicas;
  return planned ? 0 : adj_plan_predict(p->d, p->placement, MPI_COMM_WORLD, &o, &p->prediction);
}

/* ---- the run --------------------------------------------------------------------------------- */

typedef struct bench_run {
  adj_replicas *replicas;
  adj_layer *net, *loss;
  adj_optimizer *optimizer;
  adj_gradient_reducer *reducer;
  adj_tensor x, y, dy;
} bench_run;

static int bench_hook(void *ctx, int index, adj_backward_event event) {
  bench_run *r = ctx;
  return event == ADJ_BACKWARD_END ? adj_replicas_reducer_stage_done(r->net, r->reducer, index) : ADJ_SUCCESS;
}

static int bench_reducer(bench_run *r) {
  return adj_replicas_reducer_create(r->replicas, r->net, NULL, NULL, NULL, &r->reducer) ||
         adj_network_set_backward_hook(r->net, bench_hook, r);
}

/* Synthetic inputs, the loss's labels (class 0) or targets (0.5), and the
 * output gradient 1 on the loss's rank. */
static int bench_data(bench_run *r, int64_t batch) {
  if (adj_layer_create_input(r->net, &r->x) || adj_layer_create_output(r->net, &r->y) ||
      adj_layer_create_output(r->net, &r->dy))
    return 1;
  for (int64_t i = 0; i < adj_tensor_volume(&r->x); i++) adj_tensor_set(&r->x, i, (double)(i % 97) / 97.0 - 0.5);
  for (int64_t i = 0; i < adj_tensor_volume(&r->dy); i++) adj_tensor_set(&r->dy, i, 1.0);
  r->loss = adj_network_build_loss(r->net);
  if (!r->loss) return 0;
  int64_t *labels = calloc((size_t)batch + 1, sizeof *labels);
  int status = labels ? adj_xent_layer_set_labels(r->loss, labels, batch) : 1;
  if (status) { /* not a softmax cross-entropy: a target of 0.5 on every block */
    adj_clear_error();
    adj_tensor target;
    status = adj_layer_create_input(r->loss, &target);
    for (int64_t i = 0; !status && i < adj_tensor_volume(&target); i++) adj_tensor_set(&target, i, 0.5);
    if (!status) status = adj_loss_layer_set_target(r->loss, &target);
    if (!status) adj_tensor_destroy(&target);
  }
  free(labels);
  return status;
}

static int bench_build(const bench_plan *p, const bench_args *a, bench_run *r) {
  int replicas = p->layout.replicas;
  int64_t share = (a->batch + replicas - 1) / replicas;
  adj_network_build_options bo = {.dtype = bench_step_options(a, 1).dtype, .batch = share};
  adj_optimizer_config oc = {.kind = ADJ_OPTIMIZER_ADAM, .learning_rate = 1e-4};
  if (adj_replicas_create(MPI_COMM_WORLD, replicas, &r->replicas) ||
      adj_network_build(p->d, p->placement, adj_replicas_model_comm(r->replicas), &bo, &r->net) ||
      adj_network_init_uniform(r->net, 44) || adj_optimizer_create(r->net, &oc, &r->optimizer))
    return 1;
  if (replicas > 1 && bench_reducer(r)) return 1;
  return bench_data(r, share);
}

static int bench_step(bench_run *r) {
  adj_layer_zero_grad(r->net);
  if (adj_layer_forward(r->net, &r->x, &r->y) || adj_layer_backward(r->net, &r->dy, NULL)) return 1;
  if (r->reducer && adj_gradient_reducer_wait(r->reducer)) return 1;
  return adj_optimizer_step(r->optimizer);
}

/* Rounds of steps; each stage's and the step's best round. */
static int bench_measure(bench_run *r, const bench_args *a, adj_step_measurement *best) {
  for (int k = 0; k < 2; k++)
    if (bench_step(r)) return 1;
  *best = (adj_step_measurement){0};
  for (long long round = 0; round < a->rounds; round++) {
    if (adj_network_set_timing(r->net, true)) return 1;
    bench_barrier(MPI_COMM_WORLD);
    double start = MPI_Wtime();
    for (long long s = 0; s < a->steps; s++)
      if (bench_step(r)) return 1;
    double seconds = bench_max(MPI_COMM_WORLD, MPI_Wtime() - start);
    adj_step_measurement m;
    if (adj_step_measurement_take(r->net, a->steps, seconds, &m)) return 1;
    if (round == 0) *best = m;
    else adj_step_measurement_keep_best(best, &m), adj_step_measurement_free(&m);
  }
  return 0;
}

static void bench_run_free(bench_run *r) {
  if (r->net) adj_network_set_backward_hook(r->net, NULL, NULL);
  adj_gradient_reducer_destroy(&r->reducer);
  adj_optimizer_destroy(&r->optimizer);
  adj_layer_destroy(&r->net);
  adj_tensor_destroy(&r->x), adj_tensor_destroy(&r->y), adj_tensor_destroy(&r->dy);
  adj_replicas_destroy(&r->replicas);
}

/* ---- main ------------------------------------------------------------------------------------- */

static int bench_parse(int argc, char **argv, bool say, bench_args *a) {
  *a = (bench_args){.batch = 64, .steps = 5, .rounds = 5, .dtype = "float32"};
  const bench_option options[] = {{"--batch", BENCH_COUNT, 1, 1 << 24, &a->batch},
                                  {"--steps", BENCH_COUNT, 1, 1 << 20, &a->steps},
                                  {"--rounds", BENCH_COUNT, 1, 1000, &a->rounds},
                                  {"--dtype", BENCH_TEXT, 0, 0, &a->dtype},
                                  {"--memory", BENCH_TEXT, 0, 0, &a->memory}};
  const char *given[2] = {NULL, NULL};
  int n = 0, parsed = bench_parse_arguments("bench-plan-step", usage, argc, argv, options, 5, 2, given, &n, say);
  if (parsed != BENCH_RUN) return parsed;
  a->net = given[0], a->placement = given[1];
  bool dtype = !strcmp(a->dtype, "float32") || !strcmp(a->dtype, "float64");
  if (a->net && dtype) return BENCH_RUN;
  if (say)
    fprintf(stderr, "bench-plan-step: %s\n%s\n", a->net ? "--dtype must be float32 or float64" : "NETWORK_FILE is missing",
            usage);
  return 2;
}

/* Resets the kernel's high-water mark of this process's resident memory
 * (Linux: "5" to /proc/self/clear_refs); false where it cannot. */
static bool bench_reset_peak(void) {
  FILE *f = fopen("/proc/self/clear_refs", "w");
  if (!f) return false;
  bool done = fputs("5", f) >= 0;
  return fclose(f) == 0 && done;
}

/* Bytes the allocator has handed out and not taken back (glibc). */
static double bench_heap_bytes(void) {
  struct mallinfo2 m = mallinfo2();
  return (double)(m.uordblks + m.hblkhd);
}

static void bench_summary(const bench_plan *p, const adj_step_measurement *m, int ranks) {
  const adj_step_prediction *q = &p->prediction;
  printf("summary network=%s ranks=%d predicted_s=%.6e measured_s=%.6e time_ratio=%.3f predicted_mib=%.2f "
         "peak_mib=%.2f memory_ratio=%.3f placement=%s\n",
         p->d->name, ranks, q->step, m->step, m->step / q->step, (double)q->memory_total / (1 << 20),
         (double)m->peak_rss / (1 << 20), (double)m->peak_rss / (double)q->memory_total, p->name);
}

int main(int argc, char **argv) {
  int rank, ranks;
  if (adj_init(&argc, &argv, &rank, &ranks)) return 1;
  adj_train_share_cores(MPI_COMM_WORLD);
  bench_args a;
  int status = bench_parse(argc, argv, rank == 0, &a);
  if (status != BENCH_RUN) return adj_finalize(), status;
  bench_plan p = {0};
  bench_run r = {0};
  adj_step_measurement m = {0};
  status = bench_plan_make(&a, ranks, &p);
  malloc_trim(0);
  bool reset = !status && bench_reset_peak();
  double heap0 = bench_heap_bytes(), resident0 = (double)adj_resident_bytes();
  if (!status) status = bench_build(&p, &a, &r) || bench_measure(&r, &a, &m);
  double heap = bench_heap_bytes() - heap0, resident = (double)adj_resident_bytes() - resident0;
  if (!status) {
    m.peak_rss = adj_peak_resident_bytes();
    if (rank == 0) {
      printf("network %s, %d ranks, batch %lld, placement %s%s\n", p.d->name, ranks, a.batch, p.name,
             reset ? "" : " (peak memory includes the planning: its high-water mark could not be reset)");
      adj_step_report_print(&p.prediction, &m, r.net, stdout);
      const adj_step_prediction *q = &p.prediction;
      printf("rank 0 memory before the network %.2f MiB (the machine's baseline %.2f); the network and its run "
             "allocated %.2f MiB and made %.2f MiB resident; predicted %.2f MiB besides the baseline\n",
             resident0 / (1 << 20), (double)q->baseline / (1 << 20), heap / (1 << 20), resident / (1 << 20),
             (double)(q->memory_total - q->baseline) / (1 << 20));
      bench_summary(&p, &m, ranks);
    }
  }
  if (status && rank == 0) fprintf(stderr, "bench-plan-step: %s\n", adj_last_error());
  adj_step_measurement_free(&m);
  bench_run_free(&r);
  adj_step_prediction_free(&p.prediction);
  adj_network_layout_free(&p.layout);
  adj_placement_destroy(&p.placement);
  adj_description_destroy(&p.d);
  adj_finalize();
  return status ? 1 : 0;
}
