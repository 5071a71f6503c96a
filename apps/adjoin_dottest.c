/* adjoin-dottest: runs the adjoint-test battery under mpiexec and prints one row
 * per case and a closing "N passed, M failed" line.
 *
 *   mpiexec -n 4 adjoin-dottest [--list] [--filter TEXT] [--min-ranks N] [--seed N]
 *   mpiexec -n 4 adjoin-dottest --net FILE [--placement P|all] [--batch N] [--min-ranks N] [--seed N]
 *   adjoin-dottest --help
 *
 * A case needing more ranks than the run has is skipped (and counted so).
 * --seed N (default 0) is added to every case's own seed, so the random
 * vectors of the test (and the layers' linearisation points) change with it
 * while seed 0 repeats the test suite's draws.
 * --min-ranks leaves out cases needing fewer than N ranks, so a large run can
 * cover only what a smaller run could not.
 *
 * --net proves a described network (network_check.h) instead of running the
 * battery: its Jacobian dot-product test and distributed == sequential, in
 * float64, at --placement P (a file, a shipped name, or any name
 * adj_placement_find takes; default the file's own), or with --placement all
 * at every shipped placement and every enumerated uniform placement
 * (adj_placement_enumerate) on each rank count from --min-ranks (default 1)
 * to the run's. */
#include <limits.h>
#include <mpi.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/adjoin.h"
#include "tool_output.h"
#include "battery.h"

typedef struct adj_dottest_options {
  int list;
  const char *filter;
  int min_ranks;
  unsigned long long seed;
  const char *net;       /* --net FILE: prove a described network instead */
  const char *placement; /* --placement P or "all" */
  uint64_t batch;
} adj_dottest_options;

/* --seed in a uint64 and --min-ranks in an int, whole numbers from 0
 * (parse.h: "abc", "-1", "4x" and values past the type are refused naming
 * the option and the text). */
static int adj_parse_count(const char *flag, const char *text, unsigned long long *seed, int *ranks, int rank) {
  uint64_t v = 0;
  if (!adj_parse_uint64(text, seed ? UINT64_MAX : INT_MAX, flag, &v)) {
    if (seed) *seed = v;
    else *ranks = (int)v;
    return 0;
  }
  if (rank == 0) fprintf(stderr, "adjoin-dottest: %s\n", adj_last_error());
  return 2;
}

static const char usage[] =
    "usage: mpiexec -n N adjoin-dottest [--list] [--filter TEXT] [--min-ranks N] [--seed N]\n"
    "  --list          print the names of the cases, run none\n"
    "  --filter TEXT   only the cases whose name contains TEXT\n"
    "  --min-ranks N   leave out the cases needing fewer than N ranks\n"
    "  --seed N        added to every case's seed [0: the test suite's draws]\n"
    "  --net FILE      prove a described network instead: its Jacobian dot-product test and\n"
    "                  distributed == sequential in float64 (docs/network-format.md)\n"
    "  --placement P   with --net: a placement file or name, or all (every shipped and\n"
    "                  enumerated placement on --min-ranks .. N ranks) [the file's own]\n"
    "  --batch N       with --net: the batch [4]\n"
    "A case needing more ranks than the run has is skipped.  Exit status: 0 when\n"
    "every case run passes, 1 on a failure or a filter matching nothing, 2 on a\n"
    "usage error.\n";

/* The value after flag argv[*i], or NULL (and a message) when there is none. */
static const char *adj_option_value(int argc, char **argv, int *i, int rank) {
  if (*i + 1 < argc) return argv[++*i];
  if (rank == 0) fprintf(stderr, "adjoin-dottest: %s needs a value\n%s", argv[*i], usage);
  return NULL;
}

/* 0, 2 on a usage error, -1 when --help asked for the usage (printed). */
static int adj_parse_options(int argc, char **argv, adj_dottest_options *o, int rank) {
  *o = (adj_dottest_options){.seed = 0, .batch = 4};
  for (int i = 1; i < argc; i++) {
    const char *flag = argv[i];
    if (!strcmp(flag, "--help") || !strcmp(flag, "-h")) {
      if (rank == 0) fputs(usage, stdout);
      return -1;
    }
    if (!strcmp(flag, "--list")) {
      o->list = 1;
      continue;
    }
    int filter = !strcmp(flag, "--filter"), seed = !strcmp(flag, "--seed"), min = !strcmp(flag, "--min-ranks");
    int net = !strcmp(flag, "--net"), placement = !strcmp(flag, "--placement"), batch = !strcmp(flag, "--batch");
    if (!filter && !seed && !min && !net && !placement && !batch) {
      if (rank == 0) fprintf(stderr, "adjoin-dottest: unknown argument '%s'\n%s", flag, usage);
      return 2;
    }
    const char *value = adj_option_value(argc, argv, &i, rank);
    if (!value) return 2;
    if (filter) o->filter = value;
    else if (net) o->net = value;
    else if (placement) o->placement = value;
    else if (batch && adj_parse_uint64(value, 1u << 20, flag, &o->batch)) {
      if (rank == 0) fprintf(stderr, "adjoin-dottest: %s\n", adj_last_error());
      return 2;
    } else if (!batch && adj_parse_count(flag, value, seed ? &o->seed : NULL, &o->min_ranks, rank)) return 2;
  }
  if (o->batch == 0 || ((o->placement || o->batch != 4) && !o->net)) {
    if (rank == 0)
      fprintf(stderr, "adjoin-dottest: %s\n%s", o->batch ? "--placement and --batch go with --net FILE" : "--batch 0",
              usage);
    return 2;
  }
  return 0;
}

/* Ranks not needed by a case wait here without spinning, so the ranks that work
 * get the cores (tests oversubscribe a 2-core machine). */
static void adj_quiet_barrier(MPI_Comm comm) {
  MPI_Request request;
  MPI_Ibarrier(comm, &request);
  adj_wait_all(1, &request, ADJ_WAIT_YIELD);
}

/* ---- --net: a described network --------------------------------------------------------- */

typedef struct adj_net_tally {
  int passed, failed;
} adj_net_tally;

/* Proves the network at one placement on comm (the first ranks of the run;
 * MPI_COMM_NULL on the others, which wait) and prints its row. */
static void adj_prove(const adj_dottest_options *o, MPI_Comm comm, const adj_description *d, const adj_placement *p,
                      int rank, adj_net_tally *tally) {
  adj_network_check_config c = {.description = d, .placement = p, .comm = comm, .dtype = ADJ_FLOAT64,
                                .batch = (int64_t)o->batch, .seed = 432 + o->seed};
  adj_network_check_result r = {0};
  int status = comm != MPI_COMM_NULL ? adj_network_check(&c, &r) : 0;
  adj_quiet_barrier(MPI_COMM_WORLD);
  /* Rank 0 always proves; the ranks left out of comm take its verdict, so
   * every rank counts alike and exits alike. */
  int ok = status == 0 && r.passed;
  MPI_Bcast(&ok, 1, MPI_INT, 0, MPI_COMM_WORLD);
  ok ? tally->passed++ : tally->failed++;
  if (rank != 0) return;
  if (status)
    printf("%-14s %-36s %5s  FAIL (%s: %s)\n", d->name, p ? p->name : "own", "-", adj_status_name(status),
           adj_last_error());
  else
    printf("%-14s %-36s %5d  %10.2e %10.2e %10.2e %10.2e  %s\n", d->name, p ? p->name : "own", r.ranks,
           r.jacobian.relative_error, r.output_diff, r.input_gradient_diff, r.parameter_gradient_diff,
           ok ? "pass" : "FAIL");
  fflush(stdout);
}

/* The names of the placement files beside the network file (rank 0 reads
 * the directory; every rank gets the list), one per line. */
static char *adj_shipped_names(const char *net, int rank) {
  char list[8192] = "";
  if (rank == 0) adj_placement_names(net, "\n", list, sizeof list);
  MPI_Bcast(list, (int)sizeof list, MPI_CHAR, 0, MPI_COMM_WORLD);
  return strdup(list);
}

/* Every shipped placement that uses exactly `ranks` ranks, and every
 * enumerated one, on comm (the first `ranks` ranks). */
static void adj_prove_all(const adj_dottest_options *o, MPI_Comm comm, int ranks, const adj_description *d,
                          const char *shipped, int rank, adj_net_tally *tally) {
  char *names = strdup(shipped);
  char *save = NULL;
  for (char *name = strtok_r(names, "\n", &save); name; name = strtok_r(NULL, "\n", &save)) {
    adj_placement *p = NULL;
    adj_network_layout layout = {0};
    int fits = comm != MPI_COMM_NULL && !adj_placement_find(comm, d, o->net, name, &p) &&
               !adj_placement_resolve(d, p, (int64_t)o->batch, &layout) && layout.ranks == ranks;
    MPI_Bcast(&fits, 1, MPI_INT, 0, MPI_COMM_WORLD);
    if (fits) adj_prove(o, comm, d, p, rank, tally);
    adj_network_layout_free(&layout);
    adj_placement_destroy(&p);
  }
  free(names);
  adj_uniform_placement *list = NULL;
  int n = 0;
  adj_placement_enumerate(d, ranks, (int64_t)o->batch, &list, &n);
  for (int i = 0; i < n; i++) {
    adj_placement *p = NULL;
    adj_placement_uniform(d, &list[i], &p);
    adj_prove(o, comm, d, p, rank, tally);
    adj_placement_destroy(&p);
  }
  adj_uniform_placement_list_free(&list);
}

static int adj_run_network(const adj_dottest_options *o, MPI_Comm *comms, int rank, int size) {
  adj_description *d = NULL;
  if (adj_description_read_all(MPI_COMM_WORLD, o->net, &d)) {
    if (rank == 0) fprintf(stderr, "adjoin-dottest: %s\n", tool_error());
    return 1;
  }
  if (rank == 0)
    printf("%-14s %-36s %5s  %10s %10s %10s %10s  %s\n", "network", "placement", "ranks", "jacobian", "output",
           "input grad", "par. grads", "result (float64, relative; tolerance 1e-12)");
  adj_net_tally tally = {0};
  if (o->placement && !strcmp(o->placement, "all")) {
    char *shipped = adj_shipped_names(o->net, rank);
    for (int n = o->min_ranks > 1 ? o->min_ranks : 1; n <= size; n++)
      adj_prove_all(o, comms[n], n, d, shipped, rank, &tally);
    free(shipped);
  } else {
    adj_placement *p = NULL;
    if (adj_placement_find(MPI_COMM_WORLD, d, o->net, o->placement, &p)) tally.failed++;
    if (rank == 0 && !p) fprintf(stderr, "adjoin-dottest: %s\n", tool_error());
    if (p) adj_prove(o, MPI_COMM_WORLD, d, p, rank, &tally);
    adj_placement_destroy(&p);
  }
  if (rank == 0) printf("%d passed, %d failed\n", tally.passed, tally.failed);
  adj_description_destroy(&d);
  return tally.failed || !tally.passed ? 1 : 0;
}

int main(int argc, char **argv) {
  int rank, size;
  tool_begin("adjoin-dottest");
  if (tool_begin_mpi(&argc, &argv, &size)) return 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  adj_dottest_options o;
  int code = adj_parse_options(argc, argv, &o, rank);
  if (!code && o.net) {
    MPI_Comm *firsts = calloc((size_t)size + 1, sizeof *firsts);
    for (int n = 1; n <= size; n++) MPI_Comm_split(MPI_COMM_WORLD, rank < n ? 0 : MPI_UNDEFINED, rank, &firsts[n]);
    code = adj_run_network(&o, firsts, rank, size);
    for (int n = 1; n <= size; n++)
      if (firsts[n] != MPI_COMM_NULL) MPI_Comm_free(&firsts[n]);
    free(firsts);
    return tool_end(code);
  }
  adj_battery b;
  if (!code && adj_battery_build(&b)) {
    if (rank == 0) fprintf(stderr, "adjoin-dottest: %s\n", tool_error());
    code = 1;
  }
  if (code) return tool_end(code < 0 ? 0 : code);
  /* One communicator per rank count: the first n ranks. */
  MPI_Comm *comms = calloc((size_t)size + 1, sizeof *comms);
  for (int n = 1; n <= size; n++) MPI_Comm_split(MPI_COMM_WORLD, rank < n ? 0 : MPI_UNDEFINED, rank, &comms[n]);
  int passed = 0, failed = 0, skipped = 0, matched = 0;
  if (rank == 0 && !o.list)
    printf("%-14s %5s  %-26s %-18s %-7s %12s  %s\n", "operator", "ranks", "partitions", "global shape", "dtype",
           "rel. error", "result (integers: the exact difference)");
  for (int i = 0; i < b.count; i++) {
    const adj_battery_case *c = &b.cases[i];
    if ((o.filter && !strstr(c->name, o.filter)) || c->ranks < o.min_ranks) continue;
    matched++;
    if (o.list) {
      if (rank == 0) printf("%s\n", c->name);
      continue;
    }
    if (c->ranks > size) {
      skipped++;
      if (rank == 0)
        printf("%-14s %5d  %-26s %-18s %-7s %12s  skipped (needs %d ranks)\n", c->op, c->ranks, c->partitions,
               c->shape, adj_dtype_name(c->dtype), "-", c->ranks);
      continue;
    }
    adj_dottest_result r = {0};
    int status = 0;
    if (rank < c->ranks) {
      adj_clear_error();
      adj_battery_case seeded = *c;
      seeded.seed = o.seed;
      status = c->run(comms[c->ranks], &seeded, &r);
    }
    adj_quiet_barrier(MPI_COMM_WORLD);
    double tolerance = adj_dottest_tolerance(c->dtype, c->is_layer);
    int ok = status == 0 && r.relative_error <= tolerance;
    ok ? passed++ : failed++;
    if (rank == 0) {
      if (status)
        printf("%-14s %5d  %-26s %-18s %-7s %12s  FAIL (%s: %s) [%s]\n", c->op, c->ranks, c->partitions, c->shape,
               adj_dtype_name(c->dtype), "-", adj_status_name(status), adj_last_error(), c->name);
      else if (r.exact)
        printf("%-14s %5d  %-26s %-18s %-7s %12lld  %s (exact: <Fx,y> = %lld, <x,F*y> = %lld)\n", c->op, c->ranks,
               c->partitions, c->shape, adj_dtype_name(c->dtype), (long long)(r.range_inner_int - r.domain_inner_int),
               ok ? "pass" : "FAIL", (long long)r.range_inner_int, (long long)r.domain_inner_int);
      else
        printf("%-14s %5d  %-26s %-18s %-7s %12.3e  %s\n", c->op, c->ranks, c->partitions, c->shape,
               adj_dtype_name(c->dtype), r.relative_error, ok ? "pass" : "FAIL");
      fflush(stdout);
    }
  }
  /* A filter that selects nothing is most likely a typo: say so and fail
   * rather than print "0 passed, 0 failed" and exit 0. */
  if (!matched && rank == 0)
    fprintf(stderr, "adjoin-dottest: no case matches --filter '%s' with --min-ranks %d (see --list)\n",
            o.filter ? o.filter : "", o.min_ranks);
  if (rank == 0 && !o.list && matched) {
    if (skipped) printf("%d passed, %d failed, %d skipped\n", passed, failed, skipped);
    else printf("%d passed, %d failed\n", passed, failed);
  }
  for (int n = 1; n <= size; n++)
    if (comms[n] != MPI_COMM_NULL) MPI_Comm_free(&comms[n]);
  free(comms);
  adj_battery_free(&b);
  return tool_end(failed || !matched ? 1 : 0);
}
