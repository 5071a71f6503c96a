/* adjoin-plan: predicted communication time of a network on P_r x P_c grids
 * (plan.h), and the best grid.  It only computes (no MPI ranks).
 *
 *   adjoin-plan [--mode paper-eq4|paper|adjoin] [--conv same|batch|domain] --procs P
 *               --batch B [--alpha SECONDS] [--beta SECONDS_PER_BYTE |
 *               --bandwidth BYTES_PER_SECOND] [--word BYTES]
 *               [--grid RxC | --all-grids | --sweep P0:P1] [--json]
 *               [--calibration FILE] NETWORK_FILE
 *   mpiexec -n 2 adjoin-plan --calibrate FILE
 *   adjoin-plan --help
 *
 * Default: the best grid's per-layer table.  --grid shows one grid, --all-grids
 * one line per grid (total, breakdown by collective, speed-up against 1 x P),
 * --sweep the best grid and its speed-up for P = P0, 2 P0, ... P1.  Defaults:
 * alpha 2e-6 s, bandwidth 6e9 B/s (Cori, papers 000/001), word 4 bytes.
 * --calibrate measures alpha and beta by ping-pong between two ranks, and the
 * collectives' alpha and beta by an all-reduce sweep on all ranks, and writes
 * both fits to FILE; --calibration FILE uses them (overriding --alpha, --beta;
 * the all-reduce fit, when the file has one, prices every collective and the
 * ping-pong fit the halo exchanges).  Exit status: 0 on success, 1 when the plan cannot be made (bad network file,
 * grid), 2 on a usage error; messages name the bad value on stderr. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/plan.h"
#include "adjoin/status.h"
#include "plan_net.h"
#include "tool_output.h"

enum { EXIT_PLAN = 1, EXIT_USAGE = 2 };
enum { PLAN_HELP = -1 }; /* plan_parse: the usage was asked for and printed */

static const char usage[] =
    "usage: adjoin-plan [--mode paper-eq4|paper|adjoin] [--conv same|batch|domain] --procs P --batch B\n"
    "                   [--alpha S] [--beta S_PER_BYTE | --bandwidth BYTES_PER_S] [--word BYTES]\n"
    "                   [--grid RxC | --all-grids | --sweep P0:P1] [--json] [--calibration FILE] NETWORK_FILE\n"
    "       mpiexec -n 2 adjoin-plan --calibrate FILE\n"
    "       adjoin-plan --help\n"
    "per layer, on a network description (docs/planner.md, \"The per-layer planner\"):\n"
    PLAN_NET_USAGE;

typedef struct plan_args {
  adj_plan_config config;
  const char *file;
  int grid_r, grid_c; /* 0: best */
  bool all, json;
  int sweep0, sweep1;
  const char *calibrate;   /* --calibrate: measure and write here */
  const char *calibration; /* --calibration: read alpha and beta from here */
} plan_args;

static int plan_fail(const char *option, const char *message, const char *text) {
  fprintf(stderr, "adjoin-plan: %s: %s '%s'\n%s", option, message, text ? text : "(missing)", usage);
  return EXIT_USAGE;
}

static bool plan_long(const char *text, long long lo, long long *v) {
  char *end;
  errno = 0;
  *v = text ? strtoll(text, &end, 10) : 0;
  return text && !errno && end != text && !*end && *v >= lo && *v <= (1LL << 40);
}

static bool plan_double(const char *text, double *v) {
  char *end;
  errno = 0;
  *v = text ? strtod(text, &end) : 0;
  return text && !errno && end != text && !*end && isfinite(*v);
}

static int plan_parse(int argc, char **argv, plan_args *a) {
  double bandwidth = 6e9;
  bool have_beta = false, have_p = false, have_b = false;
  a->config = (adj_plan_config){.mode = ADJ_PLAN_PAPER, .alpha = 2e-6, .word_bytes = 4};
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    long long n;
    if (!strcmp(o, "--json")) a->json = true;
    else if (!strcmp(o, "--all-grids")) a->all = true;
    else if (!strcmp(o, "--help") || !strcmp(o, "-h")) return fputs(usage, stdout), PLAN_HELP;
    else if (o[0] != '-' || !o[1]) {
      if (a->file) return plan_fail("network file", "given twice; second is", o);
      a->file = o;
    } else if (!v) return plan_fail(o, "needs a value", NULL);
    else if (i++, !strcmp(o, "--mode")) {
      if (adj_plan_mode_parse(v, &a->config.mode)) return plan_fail(o, "unknown mode (paper-eq4, paper, adjoin)", v);
    } else if (!strcmp(o, "--conv")) {
      if (!strcmp(v, "same")) a->config.conv = ADJ_PLAN_CONV_SAME;
      else if (!strcmp(v, "batch")) a->config.conv = ADJ_PLAN_CONV_BATCH;
      else if (!strcmp(v, "domain")) a->config.conv = ADJ_PLAN_CONV_DOMAIN;
      else return plan_fail(o, "must be same, batch or domain, got", v);
    } else if (!strcmp(o, "--procs")) {
      if (!plan_long(v, 1, &n) || n > 1 << 24) return plan_fail(o, "must be a worker count >= 1, got", v);
      a->config.p = (int)n, have_p = true;
    } else if (!strcmp(o, "--batch")) {
      if (!plan_long(v, 1, &n)) return plan_fail(o, "must be a batch size >= 1, got", v);
      a->config.batch = n, have_b = true;
    } else if (!strcmp(o, "--word")) {
      if (!plan_long(v, 1, &n) || n > 64) return plan_fail(o, "must be 1..64 bytes, got", v);
      a->config.word_bytes = (int)n;
    } else if (!strcmp(o, "--alpha")) {
      if (!plan_double(v, &a->config.alpha) || a->config.alpha <= 0) return plan_fail(o, "must be > 0 seconds, got", v);
    } else if (!strcmp(o, "--beta")) {
      if (!plan_double(v, &a->config.beta) || a->config.beta <= 0)
        return plan_fail(o, "must be > 0 seconds per byte, got", v);
      have_beta = true;
    } else if (!strcmp(o, "--bandwidth")) {
      if (!plan_double(v, &bandwidth) || bandwidth <= 0) return plan_fail(o, "must be > 0 bytes per second, got", v);
    } else if (!strcmp(o, "--grid")) {
      char tail;
      if (sscanf(v, "%dx%d%c", &a->grid_r, &a->grid_c, &tail) != 2 || a->grid_r < 1 || a->grid_c < 1)
        return plan_fail(o, "must be RxC with R, C >= 1, got", v);
    } else if (!strcmp(o, "--calibrate")) {
      a->calibrate = v;
    } else if (!strcmp(o, "--calibration")) {
      a->calibration = v;
    } else if (!strcmp(o, "--sweep")) {
      char tail;
      if (sscanf(v, "%d:%d%c", &a->sweep0, &a->sweep1, &tail) != 2 || a->sweep0 < 1 || a->sweep1 < a->sweep0)
        return plan_fail(o, "must be P0:P1 with 1 <= P0 <= P1, got", v);
    } else {
      return plan_fail("option", "unknown", o);
    }
  }
  if (a->calibrate) return 0;
  if (!a->file) return plan_fail("network file", "missing", NULL);
  if (!have_p && !a->sweep0) return plan_fail("--procs", "missing", NULL);
  if (!have_b) return plan_fail("--batch", "missing", NULL);
  if (!have_beta) a->config.beta = 1.0 / bandwidth;
  adj_plan_calibration cal;
  if (a->calibration && adj_plan_calibration_load(a->calibration, &cal)) {
    fprintf(stderr, "adjoin-plan: --calibration: %s\n", tool_error());
    return EXIT_USAGE;
  }
  if (a->calibration) adj_plan_calibration_apply(&cal, &a->config);
  return 0;
}

static const char *const kind_names[] = {"conv", "pool", "fc"};

static void print_header(const plan_args *a, const adj_plan_network *net) {
  const adj_plan_config *c = &a->config;
  printf("network %s (%lld parameters), mode %s, conv %s, P = %d, batch %lld, alpha %.3g s, beta %.4g s/B "
         "(%.4g GB/s), word %d B\n",
         net->name, (long long)adj_plan_network_parameters(net), adj_plan_mode_name(c->mode),
         c->conv == ADJ_PLAN_CONV_BATCH ? "batch" : c->conv == ADJ_PLAN_CONV_DOMAIN ? "domain" : "same", c->p, (long long)c->batch, c->alpha, c->beta,
         1e-9 / c->beta, c->word_bytes);
  if (c->collective_alpha > 0)
    printf("collectives: alpha %.3g s, beta %.4g s/B (%.4g GB/s), from an all-reduce sweep\n", c->collective_alpha,
           c->collective_beta, 1e-9 / c->collective_beta);
}

static void print_layers(const adj_plan_network *net, const adj_plan_result *r, const char *what) {
  printf("grid %dx%d (%s): seconds per step\n", r->p_r, r->p_c, what);
  printf("%-8s %-4s %-9s", "layer", "kind", "grid");
  for (int k = 0; k < ADJ_PLAN_COLLECTIVES; k++) printf(" %11s", adj_plan_collective_name(k));
  printf(" %11s\n", "total");
  for (int i = 0; i < r->n; i++) {
    const adj_plan_layer_cost *l = &r->layers[i];
    char grid[24];
    snprintf(grid, sizeof grid, "%dx%d%s", l->p_r, l->p_c, l->domain ? "D" : "");
    printf("%-8s %-4s %-9s", net->layers[i].name, kind_names[net->layers[i].kind], grid);
    for (int k = 0; k < ADJ_PLAN_COLLECTIVES; k++) printf(" %11.4e", l->time[k]);
    printf(" %11.4e\n", l->total);
  }
  printf("%-8s %-4s %-9s", "total", "", "");
  for (int k = 0; k < ADJ_PLAN_COLLECTIVES; k++) printf(" %11.4e", r->time[k]);
  printf(" %11.4e\n", r->total);
}

static void json_result(const adj_plan_network *net, const adj_plan_result *r, bool layers) {
  printf("{\"grid\": [%d, %d], \"total\": %.9e, \"by_collective\": {", r->p_r, r->p_c, r->total);
  for (int k = 0; k < ADJ_PLAN_COLLECTIVES; k++)
    printf("%s\"%s\": %.9e", k ? ", " : "", adj_plan_collective_name(k), r->time[k]);
  printf("}");
  if (layers) {
    printf(", \"layers\": [");
    for (int i = 0; i < r->n; i++) {
      const adj_plan_layer_cost *l = &r->layers[i];
      printf("%s{\"name\": \"%s\", \"kind\": \"%s\", \"grid\": [%d, %d], \"domain\": %s, \"total\": %.9e, "
             "\"time\": {",
             i ? ", " : "", net->layers[i].name, kind_names[net->layers[i].kind], l->p_r, l->p_c,
             l->domain ? "true" : "false", l->total);
      for (int k = 0; k < ADJ_PLAN_COLLECTIVES; k++)
        printf("%s\"%s\": %.9e", k ? ", " : "", adj_plan_collective_name(k), l->time[k]);
      printf("}, \"words\": {");
      for (int k = 0; k < ADJ_PLAN_COLLECTIVES; k++)
        printf("%s\"%s\": %.6f", k ? ", " : "", adj_plan_collective_name(k), l->words[k]);
      printf("}, \"messages\": {");
      for (int k = 0; k < ADJ_PLAN_COLLECTIVES; k++)
        printf("%s\"%s\": %g", k ? ", " : "", adj_plan_collective_name(k), l->messages[k]);
      printf("}}");
    }
    printf("]");
  }
  printf("}");
}

static int plan_failed(void) {
  fprintf(stderr, "adjoin-plan: %s\n", tool_error());
  return EXIT_PLAN;
}

/* Every grid of P, or the best one, or the one asked for. */
static int plan_one(const plan_args *a, const adj_plan_network *net) {
  adj_plan_result r;
  if (a->all) {
    adj_plan_result batch;
    if (adj_plan_evaluate(net, &a->config, 1, a->config.p, &batch)) return plan_failed();
    if (a->json) printf("{\"mode\": \"%s\", \"procs\": %d, \"grids\": [", adj_plan_mode_name(a->config.mode), a->config.p);
    else {
      print_header(a, net);
      printf("%-9s", "grid");
      for (int k = 0; k < ADJ_PLAN_COLLECTIVES; k++) printf(" %11s", adj_plan_collective_name(k));
      printf(" %11s %9s\n", "total", "speed-up");
    }
    bool any = false;
    for (int p_r = 1; p_r <= a->config.p; p_r++) {
      if (a->config.p % p_r) continue;
      int s = adj_plan_evaluate(net, &a->config, p_r, a->config.p / p_r, &r);
      if (s == ADJ_ERR_SIZE) continue;
      if (s) return adj_plan_result_free(&batch), plan_failed();
      if (a->json) printf("%s", any ? ", " : ""), json_result(net, &r, false);
      else {
        char grid[24];
        snprintf(grid, sizeof grid, "%dx%d", r.p_r, r.p_c);
        printf("%-9s", grid);
        for (int k = 0; k < ADJ_PLAN_COLLECTIVES; k++) printf(" %11.4e", r.time[k]);
        printf(" %11.4e %8.2fx\n", r.total, batch.total / r.total);
      }
      any = true;
      adj_plan_result_free(&r);
    }
    if (a->json) printf("]}\n");
    adj_plan_result_free(&batch);
    return 0;
  }
  int s = a->grid_r ? adj_plan_evaluate(net, &a->config, a->grid_r, a->grid_c, &r) : adj_plan_best(net, &a->config, &r);
  if (s) return plan_failed();
  if (a->json) {
    printf("{\"network\": \"%s\", \"mode\": \"%s\", \"procs\": %d, \"batch\": %lld, \"best\": %s, \"result\": ",
           net->name, adj_plan_mode_name(a->config.mode), a->config.p, (long long)a->config.batch,
           a->grid_r ? "false" : "true");
    json_result(net, &r, true);
    printf("}\n");
  } else {
    print_header(a, net);
    print_layers(net, &r, a->grid_r ? "as asked" : "best");
  }
  adj_plan_result_free(&r);
  return 0;
}

/* Best grid and predicted speed-up against 1 x P for P = P0, 2 P0, ... P1. */
static int plan_sweep(plan_args *a, const adj_plan_network *net) {
  if (a->json) printf("{\"mode\": \"%s\", \"sweep\": [", adj_plan_mode_name(a->config.mode));
  else {
    a->config.p = a->sweep0;
    print_header(a, net);
    printf("%6s %9s %12s %12s %9s\n", "P", "best", "T(1xP) s", "T(best) s", "speed-up");
  }
  for (int p = a->sweep0; p <= a->sweep1; p *= 2) {
    a->config.p = p;
    adj_plan_result batch, best;
    if (adj_plan_evaluate(net, &a->config, 1, p, &batch)) return plan_failed();
    if (adj_plan_best(net, &a->config, &best)) return adj_plan_result_free(&batch), plan_failed();
    if (a->json)
      printf("%s{\"procs\": %d, \"best\": [%d, %d], \"batch_total\": %.9e, \"best_total\": %.9e}", p > a->sweep0 ? ", " : "",
             p, best.p_r, best.p_c, batch.total, best.total);
    else {
      char grid[24];
      snprintf(grid, sizeof grid, "%dx%d", best.p_r, best.p_c);
      printf("%6d %9s %12.4e %12.4e %8.2fx\n", p, grid, batch.total, best.total, batch.total / best.total);
    }
    adj_plan_result_free(&batch), adj_plan_result_free(&best);
  }
  if (a->json) printf("]}\n");
  return 0;
}

/* Ping-pong between two ranks and an all-reduce sweep on all of them under
 * mpiexec (2 or more ranks); rank 0 prints both fits and writes the file. */
static int plan_calibrate(int *argc, char ***argv, const char *path) {
  MPI_Init(argc, argv);
  enum { REPEATS = 20 };
  adj_plan_calibration cal = {0};
  int rank, s = adj_plan_calibrate(MPI_COMM_WORLD, REPEATS, &cal.alpha, &cal.beta);
  if (!s) s = adj_plan_calibrate_allreduce(MPI_COMM_WORLD, REPEATS, &cal.collective_alpha, &cal.collective_beta);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &cal.collective_ranks);
  if (!s && rank == 0) s = adj_plan_calibration_save(path, &cal);
  if (rank == 0 && !s)
    printf("ping-pong (2 ranks):   alpha %.3e s, beta %.3e s/B (%.3g GB/s)\n"
           "all-reduce (%d ranks): alpha %.3e s, beta %.3e s/B (%.3g GB/s) per latency term and byte\n"
           "written to %s\n",
           cal.alpha, cal.beta, 1e-9 / cal.beta, cal.collective_ranks, cal.collective_alpha, cal.collective_beta,
           1e-9 / cal.collective_beta, path);
  if (s) fprintf(stderr, "adjoin-plan: rank %d: %s\n", rank, tool_error());
  MPI_Finalize();
  return s ? EXIT_PLAN : 0;
}

int main(int argc, char **argv) {
  if (plan_net_requested(argc, argv)) return plan_net_main(argc, argv);
  plan_args a = {0};
  int s = plan_parse(argc, argv, &a);
  if (s) return s == PLAN_HELP ? 0 : s;
  if (a.calibrate) return plan_calibrate(&argc, &argv, a.calibrate);
  adj_plan_network *net;
  if (adj_plan_network_read(a.file, &net)) return plan_failed();
  s = a.sweep0 ? plan_sweep(&a, net) : plan_one(&a, net);
  adj_plan_network_destroy(&net);
  return s;
}
