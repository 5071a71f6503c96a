/* Threads of the local kernels.
 *
 * Convolution, pooling, batch norm, upsampling and the activations split
 * their batch (or their planes, channels or elements) over a team of threads
 * and run BLAS single-threaded inside it.  LeNet-sized GEMMs (6 x 25 x 784
 * per image) are too small for OpenBLAS to split well, and its idle threads
 * spin in sched_yield while the kernels' own copies run on one core; whole
 * images, by contrast, are independent work of equal size.  Kernels too
 * small to pay for a team run on the calling thread.  The team's threads
 * are adjoin's own: started on first use, they spin for at most some tens of
 * microseconds after a share, for a kernel that follows at once, and then
 * sleep, so an idle team takes no core from the rest of the program (an
 * OpenMP runtime's threads spin for milliseconds).
 *
 * The count defaults to the node's online cores divided by the MPI ranks on
 * the node (MPICH's launcher exports MPI_LOCALNRANKS), so ranks sharing a node
 * do not oversubscribe it; the environment variable ADJ_NUM_THREADS overrides
 * the default (a value that is not a count from 1 to 4096 is reported on
 * stderr and ignored) and adj_threads_set overrides both.  For a fixed count results
 * are bit-identical run to run; a different count changes the order in which
 * weight gradients are summed (thread 0's images first, then thread 1's...),
 * so results then agree to rounding only.
 *
 * Team members never call MPI; only the thread that called the kernel does.
 * A program that lets the kernels use more than one thread should therefore
 * start MPI with MPI_Init_thread(..., MPI_THREAD_FUNNELED, ...), as adjoin's
 * own programs, tests and benchmarks do. */
#ifndef ADJOIN_THREADS_H
#define ADJOIN_THREADS_H

#include <stdbool.h>
#include <stddef.h>

#include "adjoin/export.h"

ADJ_BEGIN_DECLS

/* The kernels' thread count (at least 1). */
int adj_threads_get(void);

/* Makes the default count the node's cores / ranks_on_node, for launchers
 * that do not export MPI_LOCALNRANKS (adj_train_share_cores counts the ranks
 * itself); ADJ_NUM_THREADS still wins.  ADJ_ERR_ARG for a count below 1. */
int adj_threads_share_node(int ranks_on_node);

/* Sets the kernels' thread count; ADJ_ERR_ARG names a count outside 1..4096.
 * Not thread-safe: call it between kernel calls. */
int adj_threads_set(int threads);

/* Whether OpenBLAS, whose GEMMs the affine layers and the shifted and im2col
 * convolutions run, uses kernels below what this CPU runs.  A DYNAMIC_ARCH
 * OpenBLAS picks its kernels from the CPU's family and model when it loads;
 * a version older than the CPU does not know the model and falls back to its
 * oldest x86-64 kernels (Debian 12's OpenBLAS 0.3.21 on a Xeon of model 207
 * runs Prescott's, SSE3, at a fifth of the AVX-512 kernels' sgemm rate,
 * bench/RESULTS.md).  It chooses before main runs, so adjoin can only say so:
 * the environment variable OPENBLAS_CORETYPE, set before the program starts,
 * names the kernels instead.  True when OpenBLAS's kernels lack AVX2 and FMA
 * on a CPU that has them and OPENBLAS_CORETYPE is not set; `advice` (size
 * bytes, may be NULL) then receives one line naming the kernels, the CPU and
 * the value to set (SkylakeX with AVX-512, Haswell with AVX2), else "". */
bool adj_blas_kernels_behind(char *advice, size_t size);

/* The OPENBLAS_CORETYPE value adj_blas_kernels_behind advises ("SkylakeX" or
 * "Haswell"), or NULL when it advises nothing.  A launcher script asks for it
 * (`adjoin-train --openblas-coretype`) and exports it before starting the
 * ranks, since OpenBLAS reads it only as it loads. */
const char *adj_blas_kernels_coretype(void);

ADJ_END_DECLS

#endif
