/* A machine as the step model (step_model.h) sees it: what each kind of
 * communication costs, how fast a rank computes, how much memory it has.
 *
 * Communication.  Every operator adjoin builds moves its data by one of a few
 * MPI patterns; each has its own alpha-beta line, measured on the machine for
 * a group of `ranks` members:
 *
 *   p2p             point-to-point messages: halo exchanges, repartitions,
 *                   the loss's gather, the summing chain (per message)
 *   broadcast       MPI_Ibcast of a block
 *   reduce          MPI_Ireduce of a block onto its source
 *   allreduce       MPI_Iallreduce (a sum-reduce by all-reduce, the gradient
 *                   reducer's buckets, batch norm's statistics, agreements)
 *   reduce-scatter  MPI_Ireduce_scatter then MPI_Igatherv to the source
 *   allgather       MPI_Iallgatherv of the concatenated blocks
 *
 * t(m, ranks) = alpha + beta m, m the block's bytes (for all-gather the bytes
 * gathered).  For another group size q the line is carried over by the
 * pattern's latency and volume terms: alpha ceil(log2 q) / ceil(log2 ranks)
 * and beta m V(q) / V(ranks), V = 1 for point-to-point, broadcast and reduce,
 * 2 (q-1)/q for all-reduce and reduce-scatter + gather, (q-1)/q for
 * all-gather.  A group of one costs nothing.
 *
 * Compute.  On a host the step model takes each layer's time from the layer
 * time table (layer_times.h), measured where it will run.  For a machine
 * described by a file (what-if planning), `flops` and `bandwidth` give a
 * rank's rate for arithmetic (convolutions, affine layers) and for memory-
 * bound kernels (pointwise layers, the optimizer).
 *
 * Memory.  `memory` is what a rank may use (0: unknown) and `baseline` what a
 * process holds before any network: MPI, the BLAS, the program.
 *
 * The text format, one "key value..." a line, '#' starting a comment:
 *
 *   machine cori-knl        a name
 *   cores 68                cores per node
 *   ranks_per_node 4        ranks sharing a node (threads = cores / this)
 *   memory 16GiB            per rank
 *   baseline 64MiB          per process
 *   flops 4e11              FLOP/s per rank
 *   bandwidth 1e11          bytes/s per rank
 *   p2p 2e-6 1.7e-10 2      alpha (s), beta (s/B), group size of the fit
 *   broadcast ...           the same three numbers per pattern
 *
 * Every number goes through parse.h; a refusal names the source, the line
 * and the value.  Missing patterns take the p2p line. */
#ifndef ADJOIN_MACHINE_H
#define ADJOIN_MACHINE_H

#include <mpi.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "adjoin/export.h"

ADJ_BEGIN_DECLS

/* The patterns, in the order above. */
typedef enum adj_comm_kind {
  ADJ_COMM_P2P, ADJ_COMM_BROADCAST, ADJ_COMM_REDUCE, ADJ_COMM_ALLREDUCE, ADJ_COMM_REDUCE_SCATTER, ADJ_COMM_ALLGATHER,
  ADJ_COMM_KINDS
} adj_comm_kind;

/* "p2p", "broadcast", "reduce", "allreduce", "reduce-scatter", "allgather";
 * "?" for anything else. */
const char *adj_comm_kind_name(adj_comm_kind kind);

/* One pattern's line, measured on `ranks` members (0: not measured). */
typedef struct adj_comm_fit {
  double alpha; /* seconds per call */
  double beta;  /* seconds per byte */
  int ranks;
} adj_comm_fit;

typedef struct adj_machine {
  char name[64];
  adj_comm_fit comm[ADJ_COMM_KINDS];
  int cores;            /* per node, >= 1 */
  int ranks_per_node;   /* 0: every rank of the job on one node */
  int64_t memory;       /* bytes a rank may use; 0: unknown */
  int64_t baseline;     /* bytes a process holds before its network */
  double flops;         /* FLOP/s per rank for convolutions and affine layers; 0: use measured times */
  double bandwidth;     /* bytes/s per rank for memory-bound kernels; 0: use measured times */
} adj_machine;

/* Seconds of one operation of `kind` on a group of q members moving a block
 * of `bytes` (the model above); 0 for q <= 1 or bytes <= 0 with no latency.
 * `messages` > 0 replaces the latency count of p2p (one alpha per message). */
double adj_machine_comm_time(const adj_machine *machine, adj_comm_kind kind, int q, double bytes, double messages);

/* The kernels' threads a rank has on this machine when `ranks` ranks run
 * (cores / ranks on a node, at least 1), or ADJ_NUM_THREADS where it is set:
 * the count the run's ranks will use, so the layers are timed at it. */
int adj_machine_threads(const adj_machine *machine, int ranks);

/* Parses the text format above; `source` names it in messages. */
int adj_machine_parse(const char *text, const char *source, adj_machine *machine);
/* Reads a machine file: a regular text file (a FIFO or device is refused
 * without reading from it) of at most 1 MiB. */
int adj_machine_read(const char *path, adj_machine *machine);
/* Writes the text format (every field, the comm lines that were measured). */
int adj_machine_write(const adj_machine *machine, FILE *out);

/* Measures this host on comm: the p2p line by a ping-pong between ranks 0 and
 * 1, every collective pattern on all ranks of comm (8 B to 4 MiB, each size's
 * time the slowest rank's best of `repeats`, least squares over the lower
 * envelope), the cores online, and the baseline: the most any rank holds
 * after MPI's first collectives and a first call of the kernels (measured
 * before the sweeps, whose large messages make MPI keep buffers).  A communicator of one rank measures no communication (every
 * line 0).  Collective on comm; every rank gets rank 0's figures. */
int adj_machine_calibrate(MPI_Comm comm, int repeats, adj_machine *machine);

/* The host's measured machine for `ranks` ranks: read from the cache file
 * (ADJ_PLAN_CACHE, else $XDG_CACHE_HOME/adjoin, else $HOME/.cache/adjoin, then
 * machine-<ranks>), or measured with adj_machine_calibrate and saved there
 * when absent or unreadable.  Rank 0 reads and writes; collective on comm. */
int adj_machine_host(MPI_Comm comm, adj_machine *machine);

/* The directory of the planner's per-host caches (no trailing slash) into
 * buf; "" when no variable names one. */
void adj_plan_cache_dir(char *buf, size_t size);

/* This process's resident memory now and at its peak (VmRSS, VmHWM of
 * /proc/self/status), in bytes; 0 where the system does not say. */
int64_t adj_resident_bytes(void);
int64_t adj_peak_resident_bytes(void);

ADJ_END_DECLS

#endif
