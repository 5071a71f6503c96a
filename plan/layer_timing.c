/* Timing one layer: forward, and forward + backward (see adjoin/layer_timing.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "adjoin/agree.h"
#include "adjoin/layer_timing.h"
#include "adjoin/wait.h"
#include "error_impl.h"

enum { ADJ_TIMING_ROUNDS = 5, ADJ_TIMING_MAX_CALLS = 100000, ADJ_TIMING_MAX_ROUNDS = 1000 };

static double adj_timing_now(adj_timing_clock clock) {
  struct timespec t;
  clock_gettime(clock == ADJ_TIMING_CPU ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* Fills t with values in [-1, 1) from a splitmix64 stream of `seed`. */
static void adj_timing_fill(adj_tensor *t, uint64_t seed) {
  uint64_t state = seed;
  for (int64_t i = 0; i < adj_tensor_volume(t); i++) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    adj_tensor_set(t, i, (double)(z >> 11) * 0x1.0p-52 - 1.0);
  }
}

/* The tensors one timing uses: x (the caller's or its own), y, dy, dx. */
typedef struct adj_timing_tensors {
  adj_tensor own_x, y, dy, dx;
  const adj_tensor *x;
} adj_timing_tensors;

static void adj_timing_tensors_free(adj_timing_tensors *t) {
  adj_tensor_destroy(&t->own_x), adj_tensor_destroy(&t->y);
  adj_tensor_destroy(&t->dy), adj_tensor_destroy(&t->dx);
}

/* This rank's tensors (not collective; the caller agrees). */
static int adj_timing_tensors_make(adj_layer *layer, const adj_layer_timing_config *c, adj_timing_tensors *t) {
  *t = (adj_timing_tensors){0};
  int status = ADJ_SUCCESS;
  if (c->input) {
    status = adj_tensor_check(c->input, adj_layer_dtype(layer), adj_layer_input_rank(layer),
                              adj_layer_input_shape(layer), "layer timing", "input", "layer");
    t->x = c->input;
  } else {
    status = adj_layer_create_input(layer, &t->own_x);
    if (!status) adj_timing_fill(&t->own_x, c->seed);
    t->x = &t->own_x;
  }
  if (!status) status = adj_layer_create_output(layer, &t->y);
  if (!status) status = adj_layer_create_output(layer, &t->dy);
  if (!status) adj_timing_fill(&t->dy, c->seed + 1);
  if (!status && !c->no_input_gradient) status = adj_layer_create_input(layer, &t->dx);
  return status;
}

/* `calls` forwards (each followed by a backward when `backward`); the
 * layer's first failure. */
static int adj_timing_run(adj_layer *layer, adj_timing_tensors *t, bool backward, bool with_dx, int calls) {
  for (int k = 0; k < calls; k++) {
    ADJ_CALL(adj_layer_forward(layer, t->x, &t->y));
    if (backward) ADJ_CALL(adj_layer_backward(layer, &t->dy, with_dx ? &t->dx : NULL));
  }
  return ADJ_SUCCESS;
}

/* The largest of every rank's value, completed under the layer's policy. */
static double adj_timing_max(MPI_Comm comm, adj_wait_policy policy, double value) {
  double largest = value;
  MPI_Request request;
  if (MPI_Iallreduce(&value, &largest, 1, MPI_DOUBLE, MPI_MAX, comm, &request) != MPI_SUCCESS) return value;
  adj_wait_all(1, &request, policy);
  return largest;
}

static int adj_timing_compare(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

/* Times `rounds` rounds of `calls` calls; *median and *best seconds per call. */
static int adj_timing_rounds(adj_layer *layer, adj_timing_tensors *t, const adj_layer_timing_config *c,
                             adj_wait_policy policy, bool backward, int calls, int rounds, double *median,
                             double *best) {
  MPI_Comm comm = adj_layer_comm(layer);
  double seconds[ADJ_TIMING_MAX_ROUNDS];
  for (int r = 0; r < rounds; r++) {
    adj_layer_zero_grad(layer);
    adj_timing_max(comm, policy, 0); /* start together */
    double start = adj_timing_now(c->clock);
    int status = adj_timing_run(layer, t, backward, !c->no_input_gradient, calls);
    double elapsed = adj_timing_now(c->clock) - start;
    ADJ_CALL(adj_status_agree(comm, status, policy));
    seconds[r] = adj_timing_max(comm, policy, elapsed) / calls;
  }
  qsort(seconds, (size_t)rounds, sizeof *seconds, adj_timing_compare);
  *best = seconds[0];
  *median = rounds % 2 ? seconds[rounds / 2] : 0.5 * (seconds[rounds / 2 - 1] + seconds[rounds / 2]);
  return ADJ_SUCCESS;
}

/* The configuration with its defaults filled in; fails on a bad value. */
static int adj_timing_config_make(const adj_layer_timing_config *given, adj_layer_timing_config *c) {
  *c = given ? *given : (adj_layer_timing_config){0};
  ADJ_CHECK(c->round_seconds >= 0 && isfinite(c->round_seconds), ADJ_ERR_ARG,
            "layer timing: round_seconds %g must be >= 0 (0: the default)", c->round_seconds);
  ADJ_CHECK(c->rounds >= 0 && c->rounds <= ADJ_TIMING_MAX_ROUNDS, ADJ_ERR_ARG,
            "layer timing: rounds %d must lie in 0..%d (0: the default)", c->rounds, ADJ_TIMING_MAX_ROUNDS);
  ADJ_CHECK(c->max_calls >= 0, ADJ_ERR_ARG, "layer timing: max_calls %d must be >= 0 (0: the default)",
            c->max_calls);
  ADJ_CHECK(c->clock == ADJ_TIMING_WALL || c->clock == ADJ_TIMING_CPU, ADJ_ERR_ARG,
            "layer timing: clock %d is neither ADJ_TIMING_WALL nor ADJ_TIMING_CPU", (int)c->clock);
  if (c->round_seconds == 0) c->round_seconds = 0.05;
  if (c->rounds == 0) c->rounds = ADJ_TIMING_ROUNDS;
  if (c->max_calls == 0) c->max_calls = ADJ_TIMING_MAX_CALLS;
  if (c->seed == 0) c->seed = 1;
  return ADJ_SUCCESS;
}

int adj_layer_time(adj_layer *layer, const adj_layer_timing_config *config, adj_layer_timing *timing) {
  ADJ_CHECK(layer && timing, ADJ_ERR_ARG, "layer timing: layer or timing is NULL");
  adj_layer_timing_config c;
  ADJ_CALL(adj_timing_config_make(config, &c));
  MPI_Comm comm = adj_layer_comm(layer);
  adj_wait_policy policy;
  ADJ_CALL(adj_wait_policy_resolve(comm, ADJ_WAIT_AUTO, &policy));
  adj_timing_tensors t;
  int status = adj_status_agree(comm, adj_timing_tensors_make(layer, &c, &t), policy);
  double start = adj_timing_now(c.clock);
  if (!status) status = adj_status_agree(comm, adj_timing_run(layer, &t, true, !c.no_input_gradient, 1), policy);
  double once = adj_timing_max(comm, policy, adj_timing_now(c.clock) - start);
  *timing = (adj_layer_timing){.rounds = c.rounds};
  double calls = once > 0 ? ceil(c.round_seconds / once) : c.max_calls;
  timing->calls = calls < 1 ? 1 : calls > c.max_calls ? c.max_calls : (int)calls;
  if (!status)
    status = adj_timing_rounds(layer, &t, &c, policy, false, timing->calls, c.rounds, &timing->forward,
                               &timing->forward_best);
  if (!status)
    status = adj_timing_rounds(layer, &t, &c, policy, true, timing->calls, c.rounds, &timing->forward_backward,
                               &timing->forward_backward_best);
  adj_timing_tensors_free(&t);
  return status;
}
