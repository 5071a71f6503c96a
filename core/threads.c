/* The local kernels' thread count (see adjoin/threads.h). */
#include <stdlib.h>
#include <unistd.h>

#include "adjoin/threads.h"
#include "error_impl.h"

static int adj_threads_chosen; /* 0 until first asked for or set */

/* A positive integer from the environment, else 0. */
static int adj_env_count(const char *name) {
  const char *text = getenv(name);
  if (!text || !*text) return 0;
  char *end;
  long value = strtol(text, &end, 10);
  return *end == '\0' && value > 0 && value <= 4096 ? (int)value : 0;
}

int adj_threads_get(void) {
  if (adj_threads_chosen > 0) return adj_threads_chosen;
  int asked = adj_env_count("ADJ_NUM_THREADS");
  if (asked > 0) return adj_threads_chosen = asked;
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  int ranks = adj_env_count("MPI_LOCALNRANKS");
  if (ranks < 1) ranks = 1;
  adj_threads_chosen = cores > ranks ? (int)(cores / ranks) : 1;
  return adj_threads_chosen;
}

int adj_threads_set(int threads) {
  ADJ_CHECK(threads >= 1, ADJ_ERR_ARG, "adj_threads_set: thread count %d is below 1", threads);
  adj_threads_chosen = threads;
  return ADJ_SUCCESS;
}
