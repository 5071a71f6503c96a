/* Benchmark: what one status agreement costs the library, by the two ways it
 * agrees (core/agree.c), on the ranks it is given.
 *
 *   reduction   adj_status_agree_post: one MPI_Iallreduce of the proposals, the
 *               way on a communicator of the caller's;
 *   exchange    adj_status_agree_post_private: every rank sends its proposals
 *               to every other, all posted at once, the way on an operator's or
 *               a layer's own communicator of up to ADJ_AGREEMENT_EXCHANGE_MAX
 *               ranks (beyond it, the reduction again).
 *
 * Both run on the same duplicate of MPI_COMM_WORLD and wait with the policy it
 * resolves to (yield when the ranks outnumber the cores).  Trials alternate
 * the two ways; a trial repeats one for about --seconds and its time is the
 * slowest rank's mean; the table gives each way's best and median trial and
 * the ratio of the bests.
 *
 *   mpiexec -n 4 build/bench/bench-agreement [--seconds 0.2] [--trials 7] */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/adjoin.h"
#include "agree_impl.h"
#include "bench_host.h"

enum { WAYS = 2, MAX_TRIALS = 99 };

static const char *const way_names[WAYS] = {"reduction (MPI_Iallreduce)", "exchange (point to point)"};

/* One agreement on success by way w; nonzero when it does not agree to success. */
static int agree_once(int w, MPI_Comm comm, adj_wait_policy wait) {
  adj_agreement agreement;
  int posted = w == 0 ? adj_status_agree_post(comm, ADJ_SUCCESS, false, &agreement)
                      : adj_status_agree_post_private(comm, ADJ_SUCCESS, false, &agreement);
  return posted ? posted : adj_status_agree_complete(&agreement, NULL, wait);
}

/* The slowest rank's mean seconds per agreement over `repetitions`. */
static double time_trial(int w, long repetitions, MPI_Comm comm, adj_wait_policy wait) {
  bench_barrier(comm);
  double start = MPI_Wtime();
  for (long i = 0; i < repetitions; i++)
    if (agree_once(w, comm, wait)) {
      fprintf(stderr, "bench-agreement: %s\n", adj_last_error());
      MPI_Abort(comm, 1);
    }
  return bench_max(comm, (MPI_Wtime() - start) / (double)repetitions);
}

int main(int argc, char **argv) {
  int rank, size;
  if (adj_init(&argc, &argv, &rank, &size)) return 1;
  double seconds = 0.2;
  long long asked_trials = 7;
  const bench_option options[] = {{"--seconds", BENCH_REAL, 0, 60, &seconds},
                                  {"--trials", BENCH_COUNT, 1, MAX_TRIALS, &asked_trials}};
  static const char usage[] = "usage: mpiexec -n P bench-agreement [--seconds S] [--trials N]";
  int status = bench_parse_arguments("bench-agreement", usage, argc, argv, options, 2, 0, NULL, NULL, rank == 0);
  if (status != BENCH_RUN) {
    adj_finalize();
    return status;
  }
  int trials = (int)asked_trials;
  MPI_Comm comm;
  adj_wait_policy wait;
  if (adj_comm_dup_with_policy(MPI_COMM_WORLD, &comm, &wait)) return 1;
  /* Repetitions per trial from a short probe of the slower way. */
  double probe = time_trial(0, 200, comm, wait);
  long repetitions = (long)(seconds / (probe > 1e-7 ? probe : 1e-7));
  if (repetitions < 100) repetitions = 100;
  double times[WAYS][MAX_TRIALS];
  for (int t = 0; t < trials; t++)
    for (int w = 0; w < WAYS; w++) times[w][t] = time_trial(w, repetitions, comm, wait);
  if (rank == 0) {
    printf("bench-agreement: %d ranks, wait policy %s, %d trials of %ld agreements, exchange up to %d ranks\n", size,
           wait == ADJ_WAIT_YIELD ? "yield" : "spin", trials, repetitions, (int)ADJ_AGREEMENT_EXCHANGE_MAX);
    double best[WAYS];
    for (int w = 0; w < WAYS; w++) {
      qsort(times[w], (size_t)trials, sizeof times[w][0], bench_compare_doubles);
      best[w] = times[w][0];
      printf("%-28s best %8.2f us  median %8.2f us\n", way_names[w], best[w] * 1e6, times[w][trials / 2] * 1e6);
    }
    printf("exchange / reduction (bests): %.3f%s\n", best[1] / best[0],
           size > ADJ_AGREEMENT_EXCHANGE_MAX ? " (beyond the limit the exchange reduces too)" : "");
  }
  MPI_Comm_free(&comm);
  adj_finalize();
  return 0;
}
