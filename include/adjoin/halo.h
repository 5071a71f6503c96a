/* Generalized, unbalanced halo exchange and its adjoint (DistDL paper, eqs.
 * 10-12 and appendix B).
 *
 * The operator works in place on each worker's local tensor: its bulk extended
 * by the halos of adj_halo_geometry (halo_geometry.h), so domain = range = that
 * padded local shape.
 *
 *   forward:  halo <- copy of the owners' bulk; the bulk is unchanged.
 *   adjoint:  each halo is sent back, *added* into the owner's bulk, and
 *             cleared.
 *
 * Two algorithms compute this same operator:
 *  - nested (eq. 11): one dimension at a time, in order 0..d-1, each worker
 *    packs the parts of its bulk other workers need (H = K_T C_U C_E C_P K_S
 *    per dimension), exchanges them with nonblocking point-to-point messages
 *    and unpacks them into its halo.  In dimension i the packed region spans
 *    the bulk *and the halos already received* in dimensions 0..i-1, so
 *    corners arrive without diagonal messages; the adjoint runs the
 *    dimensions in reverse order (eq. 12).  d rounds, at most 2 peers each.
 *  - direct: one round; each halo region comes straight from the worker whose
 *    bulk holds it, corners from the diagonal neighbours (up to 3^d - 1
 *    peers).  Nothing is relayed, so no worker waits for another's earlier
 *    round, and a split-phase begin (op.h) returns without waiting at all.
 * Both move the same entries; the adjoint's sums may associate differently
 * (within rounding; each algorithm is deterministic run to run).
 * ADJ_HALO_AUTO takes nested: on the 2-core hosts adjoin is measured on,
 * direct was no faster, for LeNet-5's dist4 layout or bench-halo's exchanges
 * (bench/RESULTS.md), and it sends more messages.  The process's default
 * (adj_halo_algorithm_set_default, else the environment variable
 * ADJ_HALO_ALGORITHM=auto|nested|direct, read once) overrides AUTO for every
 * exchange made afterwards (the tests run both), and adj_op_algorithm names
 * the one taken.
 *
 * Which region each worker needs from another follows from the receiver's
 * geometry, which every worker computes locally.  A halo wider than the
 * adjacent worker's bulk (narrow or empty blocks from explicit cuts) is filled
 * by every worker whose bulk it overlaps, each sending its piece directly.
 * Message plans and buffers are built at creation; an application allocates
 * nothing.  The same operator serves centred, padded convolution kernels and
 * one-sided, strided pooling kernels: only the geometry differs.
 *
 * The halo contents before a forward application do not matter (they are
 * overwritten); after the adjoint they are zero.  Trimming surplus input and
 * padding at global boundaries are the local kernel's business: see
 * adj_halo_local.kernel_input and .padding. */
#ifndef ADJOIN_HALO_H
#define ADJOIN_HALO_H

#include "adjoin/halo_geometry.h"
#include "adjoin/op.h"
#include "adjoin/partition.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef enum adj_halo_algorithm {
  ADJ_HALO_AUTO = 0, /* the process's default, else the rule above */
  ADJ_HALO_NESTED,
  ADJ_HALO_DIRECT,
} adj_halo_algorithm;

/* The process's default algorithm: what adj_halo_algorithm_set_default set,
 * else ADJ_HALO_ALGORITHM (read at the first call), else AUTO.  Not
 * collective, but every rank must set the same (the geometry check finds
 * ranks that differ).  ADJ_ERR_ARG naming a bad variable's value, a value
 * outside the enum or a NULL pointer. */
int adj_halo_algorithm_get_default(adj_halo_algorithm *algorithm);
int adj_halo_algorithm_set_default(adj_halo_algorithm algorithm);

/* Creates the halo exchange for `geometry` on `partition`, whose shape must
 * equal the geometry's parts.  Workers outside the partition get zero-volume
 * domain and range and take part in no message.  Collective on the partition's
 * base communicator; every rank passes the same geometry (checked: ranks that
 * disagree all fail instead of deadlocking later). */
int adj_halo_create(adj_dtype dtype, const adj_partition *partition, const adj_halo_geometry *geometry, adj_op **op);

/* The same with the algorithm chosen by the caller; a forced algorithm
 * (NESTED or DIRECT) wins over the process's default.  Every rank passes the
 * same algorithm (checked with the geometry). */
int adj_halo_create_with_algorithm(adj_dtype dtype, const adj_partition *partition,
                                   const adj_halo_geometry *geometry, adj_halo_algorithm algorithm, adj_op **op);

ADJ_END_DECLS

#endif
