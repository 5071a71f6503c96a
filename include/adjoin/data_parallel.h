/* Data parallelism: replicas of a network, each on its own ranks, trained on
 * different samples of every batch (ShallowSpeed, paper 004; docs/
 * parallelism.md section 3).
 *
 * The N ranks of a communicator form R replicas of M = N / R ranks each:
 * replica r holds ranks r M .. r M + M - 1, which build one copy of a
 * (sequential or model-parallel) network on the replica's communicator.  The
 * replica grid is the partition [R, M] of the whole communicator; the ranks at
 * the same position m of every replica hold the same parameter shards, and
 * their gradients are summed over dimension 0 of that grid by a gradient
 * reducer (gradient_reducer.h), which the trainer (train.h) drives during the
 * backward.  Pure data parallelism is M = 1 (a sequential network per rank);
 * `dist4` x 2 on 8 ranks is M = 4, R = 2.
 *
 * All functions are collective on the whole communicator; errors are the same
 * on every rank. */
#ifndef ADJOIN_DATA_PARALLEL_H
#define ADJOIN_DATA_PARALLEL_H

#include <mpi.h>
#include <stdint.h>

#include "adjoin/gradient_reducer.h"
#include "adjoin/layer.h"
#include "adjoin/partition.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef struct adj_replicas adj_replicas;

/* Splits comm into `replicas` replicas.  A count below 1 or one that does not
 * divide the ranks is an error naming both numbers. */
int adj_replicas_create(MPI_Comm comm, int replicas, adj_replicas **r);
void adj_replicas_destroy(adj_replicas **r);

/* The whole communicator, and this replica's ranks (build the network on it). */
MPI_Comm adj_replicas_comm(const adj_replicas *r);
MPI_Comm adj_replicas_model_comm(const adj_replicas *r);
/* The ranks at this rank's position in every replica, ordered by replica. */
MPI_Comm adj_replicas_across_comm(const adj_replicas *r);
int adj_replicas_count(const adj_replicas *r);
int adj_replicas_index(const adj_replicas *r);
/* The replica grid [R, M] on the whole communicator (replicas on dimension 0). */
const adj_partition *adj_replicas_partition(const adj_replicas *r);

/* Copies replica `root`'s parameter values into every replica's network (the
 * networks were built alike on each replica's communicator). */
int adj_replicas_broadcast_parameters(const adj_replicas *r, adj_layer *network, int root);

/* ShallowSpeed's assert_sync: a hash of every rank's parameter shards,
 * compared across replicas; parameters that differ in any bit are
 * ADJ_ERR_STATE naming the replica, the position and both hashes.  *hash (may
 * be NULL) receives a hash of replica 0's parameters, equal on every rank. */
int adj_replicas_check_sync(const adj_replicas *r, adj_layer *network, uint64_t *hash);

/* A gradient reducer (gradient_reducer.h) summing every parameter gradient of
 * `network` over dimension 0 of the replica grid, the gradients listed last
 * parameter first: the order the backward finishes them.  bucket_caps is
 * {first bucket, later buckets} in bytes, or NULL for the defaults; event and
 * event_ctx go to the reducer's config (event may be NULL). */
int adj_replicas_reducer_create(const adj_replicas *r, adj_layer *network, const int64_t *bucket_caps,
                                void (*event)(void *ctx, adj_reducer_event event, int bucket), void *event_ctx,
                                adj_gradient_reducer **reducer);

/* For a network's backward hook (network.h), after stage `index`'s backward:
 * its parameters' gradients are final, so they are marked ready in a reducer
 * from adj_replicas_reducer_create and the reductions are poked. */
int adj_replicas_reducer_stage_done(adj_layer *network, adj_gradient_reducer *reducer, int index);

ADJ_END_DECLS

#endif
