#include <mpi.h>
#include <stdbool.h>

#include "adjoin/init.h"
#include "adjoin/status.h"
#include "adjoin/wait.h"
#include "error_impl.h"

/* Whether adj_init started MPI and so adj_finalize must end it.  MPI itself is
 * process-wide state, so this one flag is too. */
static bool adj_init_started_mpi;

static const char *thread_level_name(int level) {
  switch (level) {
  case MPI_THREAD_SINGLE: return "MPI_THREAD_SINGLE";
  case MPI_THREAD_FUNNELED: return "MPI_THREAD_FUNNELED";
  case MPI_THREAD_SERIALIZED: return "MPI_THREAD_SERIALIZED";
  case MPI_THREAD_MULTIPLE: return "MPI_THREAD_MULTIPLE";
  default: return "an unknown thread level";
  }
}

int adj_init(int *argc, char ***argv, int *rank, int *size) {
  int initialized = 0, finalized = 0, provided = MPI_THREAD_SINGLE;
  /* A progress thread (the reducer's or MPI's own) calls MPI beside the
   * caller's thread. */
  adj_progress_mode progress;
  ADJ_CALL(adj_progress_mode_from_env(&progress));
  int needed = progress == ADJ_PROGRESS_POLL ? MPI_THREAD_FUNNELED : MPI_THREAD_MULTIPLE;
  ADJ_CALL_MPI(MPI_Finalized(&finalized));
  ADJ_CHECK(!finalized, ADJ_ERR_MPI, "adj_init: MPI has already been finalized and cannot be started again");
  ADJ_CALL_MPI(MPI_Initialized(&initialized));
  if (initialized) {
    ADJ_CALL_MPI(MPI_Query_thread(&provided));
  } else {
    ADJ_CALL_MPI(MPI_Init_thread(argc, argv, needed, &provided));
    adj_init_started_mpi = true;
  }
  /* Every rank sees the same level from the same MPI library, so the check is
   * found identically everywhere. */
  ADJ_CHECK(provided >= MPI_THREAD_FUNNELED, ADJ_ERR_MPI,
            "adj_init: MPI provides %s but the kernels' thread teams need MPI_THREAD_FUNNELED",
            thread_level_name(provided));
  ADJ_CHECK(provided >= needed, ADJ_ERR_MPI, "adj_init: ADJ_PROGRESS=%s needs MPI_THREAD_MULTIPLE, but MPI provides %s",
            adj_progress_mode_name(progress), thread_level_name(provided));
  if (rank) ADJ_CALL_MPI(MPI_Comm_rank(MPI_COMM_WORLD, rank));
  if (size) ADJ_CALL_MPI(MPI_Comm_size(MPI_COMM_WORLD, size));
  return ADJ_SUCCESS;
}

int adj_finalize(void) {
  if (!adj_init_started_mpi) return ADJ_SUCCESS;
  adj_init_started_mpi = false;
  ADJ_CALL_MPI(MPI_Finalize());
  return ADJ_SUCCESS;
}
