/* Deep halos: a run of convolution, pooling and activation layers on one
 * spatial partition, fused into one layer that exchanges one halo sized for
 * the whole run instead of one per layer (DistDL issue 169).
 *
 * The geometry composes backwards (adj_halo_geometry_create_run): the block of
 * the run's last output a worker owns is mapped back through each layer's
 * window (kernel, stride, dilation, padding), giving the range each layer
 * must compute on that worker and, at the start, the input range the run
 * reads.  One halo exchange H fills that range; then every layer runs its
 * local kernel over its extended range (work in the overlap is done twice, by
 * neighbours), zero padding applying only at the global boundary, and the
 * last layer produces exactly the owned block.  So the fused layer is
 *
 *   forward   y  = F_k(... F_1(T H x))        F_j the local kernels, T the trim
 *   jvp       dy = dF_k(... dF_1(T H dx))     parameter tangents broadcast in
 *   backward  dx = H* T* dF_1^T(... dF_k^T(dy))
 *
 * and the parameter gradients need no masking: each worker's chain is a
 * function of its own extended input, so the global gradient is the sum of
 * the workers' local gradients, which the adjoint of the parameter broadcast
 * (a sum-reduce onto the parameter's owner) forms.  Each output element is
 * computed from the same inputs by the same local kernel as in the
 * layer-by-layer run, so the forward equals it bit for bit as long as the
 * convolution algorithm gives each element the same arithmetic for any
 * extent (conv.h; pin it with ADJ_CONV_ALGORITHM to compare).
 *
 * Cost: one exchange (k times fewer messages for k layers that each exchange
 * with the same neighbours) against wider halos and redundant flops in the
 * overlap, growing with the run's depth; docs/deep-halos.md weighs the two.
 *
 * What fuses: layers made by adj_conv_layer_create whose channels are not
 * split and whose work and output partitions are the input's workers
 * (P_co = P_ci = 1, any batch and spatial split), adj_pool_layer_create and
 * adj_activation_layer_create, each taking the previous one's output layout,
 * all on one partition (same workers, same grid).  The fused layer has the
 * run's parameters in order, with the same names and layouts (each
 * convolution's weight and bias on its owner), initialised from the layers'
 * current values; the given layers are not changed or kept (the output and
 * parameter layouts are rebuilt on the layer's own communicator), so they may
 * be destroyed.  The run's input layout is referenced, as by any layer: its
 * partition's communicator must outlive the fused layer.
 *
 * Creation is collective over the layers' base communicator; every check is a
 * function of arguments all ranks share, so bad input (count < 1, a layer that
 * cannot be fused, a layer on another partition, a run some worker cannot
 * extend) fails on every rank with the same message.  A NULL dx in jvp or
 * backward is a collective choice: every rank passes NULL or none does. */
#ifndef ADJOIN_DEEP_HALO_LAYER_H
#define ADJOIN_DEEP_HALO_LAYER_H

#include <stdbool.h>

#include "adjoin/layer.h"
#include "adjoin/op.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef struct adj_deep_halo_config {
  const char *name;         /* optional; default "deep halo" */
  int count;                /* k >= 1 layers in the run */
  adj_layer *const *layers; /* the run, in order */
} adj_deep_halo_config;

int adj_deep_halo_layer_create(const adj_deep_halo_config *config, adj_layer **layer);

/* Whether `layer` is of a kind a run can hold (convolution, pool,
 * activation); the partition checks happen at creation. */
bool adj_deep_halo_fusable(const adj_layer *layer);

/* What this worker's one halo exchange counted since creation (or the last
 * reset), forward and adjoint; ADJ_ERR_ARG when layer is not a deep halo layer. */
int adj_deep_halo_layer_counters(const adj_layer *layer, adj_op_counters *halo);
void adj_deep_halo_layer_reset_counters(adj_layer *layer);

ADJ_END_DECLS

#endif
