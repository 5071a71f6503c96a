/* The layer time table: how long each local computation of a step takes on
 * this host, measured once and cached, as the primitives' algorithm table is
 * (docs/primitive-algorithms.md).
 *
 * A stage of a built network computes on each worker with one sequential
 * kernel call of local shapes: a convolution of its block (halos included,
 * padded only at the global boundary), an affine layer of its feature and
 * batch blocks, a pointwise layer of its block...  The step model
 * (step_model.h) describes that computation as its "twin": a one-layer
 * description layer (description.h) with the local shapes, a batch, and
 * whether the backward computes an input gradient.  The twin is built by the
 * builder (network_build.h) on MPI_COMM_SELF, so it runs the kernel level and
 * convolution algorithm the plan object chooses for those shapes, with the
 * threads a rank will have, and timed by adj_layer_time (layer_timing.h):
 * the fastest round of forwards, and of forward + backward pairs.
 *
 * A twin's key names everything its time depends on:
 *   conv f32 t1 dx1 n=32 in=6x18x18 k=5x5 s=1x1 d=1x1 p=0+0x0+0 out=16 bias=1
 * (kind, dtype, threads, input gradient, batch, per-sample input, and the
 * kind's hyper-parameters).  The cache file holds one entry a line,
 *   <forward seconds> <backward seconds> <key>
 * '#' starting a comment, at ADJ_LAYER_TIMES, else <plan cache dir>/layer-times
 * (machine.h's adj_plan_cache_dir).  A malformed file is ignored with a
 * warning on stderr, as the algorithm table is: a broken cache must not stop
 * a plan that measuring again serves.
 *
 * Without an entry, a twin's time is estimated from a machine's rates
 * (machine.h: flops for convolutions and affine layers, bandwidth for the
 * rest) and the key is remembered, so adj_layer_times_measure can time every
 * missing twin at once. */
#ifndef ADJOIN_LAYER_TIMES_H
#define ADJOIN_LAYER_TIMES_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "adjoin/description.h"
#include "adjoin/dtype.h"
#include "adjoin/machine.h"
#include "adjoin/optimizer.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

enum { ADJ_LAYER_TIME_KEY = 192 }; /* bytes of a key, NUL included */

/* One local computation: a sequential layer on (batch, layer.in_shape...). */
typedef struct adj_compute_twin {
  adj_desc_layer layer;  /* kind, hyper-parameters and per-sample shapes (local) */
  int64_t batch;
  adj_dtype dtype;
  int threads;
  bool input_gradient;   /* the backward computes dx */
  /* Not a layer but an optimizer step (1 + adj_optimizer_kind; 0: a layer):
   * zeroing the gradients and updating `layer.parameter_count` parameters.
   * Its time is the line a + b count through two measured sizes, kept as the
   * entry "optimizer KIND DTYPE tT" (forward a, backward b). */
  int optimizer;
} adj_compute_twin;

/* The twin's key (see above) into buf (ADJ_LAYER_TIME_KEY bytes). */
const char *adj_compute_twin_key(const adj_compute_twin *twin, char *buf, size_t size);

/* Floating-point operations and bytes of memory traffic of the twin's
 * forward and of its backward, the rate model's inputs. */
void adj_compute_twin_work(const adj_compute_twin *twin, double *flops, double *bytes, double *backward_flops,
                           double *backward_bytes);

typedef struct adj_layer_times adj_layer_times;

int adj_layer_times_create(adj_layer_times **times);
void adj_layer_times_destroy(adj_layer_times **times);

/* Adds the entries of a cache file's text (replacing equal keys); a
 * malformed line is ADJ_ERR_ARG naming source, line and text. */
int adj_layer_times_parse(adj_layer_times *times, const char *text, const char *source);
/* Writes every entry to path (directories made as needed). */
int adj_layer_times_save(const adj_layer_times *times, const char *path);
/* The cache file's path into buf; "" when no variable names a place. */
void adj_layer_times_path(char *buf, size_t size);
/* Rank 0 reads the cache file and every rank parses its text, so every rank
 * holds the same table; a missing file is an empty table, a malformed one is
 * ignored with a warning.  Collective on comm. */
int adj_layer_times_load(MPI_Comm comm, adj_layer_times *times);

int adj_layer_times_count(const adj_layer_times *times);
int adj_layer_times_set(adj_layer_times *times, const char *key, double forward, double backward);

/* The twin's forward and backward seconds: the table's entry (*measured
 * true), else the rate estimate from machine (defaults of 1e10 FLOP/s and
 * 1e10 B/s where it has none), and the twin is remembered as missing. */
int adj_layer_times_lookup(adj_layer_times *times, const adj_machine *machine, const adj_compute_twin *twin,
                           double *forward, double *backward, bool *measured);
/* Seconds of one optimizer step (zero-grad and update) over `count`
 * parameters of this rank, as adj_layer_times_lookup finds a twin's. */
int adj_layer_times_optimizer(adj_layer_times *times, const adj_machine *machine, adj_optimizer_kind kind,
                              adj_dtype dtype, int threads, int64_t count, double *seconds, bool *measured);

/* Twins looked up and not found since the last measure or forget. */
int adj_layer_times_missing(const adj_layer_times *times);
void adj_layer_times_forget_missing(adj_layer_times *times);

/* Times every missing twin on every rank of comm at once (each rank its own
 * copy on MPI_COMM_SELF with twin.threads threads, as the ranks of a run
 * compute side by side; a twin's time is the slowest rank's fastest round),
 * enters the figures and, when `save` is true, rank 0 writes the cache file.
 * round_seconds and rounds as in layer_timing.h (0: 0.01 s and 7).  Every
 * rank must hold the same missing list (the same table and the same
 * lookups).  Collective on comm. */
int adj_layer_times_measure(adj_layer_times *times, MPI_Comm comm, double round_seconds, int rounds, bool save);

ADJ_END_DECLS

#endif
