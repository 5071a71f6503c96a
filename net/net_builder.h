/* Private helpers of the network builders (lenet.c, encdec.c): a builder
 * walks a network stage by stage keeping the current global layout; each
 * stage takes it as input and hands on its output layout, and glue (a
 * repartition layer) is inserted only where the next stage needs another
 * layout, so a sequential network is the same code with every partition of
 * extent 1 and no glue. */
#ifndef ADJOIN_NET_BUILDER_H
#define ADJOIN_NET_BUILDER_H

#include <mpi.h>
#include <stdbool.h>

#include "adjoin/decomposition.h"
#include "adjoin/layer.h"

enum { ADJ_BUILDER_MAX_STAGES = 32 };

typedef struct adj_builder {
  MPI_Comm comm;
  adj_dtype dtype;
  adj_decomposition *current; /* owned reference: the layout the next stage takes */
  adj_layer *stages[ADJ_BUILDER_MAX_STAGES];
  int n;
} adj_builder;

/* Appends a created stage (or passes its failure on) and moves `current` on
 * to its output layout.  The stage comes by address because the creation
 * call that fills it is an argument of the same call. */
int adj_builder_push(adj_builder *b, int status, adj_layer **stage);

/* The current layout becomes (ndim, parts, shape) on the first ranks of the
 * communicator, with no stage (the network's input). */
int adj_builder_start(adj_builder *b, int ndim, const int *parts, const int64_t *shape);

/* Moves the current tensor onto the layout (ndim, parts, shape), through a
 * repartition layer unless it is already there. */
int adj_builder_glue(adj_builder *b, int ndim, const int *parts, const int64_t *shape);

/* A grid layout name "RxC" (no trailing text), 1 <= R <= max_rows and
 * 1 <= C <= max_cols, into parts[0] = R, parts[1] = C; false otherwise. */
bool adj_builder_parse_grid(const char *name, int max_rows, int max_cols, int parts[2]);

/* A ReLU on the current layout. */
int adj_builder_relu(adj_builder *b);

/* Composes the stages into a network named `name` (status: the builder's so
 * far; nothing is made after a failure) and releases the builder's
 * references either way. */
int adj_builder_finish(adj_builder *b, int status, const char *name, adj_layer **network);

#endif
