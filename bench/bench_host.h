/* Where a benchmark ran: the CPU model and the instruction-set level of the
 * kernels, for the first line of its report. */
#ifndef ADJOIN_BENCH_HOST_H
#define ADJOIN_BENCH_HOST_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

/* The CPU's model into text, from /proc/cpuinfo: x86's "model name", or an
 * ARM core's MIDR implementer and part (named where known: Linux on aarch64
 * prints no model name); "?" where neither is there. */
void bench_cpu_model(char *text, size_t size);
/* The same from an open /proc/cpuinfo-formatted stream. */
void bench_cpu_model_read(FILE *cpuinfo, char *text, size_t size);

/* A line "note: ..." on out when OpenBLAS runs kernels below this CPU's
 * (adj_blas_kernels_behind): its GEMMs, and the sgemm reference, are then
 * slower than the host allows. */
void bench_blas_note(FILE *out);

/* A positional argument `what` read as a whole number in [min, max] into
 * *value; false, with a line on stderr naming the argument and the text given
 * (when `say`: rank 0 says it, the others fail silently alike), otherwise. */
bool bench_parse_count(const char *program, const char *what, const char *text, long long min, long long max,
                       bool say, long long *value);

/* A positional argument or option value `what` read as a real number above
 * `above` and at most `most` into *value (NaN is neither); false, with a line
 * on stderr naming `what` and the text given (when `say`), otherwise. */
bool bench_parse_real(const char *program, const char *what, const char *text, double above, double most, bool say,
                      double *value);

/* The command line of a benchmark: what bench_parse_arguments returns when
 * the benchmark is to run; any other value is the status to exit with, every
 * rank alike (0 after the usage on stdout for --help or -h anywhere, 2 after
 * a line naming a refused argument and the usage on stderr). */
enum { BENCH_RUN = -1 };

/* An option NAME taking a value (a whole number in [min, max] into a long
 * long, a real number in (min, max] into a double, any text into a const
 * char *) or none (a flag: true into a bool). */
typedef enum { BENCH_FLAG, BENCH_COUNT, BENCH_REAL, BENCH_TEXT } bench_option_kind;
typedef struct bench_option {
  const char *name;
  bench_option_kind kind;
  double min, max;
  void *value;
} bench_option;

/* argv[1..] as `options` (any order) followed by at most `most_positionals`
 * positional arguments, whose texts go to positionals[0..] (*positional_count
 * of them; either may be NULL when most_positionals is 0).  Refused: an
 * argument starting "--" or "-" and a letter that names no option (text such
 * as "-3" is positional, for its own parser to refuse by name), an option
 * without its value or with a value out of range, and a positional argument
 * beyond `most_positionals`.  Rank 0 (`say`) prints; usage is the usage
 * line(s), without a final newline. */
int bench_parse_arguments(const char *program, const char *usage, int argc, char **argv, const bench_option *options,
                          int option_count, int most_positionals, const char **positionals, int *positional_count,
                          bool say);

/* A barrier on comm, and the largest of each rank's `value`, completed under
 * adjoin's wait policy for comm: MPI_Barrier and MPI_Allreduce spin, and with
 * more ranks than cores a spinning rank holds its core until the scheduler's
 * next tick (4 ms at HZ 250), which would then be timed as the work after it. */
void bench_barrier(MPI_Comm comm);
double bench_max(MPI_Comm comm, double value);

/* A barrier on comm completed by yielding whatever the policy: for the
 * benchmarks whose timed calls always yield between their own (bench-halo and
 * bench-primitives), where a spinning barrier on 2 ranks would change what
 * the next call finds the other rank doing. */
void bench_barrier_yielding(MPI_Comm comm);

/* How many calls make a timed run last about `seconds`, from this rank's
 * time for one call: the slowest rank's time decides (a spinning
 * MPI_Allreduce, outside any timed region), so every rank makes the same
 * calls; clamped to [least, most]. */
int bench_repetitions(double seconds, double once, int least, int most);

/* qsort's comparison of two doubles, ascending. */
int bench_compare_doubles(const void *a, const void *b);

/* The placements of networks/lenet5.net the LeNet-5 benchmarks name in
 * their messages (files beside it and the schemes of placement.h). */
#define BENCH_LENET5_PLACEMENTS "sequential, dist2, dist4, dist8, fig7, hybrid4, hybrid4-batch, RxC, window=...,fc=..."

#endif
