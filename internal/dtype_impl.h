/* Private dtype helpers shared by the tensor code, the kernels and the
 * primitives: the one local add every reduction uses, so a sum taken locally
 * and a sum taken by MPI (dtype_mpi_impl.h) agree element for element. */
#ifndef ADJOIN_CORE_DTYPE_IMPL_H
#define ADJOIN_CORE_DTYPE_IMPL_H

#include <stdint.h>

#include "adjoin/dtype.h"

/* dst[i] += src[i] for n elements of dtype.  Integers add modulo 2^bits (the
 * signed types through their unsigned twins, so overflow is defined and equals
 * the two's-complement wraparound MPI's MPI_SUM produces). */
void adj_dtype_add(adj_dtype dtype, void *dst, const void *src, int64_t n);

/* adj_dtype_add over `rows` runs of n elements, dst_stride and src_stride
 * elements apart: one call for the many short runs of a box's edge, where a
 * call per run costs more than its adds. */
void adj_dtype_add_rows(adj_dtype dtype, void *dst, int64_t dst_stride, const void *src, int64_t src_stride,
                        int64_t n, int64_t rows);

/* ADJ_SUCCESS for float32/float64; otherwise ADJ_ERR_DTYPE with "<who>: <what>
 * has dtype int32, but layers and kernels compute in float32 or float64 only".
 * Every compute entry point checks its dtype with it. */
int adj_dtype_check_compute(const char *who, const char *what, adj_dtype dtype);

#endif
