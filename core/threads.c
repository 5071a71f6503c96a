/* The local kernels' thread count (see adjoin/threads.h). */
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include <cblas.h>
#include <strings.h>

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

int adj_threads_requested(void) {
  adj_threads_get(); /* reads ADJ_NUM_THREADS once */
  return adj_threads_from_env ? adj_threads_chosen : 0;
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

/* ---- thread teams (threads_impl.h) -------------------------------------------------------
 *
 * The team's threads are started on first use and then kept: each waits for
 * its next share on its own ticket, spinning for at most ADJ_TEAM_SPIN_NS
 * after its last share (kernels often come back to back: a layer's forward
 * runs several) and then sleeping on a condition variable, so an idle team
 * costs nothing between a training step's kernels and the serial work
 * between them.  The caller runs member 0 itself and waits for the others
 * the same way.  One team runs at a time: a call made while another thread's
 * team runs, or from inside a team, runs on its calling thread alone. */

enum { ADJ_TEAM_WORKERS = 255 };       /* helper threads at most (a team of 256) */
enum { ADJ_TEAM_SPIN_NS = 50 * 1000 }; /* spin this long for the next share, then sleep */

typedef struct adj_team_worker {
  pthread_mutex_t lock;
  pthread_cond_t wake;
  unsigned ticket;  /* shares handed to this worker; written under lock, read atomically */
  bool sleeping;    /* under lock */
  pthread_t thread;
} __attribute__((aligned(64))) adj_team_worker;

static struct {
  pthread_mutex_t busy;        /* held by the thread whose team runs */
  pthread_mutex_t lock;        /* the caller sleeps under it on `done` */
  pthread_cond_t done;
  bool caller_sleeping;        /* under lock */
  int started;                 /* helper threads started (only the busy holder starts more) */
  unsigned remaining;          /* helpers of the current team still working (atomic) */
  adj_team_body body;          /* the current team's work, set before the tickets */
  void *arg;
  int64_t items;
  int team;
  adj_team_worker worker[ADJ_TEAM_WORKERS];
} adj_team_pool = {.busy = PTHREAD_MUTEX_INITIALIZER, .lock = PTHREAD_MUTEX_INITIALIZER,
                   .done = PTHREAD_COND_INITIALIZER};

static _Thread_local bool adj_team_member; /* this thread is running a team's share */

static int64_t adj_team_clock_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

static inline void adj_team_pause(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* Spins until (*value == target) is `equal`, or ADJ_TEAM_SPIN_NS pass; whether it got there. */
static bool adj_team_spin(const unsigned *value, unsigned target, bool equal) {
  int64_t deadline = 0;
  for (int k = 1;; k++) {
    if ((__atomic_load_n(value, __ATOMIC_ACQUIRE) == target) == equal) return true;
    adj_team_pause();
    if (k % 64) continue;
    int64_t now = adj_team_clock_ns();
    if (!deadline) deadline = now + ADJ_TEAM_SPIN_NS;
    else if (now > deadline) return false;
  }
}

/* Member `member`'s share of the current team. */
static void adj_team_share(int member) {
  int64_t first, count;
  adj_team_range(adj_team_pool.items, adj_team_pool.team, member, &first, &count);
  adj_team_pool.body(adj_team_pool.arg, first, count, member);
}

static void *adj_team_worker_main(void *arg) {
  int member = (int)(intptr_t)arg;
  adj_team_worker *w = &adj_team_pool.worker[member - 1];
  adj_team_member = true;
  for (unsigned seen = 0;; seen++) {
    if (!adj_team_spin(&w->ticket, seen, false)) {
      pthread_mutex_lock(&w->lock);
      w->sleeping = true;
      while (__atomic_load_n(&w->ticket, __ATOMIC_ACQUIRE) == seen) pthread_cond_wait(&w->wake, &w->lock);
      w->sleeping = false;
      pthread_mutex_unlock(&w->lock);
    }
    adj_team_share(member);
    if (__atomic_sub_fetch(&adj_team_pool.remaining, 1, __ATOMIC_ACQ_REL) == 0) {
      pthread_mutex_lock(&adj_team_pool.lock);
      if (adj_team_pool.caller_sleeping) pthread_cond_signal(&adj_team_pool.done);
      pthread_mutex_unlock(&adj_team_pool.lock);
    }
  }
  return NULL;
}

/* Starts helpers until `helpers` run; how many do (fewer when a thread cannot start). */
static int adj_team_start(int helpers) {
  while (adj_team_pool.started < helpers) {
    adj_team_worker *w = &adj_team_pool.worker[adj_team_pool.started];
    pthread_mutex_init(&w->lock, NULL);
    pthread_cond_init(&w->wake, NULL);
    intptr_t member = adj_team_pool.started + 1;
    if (pthread_create(&w->thread, NULL, adj_team_worker_main, (void *)member)) break;
    pthread_detach(w->thread);
    adj_team_pool.started++;
  }
  return adj_team_pool.started < helpers ? adj_team_pool.started : helpers;
}

static void adj_team_hand_out(adj_team_worker *w) {
  pthread_mutex_lock(&w->lock);
  __atomic_store_n(&w->ticket, w->ticket + 1, __ATOMIC_RELEASE);
  if (w->sleeping) pthread_cond_signal(&w->wake);
  pthread_mutex_unlock(&w->lock);
}

/* Waits until every helper of the current team is done. */
static void adj_team_wait(void) {
  if (!adj_team_spin(&adj_team_pool.remaining, 0, true)) {
    pthread_mutex_lock(&adj_team_pool.lock);
    adj_team_pool.caller_sleeping = true;
    while (__atomic_load_n(&adj_team_pool.remaining, __ATOMIC_ACQUIRE) != 0)
      pthread_cond_wait(&adj_team_pool.done, &adj_team_pool.lock);
    adj_team_pool.caller_sleeping = false;
    pthread_mutex_unlock(&adj_team_pool.lock);
  }
}

void adj_team_run(int team, int64_t items, adj_team_body body, void *arg) {
  if (team > items) team = items > 0 ? (int)items : 1;
  if (team > ADJ_TEAM_WORKERS + 1) team = ADJ_TEAM_WORKERS + 1;
  bool alone = team <= 1 || adj_team_member || pthread_mutex_trylock(&adj_team_pool.busy) != 0;
  if (!alone) team = 1 + adj_team_start(team - 1);
  if (alone || team == 1) {
    if (!alone) pthread_mutex_unlock(&adj_team_pool.busy);
    if (items > 0) body(arg, 0, items, 0);
    return;
  }
  adj_team_pool.body = body, adj_team_pool.arg = arg, adj_team_pool.items = items, adj_team_pool.team = team;
  __atomic_store_n(&adj_team_pool.remaining, (unsigned)team - 1, __ATOMIC_RELEASE);
  for (int member = 1; member < team; member++) adj_team_hand_out(&adj_team_pool.worker[member - 1]);
  adj_team_member = true;
  adj_team_share(0);
  adj_team_member = false;
  adj_team_wait();
  pthread_mutex_unlock(&adj_team_pool.busy);
}

/* ---- team sizes and OpenBLAS's threads (threads_impl.h) ------------------------------------ */

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
