/* What a per-application agreement costs at the least, in raw MPI.
 *
 * Check level full agrees on every application: every rank learns every
 * other rank's status (docs/checking.md).  This times an 8 KB MPI_Bcast on
 * two ranks alone and with the cheapest ways raw MPI has to exchange one
 * integer status alongside or around it, so the ratio any agreeing
 * implementation can reach is read off in one run.  Two ranks only: the
 * point-to-point forms exchange with the one peer.  The last way passes the
 * status through a shared-memory window (MPI_Win_allocate_shared), with no
 * message at all: each rank publishes its status and a count of
 * applications in its own cache line and spins until the other's count
 * catches up, the cheapest on-node agreement there is.
 *
 *   mpiexec -n 2 build/bench/bench-agreement-floor [DOUBLES]   (default 1024) */
#include <mpi.h>
#include <stdio.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "bench_host.h"

enum { REPETITIONS = 20000, TRIALS = 5, WAYS = 7 };

/* One rank's slot in the shared window, a cache line of its own: the number
 * of applications it has published, and its status in the last of them. */
typedef struct status_slot {
  _Atomic uint64_t published;
  int status;
  char pad[64 - sizeof(uint64_t) - sizeof(int)];
} status_slot;

static status_slot *slots; /* both ranks' slots, rank order */
static uint64_t applications;

static const char *const way_names[WAYS] = {
    "MPI_Bcast alone",
    "status Isend/Irecv around MPI_Bcast",
    "status MPI_Iallreduce around MPI_Bcast",
    "status MPI_Allreduce, then MPI_Bcast",
    "data and status Isend/Irecv",
    "MPI_Bcast, then status MPI_Sendrecv",
    "status in a shared window around MPI_Bcast",
};

/* One application of way w: move `count` doubles from rank 0 and the status
 * of each rank to the other.  `status_comm` keeps the status apart from the
 * data, as the library's agreement uses its own communicator. */
static void apply_way(int w, double *data, int count, MPI_Comm comm, MPI_Comm status_comm, int peer) {
  int mine = 0, theirs = 0, rank;
  MPI_Comm_rank(comm, &rank);
  MPI_Request requests[2];
  MPI_Status statuses[2];
  switch (w) {
  case 0: MPI_Bcast(data, count, MPI_DOUBLE, 0, comm); break;
  case 1:
    MPI_Irecv(&theirs, 1, MPI_INT, peer, 0, status_comm, &requests[0]);
    MPI_Isend(&mine, 1, MPI_INT, peer, 0, status_comm, &requests[1]);
    MPI_Bcast(data, count, MPI_DOUBLE, 0, comm);
    MPI_Waitall(2, requests, statuses);
    break;
  case 2:
    MPI_Iallreduce(&mine, &theirs, 1, MPI_INT, MPI_MAX, status_comm, &requests[0]);
    MPI_Bcast(data, count, MPI_DOUBLE, 0, comm);
    MPI_Wait(&requests[0], statuses);
    break;
  case 3:
    MPI_Allreduce(&mine, &theirs, 1, MPI_INT, MPI_MAX, status_comm);
    MPI_Bcast(data, count, MPI_DOUBLE, 0, comm);
    break;
  case 4:
    if (rank == 0) {
      MPI_Irecv(&theirs, 1, MPI_INT, peer, 0, status_comm, &requests[0]);
      MPI_Isend(data, count, MPI_DOUBLE, peer, 1, comm, &requests[1]);
    } else {
      MPI_Irecv(data, count, MPI_DOUBLE, peer, 1, comm, &requests[0]);
      MPI_Isend(&mine, 1, MPI_INT, peer, 0, status_comm, &requests[1]);
    }
    MPI_Waitall(2, requests, statuses);
    break;
  case 5:
    MPI_Bcast(data, count, MPI_DOUBLE, 0, comm);
    MPI_Sendrecv(&mine, 1, MPI_INT, peer, 0, &theirs, 1, MPI_INT, peer, 0, status_comm, statuses);
    break;
  default:
    /* The release store publishes the status with the count; the acquire
     * load that sees the peer's count sees its status.  A peer cannot run
     * two applications ahead: it waits here for this rank's count. */
    applications++;
    slots[rank].status = mine;
    atomic_store_explicit(&slots[rank].published, applications, memory_order_release);
    MPI_Bcast(data, count, MPI_DOUBLE, 0, comm);
    while (atomic_load_explicit(&slots[peer].published, memory_order_acquire) < applications) continue;
    theirs = slots[peer].status;
  }
}

/* Best over TRIALS of the mean over REPETITIONS, the slower rank's. */
static double time_way(int w, double *data, int count, MPI_Comm comm, MPI_Comm status_comm, int peer) {
  double best = 1e30;
  for (int t = 0; t < TRIALS; t++) {
    MPI_Barrier(comm);
    double start = MPI_Wtime();
    for (int i = 0; i < REPETITIONS; i++) apply_way(w, data, count, comm, status_comm, peer);
    double mean = (MPI_Wtime() - start) / REPETITIONS;
    MPI_Allreduce(MPI_IN_PLACE, &mean, 1, MPI_DOUBLE, MPI_MAX, comm);
    if (mean < best) best = mean;
  }
  return best;
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank, size;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  static const char usage[] = "usage: mpiexec -n 2 bench-agreement-floor [DOUBLES]";
  const char *given[1];
  int n_given = 0, status =
      bench_parse_arguments("bench-agreement-floor", usage, argc, argv, NULL, 0, 1, given, &n_given, rank == 0);
  long long count = 1024;
  if (status == BENCH_RUN && n_given &&
      !bench_parse_count("bench-agreement-floor", "DOUBLES", given[0], 1, 1 << 24, rank == 0, &count)) {
    if (rank == 0) fprintf(stderr, "%s\n", usage);
    status = 2;
  }
  if (status == BENCH_RUN && size != 2) {
    if (rank == 0) fprintf(stderr, "bench-agreement-floor: needs exactly 2 ranks, not %d\n%s\n", size, usage);
    status = 2;
  }
  if (status != BENCH_RUN) {
    MPI_Finalize();
    return status;
  }
  MPI_Comm comm, status_comm;
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_dup(MPI_COMM_WORLD, &status_comm);
  MPI_Win window;
  status_slot *base;
  MPI_Win_allocate_shared(rank == 0 ? 2 * sizeof(status_slot) : 0, sizeof(status_slot), MPI_INFO_NULL, comm, &base,
                          &window);
  MPI_Aint window_bytes;
  int displacement_unit;
  MPI_Win_shared_query(window, 0, &window_bytes, &displacement_unit, &slots);
  memset(&slots[rank], 0, sizeof slots[rank]);
  MPI_Barrier(comm);
  double *data = calloc((size_t)count, sizeof *data);
  if (rank == 0) printf("bench-agreement-floor: 2 ranks, %lld doubles (%.1f KB)\n", count, count * 8 / 1024.0);
  double alone = 0;
  for (int w = 0; w < WAYS; w++) {
    double seconds = time_way(w, data, (int)count, comm, status_comm, 1 - rank);
    if (w == 0) alone = seconds;
    if (rank == 0) printf("%-44s %7.2f us  %5.2fx\n", way_names[w], seconds * 1e6, seconds / alone);
  }
  free(data);
  MPI_Win_free(&window);
  MPI_Comm_free(&comm);
  MPI_Comm_free(&status_comm);
  MPI_Finalize();
  return 0;
}
