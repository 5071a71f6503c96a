/* Networks.
 *
 * A network is an ordered composition of layers, y = f_{n-1}(... f_0(x)), and
 * is itself an adj_layer: its parameters are its layers' parameters in layer
 * order, its jvp is the chain of jvps and its backward the chain of backwards
 * in reverse, so the whole network's Jacobian gets the same dot-product test
 * as any layer (adj_dottest_layer).  Data-movement operators enter a network
 * through parameter-free layers (the repartition layer), so every stage has
 * the same interface.
 *
 * Storage (llm.c style): intermediate activations and their gradients live in
 * two allocations made at creation, reused for every batch; all parameter
 * values, gradients and tangents are moved into three contiguous buffers with
 * one identical layout, so an optimizer step, a zero-grad and a data-parallel
 * gradient all-reduce are each one flat operation on this worker's shards.
 */
#ifndef ADJOIN_NETWORK_H
#define ADJOIN_NETWORK_H

#include <stdbool.h>
#include <stdint.h>

#include "adjoin/layer.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

/* Composes n layers (references taken).  Consecutive local output/input shapes
 * and dtypes must match on every worker.  Collective on the layers' base
 * communicator. */
int adj_network_create(const char *name, int n, adj_layer *const *layers, adj_layer **network);

/* Whether `layer` is a network made by adj_network_create (false for NULL).
 * The adj_network_* functions below check it: given any other layer, or
 * NULL, they fail with ADJ_ERR_ARG (or -1 / NULL) and a message naming the
 * layer.  adj_network_init_uniform alone accepts any layer. */
bool adj_layer_is_network(const adj_layer *layer);

/* The number of stages of a network; -1 if `network` is not one. */
int adj_network_depth(const adj_layer *network);
/* The index-th stage of a network; NULL if `network` is not one or index is
 * outside 0 .. depth - 1 (adj_last_error() says which). */
adj_layer *adj_network_layer(adj_layer *network, int index);

/* Training (true) or evaluation mode for every mode-dependent stage of the
 * network, nested networks included: batch norm layers (batchnorm_layer.h) then
 * normalise with batch or running statistics.  A network starts in training
 * mode.  Not collective, but every rank must choose the same mode.
 * ADJ_ERR_ARG if `network` is not a network. */
int adj_network_set_training(adj_layer *network, bool training);

/* Parameters of stage `index`: their positions first..first+count-1 in the
 * network's parameter list.  ADJ_ERR_ARG if `network` is not a network, index
 * is outside 0 .. depth - 1, or first or count is NULL. */
int adj_network_stage_parameters(const adj_layer *network, int index, int *first, int *count);

/* A hook around each stage's backward, for a trainer that overlaps gradient
 * reductions with the rest of the backward (gradient_reducer.h) or traces it:
 * called with ADJ_BACKWARD_BEGIN before stage `index` runs its backward and
 * ADJ_BACKWARD_END after (its parameters' gradients are then final for this
 * backward).  A nonzero return stops the backward with that status.  NULL
 * removes the hook.  Not collective.  ADJ_ERR_ARG if `network` is not a
 * network. */
typedef enum adj_backward_event { ADJ_BACKWARD_BEGIN = 0, ADJ_BACKWARD_END = 1 } adj_backward_event;
typedef int adj_backward_hook(void *ctx, int index, adj_backward_event event);
int adj_network_set_backward_hook(adj_layer *network, adj_backward_hook *hook, void *ctx);

/* Flat views of this worker's packed parameter values and gradients (rank 1;
 * zero volume if the worker holds no parameter).  ADJ_ERR_ARG if `network` is
 * not a network. */
int adj_network_flat_parameters(adj_layer *network, adj_tensor *values, adj_tensor *grads);

/* Initialises every parameter like PyTorch's default: uniform on
 * (-1/sqrt(fan_in), 1/sqrt(fan_in)), fan_in the weight's input volume (C_in k k
 * or F_in; a bias uses its weight's); batch norm weights 1 and biases 0
 * (PyTorch's), drawing nothing; a phantom layer's parameters so that it
 * starts like the dense layer it stands for (its local blocks with the dense
 * fan-in n_in, its compressor with the fan-in of its own input block n_in/p,
 * its decompressor with bound sqrt(3/(p k)): network.c says why).  The global values are drawn on rank 0
 * from `seed` in parameter order (float64, then rounded to the dtype) and
 * scattered onto each parameter's layout, so every layout starts from the same
 * global parameters.  Works for any network, and for a lone layer too (drawn
 * the same way; a lone batch norm layer is drawn uniform, not 1 and 0).
 * Collective.  ADJ_ERR_ARG if `network` is NULL. */
int adj_network_init_uniform(adj_layer *network, uint64_t seed);

ADJ_END_DECLS

#endif
