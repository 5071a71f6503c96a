/* bench_host.h */
#include "bench_host.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/adjoin.h"

/* The names of the ARM cores in the cloud machines users rent (Graviton 2-4,
 * Ampere Altra, Grace, Axion, Cobalt), by MIDR implementer and part. */
static const char *bench_arm_core_name(long implementer, long part) {
  static const struct {
    long implementer, part;
    const char *name;
  } cores[] = {{0x41, 0xd0c, "Arm Neoverse-N1"},
               {0x41, 0xd40, "Arm Neoverse-V1"},
               {0x41, 0xd49, "Arm Neoverse-N2"},
               {0x41, 0xd4f, "Arm Neoverse-V2"}};
  for (size_t i = 0; i < sizeof cores / sizeof *cores; i++)
    if (cores[i].implementer == implementer && cores[i].part == part) return cores[i].name;
  return NULL;
}

void bench_cpu_model_read(FILE *cpuinfo, char *text, size_t size) {
  snprintf(text, size, "?");
  long implementer = -1, part = -1;
  char line[512];
  while (fgets(line, sizeof line, cpuinfo)) {
    char *colon = strchr(line, ':');
    if (!colon) continue;
    char *value = colon + 1 + (colon[1] == ' ');
    value[strcspn(value, "\n")] = 0;
    if (!strncmp(line, "model name", 10)) {
      snprintf(text, size, "%s", value);
      return;
    }
    if (!strncmp(line, "CPU implementer", 15) && implementer < 0) implementer = strtol(value, NULL, 0);
    if (!strncmp(line, "CPU part", 8) && part < 0) part = strtol(value, NULL, 0);
  }
  if (implementer < 0 || part < 0) return;
  const char *name = bench_arm_core_name(implementer, part);
  if (name) snprintf(text, size, "%s (implementer 0x%02lx part 0x%03lx)", name, implementer, part);
  else snprintf(text, size, "implementer 0x%02lx part 0x%03lx", implementer, part);
}

void bench_cpu_model(char *text, size_t size) {
  snprintf(text, size, "?");
  FILE *f = fopen("/proc/cpuinfo", "r");
  if (!f) return;
  bench_cpu_model_read(f, text, size);
  fclose(f);
}

void bench_blas_note(FILE *out) {
  char advice[256];
  if (adj_blas_kernels_behind(advice, sizeof advice)) fprintf(out, "note: %s\n", advice);
}

/* Both parsers decide through parse.h (whole string, range-checked in the
 * type the value is stored in) and say it in the benchmarks' own words. */
bool bench_parse_count(const char *program, const char *what, const char *text, long long min, long long max,
                       bool say, long long *value) {
  int64_t parsed;
  if (!adj_parse_int64(text, min, max, what, &parsed)) {
    *value = parsed;
    return true;
  }
  if (say) fprintf(stderr, "%s: %s '%s' is not a whole number from %lld to %lld\n", program, what, text, min, max);
  return false;
}

bool bench_parse_real(const char *program, const char *what, const char *text, double above, double most, bool say,
                      double *value) {
  double parsed;
  if (!adj_parse_real(text, above, most, what, &parsed) && parsed > above) {
    *value = parsed;
    return true;
  }
  if (say) fprintf(stderr, "%s: %s '%s' is not a number above %g and at most %g\n", program, what, text, above, most);
  return false;
}

static bool asks_help(const char *text) { return !strcmp(text, "--help") || !strcmp(text, "-h"); }

/* Text that reads as an option: "--" or "-" and a letter ("-3" is a number). */
static bool looks_like_option(const char *text) {
  return text[0] == '-' && (text[1] == '-' || (text[1] >= 'a' && text[1] <= 'z') || (text[1] >= 'A' && text[1] <= 'Z'));
}

static const bench_option *find_option(const char *name, const bench_option *options, int count) {
  for (int i = 0; i < count; i++)
    if (!strcmp(name, options[i].name)) return &options[i];
  return NULL;
}

/* Option o from its value text; false after saying why (when `say`). */
static bool take_option(const char *program, const bench_option *o, const char *text, bool say) {
  long long count;
  switch (o->kind) {
  case BENCH_COUNT:
    if (!bench_parse_count(program, o->name, text, (long long)o->min, (long long)o->max, say, &count)) return false;
    *(long long *)o->value = count;
    return true;
  case BENCH_REAL: return bench_parse_real(program, o->name, text, o->min, o->max, say, o->value);
  case BENCH_TEXT: *(const char **)o->value = text; return true;
  case BENCH_FLAG: *(bool *)o->value = true; return true;
  }
  return false;
}

/* argv[*i] (and its value, stepping *i past it) as an option or the next
 * positional argument; false after saying why (when `say`). */
static bool take_argument(const char *program, char **argv, int argc, int *i, const bench_option *options,
                          int option_count, int most_positionals, const char **positionals, int *positional_count,
                          bool say) {
  const char *text = argv[*i];
  const bench_option *o = looks_like_option(text) ? find_option(text, options, option_count) : NULL;
  if (o && o->kind != BENCH_FLAG && *i + 1 >= argc) {
    if (say) fprintf(stderr, "%s: %s needs a value\n", program, text);
    return false;
  }
  if (o) return take_option(program, o, o->kind == BENCH_FLAG ? NULL : argv[++*i], say);
  if (looks_like_option(text)) {
    if (say) fprintf(stderr, "%s: unknown option '%s'\n", program, text);
    return false;
  }
  if (*positional_count >= most_positionals) {
    if (say) fprintf(stderr, "%s: unexpected argument '%s'\n", program, text);
    return false;
  }
  positionals[(*positional_count)++] = text;
  return true;
}

int bench_parse_arguments(const char *program, const char *usage, int argc, char **argv, const bench_option *options,
                          int option_count, int most_positionals, const char **positionals, int *positional_count,
                          bool say) {
  for (int i = 1; i < argc; i++)
    if (asks_help(argv[i])) {
      if (say) printf("%s\n", usage);
      return 0;
    }
  int counted = 0;
  for (int i = 1; i < argc; i++)
    if (!take_argument(program, argv, argc, &i, options, option_count, most_positionals, positionals, &counted,
                       say)) {
      if (say) fprintf(stderr, "%s\n", usage);
      return 2;
    }
  if (positional_count) *positional_count = counted;
  return BENCH_RUN;
}

/* The policy adjoin's operators would use on comm (resolved collectively once
 * per communicator handle; the benchmarks use one or two). */
static adj_wait_policy bench_policy(MPI_Comm comm) {
  static MPI_Comm resolved_for = MPI_COMM_NULL;
  static adj_wait_policy policy = ADJ_WAIT_YIELD;
  if (comm != resolved_for && adj_wait_policy_resolve(comm, ADJ_WAIT_AUTO, &policy) == ADJ_SUCCESS)
    resolved_for = comm;
  return policy;
}

static void barrier_waiting(MPI_Comm comm, adj_wait_policy policy) {
  MPI_Request request;
  MPI_Ibarrier(comm, &request);
  adj_wait_all(1, &request, policy);
}

void bench_barrier(MPI_Comm comm) { barrier_waiting(comm, bench_policy(comm)); }

void bench_barrier_yielding(MPI_Comm comm) { barrier_waiting(comm, ADJ_WAIT_YIELD); }

double bench_max(MPI_Comm comm, double value) {
  adj_wait_policy policy = bench_policy(comm);
  double largest = value;
  MPI_Request request;
  MPI_Iallreduce(&value, &largest, 1, MPI_DOUBLE, MPI_MAX, comm, &request);
  adj_wait_all(1, &request, policy);
  return largest;
}

int bench_repetitions(double seconds, double once, int least, int most) {
  double slowest;
  MPI_Allreduce(&once, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  int reps = slowest > 0 ? (int)(seconds / slowest) : 1000;
  return reps < least ? least : reps > most ? most : reps;
}

int bench_compare_doubles(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}
