/* Private operator interface: what an implementation fills in.
 *
 * An implementation supplies begin (validate nothing, post the movement) and
 * optionally end (complete it).  The dispatcher in op.c checks dtypes and
 * shapes for the chosen direction, agrees on the outcome across ranks, keeps
 * the split-phase state and calls these.  Forward and adjoint share one pair of
 * functions taking a direction, as PetscSF's root-to-leaf/leaf-to-root routine
 * does, so a broadcast's adjoint and a sum-reduce's forward are one code path. */
#ifndef ADJOIN_PRIMITIVES_OP_IMPL_H
#define ADJOIN_PRIMITIVES_OP_IMPL_H

#include "adjoin/op.h"
#include "dtype_impl.h"
#include "error_impl.h"

typedef struct adj_op_methods {
  int (*begin)(adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out);
  int (*end)(adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out); /* may be NULL */
  void (*destroy)(adj_op *op); /* frees impl; may be NULL */
} adj_op_methods;

struct adj_op {
  char name[64];
  int refcount;
  adj_dtype dtype;
  int domain_rank, range_rank;
  int64_t domain_shape[ADJ_MAX_RANK], range_shape[ADJ_MAX_RANK];
  bool in_place;
  bool identity;           /* on this worker: moves nothing and y = x (adj_op_is_identity); set at creation */
  bool can_accumulate[2];  /* per direction: the implementation adds into out when asked */
  bool accumulate[2];      /* per direction: applications add into out (adj_op_set_accumulate) */
  MPI_Comm comm;         /* owned duplicate of the base communicator */
  adj_wait_policy wait;  /* resolved: SPIN or YIELD */
  adj_check_level check;   /* resolved: FULL, FIRST or OFF */
  bool agreed[2];          /* FIRST: this direction's first application was agreed */
  /* Set while a blocking application (adj_op_apply) runs begin and end back to
   * back: where ranks spin, begin may then move its data with MPI's blocking
   * calls, which MPICH serves by faster paths than its nonblocking schedules. */
  bool blocking;
  char algorithm[48];      /* what the implementation chose at creation, for reports */
  adj_op_methods methods;
  /* Optional nonblocking progress of an outstanding application (adj_op_test);
   * NULL means the operator completes only in end.  Set after adj_op_alloc. */
  int (*test)(adj_op *op, int *done);
  void *impl;
  adj_op_counters counters;
  /* split-phase state */
  bool pending;
  bool pending_aliased;    /* an identity applied to shared storage: nothing to begin or end */
  adj_direction pending_direction;
  const adj_tensor *pending_in;
  adj_tensor *pending_out;
};

/* Allocates an operator on a duplicate of base (collective on base) with the
 * given local domain and range shapes.  The wait policy is resolved here. */
int adj_op_alloc(const char *name, MPI_Comm base, adj_dtype dtype, int domain_rank, const int64_t *domain_shape,
                 int range_rank, const int64_t *range_shape, const adj_op_methods *methods, void *impl,
                 adj_op **op);

/* Whether begin may move its data with MPI's blocking calls: the application
 * completes before the caller regains control, and ranks spin anyway (a
 * blocking MPICH call busy-waits, which would starve an oversubscribed node). */
static inline bool adj_op_may_block(const adj_op *op) { return op->blocking && op->wait == ADJ_WAIT_SPIN; }

/* Counts one message of `bytes` payload sent (or received). */
static inline void adj_op_count_send(adj_op *op, size_t bytes) {
  op->counters.bytes_sent += bytes;
  op->counters.messages_sent++;
}
static inline void adj_op_count_recv(adj_op *op, size_t bytes) {
  op->counters.bytes_received += bytes;
  op->counters.messages_received++;
}

#endif
