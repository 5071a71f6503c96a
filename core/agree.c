/* Agreement on a status across ranks (see include/adjoin/agree.h). */
#include <stdio.h>

#include "adjoin/agree.h"
#include "adjoin/status.h"
#include "agree_impl.h"
#include "error_impl.h"

static uint64_t adj_agreements;

uint64_t adj_status_agreements(void) { return adj_agreements; }

/* The failure path of an agreement: the lowest failing rank sends its code and
 * message to all. */
static int adj_status_spread(MPI_Comm comm, int rank, int failing, int status, adj_wait_policy policy);

int adj_status_agree(MPI_Comm comm, int status, adj_wait_policy policy) {
  return adj_status_agree_choice(comm, status, false, NULL, policy);
}

int adj_status_agree_choice(MPI_Comm comm, int status, bool choice, const char *what, adj_wait_policy policy) {
  adj_agreement agreement;
  ADJ_CALL(adj_status_agree_post(comm, status, choice, &agreement));
  return adj_status_agree_complete(&agreement, what, policy);
}

/* This rank's proposals.  Lowest failing rank wins (ranks that did not fail
 * propose size, no one); in the same reduction, the lowest rank that chose
 * and the lowest that did not: both exist only when the ranks disagree.
 * Returns whether there is anyone to agree with. */
static bool adj_agreement_open(MPI_Comm comm, int status, bool choice, adj_agreement *a) {
  *a = (adj_agreement){.comm = comm, .status = status, .size = 1, .requests = {MPI_REQUEST_NULL}};
  MPI_Comm_size(comm, &a->size);
  if (a->size == 1) return false;
  adj_agreements++;
  MPI_Comm_rank(comm, &a->rank);
  a->mine[0] = status ? a->rank : a->size;
  a->mine[1] = choice ? a->rank : a->size;
  a->mine[2] = choice ? a->size : a->rank;
  return true;
}

static int adj_agreement_reduce(adj_agreement *a) {
  ADJ_CALL_MPI(MPI_Iallreduce(a->mine, a->low, 3, MPI_INT, MPI_MIN, a->comm, &a->requests[0]));
  return ADJ_SUCCESS;
}

int adj_status_agree_post(MPI_Comm comm, int status, bool choice, adj_agreement *a) {
  return adj_agreement_open(comm, status, choice, a) ? adj_agreement_reduce(a) : ADJ_SUCCESS;
}

int adj_status_agree_post_private(MPI_Comm comm, int status, bool choice, adj_agreement *a) {
  if (!adj_agreement_open(comm, status, choice, a)) return ADJ_SUCCESS;
  if (a->size > ADJ_AGREEMENT_EXCHANGE_MAX) return adj_agreement_reduce(a);
  /* Peer k of size - 1: receive from rank - k, send to rank + k, so every
   * rank's k-th receive matches the k-th send of the rank it names. */
  for (int k = 1; k < a->size; k++, a->peers++) {
    int from = (a->rank - k + a->size) % a->size, to = (a->rank + k) % a->size;
    ADJ_CALL_MPI(MPI_Irecv(a->theirs[k - 1], 3, MPI_INT, from, ADJ_AGREEMENT_TAG, comm, &a->requests[2 * k - 2]));
    ADJ_CALL_MPI(MPI_Isend(a->mine, 3, MPI_INT, to, ADJ_AGREEMENT_TAG, comm, &a->requests[2 * k - 1]));
  }
  return ADJ_SUCCESS;
}

int adj_status_agree_complete(adj_agreement *a, const char *what, adj_wait_policy policy) {
  if (a->size == 1) return a->status;
  ADJ_CALL(adj_wait_all(a->peers ? 2 * a->peers : 1, a->requests, policy));
  if (a->peers) {
    for (int k = 0; k < 3; k++) a->low[k] = a->mine[k];
    for (int p = 0; p < a->peers; p++)
      for (int k = 0; k < 3; k++)
        if (a->theirs[p][k] < a->low[k]) a->low[k] = a->theirs[p][k];
  }
  if (a->low[0] < a->size) return adj_status_spread(a->comm, a->rank, a->low[0], a->status, policy);
  if (what && a->low[1] < a->size && a->low[2] < a->size)
    return adj_error_set(ADJ_ERR_ARG, "%s on some ranks and not on others (a collective choice): so on rank %d, not on "
                         "rank %d", what, a->low[1], a->low[2]);
  return ADJ_SUCCESS;
}

int adj_status_agree_private(MPI_Comm comm, int status, bool choice, const char *what, adj_wait_policy policy) {
  adj_agreement agreement;
  ADJ_CALL(adj_status_agree_post_private(comm, status, choice, &agreement));
  return adj_status_agree_complete(&agreement, what, policy);
}

static int adj_status_spread(MPI_Comm comm, int rank, int failing, int status, adj_wait_policy policy) {
  MPI_Request request;
  /* Failure path only: the failing rank sends its code, message and trail
   * to all, so every rank reports where the error was found. */
  struct {
    int code;
    char text[900];
    char trail[1600];
  } report = {0};
  if (rank == failing) {
    report.code = status;
    snprintf(report.text, sizeof report.text, "%s", adj_last_error());
    snprintf(report.trail, sizeof report.trail, "%s", adj_last_error_trace());
  }
  ADJ_CALL_MPI(MPI_Ibcast(&report, (int)sizeof report, MPI_BYTE, failing, comm, &request));
  ADJ_CALL(adj_wait_all(1, &request, policy));
  /* A message already agreed on (nested agreements) keeps its one prefix. */
  int from = -1, used = 0;
  if (sscanf(report.text, "rank %d: %n", &from, &used) == 1 && used > 0) {
    adj_error_set_message(report.text);
  } else {
    char message[1024];
    snprintf(message, sizeof message, "rank %d: %s", failing, report.text);
    adj_error_set_message(message);
  }
  adj_error_set_trace(report.trail);
  return report.code;
}
