/* t311: the distributed convolution layer equals its sequential twin.  For
 * each global problem, the twin is the same layer on one worker of
 * MPI_COMM_SELF on every rank (its halo, broadcasts and sum-reduces would be
 * identities, so the layer runs the local kernel on x and dx directly, and t300
 * checks that kernel against direct loops); the distributed layer runs
 * the problem in the feature-space, channel, general and domain x batch forms, with partitions
 * drawn to fit the run's ranks (uneven blocks, empty blocks, inactive ranks,
 * scattered rank lists) and, for one problem, an input with explicit uneven
 * cuts in its spatial dimensions.  Outputs, jvps, input gradients and
 * parameter gradients must agree block by block within dl_tolerance (float64).
 *
 * Also: parameter gradients accumulate over two backward calls, an input
 * gradient requested on some ranks only is still right, and a layer created on
 * the previous layer's output layout chains to it. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "conv_cases.h"
#include "dist_check.h"

enum { RANDOM_PROBLEMS = 2 };

static adj_layer *create_on(adj_test *t, MPI_Comm comm, const adj_conv_case *c, const adj_decomposition *input) {
  adj_conv_case_ranks ranks;
  adj_conv_layer_config config;
  adj_conv_case_config(c, comm, ADJ_FLOAT64, &ranks, &config);
  if (input) {
    config.input = input;
    memset(config.input_parts, 0, sizeof config.input_parts);
    config.input_ranks = NULL;
  }
  adj_layer *layer = NULL;
  ADJ_TEST_OK(t, adj_conv_layer_create(&config, &layer));
  return layer;
}

static adj_layer *create(adj_test *t, const adj_conv_case *c, const adj_decomposition *input) {
  return create_on(t, t->comm, c, input);
}

/* The sequential twin of problem c: one worker on MPI_COMM_SELF, so every rank
 * holds its own (dist_check.h's convention) and creating it is not collective. */
static adj_layer *create_twin(adj_test *t, const adj_conv_case *c) {
  adj_conv_case one = *c;
  one.p_n = one.p_ci = one.p_co = 1;
  memset(one.parts, 0, sizeof one.parts);
  one.ranks = ADJ_CONV_RANKS_FIRST;
  return create_on(t, MPI_COMM_SELF, &one, NULL);
}

/* ---- gradient accumulation and a per-rank NULL dx ---------------------------------------- */

/* Largest |a_i - scale_b b_i| relative to max(1, max |scale_b b_i|). */
static double max_rel_diff(const adj_tensor *a, const adj_tensor *b, double scale_b) {
  double d = 0, largest = 1;
  for (int64_t i = 0; i < adj_tensor_volume(a); i++) {
    d = fmax(d, fabs(adj_tensor_get(a, i) - scale_b * adj_tensor_get(b, i)));
    largest = fmax(largest, fabs(scale_b * adj_tensor_get(b, i)));
  }
  return d / largest;
}

/* Two backward calls without zeroing add up (grad = 2 g on every owner) and
 * give the same dx.  Between them, a call with dx left out on odd ranks only
 * breaks the collective choice (layer.h): refused on every rank, the
 * gradients untouched, instead of a hang. */
static void check_accumulation(adj_test *t, const char *label, adj_layer *layer) {
  adj_tensor x, y, dx1, dx2, g1[2];
  adj_rng *rng;
  adj_rng_create(77u + (uint64_t)t->rank, &rng);
  adj_layer_create_input(layer, &x), adj_layer_create_input(layer, &dx1), adj_layer_create_input(layer, &dx2);
  adj_layer_create_output(layer, &y);
  adj_rng_fill_uniform(rng, &x, -1, 1);
  int np = adj_layer_parameter_count(layer);
  for (int i = 0; i < np; i++) adj_rng_fill_uniform(rng, &adj_layer_parameter(layer, i)->value, -1, 1);
  ADJ_TEST_OK(t, adj_layer_forward(layer, &x, &y));
  adj_rng_fill_uniform(rng, &y, -1, 1); /* y now serves as dy */
  adj_layer_zero_grad(layer);
  ADJ_TEST_OK(t, adj_layer_backward(layer, &y, &dx1));
  for (int i = 0; i < np; i++) {
    const adj_tensor *g = &adj_layer_parameter(layer, i)->grad;
    adj_tensor_create(&g1[i], g->dtype, g->rank, g->shape);
    adj_tensor_copy(&g1[i], g);
  }
  if (t->size > 1) {
    int status = adj_layer_backward(layer, &y, t->rank % 2 == 0 ? &dx2 : NULL);
    ADJ_TEST_CHECK(t, status == ADJ_ERR_ARG && strstr(adj_last_error(), "collective choice"),
                   "%s: dx left out on odd ranks only gave %s: %s", label, adj_status_name(status), adj_last_error());
  }
  ADJ_TEST_OK(t, adj_layer_backward(layer, &y, &dx2));
  double worst = max_rel_diff(&dx2, &dx1, 1.0);
  for (int i = 0; i < np; i++) {
    worst = fmax(worst, max_rel_diff(&adj_layer_parameter(layer, i)->grad, &g1[i], 2.0));
    adj_tensor_destroy(&g1[i]);
  }
  /* The second call may add its terms into the first's sums rather than add
   * two finished sums: a reordering of the weight gradient's sum over every
   * output position of every sample, of random data. */
  const adj_decomposition *out = adj_layer_output_layout(layer);
  const int64_t *shape = adj_decomposition_global_shape(out);
  double positions = 1;
  for (int d = 0; d < adj_decomposition_rank(out); d++) positions *= d == 1 ? 1 : (double)shape[d];
  double tolerance = adj_test_random_sum_tolerance(ADJ_FLOAT64, positions);
  adj_test_report(t, "  %-52s two backward calls: 2 g and dx off by %.1e (tolerance %.1e)", label, worst,
                  tolerance);
  ADJ_TEST_CHECK(t, worst < tolerance, "%s: accumulated gradients or repeated dx off by %.3e (tolerance %.1e)", label,
                 worst, tolerance);
  adj_tensor_destroy(&x), adj_tensor_destroy(&y), adj_tensor_destroy(&dx1), adj_tensor_destroy(&dx2);
  adj_rng_destroy(&rng);
}

/* ---- one problem, several partitions ----------------------------------------------------- */

static void compare(adj_test *t, const char *tag, const adj_conv_case *c, adj_layer *seq, adj_layer *dist) {
  char label[240], text[200];
  adj_conv_case_format(text, sizeof text, c);
  snprintf(label, sizeof label, "%s %s", tag, text);
  dl_compare(t, label, dist, seq, 311u);
  check_accumulation(t, label, dist);
}

/* The input of problem c cut unevenly (c_p = n p^2 / P^2, empty blocks
 * first) over its spatial partition, on the last ranks. */
static adj_decomposition *uneven_input(adj_test *t, const adj_conv_case *c) {
  int d = c->window.spatial_dims, R = 2 + d, ranks[8];
  int parts[ADJ_MAX_RANK] = {c->p_n ? c->p_n : 1, c->p_ci ? c->p_ci : 1};
  int64_t shape[ADJ_MAX_RANK] = {c->n, c->c_in}, storage[ADJ_MAX_RANK][9];
  const int64_t *cuts[ADJ_MAX_RANK] = {NULL};
  int workers = parts[0] * parts[1];
  for (int i = 0; i < d; i++) {
    shape[2 + i] = c->in[i];
    parts[2 + i] = c->parts[i] ? c->parts[i] : 1;
    workers *= parts[2 + i];
    for (int p = 0; p <= parts[2 + i]; p++) storage[i][p] = c->in[i] * p * p / ((int64_t)parts[2 + i] * parts[2 + i]);
    cuts[2 + i] = storage[i];
  }
  for (int k = 0; k < workers; k++) ranks[k] = t->size - 1 - k;
  return dl_layout(t, R, shape, parts, ranks, cuts);
}

static void check_problem(adj_test *t, adj_rng *rng, const char *tag, adj_conv_case problem, bool uneven) {
  adj_layer *seq = create_twin(t, &problem);
  for (int form = 0; seq && form < ADJ_CONV_FORMS + uneven; form++) {
    adj_conv_case c = problem;
    adj_conv_case_random_partition(rng, t->size, (adj_conv_form)(form % ADJ_CONV_FORMS), &c);
    adj_decomposition *input = form == ADJ_CONV_FORMS ? uneven_input(t, &c) : NULL;
    adj_layer *dist = form < ADJ_CONV_FORMS || input ? create(t, &c, input) : NULL;
    if (dist) compare(t, form == ADJ_CONV_FORMS ? "uneven cuts" : tag, &c, seq, dist);
    adj_layer_destroy(&dist);
    adj_decomposition_destroy(&input);
  }
  adj_layer_destroy(&seq);
}

/* The table's domain x batch cases on their own grids (2 x 2 and 4 x 2 among
 * them: space over P_r, the batch over P_c) where the run has the ranks. */
static void check_batch_cases(adj_test *t) {
  for (int i = 0; i < adj_conv_case_count; i++) {
    const adj_conv_case *c = &adj_conv_cases[i];
    if (c->p_n <= 1 || adj_conv_case_workers(c) > t->size) continue;
    adj_layer *seq = create_twin(t, c), *dist = seq ? create(t, c, NULL) : NULL;
    if (dist) compare(t, "domain x batch", c, seq, dist);
    adj_layer_destroy(&dist);
    adj_layer_destroy(&seq);
  }
}

/* ---- chaining ---------------------------------------------------------------------------- */

/* A second layer created on the first one's output layout takes its output
 * block as input on every rank, and equals its own sequential twin. */
static void check_chain(adj_test *t, adj_rng *rng) {
  adj_conv_case first = adj_conv_cases[t->size >= 4 ? 0 : 12], second = first;
  adj_conv_case_random_partition(rng, t->size, ADJ_CONV_GENERAL, &first);
  /* The second layer's P_x is the first's P_y (P_n, P_co, spatial...). */
  second.c_in = first.c_out;
  second.c_out = 3;
  second.p_ci = first.p_co;
  second.p_co = 1;
  memcpy(second.parts, first.parts, sizeof second.parts);
  adj_layer *a = create(t, &first, NULL);
  adj_layer *b = a ? create(t, &second, adj_layer_output_layout(a)) : NULL;
  if (b) {
    adj_tensor x, y, z;
    adj_layer_create_input(a, &x), adj_layer_create_output(a, &y), adj_layer_create_output(b, &z);
    ADJ_TEST_OK(t, adj_layer_forward(a, &x, &y));
    ADJ_TEST_OK(t, adj_layer_forward(b, &y, &z));
    adj_tensor_destroy(&x), adj_tensor_destroy(&y), adj_tensor_destroy(&z);
    adj_layer *seq = create_twin(t, &second);
    if (seq) compare(t, "chained", &second, seq, b);
    adj_layer_destroy(&seq);
  }
  adj_layer_destroy(&a);
  adj_layer_destroy(&b);
}

int main(int argc, char **argv) {
  adj_test t;
  adj_test_begin(&t, &argc, &argv, "t311-conv-layer-vs-sequential");
  adj_test_report(&t, "conv layer distributed vs sequential on %d ranks", t.size);
  adj_rng *rng;
  adj_rng_create(3110u + (uint64_t)t.size, &rng);
  /* LeNet-5's C1 and one named problem that changes with the rank count. */
  check_problem(&t, rng, "lenet-c1", adj_conv_cases[0], true);
  check_problem(&t, rng, "named", adj_conv_cases[1 + t.size % (adj_conv_case_count - 1)], false);
  for (int i = 0; i < RANDOM_PROBLEMS; i++) {
    adj_conv_case problem;
    adj_conv_case_random_problem(rng, &problem);
    check_problem(&t, rng, "random", problem, false);
  }
  check_batch_cases(&t);
  if (t.size > 1) check_chain(&t, rng);
  adj_rng_destroy(&rng);
  return adj_test_finish(&t);
}
