/* Kernel thread count: the default shares the node's cores among the ranks
 * on it, a malformed ADJ_NUM_THREADS is ignored (with a message) rather than
 * obeyed, adj_threads_share_node re-derives the default from a rank count,
 * adj_threads_set takes 1..4096 and names any other count. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t002-threads");
  setenv("ADJ_NUM_THREADS", "two", 1); /* read at the first adj_threads_get */
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  const char *local = getenv("MPI_LOCALNRANKS");
  long ranks = local && atol(local) > 0 ? atol(local) : 1;
  int expected = cores > ranks ? (int)(cores / ranks) : 1;
  int threads = adj_threads_get();
  adj_test_report(&t, "default with ADJ_NUM_THREADS=two: %d threads (%ld cores, %ld ranks on the node)", threads,
                  cores, ranks);
  ADJ_TEST_CHECK(&t, threads == expected, "default thread count %d, expected %d", threads, expected);
  /* A launcher without MPI_LOCALNRANKS: the caller counts the ranks itself. */
  ADJ_TEST_OK(&t, adj_threads_share_node(1));
  ADJ_TEST_CHECK(&t, adj_threads_get() == (int)cores, "one rank on the node: %d threads, expected %ld",
                 adj_threads_get(), cores);
  int status = adj_threads_share_node(0);
  ADJ_TEST_CHECK(&t, status == ADJ_ERR_ARG && strstr(adj_last_error(), "0 ranks"), "adj_threads_share_node(0): %s '%s'",
                 adj_status_name(status), adj_last_error());
  ADJ_TEST_OK(&t, adj_threads_set(3));
  ADJ_TEST_CHECK(&t, adj_threads_get() == 3, "after adj_threads_set(3): %d", adj_threads_get());
  static const int bad[] = {0, -2, 5000};
  for (int i = 0; i < 3; i++) {
    status = adj_threads_set(bad[i]);
    char value[16];
    snprintf(value, sizeof value, "%d", bad[i]);
    ADJ_TEST_CHECK(&t, status == ADJ_ERR_ARG && strstr(adj_last_error(), value), "adj_threads_set(%d): %s '%s'",
                   bad[i], adj_status_name(status), adj_last_error());
    ADJ_TEST_CHECK(&t, adj_threads_get() == 3, "a refused count changed the count to %d", adj_threads_get());
  }
  return adj_test_finish(&t);
}
