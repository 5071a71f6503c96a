/* Private layer interface: what a layer implementation fills in (the layer
 * counterpart of primitives/op_impl.h).  The dispatcher in layer.c checks
 * tensor shapes and dtypes, agrees on the outcome across ranks, and calls
 * these. */
#ifndef ADJOIN_LAYERS_LAYER_IMPL_H
#define ADJOIN_LAYERS_LAYER_IMPL_H

#include "adjoin/layer.h"
#include "dtype_impl.h"
#include "error_impl.h"

typedef struct adj_layer_methods {
  int (*forward)(adj_layer *layer, const adj_tensor *x, adj_tensor *y);
  int (*jvp)(adj_layer *layer, const adj_tensor *dx, adj_tensor *dy);         /* dx may be NULL */
  int (*backward)(adj_layer *layer, const adj_tensor *dy, adj_tensor *dx);    /* dx may be NULL */
  void (*destroy)(adj_layer *layer);                                          /* frees impl; may be NULL */
} adj_layer_methods;

struct adj_layer {
  char name[64];
  int refcount;
  adj_dtype dtype;
  MPI_Comm comm;            /* owned duplicate of the base communicator */
  adj_wait_policy wait;
  int input_rank, output_rank;
  int64_t input_shape[ADJ_MAX_RANK], output_shape[ADJ_MAX_RANK];
  /* Parameters are held by pointer: a simple layer owns its own (owned[i]), a
   * composite layer (a network) lists its children's.  Implementations read
   * parameter tensors through these pointers at every call, never a cached
   * data pointer, because a network may move all parameter storage into one
   * allocation. */
  int n_parameters, capacity;
  adj_parameter **parameters;
  bool *owned;
  const adj_tensor *input;  /* the x of the last forward (not owned) */
  /* Global layouts of input and output (owned references; NULL when the layer
   * has none), so networks chain layers and tests scatter and gather. */
  adj_decomposition *input_layout, *output_layout;
  adj_layer_methods methods;
  void *impl;
};

/* Allocates a layer on a duplicate of base (collective on base). */
int adj_layer_alloc(const char *name, MPI_Comm base, adj_dtype dtype, int input_rank, const int64_t *input_shape,
                    int output_rank, const int64_t *output_shape, const adj_layer_methods *methods, void *impl,
                    adj_layer **layer);

/* Adds a parameter whose global layout is `layout` (referenced); value, grad
 * and tangent are allocated at this worker's block shape and zeroed. */
int adj_layer_add_parameter(adj_layer *layer, const char *name, adj_decomposition *layout);

/* Records the global input and output layouts (references taken; either may
 * be NULL). */
void adj_layer_set_layouts(adj_layer *layer, adj_decomposition *input, adj_decomposition *output);

/* Lists a parameter owned by another layer (a child of a composite). */
int adj_layer_share_parameter(adj_layer *layer, adj_parameter *parameter);

/* A composite's calls of its stages: the layer's method, with neither an
 * argument check nor an agreement.  The composite checks its own arguments and
 * agrees on them, and on the outcome, once at its public call; its stages'
 * tensors match by construction (checked when it was built).  A stage runs
 * whatever `prior` (a failure of an earlier stage on this rank) holds, so
 * every rank makes the same collectives -- a layer's method completes its
 * collectives even when one of its local steps fails -- and the first failure
 * is returned, to be agreed at the composite's public call. */
int adj_layer_forward_stage(int prior, adj_layer *layer, const adj_tensor *x, adj_tensor *y);
int adj_layer_jvp_stage(int prior, adj_layer *layer, const adj_tensor *dx, adj_tensor *dy);
int adj_layer_backward_stage(int prior, adj_layer *layer, const adj_tensor *dy, adj_tensor *dx);

/* adj_layer_forward / backward with `prior` (a failure the caller has on this
 * rank) folded into their argument agreement and the method's outcome returned
 * unagreed (*agreed false): the caller agrees on it before its next collective
 * outside the layer.  *agreed true: the status is agreed (the check failed on
 * some rank, or prior did) and nothing ran. */
int adj_layer_forward_open(int prior, adj_layer *layer, const adj_tensor *x, adj_tensor *y, bool *agreed);
int adj_layer_backward_open(int prior, adj_layer *layer, const adj_tensor *dy, adj_tensor *dx, bool *agreed);

#endif
