/* Private: an agreement in two halves, so a caller can post it, move data
 * while the status reduction travels, and read the outcome after.  Both
 * halves are collective on comm; every rank that posts must complete. */
#ifndef ADJOIN_CORE_AGREE_IMPL_H
#define ADJOIN_CORE_AGREE_IMPL_H

#include <mpi.h>
#include <stdbool.h>

#include "adjoin/wait.h"

typedef struct adj_agreement {
  MPI_Comm comm;
  int size, rank, status;
  int mine[3], low[3];
  MPI_Request request;
} adj_agreement;

/* Posts the reduction of adj_status_agree_choice.  A rank whose status is
 * nonzero keeps its message in adj_last_error() until the completion, which
 * sends it to the others. */
int adj_status_agree_post(MPI_Comm comm, int status, bool choice, adj_agreement *agreement);
/* Completes it: the outcome adj_status_agree_choice would return. */
int adj_status_agree_complete(adj_agreement *agreement, const char *what, adj_wait_policy policy);

#endif
