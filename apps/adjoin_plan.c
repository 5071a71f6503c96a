/* adjoin-plan: predicted communication time of a network on P_r x P_c grids
 * (plan.h), and the best grid.  It only computes and never starts MPI
 * (tool_output.h), except for --calibrate.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/parse.h"
#include "adjoin/plan.h"
#include "adjoin/status.h"
#include "tool_output.h"

enum { EXIT_PLAN = 1, EXIT_USAGE = 2 };
enum { PLAN_HELP = -1 }; /* plan_parse: the usage was asked for and printed */
enum { PLAN_MAX_PROCS = 1 << 24 };
enum { PLAN_GIVEN_PROCS = 1u, PLAN_GIVEN_BATCH = 2u, PLAN_GIVEN_BETA = 4u }; /* options given, as bits */

static const char usage[] =
    "usage: adjoin-plan [--mode paper-eq4|paper|adjoin] [--conv same|batch|domain] --procs P --batch B\n"
    "                   [--alpha S] [--beta S_PER_BYTE | --bandwidth BYTES_PER_S] [--word BYTES]\n"
    "                   [--grid RxC | --all-grids | --sweep P0:P1] [--json] [--calibration FILE] NETWORK_FILE\n"
    "       mpiexec -n 2 adjoin-plan --calibrate FILE\n"
    "       adjoin-plan --help\n";

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
  tool_complain("%s: %s '%s'\n%s", option, message, text ? text : "(missing)", usage);
  return EXIT_USAGE;
}

/* The parser's refusal (it names the option and the text) and the usage. */
static int plan_refused(void) {
  tool_complain("%s\n%s", adj_last_error(), usage);
  return EXIT_USAGE;
}

/* alpha, beta and bandwidth: positive and finite, and far enough from 0 and
 * infinity that the times they give stay finite. */
static int plan_rate(const char *option, const char *text, double *out) {
  return tool_real(option, text, 1e-30, 1e30, usage, out);
}

/* "RxC" or "P0:P1" into two ints in [1, max]. */
static int plan_pair(const char *option, const char *text, char separator, int max, int *first, int *second) {
  int64_t pair[2];
  if (adj_parse_int64_pair(text, separator, 1, max, option, pair)) return plan_refused();
  *first = (int)pair[0], *second = (int)pair[1];
  return 0;
}

/* One option with its value v; 0, or the exit status of a refusal. */
static int plan_option(plan_args *a, const char *o, const char *v, double *bandwidth, unsigned *given) {
  int64_t n;
  if (!strcmp(o, "--mode")) {
    if (adj_plan_mode_parse(v, &a->config.mode)) return plan_fail(o, "unknown mode (paper-eq4, paper, adjoin)", v);
  } else if (!strcmp(o, "--conv")) {
    if (!strcmp(v, "same")) a->config.conv = ADJ_PLAN_CONV_SAME;
    else if (!strcmp(v, "batch")) a->config.conv = ADJ_PLAN_CONV_BATCH;
    else if (!strcmp(v, "domain")) a->config.conv = ADJ_PLAN_CONV_DOMAIN;
    else return plan_fail(o, "must be same, batch or domain, got", v);
  } else if (!strcmp(o, "--procs")) {
    if (tool_int64(o, v, 1, PLAN_MAX_PROCS, usage, &n)) return EXIT_USAGE;
    a->config.p = (int)n, *given |= PLAN_GIVEN_PROCS;
  } else if (!strcmp(o, "--batch")) {
    if (tool_int64(o, v, 1, INT64_C(1) << 40, usage, &a->config.batch)) return EXIT_USAGE;
    *given |= PLAN_GIVEN_BATCH;
  } else if (!strcmp(o, "--word")) {
    if (tool_int64(o, v, 1, 64, usage, &n)) return EXIT_USAGE;
    a->config.word_bytes = (int)n;
  } else if (!strcmp(o, "--alpha")) {
    return plan_rate(o, v, &a->config.alpha);
  } else if (!strcmp(o, "--beta")) {
    *given |= PLAN_GIVEN_BETA;
    return plan_rate(o, v, &a->config.beta);
  } else if (!strcmp(o, "--bandwidth")) {
    return plan_rate(o, v, bandwidth);
  } else if (!strcmp(o, "--grid")) {
    return plan_pair(o, v, 'x', PLAN_MAX_PROCS, &a->grid_r, &a->grid_c);
  } else if (!strcmp(o, "--sweep")) {
    if (plan_pair(o, v, ':', PLAN_MAX_PROCS, &a->sweep0, &a->sweep1)) return EXIT_USAGE;
    if (a->sweep1 < a->sweep0) return plan_fail(o, "must be P0:P1 with P0 <= P1, got", v);
  } else if (!strcmp(o, "--calibrate")) {
    a->calibrate = v;
  } else if (!strcmp(o, "--calibration")) {
    a->calibration = v;
  } else {
    return plan_fail("option", "unknown", o);
  }
  return 0;
}

static int plan_parse(int argc, char **argv, plan_args *a) {
  double bandwidth = 6e9;
  unsigned given = 0;
  a->config = (adj_plan_config){.mode = ADJ_PLAN_PAPER, .alpha = 2e-6, .word_bytes = 4};
  for (int i = 1; i < argc; i++) {
    const char *o = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int bad = 0;
    if (!strcmp(o, "--json")) a->json = true;
    else if (!strcmp(o, "--all-grids")) a->all = true;
    else if (!strcmp(o, "--help") || !strcmp(o, "-h")) {
      if (!tool_quiet()) fputs(usage, stdout);
      return PLAN_HELP;
    } else if (o[0] != '-' || !o[1]) {
      if (a->file) return plan_fail("network file", "given twice; second is", o);
      a->file = o;
    } else if (!v) return plan_fail(o, "needs a value", NULL);
    else bad = plan_option(a, o, v, &bandwidth, &given), i++;
    if (bad) return bad;
  }
  if (a->calibrate) return 0;
  if (!a->file) return plan_fail("network file", "missing", NULL);
  if (!(given & PLAN_GIVEN_PROCS) && !a->sweep0) return plan_fail("--procs", "missing", NULL);
  if (!(given & PLAN_GIVEN_BATCH)) return plan_fail("--batch", "missing", NULL);
  if (!(given & PLAN_GIVEN_BETA)) a->config.beta = 1.0 / bandwidth;
  adj_plan_calibration cal;
  if (a->calibration && adj_plan_calibration_load(a->calibration, &cal)) {
    tool_complain("--calibration: %s\n", tool_error());
    return EXIT_USAGE;
  }
  if (a->calibration) adj_plan_calibration_apply(&cal, &a->config);
  return 0;
}

static int plan_failed(void) {
  tool_complain("%s\n", tool_error());
  return EXIT_PLAN;
}

/* "T(1 x P) / T(best)" as a table shows it: "-" when the best grid
 * communicates nothing (P = 1), where the ratio would be 0/0. */
static const char *plan_speedup(double base, double best, char *text, size_t size) {
  if (best > 0) snprintf(text, size, "%.2fx", base / best);
  else snprintf(text, size, "-");
  return text;
}

/* A name from the network file as a JSON string: quotes, backslashes and
 * control characters escaped, so a hostile name cannot break the output. */
static void json_string(const char *text) {
  putchar('"');
  for (const unsigned char *c = (const unsigned char *)text; *c; c++) {
    if (*c == '"' || *c == '\\') printf("\\%c", *c);
    else if (*c < 0x20) printf("\\u%04x", *c);
    else putchar(*c);
  }
  putchar('"');
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
      printf("%s{\"name\": ", i ? ", " : "");
      json_string(net->layers[i].name);
      printf(", \"kind\": \"%s\", \"grid\": [%d, %d], \"domain\": %s, \"total\": %.9e, \"time\": {",
             kind_names[net->layers[i].kind], l->p_r, l->p_c, l->domain ? "true" : "false", l->total);
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
        char grid[24], speedup[32];
        snprintf(grid, sizeof grid, "%dx%d", r.p_r, r.p_c);
        printf("%-9s", grid);
        for (int k = 0; k < ADJ_PLAN_COLLECTIVES; k++) printf(" %11.4e", r.time[k]);
        printf(" %11.4e %9s\n", r.total, plan_speedup(batch.total, r.total, speedup, sizeof speedup));
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
    printf("{\"network\": ");
    json_string(net->name);
    printf(", \"mode\": \"%s\", \"procs\": %d, \"batch\": %lld, \"best\": %s, \"result\": ",
           adj_plan_mode_name(a->config.mode), a->config.p, (long long)a->config.batch, a->grid_r ? "false" : "true");
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
      char grid[24], speedup[32];
      snprintf(grid, sizeof grid, "%dx%d", best.p_r, best.p_c);
      printf("%6d %9s %12.4e %12.4e %9s\n", p, grid, batch.total, best.total,
             plan_speedup(batch.total, best.total, speedup, sizeof speedup));
    }
    adj_plan_result_free(&batch), adj_plan_result_free(&best);
  }
  if (a->json) printf("]}\n");
  return 0;
}

/* Ping-pong between two ranks and an all-reduce sweep on all of them under
 * mpiexec (2 or more ranks); rank 0 prints both fits and writes the file,
 * whose path is checked before anything is measured.  Every rank returns
 * rank 0's outcome. */
static int plan_calibrate(const char *path) {
  enum { REPEATS = 20 };
  adj_plan_calibration cal = {0};
  int rank, s = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  if (rank == 0) s = tool_check_output("--calibrate", path);
  MPI_Bcast(&s, 1, MPI_INT, 0, MPI_COMM_WORLD);
  if (s) return EXIT_PLAN;
  s = adj_plan_calibrate(MPI_COMM_WORLD, REPEATS, &cal.alpha, &cal.beta);
  if (!s) s = adj_plan_calibrate_allreduce(MPI_COMM_WORLD, REPEATS, &cal.collective_alpha, &cal.collective_beta);
  MPI_Comm_size(MPI_COMM_WORLD, &cal.collective_ranks);
  if (!s && rank == 0) s = adj_plan_calibration_save(path, &cal);
  if (rank == 0 && !s)
    printf("ping-pong (2 ranks):   alpha %.3e s, beta %.3e s/B (%.3g GB/s)\n"
           "all-reduce (%d ranks): alpha %.3e s, beta %.3e s/B (%.3g GB/s) per latency term and byte\n"
           "written to %s\n",
           cal.alpha, cal.beta, 1e-9 / cal.beta, cal.collective_ranks, cal.collective_alpha, cal.collective_beta,
           1e-9 / cal.collective_beta, path);
  if (s) tool_complain("%s\n", tool_error());
  MPI_Bcast(&s, 1, MPI_INT, 0, MPI_COMM_WORLD);
  return s ? EXIT_PLAN : 0;
}

static int plan_network(plan_args *a) {
  adj_plan_network *net;
  if (adj_plan_network_read(a->file, &net)) return plan_failed();
  int s = a->sweep0 ? plan_sweep(a, net) : plan_one(a, net);
  adj_plan_network_destroy(&net);
  return s;
}

/* MPI only for --calibrate: otherwise a plain process (tool_output.h). */
int main(int argc, char **argv) {
  plan_args a = {0};
  tool_begin("adjoin-plan");
  if (tool_has_flag(argc, argv, "--calibrate") && tool_begin_mpi(&argc, &argv, NULL)) return EXIT_PLAN;
  int s = plan_parse(argc, argv, &a);
  if (!s) s = a.calibrate ? plan_calibrate(a.calibrate) : plan_network(&a);
  return tool_end(s == PLAN_HELP ? 0 : s);
}
