#define _GNU_SOURCE /* sched_yield, sysconf */
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "adjoin/status.h"
#include "adjoin/wait.h"
#include "error_impl.h"
#include "setting_impl.h"

/* GCC 12 misreads MPICH's MPI_STATUSES_IGNORE sentinel as a zero-size array. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wstringop-overflow"
#endif

static const char *const adj_wait_policy_names[] = {"auto", "spin", "yield"};

const char *adj_wait_policy_name(adj_wait_policy policy) {
  return adj_wait_policy_valid(policy) ? adj_wait_policy_names[policy] : "invalid";
}

int adj_wait_policy_valid(adj_wait_policy policy) {
  return policy == ADJ_WAIT_AUTO || policy == ADJ_WAIT_SPIN || policy == ADJ_WAIT_YIELD;
}

static adj_setting adj_wait_setting = ADJ_SETTING_INIT("ADJ_WAIT_POLICY");

ADJ_SETTING_CHOICE_ACCESSORS(adj_wait_policy, adj_wait_policy, adj_wait_setting, adj_wait_policy_names)

/* MPI_Comm_split_type is a slow blocking collective on an oversubscribed node,
 * and every partition and operator resolves its policy when it is created.  The agreed answer is
 * therefore cached on the communicator as an attribute, which MPI_Comm_dup
 * copies, so an operator's duplicate of its base communicator reuses it.  The
 * keyval is the only process-wide state: a handle, the values live on the
 * communicators. */
static int adj_wait_keyval = MPI_KEYVAL_INVALID;

static int adj_wait_policy_cached(MPI_Comm comm, adj_wait_policy *policy) {
  void *value = NULL;
  int found = 0;
  if (adj_wait_keyval != MPI_KEYVAL_INVALID) MPI_Comm_get_attr(comm, adj_wait_keyval, &value, &found);
  if (found) *policy = (adj_wait_policy)(intptr_t)value;
  return found;
}

static void adj_wait_policy_cache(MPI_Comm comm, adj_wait_policy policy) {
  if (adj_wait_keyval == MPI_KEYVAL_INVALID &&
      MPI_Comm_create_keyval(MPI_COMM_DUP_FN, MPI_COMM_NULL_DELETE_FN, &adj_wait_keyval, NULL) != MPI_SUCCESS)
    return;
  MPI_Comm_set_attr(comm, adj_wait_keyval, (void *)(intptr_t)policy);
}

/* The ranks of the whole job on this node, as the launcher tells each process
 * (MPICH's hydra: MPI_LOCALNRANKS; Open MPI: OMPI_COMM_WORLD_LOCAL_SIZE), 0
 * when it does not.  A communicator of two ranks still shares the node's cores
 * with the job's other ranks, which the communicator alone cannot see. */
static long adj_job_ranks_on_node(void) {
  static const char *const names[] = {"MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    const char *text = getenv(names[i]);
    char *end;
    long value = text && *text ? strtol(text, &end, 10) : 0;
    if (value > 0 && *end == '\0') return value;
  }
  return 0;
}

int adj_wait_policy_resolve(MPI_Comm comm, adj_wait_policy requested, adj_wait_policy *resolved) {
  /* Both are arguments every rank passes alike, so every rank refuses alike
   * before the collective below. */
  ADJ_CHECK(resolved, ADJ_ERR_ARG, "adj_wait_policy_resolve: output policy pointer is NULL");
  ADJ_CHECK(adj_wait_policy_valid(requested), ADJ_ERR_ARG,
            "adj_wait_policy_resolve: wait policy %d is not auto (0), spin (1) or yield (2)", (int)requested);
  /* The process's default (ADJ_WAIT_POLICY or its setter), unless AUTO,
   * overrides the request.  The environment is the same on every rank under
   * mpiexec, so a bad value is found identically everywhere. */
  adj_wait_policy policy;
  ADJ_CALL(adj_wait_policy_get_default(&policy));
  if (policy == ADJ_WAIT_AUTO) policy = requested;
  if (policy != ADJ_WAIT_AUTO) {
    *resolved = policy;
    return ADJ_SUCCESS;
  }
  /* Every rank resolved this communicator together, so all or none hit. */
  if (adj_wait_policy_cached(comm, resolved)) return ADJ_SUCCESS;
  MPI_Comm node;
  int on_node = 1;
  ADJ_CALL_MPI(MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node));
  MPI_Comm_size(node, &on_node);
  MPI_Comm_free(&node);
  long cores = sysconf(_SC_NPROCESSORS_ONLN), job = adj_job_ranks_on_node();
  long sharing = job > on_node ? job : on_node;
  int local = sharing > cores ? ADJ_WAIT_YIELD : ADJ_WAIT_SPIN, agreed = local;
  /* Ranks on different nodes could disagree; yielding is the safe common choice.
   * The agreement itself yields: on an oversubscribed node a spinning
   * MPI_Allreduce is exactly the cost this policy exists to avoid. */
  MPI_Request request;
  ADJ_CALL_MPI(MPI_Iallreduce(&local, &agreed, 1, MPI_INT, MPI_MAX, comm, &request));
  ADJ_CALL(adj_wait_all(1, &request, ADJ_WAIT_YIELD));
  *resolved = (adj_wait_policy)agreed;
  adj_wait_policy_cache(comm, *resolved);
  return ADJ_SUCCESS;
}

int adj_wait_all(int count, MPI_Request *requests, adj_wait_policy policy) {
  if (count == 0) return ADJ_SUCCESS;
  if (policy == ADJ_WAIT_SPIN) {
    ADJ_CALL_MPI(MPI_Waitall(count, requests, MPI_STATUSES_IGNORE));
    return ADJ_SUCCESS;
  }
  for (;;) {
    int done = 0;
    ADJ_CALL_MPI(MPI_Testall(count, requests, &done, MPI_STATUSES_IGNORE));
    if (done) return ADJ_SUCCESS;
    sched_yield();
  }
}

int adj_comm_dup(MPI_Comm comm, MPI_Comm *dup) {
  MPI_Request request;
  ADJ_CALL_MPI(MPI_Comm_idup(comm, dup, &request));
  ADJ_CALL(adj_wait_all(1, &request, ADJ_WAIT_YIELD));
  MPI_Comm_set_errhandler(*dup, MPI_ERRORS_RETURN);
  return ADJ_SUCCESS;
}

int adj_comm_dup_with_policy(MPI_Comm comm, MPI_Comm *dup, adj_wait_policy *policy) {
  ADJ_CALL(adj_comm_dup(comm, dup));
  int status = adj_wait_policy_resolve(*dup, ADJ_WAIT_AUTO, policy);
  if (status) MPI_Comm_free(dup);
  return status;
}

int adj_progress_mode_from_env(adj_progress_mode *mode) {
  ADJ_CHECK(mode, ADJ_ERR_ARG, "adj_progress_mode_from_env: output mode pointer is NULL");
  const char *env = getenv("ADJ_PROGRESS");
  *mode = ADJ_PROGRESS_POLL;
  if (!env || !*env || !strcmp(env, "poll")) return ADJ_SUCCESS;
  if (!strcmp(env, "thread")) *mode = ADJ_PROGRESS_THREAD;
  else if (!strcmp(env, "mpi")) *mode = ADJ_PROGRESS_MPI;
  else return adj_error_set(ADJ_ERR_ARG, "ADJ_PROGRESS='%s' is not one of poll, thread, mpi", env);
  return ADJ_SUCCESS;
}

const char *adj_progress_mode_name(adj_progress_mode mode) {
  switch (mode) {
  case ADJ_PROGRESS_POLL: return "poll";
  case ADJ_PROGRESS_THREAD: return "thread";
  case ADJ_PROGRESS_MPI: return "mpi";
  }
  return "unknown";
}
