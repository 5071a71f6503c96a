/* A timeline of a distributed run in Chrome's trace-event format: JSON that
 * Perfetto (ui.perfetto.dev) and chrome://tracing open as it is.
 *
 * Every rank records spans (a begin and an end on one track) in memory; at
 * adj_trace_write rank 0 gathers them and writes one file in which each rank
 * is a process ("rank 3 on h1") and each track a thread of it: the compute
 * track (steps, forward and backward passes, each layer's backward, the
 * optimizer), the reducer's wait, and one track per gradient bucket, from its
 * post to the moment its completion was seen.  Spans on one track nest (the
 * format's "B"/"E" events); spans of different buckets may overlap in time,
 * which is why each has its own track.
 *
 * Clocks: at create, each rank measures the offset of its MPI_Wtime to rank
 * 0's by the best of several round trips (Cristian's method), so ranks on
 * different hosts share one time axis to within half the shortest round trip;
 * timestamps are microseconds from rank 0's create.
 *
 * Recording (begin, end) is local, allocation-amortised and never fails the
 * caller: a span that cannot be stored is counted and reported by the write.
 * Create, write and destroy are collective on the communicator. */
#ifndef ADJOIN_TRACE_H
#define ADJOIN_TRACE_H

#include <mpi.h>
#include <stdint.h>

#include "adjoin/export.h"

ADJ_BEGIN_DECLS

/* Tracks: the compute track, the reducer's wait, and bucket b's track at
 * ADJ_TRACE_BUCKET + b. */
#define ADJ_TRACE_COMPUTE 0
#define ADJ_TRACE_REDUCER 1
#define ADJ_TRACE_BUCKET 16
/* Longest span name kept (longer names are cut). */
#define ADJ_TRACE_NAME_MAX 47

typedef struct adj_trace adj_trace;

/* Starts a trace on comm; `path` (significant on rank 0) is where the write
 * puts it.  A NULL or empty path fails on every rank. */
int adj_trace_create(MPI_Comm comm, const char *path, adj_trace **trace);
/* Opens a span `name` on `track` (>= 0) now; `arg` is shown with it. */
void adj_trace_begin(adj_trace *trace, int track, const char *name, int64_t arg);
/* Closes the innermost open span on `track` now. */
void adj_trace_end(adj_trace *trace, int track);
/* Spans recorded on this rank so far, and those dropped (no memory, bad track). */
int64_t adj_trace_events(const adj_trace *trace);
int64_t adj_trace_dropped(const adj_trace *trace);
/* Gathers every rank's spans and writes the file on rank 0 (replacing it).
 * An error (the file cannot be written, spans were dropped) is returned on
 * every rank.  The trace keeps recording after; a later write rewrites it. */
int adj_trace_write(adj_trace *trace);
/* NULL-safe; collective (it frees a communicator). */
void adj_trace_destroy(adj_trace **trace);

ADJ_END_DECLS

#endif
