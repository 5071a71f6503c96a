/* Layers: nonlinear functions with parameters, local or distributed.
 *
 * A layer maps an input block to an output block on every worker of its base
 * communicator (zero-volume blocks where a worker holds nothing) and exposes
 * the three maps a gradient-based trainer and the Jacobian dot-product test
 * need, at the point (x, theta) of the last forward:
 *
 *   forward   y = f(x; theta)               caches what backward and jvp need
 *   jvp       dy = J_x dx + J_theta dtheta  the tangent-linear map; dtheta is
 *                                           read from each parameter's tangent
 *   backward  dx = J_x^T dy                 and grad += J_theta^T dy
 *
 * forward, jvp and backward OVERWRITE y, dy and dx; backward ACCUMULATES into
 * parameter gradients (llm.c style), so a trainer zeroes them once per step.
 * dx may be NULL in jvp (no input perturbation) and in backward (no input
 * gradient wanted, e.g. for the first layer).  The input passed to forward, and
 * the parameters' values, must stay unchanged until the matching backward / jvp
 * (the layer may keep views, not copies, like an autograd tape: where its
 * operators are identities, op.h, its kernels read them where they lie).
 *
 * Distributed layers are compositions of adjoin's operators (halo exchange,
 * broadcast, sum-reduce, repartition) with the local kernels (conv.h, pool.h, affine.h, ...); the
 * data movement is linear, so its part of jvp is the forward operator and its
 * part of backward is the adjoint operator.  Each parameter lives where the
 * algorithm puts it (e.g. a convolution's weights on its P_co x P_ci partition,
 * its bias on one P_co x 1 column); `layout` says which worker holds which block
 * of the global parameter, so global (sequential) parameter sets can be
 * scattered onto a distributed layer and gathered back (adj_layer_set_parameter,
 * adj_layer_get_parameter) and checkpoints stay portable.
 *
 * All calls are collective over the layer's base communicator.  Those that
 * return a status fail with ADJ_ERR_ARG for a NULL layer, on the ranks that
 * passed NULL only and without communicating (there is no communicator to
 * tell the others on), so a NULL layer must be passed on every rank or none.
 * For NULL, adj_layer_parameter returns NULL and the zero calls do nothing;
 * the other accessors require a layer. */
#ifndef ADJOIN_LAYER_H
#define ADJOIN_LAYER_H

#include <mpi.h>

#include "adjoin/decomposition.h"
#include "adjoin/tensor.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef struct adj_layer adj_layer;

typedef struct adj_parameter {
  char name[48];                /* "weight", "bias" */
  adj_tensor value;             /* this worker's block (zero volume where it does not live) */
  adj_tensor grad;              /* same shape; backward adds into it */
  adj_tensor tangent;           /* same shape; jvp reads the perturbation from it */
  adj_decomposition *layout;    /* global shape and which worker holds which block */
} adj_parameter;

int adj_layer_forward(adj_layer *layer, const adj_tensor *x, adj_tensor *y);
int adj_layer_jvp(adj_layer *layer, const adj_tensor *dx, adj_tensor *dy);
int adj_layer_backward(adj_layer *layer, const adj_tensor *dy, adj_tensor *dx);

const char *adj_layer_name(const adj_layer *layer);
adj_dtype adj_layer_dtype(const adj_layer *layer);
/* The layer's own duplicate of the communicator it was created on.  The
 * layer's collectives and agreements run on it (its agreements as
 * point-to-point messages, agree.h): use it for collectives of the same ranks,
 * not for point-to-point messages of the caller's own. */
MPI_Comm adj_layer_comm(const adj_layer *layer);
/* Local input / output block shapes on this worker. */
int adj_layer_input_rank(const adj_layer *layer);
const int64_t *adj_layer_input_shape(const adj_layer *layer);
int adj_layer_output_rank(const adj_layer *layer);
const int64_t *adj_layer_output_shape(const adj_layer *layer);
int adj_layer_create_input(const adj_layer *layer, adj_tensor *x);
/* Global layouts of the input and output: which worker holds which block.
 * NULL for a layer that records none.  A network chains a layer's output
 * layout into the next layer's input; tests scatter and gather through them. */
const adj_decomposition *adj_layer_input_layout(const adj_layer *layer);
const adj_decomposition *adj_layer_output_layout(const adj_layer *layer);
int adj_layer_create_output(const adj_layer *layer, adj_tensor *y);

/* Parameters in a fixed order; a network lists its layers' parameters in layer
 * order.  The pointer stays valid for the layer's life, but the tensors'
 * storage may be moved (a network packs all parameters into one allocation),
 * so read value/grad/tangent through the adj_parameter at each use. */
int adj_layer_parameter_count(const adj_layer *layer);
adj_parameter *adj_layer_parameter(adj_layer *layer, int index);
/* Sets every parameter's grad (or tangent) to zero on this worker. */
void adj_layer_zero_grad(adj_layer *layer);
void adj_layer_zero_tangent(adj_layer *layer);

/* Scatters a global parameter held whole on base rank `root` (ignored
 * elsewhere; may be NULL there) onto the parameter's layout, and gathers it
 * back.  Collective. */
int adj_layer_set_parameter(adj_layer *layer, int index, int root, const adj_tensor *global);
int adj_layer_get_parameter(adj_layer *layer, int index, int root, adj_tensor *global);
/* Gathers the parameter's gradient the same way (for comparisons with a
 * sequential twin). */
int adj_layer_get_gradient(adj_layer *layer, int index, int root, adj_tensor *global);
/* The same scatter (global on root -> local) or gather (local -> global on
 * root) for any tensor laid out like parameter `index` (this worker's block
 * shape), e.g. an optimizer's moments for a checkpoint.  Collective. */
int adj_layer_move_parameter_data(adj_layer *layer, int index, int root, bool scatter, adj_tensor *local,
                                  adj_tensor *global);

adj_layer *adj_layer_reference(adj_layer *layer);
void adj_layer_destroy(adj_layer **layer);

ADJ_END_DECLS

#endif
