/* adjoin-plan --net: the per-layer planner (plan_search.h) on a network
 * description (description.h).
 *
 *   mpiexec -n P adjoin-plan --net FILE --batch B [--memory BYTES] [--keep K]
 *       [--no-replicas] [--dtype float32|float64] [--optimizer adam|sgd]
 *       [--family all|integrated] [--exhaustive] [--write FILE] [--write-dir DIR]
 *   adjoin-plan --net FILE --machine MACHINE_FILE --procs P --batch B [...]
 *   adjoin-plan --net FILE --machine MACHINE_FILE --sweep P0:P1 --batch B [...]
 *
 * On the host (no --machine) it plans for the ranks it runs on, measured
 * there: the machine's lines (cached per rank count) and every local
 * computation the candidates need (the layer time table).  With --machine it
 * plans for --procs ranks of the machine the file describes, compute from its
 * rates; --sweep does so for P = P0, 2 P0, ... P1 and prints, per P, the best
 * purely batch-parallel plan (the batch split in every layer, or one replica
 * per rank) against the best plan.  It prints the best plan stage by stage,
 * then the runners-up; --write writes the best as a placement file,
 * --write-dir every listed plan (plan-1.place, ...).  --predict PLACEMENT
 * predicts that placement alone (a file or a name, placement.h) instead of
 * searching; --uniform lists the uniform placements of the ranks by name
 * (placement.h's enumeration, and one sequential replica per rank). */
#include "plan_net.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/description.h"
#include "adjoin/file.h"
#include "adjoin/parse.h"
#include "adjoin/plan_search.h"
#include "adjoin/status.h"
#include "tool_output.h"

enum { EXIT_PLAN = 1, EXIT_USAGE = 2 };

typedef struct net_args {
  const char *net, *machine, *write, *write_dir, *predict;
  int procs, sweep0, sweep1;
  bool uniform;
  adj_plan_search_options search;
} net_args;

bool plan_net_requested(int argc, char **argv) {
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--net")) return true;
  return false;
}

static int net_usage(const char *what) {
  tool_complain("%s\n%s", what, PLAN_NET_USAGE);
  return EXIT_USAGE;
}

/* A refused value: said on stderr, with the usage. */
static int net_refuse(const char *option, const char *value, const char *expected) {
  tool_complain("%s '%s' is not %s\n%s", option, value, expected, PLAN_NET_USAGE);
  return EXIT_USAGE;
}

/* A parse.h refusal (its message names the option and the value). */
static int net_parsed(int status) { return status ? net_usage(tool_error()) : 0; }

/* "P0:P1" of --sweep. */
static int net_sweep_range(net_args *a, const char *v) {
  char first[32];
  const char *colon = strchr(v, ':');
  if (!colon || colon - v >= (long)sizeof first) return net_refuse("--sweep", v, "P0:P1");
  snprintf(first, sizeof first, "%.*s", (int)(colon - v), v);
  if (net_parsed(adj_parse_int(first, 1, ADJ_PLACE_MAX_PARTS, "--sweep P0", &a->sweep0))) return EXIT_USAGE;
  return net_parsed(adj_parse_int(colon + 1, a->sweep0, ADJ_PLACE_MAX_PARTS, "--sweep P1", &a->sweep1));
}

/* One option with its value; a bad one is refused naming it. */
static int net_option(net_args *a, const char *o, const char *v) {
  adj_step_options *s = &a->search.step;
  if (!strcmp(o, "--net")) a->net = v;
  else if (!strcmp(o, "--machine")) a->machine = v;
  else if (!strcmp(o, "--write")) a->write = v;
  else if (!strcmp(o, "--write-dir")) a->write_dir = v;
  else if (!strcmp(o, "--predict")) a->predict = v;
  else if (!strcmp(o, "--procs")) return net_parsed(adj_parse_int(v, 1, ADJ_PLACE_MAX_PARTS, o, &a->procs));
  else if (!strcmp(o, "--batch")) return net_parsed(adj_parse_int64(v, 1, (int64_t)1 << 40, o, &s->batch));
  else if (!strcmp(o, "--memory")) return net_parsed(adj_parse_bytes(v, 1, INT64_MAX, o, &a->search.memory));
  else if (!strcmp(o, "--keep")) return net_parsed(adj_parse_int(v, 1, 100, o, &a->search.keep));
  else if (!strcmp(o, "--sweep")) return net_sweep_range(a, v);
  else if (!strcmp(o, "--dtype")) {
    if (!strcmp(v, "float32")) s->dtype = ADJ_FLOAT32;
    else if (!strcmp(v, "float64")) s->dtype = ADJ_FLOAT64;
    else return net_refuse(o, v, "float32 or float64");
  } else if (!strcmp(o, "--optimizer")) {
    if (!strcmp(v, "adam")) s->optimizer = ADJ_OPTIMIZER_ADAM;
    else if (!strcmp(v, "sgd")) s->optimizer = ADJ_OPTIMIZER_SGD, s->momentum = true;
    else return net_refuse(o, v, "adam or sgd");
  } else if (!strcmp(o, "--family")) {
    if (!strcmp(v, "all")) a->search.family = ADJ_PLAN_FAMILY_ALL;
    else if (!strcmp(v, "integrated")) a->search.family = ADJ_PLAN_FAMILY_INTEGRATED;
    else return net_refuse(o, v, "all or integrated");
  } else {
    return net_refuse("option", o, "known");
  }
  return 0;
}

static int net_parse(int argc, char **argv, net_args *a) {
  a->search = (adj_plan_search_options){.replicas = true, .step = {.dtype = ADJ_FLOAT32,
                                                                   .optimizer = ADJ_OPTIMIZER_ADAM}};
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i];
    if (!strcmp(o, "--no-replicas")) a->search.replicas = false;
    else if (!strcmp(o, "--exhaustive")) a->search.exhaustive = true;
    else if (!strcmp(o, "--uniform")) a->uniform = true;
    else if (i + 1 >= argc) return net_refuse(o, "(missing)", "followed by its value");
    else if (net_option(a, o, argv[++i])) return EXIT_USAGE;
  }
  if (!a->search.step.batch) return net_usage("--batch is required");
  if (a->sweep0 && !a->machine) return net_usage("--sweep plans for other machines: give --machine FILE");
  if (a->procs && !a->machine && !a->sweep0)
    return net_usage("--procs is for --machine; on this host, run under mpiexec -n P");
  return 0;
}

/* ---- printing ------------------------------------------------------------------------------------ */

static void net_print_list(const adj_plan_list *list, const char *what) {
  if (tool_quiet()) return;
  printf("%s: %lld candidates over %d segments, %lld predictions, %lld dropped by the memory budget\n", what,
         (long long)list->candidates, list->segments, (long long)list->evaluated, (long long)list->over_budget);
  if (!list->n) return;
  printf("best plan: %s\n", list->plans[0].summary);
  adj_step_prediction_print(&list->plans[0].prediction, stdout);
  printf("%-4s %12s %9s %10s  %s\n", "rank", "step s", "vs best", "memory MiB", "plan");
  for (int i = 0; i < list->n; i++) {
    const adj_plan *p = &list->plans[i];
    printf("%-4d %12.4e %8.3fx %10.2f  %s\n", i + 1, p->prediction.step, p->prediction.step / list->plans[0].prediction.step,
           (double)p->prediction.memory_total / (1 << 20), p->summary);
  }
}

static int net_write_one(const adj_description *d, const adj_plan *plan, const char *path) {
  FILE *f = NULL;
  int status = adj_file_open_output(path, "placement file", &f);
  if (!status) {
    status = adj_plan_write_placement(d, plan, f);
    int closed = adj_file_close_output(f, path, "placement file");
    if (!status) status = closed;
  }
  if (status) tool_complain("%s\n", tool_error());
  return status ? EXIT_PLAN : 0;
}

static int net_write(const net_args *a, const adj_description *d, const adj_plan_list *list) {
  if (tool_quiet() || !list->n) return ADJ_SUCCESS;
  if (a->write && net_write_one(d, &list->plans[0], a->write)) return EXIT_PLAN;
  for (int i = 0; a->write_dir && i < list->n; i++) {
    char path[4096];
    snprintf(path, sizeof path, "%s/plan-%d.place", a->write_dir, i + 1);
    if (net_write_one(d, &list->plans[i], path)) return EXIT_PLAN;
  }
  return 0;
}

/* ---- what-if --------------------------------------------------------------------------------------- */

/* The faster of the two purely batch-parallel plans on P ranks: the batch
 * split in every layer, or P replicas of the sequential network. */
static void net_batch_parallel(const adj_description *d, const adj_plan_search_options *o, double *best) {
  *best = 0;
  adj_uniform_placement forms[2] = {{.window_ndim = 0}, {.replicas = o->step.ranks}};
  int ndim = d->input_rank + 1;
  forms[0].window_ndim = ndim, forms[0].window[0] = o->step.ranks;
  for (int k = 1; k < ndim; k++) forms[0].window[k] = 1;
  forms[0].fc = (adj_layer_placement){.kind = ADJ_PLACE_PARTS, .ndim = 2, .parts = {o->step.ranks, 1}, .out_parts = 1};
  adj_step_model *model = NULL;
  for (int f = 0; f < 2; f++) {
    adj_step_options step = o->step;
    step.replicas = f ? o->step.ranks : 1;
    adj_placement *p = NULL;
    adj_network_layout layout;
    int64_t replica_batch = (o->step.batch + step.replicas - 1) / step.replicas;
    if (adj_placement_uniform(d, &forms[f], &p) || adj_placement_resolve(d, p, replica_batch, &layout)) {
      adj_placement_destroy(&p);
      adj_clear_error();
      continue;
    }
    adj_step_prediction pred;
    int status = adj_step_model_create(&step, &model);
    if (!status) status = adj_step_model_predict(model, d, &layout, &pred);
    adj_step_model_destroy(&model);
    adj_network_layout_free(&layout);
    adj_placement_destroy(&p);
    if (status) {
      adj_clear_error();
      continue;
    }
    if (*best == 0 || pred.step < *best) *best = pred.step;
    adj_step_prediction_free(&pred);
  }
}

/* The library's refusal, on stderr. */
static int plan_net_failed(void) {
  tool_complain("%s\n", tool_error());
  return EXIT_PLAN;
}

static int net_sweep(const net_args *a, const adj_description *d, adj_plan_search_options o) {
  /* Papers 000/001's family unless another is asked for: every partition of
   * thousands of ranks would be millions of candidates. */
  if (o.family == ADJ_PLAN_FAMILY_AUTO) o.family = ADJ_PLAN_FAMILY_INTEGRATED;
  if (!tool_quiet())
    printf("%6s %12s %12s %9s %10s  %s\n", "P", "batch-par s", "best s", "speed-up", "memory MiB", "best plan");
  for (int p = a->sweep0; p <= a->sweep1; p *= 2) {
    o.step.ranks = p;
    double batch;
    adj_plan_list list;
    net_batch_parallel(d, &o, &batch);
    if (adj_plan_search(d, &o, &list)) return plan_net_failed();
    if (!tool_quiet() && list.n) {
      const adj_step_prediction *best = &list.plans[0].prediction;
      char ratio[32] = "-", base[32] = "-";
      if (batch > 0) snprintf(ratio, sizeof ratio, "%.2fx", batch / best->step), snprintf(base, sizeof base, "%.4e", batch);
      printf("%6d %12s %12.4e %9s %10.1f  %s\n", p, base, best->step, ratio, (double)best->memory_total / (1 << 20),
             list.plans[0].summary);
    } else if (!tool_quiet()) {
      printf("%6d no plan fits\n", p);
    }
    fflush(stdout);
    adj_plan_list_free(&list);
  }
  return 0;
}

/* ---- main ------------------------------------------------------------------------------------------ */

/* The prediction of one placement (a file or name, placement.h). */
static int net_predict(const net_args *a, const adj_description *d, adj_plan_search_options *o) {
  adj_placement *p = NULL;
  if (adj_placement_find(MPI_COMM_WORLD, d, a->net, a->predict, &p)) return plan_net_failed();
  adj_step_prediction prediction;
  int status = ADJ_SUCCESS;
  if (o->step.machine) {
    adj_network_layout layout = {0};
    int replicas = p->replicas ? p->replicas : d->replicas ? d->replicas : 1;
    adj_step_model *model = NULL;
    o->step.replicas = replicas;
    status = adj_placement_resolve(d, p, (o->step.batch + replicas - 1) / replicas, &layout);
    if (!status) status = adj_step_model_create(&o->step, &model);
    if (!status) status = adj_step_model_predict(model, d, &layout, &prediction);
    adj_step_model_destroy(&model);
    if (layout.layers) adj_network_layout_free(&layout);
  } else {
    status = adj_plan_predict(d, p, MPI_COMM_WORLD, &o->step, &prediction);
  }
  adj_placement_destroy(&p);
  if (status) return plan_net_failed();
  if (!tool_quiet()) {
    printf("network %s, placement %s, %d ranks, batch %lld\n", d->name, a->predict, o->step.ranks,
           (long long)o->step.batch);
    adj_step_prediction_print(&prediction, stdout);
  }
  adj_step_prediction_free(&prediction);
  return 0;
}

/* The uniform placements of the ranks (placement.h's enumeration) and one
 * sequential replica per rank, by name, one a line. */
static int net_uniform(const adj_description *d, int ranks, int64_t batch) {
  adj_uniform_placement *list = NULL;
  int count = 0;
  if (adj_placement_enumerate(d, ranks, batch, &list, &count)) return plan_net_failed();
  for (int i = 0; i < count && !tool_quiet(); i++) {
    char name[256];
    printf("%s\n", adj_uniform_placement_format(&list[i], name, sizeof name));
  }
  if (ranks > 1 && batch >= ranks && !tool_quiet()) printf("replicas=%d\n", ranks);
  adj_uniform_placement_list_free(&list);
  return 0;
}

static int net_run(const net_args *a, adj_description *d, int ranks) {
  adj_plan_search_options o = a->search;
  adj_plan_list list = {0};
  adj_machine machine;
  if (a->uniform) return net_uniform(d, a->machine && a->procs ? a->procs : ranks, o.step.batch);
  if (a->machine) {
    if (adj_machine_read(a->machine, &machine)) return plan_net_failed();
    if (machine.flops <= 0 || machine.bandwidth <= 0) {
      tool_complain("--machine %s: a plan for another machine computes from its rates: give flops and bandwidth\n",
                    a->machine);
      return EXIT_USAGE;
    }
    o.step.machine = &machine;
    if (a->sweep0) return net_sweep(a, d, o);
    o.step.ranks = a->procs ? a->procs : 1;
    if (a->predict) return net_predict(a, d, &o);
    if (adj_plan_search(d, &o, &list)) return plan_net_failed();
  } else {
    o.step.ranks = ranks;
    if (a->predict) return net_predict(a, d, &o);
    if (adj_plan_choose(d, MPI_COMM_WORLD, &o, &list)) return plan_net_failed();
  }
  char what[512];
  snprintf(what, sizeof what, "network %s, %d ranks, batch %lld, %s", d->name, o.step.ranks,
           (long long)o.step.batch, a->machine ? a->machine : "measured on this host");
  net_print_list(&list, what);
  int status = net_write(a, d, &list);
  if (!list.n) {
    tool_complain("no plan of network %s on %d ranks fits %lld bytes per rank (--memory, or the machine's)\n",
                  d->name, o.step.ranks, (long long)(o.memory ? o.memory : o.step.machine ? o.step.machine->memory : 0));
    status = EXIT_PLAN;
  }
  adj_plan_list_free(&list);
  return status;
}

int plan_net_main(int argc, char **argv) {
  int ranks = 1;
  tool_begin("adjoin-plan");
  if (tool_begin_mpi(&argc, &argv, &ranks)) return EXIT_PLAN;
  net_args a = {0};
  int status = net_parse(argc, argv, &a);
  if (!status && a.write) status = tool_check_output("--write", a.write) ? EXIT_USAGE : 0;
  adj_description *d = NULL;
  if (!status && adj_description_read_all(MPI_COMM_WORLD, a.net, &d)) status = plan_net_failed();
  if (!status) status = net_run(&a, d, ranks);
  adj_description_destroy(&d);
  return tool_end(status);
}
