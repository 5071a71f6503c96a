/* adj_init / adj_finalize in a program that starts and ends MPI itself:
 * adj_init reports rank and size and leaves MPI to the program (adj_finalize
 * must not end it), a second adj_init is harmless, and adj_init after
 * MPI_Finalize fails with a message saying so; a bad ADJ_PROGRESS is refused.
 * (Every other test covers
 * adj_init starting MPI: the harness begins with it.) */
#include <stdlib.h>
#include <string.h>

#include "harness.h"

/* ADJ_PROGRESS: a bad value is refused naming it, on every rank; a progress
 * thread needs MPI_THREAD_MULTIPLE, which this program's MPI (started
 * FUNNELED) does not provide, and adj_init says so. */
static void check_progress_env(adj_test *t) {
  setenv("ADJ_PROGRESS", "sideways", 1);
  int status = adj_init(NULL, NULL, NULL, NULL);
  ADJ_TEST_CHECK(t, status == ADJ_ERR_ARG && strstr(adj_last_error(), "ADJ_PROGRESS='sideways'"),
                 "adj_init with ADJ_PROGRESS=sideways: %s '%s'", adj_status_name(status), adj_last_error());
  adj_test_report(t, "ADJ_PROGRESS=sideways refused: %s", adj_last_error());
  int provided;
  MPI_Query_thread(&provided);
  setenv("ADJ_PROGRESS", "thread", 1);
  status = adj_init(NULL, NULL, NULL, NULL);
  if (provided < MPI_THREAD_MULTIPLE)
    ADJ_TEST_CHECK(t, status == ADJ_ERR_MPI && strstr(adj_last_error(), "MPI_THREAD_MULTIPLE"),
                   "adj_init with ADJ_PROGRESS=thread on MPI at level %d: %s '%s'", provided, adj_status_name(status),
                   adj_last_error());
  adj_test_report(t, "ADJ_PROGRESS=thread on this MPI (level %d): %s %s", provided, adj_status_name(status),
                  status ? adj_last_error() : "");
  unsetenv("ADJ_PROGRESS");
}

int main(int argc, char **argv) {
  int provided = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_FUNNELED, &provided);
  int world_rank, world_size;
  MPI_Comm_rank(MPI_COMM_WORLD, &world_rank);
  MPI_Comm_size(MPI_COMM_WORLD, &world_size);

  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t003-init"); /* adj_init on a running MPI */
  ADJ_TEST_CHECK(&t, t.rank == world_rank && t.size == world_size, "adj_init gave rank %d of %d, MPI says %d of %d",
                 t.rank, t.size, world_rank, world_size);
  int rank = -1, size = -1;
  ADJ_TEST_OK(&t, adj_init(NULL, NULL, &rank, &size));
  ADJ_TEST_CHECK(&t, rank == world_rank && size == world_size, "second adj_init gave rank %d of %d", rank, size);
  ADJ_TEST_OK(&t, adj_init(NULL, NULL, NULL, NULL));
  adj_test_report(&t, "adj_init on an MPI the program started: rank and size as MPI's on %d ranks", world_size);
  check_progress_env(&t);
  int code = adj_test_finish(&t); /* ends with adj_finalize */

  int finalized = 1;
  MPI_Finalized(&finalized);
  if (finalized) {
    fprintf(stderr, "[rank %d] adj_finalize ended the MPI this program started\n", world_rank);
    return 1;
  }
  MPI_Finalize();
  int status = adj_init(&argc, &argv, &rank, &size);
  if (status != ADJ_ERR_MPI || !strstr(adj_last_error(), "already been finalized")) {
    fprintf(stderr, "[rank %d] adj_init after MPI_Finalize: %s '%s', expected ADJ_ERR_MPI naming the finalized MPI\n",
            world_rank, adj_status_name(status), adj_last_error());
    return 1;
  }
  if (world_rank == 0) printf("t003-init: adj_init after MPI_Finalize: %s: %s\n", adj_status_name(status), adj_last_error());
  return code;
}
