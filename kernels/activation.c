/* Pointwise activations (ReLU, leaky ReLU, tanh, sigmoid) and flatten. */
#include <math.h>

#include "adjoin/activation.h"
#include "kernel_table.h"
#include "kernels_impl.h"

/* tanh and sigmoid run a chunk of this many elements at a time through the
 * vector math, its values on the stack (4 KiB in float64). */
enum { ADJ_ACTIVATION_CHUNK = 512 };

#define ADJ_TYPED_FILE "activation_typed.inc"
#include "instantiate.h"

/* x, and every other tensor of the call, must share x's dtype and shape. */
static int adj_activation_check(const char *who, const adj_activation *a, const adj_tensor *x, const char *name,
                                const adj_tensor *t) {
  ADJ_CHECK(a, ADJ_ERR_ARG, "%s: activation is NULL", who);
  ADJ_CHECK(a->kind >= ADJ_RELU && a->kind <= ADJ_SIGMOID, ADJ_ERR_ARG, "%s: unknown activation kind %d", who,
            (int)a->kind);
  ADJ_CHECK(x, ADJ_ERR_ARG, "%s: input x is NULL", who);
  ADJ_CALL(adj_dtype_check_compute(who, "input x", x->dtype));
  return adj_check_tensor(who, name, t, x->dtype, x->rank, x->shape);
}

/* One elementwise pass, for a team (adj_team_run). */
typedef struct adj_activation_work {
  const adj_activation *a;
  bool derivative;
  const adj_tensor *x;
  const void *v;
  void *out;
} adj_activation_work;

static void adj_activation_share(void *arg, int64_t first, int64_t count, int member) {
  const adj_activation_work *w = arg;
  adj_dtype dtype = w->x->dtype;
  const void *xs = adj_at_const(w->x->data, dtype, first);
  if (w->derivative)
    ADJ_DISPATCH(dtype, activation_derivative, w->a, xs, adj_at_const(w->v, dtype, first), adj_at(w->out, dtype, first),
                 count);
  else ADJ_DISPATCH(dtype, activation_apply, w->a, xs, adj_at(w->out, dtype, first), count);
}

/* The elementwise loops over a team: each member takes a contiguous share. */
static void adj_activation_run(const adj_activation *a, bool derivative, const adj_tensor *x, const void *v,
                               void *out) {
  int64_t n = adj_tensor_volume(x);
  adj_activation_work w = {a, derivative, x, v, out};
  adj_team_run(adj_team_size(n, n), n, adj_activation_share, &w);
}

int adj_activation_forward(const adj_activation *a, const adj_tensor *x, adj_tensor *y) {
  ADJ_CALL(adj_activation_check("activation forward", a, x, "output y", y));
  adj_activation_run(a, false, x, NULL, y->data);
  return ADJ_SUCCESS;
}

int adj_activation_jvp(const adj_activation *a, const adj_tensor *x, const adj_tensor *dx, adj_tensor *dy) {
  ADJ_CALL(adj_activation_check("activation jvp", a, x, "input perturbation dx", dx));
  ADJ_CALL(adj_activation_check("activation jvp", a, x, "output dy", dy));
  adj_activation_run(a, true, x, dx->data, dy->data);
  return ADJ_SUCCESS;
}

int adj_activation_backward(const adj_activation *a, const adj_tensor *x, const adj_tensor *dy, adj_tensor *dx) {
  ADJ_CALL(adj_activation_check("activation backward", a, x, "output gradient dy", dy));
  ADJ_CALL(adj_activation_check("activation backward", a, x, "input gradient dx", dx));
  adj_activation_run(a, true, x, dy->data, dx->data);
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
