/* Operators: linear maps with a forward and a coherent adjoint.
 *
 * Every data movement in adjoin (memory primitives, send-receive, scatter,
 * gather, broadcast, sum-reduce, all-sum-reduce, all-gather, reduce-scatter,
 * repartition, halo exchange) is an adj_op.  An operator is created once (all
 * planning, buffers and sub-communicators are made then), applied many times
 * with no allocation, and destroyed once.  Its *domain* and *range* are the
 * local tensor shapes on this worker; inactive workers have zero-volume shapes.
 *
 *   forward:  y = F x     (x in the domain, y in the range)
 *   adjoint:  x = F* y    (the adjoint of the paper's section 3, e.g. broadcast's
 *                          adjoint is a sum-reduce)
 *
 * Both directions overwrite their output.  In-place operators (halo exchange,
 * the in-place memory primitives) take the same tensor as input and output.
 *
 * Application is collective over the base communicator the operator was made
 * on: every rank calls it, inactive ranks with zero-volume tensors.  Before any
 * data moves, each rank checks its tensors' dtype and shape against the
 * operator.  How often the outcome is agreed across ranks (adj_status_agree, one
 * small nonblocking all-reduce, so that a bad tensor on one rank is an error on
 * every rank instead of a hang) is the operator's check level
 * (adj_check_level below, docs/checking.md).
 *
 * Split phase: adj_op_begin posts the communication and returns; adj_op_end
 * completes it.  Between them the caller may compute but must not touch the
 * input or output.  One application per operator may be outstanding. A trainer
 * uses this to overlap gradient reductions with the backward pass.
 *
 * Counters record the payload each worker moved: bytes and messages it sent and
 * received (a collective contribution counts as one message), which is what the
 * communication cost models of the later papers need. */
#ifndef ADJOIN_OP_H
#define ADJOIN_OP_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "adjoin/tensor.h"
#include "adjoin/wait.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef struct adj_op adj_op;

typedef enum adj_direction { ADJ_FORWARD = 0, ADJ_ADJOINT = 1 } adj_direction;

typedef struct adj_op_counters {
  uint64_t forward_applications;
  uint64_t adjoint_applications;
  uint64_t bytes_sent;
  uint64_t bytes_received;
  uint64_t messages_sent;
  uint64_t messages_received;
} adj_op_counters;

/* y = F x.  Collective over the operator's base communicator. */
int adj_op_forward(adj_op *op, const adj_tensor *x, adj_tensor *y);
/* x = F* y.  Collective over the operator's base communicator. */
int adj_op_adjoint(adj_op *op, const adj_tensor *y, adj_tensor *x);
/* Either direction: out = F in (forward) or out = F* in (adjoint). */
int adj_op_apply(adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out);

/* Split-phase application: begin validates and posts, end completes. */
int adj_op_begin(adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out);
int adj_op_end(adj_op *op);
/* Accumulate mode (libCEED's ApplyAdd, PetscSF's reduce with MPI_SUM): while
 * on for a direction, applications in it ADD into their output (out += F in,
 * or out += F* in) instead of overwriting it, with no extra buffer or pass
 * where the operator supports it natively: a sum-reduce (a broadcast's
 * adjoint) starts its sum from the output's own contents.  Off by default.
 * ADJ_ERR_ARG for an operator and direction that cannot accumulate
 * (adj_op_can_accumulate).  Set it alike on every rank; not collective. */
int adj_op_set_accumulate(adj_op *op, adj_direction direction, bool accumulate);
bool adj_op_can_accumulate(const adj_op *op, adj_direction direction);
/* Identity operators.  Where the source and destination of a data movement
 * coincide on this worker (a halo exchange with no neighbour and no halo to
 * fill, a broadcast or sum-reduce whose block stays on its own worker, a
 * repartition to the same block), the operator is the identity there: no
 * message, no partner, y = x.  It is decided once, at creation, from the plan
 * (as PetscSF decides its local part), per worker: one worker of a
 * distributed operator can be an identity while others communicate.
 *
 * An identity still takes part in every application (the argument check and
 * its agreement run as for any operator, so collectives stay matched), but
 * applied to an input and output that share storage it moves nothing: the
 * caller produced the output in place.  That holds in accumulate mode too, so
 * a caller that adds into the aliased output has already accumulated.  With
 * separate storage it copies, as the operator always did.
 *
 * Layers use the alias calls to get one code path whose cheap case falls out
 * of the operators: adj_op_alias_output names where a forward chain finds the
 * output (a view of the input for an identity, else the buffer to apply
 * into); adj_op_alias_input names where a caller should write the input so
 * the output needs no move (a view of the output for an identity, else the
 * buffer).  Neither is collective nor moves data; apply afterwards as usual. */
int adj_op_is_identity(const adj_op *op);
/* *out = a view of `in` in the direction's output shape if the operator is an
 * identity on this worker, else a view of `buffer`.  ADJ_ERR_ARG naming the
 * operator when in's dtype or volume is not the direction's input. */
int adj_op_alias_output(const adj_op *op, adj_direction direction, const adj_tensor *in, const adj_tensor *buffer,
                        adj_tensor *out);
/* *in = a view of `out` in the direction's input shape if the operator is an
 * identity on this worker, else a view of `buffer`. */
int adj_op_alias_input(const adj_op *op, adj_direction direction, const adj_tensor *out, const adj_tensor *buffer,
                       adj_tensor *in);

/* Nonzero while an application is outstanding. */
int adj_op_pending(const adj_op *op);
/* Progresses an outstanding application without blocking (one MPI_Test):
 * *done becomes 1 once its communication has completed, 0 otherwise (and 1
 * when nothing is outstanding).  adj_op_end is still required.  Not
 * collective; lets a trainer poke reductions between layers' backwards. */
int adj_op_test(adj_op *op, int *done);

/* Composition: ops[0] is applied first, so the result is ops[n-1] ... ops[0].
 * Consecutive range/domain shapes and dtypes must match.  Its adjoint applies the
 * adjoints in reverse order.  The composition holds references to the ops (the
 * caller may destroy its own handles) and owns intermediate buffers; an
 * identity stage passes its input on as a view, and a composition of
 * identities is itself an identity (adj_op_is_identity).
 * Collective over the common base communicator. */
int adj_op_compose(int n, adj_op *const *ops, adj_op **composed);

/* Adds a reference; destroy drops one and frees at zero.  NULL-safe.
 * Destroy is collective when it frees (communicators are released). */
adj_op *adj_op_reference(adj_op *op);
void adj_op_destroy(adj_op **op);

const char *adj_op_name(const adj_op *op);
/* The algorithm the operator chose at creation on this worker (e.g. a
 * sum-reduce's "bcast, sum allreduce"); "direct" when it has no choice. */
const char *adj_op_algorithm(const adj_op *op);
adj_dtype adj_op_dtype(const adj_op *op);
/* The operator's own duplicate of its base communicator, on which it moves
 * data and agrees (as adj_layer_comm: no point-to-point messages of the
 * caller's on it). */
MPI_Comm adj_op_comm(const adj_op *op);
/* Local domain / range shapes on this worker. */
int adj_op_domain_rank(const adj_op *op);
const int64_t *adj_op_domain_shape(const adj_op *op);
int adj_op_range_rank(const adj_op *op);
const int64_t *adj_op_range_shape(const adj_op *op);
/* Nonzero when the op works in place (input and output must be the same tensor). */
int adj_op_in_place(const adj_op *op);
/* Zero-filled tensors of the local domain / range shape. */
int adj_op_create_domain_tensor(const adj_op *op, adj_tensor *t);
int adj_op_create_range_tensor(const adj_op *op, adj_tensor *t);

void adj_op_get_counters(const adj_op *op, adj_op_counters *counters);
void adj_op_reset_counters(adj_op *op);

/* How often an application agrees on the argument check across ranks.
 *   FULL:  every application (the default, and the test suite's level).  A
 *          bad tensor on any rank, at any application, is the same error on
 *          every rank.
 *   FIRST: the first application in each direction, then never: later
 *          applications check locally only.  A tensor that turns bad after the
 *          first application is an error on its own rank, which still takes
 *          part in the data movement with scratch buffers so no other rank
 *          waits forever; the other ranks complete normally (their output
 *          includes zeros from that rank).
 *   OFF:   no agreement; local checks only, with the same no-hang fallback.
 * AUTO resolves to the process's default level: adj_check_level_set_default's,
 * else the environment variable ADJ_CHECK=full|first|off (read once), else
 * FULL.  The level is agreed across ranks at creation (the strictest wins),
 * so ranks never disagree on whether to communicate. */
typedef enum adj_check_level {
  ADJ_CHECK_AUTO = 0,
  ADJ_CHECK_FULL = 1,
  ADJ_CHECK_FIRST = 2,
  ADJ_CHECK_OFF = 3
} adj_check_level;

/* Sets the level.  Collective: every rank must set the same level (a layer
 * that validates its caller's tensors at its own boundary sets OFF on the
 * operators it applies to buffers it made itself).  AUTO re-reads the default. */
void adj_op_set_check_level(adj_op *op, adj_check_level level);
adj_check_level adj_op_check_level(const adj_op *op);
/* "auto" / "full" / "first" / "off" */
const char *adj_check_level_name(adj_check_level level);
/* The default level: what adj_check_level_set_default set, else ADJ_CHECK
 * from the environment (read at the first call), else FULL.  Not collective;
 * fails with a message naming a bad ADJ_CHECK value. */
int adj_check_level_default(adj_check_level *level);
/* The default level as set, AUTO included: what adj_check_level_set_default
 * set, else ADJ_CHECK (read at the first call), else AUTO.  ADJ_ERR_ARG for a
 * NULL level or a bad ADJ_CHECK. */
int adj_check_level_get_default(adj_check_level *level);
/* Sets the default level in place of ADJ_CHECK, for the operators created
 * from now on (AUTO: FULL).  Not collective, but every rank must set the same
 * (the level is agreed at creation, the strictest wins).  ADJ_ERR_ARG for a
 * value outside the enum. */
int adj_check_level_set_default(adj_check_level level);
/* enabled true = FULL, false = OFF (kept for the layers written before levels). */
void adj_op_set_checks(adj_op *op, bool enabled);
/* AUTO resolves for the operator's ranks (collective then); SPIN and YIELD
 * are stored as given.  A NULL op or a value outside adj_wait_policy changes
 * nothing and fails with ADJ_ERR_ARG naming it. */
int adj_op_set_wait_policy(adj_op *op, adj_wait_policy policy);

ADJ_END_DECLS

#endif
