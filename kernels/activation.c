/* Pointwise activations (ReLU, leaky ReLU, tanh, sigmoid) and flatten. */
#include <math.h>
#include <string.h>

#include "adjoin/activation.h"
#include "activation_impl.h"
#include "kernel_table.h"
#include "kernels_impl.h"

/* tanh and sigmoid run a chunk of this many elements at a time through the
 * vector math, its values on the stack (4 KiB in float64). */
enum { ADJ_ACTIVATION_CHUNK = 512 };

#define ADJ_TYPED_FILE "activation_typed.inc"
#include "instantiate.h"

/* x (the forward's input or output), and every other tensor of the call,
 * must share x's dtype and shape. */
static int adj_activation_check(const char *who, const adj_activation *a, const char *x_name, const adj_tensor *x,
                                const char *name, const adj_tensor *t) {
  ADJ_CHECK(a, ADJ_ERR_ARG, "%s: activation is NULL", who);
  ADJ_CHECK(a->kind >= ADJ_RELU && a->kind <= ADJ_SIGMOID, ADJ_ERR_ARG, "%s: unknown activation kind %d", who,
            (int)a->kind);
  ADJ_CHECK(x, ADJ_ERR_ARG, "%s: %s is NULL", who, x_name);
  ADJ_CALL(adj_dtype_check_compute(who, x_name, x->dtype));
  return adj_check_tensor(who, name, t, x->dtype, x->rank, x->shape);
}

/* The three elementwise passes. */
typedef enum { ADJ_PASS_APPLY, ADJ_PASS_DERIVATIVE, ADJ_PASS_DERIVATIVE_FROM_OUTPUT } adj_activation_pass;

/* One elementwise pass, for a team (adj_team_run); x is the forward's input,
 * or its output for the pass from the output. */
typedef struct adj_activation_work {
  const adj_activation *a;
  adj_activation_pass pass;
  const adj_tensor *x;
  const void *v;
  void *out, *kept;
} adj_activation_work;

static void adj_activation_share(void *arg, int64_t first, int64_t count, int member) {
  const adj_activation_work *w = arg;
  adj_dtype dtype = w->x->dtype;
  const void *xs = adj_at_const(w->x->data, dtype, first);
  void *out = adj_at(w->out, dtype, first);
  if (w->pass == ADJ_PASS_APPLY) {
    ADJ_DISPATCH(dtype, activation_apply, w->a, xs, out, w->kept ? adj_at(w->kept, dtype, first) : NULL, count);
    return;
  }
  const void *v = adj_at_const(w->v, dtype, first);
  if (w->pass == ADJ_PASS_DERIVATIVE) ADJ_DISPATCH(dtype, activation_derivative, w->a, xs, v, out, count);
  else ADJ_DISPATCH(dtype, activation_derivative_from_output, w->a, xs, v, out, count);
}

/* The elementwise loops over a team: each member takes a contiguous share. */
static void adj_activation_run(const adj_activation *a, adj_activation_pass pass, const adj_tensor *x, const void *v,
                               void *out, void *kept) {
  int64_t n = adj_tensor_volume(x);
  adj_activation_work w = {a, pass, x, v, out, kept};
  adj_team_run(adj_team_size(n, n), n, adj_activation_share, &w);
}

int adj_activation_forward(const adj_activation *a, const adj_tensor *x, adj_tensor *y) {
  ADJ_CALL(adj_activation_check("activation forward", a, "input x", x, "output y", y));
  adj_activation_run(a, ADJ_PASS_APPLY, x, NULL, y->data, NULL);
  return ADJ_SUCCESS;
}

int adj_activation_forward_kept(const adj_activation *a, const adj_tensor *x, adj_tensor *y, adj_tensor *kept) {
  ADJ_CALL(adj_activation_check("activation forward", a, "input x", x, "output y", y));
  ADJ_CALL(adj_activation_check("activation forward", a, "input x", x, "kept output", kept));
  ADJ_CHECK(adj_activation_keeps_output(a->kind), ADJ_ERR_ARG,
            "activation forward: only tanh and sigmoid keep their output (kind %d)", (int)a->kind);
  adj_activation_run(a, ADJ_PASS_APPLY, x, NULL, y->data, kept->data);
  return ADJ_SUCCESS;
}

int adj_activation_jvp(const adj_activation *a, const adj_tensor *x, const adj_tensor *dx, adj_tensor *dy) {
  ADJ_CALL(adj_activation_check("activation jvp", a, "input x", x, "input perturbation dx", dx));
  ADJ_CALL(adj_activation_check("activation jvp", a, "input x", x, "output dy", dy));
  adj_activation_run(a, ADJ_PASS_DERIVATIVE, x, dx->data, dy->data, NULL);
  return ADJ_SUCCESS;
}

int adj_activation_backward(const adj_activation *a, const adj_tensor *x, const adj_tensor *dy, adj_tensor *dx) {
  ADJ_CALL(adj_activation_check("activation backward", a, "input x", x, "output gradient dy", dy));
  ADJ_CALL(adj_activation_check("activation backward", a, "input x", x, "input gradient dx", dx));
  adj_activation_run(a, ADJ_PASS_DERIVATIVE, x, dy->data, dx->data, NULL);
  return ADJ_SUCCESS;
}

int adj_activation_derivative_from_output(const adj_activation *a, const adj_tensor *y, const adj_tensor *v,
                                          adj_tensor *out) {
  static const char who[] = "activation derivative from the output";
  ADJ_CALL(adj_activation_check(who, a, "output y", y, "vector v", v));
  ADJ_CALL(adj_activation_check(who, a, "output y", y, "result out", out));
  ADJ_CHECK(a->kind != ADJ_LEAKY_RELU || a->negative_slope > 0, ADJ_ERR_ARG,
            "%s: leaky ReLU's negative slope %g is not positive, so the output does not tell the input's sign", who,
            a->negative_slope);
  adj_activation_run(a, ADJ_PASS_DERIVATIVE_FROM_OUTPUT, y, v->data, out->data, NULL);
  return ADJ_SUCCESS;
}

/* ---- flatten ------------------------------------------------------------------------ */

int adj_flatten_view(const adj_tensor *x, adj_tensor *view) {
  ADJ_CHECK(x && view, ADJ_ERR_ARG, "flatten: x or view is NULL");
  ADJ_CHECK(x->rank >= 1, ADJ_ERR_SIZE, "flatten: input has rank 0; it needs a batch dimension");
  int64_t shape[2] = {x->shape[0], 1};
  for (int i = 1; i < x->rank; i++) shape[1] *= x->shape[i];
  return adj_tensor_view(view, x->dtype, 2, shape, x->data);
}

int adj_unflatten_view(const adj_tensor *g, int rank, const int64_t *shape, adj_tensor *view) {
  ADJ_CHECK(g && view && shape, ADJ_ERR_ARG, "unflatten: g, shape or view is NULL");
  ADJ_CHECK(g->rank == 2, ADJ_ERR_SIZE, "unflatten: gradient has rank %d, not 2 (N, F)", g->rank);
  ADJ_CHECK(rank >= 1 && rank <= ADJ_MAX_RANK, ADJ_ERR_ARG, "unflatten: target rank %d is outside 1..%d", rank,
            ADJ_MAX_RANK);
  int64_t features = 1;
  for (int i = 1; i < rank; i++) features *= shape[i];
  char text[160];
  ADJ_CHECK(shape[0] == g->shape[0] && features == g->shape[1], ADJ_ERR_SIZE,
            "unflatten: target shape %s holds (%lld, %lld) but the gradient is (%lld, %lld)",
            adj_shape_format(text, sizeof text, rank, shape), (long long)shape[0], (long long)features,
            (long long)g->shape[0], (long long)g->shape[1]);
  return adj_tensor_view(view, g->dtype, rank, shape, g->data);
}
