/* The thread policy's private half (adjoin/threads.h is the public one): the
 * thread teams the local kernels split their work over, and OpenBLAS's own
 * thread count, the one place adjoin calls OpenBLAS-only functions. */
#ifndef ADJOIN_CORE_THREADS_IMPL_H
#define ADJOIN_CORE_THREADS_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The count ADJ_NUM_THREADS fixed, or 0 when the environment leaves it to
 * adjoin (cores / ranks on the node). */
int adj_threads_requested(void);

/* Below this many elements (or multiply-adds) a call runs on the calling
 * thread: waking a team costs microseconds. */
enum { ADJ_TEAM_MIN_WORK = 1 << 16 };

/* Threads for `items` independent pieces of `work` elements in all: 1 when
 * the work is small, else adj_threads_get() capped at items. */
int adj_team_size(int64_t items, int64_t work);
/* Member `member`'s contiguous share [*first, *first + *count) of items split
 * over team threads as evenly as possible. */
void adj_team_range(int64_t items, int team, int member, int64_t *first, int64_t *count);

/* One member's work: items [first, first + count) of the call's, as member
 * `member` (0 .. team - 1) of its team. */
typedef void (*adj_team_body)(void *arg, int64_t first, int64_t count, int member);

/* Splits items [0, items) over a team of `team` threads (adj_team_range's
 * shares) and returns when every share is done; member 0's runs on the
 * calling thread.  The team's helper threads sleep between calls (after a
 * spin of some tens of microseconds), so an idle team costs nothing.  A team
 * of 1, a call from inside a team's share and a call made while another
 * thread's team runs take every item on the calling thread, as member 0.
 * For a given team the shares, and so the results, are the same run to run. */
void adj_team_run(int team, int64_t items, adj_team_body body, void *arg);

/* Makes OpenBLAS single-threaded from the first team of more than one thread
 * on (each member calls BLAS on its own share), and leaves it so: switching
 * OpenBLAS between 1 and more threads around every team leaves its idle
 * threads spinning in sched_yield against the team's members, which slows
 * training by an order of magnitude. */
void adj_blas_leave_threads_to_teams(int team);

/* Gives OpenBLAS `threads` threads unless OPENBLAS_NUM_THREADS already chose. */
void adj_blas_threads_share(int threads);

/* The width in bytes of the vectors of OpenBLAS's GEMM kernels named `core`:
 * 64 for its AVX-512 ones, 32 for those with AVX2 and FMA, 16 for anything
 * else (older x86-64 kernels, unknown names, other architectures). */
int adj_blas_core_vector_bytes(const char *core);

/* adj_blas_core_vector_bytes of the kernels OpenBLAS runs (whatever the CPU):
 * the convolution's rule weighs its own kernels against those GEMMs. */
int adj_blas_kernels_vector_bytes(void);

/* adj_blas_kernels_behind's judgement of OpenBLAS kernels named `core` on a
 * CPU of x86-64 level `cpu_level` (4, 3, or 0 for anything less or another
 * architecture), given OPENBLAS_CORETYPE's value (NULL when unset) and the
 * CPU's description for the advice. */
bool adj_blas_kernels_judge(const char *core, int cpu_level, const char *coretype, const char *cpu, char *advice,
                            size_t size);

#endif
