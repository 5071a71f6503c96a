/* The local kernels' thread count (see adjoin/threads.h). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <cblas.h>
#include <strings.h>

#include "adjoin/threads.h"
#include "adjoin/threads.h"
#include "cpu_impl.h"
#include "error_impl.h"
#include "threads_impl.h"

static int adj_threads_chosen; /* 0 until first asked for or set */

enum { ADJ_THREADS_MAX = 4096 };

/* A count from 1 to ADJ_THREADS_MAX in the environment, else 0; a value that
 * is set but not such a count is reported on stderr (the kernels that ask
 * have no error path) and then ignored. */
static int adj_env_count(const char *name) {
  const char *text = getenv(name);
  if (!text || !*text) return 0;
  char *end;
  long value = strtol(text, &end, 10);
  if (*end == '\0' && value >= 1 && value <= ADJ_THREADS_MAX) return (int)value;
  fprintf(stderr, "adjoin: ignoring %s='%s': not a count from 1 to %d\n", name, text, ADJ_THREADS_MAX);
  return 0;
}

static bool adj_threads_from_env; /* ADJ_NUM_THREADS decided the count */

/* The node's cores shared among `ranks` ranks, at least 1 each. */
static int adj_threads_per_rank(int ranks) {
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  return cores > ranks ? (int)(cores / ranks) : 1;
}

int adj_threads_get(void) {
  if (adj_threads_chosen > 0) return adj_threads_chosen;
  int asked = adj_env_count("ADJ_NUM_THREADS");
  adj_threads_from_env = asked > 0;
  if (adj_threads_from_env) return adj_threads_chosen = asked;
  int ranks = adj_env_count("MPI_LOCALNRANKS");
  return adj_threads_chosen = adj_threads_per_rank(ranks > 0 ? ranks : 1);
}

int adj_threads_share_node(int ranks_on_node) {
  ADJ_CHECK(ranks_on_node >= 1, ADJ_ERR_ARG, "adj_threads_share_node: %d ranks on the node", ranks_on_node);
  adj_threads_get(); /* reads ADJ_NUM_THREADS once */
  if (!adj_threads_from_env) adj_threads_chosen = adj_threads_per_rank(ranks_on_node);
  return ADJ_SUCCESS;
}

int adj_threads_set(int threads) {
  ADJ_CHECK(threads >= 1 && threads <= ADJ_THREADS_MAX, ADJ_ERR_ARG,
            "adj_threads_set: thread count %d is not from 1 to %d", threads, ADJ_THREADS_MAX);
  adj_threads_chosen = threads;
  return ADJ_SUCCESS;
}

/* ---- thread teams and OpenBLAS's threads (threads_impl.h) ---------------------------------- */

int adj_team_size(int64_t items, int64_t work) {
  if (work < ADJ_TEAM_MIN_WORK || items < 2) return 1;
  int threads = adj_threads_get();
  return items < threads ? (int)items : threads;
}

void adj_team_range(int64_t items, int team, int member, int64_t *first, int64_t *count) {
  int64_t base = items / team, extra = items % team;
  *first = member * base + (member < extra ? member : extra);
  *count = base + (member < extra ? 1 : 0);
}

void adj_blas_leave_threads_to_teams(int team) {
  if (team > 1 && openblas_get_num_threads() != 1) openblas_set_num_threads(1);
}

void adj_blas_threads_share(int threads) {
  const char *chosen = getenv("OPENBLAS_NUM_THREADS");
  if (!(chosen && atoi(chosen) > 0)) openblas_set_num_threads(threads);
}

/* ---- OpenBLAS's kernels against the CPU (adjoin/threads.h) ------------------------------- */

/* OpenBLAS's x86-64 kernels with AVX2 and FMA, and the width of their
 * vectors (its names, compared without case). */
static const struct {
  const char *name;
  int vector_bytes;
} adj_blas_fma_cores[] = {{"SkylakeX", 64}, {"Cooperlake", 64}, {"SapphireRapids", 64},
                          {"Haswell", 32},  {"Zen", 32},        {"Excavator", 32}};

int adj_blas_core_vector_bytes(const char *core) {
  for (size_t i = 0; core && i < sizeof adj_blas_fma_cores / sizeof *adj_blas_fma_cores; i++)
    if (strcasecmp(core, adj_blas_fma_cores[i].name) == 0) return adj_blas_fma_cores[i].vector_bytes;
  return 16;
}

/* OpenBLAS chooses its kernels once, as it loads. */
int adj_blas_kernels_vector_bytes(void) {
  static int bytes = 0;
  int known = __atomic_load_n(&bytes, __ATOMIC_RELAXED);
  if (!known) __atomic_store_n(&bytes, known = adj_blas_core_vector_bytes(openblas_get_corename()), __ATOMIC_RELAXED);
  return known;
}

/* OpenBLAS's name for its kernels of x86-64 level 4 or 3. */
static const char *adj_blas_level_coretype(int cpu_level) { return cpu_level == 4 ? "SkylakeX" : "Haswell"; }

bool adj_blas_kernels_judge(const char *core, int cpu_level, const char *coretype, const char *cpu, char *advice,
                            size_t size) {
  if (advice && size) advice[0] = '\0';
  if (coretype || cpu_level < 3 || !core || adj_blas_core_vector_bytes(core) >= 32) return false;
  if (advice && size)
    snprintf(advice, size,
             "OpenBLAS runs its %s kernels on this %s CPU (%s), as an OpenBLAS older than the CPU does; "
             "set OPENBLAS_CORETYPE=%s before starting for its kernels with %s",
             core, cpu_level == 4 ? "x86-64-v4" : "x86-64-v3", cpu, adj_blas_level_coretype(cpu_level),
             cpu_level == 4 ? "AVX-512" : "AVX2 and FMA");
  return true;
}

bool adj_blas_kernels_behind(char *advice, size_t size) {
  char cpu[64];
  adj_cpu_family_model(cpu, sizeof cpu);
  return adj_blas_kernels_judge(openblas_get_corename(), adj_cpu_x86_level(), getenv("OPENBLAS_CORETYPE"), cpu,
                                advice, size);
}

const char *adj_blas_kernels_coretype(void) {
  return adj_blas_kernels_behind(NULL, 0) ? adj_blas_level_coretype(adj_cpu_x86_level()) : NULL;
}
