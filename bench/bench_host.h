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

#endif
