/* Private: an agreement in two halves, so a caller can post it, move data
 * while the status reduction travels, and read the outcome after.  Both
 * halves are collective on comm; every rank that posts must complete. */
#ifndef ADJOIN_CORE_AGREE_IMPL_H
#define ADJOIN_CORE_AGREE_IMPL_H

#include <mpi.h>
#include <stdbool.h>

#include "adjoin/wait.h"

/* The largest communicator on which an agreement exchanges proposals point to
 * point (size - 1 messages each way per rank); larger ones reduce. */
enum { ADJ_AGREEMENT_EXCHANGE_MAX = 8 };

typedef struct adj_agreement {
  MPI_Comm comm;
  int size, rank, status;
  int mine[3], low[3];
  int theirs[ADJ_AGREEMENT_EXCHANGE_MAX - 1][3]; /* each peer's proposals, when exchanged */
  int peers;                                     /* ranks exchanged with point to point; 0: a reduction */
  MPI_Request requests[2 * (ADJ_AGREEMENT_EXCHANGE_MAX - 1)]; /* the reduction, or sends and receives */
} adj_agreement;

/* The tag of an agreement's point-to-point messages; no operator sends with it. */
enum { ADJ_AGREEMENT_TAG = 32001 };

/* Posts the reduction of adj_status_agree_choice.  A rank whose status is
 * nonzero keeps its message in adj_last_error() until the completion, which
 * sends it to the others. */
int adj_status_agree_post(MPI_Comm comm, int status, bool choice, adj_agreement *agreement);
/* The same on a communicator adjoin owns (an operator's or a layer's
 * duplicate), where no receive of the caller's can match a message: up to
 * ADJ_AGREEMENT_EXCHANGE_MAX ranks then send their proposals to each other as
 * point-to-point messages, all posted at once, instead of an MPI_Iallreduce,
 * whose rounds cost more (bench-agreement-floor). */
int adj_status_agree_post_private(MPI_Comm comm, int status, bool choice, adj_agreement *agreement);
/* Completes either: the outcome adj_status_agree_choice would return. */
int adj_status_agree_complete(adj_agreement *agreement, const char *what, adj_wait_policy policy);
/* adj_status_agree_choice on a communicator adjoin owns: post_private, then
 * complete. */
int adj_status_agree_private(MPI_Comm comm, int status, bool choice, const char *what, adj_wait_policy policy);

#endif
