/* Agreement on a status across ranks: the collective half of adjoin's error
 * handling (docs/collective-safety.md).
 *
 * An error only one rank can see (a bad tensor, an allocation failing) must not
 * leave the other ranks waiting in a collective it will never join, and every
 * rank should report the same clear error.  Operators, layers, networks and the
 * trainer agree on their status at the points collective-safety.md lists,
 * each with one small nonblocking all-reduce (and a broadcast of the message
 * on the failure path only); on a communicator the library owns (an
 * operator's or a layer's) of up to 8 ranks, with point-to-point messages
 * from every rank to every other instead (docs/checking.md). */
#ifndef ADJOIN_AGREE_H
#define ADJOIN_AGREE_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "adjoin/export.h"
#include "adjoin/wait.h"

ADJ_BEGIN_DECLS

/* Agrees on a status across comm: if any rank passes a nonzero status, every rank
 * returns nonzero and the message of the lowest failing rank (prefixed with
 * "rank R: ") becomes every rank's adj_last_error(), and its code every rank's
 * return value (a rank that failed too returns the lowest failing rank's code,
 * so all return alike).  Collective on comm; uses nonblocking collectives
 * completed with policy. */
int adj_status_agree(MPI_Comm comm, int status, adj_wait_policy policy);

/* adj_status_agree that also checks, in the same reduction, that `choice` is
 * the same on every rank: if not (and no rank failed), every rank returns
 * ADJ_ERR_ARG with "<what> on some ranks and not on others".  what NULL: no
 * such check.  E.g. a layer's "dx is NULL". */
int adj_status_agree_choice(MPI_Comm comm, int status, bool choice, const char *what, adj_wait_policy policy);

/* How many agreements (adj_status_agree on a communicator of more than one
 * rank, each one small all-reduce) this process has taken part in so far:
 * what the collective error guarantee costs a program, e.g. per training
 * step.  Counts on the calling thread's process; not collective. */
uint64_t adj_status_agreements(void);

ADJ_END_DECLS

#endif
