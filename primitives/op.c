#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <mpi.h>

#include "adjoin/agree.h"
#include "agree_impl.h"
#include "op_after_impl.h"
#include "op_impl.h"
#include "setting_impl.h"

/* In adj_check_level order; "auto" in the environment means the built-in FULL. */
static const char *const adj_check_level_names[] = {"auto", "full", "first", "off"};

static adj_setting adj_check_setting = ADJ_SETTING_INIT("ADJ_CHECK");

const char *adj_check_level_name(adj_check_level level) {
  return level >= ADJ_CHECK_AUTO && level <= ADJ_CHECK_OFF ? adj_check_level_names[level] : "invalid";
}

ADJ_SETTING_CHOICE_ACCESSORS(adj_check_level, adj_check_level, adj_check_setting, adj_check_level_names)

int adj_check_level_default(adj_check_level *level) {
  ADJ_CALL(adj_check_level_get_default(level));
  if (*level == ADJ_CHECK_AUTO) *level = ADJ_CHECK_FULL;
  return ADJ_SUCCESS;
}

/* The strictest level any rank asks for, so that either every rank or none
 * takes part in an application's agreement. */
static int adj_op_agree_level(adj_op *op, adj_check_level local) {
  int mine = (int)local, agreed = mine, size = 1;
  MPI_Comm_size(op->comm, &size);
  if (size > 1) {
    MPI_Request request;
    ADJ_CALL_MPI(MPI_Iallreduce(&mine, &agreed, 1, MPI_INT, MPI_MIN, op->comm, &request));
    ADJ_CALL(adj_wait_all(1, &request, op->wait));
  }
  op->check = (adj_check_level)agreed;
  op->agreed[0] = op->agreed[1] = false;
  return ADJ_SUCCESS;
}

int adj_op_alloc(const char *name, MPI_Comm base, adj_dtype dtype, int domain_rank, const int64_t *domain_shape,
                 int range_rank, const int64_t *range_shape, const adj_op_methods *methods, void *impl,
                 adj_op **out) {
  *out = NULL;
  adj_check_level level = ADJ_CHECK_FIRST;
  adj_op *op = calloc(1, sizeof *op);
  int local = op ? adj_check_level_default(&level) : adj_error_set(ADJ_ERR_MEM, "%s: out of memory", name);
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
  int status = adj_comm_dup_with_policy(base, &op->comm, &op->wait);
  if (status) {
    free(op);
    return status;
  }
  status = adj_op_agree_level(op, level);
  if (status) {
    MPI_Comm_free(&op->comm);
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

/* An application's agreement, on the operator's own communicator: no
 * receive of the caller's can match its messages there, so the ranks may
 * exchange their statuses point to point (agree_impl.h). */
static int adj_op_agree(adj_op *op, int status) {
  return adj_status_agree_private(op->comm, status, false, NULL, op->wait);
}

static bool adj_direction_valid(adj_direction direction) {
  return direction == ADJ_FORWARD || direction == ADJ_ADJOINT;
}

/* An identity applied to shared storage: nothing to move. */
static bool adj_op_aliases(const adj_op *op, const adj_tensor *in, const adj_tensor *out) {
  return op->identity && in->data == out->data;
}

static void adj_op_count_application(adj_op *op, adj_direction direction) {
  if (direction == ADJ_FORWARD)
    op->counters.forward_applications++;
  else
    op->counters.adjoint_applications++;
}

/* A rank whose tensors failed the local check while the other ranks move data
 * and wait for its part: it moves zeros from scratch tensors of the
 * operator's own shapes (the error path may allocate).  Returns the status of
 * that movement; the check's message in adj_last_error() is kept. */
static int adj_op_move_zeros(adj_op *op, adj_direction direction) {
  char message[1024];
  snprintf(message, sizeof message, "%s", adj_last_error());
  bool fwd = direction == ADJ_FORWARD;
  adj_tensor in = {0}, out = {0};
  int moved = adj_tensor_create(&in, op->dtype, fwd ? op->domain_rank : op->range_rank,
                                fwd ? op->domain_shape : op->range_shape);
  if (!moved && !op->in_place)
    moved = adj_tensor_create(&out, op->dtype, fwd ? op->range_rank : op->domain_rank,
                              fwd ? op->range_shape : op->domain_shape);
  if (!moved) moved = op->methods.begin(op, direction, &in, op->in_place ? &in : &out);
  if (!moved && op->methods.end) moved = op->methods.end(op, direction, &in, op->in_place ? &in : &out);
  adj_tensor_destroy(&in);
  adj_tensor_destroy(&out);
  adj_error_set_message(message);
  return moved;
}

/* An application that is not agreed on, on a rank whose tensors failed: its
 * part of the movement is zeros, and the error is this rank's alone. */
static int adj_op_fallback(adj_op *op, adj_direction direction, int status) {
  int moved = adj_op_move_zeros(op, direction);
  char full[1200];
  snprintf(full, sizeof full, "%s (check level %s: found on this rank only%s)", adj_last_error(),
           adj_check_level_name(op->check), moved ? "; its part of the data movement failed too" : "");
  adj_error_set_message(full);
  return status;
}

int adj_op_begin(adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out) {
  if (!op) return adj_error_set(ADJ_ERR_ARG, "adj_op_begin: operator is NULL");
  /* Errors in how the calls are sequenced, not in the tensors: no data
   * movement can be made to match, so they are reported on this rank. */
  ADJ_CHECK(direction == ADJ_FORWARD || direction == ADJ_ADJOINT, ADJ_ERR_ARG, "%s: invalid direction %d",
            op->name, (int)direction);
  ADJ_CHECK(!op->pending, ADJ_ERR_STATE, "%s: an application is still outstanding; call adj_op_end first",
            op->name);
  int status = adj_op_check_args(op, direction, in, out);
  bool agree = op->check == ADJ_CHECK_FULL || (op->check == ADJ_CHECK_FIRST && !op->agreed[direction]);
  if (agree) {
    ADJ_CALL(adj_op_agree(op, status));
    op->agreed[direction] = true;
  } else if (status) {
    return adj_op_fallback(op, direction, status);
  }
  adj_op_count_application(op, direction);
  op->pending = true;
  op->pending_direction = direction;
  op->pending_in = in;
  op->pending_out = out;
  op->pending_aliased = adj_op_aliases(op, in, out);
  status = op->pending_aliased ? ADJ_SUCCESS : op->methods.begin(op, direction, in, out);
  if (status) op->pending = false;
  return status;
}

int adj_op_end(adj_op *op) {
  if (!op) return adj_error_set(ADJ_ERR_ARG, "adj_op_end: operator is NULL");
  ADJ_CHECK(op->pending, ADJ_ERR_STATE, "%s: adj_op_end called without a matching adj_op_begin", op->name);
  op->pending = false;
  if (op->pending_aliased || !op->methods.end) return ADJ_SUCCESS;
  return op->methods.end(op, op->pending_direction, op->pending_in, op->pending_out);
}

int adj_op_pending(const adj_op *op) { return op->pending; }

int adj_op_test(adj_op *op, int *done) {
  ADJ_CHECK(op && done, ADJ_ERR_ARG, "adj_op_test: operator or flag pointer is NULL");
  *done = 1;
  if (!op->pending) return ADJ_SUCCESS;
  *done = op->pending_aliased;
  return op->test && !op->pending_aliased ? op->test(op, done) : ADJ_SUCCESS;
}

/* At level full, a blocking application whose failure cannot cost data (out
 * of place, not accumulating) moves its data while the agreement's reduction
 * travels, instead of after it: a rank whose tensors failed moves zeros, as
 * at the levels that do not agree, and every rank reads the agreed outcome
 * once the data has moved.  The agreement's round trip then overlaps the
 * message it guards (docs/checking.md).  On failure every rank returns the
 * same error, and the outputs hold what the movement wrote. */
static bool adj_op_agrees_alongside(const adj_op *op, adj_direction direction) {
  return op->check == ADJ_CHECK_FULL && !op->in_place && !op->accumulate[direction];
}

static int adj_op_apply_alongside(adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out) {
  int status = adj_op_check_args(op, direction, in, out);
  adj_agreement agreement;
  ADJ_CALL(adj_status_agree_post_private(op->comm, status, false, &agreement));
  int moved = ADJ_SUCCESS;
  if (status) {
    moved = adj_op_move_zeros(op, direction);
  } else if (!adj_op_aliases(op, in, out)) {
    moved = op->methods.begin(op, direction, in, out);
    if (!moved && op->methods.end) moved = op->methods.end(op, direction, in, out);
  }
  int agreed = adj_status_agree_complete(&agreement, NULL, op->wait);
  if (agreed) return agreed;
  if (!moved) adj_op_count_application(op, direction);
  return moved;
}

static int adj_op_apply_blocking(adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out) {
  if (adj_op_agrees_alongside(op, direction)) return adj_op_apply_alongside(op, direction, in, out);
  ADJ_CALL(adj_op_begin(op, direction, in, out));
  return adj_op_end(op);
}

int adj_op_apply(adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out) {
  /* An outstanding split-phase application keeps its own completion; begin
   * refuses the second one. */
  if (!op || !adj_direction_valid(direction) || op->pending) return adj_op_begin(op, direction, in, out);
  op->blocking = true;
  int status = adj_op_apply_blocking(op, direction, in, out);
  op->blocking = false;
  return status;
}

int adj_op_forward(adj_op *op, const adj_tensor *x, adj_tensor *y) { return adj_op_apply(op, ADJ_FORWARD, x, y); }

int adj_op_adjoint(adj_op *op, const adj_tensor *y, adj_tensor *x) { return adj_op_apply(op, ADJ_ADJOINT, y, x); }

const char *adj_op_name(const adj_op *op) { return op->name; }
const char *adj_op_algorithm(const adj_op *op) { return op->algorithm[0] ? op->algorithm : "direct"; }
adj_dtype adj_op_dtype(const adj_op *op) { return op->dtype; }
MPI_Comm adj_op_comm(const adj_op *op) { return op->comm; }
int adj_op_domain_rank(const adj_op *op) { return op->domain_rank; }
const int64_t *adj_op_domain_shape(const adj_op *op) { return op->domain_shape; }
int adj_op_range_rank(const adj_op *op) { return op->range_rank; }
const int64_t *adj_op_range_shape(const adj_op *op) { return op->range_shape; }

int adj_op_in_place(const adj_op *op) { return op->in_place; }
int adj_op_is_identity(const adj_op *op) { return op && op->identity; }

/* A view of `from` as the tensor on side `to` (true: the direction's output)
 * of an identity, or of `buffer` for any other operator.  An identity's domain
 * and range are one block, so only the shape changes. */
static int adj_op_alias(const adj_op *op, adj_direction direction, bool to_output, const adj_tensor *from,
                        const adj_tensor *buffer, adj_tensor *view) {
  ADJ_CHECK(op && from && buffer && view && adj_direction_valid(direction), ADJ_ERR_ARG,
            "adj_op_alias_%s: %s", to_output ? "output" : "input",
            op ? "a tensor pointer is NULL or the direction is invalid" : "operator is NULL");
  if (!op->identity) return adj_tensor_view(view, buffer->dtype, buffer->rank, buffer->shape, buffer->data);
  bool range = to_output == (direction == ADJ_FORWARD);
  int rank = range ? op->range_rank : op->domain_rank;
  const int64_t *shape = range ? op->range_shape : op->domain_shape;
  adj_box whole = adj_box_whole(rank, shape);
  ADJ_CHECK(from->dtype == op->dtype && adj_tensor_volume(from) == adj_box_volume(&whole), ADJ_ERR_ARG,
            "%s: cannot alias a %s tensor of %lld elements as its %s (%s, %lld elements)", op->name,
            adj_dtype_name(from->dtype), (long long)adj_tensor_volume(from), range ? "range" : "domain",
            adj_dtype_name(op->dtype), (long long)adj_box_volume(&whole));
  return adj_tensor_view(view, op->dtype, rank, shape, from->data);
}

int adj_op_alias_output(const adj_op *op, adj_direction direction, const adj_tensor *in, const adj_tensor *buffer,
                        adj_tensor *out) {
  return adj_op_alias(op, direction, true, in, buffer, out);
}

int adj_op_alias_input(const adj_op *op, adj_direction direction, const adj_tensor *out, const adj_tensor *buffer,
                       adj_tensor *in) {
  return adj_op_alias(op, direction, false, out, buffer, in);
}

int adj_op_create_domain_tensor(const adj_op *op, adj_tensor *t) {
  return adj_tensor_create(t, op->dtype, op->domain_rank, op->domain_shape);
}

int adj_op_create_range_tensor(const adj_op *op, adj_tensor *t) {
  return adj_tensor_create(t, op->dtype, op->range_rank, op->range_shape);
}

void adj_op_get_counters(const adj_op *op, adj_op_counters *counters) { *counters = op->counters; }
void adj_op_reset_counters(adj_op *op) { memset(&op->counters, 0, sizeof op->counters); }
void adj_op_set_checks(adj_op *op, bool enabled) { adj_op_set_check_level(op, enabled ? ADJ_CHECK_FULL : ADJ_CHECK_OFF); }

void adj_op_set_check_level(adj_op *op, adj_check_level level) {
  /* A bad ADJ_CHECK was already refused when the operator was created. */
  if (level == ADJ_CHECK_AUTO && adj_check_level_default(&level)) level = ADJ_CHECK_FULL;
  if (level < ADJ_CHECK_FULL || level > ADJ_CHECK_OFF) level = ADJ_CHECK_FULL;
  op->check = level;
  op->agreed[0] = op->agreed[1] = false;
}

adj_check_level adj_op_check_level(const adj_op *op) { return op->check; }

bool adj_op_can_accumulate(const adj_op *op, adj_direction direction) {
  return op && adj_direction_valid(direction) && op->can_accumulate[direction] && !op->in_place;
}

int adj_op_set_accumulate(adj_op *op, adj_direction direction, bool accumulate) {
  ADJ_CHECK(op && adj_direction_valid(direction), ADJ_ERR_ARG, "adj_op_set_accumulate: %s",
            op ? "invalid direction" : "operator is NULL");
  ADJ_CHECK(!accumulate || adj_op_can_accumulate(op, direction), ADJ_ERR_ARG,
            "%s cannot accumulate into its output in the %s direction", op->name,
            direction == ADJ_FORWARD ? "forward" : "adjoint");
  op->accumulate[direction] = accumulate;
  return ADJ_SUCCESS;
}

/* The setter returns nothing, so a NULL operator or a value outside the enum
 * is refused by recording an ADJ_ERR_ARG message (adj_last_error) and keeping
 * the policy the operator had. */
int adj_op_set_wait_policy(adj_op *op, adj_wait_policy policy) {
  ADJ_CHECK(op, ADJ_ERR_ARG, "adj_op_set_wait_policy: operator is NULL");
  ADJ_CHECK(adj_wait_policy_valid(policy), ADJ_ERR_ARG,
            "adj_op_set_wait_policy: wait policy %d is not auto (0), spin (1) or yield (2)", (int)policy);
  if (policy == ADJ_WAIT_AUTO) return adj_wait_policy_resolve(op->comm, ADJ_WAIT_AUTO, &op->wait);
  op->wait = policy;
  return ADJ_SUCCESS;
}

int adj_op_begin_after(int *prior, adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out) {
  if (!op) return adj_error_set(ADJ_ERR_ARG, "adj_op_begin_after: operator is NULL");
  bool valid = direction == ADJ_FORWARD || direction == ADJ_ADJOINT;
  bool agree = valid && (op->check == ADJ_CHECK_FULL || (op->check == ADJ_CHECK_FIRST && !op->agreed[direction]));
  if (!agree) return adj_op_begin(op, direction, in, out);
  int status = *prior ? *prior : adj_op_check_args(op, direction, in, out);
  status = adj_op_agree(op, status);
  if (status) return *prior = status;
  op->agreed[direction] = true;
  adj_check_level level = op->check;
  op->check = ADJ_CHECK_OFF; /* agreed above */
  status = adj_op_begin(op, direction, in, out);
  op->check = level;
  return status;
}

int adj_op_apply_after(int prior, adj_op *op, adj_direction direction, const adj_tensor *in, adj_tensor *out) {
  ADJ_CALL(adj_op_begin_after(&prior, op, direction, in, out));
  int status = adj_op_end(op);
  return status ? status : prior;
}
