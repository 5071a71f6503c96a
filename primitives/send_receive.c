/* Send-receive between two workers, as a copy or a move (DistDL paper,
 * section 3).
 *
 * Both directions are one routine.  The forward sends from src to dst and the
 * adjoint from dst to src.  With copy semantics src keeps its own part in both
 * directions: the forward leaves x in place on src (C = S A), and the adjoint
 * adds what dst sends back to src's own part (C* = D S).  With move semantics
 * nothing stays behind, so the receiver simply overwrites.
 *
 * When src == dst the worker holds both ends.  A move is then a local copy.  A
 * copy's range holds both copies, x and its duplicate stacked along dimension 0
 * ([x; x], the memory primitive C of the paper), and the adjoint sums the two
 * halves. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "adjoin/agree.h"
#include "adjoin/send_receive.h"
#include "op_impl.h"
#include "dtype_mpi_impl.h"

typedef struct adj_send_receive {
  int src, dst, me;
  bool copy;
  int count;          /* elements of x */
  MPI_Datatype type;
  adj_box halves[2];  /* src == dst copy: the two copies inside the range */
  void *received;     /* copy adjoint on src: dst's part before it is added */
  MPI_Request request;
  bool waiting;       /* a message is in flight on this worker */
} adj_send_receive;

/* One message per application on a private communicator: a single tag serves. */
enum { ADJ_SEND_RECEIVE_TAG = 223 };

static void adj_send_receive_free(adj_send_receive *s) {
  if (!s) return;
  free(s->received);
  free(s);
}

static void adj_send_receive_destroy(adj_op *op) { adj_send_receive_free(op->impl); }

/* src == dst: no message, only memory. */
static void adj_send_receive_local(const adj_send_receive *s, adj_direction direction, const adj_tensor *in,
                                   adj_tensor *out) {
  if (!s->copy) {
    memcpy(out->data, in->data, adj_tensor_bytes(in));
    return;
  }
  adj_box whole = adj_box_whole(s->halves[0].rank, s->halves[0].extent);
  for (int h = 0; h < 2; h++) {
    if (direction == ADJ_FORWARD)
      adj_tensor_copy_box(out, &s->halves[h], in, &whole, ADJ_UNPACK_COPY);
    else
      adj_tensor_copy_box(out, &whole, in, &s->halves[h], h ? ADJ_UNPACK_ADD : ADJ_UNPACK_COPY);
  }
}

static int adj_send_receive_begin(adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out) {
  adj_send_receive *s = op->impl;
  s->waiting = false;
  if (s->src == s->dst) {
    if (s->me == s->src) adj_send_receive_local(s, direction, in, out);
    return ADJ_SUCCESS;
  }
  int sender = direction == ADJ_FORWARD ? s->src : s->dst;
  int receiver = direction == ADJ_FORWARD ? s->dst : s->src;
  size_t bytes = (size_t)s->count * adj_dtype_size(op->dtype);
  /* A copy keeps src's own part: the forward leaves x there, the adjoint adds
   * dst's part on top of it (so it must arrive in a separate buffer). */
  bool keeps = s->copy && s->me == s->src;
  if (keeps) memcpy(out->data, in->data, bytes);
  if (s->me == receiver) {
    void *target = keeps ? s->received : out->data;
    ADJ_CALL_MPI(MPI_Irecv(target, s->count, s->type, sender, ADJ_SEND_RECEIVE_TAG, op->comm, &s->request));
    adj_op_count_recv(op, bytes);
    s->waiting = true;
  } else if (s->me == sender) {
    ADJ_CALL_MPI(MPI_Isend(in->data, s->count, s->type, receiver, ADJ_SEND_RECEIVE_TAG, op->comm, &s->request));
    adj_op_count_send(op, bytes);
    s->waiting = true;
  }
  return ADJ_SUCCESS;
}

static int adj_send_receive_end(adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out) {
  (void)in;
  adj_send_receive *s = op->impl;
  if (!s->waiting) return ADJ_SUCCESS;
  s->waiting = false;
  ADJ_CALL(adj_wait_all(1, &s->request, op->wait));
  bool added = s->copy && direction == ADJ_ADJOINT && s->me == s->src;
  if (added) {
    adj_box whole = adj_box_whole(out->rank, out->shape);
    adj_tensor_unpack(out, &whole, s->received, ADJ_UNPACK_ADD);
  }
  return ADJ_SUCCESS;
}

static int adj_send_receive_validate(MPI_Comm base, adj_dtype dtype, int src, int dst, int rank,
                                     const int64_t *shape, adj_transfer transfer) {
  int size;
  ADJ_CALL_MPI(MPI_Comm_size(base, &size));
  ADJ_CHECK(adj_dtype_valid(dtype), ADJ_ERR_DTYPE, "send_receive: invalid dtype %d", (int)dtype);
  ADJ_CHECK(src >= 0 && src < size, ADJ_ERR_ARG, "send_receive: src %d is outside the communicator of size %d", src,
            size);
  ADJ_CHECK(dst >= 0 && dst < size, ADJ_ERR_ARG, "send_receive: dst %d is outside the communicator of size %d", dst,
            size);
  ADJ_CHECK(transfer == ADJ_TRANSFER_COPY || transfer == ADJ_TRANSFER_MOVE, ADJ_ERR_ARG,
            "send_receive: transfer %d is neither ADJ_TRANSFER_COPY nor ADJ_TRANSFER_MOVE", (int)transfer);
  /* Rank 0 has volume 1, and the bystanders need a zero-volume tensor. */
  ADJ_CHECK(rank >= 1 && rank <= ADJ_MAX_RANK, ADJ_ERR_ARG, "send_receive: tensor rank %d is outside 1..%d", rank,
            ADJ_MAX_RANK);
  ADJ_CHECK(shape, ADJ_ERR_ARG, "send_receive: shape is NULL");
  int64_t volume = 1;
  for (int i = 0; i < rank; i++) {
    ADJ_CHECK(shape[i] >= 0, ADJ_ERR_ARG, "send_receive: extent %lld in dimension %d is negative",
              (long long)shape[i], i);
    volume *= shape[i];
  }
  ADJ_CHECK(volume <= INT_MAX / 2, ADJ_ERR_SIZE, "send_receive: %lld elements exceed one MPI message",
            (long long)volume);
  return ADJ_SUCCESS;
}

/* Local domain and range shapes: x on src; the range on dst, plus src's kept
 * part for a copy (both copies stacked when src == dst). */
static void adj_send_receive_shapes(const adj_send_receive *s, int rank, const int64_t *shape, int64_t *domain,
                                    int64_t *range) {
  bool on_src = s->me == s->src, on_dst = s->me == s->dst;
  bool range_held = on_dst || (s->copy && on_src);
  for (int i = 0; i < rank; i++) {
    domain[i] = on_src ? shape[i] : 0;
    range[i] = range_held ? shape[i] : 0;
  }
  if (s->copy && on_src && on_dst) range[0] *= 2;
}

/* The plan: who this worker is, the message size, and the adjoint's buffer. */
static int adj_send_receive_setup(adj_send_receive *s, MPI_Comm base, adj_dtype dtype, int src, int dst, int rank,
                                  const int64_t *shape, adj_transfer transfer) {
  MPI_Comm_rank(base, &s->me);
  s->src = src, s->dst = dst, s->copy = transfer == ADJ_TRANSFER_COPY;
  s->type = adj_dtype_mpi(dtype);
  s->count = 1;
  for (int i = 0; i < rank; i++) s->count *= (int)shape[i];
  s->halves[0] = s->halves[1] = adj_box_whole(rank, shape);
  s->halves[1].start[0] = shape[0];
  bool needs_buffer = s->copy && s->me == src && src != dst;
  s->received = malloc(needs_buffer ? (size_t)s->count * adj_dtype_size(dtype) + 1 : 1);
  ADJ_CHECK(s->received, ADJ_ERR_MEM, "send_receive: cannot allocate the %d-element receive buffer", s->count);
  return ADJ_SUCCESS;
}

int adj_send_receive_create(MPI_Comm base, adj_dtype dtype, int src, int dst, int rank, const int64_t *shape,
                            adj_transfer transfer, adj_op **op) {
  ADJ_CHECK(op, ADJ_ERR_ARG, "send_receive: output operator pointer is NULL");
  *op = NULL;
  int status = adj_send_receive_validate(base, dtype, src, dst, rank, shape, transfer);
  adj_send_receive *s = status ? NULL : calloc(1, sizeof *s);
  if (!status && !s) status = adj_error_set(ADJ_ERR_MEM, "send_receive: out of memory");
  if (!status) status = adj_send_receive_setup(s, base, dtype, src, dst, rank, shape, transfer);
  /* Agreed although argument errors are found by every rank alike, so ranks
   * given different arguments fail together instead of hanging.  Yield: the
   * operator's own policy is not resolved yet, and yielding is never slow. */
  status = adj_status_agree(base, status, ADJ_WAIT_YIELD);
  if (!status) {
    int64_t domain[ADJ_MAX_RANK], range[ADJ_MAX_RANK];
    adj_send_receive_shapes(s, rank, shape, domain, range);
    static const adj_op_methods methods = {adj_send_receive_begin, adj_send_receive_end, adj_send_receive_destroy};
    status = adj_op_alloc("send_receive", base, dtype, rank, domain, rank, range, &methods, s, op);
  }
  if (status) adj_send_receive_free(s);
  return status;
}
