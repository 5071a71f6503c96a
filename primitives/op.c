#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "op_after_impl.h"
#include "op_impl.h"

int adj_op_alloc(const char *name, MPI_Comm base, adj_dtype dtype, int domain_rank, const int64_t *domain_shape,
                 int range_rank, const int64_t *range_shape, const adj_op_methods *methods, void *impl,
                 adj_op **out) {
  *out = NULL;
  adj_op *op = calloc(1, sizeof *op);
  int local = op ? ADJ_SUCCESS : adj_error_set(ADJ_ERR_MEM, "%s: out of memory", name);
  int agreed = adj_status_agree(base, local, ADJ_WAIT_YIELD);
  if (agreed) {
    free(op);
    return agreed;
  }
  snprintf(op->name, sizeof op->name, "%s", name);
  op->refcount = 1;
  op->dtype = dtype;
  op->domain_rank = domain_rank;
  op->range_rank = range_rank;
  for (int i = 0; i < ADJ_MAX_RANK; i++) {
    op->domain_shape[i] = i < domain_rank ? domain_shape[i] : 1;
    op->range_shape[i] = i < range_rank ? range_shape[i] : 1;
  }
  op->methods = *methods;
  op->impl = impl;
  op->checks = true;
  int status = adj_comm_dup_with_policy(base, &op->comm, &op->wait);
  if (status) {
    free(op);
    return status;
  }
  *out = op;
  return ADJ_SUCCESS;
}

adj_op *adj_op_reference(adj_op *op) {
  if (op) op->refcount++;
  return op;
}

void adj_op_destroy(adj_op **op) {
  if (!op || !*op) return;
  adj_op *o = *op;
  *op = NULL;
  if (--o->refcount > 0) return;
  if (o->methods.destroy) o->methods.destroy(o);
  if (o->comm != MPI_COMM_NULL) MPI_Comm_free(&o->comm);
  free(o);
}

static int adj_op_check_tensor(const adj_op *op, const adj_tensor *t, const char *role, int rank,
                               const int64_t *shape) {
  return adj_tensor_check(t, op->dtype, rank, shape, op->name, role, "operator");
}

static int adj_op_check_args(const adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out) {
  ADJ_CHECK(direction == ADJ_FORWARD || direction == ADJ_ADJOINT, ADJ_ERR_ARG, "%s: invalid direction %d",
            op->name, (int)direction);
  ADJ_CHECK(!op->pending, ADJ_ERR_STATE, "%s: an application is still outstanding; call adj_op_end first",
            op->name);
  bool fwd = direction == ADJ_FORWARD;
  const char *in_role = fwd ? "forward input (domain)" : "adjoint input (range)";
  const char *out_role = fwd ? "forward output (range)" : "adjoint output (domain)";
  ADJ_CALL(adj_op_check_tensor(op, in, in_role, fwd ? op->domain_rank : op->range_rank,
                               fwd ? op->domain_shape : op->range_shape));
  ADJ_CALL(adj_op_check_tensor(op, out, out_role, fwd ? op->range_rank : op->domain_rank,
                               fwd ? op->range_shape : op->domain_shape));
  ADJ_CHECK(!op->in_place || in == out || in->data == out->data, ADJ_ERR_ARG,
            "%s: the operator works in place but was given different input and output tensors", op->name);
  return ADJ_SUCCESS;
}

int adj_op_begin(adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out) {
  if (!op) return adj_error_set(ADJ_ERR_ARG, "adj_op_begin: operator is NULL");
  int status = adj_op_check_args(op, direction, in, out);
  if (op->checks) status = adj_status_agree(op->comm, status, op->wait);
  ADJ_CALL(status);
  if (direction == ADJ_FORWARD)
    op->counters.forward_applications++;
  else
    op->counters.adjoint_applications++;
  op->pending = true;
  op->pending_direction = direction;
  op->pending_in = in;
  op->pending_out = out;
  status = op->methods.begin(op, direction, in, out);
  if (status) op->pending = false;
  return status;
}

int adj_op_end(adj_op *op) {
  if (!op) return adj_error_set(ADJ_ERR_ARG, "adj_op_end: operator is NULL");
  ADJ_CHECK(op->pending, ADJ_ERR_STATE, "%s: adj_op_end called without a matching adj_op_begin", op->name);
  op->pending = false;
  if (!op->methods.end) return ADJ_SUCCESS;
  return op->methods.end(op, op->pending_direction, op->pending_in, op->pending_out);
}

int adj_op_pending(const adj_op *op) { return op->pending; }

int adj_op_apply(adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out) {
  ADJ_CALL(adj_op_begin(op, direction, in, out));
  return adj_op_end(op);
}

int adj_op_forward(adj_op *op, const adj_tensor *x, adj_tensor *y) { return adj_op_apply(op, ADJ_FORWARD, x, y); }

int adj_op_adjoint(adj_op *op, const adj_tensor *y, adj_tensor *x) { return adj_op_apply(op, ADJ_ADJOINT, y, x); }

const char *adj_op_name(const adj_op *op) { return op->name; }
adj_dtype adj_op_dtype(const adj_op *op) { return op->dtype; }
MPI_Comm adj_op_comm(const adj_op *op) { return op->comm; }
int adj_op_domain_rank(const adj_op *op) { return op->domain_rank; }
const int64_t *adj_op_domain_shape(const adj_op *op) { return op->domain_shape; }
int adj_op_range_rank(const adj_op *op) { return op->range_rank; }
const int64_t *adj_op_range_shape(const adj_op *op) { return op->range_shape; }
int adj_op_in_place(const adj_op *op) { return op->in_place; }

int adj_op_create_domain_tensor(const adj_op *op, adj_tensor *t) {
  return adj_tensor_create(t, op->dtype, op->domain_rank, op->domain_shape);
}

int adj_op_create_range_tensor(const adj_op *op, adj_tensor *t) {
  return adj_tensor_create(t, op->dtype, op->range_rank, op->range_shape);
}

void adj_op_get_counters(const adj_op *op, adj_op_counters *counters) { *counters = op->counters; }
void adj_op_reset_counters(adj_op *op) { memset(&op->counters, 0, sizeof op->counters); }
void adj_op_set_checks(adj_op *op, bool enabled) { op->checks = enabled; }

void adj_op_set_wait_policy(adj_op *op, adj_wait_policy policy) {
  if (policy == ADJ_WAIT_AUTO) adj_wait_policy_resolve(op->comm, ADJ_WAIT_AUTO, &op->wait);
  else op->wait = policy;
}

int adj_op_begin_after(int *prior, adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out) {
  if (!op) return adj_error_set(ADJ_ERR_ARG, "adj_op_begin_after: operator is NULL");
  if (!op->checks) return adj_op_begin(op, direction, in, out);
  int status = *prior ? *prior : adj_op_check_args(op, direction, in, out);
  status = adj_status_agree(op->comm, status, op->wait);
  if (status) return *prior = status;
  op->checks = false; /* agreed above */
  status = adj_op_begin(op, direction, in, out);
  op->checks = true;
  return status;
}

int adj_op_apply_after(int prior, adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out) {
  ADJ_CALL(adj_op_begin_after(&prior, op, direction, in, out));
  int status = adj_op_end(op);
  return status ? status : prior;
}
