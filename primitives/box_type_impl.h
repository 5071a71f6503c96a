/* Boxes of a local tensor in place for MPI, so an operator sends from and
 * receives into the tensor itself with no pack or unpack of its own.
 *
 * A box that is one contiguous run travels as that many elements of the
 * element type; any other box as a subarray of the whole tensor.  Subarrays
 * suit small strided boxes such as halos; large boxes with short runs go
 * through a pack loop instead (see repartition.c). */
#ifndef ADJOIN_PRIMITIVES_BOX_TYPE_IMPL_H
#define ADJOIN_PRIMITIVES_BOX_TYPE_IMPL_H

#include <mpi.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "adjoin/tensor.h"

typedef struct adj_box_type {
  MPI_Datatype type;    /* the element type or a subarray */
  bool derived;         /* type is a subarray the owner frees */
  int count;            /* how many `type` make the box */
  int64_t displacement; /* elements from the tensor's start to where `type` starts */
} adj_box_type;

/* True when `box` of a row-major tensor of extents `shape` is one contiguous
 * run; then *displacement is the elements from the tensor's start to it. */
bool adj_box_run(const adj_box *box, const int64_t *shape, int64_t *displacement);

/* Describes `box` of a row-major tensor of extents `shape`.  Local; fails only
 * when a count or extent exceeds MPI's int (the message names `who`). */
int adj_box_type_create(const char *who, const adj_box *box, const int64_t *shape, MPI_Datatype element,
                        adj_box_type *out);

/* Frees a subarray; NULL-safe, and a no-op for element types. */
void adj_box_type_free(adj_box_type *t);

/* The address MPI takes together with t->type and t->count. */
static inline void *adj_box_type_address(const adj_box_type *t, const adj_tensor *tensor, size_t esize) {
  return (char *)tensor->data + t->displacement * (int64_t)esize;
}

#endif
