/* Completion of nonblocking MPI requests under a chosen wait policy.
 *
 * MPICH busy-polls inside blocking calls.  When more ranks share a node than it
 * has cores (tests run 4-8 ranks on 2 cores) a blocking collective costs
 * milliseconds because the spinning ranks starve the ones that must make
 * progress; testing and yielding the core between tests costs ~200x less (see
 * docs/design.md section 5).  With one rank per core spinning is fastest.  So every
 * adjoin primitive posts nonblocking MPI and completes it here.
 *
 * ADJ_WAIT_AUTO picks yield when the ranks on this node outnumber its online
 * cores, else spin.  The ranks counted are the communicator's on this node or,
 * when the launcher says how many of the job's ranks share the node
 * (MPI_LOCALNRANKS from MPICH's hydra, OMPI_COMM_WORLD_LOCAL_SIZE from Open
 * MPI), those if more: a sub-communicator of 2 ranks on a 2-core node that
 * runs 4 must yield too.  The process's default policy, when not AUTO,
 * overrides what the program asked for: the environment variable
 * ADJ_WAIT_POLICY=spin|yield|auto, read once, or adj_wait_policy_set_default,
 * which replaces it (docs/configuration.md). */
#ifndef ADJOIN_WAIT_H
#define ADJOIN_WAIT_H

#include <mpi.h>
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef enum adj_wait_policy {
  ADJ_WAIT_AUTO = 0,  /* decide from ranks-per-node versus cores */
  ADJ_WAIT_SPIN = 1,  /* MPI_Waitall */
  ADJ_WAIT_YIELD = 2  /* MPI_Testall + sched_yield() until done */
} adj_wait_policy;

/* Nonzero for AUTO, SPIN and YIELD, the values of adj_wait_policy. */
int adj_wait_policy_valid(adj_wait_policy policy);

/* The process's default policy: what adj_wait_policy_set_default set, else
 * ADJ_WAIT_POLICY (read at the first call), else AUTO.  Not collective.
 * ADJ_ERR_ARG naming a value of ADJ_WAIT_POLICY that is not a policy's name,
 * or for a NULL policy. */
int adj_wait_policy_get_default(adj_wait_policy *policy);

/* Sets the process's default policy, in place of ADJ_WAIT_POLICY, for the
 * partitions and operators created from now on.  Not collective, but every
 * rank must set the same.  ADJ_ERR_ARG for a value outside the enum. */
int adj_wait_policy_set_default(adj_wait_policy policy);

/* Resolves AUTO (and the process's default) to SPIN or YIELD for the ranks of
 * comm.  Collective on comm (it counts the ranks sharing this node).  A value
 * outside the enum, or a NULL resolved, is ADJ_ERR_ARG naming it. */
int adj_wait_policy_resolve(MPI_Comm comm, adj_wait_policy requested, adj_wait_policy *resolved);

/* Completes count requests under policy (SPIN or YIELD; AUTO is treated as
 * YIELD).  Not collective. Returns ADJ_ERR_MPI if a request failed. */
int adj_wait_all(int count, MPI_Request *requests, adj_wait_policy policy);

/* MPI_Comm_dup completed under the yield policy (MPI_Comm_idup): a blocking
 * duplicate spins for milliseconds per call on an oversubscribed node, and
 * every operator and layer duplicates its base communicator.  The duplicate
 * returns MPI errors instead of aborting.  Collective on comm. */
int adj_comm_dup(MPI_Comm comm, MPI_Comm *dup);
/* adj_comm_dup, then the duplicate's resolved AUTO wait policy; on failure
 * nothing is left allocated.  Every operator and layer starts this way. */
int adj_comm_dup_with_policy(MPI_Comm comm, MPI_Comm *dup, adj_wait_policy *policy);

/* "auto" / "spin" / "yield" */
const char *adj_wait_policy_name(adj_wait_policy policy);

/* Who drives MPI's progress on nonblocking operations while the caller
 * computes (the gradient reducer's buckets during the backward;
 * docs/cluster.md):
 *   poll    the caller's own tests between stages (the default);
 *   thread  a progress thread of the gradient reducer tests its buckets;
 *   mpi     the MPI library's own progress thread (MPICH:
 *           MPIR_CVAR_ASYNC_PROGRESS=1, set by the caller).
 * thread and mpi need MPI_THREAD_MULTIPLE, which adj_init then requests.
 * Chosen by the environment variable ADJ_PROGRESS. */
typedef enum adj_progress_mode {
  ADJ_PROGRESS_POLL = 0,
  ADJ_PROGRESS_THREAD = 1,
  ADJ_PROGRESS_MPI = 2
} adj_progress_mode;

/* ADJ_PROGRESS as a mode (unset or empty: poll); any other text is
 * ADJ_ERR_ARG naming it.  Not collective. */
int adj_progress_mode_from_env(adj_progress_mode *mode);
/* "poll" / "thread" / "mpi" */
const char *adj_progress_mode_name(adj_progress_mode mode);

ADJ_END_DECLS

#endif
