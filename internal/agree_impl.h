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
  int mine[3], low[3], theirs[3];
  bool pair;               /* two ranks on a private communicator: point-to-point */
  MPI_Request requests[2]; /* the reduction; or the send and the receive of a pair */
} adj_agreement;

/* The tag of an agreement's point-to-point messages; no operator sends with it. */
enum { ADJ_AGREEMENT_TAG = 32001 };

/* Posts the reduction of adj_status_agree_choice.  A rank whose status is
 * nonzero keeps its message in adj_last_error() until the completion, which
 * sends it to the others. */
int adj_status_agree_post(MPI_Comm comm, int status, bool choice, adj_agreement *agreement);
/* The same on a communicator adjoin owns (an operator's duplicate), where no
 * receive of the caller's can match a message: two ranks then exchange their
 * proposals as one point-to-point message each way instead of an
 * MPI_Iallreduce, the cheaper round trip (bench-agreement-floor). */
int adj_status_agree_post_private(MPI_Comm comm, int status, adj_agreement *agreement);
/* Completes either: the outcome adj_status_agree_choice would return. */
int adj_status_agree_complete(adj_agreement *agreement, const char *what, adj_wait_policy policy);

#endif
