/* Private helpers shared by the distributed layers (dist_layer.c)
 * (pointwise_layer.c, pool_layer.c, affine_layer.c, repartition_layer.c). */
#ifndef ADJOIN_LAYERS_DIST_LAYER_IMPL_H
#define ADJOIN_LAYERS_DIST_LAYER_IMPL_H

#include "adjoin/pointwise_layer.h"
#include "adjoin/op.h"
#include "layer_impl.h"

/* A view of t's storage with another shape of the same volume: the operators
 * see a rank-2 block (N, F) as (N, 1, F) so it broadcasts against a rank-3
 * work partition, and a bias (F) as (F, 1).  ADJ_ERR_SIZE if the volumes
 * differ (a bug, not a user error). */
int adj_reshape_view(const adj_tensor *t, int rank, const int64_t *shape, adj_tensor *view);

/* Checks the arguments every creator shares (config and input present, valid
 * dtype); `who` prefixes the message.  Not collective: every rank sees the
 * same arguments. */
int adj_layer_config_check(const char *who, const void *config, adj_dtype dtype, const adj_decomposition *input);

/* Agrees on a status found on this rank only (an allocation) over the base
 * communicator of d's partition, so every rank fails together. */
int adj_layer_agree(const adj_decomposition *d, int status);

/* Allocates a layer whose local input and output shapes are this worker's
 * blocks of `input` and `output`, and records both layouts (references).  On
 * failure impl is left to the caller.  Collective on the layouts' base. */
int adj_layer_alloc_between(const char *name, adj_dtype dtype, const adj_decomposition *input,
                            const adj_decomposition *output,
                            const adj_layer_methods *methods, void *impl, adj_layer **layer);

/* A partition of p's ranks, in p's grid order, with another shape of the same
 * size: the layers see (N, F) on P_b x P_f as (N, 1, F) on P_b x 1 x P_f.
 * Collective on p's base communicator. */
int adj_partition_reshape(const adj_partition *p, int ndim, const int *shape, adj_partition **reshaped);

/* dst = src when both have the same volume and dtype (a reshaping copy). */
void adj_tensor_copy_flat(adj_tensor *dst, const adj_tensor *src);

/* Applies up to ADJ_LAYER_MAX_MOVES operators at once in one direction,
 * overlapping their communication (all are begun, then all ended); an entry
 * with a NULL operator or input is skipped. */
enum { ADJ_LAYER_MAX_MOVES = 4 };


/* The common end of an affine-like creator: allocates the layer between
 * input and output layouts around impl (freed with free_impl if allocation
 * fails), adds parameter "weight" and, when bias is not NULL, "bias", and
 * agrees on the outcome; on failure *layer is NULL.  Collective. */
int adj_layer_create_weighted(const char *name, adj_dtype dtype, const adj_decomposition *input,
                              adj_decomposition *output, const adj_layer_methods *methods, void *impl,
                              void (*free_impl)(void *), adj_decomposition *weight, adj_decomposition *bias,
                              adj_layer **layer);
/* Applies up to ADJ_LAYER_MAX_MOVES operators at once in one direction (an
 * entry with a NULL input is skipped), overlapping their communication.
 * `prior`, a local failure this rank already has, goes to the first
 * operator's check (adj_op_begin_after) and is returned unless an operator
 * fails, so one rank's failure reaches every rank without a hang. */
int adj_layer_move_ops(int prior, int n, adj_op *const *ops, adj_direction direction, const adj_tensor *const *in,
                       adj_tensor *const *out);

#endif
