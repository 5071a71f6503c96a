/* Memory primitives of the DistDL paper (section 2 and appendix A) on one
 * worker, as operators.
 *
 * Out-of-place forms act on flat vectors, exactly as the paper writes them:
 *   allocate    A_b : F^m -> F^(m+n),  [x_a] -> [x_a; 0_b];     A_b* = D_b
 *   deallocate  D_b : F^(m+n) -> F^m,  [x_a; x_b] -> [x_a];     D_b* = A_b
 *   copy        C = S A_b : F^m -> F^(2m), x -> [x; x];          C* = D_b S_(b->a)
 *   move        M = D_a S A_b : F^m -> F^m (new memory);         M* = reverse move
 * In-place forms act on two boxes a and b (same extents, disjoint) of a tensor:
 *   clear  K_b: x_b = 0                              (self-adjoint)
 *   add    S_(a->b): x_b += x_a                      (S* = S_(b->a))
 *   copy   C = S_(a->b) K_b: x_b = x_a               (C* = K_b S_(b->a))
 *   move   M = K_a S_(a->b) K_b: x_b = x_a, x_a = 0  (M* = M_(b->a))
 * These operators are local: they are created on MPI_COMM_SELF and need no
 * other rank. */
#ifndef ADJOIN_MEMORY_H
#define ADJOIN_MEMORY_H

#include "adjoin/op.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

int adj_allocate_create(adj_dtype dtype, int64_t m, int64_t n, adj_op **op);
int adj_deallocate_create(adj_dtype dtype, int64_t m, int64_t n, adj_op **op);
int adj_copy_create(adj_dtype dtype, int64_t m, adj_op **op);
int adj_move_create(adj_dtype dtype, int64_t m, adj_op **op);

typedef enum adj_memory_kind {
  ADJ_MEMORY_CLEAR = 0,
  ADJ_MEMORY_ADD = 1,
  ADJ_MEMORY_COPY = 2,
  ADJ_MEMORY_MOVE = 3
} adj_memory_kind;

/* In-place primitive on a tensor of the given shape; for CLEAR only box b is
 * used (a may be NULL).  Boxes must lie inside the tensor, have equal extents
 * and not overlap. */
int adj_memory_in_place_create(adj_dtype dtype, adj_memory_kind kind, int rank, const int64_t *shape,
                               const adj_box *a, const adj_box *b, adj_op **op);

ADJ_END_DECLS

#endif
