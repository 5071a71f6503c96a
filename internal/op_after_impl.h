/* Private to the library, for the layers above primitives/: applying an
 * operator after a local step that may have failed on some ranks.  Only these
 * two declarations, so layers see no operator internals. */
#ifndef ADJOIN_PRIMITIVES_OP_AFTER_IMPL_H
#define ADJOIN_PRIMITIVES_OP_AFTER_IMPL_H

#include "adjoin/op.h"

/* adj_op_begin / adj_op_apply for a caller whose own local step just before
 * may have failed on some ranks (*prior / prior: this rank's status so far).
 * When this application is one the operator's check level agrees on, the local status is agreed on together with
 * the argument check (the one agreement a checked begin makes): on failure
 * every rank returns the agreed error here (also stored in *prior) and nothing
 * is begun.  When it is not (level off, or first after its first application), which some ranks skip the operator entirely
 * for, no agreement is made: the operator runs as usual so no rank is left
 * waiting, and the local failure stays in *prior for the caller's own
 * agreement (adj_layer_* agrees on a layer's outcome).  adj_op_apply_after
 * returns the operator's failure, else prior. */
int adj_op_begin_after(int *prior, adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out);
int adj_op_apply_after(int prior, adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out);

#endif
