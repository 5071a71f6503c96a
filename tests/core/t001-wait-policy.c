/* Wait policy: AUTO resolves to yield exactly when ranks on the node outnumber
 * its cores, explicit policies are kept, and both complete requests.  A
 * communicator of half the ranks yields too when the whole job outnumbers the
 * cores and the launcher says so (MPI_LOCALNRANKS, as mpiexec.mpich sets it).
 * t008 checks the default policy's variable and setter. */
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t001-wait-policy");
  adj_wait_policy p;
  const char *env = getenv("ADJ_WAIT_POLICY");
  ADJ_TEST_OK(&t, adj_wait_policy_resolve(t.comm, ADJ_WAIT_AUTO, &p));
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  if (!env || !strcmp(env, "auto")) {
    adj_wait_policy expected = t.size > cores ? ADJ_WAIT_YIELD : ADJ_WAIT_SPIN;
    ADJ_TEST_CHECK(&t, p == expected, "auto with %d ranks on %ld cores gave %s", t.size, cores, adj_wait_policy_name(p));
  }
  adj_test_report(&t, "auto policy on %d ranks, %ld cores: %s", t.size, cores, adj_wait_policy_name(p));
  for (int policy = ADJ_WAIT_SPIN; policy <= ADJ_WAIT_YIELD; policy++) {
    double value = t.rank + 1, sum = 0;
    MPI_Request request;
    MPI_Iallreduce(&value, &sum, 1, MPI_DOUBLE, MPI_SUM, t.comm, &request);
    ADJ_TEST_OK(&t, adj_wait_all(1, &request, (adj_wait_policy)policy));
    ADJ_TEST_CHECK(&t, sum == t.size * (t.size + 1) / 2.0, "policy %s: sum %g", adj_wait_policy_name(policy), sum);
  }
  if ((!env || !strcmp(env, "auto")) && t.size >= 2) {
    MPI_Comm half, node;
    MPI_Comm_split(t.comm, t.rank % 2, t.rank, &half);
    MPI_Comm_split_type(t.comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    int half_size = 0, job_on_node = 0;
    MPI_Comm_size(half, &half_size);
    MPI_Comm_size(node, &job_on_node);
    MPI_Comm_free(&node);
    bool told = getenv("MPI_LOCALNRANKS") || getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    adj_wait_policy expected = (told ? job_on_node : half_size) > cores ? ADJ_WAIT_YIELD : ADJ_WAIT_SPIN;
    ADJ_TEST_OK(&t, adj_wait_policy_resolve(half, ADJ_WAIT_AUTO, &p));
    ADJ_TEST_CHECK(&t, p == expected, "auto on %d of %d ranks (%d on the node, launcher %s) on %ld cores gave %s",
                   half_size, t.size, job_on_node, told ? "says" : "silent", cores, adj_wait_policy_name(p));
    adj_test_report(&t, "auto policy on a communicator of %d of %d ranks (launcher %s): %s", half_size, t.size,
                    told ? "says how many share the node" : "silent", adj_wait_policy_name(p));
    MPI_Comm_free(&half);
  }
  return adj_test_finish(&t);
}
