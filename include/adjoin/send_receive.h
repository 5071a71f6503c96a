/* Send-receive between two workers (DistDL paper, section 3), as a copy or a move.
 *
 *   copy:  domain x on src; range: x kept on src and a copy on dst.
 *          adjoint: src receives dst's part and adds it to its own (C* = D S).
 *   move:  domain x on src; range: x on dst only (src's range is empty).
 *          adjoint: the reverse move.
 * Every other rank of the base communicator has zero-volume domain and range.
 * src == dst is allowed (a local copy or move). */
#ifndef ADJOIN_SEND_RECEIVE_H
#define ADJOIN_SEND_RECEIVE_H

#include <mpi.h>

#include "adjoin/op.h"

typedef enum adj_transfer { ADJ_TRANSFER_COPY = 0, ADJ_TRANSFER_MOVE = 1 } adj_transfer;

int adj_send_receive_create(MPI_Comm base, adj_dtype dtype, int src, int dst, int rank, const int64_t *shape,
                            adj_transfer transfer, adj_op **op);

#endif
