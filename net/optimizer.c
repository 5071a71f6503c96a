/* SGD (with momentum and weight decay) and Adam over a network's flat
 * parameter buffer: elementwise over this worker's shards (split over the
 * kernels' thread team), no communication. */
#include <math.h>
#include <stdlib.h>

#include "adjoin/agree.h"
#include "adjoin/network.h"
#include "adjoin/optimizer.h"
#include "error_impl.h"
#include "fault_impl.h"
#include "threads_impl.h"

struct adj_optimizer {
  adj_optimizer_config config;
  adj_tensor values, grads; /* views of the network's packed parameters */
  adj_tensor state[2];      /* SGD: velocity; Adam: first and second moments */
  int n_state;
  int64_t steps;
};

static int adj_optimizer_check(const adj_optimizer_config *c) {
  ADJ_CHECK(c->kind == ADJ_OPTIMIZER_SGD || c->kind == ADJ_OPTIMIZER_ADAM, ADJ_ERR_ARG, "optimizer: unknown kind %d",
            (int)c->kind);
  ADJ_CHECK(c->learning_rate > 0 && isfinite(c->learning_rate), ADJ_ERR_ARG,
            "optimizer: learning rate %g must be positive", c->learning_rate);
  ADJ_CHECK(c->momentum >= 0 && c->momentum < 1, ADJ_ERR_ARG, "optimizer: momentum %g must lie in [0, 1)", c->momentum);
  ADJ_CHECK(c->weight_decay >= 0 && isfinite(c->weight_decay), ADJ_ERR_ARG,
            "optimizer: weight decay %g must be finite and not negative", c->weight_decay);
  ADJ_CHECK(c->beta1 >= 0 && c->beta1 < 1 && c->beta2 >= 0 && c->beta2 < 1, ADJ_ERR_ARG,
            "optimizer: Adam betas (%g, %g) must lie in [0, 1)", c->beta1, c->beta2);
  /* Adam divides by sqrt(v) + epsilon with sqrt(v) >= 0: a negative epsilon
   * can zero the denominator, a NaN one makes every update NaN and an
   * infinite one every update 0.  Zero is the default's marker, never used. */
  ADJ_CHECK(c->epsilon >= 0 && isfinite(c->epsilon), ADJ_ERR_ARG,
            "optimizer: Adam epsilon %g must be finite and not negative", c->epsilon);
  ADJ_CHECK(c->lr_schedule == ADJ_LR_CONSTANT || c->lr_schedule == ADJ_LR_COSINE, ADJ_ERR_ARG,
            "optimizer: unknown learning-rate schedule %d", (int)c->lr_schedule);
  ADJ_CHECK(c->lr_schedule != ADJ_LR_COSINE || c->lr_total_steps >= 1, ADJ_ERR_ARG,
            "optimizer: a cosine schedule over %lld steps (need 1 or more)", (long long)c->lr_total_steps);
  return ADJ_SUCCESS;
}

static int adj_optimizer_create_local(adj_layer *network, const adj_optimizer_config *config,
                                      adj_optimizer **optimizer) {
  adj_optimizer *o = calloc(1, sizeof *o);
  ADJ_CHECK(o, ADJ_ERR_MEM, "optimizer: out of memory");
  o->config = *config;
  if (o->config.kind == ADJ_OPTIMIZER_ADAM) {
    if (o->config.beta1 == 0) o->config.beta1 = 0.9;
    if (o->config.beta2 == 0) o->config.beta2 = 0.999;
    if (o->config.epsilon == 0) o->config.epsilon = 1e-8;
  }
  int status = adj_network_flat_parameters(network, &o->values, &o->grads);
  o->n_state = o->config.kind == ADJ_OPTIMIZER_ADAM ? 2 : (o->config.momentum > 0 ? 1 : 0);
  for (int k = 0; k < o->n_state && !status; k++)
    status = adj_tensor_create(&o->state[k], o->values.dtype, 1, o->values.shape);
  if (status) adj_optimizer_destroy(&o);
  *optimizer = o;
  return status;
}

/* The allocations can fail on one rank only; every rank agrees on the outcome
 * so none goes on to train with an optimizer the others do not have. */
int adj_optimizer_create(adj_layer *network, const adj_optimizer_config *config, adj_optimizer **optimizer) {
  ADJ_CHECK(optimizer, ADJ_ERR_ARG, "optimizer: output optimizer pointer is NULL");
  *optimizer = NULL;
  ADJ_CHECK(network && config, ADJ_ERR_ARG, "optimizer: network and config are required");
  ADJ_CHECK(adj_layer_is_network(network), ADJ_ERR_ARG,
            "optimizer: the network is not one made by adj_network_create");
  ADJ_CALL(adj_optimizer_check(config));
  adj_optimizer *o = NULL;
  int status = adj_fault_at("optimizer", "create", adj_optimizer_create_local(network, config, &o));
  status = adj_status_agree(adj_layer_comm(network), status, ADJ_WAIT_YIELD);
  if (status) adj_optimizer_destroy(&o);
  *optimizer = o;
  return status;
}

void adj_optimizer_destroy(adj_optimizer **optimizer) {
  if (!optimizer || !*optimizer) return;
  for (int k = 0; k < 2; k++) adj_tensor_destroy(&(*optimizer)->state[k]);
  free(*optimizer);
  *optimizer = NULL;
}

/* The update loops, one per dtype; arithmetic is in double so float32 and
 * float64 runs differ only by the rounding of the stored values.  The
 * settings are copied into locals (a double config field could alias a double
 * parameter, which would keep the loops scalar) and net/ builds without
 * math errno (net/meson.build), so sqrt and the divisions vectorize. */
#define ADJ_OPTIMIZER_LOOPS(T)                                                                      \
  static void adj_sgd_##T(const adj_optimizer_config *c, double lr, int64_t n, T *restrict w,       \
                          const T *restrict g, T *restrict v) {                                    \
    const double decay = c->weight_decay, momentum = c->momentum;                                  \
    if (v)                                                                                         \
      for (int64_t i = 0; i < n; i++) {                                                            \
        double vi = momentum * (double)v[i] + ((double)g[i] + decay * (double)w[i]);               \
        v[i] = (T)vi;                                                                              \
        w[i] = (T)((double)w[i] - lr * (double)v[i]);                                              \
      }                                                                                            \
    else                                                                                           \
      for (int64_t i = 0; i < n; i++) w[i] = (T)((double)w[i] - lr * ((double)g[i] + decay * (double)w[i])); \
  }                                                                                                \
  static void adj_adam_##T(const adj_optimizer_config *c, double lr, int64_t step, int64_t n,      \
                           T *restrict w, const T *restrict g, T *restrict m, T *restrict v) {     \
    const double b1 = c->beta1, b2 = c->beta2, decay = c->weight_decay;                            \
    const double eps = c->epsilon;                                                                 \
    const double correction1 = 1 - pow(b1, (double)step), correction2 = 1 - pow(b2, (double)step); \
    for (int64_t i = 0; i < n; i++) {                                                              \
      double grad = (double)g[i] + decay * (double)w[i];                                           \
      double mi = b1 * (double)m[i] + (1 - b1) * grad, vi = b2 * (double)v[i] + (1 - b2) * grad * grad; \
      m[i] = (T)mi, v[i] = (T)vi;                                                                  \
      double update = (mi / correction1) / (sqrt(vi / correction2) + eps);                         \
      w[i] = (T)((double)w[i] - lr * update);                                                      \
    }                                                                                              \
  }

ADJ_OPTIMIZER_LOOPS(float)
ADJ_OPTIMIZER_LOOPS(double)

double adj_optimizer_learning_rate(const adj_optimizer *o) {
  const adj_optimizer_config *c = &o->config;
  if (c->lr_schedule == ADJ_LR_CONSTANT) return c->learning_rate;
  double k = (double)(o->steps < c->lr_total_steps ? o->steps : c->lr_total_steps);
  return c->learning_rate * 0.5 * (1 + cos(acos(-1.0) * k / (double)c->lr_total_steps));
}

/* Elements [first, first + n) of the update at learning rate lr. */
static void adj_optimizer_update(const adj_optimizer *o, double lr, int64_t first, int64_t n) {
  bool f32 = o->values.dtype == ADJ_FLOAT32;
  size_t es = adj_dtype_size(o->values.dtype), at = (size_t)first * es;
  char *w = (char *)o->values.data + at, *g = (char *)o->grads.data + at;
  char *s0 = o->n_state > 0 ? (char *)o->state[0].data + at : NULL;
  char *s1 = o->n_state > 1 ? (char *)o->state[1].data + at : NULL;
  if (o->config.kind == ADJ_OPTIMIZER_SGD) {
    if (f32) adj_sgd_float(&o->config, lr, n, (float *)w, (float *)g, (float *)s0);
    else adj_sgd_double(&o->config, lr, n, (double *)w, (double *)g, (double *)s0);
  } else {
    if (f32) adj_adam_float(&o->config, lr, o->steps, n, (float *)w, (float *)g, (float *)s0, (float *)s1);
    else adj_adam_double(&o->config, lr, o->steps, n, (double *)w, (double *)g, (double *)s0, (double *)s1);
  }
}

/* One step's update of elements, for a team (adj_team_run). */
typedef struct adj_optimizer_work {
  adj_optimizer *o;
  double lr;
} adj_optimizer_work;

static void adj_optimizer_share(void *arg, int64_t first, int64_t count, int member) {
  adj_optimizer_work *w = arg;
  adj_optimizer_update(w->o, w->lr, first, count);
}

/* Each element's update is independent, so splitting them over the kernels'
 * thread team (adjoin/threads.h) changes no result; the divisions and square
 * roots make even LeNet-5's 61,706 parameters worth two threads. */
int adj_optimizer_step(adj_optimizer *o) {
  ADJ_CHECK(o, ADJ_ERR_ARG, "adj_optimizer_step: optimizer is NULL");
  int64_t n = adj_tensor_volume(&o->values);
  double lr = adj_optimizer_learning_rate(o);
  o->steps++;
  adj_optimizer_work w = {o, lr};
  adj_team_run(adj_team_size(n, 16 * n), n, adj_optimizer_share, &w);
  return ADJ_SUCCESS;
}

const adj_optimizer_config *adj_optimizer_get_config(const adj_optimizer *o) { return &o->config; }
int64_t adj_optimizer_steps(const adj_optimizer *o) { return o->steps; }
int adj_optimizer_set_steps(adj_optimizer *o, int64_t steps) {
  ADJ_CHECK(o, ADJ_ERR_ARG, "adj_optimizer_set_steps: optimizer is NULL");
  ADJ_CHECK(steps >= 0, ADJ_ERR_ARG, "adj_optimizer_set_steps: step count %lld is negative", (long long)steps);
  o->steps = steps;
  return ADJ_SUCCESS;
}

int adj_optimizer_state_buffers(adj_optimizer *o, adj_tensor *buffers) {
  if (!o || !buffers) {
    adj_error_set(ADJ_ERR_ARG, "adj_optimizer_state_buffers: %s is NULL", o ? "buffers" : "optimizer");
    return -1;
  }
  for (int k = 0; k < o->n_state; k++) buffers[k] = o->state[k];
  return o->n_state;
}
