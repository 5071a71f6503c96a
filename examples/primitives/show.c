#include <stdio.h>
#include <stdlib.h>

#include "show.h"

enum { SHOW_LINE = 200 };

void show_blocks(MPI_Comm comm, const char *title, const adj_tensor *t) {
  int rank, size;
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  char line[SHOW_LINE], shape[64];
  int used = snprintf(line, sizeof line, "  rank %d holds %-7s", rank, adj_shape_format(shape, sizeof shape, t->rank, t->shape));
  for (int64_t i = 0; i < adj_tensor_volume(t) && used < SHOW_LINE; i++)
    used += snprintf(line + used, sizeof line - (size_t)used, " %g", adj_tensor_get(t, i));
  /* Gathering to one printer keeps the lines in rank order; separate printf
   * calls from several ranks interleave unpredictably. */
  char *all = rank == 0 ? malloc((size_t)size * SHOW_LINE) : NULL;
  MPI_Gather(line, SHOW_LINE, MPI_CHAR, all, SHOW_LINE, MPI_CHAR, 0, comm);
  if (rank == 0) {
    printf("%s\n", title);
    for (int r = 0; r < size; r++) printf("%s\n", all + (size_t)r * SHOW_LINE);
    fflush(stdout);
    free(all);
  }
}

int example_begin(int *argc, char ***argv, const char *name) {
  int rank, size;
  EXAMPLE_CHECK(adj_init(argc, argv, &rank, &size));
  if (size < 4) {
    if (rank == 0) fprintf(stderr, "%s needs at least 4 ranks: mpiexec -n 4 %s\n", name, name);
    adj_finalize();
    exit(1);
  }
  return rank;
}

void example_fail(const char *what, int status) {
  fprintf(stderr, "%s failed: %s: %s\n", what, adj_status_name(status), adj_last_error());
  MPI_Abort(MPI_COMM_WORLD, 1);
}
