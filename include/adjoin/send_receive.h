/* Send-receive between two workers (DistDL paper, section 3), as a copy or a move.
 *
 *   copy:  domain x on src; range: x kept on src and a copy on dst.
 *          adjoint: src receives dst's part and adds it to its own (C* = D S).
 *   move:  domain x on src; range: x on dst only (src's range is empty).
 *          adjoint: the reverse move.
 * Every other rank of the base communicator has zero-volume domain and range
 * (every extent 0), so the tensor rank must be 1..ADJ_MAX_RANK.
 * src == dst is allowed: a move is then a local copy, and a copy's range on
 * that worker holds both copies stacked along dimension 0 (shape
 * [2 shape[0], shape[1], ...], the paper's C = S A: x -> [x; x]); its adjoint
 * adds the two halves.
 *
 * src and dst are ranks of base.  Creation is collective on base and checks
 * src, dst, rank, shape, transfer and dtype on every rank alike.  Each
 * application sends one message (MPI_Isend / MPI_Irecv on the operator's
 * private communicator) between src and dst. */
#ifndef ADJOIN_SEND_RECEIVE_H
#define ADJOIN_SEND_RECEIVE_H

#include <mpi.h>

#include "adjoin/op.h"
#include "adjoin/export.h"

ADJ_BEGIN_DECLS

typedef enum adj_transfer { ADJ_TRANSFER_COPY = 0, ADJ_TRANSFER_MOVE = 1 } adj_transfer;

int adj_send_receive_create(MPI_Comm base, adj_dtype dtype, int src, int dst, int rank, const int64_t *shape,
                            adj_transfer transfer, adj_op **op);

ADJ_END_DECLS

#endif
